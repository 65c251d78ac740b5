//! The power and throughput tests as steps (clauses 5.3.3, 5.3.4): the
//! power test records each refresh function and query as its own step, the
//! throughput test one step for the concurrent streams, and a summary step
//! carries the geometric means, Power@Size, Throughput@Size and QphH@Size.
//!
//! The steps go to a [`TestSink`] the caller hands in (the binary records
//! them in the results store and prints each item); nothing here prints or
//! knows the store.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{json, Value};
use storbench_db::{DbError, Dialect};
use storbench_metrics::{StepReport, Unit};

use super::{Item, ItemResult, RunOptions, Status};
use crate::runner::Connector;

/// Which tests to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestKind {
    /// RF1, the 22 queries in stream 0's order, RF2.
    Power,
    /// S concurrent query streams and one refresh stream.
    Throughput,
    /// The power test, then the throughput test, and QphH@Size.
    Both,
}

/// Where the tests' steps and progress go.
pub trait TestSink {
    /// A step's start, as the sink keeps it (its clock).
    type Clock;
    /// Starts a step's clock now.
    fn clock(&self) -> Self::Clock;
    /// Records a finished step; returns its figures as recorded (the sink
    /// may add its own, e.g. the system monitor's). An error ends the test.
    fn step(
        &mut self,
        clock: Self::Clock,
        label: &str,
        params: Value,
        r: StepReport,
    ) -> Result<StepReport, String>;
    /// A test begins (`tpch power test, SF 1`).
    fn phase(&self, line: &str);
}

/// How the tests end.
#[derive(Debug)]
pub struct TestOutcome {
    /// The summary step's figures as recorded.
    pub summary: StepReport,
    /// Power@Size, when the power test ran whole.
    pub power_size: Option<f64>,
    /// Every failed item, one line each.
    pub failures: Vec<String>,
    /// The stop flag ended the tests early.
    pub interrupted: bool,
}

/// Why the tests could not go on.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// The database failed outside an item (connecting, cleaning up RF1's rows).
    #[error("{0}")]
    Db(#[from] DbError),
    /// The throughput test could not run.
    #[error("throughput test: {0}")]
    Throughput(DbError),
    /// The sink refused a step.
    #[error("{0}")]
    Sink(String),
}

/// The specification's minimum stream count for a scale (clause 5.3.4.1).
pub fn min_streams(sf: f64) -> usize {
    match sf {
        s if s < 10.0 => 2,
        s if s < 30.0 => 3,
        s if s < 100.0 => 4,
        s if s < 300.0 => 5,
        s if s < 1000.0 => 6,
        _ => 7,
    }
}

/// An item's status in a sentence: `ok`, `timed out`, `failed: ...`.
pub fn status_text(s: &Status) -> String {
    match s {
        Status::Ok => "ok".into(),
        Status::TimedOut => "timed out".into(),
        Status::Cancelled => "cancelled".into(),
        Status::Failed(m) => format!("failed: {m}"),
    }
}

fn item_figures(r: &mut StepReport, prefix: &str, it: &ItemResult) {
    r.figure(format!("{prefix}seconds"), it.seconds, Unit::S);
    r.figure(format!("{prefix}rows"), it.rows as f64, Unit::Count);
    r.figure(format!("{prefix}timed_out"), (it.status == Status::TimedOut) as u8 as f64, Unit::Count);
    r.figure(format!("{prefix}failed"), matches!(it.status, Status::Failed(_)) as u8 as f64, Unit::Count);
    if let Some(b) = it.temp_bytes {
        r.figure(format!("{prefix}temp_bytes"), b as f64, Unit::Bytes);
    }
}

/// A query's substitution values as recorded.
fn param_values(it: &ItemResult) -> serde_json::Map<String, Value> {
    it.params.iter().map(|(k, v)| (k.to_string(), json!(v.display()))).collect()
}

fn params_json(it: &ItemResult) -> Value {
    json!({ "stream": it.stream, "item": it.item.label(), "params": param_values(it) })
}

/// The throughput step's parameters: every query stream's queries in the
/// order they ran with the parameters each drew, and the refresh stream's
/// functions with their pair numbers, so a run can be checked against the
/// specification's orders and reproduced.
fn throughput_params(streams: usize, opts: &RunOptions, items: &[ItemResult]) -> Value {
    let mut queries: BTreeMap<usize, Vec<Value>> = (1..=streams).map(|s| (s, Vec::new())).collect();
    let mut refresh = Vec::new();
    // Items are in the order they ended; a stream runs its own in sequence.
    for it in items {
        let status = status_text(&it.status);
        match it.item {
            Item::Query(q) => queries.entry(it.stream).or_default().push(json!({
                "query": q, "params": param_values(it), "status": status,
            })),
            Item::Rf1(pair) | Item::Rf2(pair) => {
                refresh.push(json!({ "item": it.item.label(), "pair": pair, "status": status }))
            }
        }
    }
    let queries: serde_json::Map<String, Value> =
        queries.into_iter().map(|(s, v)| (format!("s{s}"), json!(v))).collect();
    json!({
        "streams": streams,
        "seed": opts.seed,
        "validation": opts.validation,
        "queries": queries,
        "refresh_stream": streams + 1,
        "refresh": refresh,
    })
}

/// What the power test gave: per-query seconds of the completed queries,
/// the refresh seconds, and whether all ran.
#[derive(Default)]
struct PowerOutcome {
    query_s: Vec<(u8, f64)>,
    refresh_s: Vec<f64>,
    failures: Vec<String>,
}

/// Runs one power-test item on `conn`, with its temp-file bytes on PostgreSQL.
fn power_item(
    conn: &mut dyn storbench_db::Connection,
    item: Item,
    opts: &RunOptions,
    stop: &AtomicBool,
) -> Result<ItemResult, DbError> {
    let pg = conn.dialect() == Dialect::Postgres;
    let before = if pg { super::temp_bytes(conn) } else { None };
    let mut it = match item {
        Item::Query(q) => {
            super::set_timeout(conn, opts.timeout)?;
            let (qt, params) = opts.query(q, 0, conn.dialect());
            super::run_query(conn, 0, &qt, params)
        }
        rf => {
            if opts.timeout.is_some() {
                super::set_timeout(conn, None)?;
            }
            super::run_refresh(conn, 0, rf, opts.scale)
        }
    };
    if stop.load(Ordering::Relaxed) && it.status != Status::Ok {
        it.status = Status::Cancelled;
    }
    if let (Some(b), Some(a)) = (before, if pg { super::temp_bytes(conn) } else { None }) {
        it.temp_bytes = Some(a.saturating_sub(b));
    }
    Ok(it)
}

fn power<S: TestSink>(
    sink: &mut S,
    connect: Connector<'_>,
    t: &Tests<'_>,
    stop: &AtomicBool,
) -> Result<PowerOutcome, TestError> {
    let (opts, refresh) = (t.opts, !t.subset);
    let mut conn = connect()?;
    if refresh {
        super::refresh::clean(conn.as_mut(), 1, opts.scale)?;
    }
    let canceller = super::Canceller::new(stop);
    canceller.register(conn.as_mut());
    let mut out = PowerOutcome::default();
    let mut items: Vec<Item> = Vec::new();
    if refresh {
        items.push(Item::Rf1(1));
    }
    items.extend(opts.order(0).into_iter().map(Item::Query));
    if refresh {
        items.push(Item::Rf2(1));
    }
    std::thread::scope(|s| -> Result<(), TestError> {
        s.spawn(|| canceller.watch(connect));
        let r = (|| -> Result<(), TestError> {
            for item in items {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let clock = sink.clock();
                let it = power_item(conn.as_mut(), item, opts, stop)?;
                (t.on_item)(&it);
                if it.status == Status::Cancelled {
                    break;
                }
                let mut r = StepReport::default();
                item_figures(&mut r, "", &it);
                sink.step(clock, &format!("power {}", it.item.label()), params_json(&it), r)
                    .map_err(TestError::Sink)?;
                match (&it.status, it.item) {
                    (Status::Ok, Item::Query(q)) => out.query_s.push((q, it.seconds)),
                    (Status::Ok, _) => out.refresh_s.push(it.seconds),
                    (Status::Failed(m), i) => out.failures.push(format!("{}: {m}", i.label())),
                    (Status::TimedOut | Status::Cancelled, _) => {}
                }
            }
            Ok(())
        })();
        canceller.finish();
        r
    })?;
    Ok(out)
}

/// The power test's figures in the summary; returns Power@Size when the
/// whole test ran (22 queries and both refresh functions).
fn power_summary(summary: &mut StepReport, out: &PowerOutcome, sf: f64, subset: bool) -> Option<f64> {
    let qs: Vec<f64> = out.query_s.iter().map(|x| x.1).collect();
    for (q, s) in &out.query_s {
        summary.figure(format!("q{q}.seconds"), *s, Unit::S);
    }
    for (i, s) in out.refresh_s.iter().enumerate() {
        summary.figure(format!("rf{}.seconds", i + 1), *s, Unit::S);
    }
    summary.figure("power.queries_done", qs.len() as f64, Unit::Count);
    if !qs.is_empty() {
        summary.figure("power.geomean", super::geomean(&qs), Unit::S);
        summary.figure("power.seconds", qs.iter().sum::<f64>(), Unit::S);
    }
    if !subset && qs.len() == 22 && out.refresh_s.len() == 2 {
        let p = super::power_size(sf, &qs, &out.refresh_s);
        summary.figure("tpch.power", p, Unit::Ratio);
        return Some(p);
    }
    None
}

/// What the tests share: the options, the scale, whether only a subset of
/// the queries runs, and the throughput test's stream count.
pub struct Tests<'a> {
    /// Which tests.
    pub kind: TestKind,
    /// The queries' options (scale, seed, subset, timeout).
    pub opts: &'a RunOptions,
    /// Query streams of the throughput test.
    pub streams: usize,
    /// Only some queries: no refresh functions, no Power@Size.
    pub subset: bool,
    /// Called as each item (query or refresh function) ends, from the
    /// stream's thread.
    pub on_item: &'a (dyn Fn(&ItemResult) + Sync),
}

/// Runs the throughput test as one step; adds its figures to `summary`.
fn throughput<S: TestSink>(
    sink: &mut S,
    connect: Connector<'_>,
    t: &Tests<'_>,
    stop: &AtomicBool,
    summary: &mut StepReport,
    power_size: Option<f64>,
    failures: &mut Vec<String>,
) -> Result<bool, TestError> {
    // Temp-file bytes of the whole test: the server counts them per
    // database, so concurrent streams cannot be told apart.
    let mut watch = connect()?;
    let temp_before = super::temp_bytes(watch.as_mut());
    let clock = sink.clock();
    let run =
        super::throughput(connect, t.streams, t.opts, stop, t.on_item).map_err(TestError::Throughput)?;
    let mut r = StepReport::default();
    let mut all_ok = true;
    // A query Ctrl-C cancelled measured nothing: it is left out.
    for it in run.items.iter().filter(|i| i.status != Status::Cancelled) {
        let prefix = match it.item {
            Item::Query(q) => format!("s{}.q{q}.", it.stream),
            Item::Rf1(p) => format!("rf.{p}.rf1."),
            Item::Rf2(p) => format!("rf.{p}.rf2."),
        };
        item_figures(&mut r, &prefix, it);
        match &it.status {
            Status::Ok => {}
            Status::Failed(m) => {
                all_ok = false;
                failures.push(format!("stream {} {}: {m}", it.stream, it.item.label()));
            }
            _ => all_ok = false,
        }
    }
    let per_stream = t.opts.order(0).len();
    let qs: Vec<f64> = run
        .items
        .iter()
        .filter(|i| matches!(i.item, Item::Query(_)) && i.status == Status::Ok)
        .map(|i| i.seconds)
        .collect();
    r.figure("throughput.seconds", run.seconds, Unit::S);
    if let (Some(b), Some(a)) = (temp_before, super::temp_bytes(watch.as_mut())) {
        r.figure("temp_bytes", a.saturating_sub(b) as f64, Unit::Bytes);
    }
    r.figure("throughput.streams", t.streams as f64, Unit::Count);
    if !qs.is_empty() {
        r.figure("throughput.geomean", super::geomean(&qs), Unit::S);
    }
    let complete = all_ok && !run.interrupted && qs.len() == t.streams * per_stream;
    if complete && !t.subset {
        let ts = super::throughput_size(t.opts.scale, t.streams, 22, run.seconds);
        r.figure("tpch.throughput", ts, Unit::Ratio);
        summary.figure("tpch.throughput", ts, Unit::Ratio);
        if let Some(p) = power_size {
            summary.figure("tpch.qphh", super::qphh(p, ts), Unit::Ratio);
        }
    }
    summary.figure("throughput.seconds", run.seconds, Unit::S);
    let params = throughput_params(t.streams, t.opts, &run.items);
    sink.step(clock, "throughput", params, r).map_err(TestError::Sink)?;
    Ok(run.interrupted)
}

/// Runs the tests `t` asks for, each step into `sink`, then the summary
/// step (labelled `summary`, clocked from the start). `stop` ends them
/// early; what ended is kept.
pub fn run_tests<S: TestSink>(
    sink: &mut S,
    connect: Connector<'_>,
    t: &Tests<'_>,
    stop: &AtomicBool,
) -> Result<TestOutcome, TestError> {
    let sf = t.opts.scale;
    let mut summary = StepReport::default();
    let clock = sink.clock();
    let mut failures = Vec::new();
    let mut power_size = None;
    let mut interrupted = false;
    if matches!(t.kind, TestKind::Power | TestKind::Both) {
        let note = if t.subset { " (subset: no refresh functions)" } else { "" };
        sink.phase(&format!("tpch power test, SF {sf}{note}"));
        let out = power(sink, connect, t, stop)?;
        interrupted |= stop.load(Ordering::Relaxed);
        failures.extend(out.failures.iter().cloned());
        power_size = power_summary(&mut summary, &out, sf, t.subset);
    }
    if !interrupted && matches!(t.kind, TestKind::Throughput | TestKind::Both) {
        sink.phase(&format!("tpch throughput test, SF {sf}, {} query streams + 1 refresh stream", t.streams));
        interrupted |= throughput(sink, connect, t, stop, &mut summary, power_size, &mut failures)?;
    }
    let test = format!("{:?}", t.kind).to_lowercase();
    let summary = sink.step(clock, "summary", json!({ "test": test }), summary).map_err(TestError::Sink)?;
    Ok(TestOutcome { summary, power_size, failures, interrupted })
}
