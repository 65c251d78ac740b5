//! Exit codes a script can act on, driven through the binary against the
//! real local servers: 2 bad input, 3 a database or service that cannot be
//! reached (refused, DNS, credentials, a managed instance that is down), 4 a
//! target that failed. Each case prints one line on stderr and leaves no run
//! behind.

use std::path::Path;
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;

fn sb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(dir)
        .env("STORBENCH_STATE", dir.join("state"))
        .env("STORBENCH_RESULTS", dir.join("r.db"))
        .arg("--quiet");
    c
}

/// Runs `args`, asserts the exit code and a one-line error containing
/// `want`, and that no run was recorded.
fn expect(dir: &Path, args: &[&str], code: i32, want: &str) -> Output {
    let out = sb(dir).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    assert!(err.contains(want), "{args:?}: wanted '{want}' in {err}");
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    if dir.join("r.db").exists() {
        let list = sb(dir).args(["--json", "results", "list"]).output().unwrap();
        let runs: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
        assert_eq!(runs.as_array().unwrap().len(), 0, "{args:?} recorded a run");
    }
    out
}

#[test]
fn a_typo_in_a_flag_is_bad_input() {
    let d = tempfile::tempdir().unwrap();
    expect(d.path(), &["tpcb", "run", "--clientz", "4"], 2, "--clientz");
    expect(d.path(), &["tpcb", "run", "--clients", "four"], 2, "four");
    expect(d.path(), &["tpcb", "run", "--db", "postgress://root@127.0.0.1/test"], 2, "not a database URL");
    expect(d.path(), &["tpcb", "init", "--db", "sqlite:x.db?synchronus=off"], 2, "synchronus");
    // The database crate gives a malformed URL the kind of a refused
    // connection; it is still a typo.
    expect(d.path(), &["tpcb", "run", "--db", "postgres://root@127.0.0.1:notaport/test"], 2, "bad URL");
    expect(d.path(), &["tpcb", "run", "--db", "mysql://root@127.0.0.1:abc/test"], 2, "bad URL");
    expect(d.path(), &["tpcb", "run", "--db", "managed:nothing"], 2, "no managed instance named 'nothing'");
    expect(d.path(), &["--json", "report"], 2, "--json: report writes");
    expect(d.path(), &["--json", "run", "plan.toml"], 2, "--json: run records runs");
}

#[test]
fn an_unreachable_server_is_an_outage_not_a_typo() {
    let d = tempfile::tempdir().unwrap();
    // Port 1: nothing listens, the connection is refused.
    expect(d.path(), &["tpcb", "run", "--db", "postgres://root@127.0.0.1:1/test"], 3, "127.0.0.1:1");
    expect(d.path(), &["tpcc", "run", "--db", "mysql://root@127.0.0.1:1/test"], 3, "127.0.0.1:1");
    // A Unix socket directory with no server in it.
    expect(d.path(), &["tpcb", "run", "--db", "postgres:///test?host=/nonexistent-sb"], 3, "nonexistent-sb");
    // A name that does not resolve (.invalid never does, RFC 6761).
    expect(
        d.path(),
        &["tpcb", "run", "--db", "postgres://root@no-such-host.invalid/test"],
        3,
        "no-such-host",
    );
}

#[test]
fn refused_credentials_are_an_outage_and_the_password_is_not_shown() {
    let d = tempfile::tempdir().unwrap();
    let out = expect(
        d.path(),
        &["tpcb", "run", "--db", "mysql://root:hunter2@127.0.0.1:3306/test"],
        3,
        "127.0.0.1:3306",
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2"));
    // A role the server does not know (the local server trusts every role it has).
    expect(
        d.path(),
        &["tpcb", "run", "--db", "postgres://no_such_role_sb@127.0.0.1:5432/test"],
        3,
        "no_such_role_sb",
    );
}

#[test]
fn a_missing_database_is_bad_input() {
    let d = tempfile::tempdir().unwrap();
    expect(
        d.path(),
        &["tpcb", "run", "--db", "postgres://root@127.0.0.1:5432/no_such_db_sb"],
        2,
        "no_such_db_sb",
    );
}

#[test]
fn a_target_that_cannot_be_made_is_a_failed_target() {
    let d = tempfile::tempdir().unwrap();
    // An SQLite file that cannot be created: /proc takes no new files.
    expect(d.path(), &["tpcb", "init", "--db", "sqlite:/proc/storbench-exit-codes.db"], 4, "cannot open");
    std::fs::write(d.path().join("plain"), b"x").unwrap();
    // A medium whose backing directory cannot be made: nothing is left.
    if is_root() {
        expect(d.path(), &["media", "create", "m", "--size", "64M", "--backing", "plain"], 4, "plain");
        let list = sb(d.path()).args(["--json", "media", "list"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&list.stdout).trim(), "[]");
    }
}

#[test]
fn a_managed_instance_that_is_down_is_an_outage() {
    if !is_root() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    Command::new("chmod").arg("755").arg(d.path()).status().unwrap();
    struct Down<'a>(&'a Path);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = sb(self.0).args(["pg", "down", "--all", "--destroy"]).output();
        }
    }
    let _guard = Down(d.path());
    let data = d.path().join("pgdata");
    let up = sb(d.path()).args(["pg", "up", "ec", "--data", data.to_str().unwrap()]).output().unwrap();
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    assert!(sb(d.path()).args(["pg", "down", "ec"]).status().unwrap().success());
    expect(d.path(), &["tpcb", "run", "--db", "managed:ec"], 3, "not running");
}

#[test]
fn help_documents_the_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    let out = sb(d.path()).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for line in ["2    bad input", "3    a database or service could not be reached", "4    a target failed"]
    {
        assert!(text.contains(line), "--help lacks '{line}':\n{text}");
    }
}

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}
