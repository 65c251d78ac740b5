//! The options every command takes (`Global`) and those of the commands
//! that run or record (`RunFlags`, `StartFlags`, `RecordFlags`): below the
//! commands, which read them, and the parser (`command`), which holds them.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use storbench_metrics::units::{parse_duration, parse_size, Given};

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
    pub sharding: Option<storbench_run::shard::Sharding>,
}

impl Global {
    /// The shard and start instant (`main` reads them before dispatch).
    pub fn sharding(&self) -> storbench_run::shard::Sharding {
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
    #[arg(long, env = "STORBENCH_MEMORY_LIMIT", value_name = "SIZE", value_parser = Given::parser(parse_size))]
    pub memory_limit: Option<Given<u64>>,
    /// Run shard i of N (from 0): this process drives its part of the load
    /// (I/O threads and byte ranges, TPC-C users and home warehouses, TPC-B
    /// clients) and records the shard in its run, for `storbench merge`.
    #[arg(long, env = "STORBENCH_SHARD", value_name = "i/N", value_parser = parse_shard)]
    pub shard: Option<storbench_cluster::Shard>,
    #[command(flatten)]
    pub start: StartFlags,
    /// Serve live metrics (Prometheus text format) at HOST:PORT while a run
    /// records, e.g. 127.0.0.1:9184; labelled by run, step and shard.
    #[arg(long, env = "STORBENCH_METRICS_ADDR", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

/// `--shard`'s parser: `i/N` with `0 <= i < N`; the error names the value
/// and what is allowed.
fn parse_shard(s: &str) -> Result<storbench_cluster::Shard, String> {
    storbench_cluster::Shard::parse(s).map_err(|e| e.to_string())
}

/// `--start-at`'s parser: an RFC 3339 instant; the error names the value.
fn parse_start_at(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    storbench_cluster::parse_instant(s).map_err(|e| e.to_string())
}

/// When the first measured step begins: shards that came up at different
/// times measure the same seconds.
#[derive(Debug, Clone, Default, Args)]
pub struct StartFlags {
    /// Begin the first measured step at this wall-clock instant (RFC 3339).
    #[arg(long, env = "STORBENCH_START_AT", value_name = "RFC3339", conflicts_with = "start_in", value_parser = parse_start_at)]
    pub start_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Begin the first measured step this long from now (e.g. 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub start_in: Option<Duration>,
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
    /// The cell's digest (set by `storbench run`).
    #[arg(id = "digest_tag", long = "cell-digest", env = "STORBENCH_CELL_DIGEST", hide = true)]
    pub cell_digest: Option<String>,
}

#[cfg(test)]
pub use crate::command::{Cli, Command};
