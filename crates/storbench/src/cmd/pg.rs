//! `storbench pg`: not built yet (see the open issues).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;

/// Options of `storbench pg`.
#[derive(Debug, Args)]
pub struct PgArgs {
    /// Arguments (none yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Runs `storbench pg`.
pub fn run(_g: &Global, _a: PgArgs) -> Result<ExitCode> {
    Err(crate::error::usage("'storbench pg' is not implemented yet"))
}
