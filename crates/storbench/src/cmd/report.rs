//! `storbench report`: not built yet (see the open issues).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;

/// Options of `storbench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Arguments (none yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Runs `storbench report`.
pub fn run(_g: &Global, _a: ReportArgs) -> Result<ExitCode> {
    Err(crate::error::usage("'storbench report' is not implemented yet"))
}
