//! `storbench tpcb`: not built yet (see the open issues).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;

/// Options of `storbench tpcb`.
#[derive(Debug, Args)]
pub struct TpcbArgs {
    /// Arguments (none yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Runs `storbench tpcb`.
pub fn run(_g: &Global, _a: TpcbArgs) -> Result<ExitCode> {
    Err(crate::error::usage("'storbench tpcb' is not implemented yet"))
}
