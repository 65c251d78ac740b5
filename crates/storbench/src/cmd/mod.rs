//! One module per command noun. Each exposes its clap `Args` and a `run`
//! that validates everything first (no side effects), then acts.

pub mod backup;
pub mod cache;
pub mod calibrate;
pub mod compare;
pub mod crashpoints;
pub mod durability;
pub mod failover;
pub mod io;
pub mod k8s;
pub mod media;
pub mod merge;
pub mod pg;
pub mod report;
pub mod results;
pub mod run;
pub mod shell;
pub mod tpcb;
pub mod tpcc;
pub mod tpch;

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{Command, Global};

/// Runs one command.
pub fn dispatch(g: &Global, c: Command) -> Result<ExitCode> {
    // Commands with formats of their own refuse --json rather than print
    // text to a script that asked for JSON.
    let own_formats = match &c {
        Command::Report(_) => Some("report writes --text, --md, --csv or --html"),
        Command::K8s(_) => Some("k8s render writes YAML"),
        Command::Run(_) => Some("run records runs; `storbench --json results list --plan NAME` shows them"),
        Command::Completions(_) | Command::Man => Some("completions and man print shell script and roff"),
        _ => None,
    };
    if let (true, Some(why)) = (g.json, own_formats) {
        return Err(crate::error::usage(format!("--json: {why}")));
    }
    match c {
        Command::Io(a) => io::run(g, *a),
        Command::Tpcc(a) => tpcc::run(g, a),
        Command::Tpcb(a) => tpcb::run(g, a),
        Command::Tpch(a) => tpch::run(g, a),
        Command::Media(a) => media::run(g, a),
        Command::Pg(a) => pg::run(g, a),
        Command::Run(a) => run::run(g, a),
        Command::Results(a) => results::run(g, a),
        Command::Report(a) => report::run(g, a),
        Command::Compare(a) => compare::run(g, a),
        Command::Cache(a) => cache::run(g, a),
        Command::Durability(a) => durability::run(g, a),
        Command::Merge(a) => merge::run(g, a),
        Command::K8s(a) => k8s::run(a),
        Command::Backup(a) => backup::backup(g, a),
        Command::Restore(a) => backup::restore(g, a),
        Command::Completions(a) => shell::completions(a),
        Command::Man => shell::man(),
    }
}
