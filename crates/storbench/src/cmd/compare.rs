//! `storbench compare`: not built yet (see the open issues).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;

/// Options of `storbench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Arguments (none yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Runs `storbench compare`.
pub fn run(_g: &Global, _a: CompareArgs) -> Result<ExitCode> {
    Err(crate::error::usage("'storbench compare' is not implemented yet"))
}
