//! `storbench tpcb` and the OLTP step driver through the binary: a run is
//! recorded whole, bad input records nothing (exit 2), Ctrl-C keeps the
//! step in progress, and a password never reaches the terminal or the store.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

use crate::common;
use common::psql as psql_val;

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

/// One value from `sql` on an SQLite file (Python's sqlite3: the binary's
/// engine is not reachable from here).
fn sqlite_val(db: &Path, sql: &str) -> f64 {
    let py =
        format!("import sqlite3; print(sqlite3.connect('{}').execute('{sql}').fetchone()[0])", db.display());
    let out = Command::new("python3").args(["-c", &py]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A step's figure, which must be there.
fn fig(step: &Value, name: &str) -> f64 {
    step["metrics"][name]["value"].as_f64().unwrap_or_else(|| panic!("{name} in {}", step["label"]))
}

/// Waits until no session of database `db` is left: each flushed its
/// statistics on exit, so `pg_stat_database` is exact after this.
fn sessions_gone(db: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    while psql_val("postgres", &format!("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = '{db}'"))
        != "0"
    {
        assert!(Instant::now() < until, "sessions of {db} did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("p99 µs") && err.contains("max µs"), "the step line shows the worst: {err}");
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1]["label"], "clients=2");
    let mut committed = 0.0;
    for s in steps {
        // pgbench's TPS: the window's transactions over the window.
        let tps = fig(s, "tps.client");
        assert_eq!(tps, fig(s, "txn.count") / fig(s, "window"), "{s}");
        assert_eq!(s["metrics"]["tps.client"]["unit"], "per_s");
        assert_eq!(fig(s, "tps"), tps, "the runner's generic name, same count");
        assert!(s["samples"].as_array().unwrap().iter().any(|x| x["name"] == "tps.client"));
        assert!(fig(s, "txn.count") > 0.0 && fig(s, "txn.count") <= fig(s, "step.txn.count"));
        committed += fig(s, "step.txn.count");
        assert!(s["metrics"]["lat.p99"]["value"].as_f64().unwrap() > 0.0);
        // storbench's own CPU over the window, per transaction.
        let user = s["metrics"]["driver.cpu.user_per_txn"]["value"].as_f64().unwrap();
        // (0 happens: a 1 s step on a busy machine can fall between the
        // kernel's CPU-time ticks.)
        assert!((0.0..1e6).contains(&user), "{s}");
        assert_eq!(s["metrics"]["driver.cpu.user_per_txn"]["unit"], "us");
        assert!(s["metrics"]["driver.cpu.sys_per_txn"]["value"].as_f64().unwrap() >= 0.0);
    }
    assert_eq!(rec["run"]["env"]["db"]["engine"], "sqlite");
    // Every transaction the clients committed over both steps, and no
    // other, is a row of history.
    let history =
        sqlite_val(&d.path().join("storbench-data/tpcb.db"), "SELECT COUNT(*) FROM pgbench_history");
    assert_eq!(history, committed);
}

#[test]
fn bad_input_exits_2_and_records_nothing() {
    let d = tempfile::tempdir().unwrap();
    let cases: &[&[&str]] = &[
        &["tpcb", "run", "--clients", "0"],
        &["tpcb", "run", "--duration", "0s"],
        &["tpcb", "run", "--duration", "soon"],
        &["tpcb", "run", "--rate", "-5"],
        &["tpcb", "run", "--latency-limit", "0"],
        &["tpcb", "run", "--latency-limit", "soon"],
        &["tpcb", "run", "--progress", "0.5s"],
        &["tpcb", "run", "--progress", "often"],
        &["tpcb", "run", "--db", "oracle://x"],
        &["tpcb", "run"],
        &["tpcb", "init", "--scale", "0"],
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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'0' for '--clients") && err.contains("positive whole numbers"), "{err}");
    let out = sb(d.path()).args(["tpcb", "run", "--clients", "1,20000"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'1,20000' for '--clients") && err.contains("each must be 1 to 10000"), "{err}");
    // pgbench's -j has nothing to set here (a thread per client): refused,
    // not accepted and ignored.
    let out = sb(d.path()).args(["tpcb", "run", "--jobs", "2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(runs(d.path()).is_empty());
}

#[test]
fn tpcb_init_refuses_existing_tables_without_replace() {
    let d = tempfile::tempdir().unwrap();
    assert!(sb(d.path()).args(["tpcb", "init"]).status().unwrap().success());
    let out = sb(d.path()).args(["tpcb", "init"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--replace") && err.contains("scale 1"), "{err}");
    assert_eq!(runs(d.path()).len(), 1, "the refused init recorded nothing");
    let out = sb(d.path()).args(["tpcb", "init", "--replace"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("100011 rows"), "the result on stdout");
}

#[test]
fn results_on_stdout_progress_on_stderr_and_flags_beside_the_figures() {
    let d = tempfile::tempdir().unwrap();
    // synchronous=off: SQLite does not wait for the disk, so the figures
    // say nothing about a durable database.
    let db = format!("sqlite:{}?synchronous=off", d.path().join("b.db").display());
    assert!(sb(d.path()).args(["tpcb", "init", "--db", &db]).status().unwrap().success());
    let out = sb(d.path())
        .args(["tpcb", "run", "--db", &db, "--duration", "2s", "--progress", "1", "--latency-limit", "50"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (so, se) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // stdout: the summary table; stderr: the warning (one line, first), the
    // progress lines and the step's line.
    assert!(so.contains("TPS") && so.contains("clients=1") && so.contains("synchronous=off"), "{so}");
    assert!(!so.contains("progress:") && !so.contains("warning"), "{so}");
    let warn: Vec<&str> = se.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warn.len(), 1, "{se}");
    assert!(se.lines().next().unwrap().contains("synchronous=off"), "warned at the start: {se}");
    assert!(se.lines().any(|l| l.starts_with("progress: ")), "{se}");
    assert!(
        se.lines().any(|l| l.starts_with("clients=1:") && l.contains("[flagged: synchronous=off")),
        "{se}"
    );

    let out = sb(d.path()).args(["--json", "tpcb", "run", "--db", &db, "--duration", "1s"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // With --json, stdout is the run record and nothing else.
    let rec: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(rec["run"]["env"]["warnings"], serde_json::json!(["synchronous=off"]));
    assert_eq!(rec["run"]["env"]["durability"]["synchronous"], "off");
    // A bare --latency-limit is milliseconds, as in pgbench.
    let limited = runs(d.path())
        .iter()
        .filter(|r| r["kind"] == "tpcb")
        .map(|r| export(d.path(), &r["id"].to_string()))
        .find(|r| !r["run"]["config"]["latency_limit_ms"].is_null())
        .expect("the run with --latency-limit");
    assert_eq!(limited["run"]["config"]["latency_limit_ms"], 50.0);
    assert!(limited["steps"][0]["metrics"]["late"].is_object(), "late transactions counted");
}

#[test]
fn a_setting_other_than_asked_is_flagged_on_postgres() {
    let d = tempfile::tempdir().unwrap();
    let db = format!("storbench_t_{}_flags", std::process::id());
    psql_val("postgres", &format!("DROP DATABASE IF EXISTS {db}"));
    psql_val("postgres", &format!("CREATE DATABASE {db}"));
    // Every session of this database commits without waiting for its WAL.
    psql_val("postgres", &format!("ALTER DATABASE {db} SET synchronous_commit = off"));
    let url = format!("postgres://root@127.0.0.1:5432/{db}");
    let init = sb(d.path()).args(["tpcb", "init", "--db", &url]).output().unwrap();
    let run =
        sb(d.path()).args(["--json", "tpcb", "run", "--db", &url, "--duration", "1s"]).output().unwrap();
    psql_val("postgres", &format!("DROP DATABASE IF EXISTS {db}"));
    assert!(init.status.success() && run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let rec: Value = serde_json::from_slice(&run.stdout).unwrap();
    let warnings = rec["run"]["env"]["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w == "synchronous_commit=off"), "{warnings:?}");
    assert_eq!(rec["run"]["env"]["durability"]["synchronous_commit"], "off");
    // A 1 s run: autovacuum (off on this machine's server) could not have
    // run in it anyway, so that is not flagged.
    assert!(!warnings.iter().any(|w| w.as_str().unwrap().starts_with("autovacuum")), "{warnings:?}");
    let se = String::from_utf8_lossy(&run.stderr);
    assert_eq!(se.lines().filter(|l| l.contains("warning")).count(), 1, "{se}");
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
    assert_eq!(c.status.code(), Some(3), "an unreachable server is exit 3 (tests/exit_codes.rs)");
    for o in [&a, &b, &c] {
        assert!(!String::from_utf8_lossy(&o.stdout).contains("hunter2"));
        assert!(!String::from_utf8_lossy(&o.stderr).contains("hunter2"));
    }
    assert!(String::from_utf8_lossy(&c.stderr).contains("root:***@"));
    let store = std::fs::read(d.path().join("r.db")).unwrap();
    assert!(!store.windows(7).any(|w| w == b"hunter2"), "the password is in the results store");
    let rec: Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(rec["run"]["config"]["db"], format!("postgres://root:***@127.0.0.1:5432/{db}"));
    // This server offers TLS, and sslmode=prefer (the default) takes it:
    // the environment says which TLS the run went over.
    assert_eq!(rec["run"]["env"]["db"]["tls"]["sslmode"], "prefer", "{}", rec["run"]["env"]["db"]);
    assert_eq!(rec["run"]["env"]["db"]["tls"]["version"], "TLSv1_3");
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

#[test]
fn tpcc_builds_runs_and_checks_through_the_binary() {
    let d = tempfile::tempdir().unwrap();
    // Nothing built yet: a clear refusal, nothing recorded.
    let out = sb(d.path()).args(["tpcc", "run", "--duration", "1s"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tpcc build"));
    assert!(runs(d.path()).is_empty());

    assert!(sb(d.path()).args(["tpcc", "build", "--warehouses", "1"]).status().unwrap().success());
    let out = sb(d.path()).args(["tpcc", "build", "--warehouses", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "an existing schema is not silently replaced");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replace"));
    let out = sb(d.path()).args(["tpcc", "run", "--warehouses", "3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has 1"));

    let file = d.path().join("storbench-data/tpcc.db");
    let next0 = sqlite_val(&file, "SELECT SUM(d_next_o_id) FROM district");
    let out = sb(d.path())
        .args(["--json", "tpcc", "run", "--users", "1,2", "--rampup", "1s", "--duration", "2s"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["steps"].as_array().unwrap().len(), 2);
    // The districts grew by exactly the New-Orders the users committed
    // over both steps.
    let grown = sqlite_val(&file, "SELECT SUM(d_next_o_id) FROM district") - next0;
    let committed: f64 =
        rec["steps"].as_array().unwrap().iter().map(|s| fig(s, "step.txn.new_order.count")).sum();
    assert_eq!(grown, committed);
    for s in rec["steps"].as_array().unwrap() {
        let m = &s["metrics"];
        for f in ["nopm.districts", "nopm.client", "tpm.client", "txn.new_order.count", "txn.payment.lat.p95"]
        {
            assert!(fig(s, f) > 0.0, "{f} in {}", s["label"]);
        }
        assert_eq!(m["tpm.client"]["unit"], "per_min");
        assert!(
            m["tpm.server"].is_null() && m["tpm"].is_null(),
            "no server counters on SQLite, no bare name"
        );
        for series in ["nopm.client", "tpm.client"] {
            assert!(
                s["samples"].as_array().unwrap().iter().any(|x| x["name"] == series),
                "per-second {series}"
            );
        }
        assert_sums(s);
    }
    let sources = &rec["run"]["env"]["sources"];
    assert!(sources["tpm.client"].is_string() && sources["tpm.server"].is_null(), "{sources}");
    assert!(sb(d.path()).args(["tpcc", "check"]).status().unwrap().success());

    // Corrupt one district: check fails (exit 1) and names it.
    let db = rusqlite_free_update(d.path().join("storbench-data/tpcc.db"));
    assert!(db);
    let out = sb(d.path()).args(["tpcc", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("FAIL") && text.contains("d_id=3"), "{text}");
}

/// Per-kind counts sum to the total, exactly; New-Orders rolled back by
/// design are their own kind, never a New-Order; the client's TPM and NOPM
/// are those counts over the window.
fn assert_sums(s: &Value) {
    let kinds = ["new_order", "payment", "order_status", "delivery", "stock_level", "new_order_rollback"];
    let sum: f64 = kinds.iter().map(|k| fig(s, &format!("txn.{k}.count"))).sum();
    assert_eq!(sum, fig(s, "txn.count"), "per-kind counts vs the total in {}", s["label"]);
    assert_eq!(fig(s, "rolled_back"), fig(s, "txn.new_order_rollback.count"));
    let minutes = fig(s, "window") / 60.0;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(fig(s, "nopm.client"), fig(s, "txn.new_order.count") / minutes), "{}", s["label"]);
    assert!(close(fig(s, "tpm.client"), fig(s, "txn.count") / minutes), "{}", s["label"]);
}

/// Bumps one district's next order id with the sqlite3-compatible engine
/// the binary itself uses (through `storbench`'s own dependency tree is not
/// reachable from here, so use the SQL shell if present, else Python).
fn rusqlite_free_update(db: std::path::PathBuf) -> bool {
    let sql = "UPDATE district SET d_next_o_id = d_next_o_id + 5 WHERE d_w_id = 1 AND d_id = 3";
    let py = format!("import sqlite3; c=sqlite3.connect('{}'); c.execute('{sql}'); c.commit()", db.display());
    Command::new("python3").args(["-c", &py]).status().map(|s| s.success()).unwrap_or(false)
}

#[test]
fn tpcc_on_postgres_counts_tpm_on_the_server() {
    let d = tempfile::tempdir().unwrap();
    let db = format!("storbench_t_{}_tpcccli", std::process::id());
    let psql = |sql: &str| {
        Command::new("psql")
            .args(["-qAt", "-h", "127.0.0.1", "-U", "root", "-d", "postgres", "-c", sql])
            .status()
            .unwrap()
    };
    psql(&format!("DROP DATABASE IF EXISTS {db}"));
    assert!(psql(&format!("CREATE DATABASE {db}")).success());
    let url = format!("postgres://root@127.0.0.1:5432/{db}");
    let build = sb(d.path())
        .args(["tpcc", "build", "--db", &url, "--warehouses", "1", "--jobs", "2"])
        .output()
        .unwrap();
    let counts = || {
        sessions_gone(&db);
        let q = format!(
            "SELECT xact_rollback || ' ' || (SELECT SUM(d_next_o_id) FROM district) FROM pg_stat_database WHERE datname = '{db}'"
        );
        let v: Vec<i64> = psql_val(&db, &q).split(' ').map(|x| x.parse().unwrap()).collect();
        (v[0], v[1])
    };
    let (rollback0, next0) = if build.status.success() { counts() } else { (0, 0) };
    let run = sb(d.path())
        .args(["--json", "tpcc", "run", "--db", &url, "--users", "2", "--rampup", "1s", "--duration", "3s"])
        .output()
        .unwrap();
    let (rollback1, next1) = if run.status.success() { counts() } else { (0, 0) };
    let check = sb(d.path()).args(["tpcc", "check", "--db", &url]).output().unwrap();
    psql(&format!("DROP DATABASE IF EXISTS {db}"));
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    let rec: Value = serde_json::from_slice(&run.stdout).unwrap();
    let s = &rec["steps"][0];
    assert_sums(s);
    assert!(fig(s, "tpm.server") > 0.0 && fig(s, "nopm.districts") > 0.0);
    // The districts grew by exactly the New-Orders the users committed over
    // the step (ramp-up and the orders in flight at the window's end
    // included); the window's own are part of them.
    assert_eq!((next1 - next0) as f64, fig(s, "step.txn.new_order.count"), "district growth vs client count");
    assert!(fig(s, "txn.new_order.count") <= fig(s, "step.txn.new_order.count"));
    // The designed rollbacks roll back inside the routine: every
    // transaction the server rolled back (its statistics read after every
    // session ended) is one the driver counted as retried, failed or
    // cancelled at the window's end — a call blocked on a row lock then.
    let failed = fig(s, "retries") + fig(s, "errors") + fig(s, "cancelled");
    assert_eq!((rollback1 - rollback0) as f64, failed, "rolled-back transactions on the server");
    let sources = &rec["run"]["env"]["sources"];
    assert!(sources["tpm.server"].as_str().unwrap().contains("server"), "{sources}");
    assert_eq!(rec["run"]["env"]["driver"], "server-side procedures");
}

/// A tmpfs of `size`, unmounted when dropped (even when the test fails).
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn new(size: &str) -> SmallFs {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a {size} tmpfs (root)");
        SmallFs { dir }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Regression (issue 24): a SQLite `tpcb init` that filled its disk left a
/// half-loaded database that `tpcb run` took (and recorded a failed run,
/// "expected one row, got 0"). The failed init drops what it made — or,
/// when the full disk refuses even that, what is left holds no branches —
/// so `run` refuses it with one line, exit 2, and records nothing.
#[test]
fn a_tpcb_init_that_fills_its_disk_leaves_nothing_run_takes() {
    let d = tempfile::tempdir().unwrap();
    let fs = SmallFs::new("1m");
    let url = format!("sqlite:{}/b.db", fs.dir.path().display());
    let out = sb(d.path()).args(["tpcb", "init", "--db", &url]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "init on a 1 MiB disk failed: {err}");
    assert!(err.contains("full") || err.contains("disk"), "{err}");
    let before = runs(d.path()).len();
    let out = sb(d.path()).args(["tpcb", "run", "--db", &url, "--duration", "1s"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no TPC-B tables") && err.contains("tpcb init"), "{err}");
    assert_eq!(runs(d.path()).len(), before, "the refused run recorded nothing");
}

/// The test that could fail: a device model under SQLite's files
/// (`?model=`, in process) sets the pace of its commits. A constant device
/// whose flush takes 4 ms allows at most 250 commits a second on one
/// client (each commit syncs the WAL, and a sync ends with a flush); the
/// same database with no model, on the same tmpfs, commits many times
/// faster. The record names the device.
#[test]
fn a_device_model_under_sqlite_s_files_sets_the_pace_of_its_commits() {
    let shm = Path::new("/dev/shm");
    let d = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let model = d.path().join("slow-flush.toml");
    std::fs::write(&model, "base = \"constant\"\nflush = \"4ms\"\nunits = 1\n").unwrap();
    let plain = format!("sqlite:{}", d.path().join("b.db").display());
    let modelled = format!("{plain}?model={}", model.display());
    assert!(sb(d.path()).args(["tpcb", "init", "--db", &plain, "--scale", "1"]).status().unwrap().success());
    let tps = |db: &str| -> (f64, Value) {
        let out =
            sb(d.path()).args(["--json", "tpcb", "run", "--db", db, "--duration", "2s"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        (fig(&rec["steps"][0], "tps"), rec)
    };
    let (slow, rec) = tps(&modelled);
    assert!(slow < 250.0, "a 4 ms flush per commit allows under 250 TPS: {slow}");
    assert!(slow > 100.0, "and the model's wait is all that slows it: {slow}");
    let device = rec["run"]["env"]["db"]["settings"]["device"].as_str().unwrap_or_default().to_string();
    assert!(
        device.contains("slow-flush.toml in process"),
        "the record names the device: {}",
        rec["run"]["env"]
    );
    let (fast, _) = tps(&plain);
    assert!(fast > 2.0 * slow, "no model: {fast} TPS against {slow}");
    // A model that does not exist is bad input, named.
    let bad = format!("{plain}?model=no-such-model");
    let out = sb(d.path()).args(["tpcb", "run", "--db", &bad, "--duration", "1s"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("model=no-such-model"));
}

/// Unmounts (and so frees the loop device of) what a test mounted, even
/// when the test fails.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Flushes the block device mounted at `at` has completed
/// (`/sys/block/DEV/stat`, the 16th field).
fn flushes(at: &Path) -> u64 {
    let dev = storbench_sysmon::path_env(at).device_name;
    assert!(!dev.is_empty(), "{} is on no block device", at.display());
    let stat = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
    stat.split_whitespace().nth(15).expect("a kernel that counts flushes").parse().unwrap()
}

/// Under a model the file's own sync is not made: the real device below
/// the database (ext4 on a loop device, which counts its flushes) sees a
/// flush for each commit without a model and next to none with one (the
/// model's flush stands for it), checked against the commits the database
/// holds.
#[test]
fn under_a_model_the_real_device_sees_no_flush_per_commit() {
    let d = tempfile::tempdir().unwrap();
    let (img, mnt) = (d.path().join("fs.img"), d.path().join("mnt"));
    std::fs::File::create(&img).unwrap().set_len(256 << 20).unwrap();
    assert!(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img).status().unwrap().success());
    std::fs::create_dir_all(&mnt).unwrap();
    assert!(Command::new("mount").args(["-o", "loop"]).arg(&img).arg(&mnt).status().unwrap().success());
    let _m = Mounted(mnt.clone());
    let db = mnt.join("b.db");
    let plain = format!("sqlite:{}", db.display());
    let modelled = format!("{plain}?model=constant");
    assert!(sb(d.path()).args(["tpcb", "init", "--db", &plain, "--scale", "1"]).status().unwrap().success());
    let commits = || sqlite_val(&db, "SELECT COUNT(*) FROM pgbench_history") as u64;
    let run = |url: &str| -> (u64, u64) {
        let (c0, f0) = (commits(), flushes(&mnt));
        let out = sb(d.path()).args(["tpcb", "run", "--db", url, "--duration", "2s"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (commits() - c0, flushes(&mnt) - f0)
    };
    let (n, f) = run(&plain);
    assert!(n > 50, "{n} commits");
    assert!(f >= n, "without a model each commit's sync flushes the device: {f} flushes for {n} commits");
    let (n, f) = run(&modelled);
    assert!(n > 50, "{n} commits");
    // The journal's own periodic commits (every 5 s) and the run's
    // checkpoint at close may flush; one a commit does not.
    assert!(f * 20 < n, "under a model the file's sync is the model's: {f} flushes for {n} commits");
}
