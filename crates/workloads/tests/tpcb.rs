//! TPC-B-like on the three real engines through the runner: init at scale
//! 1, a short step with two users, and the balance invariant pgbench's
//! script keeps (every delta lands once in each of accounts, tellers,
//! branches and history). The transactions the users committed are the
//! rows in history, exactly; on PostgreSQL also the server's own counts,
//! read once every session of the step has ended (a backend flushes its
//! statistics when it exits, before it leaves `pg_stat_activity`).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use storbench_db::{connect, Connection, DbError, DbUrl, Stmt};
use storbench_workloads::tpcb::{self, InitOptions, Tpcb};
use storbench_workloads::{runner::run_step, StepSpec};

/// A fresh database on a server, dropped when the test ends.
struct TempDb {
    admin: String,
    name: String,
    url: String,
}

impl TempDb {
    fn new(admin: &str, base: &str, tag: &str) -> TempDb {
        let name = format!("storbench_t_{}_{tag}", std::process::id());
        let mut c = connect(&DbUrl::parse(admin).unwrap()).expect("admin connection");
        c.batch(&format!("DROP DATABASE IF EXISTS {name}")).unwrap();
        c.batch(&format!("CREATE DATABASE {name}")).unwrap();
        TempDb { admin: admin.into(), name: name.clone(), url: format!("{base}/{name}") }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Ok(mut c) = connect(&DbUrl::parse(&self.admin).unwrap()) {
            let _ = c.batch(&format!("DROP DATABASE IF EXISTS {}", self.name));
        }
    }
}

fn sum(c: &mut dyn Connection, sql: &str) -> i64 {
    let r = c.query_one(&Stmt::new(sql), &[]).unwrap();
    if r.is_null(0).unwrap() {
        0
    } else {
        r.float(0).map(|f| f as i64).or_else(|_| r.int(0)).unwrap()
    }
}

/// The server's counters for database `name`, read from another database
/// once no session of `name` is left, so every one has flushed its
/// statistics: (xact_commit, xact_rollback, rows inserted into history).
fn server_counts(name: &str) -> (i64, i64, i64) {
    let mut admin = connect(&DbUrl::parse("postgres://root@127.0.0.1:5432/postgres").unwrap()).unwrap();
    let p = [storbench_db::Value::Text(name.to_string())];
    let left = Stmt::new("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1");
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while admin.query_one(&left, &p).unwrap().int(0).unwrap() > 0 {
        assert!(std::time::Instant::now() < until, "sessions of {name} did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let db = admin
        .query_one(
            &Stmt::new("SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1"),
            &p,
        )
        .unwrap();
    // Table statistics are per database: read them from a session in it,
    // opened after the others ended and closed before anything else runs.
    let mut own = connect(&DbUrl::parse(&format!("postgres://root@127.0.0.1:5432/{name}")).unwrap()).unwrap();
    let ins = own
        .query_one(
            &Stmt::new("SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'pgbench_history'"),
            &[],
        )
        .unwrap()
        .int(0)
        .unwrap();
    (db.int(0).unwrap(), db.int(1).unwrap(), ins)
}

fn exercise(url: &str) {
    exercise_with(url, None)
}

fn exercise_with(url: &str, pg_name: Option<&str>) {
    let url = DbUrl::parse(url).unwrap();
    let connector = || -> Result<Box<dyn Connection>, DbError> { connect(&url) };
    let stats =
        tpcb::init(&connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 2 }, &|_| {}).expect("init");
    assert_eq!(stats.rows, 1 + 10 + 100_000);
    let mut c = connect(&url).unwrap();
    assert_eq!(tpcb::inspect(c.as_mut()).unwrap(), Some(1));
    assert_eq!(sum(c.as_mut(), "SELECT COUNT(*) FROM pgbench_accounts"), 100_000);

    drop(c);
    let before = pg_name.map(server_counts);

    let spec = StepSpec {
        users: 2,
        rampup: Duration::from_millis(500),
        duration: Duration::from_secs(2),
        ..StepSpec::default()
    };
    let stop = AtomicBool::new(false);
    let mut ticks = 0;
    let wl = Tpcb::new(1, 7);
    let res = run_step(&wl, &connector, &spec, &stop, &mut |_| ticks += 1).expect("step");
    assert!(!res.stopped);
    assert!(ticks >= 2, "one tick a second, got {ticks}");
    let r = &res.report;
    let n = r.get("txn.count").unwrap();
    assert!(n > 0.0, "no transactions");
    // TPS is the window's transactions over the window, as pgbench defines it.
    assert_eq!(r.get("tps").unwrap(), n / res.window.as_secs_f64());
    assert!(r.get("lat.p99").unwrap() >= r.get("lat.p50").unwrap());
    assert!(r.samples.iter().any(|s| s.name == "tps" && s.value > 0.0));
    // The step's count takes in the ramp-up and the transactions in flight
    // when the window closed; the window's is part of it.
    let committed = wl.committed();
    assert_eq!(r.get("step.txn.count"), Some(committed as f64));
    assert!(n <= committed as f64, "window {n} within the step's {committed}");

    if let (Some(name), Some((commit0, rollback0, ins0))) = (pg_name, before) {
        let (commit1, rollback1, ins1) = server_counts(name);
        assert_eq!(ins1 - ins0, committed as i64, "history rows the server inserted vs commits returned");
        assert_eq!(rollback1, rollback0, "no transaction rolled back");
        // Beyond the TPC-B transactions the server counts each session's
        // login, its statement preparations and the two probe reads: a
        // few per session, never a TPC-B transaction more or less.
        let extra = commit1 - commit0 - committed as i64;
        assert!((1..=3 * 8).contains(&extra), "{extra} commits beyond the {committed} TPC-B ones");
    }
    let mut c = connect(&url).unwrap();

    // Every committed delta landed once in each table.
    let history = sum(c.as_mut(), "SELECT SUM(delta) FROM pgbench_history");
    assert_eq!(sum(c.as_mut(), "SELECT SUM(abalance) FROM pgbench_accounts"), history);
    assert_eq!(sum(c.as_mut(), "SELECT SUM(tbalance) FROM pgbench_tellers"), history);
    assert_eq!(sum(c.as_mut(), "SELECT SUM(bbalance) FROM pgbench_branches"), history);
    // Every transaction the users committed, and nothing else, is in history.
    assert_eq!(sum(c.as_mut(), "SELECT COUNT(*) FROM pgbench_history"), committed as i64);
}

#[test]
fn tpcb_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    exercise(&format!("sqlite:{}", dir.path().join("b.db").display()));
}

#[test]
fn tpcb_on_postgres() {
    let db = TempDb::new("postgres://root@127.0.0.1:5432/postgres", "postgres://root@127.0.0.1:5432", "tpcb");
    exercise_with(&db.url, Some(&db.name));
}

#[test]
fn tpcb_on_mariadb() {
    let db = TempDb::new("mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306", "tpcb");
    exercise(&db.url);
}

#[test]
fn a_missing_schema_is_none_and_a_rate_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let url = DbUrl::parse(&format!("sqlite:{}", dir.path().join("r.db").display())).unwrap();
    let connector = || connect(&url);
    let mut c = connect(&url).unwrap();
    assert_eq!(tpcb::inspect(c.as_mut()).unwrap(), None);
    tpcb::init(&connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 1 }, &|_| {}).unwrap();
    let spec =
        StepSpec { users: 1, duration: Duration::from_secs(2), rate: Some(50.0), ..StepSpec::default() };
    let res = run_step(&Tpcb::new(1, 1), &connector, &spec, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let tps = res.report.get("tps").unwrap();
    // Poisson arrivals at 50/s over 2 s: 100 expected, sd 10.
    assert!((60.0..140.0).contains(&(tps * 2.0)), "held {tps} tps at a 50/s target");
    assert!(res.report.get("lat.exec.p50").is_some(), "service time kept beside schedule latency");
}

#[test]
fn lost_connections_reconnect_and_the_step_completes() {
    let db = TempDb::new("postgres://root@127.0.0.1:5432/postgres", "postgres://root@127.0.0.1:5432", "lost");
    let url = DbUrl::parse(&db.url).unwrap();
    let connector = || connect(&url);
    tpcb::init(&connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 1 }, &|_| {}).unwrap();
    let spec = StepSpec { users: 2, duration: Duration::from_secs(4), ..StepSpec::default() };
    let name = db.name.clone();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let mut admin = connect(&DbUrl::parse("postgres://root@127.0.0.1:5432/postgres").unwrap()).unwrap();
        admin
            .query(
                &Stmt::new(format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
                )),
                &[],
            )
            .unwrap()
            .len()
    });
    let res =
        run_step(&Tpcb::new(1, 3), &connector, &spec, &AtomicBool::new(false), &mut |_| {}).expect("step");
    assert!(killer.join().unwrap() >= 2, "the users' sessions were terminated");
    let r = &res.report;
    assert!(r.get("reconnects").unwrap() >= 2.0, "every user reconnected: {:?}", r.get("reconnects"));
    assert!(r.get("errors").unwrap() >= 2.0);
    assert!(r.get("reconnect.gap").unwrap() > 0.0);
    assert!(r.get("tps").unwrap() > 0.0);
    assert!((res.window.as_secs_f64() - 4.0).abs() < 0.5, "the step ran its full window");
}

#[test]
fn a_database_that_does_not_come_back_fails_the_step_with_what_was_measured() {
    let db = TempDb::new("postgres://root@127.0.0.1:5432/postgres", "postgres://root@127.0.0.1:5432", "gone");
    let url = DbUrl::parse(&db.url).unwrap();
    let init_connector = || connect(&url);
    tpcb::init(&init_connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 1 }, &|_| {}).unwrap();
    // Connections to the database are refused after the first second, as
    // if the server had gone: users cannot get back in.
    let name = db.name.clone();
    let gone = std::sync::atomic::AtomicBool::new(false);
    let connector = || {
        if gone.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(DbError::new(storbench_db::ErrorKind::Connect, "refused"));
        }
        connect(&url)
    };
    let spec = StepSpec {
        users: 1,
        duration: Duration::from_secs(10),
        reconnect_for: Duration::from_millis(800),
        ..StepSpec::default()
    };
    let res = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(1200));
            gone.store(true, std::sync::atomic::Ordering::Relaxed);
            let mut admin = connect(&DbUrl::parse("postgres://root@127.0.0.1:5432/postgres").unwrap()).unwrap();
            admin
                .batch(&format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
                ))
                .unwrap();
        });
        run_step(&Tpcb::new(1, 3), &connector, &spec, &AtomicBool::new(false), &mut |_| {})
    });
    match res {
        Err(storbench_workloads::StepError::Lost { partial, .. }) => {
            let p = partial.expect("what was measured is kept");
            assert!(p.report.get("txn.count").unwrap() > 0.0);
            assert!(p.window < Duration::from_secs(5));
        }
        other => panic!("expected a lost database, got {other:?}"),
    }
}
