//! A query blocked on a row lock must not hold its user, and so the step,
//! past the window's end or past the stop flag (Ctrl-C): the runner cancels
//! it after its grace, rolls it back and ends the user, and the blocked
//! statement is gone from the server. Real PostgreSQL; each test makes its
//! own table and drops it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use storbench_db::{connect, Connection, DbError, DbUrl, Stmt, Value};
use storbench_workloads::runner::{run_step, Done, StepResult, Worker, Workload, GRACE};
use storbench_workloads::StepSpec;

const URL: &str = "postgres://root@127.0.0.1:5432/test";

fn pg() -> Box<dyn Connection> {
    connect(&DbUrl::parse(URL).unwrap()).expect("PostgreSQL at 127.0.0.1:5432")
}

/// A one-row table, dropped when the test ends.
struct Table(String);

impl Table {
    fn new(tag: &str) -> Table {
        let name = format!("storbench_cancel_{}_{tag}", std::process::id());
        let mut c = pg();
        c.batch(&format!("DROP TABLE IF EXISTS {name}; CREATE TABLE {name} (id int PRIMARY KEY, v int)"))
            .unwrap();
        c.batch(&format!("INSERT INTO {name} VALUES (1, 0)")).unwrap();
        Table(name)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        let _ = pg().batch(&format!("DROP TABLE IF EXISTS {}", self.0));
    }
}

/// Updates the one row, in a transaction.
struct Bump(String);
struct BumpWorker(Stmt);

impl Workload for Bump {
    fn kinds(&self) -> &[&'static str] {
        &["bump"]
    }
    fn worker(&self, _: usize, _: usize) -> Box<dyn Worker> {
        Box::new(BumpWorker(Stmt::new(format!("UPDATE {} SET v = v + 1 WHERE id = 1", self.0))))
    }
}

impl Worker for BumpWorker {
    fn run_one(&mut self, conn: &mut dyn Connection, _: u32) -> Result<Done, DbError> {
        conn.begin()?;
        conn.execute(&self.0, &[])?;
        conn.commit()?;
        Ok(Done::ok(0))
    }
}

/// Active statements on the server that touch `table`, other than ours.
fn active_on(table: &str) -> i64 {
    let sql = "SELECT COUNT(*) FROM pg_stat_activity \
               WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE $1";
    pg().query_one(&Stmt::new(sql), &[Value::Text(format!("UPDATE {table}%"))]).unwrap().int(0).unwrap()
}

/// Runs a step of `duration` with 2 users while another session holds the
/// row locked; `stop_after` raises the stop flag. Returns the result and how
/// long the step took.
fn blocked_step(t: &Table, duration: Duration, stop_after: Option<Duration>) -> (StepResult, Duration) {
    let mut locker = pg();
    locker.begin().unwrap();
    locker.query(&Stmt::new(format!("SELECT v FROM {} WHERE id = 1 FOR UPDATE", t.0)), &[]).unwrap();
    let url = DbUrl::parse(URL).unwrap();
    let connector = || connect(&url);
    let spec = StepSpec { users: 2, duration, ..StepSpec::default() };
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let r = std::thread::scope(|s| {
        if let Some(after) = stop_after {
            let stop = &stop;
            s.spawn(move || {
                std::thread::sleep(after);
                stop.store(true, Ordering::Relaxed);
            });
        }
        run_step(&Bump(t.0.clone()), &connector, &spec, &stop, &mut |_| {})
    })
    .expect("a cancelled call is not an error of the step");
    let took = t0.elapsed();
    // The blocked statements are gone while the lock is still held: they
    // were cancelled, not released.
    assert_eq!(active_on(&t.0), 0, "a blocked UPDATE is still running on the server");
    locker.rollback().unwrap();
    (r, took)
}

#[test]
fn a_call_blocked_on_a_lock_is_cancelled_at_the_windows_end() {
    let t = Table::new("end");
    let (r, took) = blocked_step(&t, Duration::from_secs(2), None);
    assert!(took < Duration::from_secs(6), "the step took {took:?}");
    assert!(took >= Duration::from_secs(2) + GRACE, "cancelled before its grace: {took:?}");
    assert!(!r.stopped);
    assert_eq!(r.window, Duration::from_secs(2));
    assert_eq!(r.report.get("txn.count"), Some(0.0), "no transaction got through the lock");
    assert_eq!(r.report.get("errors"), Some(0.0), "a cancel at the end is not an error");
    assert_eq!(r.report.get("reconnects"), Some(0.0), "a cancel is not a lost connection");
    let v = pg().query_one(&Stmt::new(format!("SELECT v FROM {} WHERE id = 1", t.0)), &[]).unwrap();
    assert_eq!(v.int(0).unwrap(), 0, "the cancelled updates were rolled back");
}

#[test]
fn a_call_blocked_on_a_lock_is_cancelled_on_the_stop_flag() {
    let t = Table::new("stop");
    let (r, took) = blocked_step(&t, Duration::from_secs(60), Some(Duration::from_millis(800)));
    assert!(took < Duration::from_secs(6), "the step took {took:?}");
    assert!(r.stopped);
    assert!(r.window < Duration::from_secs(2), "{:?}", r.window);
    assert_eq!(r.report.get("errors"), Some(0.0));
    assert_eq!(r.report.get("reconnects"), Some(0.0));
}
