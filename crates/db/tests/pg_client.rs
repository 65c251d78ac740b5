//! The blocking PostgreSQL client against the machine's server
//! (127.0.0.1:5432, `ssl = on` with Debian's self-signed "snakeoil"
//! certificate for `localhost`): every sslmode as the server itself sees it
//! (`pg_stat_ssl`), certificate checks that pass and fail for the right
//! reason, a statement blocked on a lock cancelled from another thread,
//! answers the client did not expect read past, notices handed to the
//! handler, and NUMERIC's special values.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use storbench_db::{connect, set_notice_handler, Connection, DbUrl, ErrorKind, Notice, Stmt, Value};

const HOST: &str = "postgres://root@127.0.0.1:5432/test";

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos() % 1_000_000_000
    )
}

fn open(url: &str) -> Box<dyn Connection> {
    connect(&DbUrl::parse(url).unwrap()).unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn try_open(url: &str) -> Result<Box<dyn Connection>, storbench_db::DbError> {
    connect(&DbUrl::parse(url).unwrap())
}

/// `pg_stat_ssl.ssl` of the connection's own session, as the server sees it.
fn server_says_ssl(c: &mut dyn Connection) -> bool {
    let r = c.query_one(&Stmt::new("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"), &[]).unwrap();
    r.int(0).unwrap() == 1
}

/// The server's own certificate file, readable by this (root) process.
fn server_cert(c: &mut dyn Connection) -> String {
    c.query_one(&Stmt::new("SHOW ssl_cert_file"), &[]).unwrap().text(0).unwrap()
}

#[test]
fn every_sslmode_as_the_server_sees_it() {
    // disable: in the clear, and the connection says so.
    let mut c = open(&format!("{HOST}?sslmode=disable"));
    assert!(!server_says_ssl(c.as_mut()));
    assert_eq!(c.tls(), None);
    let cert = server_cert(c.as_mut());
    assert!(std::path::Path::new(&cert).exists(), "{cert}");

    // prefer, named or by default (libpq's default): this server offers TLS.
    for url in [HOST.to_string(), format!("{HOST}?sslmode=prefer")] {
        let mut c = open(&url);
        assert!(server_says_ssl(c.as_mut()), "{url}");
        let tls = c.tls().expect("TLS recorded");
        assert_eq!(tls.sslmode, "prefer");
        assert_eq!(tls.version, "TLSv1_3", "{tls:?}");
        assert!(tls.cipher.starts_with("TLS13_"), "{tls:?}");
    }

    // require: TLS, the self-signed certificate not checked (as in libpq).
    let mut c = open(&format!("{HOST}?sslmode=require&application_name=sb_tls"));
    assert!(server_says_ssl(c.as_mut()));
    assert_eq!(c.tls().unwrap().sslmode, "require");
    // Parameters beside sslmode still reach the server.
    let app = c.query_one(&Stmt::new("SELECT current_setting('application_name')"), &[]).unwrap();
    assert_eq!(app.text(0).unwrap(), "sb_tls");

    // verify-ca with the server's own certificate as the root: the chain
    // is checked, not the name (127.0.0.1 is not in it).
    let enc = cert.replace('/', "%2F");
    let mut c = open(&format!("{HOST}?sslmode=verify-ca&sslrootcert={enc}"));
    assert!(server_says_ssl(c.as_mut()));
    assert_eq!(c.tls().unwrap().sslmode, "verify-ca");

    // verify-full: the certificate names localhost, not 127.0.0.1.
    let err =
        try_open(&format!("{HOST}?sslmode=verify-full&sslrootcert={enc}")).err().expect("name mismatch");
    assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(
            "(sslmode=verify-full): the server's certificate is for localhost, not 127.0.0.1 (connect by that name, or use sslmode=verify-ca)"
        ),
        "{msg}"
    );
    assert_eq!(msg.lines().count(), 1, "{msg}");
    let mut c = open(&format!("postgres://root@localhost:5432/test?sslmode=verify-full&sslrootcert={enc}"));
    assert!(server_says_ssl(c.as_mut()));

    // verify-* against roots that did not sign this certificate.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-ca.pem");
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=sb-other-ca"])
        .arg("-keyout")
        .arg(dir.path().join("other-ca.key"))
        .arg("-out")
        .arg(&other)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let other_enc = other.to_str().unwrap().replace('/', "%2F");
    for mode in ["verify-full", "verify-ca"] {
        let err =
            try_open(&format!("postgres://root@localhost:5432/test?sslmode={mode}&sslrootcert={other_enc}"))
                .err()
                .expect("a certificate no root signed is refused");
        assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
        let msg = err.to_string();
        let want = format!(
            "sslmode={mode}): the server's certificate is not signed by a root in sslrootcert {}",
            other.display()
        );
        assert!(msg.contains(&want), "{msg}");
    }
    // sslrootcert=system, and no sslrootcert at all (libpq's
    // ~/.postgresql/root.crt aside): the system's roots. Debian files its
    // snakeoil certificate among them (/etc/ssl/certs), so whether this
    // server is trusted depends on the machine: the verdict must match.
    let pem = std::fs::read(&cert).unwrap();
    let in_store = std::fs::read_dir("/etc/ssl/certs")
        .map(|d| d.filter_map(Result::ok).any(|e| std::fs::read(e.path()).is_ok_and(|b| b == pem)))
        .unwrap_or(false);
    let home_root = std::env::var("HOME").map(|h| format!("{h}/.postgresql/root.crt")).unwrap_or_default();
    let mut urls = vec!["postgres://root@localhost:5432/test?sslmode=verify-full&sslrootcert=system"];
    if !std::path::Path::new(&home_root).exists() {
        urls.push("postgres://root@localhost:5432/test?sslmode=verify-full");
    }
    for url in urls {
        match try_open(url) {
            Ok(mut c) => {
                assert!(in_store, "{url}: trusted without being in the system's store");
                assert!(server_says_ssl(c.as_mut()));
            }
            Err(e) => {
                assert!(!in_store, "{url}: {e}");
                assert!(e.to_string().contains("not signed by a root in the system's trusted roots"), "{e}");
            }
        }
    }
    // A root file that is not there is named.
    let err =
        try_open(&format!("{HOST}?sslmode=verify-ca&sslrootcert=%2Fnonexistent%2Froot.pem")).err().unwrap();
    assert!(err.to_string().contains("/nonexistent/root.pem"), "{err}");
    // A bad sslmode is named with what is allowed, the password redacted.
    let err = try_open("postgres://root:hunter2@127.0.0.1:5432/test?sslmode=verify").err().unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("sslmode=verify ") && msg.contains("verify-full") && !msg.contains("hunter2"),
        "{msg}"
    );

    // Channel binding is not spoken: demanding it is refused by name.
    let err = try_open(&format!("{HOST}?sslmode=require&channel_binding=require")).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
    assert!(err.to_string().contains("channel_binding=require is not supported"), "{err}");

    // A Unix-domain socket never uses TLS, whatever sslmode says (libpq).
    let mut c = open("postgres://root@%2Fvar%2Frun%2Fpostgresql:5432/test?sslmode=require");
    assert!(!server_says_ssl(c.as_mut()));
    assert_eq!(c.tls(), None);
}

#[test]
fn loads_and_large_answers_over_tls() {
    let mut c = open(&format!("{HOST}?sslmode=require"));
    let t = unique("sb_tls_load");
    c.batch(&format!("CREATE TABLE {t} (id int PRIMARY KEY, name text)")).unwrap();
    // ~2.6 MB of COPY text: several CopyData messages, many TLS records.
    const N: i64 = 100_000;
    let rows: Vec<Vec<Value>> = (1..=N).map(|i| vec![i.into(), format!("name-{i:020}").into()]).collect();
    c.load(&t, &["id", "name"], &rows).unwrap();
    let all = c.query(&Stmt::new(format!("SELECT id, name FROM {t} ORDER BY id")), &[]).unwrap();
    assert_eq!(all.len() as i64, N);
    assert_eq!(all[N as usize - 1].text(1).unwrap(), format!("name-{N:020}"));
    c.batch(&format!("DROP TABLE {t}")).unwrap();
}

/// A statement waiting on a lock, cancelled from another thread through
/// the connection's handle: it returns a cancelled error promptly and the
/// connection goes on.
fn cancel_a_blocked_statement(url: &str) {
    let t = unique("sb_cancel");
    let mut holder = open(url);
    holder.batch(&format!("CREATE TABLE {t} (x int); INSERT INTO {t} VALUES (1)")).unwrap();
    let mut victim = open(url);
    let pid = victim.query_one(&Stmt::new("SELECT pg_backend_pid()"), &[]).unwrap().int(0).unwrap();
    let canceller = victim.canceller().expect("a PostgreSQL connection can be cancelled");
    holder.batch(&format!("BEGIN; LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")).unwrap();

    let watcher_url = url.to_string();
    let sent = std::thread::spawn(move || {
        // Cancel once the victim is waiting on the lock, as the server sees it.
        let mut w = open(&watcher_url);
        let waiting =
            Stmt::new("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'");
        let deadline = Instant::now() + Duration::from_secs(20);
        while w.query_one(&waiting, &[Value::Int(pid)]).unwrap().int(0).unwrap() == 0 {
            assert!(Instant::now() < deadline, "the victim never waited on the lock");
            std::thread::sleep(Duration::from_millis(20));
        }
        canceller.cancel().expect("cancel sent");
        Instant::now()
    });
    let err = victim.query(&Stmt::new(format!("SELECT count(*) FROM {t}")), &[]).unwrap_err();
    let returned = Instant::now();
    let sent_at = sent.join().unwrap();
    assert!(err.is_cancelled(), "{url}: {err}");
    assert_eq!(err.code(), Some("57014"), "{err}");
    assert!(returned.duration_since(sent_at) < Duration::from_secs(2), "{url}: slow cancel");
    assert!(!victim.is_closed());
    assert_eq!(victim.query_one(&Stmt::new("SELECT 7::int"), &[]).unwrap().int(0).unwrap(), 7);
    holder.rollback().unwrap();
    // Nothing runs now: a cancel is a no-op and the connection goes on.
    victim.canceller().unwrap().cancel().unwrap();
    assert_eq!(
        victim.query_one(&Stmt::new(format!("SELECT count(*) FROM {t}")), &[]).unwrap().int(0).unwrap(),
        1
    );
    holder.batch(&format!("DROP TABLE {t}")).unwrap();
}

#[test]
fn a_statement_blocked_on_a_lock_is_cancelled_over_tls_tcp_and_unix_socket() {
    cancel_a_blocked_statement(&format!("{HOST}?sslmode=require"));
    cancel_a_blocked_statement(&format!("{HOST}?sslmode=disable"));
    cancel_a_blocked_statement("postgres://root@%2Fvar%2Frun%2Fpostgresql:5432/test");
}

#[test]
fn answers_the_client_did_not_ask_for_are_read_past() {
    let mut c = open(HOST);
    let one = Stmt::new("SELECT 1::int");
    // COPY TO STDOUT by the simple and the extended protocol: the data is
    // read and dropped, the connection stays in step.
    c.batch("COPY (SELECT generate_series(1, 1000)) TO STDOUT").unwrap();
    assert_eq!(c.query_one(&one, &[]).unwrap().int(0).unwrap(), 1);
    let n = c.execute(&Stmt::new("COPY (SELECT generate_series(1, 3)) TO STDOUT"), &[]).unwrap();
    assert_eq!(n, 3);
    assert_eq!(c.query_one(&one, &[]).unwrap().int(0).unwrap(), 1);
    // A load whose COPY turns out to be a COPY TO: refused, read to the
    // end, and the connection goes on.
    let err = c.load("(SELECT 1) TO STDOUT --", &["x"], &[vec![Value::Int(1)]]).unwrap_err();
    assert!(err.to_string().contains("CopyOutResponse in answer to COPY FROM STDIN"), "{err}");
    assert!(!c.is_closed());
    assert_eq!(c.query_one(&one, &[]).unwrap().int(0).unwrap(), 1);
    // A column type the client does not decode: an error after the whole
    // answer, and the connection goes on.
    let err = c.query(&Stmt::new("SELECT now(), 1::int FROM generate_series(1, 3)"), &[]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Decode, "{err}");
    assert_eq!(c.query_one(&one, &[]).unwrap().int(0).unwrap(), 1);
}

/// A peer that logs in like a server and then answers with a message no
/// PostgreSQL sends (the protocol's framing is all the client can trust):
/// the connection is closed and refuses further use without writing.
#[test]
fn an_unreadable_answer_closes_the_connection() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap(); // startup message
        assert!(n >= 8);
        // AuthenticationOk, BackendKeyData, ReadyForQuery(idle).
        s.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0]).unwrap();
        s.write_all(&[b'K', 0, 0, 0, 12, 0, 0, 0, 42, 0, 0, 0, 7]).unwrap();
        s.write_all(&[b'Z', 0, 0, 0, 5, b'I']).unwrap();
        let _ = s.read(&mut buf).unwrap(); // the query
        s.write_all(&[b'!', 0, 0, 0, 4]).unwrap(); // no such message
                                                   // After that the client must neither write nor keep the socket.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        rest
    });
    let mut c = open(&format!("postgres://bob@127.0.0.1:{port}/x?sslmode=disable"));
    let err = c.batch("SELECT 1").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    assert!(err.to_string().contains("protocol error"), "{err}");
    assert!(c.is_closed());
    let err = c.batch("SELECT 2").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    drop(c);
    assert_eq!(peer.join().unwrap(), Vec::<u8>::new(), "bytes written after the protocol error");
}

static NOTICES: Mutex<Vec<Notice>> = Mutex::new(Vec::new());

#[test]
fn server_notices_reach_the_handler() {
    set_notice_handler(|n| NOTICES.lock().unwrap().push(n.clone()));
    let tag = unique("sb_notice");
    let mut c = open(HOST);
    c.batch(&format!("DO $$BEGIN RAISE NOTICE '{tag} one'; RAISE WARNING '{tag} two'; END$$")).unwrap();
    c.execute(
        &Stmt::new(format!("DO $$BEGIN RAISE NOTICE '{tag} three' USING ERRCODE = '01000'; END$$")),
        &[],
    )
    .unwrap();
    let seen: Vec<Notice> =
        NOTICES.lock().unwrap().iter().filter(|n| n.message.starts_with(&tag)).cloned().collect();
    let got: Vec<(&str, &str, String)> =
        seen.iter().map(|n| (n.severity.as_str(), n.code.as_str(), n.message.clone())).collect();
    assert_eq!(
        got,
        vec![
            ("NOTICE", "00000", format!("{tag} one")),
            ("WARNING", "01000", format!("{tag} two")),
            ("NOTICE", "01000", format!("{tag} three")),
        ]
    );
    assert_eq!(seen[1].to_string(), format!("postgres WARNING: {tag} two (01000)"));
}

#[test]
fn numeric_infinity_and_nan_decode_and_encode() {
    let mut c = open(HOST);
    let r = c
        .query_one(
            &Stmt::new("SELECT 'Infinity'::numeric, '-Infinity'::numeric, 'NaN'::numeric, -12.5::numeric"),
            &[],
        )
        .unwrap();
    assert_eq!(r.0[0], Value::Float(f64::INFINITY));
    assert_eq!(r.0[1], Value::Float(f64::NEG_INFINITY));
    assert!(r.float(2).unwrap().is_nan());
    assert_eq!(r.0[3], Value::Float(-12.5));
    // And back as parameters: the server reads what was meant.
    let echo = Stmt::new("SELECT $1::numeric::text");
    for (v, text) in [(f64::INFINITY, "Infinity"), (f64::NEG_INFINITY, "-Infinity"), (f64::NAN, "NaN")] {
        assert_eq!(c.query_one(&echo, &[Value::Float(v)]).unwrap().text(0).unwrap(), text);
    }
}

/// A session the server ends (pg_terminate_backend: FATAL 57P01) is closed
/// on the next call, over TLS as in the clear, and refuses further use.
#[test]
fn a_terminated_session_is_closed_at_the_next_call() {
    for url in [format!("{HOST}?sslmode=require"), format!("{HOST}?sslmode=disable")] {
        let mut victim = open(&url);
        let pid = victim.query_one(&Stmt::new("SELECT pg_backend_pid()"), &[]).unwrap().int(0).unwrap();
        let mut admin = open(HOST);
        let ok =
            admin.query_one(&Stmt::new("SELECT pg_terminate_backend($1::int)"), &[Value::Int(pid)]).unwrap();
        assert_eq!(ok.int(0).unwrap(), 1);
        // The server has sent FATAL and closed; the next call finds out.
        let deadline = Instant::now() + Duration::from_secs(10);
        let gone = Stmt::new("SELECT count(*) FROM pg_stat_activity WHERE pid = $1");
        while admin.query_one(&gone, &[Value::Int(pid)]).unwrap().int(0).unwrap() > 0 {
            assert!(Instant::now() < deadline, "backend {pid} did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
        let err = victim.query_one(&Stmt::new("SELECT 1::int"), &[]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed, "{url}: {err}");
        assert!(victim.is_closed());
        let err = victim.batch("SELECT 1").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed, "{url}: {err}");
    }
}

/// A peer that accepts TLS and then cannot do it (garbage instead of a
/// ServerHello), but logs in in the clear: `prefer` goes on in the clear on
/// a new connection, as libpq does; `require` fails with the reason.
#[test]
fn a_failed_handshake_falls_back_to_the_clear_only_under_prefer() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut head = [0u8; 8];
                if s.read_exact(&mut head).is_err() {
                    return;
                }
                let mut buf = [0u8; 4096];
                if head == [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f] {
                    // SSLRequest: yes, then no TLS at all.
                    s.write_all(b"S").unwrap();
                    let _ = s.read(&mut buf);
                    let _ = s.write_all(b"this is not a TLS record\r\n");
                    return;
                }
                let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
                let mut rest = vec![0u8; len - 8];
                s.read_exact(&mut rest).unwrap();
                s.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0]).unwrap();
                s.write_all(&[b'K', 0, 0, 0, 12, 0, 0, 0, 42, 0, 0, 0, 7]).unwrap();
                s.write_all(&[b'Z', 0, 0, 0, 5, b'I']).unwrap();
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    let c = open(&format!("postgres://bob@127.0.0.1:{port}/x?sslmode=prefer"));
    assert_eq!(c.tls(), None);
    assert!(!c.is_closed());
    let err = try_open(&format!("postgres://bob@127.0.0.1:{port}/x?sslmode=require")).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
    assert!(err.to_string().contains("TLS (sslmode=require)"), "{err}");
}
