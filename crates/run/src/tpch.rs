//! A TPC-H run: the database (`managed:NAME/DB` included) and its schema,
//! the tests run with each one's steps written to the run (a sensitivity
//! re-run's summary tagged), the power test again at each sensitivity
//! factor, and the headline figures' table.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Value};
use storbench_db::Stmt;
use storbench_metrics::StepReport;
use storbench_report::Table;
use storbench_workloads::tpch::test::{
    min_streams, run_tests, status_text, TestError, TestKind as Kind, TestSink, Tests,
};
use storbench_workloads::tpch::{self, ItemResult, RunOptions};

use crate::backup::managed_or_url;
use crate::dbarg::{self, db_env, managed_database, Db};
use crate::error::usage;
use crate::oltp::{self, Factors, Screen};
use crate::record::{Outcome, RecordOptions, Recorder};

/// `tpch run`'s options, checked.
pub struct TpchRun {
    /// The database URL (`managed:NAME/DB` too).
    pub db: String,
    /// The test.
    pub test: Kind,
    /// Query streams of the throughput test.
    pub streams: Option<usize>,
    /// Only these queries.
    pub queries: Vec<u8>,
    /// Seed of the query parameters.
    pub seed: u64,
    /// The specification's validation parameters.
    pub validation: bool,
    /// Per-query limit.
    pub timeout: Option<Duration>,
    /// `--sensitivity`, parsed.
    pub sensitivity: Option<Factors>,
    /// Sample the database's wait events.
    pub waits: bool,
}

/// The tests' steps go to the results store, their items to stderr. A
/// sensitivity re-run of the power test (`rerun`: its factor and tag)
/// records only its summary, as `summary ×F` tagged `params.sensitivity`
/// (the queries' own steps would be load levels of no axis).
pub struct Sink<'a> {
    /// The run the steps are written to.
    pub rec: &'a mut Recorder,
    /// Where the phases' lines go.
    pub screen: &'a dyn Screen,
    /// A sensitivity re-run's factor and tag.
    pub rerun: Option<(f64, Value)>,
}

impl TestSink for Sink<'_> {
    type Clock = crate::record::StepClock;

    fn clock(&self) -> Self::Clock {
        self.rec.clock()
    }

    fn step(
        &mut self,
        clock: Self::Clock,
        label: &str,
        mut params: Value,
        r: StepReport,
    ) -> Result<StepReport, String> {
        let label = match &self.rerun {
            None => label.to_string(),
            Some(_) if label != "summary" => return Ok(r),
            Some((factor, tag)) => {
                params[storbench_report::sensitivity::PARAM] = tag.clone();
                format!("{label} ×{factor}")
            }
        };
        self.rec.write_step(clock, &label, params, r).map_err(|e| format!("{e:#}"))
    }

    fn phase(&self, line: &str) {
        if self.rec.quiet() {
            return;
        }
        match &self.rerun {
            Some((factor, _)) => self.screen.step_line(&format!("sensitivity ×{factor}: {line}")),
            None => self.screen.step_line(line),
        }
    }
}

/// The power test again at each of the plan's factors, each re-run's
/// summary recorded as a tagged step; the sentences to print, or `None`
/// when a re-run was interrupted.
pub fn rerun_sensitivity(
    screen: &dyn Screen,
    rec: &mut Recorder,
    plan: &storbench_ops::sensitivity::Plan,
    connect: storbench_workloads::runner::Connector<'_>,
    tests: &Tests,
) -> Result<Option<Vec<String>>> {
    let Some(base) = rec.last_idx() else { return Ok(Some(Vec::new())) };
    let ran = plan.each(&crate::interrupt::requested, |f| -> Result<bool> {
        let tag = json!({ "scale": f, "of": base, "medium": plan.medium });
        let mut sink = Sink { rec: &mut *rec, screen, rerun: Some((f, tag)) };
        match run_tests(&mut sink, connect, tests, crate::interrupt::flag()) {
            Ok(o) if o.failures.is_empty() => Ok(o.interrupted),
            Ok(o) => Err(anyhow::anyhow!("sensitivity ×{f}: {}", o.failures[0])),
            Err(e) => Err(anyhow::anyhow!("sensitivity ×{f}: {e}")),
        }
    })?;
    if ran.iter().any(|(_, stopped)| *stopped) || crate::interrupt::requested() {
        return Ok(None);
    }
    let s = rec.write_sensitivity(base)?;
    Ok(Some(s.map(|s| format!("sensitivity {}: {}", s.label, s.sentence())).into_iter().collect()))
}

/// The run's headline figures as printed: the TPC-H metrics, the
/// geometric means and the phases' times (not each query's).
pub fn summary_table(shown: &StepReport) -> String {
    let mut t = Table::with_header(["figure", "value"]);
    for f in &shown.figures {
        if f.name.starts_with("tpch.")
            || f.name.ends_with("geomean")
            || f.name.ends_with(".seconds") && !f.name.starts_with('q')
        {
            t.add_row([f.name.clone(), format!("{:.3}", f.value)]);
        }
    }
    t.to_text().trim_end_matches('\n').to_string()
}

/// `--db` of a tpch verb: every form `--db` takes, and `managed:NAME/DB`,
/// the database DB of the managed instance NAME (as `storbench restore --to`
/// takes it). TPC-C has tables named CUSTOMER and ORDERS too, so a plan that
/// runs both workloads on one instance gives TPC-H a database of its own.
pub fn parse_db(s: &str) -> Result<Db> {
    let Some((_, name)) = managed_database(s) else { return Db::parse(s) };
    // Unquoted in CREATE DATABASE, so PostgreSQL keeps it as written.
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(usage(format!(
            "--db {s}: database name '{name}' must be lowercase letters, digits and _, starting with a letter"
        )));
    }
    managed_or_url(s)
}

/// Creates the database a `managed:NAME/DB` URL names when it is missing.
pub fn create_managed_database(s: &str) -> Result<()> {
    let Some((inst, name)) = managed_database(s) else { return Ok(()) };
    let server = Db::parse(&format!("managed:{inst}"))?;
    let mut c = server.open()?;
    let exists = Stmt::new(format!("SELECT 1 FROM pg_database WHERE datname = '{name}'"));
    if c.query(&exists, &[]).map_err(|e| server.error(e))?.is_empty() {
        c.batch(&format!("CREATE DATABASE {name}")).map_err(|e| server.error(e))?;
    }
    Ok(())
}

/// Runs the tests, recorded.
pub fn run(g: RecordOptions, screen: &dyn Screen, a: TpchRun) -> Result<ExitCode> {
    let (timeout, sens) = (a.timeout, a.sensitivity);
    let db = parse_db(&a.db)?;
    oltp::require_sqlite_file(&db, "tpch build")?;
    if timeout.is_some() && db.sqlite_path().is_some() {
        return Err(usage(
            "--timeout: SQLite statements cannot be cancelled through storbench's connection; run without --timeout",
        ));
    }
    let mut conn = db.open()?;
    let info = crate::dataset::built(&tpch::Data, &db, conn.as_mut())?;
    let sf = info.scale;
    let streams = a.streams.unwrap_or_else(|| min_streams(sf));
    let subset = !a.queries.is_empty() && {
        let mut q = a.queries.clone();
        q.sort();
        q.dedup();
        q.len() < 22
    };
    let env = json!({
        "db": db_env(&db, conn.as_mut()),
        "scale": sf,
        "refresh": "RF2 deletes the orders RF1 inserted (the database ends as built)",
        "parameters": if a.validation { "validation (clause 2.4.N.4)" } else { "drawn per stream as qgen does, from --seed" },
        "streams_minimum": min_streams(sf),
    });
    let targets: Vec<_> = dbarg::data_dir(&db, conn.as_mut()).into_iter().collect();
    std::mem::drop(conn);
    let sensitivity = oltp::sensitivity_plan(sens, &targets)?;
    let test = format!("{:?}", a.test).to_lowercase();
    let config = json!({
        "db": db.shown, "scale": sf, "test": test, "streams": streams, "queries": a.queries,
        "seed": a.seed, "validation": a.validation, "timeout_s": timeout.map(|t| t.as_secs_f64()),
    });
    let label = match a.test {
        Kind::Power => format!("tpch power SF {sf}"),
        _ => format!("tpch {test} SF {sf} streams {streams}"),
    };
    let quiet = g.quiet;
    let mut rec = Recorder::begin(g, "tpch", label, config, env, &targets)?;
    let connect = db.connector();
    oltp::sample_waits(&mut rec, a.waits, &connect);
    // Beside other workloads (a plan's `together` cell): begin with them.
    storbench_runner::wait_for_start_instant(crate::interrupt::flag());
    let opts =
        RunOptions { scale: sf, seed: a.seed, validation: a.validation, only: a.queries.clone(), timeout };
    let kind = a.test;
    let on_item = |it: &ItemResult| {
        if !quiet {
            screen.step_line(&format!(
                "  stream {:>2}  {:<4} {:>10.3} s  {:>7} rows  {}",
                it.stream,
                it.item.label(),
                it.seconds,
                it.rows,
                status_text(&it.status)
            ));
        }
    };
    let tests = Tests { kind, opts: &opts, streams, subset, on_item: &on_item };
    let mut sink = Sink { rec: &mut rec, screen, rerun: None };
    let out = match run_tests(&mut sink, &connect, &tests, crate::interrupt::flag()) {
        Ok(o) => o,
        // Recording a step failed: the run still ends `failed`, not `running`.
        Err(TestError::Sink(e)) => {
            return rec.finish(Outcome::Failed(anyhow::anyhow!("recording a step: {e}")))
        }
        Err(TestError::Throughput(e)) => {
            return rec.finish(Outcome::Failed(anyhow::anyhow!("throughput test on {}: {e}", db.shown)))
        }
        Err(e) => return rec.finish(Outcome::Failed(e.into())),
    };
    let (shown, power_size, mut interrupted, failures) =
        (out.summary, out.power_size, out.interrupted, out.failures);
    // The storage sensitivity: the power test again at each factor, only
    // its summary recorded (tagged), after a whole run without failures.
    let mut sens_lines = Vec::new();
    if let (Some(plan), false, true) = (&sensitivity, interrupted, failures.is_empty()) {
        match rerun_sensitivity(screen, &mut rec, plan, &connect, &tests) {
            Ok(Some(lines)) => sens_lines = lines,
            Ok(None) => interrupted = true,
            Err(e) => return rec.finish(Outcome::Failed(e)),
        }
    }
    screen.result(&summary_table(&shown));
    // What limited each query, as tpcb and tpcc print it.
    for line in
        oltp::verdict_lines(rec.verdicts()).into_iter().chain(oltp::wait_lines(&rec)).chain(sens_lines)
    {
        screen.result(&line);
    }
    if power_size.is_none() && matches!(a.test, Kind::Power | Kind::Both) {
        screen
            .step_line("tpch: no Power@Size: it needs all 22 queries and both refresh functions to complete");
    }
    if interrupted {
        return rec.finish(Outcome::Interrupted);
    }
    if let Some(f) = failures.first() {
        return rec.finish(Outcome::Failed(anyhow::anyhow!("{} item(s) failed; first: {f}", failures.len())));
    }
    rec.finish(Outcome::Complete)
}
