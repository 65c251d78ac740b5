//! `storbench tpcb` and the OLTP step driver through the binary: a run is
//! recorded whole, bad input records nothing (exit 2), Ctrl-C keeps the
//! step in progress, and a password never reaches the terminal or the store.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

fn sb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(dir).env("STORBENCH_RESULTS", dir.join("r.db")).env_remove("STORBENCH_DB").arg("--quiet");
    c
}

fn runs(dir: &Path) -> Vec<Value> {
    if !dir.join("r.db").exists() {
        return Vec::new();
    }
    let out = sb(dir).args(["--json", "results", "list"]).output().unwrap();
    if out.stdout.is_empty() {
        return Vec::new();
    }
    serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().cloned().unwrap_or_default()
}

fn export(dir: &Path, id: &str) -> Value {
    let out = sb(dir).args(["results", "export", id, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn tpcb_on_sqlite_records_every_step() {
    let d = tempfile::tempdir().unwrap();
    let st = sb(d.path()).args(["tpcb", "init", "--scale", "1"]).status().unwrap();
    assert!(st.success());
    assert!(
        d.path().join("storbench-data/tpcb.db").exists(),
        "the embedded default lives under ./storbench-data"
    );
    let out = sb(d.path())
        .args(["--json", "tpcb", "run", "--clients", "1,2", "--duration", "1s"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["run"]["status"], "complete");
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1]["label"], "clients=2");
    for s in steps {
        assert!(s["metrics"]["tps"]["value"].as_f64().unwrap() > 0.0, "{s}");
        assert_eq!(s["metrics"]["tps"]["unit"], "per_s");
        assert!(s["metrics"]["lat.p99"]["value"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(rec["run"]["env"]["db"]["engine"], "sqlite");
}

#[test]
fn bad_input_exits_2_and_records_nothing() {
    let d = tempfile::tempdir().unwrap();
    let cases: &[&[&str]] = &[
        &["tpcb", "run", "--clients", "0"],
        &["tpcb", "run", "--duration", "0s"],
        &["tpcb", "run", "--duration", "soon"],
        &["tpcb", "run", "--rate", "-5"],
        &["tpcb", "run", "--db", "oracle://x"],
        &["tpcb", "run"],
        &["tpcb", "init", "--scale", "0"],
        &["tpcb", "run", "--db", "postgres://root@127.0.0.1:1/none"],
        &["tpcb", "run", "--db", "postgres://root@127.0.0.1:5432/test", "--clients", "1"],
    ];
    for args in cases {
        let out = sb(d.path()).args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line, got {err}");
        assert!(runs(d.path()).is_empty(), "{args:?} left a run behind");
    }
    let out = sb(d.path()).args(["tpcb", "run", "--clients", "0"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--clients 0"));
}

#[test]
fn a_password_never_reaches_the_terminal_or_the_store() {
    let d = tempfile::tempdir().unwrap();
    // Trust authentication accepts any password: the run goes through, so
    // every place the URL is written is exercised.
    let db = format!("storbench_t_{}_redact", std::process::id());
    let psql = |sql: &str| {
        Command::new("psql")
            .args(["-qAt", "-h", "127.0.0.1", "-U", "root", "-d", "postgres", "-c", sql])
            .status()
            .unwrap()
    };
    psql(&format!("DROP DATABASE IF EXISTS {db}"));
    assert!(psql(&format!("CREATE DATABASE {db}")).success());
    let url = format!("postgres://root:hunter2@127.0.0.1:5432/{db}");
    let a = sb(d.path()).args(["tpcb", "init", "--db", &url]).output().unwrap();
    let b = sb(d.path()).args(["--json", "tpcb", "run", "--db", &url, "--duration", "1s"]).output().unwrap();
    let c = sb(d.path()).args(["tpcb", "run", "--db", &url.replace("5432", "1")]).output().unwrap();
    psql(&format!("DROP DATABASE IF EXISTS {db}"));
    assert!(a.status.success() && b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    assert_eq!(c.status.code(), Some(2));
    for o in [&a, &b, &c] {
        assert!(!String::from_utf8_lossy(&o.stdout).contains("hunter2"));
        assert!(!String::from_utf8_lossy(&o.stderr).contains("hunter2"));
    }
    assert!(String::from_utf8_lossy(&c.stderr).contains("root:***@"));
    let store = std::fs::read(d.path().join("r.db")).unwrap();
    assert!(!store.windows(7).any(|w| w == b"hunter2"), "the password is in the results store");
    let rec: Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(rec["run"]["config"]["db"], format!("postgres://root:***@127.0.0.1:5432/{db}"));
}

#[test]
fn ctrl_c_keeps_the_step_in_progress_and_marks_the_run_interrupted() {
    let d = tempfile::tempdir().unwrap();
    assert!(sb(d.path()).args(["tpcb", "init"]).status().unwrap().success());
    let mut child = sb(d.path())
        .args(["tpcb", "run", "--clients", "1,2", "--duration", "60s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let st = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "the step did not end promptly");
    assert_eq!(st.code(), Some(130));
    let list = runs(d.path());
    let run = list.iter().find(|r| r["kind"] == "tpcb").unwrap();
    assert_eq!(run["status"], "interrupted");
    let rec = export(d.path(), &run["id"].to_string());
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "the step in progress is kept, the next never starts");
    assert_eq!(steps[0]["params"]["partial"], true);
    assert!(steps[0]["metrics"]["tps"]["value"].as_f64().unwrap() > 0.0);
    assert!(steps[0]["metrics"]["window"]["value"].as_f64().unwrap() > 1.0);
}
