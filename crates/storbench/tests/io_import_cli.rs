//! `storbench io --fio JOB.fio` and `--diskspd ARGS` through the binary, on
//! real files: the jobs run as profiles, the run's config keeps where they
//! came from, and what cannot be mapped is refused (exit 2, one line).

use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

fn sb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(dir).env("STORBENCH_RESULTS", dir.join("r.db")).arg("--quiet");
    c
}

fn run_json(dir: &Path, args: &[&str]) -> Value {
    let out = sb(dir).arg("--json").arg("io").args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is the run record")
}

const JOB: &str = "; two jobs in order on one small file
[global]
filename=fio-e2e.dat
size=4m
runtime=1s
time_based
direct=1
ioengine=libaio

[rand-read]
rw=randread
bs=4k
iodepth=4

[log]
stonewall
rw=write
bs=8k
fdatasync=2
";

#[test]
fn a_fio_job_file_runs_its_jobs_in_order_and_the_run_keeps_the_file() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("db.fio"), JOB).unwrap();
    let rec = run_json(d.path(), &["--fio", "db.fio"]);
    let steps = rec["steps"].as_array().unwrap();
    let labels: Vec<&str> = steps.iter().map(|s| s["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["rand-read", "log"]);
    let (r, w) = (&steps[0]["params"], &steps[1]["params"]);
    assert_eq!(
        (r["bs"].as_u64(), r["qd"].as_u64(), r["read_pct"].as_u64()),
        (Some(4096), Some(4), Some(100))
    );
    assert_eq!((r["access"].as_str(), r["source"].as_str()), (Some("random-map"), Some("fio job file")));
    assert_eq!(
        (w["bs"].as_u64(), w["read_pct"].as_u64(), w["fsync_every"].as_u64()),
        (Some(8192), Some(0), Some(2))
    );
    assert_eq!(w["fdatasync"], true);
    assert!(steps[1]["metrics"]["io.sync.count"]["value"].as_f64().unwrap() > 0.0, "the log job synced");
    for s in steps {
        assert_eq!(s["metrics"]["io.window"]["value"].as_f64(), Some(1.0));
        assert!(s["metrics"]["io.iops"]["value"].as_f64().unwrap() > 0.0);
    }
    let cfg = &rec["run"]["config"];
    assert_eq!(cfg["imported"]["fio_job"]["text"], JOB, "the config keeps the job file as it was");
    assert_eq!(cfg["imported"]["fio_job"]["path"], "db.fio");
    assert_eq!(rec["run"]["label"], "io fio job db.fio on fio-e2e.dat");
    assert_eq!((cfg["engine"].as_str(), cfg["size"].as_u64()), (Some("io_uring"), Some(4 << 20)));
    assert_eq!(
        std::fs::metadata(d.path().join("fio-e2e.dat")).unwrap().len(),
        4 << 20,
        "filename= and size="
    );

    // Flags given beside a job file override its values, as over a set.
    let rec = run_json(d.path(), &["--fio", "db.fio", "--qd", "2", "--target", "other.dat", "--size", "2m"]);
    assert_eq!(rec["steps"][0]["params"]["qd"], 2);
    assert_eq!(std::fs::metadata(d.path().join("other.dat")).unwrap().len(), 2 << 20);
}

#[test]
fn a_diskspd_command_line_runs_as_one_profile() {
    let d = tempfile::tempdir().unwrap();
    let line = "-b8K -d1 -W0 -o4 -t2 -r -w30 -Su -L -c8M";
    let rec = run_json(d.path(), &["--diskspd", line, "ds.dat"]);
    let s = &rec["steps"][0];
    assert_eq!(s["label"], "diskspd-random-8k-w30");
    let p = &s["params"];
    assert_eq!((p["bs"].as_u64(), p["qd"].as_u64(), p["threads"].as_u64()), (Some(8192), Some(4), Some(2)));
    assert_eq!((p["read_pct"].as_u64(), p["direct"].as_bool()), (Some(70), Some(true)));
    let m = &s["metrics"];
    assert!(
        m["io.read.iops"]["value"].as_f64().unwrap() > 0.0
            && m["io.write.iops"]["value"].as_f64().unwrap() > 0.0
    );
    assert_eq!(rec["run"]["config"]["imported"]["diskspd"], line);
    assert_eq!(std::fs::metadata(d.path().join("ds.dat")).unwrap().len(), 8 << 20, "-c8M and the target");
}

#[test]
fn what_cannot_be_mapped_exits_2_naming_the_option_and_records_nothing() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("split.fio"), "[mix]\nfilename=t.dat\nrw=randrw\nbssplit=4k/50:64k/50\n")
        .unwrap();
    std::fs::write(d.path().join("both.fio"), "[global]\ntime_based\nruntime=1\nfilename=t.dat\n[a]\n[b]\n")
        .unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--fio", "split.fio"],
            "split.fio:4: job [mix]: bssplit=4k/50:64k/50: storbench cannot run this option",
        ),
        (&["--fio", "both.fio"], "both.fio:6: job [b] runs alongside [a] in fio"),
        (&["--fio", "none.fio"], "--fio none.fio: cannot read it"),
        (&["--diskspd", "-b8K -Zr t.dat"], "--diskspd: '-Zr': storbench cannot run this option faithfully"),
        (&["--diskspd", "-b8K", "--set", "quick"], "'--diskspd <ARGS>' cannot be used with '--set <SET>'"),
        (&["--fio", "split.fio", "--engine", "psync"], "cannot be used with '--engine <ENGINE>'"),
    ];
    for (args, want) in cases {
        let out = sb(d.path()).arg("io").args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted '{want}' in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!d.path().join("r.db").exists(), "{args:?} recorded a run");
        assert!(!d.path().join("t.dat").exists(), "{args:?} created the target");
    }
}
