//! An `io` run's profiles, each a recorded step, and their storage
//! sensitivity re-runs, shown through the front end's [`Screen`]; the
//! results table's text; what makes the numbers comparable.

use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use storbench_exporter::LiveValues;
use storbench_io::{run_profile, Prepared, Profile, RunOptions, Tick, Verdict};
use storbench_metrics::units::format_size;
use storbench_metrics::StepReport;
use storbench_report::Table;

use crate::error::target_failed;
use crate::oltp::{fmt_num, Screen};
use crate::record::{Outcome, Recorder};

/// An io step's second for the live line: `what` (which step), then
/// ramp-up or not, its time, IOPS, MB/s and p99 latency.
pub fn tick_line(what: &str, t: &Tick) -> String {
    format!(
        "{what}  {}{}s  {:.0} IOPS  {:.1} MB/s  p99 {:.0} µs",
        if t.rampup { "ramp-up " } else { "" },
        t.elapsed.as_secs(),
        t.iops,
        t.mbps,
        t.p99_us
    )
}

/// Re-runs the last profile (step `base`) once per factor on its modelled
/// medium at that time scale (back at 1 after each), each recorded as a
/// step tagged `params.sensitivity`; then writes the base step's
/// sensitivity note. The lines to print, or the run's outcome on failure.
pub fn sensitivity_reruns(
    screen: &dyn Screen,
    rec: &mut Recorder,
    prep: &Prepared,
    p: &Profile,
    verify: bool,
    plan: &storbench_ops::sensitivity::Plan,
    base: i64,
) -> Result<Vec<String>, Outcome> {
    let opts = RunOptions { engine: prep.engine.clone(), verify };
    let mut p = p.clone();
    p.duration = plan.duration.unwrap_or(p.duration);
    let live = screen.live(rec.quiet());
    let mut stopped = false;
    let ran = plan.each(&crate::interrupt::requested, |f| -> Result<(), Outcome> {
        let label = format!("{} ×{f}", p.name);
        let mut clock = rec.clock();
        let what = format!("sensitivity {label}");
        let r = run_profile(&p, &prep.target, &opts, crate::interrupt::flag(), &mut |t| {
            live.set(tick_line(&what, t))
        })
        .map_err(|e| Outcome::Failed(target_failed(format!("sensitivity {label}: {e}"))))?;
        match r.verdict(&p) {
            Verdict::Complete => {}
            Verdict::Stopped => {
                stopped = true;
                return Ok(());
            }
            Verdict::Failed(why) => return Err(Outcome::Failed(target_failed(why))),
        }
        clock.start = r.started;
        clock.measure_from = r.measure_from;
        let mut params = r.params(&p, prep.engine.as_ref());
        params[storbench_report::sensitivity::PARAM] =
            json!({ "scale": f, "of": base, "medium": plan.medium });
        rec.write_step(clock, &label, params, r.report).map_err(Outcome::Failed)?;
        Ok(())
    });
    live.finish();
    match ran {
        Err(o) => return Err(o),
        Ok(_) if stopped || crate::interrupt::requested() => return Err(Outcome::Interrupted),
        Ok(_) => {}
    }
    let s = rec.write_sensitivity(base).map_err(Outcome::Failed)?;
    Ok(s.map(|s| format!("sensitivity {}: {}", s.label, s.sentence())).into_iter().collect())
}

/// What makes the run's numbers comparable: the target, its medium, the
/// engine and its capabilities.
pub fn env(prep: &Prepared, profiles: &[Profile]) -> Value {
    let tgt = &prep.target;
    let info = storbench_sysmon::path_env(&tgt.path);
    json!({
        "target": {
            "path": tgt.path, "size": tgt.size, "block_device": tgt.is_block,
            "logical_block_size": tgt.logical_block, "fs_type": info.fs_type,
            "fs_block_size": info.block_size, "mount_point": info.mount_point,
            "device": info.device, "loop_backing_file": info.loop_backing_file,
        },
        "medium": storbench_media::describe_path(&tgt.path),
        "direct_io": profiles.iter().all(|p| p.direct),
        "engine": prep.engine.name(),
        "engine_caps": prep.engine.caps(),
        "notes": prep.notes,
    })
}

/// Runs each profile as a step and records it; stops at the first that
/// fails or is interrupted. Returns the result rows and the run's outcome.
pub fn run_profiles(
    screen: &dyn Screen,
    rec: &mut Recorder,
    prep: &Prepared,
    profiles: &[Profile],
    verify: bool,
) -> Result<(Vec<Vec<String>>, Outcome)> {
    let opts = RunOptions { engine: prep.engine.clone(), verify };
    let live = screen.live(rec.quiet());
    let n = profiles.len();
    let mut rows = Vec::new();
    let mut outcome = Outcome::Complete;
    for (i, p) in profiles.iter().enumerate() {
        let mut clock = rec.clock();
        rec.live_step(&p.name);
        let what = format!("profile {}/{n} {}", i + 1, p.name);
        let res = run_profile(p, &prep.target, &opts, crate::interrupt::flag(), &mut |t| {
            rec.publish(|| LiveValues {
                iops: Some(t.iops),
                mbps: Some(t.mbps),
                latency: Some(t.latency.clone()),
                ..LiveValues::default()
            });
            live.set(tick_line(&what, t));
        });
        let r = match res {
            Ok(r) => r,
            // The target refused (opening it): a failed target, exit 4;
            // a run that could not be set up otherwise: a failed run.
            Err(e) if e.is_target() => {
                outcome = Outcome::Failed(target_failed(format!("profile {}: {e}", p.name)));
                break;
            }
            Err(e) => {
                outcome = Outcome::Failed(anyhow!("profile {}: {e}", p.name));
                break;
            }
        };
        clock.start = r.started;
        clock.measure_from = r.measure_from;
        let mut row = row(&p.name, &r.report);
        let verdict = r.verdict(p);
        if r.worth_keeping() {
            let params = r.params(p, prep.engine.as_ref());
            let figures = rec.write_step(clock, &p.name, params, r.report)?;
            row.extend(crate::record::system_columns(&figures));
        }
        rows.push(row);
        for f in &r.failures {
            live.println(format!("storbench: I/O error: {} (errno {})", f.what, f.errno));
        }
        match verdict {
            Verdict::Complete => {}
            Verdict::Stopped => {
                outcome = Outcome::Interrupted;
                break;
            }
            // An I/O error or a block that failed verification: the
            // target failed (exit 4), what was measured is kept.
            Verdict::Failed(why) => {
                outcome = Outcome::Failed(target_failed(why));
                break;
            }
        }
    }
    live.finish();
    Ok((rows, outcome))
}

/// One row of the results table.
pub fn row(name: &str, r: &StepReport) -> Vec<String> {
    let get = |k: &str| r.get(k).unwrap_or(0.0);
    vec![
        name.to_string(),
        fmt_num(get("io.read.iops")),
        fmt_num(get("io.write.iops")),
        format!("{:.1}", get("io.mbps")),
        fmt_num(get("io.lat.mean")),
        fmt_num(get("io.lat.p50")),
        fmt_num(get("io.lat.p99")),
        fmt_num(get("io.lat.p99.9")),
        fmt_num(get("io.lat.max")),
        format!("{:.2}", get("io.cpu.user_per_io") + get("io.cpu.sys_per_io")),
        fmt_num(get("io.errors")),
    ]
}

/// The results, for stdout: one row per profile, then the target line. A
/// column with nothing to say in any row (no I/O errors, no device figures
/// for a file on tmpfs) is left out and, for errors, said once below, so
/// the table fits a terminal.
pub fn results_text(rows: Vec<Vec<String>>, prep: &Prepared, profiles: &[Profile]) -> String {
    let header = [
        "profile",
        "read IOPS",
        "write IOPS",
        "MB/s",
        "mean µs",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "CPU µs/IO",
        "errors",
        "iowait %",
        "dev r ms",
        "dev w ms",
    ];
    let empty = |i: usize| {
        rows.iter().all(|r| r.get(i).is_none_or(|v| v == "-" || (header[i] == "errors" && v == "0")))
    };
    let keep: Vec<usize> = (0..header.len()).filter(|&i| i == 0 || !empty(i)).collect();
    let mut t = Table::with_header(keep.iter().map(|&i| header[i]));
    for r in &rows {
        t.add_row(keep.iter().map(|&i| r.get(i).cloned().unwrap_or_default()));
    }
    let mut out = t.to_text().trim_end_matches('\n').to_string();
    if !keep.contains(&10) {
        out.push_str("\nno I/O errors");
    }
    let access: Vec<String> = {
        let mut v: Vec<String> = profiles.iter().map(storbench_io::session::access).collect();
        v.dedup();
        v
    };
    out.push_str(&format!(
        "\ntarget {} ({}), {} I/O, engine {}, access {}",
        prep.target.path.display(),
        format_size(prep.target.size),
        if profiles.iter().all(|p| p.direct) { "direct" } else { "buffered" },
        prep.engine.name(),
        access.join(", ")
    ));
    out
}
