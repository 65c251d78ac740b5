//! The connection API against the real engines on this machine: SQLite in a
//! temporary directory, PostgreSQL at 127.0.0.1:5432 (database `test`) and
//! MariaDB at 127.0.0.1:3306 (database `test`). Each test makes its own
//! uniquely named table and drops it.

use storbench_db::{connect, Connection, DbUrl, ErrorKind, Stmt, Value};

const PG: &str = "postgres://postgres@127.0.0.1:5432/test";
const MY: &str = "mysql://root@127.0.0.1:3306/test";

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos() % 1_000_000
    )
}

/// The same conversation on every engine: DDL, bulk load, prepared updates
/// with out-of-order placeholders, transactions, queries, counters.
fn exercise(c: &mut dyn Connection, numeric_type: &str) {
    let t = unique("sb_db");
    c.batch(&format!("CREATE TABLE {t} (id INTEGER PRIMARY KEY, name VARCHAR(20), amount {numeric_type})"))
        .unwrap();
    // Enough rows that PostgreSQL's COPY text (~1.6 MB) spans several
    // CopyData messages.
    const N: i64 = 60_000;
    let rows: Vec<Vec<Value>> =
        (1..=N).map(|i| vec![i.into(), format!("n{i}\t'x'").into(), (i as f64 / 4.0).into()]).collect();
    c.load(&t, &["id", "name", "amount"], &rows).unwrap();
    let count = Stmt::new(format!("SELECT COUNT(*), SUM(amount) FROM {t}"));
    let r = c.query_one(&count, &[]).unwrap();
    assert_eq!(r.int(0).unwrap(), N);
    assert!((r.float(1).unwrap() - (N * (N + 1) / 2) as f64 / 4.0).abs() < 1e-6);
    // A result of many reads' worth of rows comes back whole and in order.
    let all = c.query(&Stmt::new(format!("SELECT id, name FROM {t} ORDER BY id")), &[]).unwrap();
    assert_eq!(all.len() as i64, N);
    assert_eq!(all[N as usize - 1].int(0).unwrap(), N);
    assert_eq!(all[N as usize - 1].text(1).unwrap(), format!("n{N}\t'x'"));
    // A load the server refuses is an error, and the connection goes on.
    assert!(c.load(&format!("{t}_absent"), &["id"], &[vec![1.into()]]).is_err());
    assert_eq!(c.query_one(&count, &[]).unwrap().int(0).unwrap(), N);

    let before = c.counters().unwrap();
    let upd = Stmt::new(format!("UPDATE {t} SET amount = amount + $2 WHERE id = $1"));
    c.begin().unwrap();
    assert_eq!(c.execute(&upd, &[7.into(), 1.5.into()]).unwrap(), 1);
    c.commit().unwrap();
    c.begin().unwrap();
    c.execute(&upd, &[8.into(), 100.0.into()]).unwrap();
    c.rollback().unwrap();
    // A transaction guard dropped uncommitted (an error path's early
    // return) rolls back: row 8 keeps its amount below.
    {
        let mut tx = c.transaction().unwrap();
        assert_eq!(tx.execute(&upd, &[8.into(), 100.0.into()]).unwrap(), 1);
    }
    let get = Stmt::new(format!("SELECT name, amount FROM {t} WHERE id = $1"));
    let r = c.query_one(&get, &[7.into()]).unwrap();
    assert_eq!(r.text(0).unwrap(), "n7\t'x'");
    assert!((r.float(1).unwrap() - 3.25).abs() < 1e-9);
    assert!((c.query_one(&get, &[8.into()]).unwrap().float(1).unwrap() - 2.0).abs() < 1e-9);
    assert!(c.query_opt(&get, &[99_999.into()]).unwrap().is_none());
    if let Some(b) = before {
        // PostgreSQL flushes a backend's statistics when it goes idle, at
        // most once a second (up to 10 s later when idle): poll.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let a = c.counters().unwrap().unwrap();
            if a.xact_all >= b.xact_all + 2 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "counters did not grow: {b:?} -> {a:?}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    let info = c.server_info().unwrap();
    assert!(!info.version.is_empty());

    let missing = c.query(&Stmt::new(format!("SELECT * FROM {t}_absent")), &[]).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::MissingObject, "{missing}");
    c.batch(&format!("DROP TABLE {t}")).unwrap();
}

#[test]
fn sqlite_engine() {
    let dir = tempfile::tempdir().unwrap();
    let url = DbUrl::parse(&format!("sqlite:{}", dir.path().join("e.db").display())).unwrap();
    let mut c = connect(&url).unwrap();
    exercise(c.as_mut(), "REAL");
}

#[test]
fn postgres_engine() {
    let mut c = connect(&DbUrl::parse(PG).unwrap()).unwrap();
    exercise(c.as_mut(), "NUMERIC(12,2)");
    // A statement that cannot be encoded (a NUL byte) fails on our side,
    // sends nothing half-written, and leaves the connection as it was.
    let err = c.query(&Stmt::new("SELECT 1\0"), &[]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other, "{err}");
    assert!(!c.is_closed());
    assert_eq!(c.query_one(&Stmt::new("SELECT 2::int"), &[]).unwrap().int(0).unwrap(), 2);
    // A parameter that cannot be sent as its type (an integer too big for
    // it, a fraction for an integer) is refused before anything is sent.
    for v in [Value::Int(70_000), Value::Float(1.5)] {
        let err = c.query(&Stmt::new("SELECT $1::smallint"), std::slice::from_ref(&v)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Other, "{v:?}: {err}");
        assert!(err.to_string().contains("cannot send"), "{err}");
        assert!(!c.is_closed());
    }
    let r = c.query_one(&Stmt::new("SELECT $1::smallint"), &[Value::Int(-32_768)]).unwrap();
    assert_eq!(r.int(0).unwrap(), -32_768);
    // A COPY FROM STDIN through a plain batch is refused, not hung on.
    c.batch("CREATE TEMP TABLE sb_copy_t (x int)").unwrap();
    assert!(c.batch("COPY sb_copy_t FROM STDIN").is_err());
    assert_eq!(c.query_one(&Stmt::new("SELECT 3::int"), &[]).unwrap().int(0).unwrap(), 3);
}

#[test]
fn mysql_engine() {
    let mut c = connect(&DbUrl::parse(MY).unwrap()).unwrap();
    exercise(c.as_mut(), "DECIMAL(12,2)");
}

#[test]
fn a_silent_server_is_a_connect_error() {
    // A listener that accepts and never answers: the connect timeout ends
    // the login, whether it waits for the answer to the TLS request
    // (sslmode=prefer, the default) or to the startup message.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    for (mode, waits_for) in [("prefer", "TLS request"), ("disable", "login")] {
        let t0 = std::time::Instant::now();
        let err = connect(
            &DbUrl::parse(&format!(
                "postgres://bob:hunter2@127.0.0.1:{port}/x?connect_timeout=1&sslmode={mode}"
            ))
            .unwrap(),
        )
        .err()
        .expect("a silent server refused");
        assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
        assert!(err.to_string().contains(&format!("did not answer the {waits_for} in time")), "{err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(t0.elapsed() < std::time::Duration::from_secs(5), "took {:?}", t0.elapsed());
    }
    // MariaDB's login is bounded too (10 s): mysql_async alone waits for
    // the server's greeting forever.
    let t0 = std::time::Instant::now();
    let err = connect(&DbUrl::parse(&format!("mysql://bob:hunter2@127.0.0.1:{port}/x")).unwrap())
        .err()
        .expect("a silent server refused");
    assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
    assert!(err.to_string().contains("no answer within 10 s"), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(20), "took {:?}", t0.elapsed());
    drop(l);
}

#[test]
fn unreachable_server_is_a_connect_error_with_the_password_redacted() {
    for url in ["postgres://bob:hunter2@127.0.0.1:1/test", "mysql://bob:hunter2@127.0.0.1:1/test"] {
        let e = connect(&DbUrl::parse(url).unwrap()).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Connect, "{e}");
        let msg = e.to_string();
        assert!(!msg.contains("hunter2"), "{msg}");
        assert!(msg.contains("bob:***@127.0.0.1:1"), "{msg}");
    }
}

#[test]
fn wrong_mariadb_password_is_an_auth_error_and_redacted() {
    let e = connect(&DbUrl::parse("mysql://root:wrongpw@127.0.0.1:3306/test").unwrap()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
    assert!(!e.to_string().contains("wrongpw"));
}

#[test]
fn missing_database_is_reported_as_missing() {
    let e =
        connect(&DbUrl::parse("postgres://postgres@127.0.0.1:5432/sb_no_such_db").unwrap()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::MissingObject, "{e}");
    let e = connect(&DbUrl::parse("mysql://root@127.0.0.1:3306/sb_no_such_db").unwrap()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::MissingObject, "{e}");
}

#[test]
fn a_mariadb_statement_blocked_on_a_lock_is_cancelled_from_another_thread() {
    let t = unique("sb_cancel");
    let mut holder = connect(&DbUrl::parse(MY).unwrap()).unwrap();
    holder.batch(&format!("CREATE TABLE {t} (x INT); INSERT INTO {t} VALUES (1)")).unwrap();
    let mut victim = connect(&DbUrl::parse(MY).unwrap()).unwrap();
    let id = victim.query_one(&Stmt::new("SELECT CONNECTION_ID()"), &[]).unwrap().int(0).unwrap();
    let canceller = victim.canceller().expect("a MariaDB connection can be cancelled");
    holder.batch(&format!("LOCK TABLES {t} WRITE")).unwrap();
    let sent = std::thread::spawn(move || {
        let mut w = connect(&DbUrl::parse(MY).unwrap()).unwrap();
        let waiting = Stmt::new(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = $1 AND STATE LIKE 'Waiting for%lock'",
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while w.query_one(&waiting, &[Value::Int(id)]).unwrap().int(0).unwrap() == 0 {
            assert!(std::time::Instant::now() < deadline, "the victim never waited on the lock");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        canceller.cancel().expect("KILL QUERY sent");
        std::time::Instant::now()
    });
    let err = victim.query(&Stmt::new(format!("SELECT COUNT(*) FROM {t}")), &[]).unwrap_err();
    let returned = std::time::Instant::now();
    let sent_at = sent.join().unwrap();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(err.code(), Some("1317"), "{err}");
    assert!(returned.duration_since(sent_at) < std::time::Duration::from_secs(2), "slow cancel");
    assert!(!victim.is_closed());
    assert_eq!(victim.query_one(&Stmt::new("SELECT 7"), &[]).unwrap().int(0).unwrap(), 7);
    holder.batch("UNLOCK TABLES").unwrap();
    assert_eq!(
        victim.query_one(&Stmt::new(format!("SELECT COUNT(*) FROM {t}")), &[]).unwrap().int(0).unwrap(),
        1
    );
    holder.batch(&format!("DROP TABLE {t}")).unwrap();
}
