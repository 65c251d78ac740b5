//! The blocking PostgreSQL client against a throwaway server that asks for
//! passwords (the machine's own server trusts everyone): SCRAM-SHA-256 and
//! MD5 logins, a wrong password refused with the URL redacted, a Unix-socket
//! URL, and a server shut down under an open connection.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use storbench_db::{connect, DbUrl, ErrorKind, Stmt, Value};

fn bindir() -> Option<PathBuf> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let ver = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((ver, bin))
        })
        .collect();
    v.sort();
    v.pop().map(|(_, b)| b)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn as_postgres(bin: &Path, args: &[&str]) {
    let out =
        Command::new("runuser").args(["-u", "postgres", "--"]).arg(bin).args(args).output().expect("runuser");
    assert!(
        out.status.success(),
        "{} {args:?}: {}{}",
        bin.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A PostgreSQL instance in a temporary directory, stopped on drop.
struct Server {
    bin: PathBuf,
    data: PathBuf,
    sock: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let bin =
            bindir().expect("PostgreSQL server binaries under /usr/lib/postgresql (package postgresql)");
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        std::fs::create_dir(&sock).unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret-admin\n").unwrap();
        Command::new("chown").args(["-R", "postgres"]).arg(dir.path()).status().unwrap();
        as_postgres(
            &bin.join("initdb"),
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "admin",
                "--pwfile",
                pw.to_str().unwrap(),
                "--auth-host=md5",
                "--auth-local=md5",
                "-N",
            ],
        );
        let port = free_port();
        let opts = format!("-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", sock.display());
        as_postgres(
            &bin.join("pg_ctl"),
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &opts,
                "-w",
                "-l",
                dir.path().join("log").to_str().unwrap(),
                "start",
            ],
        );
        Server { bin, data, sock, port, _dir: dir }
    }

    fn url(&self, user: &str, pw: &str) -> DbUrl {
        DbUrl::parse(&format!("postgres://{user}:{pw}@127.0.0.1:{}/postgres", self.port)).unwrap()
    }

    fn stop(&self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", self.data.to_str().unwrap(), "-m", "immediate", "-w", "stop"])
            .output();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn password_logins_refusals_sockets_and_shutdown() {
    let srv = Server::start();

    // The admin's password was stored as SCRAM (the default): hba says md5,
    // and the server then asks for SCRAM-SHA-256.
    let mut admin = connect(&srv.url("admin", "s3cret-admin")).expect("SCRAM login");
    admin
        .batch(
            "SET password_encryption = 'md5'; CREATE ROLE legacy LOGIN PASSWORD 'md5-pass'; \
             CREATE TABLE t (id int, amount numeric, name text); \
             INSERT INTO t VALUES (1, 12.5, 'a'), (2, NULL, 'b')",
        )
        .unwrap();
    let sum = Stmt::new("SELECT count(*), sum(amount) FROM t WHERE id <= $1");
    let row = admin.query_one(&sum, &[Value::Int(2)]).unwrap();
    assert_eq!(row.int(0).unwrap(), 2);
    assert_eq!(row.float(1).unwrap(), 12.5);

    // A role whose password is stored as MD5 logs in by MD5.
    let mut legacy = connect(&srv.url("legacy", "md5-pass")).expect("MD5 login");
    let one = Stmt::new("SELECT $1::int + 1");
    assert_eq!(legacy.query_one(&one, &[Value::Int(41)]).unwrap().int(0).unwrap(), 42);

    // A wrong password: an authentication error naming the redacted URL,
    // never the password.
    for (user, pw) in [("admin", "not-the-pw-123"), ("legacy", "not-the-pw-456")] {
        let err = connect(&srv.url(user, pw)).err().expect("wrong password refused");
        assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
        let msg = err.to_string();
        assert!(!msg.contains(pw), "password leaked: {msg}");
        assert!(msg.contains("password authentication failed"), "{msg}");
        assert!(msg.contains("127.0.0.1"), "{msg}");
    }
    // No password where one is needed.
    let err = connect(&DbUrl::parse(&format!("postgres://admin@127.0.0.1:{}/postgres", srv.port)).unwrap())
        .err()
        .expect("no password refused");
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");

    // The Unix-domain socket, by a percent-encoded host path.
    let enc = srv.sock.to_str().unwrap().replace('/', "%2F");
    let mut unix = connect(
        &DbUrl::parse(&format!("postgres://admin:s3cret-admin@{enc}:{}/postgres", srv.port)).unwrap(),
    )
    .expect("Unix-socket login");
    assert_eq!(unix.query_one(&one, &[Value::Int(1)]).unwrap().int(0).unwrap(), 2);

    // A server error leaves the connection usable; a shutdown closes it.
    let bad = Stmt::new("SELECT 1 / $1::int");
    let err = admin.query(&bad, &[Value::Int(0)]).unwrap_err();
    assert_eq!(err.code(), Some("22012"), "{err}");
    assert!(!admin.is_closed());
    assert_eq!(admin.query_one(&one, &[Value::Int(1)]).unwrap().int(0).unwrap(), 2);
    srv.stop();
    let err = admin.query(&one, &[Value::Int(1)]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    assert!(admin.is_closed());
}
