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
    // A TLS setting the URL cannot have is a typo, not an outage (issue 24).
    let bogus = "postgres://root@127.0.0.1:5432/test?sslmode=bogus";
    let out = expect(d.path(), &["tpcb", "run", "--db", bogus], 2, "sslmode=bogus is not supported");
    assert!(String::from_utf8_lossy(&out.stderr).contains("verify-full"));
    let missing = "postgres://root@127.0.0.1:5432/test?sslmode=verify-full&sslrootcert=/nonexistent/root.pem";
    expect(d.path(), &["tpcb", "run", "--db", missing], 2, "sslrootcert /nonexistent/root.pem");
    expect(d.path(), &["--json", "report"], 2, "--json: report writes");
    // A model file with a TOML syntax error: one line with the line number,
    // not the parser's six-line diagram (issue 24).
    std::fs::write(d.path().join("bad.toml"), "base = \"hdd\"\nrpm = = 7200\n").unwrap();
    let bad = d.path().join("bad.toml");
    expect(
        d.path(),
        &["media", "create", "x", "--size", "64M", "--model", bad.to_str().unwrap()],
        2,
        "bad.toml: line 2: not valid TOML",
    );
    // Said as the flag's rule, not as mkfs.xfs's own message (issue 24).
    expect(
        d.path(),
        &["media", "create", "x", "--size", "200M", "--fs", "xfs"],
        2,
        "--size 200m: --fs xfs needs at least 300m",
    );
    // clap's first line leaves the missing names on the next lines, and
    // reads a negative value without `=` as a flag (issue 24).
    expect(d.path(), &["compare", "1"], 2, "the following required arguments were not provided: <B>");
    expect(d.path(), &["media", "destroy"], 2, "the following required arguments were not provided: <NAME>");
    expect(
        d.path(),
        &["io", "--rampup", "-1s"],
        2,
        "--rampup -1s: negative values are not allowed; give 0 or more",
    );
    // A results file that is not a results store (issue 24: exit 1).
    std::fs::write(d.path().join("passwd"), "root:x:0:0:root:/root:/bin/bash\n".repeat(50)).unwrap();
    for args in [&["results", "list"][..], &["io", "--size", "1M", "--duration", "1s"]] {
        let out = sb(d.path()).arg("--results").arg(d.path().join("passwd")).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("passwd") && err.contains("not a database") && err.lines().count() == 1,
            "{err}"
        );
        assert!(!d.path().join("storbench-data").exists(), "{args:?} filled a target");
    }
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
    // A URL without a password takes MYSQL_PWD, as the pods of `k8s render`
    // read it from their Secret: the wrong one is refused, and not shown.
    let out = sb(d.path())
        .env("MYSQL_PWD", "hunter3")
        .args(["tpcb", "run", "--db", "mysql://root@127.0.0.1:3306/test"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(!err.contains("hunter3"), "{err}");
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
    // A medium whose backing "directory" is a file: bad input (issue 24:
    // the backing must be an existing directory), and nothing is left.
    if is_root() {
        expect(
            d.path(),
            &["media", "create", "m", "--size", "64M", "--backing", "plain"],
            2,
            "plain: not a directory",
        );
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

/// The run options are in the help of the commands that run something,
/// under their own heading, and not in the help of those that only read
/// or manage (issue 30); an option put where it does nothing is refused.
#[test]
fn run_options_are_in_the_help_of_running_commands_only() {
    let d = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let out = sb(d.path()).args(args).arg("--help").output().unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    const RUN: [&str; 5] = ["--shard", "--start-at", "--metrics-addr", "--memory-limit", "--label"];
    for args in [
        &["results", "list"][..],
        &["results", "show"],
        &["results", "export"],
        &["results", "delete"],
        &["report"],
        &["compare"],
        &["media", "list"],
        &["media", "models"],
        &["pg", "list"],
        &["pg", "status"],
        &["tpcc", "check"],
        &["completions"],
        &["man"],
        &[],
    ] {
        let text = help(args);
        for flag in RUN {
            assert!(!text.contains(&format!("{flag} <")), "{args:?} --help lists {flag}:\n{text}");
        }
        assert!(text.contains("Global options:") && text.contains("--results <FILE>"), "{args:?}:\n{text}");
    }
    for args in [&["tpcc", "run"][..], &["tpcb", "run"], &["io"], &["tpch", "build"], &["backup"]] {
        let text = help(args);
        let run = text.find("Run options:").unwrap_or_else(|| panic!("{args:?}: no Run options:\n{text}"));
        for flag in RUN {
            assert!(text[run..].contains(&format!("{flag} <")), "{args:?} --help lacks {flag}:\n{text}");
        }
    }
    // `run` passes them on to its cells' commands, which record the runs.
    assert!(help(&["run"]).contains("--shard <i/N>"));
    let out = sb(d.path()).args(["results", "list", "--shard", "0/2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shard"));
}

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}

/// A file system that fills under a run: the writes fail with ENOSPC, the
/// run is kept as failed, and the exit code is 4 (a target failed), not 1
/// (issue 24). A 16 MiB tmpfs holds an 8 MiB target whose blocks are then
/// punched out and a filler takes all the space, so every write needs a page
/// the file system no longer has.
#[test]
fn a_target_that_fills_is_a_failed_target() {
    if !is_root() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let st =
        Command::new("mount").args(["-t", "tmpfs", "-o", "size=16m", "sbfill"]).arg(&mnt).status().unwrap();
    assert!(st.success());
    let _guard = Unmount(mnt.clone());
    let target = mnt.join("t.dat");
    std::fs::write(&target, vec![1u8; 8 << 20]).unwrap();
    let punch = Command::new("fallocate")
        .args(["--punch-hole", "--offset", "0", "--length", "8MiB"])
        .arg(&target)
        .status()
        .unwrap();
    assert!(punch.success());
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(mnt.join("filler")).unwrap();
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..32 {
            if filler.write_all(&chunk).is_err() {
                break;
            }
        }
    }
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 8 << 20);
    let out = sb(d.path())
        .args(["io", "--target", target.to_str().unwrap(), "--size", "8M", "--bs", "4k", "--rw", "randwrite"])
        .args(["--buffered", "--engine", "psync", "--duration", "2s", "--rampup", "0s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("I/O error") && err.contains("errno 28"), "{err}");
    let list = sb(d.path()).args(["--json", "results", "list"]).output().unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(runs[0]["status"], "failed", "{runs}");
}

/// A modelled medium's daemon killed under a run: the run fails naming
/// the dead daemon, exit 4 (a target failed), not 1 (issue 24).
#[test]
fn a_medium_whose_daemon_dies_is_a_failed_target() {
    if !is_root() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    Command::new("chmod").arg("755").arg(d.path()).status().unwrap();
    struct Destroy<'a>(&'a Path);
    impl Drop for Destroy<'_> {
        fn drop(&mut self) {
            let _ = sb(self.0).args(["media", "destroy", "--all"]).output();
        }
    }
    let _guard = Destroy(d.path());
    let made = sb(d.path())
        .args(["media", "create", "ec", "--size", "64M", "--fs", "none", "--model", "constant"])
        .args(["--set", "read=1ms"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let list = sb(d.path()).args(["--json", "media", "list"]).output().unwrap();
    let media: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let m = media.as_array().unwrap().iter().find(|m| m["name"] == "ec").unwrap().clone();
    let dev = m["device"].as_str().unwrap().to_string();
    let pid = m["daemon"]["pid"].as_u64().unwrap() as i32;
    let mut run = sb(d.path())
        .args(["io", "--target", &dev, "--bs", "4k", "--rw", "randread", "--qd", "4"])
        .args(["--duration", "20s", "--rampup", "0s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: killing the daemon this test made.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = run.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > std::time::Duration::from_secs(15) {
            let _ = run.kill();
            panic!("the run hung after its daemon died");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(4), "{err}");
    assert!(err.contains("model daemon for medium 'ec' died"), "{err}");
}

/// `--version` names the commit and build date; completions and the man
/// page come from the command line itself; a shell not offered is one line
/// naming the ones that are.
#[test]
fn version_completions_and_man_page_describe_this_build() {
    let d = tempfile::tempdir().unwrap();
    let out = sb(d.path()).arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&out.stdout);
    let commit = v.split("(commit ").nth(1).and_then(|r| r.split(',').next()).unwrap_or("");
    assert!(
        commit == "unknown" || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{v}"
    );
    assert!(v.starts_with("storbench ") && v.contains(", built 20"), "{v}");
    let bash = sb(d.path()).args(["completions", "bash"]).output().unwrap();
    let bash = String::from_utf8_lossy(&bash.stdout);
    assert!(bash.contains("_storbench()") && bash.contains("calibrate"), "bash completion covers the verbs");
    let man = sb(d.path()).arg("man").output().unwrap();
    let man = String::from_utf8_lossy(&man.stdout);
    assert!(man.contains(".TH storbench 1") && man.contains(commit), "{}", &man[..200.min(man.len())]);
    // Every run records the same commit.
    let run = sb(d.path())
        .args(["--json", "io", "--target"])
        .arg(d.path().join("t.dat"))
        .args(["--size", "4M", "--bs", "4k", "--duration", "1s", "--rampup", "0s", "--buffered"])
        .output()
        .unwrap();
    let rec: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&run.stderr)));
    assert_eq!(rec["run"]["env"]["storbench_commit"], commit, "{}", rec["run"]["env"]);
    let bad = sb(d.path()).args(["completions", "tcsh"]).output().unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("'tcsh'") && err.contains("use bash, elvish, fish, powershell, zsh"), "{err}");
}
