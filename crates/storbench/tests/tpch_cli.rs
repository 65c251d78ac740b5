//! `storbench tpch` through the binary at SF 0.01: build on PostgreSQL and
//! SQLite, a power test recorded step by step with Power@Size, `check
//! --against` passing and then failing on a corrupted row naming the query,
//! a timed-out query cancelled on the server and recorded as such, Ctrl-C
//! mid-query keeping the finished queries, and bad input exiting 2. Then
//! `--test both` on SQLite and PostgreSQL: every stream's queries in the
//! specification's order with qgen's parameters, S refresh pairs, and
//! Power@Size, Throughput@Size and QphH@Size as their definitions give them
//! from the recorded times; results on stdout under `--quiet`, and with
//! `--json` the record alone.

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
        // TPC-C beside TPC-H: CUSTOMER and ORDERS would collide.
        vec!["tpcc", "build", "--db", &lite, "--warehouses", "1"],
    ] {
        let out = sb(d.path()).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    assert_eq!(last_run(d.path(), "tpch-build")["run"]["id"], runs_before);
    // A TPC-C drop in TPC-H's database leaves TPC-H's CUSTOMER and ORDERS.
    ok(sb(d.path()).args(["tpcc", "drop", "--db", &lite]));
    let mut c = open(&lite);
    for (t, n) in [("customer", 1_500), ("orders", 15_000)] {
        let q = Stmt::new(format!("SELECT COUNT(*) FROM {t}"));
        assert_eq!(c.query_one(&q, &[]).unwrap().int(0).unwrap(), n, "{t} after tpcc drop");
    }

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

/// Appendix A's ordered sets of streams 1 to 3, copied from the specification.
const STREAM_ORDER: [[u64; 22]; 3] = [
    [21, 3, 18, 5, 11, 7, 6, 20, 17, 12, 16, 15, 13, 10, 2, 8, 14, 19, 9, 22, 1, 4],
    [6, 17, 14, 16, 19, 10, 9, 2, 15, 8, 5, 22, 12, 7, 13, 18, 1, 4, 20, 3, 11, 21],
    [8, 5, 4, 6, 17, 7, 1, 18, 22, 14, 9, 10, 15, 11, 20, 2, 21, 19, 13, 16, 12, 3],
];

/// `a` equals `b` but for rounding: the same definition evaluated in
/// another order (a product and a root here, logarithms in storbench)
/// differs in the last bits only.
fn assert_same(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-12 * b.abs(), "{what}: recorded {a}, recomputed {b}");
}

fn step<'a>(rec: &'a Value, label: &str) -> &'a Value {
    rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no step {label}"))
}

/// Checks a `--test both --streams S --seed SEED` run at SF 0.01 against
/// the specification's definitions.
fn assert_both(rec: &Value, streams: usize, seed: u64) {
    let sf = 0.01;
    assert_eq!(rec["run"]["status"], "complete");
    let t = step(rec, "throughput");
    let p = &t["params"];
    assert_eq!(p["streams"], streams as u64);
    assert_eq!(p["seed"], seed);
    // Every query stream ran the 22 queries in its ordered set, each with
    // the parameters qgen's draw gives for (query, stream, seed).
    let queries = p["queries"].as_object().unwrap();
    assert_eq!(queries.len(), streams);
    for s in 1..=streams {
        let ran = queries[&format!("s{s}")].as_array().unwrap();
        let order: Vec<u64> = ran.iter().map(|q| q["query"].as_u64().unwrap()).collect();
        assert_eq!(order, STREAM_ORDER[s - 1], "stream {s}");
        for q in ran {
            let n = q["query"].as_u64().unwrap() as u8;
            assert_eq!(q["status"], "ok", "stream {s} Q{n}");
            let want: serde_json::Map<String, Value> =
                storbench_workloads::tpch::params::generate(n, sf, s, seed)
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::from(v.display())))
                    .collect();
            assert_eq!(q["params"], Value::Object(want), "stream {s} Q{n}");
            assert_eq!(metric(t, &format!("s{s}.q{n}.failed")), 0.0);
        }
    }
    // The refresh stream: S pairs of RF1 then RF2, pairs 2..=S+1 (the power
    // test used pair 1).
    assert_eq!(p["refresh_stream"], streams as u64 + 1);
    let rf: Vec<(String, u64)> = p["refresh"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "ok");
            (r["item"].as_str().unwrap().to_string(), r["pair"].as_u64().unwrap())
        })
        .collect();
    let want: Vec<(String, u64)> = (2..=streams as u64 + 1)
        .flat_map(|pair| [("rf1".to_string(), pair), ("rf2".to_string(), pair)])
        .collect();
    assert_eq!(rf, want);
    for pair in 2..=streams + 1 {
        assert!(metric(t, &format!("rf.{pair}.rf1.rows")) > 0.0);
        assert_eq!(metric(t, &format!("rf.{pair}.rf2.rows")), metric(t, &format!("rf.{pair}.rf1.rows")));
    }
    assert!(t["metrics"][format!("rf.{}.rf1.seconds", streams + 2)].is_null());

    // Power@Size = 3600 × SF / (Π QI × Π RI)^(1/24), query intervals raised
    // to 1/1000 of the longest query's (clause 5.4.1.4).
    let qi: Vec<f64> = (1..=22).map(|q| metric(step(rec, &format!("power q{q}")), "seconds")).collect();
    let ri: Vec<f64> = ["power rf1", "power rf2"].iter().map(|l| metric(step(rec, l), "seconds")).collect();
    let longest = qi.iter().copied().fold(0.0, f64::max);
    let product: f64 = qi.iter().map(|&x| x.max(longest / 1000.0)).chain(ri).product();
    let power = 3600.0 * sf / product.powf(1.0 / 24.0);
    let summary = step(rec, "summary");
    assert_same(metric(summary, "tpch.power"), power, "Power@Size");
    // Throughput@Size = S × 22 × 3600 / Ts × SF.
    let ts = metric(t, "throughput.seconds");
    let throughput = streams as f64 * 22.0 * 3600.0 / ts * sf;
    assert_same(metric(t, "tpch.throughput"), throughput, "Throughput@Size");
    assert_same(metric(summary, "tpch.throughput"), throughput, "Throughput@Size (summary)");
    // QphH@Size = √(Power@Size × Throughput@Size).
    assert_same(metric(summary, "tpch.qphh"), (power * throughput).sqrt(), "QphH@Size");
}

#[test]
fn throughput_test_runs_the_specifications_streams_and_figures() {
    let pg = PgDb::new("both");
    let lite_dir = tempfile::tempdir().unwrap();
    let pg_dir = tempfile::tempdir().unwrap();
    let lite = format!("sqlite:{}", lite_dir.path().join("t.db").display());
    std::thread::scope(|s| {
        // SQLite, 3 streams, --quiet: the results still reach stdout.
        let a = s.spawn(|| {
            let d = lite_dir.path();
            let out = ok(sb(d).args(["tpch", "build", "--db", &lite, "--scale", "0.01"]));
            assert!(String::from_utf8_lossy(&out.stdout).starts_with("tpch build: SF 0.01, "), "{out:?}");
            let run = ["tpch", "run", "--db", &lite, "--test", "both", "--streams", "3", "--seed", "9"];
            let out = ok(sb(d).args(run));
            let table = String::from_utf8_lossy(&out.stdout);
            for f in ["tpch.power", "tpch.throughput", "tpch.qphh", "power.geomean", "throughput.seconds"] {
                assert!(table.contains(f), "{f} missing from stdout under --quiet: {table}");
            }
            assert_both(&last_run(d, "tpch"), 3, 9);
        });
        // PostgreSQL, 2 streams, --json: stdout is the run record alone.
        let b = s.spawn(|| {
            let d = pg_dir.path();
            let build = ["--json", "tpch", "build", "--db", &pg.url, "--scale", "0.01", "--jobs", "2"];
            let out = ok(sb(d).args(build));
            let rec: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON alone");
            assert_eq!(rec["run"]["kind"], "tpch-build");
            assert!(String::from_utf8_lossy(&out.stderr).contains("tpch build: SF 0.01, "), "{out:?}");
            let run = ["--json", "tpch", "run", "--db", &pg.url, "--test", "both", "--seed", "4"];
            let out = ok(sb(d).args(run));
            let rec: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON alone");
            assert!(String::from_utf8_lossy(&out.stderr).contains("tpch.qphh"), "the table goes to stderr");
            assert_eq!(rec, last_run(d, "tpch"));
            // --streams defaults to the specification's minimum: 2 below SF 10.
            assert_both(&rec, 2, 4);
        });
        for h in [a, b] {
            if let Err(e) = h.join() {
                std::panic::resume_unwind(e);
            }
        }
    });
    // A check records no run: with --json its outcome is stdout's JSON.
    let check = ["--json", "tpch", "check", "--db", &pg.url, "--against", &lite, "--queries", "6"];
    let out = ok(sb(pg_dir.path()).args(check));
    let check: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON alone");
    assert_eq!(check["passed"], true);
    assert_eq!(check["queries"][0]["query"], 6);
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass"), "the table goes to stderr");
}
