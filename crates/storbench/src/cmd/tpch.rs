//! `storbench tpch build | run | check | drop`: the TPC-H-like workload on
//! any engine. `run --test power` records each refresh function and query
//! as its own step (so the system monitor's read MB/s and iowait, and
//! PostgreSQL's temp-file bytes, come per query), then a summary step with
//! the geometric mean and Power@Size; `--test throughput` records one step
//! for the concurrent streams with Throughput@Size; `--test both` runs the
//! two and adds QphH@Size.
//!
//! Results (the build's figures, the run's figures table, the check's
//! table) go to stdout, or to stderr with `--json`, whose record is then all
//! stdout carries; progress (the bar, a line per finished query) goes to
//! stderr and `--quiet` hides it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use storbench_report::Table;
use storbench_run::dataset;
use storbench_run::tpch::{create_managed_database, parse_db, TpchRun};
use storbench_workloads::tpch;
use storbench_workloads::tpch::test::TestKind as Kind;

use crate::cli::Global;
use crate::error::{usage, EXIT_FAILED};
use crate::oltp;

/// Options of `storbench tpch`.
#[derive(Debug, Args)]
pub struct TpchArgs {
    #[command(subcommand)]
    pub verb: TpchVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum TpchVerb {
    /// Create the eight tables, load them in parallel, add keys, indexes and statistics.
    Build(BuildArgs),
    /// Run the power test, the throughput test, both, or a chosen subset of queries.
    Run(RunArgs),
    /// Compare every query's answer (validation parameters) with the SF 1
    /// reference answers or another engine's; exit 1 if one differs.
    Check(CheckArgs),
    /// Drop the schema.
    Drop(DbArg),
}

/// The database to use.
#[derive(Debug, Args)]
pub struct DbArg {
    /// Database URL: sqlite:PATH, postgres://user@host:port/db, mysql://user@host:port/db,
    /// managed:NAME, or managed:NAME/DB (database DB of that instance; `build` creates it).
    #[arg(long, env = "STORBENCH_DB", default_value = "sqlite:storbench-data/tpch.db")]
    pub db: String,
}

/// Options of `tpch build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Scale factor, 0.01 to 100 (SF 1 is ~1 GB of rows; default 1 on servers, 0.1 on SQLite).
    #[arg(long, short = 's', visible_alias = "sf")]
    pub scale: Option<f64>,
    /// Connections loading in parallel (default: the number of CPUs).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Drop an existing TPC-H schema first.
    #[arg(long)]
    pub replace: bool,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// Which test `tpch run` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TestKind {
    /// RF1, the 22 queries in stream 0's order, RF2 (clause 5.3.3).
    Power,
    /// S concurrent query streams and one refresh stream (clause 5.3.4).
    Throughput,
    /// The power test, then the throughput test, and QphH@Size.
    Both,
}

/// Options of `tpch run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The test.
    #[arg(long, value_enum, default_value = "power")]
    pub test: TestKind,
    /// Query streams of the throughput test (default: the specification's
    /// minimum for the scale, 2 at SF 1 and below).
    #[arg(long, short = 'S')]
    pub streams: Option<usize>,
    /// Only these queries (1-22, in the stream's order); a subset runs no
    /// refresh functions and reports no Power@Size.
    #[arg(long, value_delimiter = ',')]
    pub queries: Vec<u8>,
    /// Seed of the query parameters (each stream draws its own from it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Use the specification's validation parameters instead of drawn ones.
    /// Times the queries only: their answers are not compared here (`tpch
    /// check` compares them with the SF 1 reference answers).
    #[arg(long)]
    pub validation: bool,
    /// Per-query limit; the server cancels a query that reaches it, and the
    /// run records it as timed out (PostgreSQL, MySQL/MariaDB).
    #[arg(long, value_name = "DURATION", value_parser = parse_query_timeout)]
    pub timeout: Option<Duration>,
    #[command(flatten)]
    pub waits: oltp::WaitArgs,
    /// `--sensitivity` (power test only: the whole power test is re-run
    /// once per factor; `--sensitivity-duration` does not apply).
    #[command(flatten)]
    pub sens: oltp::SensitivityArgs,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// Options of `tpch check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Compare with the same queries on this database (any scale) instead of
    /// the SF 1 reference answers.
    #[arg(long)]
    pub against: Option<String>,
    /// Only these queries.
    #[arg(long, value_delimiter = ',')]
    pub queries: Vec<u8>,
}

/// Runs `storbench tpch`.
pub fn run(g: &Global, a: TpchArgs) -> Result<ExitCode> {
    match a.verb {
        TpchVerb::Build(b) => build(g, b),
        TpchVerb::Run(r) => run_test(g, r),
        TpchVerb::Check(c) => check(g, c),
        TpchVerb::Drop(d) => drop_schema(g, d),
    }
}

fn validate_queries(q: &[u8]) -> Result<()> {
    if let Some(bad) = q.iter().find(|&&q| !(1..=22).contains(&q)) {
        return Err(usage(format!("--queries: {bad} is not a TPC-H query (1 to 22)")));
    }
    Ok(())
}

fn build(g: &Global, a: BuildArgs) -> Result<ExitCode> {
    let db = parse_db(&a.db.db)?;
    let scale = a.scale.unwrap_or(if db.sqlite_path().is_some() { 0.1 } else { 1.0 });
    if !(0.01..=100.0).contains(&scale) {
        return Err(usage(format!("--scale {scale}: must be 0.01 to 100")));
    }
    let jobs = a.jobs.unwrap_or_else(oltp::default_jobs);
    if jobs == 0 || jobs > 256 {
        return Err(usage(format!("--jobs {jobs}: must be 1 to 256")));
    }
    oltp::make_sqlite_dir(&db)?;
    create_managed_database(&a.db.db)?;
    let opts = tpch::BuildOptions { scale, jobs };
    dataset::build(g.into(), &oltp::Term(g), &tpch::Data, &db, opts, a.replace)
}

/// `--timeout`'s parser: a duration of at least 1 ms (the servers' limits
/// count milliseconds); the error names the value.
fn parse_query_timeout(s: &str) -> std::result::Result<Duration, String> {
    match storbench_metrics::units::parse_duration(s)? {
        d if d < Duration::from_millis(1) => Err(format!("'{s}' must be at least 1ms")),
        d => Ok(d),
    }
}

/// What `tpch run` validates before it connects: the per-query timeout and
/// the sensitivity factors (each with a one-line error naming the flag).
fn run_flags(a: &RunArgs) -> Result<(Option<Duration>, Option<oltp::Factors>)> {
    validate_queries(&a.queries)?;
    let timeout = a.timeout;
    if let Some(s) = a.streams {
        if !(1..=40).contains(&s) {
            return Err(usage(format!("--streams {s}: must be 1 to 40 (the specification's ordered sets)")));
        }
        if a.test == TestKind::Power {
            return Err(usage("--streams: only the throughput test has streams (--test throughput or both)"));
        }
    }
    let sens = a.sens.parse(false)?;
    if sens.is_some() && a.test != TestKind::Power {
        return Err(usage(
            "--sensitivity: only with --test power (the power test is re-run once per factor)",
        ));
    }
    if let Some(d) = sens.as_ref().and_then(|s| s.1.as_ref()).and(a.sens.sensitivity_duration.as_ref()) {
        return Err(usage(format!(
            "--sensitivity-duration {}: tpch re-runs the whole power test, which has no duration",
            d.text
        )));
    }
    Ok((timeout, sens))
}

fn run_test(g: &Global, a: RunArgs) -> Result<ExitCode> {
    let (timeout, sens) = run_flags(&a)?;
    let test = match a.test {
        TestKind::Power => Kind::Power,
        TestKind::Throughput => Kind::Throughput,
        TestKind::Both => Kind::Both,
    };
    let run = TpchRun {
        db: a.db.db,
        test,
        streams: a.streams,
        queries: a.queries,
        seed: a.seed,
        validation: a.validation,
        timeout,
        sensitivity: sens,
        waits: !a.waits.no_wait_events,
    };
    storbench_run::tpch::run(g.into(), &oltp::Term(g), run)
}

fn check(g: &Global, a: CheckArgs) -> Result<ExitCode> {
    validate_queries(&a.queries)?;
    let db = parse_db(&a.db.db)?;
    oltp::require_sqlite_file(&db, "tpch build")?;
    let mut conn = db.open()?;
    let info = dataset::built(&tpch::Data, &db, conn.as_mut())?;
    let against = match &a.against {
        Some(url) => {
            let o = parse_db(url)?;
            oltp::require_sqlite_file(&o, "tpch build")?;
            let mut c = o.open()?;
            match tpch::inspect(c.as_mut()).map_err(|e| o.usage_error(e))? {
                Some(i) if i.scale == info.scale => Some((o.shown, c)),
                Some(i) => {
                    return Err(usage(format!(
                        "--against {}: scale {} differs from {}'s {}",
                        o.shown, i.scale, db.shown, info.scale
                    )))
                }
                None => return Err(usage(format!("--against {}: no TPC-H schema there", o.shown))),
            }
        }
        None if info.scale != 1.0 => {
            return Err(usage(format!(
                "{} is at scale {}: reference answers exist for SF 1 only; compare with another engine with --against URL",
                db.shown, info.scale
            )))
        }
        None => None,
    };
    let (against_shown, against) = against.unzip();
    let opts = tpch::CheckOptions { queries: a.queries, against };
    let results = dataset::check(&tpch::Data, &db, conn.as_mut(), &info, opts)?;
    let mut t = Table::with_header(["query", "rows", "result", "first difference"]);
    for r in &results {
        t.add_row(vec![
            format!("Q{}", r.query),
            r.rows.to_string(),
            if r.passed() { "pass".into() } else { "FAIL".to_string() },
            r.error.clone().or_else(|| r.mismatch.as_ref().map(|m| m.detail.clone())).unwrap_or_default(),
        ]);
    }
    oltp::result(g, t.to_text().trim_end_matches('\n'));
    let failed: Vec<String> =
        results.iter().filter(|r| !r.passed()).map(|r| format!("Q{}", r.query)).collect();
    let reference = against_shown.unwrap_or_else(|| "the SF 1 reference answers".into());
    if g.json {
        // A check records no run: its JSON is the per-query outcome.
        let v = json!({
            "db": db.shown, "against": reference, "scale": info.scale,
            "passed": failed.is_empty(), "queries": results,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    if !failed.is_empty() {
        eprintln!("storbench: {} differ from {reference}: {}", db.shown, failed.join(", "));
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    oltp::result(g, format!("tpch check: {} queries of {} agree with {reference}", results.len(), db.shown));
    Ok(ExitCode::SUCCESS)
}

fn drop_schema(g: &Global, a: DbArg) -> Result<ExitCode> {
    let db = parse_db(&a.db)?;
    dataset::drop(&tpch::Data, &db)?;
    if !g.quiet {
        eprintln!("tpch: schema dropped from {}", db.shown);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};
    use storbench_workloads::tpch::test::min_streams;

    fn parse(args: &[&str]) -> RunArgs {
        let mut v = vec!["storbench", "tpch", "run"];
        v.extend(args);
        match Cli::try_parse_from(v).unwrap().command {
            Command::Tpch(TpchArgs { verb: TpchVerb::Run(r) }) => r,
            _ => panic!("not tpch run"),
        }
    }

    #[test]
    fn run_flags_parse() {
        let r = parse(&["--test", "throughput", "--streams", "3", "--queries", "1,6,14", "--timeout", "30s"]);
        assert_eq!(r.test, TestKind::Throughput);
        assert_eq!(r.streams, Some(3));
        assert_eq!(r.queries, vec![1, 6, 14]);
        assert_eq!(r.timeout, Some(Duration::from_secs(30)));
        for (bad, why) in [("soon", "'soon' is not a duration"), ("0.5ms", "'0.5ms' must be at least 1ms")] {
            let e =
                Cli::try_parse_from(["storbench", "tpch", "run", "--timeout", bad]).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        assert_eq!(parse(&[]).test, TestKind::Power);
    }

    #[test]
    fn minimum_streams_follow_the_specification() {
        assert_eq!(min_streams(0.1), 2);
        assert_eq!(min_streams(1.0), 2);
        assert_eq!(min_streams(10.0), 3);
        assert_eq!(min_streams(100.0), 5);
    }
}
