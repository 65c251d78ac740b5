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

/// Options every command takes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
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
    /// Print JSON on stdout: the run record when a run ends, or what a
    /// listing shows.
    #[arg(long, global = true)]
    pub json: bool,
    /// No live progress line.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// The command's run options (`main` takes them from the command:
    /// default for one that runs nothing).
    #[arg(skip)]
    pub run: RunFlags,
    /// The command's record options, as `run`.
    #[arg(skip)]
    pub record: RecordFlags,
    /// `--shard` and `--start-at`/`--start-in` as read once by `main`, so
    /// every part of the command sees the same shard and the same instant.
    #[arg(skip)]
    pub sharding: Option<crate::shard::Sharding>,
}

impl Global {
    /// The shard and start instant (`main` reads them before dispatch).
    pub fn sharding(&self) -> crate::shard::Sharding {
        self.sharding.expect("main reads the shard options before dispatch")
    }
}

/// Options of the commands that run a workload (or a plan of them): not
/// of those that only read or manage, so not in their help.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Run options")]
pub struct RunFlags {
    /// Run in a memory cgroup of this size (page cache included), so a
    /// database larger than it is read from the storage: e.g. 256M. Drops
    /// the host's clean page cache first. Root; cgroup-v1 memory.
    #[arg(long, env = "STORBENCH_MEMORY_LIMIT", value_name = "SIZE")]
    pub memory_limit: Option<String>,
    /// Run shard i of N (from 0): this process drives its part of the load
    /// (I/O threads and byte ranges, TPC-C users and home warehouses, TPC-B
    /// clients) and records the shard in its run, for `storbench merge`.
    #[arg(long, env = "STORBENCH_SHARD", value_name = "i/N")]
    pub shard: Option<String>,
    #[command(flatten)]
    pub start: StartFlags,
    /// Serve live metrics (Prometheus text format) at HOST:PORT while a run
    /// records, e.g. 127.0.0.1:9184; labelled by run, step and shard.
    #[arg(long, env = "STORBENCH_METRICS_ADDR", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

/// When the first measured step begins: shards that came up at different
/// times measure the same seconds.
#[derive(Debug, Clone, Default, Args)]
pub struct StartFlags {
    /// Begin the first measured step at this wall-clock instant (RFC 3339).
    #[arg(long, env = "STORBENCH_START_AT", value_name = "RFC3339", conflicts_with = "start_in")]
    pub start_at: Option<String>,
    /// Begin the first measured step this long from now (e.g. 30s).
    #[arg(long, value_name = "DURATION")]
    pub start_in: Option<String>,
}

/// What a command that records a run tags it with.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Run options")]
pub struct RecordFlags {
    /// Label for the run (defaults to one derived from its settings).
    #[arg(long)]
    pub label: Option<String>,
    /// Tag the run with this plan name (set by `storbench run`).
    #[arg(id = "plan_tag", long = "in-plan", env = "STORBENCH_PLAN", hide = true)]
    pub plan: Option<String>,
    /// Tag the run with this plan cell (set by `storbench run`).
    #[arg(id = "cell_tag", long = "in-cell", env = "STORBENCH_CELL", hide = true)]
    pub cell: Option<String>,
    /// The cell's axis values as JSON (set by `storbench run`).
    #[arg(id = "axes_tag", long = "cell-axes", env = "STORBENCH_AXES", hide = true)]
    pub axes: Option<String>,
}

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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
