//! The TPC-C-like workload on every engine of this machine: SQLite in a
//! temporary directory, PostgreSQL at 127.0.0.1:5432 and MariaDB at
//! 127.0.0.1:3306, each in a database made for the test and dropped after.
//! Build one warehouse with two jobs, check, run users for ~2 s, check
//! again, corrupt a district and see the check name it, drop.

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
    let counts: Vec<AtomicUsize> = (0..5).map(|_| AtomicUsize::new(0)).collect();
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
    if expect_procs {
        let client = Tpcc::new(Options { seed: 7, client_sql: true, ..Default::default() }, &info);
        let more = drive(url, &client, 2, 1.0);
        assert!(more[0] > 0, "client-SQL new orders ran");
        for (a, b) in counts.iter_mut().zip(more) {
            *a += b;
        }
    }
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
    let after = wl.probe(c.as_mut()).unwrap();
    for (k, n) in tpcc::KINDS.iter().zip(&counts) {
        assert!(*n > 0, "{k} never ran: {counts:?}");
    }
    let figs = wl.probe_figures(&before, &after, window);
    let nopm = figs.iter().find(|f| f.name == "nopm").expect("nopm figure").value;
    assert!(nopm > 0.0, "nopm {nopm}");
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
    scenario(&db.url, true);
}

#[test]
fn mariadb() {
    let db = TempDb::new("mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306", "");
    scenario(&db.url, true);
}
