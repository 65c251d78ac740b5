//! `storbench media calibrate | validate` and the sources and errors of
//! `media models`: the options, their translation, the recording of each
//! step and the printing. The work (the grid, running a step, fitting to a
//! measurement or a table, the rounds on a device and on an emulated
//! medium and their comparison, the database check, the model files) is
//! `storbench_ops::calibrate`'s. Progress goes to stderr, tables to stdout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;
use storbench_emu::fit::{self, CellFit, Family};
use storbench_io::{Prepared, Profile};
use storbench_media::floor::Floor;
use storbench_metrics::units::{parse_duration, parse_size};
use storbench_ops::calibrate::validate::{self as val, Comparison, DbRow, Emulated, Validation};
use storbench_ops::calibrate::{
    self as cal, measure, model_file, CalError, Grid, StepFailure, Stepped, Timing,
};
use storbench_report::Table;

use crate::cli::Global;
use crate::error::{target_failed, usage};
use crate::live::Live;
use crate::record::{Outcome, Recorder};

pub use storbench_ops::calibrate::model_file::{model_file_json, model_file_summary, BUILTIN_SOURCE};

/// Options of `media calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The device to measure: a block device, or a file (created at --size and filled).
    #[arg(required_unless_present = "from_table", conflicts_with = "from_table")]
    pub target: Option<PathBuf>,
    /// Model family to fit: hdd, ssd or net.
    #[arg(long, value_parser = Family::parse)]
    pub family: Family,
    /// The model file to write (TOML; `media create --model FILE`).
    #[arg(long)]
    pub out: PathBuf,
    /// The short grid (16 cells, under 2 minutes) instead of the default (46 cells, under 10).
    #[arg(long)]
    pub quick: bool,
    /// Fit to a table of published figures (CSV, docs/media.md) instead of measuring.
    #[arg(long, value_name = "CSV")]
    pub from_table: Option<PathBuf>,
    /// With --from-table: fit on every other row and report the error on the rows left out.
    #[arg(long, requires = "from_table")]
    pub holdout: bool,
    /// Size of the test file (ignored for a block device); the model's medium size.
    #[arg(long, default_value = "2G", value_parser = parse_size)]
    pub size: u64,
    /// Allow the write cells on a block device that is mounted or holds a filesystem (its data is destroyed).
    #[arg(long)]
    pub destroy_data: bool,
    /// Engine: io_uring (default) or psync.
    #[arg(long, default_value = "io_uring")]
    pub engine: String,
    /// Measured time per cell (testing).
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub cell_time: Option<Duration>,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// Options of `media validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The model: a file from `media calibrate`, a TOML file, or a built-in name.
    pub model: String,
    /// The real device to compare with: a block device or a file.
    #[arg(long)]
    pub against: PathBuf,
    /// The short grid.
    #[arg(long)]
    pub quick: bool,
    /// Rounds of the grid on each (alternating which goes first); medians are compared.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: u32,
    /// Size of the test file (ignored for a block device) and of the emulated medium.
    #[arg(long, default_value = "2G", value_parser = parse_size)]
    pub size: u64,
    /// Allow the write cells on a block device that is mounted or holds a filesystem.
    #[arg(long)]
    pub destroy_data: bool,
    /// Also TPC-B at 1 and 8 clients and TPC-C at 1 and 4 users on the device, on the emulated medium and on the model in process (SQLite; `sqlite:PATH?model=`), with each one's TPS/NOPM error.
    #[arg(long)]
    pub db_check: bool,
    /// Measured time per database step (--db-check).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub db_time: Duration,
    /// Engine: io_uring (default) or psync.
    #[arg(long, default_value = "io_uring")]
    pub engine: String,
    /// Measured time per cell (testing).
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub cell_time: Option<Duration>,
}

/// The library's error as the binary's: bad input exits 2, a failed
/// target 4, anything else 1.
fn cal_err(e: CalError) -> anyhow::Error {
    match e {
        CalError::Usage(m) => usage(m),
        CalError::Target(m) => target_failed(m),
        CalError::Failed(m) => anyhow!("{m}"),
    }
}

/// A step's failure as the run's.
fn failure(f: StepFailure) -> anyhow::Error {
    match f {
        StepFailure::Run(m) => anyhow!("{m}"),
        StepFailure::Target(m) => target_failed(m),
    }
}

fn fill(g: &Global, prep: &Prepared, path: &Path) -> Result<()> {
    crate::live::fill(g.quiet, &prep.plan, path).map_err(|e| anyhow!("{e}"))
}

/// Runs one profile as a recorded step, with a progress line.
fn step(rec: &mut Recorder, live: &Live, prep: &Prepared, p: &Profile, what: &str) -> Result<Stepped> {
    let mut clock = rec.clock();
    rec.live_step(&p.name);
    let s = cal::run_step(prep, p, crate::interrupt::flag(), &mut |t| live.io_tick(what, t));
    if let Some(r) = &s.result {
        clock.start = r.started;
        clock.measure_from = r.measure_from;
        if r.worth_keeping() {
            let params = r.params(p, prep.engine.as_ref());
            rec.write_step(clock, &p.name, params, r.report.clone())?;
        }
    }
    Ok(s)
}

fn pct(v: Option<f64>) -> String {
    v.map(|e| format!("{e:+.1}%")).unwrap_or_else(|| "-".into())
}

fn num(v: Option<f64>) -> String {
    v.map(crate::oltp::fmt_num).unwrap_or_else(|| "-".into())
}

/// Prints a fit: each parameter with its source, then the error per cell.
fn print_fit(f: &fit::Fitted, cells: &[CellFit], title: &str) {
    let mut t = Table::with_header(["parameter", "value", "from"]);
    for p in &f.params {
        t.add_row([p.key.clone(), p.value.clone(), p.source.clone()]);
    }
    print!("{}", t.to_text());
    let mut t = Table::with_header([
        "cell", "IOPS", "model", "err", "mean µs", "model", "err", "p99 µs", "model", "err",
    ]);
    t.title = title.to_string();
    for c in cells {
        let [ei, em, ep] = c.errors();
        let (m, p) = (&c.measured, &c.predicted);
        t.add_row(vec![
            c.cell.label(),
            num(m.iops_at(c.cell.bs)),
            num(p.iops_at(c.cell.bs)),
            pct(ei),
            num(m.lat_mean_us),
            num(p.lat_mean_us),
            pct(em),
            num(m.lat_p99_us),
            num(p.lat_p99_us),
            pct(ep),
        ]);
    }
    print!("{}", t.to_text());
    let refs: Vec<&CellFit> = cells.iter().collect();
    let [i, m, p] = fit::median_abs(&refs);
    println!(
        "median |error|: IOPS {}, mean {}, p99 {} over {} cells",
        pct(i).trim_start_matches('+'),
        pct(m).trim_start_matches('+'),
        pct(p).trim_start_matches('+'),
        cells.len()
    );
}

/// Runs `media calibrate`.
pub fn calibrate(g: &Global, a: CalibrateArgs) -> Result<ExitCode> {
    let family = a.family;
    let size = a.size;
    model_file::check_out(&a.out).map_err(cal_err)?;
    if let Some(table) = &a.from_table {
        return from_table(g, &a, family, table, size);
    }
    let target = a.target.clone().expect("required without --from-table");
    let t = Timing::for_grid(a.quick, a.cell_time);
    let cells = cal::grid(a.quick);
    let mut profiles: Vec<Profile> = cells.iter().map(|c| cal::profile(c, &t)).collect();
    if family == Family::Ssd {
        profiles.push(cal::sustained_profile(&t));
    }
    let prep = cal::prepare(&target, size, &profiles, a.destroy_data, &a.engine).map_err(cal_err)?;
    for n in &prep.notes {
        eprintln!("storbench: note: {n}");
    }
    fill(g, &prep, &target)?;
    let info = storbench_sysmon::path_env(&prep.target.path);
    let config = json!({
        "target": prep.target.path, "size": prep.target.size, "family": family.as_str(),
        "grid": Timing::grid_name(a.quick), "out": a.out, "profiles": profiles,
    });
    let env = json!({
        "target": { "path": prep.target.path, "block_device": prep.target.is_block, "fs_type": info.fs_type,
                    "device": info.device, "mount_point": info.mount_point },
        "medium": storbench_media::describe_path(&prep.target.path),
        "engine": prep.engine.name(),
    });
    let mut rec = Recorder::begin(
        g,
        "calibrate",
        format!("calibrate {} on {}", family.as_str(), target.display()),
        config,
        env,
        std::slice::from_ref(&prep.target.path),
    )?;
    let live = Live::line(g.quiet);
    let end =
        measure::measure(&prep, &cells, &profiles, &t, &mut |p, what| step(&mut rec, &live, &prep, p, what))?;
    live.finish();
    let measured = match end {
        Grid::Done(m) => m,
        Grid::Stopped(_) => {
            eprintln!("storbench: calibrate interrupted: no model written; the cells measured are kept, marked interrupted");
            return rec.finish(Outcome::Interrupted);
        }
        Grid::Failed(f) => return rec.finish(Outcome::Failed(failure(f))),
    };
    let c = match measure::fit_measured(family, &measured, &prep, &info, a.quick) {
        Ok(c) => c,
        Err(e) => return rec.finish(Outcome::Failed(cal_err(e))),
    };
    if !g.json {
        print_fit(
            &c.fitted,
            &c.fitted.cells,
            "fit error per cell (measured against the fitted model's prediction):",
        );
    }
    model_file::write_model(&a.out, &c.model).map_err(cal_err)?;
    if !g.quiet {
        eprintln!("storbench: wrote {}", a.out.display());
    }
    rec.finish(Outcome::Complete)
}

fn from_table(g: &Global, a: &CalibrateArgs, family: Family, table: &Path, size: u64) -> Result<ExitCode> {
    let tf = measure::fit_table(table, family, size, a.holdout).map_err(cal_err)?;
    let (fitted, held) = (&tf.fitted, &tf.held);
    if g.json {
        let v = json!({
            "family": family.as_str(), "base": fitted.spec.base, "set": fitted.spec.set, "params": fitted.params,
            "cells": fitted.cells.iter().map(|c| json!({"cell": c.cell.label(), "measured": c.measured, "predicted": c.predicted, "errors": c.errors()})).collect::<Vec<_>>(),
            "held_out": held.iter().map(|c| json!({"cell": c.cell.label(), "measured": c.measured, "predicted": c.predicted, "errors": c.errors()})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_fit(fitted, &fitted.cells, "fit error per row (the table's figures against the fitted model):");
        if a.holdout {
            let refs: Vec<&CellFit> = held.iter().collect();
            let [i, m, p] = fit::median_abs(&refs);
            println!(
                "held out ({} rows fitted, {} predicted): median |error| IOPS {}, mean {}, p99 {}",
                tf.fitted_rows,
                tf.held_out_rows,
                pct(i).trim_start_matches('+'),
                pct(m).trim_start_matches('+'),
                pct(p).trim_start_matches('+')
            );
        }
    }
    let undetermined: Vec<&str> =
        fitted.params.iter().filter(|p| !p.determined).map(|p| p.key.as_str()).collect();
    if !undetermined.is_empty() {
        eprintln!(
            "storbench: note: the table does not determine {}; assumed as the model file's [sources] say",
            undetermined.join(", ")
        );
    }
    model_file::write_model(&a.out, &tf.model).map_err(cal_err)?;
    if !g.quiet {
        eprintln!("storbench: wrote {}", a.out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks `media validate`'s options that take more than a parser.
fn check_validate(a: &ValidateArgs) -> Result<()> {
    if a.db_check && !std::fs::metadata(&a.against).map(|m| m.is_file()).unwrap_or(true) {
        return Err(usage(format!(
            "--db-check: {} is a block device; the database check puts SQLite on the filesystem of a file target (give --against a file on the device's filesystem)",
            a.against.display()
        )));
    }
    Ok(())
}

/// Runs `media validate`.
pub fn validate(g: &Global, a: ValidateArgs) -> Result<ExitCode> {
    check_validate(&a)?;
    let spec = storbench_emu::Spec::parse(&a.model, &[]).map_err(|e| usage(e.to_string()))?;
    let size = a.size;
    let t = Timing::for_grid(a.quick, a.cell_time);
    let cells = cal::grid(a.quick);
    let profiles: Vec<Profile> = cells.iter().map(|c| cal::profile(c, &t)).collect();
    let real = cal::prepare(&a.against, size, &profiles, a.destroy_data, &a.engine).map_err(cal_err)?;
    let msize = val::medium_size(real.target.size, size);
    spec.build(msize).map_err(|e| usage(e.to_string()))?;
    storbench_media::check_support(false).map_err(crate::error::media_err)?;
    fill(g, &real, &a.against)?;
    let name = format!("validate-{}", std::process::id());
    let emulated = Emulated::create(&name, &spec, msize).map_err(cal_err)?;
    let m = &emulated.medium;
    let floor = emulated.floor.as_ref();
    let emu = cal::prepare(Path::new(&m.device), msize, &profiles, true, &a.engine).map_err(cal_err)?;
    let config = json!({
        "model": a.model, "spec": spec, "against": real.target.path, "medium": m.name, "size": msize,
        "grid": Timing::grid_name(a.quick), "rounds": a.rounds,
    });
    let env = json!({
        "against": real.target.path, "medium": storbench_media::describe_path(Path::new(&m.device)),
        "emu_floor": floor, "engine": real.engine.name(),
    });
    let mut rec = Recorder::begin(
        g,
        "validate",
        format!("validate {} against {}", a.model, a.against.display()),
        config,
        env,
        &[real.target.path.clone(), PathBuf::from(&m.device)],
    )?;
    let live = Live::line(g.quiet);
    let model = spec.build(msize).map_err(|e| usage(e.to_string()))?;
    let end = val::run_rounds(&real, &emu, &cells, &profiles, a.rounds, &mut |prep, p, what| {
        step(&mut rec, &live, prep, p, what)
    })?;
    let (got, stopped) = match end {
        Grid::Done(got) => (got, false),
        Grid::Stopped(got) => (got, true),
        Grid::Failed(f) => {
            live.finish();
            return rec.finish(Outcome::Failed(failure(f)));
        }
    };
    live.finish();
    let cmp = val::compare(&cells, &got, &model, msize, &emulated.envelope());
    if !g.json {
        print_comparison(&cmp, floor);
    }
    if stopped {
        eprintln!("storbench: validate interrupted: the table above holds the cells measured on both; the model file is left as it was");
        return rec.finish(Outcome::Interrupted);
    }
    let db = if a.db_check {
        let d = a.db_time;
        let mut run =
            |args: &[&str], figure: &str| child(g, args, figure).map_err(|e| CalError::Failed(e.to_string()));
        match val::db_check(&a.against, &spec, &a.model, &name, d, &mut run) {
            Ok(rows) => rows,
            Err(e) => return rec.finish(Outcome::Failed(cal_err(e))),
        }
    } else {
        Vec::new()
    };
    if !db.is_empty() && !g.json {
        print_db(&db);
    }
    // A model file keeps its validation (what `media models` shows).
    if model_file::is_file(&a.model) {
        let v = Validation {
            against: &real.target.path,
            quick: a.quick,
            rounds: a.rounds,
            comparison: &cmp,
            floor,
            db: &db,
        };
        model_file::record_validation(Path::new(&a.model), &v).map_err(cal_err)?;
    }
    if g.json {
        let m = &cmp.medians;
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"cells": cell_rows(&cmp), "median_abs_error_pct": {"iops": m[0], "mean": m[1], "p50": m[2], "p99": m[3]}, "median_abs_mean_error_pct": {"emulator": cmp.split.emulator_mean, "model": cmp.split.model_mean}, "device_spread_pct": cmp.split.device_spread, "outside": cmp.outside, "floor": floor, "db": db_rows(&db)})
            )?
        );
    }
    rec.finish(Outcome::Complete)
}

/// The database check's steps as `--json` gives them.
fn db_rows(db: &[DbRow]) -> Vec<serde_json::Value> {
    db.iter()
        .map(|r| {
            json!({
                "step": r.step, "device": r.device, "emulated": r.emulated, "in_process": r.in_process,
                "error_pct": {"emulated": r.error_pct(), "in_process": r.in_process_error_pct()},
            })
        })
        .collect()
}

/// The comparison's cells as `--json` gives them.
fn cell_rows(cmp: &Comparison) -> Vec<serde_json::Value> {
    cmp.cells
        .iter()
        .map(|c| {
            let es = &c.errors;
            json!({
                "cell": c.cell.label(), "device": c.device, "emulated": c.emulated, "model": c.model,
                "error_pct": {"iops": es[0], "mean": es[1], "p50": es[2], "p99": es[3]},
                "outside_envelope": c.outside,
            })
        })
        .collect()
}

/// Prints the comparison: a row per cell, the medians, the envelope and
/// the cells outside it.
fn print_comparison(cmp: &Comparison, floor: Option<&Floor>) {
    let mut tab = Table::with_header([
        "cell", "IOPS dev", "IOPS emu", "err", "mean dev", "mean emu", "err", "p50 dev", "p50 emu", "err",
        "p99 dev", "p99 emu", "err", "envelope",
    ]);
    for c in &cmp.cells {
        let (r, e, es, bs) = (&c.device, &c.emulated, &c.errors, c.cell.bs);
        tab.add_row(vec![
            c.cell.label(),
            num(r.iops_at(bs)),
            num(e.iops_at(bs)),
            pct(es[0]),
            num(r.lat_mean_us),
            num(e.lat_mean_us),
            pct(es[1]),
            num(r.lat_p50_us),
            num(e.lat_p50_us),
            pct(es[2]),
            num(r.lat_p99_us),
            num(e.lat_p99_us),
            pct(es[3]),
            if c.outside.is_some() { "outside".into() } else { "in".into() },
        ]);
    }
    let meds = &cmp.medians;
    print!("{}", tab.to_text());
    println!(
        "median |error| over {} cells inside the envelope: IOPS {}, mean {}, p50 {}, p99 {}",
        cmp.inside,
        pct(meds[0]).trim_start_matches('+'),
        pct(meds[1]).trim_start_matches('+'),
        pct(meds[2]).trim_start_matches('+'),
        pct(meds[3]).trim_start_matches('+'),
    );
    let split = cmp.split;
    if let (Some(e), Some(m)) = (split.emulator_mean, split.model_mean) {
        println!(
            "whose the mean latency's error is, median |error| over the same cells: the emulated medium against its model {}, the model against the device now {} (the fit's error, and how far the device moved since it was calibrated)",
            pct(Some(e)).trim_start_matches('+'),
            pct(Some(m)).trim_start_matches('+'),
        );
    }
    if let Some(d) = split.device_spread {
        println!(
            "the device against itself: its mean latency moved {} between rounds (range over median, median over the same cells); an error below that is the device's own movement",
            pct(Some(d)).trim_start_matches('+'),
        );
    }
    match floor {
        Some(f) => println!(
            "envelope: the daemon's round trip {:.1} µs at QD1 (absorbed), a reply at a deadline {:.1} µs late after it ({:.1} µs of that absorbed after a {:.0} µs wait{}), ceiling {:.0} IOPS at QD16 and {:.0} MB/s of 256 KiB writes ({}); a cell is outside when the model's time is under {}× the larger of the two or its IOPS or write MB/s above {:.0} % of a ceiling",
            f.qd1_p50_us,
            f.timed_extra_us,
            f.timed_lead_us,
            storbench_media::floor::TIMED_PROBE_US,
            f.timed_lead_far_us
                .map(|far| format!(", {far:.1} µs after {:.0} µs", storbench_media::floor::TIMED_FAR_US))
                .unwrap_or_default(),
            f.qd16_iops,
            f.write_mb_s,
            f.how,
            cal::FLOOR_TIMES,
            cal::CEILING_SHARE * 100.0
        ),
        None => println!("envelope: the medium's floor was not measured (STORBENCH_EMU_FLOOR=off): every cell counts"),
    }
    for o in &cmp.outside {
        println!("  outside: {o}");
    }
}

/// Prints the database check: each step on the device, on the emulated
/// medium and on the model in process, and the medians of their errors.
fn print_db(db: &[DbRow]) {
    let mut t = Table::with_header(["database step", "device", "emulated", "err", "model in process", "err"]);
    for r in db {
        t.add_row(vec![
            r.step.clone(),
            crate::oltp::fmt_num(r.device),
            crate::oltp::fmt_num(r.emulated),
            pct(r.error_pct()),
            crate::oltp::fmt_num(r.in_process),
            pct(r.in_process_error_pct()),
        ]);
    }
    print!("{}", t.to_text());
    let abs = |f: fn(&DbRow) -> Option<f64>| {
        val::median(&db.iter().filter_map(f).map(f64::abs).collect::<Vec<_>>())
    };
    println!(
        "  median |error|: emulated medium {}, model in process {} (the emulated medium adds the daemon's round trip to every request; in process the model's time is all that is added)",
        pct(abs(DbRow::error_pct)),
        pct(abs(DbRow::in_process_error_pct))
    );
}

/// The model files `media models` lists: those given, else every `*.toml`
/// under ./models (none if it does not exist).
pub fn model_files(given: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    model_file::model_files(given).map_err(cal_err)
}

/// Runs one storbench command as a child; returns its run record's
/// steps: label and figure. A child, not a library call: the database
/// workloads' build and run are still their verbs' (options, recording a
/// run of their own in the results store, which the check reads back), and
/// each step gets a fresh process, as a user's run would.
fn child(g: &Global, args: &[&str], figure: &str) -> Result<Vec<(String, f64)>> {
    let exe = std::env::current_exe().map_err(|e| anyhow!("finding storbench: {e}"))?;
    let out = std::process::Command::new(exe)
        .arg("--quiet")
        .arg("--json")
        .arg("--results")
        .arg(&g.results)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| anyhow!("running storbench {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("failed");
        return Err(anyhow!("storbench {}: {last}", args.join(" ")));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let rec: serde_json::Value = serde_json::Deserializer::from_str(&text)
        .into_iter::<serde_json::Value>()
        .next()
        .and_then(|r| r.ok())
        .ok_or_else(|| anyhow!("storbench {}: no run record", args.join(" ")))?;
    Ok(rec["steps"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    (
                        s["label"].as_str().unwrap_or("?").to_string(),
                        s["metrics"][figure]["value"].as_f64().unwrap_or(0.0),
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn validate_args(args: &[&str]) -> Result<ValidateArgs, String> {
        let argv = ["storbench", "media", "validate", "hdd", "--against", "/dev/null"].iter().chain(args);
        match crate::cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command {
            crate::cli::Command::Media(m) => match m.verb {
                crate::cmd::media::MediaVerb::Validate(v) => Ok(*v),
                _ => unreachable!(),
            },
            _ => unreachable!(),
        }
    }

    #[test]
    fn sizes_durations_and_rounds_are_typed_by_clap() {
        let v = validate_args(&[]).unwrap();
        assert_eq!((v.size, v.db_time, v.rounds, v.cell_time), (2 << 30, Duration::from_secs(30), 2, None));
        let v = validate_args(&["--size", "64M", "--db-time", "2s", "--cell-time", "250ms"]).unwrap();
        assert_eq!(
            (v.size, v.db_time, v.cell_time),
            (64 << 20, Duration::from_secs(2), Some(Duration::from_millis(250)))
        );
        for (args, want) in [
            (&["--size", "big"][..], "'big' is not a size"),
            (&["--db-time", "long"], "'long' is not a duration"),
            (&["--cell-time", "1x"], "'1x' is not a duration"),
            (&["--rounds", "0"], "'0' for '--rounds"),
            (&["--rounds", "21"], "'21' for '--rounds"),
        ] {
            let e = validate_args(args).err().unwrap();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }
}
