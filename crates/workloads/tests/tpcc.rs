//! The TPC-C-like workload on every engine of this machine: SQLite in a
//! temporary directory, PostgreSQL at 127.0.0.1:5432 and MariaDB at
//! 127.0.0.1:3306, each in a database made for the test and dropped after.
//! Build one warehouse with two jobs, check, run users for ~2 s, check
//! again (the districts grew by exactly the New-Orders the users
//! committed), corrupt a district and see the check name it, drop. On
//! PostgreSQL, the designed rollbacks leave no ERROR in the server's log
//! and no rolled-back transaction in its counters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use storbench_db::{connect, Connection, DbError, DbUrl, Stmt};
use storbench_workloads::tpcc::{self, Options, Tpcc};
use storbench_workloads::Workload;

static N: AtomicUsize = AtomicUsize::new(0);

/// A database made for one test, dropped (with its connections) on drop.
struct TempDb {
    admin: String,
    drop_sql: String,
    url: String,
}

impl TempDb {
    fn new(admin: &str, base: &str, force: &str) -> TempDb {
        let name = format!("storbench_t_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let mut c = connect(&DbUrl::parse(admin).unwrap()).unwrap();
        c.batch(&format!("DROP DATABASE IF EXISTS {name}{force}")).unwrap();
        c.batch(&format!("CREATE DATABASE {name}")).unwrap();
        TempDb {
            admin: admin.into(),
            drop_sql: format!("DROP DATABASE IF EXISTS {name}{force}"),
            url: format!("{base}/{name}"),
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Ok(mut c) = connect(&DbUrl::parse(&self.admin).unwrap()) {
            let _ = c.batch(&self.drop_sql);
        }
    }
}

fn open(url: &str) -> Box<dyn Connection> {
    connect(&DbUrl::parse(url).unwrap()).unwrap()
}

/// Asserts every condition holds; returns condition 11's detail.
fn assert_all_pass(c: &mut dyn Connection, when: &str) -> String {
    let res = tpcc::check(c).unwrap();
    assert_eq!(res.iter().map(|r| r.number).collect::<Vec<_>>(), (1..=12).collect::<Vec<_>>());
    for r in &res {
        assert!(r.passed, "{when}: condition {} ({}) failed: {}", r.number, r.name, r.detail);
    }
    res.into_iter().find(|r| r.number == 11).map(|r| r.detail).unwrap_or_default()
}

/// Runs `threads` users directly (no runner) for `secs`; returns counts per kind.
fn drive(url: &str, w: &Tpcc, threads: usize, secs: f64) -> Vec<u64> {
    let counts: Vec<AtomicUsize> = tpcc::KINDS.iter().map(|_| AtomicUsize::new(0)).collect();
    let until = Instant::now() + Duration::from_secs_f64(secs);
    std::thread::scope(|s| {
        for u in 0..threads {
            let counts = &counts;
            s.spawn(move || {
                let mut c = open(url);
                let mut wk = w.worker(u, threads);
                while Instant::now() < until {
                    wk.next();
                    let mut attempt = 0;
                    let done = loop {
                        match wk.run_one(c.as_mut(), attempt) {
                            Ok(d) => break d,
                            Err(e) if e.is_retryable() && attempt < 50 => attempt += 1,
                            Err(e) => panic!("transaction failed: {e}"),
                        }
                    };
                    counts[done.kind].fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    counts.iter().map(|c| c.load(Ordering::Relaxed) as u64).collect()
}

fn scenario(url: &str, expect_procs: bool) {
    let mut c = open(url);
    assert!(tpcc::inspect(c.as_mut()).unwrap().is_none(), "inspect on an empty database");

    let connector = || -> Result<Box<dyn Connection>, DbError> { connect(&DbUrl::parse(url).unwrap()) };
    let last = std::sync::Mutex::new(0u64);
    let stats = tpcc::build(&connector, 1, 2, &|p| {
        let mut l = last.lock().unwrap();
        assert!(p.rows_done >= *l, "progress went backwards");
        *l = p.rows_done;
    })
    .unwrap();
    let want: BTreeMap<&str, u64> = [
        ("item", 100_000),
        ("warehouse", 1),
        ("district", 10),
        ("customer", 30_000),
        ("history", 30_000),
        ("stock", 100_000),
        ("orders", 30_000),
        ("new_order", 9_000),
    ]
    .into();
    for (t, n) in want {
        assert_eq!(stats.per_table.get(t), Some(&n), "rows of {t}");
        let got = c.query_one(&Stmt::new(format!("SELECT COUNT(*) FROM {t}")), &[]).unwrap().int(0).unwrap();
        assert_eq!(got as u64, n, "rows of {t} in the database");
    }
    let ol = stats.per_table["order_line"];
    assert!((250_000..=350_000).contains(&ol), "order lines {ol}");
    assert_eq!(stats.procedures, expect_procs);

    let info = tpcc::inspect(c.as_mut()).unwrap().expect("schema after build");
    assert_eq!(info.warehouses, 1);
    assert!((0..=255).contains(&info.c_load));
    assert_eq!(info.has_procedures, expect_procs);
    let eleven = assert_all_pass(c.as_mut(), "after build");
    assert!(eleven.is_empty(), "every district checked after build: {eleven}");

    // Condition 11 on a fresh database: one undelivered order lost from
    // district (1, 5) (in a transaction, rolled back) must be named.
    c.batch("BEGIN").unwrap();
    c.batch("DELETE FROM new_order WHERE no_w_id = 1 AND no_d_id = 5 AND no_o_id = 2500").unwrap();
    let res = tpcc::check(c.as_mut()).unwrap();
    c.batch("ROLLBACK").unwrap();
    let eleven = res.iter().find(|r| r.number == 11).unwrap();
    assert!(!eleven.passed, "condition 11 should fail");
    assert!(eleven.detail.starts_with("w_id=1 d_id=5: "), "detail: {}", eleven.detail);

    // Run: routines where present, client SQL otherwise (and, where
    // routines exist, client SQL too).
    let wl = Tpcc::new(Options { seed: 42, ..Default::default() }, &info);
    let diff = (wl.keys().c_last - info.c_load).abs();
    assert!((65..=119).contains(&diff) && diff != 96 && diff != 112, "run-time C differs by {diff}");
    let before = wl.probe(c.as_mut()).unwrap();
    let t0 = Instant::now();
    let mut counts = drive(url, &wl, 2, 2.0);
    assert_eq!(wl.finished(), counts, "the workload's own tally is what its workers returned");
    if expect_procs {
        let client = Tpcc::new(Options { seed: 7, client_sql: true, ..Default::default() }, &info);
        let more = drive(url, &client, 2, 1.0);
        assert!(more[0] > 0, "client-SQL new orders ran");
        for (a, b) in counts.iter_mut().zip(more) {
            *a += b;
        }
    }
    // Every transaction counted under one kind: New-Orders rolled back by
    // design are not New-Orders committed.
    let rollbacks = counts[5];
    let window = t0.elapsed();

    // The designed rollback (an unused item id) leaves no trace, by routine
    // and by client SQL.
    let next = Stmt::new("SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 2");
    let orders = Stmt::new("SELECT COUNT(*) FROM orders");
    for client_sql in [false, true] {
        let wl2 = Tpcc::new(Options { client_sql, ..Default::default() }, &info);
        let n0 = c.query_one(&next, &[]).unwrap().int(0).unwrap();
        let o0 = c.query_one(&orders, &[]).unwrap().int(0).unwrap();
        let input = tpcc::Input {
            kind: 0,
            w: 1,
            d: 2,
            c: 7,
            lines: vec![
                tpcc::Line { item: 5, supply: 1, qty: 3 },
                tpcc::Line { item: 100_001, supply: 1, qty: 1 },
            ],
            all_local: true,
            ..Default::default()
        };
        assert!(wl2.run_input(c.as_mut(), &input).unwrap(), "rollback reported (client_sql={client_sql})");
        assert_eq!(c.query_one(&next, &[]).unwrap().int(0).unwrap(), n0, "d_next_o_id kept");
        assert_eq!(c.query_one(&orders, &[]).unwrap().int(0).unwrap(), o0, "no order kept");
        let ok = tpcc::Input { lines: vec![tpcc::Line { item: 5, supply: 1, qty: 3 }], ..input };
        assert!(!wl2.run_input(c.as_mut(), &ok).unwrap());
        assert_eq!(c.query_one(&next, &[]).unwrap().int(0).unwrap(), n0 + 1, "one order more");
    }
    // The same item twice in one order: two order lines, and the stock row
    // counts both (the set-based routine sums them into one update).
    let stock = Stmt::new("SELECT s_order_cnt, s_ytd FROM stock WHERE s_w_id = 1 AND s_i_id = 9");
    let lines = Stmt::new(
        "SELECT COUNT(*) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 2 \
         AND ol_o_id = (SELECT d_next_o_id - 1 FROM district WHERE d_w_id = 1 AND d_id = 2)",
    );
    for client_sql in [false, true] {
        let wl2 = Tpcc::new(Options { client_sql, ..Default::default() }, &info);
        let s0 = c.query_one(&stock, &[]).unwrap();
        let input = tpcc::Input {
            kind: 0,
            w: 1,
            d: 2,
            c: 8,
            lines: vec![tpcc::Line { item: 9, supply: 1, qty: 2 }, tpcc::Line { item: 9, supply: 1, qty: 4 }],
            all_local: true,
            ..Default::default()
        };
        assert!(!wl2.run_input(c.as_mut(), &input).unwrap(), "a repeated item is no rollback");
        let s1 = c.query_one(&stock, &[]).unwrap();
        assert_eq!(s1.int(0).unwrap(), s0.int(0).unwrap() + 2, "s_order_cnt (client_sql={client_sql})");
        assert_eq!(s1.int(1).unwrap(), s0.int(1).unwrap() + 6, "s_ytd (client_sql={client_sql})");
        assert_eq!(c.query_one(&lines, &[]).unwrap().int(0).unwrap(), 2, "order lines");
    }
    // Stock-Level by routine counts what the plain join counts.
    if c.dialect() == storbench_db::Dialect::Postgres {
        let by_routine = Stmt::new("SELECT sb_slev(1, $1, $2)");
        let by_join = Stmt::new(
            "SELECT COUNT(DISTINCT s_i_id) FROM district, order_line, stock WHERE d_w_id = 1 AND d_id = $1 \
             AND ol_w_id = 1 AND ol_d_id = $1 AND ol_o_id < d_next_o_id AND ol_o_id >= d_next_o_id - 20 \
             AND s_w_id = 1 AND s_i_id = ol_i_id AND s_quantity < $2",
        );
        let mut nonzero = 0;
        for d in 1..=10 {
            for t in [10, 15, 20] {
                let p = [storbench_db::Value::Int(d), storbench_db::Value::Int(t)];
                let a = c.query_one(&by_routine, &p).unwrap().int(0).unwrap();
                let b = c.query_one(&by_join, &p).unwrap().int(0).unwrap();
                assert_eq!(a, b, "stock level of district {d} below {t}");
                nonzero += (a > 0) as i32;
            }
        }
        assert!(nonzero > 0, "some district has stock below the thresholds");
    }
    if expect_procs {
        // The routine itself rolls back quietly: the call succeeds and
        // returns a NULL total (no error, no fallback on an error code).
        let call = if c.dialect() == storbench_db::Dialect::Mysql { "CALL" } else { "SELECT" };
        let q = Stmt::new(format!("{call} sb_neword(1, 6, 5, 2, 1, '17,100001', '1,1', '3,1')"));
        let rows = c.query(&q, &[]).expect("a designed rollback is no error");
        assert!(rows[0].is_null(0).unwrap(), "NULL total for a rolled-back order");
        let q = Stmt::new(format!("{call} sb_neword(1, 6, 5, 1, 1, '17', '1', '3')"));
        assert!(!c.query(&q, &[]).unwrap()[0].is_null(0).unwrap(), "a total for a committed one");
    }
    if c.dialect() == storbench_db::Dialect::Postgres {
        rollbacks_leave_no_error(url, &info);
    }
    let after = wl.probe(c.as_mut()).unwrap();
    for (k, n) in tpcc::KINDS.iter().zip(&counts).take(5) {
        assert!(*n > 0, "{k} never ran: {counts:?}");
    }
    // The districts grew by exactly the New-Orders committed: those the
    // users returned as committed, and those committed by hand above (two
    // single-line orders, two with a repeated item, and one by a direct
    // routine call where there are routines).
    let committed = counts[0] + 4 + expect_procs as u64;
    let grown = after["next_o_id"] - before["next_o_id"];
    assert_eq!(grown, committed as f64, "district growth vs New-Orders committed ({rollbacks} rolled back)");
    let figs = wl.probe_figures(&before, &after, window);
    let nopm = figs.iter().find(|f| f.name == "nopm.districts").expect("nopm.districts figure").value;
    assert_eq!(nopm, committed as f64 / (window.as_secs_f64() / 60.0));
    let eleven = assert_all_pass(c.as_mut(), "after the run");
    assert!(eleven.contains("have had deliveries"), "after deliveries: {eleven}");

    // Corrupt district (1, 3): the check must fail naming it.
    c.batch("UPDATE district SET d_next_o_id = d_next_o_id + 5 WHERE d_w_id = 1 AND d_id = 3").unwrap();
    let res = tpcc::check(c.as_mut()).unwrap();
    let two = res.iter().find(|r| r.number == 2).unwrap();
    assert!(!two.passed, "condition 2 should fail");
    assert!(two.detail.contains("w_id=1 d_id=3"), "detail: {}", two.detail);
    assert!(!two.detail.contains("d_id=4"), "only the corrupted district: {}", two.detail);

    tpcc::drop(c.as_mut()).unwrap();
    assert!(tpcc::inspect(c.as_mut()).unwrap().is_none(), "inspect after drop");
}

/// The designed rollback by routine on PostgreSQL: the order is undone,
/// reported as a rollback, and reaches neither the server's log (no ERROR
/// line for this database) nor its rolled-back transaction count.
fn rollbacks_leave_no_error(url: &str, info: &tpcc::SchemaInfo) {
    let dbname = url.rsplit('/').next().unwrap().to_string();
    // The reader sits in another database, so its own queries are not in
    // the counts it reads.
    let mut reader = open("postgres://root@127.0.0.1:5432/postgres");
    let mut r = open(url);
    // A backend flushes its statistics at most once a second, unless told to
    // flush at its next idle moment, which comes before ReadyForQuery: after
    // this call returns, everything `r` did is in pg_stat_database.
    let flush = Stmt::new("SELECT pg_stat_force_next_flush()");
    let counters = Stmt::new("SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1");
    let read = |c: &mut dyn Connection| {
        let row = c.query_one(&counters, &[storbench_db::Value::Text(dbname.clone())]).unwrap();
        (row.int(0).unwrap(), row.int(1).unwrap())
    };
    let log = server_log(reader.as_mut());
    let errors = |log: &Option<std::path::PathBuf>| {
        log.as_ref().map(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains(&format!("@{dbname} ERROR:")))
                .count()
        })
    };
    // The probe: one deliberate error must show in the log, so the count
    // below is known to see this database's errors.
    assert!(r.batch("SELECT 1/0").is_err());
    let errors0 = errors(&log);
    if let Some(n) = errors0 {
        assert!(n >= 1, "the deliberate error was logged in {:?}", log);
    } else {
        eprintln!("no server log file found: checking the server's counters only");
    }
    let wl = Tpcc::new(Options::default(), info);
    let input = tpcc::Input {
        kind: 0,
        w: 1,
        d: 4,
        c: 9,
        lines: vec![
            tpcc::Line { item: 11, supply: 1, qty: 2 },
            tpcc::Line { item: 100_001, supply: 1, qty: 1 },
        ],
        all_local: true,
        ..Default::default()
    };
    // Once first: preparing a statement is a transaction of its own.
    assert!(wl.run_input(r.as_mut(), &input).unwrap(), "rolled back by design");
    r.execute(&flush, &[]).unwrap();
    let (commit0, rollback0) = read(reader.as_mut());
    for _ in 0..5 {
        assert!(wl.run_input(r.as_mut(), &input).unwrap(), "rolled back by design");
    }
    r.execute(&flush, &[]).unwrap();
    let (commit1, rollback1) = read(reader.as_mut());
    assert_eq!(rollback1, rollback0, "no transaction rolled back at the top level");
    // Five New-Order calls and the flush call: each one committed transaction.
    assert_eq!(commit1 - commit0, 6, "each call one transaction");
    assert_eq!(errors(&log), errors0, "no ERROR line for the rollbacks in {log:?}");
}

/// The server's log file: `pg_current_logfile()` with the logging
/// collector, else Debian's `/var/log/postgresql/postgresql-<cluster>.log`
/// (the cluster's stderr); `None` when neither is readable here.
fn server_log(c: &mut dyn Connection) -> Option<std::path::PathBuf> {
    let one = |c: &mut dyn Connection, q: &str| {
        c.query_one(&Stmt::new(q), &[]).ok().and_then(|r| r.text(0).ok()).filter(|s| !s.is_empty())
    };
    let path = match one(c, "SELECT pg_current_logfile()") {
        Some(f) if f.starts_with('/') => std::path::PathBuf::from(f),
        Some(f) => std::path::PathBuf::from(one(c, "SHOW data_directory")?).join(f),
        None => std::path::PathBuf::from(format!(
            "/var/log/postgresql/postgresql-{}.log",
            one(c, "SHOW cluster_name")?.replace('/', "-")
        )),
    };
    std::fs::metadata(&path).ok().map(|_| path)
}

/// TPC-H also has CUSTOMER and ORDERS: a TPC-C drop in a database that
/// holds TPC-H's leaves them, and a build is told they are another
/// schema's; beside a TPC-C table they are TPC-C's and go.
#[test]
fn drop_leaves_tpch_customer_and_orders_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(&format!("sqlite:{}", dir.path().join("h.db").display()));
    c.batch("CREATE TABLE customer (c_custkey INTEGER); CREATE TABLE orders (o_orderkey INTEGER); CREATE TABLE lineitem (l_orderkey INTEGER)").unwrap();
    assert_eq!(tpcc::foreign_table(c.as_mut()).unwrap(), Some("customer"));
    tpcc::drop(c.as_mut()).unwrap();
    let left =
        |c: &mut dyn Connection, t: &str| c.query(&Stmt::new(format!("SELECT 1 FROM {t}")), &[]).is_ok();
    assert!(left(c.as_mut(), "customer") && left(c.as_mut(), "orders"), "TPC-H's tables were dropped");
    c.batch("CREATE TABLE warehouse (w_id INTEGER)").unwrap();
    assert_eq!(tpcc::foreign_table(c.as_mut()).unwrap(), None);
    tpcc::drop(c.as_mut()).unwrap();
    assert!(
        !left(c.as_mut(), "orders") && !left(c.as_mut(), "warehouse"),
        "beside warehouse, orders is TPC-C's"
    );
}

#[test]
fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    scenario(&format!("sqlite:{}", dir.path().join("tpcc.db").display()), false);
}

#[test]
fn postgres() {
    let db = TempDb::new(
        "postgres://root@127.0.0.1:5432/postgres",
        "postgres://root@127.0.0.1:5432",
        " WITH (FORCE)",
    );
    // Looking for a schema that is not there asks the catalogue: no ERROR
    // for the missing table in the server's log.
    let mut c = open(&db.url);
    let log = server_log(c.as_mut());
    let name = db.url.rsplit('/').next().unwrap().to_string();
    let errors = || {
        log.as_ref().map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            text.lines().filter(|l| l.contains(&format!("@{name} ERROR:"))).count()
        })
    };
    let before = errors();
    assert!(tpcc::inspect(c.as_mut()).unwrap().is_none());
    assert_eq!(errors(), before, "inspecting an empty database logged an error");
    drop(c);
    scenario(&db.url, true);
}

#[test]
fn mariadb() {
    let db = TempDb::new("mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306", "");
    scenario(&db.url, true);
}
