//! Driving a database workload through its steps (load levels) with the
//! runner, the live line, `--progress` lines, and the results store: the
//! part `tpcc run` and `tpcb run` share.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::json;
use storbench_db::{Connection, DbError};
use storbench_metrics::{units::format_duration, StepReport};
use storbench_workloads::runner::run_step;
use storbench_workloads::{StepError, StepSpec, Workload};

use crate::live::Live;
use crate::record::{Outcome, Recorder};

/// How the steps are shown and labelled.
pub struct Steps<'a> {
    /// `users` (TPC-C) or `clients` (TPC-B): the step label's key.
    pub level: &'a str,
    /// One spec per step.
    pub specs: Vec<StepSpec>,
    /// Print a pgbench-style progress line every this often.
    pub progress: Option<Duration>,
    /// Figures shown in the live line and the summary: (figure, heading).
    pub columns: &'a [(&'a str, &'a str)],
    /// Adds workload-specific figures and samples to a finished step.
    /// Gets the step's report and its measured window.
    pub decorate: &'a dyn Fn(&mut StepReport, Duration),
    /// The live line's figures (default: TPS and mean latency).
    pub live: Option<&'a dyn Fn(&storbench_workloads::Tick) -> String>,
}

/// Runs every step, writing each as it ends; returns the run's exit code.
pub fn run_steps(
    mut rec: Recorder,
    quiet: bool,
    w: &dyn Workload,
    connect: &(dyn Fn() -> Result<Box<dyn Connection>, DbError> + Sync),
    steps: Steps<'_>,
) -> Result<ExitCode> {
    let stop = crate::interrupt::flag();
    let live = Live::line(quiet);
    let n = steps.specs.len();
    let mut summary: Vec<(String, StepReport)> = Vec::new();
    let mut outcome = Outcome::Complete;
    for (i, spec) in steps.specs.iter().enumerate() {
        let label = format!("{}={}", steps.level, spec.users);
        let mut clock = rec.clock();
        let (mut acc_n, mut acc_lat, mut acc_t) = (0.0f64, 0.0f64, 0.0f64);
        let mut last_print = Duration::ZERO;
        let res = run_step(w, connect, spec, stop, &mut |t| {
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
                let params = json!({
                    steps.level: spec.users,
                    "rampup_s": spec.rampup.as_secs_f64(),
                    "duration_s": spec.duration.as_secs_f64(),
                    "rate": spec.rate,
                    "partial": partial,
                });
                if !quiet {
                    live.println(line(&label, &report, steps.columns, partial));
                }
                let figures = rec.write_step(clock, &label, params, report)?;
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
    live.finish();
    if !quiet && !summary.is_empty() {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        let mut head = vec!["step".to_string()];
        head.extend(steps.columns.iter().map(|(_, h)| h.to_string()));
        head.extend(["iowait %", "dev r_await ms", "dev w_await ms"].map(String::from));
        t.set_header(head);
        for (label, r) in &summary {
            let mut row = vec![label.clone()];
            row.extend(
                steps.columns.iter().map(|(f, _)| r.get(f).map(fmt_num).unwrap_or_else(|| "-".into())),
            );
            row.extend(crate::record::system_columns(r));
            t.add_row(row);
        }
        eprintln!("{t}");
    }
    rec.finish(outcome)
}

fn line(label: &str, r: &StepReport, columns: &[(&str, &str)], partial: bool) -> String {
    let mut s = format!("{label}:");
    for (f, h) in columns {
        if let Some(v) = r.get(f) {
            s.push_str(&format!("  {h} {}", fmt_num(v)));
        }
    }
    if partial {
        s.push_str("  (partial step)");
    }
    s
}

/// A figure for a table: integers without decimals, small values with two.
pub fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
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

/// An embedded database must exist before a run (`build` is the hint).
pub fn require_sqlite_file(db: &crate::dbarg::Db, build: &str) -> Result<()> {
    if let Some(p) = db.sqlite_path().filter(|p| !p.exists()) {
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
    if let Some(p) = db.sqlite_path() {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| crate::error::usage(format!("cannot create {}: {e}", dir.display())))?;
        }
    }
    Ok(())
}
