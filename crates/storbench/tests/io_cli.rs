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
        assert!(!steps.is_empty());
        for s in steps {
            let m = &s["metrics"];
            assert!(m["io.iops"]["value"].as_f64().unwrap() > 0.0, "{set}/{}: no IOPS", s["label"]);
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
        (&["io", "--set", "oracle"], "--set oracle"),
        (&["io", "--profile", "read-random-9k"], "--profile read-random-9k"),
        (&["io", "--rw", "randomread"], "'randomread'"),
        (&["io", "--duration", "0s"], "--duration 0s"),
        (&["io", "--read", "120"], "--read 120"),
        (&["io", "--dist", "hot:90"], "hot:90"),
        (&["io", "--engine", "aio"], "--engine aio"),
        (&["io", "--size", "900T"], "larger than the free space"),
        (&["io", "--target", "/"], "not a regular file"),
        (&["io", "--qd", "0"], "queue depth 0"),
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
    assert_eq!(out.status.code(), Some(1), "{err}");
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
