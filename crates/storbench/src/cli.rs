//! The command line: global options and the command nouns. Each command's own
//! options live beside its code in `cmd/`; their doc comments are the help.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cmd;

/// What will this storage do for my database?
///
/// storbench runs database-shaped I/O profiles and real database workloads
/// (TPC-C-like, TPC-B-like) on real engines across storage configurations,
/// and records database and storage numbers from the same run.
#[derive(Debug, Parser)]
#[command(name = "storbench", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Clone, Args)]
pub struct Global {
    /// The results store (SQLite file).
    #[arg(
        long,
        global = true,
        env = "STORBENCH_RESULTS",
        default_value = "storbench.db",
        value_name = "FILE"
    )]
    pub results: PathBuf,
    /// Print the run record as JSON on stdout when the run ends.
    #[arg(long, global = true)]
    pub json: bool,
    /// No live progress line.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Tag the run with this plan name (set by `storbench run`).
    #[arg(id = "plan_tag", long = "in-plan", global = true, env = "STORBENCH_PLAN", hide = true)]
    pub plan: Option<String>,
    /// Tag the run with this plan cell (set by `storbench run`).
    #[arg(id = "cell_tag", long = "in-cell", global = true, env = "STORBENCH_CELL", hide = true)]
    pub cell: Option<String>,
    /// The cell's axis values as JSON (set by `storbench run`).
    #[arg(id = "axes_tag", long = "cell-axes", global = true, env = "STORBENCH_AXES", hide = true)]
    pub axes: Option<String>,
    /// Label for the run (defaults to one derived from its settings).
    #[arg(long, global = true)]
    pub label: Option<String>,
}

/// The commands: nouns, then verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run storage I/O profiles against a file or block device.
    Io(cmd::io::IoArgs),
    /// TPC-C-like OLTP workload: build | run | check | drop.
    Tpcc(cmd::tpcc::TpccArgs),
    /// TPC-B-like workload (pgbench's built-in script): init | run.
    Tpcb(cmd::tpcb::TpcbArgs),
    /// Storage targets: loop devices, filesystems, emulated media.
    Media(cmd::media::MediaArgs),
    /// Managed PostgreSQL instances on chosen targets.
    Pg(cmd::pg::PgArgs),
    /// Run a plan: a matrix of runs from one TOML file.
    Run(cmd::run::RunArgs),
    /// List, show and export recorded runs.
    Results(cmd::results::ResultsArgs),
    /// Render runs or plans as tables and charts.
    Report(cmd::report::ReportArgs),
    /// Compare two runs side by side.
    Compare(cmd::compare::CompareArgs),
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
