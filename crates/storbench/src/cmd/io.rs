//! `storbench io`: not built yet (see the open issues).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;

/// Options of `storbench io`.
#[derive(Debug, Args)]
pub struct IoArgs {
    /// Arguments (none yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Runs `storbench io`.
pub fn run(_g: &Global, _a: IoArgs) -> Result<ExitCode> {
    Err(crate::error::usage("'storbench io' is not implemented yet"))
}
