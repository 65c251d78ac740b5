//! `storbench tpcc`: not built yet (see the open issues).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;

/// Options of `storbench tpcc`.
#[derive(Debug, Args)]
pub struct TpccArgs {
    /// Arguments (none yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Runs `storbench tpcc`.
pub fn run(_g: &Global, _a: TpccArgs) -> Result<ExitCode> {
    Err(crate::error::usage("'storbench tpcc' is not implemented yet"))
}
