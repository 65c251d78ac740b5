//! The command line as clap reads it: the parser, the command nouns (each
//! command's own options live beside its code in `cmd/`; their doc
//! comments are the help) and the dispatch of one command to its verb.
//! The options every command takes are `cli`'s, below both.

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};

use crate::cli::{Global, RecordFlags, RunFlags};
use crate::cmd;

/// What will this storage do for my database?
///
/// storbench runs database-shaped I/O profiles and real database workloads
/// (TPC-C-like, TPC-B-like) on real engines across storage configurations,
/// and records database and storage numbers from the same run.
#[derive(Debug, Parser)]
#[command(
    name = "storbench",
    version = VERSION,
    about,
    long_about = None,
    propagate_version = true,
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// The version with the commit and build date (build.rs), as `--version`
/// shows it and every run records it.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("STORBENCH_COMMIT"),
    ", built ",
    env!("STORBENCH_BUILD_DATE"),
    ")"
);

/// The exit codes, as `--help` shows them (the table in `error.rs`).
const EXIT_CODES: &str = "\
Results go to stdout; progress, live lines and errors to stderr.

Exit codes:
  0    done
  1    the run failed (what was measured is kept; the run is marked failed)
  2    bad input: one line naming the value; nothing was created or written
  3    a database or service could not be reached (refused, DNS, credentials, managed instance down)
  4    a target failed (I/O error on the device or file; a medium or managed instance not made)
  130  interrupted (the step in progress is kept; the run is marked interrupted)";

/// The commands: nouns, then verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run storage I/O profiles against a file or block device.
    Io(Box<cmd::io::IoArgs>),
    /// TPC-C-like OLTP workload: build | run | check | drop.
    Tpcc(cmd::tpcc::TpccArgs),
    /// TPC-B-like workload (pgbench's built-in script): init | run.
    Tpcb(cmd::tpcb::TpcbArgs),
    /// TPC-H-like decision support: build | run | check | drop.
    Tpch(cmd::tpch::TpchArgs),
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
    /// Cache what-if: miss-ratio curves of a block trace (mrc).
    Cache(cmd::cache::CacheArgs),
    /// Power-cut a modelled medium under committing clients and count acknowledged commits lost.
    Durability(cmd::durability::DurabilityArgs),
    /// Merge shard runs (--shard i/N) into one run, exactly.
    Merge(cmd::merge::MergeArgs),
    /// Kubernetes: render the manifests that run a plan as N shards.
    K8s(cmd::k8s::K8sArgs),
    /// Back up a database with its engine's own tool, timed and observed.
    Backup(cmd::backup::BackupArgs),
    /// Restore a backup into a fresh database (a physical backup: a new data directory and a temporary server), timed to open and to ready, and checked.
    Restore(cmd::backup::RestoreArgs),
    /// Print shell completions for bash, zsh, fish, elvish or powershell.
    Completions(cmd::shell::CompletionsArgs),
    /// Print the man page (roff), e.g. `storbench man > storbench.1`.
    Man,
}

impl Command {
    /// Takes the run and record options out of the command given: `main`
    /// puts them in [`Global`], where the code that records a run reads
    /// them. A command without them gives the defaults.
    pub fn take_flags(&mut self) -> (RunFlags, RecordFlags) {
        use cmd::media::MediaVerb;
        use cmd::{tpcb::TpcbVerb, tpcc::TpccVerb, tpch::TpchVerb};
        let (run, record) = match self {
            Command::Io(a) => (Some(&mut a.run), Some(&mut a.record)),
            Command::Tpcc(a) => match &mut a.verb {
                TpccVerb::Build(v) => (Some(&mut v.run), Some(&mut v.record)),
                TpccVerb::Run(v) => (Some(&mut v.run), Some(&mut v.record)),
                TpccVerb::Check(_) | TpccVerb::Drop(_) => (None, None),
            },
            Command::Tpcb(a) => match &mut a.verb {
                TpcbVerb::Init(v) => (Some(&mut v.run), Some(&mut v.record)),
                TpcbVerb::Run(v) => (Some(&mut v.run), Some(&mut v.record)),
            },
            Command::Tpch(a) => match &mut a.verb {
                TpchVerb::Build(v) => (Some(&mut v.run), Some(&mut v.record)),
                TpchVerb::Run(v) => (Some(&mut v.run), Some(&mut v.record)),
                TpchVerb::Check(_) | TpchVerb::Drop(_) => (None, None),
            },
            Command::Media(a) => match &mut a.verb {
                MediaVerb::Calibrate(v) => (Some(&mut v.run), Some(&mut v.record)),
                _ => (None, None),
            },
            Command::Run(a) => (Some(&mut a.run), None),
            Command::Durability(a) => (None, Some(&mut a.record)),
            Command::Merge(a) => (None, Some(&mut a.record)),
            Command::Backup(a) => (Some(&mut a.run), Some(&mut a.record)),
            Command::Restore(a) => (Some(&mut a.run), Some(&mut a.record)),
            _ => (None, None),
        };
        (run.map(std::mem::take).unwrap_or_default(), record.map(std::mem::take).unwrap_or_default())
    }
}

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
        Command::Io(a) => cmd::io::run(g, *a),
        Command::Tpcc(a) => cmd::tpcc::run(g, a),
        Command::Tpcb(a) => cmd::tpcb::run(g, a),
        Command::Tpch(a) => cmd::tpch::run(g, a),
        Command::Media(a) => cmd::media::run(g, a),
        Command::Pg(a) => cmd::pg::run(g, a),
        Command::Run(a) => {
            cmd::run::run(g, a, &|argv| Cli::try_parse_from(argv).map(|_| ()).map_err(|e| e.to_string()))
        }
        Command::Results(a) => cmd::results::run(g, a),
        Command::Report(a) => cmd::report::run(g, a),
        Command::Compare(a) => cmd::compare::run(g, a),
        Command::Cache(a) => cmd::cache::run(g, a),
        Command::Durability(a) if a.crash_points.is_some() || a.crash_point.is_some() => {
            cmd::crashpoints::run(g, a)
        }
        Command::Durability(a) => cmd::durability::run(g, a),
        Command::Merge(a) => cmd::merge::run(g, a),
        Command::K8s(a) => cmd::k8s::run(a),
        Command::Backup(a) => cmd::backup::backup(g, a),
        Command::Restore(a) => cmd::backup::restore(g, a),
        Command::Completions(a) => cmd::shell::completions(a, Cli::command()),
        Command::Man => cmd::shell::man(Cli::command()),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
