//! One module per command noun. Each exposes its clap `Args` and a `run`
//! that validates everything first (no side effects), then acts.

pub mod compare;
pub mod io;
pub mod media;
pub mod pg;
pub mod report;
pub mod results;
pub mod run;
pub mod tpcb;
pub mod tpcc;

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{Command, Global};

/// Runs one command.
pub fn dispatch(g: &Global, c: Command) -> Result<ExitCode> {
    match c {
        Command::Io(a) => io::run(g, a),
        Command::Tpcc(a) => tpcc::run(g, a),
        Command::Tpcb(a) => tpcb::run(g, a),
        Command::Media(a) => media::run(g, a),
        Command::Pg(a) => pg::run(g, a),
        Command::Run(a) => run::run(g, a),
        Command::Results(a) => results::run(g, a),
        Command::Report(a) => report::run(g, a),
        Command::Compare(a) => compare::run(g, a),
    }
}
