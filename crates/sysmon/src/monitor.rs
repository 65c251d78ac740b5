//! The per-second system monitor: a background thread reads /proc/stat,
//! /proc/diskstats (for the devices behind the run's targets) and
//! /proc/pressure/io once a second and keeps the derived rates; a step asks
//! for the samples of its seconds and the summary of its measured window.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use storbench_metrics::{StepReport, Unit};

use crate::procfs::{cpu_pct, disk_rates, parse_diskstats, parse_pressure, parse_stat, CpuPct, DiskRates};

/// One second of the system.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When the second ended.
    pub at: Instant,
    /// CPU shares.
    pub cpu: CpuPct,
    /// Per device.
    pub disks: Vec<(String, DiskRates)>,
    /// I/O pressure: some and full stall shares, %.
    pub psi: Option<(f64, f64)>,
}

/// Hours of seconds kept (bounded memory on long plans).
const KEEP: usize = 6 * 3600;

/// How far a monitor second may reach before or after a window's edges and
/// still count as inside it.
const HALF: Duration = Duration::from_millis(500);

/// Mean CPU steal (%) over a step's window at or above which the step is
/// flagged (`flag.steal`): the hypervisor took that much of the CPUs, so
/// the step measured a busier machine than the others. A TPC-B round with
/// 12 % steal here was the one outlier of its series.
pub const STEAL_FLAG_PCT: f64 = 5.0;

/// Time for the sampler to read /proc and store a second it has timed.
const SAMPLE_SLACK: Duration = Duration::from_millis(100);

/// Samples CPU and the devices behind some paths once a second.
pub struct Monitor {
    devices: Vec<String>,
    history: Arc<Mutex<VecDeque<Snapshot>>>,
    /// The sampling thread, stopped and joined when the monitor drops
    /// (`None` if the system could not start one: no samples, no waiting).
    sampler: Option<storbench_proc::Background>,
}

/// The kernel names of the devices behind a path: its filesystem's device,
/// and for a loop device also the device holding its backing file; for a
/// partition, also its disk.
pub fn devices_behind(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |n: String| {
        if !n.is_empty() && !out.contains(&n) {
            out.push(n);
        }
    };
    let info = crate::path_env(path);
    push(info.device_name.clone());
    if let Some(parent) = parent_disk(&info.device_name) {
        push(parent);
    }
    if let Some(back) = &info.loop_backing_file {
        let b = crate::path_env(back);
        push(b.device_name.clone());
        if let Some(parent) = parent_disk(&b.device_name) {
            push(parent);
        }
    }
    out
}

fn parent_disk(name: &str) -> Option<String> {
    if name.is_empty() || !Path::new(&format!("/sys/class/block/{name}/partition")).exists() {
        return None;
    }
    let p = std::fs::canonicalize(format!("/sys/class/block/{name}/..")).ok()?;
    Some(p.file_name()?.to_string_lossy().into_owned())
}

impl Monitor {
    /// Starts sampling for the devices behind `targets`.
    pub fn start(targets: &[PathBuf]) -> Monitor {
        let mut devices = BTreeSet::new();
        for t in targets {
            devices.extend(devices_behind(t));
        }
        let devices: Vec<String> = devices.into_iter().collect();
        let history = Arc::new(Mutex::new(VecDeque::new()));
        let sampler = {
            let (devices, history) = (devices.clone(), history.clone());
            storbench_proc::Background::named("sysmon", move |stop| sample_loop(&devices, &history, stop))
                .ok()
        };
        Monitor { devices, history, sampler }
    }

    /// The devices watched.
    pub fn devices(&self) -> &[String] {
        &self.devices
    }

    /// The last second taken, if any (for live displays).
    pub fn latest(&self) -> Option<Snapshot> {
        self.history.lock().expect("sysmon history").back().cloned()
    }

    /// The samples of `start..end` (t_ms relative to `start`) and the summary
    /// figures of the measured window `measure_from..end` (ramp-up excluded).
    ///
    /// A second belongs to the window when it ended more than half a second
    /// into it and no later than half a second after its end. A step of a
    /// second or two may end before the monitor has taken the one second
    /// that ends in that span, so this waits for it — up to half a second
    /// past `end`, and only while no second of the window has been taken
    /// (never for a step that ended in its ramp-up).
    pub fn window(&self, start: Instant, measure_from: Instant, end: Instant) -> StepReport {
        let last = end + HALF;
        let taken = || -> Vec<Snapshot> {
            let h = self.history.lock().expect("sysmon history");
            h.iter().filter(|s| s.at > start && s.at <= last).cloned().collect()
        };
        let mut snaps = taken();
        while self.sampler.is_some()
            && end > measure_from
            && !snaps.iter().any(|s| s.at > measure_from + HALF)
            && Instant::now() < last + SAMPLE_SLACK
        {
            std::thread::sleep(Duration::from_millis(20));
            snaps = taken();
        }
        summarise(&snaps, start, measure_from)
    }
}

/// Samples and figures from a run of snapshots.
pub fn summarise(snaps: &[Snapshot], start: Instant, measure_from: Instant) -> StepReport {
    let mut r = StepReport::default();
    for s in snaps {
        let t = s.at.saturating_duration_since(start).as_millis() as u64;
        r.sample(t, "cpu.user", s.cpu.user);
        r.sample(t, "cpu.system", s.cpu.system);
        r.sample(t, "cpu.iowait", s.cpu.iowait);
        r.sample(t, "cpu.idle", s.cpu.idle);
        r.sample(t, "cpu.steal", s.cpu.steal);
        for (name, d) in &s.disks {
            for (k, v) in disk_fields(d) {
                r.sample(t, format!("dev.{name}.{k}"), v);
            }
        }
        if let Some((some, full)) = s.psi {
            r.sample(t, "psi.io.some", some);
            r.sample(t, "psi.io.full", full);
        }
    }
    // A second counts toward the window when it ended after the window began.
    let w: Vec<&Snapshot> = snaps.iter().filter(|s| s.at > measure_from + HALF).collect();
    if w.is_empty() {
        return r;
    }
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let p99 = |xs: &[f64]| {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1]
    };
    let col = |f: &dyn Fn(&Snapshot) -> f64| w.iter().map(|s| f(s)).collect::<Vec<f64>>();
    let iowait = col(&|s| s.cpu.iowait);
    r.figure("cpu.user", mean(&col(&|s| s.cpu.user)), Unit::Percent);
    r.figure("cpu.system", mean(&col(&|s| s.cpu.system)), Unit::Percent);
    r.figure("cpu.iowait", mean(&iowait), Unit::Percent);
    r.figure("cpu.iowait.p99", p99(&iowait), Unit::Percent);
    r.figure("cpu.idle", mean(&col(&|s| s.cpu.idle)), Unit::Percent);
    let steal = mean(&col(&|s| s.cpu.steal));
    r.figure("cpu.steal", steal, Unit::Percent);
    if steal >= STEAL_FLAG_PCT {
        r.figure("flag.steal", steal, Unit::Percent);
    }
    let names: BTreeSet<&String> = w.iter().flat_map(|s| s.disks.iter().map(|d| &d.0)).collect();
    for name in names {
        let rows: Vec<DiskRates> =
            w.iter().filter_map(|s| s.disks.iter().find(|d| &d.0 == name).map(|d| d.1)).collect();
        let field = |k: &str| {
            rows.iter()
                .map(|d| disk_fields(d).into_iter().find(|f| f.0 == k).map(|f| f.1).unwrap_or(0.0))
                .collect::<Vec<f64>>()
        };
        for (k, unit) in [
            ("r_iops", Unit::PerS),
            ("w_iops", Unit::PerS),
            ("r_mbps", Unit::MBps),
            ("w_mbps", Unit::MBps),
            ("r_await", Unit::Ms),
            ("w_await", Unit::Ms),
            ("aqu_sz", Unit::Count),
            ("util", Unit::Percent),
        ] {
            let xs = field(k);
            // Await averages over the seconds that had I/O of that kind.
            let xs: Vec<f64> = if k.ends_with("await") {
                let busy: Vec<f64> = xs.iter().copied().filter(|v| *v > 0.0).collect();
                if busy.is_empty() {
                    continue;
                }
                busy
            } else {
                xs
            };
            r.figure(format!("dev.{name}.{k}"), mean(&xs), unit);
            if k.ends_with("await") {
                r.figure(format!("dev.{name}.{k}.p99"), p99(&xs), unit);
            }
        }
    }
    let psi: Vec<(f64, f64)> = w.iter().filter_map(|s| s.psi).collect();
    if !psi.is_empty() {
        r.figure("psi.io.some", mean(&psi.iter().map(|p| p.0).collect::<Vec<_>>()), Unit::Percent);
        r.figure("psi.io.full", mean(&psi.iter().map(|p| p.1).collect::<Vec<_>>()), Unit::Percent);
    }
    r
}

/// A device's second as (name, value) pairs, in the order the monitor's
/// figures and samples name them (`dev.DEVICE.NAME`).
pub fn disk_fields(d: &DiskRates) -> [(&'static str, f64); 8] {
    [
        ("r_iops", d.r_iops),
        ("w_iops", d.w_iops),
        ("r_mbps", d.r_mbps),
        ("w_mbps", d.w_mbps),
        ("r_await", d.r_await),
        ("w_await", d.w_await),
        ("aqu_sz", d.aqu_sz),
        ("util", d.util),
    ]
}

struct Raw {
    at: Instant,
    cpu: Option<crate::procfs::CpuTimes>,
    disks: std::collections::BTreeMap<String, crate::procfs::DiskStats>,
    psi: Option<(u64, u64)>,
}

fn read_raw() -> Raw {
    Raw {
        at: Instant::now(),
        cpu: std::fs::read_to_string("/proc/stat").ok().and_then(|t| parse_stat(&t)),
        disks: std::fs::read_to_string("/proc/diskstats").map(|t| parse_diskstats(&t)).unwrap_or_default(),
        psi: std::fs::read_to_string("/proc/pressure/io").ok().and_then(|t| parse_pressure(&t)),
    }
}

fn sample_loop(devices: &[String], history: &Mutex<VecDeque<Snapshot>>, stop: &AtomicBool) {
    let mut prev = read_raw();
    let mut next = prev.at + Duration::from_secs(1);
    loop {
        while Instant::now() < next {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(100)));
        }
        let cur = read_raw();
        let secs = cur.at.duration_since(prev.at).as_secs_f64();
        let cpu = match (&prev.cpu, &cur.cpu) {
            (Some(a), Some(b)) => cpu_pct(a, b),
            _ => CpuPct::default(),
        };
        let disks = devices
            .iter()
            .filter_map(|d| Some((d.clone(), disk_rates(prev.disks.get(d)?, cur.disks.get(d)?, secs))))
            .collect();
        let psi = match (prev.psi, cur.psi) {
            (Some(a), Some(b)) => {
                let us = secs * 1e6;
                Some((
                    (b.0.saturating_sub(a.0)) as f64 / us * 100.0,
                    (b.1.saturating_sub(a.1)) as f64 / us * 100.0,
                ))
            }
            _ => None,
        };
        {
            let mut h = history.lock().expect("sysmon history");
            h.push_back(Snapshot { at: cur.at, cpu, disks, psi });
            while h.len() > KEEP {
                h.pop_front();
            }
        }
        prev = cur;
        next += Duration::from_secs(1);
        // After a stall (suspend, heavy load) do not burst to catch up.
        if next < Instant::now() {
            next = Instant::now() + Duration::from_secs(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    use std::process::Command;

    #[test]
    fn live_samples_are_sane() {
        let dir = tempfile::tempdir().unwrap();
        let m = Monitor::start(&[dir.path().to_path_buf()]);
        assert!(!m.devices().is_empty(), "a temporary directory lives on some device");
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(3300));
        let end = Instant::now();
        let r = m.window(start, start, end);
        let users: Vec<f64> = r.samples.iter().filter(|s| s.name == "cpu.user").map(|s| s.value).collect();
        assert!(users.len() >= 2, "about one sample a second: {}", users.len());
        for t in r.samples.iter().map(|s| s.t_ms) {
            assert!(t <= 4000);
        }
        let sum = ["cpu.user", "cpu.system", "cpu.iowait", "cpu.idle"]
            .iter()
            .map(|k| r.get(k).unwrap())
            .sum::<f64>()
            + r.get("cpu.steal").unwrap();
        assert!((sum - 100.0).abs() < 2.0, "CPU shares add up to 100 %: {sum}");
        for s in &r.samples {
            assert!(s.value >= 0.0 && s.value.is_finite(), "{} = {}", s.name, s.value);
        }
    }

    /// A loop device over a file in a temporary directory; detached when
    /// dropped, so also when the test fails.
    struct Loop {
        dev: String,
        _dir: tempfile::TempDir,
    }

    impl Loop {
        fn new(size: u64) -> Loop {
            let dir = tempfile::tempdir().unwrap();
            let img = dir.path().join("disk.img");
            std::fs::File::create(&img).unwrap().set_len(size).unwrap();
            let out = Command::new("losetup").args(["--find", "--show"]).arg(&img).output().expect("losetup");
            assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
            Loop { dev: String::from_utf8(out.stdout).unwrap().trim().to_string(), _dir: dir }
        }
    }

    impl Drop for Loop {
        fn drop(&mut self) {
            let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        }
    }

    fn diskstats(name: &str) -> crate::procfs::DiskStats {
        let all = parse_diskstats(&std::fs::read_to_string("/proc/diskstats").unwrap());
        *all.get(name).unwrap_or_else(|| panic!("{name} is not in /proc/diskstats"))
    }

    #[test]
    fn the_writes_a_device_completed_are_counted_exactly() {
        // Regression: the monitor's test asserted only that some writes
        // showed. Here a known number of direct writes go to a loop device
        // nothing else uses, between two seconds the monitor took, and the
        // monitor's per-second rates times their seconds give back the
        // count written and the kernel's own /proc/diskstats delta.
        //
        // O_DIRECT without O_DSYNC: a direct write returns once the device
        // has completed it, so it is counted by then; with O_DSYNC on a
        // device with a write-back cache (a loop device has one) this kernel
        // (6.18) also counts an empty pre-flush write per write (10 dd
        // writes with oflag=direct,dsync: 20 completed writes, 20 flushes),
        // which would make the count written the kernel's business.
        const WRITES: u64 = 300;
        const BS: usize = 4096;
        let lo = Loop::new(16 << 20);
        let name = Path::new(&lo.dev).file_name().unwrap().to_string_lossy().into_owned();
        // Let udev's probe of the new device (reads) finish first.
        let _ = Command::new("udevadm").arg("settle").status();
        let m = Monitor::start(&[PathBuf::from(&lo.dev)]);
        assert!(m.devices().contains(&name), "{:?} does not watch {name}", m.devices());
        let taken = || m.history.lock().unwrap().iter().cloned().collect::<Vec<Snapshot>>();
        // The first second in the history stamped after `after` (any, for None).
        let wait_for = |after: Option<Instant>| loop {
            if let Some(s) = taken().into_iter().find(|s| after.is_none_or(|a| s.at > a)) {
                return s.at;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // A second whose /proc read is done (it is in the history), so
        // every write below falls after it.
        let from = wait_for(None);
        let before = diskstats(&name);
        let f = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(&lo.dev).unwrap();
        let mut mem = vec![7u8; 2 * BS];
        let at = mem.as_ptr().align_offset(BS);
        let block = &mut mem[at..at + BS];
        for i in 0..WRITES {
            f.write_all_at(block, i * BS as u64).unwrap();
        }
        let after = diskstats(&name);
        // A second stamped after the last write completed reads /proc after it.
        let to = wait_for(Some(Instant::now()));
        assert_eq!(after.writes - before.writes, WRITES, "the kernel counted another writer on {name}");
        assert_eq!(after.write_sectors - before.write_sectors, WRITES * BS as u64 / 512);

        let snaps = taken();
        let span: Vec<&Snapshot> = snaps.iter().filter(|s| s.at >= from && s.at <= to).collect();
        assert!(span.len() >= 2, "{} seconds from {from:?} to {to:?}", span.len());
        let (mut writes, mut sectors) = (0.0, 0.0);
        for pair in span.windows(2) {
            // The sampler's own interval: the second before's stamp to this one's.
            let secs = pair[1].at.duration_since(pair[0].at).as_secs_f64();
            let d = pair[1].disks.iter().find(|d| d.0 == name).expect("the device in every second").1;
            let (w, s) = (d.w_iops * secs, d.w_mbps * 1e6 / 512.0 * secs);
            assert!((w - w.round()).abs() < 1e-6 && (s - s.round()).abs() < 1e-6, "{w} writes, {s} sectors");
            writes += w.round();
            sectors += s.round();
        }
        assert_eq!(writes, WRITES as f64, "completed writes the monitor saw on {name}");
        assert_eq!(sectors, (WRITES * BS as u64 / 512) as f64, "sectors the monitor saw written");
    }

    #[test]
    fn steal_above_the_threshold_flags_the_step() {
        let t0 = Instant::now();
        let snap = |secs: u64, steal: f64| Snapshot {
            at: t0 + Duration::from_secs(secs),
            cpu: crate::procfs::CpuPct { user: 50.0, steal, idle: 50.0 - steal, ..Default::default() },
            disks: Vec::new(),
            psi: None,
        };
        // Seconds 1..=4 in the window: 2, 4, 6, 8 % steal, mean 5 %.
        let r = summarise(&[snap(1, 2.0), snap(2, 4.0), snap(3, 6.0), snap(4, 8.0)], t0, t0);
        assert_eq!(r.get("cpu.steal"), Some(5.0));
        assert_eq!(r.get("flag.steal"), Some(5.0));
        let steal: Vec<f64> = r.samples.iter().filter(|s| s.name == "cpu.steal").map(|s| s.value).collect();
        assert_eq!(steal, [2.0, 4.0, 6.0, 8.0], "a per-second series");
        let r = summarise(&[snap(1, 4.0), snap(2, 5.5)], t0, t0);
        assert_eq!(r.get("cpu.steal"), Some(4.75));
        assert_eq!(r.get("flag.steal"), None, "under 5 %: not flagged");
    }

    #[test]
    fn a_one_second_step_always_gets_its_second() {
        // Steps of one second at every phase of the sampler's tick: each
        // must get the monitor's figures, waiting for its second if it has
        // to, and never much past the half second after its end.
        let m = Monitor::start(&[std::env::temp_dir()]);
        for phase_ms in [0, 250, 500, 750] {
            std::thread::sleep(Duration::from_millis(phase_ms));
            let start = Instant::now();
            std::thread::sleep(Duration::from_secs(1));
            let end = Instant::now();
            let r = m.window(start, start, end);
            assert!(end.elapsed() < Duration::from_millis(700), "waited {:?}", end.elapsed());
            assert!(r.get("cpu.idle").is_some(), "phase {phase_ms} ms: no figures {:?}", r.figures);
        }
        // A step that ended in its ramp-up has no window to wait for.
        let t = Instant::now();
        let r = m.window(t, t + Duration::from_secs(5), t);
        assert!(t.elapsed() < Duration::from_millis(100) && r.figures.is_empty(), "{:?}", t.elapsed());
    }
}
