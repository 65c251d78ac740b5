//! `media validate`'s work: emulating a model on a medium, running the
//! grid on it and on the real device in alternating rounds (each step
//! handed to the caller to run, record and show), the medians over rounds
//! and the error per cell, with the cells outside the emulator's envelope
//! kept out of the error figure; and the database check, TPC-B and TPC-C
//! on SQLite on each side, whose runs the caller starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use storbench_emu::fit::{self, Cell, Figures, SimLength};
use storbench_emu::model::Model;
use storbench_emu::Spec;
use storbench_io::{Prepared, Profile};
use storbench_media::floor::Floor;
use storbench_media::{CreateOptions, Medium};

use super::{CalError, Envelope, Grid, Ran, Stepped};

/// Destroys a medium however the validation ends.
struct MediumGuard(String);

impl Drop for MediumGuard {
    fn drop(&mut self) {
        let _ = storbench_media::destroy(&self.0);
    }
}

/// The emulated medium's size: the device's, at most `size`, at least 64 MiB.
pub fn medium_size(device_size: u64, size: u64) -> u64 {
    device_size.min(size.max(64 << 20)).max(64 << 20)
}

/// A modelled medium made for a validation; destroyed when dropped.
pub struct Emulated {
    /// The medium.
    pub medium: Medium,
    /// The emulator's floor and ceiling, measured when it was made (None:
    /// not measured).
    pub floor: Option<Floor>,
    _guard: MediumGuard,
}

impl Emulated {
    /// Makes the medium `name` (no filesystem) emulating `spec` at `size`.
    pub fn create(name: &str, spec: &Spec, size: u64) -> Result<Emulated, CalError> {
        let medium = storbench_media::create(name, &options(spec, size, "none"))?;
        let guard = MediumGuard(name.to_string());
        let floor = medium.daemon.as_ref().and_then(|d| d.floor.clone());
        Ok(Emulated { medium, floor, _guard: guard })
    }

    /// What the medium can serve faithfully (every cell when the floor was
    /// not measured).
    pub fn envelope(&self) -> Envelope {
        Envelope {
            floor_us: self.floor.as_ref().map(|f| f.qd1_p50_us).unwrap_or(0.0),
            timed_extra_us: self.floor.as_ref().map(|f| f.timed_extra_us).unwrap_or(0.0),
            ceiling_iops: self.floor.as_ref().map(|f| f.qd16_iops).unwrap_or(0.0),
            ceiling_write_mb_s: self.floor.as_ref().map(|f| f.write_mb_s).unwrap_or(0.0),
        }
    }
}

fn options(spec: &Spec, size: u64, fs: &str) -> CreateOptions {
    CreateOptions {
        size,
        fs: fs.into(),
        block_size: None,
        emulate: None,
        model: Some(spec.clone()),
        trace: None,
        backing: None,
        record: false,
    }
}

/// Per cell, the figures of each round on the device and on the model.
pub type Rounds = Vec<(Vec<Figures>, Vec<Figures>)>;

/// Runs the grid `rounds` times on the device (`real`) and on the emulated
/// medium (`emu`), alternating which goes first per cell and round. `step`
/// runs one profile (named `<cell>-device-r1`, `<cell>-model-r1`) with the
/// progress text it is given, and records it.
pub fn run_rounds<E>(
    real: &Prepared,
    emu: &Prepared,
    cells: &[Cell],
    profiles: &[Profile],
    rounds: u32,
    step: &mut dyn FnMut(&Prepared, &Profile, &str) -> Result<Stepped, E>,
) -> Result<Grid<Rounds>, E> {
    let mut got: Rounds = vec![(Vec::new(), Vec::new()); cells.len()];
    let n = cells.len();
    for round in 0..rounds {
        for (i, c) in cells.iter().enumerate() {
            let order: [bool; 2] =
                if (round as usize + i).is_multiple_of(2) { [true, false] } else { [false, true] };
            for is_real in order {
                let (prep, side) = if is_real { (real, "device") } else { (emu, "model") };
                let mut p = profiles[i].clone();
                p.name = format!("{}-{side}-r{}", p.name, round + 1);
                let what =
                    format!("round {}/{rounds} cell {}/{n} {} on the {side}", round + 1, i + 1, c.label());
                let s = step(prep, &p, &what)?;
                match s.ran {
                    Ran::Done => {}
                    Ran::Stopped => return Ok(Grid::Stopped(got)),
                    Ran::Failed(f) => return Ok(Grid::Failed(f)),
                }
                let fig = s.kept().map(|r| super::figures(c, r)).unwrap_or_default();
                if is_real {
                    got[i].0.push(fig);
                } else {
                    got[i].1.push(fig);
                }
            }
        }
    }
    Ok(Grid::Done(got))
}

/// The median of `v` (`None` when it is empty).
pub fn median(v: &[f64]) -> Option<f64> {
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

/// The error of `e` against the reference `r`, percent.
pub fn err(e: Option<f64>, r: Option<f64>) -> Option<f64> {
    match (e, r) {
        (Some(e), Some(r)) if r > 0.0 => Some((e - r) / r * 100.0),
        _ => None,
    }
}

/// A cell measured on both sides.
#[derive(Debug)]
pub struct CellComparison {
    /// The cell.
    pub cell: Cell,
    /// The device's medians over rounds.
    pub device: Figures,
    /// The emulated medium's medians over rounds.
    pub emulated: Figures,
    /// What the model predicts.
    pub model: Figures,
    /// The emulated medium's error against the device, percent: IOPS,
    /// mean, p50, p99 latency.
    pub errors: [Option<f64>; 4],
    /// Why the cell is outside the envelope (None: inside).
    pub outside: Option<String>,
}

/// The device against the emulated medium over the grid.
#[derive(Debug, Default)]
pub struct Comparison {
    /// The cells measured on both sides.
    pub cells: Vec<CellComparison>,
    /// Median |error| over the cells inside the envelope: IOPS, mean, p50, p99.
    pub medians: [Option<f64>; 4],
    /// Cells inside the envelope with an IOPS error.
    pub inside: usize,
    /// `cell: why` for each cell outside the envelope.
    pub outside: Vec<String>,
    /// The error split in two, median |error| of the mean latency over the
    /// cells inside the envelope, percent: the emulated medium against the
    /// model's own prediction (the emulator's part), and the model against
    /// the device now (the fit's part, and how far the device moved since
    /// it was calibrated).
    pub split: Split,
}

/// Whose the error is (see [`Comparison::split`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct Split {
    /// The emulated medium's mean latency against the model's.
    pub emulator_mean: Option<f64>,
    /// The model's mean latency against the device's.
    pub model_mean: Option<f64>,
    /// How far the device moved between rounds on its own: per cell its
    /// rounds' mean latencies' range over their median, percent; the
    /// median over the cells (none with one round). An error below it is
    /// within the device's own movement.
    pub device_spread: Option<f64>,
}

/// The range of `xs` over their median, percent (none under two values).
fn spread(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    median(xs).filter(|&m| m > 0.0).map(|m| (hi - lo) / m * 100.0)
}

/// The MB/s a cell writes by the model's figures (a flush cell: its
/// writes; a mixed cell: its write share), for the envelope's write ceiling.
fn write_mb_s(c: &Cell, model: &Figures) -> Option<f64> {
    let share = if c.pattern == fit::Pattern::Flush { 1.0 } else { f64::from(100 - c.read_pct) / 100.0 };
    model.iops_at(c.bs).map(|i| i * c.bs as f64 * share / 1e6)
}

/// Compares the rounds' medians per cell; `model` built at `capacity`
/// gives the prediction the envelope is judged on.
pub fn compare(cells: &[Cell], got: &Rounds, model: &Model, capacity: u64, env: &Envelope) -> Comparison {
    let mut errs: [Vec<f64>; 4] = Default::default();
    let (mut emulator, mut fitted, mut moved) = (Vec::new(), Vec::new(), Vec::new());
    let mut out = Comparison::default();
    for (c, (dev, emu)) in cells.iter().zip(got) {
        if dev.is_empty() || emu.is_empty() {
            continue;
        }
        let (r, e) = (median_figures(dev), median_figures(emu));
        let predicted = fit::predict(model, c, capacity, SimLength::TABLE);
        let why = env.outside(&predicted, write_mb_s(c, &predicted));
        let es = [
            err(e.iops_at(c.bs), r.iops_at(c.bs)),
            err(e.lat_mean_us, r.lat_mean_us),
            err(e.lat_p50_us, r.lat_p50_us),
            err(e.lat_p99_us, r.lat_p99_us),
        ];
        match &why {
            None => {
                for (k, v) in es.iter().enumerate() {
                    if let Some(v) = v {
                        errs[k].push(v.abs());
                    }
                }
                emulator.extend(err(e.lat_mean_us, predicted.lat_mean_us).map(f64::abs));
                fitted.extend(err(predicted.lat_mean_us, r.lat_mean_us).map(f64::abs));
                moved.extend(spread(&dev.iter().filter_map(|f| f.lat_mean_us).collect::<Vec<_>>()));
            }
            Some(w) => out.outside.push(format!("{}: {w}", c.label())),
        }
        out.cells.push(CellComparison {
            cell: *c,
            device: r,
            emulated: e,
            model: predicted,
            errors: es,
            outside: why,
        });
    }
    out.medians = [0, 1, 2, 3].map(|k| median(&errs[k]));
    out.inside = errs[0].len();
    out.split = Split {
        emulator_mean: median(&emulator),
        model_mean: median(&fitted),
        device_spread: median(&moved),
    };
    out
}

/// A database step on the device, on the emulated medium and on the
/// model in process.
#[derive(Clone, Debug)]
pub struct DbRow {
    /// Workload, figure and load: `TPC-B TPS clients=1`.
    pub step: String,
    /// On the device.
    pub device: f64,
    /// On the emulated medium (the FUSE daemon under a loop device and
    /// ext4, as a run's `media create --model` gives).
    pub emulated: f64,
    /// On the model in process (`sqlite:…?model=`: the model under
    /// SQLite's files with no daemon between, `storbench_emu::inproc`).
    pub in_process: f64,
}

impl DbRow {
    /// The emulated medium's error against the device, percent.
    pub fn error_pct(&self) -> Option<f64> {
        err(Some(self.emulated), Some(self.device))
    }

    /// The model in process's error against the device, percent: the
    /// model's own error at the database level.
    pub fn in_process_error_pct(&self) -> Option<f64> {
        err(Some(self.in_process), Some(self.device))
    }
}

/// A validation as the model file keeps it.
pub struct Validation<'a> {
    /// The device it was validated against.
    pub against: &'a Path,
    /// The short grid.
    pub quick: bool,
    /// Rounds on each side.
    pub rounds: u32,
    /// The comparison.
    pub comparison: &'a Comparison,
    /// The emulator's floor and ceiling.
    pub floor: Option<&'a Floor>,
    /// The database check's steps (empty without one).
    pub db: &'a [DbRow],
}

/// Runs one storbench workload verb (its arguments) and returns its
/// steps' labels and `figure`.
pub type RunVerb<'a> = dyn FnMut(&[&str], &str) -> Result<Vec<(String, f64)>, CalError> + 'a;

/// Removes a directory however the check ends.
struct Rm(PathBuf);

impl Drop for Rm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One side of the database check: where its files are and what its
/// SQLite URLs end in.
struct Side {
    dir: PathBuf,
    query: String,
}

impl Side {
    fn url(&self, file: &str) -> String {
        format!("sqlite:{}{}", self.dir.join(file).display(), self.query)
    }
}

/// `--db-check`: SQLite on the filesystem of `against` (a file), on a
/// filesystem on an emulated medium of `spec` (named `<name>-db`) and on
/// the filesystem of `against` again with `model` (the model's name or
/// file, as given) under its files in process, whose syncs stand for the
/// device's (so the first and the last differ in the sync alone); TPC-B at 1 and 8 clients and TPC-C at 1 and 4 users
/// of `d` each, alternating which side goes first. Returns per step the
/// three sides' TPS / NOPM. `run` runs each workload verb.
pub fn db_check(
    against: &Path,
    spec: &Spec,
    model: &str,
    name: &str,
    d: Duration,
    run: &mut RunVerb<'_>,
) -> Result<Vec<DbRow>, CalError> {
    let parent = std::fs::canonicalize(against)
        .map_err(|e| CalError::Failed(e.to_string()))?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let real_dir = parent.join(format!("storbench-dbcheck-{}", std::process::id()));
    let mem_dir = parent.join(format!("storbench-dbcheck-model-{}", std::process::id()));
    for dir in [&real_dir, &mem_dir] {
        std::fs::create_dir_all(dir)
            .map_err(|e| CalError::Failed(format!("creating {}: {e}", dir.display())))?;
    }
    let (_rm, _rm_mem) = (Rm(real_dir.clone()), Rm(mem_dir.clone()));
    let dbname = format!("{name}-db");
    let m = storbench_media::create(&dbname, &options(spec, 1 << 30, "ext4"))?;
    let _guard = MediumGuard(dbname);
    let emu_dir = m
        .mount_point
        .clone()
        .ok_or_else(|| CalError::Failed("the database medium has no mount point".into()))?;
    // A model file named relative to here stays found by the children
    // (they share this directory, but say it whole in their records).
    let model = match std::fs::canonicalize(model) {
        Ok(p) if p.is_file() => p.display().to_string(),
        _ => model.to_string(),
    };
    let sides = [
        Side { dir: real_dir, query: String::new() },
        Side { dir: emu_dir, query: String::new() },
        Side { dir: mem_dir, query: format!("?model={model}") },
    ];
    let secs = format!("{}s", d.as_secs().max(1));
    let ramp = format!("{}s", (d.as_secs() / 4).max(1));
    for side in &sides {
        let (b, c) = (side.url("tpcb.db"), side.url("tpcc.db"));
        run(&["tpcb", "init", "--db", &b, "--scale", "1"], "tps")?;
        run(&["tpcc", "build", "--db", &c, "--warehouses", "1"], "nopm.districts")?;
    }
    let mut out = Vec::new();
    let tpcb = |side: &Side| {
        let b = side.url("tpcb.db");
        ["tpcb", "run", "--db", &b, "--clients", "1,8", "--duration", &secs].map(String::from).to_vec()
    };
    all(&sides, "TPC-B TPS", true, &tpcb, "tps", run, &mut out)?;
    let tpcc = |side: &Side| {
        let c = side.url("tpcc.db");
        ["tpcc", "run", "--db", &c, "--users", "1,4", "--duration", &secs, "--rampup", &ramp]
            .map(String::from)
            .to_vec()
    };
    all(&sides, "TPC-C NOPM", false, &tpcc, "nopm.districts", run, &mut out)?;
    Ok(out)
}

/// Writes back what a run left dirty on `dir`'s filesystem (the model
/// side's files are never synced: the model's syncs stand for theirs), so
/// the next run does not pay for it.
fn settle(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        // SAFETY: syncfs on a descriptor this function owns.
        unsafe {
            libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&d));
        }
    }
}

/// Runs one workload verb on the three sides (the device's first when
/// `first_real`, else last) and lines up their steps.
fn all(
    sides: &[Side; 3],
    label: &str,
    first_real: bool,
    args: &dyn Fn(&Side) -> Vec<String>,
    figure: &str,
    run: &mut RunVerb<'_>,
    out: &mut Vec<DbRow>,
) -> Result<(), CalError> {
    let order = if first_real { [0, 1, 2] } else { [2, 1, 0] };
    let mut got: [Vec<(String, f64)>; 3] = Default::default();
    for i in order {
        let a = args(&sides[i]);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        got[i] = run(&a, figure)?;
        settle(&sides[i].dir);
    }
    for (((l, r), (_, e)), (_, m)) in got[0].iter().zip(&got[1]).zip(&got[2]) {
        out.push(DbRow { step: format!("{label} {l}"), device: *r, emulated: *e, in_process: *m });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_is_split_between_the_emulator_and_the_model() {
        // A 100 µs model; the device now reads in 125 µs, the emulated
        // medium in 110: the emulator is 10 % off its model, the model
        // 20 % off the device, and the whole 12 % (the two partly cancel).
        let model = Spec::parse("constant", &["read=100us".to_string()]).unwrap().build(1 << 30).unwrap();
        let cell = Cell { bs: 4096, pattern: fit::Pattern::Random, read_pct: 100, qd: 1 };
        let at = |us: f64| Figures { lat_mean_us: Some(us), iops: Some(1e6 / us), ..Default::default() };
        let got: Rounds = vec![(vec![at(125.0)], vec![at(110.0)])];
        let env = Envelope { floor_us: 0.0, timed_extra_us: 0.0, ceiling_iops: 0.0, ceiling_write_mb_s: 0.0 };
        let c = compare(&[cell], &got, &model, 1 << 30, &env);
        let near = |x: Option<f64>, want: f64| (x.unwrap() - want).abs() < 0.5;
        assert!(near(c.split.emulator_mean, 10.0), "{:?}", c.split);
        assert!(near(c.split.model_mean, 20.0), "{:?}", c.split);
        assert!(near(c.medians[1], 12.0), "{:?}", c.medians);
        assert_eq!(c.split.device_spread, None, "one round: no spread");
        // Three rounds on the device, 100, 125 and 150 µs: it moved 40 %
        // of its median (50 over 125) on its own.
        let got: Rounds = vec![(vec![at(100.0), at(125.0), at(150.0)], vec![at(110.0)])];
        let c = compare(&[cell], &got, &model, 1 << 30, &env);
        assert!(near(c.split.device_spread, 40.0), "{:?}", c.split);
        // A cell outside the envelope counts in neither.
        let env = Envelope { floor_us: 50.0, ..env };
        let c = compare(&[cell], &got, &model, 1 << 30, &env);
        assert_eq!((c.split.emulator_mean, c.split.model_mean), (None, None));
    }

    #[test]
    fn medians_and_errors() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(err(Some(110.0), Some(100.0)), Some(10.0));
        assert_eq!(err(Some(1.0), Some(0.0)), None);
        assert_eq!(err(None, Some(1.0)), None);
    }
}
