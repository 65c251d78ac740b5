//! `storbench tpcc build | run | check | drop`: the TPC-C-like workload on
//! any engine. `run` reports TPM as the database counts it (`tpm.server`)
//! and NOPM from the growth of the districts' next order ids
//! (`nopm.districts`, HammerDB's method), beside the client's own counts
//! (`tpm.client`, `nopm.client`): every figure and series names its source.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};
use storbench_metrics::units::{parse_duration, parse_load_levels, parse_positive_duration, Given};
use storbench_report::Table;
use storbench_run::dataset;
use storbench_run::tpcc::TpccRun;
use storbench_workloads::tpcc;

use crate::cli::Global;
use crate::dbarg::Db;
use crate::error::{usage, EXIT_FAILED};
use crate::oltp;

/// Options of `storbench tpcc`.
#[derive(Debug, Args)]
pub struct TpccArgs {
    #[command(subcommand)]
    pub verb: TpccVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum TpccVerb {
    /// Create the nine tables, load them in parallel, add indexes and procedures.
    Build(BuildArgs),
    /// Run the transaction mix at one or more user counts.
    Run(RunArgs),
    /// Check the TPC-C consistency conditions; exit 1 if one fails.
    Check(DbArg),
    /// Drop the schema.
    Drop(DbArg),
}

/// The database to use.
#[derive(Debug, Args)]
pub struct DbArg {
    /// Database URL: sqlite:PATH, postgres://user@host:port/db, mysql://user@host:port/db, managed:NAME.
    #[arg(long, env = "STORBENCH_DB", default_value = "sqlite:storbench-data/tpcc.db")]
    pub db: String,
}

/// Options of `tpcc build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Warehouses (about 100 MB each).
    #[arg(long, short = 'w', default_value_t = 1)]
    pub warehouses: u32,
    /// Connections loading in parallel (default: the number of CPUs).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Drop an existing TPC-C schema first.
    #[arg(long)]
    pub replace: bool,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// Options of `tpcc run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Virtual users per step: a list (1,2,4), a range (1..8) or fib:N, each 1 to 10000.
    #[arg(long, short = 'u', default_value = "1", value_name = "LIST", value_parser = Given::parser(parse_load_levels))]
    pub users: Given<Vec<usize>>,
    /// Ramp-up per step, run but not counted.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_duration)]
    pub rampup: Duration,
    /// Measured time per step.
    #[arg(long, short = 'T', default_value = "2m", value_name = "DURATION", value_parser = parse_positive_duration)]
    pub duration: Duration,
    /// The warehouse count the schema must have (default: whatever it has).
    #[arg(long, short = 'w')]
    pub warehouses: Option<u32>,
    /// Every transaction picks a random warehouse (HammerDB's "use all
    /// warehouses") instead of each user keeping a home warehouse.
    #[arg(long)]
    pub all_warehouses: bool,
    /// Drive the transactions with client-side SQL instead of server-side procedures.
    #[arg(long)]
    pub client_sql: bool,
    /// Keying and think times as the specification gives them (off by default).
    #[arg(long)]
    pub think: bool,
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

/// Runs `storbench tpcc`.
pub fn run(g: &Global, a: TpccArgs) -> Result<ExitCode> {
    match a.verb {
        TpccVerb::Build(b) => build(g, b),
        TpccVerb::Run(r) => run_steps(g, r),
        TpccVerb::Check(d) => check(g, d),
        TpccVerb::Drop(d) => drop_schema(g, d),
    }
}

fn build(g: &Global, a: BuildArgs) -> Result<ExitCode> {
    if !(1..=100_000).contains(&a.warehouses) {
        return Err(usage(format!("--warehouses {}: must be 1 to 100000", a.warehouses)));
    }
    let jobs = a.jobs.unwrap_or_else(oltp::default_jobs);
    if jobs == 0 {
        return Err(usage("--jobs 0: must be at least 1"));
    }
    let db = Db::parse(&a.db.db)?;
    let opts = tpcc::BuildOptions { warehouses: a.warehouses, jobs };
    dataset::build(g.into(), &oltp::Term(g), &tpcc::Data, &db, opts, a.replace)
}

fn check(g: &Global, a: DbArg) -> Result<ExitCode> {
    let db = Db::parse(&a.db)?;
    let mut conn = db.open()?;
    let info = dataset::built(&tpcc::Data, &db, conn.as_mut())?;
    let results = dataset::check(&tpcc::Data, &db, conn.as_mut(), &info, ())?;
    let mut t = Table::with_header(["#", "condition", "result", "detail"]);
    for c in &results {
        t.add_row(vec![
            c.number.to_string(),
            c.name.to_string(),
            if c.passed { "pass".into() } else { "FAIL".to_string() },
            c.detail.clone(),
        ]);
    }
    if g.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", t.to_text());
    }
    let failed = results.iter().filter(|c| !c.passed).count();
    if failed > 0 {
        eprintln!("storbench: {failed} consistency condition(s) failed in {}", db.shown);
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

fn drop_schema(g: &Global, a: DbArg) -> Result<ExitCode> {
    let db = Db::parse(&a.db)?;
    dataset::drop(&tpcc::Data, &db)?;
    if !g.quiet {
        eprintln!("tpcc: schema dropped from {}", db.shown);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_steps(g: &Global, a: RunArgs) -> Result<ExitCode> {
    let run = TpccRun {
        db: a.db.db,
        users: a.users,
        rampup: a.rampup,
        duration: a.duration,
        warehouses: a.warehouses,
        all_warehouses: a.all_warehouses,
        client_sql: a.client_sql,
        think: a.think,
        seed: a.seed,
        reconnect_for: a.reconnect_for,
        sensitivity: a.sens.sensitivity,
        sensitivity_duration: a.sens.sensitivity_duration,
        waits: !a.waits.no_wait_events,
    };
    storbench_run::tpcc::run(g.into(), &oltp::Term(g), run)
}
