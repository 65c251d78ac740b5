//! `storbench media`: not built yet (see the open issues).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;

/// Options of `storbench media`.
#[derive(Debug, Args)]
pub struct MediaArgs {
    /// Arguments (none yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Runs `storbench media`.
pub fn run(_g: &Global, _a: MediaArgs) -> Result<ExitCode> {
    Err(crate::error::usage("'storbench media' is not implemented yet"))
}
