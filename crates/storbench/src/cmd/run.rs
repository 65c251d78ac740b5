//! `storbench run`: not built yet (see the open issues).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;

/// Options of `storbench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Arguments (none yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Runs `storbench run`.
pub fn run(_g: &Global, _a: RunArgs) -> Result<ExitCode> {
    Err(crate::error::usage("'storbench run' is not implemented yet"))
}
