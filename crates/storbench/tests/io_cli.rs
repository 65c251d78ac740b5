//! `storbench io` through the binary, on real files and a real loop device.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

fn sb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(dir).env("STORBENCH_RESULTS", dir.join("r.db")).arg("--quiet");
    c
}

fn runs(dir: &Path) -> Vec<Value> {
    if !dir.join("r.db").exists() {
        return Vec::new();
    }
    let out = sb(dir).args(["--json", "results", "list"]).output().unwrap();
    serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().cloned().unwrap_or_default()
}

#[test]
fn every_built_in_profile_runs_and_reports_iops() {
    let d = tempfile::tempdir().unwrap();
    for set in ["quick", "sqlserver-six", "nvme-vs-sata", "hci-mix", "db-shapes"] {
        let out = sb(d.path())
            .args(["--json", "io", "--set", set, "--size", "64M", "--duration", "1s", "--rampup", "0s"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{set}: {}", String::from_utf8_lossy(&out.stderr));
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        let steps = rec["steps"].as_array().unwrap();
        let want =
            [("quick", 4), ("sqlserver-six", 6), ("nvme-vs-sata", 3), ("hci-mix", 4), ("db-shapes", 8)];
        assert_eq!(steps.len(), want.iter().find(|w| w.0 == set).unwrap().1, "{set}: one step per profile");
        for s in steps {
            let m = &s["metrics"];
            let v = |k: &str| m[k]["value"].as_f64().unwrap();
            assert!(v("io.iops") > 0.0, "{set}/{}: no IOPS", s["label"]);
            // The rates are the window's counts over the window, exactly.
            let n = v("io.read.count") + v("io.write.count");
            assert!((v("io.iops") * v("io.window") - n).abs() < 1e-6 * n.max(1.0), "{set}/{}", s["label"]);
            assert!(v("io.completed") >= n);
            assert_eq!(v("io.window"), 1.0);
            assert!(m["io.lat.p99"]["value"].as_f64().unwrap() > 0.0);
            assert_eq!(m["io.errors"]["value"].as_f64().unwrap(), 0.0);
            assert!(m["io.cpu.user_per_io"]["value"].as_f64().is_some());
        }
        assert_eq!(rec["run"]["env"]["direct_io"], true);
    }
    // The file was made once, at the asked size, and reused.
    assert_eq!(std::fs::metadata(d.path().join("storbench-data/io.dat")).unwrap().len(), 64 << 20);
}

#[test]
fn flags_make_a_profile_and_bad_values_exit_2_recording_nothing() {
    let d = tempfile::tempdir().unwrap();
    let out = sb(d.path())
        .args(["--json", "io", "--size", "32M", "--bs", "4k", "--rw", "randrw", "--read", "70", "--qd", "4"])
        .args([
            "--threads",
            "2",
            "--duration",
            "1s",
            "--rampup",
            "0s",
            "--dist",
            "zipf:1.1",
            "--engine",
            "psync",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &rec["steps"][0]["metrics"];
    let (r, w) =
        (m["io.read.iops"]["value"].as_f64().unwrap(), m["io.write.iops"]["value"].as_f64().unwrap());
    assert!(r > 0.0 && w > 0.0 && (r / (r + w) - 0.7).abs() < 0.1, "70/30 mix: {r} / {w}");
    assert_eq!(rec["steps"][0]["params"]["bs"], 4096);

    let e = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["io", "--bs", "1000"], "block size 1000"),
        (&["io", "--set", "oracle"], "'oracle' for '--set <SET>': 'oracle': unknown profile set"),
        (&["io", "--profile", "read-random-8k,read-random-9k"], "'read-random-9k': unknown profile"),
        (&["io", "--rw", "randomread"], "'randomread'"),
        (&["io", "--duration", "0s"], "'0s' for '--duration <DURATION>': '0s' must be more than zero"),
        (&["io", "--read", "120"], "--read 120"),
        (&["io", "--dist", "hot:90"], "hot:90"),
        (&["io", "--engine", "aio"], "--engine aio"),
        (&["io", "--randommap", "--dist", "zipf:1.2"], "only a uniform distribution"),
        (&["io", "--size", "900T"], "larger than the free space"),
        (&["io", "--target", "/"], "not a regular file"),
        (&["io", "--qd", "0"], "queue depth 0"),
        (&["io", "--rate-mbps", "0"], "--rate-mbps 0"),
        (&["io", "--burst", "1s", "--idle", "2s"], "--idle: give a rate"),
        (&["io", "--rate", "100", "--burst", "0s", "--idle", "2s"], "burst 0"),
    ];
    for (args, want) in cases {
        let out = sb(e.path()).args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted '{want}' in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(runs(e.path()).is_empty(), "{args:?} recorded a run");
        assert!(!e.path().join("storbench-data/io.dat").exists(), "{args:?} created the file");
    }
}

/// A bounded neighbour: `--rate-mbps` holds the bandwidth asked for, and
/// `--burst`/`--idle` leave the device idle between bursts, in the
/// per-second samples too.
#[test]
fn a_rate_in_mbps_and_bursts_bound_the_load() {
    let d = tempfile::tempdir().unwrap();
    let out = sb(d.path())
        .args(["--json", "io", "--size", "64M", "--bs", "64k", "--rw", "write", "--qd", "2"])
        .args(["--rate-mbps", "8.192", "--burst", "1s", "--idle", "1s", "--duration", "4s", "--rampup", "0s"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let step = &rec["steps"][0];
    // 8.192 MB/s at 64 KiB is 125 IOPS, in 2 s of bursts out of 4: at most
    // 250 (and close to it, unless the disk is busy with other tests).
    let n = step["metrics"]["io.write.count"]["value"].as_f64().unwrap();
    assert!((150.0..=252.0).contains(&n), "{n} writes");
    assert_eq!(rec["run"]["config"]["profiles"][0]["rate"], 125.0);
    assert_eq!(rec["run"]["config"]["profiles"][0]["bursts"]["idle_s"], 1.0);
    let per_s: Vec<f64> = step["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "io.write.iops")
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert!(per_s.len() >= 4, "{per_s:?}");
    assert!(
        per_s[0] > 100.0 && per_s[1] < 5.0 && per_s[2] > 100.0 && per_s[3] < 5.0,
        "on, idle, on, idle: {per_s:?}"
    );
}

#[test]
fn verify_finds_a_corrupted_byte() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("v.dat");
    let f = file.to_str().unwrap();
    let out = sb(d.path())
        .args(["io", "--target", f, "--size", "8M", "--bs", "4k", "--rw", "write", "--duration", "2s"])
        .args(["--rampup", "0s", "--verify"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sb(d.path())
        .args([
            "io",
            "--target",
            f,
            "--size",
            "8M",
            "--bs",
            "4k",
            "--rw",
            "read",
            "--duration",
            "1s",
            "--rampup",
            "0s",
        ])
        .arg("--verify")
        .output()
        .unwrap();
    assert!(out.status.success(), "an intact file verifies: {}", String::from_utf8_lossy(&out.stderr));

    // Flip one byte in the middle of a verified block.
    let h = std::fs::OpenOptions::new().read(true).write(true).open(&file).unwrap();
    let block = 5u64 * 4096;
    let mut head = [0u8; 8];
    h.read_exact_at(&mut head, block).unwrap();
    assert_eq!(&head, b"SBVERIFY", "the sequential write pass stamped every block");
    let mut b = [0u8; 1];
    h.read_exact_at(&mut b, block + 1234).unwrap();
    h.write_all_at(&[b[0] ^ 0x40], block + 1234).unwrap();
    h.sync_all().unwrap();
    drop(h);

    let out = sb(d.path())
        .args([
            "io",
            "--target",
            f,
            "--size",
            "8M",
            "--bs",
            "4k",
            "--rw",
            "read",
            "--duration",
            "1s",
            "--rampup",
            "0s",
        ])
        .arg("--verify")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "a target failed: {err}");
    assert!(err.contains("failed verification") && err.contains(&block.to_string()), "{err}");
    let list = runs(d.path());
    assert_eq!(list[0]["status"], "failed");
}

/// A loop device over a file, detached when dropped.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
fn a_block_device_with_a_filesystem_is_not_written() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("disk.img");
    std::fs::File::create(&img).unwrap().set_len(64 << 20).unwrap();
    let out = Command::new("losetup").args(["--find", "--show"]).arg(&img).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    let dev = Loop(String::from_utf8(out.stdout).unwrap().trim().to_string());
    assert!(Command::new("mkfs.ext4").args(["-q", "-F", &dev.0]).status().unwrap().success());

    let out = sb(d.path())
        .args(["io", "--target", &dev.0, "--rw", "randwrite", "--duration", "1s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("ext4 filesystem") && err.contains("--force"), "{err}");
    // Reads are allowed, and leave the filesystem alone.
    let out = sb(d.path())
        .args(["io", "--target", &dev.0, "--rw", "randread", "--duration", "1s", "--rampup", "0s"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fs = Command::new("blkid").args(["-p", "-o", "value", "-s", "TYPE", &dev.0]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&fs.stdout).trim(), "ext4");
}

#[test]
fn a_killed_run_loses_only_its_half_step_and_shows_as_interrupted() {
    let d = tempfile::tempdir().unwrap();
    let mut child = sb(d.path())
        .args([
            "io",
            "--size",
            "16M",
            "--profile",
            "read-random-8k,read-random-64k",
            "--duration",
            "1s",
            "--rampup",
            "0s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(child.wait().unwrap().success());
    let mut child = sb(d.path())
        .args(["io", "--size", "16M", "--profile", "read-random-8k,read-random-64k", "--duration", "30s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    child.kill().unwrap();
    child.wait().unwrap();
    let list = runs(d.path());
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["status"], "interrupted", "a run whose process died is shown as interrupted");
    let out =
        sb(d.path()).args(["results", "export", &list[0]["id"].to_string(), "--json"]).output().unwrap();
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["steps"].as_array().unwrap().len(), 0, "the half step is absent");
    assert_eq!(list[1]["status"], "complete");
}

#[test]
fn ctrl_c_keeps_the_profile_in_progress() {
    let d = tempfile::tempdir().unwrap();
    let mut child = sb(d.path())
        .args(["io", "--size", "16M", "--set", "quick", "--duration", "30s", "--rampup", "0s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let list = runs(d.path());
    assert_eq!(list[0]["status"], "interrupted");
    let out =
        sb(d.path()).args(["results", "export", &list[0]["id"].to_string(), "--json"]).output().unwrap();
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0]["params"]["partial"], true);
    assert!(steps[0]["metrics"]["io.iops"]["value"].as_f64().unwrap() > 0.0);
}

/// Runs `storbench io` on `f` with `args` (plus `--verify`), quietly.
fn verify_run(dir: &Path, f: &str, rw: &str, secs: &str) -> std::process::Output {
    sb(dir)
        .args(["io", "--target", f, "--size", "8M", "--bs", "4k", "--rw", rw, "--duration", secs])
        .args(["--rampup", "0s", "--verify"])
        .output()
        .unwrap()
}

#[test]
fn verify_finds_a_stale_copy_of_a_block_put_back() {
    // Regression: the header's sequence was never checked, so a block that
    // lost its last write (or an old copy restored) passed verification.
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("g.dat");
    let f = file.to_str().unwrap();
    let out = verify_run(d.path(), f, "write", "1s");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let block = 7u64 * 4096;
    let h = std::fs::OpenOptions::new().read(true).write(true).open(&file).unwrap();
    let mut old = vec![0u8; 4096];
    h.read_exact_at(&mut old, block).unwrap();
    assert_eq!(&old[..8], b"SBVERIFY");
    // Write every block again: block 7 gets a newer generation.
    let out = verify_run(d.path(), f, "write", "1s");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut new = vec![0u8; 4096];
    h.read_exact_at(&mut new, block).unwrap();
    assert_ne!(old[16..24], new[16..24], "the second pass rewrote block 7");
    let out = verify_run(d.path(), f, "read", "1s");
    assert!(out.status.success(), "the current blocks verify: {}", String::from_utf8_lossy(&out.stderr));
    // Put the first pass's copy back: intact, right offset, but stale.
    h.write_all_at(&old, block).unwrap();
    h.sync_all().unwrap();
    drop(h);
    let out = verify_run(d.path(), f, "read", "1s");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "a target failed: {err}");
    // A random read pass may read block 7 more than once: each read of it
    // fails, and no other block does.
    let offsets = err.split("failed verification, at offset(s) ").nth(1).expect(&err);
    let offsets: Vec<&str> = offsets.lines().next().unwrap().split(", ").collect();
    assert!(!offsets.is_empty() && offsets.iter().all(|o| o.trim() == "28672"), "{err}");
}

/// Reads completed plus reads merged of a block device, from /proc/diskstats.
fn disk_reads(dev: &str) -> u64 {
    let name = dev.trim_start_matches("/dev/");
    let stats = std::fs::read_to_string("/proc/diskstats").unwrap();
    let f: Vec<&str> =
        stats.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).find(|f| f[2] == name).unwrap();
    f[3].parse::<u64>().unwrap() + f[4].parse::<u64>().unwrap()
}

#[test]
fn completions_equal_the_devices_completed_reads() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("disk.img");
    std::fs::File::create(&img).unwrap().set_len(64 << 20).unwrap();
    let out = Command::new("losetup").args(["--find", "--show"]).arg(&img).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    let dev = Loop(String::from_utf8(out.stdout).unwrap().trim().to_string());
    // Let udev's probe of the new device finish before counting.
    let _ = Command::new("udevadm").arg("settle").status();
    std::thread::sleep(Duration::from_millis(200));
    for (engine, qd, threads) in [("io_uring", "4", "2"), ("psync", "1", "3")] {
        let before = disk_reads(&dev.0);
        let out = sb(d.path())
            .args(["--json", "io", "--target", &dev.0, "--rw", "randread", "--bs", "4k", "--engine", engine])
            .args(["--qd", qd, "--threads", threads, "--duration", "1s", "--rampup", "500ms"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let after = disk_reads(&dev.0);
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        let m = &rec["steps"][0]["metrics"];
        let completed = m["io.completed"]["value"].as_f64().unwrap() as u64;
        assert!(completed > 100, "{engine}: {completed}");
        assert_eq!(after - before, completed, "{engine}: the device served exactly what storbench counted");
        let window = m["io.read.count"]["value"].as_f64().unwrap() as u64;
        assert!(window < completed, "{engine}: ramp-up completions are kept out of the window");
    }
}

#[test]
fn results_go_to_stdout_and_quiet_hides_only_the_live_line() {
    let d = tempfile::tempdir().unwrap();
    let args = ["io", "--size", "8M", "--bs", "4k", "--duration", "1s", "--rampup", "0s", "--randommap"];
    let out = sb(d.path()).args(args).output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("read IOPS") && stdout.contains("access random-map"), "{stdout}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("read IOPS"));
    // --json: the run record, and nothing else, on stdout.
    let out = sb(d.path()).arg("--json").args(args).output().unwrap();
    let rec: Value = serde_json::from_slice(&out.stdout).expect("stdout is the run record");
    let params = &rec["steps"][0]["params"];
    assert_eq!((params["random_map"].as_bool(), params["access"].as_str()), (Some(true), Some("random-map")));
    let out = sb(d.path()).arg("--json").args(&args[..args.len() - 1]).output().unwrap();
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["steps"][0]["params"]["access"], "random", "independent draws by default");
}

/// Bad input from issue 24, each exit 2 with one line naming the value,
/// nothing recorded and nothing created: a target whose directory does not
/// exist (no tree grown under `/`), a span past the target's end, `--verify`
/// where nothing would be checked, `--fsync-every 0`. A read-only verifying
/// run after a verifying write does run (it has blocks to check).
#[test]
fn issue_24_bad_io_input_is_refused_and_creates_nothing() {
    let e = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["io", "--target", "/nonexistent-sb/dir/x.dat", "--size", "8M"],
            "/nonexistent-sb/dir does not exist",
        ),
        (&["io", "--target", "sub/x.dat", "--size", "8M"], "sub does not exist"),
        (
            &["io", "--target", "t.dat", "--size", "8M", "--span", "1T"],
            "--span 1t: larger than the target t.dat (8m)",
        ),
        (
            &["io", "--target", "t.dat", "--size", "8M", "--verify", "--rw", "randread"],
            "--verify with read-only",
        ),
        (&["io", "--target", "t.dat", "--size", "8M", "--fsync-every", "0"], "'0'"),
    ];
    for (args, want) in cases {
        let out = sb(e.path()).args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted '{want}' in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(runs(e.path()).is_empty(), "{args:?} recorded a run");
        assert!(!e.path().join("t.dat").exists() && !e.path().join("sub").exists(), "{args:?} created");
    }
    assert!(!Path::new("/nonexistent-sb").exists(), "a tree was grown under /");

    let quick = ["--target", "t.dat", "--size", "8M", "--bs", "4k", "--duration", "1s", "--rampup", "0s"];
    for rw in ["randwrite", "randread"] {
        let out = sb(e.path()).arg("io").args(quick).args(["--verify", "--rw", rw]).output().unwrap();
        assert!(out.status.success(), "{rw}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
