//! TPC-B-like on the three real engines through the runner: init at scale
//! 1, a short step with two users, and the balance invariant pgbench's
//! script keeps (every delta lands once in each of accounts, tellers,
//! branches and history). The transactions the users committed are the
//! rows in history, exactly; on PostgreSQL also the server's own counts,
//! read once every session of the step has ended (a backend flushes its
//! statistics when it exits, before it leaves `pg_stat_activity`), with
//! every other commit the driver made counted: one per login, one per
//! probe of the server's counters. And `tps.server` is the server's own
//! count of the window, exactly, once each user's commits are published
//! as they happen (see [`Observed`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use storbench_db::{connect, Connection, DbError, DbUrl, Stmt, Value};
use storbench_metrics::Figure;
use storbench_workloads::runner::{Probe, Worker, Workload};
use storbench_workloads::tpcb::{self, InitOptions, Tpcb};
use storbench_workloads::{runner::run_step, Done, StepSpec};

const PG_ADMIN: &str = "postgres://root@127.0.0.1:5432/postgres";

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

/// Waits until no session of database `name` is left: each has flushed its
/// statistics by then.
fn no_session_left(admin: &mut dyn Connection, name: &str) {
    let p = [Value::Text(name.to_string())];
    let left = Stmt::new("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1");
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while admin.query_one(&left, &p).unwrap().int(0).unwrap() > 0 {
        assert!(std::time::Instant::now() < until, "sessions of {name} did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Commits the server counts in a database for each call of
/// [`server_counts`], all made after it reads the database's counters: its
/// own session's login, the preparation of its one statement (Parse and
/// Sync outside a transaction are a transaction of their own) and the
/// statement.
const SERVER_COUNTS_OWN: i64 = 3;

/// The server's counters for database `name`, read from another database
/// once no session of `name` is left, so every one has flushed its
/// statistics: (xact_commit, xact_rollback, rows inserted into history).
fn server_counts(name: &str) -> (i64, i64, i64) {
    let mut admin = connect(&DbUrl::parse(PG_ADMIN).unwrap()).unwrap();
    no_session_left(admin.as_mut(), name);
    let db = admin
        .query_one(
            &Stmt::new("SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1"),
            &[Value::Text(name.to_string())],
        )
        .unwrap();
    // Table statistics are per database: read them from a session in it,
    // opened after the others ended, and gone (its commits flushed) before
    // this returns.
    let mut own = connect(&DbUrl::parse(&format!("postgres://root@127.0.0.1:5432/{name}")).unwrap()).unwrap();
    let ins = own
        .query_one(
            &Stmt::new("SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'pgbench_history'"),
            &[],
        )
        .unwrap()
        .int(0)
        .unwrap();
    drop(own);
    no_session_left(admin.as_mut(), name);
    (db.int(0).unwrap(), db.int(1).unwrap(), ins)
}

/// [`Tpcb`] as the runner sees it, plus what a test needs to account for
/// every transaction the server counts: how many times the runner probed
/// the server's counters. With `exact`, also what makes the server's count
/// of the window exact:
///
/// - PostgreSQL publishes a busy backend's counts when it goes idle, at
///   most once a second (PGSTAT_MIN_INTERVAL, 15+), and no session can
///   make another publish; so each user waits `gap` (> 1 s) before each
///   transaction, staggered by user so no two publish at once (a publish
///   that finds the entry locked is put off). Each commit is then
///   published before COMMIT returns to the client.
/// - The runner's observer asks for its own counts (its probe read) to be
///   published at once (`pg_stat_force_next_flush()`, one commit more).
///   The request reads pg_database: a backend with no table statistics
///   pending publishes nothing, not even its commit count, until it has
///   some or exits.
/// - The same counters are read from another session, in another
///   database, at each probe: the test's own view of the window's edges.
struct Observed<'a> {
    inner: &'a Tpcb,
    probes: AtomicU64,
    exact: Option<Exact>,
}

struct Exact {
    gap: Duration,
    stagger: Duration,
    admin: Mutex<Box<dyn Connection>>,
    name: String,
    /// (xact_commit, xact_rollback) at each probe.
    reads: Mutex<Vec<(i64, i64)>>,
}

impl Workload for Observed<'_> {
    fn kinds(&self) -> &[&'static str] {
        self.inner.kinds()
    }

    fn worker(&self, user: usize, users: usize) -> Box<dyn Worker> {
        let inner = self.inner.worker(user, users);
        match &self.exact {
            None => inner,
            Some(x) => Box::new(Spaced { inner, gap: x.gap, first: x.gap + x.stagger * user as u32, n: 0 }),
        }
    }

    fn probe(&self, conn: &mut dyn Connection) -> Result<Probe, DbError> {
        let p = self.inner.probe(conn)?;
        self.probes.fetch_add(1, Ordering::Relaxed);
        if let Some(x) = &self.exact {
            conn.batch(
                "SELECT pg_stat_force_next_flush() FROM pg_database WHERE datname = current_database()",
            )?;
            let r = x.admin.lock().unwrap().query_one(
                &Stmt::new("SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1"),
                &[Value::Text(x.name.clone())],
            )?;
            x.reads.lock().unwrap().push((r.int(0)?, r.int(1)?));
        }
        Ok(p)
    }

    fn probe_figures(&self, before: &Probe, after: &Probe, window: Duration) -> Vec<Figure> {
        self.inner.probe_figures(before, after, window)
    }
}

/// A TPC-B user that waits before each transaction (keying time).
struct Spaced {
    inner: Box<dyn Worker>,
    gap: Duration,
    first: Duration,
    n: u64,
}

impl Worker for Spaced {
    fn next(&mut self) -> Duration {
        self.inner.next();
        self.n += 1;
        if self.n == 1 {
            self.first
        } else {
            self.gap
        }
    }

    fn run_one(&mut self, conn: &mut dyn Connection, attempt: u32) -> Result<Done, DbError> {
        self.inner.run_one(conn, attempt)
    }
}

fn exercise(url: &str) {
    exercise_with(url, None)
}

fn exercise_with(url: &str, pg_name: Option<&str>) {
    let url = DbUrl::parse(url).unwrap();
    let connects = AtomicU64::new(0);
    let connector = || -> Result<Box<dyn Connection>, DbError> {
        connects.fetch_add(1, Ordering::Relaxed);
        connect(&url)
    };
    let stats =
        tpcb::init(&connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 2 }, &|_| {}).expect("init");
    assert_eq!(stats.rows, 1 + 10 + 100_000);
    let mut c = connect(&url).unwrap();
    assert_eq!(tpcb::inspect(c.as_mut()).unwrap(), Some(1));
    assert_eq!(sum(c.as_mut(), "SELECT COUNT(*) FROM pgbench_accounts"), 100_000);

    drop(c);
    let before = pg_name.map(server_counts);
    let connects_before = connects.load(Ordering::Relaxed);

    let spec = StepSpec {
        users: 2,
        rampup: Duration::from_millis(500),
        duration: Duration::from_secs(2),
        ..StepSpec::default()
    };
    let stop = AtomicBool::new(false);
    let mut ticks = 0;
    let wl = Tpcb::new(1, 7);
    let observed = Observed { inner: &wl, probes: AtomicU64::new(0), exact: None };
    let res = run_step(&observed, &connector, &spec, &stop, &mut |_| ticks += 1).expect("step");
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
    // Group commit from the server's own counts: two users on one branch
    // row commit about one at a time, each commit flushing the log.
    // PostgreSQL counts its WAL flushes; MariaDB before 10.8 and MySQL
    // count InnoDB's log fsyncs, MariaDB 10.8 and later no longer do.
    match r.get("log.commits_per_flush") {
        None => assert!(!url.redacted().starts_with("postgres"), "PostgreSQL counts its WAL flushes"),
        Some(c) => assert!((0.3..3.0).contains(&c), "{c} commits per flush"),
    }

    if let (Some(name), Some((commit0, rollback0, ins0))) = (pg_name, before) {
        let (commit1, rollback1, ins1) = server_counts(name);
        assert_eq!(ins1 - ins0, committed as i64, "history rows the server inserted vs commits returned");
        // A transaction the server rolled back is one the driver counted
        // (a retry, an error, or a call cancelled at the window's end).
        let failed = r.get("retries").unwrap() + r.get("errors").unwrap() + r.get("cancelled").unwrap();
        assert_eq!((rollback1 - rollback0) as f64, failed, "transactions rolled back");
        // Beyond the TPC-B transactions the server counts the driver's own
        // commits, each counted here: a login per connection (the observer
        // and each user; a reconnect would be one more), a read per probe
        // of the counters, and the test's own session in server_counts.
        // Statements are prepared inside the transaction, so they add none.
        let logins = (connects.load(Ordering::Relaxed) - connects_before) as i64;
        let probes = observed.probes.load(Ordering::Relaxed) as i64;
        assert_eq!((logins, probes), (3, 2), "the observer and two users; a probe at each edge");
        assert_eq!(
            commit1 - commit0,
            committed as i64 + logins + probes + SERVER_COUNTS_OWN,
            "commits the server counted vs {committed} TPC-B + {logins} logins + {probes} probes"
        );
        // The window's server count holds no more than the step's commits,
        // the observer's own first read and the users' logins (were one
        // still unpublished at the start); how many fewer depends on when
        // each user last published its counts (see Observed).
        let server = r.get("tps.server").unwrap() * res.window.as_secs_f64();
        assert!(
            server.round() <= (committed + 1 + 2) as f64,
            "{server} in the window, {committed} in the step"
        );
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
fn tps_server_is_the_servers_own_count_of_the_window_exactly() {
    let db = TempDb::new(PG_ADMIN, "postgres://root@127.0.0.1:5432", "tpsx");
    let url = DbUrl::parse(&db.url).unwrap();
    let connects = AtomicU64::new(0);
    // One login at a time: a login publishes its commit on its way in, and
    // a publish that finds another holding the database's entry is put off.
    let one_at_a_time = Mutex::new(());
    let connector = || {
        let _turn = one_at_a_time.lock().unwrap();
        connects.fetch_add(1, Ordering::Relaxed);
        connect(&url)
    };
    tpcb::init(&connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 1 }, &|_| {}).unwrap();
    let (commit0, rollback0, _) = server_counts(&db.name);
    let connects_before = connects.load(Ordering::Relaxed);
    let wl = Tpcb::new(1, 11);
    let observed = Observed {
        inner: &wl,
        probes: AtomicU64::new(0),
        exact: Some(Exact {
            gap: Duration::from_millis(1500),
            stagger: Duration::from_millis(300),
            admin: Mutex::new(connect(&DbUrl::parse(PG_ADMIN).unwrap()).unwrap()),
            name: db.name.clone(),
            reads: Mutex::default(),
        }),
    };
    // User 0 commits at 1.5 s and 3.0 s, user 1 at 1.8 s and 3.3 s; their
    // third transactions would start after the window's 4 s. Every edge
    // is half a second or more from a commit.
    let spec = StepSpec { users: 2, duration: Duration::from_secs(4), ..StepSpec::default() };
    let res = run_step(&observed, &connector, &spec, &AtomicBool::new(false), &mut |_| {}).expect("step");
    let r = &res.report;
    let window = res.window.as_secs_f64();
    let n = r.get("txn.count").unwrap();
    assert_eq!(n, 4.0, "two transactions per user in the window");
    assert_eq!(r.get("step.txn.count"), Some(4.0), "and none outside it");

    let x = observed.exact.as_ref().unwrap();
    let reads = x.reads.lock().unwrap().clone();
    assert_eq!(reads.len(), 2, "a read at each edge of the window");
    let (commits, rollbacks) = (reads[1].0 - reads[0].0, reads[1].1 - reads[0].1);
    assert_eq!(rollbacks, 0);
    // tps.server is the server's count of the window over the window:
    // what pg_stat_database says, read from another session at the edges.
    let server = r.get("tps.server").unwrap() * window;
    assert!((server - server.round()).abs() < 1e-9, "{server}");
    assert_eq!(server.round() as i64, commits, "tps.server x window vs pg_stat_database's delta");
    // It counts the users' commits (tps.client's count) and the observer's
    // two at the window's start: its probe read and its flush request.
    let client = r.get("tps").unwrap() * window;
    assert!((client - n).abs() < 1e-9, "tps.client x window = txn.count");
    assert_eq!(server.round() - 2.0, client.round(), "tps.server vs tps.client");

    // Over the step, after every session ended: the users' commits, a login
    // per connection, and per probe its read and its flush request.
    let (commit1, rollback1, _) = server_counts(&db.name);
    let logins = (connects.load(Ordering::Relaxed) - connects_before) as i64;
    let probes = observed.probes.load(Ordering::Relaxed) as i64;
    assert_eq!((logins, probes), (3, 2));
    assert_eq!(rollback1, rollback0);
    assert_eq!(commit1 - commit0, 4 + logins + 2 * probes + SERVER_COUNTS_OWN);
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
    // The observer's session was terminated too (issue 24: the server's
    // figures then came back "-" with no word): it reconnects and probes.
    assert_eq!(res.probe_error, None);
    assert!(r.get("tps.server").is_some_and(|t| t > 0.0), "tps.server after the probe's reconnect");
    // A 4 s window on PostgreSQL is flagged as too short for its counts.
    assert_eq!(r.get("flag.server_window").map(f64::round), Some(4.0));
}

/// TPC-B whose probe at the window's end fails however often it is tried.
struct ProbeFailsAtEnd<'a> {
    inner: &'a Tpcb,
    probes: AtomicU64,
}

impl Workload for ProbeFailsAtEnd<'_> {
    fn kinds(&self) -> &[&'static str] {
        self.inner.kinds()
    }
    fn worker(&self, user: usize, users: usize) -> Box<dyn Worker> {
        self.inner.worker(user, users)
    }
    fn probe(&self, conn: &mut dyn Connection) -> Result<Probe, DbError> {
        if self.probes.fetch_add(1, Ordering::Relaxed) == 0 {
            return self.inner.probe(conn);
        }
        conn.query_one(&Stmt::new("SELECT no_such_column FROM pgbench_branches"), &[])?;
        unreachable!("the query fails")
    }
    fn probe_figures(&self, before: &Probe, after: &Probe, window: Duration) -> Vec<Figure> {
        self.inner.probe_figures(before, after, window)
    }
}

/// A probe that fails on a fresh connection too leaves the server's
/// figures out and says why in the step's result (issue 24).
#[test]
fn a_probe_that_fails_twice_is_the_steps_probe_error() {
    let db = TempDb::new(PG_ADMIN, "postgres://root@127.0.0.1:5432", "probe");
    let url = DbUrl::parse(&db.url).unwrap();
    let connector = || connect(&url);
    tpcb::init(&connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 1 }, &|_| {}).unwrap();
    let wl = Tpcb::new(1, 4);
    let w = ProbeFailsAtEnd { inner: &wl, probes: AtomicU64::new(0) };
    let spec = StepSpec { users: 2, duration: Duration::from_secs(2), ..StepSpec::default() };
    let res = run_step(&w, &connector, &spec, &AtomicBool::new(false), &mut |_| {}).expect("step");
    assert_eq!(
        w.probes.load(Ordering::Relaxed),
        3,
        "the start, the end, and the end again on a new connection"
    );
    let why = res.probe_error.expect("probe_error");
    assert!(why.contains("no_such_column"), "{why}");
    assert_eq!(res.report.get("tps.server"), None);
    assert!(res.report.get("tps").unwrap() > 0.0);
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

/// Regression (issue 24): TPC-B under load wrote `WARNING: there is no
/// transaction in progress` (25P01) into the server's log. The path: a
/// call still blocked when the step ends is cancelled by the watchdog; the
/// worker rolls its transaction back, and the runner then sent a second
/// ROLLBACK on a connection with no transaction open. Here every client
/// blocks on the one branch row (held by another session) until the
/// watchdog cancels it; the server's warnings reach us as notices.
#[test]
fn clients_cancelled_at_a_steps_end_send_no_rollback_outside_a_transaction() {
    let db = TempDb::new(PG_ADMIN, "postgres://root@127.0.0.1:5432", "notxn");
    let url = DbUrl::parse(&db.url).unwrap();
    let connector = || connect(&url);
    tpcb::init(&connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 1 }, &|_| {}).unwrap();
    let warnings = std::sync::Arc::new(Mutex::new(Vec::new()));
    let seen = warnings.clone();
    storbench_db::set_notice_handler(move |n| {
        if n.code == "25P01" {
            seen.lock().unwrap().push(n.message.clone());
        }
    });
    let mut blocker = connect(&url).unwrap();
    blocker.begin().unwrap();
    blocker.batch("UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = 1").unwrap();
    let spec = StepSpec { users: 8, duration: Duration::from_secs(1), ..StepSpec::default() };
    let res = run_step(&Tpcb::new(1, 5), &connector, &spec, &AtomicBool::new(false), &mut |_| {});
    blocker.rollback().unwrap();
    let res = res.expect("step");
    assert_eq!(res.report.get("txn.count"), Some(0.0), "every client was blocked on the branch row");
    // A free run with many clients afterwards: no warning either.
    let spec = StepSpec { users: 8, duration: Duration::from_secs(2), ..StepSpec::default() };
    let res = run_step(&Tpcb::new(1, 6), &connector, &spec, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert!(res.report.get("txn.count").unwrap() > 0.0);
    assert_eq!(
        *warnings.lock().unwrap(),
        Vec::<String>::new(),
        "ROLLBACK or COMMIT with no transaction open"
    );
}

/// An init that fails at the keys and cannot drop what it loaded (an event
/// trigger refuses ALTER TABLE, and DROP TABLE once accounts hold rows, as a
/// full disk might) leaves no branch row: `inspect` reads no TPC-B tables, so
/// `run` refuses the database rather than running on one without keys.
#[test]
fn an_init_that_fails_at_the_keys_and_cannot_drop_leaves_nothing_run_accepts() {
    let db = TempDb::new(PG_ADMIN, "postgres://root@127.0.0.1:5432", "tpcbkeys");
    let url = DbUrl::parse(&db.url).unwrap();
    let mut c = connect(&url).unwrap();
    c.batch(
        "CREATE FUNCTION refuse() RETURNS event_trigger LANGUAGE plpgsql AS $$ \
         DECLARE n bigint := 0; \
         BEGIN \
           IF tg_tag = 'ALTER TABLE' THEN RAISE EXCEPTION 'refused: %', tg_tag; END IF; \
           IF to_regclass('pgbench_accounts') IS NOT NULL THEN \
             EXECUTE 'SELECT COUNT(*) FROM pgbench_accounts' INTO n; \
           END IF; \
           IF n > 0 THEN RAISE EXCEPTION 'refused: %', tg_tag; END IF; \
         END $$; \
         CREATE EVENT TRIGGER refuse_keys ON ddl_command_start WHEN TAG IN ('ALTER TABLE', 'DROP TABLE') \
         EXECUTE FUNCTION refuse()",
    )
    .unwrap();
    let connector = || connect(&url);
    let err = tpcb::init(&connector, &InitOptions { scale: 1, fillfactor: 100, jobs: 1 }, &|_| {})
        .expect_err("ADD PRIMARY KEY is refused");
    assert!(err.to_string().contains("refused"), "{err}");
    assert_eq!(
        sum(c.as_mut(), "SELECT COUNT(*) FROM pgbench_accounts"),
        tpcb::ACCOUNTS,
        "the drop was refused"
    );
    assert_eq!(tpcb::inspect(c.as_mut()).unwrap(), None, "a database without keys reads as no TPC-B tables");
    c.batch("DROP EVENT TRIGGER refuse_keys").unwrap();
}
