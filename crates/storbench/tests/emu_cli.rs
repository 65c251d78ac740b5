//! Modelled media (`storbench media create --model`) end to end: the real
//! FUSE daemon under a real loop device, driven by `storbench io`,
//! `fsync`, a managed PostgreSQL and `kill -9`. Every test has its own
//! state directory and a guard that destroys what it made and then checks
//! that no mount, loop device or daemon is left, even when the test fails.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::State;

/// What these tests ask of their place beyond the shared one.
trait Media {
    fn medium(&self, name: &str) -> Value;
    fn io(&self, dev: &str, extra: &[&str]) -> Value;
}

impl Media for State {
    fn medium(&self, name: &str) -> Value {
        self.media().into_iter().find(|m| m["name"] == name).unwrap()
    }

    fn io(&self, dev: &str, extra: &[&str]) -> Value {
        let mut args = vec!["--json", "io", "--target", dev, "--bs", "4k", "--rampup", "0s"];
        args.extend_from_slice(extra);
        let rec: Value = serde_json::from_str(&self.ok(&args)).unwrap();
        rec["steps"][0]["metrics"].clone()
    }
}

/// What the daemon of medium `m` (as `media list` gives it) takes off a
/// 4 KiB request or a flush whose reply waits 1 ms or more, µs: its round
/// trip and a timed reply's lead at the far wait, both measured at
/// creation (none with `STORBENCH_EMU_FLOOR=off`).
fn absorbed_us(m: &Value) -> f64 {
    let floor = &m["daemon"]["floor"];
    floor["qd1_p50_us"].as_f64().unwrap_or(0.0)
        + floor["timed_lead_far_us"].as_f64().or(floor["timed_lead_us"].as_f64()).unwrap_or(0.0)
}

fn v(m: &Value, k: &str) -> f64 {
    m[k]["value"].as_f64().unwrap_or_else(|| panic!("{k} in {m}"))
}

#[test]
fn hdd_at_qd1_has_a_disks_latency_with_no_throttle_batching() {
    let s = State::new();
    s.ok(&["media", "create", "d", "--size", "2G", "--fs", "none", "--model", "hdd"]);
    let m = s.medium("d");
    assert_eq!(m["state"], "ready");
    assert_eq!(m["model"]["base"], "hdd");
    let dev = m["device"].as_str().unwrap().to_string();
    // The loop device does direct I/O on the served file (which the daemon
    // opens FOPEN_DIRECT_IO): no page cache between it and the model.
    let loop_dir = format!("/sys/block/{}/loop", dev.trim_start_matches("/dev/"));
    assert_eq!(std::fs::read_to_string(format!("{loop_dir}/dio")).unwrap().trim(), "1");
    let r = s.io(&dev, &["--rw", "randread", "--qd", "1", "--duration", "4s"]);
    let (mean, p50, iops) = (v(&r, "io.read.lat.mean"), v(&r, "io.read.lat.p50"), v(&r, "io.read.iops"));
    // The model: 0.1 ms + a seek over a random distance (~7.5 ms mean) +
    // half a revolution (4.17 ms) + transfer: about 12.5 ms, 80 IOPS. The
    // throttle gave p50 80 µs and p95 99 ms; a disk gives every read its ms.
    assert!((10_000.0..17_000.0).contains(&mean), "mean {mean} µs");
    assert!(p50 > mean / 2.0 && p50 < mean * 2.0, "p50 {p50} vs mean {mean}");
    assert!((55.0..95.0).contains(&iops), "{iops} IOPS");
    // The run stored the device's own view beside its own: the daemon's
    // latency is the model's (how much the host adds on top depends on how
    // busy it is, so only the order is asserted).
    let dev_lat = v(&r, "emu.d.read.lat.mean");
    assert!(dev_lat < mean && (10_000.0..15_000.0).contains(&dev_lat), "daemon {dev_lat} µs vs io {mean} µs");
    assert!((v(&r, "emu.d.read.iops") / iops - 1.0).abs() < 0.15, "{r}");
    // QD32: NCQ reorders by positioning time, so IOPS more than double.
    let r32 = s.io(&dev, &["--rw", "randread", "--qd", "32", "--duration", "4s"]);
    let iops32 = v(&r32, "io.read.iops");
    assert!(iops32 > 2.0 * iops, "QD32 {iops32} vs QD1 {iops}");
    // The daemon saw them too, and wrote its counters.
    let counters = PathBuf::from(m["daemon"]["counters"].as_str().unwrap());
    let text = std::fs::read_to_string(&counters).unwrap();
    let reads: u64 = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| l["ops"]["read"]["n"].as_u64())
        .sum();
    assert!(reads > 250, "counters saw {reads} reads");
    s.ok(&["media", "destroy", "d"]);
    // Nothing of the medium's daemon or of its floor probes stays behind
    // (the probes' time-scale status files did).
    let left: Vec<String> = std::fs::read_dir(s.state().join("emu"))
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in the emulator's state directory: {left:?}");
}

#[test]
fn throughput_under_queue_depth_is_the_models() {
    let s = State::new();
    // 4 units of 2 ms: 2,000 IOPS once at least 4 are outstanding; 500 at QD1.
    let trace = s.dir.path().join("c.sbtrace");
    s.ok(&[
        "media",
        "create",
        "c",
        "--size",
        "256M",
        "--fs",
        "none",
        "--model",
        "constant",
        "--set",
        "read=2ms",
        "--set",
        "units=4",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    let m = s.medium("c");
    let dev = m["device"].as_str().unwrap().to_string();
    let r1 = s.io(&dev, &["--rw", "randread", "--qd", "1", "--duration", "2s"]);
    let q16 = v(&s.io(&dev, &["--rw", "randread", "--qd", "16", "--duration", "3s"]), "io.read.iops");
    // QD1 pays the model's 2 ms: the daemon absorbs its round trip through
    // loop and FUSE and a timed reply's wake-ups as measured at creation,
    // so a round trip shorter during the run reads a little under the
    // model, never by more than what was absorbed (CI, 2026-11-28: p50
    // 1,999.9 µs, which the bound "never under 2,000" of before the floor
    // was absorbed failed).
    let absorbed = absorbed_us(&m);
    let p50 = v(&r1, "io.read.lat.p50");
    assert!(
        (2_000.0 - absorbed..3_000.0).contains(&p50),
        "QD1 p50 {p50} µs, model 2,000, {absorbed:.1} µs absorbed"
    );
    // With requests queued for every unit (12 waiting) the round trip and a
    // busy host's delays in resubmitting are hidden.
    assert!((q16 / 2000.0 - 1.0).abs() < 0.1, "QD16: {q16} IOPS, model 2000");
    // The trace holds every request, in format v1.
    let q1 = v(&r1, "io.read.iops");
    s.ok(&["media", "destroy", "c"]);
    // Raw header bytes first (the format's layout), then every record
    // through the cache crate's reader, which owns the format.
    let t = std::fs::read(&trace).unwrap();
    assert_eq!(&t[..8], b"SBTRACE1");
    assert_eq!(u32::from_le_bytes(t[8..12].try_into().unwrap()), 32);
    assert_eq!((t.len() - 16) % 32, 0);
    let (fmt, recs) = storbench_cache::trace::open(&trace, None).unwrap();
    assert_eq!(fmt, storbench_cache::Format::SbTrace);
    let recs: Vec<storbench_cache::Record> = recs.map(|r| r.unwrap()).collect();
    assert_eq!(recs.len(), (t.len() - 16) / 32);
    let reads: Vec<&storbench_cache::Record> =
        recs.iter().filter(|r| r.op == storbench_cache::Op::Read).collect();
    let expect = (q1 * 2.0 + q16 * 3.0) as usize;
    assert!(reads.len() >= expect, "{} reads traced, {expect} measured", reads.len());
    let lat = reads[reads.len() / 2].lat_ns;
    assert!(lat >= 2_000_000, "a traced read took {lat} ns, the model says 2 ms");
}

#[test]
fn a_flush_costs_what_the_model_says() {
    let s = State::new();
    s.ok(&[
        "media",
        "create",
        "f",
        "--size",
        "256M",
        "--fs",
        "none",
        "--model",
        "constant",
        "--set",
        "flush=20ms",
    ]);
    let m = s.medium("f");
    let dev = m["device"].as_str().unwrap().to_string();
    let f = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(&dev).unwrap();
    // O_DIRECT needs an aligned buffer: a 4 KiB-aligned slice of a larger one.
    let raw = vec![7u8; 8192];
    let at = raw.as_ptr().align_offset(4096);
    let buf = &raw[at..at + 4096];
    let mut took = Vec::new();
    for i in 0..10u64 {
        std::os::unix::fs::FileExt::write_all_at(&f, buf, i * 4096).unwrap();
        let t = Instant::now();
        f.sync_data().unwrap();
        took.push(t.elapsed());
    }
    took.sort();
    let median = took[5];
    // The daemon replies early by what it absorbs (its round trip and a
    // timed reply's lead, measured at creation): a flush may read that
    // much under the model's 20 ms when the round trip is shorter now.
    let absorbed = Duration::from_secs_f64(absorbed_us(&m) / 1e6);
    assert!(
        median >= Duration::from_millis(20) - absorbed && median < Duration::from_millis(26),
        "fdatasync took {took:?}, the model says 20 ms, {absorbed:?} absorbed"
    );
    drop(f);
    // FUA: the loop device offers none, so the block layer sends a write
    // with FUA (an O_DSYNC direct write to the device) as the write and then
    // a flush, 20 ms; O_DSYNC then syncs the device, a second flush, 20 ms.
    // Were FUA passed through, the write would take one flush: 20 ms.
    let queue = format!("/sys/block/{}/queue", dev.trim_start_matches("/dev/"));
    assert_eq!(std::fs::read_to_string(format!("{queue}/fua")).unwrap().trim(), "0");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(&dev)
        .unwrap();
    let mut took = Vec::new();
    for i in 0..5u64 {
        let t = Instant::now();
        std::os::unix::fs::FileExt::write_all_at(&f, buf, (20 + i) * 4096).unwrap();
        took.push(t.elapsed());
    }
    took.sort();
    // Two flushes, not one (20 ms) nor three (60 ms): the bounds count
    // flushes and leave the host's round trips room, so a busy machine
    // cannot fail this.
    assert!(
        took[2] >= Duration::from_millis(40) - 2 * absorbed && took[2] < Duration::from_millis(60),
        "a FUA write took {took:?}, the model's flush is 20 ms (two expected), {absorbed:?} absorbed each"
    );
    drop(f);
    std::thread::sleep(Duration::from_millis(1200));
    let counters = PathBuf::from(m["daemon"]["counters"].as_str().unwrap());
    let flushes: Vec<Value> = std::fs::read_to_string(counters)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| l["ops"].get("flush").cloned())
        .collect();
    let n: u64 = flushes.iter().map(|f| f["n"].as_u64().unwrap()).sum();
    assert!(n >= 20, "{flushes:?}");
    for f in &flushes {
        let svc = f["svc_mean_us"].as_f64().unwrap();
        assert!((svc - 20_000.0).abs() < 50.0, "flush service {svc} µs");
    }
}

#[test]
fn a_killed_daemon_fails_the_run_cleanly_and_destroy_still_cleans_up() {
    let s = State::new();
    s.ok(&[
        "media", "create", "k", "--size", "256M", "--fs", "none", "--model", "constant", "--set", "read=1ms",
    ]);
    let m = s.medium("k");
    let dev = m["device"].as_str().unwrap().to_string();
    let pid = m["daemon"]["pid"].as_u64().unwrap() as i32;
    let mut run = s
        .sb()
        .args([
            "io",
            "--target",
            &dev,
            "--bs",
            "4k",
            "--rw",
            "randread",
            "--qd",
            "4",
            "--duration",
            "20s",
            "--rampup",
            "0s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: killing the daemon this test made.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = run.try_wait().unwrap() {
            break st;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "the run hung after its daemon died");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "the run went on without its device");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("model daemon for medium 'k' died (log: "), "the run names its dead daemon: {err}");
    assert_eq!(s.medium("k")["state"], "model daemon gone");
    // What a failed step can say about it: the medium behind the run's
    // target, named, with the daemon's log (read from the registry as
    // `media list --json` gives it).
    let media: Vec<storbench_media::Medium> =
        serde_json::from_str(&s.ok(&["--json", "media", "list"])).unwrap();
    let log = m["daemon"]["log"].as_str().unwrap();
    let said = storbench_media::emu::dead_daemons_in(&media, &[PathBuf::from(&dev)]);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("model daemon for medium 'k' died")
            && said[0].ends_with(&format!("(log: {log})"))
    );
    s.ok(&["media", "destroy", "k"]);
}

#[test]
fn bad_model_input_is_one_line_and_exit_2_leaving_nothing() {
    let s = State::new();
    let cases: &[(&[&str], &str)] = &[
        (&["media", "create", "x", "--size", "64M", "--model", "floppy"], "--model floppy"),
        (&["media", "create", "x", "--size", "64M", "--model", "hdd", "--set", "rpm=fast"], "--set rpm=fast"),
        (
            &["media", "create", "x", "--size", "64M", "--model", "hdd", "--set", "rtt=1ms"],
            "no parameter rtt",
        ),
        (
            &["media", "create", "x", "--size", "64M", "--model", "hdd", "--emulate", "hdd"],
            "cannot be used with",
        ),
        (
            &["media", "create", "x", "--size", "64M", "--set", "rpm=5400"],
            "required arguments were not provided",
        ),
        (&["media", "create", "x", "--size", "64M", "--model", "./nope.toml"], "nope.toml"),
        (&["media", "powercut", "x"], "no medium named 'x'"),
    ];
    for (args, want) in cases {
        let out = s.sb().args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted '{want}' in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    assert!(
        !s.state().join("emu").exists() || std::fs::read_dir(s.state().join("emu")).unwrap().next().is_none()
    );
    // Unprivileged: one line, exit 2.
    let exe = assert_cmd::cargo::cargo_bin("storbench");
    let out = Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&exe)
        .args(["media", "create", "x", "--size", "64M", "--model", "hdd"])
        .env("STORBENCH_STATE", s.dir.path().join("nobody"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("needs root") && err.trim().lines().count() == 1, "{err}");
    let models = s.ok(&["media", "models"]);
    for name in ["hdd:", "sata-ssd:", "nvme:", "gbe-nas:", "fc-san:", "avg_seek", "lie_on_flush", "backing"] {
        assert!(models.contains(name), "{name} in {models}");
    }
    let models: Vec<Value> = serde_json::from_str(&s.ok(&["--json", "media", "models"])).unwrap();
    let names: Vec<&str> = models.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["hdd", "hdd-15k", "sata-ssd", "nvme", "gbe-nas", "fc-san", "constant"]);
    let rpm = models[0]["params"].as_array().unwrap().iter().find(|p| p["key"] == "rpm").unwrap();
    assert_eq!((rpm["default"].as_str(), rpm["kind"].as_str()), (Some("7200"), Some("integer")));
    assert!(!rpm["doc"].as_str().unwrap().is_empty());
}

#[test]
fn a_power_cut_keeps_what_was_flushed_and_a_lying_drive_loses_it() {
    let s = State::new();
    for (lie, survives) in [("false", true), ("true", false)] {
        let name = format!("p-{lie}");
        s.ok(&[
            "media",
            "create",
            &name,
            "--size",
            "256M",
            "--fs",
            "ext4",
            "--model",
            "hdd",
            "--set",
            &format!("lie_on_flush={lie}"),
        ]);
        // Let the background destage write mkfs's blocks back.
        std::thread::sleep(Duration::from_millis(2500));
        let mp = PathBuf::from(s.medium(&name)["mount_point"].as_str().unwrap());
        let f = mp.join("acknowledged");
        std::fs::write(&f, b"committed").unwrap();
        std::fs::File::open(&f).unwrap().sync_all().unwrap();
        std::fs::File::open(&mp).unwrap().sync_all().unwrap();
        s.ok(&["media", "powercut", &name]);
        assert_eq!(s.medium(&name)["state"], "power cut");
        assert!(std::fs::write(mp.join("later"), b"x")
            .and_then(|_| std::fs::File::open(mp.join("later"))?.sync_all())
            .is_err());
        s.ok(&["media", "recover", &name]);
        assert_eq!(s.medium(&name)["state"], "ready");
        let back = std::fs::read(&f).ok();
        assert_eq!(
            back.as_deref() == Some(b"committed".as_slice()),
            survives,
            "lie_on_flush={lie}: {back:?}"
        );
        s.ok(&["media", "destroy", &name]);
    }
    // A clean restart is not a power cut: the daemon writes its cache back,
    // even on a drive that ignores flushes.
    s.ok(&[
        "media",
        "create",
        "clean",
        "--size",
        "256M",
        "--fs",
        "ext4",
        "--model",
        "hdd",
        "--set",
        "lie_on_flush=true",
    ]);
    std::thread::sleep(Duration::from_millis(2500));
    let mp = PathBuf::from(s.medium("clean")["mount_point"].as_str().unwrap());
    std::fs::write(mp.join("kept"), b"kept").unwrap();
    s.ok(&["media", "recover", "clean"]);
    assert_eq!(std::fs::read(mp.join("kept")).unwrap(), b"kept");
    s.ok(&["media", "destroy", "clean"]);
}

#[test]
fn a_modelled_medium_carries_postgres_through_tpcb() {
    if !Path::new("/usr/lib/postgresql").exists() {
        eprintln!("PostgreSQL server binaries are not installed; skipped");
        return;
    }
    let s = State::new();
    s.ok(&["media", "create", "pgm", "--size", "1G", "--fs", "ext4", "--model", "sata-ssd"]);
    s.ok(&["pg", "up", "pgm-pg", "--data", "pgm"]);
    s.ok(&["tpcb", "init", "--db", "managed:pgm-pg", "--scale", "1"]);
    let rec: Value = serde_json::from_str(&s.ok(&[
        "--json",
        "tpcb",
        "run",
        "--db",
        "managed:pgm-pg",
        "--clients",
        "2",
        "--duration",
        "3s",
        "--rampup",
        "0s",
    ]))
    .unwrap();
    let tps = rec["steps"][0]["metrics"]["tps"]["value"].as_f64().unwrap();
    assert!(tps > 0.0, "{rec}");
    // Every commit's WAL flush reached the model as a device flush.
    let counters = PathBuf::from(s.medium("pgm")["daemon"]["counters"].as_str().unwrap());
    std::thread::sleep(Duration::from_millis(1200));
    let flushes: u64 = std::fs::read_to_string(counters)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| l["ops"]["flush"]["n"].as_u64())
        .sum();
    assert!(flushes as f64 > tps, "{flushes} flushes for {tps} TPS over 3 s");
    s.ok(&["pg", "down", "pgm-pg", "--destroy"]);
    s.ok(&["media", "destroy", "pgm"]);
}

#[test]
fn durability_counts_no_lost_commit_on_an_honest_disk_and_names_the_losses_of_a_lying_one() {
    if !Path::new("/usr/lib/postgresql").exists() {
        eprintln!("PostgreSQL server binaries are not installed; skipped");
        return;
    }
    let s = State::new();
    for lie in ["false", "true"] {
        let (m, pg) = (format!("dur-{lie}"), format!("dpg-{lie}"));
        s.ok(&[
            "media",
            "create",
            &m,
            "--size",
            "1G",
            "--fs",
            "ext4",
            "--model",
            "hdd",
            "--set",
            &format!("lie_on_flush={lie}"),
        ]);
        s.ok(&["pg", "up", &pg, "--data", &m]);
        // Let the background destage write the server's start-up back.
        std::thread::sleep(Duration::from_millis(2500));
        let out = s
            .sb()
            .args([
                "--json",
                "durability",
                "--db",
                &format!("managed:{pg}"),
                "--medium",
                &m,
                "--cut-after",
                "3s",
            ])
            .output()
            .unwrap();
        let rec: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let (acked, missing) = (rec["acknowledged"].as_i64().unwrap(), rec["missing"].as_i64().unwrap());
        assert!(acked > 50, "{rec}");
        if lie == "false" {
            assert_eq!(missing, 0, "an honest disk lost commits: {rec}");
            assert_eq!(out.status.code(), Some(0));
        } else {
            assert!(missing > 0, "a drive ignoring flushes lost nothing: {rec}");
            assert_eq!(out.status.code(), Some(1), "a failed check exits 1");
            let per: i64 =
                rec["per_client"].as_array().unwrap().iter().map(|c| c["missing"].as_i64().unwrap()).sum();
            assert_eq!(per, missing);
        }
        s.ok(&["pg", "down", &pg, "--destroy"]);
        s.ok(&["media", "destroy", &m]);
    }
}

#[test]
fn a_plan_makes_a_modelled_medium_runs_on_it_and_tears_it_down() {
    let s = State::new();
    std::fs::write(
        s.dir.path().join("p.toml"),
        r#"
name = "emu-plan"
[target.m]
media = { size = "256M", fs = "ext4", model = "constant", set = { read = "1ms", write = "1ms" } }
[[workload]]
kind = "io"
run = { target = "{target}/io.dat", size = "32M", bs = "4k", rw = "randread", qd = "1", duration = "2s", rampup = "0s" }
"#,
    )
    .unwrap();
    let out = s.sb().args(["run", "p.toml", "--no-report"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Value = serde_json::from_str(&s.ok(&["--json", "results", "list"])).unwrap();
    let io = runs.as_array().unwrap().iter().find(|r| r["kind"] == "io").expect("an io run").clone();
    let id = io["id"].to_string();
    let rec: Value = serde_json::from_str(&s.ok(&["--json", "results", "show", &id])).unwrap();
    let m = &rec["steps"][0]["metrics"];
    let lat = m["io.read.lat.p50"]["value"].as_f64().unwrap();
    // Reads of a file on the medium reach the model (O_DIRECT): about 1 ms.
    // The daemon absorbs its floor as measured at creation, so a round trip
    // shorter during the run reads a little under (CI-like load, 2026-11-28:
    // floor 59.6 µs, p50 995.8 µs).
    // The same for a timed reply's wake-ups, absorbed besides (the lead:
    // at a 1 ms wait, the far one).
    let floor = m["emu.emu-plan-m.floor"]["value"].as_f64().unwrap();
    let lead = m["emu.emu-plan-m.lead_far"]["value"].as_f64().unwrap();
    // Above: a busy host's wake-ups, 1,200.1 µs under 18 % CPU steal (CI,
    // 2026-11-28); a model applied twice (2 ms) or not at all (the round
    // trip alone) still fails.
    assert!(lat >= 1000.0 - floor - lead && lat < 1500.0, "p50 {lat} µs on a 1 ms model: {m}");
    assert!(
        rec["env"]["medium"]["model"]["base"] == "constant" || rec.to_string().contains("constant"),
        "{rec}"
    );
    // The plan destroyed its medium.
    let media: Vec<Value> = serde_json::from_str(&s.ok(&["--json", "media", "list"])).unwrap();
    assert!(media.is_empty(), "{media:?}");
    // A bad model in a plan is refused up front.
    std::fs::write(
        s.dir.path().join("bad.toml"),
        r#"
name = "bad"
[target.m]
media = { size = "256M", model = "hdd", set = { rpm = "fast" } }
[[workload]]
kind = "io"
run = { target = "{target}/io.dat", size = "32M" }
"#,
    )
    .unwrap();
    let out = s.sb().args(["run", "bad.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rpm=fast"));
}

/// Line accesses and hits over every second a daemon has counted so far.
fn cumulative_hits(counters: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(counters).unwrap();
    let mut acc = (0, 0);
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        if let Some(c) = v.get("cache") {
            let n = |k: &str| c[k].as_u64().unwrap();
            acc.0 += n("read_hits") + n("write_hits");
            acc.1 += n("read_hits") + n("read_misses") + n("write_hits") + n("write_misses");
        }
    }
    acc
}

#[test]
fn a_cache_tiers_hit_ratio_on_tpcc_matches_the_curve_of_its_own_trace() {
    let s = State::new();
    let trace = s.dir.path().join("c.sbtrace");
    let trace_s = trace.to_str().unwrap();
    s.ok(&[
        "media",
        "create",
        "c",
        "--size",
        "1G",
        "--fs",
        "ext4",
        "--model",
        "hdd",
        "--cache",
        "8M",
        "--cache-policy",
        "lru",
        "--cache-line",
        "64k",
        "--trace",
        trace_s,
    ]);
    let m = s.medium("c");
    assert_eq!(m["model"]["cache"]["policy"], "lru");
    assert_eq!(m["model"]["cache"]["size"], 8 << 20);
    let db = format!("sqlite:{}/tpcc.db", m["mount_point"].as_str().unwrap());
    s.ok(&["tpcc", "build", "--db", &db, "--warehouses", "1"]);
    // The database was just written: drop the host's clean pages so its
    // reads reach the medium too, not only its writes.
    Command::new("sync").status().unwrap();
    std::fs::write("/proc/sys/vm/drop_caches", "1").unwrap();
    let rec: Value = serde_json::from_str(&s.ok(&[
        "--json",
        "tpcc",
        "run",
        "--db",
        &db,
        "--users",
        "2",
        "--rampup",
        "1s",
        "--duration",
        "6s",
    ]))
    .unwrap();
    let fig = |k: &str| v(&rec["steps"][0]["metrics"], k);
    let hr = fig("emu.c.cache.hit_ratio");
    assert!((0.0..=1.0).contains(&hr), "{hr}");
    assert!(fig("emu.c.cache.accesses") > 0.0);
    // Warm-up is measured from the step's start and reached by its end (1 s
    // ramp-up + 6 s measured, the daemon's seconds rounding up).
    let warm = fig("emu.c.cache.warmup.s");
    assert!((0.5..=8.5).contains(&warm), "warm-up {warm} s");
    assert!(fig("emu.c.cache.hot.top20") >= fig("emu.c.cache.hot.top1"));
    assert_eq!(fig("emu.c.cache.size.bytes"), (8 << 20) as f64);
    // Idle for two of the daemon's seconds: every access is counted and
    // traced; then the daemon's own count over the medium's whole life
    // against the LRU curve of the trace it wrote, at the cache's size.
    std::thread::sleep(Duration::from_millis(2500));
    let (hits, all) = cumulative_hits(Path::new(m["daemon"]["counters"].as_str().unwrap()));
    assert!(all > 1000, "{all} line accesses");
    let measured = hits as f64 / all as f64;
    let curve: Value = serde_json::from_str(
        &s.ok(&["--json", "cache", "mrc", trace_s, "--policy", "lru", "--sizes", "8M", "--line", "64k"]),
    )
    .unwrap();
    assert_eq!(curve["accesses"].as_u64().unwrap(), all, "the trace and the tier saw the same line accesses");
    let predicted = 1.0 - curve["curves"][0]["miss_ratio"][0].as_f64().unwrap();
    assert!((0.05..0.95).contains(&measured), "a hit ratio that tells policies apart: {measured}");
    assert!(
        (predicted - measured).abs() < 0.02,
        "tier measured {measured:.4} ({hits}/{all}), curve predicts {predicted:.4}"
    );
    // `media cache reset` empties it: the next second shows nothing resident.
    s.ok(&["media", "cache", "reset", "c"]);
    std::thread::sleep(Duration::from_millis(1500));
    let text = std::fs::read_to_string(m["daemon"]["counters"].as_str().unwrap()).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["cache"]["footprint"], 0, "{last}");
    // A cache on a medium without a cache tier, and bad tier input: one line, exit 2.
    let out = s.sb().args(["media", "cache", "reset", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    for (flag, val, says) in [
        ("--cache", "2G", "larger than the medium"),
        ("--cache-policy", "mru", "'mru' is not a cache policy"),
        ("--cache-write", "around", "use back or through"),
        ("--cache-line", "3k", "power of two"),
        ("--cache-line", "lots", "'lots'"),
    ] {
        let mut args =
            vec!["media", "create", "bad", "--size", "1G", "--model", "hdd", "--cache", "64M", flag, val];
        if flag == "--cache" {
            args.truncate(7);
            args.extend([flag, val]);
        }
        let out = s.sb().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says) && err.lines().count() == 1, "{args:?}: {err}");
    }
}

#[test]
fn a_plan_compares_a_cached_medium_with_the_bare_one_from_a_cold_cache() {
    let s = State::new();
    // The same 2 ms device bare and behind a 4 MiB cache tier (0.1 ms),
    // a skewed read load (90 % of reads on 10 % of a 32 MiB file): the
    // hot tenth fits, so the cache serves most reads once warm.
    std::fs::write(
        s.dir.path().join("p.toml"),
        r#"
name = "tier"
[target.bare]
media = { size = "256M", fs = "ext4", model = "constant", set = { read = "2ms", write = "2ms", units = "1" } }
[target.cached]
media = { size = "256M", fs = "ext4", model = "constant", set = { read = "2ms", write = "2ms", units = "1" }, cache = "4M", cache_model = "constant", cache_policy = "lru", cold = true, trace = "{plan}.sbtrace" }
[axes]
target = ["bare", "cached"]
[[workload]]
kind = "io"
run = { target = "{target}/io.dat", size = "32M", bs = "4k", rw = "randread", dist = "hot:90/10", qd = "4", duration = "4s", rampup = "0s" }
"#,
    )
    .unwrap();
    let out = s.sb().args(["run", "p.toml", "--no-report"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Value = serde_json::from_str(&s.ok(&["--json", "results", "list"])).unwrap();
    let show = |target: &str| -> Value {
        let r = runs
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == "io" && r["label"].as_str().unwrap_or("").contains(target))
            .unwrap_or_else(|| panic!("an io run on {target}: {runs}"));
        serde_json::from_str(&s.ok(&["--json", "results", "show", &r["id"].to_string()])).unwrap()
    };
    let (bare, cached) = (show("bare"), show("cached"));
    let (b, c) = (&bare["steps"][0]["metrics"], &cached["steps"][0]["metrics"]);
    let hit = v(c, "emu.tier-cached.cache.hit_ratio");
    assert!(hit > 0.5, "hit ratio {hit}");
    // The curve of the medium's own trace, at the tier's size: beside it.
    let at = v(c, "emu.tier-cached.cache.mrc.lru.hit_ratio.4M");
    assert!(at > 0.0 && at <= 1.0, "{at}");
    assert!(c.get("emu.tier-cached.cache.mrc.lru.hit_ratio.16M").is_some(), "{c}");
    // The report's sentence is the recorded runs' figures.
    let iops = (v(c, "io.read.iops"), v(b, "io.read.iops"));
    assert!(iops.0 > iops.1, "cached {} vs bare {} IOPS", iops.0, iops.1);
    let out = s.sb().args(["report", "tier", "--text"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let want = format!("hit ratio {:.1} %", hit * 100.0);
    assert!(text.contains(&want), "{want} in {text}");
    let ratio = format!("({:.2}×)", iops.0 / iops.1);
    assert!(text.contains(&ratio) && text.contains("without a cache"), "{ratio} in {text}");
    assert!(text.contains("cache tier: hit ratio, warm-up and hot data"), "{text}");
    assert!(s.dir.path().join("tier.sbtrace").exists());
    // A memory limit too small to run in: one line, exit 2, nothing left.
    let out = s.sb().args(["run", "p.toml", "--dry-run", "--memory-limit", "1M"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--memory-limit 1m: give at least 64M"));
    // A run inside a limit leaves no memory group behind.
    s.ok(&["run", "p.toml", "--dry-run", "--memory-limit", "128M"]);
    let left: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/memory")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("storbench-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_managed_server_runs_in_its_memory_group_until_it_is_destroyed() {
    let s = State::new();
    let data = s.dir.path().join("pgdata");
    s.ok(&["pg", "up", "memlim", "--memory-limit", "160M", "--data", data.to_str().unwrap()]);
    let group = Path::new("/sys/fs/cgroup/memory/storbench-pg-memlim");
    let pm = std::fs::read_to_string(data.join("data").join("postmaster.pid"))
        .or_else(|_| std::fs::read_to_string(data.join("postmaster.pid")))
        .unwrap();
    let pm = pm.lines().next().unwrap().trim().to_string();
    let members = std::fs::read_to_string(group.join("cgroup.procs")).unwrap();
    assert!(members.lines().any(|l| l == pm), "postmaster {pm} in {members}");
    // This command left it: only the server's processes are members.
    assert_eq!(std::fs::read_to_string(group.join("memory.limit_in_bytes")).unwrap().trim(), "167772160");
    let list: Value = serde_json::from_str(&s.ok(&["--json", "pg", "list"])).unwrap();
    assert!(list.to_string().contains("\"memory_limit\":167772160"), "{list}");
    s.ok(&["pg", "down", "memlim", "--destroy"]);
    assert!(!group.exists(), "the group outlived its instance");
}

/// The names of a process's threads.
fn thread_names(pid: u64) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn each_medium_says_which_transport_serves_it_and_a_refused_ring_falls_back_to_dev_fuse() {
    let s = State::new();
    // Where the kernel has the switch the daemon asks for the rings; a
    // host that forbids io_uring (a sysctl, a seccomp profile) makes the
    // daemon say why it serves through /dev/fuse instead, and then the
    // rings are not what this test can check.
    let mut rings = Path::new("/sys/module/fuse/parameters/enable_uring").exists();
    let cases: [(&str, Option<&str>, &str); 3] = [
        (
            "rings",
            None,
            if rings {
                "serving through FUSE over io_uring"
            } else {
                "serving through /dev/fuse (this kernel has no FUSE over io_uring)"
            },
        ),
        ("devfuse", Some("STORBENCH_EMU_NO_URING"), "serving through /dev/fuse (STORBENCH_EMU_NO_URING is set)"),
        // The kernel itself refuses a registration naming a queue it does
        // not have, as it would a real mismatch.
        (
            "refused",
            Some("STORBENCH_EMU_TEST_REFUSE_RING"),
            "refused the io_uring queues (Invalid argument (os error 22)); mounting again, serving through /dev/fuse",
        ),
    ];
    for (name, env, says) in cases {
        if name == "refused" && !rings {
            eprintln!("no FUSE over io_uring here: the refusal is not tested");
            continue;
        }
        let mut c = s.sb();
        if let Some(k) = env {
            c.env(k, "1");
        }
        let out = c
            .args(["media", "create", name, "--size", "64M", "--fs", "none", "--model", "constant"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let m = s.medium(name);
        let log = std::fs::read_to_string(m["daemon"]["log"].as_str().unwrap()).unwrap();
        if name == "rings" && rings && !log.contains(says) {
            assert!(
                log.contains("serving through /dev/fuse (the io_uring queues could not be made")
                    || log.contains("serving through /dev/fuse (the kernel did not offer"),
                "{name}: the log names no transport, or no reason for /dev/fuse:\n{log}"
            );
            eprintln!("the rings are not served on this host ({log}): they are not tested");
            rings = false;
        } else {
            assert!(log.contains(says), "{name}: the log says\n{log}");
        }
        // Ring threads live only where the rings serve.
        let threads = thread_names(m["daemon"]["pid"].as_u64().unwrap());
        let ring_threads = threads.iter().filter(|t| t.starts_with("emu-ring-")).count();
        assert_eq!(ring_threads > 0, name == "rings" && rings, "{name}: threads {threads:?}");
        // What is written comes back, through whichever transport serves.
        let dev = m["device"].as_str().unwrap().to_string();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&dev)
            .unwrap();
        let mut raw = vec![0u8; 3 * 65536];
        let at = raw.as_ptr().align_offset(4096);
        for (i, b) in raw[at..at + 65536].iter_mut().enumerate() {
            *b = (i * 31 + name.len()) as u8;
        }
        let (wbuf, rbuf) = raw[at..].split_at_mut(65536);
        std::os::unix::fs::FileExt::write_all_at(&f, wbuf, 1 << 20).unwrap();
        f.sync_data().unwrap();
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut rbuf[..65536], 1 << 20).unwrap();
        assert!(rbuf[..65536] == wbuf[..], "{name}: read back differs");
    }
}
