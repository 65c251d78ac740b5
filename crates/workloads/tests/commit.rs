//! A worker's failed COMMIT leaves no transaction open (the runner's
//! contract, `Worker::run_one`): `runner::commit` rolls back where the
//! engine keeps the transaction open (SQLite, here on a deferred foreign
//! key that fails at COMMIT, as SQLITE_BUSY would), and sends no ROLLBACK
//! where the engine has ended it (PostgreSQL, where one would draw warning
//! 25P01). Real SQLite and PostgreSQL; each test drops what it made.

use std::sync::{Arc, Mutex};

use storbench_db::{connect, Connection, DbUrl, Stmt};
use storbench_workloads::runner;

const DDL: &str = "CREATE TABLE {p} (id INTEGER PRIMARY KEY); \
     CREATE TABLE {c} (id INTEGER, pid INTEGER REFERENCES {p} (id) DEFERRABLE INITIALLY DEFERRED)";

fn count(c: &mut dyn Connection, table: &str) -> i64 {
    c.query_one(&Stmt::new(format!("SELECT COUNT(*) FROM {table}")), &[]).unwrap().int(0).unwrap()
}

#[test]
fn a_failed_commit_on_sqlite_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let url = DbUrl::parse(&format!("sqlite:{}", dir.path().join("c.db").display())).unwrap();
    let mut c = connect(&url).unwrap();
    c.batch("PRAGMA foreign_keys=ON").unwrap();
    c.batch(&DDL.replace("{p}", "parent").replace("{c}", "child")).unwrap();
    // A plain COMMIT that fails keeps SQLite's transaction open.
    c.begin().unwrap();
    c.batch("INSERT INTO child VALUES (1, 99)").unwrap();
    assert!(c.commit().is_err(), "the deferred key fails at COMMIT");
    assert!(c.begin().is_err(), "the transaction is still open");
    c.rollback().unwrap();
    // runner::commit ends it.
    c.begin().unwrap();
    c.batch("INSERT INTO child VALUES (1, 99)").unwrap();
    assert!(runner::commit(c.as_mut()).is_err(), "the COMMIT's error is returned");
    c.begin().expect("no transaction left open");
    c.rollback().unwrap();
    assert_eq!(count(c.as_mut(), "child"), 0);
}

#[test]
fn a_failed_commit_on_postgres_sends_no_rollback() {
    let url = DbUrl::parse("postgres://root@127.0.0.1:5432/test").unwrap();
    let mut c = connect(&url).expect("PostgreSQL at 127.0.0.1:5432");
    let (p, ch) = (format!("commit_p_{}", std::process::id()), format!("commit_c_{}", std::process::id()));
    c.batch(&format!("DROP TABLE IF EXISTS {ch}, {p}")).unwrap();
    c.batch(&DDL.replace("{p}", &p).replace("{c}", &ch)).unwrap();
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let seen = warnings.clone();
    storbench_db::set_notice_handler(move |n| {
        if n.code == "25P01" || n.code == "25001" {
            seen.lock().unwrap().push(format!("{}: {}", n.code, n.message));
        }
    });
    c.begin().unwrap();
    c.batch(&format!("INSERT INTO {ch} VALUES (1, 99)")).unwrap();
    let failed = runner::commit(c.as_mut());
    c.begin().unwrap();
    c.rollback().unwrap();
    let n = count(c.as_mut(), &ch);
    c.batch(&format!("DROP TABLE {ch}, {p}")).unwrap();
    assert!(failed.is_err(), "the deferred key fails at COMMIT");
    assert_eq!(n, 0);
    assert_eq!(*warnings.lock().unwrap(), Vec::<String>::new(), "a ROLLBACK or BEGIN out of place");
}
