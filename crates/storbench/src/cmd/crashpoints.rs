//! `storbench durability --crash-points N|all` (and `--crash-point K`):
//! validates the flags, runs `storbench_ops::crash` and prints its progress
//! and the matrix (setting × cache mode → points tried, acknowledged rows
//! lost, inconsistent and failed recoveries, the first bad point's index),
//! and stores it in the results store: a run of kind `crash-points`, one
//! step per cell. Exit 0 when no point lost, broke or failed; 1 otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use storbench_emu::crash::CacheMode;
use storbench_ops::crash::{Cell, Event, Options, Selection, Target, Workload};

use crate::cli::Global;
use crate::cmd::durability::{CacheChoice, DurabilityArgs};
use crate::cmd::failover::ops_err;
use crate::error::usage;

/// `KEY=V1,V2` flags into every combination of one value per key.
pub fn settings_matrix(flags: &[String]) -> Result<Vec<Vec<(String, String)>>> {
    let mut cells: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for f in flags {
        let bad = || {
            usage(format!("--settings {f}: give KEY=V1,V2 with a setting name and values of letters, digits, '_', '.' or '-'"))
        };
        let (k, vs) = f.split_once('=').ok_or_else(bad)?;
        let word =
            |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !word(k) || k.contains(['.', '-']) {
            return Err(bad());
        }
        let vs: Vec<&str> = vs.split(',').map(str::trim).collect();
        if vs.iter().any(|v| !word(v)) {
            return Err(bad());
        }
        cells = cells
            .into_iter()
            .flat_map(|c| {
                vs.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((k.to_string(), v.to_string()));
                    c
                })
            })
            .collect();
    }
    Ok(cells)
}

/// The cache modes of `choice`: [`CacheChoice::Medium`] is the medium's
/// own model's mode.
pub fn cache_modes(choice: &CacheChoice, medium: Option<&storbench_emu::Spec>) -> Vec<CacheMode> {
    match choice {
        CacheChoice::Modes(m) => m.clone(),
        CacheChoice::Medium => {
            let own = medium.and_then(|s| s.build(1 << 30).ok()).and_then(|m| m.volatile_cache());
            vec![match own {
                Some(c) if c.lie_on_flush => CacheMode::Lying,
                Some(_) => CacheMode::Honest,
                None => CacheMode::None,
            }]
        }
    }
}

/// Runs the crash-point check.
pub fn run(g: &Global, a: DurabilityArgs) -> Result<ExitCode> {
    let selection = match (&a.crash_points, a.crash_point) {
        (_, Some(k)) => Selection::One(k),
        (Some(s), None) => s.value,
        (None, None) => unreachable!("called with crash points"),
    };
    let workload = a.workload;
    let medium = storbench_media::get(&a.medium)
        .map_err(|e| anyhow!("{e}"))?
        .ok_or_else(|| usage(format!("--medium {}: no such medium (storbench media list)", a.medium)))?;
    let journal = medium.daemon.as_ref().and_then(|d| d.journal.clone()).filter(|j| j.exists()).ok_or_else(|| {
        usage(format!(
            "--medium {}: it records no write journal; crash points need a medium made with `media create --model M --record`",
            a.medium
        ))
    })?;
    let mount = medium
        .mount_point
        .clone()
        .ok_or_else(|| usage(format!("--medium {}: it has no filesystem", a.medium)))?;
    let target = target(&a, mount)?;
    let run_for = a.cut_after;
    let checkpoint_every = match (&a.checkpoint_every, &target) {
        (None, _) => None,
        (Some(d), Target::Postgres { .. }) => Some(d.value),
        (Some(d), _) => {
            return Err(usage(format!(
                "--checkpoint-every {}: PostgreSQL only (SQLite checkpoints on its own)",
                d.text
            )))
        }
    };
    let settings = settings_matrix(&a.settings)?;
    let modes = cache_modes(&a.cache.value, medium.model.as_ref());
    let scratch = a.scratch.clone().unwrap_or_else(|| {
        medium.backing_file.parent().map(|p| p.to_path_buf()).unwrap_or_else(std::env::temp_dir)
    });
    let o = Options {
        target,
        journal,
        scratch,
        workload,
        clients: a.clients,
        run_for,
        settings,
        modes,
        selection,
        last_run: a.last_run,
        torn_pages: a.torn_pages,
        checkpoint_every,
        jobs: a.jobs.map_or_else(storbench_ops::crash::default_jobs, |n| n as usize),
    };
    if !g.quiet {
        eprintln!("{}", estimate(&o));
    }
    let jobs = o.jobs;
    let mut on = |e: Event| progress(g, jobs, e);
    let started = storbench_results::now_rfc3339();
    let cells = storbench_ops::crash::run(&o, crate::interrupt::flag(), &mut on).map_err(ops_err)?;
    let interrupted = crate::interrupt::flag().load(std::sync::atomic::Ordering::Relaxed);
    let run = store(g, &a, &o, &cells, &started, interrupted)?;
    print_matrix(g, &a, &o, &cells, &run)?;
    if !g.quiet {
        eprintln!(
            "storbench: run {} ({}) {}, saved in {}",
            run.id,
            run.short(),
            if interrupted { "interrupted" } else { "complete" },
            g.results.display()
        );
    }
    let bad = cells.iter().any(|c| c.first_bad.is_some());
    Ok(if bad { ExitCode::from(crate::error::EXIT_FAILED) } else { ExitCode::SUCCESS })
}

/// The database the crash points run on, from `--db`: a SQLite file on
/// the medium, storbench's own mariadbd with its data on the medium (for a
/// `mysql://` URL), or a managed PostgreSQL instance whose data and WAL are
/// on it — each refused, naming the value, where it cannot work.
fn target(a: &DurabilityArgs, mount: PathBuf) -> Result<Target> {
    let maria = storbench_db::DbUrl::parse(&a.db).ok().filter(|u| u.engine() == storbench_db::Engine::Mysql);
    Ok(match a.db.strip_prefix("sqlite:") {
        // MariaDB: the URL names the engine and the database; the server is
        // storbench's own, its data directory on the medium (the crash
        // images must hold it), not the one at the URL's host.
        None if maria.is_some() => {
            let database =
                maria.as_ref().and_then(|u| u.database()).filter(|d| !d.is_empty()).unwrap_or("test");
            if !database.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(usage(format!("--db: database '{database}': use letters, digits and '_'")));
            }
            Target::Mariadb { data: mount.join("storbench-mariadb"), database: database.to_string(), mount }
        }
        Some(p) => {
            let path = std::path::absolute(p).unwrap_or_else(|_| PathBuf::from(p));
            if !path.starts_with(&mount) {
                return Err(usage(format!(
                    "--db {}: the file must be on the medium (under {})",
                    a.db,
                    mount.display()
                )));
            }
            Target::Sqlite { mount, path }
        }
        None => {
            let name = a.db.strip_prefix("managed:").unwrap_or(&a.db).to_string();
            let inst = storbench_instances::pg::get(&name).map_err(|e| anyhow!("{e}"))?.ok_or_else(|| {
                usage(format!(
                    "--db {}: no managed instance named '{name}' (storbench pg list); or give sqlite:PATH",
                    a.db
                ))
            })?;
            if !inst.data.starts_with(&mount) || inst.wal.as_ref().is_some_and(|w| !w.starts_with(&mount)) {
                return Err(usage(format!(
                    "--db {}: its data directory and WAL must be on the medium (under {})",
                    a.db,
                    mount.display()
                )));
            }
            if !storbench_instances::pg::running(&inst) {
                return Err(usage(format!(
                    "--db {}: managed instance '{name}' is not running (storbench pg up {name})",
                    a.db
                )));
            }
            Target::Postgres { mount, inst: Box::new(inst) }
        }
    })
}

/// What the run will take, said before it starts: the runs are known, the
/// points per run only after it (about half a second each on SQLite).
fn estimate(o: &Options) -> String {
    let runs = o.settings.len();
    // Measured here (bench/crash-points.sh): SQLite's points take a few
    // tenths of a second, PostgreSQL's 0.7 s alone on the machine (its
    // start and recovery are half), several seconds beside other work.
    let per_point = match (&o.target, o.workload) {
        (Target::Sqlite { .. }, Workload::Rows) => 0.4,
        // TPC-C's conditions read every table (scale 1: about 100 MB).
        (Target::Sqlite { .. }, Workload::Tpcc) => 1.5,
        (Target::Mariadb { .. }, _) => 2.0,
        (Target::Postgres { .. }, Workload::Rows) => 1.0,
        // TPC-C's consistency conditions read every table: 1.2 s alone
        // on the machine at scale 1 (bench/crash-points.sh).
        (Target::Postgres { .. }, Workload::Tpcc) => 1.5,
    };
    let points = match o.selection {
        Selection::All => None,
        Selection::Sample(n) => Some(n),
        Selection::One(_) => Some(1),
    };
    let run_s = runs as f64 * o.run_for.as_secs_f64();
    match points {
        Some(n) => format!(
            "crash points: {runs} run(s) of {:.0} s, then up to {n} point(s) × {} cache mode(s) each: about {:.0} s",
            o.run_for.as_secs_f64(),
            o.modes.len(),
            run_s + (runs * n * o.modes.len()) as f64 * per_point / o.jobs.clamp(1, n) as f64
        ),
        None => format!(
            "crash points: {runs} run(s) of {:.0} s ({run_s:.0} s), then every point (~{per_point} s each; counted after each run)",
            o.run_for.as_secs_f64()
        ),
    }
}

fn progress(g: &Global, jobs: usize, e: Event) {
    // Said even with --quiet: it changes what the run costs (every point
    // recovered) and what its figures rest on.
    if let Event::ReductionOff { why } = e {
        eprintln!("storbench: warning: WAL-extent reduction off: {why}; every point is recovered");
        return;
    }
    if g.quiet {
        return;
    }
    match e {
        Event::Run { setting } => {
            eprintln!("run: {}", if setting.is_empty() { "default settings" } else { setting })
        }
        Event::Point { cell, point, outcome, done, of, took, timing } => {
            // `jobs` points are recovered at once.
            let eta = took.as_secs_f64() * (of - done) as f64 / jobs.max(1) as f64;
            let what = match (&outcome.failed, &outcome.inconsistent) {
                (Some(f), _) => format!("recovery FAILED: {f}"),
                (None, Some(i)) => format!("INCONSISTENT: {i}"),
                _ => "consistent".into(),
            };
            eprintln!(
                "  [{}] point {done}/{of} (#{} {} after flush {}): {} lost, {what} ({:.1} s: image {:.1}, mount {:.1}, recovery {:.1}, checks {:.1}, cleanup {:.1}; ETA {eta:.0} s)",
                cell.mode,
                point.index,
                point.shape.name(),
                point.flush,
                outcome.lost,
                took.as_secs_f64(),
                timing.image.as_secs_f64(),
                timing.mount.as_secs_f64(),
                timing.recover.as_secs_f64(),
                timing.check.as_secs_f64(),
                timing.cleanup.as_secs_f64(),
            );
        }
        Event::Reduced { predicted, recover, states } => eprintln!(
            "  WAL extent: {predicted} point(s) covered by the WAL each holds; {recover} to recover \
             ({states} non-WAL state(s), points whose volatile writes leave the WAL, and a spread of the others)"
        ),
        Event::CellDone(c) if c.predicted > 0 || c.disagreed > 0 => eprintln!(
            "  [{}] {} points: {} checked by WAL extent, {} recovered; {} lost at most, {} inconsistent, {} failed, \
             {} where recovery disagreed with the WAL extent",
            c.mode,
            c.points,
            c.predicted,
            c.tried,
            c.lost_max,
            c.inconsistent,
            c.failed,
            c.disagreed
        ),
        Event::CellDone(_) | Event::ReductionOff { .. } => {}
    }
}

/// The mean time of a tried point, by phase (seconds).
fn per_point(c: &Cell) -> serde_json::Value {
    let n = c.tried.max(1) as f64;
    let t = &c.time;
    let total = t.image + t.mount + t.recover + t.check + t.cleanup;
    serde_json::json!({
        "total": total.as_secs_f64() / n, "image": t.image.as_secs_f64() / n, "mount": t.mount.as_secs_f64() / n,
        "recover": t.recover.as_secs_f64() / n, "check": t.check.as_secs_f64() / n, "cleanup": t.cleanup.as_secs_f64() / n,
        // With several jobs the points overlap: the rate is over the wall time.
        "wall": c.wall.as_secs_f64() / n,
    })
}

/// A cell's figures as a step of the stored run.
fn cell_report(c: &Cell) -> storbench_metrics::StepReport {
    use storbench_metrics::Unit;
    let mut r = storbench_metrics::StepReport::default();
    for (name, v) in [
        ("crash.points", c.points as f64),
        ("crash.points.tried", c.tried as f64),
        ("crash.acknowledged", c.acknowledged as f64),
        ("crash.lost.max", c.lost_max as f64),
        ("crash.lost.p50", c.lost_quantile(0.5) as f64),
        ("crash.lost.p90", c.lost_quantile(0.9) as f64),
        ("crash.points.losing", c.points_losing as f64),
        ("crash.inconsistent", c.inconsistent as f64),
        ("crash.failed", c.failed as f64),
        ("crash.points.predicted", c.predicted as f64),
        ("crash.points.disagreed", c.disagreed as f64),
    ] {
        r.figure(name, v, Unit::Count);
    }
    r.figure("crash.lost.mean", c.lost_mean(), Unit::Count);
    let t = &c.time;
    let total = t.image + t.mount + t.recover + t.check + t.cleanup;
    r.figure("crash.seconds_per_point", total.as_secs_f64() / c.tried.max(1) as f64, Unit::S);
    r
}

/// Every bad point of a cell: its index (for `--crash-point K`) and what it showed.
fn bad_points(c: &Cell) -> serde_json::Value {
    c.bad
        .iter()
        .map(|(i, out)| {
            serde_json::json!({ "index": i, "lost": out.lost, "inconsistent": out.inconsistent, "failed": out.failed })
        })
        .collect()
}

/// Stores the matrix: a run of kind `crash-points`, a step per cell (its
/// figures, and its bad points' indices in the step's parameters).
fn store(
    g: &Global,
    a: &DurabilityArgs,
    o: &Options,
    cells: &[Cell],
    started: &str,
    interrupted: bool,
) -> Result<storbench_results::RunRow> {
    use storbench_results::{NewRun, Status, Store};
    let mut st = Store::open(&g.results)?;
    let config = serde_json::json!({
        "db": a.db, "medium": a.medium, "engine": o.target.engine(), "workload": o.workload.name(),
        "clients": a.clients, "run_s": o.run_for.as_secs_f64(), "settings": a.settings, "cache": a.cache.text,
        "crash_points": a.crash_points.as_ref().map(|s| &s.text), "crash_point": a.crash_point, "last_run": a.last_run,
        "torn_pages": a.torn_pages, "jobs": o.jobs, "checkpoint_every": a.checkpoint_every.as_ref().map(|d| &d.text),
    });
    let label = g.record.label.clone().unwrap_or_else(|| {
        format!("crash points, {} {} on {}", o.target.engine(), o.workload.name(), a.medium)
    });
    let env = crate::record::base_env(serde_json::json!({}));
    let run = st.begin_run(&NewRun {
        kind: "crash-points".into(),
        label,
        config,
        env,
        plan: g.record.plan.clone(),
        cell: g.record.cell.clone(),
    })?;
    let finished = storbench_results::now_rfc3339();
    for (i, c) in cells.iter().enumerate() {
        let setting = if c.setting.is_empty() { "default" } else { &c.setting };
        let params = serde_json::json!({
            "setting": c.setting, "cache": c.mode, "first_bad": c.first_bad.as_ref().map(|(i, _)| *i),
            "bad_points": bad_points(c), "note": c.note,
        });
        st.write_step(
            run.id,
            i as i64,
            &format!("{setting} / {}", c.mode),
            &params,
            started,
            &finished,
            &cell_report(c),
        )?;
    }
    st.finish_run(run.id, if interrupted { Status::Interrupted } else { Status::Complete })?;
    Ok(run)
}

fn print_matrix(
    g: &Global,
    a: &DurabilityArgs,
    o: &Options,
    cells: &[Cell],
    run: &storbench_results::RunRow,
) -> Result<()> {
    if g.json {
        let rows: Vec<serde_json::Value> = cells
            .iter()
            .map(|c| {
                serde_json::json!({
                    "setting": c.setting, "cache": c.mode, "acknowledged": c.acknowledged,
                    "points": c.points, "tried": c.tried, "predicted": c.predicted, "disagreed": c.disagreed,
                    "to_recover": c.to_recover, "states": c.states,
                    "lost_max": c.lost_max,
                    "lost_p50": c.lost_quantile(0.5), "lost_p90": c.lost_quantile(0.9), "lost_mean": c.lost_mean(),
                    "bad_points": bad_points(c),
                    "points_losing": c.points_losing, "inconsistent": c.inconsistent, "failed": c.failed,
                    "first_bad": c.first_bad.as_ref().map(|(i, _)| *i),
                    "first_bad_why": c.first_bad.as_ref().map(|(_, out)| format!("{out:?}")),
                    "seconds_per_point": per_point(c), "note": c.note,
                })
            })
            .collect();
        let doc = serde_json::json!({ "run": run.id, "medium": a.medium, "db": a.db, "engine": o.target.engine(), "workload": o.workload.name(), "jobs": o.jobs, "cells": rows });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    let mut t = vec![format!(
        "{:<28} {:<7} {:>7} {:>11} {:>17} {:>7} {:>6} {:>6}  first bad",
        "setting", "cache", "acked", "tried/of", "lost p50/p90/max", "losing", "incons", "failed"
    )];
    for c in cells {
        t.push(format!(
            "{:<28} {:<7} {:>7} {:>11} {:>17} {:>7} {:>6} {:>6}  {}",
            if c.setting.is_empty() { "default" } else { &c.setting },
            c.mode,
            c.acknowledged,
            if c.predicted > 0 {
                format!("{}+{}/{}", c.tried, c.predicted, c.points)
            } else {
                format!("{}/{}", c.tried, c.points)
            },
            format!("{}/{}/{}", c.lost_quantile(0.5), c.lost_quantile(0.9), c.lost_max),
            c.points_losing,
            c.inconsistent,
            c.failed,
            c.first_bad
                .as_ref()
                .map(|(i, _)| format!("#{i} (--crash-point {i})"))
                .unwrap_or_else(|| "-".into())
        ));
    }
    for c in cells.iter().filter(|c| c.note.is_some()) {
        let setting = if c.setting.is_empty() { "default" } else { &c.setting };
        t.push(format!("{setting} / {}: {}", c.mode, c.note.as_deref().unwrap_or_default()));
    }
    if cells.iter().any(|c| c.predicted > 0) {
        t.push(
            "tried/of R+P/N: R recovered, P checked by the WAL extent each holds (docs/durability.md)".into(),
        );
    }
    crate::oltp::result(g, t.join("\n"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_make_every_combination() {
        let m = settings_matrix(&["synchronous=full,off".into(), "journal_mode=wal,delete".into()]).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[1],
            vec![("synchronous".into(), "full".into()), ("journal_mode".into(), "delete".into())]
        );
        assert_eq!(settings_matrix(&[]).unwrap(), vec![Vec::<(String, String)>::new()]);
    }

    #[test]
    fn a_bad_setting_is_refused() {
        for bad in ["synchronous", "=on", "synchronous=on;drop", "x=", "a.b=1"] {
            let e = settings_matrix(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn cache_modes_parse() {
        let modes = |s: &str| crate::cmd::durability::parse_cache(s).map(|c| cache_modes(&c, None));
        assert_eq!(modes("honest,lying").unwrap(), vec![CacheMode::Honest, CacheMode::Lying]);
        assert_eq!(modes("medium").unwrap(), vec![CacheMode::None]);
        assert!(modes("fast").unwrap_err().contains("'fast' is not a cache mode"));
        assert!(modes("honest,").unwrap_err().contains("'' is not a cache mode"));
    }
}
