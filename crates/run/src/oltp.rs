//! What the OLTP runs (`tpcc run`, `tpcb run`) share, below their
//! terminal: driving a workload through its steps (load levels) with the
//! runner and the results store, shown through the [`Screen`] the front
//! end hands in; a build as its one step; the server settings that make figures meaningless, found
//! before a run; the validation of load levels, step times and
//! `--sensitivity`; the embedded database's file; and the summary's text
//! (the table, each step's line and flags, the verdict, wait and latency
//! lines), returned for the front end to print.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use storbench_db::{Connection, DbError, Dialect, Stmt};
use storbench_exporter::LiveValues;
use storbench_metrics::units::{format_duration, Given};
use storbench_metrics::StepReport;
use storbench_report::Table;
use storbench_workloads::runner::run_step;
use storbench_workloads::{StepError, StepResult, StepSpec, Workload};

use crate::record::{Outcome, Recorder};

/// A figure for a table: the one formatter every storbench output shares.
pub use storbench_metrics::units::format_figure as fmt_num;

/// Where a driven run shows itself: the front end's terminal.
pub trait Screen: Sync {
    /// A live line for one step (a no-op when `quiet` or not a terminal).
    fn live(&self, quiet: bool) -> Box<dyn LiveLine + '_>;
    /// A step's line as it ends (stderr).
    fn step_line(&self, line: &str);
    /// A result: the summary table and the lines under it.
    fn result(&self, text: &str);
    /// A build's progress bar, read as `bar` says (a no-op when `quiet` or
    /// not a terminal).
    fn bar(&self, quiet: bool, bar: storbench_workloads::Bar) -> Box<dyn ProgressLine + '_>;
}

/// A build's progress bar.
pub trait ProgressLine: Sync {
    /// Shows how far the build is.
    fn show(&self, p: storbench_workloads::Progress);
    /// Removes the bar.
    fn finish(&self);
}

/// One step's live line.
pub trait LiveLine {
    /// Replaces the line's message.
    fn set(&self, msg: String);
    /// Prints a line above the live line.
    fn println(&self, msg: String);
    /// Removes the line.
    fn finish(&self);
}

/// Where a step's line goes: the screen, after its live line is gone.
#[derive(Clone, Copy)]
struct Shown<'a> {
    screen: &'a dyn Screen,
    live: &'a dyn LiveLine,
}

/// How the steps are shown and labelled.
pub struct Steps<'a> {
    /// `users` (TPC-C) or `clients` (TPC-B): the step label's key.
    pub level: &'a str,
    /// One spec per step (this shard's users when sharded).
    pub specs: Vec<StepSpec>,
    /// The whole run's users or clients per step, which label the steps:
    /// shards of one run label a step alike, so `merge` can pair them.
    pub labels: Vec<usize>,
    /// Print a pgbench-style progress line every this often.
    pub progress: Option<Duration>,
    /// The live line's figures (default: TPS and mean latency).
    pub live: Option<&'a dyn Fn(&storbench_workloads::Tick) -> String>,
    /// One tick as `--metrics-addr` serves it.
    pub publish: &'a dyn Fn(&storbench_workloads::Tick) -> LiveValues,
    /// `--sensitivity`: the last step re-run at each device-time factor.
    pub sensitivity: Option<storbench_ops::sensitivity::Plan>,
    /// Sample the database's wait events (not `--no-wait-events`).
    pub waits: bool,
}

/// Starts the recorder's wait-event sampler on a connection of its own
/// when `on` (a connection that fails is said once and the run goes on),
/// and its watch of the server's CPU either way.
pub fn sample_waits(
    rec: &mut Recorder,
    on: bool,
    connect: &(dyn Fn() -> Result<Box<dyn Connection>, DbError> + Sync),
) {
    match connect() {
        Ok(mut c) => {
            rec.watch_server(c.as_mut());
            if on {
                rec.sample_waits(c);
            }
        }
        Err(e) if on => rec.note(&format!("no wait events: the sampler could not connect: {e}")),
        Err(_) => {}
    }
}

/// Runs every step, writing each as it ends; returns the run's exit code.
/// `warnings` are the run's flags (settings that make its figures
/// meaningless), shown beside every step's figures.
pub fn run_steps(
    mut rec: Recorder,
    screen: &dyn Screen,
    w: &dyn Workload,
    connect: &(dyn Fn() -> Result<Box<dyn Connection>, DbError> + Sync),
    steps: Steps<'_>,
    warnings: &[String],
) -> Result<ExitCode> {
    let stop = crate::interrupt::flag();
    let n = steps.specs.len();
    let mut summary: Vec<(String, StepReport, Vec<String>)> = Vec::new();
    let mut outcome = Outcome::Complete;
    sample_waits(&mut rec, steps.waits, connect);
    for (i, spec) in steps.specs.iter().enumerate() {
        // The whole run's load labels the step (a shard runs part of it).
        let whole = steps.labels.get(i).copied().unwrap_or(spec.users);
        let label = format!("{}={whole}", steps.level);
        // One live line per step, gone before the step's line is printed.
        let live = screen.live(rec.quiet());
        let clock = rec.clock();
        rec.live_step(&label);
        let mut view = StepView {
            steps: &steps,
            live: live.as_ref(),
            head: format!("step {}/{n} {label}", i + 1),
            acc: (0.0, 0.0, 0.0),
            last_print: Duration::ZERO,
        };
        let res = run_step(w, connect, spec, stop, &mut |t| {
            rec.publish(|| (steps.publish)(t));
            view.tick(t);
        });
        let (res, failure) = match res {
            Ok(r) => (Some(r), None),
            Err(StepError::Lost { waited, source, partial }) => (
                *partial,
                Some(anyhow!(
                    "step {label}: the database was lost and did not come back within {waited:?}: {source}"
                )),
            ),
            Err(e) => (None, Some(anyhow!("step {label}: {e}"))),
        };
        if let Some(r) = res {
            let stopped = r.stopped;
            if r.window > Duration::ZERO {
                let partial = failure.is_some() || r.stopped;
                let done = Done { label: &label, whole, spec, partial };
                let shown = Shown { screen, live: live.as_ref() };
                summary.push(record_step(&mut rec, clock, w, &steps, done, r, warnings, shown, Value::Null)?);
            }
            if stopped {
                outcome = Outcome::Interrupted;
                break;
            }
        }
        if let Some(e) = failure {
            outcome = Outcome::Failed(e);
            break;
        }
        if crate::interrupt::requested() {
            outcome = Outcome::Interrupted;
            break;
        }
    }
    // The storage sensitivity of the last (top) step: only after a whole
    // run, and only for a step measured in full.
    let mut sens_lines = Vec::new();
    if let (Some(plan), Outcome::Complete, Some(base)) =
        (&steps.sensitivity, &outcome, rec.last_idx().filter(|_| summary.len() == n))
    {
        match sensitivity(&mut rec, screen, plan, base, w, connect, &steps, warnings) {
            Ok(lines) => sens_lines = lines,
            Err(o) => outcome = o,
        }
    }
    if !summary.is_empty() {
        screen.result(&summary_table(w.columns(), &summary));
        // What the latency tells that the summary's figures do not (a mean
        // above p99, a p99.9 that jumps between steps), as the report says it.
        for line in latency_story(&rec) {
            screen.result(&line);
        }
        // What limited each step, with the numbers that decide it.
        for line in verdict_lines(rec.verdicts()) {
            screen.result(&line);
        }
        // What the database's sessions waited on, its top classes.
        for line in wait_lines(&rec) {
            screen.result(&line);
        }
        // What faster or slower storage would buy (--sensitivity).
        for line in sens_lines {
            screen.result(&line);
        }
    }
    rec.finish(outcome)
}

/// Re-runs the last step (index `base` in the store) at each of the
/// plan's device-time factors, each recorded as a step tagged
/// `params.sensitivity`, the medium back at 1 after each; then writes the
/// base step's sensitivity note. Returns the lines to print, or the
/// run's outcome when a re-run failed or was interrupted.
#[allow(clippy::too_many_arguments)]
fn sensitivity(
    rec: &mut Recorder,
    screen: &dyn Screen,
    plan: &storbench_ops::sensitivity::Plan,
    base: i64,
    w: &dyn Workload,
    connect: &(dyn Fn() -> Result<Box<dyn Connection>, DbError> + Sync),
    steps: &Steps<'_>,
    warnings: &[String],
) -> Result<Vec<String>, Outcome> {
    let stop = crate::interrupt::flag();
    let i = steps.specs.len() - 1;
    let whole = steps.labels.get(i).copied().unwrap_or(steps.specs[i].users);
    let base_label = format!("{}={whole}", steps.level);
    let mut spec = steps.specs[i].clone();
    spec.duration = plan.duration.unwrap_or(spec.duration);
    let mut interrupted = false;
    let ran = plan.each(&crate::interrupt::requested, |f| -> Result<(), Outcome> {
        let label = format!("{base_label} ×{f}");
        let live = screen.live(rec.quiet());
        let clock = rec.clock();
        rec.live_step(&label);
        let mut view = StepView {
            steps,
            live: live.as_ref(),
            head: format!("sensitivity {label}"),
            acc: (0.0, 0.0, 0.0),
            last_print: Duration::ZERO,
        };
        let r = run_step(w, connect, &spec, stop, &mut |t| view.tick(t))
            .map_err(|e| Outcome::Failed(anyhow!("sensitivity step {label}: {e}")))?;
        if r.stopped || r.window == Duration::ZERO {
            interrupted = true;
            return Ok(());
        }
        let done = Done { label: &label, whole, spec: &spec, partial: false };
        let tag = json!({ "scale": f, "of": base, "medium": plan.medium });
        let shown = Shown { screen, live: live.as_ref() };
        record_step(rec, clock, w, steps, done, r, warnings, shown, tag).map_err(Outcome::Failed)?;
        Ok(())
    });
    match ran {
        Err(o) => return Err(o),
        Ok(_) if interrupted || crate::interrupt::requested() => return Err(Outcome::Interrupted),
        Ok(_) => {}
    }
    let s = rec.write_sensitivity(base).map_err(Outcome::Failed)?;
    Ok(s.map(|s| format!("sensitivity {}: {}", s.label, s.sentence())).into_iter().collect())
}

/// The live line and `--progress` lines of one step.
struct StepView<'a> {
    steps: &'a Steps<'a>,
    live: &'a dyn LiveLine,
    /// `step 2/5 users=4`.
    head: String,
    /// Since the last progress line: transactions, latency x transactions, seconds.
    acc: (f64, f64, f64),
    last_print: Duration,
}

impl StepView<'_> {
    fn tick(&mut self, t: &storbench_workloads::Tick) {
        let phase = if t.rampup { "ramp-up" } else { "measuring" };
        let figures = match self.steps.live {
            Some(f) => f(t),
            None => format!("{:.0} tps  lat {:.2} ms", t.tps, t.lat_mean_us / 1e3),
        };
        self.live.set(format!(
            "{}  {} {}  {figures}  errors {}",
            self.head,
            phase,
            format_duration(Duration::from_secs(t.elapsed.as_secs())),
            t.errors
        ));
        let Some(every) = self.steps.progress else { return };
        let (n, lat, secs) = &mut self.acc;
        *n += t.tps;
        *lat += t.lat_mean_us * t.tps;
        *secs += 1.0;
        if t.elapsed >= self.last_print + every {
            let tps = *n / secs.max(1.0);
            let mean = if *n > 0.0 { *lat / *n / 1e3 } else { 0.0 };
            self.live.println(format!(
                "progress: {:.1} s, {tps:.1} tps, lat {mean:.3} ms, {} failed",
                t.elapsed.as_secs_f64(),
                t.errors
            ));
            self.acc = (0.0, 0.0, 0.0);
            self.last_print = t.elapsed;
        }
    }
}

/// A step that measured something: what labels it.
struct Done<'a> {
    label: &'a str,
    /// The whole run's users or clients (a shard runs `spec.users` of them).
    whole: usize,
    spec: &'a StepSpec,
    partial: bool,
}

/// Writes a finished step (with the workload's derived figures and, for a
/// sensitivity re-run, its tag `params.sensitivity` unless `tag` is null)
/// and prints its line; returns its summary row's figures and flags.
#[allow(clippy::too_many_arguments)]
fn record_step(
    rec: &mut Recorder,
    mut clock: crate::record::StepClock,
    w: &dyn Workload,
    steps: &Steps<'_>,
    d: Done<'_>,
    r: StepResult,
    warnings: &[String],
    shown: Shown<'_>,
    tag: Value,
) -> Result<(String, StepReport, Vec<String>)> {
    clock.start = r.started;
    clock.measure_from = r.measure_from;
    let mut report = r.report;
    w.derive(&mut report, r.window);
    let mut params = json!({
        steps.level: d.whole,
        "rampup_s": d.spec.rampup.as_secs_f64(),
        "duration_s": d.spec.duration.as_secs_f64(),
        "rate": d.spec.rate,
        "partial": d.partial,
    });
    if d.whole != d.spec.users {
        params["shard_users"] = json!(d.spec.users);
    }
    if let Some(e) = &r.probe_error {
        params["probe_error"] = json!(e);
    }
    if !tag.is_null() {
        params[storbench_report::sensitivity::PARAM] = tag;
    }
    let figures = rec.write_step(clock, d.label, params, report)?;
    let mut f = flags(warnings, &figures);
    if let Some(e) = &r.probe_error {
        f.push(format!("no figures from the database's edges of the window ({e})"));
    }
    shown.live.finish();
    shown.screen.step_line(&line(d.label, &figures, w.columns(), d.partial, &f));
    Ok((d.label.to_string(), figures, f))
}

/// A build or init as its one recorded step, the same for every workload:
/// runs `load` with the step's clock started, writes the figures it returns
/// (each workload's `BuildStats::report`) under `step`, prints its result
/// line, and finishes the run — or records the outcome `load` gave instead.
pub fn build_step(
    screen: &dyn Screen,
    mut rec: Recorder,
    step: &str,
    params: Value,
    load: impl FnOnce() -> Result<(StepReport, String), Outcome>,
) -> Result<ExitCode> {
    let clock = rec.clock();
    match load() {
        Ok((figures, line)) => {
            rec.write_step(clock, step, params, figures)?;
            screen.result(&line);
            rec.finish(Outcome::Complete)
        }
        Err(outcome) => rec.finish(outcome),
    }
}

/// Each step's verdict: "verdict clients=16 [contention]: TPS stops
/// growing …", wrapped at 120 columns.
pub fn verdict_lines(verdicts: &[storbench_report::verdict::Verdict]) -> Vec<String> {
    verdicts.iter().flat_map(|v| v.lines()).collect()
}

/// One line per step with wait events recorded: "waits clients=8:
/// Lock:transactionid 77 %, … of 6.7 active sessions", from the store.
pub fn wait_lines(rec: &Recorder) -> Vec<String> {
    let (store, id) = rec.recorded();
    let Ok(run) = store.run(&id.to_string()) else { return Vec::new() };
    let Ok(data) = storbench_report::RunData::load(store, run) else { return Vec::new() };
    data.steps
        .iter()
        .filter_map(|s| Some(format!("waits {}: {}", s.label, storbench_report::waits::step_words(s)?)))
        .collect()
}

/// The report's latency sentences for the run `rec` has recorded so far.
pub fn latency_story(rec: &Recorder) -> Vec<String> {
    let (store, id) = rec.recorded();
    storbench_report::Report::load(store, &[id.to_string()])
        .map(|r| r.findings().into_iter().flat_map(|f| f.latency).collect())
        .unwrap_or_default()
}

/// The run's summary: a row per step, the workload's columns, the system
/// monitor's (a column no step has a figure for is left out), and the
/// step's flags as numbered notes, each written once below the table (the
/// same flag on every step would otherwise widen every row by a sentence).
pub fn summary_table(columns: &[(&str, &str)], summary: &[(String, StepReport, Vec<String>)]) -> String {
    let mut head = vec!["step".to_string()];
    head.extend(columns.iter().map(|(_, h)| h.to_string()));
    head.extend(["iowait %", "dev r_await ms", "dev w_await ms"].map(String::from));
    let mut notes: Vec<&str> = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (label, r, flags) in summary {
        let mut row = vec![label.clone()];
        row.extend(columns.iter().map(|(f, _)| r.get(f).map(fmt_num).unwrap_or_else(|| "-".into())));
        row.extend(crate::record::system_columns(r));
        let refs: Vec<String> = flags
            .iter()
            .map(|f| {
                let at = notes.iter().position(|n| n == f).unwrap_or_else(|| {
                    notes.push(f);
                    notes.len() - 1
                });
                format!("[{}]", at + 1)
            })
            .collect();
        row.push(refs.join(" "));
        rows.push(row);
    }
    if !notes.is_empty() {
        head.push("flags".into());
    }
    let keep: Vec<usize> = (0..head.len())
        .filter(|&i| i == 0 || rows.iter().any(|r| r.get(i).is_some_and(|v| v != "-")))
        .collect();
    let mut t = Table::with_header(keep.iter().map(|&i| head[i].clone()));
    for r in &rows {
        t.add_row(keep.iter().map(|&i| r.get(i).cloned().unwrap_or_default()));
    }
    let mut out = t.to_text().trim_end_matches('\n').to_string();
    for (i, n) in notes.iter().enumerate() {
        out.push_str(&format!("\n[{}] {n}", i + 1));
    }
    out
}

/// The flags beside a step's figures: the run's settings warnings and the
/// step's own (CPU steal, from the system monitor's `flag.steal`; server
/// counts over a window too short to hold them, or that went back).
pub fn flags(warnings: &[String], r: &StepReport) -> Vec<String> {
    let mut f = warnings.to_vec();
    if let Some(steal) = r.get("flag.steal") {
        f.push(format!("cpu steal {steal:.0}%"));
    }
    if let Some(secs) = r.get(storbench_workloads::figures::SHORT_SERVER_WINDOW) {
        let ok = storbench_workloads::figures::SERVER_WINDOW_OK.as_secs();
        let kept = if secs < storbench_workloads::figures::SERVER_WINDOW_MIN.as_secs_f64() {
            "left out"
        } else {
            "approximate"
        };
        f.push(format!(
            "server counts {kept}: a {secs:.1} s window (the server publishes them once a second; steps of {ok} s or more hold them)"
        ));
    }
    let reset = storbench_workloads::figures::SERVER_RESET;
    if let Some(v) = r.get(reset) {
        // The report's words for it too (one wording, the figures crate's).
        f.extend(storbench_workloads::figures::flag_words(reset.trim_start_matches("flag."), v));
    }
    f
}

/// A step's line as it ends: its label, the workload's columns, whether
/// it is partial, and its flags.
pub fn line(
    label: &str,
    r: &StepReport,
    columns: &[(&str, &str)],
    partial: bool,
    flags: &[String],
) -> String {
    let mut s = format!("{label}:");
    for (f, h) in columns {
        if let Some(v) = r.get(f) {
            s.push_str(&format!("  {h} {}", fmt_num(v)));
        }
    }
    if partial {
        s.push_str("  (partial step)");
    }
    if !flags.is_empty() {
        s.push_str(&format!("  [flagged: {}]", flags.join(", ")));
    }
    s
}

/// A run of this length or longer is "long": autovacuum's default naptime
/// is a minute, so in a shorter run it would not have run anyway.
pub const LONG_RUN: Duration = Duration::from_secs(60);

/// The server's durability and maintenance settings (`durability` in the
/// environment) and the warnings for those that make a benchmark's figures
/// meaningless: PostgreSQL's `fsync=off`, `full_page_writes=off`,
/// `synchronous_commit` other than asked for (a managed instance's own
/// setting is what was asked), autovacuum off on a run of `run_time` ≥ 1
/// min; MySQL's `innodb_flush_log_at_trx_commit` ≠ 1 and, with a binary
/// log, `sync_binlog` ≠ 1; SQLite's `synchronous=off`.
pub fn durability(conn: &mut dyn Connection, env_db: &Value, run_time: Duration) -> (Value, Vec<String>) {
    let mut settings = serde_json::Map::new();
    let mut warn = Vec::new();
    let text = |r: &storbench_db::Row, i: usize| {
        r.text(i).or_else(|_| r.int(i).map(|v| v.to_string())).unwrap_or_default()
    };
    match conn.dialect() {
        Dialect::Postgres => {
            let q = Stmt::new(
                "SELECT name, setting FROM pg_settings WHERE name IN \
                 ('fsync', 'full_page_writes', 'synchronous_commit', 'autovacuum')",
            );
            for r in conn.query(&q, &[]).unwrap_or_default() {
                settings.insert(text(&r, 0), json!(text(&r, 1)));
            }
            let get = |k: &str| settings.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            for k in ["fsync", "full_page_writes"] {
                if get(k) == "off" {
                    warn.push(format!("{k}=off"));
                }
            }
            let asked = env_db["managed"]["settings"].as_array().and_then(|a| {
                a.iter()
                    .find(|kv| kv[0] == "synchronous_commit")
                    .and_then(|kv| kv[1].as_str().map(String::from))
            });
            let sc = get("synchronous_commit");
            if !sc.is_empty() && sc != asked.unwrap_or_else(|| "on".into()) {
                warn.push(format!("synchronous_commit={sc}"));
            }
            if get("autovacuum") == "off" && run_time >= LONG_RUN {
                warn.push(format!("autovacuum=off on a {} run", format_duration(run_time)));
            }
        }
        Dialect::Mysql => {
            let q = Stmt::new("SELECT @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin");
            if let Ok(r) = conn.query_one(&q, &[]) {
                let (flush, sync, log_bin) = (text(&r, 0), text(&r, 1), text(&r, 2));
                if !flush.is_empty() && flush != "1" {
                    warn.push(format!("innodb_flush_log_at_trx_commit={flush}"));
                }
                let binlog_on = log_bin == "1" || log_bin.eq_ignore_ascii_case("on");
                if binlog_on && sync != "1" {
                    warn.push(format!("sync_binlog={sync}"));
                }
                settings.insert("innodb_flush_log_at_trx_commit".into(), json!(flush));
                settings.insert("sync_binlog".into(), json!(sync));
                settings.insert("log_bin".into(), json!(log_bin));
            }
        }
        Dialect::Sqlite => {
            if let Some(v) = env_db["settings"]["synchronous"].as_str() {
                settings.insert("synchronous".into(), json!(v));
                if v == "off" {
                    warn.push("synchronous=off".into());
                }
            }
        }
    }
    (Value::Object(settings), warn)
}

/// The parsed `--sensitivity`: its factors, and the re-runs' duration where
/// `--sensitivity-duration` sets one.
pub type Factors = (Vec<f64>, Option<Duration>);

/// The sensitivity plan of a run whose data lives under `targets`: bad
/// input (exit 2) when they are on no modelled medium.
pub fn sensitivity_plan(
    parsed: Option<Factors>,
    targets: &[std::path::PathBuf],
) -> Result<Option<storbench_ops::sensitivity::Plan>> {
    let Some((factors, duration)) = parsed else { return Ok(None) };
    let medium = storbench_ops::sensitivity::medium_for(targets).map_err(crate::error::ops_err)?;
    Ok(Some(storbench_ops::sensitivity::Plan { medium, factors, duration }))
}

/// The embedded database's file: the URL's path without its options
/// (`?synchronous=off`).
pub fn sqlite_file(db: &crate::dbarg::Db) -> Option<std::path::PathBuf> {
    db.sqlite_path().map(|p| match p.to_str().and_then(|s| s.split_once('?')) {
        Some((file, _)) => std::path::PathBuf::from(file),
        None => p,
    })
}

/// An embedded database must exist before a run (`build` is the hint).
pub fn require_sqlite_file(db: &crate::dbarg::Db, build: &str) -> Result<()> {
    if let Some(p) = sqlite_file(db).filter(|p| !p.exists()) {
        return Err(crate::error::usage(format!(
            "{} does not exist: run `storbench {build} --db {}` first",
            p.display(),
            db.shown
        )));
    }
    Ok(())
}

/// Loading connections when `--jobs` is not given: one per CPU.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
}

/// Makes the directory of an embedded database (for `init`/`build`).
pub fn make_sqlite_dir(db: &crate::dbarg::Db) -> Result<()> {
    if let Some(p) = sqlite_file(db) {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| crate::error::usage(format!("cannot create {}: {e}", dir.display())))?;
        }
    }
    Ok(())
}

/// Says the run's warnings as one note (nothing when none).
pub fn warn_line(rec: &Recorder, warnings: &[String]) {
    if !warnings.is_empty() {
        rec.note(&format!(
            "warning: {}: these figures do not show what a durable, maintained server would do",
            warnings.join(", ")
        ));
    }
}

/// `--sensitivity` and `--sensitivity-duration` as the front end typed
/// them (the factors by [`storbench_ops::sensitivity::parse_factors`], the
/// duration more than zero): how they go together, with no side effect.
/// `None` without `--sensitivity`; the duration alone, or either with
/// `--shard`, is refused. The medium is found later, from the data's
/// directory ([`sensitivity_plan`]).
pub fn sensitivity_flags(
    factors: Option<&Given<Vec<f64>>>,
    duration: Option<&Given<Duration>>,
    sharded: bool,
) -> Result<Option<Factors>> {
    use crate::error::usage;
    let Some(f) = factors else {
        if let Some(d) = duration {
            return Err(usage(format!("--sensitivity-duration {}: only with --sensitivity", d.text)));
        }
        return Ok(None);
    };
    if sharded {
        return Err(usage(
            "--sensitivity with --shard: scale the medium from one process (run without shards)",
        ));
    }
    Ok(Some((f.value.clone(), duration.map(|d| d.value))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_reset_is_flagged_on_the_step_line_in_the_reports_words() {
        let mut r = StepReport::default();
        r.figure(storbench_workloads::figures::SERVER_RESET, 1.0, storbench_metrics::Unit::Count);
        let f = flags(&[], &r);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(Some(f[0].clone()), storbench_workloads::figures::flag_words("server_reset", 1.0));
        assert!(flags(&[], &StepReport::default()).is_empty());
    }

    #[test]
    fn sensitivity_flags_go_together_and_not_with_shards() {
        let factors = Given { value: vec![0.5, 2.0], text: "0.5,2".to_string() };
        let d = Given { value: Duration::from_secs(3), text: "3s".to_string() };
        assert_eq!(sensitivity_flags(None, None, true).unwrap(), None);
        let both = sensitivity_flags(Some(&factors), Some(&d), false).unwrap();
        assert_eq!(both, Some((vec![0.5, 2.0], Some(Duration::from_secs(3)))));
        let e = sensitivity_flags(None, Some(&d), false).unwrap_err().to_string();
        assert_eq!(e, "--sensitivity-duration 3s: only with --sensitivity");
        let e = sensitivity_flags(Some(&factors), None, true).unwrap_err().to_string();
        assert!(e.starts_with("--sensitivity with --shard"), "{e}");
    }
}
