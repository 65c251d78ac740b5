//! Driving a database workload through its steps (load levels) with the
//! runner, the live line, `--progress` lines, and the results store: the
//! part `tpcc run` and `tpcb run` share; and the server settings that make
//! their figures meaningless, found before the run and flagged.
//!
//! Output: the results (the summary table) on stdout, or on stderr with
//! `--json`, whose run record then is stdout's only content; the live line,
//! each step's line as it ends, `--progress` lines and the one-line warning
//! on stderr. `--quiet` hides only the live line.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::json;
use serde_json::Value;
use storbench_db::{Connection, DbError, Dialect, Stmt};
use storbench_metrics::{units::format_duration, StepReport};
use storbench_workloads::runner::run_step;
use storbench_workloads::{StepError, StepSpec, Workload};

use crate::cli::Global;
use crate::live::Live;
use crate::record::{Outcome, Recorder};
use storbench_cluster::LiveValues;

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
    /// Figures shown in the live line and the summary: (figure, heading).
    pub columns: &'a [(&'a str, &'a str)],
    /// Adds workload-specific figures and samples to a finished step.
    /// Gets the step's report and its measured window.
    pub decorate: &'a dyn Fn(&mut StepReport, Duration),
    /// The live line's figures (default: TPS and mean latency).
    pub live: Option<&'a dyn Fn(&storbench_workloads::Tick) -> String>,
    /// One tick as `--metrics-addr` serves it.
    pub publish: &'a dyn Fn(&storbench_workloads::Tick) -> LiveValues,
}

/// Prints a result: on stdout, or on stderr with `--json` (stdout then
/// carries only the run record).
pub fn result(g: &Global, text: impl AsRef<str>) {
    if g.json {
        eprintln!("{}", text.as_ref());
    } else {
        println!("{}", text.as_ref());
    }
}

/// Runs every step, writing each as it ends; returns the run's exit code.
/// `warnings` are the run's flags (settings that make its figures
/// meaningless), shown beside every step's figures.
pub fn run_steps(
    mut rec: Recorder,
    g: &Global,
    w: &dyn Workload,
    connect: &(dyn Fn() -> Result<Box<dyn Connection>, DbError> + Sync),
    steps: Steps<'_>,
    warnings: &[String],
) -> Result<ExitCode> {
    let stop = crate::interrupt::flag();
    let n = steps.specs.len();
    let mut summary: Vec<(String, StepReport)> = Vec::new();
    let mut outcome = Outcome::Complete;
    for (i, spec) in steps.specs.iter().enumerate() {
        // The whole run's load labels the step (a shard runs part of it).
        let whole = steps.labels.get(i).copied().unwrap_or(spec.users);
        let label = format!("{}={whole}", steps.level);
        // One live line per step, gone before the step's line is printed.
        let live = Live::line(g.quiet);
        let mut clock = rec.clock();
        rec.live_step(&label);
        let (mut acc_n, mut acc_lat, mut acc_t) = (0.0f64, 0.0f64, 0.0f64);
        let mut last_print = Duration::ZERO;
        let res = run_step(w, connect, spec, stop, &mut |t| {
            rec.publish(|| (steps.publish)(t));
            let phase = if t.rampup { "ramp-up" } else { "measuring" };
            let figures = match steps.live {
                Some(f) => f(t),
                None => format!("{:.0} tps  lat {:.2} ms", t.tps, t.lat_mean_us / 1e3),
            };
            live.set(format!(
                "step {}/{n} {label}  {} {}  {figures}  errors {}",
                i + 1,
                phase,
                format_duration(Duration::from_secs(t.elapsed.as_secs())),
                t.errors
            ));
            if let Some(every) = steps.progress {
                acc_n += t.tps;
                acc_lat += t.lat_mean_us * t.tps;
                acc_t += 1.0;
                if t.elapsed >= last_print + every {
                    let tps = acc_n / acc_t.max(1.0);
                    let lat = if acc_n > 0.0 { acc_lat / acc_n / 1e3 } else { 0.0 };
                    live.println(format!(
                        "progress: {:.1} s, {tps:.1} tps, lat {lat:.3} ms, {} failed",
                        t.elapsed.as_secs_f64(),
                        t.errors
                    ));
                    (acc_n, acc_lat, acc_t) = (0.0, 0.0, 0.0);
                    last_print = t.elapsed;
                }
            }
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
            if r.window > Duration::ZERO {
                clock.start = r.started;
                clock.measure_from = r.measure_from;
                let mut report = r.report;
                (steps.decorate)(&mut report, r.window);
                let partial = failure.is_some() || r.stopped;
                let mut params = json!({
                    steps.level: whole,
                    "rampup_s": spec.rampup.as_secs_f64(),
                    "duration_s": spec.duration.as_secs_f64(),
                    "rate": spec.rate,
                    "partial": partial,
                });
                if whole != spec.users {
                    params["shard_users"] = json!(spec.users);
                }
                let figures = rec.write_step(clock, &label, params, report)?;
                live.finish();
                eprintln!("{}", line(&label, &figures, steps.columns, partial, &flags(warnings, &figures)));
                summary.push((label.clone(), figures));
                if r.stopped {
                    outcome = Outcome::Interrupted;
                    break;
                }
            } else if r.stopped {
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
    if !summary.is_empty() {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        let mut head = vec!["step".to_string()];
        head.extend(steps.columns.iter().map(|(_, h)| h.to_string()));
        head.extend(["iowait %", "dev r_await ms", "dev w_await ms", "flags"].map(String::from));
        t.set_header(head);
        for (label, r) in &summary {
            let mut row = vec![label.clone()];
            row.extend(
                steps.columns.iter().map(|(f, _)| r.get(f).map(fmt_num).unwrap_or_else(|| "-".into())),
            );
            row.extend(crate::record::system_columns(r));
            row.push(flags(warnings, r).join(", "));
            t.add_row(row);
        }
        result(g, t.to_string());
    }
    rec.finish(outcome)
}

/// The flags beside a step's figures: the run's settings warnings and the
/// step's own (CPU steal, from the system monitor's `flag.steal`).
fn flags(warnings: &[String], r: &StepReport) -> Vec<String> {
    let mut f = warnings.to_vec();
    if let Some(steal) = r.get("flag.steal") {
        f.push(format!("cpu steal {steal:.0}%"));
    }
    f
}

fn line(label: &str, r: &StepReport, columns: &[(&str, &str)], partial: bool, flags: &[String]) -> String {
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

/// A figure for a table: the one formatter every storbench output shares.
pub use storbench_metrics::units::format_figure as fmt_num;
/// A run of this length or longer is "long": autovacuum's default naptime
/// is a minute, so in a shorter run it would not have run anyway.
const LONG_RUN: Duration = Duration::from_secs(60);

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

/// Prints the run's warnings as one line on stderr (nothing when none).
pub fn warn_line(warnings: &[String]) {
    if !warnings.is_empty() {
        eprintln!(
            "storbench: warning: {}: these figures do not show what a durable, maintained server would do",
            warnings.join(", ")
        );
    }
}

/// What every OLTP `run` validates alike: load levels, step times.
pub struct Timing {
    /// Users or clients per step.
    pub levels: Vec<usize>,
    /// Measured time per step.
    pub duration: Duration,
    /// Ramp-up per step.
    pub rampup: Duration,
    /// How long a lost connection is retried.
    pub reconnect_for: Duration,
}

/// Parses `--users`/`--clients` (named by `flag`), `--duration`, `--rampup`
/// and `--reconnect-for`, with one-line errors naming the bad value.
pub fn parse_timing(
    flag: &str,
    levels: &str,
    duration: &str,
    rampup: &str,
    reconnect_for: &str,
) -> Result<Timing> {
    use crate::error::usage;
    use storbench_metrics::units::{parse_duration, parse_list};
    let list = parse_list(levels).map_err(|e| usage(format!("--{flag} {levels}: {e}")))?;
    if list.iter().any(|&c| c == 0 || c > 10_000) {
        return Err(usage(format!("--{flag} {levels}: each must be 1 to 10000")));
    }
    let dur = |name: &str, v: &str| parse_duration(v).map_err(|e| usage(format!("--{name} {v}: {e}")));
    let duration_v = dur("duration", duration)?;
    if duration_v.is_zero() {
        return Err(usage(format!("--duration {duration}: must be more than zero")));
    }
    Ok(Timing {
        levels: list.into_iter().map(|c| c as usize).collect(),
        duration: duration_v,
        rampup: dur("rampup", rampup)?,
        reconnect_for: dur("reconnect-for", reconnect_for)?,
    })
}

/// The embedded database's file: the URL's path without its options
/// (`?synchronous=off`).
fn sqlite_file(db: &crate::dbarg::Db) -> Option<std::path::PathBuf> {
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
