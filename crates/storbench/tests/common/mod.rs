//! Helpers the binary's integration tests share (every test file is a module
//! of the one test binary, tests/cli.rs).

#![allow(dead_code)]
use std::process::Command;

/// One value (or rows, `|`-separated) from `sql` on database `db` of the
/// local PostgreSQL, as user root over TCP.
pub fn psql(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-qAt", "-h", "127.0.0.1", "-U", "root", "-d", db, "-c", sql])
        .output()
        .unwrap();
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The directory of the Unix socket the server on `port` listens on: a
/// managed instance's TCP asks for a password, its private socket admits
/// root (these tests run as root).
pub fn socket_dir(port: u64) -> String {
    let t = std::fs::read_to_string("/proc/net/unix").unwrap();
    let suffix = format!("/.s.PGSQL.{port}");
    let path = t.lines().filter_map(|l| l.split_whitespace().nth(7)).find(|p| p.ends_with(&suffix));
    let path = path.unwrap_or_else(|| panic!("no Unix socket for port {port}"));
    path[..path.len() - suffix.len()].to_string()
}

/// Runs SQL with psql on the managed server on `port` (through its
/// socket), database storbench; stdout trimmed. It must succeed.
pub fn managed_psql(port: u64, sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-X",
            "-At",
            "-h",
            &socket_dir(port),
            "-p",
            &port.to_string(),
            "-U",
            "root",
            "-d",
            "storbench",
        ])
        .args(["-c", sql])
        .output()
        .unwrap();
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Media and managed servers share the host's loop devices, and the media
/// tests measure latency: a [`State::new`] takes this turn.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A test's own place: a directory (traversable by the managed server's OS
/// user) holding its state directory (`STORBENCH_STATE`) and results store.
/// Dropped, it takes down every managed instance and medium it made and,
/// unless the test already failed, asserts that no mount, loop device or
/// daemon of its state directory is left.
pub struct State {
    pub dir: tempfile::TempDir,
    _turn: Option<std::sync::MutexGuard<'static, ()>>,
}

#[allow(dead_code)]
impl State {
    /// A place of its own, taking its turn among this file's tests.
    pub fn new() -> State {
        let turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        State::with(Some(turn))
    }

    /// A place of its own, running beside the file's other tests.
    pub fn parallel() -> State {
        State::with(None)
    }

    fn with(turn: Option<std::sync::MutexGuard<'static, ()>>) -> State {
        let dir = tempfile::tempdir().unwrap();
        // The managed server's OS user must be able to traverse it.
        Command::new("chmod").arg("755").arg(dir.path()).status().unwrap();
        State { dir, _turn: turn }
    }

    /// A path inside the place.
    pub fn path(&self, p: &str) -> std::path::PathBuf {
        self.dir.path().join(p)
    }

    /// Its state directory.
    pub fn state(&self) -> std::path::PathBuf {
        self.path("state")
    }

    /// `storbench --quiet` in the place, with its state and results.
    pub fn sb(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_storbench"));
        c.current_dir(self.dir.path())
            .env("STORBENCH_STATE", self.state())
            .env("STORBENCH_RESULTS", self.path("r.db"))
            .arg("--quiet");
        c
    }

    /// Exit code, stdout and stderr of `storbench ARGS`.
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.sb().args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The stdout of `storbench ARGS`, which must succeed.
    pub fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "storbench {args:?}: {err}");
        out
    }

    /// Every medium, as `media list --json` gives them.
    pub fn media(&self) -> Vec<serde_json::Value> {
        serde_json::from_str(&self.ok(&["--json", "media", "list"])).unwrap()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let _ = self.sb().args(["pg", "down", "--all", "--destroy"]).output();
        let _ = self.sb().args(["media", "destroy", "--all"]).output();
        let s = self.state().to_string_lossy().to_string();
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let loops =
            String::from_utf8_lossy(&Command::new("losetup").arg("-a").output().unwrap().stdout).to_string();
        let procs =
            String::from_utf8_lossy(&Command::new("pgrep").args(["-af", &s]).output().unwrap().stdout)
                .to_string();
        if !std::thread::panicking() {
            assert!(!mounts.contains(&s), "a mount is left: {mounts}");
            assert!(!loops.contains(&s), "a loop device is left: {loops}");
            assert!(procs.trim().is_empty(), "a daemon is left: {procs}");
        }
    }
}
