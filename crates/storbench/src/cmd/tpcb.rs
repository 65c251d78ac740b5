//! `storbench tpcb init | run`: pgbench's built-in TPC-B-like script on any
//! engine, on pgbench's own tables, with pgbench's options and its
//! definition of TPS (transactions over the run's time, connections
//! excluded).
//!
//! pgbench's `-j` (threads driving the clients) has no counterpart: every
//! client here has its own thread, as pgbench with `-j` equal to `-c`, so
//! `tpcb run` does not take it rather than accept and ignore it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};
use storbench_metrics::units::{parse_duration, parse_load_levels, parse_positive_duration, Given};
use storbench_run::dataset;
use storbench_run::tpcb::{parse_latency_limit, parse_progress, TpcbRun};
use storbench_workloads::tpcb::{self, InitOptions};

use crate::cli::Global;
use crate::dbarg::Db;
use crate::error::usage;
use crate::oltp;

/// Options of `storbench tpcb`.
#[derive(Debug, Args)]
pub struct TpcbArgs {
    #[command(subcommand)]
    pub verb: TpcbVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum TpcbVerb {
    /// Create and load pgbench's tables (existing ones only with --replace).
    Init(Box<InitArgs>),
    /// Run the TPC-B-like script at one or more client counts.
    Run(Box<RunArgs>),
}

/// The database to use.
#[derive(Debug, Args)]
pub struct DbArg {
    /// Database URL: sqlite:PATH, postgres://user@host:port/db, mysql://user@host:port/db, managed:NAME.
    #[arg(long, env = "STORBENCH_DB", default_value = "sqlite:storbench-data/tpcb.db")]
    pub db: String,
}

/// Options of `tpcb init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Scale factor: 100,000 accounts per unit.
    #[arg(long, short = 's', default_value_t = 1)]
    pub scale: i64,
    /// Fill factor of the tables, 10-100 (PostgreSQL only).
    #[arg(long, short = 'F', default_value_t = 100)]
    pub fillfactor: u32,
    /// Connections loading in parallel (default: the number of CPUs).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Drop existing pgbench tables first (without it, `init` refuses them,
    /// as `tpcc build` refuses an existing schema).
    #[arg(long)]
    pub replace: bool,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// Options of `tpcb run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Clients per step: a list (1,4,16), a range (1..8) or fib:N, each 1 to 10000.
    #[arg(long, short = 'c', default_value = "1", value_name = "LIST", value_parser = Given::parser(parse_load_levels))]
    pub clients: Given<Vec<usize>>,
    /// The scale the tables must have (default: whatever they have).
    #[arg(long, short = 's')]
    pub scale: Option<i64>,
    /// Measured time per step.
    #[arg(long, short = 'T', default_value = "60s", value_name = "DURATION", value_parser = parse_positive_duration)]
    pub duration: Duration,
    /// Ramp-up per step, run but not counted.
    #[arg(long, default_value = "0s", value_name = "DURATION", value_parser = parse_duration)]
    pub rampup: Duration,
    /// Target rate in transactions per second over all clients (latency
    /// counts from the schedule).
    #[arg(long, short = 'R', allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Latency limit, a bare number in milliseconds as pgbench's -L reads
    /// it (or a duration: 50ms, 0.1s): with --rate, transactions this far
    /// behind schedule are skipped; without, slower ones are counted as late.
    #[arg(long, short = 'L', value_name = "MS|DURATION", value_parser = parse_latency_limit)]
    pub latency_limit: Option<Duration>,
    /// Print a progress line this often (a duration: 5s, 1m; a bare number
    /// is seconds, as pgbench's -P reads it).
    #[arg(long, short = 'P', value_name = "DURATION", value_parser = parse_progress)]
    pub progress: Option<Duration>,
    /// Seed for key choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long a user retries a lost connection before the run fails.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_duration)]
    pub reconnect_for: Duration,
    #[command(flatten)]
    pub sens: oltp::SensitivityArgs,
    #[command(flatten)]
    pub waits: oltp::WaitArgs,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// Runs `storbench tpcb`.
pub fn run(g: &Global, a: TpcbArgs) -> Result<ExitCode> {
    match a.verb {
        TpcbVerb::Init(i) => init(g, *i),
        TpcbVerb::Run(r) => run_steps(g, *r),
    }
}

fn init(g: &Global, a: InitArgs) -> Result<ExitCode> {
    if !(1..=100_000).contains(&a.scale) {
        return Err(usage(format!("--scale {}: must be 1 to 100000", a.scale)));
    }
    if !(10..=100).contains(&a.fillfactor) {
        return Err(usage(format!("--fillfactor {}: must be 10 to 100", a.fillfactor)));
    }
    let jobs = a.jobs.unwrap_or_else(oltp::default_jobs);
    if jobs == 0 {
        return Err(usage("--jobs 0: must be at least 1"));
    }
    let db = Db::parse(&a.db.db)?;
    let opts = InitOptions { scale: a.scale, fillfactor: a.fillfactor, jobs };
    dataset::build(g.into(), &oltp::Term(g), &tpcb::Data, &db, opts, a.replace)
}

fn run_steps(g: &Global, a: RunArgs) -> Result<ExitCode> {
    let run = TpcbRun {
        db: a.db.db,
        clients: a.clients,
        scale: a.scale,
        duration: a.duration,
        rampup: a.rampup,
        rate: a.rate,
        latency_limit: a.latency_limit,
        progress: a.progress,
        seed: a.seed,
        reconnect_for: a.reconnect_for,
        sensitivity: a.sens.sensitivity,
        sensitivity_duration: a.sens.sensitivity_duration,
        waits: !a.waits.no_wait_events,
    };
    storbench_run::tpcb::run(g.into(), &oltp::Term(g), run)
}
