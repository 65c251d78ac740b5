//! `storbench media calibrate | validate` and the sources and errors of
//! `media models`: measuring a device over the calibration grid with our
//! own io engine (each cell a recorded step), fitting a model family to it
//! (`storbench_emu::fit`) or to a table of published figures, writing the
//! model file; emulating a model on a medium and running the same grid on
//! it and on the real device in alternating rounds, with the error per
//! cell and the cells outside the emulator's envelope kept out of the
//! error figure. Progress goes to stderr, tables to stdout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::json;
use storbench_emu::fit::{self, CellFit, Family, Figures, Row, SimLength};
use storbench_io::target::{self, Plan};
use storbench_io::{run_profile, PrepareError, Prepared, Profile, RunOptions, Verdict};
use storbench_metrics::units::{parse_duration, parse_size};
use storbench_ops::calibrate::{self as cal, Envelope, Timing};

use crate::cli::Global;
use crate::error::usage;
use crate::live::Live;
use crate::record::{Outcome, Recorder};

/// Options of `media calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The device to measure: a block device, or a file (created at --size and filled).
    #[arg(required_unless_present = "from_table", conflicts_with = "from_table")]
    pub target: Option<PathBuf>,
    /// Model family to fit: hdd, ssd or net.
    #[arg(long)]
    pub family: String,
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
    #[arg(long, default_value = "2G")]
    pub size: String,
    /// Allow the write cells on a block device that is mounted or holds a filesystem (its data is destroyed).
    #[arg(long)]
    pub destroy_data: bool,
    /// Engine: io_uring (default) or psync.
    #[arg(long, default_value = "io_uring")]
    pub engine: String,
    /// Measured time per cell (testing).
    #[arg(long, hide = true)]
    pub cell_time: Option<String>,
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
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// Size of the test file (ignored for a block device) and of the emulated medium.
    #[arg(long, default_value = "2G")]
    pub size: String,
    /// Allow the write cells on a block device that is mounted or holds a filesystem.
    #[arg(long)]
    pub destroy_data: bool,
    /// Also TPC-B at 1 and 8 clients and TPC-C at 1 and 4 users on both (SQLite on a filesystem on each), with the TPS/NOPM error.
    #[arg(long)]
    pub db_check: bool,
    /// Measured time per database step (--db-check).
    #[arg(long, default_value = "30s")]
    pub db_time: String,
    /// Engine: io_uring (default) or psync.
    #[arg(long, default_value = "io_uring")]
    pub engine: String,
    /// Measured time per cell (testing).
    #[arg(long, hide = true)]
    pub cell_time: Option<String>,
}

fn timing(quick: bool, cell_time: Option<&str>) -> Result<Timing> {
    let mut t = if quick { Timing::QUICK } else { Timing::DEFAULT };
    if let Some(s) = cell_time {
        let d = parse_duration(s).map_err(|e| usage(format!("--cell-time {s}: {e}")))?;
        t.cell = d;
        t.rampup = d / 4;
        t.sustained = d * 3;
    }
    Ok(t)
}

/// Checks the target and the grid's profiles before anything is written.
fn prepare(target: &Path, size: u64, profiles: &[Profile], destroy: bool, engine: &str) -> Result<Prepared> {
    if let Ok(m) = std::fs::metadata(target) {
        use std::os::unix::fs::FileTypeExt;
        if !m.is_file() && !m.file_type().is_block_device() {
            return Err(usage(format!("{}: not a file or a block device", target.display())));
        }
    }
    storbench_io::prepare(target, size, profiles, destroy, engine).map_err(|e| match e {
        PrepareError::Refused(m) => usage(m.replace("add --force", "add --destroy-data")),
        other => usage(other.to_string()),
    })
}

fn fill(g: &Global, prep: &Prepared, path: &Path) -> Result<()> {
    if let Plan::Fill { size } = prep.plan {
        let bar =
            Live::bar(g.quiet, size, "preparing {msg} {bar:30} {bytes}/{total_bytes} ({bytes_per_sec})");
        bar.set(path.display().to_string());
        target::fill(path, size, &mut |d| bar.pos(d)).map_err(|e| anyhow!("{e}"))?;
        bar.finish();
    }
    Ok(())
}

/// How a grid ended.
enum Ran {
    Done,
    Stopped,
    Failed(anyhow::Error),
}

/// Runs one profile as a recorded step, with a progress line.
fn step(
    rec: &mut Recorder,
    live: &Live,
    prep: &Prepared,
    p: &Profile,
    what: &str,
    per_second: &mut Vec<f64>,
) -> Result<(Option<storbench_metrics::StepReport>, Ran)> {
    let opts = RunOptions { engine: prep.engine.clone(), verify: false };
    let mut clock = rec.clock();
    rec.live_step(&p.name);
    let res = run_profile(p, &prep.target, &opts, crate::interrupt::flag(), &mut |t| {
        if !t.rampup {
            per_second.push(t.mbps);
        }
        live.set(format!(
            "{what}  {}{}s  {:.0} IOPS  {:.1} MB/s  p99 {:.0} µs",
            if t.rampup { "ramp-up " } else { "" },
            t.elapsed.as_secs(),
            t.iops,
            t.mbps,
            t.p99_us
        ));
    });
    let r = match res {
        Ok(r) => r,
        Err(e) => return Ok((None, Ran::Failed(anyhow!("{}: {e}", p.name)))),
    };
    clock.start = r.started;
    clock.measure_from = r.measure_from;
    let verdict = r.verdict(p);
    let mut report = None;
    if r.worth_keeping() {
        let params = r.params(p, prep.engine.as_ref());
        rec.write_step(clock, &p.name, params, r.report.clone())?;
        report = Some(r.report);
    }
    let ran = match verdict {
        Verdict::Complete => Ran::Done,
        Verdict::Stopped => Ran::Stopped,
        Verdict::Failed(why) => Ran::Failed(crate::error::target_failed(why)),
    };
    Ok((report, ran))
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn pct(v: Option<f64>) -> String {
    v.map(|e| format!("{e:+.1}%")).unwrap_or_else(|| "-".into())
}

fn num(v: Option<f64>) -> String {
    v.map(crate::oltp::fmt_num).unwrap_or_else(|| "-".into())
}

/// Prints a fit: each parameter with its source, then the error per cell.
fn print_fit(f: &fit::Fitted, cells: &[CellFit], title: &str) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["parameter", "value", "from"]);
    for p in &f.params {
        t.add_row(vec![p.key.clone(), p.value.clone(), p.source.clone()]);
    }
    println!("{t}");
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["cell", "IOPS", "model", "err", "mean µs", "model", "err", "p99 µs", "model", "err"]);
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
    println!("{title}\n{t}");
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

/// Writes the model file whole (a temporary file renamed over it).
fn write_model(out: &Path, text: &str) -> Result<()> {
    let tmp = out.with_extension("toml.partial");
    std::fs::write(&tmp, text).map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, out).map_err(|e| anyhow!("writing {}: {e}", out.display()))?;
    Ok(())
}

fn check_out(out: &Path) -> Result<()> {
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(usage(format!("--out {}: {} is not a directory", out.display(), dir.display())));
    }
    if out.is_dir() {
        return Err(usage(format!(
            "--out {}: a directory; give a file name such as my-disk.toml",
            out.display()
        )));
    }
    Ok(())
}

/// Runs `media calibrate`.
pub fn calibrate(g: &Global, a: CalibrateArgs) -> Result<ExitCode> {
    let family = Family::parse(&a.family).map_err(usage)?;
    let size = parse_size(&a.size).map_err(|e| usage(format!("--size {}: {e}", a.size)))?;
    check_out(&a.out)?;
    if let Some(table) = &a.from_table {
        return from_table(g, &a, family, table, size);
    }
    let target = a.target.clone().expect("required without --from-table");
    let t = timing(a.quick, a.cell_time.as_deref())?;
    let cells = cal::grid(a.quick);
    let mut profiles: Vec<Profile> = cells.iter().map(|c| cal::profile(c, &t)).collect();
    let sustained = family == Family::Ssd;
    if sustained {
        profiles.push(cal::sustained_profile(&t));
    }
    let prep = prepare(&target, size, &profiles, a.destroy_data, &a.engine)?;
    for n in &prep.notes {
        eprintln!("storbench: note: {n}");
    }
    fill(g, &prep, &target)?;
    let info = storbench_sysmon::path_env(&prep.target.path);
    let config = json!({
        "target": prep.target.path, "size": prep.target.size, "family": family.as_str(),
        "grid": if a.quick { "quick" } else { "default" }, "out": a.out, "profiles": profiles,
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
    let n = profiles.len();
    let mut rows = Vec::new();
    let mut per_second = Vec::new();
    let mut sustained_fig = None;
    for (i, p) in profiles.iter().enumerate() {
        let what = match cells.get(i) {
            Some(c) => format!("cell {}/{n} {}", i + 1, c.label()),
            None => format!("{}/{n} sustained 256k write, {} s", i + 1, t.sustained.as_secs()),
        };
        per_second.clear();
        let (report, ran) = step(&mut rec, &live, &prep, p, &what, &mut per_second)?;
        match ran {
            Ran::Done => {}
            Ran::Stopped => {
                live.finish();
                eprintln!("storbench: calibrate interrupted: no model written; the cells measured are kept, marked interrupted");
                return rec.finish(Outcome::Interrupted);
            }
            Ran::Failed(e) => {
                live.finish();
                return rec.finish(Outcome::Failed(e));
            }
        }
        match cells.get(i) {
            Some(c) => {
                let fig = report.as_ref().map(|r| cal::figures(c, r)).unwrap_or_default();
                rows.push(Row {
                    cell: *c,
                    fig,
                    source: format!("measured on {}", prep.target.path.display()),
                });
            }
            None => {
                sustained_fig = Some(cal::sustained(
                    per_second.clone(),
                    format!("measured on {}", prep.target.path.display()),
                ))
            }
        }
    }
    live.finish();
    let fitted = match fit::fit(family, &rows, sustained_fig.as_ref(), prep.target.size) {
        Ok(f) => f,
        Err(e) => return rec.finish(Outcome::Failed(anyhow!("fitting {}: {e}", family.as_str()))),
    };
    let host = storbench_sysmon::host_env();
    let mut prov = toml::Table::new();
    prov.insert("from".into(), "measured".into());
    prov.insert(
        "device".into(),
        format!(
            "{} ({}{})",
            prep.target.path.display(),
            if prep.target.is_block {
                "block device".to_string()
            } else {
                format!("file on {}", info.device)
            },
            if info.fs_type.is_empty() || prep.target.is_block {
                String::new()
            } else {
                format!(", {}", info.fs_type)
            }
        )
        .into(),
    );
    prov.insert("host".into(), host["host"].as_str().unwrap_or_default().into());
    prov.insert("kernel".into(), host["kernel"].as_str().unwrap_or_default().into());
    prov.insert("date".into(), now().into());
    prov.insert("storbench_version".into(), env!("CARGO_PKG_VERSION").into());
    prov.insert("grid".into(), if a.quick { "quick" } else { "default" }.into());
    prov.insert("size".into(), (prep.target.size as i64).into());
    prov.insert("engine".into(), prep.engine.name().into());
    if !g.json {
        print_fit(
            &fitted,
            &fitted.cells,
            "fit error per cell (measured against the fitted model's prediction):",
        );
    }
    write_model(&a.out, &storbench_emu::table::model_file(&fitted, prov))?;
    if !g.quiet {
        eprintln!("storbench: wrote {}", a.out.display());
    }
    rec.finish(Outcome::Complete)
}

fn from_table(g: &Global, a: &CalibrateArgs, family: Family, table: &Path, size: u64) -> Result<ExitCode> {
    let text = std::fs::read_to_string(table)
        .map_err(|e| usage(format!("--from-table {}: {e}", table.display())))?;
    let rows = storbench_emu::table::parse(&table.display().to_string(), &text).map_err(usage)?;
    let (train, test): (Vec<Row>, Vec<Row>) = if a.holdout {
        if rows.len() < 4 {
            return Err(usage(format!(
                "--holdout: {} has {} rows; a held-out check needs at least 4",
                table.display(),
                rows.len()
            )));
        }
        let (tr, te): (Vec<_>, Vec<_>) = rows.iter().cloned().enumerate().partition(|(i, _)| i % 2 == 0);
        (tr.into_iter().map(|x| x.1).collect(), te.into_iter().map(|x| x.1).collect())
    } else {
        (rows.clone(), Vec::new())
    };
    let fitted = fit::fit(family, &train, None, size)
        .map_err(|e| usage(format!("--from-table {}: {e}", table.display())))?;
    let held = if a.holdout {
        fit::evaluate(&fitted.spec, &test, size).map_err(|e| anyhow!("{e}"))?
    } else {
        Vec::new()
    };
    let mut prov = toml::Table::new();
    prov.insert("from".into(), "table".into());
    prov.insert("table".into(), table.display().to_string().into());
    let mut sources: Vec<String> = rows.iter().map(|r| r.source.clone()).collect();
    sources.sort();
    sources.dedup();
    prov.insert("table_sources".into(), toml::Value::Array(sources.into_iter().map(Into::into).collect()));
    let comments: Vec<toml::Value> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix('#'))
        .map(|c| c.trim().to_string().into())
        .collect();
    if !comments.is_empty() {
        prov.insert("table_notes".into(), toml::Value::Array(comments));
    }
    prov.insert("date".into(), now().into());
    prov.insert("storbench_version".into(), env!("CARGO_PKG_VERSION").into());
    prov.insert("size".into(), (size as i64).into());
    if a.holdout {
        let refs: Vec<&CellFit> = held.iter().collect();
        let [i, m, p] = fit::median_abs(&refs);
        let mut h = toml::Table::new();
        h.insert("fitted_rows".into(), (train.len() as i64).into());
        h.insert("held_out_rows".into(), (test.len() as i64).into());
        for (k, v) in [("median_abs_iops_pct", i), ("median_abs_mean_pct", m), ("median_abs_p99_pct", p)] {
            if let Some(v) = v {
                h.insert(k.into(), ((v * 100.0).round() / 100.0).into());
            }
        }
        h.insert("cells".into(), storbench_emu::table::cells_toml(&held));
        prov.insert("holdout".into(), toml::Value::Table(h));
    }
    if g.json {
        let v = json!({
            "family": family.as_str(), "base": fitted.spec.base, "set": fitted.spec.set, "params": fitted.params,
            "cells": fitted.cells.iter().map(|c| json!({"cell": c.cell.label(), "measured": c.measured, "predicted": c.predicted, "errors": c.errors()})).collect::<Vec<_>>(),
            "held_out": held.iter().map(|c| json!({"cell": c.cell.label(), "measured": c.measured, "predicted": c.predicted, "errors": c.errors()})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_fit(
            &fitted,
            &fitted.cells,
            "fit error per row (the table's figures against the fitted model):",
        );
        if a.holdout {
            let refs: Vec<&CellFit> = held.iter().collect();
            let [i, m, p] = fit::median_abs(&refs);
            println!(
                "held out ({} rows fitted, {} predicted): median |error| IOPS {}, mean {}, p99 {}",
                train.len(),
                test.len(),
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
    write_model(&a.out, &storbench_emu::table::model_file(&fitted, prov))?;
    if !g.quiet {
        eprintln!("storbench: wrote {}", a.out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Destroys the validation's medium however validate ends.
struct MediumGuard(String);

impl Drop for MediumGuard {
    fn drop(&mut self) {
        let _ = storbench_media::destroy(&self.0);
    }
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Medians of each figure over rounds.
fn median_figures(rounds: &[Figures]) -> Figures {
    let m = |f: fn(&Figures) -> Option<f64>| median(&rounds.iter().filter_map(f).collect::<Vec<_>>());
    Figures {
        iops: m(|f| f.iops),
        mb_s: m(|f| f.mb_s),
        lat_mean_us: m(|f| f.lat_mean_us),
        lat_p50_us: m(|f| f.lat_p50_us),
        lat_p99_us: m(|f| f.lat_p99_us),
    }
}

fn err(e: Option<f64>, r: Option<f64>) -> Option<f64> {
    match (e, r) {
        (Some(e), Some(r)) if r > 0.0 => Some((e - r) / r * 100.0),
        _ => None,
    }
}

/// Runs `media validate`.
pub fn validate(g: &Global, a: ValidateArgs) -> Result<ExitCode> {
    if a.db_check && !std::fs::metadata(&a.against).map(|m| m.is_file()).unwrap_or(true) {
        return Err(usage(format!(
            "--db-check: {} is a block device; the database check puts SQLite on the filesystem of a file target (give --against a file on the device's filesystem)",
            a.against.display()
        )));
    }
    if a.rounds == 0 || a.rounds > 20 {
        return Err(usage(format!("--rounds {}: give 1 to 20", a.rounds)));
    }
    let spec = storbench_emu::Spec::parse(&a.model, &[]).map_err(|e| usage(e.to_string()))?;
    let size = parse_size(&a.size).map_err(|e| usage(format!("--size {}: {e}", a.size)))?;
    let t = timing(a.quick, a.cell_time.as_deref())?;
    let cells = cal::grid(a.quick);
    let profiles: Vec<Profile> = cells.iter().map(|c| cal::profile(c, &t)).collect();
    let real = prepare(&a.against, size, &profiles, a.destroy_data, &a.engine)?;
    let msize = real.target.size.min(size.max(64 << 20)).max(64 << 20);
    spec.build(msize).map_err(|e| usage(e.to_string()))?;
    storbench_media::check_support(false).map_err(crate::cmd::media::media_err)?;
    fill(g, &real, &a.against)?;
    let name = format!("validate-{}", std::process::id());
    let o = storbench_media::CreateOptions {
        size: msize,
        fs: "none".into(),
        block_size: None,
        emulate: None,
        model: Some(spec.clone()),
        trace: None,
        backing: None,
    };
    let m = storbench_media::create(&name, &o).map_err(crate::cmd::media::media_err)?;
    let _guard = MediumGuard(name.clone());
    let floor = m.daemon.as_ref().and_then(|d| d.floor.clone());
    let env_floor = Envelope {
        floor_us: floor.as_ref().map(|f| f.qd1_p50_us).unwrap_or(0.0),
        ceiling_iops: floor.as_ref().map(|f| f.qd16_iops).unwrap_or(0.0),
    };
    let emu = prepare(Path::new(&m.device), msize, &profiles, true, &a.engine)?;
    let config = json!({
        "model": a.model, "spec": spec, "against": real.target.path, "medium": m.name, "size": msize,
        "grid": if a.quick { "quick" } else { "default" }, "rounds": a.rounds,
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
    let mut got: Vec<(Vec<Figures>, Vec<Figures>)> = vec![(Vec::new(), Vec::new()); cells.len()];
    let mut scratch = Vec::new();
    let n = cells.len();
    let mut stopped = false;
    'rounds: for round in 0..a.rounds {
        for (i, c) in cells.iter().enumerate() {
            let order: [bool; 2] =
                if (round as usize + i).is_multiple_of(2) { [true, false] } else { [false, true] };
            for is_real in order {
                let (prep, side) = if is_real { (&real, "device") } else { (&emu, "model") };
                let mut p = profiles[i].clone();
                p.name = format!("{}-{side}-r{}", p.name, round + 1);
                let what = format!(
                    "round {}/{} cell {}/{n} {} on the {side}",
                    round + 1,
                    a.rounds,
                    i + 1,
                    c.label()
                );
                let (report, ran) = step(&mut rec, &live, prep, &p, &what, &mut scratch)?;
                match ran {
                    Ran::Done => {}
                    Ran::Stopped => {
                        stopped = true;
                        break 'rounds;
                    }
                    Ran::Failed(e) => {
                        live.finish();
                        return rec.finish(Outcome::Failed(e));
                    }
                }
                let fig = report.as_ref().map(|r| cal::figures(c, r)).unwrap_or_default();
                if is_real {
                    got[i].0.push(fig);
                } else {
                    got[i].1.push(fig);
                }
            }
        }
    }
    live.finish();
    let mut tab = Table::new();
    tab.load_preset(UTF8_FULL_CONDENSED);
    tab.set_header(vec![
        "cell", "IOPS dev", "IOPS emu", "err", "mean dev", "mean emu", "err", "p50 dev", "p50 emu", "err",
        "p99 dev", "p99 emu", "err", "envelope",
    ]);
    let mut errs: [Vec<f64>; 4] = Default::default();
    let mut outside = Vec::new();
    let mut cell_rows = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        if got[i].0.is_empty() || got[i].1.is_empty() {
            continue;
        }
        let (r, e) = (median_figures(&got[i].0), median_figures(&got[i].1));
        let predicted = fit::predict(&model, c, msize, SimLength::TABLE);
        let why = env_floor.outside(&predicted);
        let es = [
            err(e.iops_at(c.bs), r.iops_at(c.bs)),
            err(e.lat_mean_us, r.lat_mean_us),
            err(e.lat_p50_us, r.lat_p50_us),
            err(e.lat_p99_us, r.lat_p99_us),
        ];
        if why.is_none() {
            for (k, v) in es.iter().enumerate() {
                if let Some(v) = v {
                    errs[k].push(v.abs());
                }
            }
        } else {
            outside.push(format!("{}: {}", c.label(), why.clone().unwrap_or_default()));
        }
        tab.add_row(vec![
            c.label(),
            num(r.iops_at(c.bs)),
            num(e.iops_at(c.bs)),
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
            if why.is_some() { "outside".into() } else { "in".into() },
        ]);
        cell_rows.push(json!({
            "cell": c.label(), "device": r, "emulated": e, "model": predicted,
            "error_pct": {"iops": es[0], "mean": es[1], "p50": es[2], "p99": es[3]},
            "outside_envelope": why,
        }));
    }
    let meds: Vec<Option<f64>> = errs.iter().map(|v| median(v)).collect();
    if !g.json {
        println!("{tab}");
        println!(
            "median |error| over {} cells inside the envelope: IOPS {}, mean {}, p50 {}, p99 {}",
            errs[0].len(),
            pct(meds[0]).trim_start_matches('+'),
            pct(meds[1]).trim_start_matches('+'),
            pct(meds[2]).trim_start_matches('+'),
            pct(meds[3]).trim_start_matches('+'),
        );
        match &floor {
            Some(f) => println!(
                "envelope: the daemon's round trip {:.1} µs at QD1 (absorbed), ceiling {:.0} IOPS at QD16 ({}); a cell is outside when the model's time is under {}× the round trip or its IOPS above {:.0} % of the ceiling",
                f.qd1_p50_us, f.qd16_iops, f.how, cal::FLOOR_TIMES, cal::CEILING_SHARE * 100.0
            ),
            None => println!("envelope: the medium's floor was not measured (STORBENCH_EMU_FLOOR=off): every cell counts"),
        }
        for o in &outside {
            println!("  outside: {o}");
        }
    }
    if stopped {
        eprintln!("storbench: validate interrupted: the table above holds the cells measured on both; the model file is left as it was");
        return rec.finish(Outcome::Interrupted);
    }
    let db = if a.db_check {
        let d = parse_duration(&a.db_time).map_err(|e| usage(format!("--db-time {}: {e}", a.db_time)))?;
        match db_check(g, &a.against, &spec, &name, d) {
            Ok(rows) => rows,
            Err(e) => return rec.finish(Outcome::Failed(e)),
        }
    } else {
        Vec::new()
    };
    if !db.is_empty() && !g.json {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec!["database step", "device", "emulated", "err"]);
        for (k, r, e) in &db {
            t.add_row(vec![
                k.clone(),
                crate::oltp::fmt_num(*r),
                crate::oltp::fmt_num(*e),
                pct(err(Some(*e), Some(*r))),
            ]);
        }
        println!("{t}");
    }
    // A model file keeps its validation (what `media models` shows).
    if a.model.ends_with(".toml") || a.model.contains('/') {
        let path = Path::new(&a.model);
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(mut top) = text.parse::<toml::Table>() {
                let mut v = toml::Table::new();
                v.insert("against".into(), real.target.path.display().to_string().into());
                v.insert("date".into(), now().into());
                v.insert("storbench_version".into(), env!("CARGO_PKG_VERSION").into());
                v.insert("grid".into(), if a.quick { "quick" } else { "default" }.into());
                v.insert("rounds".into(), (a.rounds as i64).into());
                v.insert("cells_inside".into(), (errs[0].len() as i64).into());
                v.insert(
                    "cells_outside".into(),
                    toml::Value::Array(outside.iter().map(|s| s.clone().into()).collect()),
                );
                if let Some(f) = &floor {
                    v.insert("floor_us".into(), ((f.qd1_p50_us * 10.0).round() / 10.0).into());
                    v.insert("ceiling_iops".into(), f.qd16_iops.round().into());
                }
                for (k, m) in
                    ["median_abs_iops_pct", "median_abs_mean_pct", "median_abs_p50_pct", "median_abs_p99_pct"]
                        .iter()
                        .zip(&meds)
                {
                    if let Some(m) = m {
                        v.insert(k.to_string(), ((m * 100.0).round() / 100.0).into());
                    }
                }
                if !db.is_empty() {
                    let mut d = toml::Table::new();
                    for (k, r, e) in &db {
                        let mut x = toml::Table::new();
                        x.insert("device".into(), ((r * 10.0).round() / 10.0).into());
                        x.insert("emulated".into(), ((e * 10.0).round() / 10.0).into());
                        if let Some(p) = err(Some(*e), Some(*r)) {
                            x.insert("error_pct".into(), ((p * 100.0).round() / 100.0).into());
                        }
                        d.insert(k.clone(), toml::Value::Table(x));
                    }
                    v.insert("db".into(), toml::Value::Table(d));
                }
                top.insert("validation".into(), toml::Value::Table(v));
                let head: String =
                    text.lines().take_while(|l| l.starts_with('#')).map(|l| format!("{l}\n")).collect();
                write_model(path, &format!("{head}{}", toml::to_string(&top)?))?;
            }
        }
    }
    if g.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"cells": cell_rows, "median_abs_error_pct": {"iops": meds[0], "mean": meds[1], "p50": meds[2], "p99": meds[3]}, "outside": outside, "floor": floor})
            )?
        );
    }
    rec.finish(Outcome::Complete)
}

/// `media models`' line for a model file: where it came from and its
/// median validated error.
pub fn model_file_summary(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let top: toml::Table = text.parse().ok()?;
    let base = top.get("base")?.as_str()?.to_string();
    let cal = top.get("calibration").and_then(|v| v.as_table());
    let src = match cal {
        Some(c) => match c.get("from").and_then(|v| v.as_str()) {
            Some("table") => format!(
                "fitted to the table {} ({})",
                c.get("table").and_then(|v| v.as_str()).unwrap_or("?"),
                c.get("table_sources")
                    .and_then(|v| v.as_array())
                    .map(|a| a.iter().filter_map(|s| s.as_str()).collect::<Vec<_>>().join("; "))
                    .unwrap_or_default()
            ),
            _ => format!(
                "measured on {} ({}, {})",
                c.get("device").and_then(|v| v.as_str()).unwrap_or("?"),
                c.get("host").and_then(|v| v.as_str()).unwrap_or("?"),
                c.get("date").and_then(|v| v.as_str()).unwrap_or("?")
            ),
        },
        None => "a user's file (no calibration recorded)".into(),
    };
    let f = |t: &toml::Table, k: &str| {
        t.get(k).and_then(|v| v.as_float()).map(|v| format!("{v:.1} %")).unwrap_or_else(|| "-".into())
    };
    let val = match top.get("validation").and_then(|v| v.as_table()) {
        Some(v) => format!(
            "validated against {} ({}): median |error| IOPS {}, mean {}, p99 {} over {} cells",
            v.get("against").and_then(|x| x.as_str()).unwrap_or("?"),
            v.get("date").and_then(|x| x.as_str()).unwrap_or("?"),
            f(v, "median_abs_iops_pct"),
            f(v, "median_abs_mean_pct"),
            f(v, "median_abs_p99_pct"),
            v.get("cells_inside").and_then(|x| x.as_integer()).unwrap_or(0)
        ),
        None => "not validated (storbench media validate FILE --against DEVICE)".into(),
    };
    Some(format!("{} (base {base})\n  source: {src}\n  {val}", path.display()))
}

/// Where the built-in models' values come from (each parameter's doc
/// cites its own).
pub const BUILTIN_SOURCE: &str =
    "typical of the class: each parameter's source is in its line below (datasheets, published measurements, REFERENCE)";

/// The model files `media models` lists: those given, else every `*.toml`
/// under ./models (none if it does not exist).
pub fn model_files(given: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    if !given.is_empty() {
        for f in &given {
            if !f.is_file() {
                return Err(usage(format!(
                    "{}: not a file (give model files, e.g. models/my-disk.toml)",
                    f.display()
                )));
            }
        }
        return Ok(given);
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir("models")
        .map(|d| {
            d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect()
        })
        .unwrap_or_default();
    out.sort();
    Ok(out)
}

/// A model file as `media models --json` gives it.
pub fn model_file_json(path: &Path) -> serde_json::Value {
    let top: Option<toml::Table> = std::fs::read_to_string(path).ok().and_then(|t| t.parse().ok());
    let get =
        |k: &str| top.as_ref().and_then(|t| t.get(k)).map(|v| serde_json::to_value(v).unwrap_or_default());
    json!({
        "file": path, "base": get("base"), "calibration": get("calibration"), "sources": get("sources"),
        "fit_error": get("fit_error"), "validated": get("validation"),
    })
}

/// Runs one storbench command as a child (the database workloads are
/// their own verbs); returns its run record's steps: label and figure.
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

/// `--db-check`: SQLite on the target's filesystem and on a filesystem on
/// an emulated medium of the model; TPC-B at 1 and 8 clients and TPC-C at
/// 1 and 4 users on each, alternating which goes first. Returns per step
/// (workload and load) the device's and the emulated medium's TPS / NOPM.
fn db_check(
    g: &Global,
    against: &Path,
    spec: &storbench_emu::Spec,
    name: &str,
    d: Duration,
) -> Result<Vec<(String, f64, f64)>> {
    let parent =
        std::fs::canonicalize(against)?.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let real_dir = parent.join(format!("storbench-dbcheck-{}", std::process::id()));
    std::fs::create_dir_all(&real_dir).map_err(|e| anyhow!("creating {}: {e}", real_dir.display()))?;
    struct Rm(PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _rm = Rm(real_dir.clone());
    let dbname = format!("{name}-db");
    let o = storbench_media::CreateOptions {
        size: 1 << 30,
        fs: "ext4".into(),
        block_size: None,
        emulate: None,
        model: Some(spec.clone()),
        trace: None,
        backing: None,
    };
    let m = storbench_media::create(&dbname, &o).map_err(crate::cmd::media::media_err)?;
    let _guard = MediumGuard(dbname);
    let emu_dir = m.mount_point.clone().ok_or_else(|| anyhow!("the database medium has no mount point"))?;
    let secs = format!("{}s", d.as_secs().max(1));
    let ramp = format!("{}s", (d.as_secs() / 4).max(1));
    let sides = [("device", real_dir.clone()), ("emulated", emu_dir)];
    for (_, dir) in &sides {
        let b = format!("sqlite:{}", dir.join("tpcb.db").display());
        let c = format!("sqlite:{}", dir.join("tpcc.db").display());
        child(g, &["tpcb", "init", "--db", &b, "--scale", "1"], "tps")?;
        child(g, &["tpcc", "build", "--db", &c, "--warehouses", "1"], "nopm.districts")?;
    }
    let mut out: Vec<(String, f64, f64)> = Vec::new();
    let mut run =
        |label: &str, first_real: bool, args: &dyn Fn(&Path) -> Vec<String>, figure: &str| -> Result<()> {
            let order = if first_real { [0, 1] } else { [1, 0] };
            let mut got: [Vec<(String, f64)>; 2] = Default::default();
            for i in order {
                let a = args(&sides[i].1);
                let a: Vec<&str> = a.iter().map(String::as_str).collect();
                got[i] = child(g, &a, figure)?;
            }
            for ((l, r), (_, e)) in got[0].iter().zip(&got[1]) {
                out.push((format!("{label} {l}"), *r, *e));
            }
            Ok(())
        };
    run(
        "TPC-B TPS",
        true,
        &|dir| {
            let b = format!("sqlite:{}", dir.join("tpcb.db").display());
            ["tpcb", "run", "--db", &b, "--clients", "1,8", "--duration", &secs]
                .iter()
                .map(|s| s.to_string())
                .collect()
        },
        "tps",
    )?;
    run(
        "TPC-C NOPM",
        false,
        &|dir| {
            let c = format!("sqlite:{}", dir.join("tpcc.db").display());
            ["tpcc", "run", "--db", &c, "--users", "1,4", "--duration", &secs, "--rampup", &ramp]
                .iter()
                .map(|s| s.to_string())
                .collect()
        },
        "nopm.districts",
    )?;
    Ok(out)
}
