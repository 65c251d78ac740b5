//! `storbench tpch` through the binary at SF 0.01: build on PostgreSQL and
//! SQLite, a power test recorded step by step with Power@Size, `check
//! --against` passing and then failing on a corrupted row naming the query,
//! a timed-out query cancelled on the server and recorded as such, Ctrl-C
//! mid-query keeping the finished queries, and bad input exiting 2.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use storbench_db::{connect, Connection, DbUrl, Stmt};

const ADMIN: &str = "postgres://root@127.0.0.1:5432/postgres";

/// A PostgreSQL database for one test, dropped on drop.
struct PgDb {
    name: String,
    url: String,
}

impl PgDb {
    fn new(tag: &str) -> PgDb {
        let name = format!("tpch_test_{}_{tag}", std::process::id());
        let mut c = open(ADMIN);
        c.batch(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
        c.batch(&format!("CREATE DATABASE {name}")).unwrap();
        PgDb { url: format!("postgres://root@127.0.0.1:5432/{name}"), name }
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if let Ok(mut c) = connect(&DbUrl::parse(ADMIN).unwrap()) {
            let _ = c.batch(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

fn open(url: &str) -> Box<dyn Connection> {
    connect(&DbUrl::parse(url).unwrap()).unwrap()
}

fn sb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(dir).env("STORBENCH_RESULTS", dir.join("r.db")).env_remove("STORBENCH_DB").arg("--quiet");
    c
}

fn last_run(dir: &Path, kind: &str) -> Value {
    let out = sb(dir).args(["--json", "results", "list"]).output().unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == kind)
        .max_by_key(|r| r["id"].as_i64())
        .cloned();
    let id = run.expect("a run")["id"].to_string();
    let out = sb(dir).args(["results", "export", &id, "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn labels(rec: &Value) -> Vec<String> {
    rec["steps"].as_array().unwrap().iter().map(|s| s["label"].as_str().unwrap().to_string()).collect()
}

fn metric(step: &Value, name: &str) -> f64 {
    step["metrics"][name]["value"].as_f64().unwrap_or_else(|| panic!("no metric {name} in {}", step["label"]))
}

fn ok(c: &mut Command) -> std::process::Output {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{:?}: {}", c, String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn tpch_builds_runs_checks_and_stops_through_the_binary() {
    let d = tempfile::tempdir().unwrap();
    let pg = PgDb::new("cli");
    let lite = format!("sqlite:{}", d.path().join("t.db").display());
    ok(sb(d.path()).args(["tpch", "build", "--db", &pg.url, "--scale", "0.01", "--jobs", "2"]));
    ok(sb(d.path()).args(["tpch", "build", "--db", &lite, "--scale", "0.01"]));
    let b = last_run(d.path(), "tpch-build");
    assert_eq!(metric(&b["steps"][0], "rows.lineitem"), 60_175.0);

    // Bad input: exit 2, one line, nothing recorded.
    let runs_before = last_run(d.path(), "tpch-build")["run"]["id"].clone();
    for args in [
        vec!["tpch", "build", "--db", &lite, "--scale", "0.01"],
        vec!["tpch", "build", "--db", &lite, "--scale", "1000", "--replace"],
        vec!["tpch", "run", "--db", &lite, "--queries", "0"],
        vec!["tpch", "run", "--db", &lite, "--timeout", "1s"],
        vec!["tpch", "run", "--db", &pg.url, "--streams", "3"],
        vec!["tpch", "check", "--db", &lite],
        vec!["tpch", "build", "--db", "managed:nosuch/Tpch"],
        vec!["tpch", "build", "--db", "managed:nosuch/tpch"],
    ] {
        let out = sb(d.path()).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    assert_eq!(last_run(d.path(), "tpch-build")["run"]["id"], runs_before);

    // The power test: RF1, 22 queries, RF2, each a step; then the summary.
    ok(sb(d.path()).args(["tpch", "run", "--db", &pg.url, "--seed", "5"]));
    let rec = last_run(d.path(), "tpch");
    assert_eq!(rec["run"]["status"], "complete");
    let l = labels(&rec);
    assert_eq!(l.len(), 25, "{l:?}");
    assert_eq!(l[0], "power rf1");
    assert_eq!(l[1], "power q14");
    assert_eq!(l[23], "power rf2");
    let steps = rec["steps"].as_array().unwrap();
    for s in &steps[1..23] {
        assert_eq!(metric(s, "timed_out"), 0.0);
        assert!(metric(s, "seconds") > 0.0);
        assert!(s["metrics"]["temp_bytes"].is_object(), "PostgreSQL temp bytes per query");
        assert!(s["params"]["params"].as_object().is_some_and(|p| !p.is_empty()), "parameters recorded");
    }
    let summary = &steps[24];
    assert!(metric(summary, "tpch.power") > 0.0);
    assert!(metric(summary, "power.geomean") > 0.0);

    // Answers agree across engines; a corrupted row fails naming the query.
    ok(sb(d.path()).args(["tpch", "check", "--db", &pg.url, "--against", &lite]));
    open(&lite)
        .batch("UPDATE lineitem SET l_quantity = l_quantity + 1000 WHERE l_orderkey = 1 AND l_linenumber = 1")
        .unwrap();
    let out = sb(d.path())
        .args(["tpch", "check", "--db", &pg.url, "--against", &lite, "--queries", "1,6"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Q1"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAIL"));

    // A query blocked past --timeout is cancelled by the server and recorded.
    let mut locker = open(&pg.url);
    locker.batch("BEGIN; LOCK TABLE region IN ACCESS EXCLUSIVE MODE").unwrap();
    ok(sb(d.path()).args(["tpch", "run", "--db", &pg.url, "--queries", "14,2", "--timeout", "300ms"]));
    let rec = last_run(d.path(), "tpch");
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(labels(&rec)[..2], ["power q14", "power q2"]);
    assert_eq!(metric(&steps[0], "timed_out"), 0.0);
    assert_eq!(metric(&steps[1], "timed_out"), 1.0);
    let waiting = Stmt::new(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
    );
    let mut watcher = open(&pg.url);
    assert_eq!(watcher.query_one(&waiting, &[]).unwrap().int(0).unwrap(), 0, "the timed-out query is gone");

    // Ctrl-C while Q2 waits: RF1 and Q14 are kept, the run is interrupted.
    let mut child = sb(d.path())
        .args(["tpch", "run", "--db", &pg.url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while watcher.query_one(&waiting, &[]).unwrap().int(0).unwrap() == 0 {
        assert!(t.elapsed() < Duration::from_secs(60), "Q2 never waited on the lock");
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let st = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(15), "the blocked query was not cancelled");
    assert_eq!(st.code(), Some(130));
    let rec = last_run(d.path(), "tpch");
    assert_eq!(rec["run"]["status"], "interrupted");
    let l = labels(&rec);
    assert_eq!(l[..2], ["power rf1", "power q14"], "{l:?}");
    assert!(!l.iter().any(|s| s == "power q2"), "{l:?}");
    locker.batch("ROLLBACK").unwrap();
    assert_eq!(watcher.query_one(&waiting, &[]).unwrap().int(0).unwrap(), 0);

    ok(sb(d.path()).args(["tpch", "drop", "--db", &pg.url]));
    ok(sb(d.path()).args(["tpch", "drop", "--db", &lite]));
}
