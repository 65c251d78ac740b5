//! `storbench backup` and `storbench restore` through the binary: a small
//! TPC-C database backed up and restored round-trips (`tpcc check` passes on
//! the copy, every table's rows and checksum match the source) on SQLite,
//! PostgreSQL and MariaDB, logically and physically (mariadb-backup and a
//! plain pg_basebackup restored into a temporary server that is stopped
//! again); a restore that lost rows fails; a backup to a target too small
//! fails with one line and leaves nothing behind; a physical restore that
//! fails leaves no copy and no server; bad input and a missing tool exit 2
//! before anything is recorded.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

const PG: &str = "postgres://root@127.0.0.1:5432";
const MY: &str = "mysql://root@127.0.0.1:3306";

fn sb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(dir).env("STORBENCH_RESULTS", dir.join("r.db")).env_remove("STORBENCH_DB").arg("--quiet");
    c
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Runs with `--json` and returns the run record.
fn record(dir: &Path, args: &[&str]) -> Value {
    let out = ok(sb(dir).arg("--json").args(args).output().unwrap());
    serde_json::from_slice(&out.stdout).unwrap()
}

fn metric(rec: &Value, name: &str) -> f64 {
    rec["steps"][0]["metrics"][name]["value"].as_f64().unwrap_or_else(|| panic!("no {name} in {rec}"))
}

fn runs(dir: &Path) -> usize {
    if !dir.join("r.db").exists() {
        return 0;
    }
    let out = sb(dir).args(["--json", "results", "list"]).output().unwrap();
    serde_json::from_slice::<Value>(&out.stdout).map(|v| v.as_array().map_or(0, Vec::len)).unwrap_or(0)
}

fn unique(prefix: &str) -> String {
    let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}_{}_{n}", std::process::id())
}

fn size(p: &Path) -> u64 {
    if p.is_dir() {
        std::fs::read_dir(p).unwrap().flatten().map(|e| size(&e.path())).sum()
    } else {
        std::fs::metadata(p).unwrap().len()
    }
}

/// Every file under `dir` with its size and a hash of its bytes, sorted by
/// path: equal listings mean byte-identical trees.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, u64)> {
    use std::hash::Hasher;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                todo.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            h.write(&bytes);
            out.push((p.strip_prefix(dir).unwrap().to_path_buf(), bytes.len() as u64, h.finish()));
        }
    }
    out.sort();
    out
}

/// A shared server, by its client.
#[derive(Clone, Copy, PartialEq)]
enum Srv {
    Pg,
    My,
}

/// Runs one SQL statement on the shared server in database `db` with its
/// client (unaligned, no headers); its output on success, else a panic.
fn sql(srv: Srv, db: &str, q: &str) -> String {
    let out = match srv {
        Srv::Pg => {
            Command::new("psql").args(["-h", "127.0.0.1", "-U", "root", "-d", db, "-qAtc", q]).output()
        }
        Srv::My => Command::new("mariadb").args(["-uroot", "-h127.0.0.1", "-N", "-D", db, "-e", q]).output(),
    }
    .unwrap();
    assert!(out.status.success(), "{q}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Databases of one shared server a test makes or names, each dropped when
/// the test ends, passed or not.
struct Dbs(Srv, Vec<String>);

impl Dbs {
    /// A unique database name, dropped with the others, and its URL.
    fn name(&mut self, prefix: &str) -> (String, String) {
        let n = unique(prefix);
        self.1.push(n.clone());
        let url = format!("{}/{n}", if self.0 == Srv::Pg { PG } else { MY });
        (n, url)
    }

    /// A fresh, empty database, and its URL.
    fn create(&mut self, prefix: &str) -> (String, String) {
        let (n, url) = self.name(prefix);
        let admin = if self.0 == Srv::Pg { "postgres" } else { "mysql" };
        sql(self.0, admin, &format!("CREATE DATABASE {n}"));
        (n, url)
    }
}

impl Drop for Dbs {
    fn drop(&mut self) {
        for db in &self.1 {
            let _ = match self.0 {
                Srv::Pg => Command::new("psql")
                    .args(["-h", "127.0.0.1", "-U", "root", "-d", "postgres", "-qc"])
                    .arg(format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
                    .output(),
                Srv::My => Command::new("mariadb")
                    .args(["-uroot", "-h127.0.0.1", "-e"])
                    .arg(format!("DROP DATABASE IF EXISTS {db}"))
                    .output(),
            };
        }
    }
}

/// Whether a tool the test needs is missing (the test is then skipped, and says so).
fn missing(tool: &str) -> bool {
    let gone = Command::new(tool).arg("--version").output().is_err();
    if gone {
        eprintln!("{tool} not installed: skipped");
    }
    gone
}

/// A temporary directory a server's user (postgres, mysql) can traverse.
fn traversable_tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    assert!(Command::new("chmod").arg("755").arg(d.path()).status().unwrap().success());
    d
}

/// The `storbench: error:` lines of a stderr.
fn error_lines(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("storbench: error:")).collect()
}

/// Backs `src` up with `backup_args`, restores into `copy` with `--compare`,
/// and checks the figures and the copy.
fn round_trip(dir: &Path, src: &str, copy: &str, out: &Path, backup_args: &[&str]) {
    let out_s = out.to_str().unwrap();
    let mut args = vec!["backup", "--db", src, "--to", out_s];
    args.extend_from_slice(backup_args);
    let b = record(dir, &args);
    assert_eq!(b["run"]["status"], "complete");
    assert_eq!(b["run"]["kind"], "backup");
    // The backup's size is exactly what is on disk.
    assert_eq!(metric(&b, "backup.bytes"), size(out) as f64);
    assert!(metric(&b, "backup.seconds") > 0.0);
    assert!(metric(&b, "backup.mb_per_s") > 0.0);
    assert!(metric(&b, "db.bytes") > 0.0);
    assert!(metric(&b, "tool.write_bytes") >= 0.0);
    let r = record(dir, &["restore", "--from", out_s, "--to", copy, "--compare", src]);
    assert_eq!(r["run"]["status"], "complete");
    if !copy.starts_with("sqlite:") {
        assert_eq!(r["run"]["env"]["db"]["url"], copy);
        assert!(r["run"]["env"]["db"]["version"].is_string(), "{}", r["run"]["env"]);
    }
    assert_eq!(metric(&r, "restore.tpcc_check_failed"), 0.0);
    // 1 warehouse: 100,000 items and 100,000 stock rows at least.
    assert!(metric(&r, "restore.rows") > 200_000.0, "{r}");
    let (open, ready) = (metric(&r, "restore.open_seconds"), metric(&r, "restore.ready_seconds"));
    assert!(open >= 0.0 && ready >= open, "open {open} ready {ready}");
    ok(sb(dir).args(["tpcc", "check", "--db", copy]).output().unwrap());
}

#[test]
fn sqlite_backup_then_restore_round_trips_by_both_methods() {
    let d = tempfile::tempdir().unwrap();
    ok(sb(d.path()).args(["tpcc", "build", "--db", "sqlite:src.db"]).output().unwrap());
    round_trip(d.path(), "sqlite:src.db", "sqlite:copy1.db", &d.path().join("b1.db"), &[]);
    round_trip(
        d.path(),
        "sqlite:src.db",
        "sqlite:copy2.db",
        &d.path().join("b2.db"),
        &["--method", "vacuum-into"],
    );
}

#[test]
fn postgres_dump_then_restore_round_trips() {
    let d = tempfile::tempdir().unwrap();
    let mut dbs = Dbs(Srv::Pg, Vec::new());
    let (src, src_url) = dbs.create("sb_bk_src");
    let (_, copy_url) = dbs.name("sb_bk_copy");
    let (_, copy2_url) = dbs.name("sb_bk_copy2");
    ok(sb(d.path()).args(["tpcc", "build", "--db", &src_url]).output().unwrap());
    round_trip(d.path(), &src_url, &copy_url, &d.path().join("dump"), &["--jobs", "2"]);
    // A fresh database only: restoring over an existing one is refused.
    let again = sb(d.path())
        .args(["restore", "--from", d.path().join("dump").to_str().unwrap(), "--to", &copy_url])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    // Same row count, one value changed in the source since the backup:
    // the checksums tell the copy apart.
    sql(Srv::Pg, &src, "UPDATE item SET i_price = i_price + 1 WHERE i_id = 7");
    let out = sb(d.path())
        .args(["restore", "--from", d.path().join("dump").to_str().unwrap(), "--to", &copy2_url])
        .args(["--compare", &src_url])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("item checksum differs"), "{err}");
}

#[test]
fn mariadb_dump_then_restore_round_trips_where_mariadb_dump_is_present() {
    if missing("mariadb-dump") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut dbs = Dbs(Srv::My, Vec::new());
    let (_, src_url) = dbs.create("sb_bk_src");
    let (_, copy_url) = dbs.name("sb_bk_copy");
    ok(sb(d.path()).args(["tpcc", "build", "--db", &src_url]).output().unwrap());
    round_trip(d.path(), &src_url, &copy_url, &d.path().join("dump.sql"), &[]);
}

#[test]
fn a_restore_that_lost_rows_fails() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src.db");
    {
        let c = rusqlite::Connection::open(&src).unwrap();
        c.execute_batch("CREATE TABLE t(a INTEGER); INSERT INTO t VALUES (1), (2), (3);").unwrap();
    }
    ok(sb(d.path()).args(["backup", "--db", "sqlite:src.db", "--to", "b.db"]).output().unwrap());
    // The source gains a row the backup does not have.
    rusqlite::Connection::open(&src).unwrap().execute("INSERT INTO t VALUES (4)", []).unwrap();
    let out = sb(d.path())
        .args(["restore", "--from", "b.db", "--to", "sqlite:copy.db", "--compare", "sqlite:src.db"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("t has 3 rows, source 4"), "{err}");
}

/// A small ext4 filesystem on a loop device, mounted in a temporary
/// directory; unmounted and detached on drop.
struct TinyFs {
    dir: PathBuf,
    dev: String,
}

impl TinyFs {
    fn new(under: &Path) -> TinyFs {
        let img = under.join("tiny.img");
        std::fs::File::create(&img).unwrap().set_len(4 << 20).unwrap();
        let out = Command::new("losetup").args(["--find", "--show"]).arg(&img).output().unwrap();
        assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
        let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let dir = under.join("mnt");
        std::fs::create_dir(&dir).unwrap();
        let fs = TinyFs { dir, dev };
        assert!(Command::new("mkfs.ext4").args(["-q", "-F", &fs.dev]).status().unwrap().success());
        assert!(Command::new("mount").arg(&fs.dev).arg(&fs.dir).status().unwrap().success());
        fs
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

#[test]
fn a_backup_to_a_target_too_small_fails_with_one_line_and_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    ok(sb(d.path()).args(["tpcc", "build", "--db", "sqlite:src.db"]).output().unwrap());
    let fs = TinyFs::new(d.path());
    for method in ["online", "vacuum-into"] {
        let to = fs.dir.join(format!("{method}.db"));
        let out = sb(d.path())
            .args(["backup", "--db", "sqlite:src.db", "--method", method, "--to", to.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        let errors = error_lines(&err);
        assert_eq!(errors.len(), 1, "{err}");
        assert!(errors[0].contains("full"), "{err}");
        assert!(!to.exists(), "the partial backup {} was left behind", to.display());
    }
    // pg_dump's directory on the full disk goes too (pgbench's tables at
    // scale 1 dump to about 10 MB; the filesystem has 4 MiB).
    let mut dbs = Dbs(Srv::Pg, Vec::new());
    let (_, url) = dbs.create("sb_bk_full");
    ok(sb(d.path()).args(["tpcb", "init", "--db", &url, "--scale", "1"]).output().unwrap());
    let to = fs.dir.join("dump");
    let out = sb(d.path()).args(["backup", "--db", &url, "--to", to.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("pg_dump failed") && err.contains("No space left on device"), "{err}");
    assert!(!to.exists());
    let listing: Vec<_> = std::fs::read_dir(&fs.dir).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(listing, vec![std::ffi::OsString::from("lost+found")]);
    // Both are recorded as failed runs (beside the build).
    let out = sb(d.path()).args(["--json", "results", "list"]).output().unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed =
        list.as_array().unwrap().iter().filter(|r| r["kind"] == "backup" && r["status"] == "failed").count();
    assert_eq!(failed, 3);
}

#[test]
fn bad_input_and_a_missing_tool_exit_2_and_record_nothing() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("exists"), b"x").unwrap();
    rusqlite::Connection::open(d.path().join("s.db")).unwrap().execute_batch("CREATE TABLE t(a)").unwrap();
    // What restore takes for a mariadb-backup directory (it looks no further before validating).
    std::fs::create_dir(d.path().join("mb")).unwrap();
    std::fs::write(d.path().join("mb/xtrabackup_checkpoints"), b"backup_type = full-backuped\n").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["backup", "--db", "sqlite:s.db", "--to", "exists"], "already exists"),
        (&["backup", "--db", "sqlite:s.db", "--to", "no/such/dir/b"], "does not exist"),
        (&["backup", "--db", "sqlite:s.db", "--to", "b", "--method", "basebackup"], "online or vacuum-into"),
        (&["backup", "--db", "sqlite:s.db", "--to", "b", "--jobs", "0"], "--jobs 0"),
        (&["backup", "--db", "sqlite:s.db", "--to", "b", "--compress", "zstd"], "--compress zstd"),
        (
            &["backup", "--db", "sqlite:s.db", "--to", "b", "--method", "online", "--format", "tar"],
            "--format",
        ),
        (&["backup", "--db", "sqlite:missing.db", "--to", "b"], "no such SQLite file"),
        (
            &["backup", "--db", "mysql://root@127.0.0.1:3306/test", "--to", "b", "--compress", "gzip"],
            "--compress gzip",
        ),
        (&["restore", "--from", "exists", "--to", "sqlite:c.db"], "not a backup"),
        (&["restore", "--from", "s.db", "--to", "sqlite:s.db"], "already exists"),
        (&["restore", "--from", "s.db", "--to", "postgres://root@127.0.0.1:5432/x"], "is for Sqlite"),
        (
            &[
                "backup",
                "--db",
                "mysql://root@127.0.0.1:3306/test",
                "--to",
                "b",
                "--method",
                "basebackup",
                "--format",
                "tar",
            ],
            "--format tar",
        ),
        (
            &[
                "backup",
                "--db",
                "mysql://root@127.0.0.1:3306/test",
                "--to",
                "b",
                "--method",
                "basebackup",
                "--compress",
                "zstd",
            ],
            "--compress zstd",
        ),
        (
            &["backup", "--db", "mysql://root@127.0.0.1:3306/test", "--to", "b", "--method", "online"],
            "basebackup or dump",
        ),
        (&["restore", "--from", "mb", "--to", "mysql://root@127.0.0.1:3306/x"], "new data directory"),
        (&["restore", "--from", "mb", "--to", "exists"], "already exists"),
        (
            &["restore", "--from", "mb", "--to", "c", "--compare", "postgres://root@127.0.0.1:5432/x"],
            "is for Mysql",
        ),
        (&["restore", "--from", "mb", "--to", "c", "--database", "a;b"], "--database 'a;b'"),
        (&["restore", "--from", "s.db", "--to", "sqlite:c.db", "--database", "x"], "only a physical backup"),
    ];
    for (args, says) in cases {
        let out = sb(d.path()).args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // No tool on PATH: one line naming the Debian package.
    let out = sb(d.path())
        .env("PATH", d.path())
        .args(["backup", "--db", &format!("{MY}/test"), "--to", "b.sql"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("mariadb-dump not found") && err.contains("mariadb-client"), "{err}");
    // mariadb-backup, for a physical backup and its restore.
    for args in [
        &["backup", "--db", &format!("{MY}/test"), "--to", "b", "--method", "basebackup"][..],
        &["restore", "--from", "mb", "--to", "c"][..],
    ] {
        let out = sb(d.path()).env("PATH", d.path()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("mariadb-backup not found") && err.contains("Debian package mariadb-backup"),
            "{err}"
        );
    }
    assert_eq!(runs(d.path()), 0);
    assert!(!d.path().join("c").exists());
    assert!(!d.path().join("b").exists() && !d.path().join("c.db").exists());
}

#[test]
fn a_failed_restore_is_a_failed_run_and_drops_the_half_made_database() {
    let d = tempfile::tempdir().unwrap();
    let mut dbs = Dbs(Srv::Pg, Vec::new());
    let (copy, copy_url) = dbs.name("sb_bk_bad");
    let dump = d.path().join("dump");
    std::fs::create_dir(&dump).unwrap();
    std::fs::write(dump.join("toc.dat"), b"not an archive").unwrap();
    let out =
        sb(d.path()).args(["restore", "--from", dump.to_str().unwrap(), "--to", &copy_url]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("pg_restore failed"), "{err}");
    let left =
        sql(Srv::Pg, "postgres", &format!("SELECT count(*) FROM pg_database WHERE datname = '{copy}'"));
    assert_eq!(left, "0");
    assert_eq!(runs(d.path()), 1);
}

/// A managed PostgreSQL (its own state directory), destroyed on drop: the
/// shared server has no replication entry for pg_basebackup.
struct Managed(PathBuf);

impl Drop for Managed {
    fn drop(&mut self) {
        let _ = sb(&self.0)
            .env("STORBENCH_STATE", self.0.join("state"))
            .args(["pg", "down", "--all", "--destroy"])
            .output();
    }
}

#[test]
fn a_managed_instance_backs_up_by_basebackup_and_dump_and_restores_into_a_fresh_database() {
    // The managed server's OS user must be able to traverse it.
    let d = traversable_tempdir();
    let m = Managed(d.path().to_path_buf());
    let run = |args: &[&str]| sb(&m.0).env("STORBENCH_STATE", m.0.join("state")).args(args).output().unwrap();
    let data = m.0.join("data");
    ok(run(&["pg", "up", "bk", "--data", data.to_str().unwrap(), "-c", "shared_buffers=32MB"]));
    ok(run(&["tpcb", "init", "--db", "managed:bk", "--scale", "1"]));
    let plain = m.0.join("plain");
    let out = ok(run(&[
        "--json",
        "backup",
        "--db",
        "managed:bk",
        "--method",
        "basebackup",
        "--to",
        plain.to_str().unwrap(),
    ]));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(plain.join("PG_VERSION").is_file(), "a plain base backup is a data directory");
    assert_eq!(metric(&rec, "backup.bytes"), size(&plain) as f64);
    assert_eq!(rec["run"]["config"]["checkpoint"], "fast");
    let tar = m.0.join("tar");
    let args = [
        "--json",
        "backup",
        "--db",
        "managed:bk",
        "--method",
        "basebackup",
        "--format",
        "tar",
        "--compress",
        "lz4",
    ];
    let out = ok(run(&[&args[..], &["--to", tar.to_str().unwrap()]].concat()));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(tar.join("base.tar.lz4").is_file(), "client-side lz4 on tar output");
    assert_eq!(metric(&rec, "backup.bytes"), size(&tar) as f64);
    assert!(metric(&rec, "backup.bytes") < metric(&rec, "db.bytes") * 2.0);
    // A dump of the managed instance restores into a fresh database in it.
    let dump = m.0.join("dump");
    ok(run(&["backup", "--db", "managed:bk", "--to", dump.to_str().unwrap()]));
    let out = ok(run(&[
        "--json",
        "restore",
        "--from",
        dump.to_str().unwrap(),
        "--to",
        "managed:bk/copy",
        "--compare",
        "managed:bk",
    ]));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["run"]["config"]["to"], "managed:bk/copy");
    // pgbench's four tables, 100,000 accounts + 10 tellers + 1 branch at scale 1.
    assert_eq!(metric(&rec, "restore.tables"), 4.0);
    assert_eq!(metric(&rec, "restore.rows"), 100_011.0);
    // A base backup is restored into a data directory, not a database.
    let out = run(&["restore", "--from", plain.to_str().unwrap(), "--to", &format!("{PG}/x")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("new data directory"));
}

#[test]
fn results_go_to_stdout_and_quiet_hides_only_the_live_line() {
    // Regression: backup and restore printed their result on stderr, and
    // not at all under --quiet.
    let d = tempfile::tempdir().unwrap();
    rusqlite::Connection::open(d.path().join("src.db"))
        .unwrap()
        .execute_batch("CREATE TABLE t(a INTEGER); INSERT INTO t VALUES (1), (2), (3);")
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    // sb() passes --quiet; this one does not.
    let cmd = |quiet: bool| {
        if quiet {
            return sb(d.path());
        }
        let mut c = Command::cargo_bin("storbench").unwrap();
        c.current_dir(d.path()).env("STORBENCH_RESULTS", d.path().join("r.db")).env_remove("STORBENCH_DB");
        c
    };
    // The one result line is on stdout and only there, --quiet or not.
    for (quiet, to, copy) in [(true, "b1.db", "sqlite:c1.db"), (false, "b2.db", "sqlite:c2.db")] {
        let runs = [
            (vec!["backup", "--db", "sqlite:src.db", "--to", to], "backup: online of ", "MB/s written"),
            (
                vec!["restore", "--from", to, "--to", copy, "--compare", "sqlite:src.db"],
                "restore: ",
                "open after",
            ),
        ];
        for (args, starts, has) in runs {
            let out = ok(cmd(quiet).args(&args).output().unwrap());
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(lines.len(), 1, "{args:?} quiet {quiet}: {stdout}");
            assert!(lines[0].starts_with(starts) && lines[0].contains(has), "{args:?}: {stdout}");
            assert!(!stderr.contains(starts), "{args:?} quiet {quiet}: the result on stderr: {stderr}");
            // The run's closing line is progress: --quiet hides it.
            assert_eq!(stderr.contains("saved in"), !quiet, "{args:?} quiet {quiet}: {stderr}");
        }
    }
    // With --json stdout holds the run record alone; the line goes to stderr.
    for (args, kind) in [
        (vec!["backup", "--db", "sqlite:src.db", "--to", "b3.db"], "backup"),
        (vec!["restore", "--from", "b3.db", "--to", "sqlite:c3.db", "--compare", "sqlite:src.db"], "restore"),
    ] {
        let out = ok(sb(d.path()).arg("--json").args(&args).output().unwrap());
        let rec: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{kind}: stdout is not one JSON record ({e}): {}", text(&out.stdout)));
        assert_eq!(rec["run"]["kind"], kind);
        assert_eq!(rec["run"]["status"], "complete");
        assert!(text(&out.stderr).contains(&format!("{kind}: ")), "{}", text(&out.stderr));
    }
}

/// The pids of servers (mariadbd, a postmaster) whose command line names
/// `dir`: one started on it.
fn servers_on(dir: &Path) -> Vec<i32> {
    let want = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let args: Vec<String> =
                cmd.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            let prog = Path::new(args.first()?).file_name()?.to_string_lossy().into_owned();
            let server = prog == "mariadbd" || prog == "postgres";
            let hit = args.iter().any(|a| *a == want || a.ends_with(&format!("={want}")));
            (server && hit).then_some(pid)
        })
        .collect()
}

/// A restore of `from` into `to` (state in `dir/state`, stderr piped),
/// returned once its temporary server runs on `to`.
fn restore_until_its_server_runs(dir: &Path, from: &Path, to: &Path) -> std::process::Child {
    let mut child = sb(dir)
        .env("STORBENCH_STATE", dir.join("state"))
        .args(["restore", "--from", from.to_str().unwrap(), "--to", to.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while servers_on(to).is_empty() {
        assert!(child.try_wait().unwrap().is_none(), "the restore ended before its server started");
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "no server started on {}", to.display());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child
}

/// Kills (by pid) any server a failed test left on the directory, so one
/// failure does not leave a server behind; the tests assert there is none.
struct NoServerOn(PathBuf);

impl Drop for NoServerOn {
    fn drop(&mut self) {
        for pid in servers_on(&self.0) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// The directory's files are owned by this user id.
fn owner(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().uid()
}

fn uid_of(user: &str) -> u32 {
    let out = Command::new("id").args(["-u", user]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// What a physical restore's run record must hold, whichever engine.
fn physical_restore_figures(r: &Value, backup_bytes: f64) {
    assert_eq!(r["run"]["status"], "complete", "{r}");
    assert_eq!(r["run"]["kind"], "restore");
    assert!(r["run"]["env"]["server"]["version"].is_string(), "{}", r["run"]["env"]);
    assert_eq!(metric(r, "restore.tpcc_check_failed"), 0.0);
    // 1 warehouse: 100,000 items and 100,000 stock rows at least, in the one database checked.
    assert_eq!(metric(r, "restore.databases"), 1.0);
    assert!(metric(r, "restore.rows") > 200_000.0, "{r}");
    // TPC-C's nine tables and what the build records beside them.
    assert!(metric(r, "restore.tables") >= 9.0, "{r}");
    let (load, open, ready) = (
        metric(r, "restore.load_seconds"),
        metric(r, "restore.open_seconds"),
        metric(r, "restore.ready_seconds"),
    );
    assert!(load > 0.0 && open > load && ready >= open, "load {load} open {open} ready {ready}");
    // The server's launch to its first connection: inside open, after the load.
    let start = metric(r, "restore.start_seconds");
    assert!(start > 0.0 && start <= open - load, "start {start} open {open} load {load}");
    assert_eq!(metric(r, "backup.bytes"), backup_bytes);
}

#[test]
fn mariadb_backup_then_restore_into_a_temporary_server_round_trips() {
    if missing("mariadb-backup") {
        return;
    }
    // The server's user (mysql) must be able to traverse to the copy.
    let d = traversable_tempdir();
    let mut dbs = Dbs(Srv::My, Vec::new());
    let (src, src_url) = dbs.create("sb_bk_phys");
    let copy = d.path().join("copy");
    let _no_server = NoServerOn(copy.clone());
    let state = d.path().join("state");
    ok(sb(d.path()).args(["tpcc", "build", "--db", &src_url]).output().unwrap());
    let mb = d.path().join("mb");
    // An option file of the host's that would narrow the backup to the
    // mysql schema: storbench's backup reads none (regression).
    let home = d.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join(".my.cnf"), "[mariadb-backup]\ndatabases=mysql\n").unwrap();
    let out = sb(d.path())
        .env("HOME", &home)
        .args(["--json", "backup", "--db", &src_url, "--method", "basebackup", "--jobs", "2"])
        .args(["--to", mb.to_str().unwrap()])
        .output()
        .unwrap();
    let b: Value = serde_json::from_slice(&ok(out).stdout).unwrap();
    assert!(mb.join(&src).is_dir(), "the backup left {src} out: the host's option file was read");
    assert_eq!(b["run"]["status"], "complete");
    assert_eq!(b["run"]["config"]["tool"], "mariadb-backup");
    assert!(b["run"]["config"]["checkpoint"].is_null(), "pg_basebackup's setting is not recorded");
    assert!(mb.join("xtrabackup_checkpoints").is_file() || mb.join("mariadb_backup_checkpoints").is_file());
    assert_eq!(metric(&b, "backup.bytes"), size(&mb) as f64);
    assert!(metric(&b, "backup.seconds") > 0.0);
    // db.bytes counts the whole server the backup holds, not the URL's
    // schema alone (regression): more than that schema, the mysql schema too.
    let schema = |filter: &str| -> f64 {
        let q =
            format!("SELECT SUM(data_length + index_length) FROM information_schema.tables WHERE {filter}");
        sql(Srv::My, "mysql", &q).parse().unwrap()
    };
    let ours = schema(&format!("table_schema = '{src}'"));
    assert!(metric(&b, "db.bytes") > ours + schema("table_schema = 'mysql'") - 1.0, "{b}");
    let before = fingerprint(&mb);
    // The server holds other tests' databases too: --database checks ours.
    // Restored twice: regression, the first restore prepared the backup
    // itself, so the second found it prepared (near-zero prepare, another size).
    // The second comes through a link to the backup (regression: cp -a
    // copied the link as a link, and the backup itself was prepared and
    // moved out).
    let copy2 = d.path().join("copy2");
    let _no_server2 = NoServerOn(copy2.clone());
    let latest = d.path().join("latest");
    std::os::unix::fs::symlink(&mb, &latest).unwrap();
    for (to, from) in [(&copy, &mb), (&copy2, &latest)] {
        let out = sb(d.path())
            .env("STORBENCH_STATE", &state)
            .args(["--json", "restore", "--from", from.to_str().unwrap(), "--to", to.to_str().unwrap()])
            .args(["--jobs", "2", "--database", &src, "--compare", &src_url])
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&ok(out).stdout).unwrap();
        physical_restore_figures(&r, metric(&b, "backup.bytes"));
        assert!(metric(&r, "restore.prepare_seconds") > 0.0 && metric(&r, "restore.copy_seconds") > 0.0);
        // The copy stays, given to the server's user; the server is gone and
        // its run directory (socket, pid file, log) with it.
        assert!(to.join(&src).is_dir() && to.join("ibdata1").is_file());
        assert_eq!(owner(to), uid_of("mysql"));
        assert!(servers_on(to).is_empty(), "a server was left on {}", to.display());
        let left: Vec<_> =
            std::fs::read_dir(state.join("restore")).unwrap().flatten().map(|e| e.path()).collect();
        assert!(left.is_empty(), "{left:?}");
        // The backup was only read: byte for byte as taken.
        assert!(
            fingerprint(&mb) == before,
            "restoring into {} changed the backup {}",
            to.display(),
            mb.display()
        );
    }
    // No work copy is left beside the copies.
    let mut names: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["copy", "copy2", "home", "latest", "mb", "r.db", "state"]);
}

#[test]
fn a_plain_pg_basebackup_restores_into_a_temporary_server_and_round_trips() {
    let d = traversable_tempdir();
    let m = Managed(d.path().to_path_buf());
    let copy = m.0.join("copy");
    let _no_server = NoServerOn(copy.clone());
    let run = |args: &[&str]| sb(&m.0).env("STORBENCH_STATE", m.0.join("state")).args(args).output().unwrap();
    let data = m.0.join("data");
    ok(run(&["pg", "up", "bkp", "--data", data.to_str().unwrap(), "-c", "shared_buffers=32MB"]));
    ok(run(&["tpcc", "build", "--db", "managed:bkp"]));
    let plain = m.0.join("plain");
    ok(run(&["backup", "--db", "managed:bkp", "--method", "basebackup", "--to", plain.to_str().unwrap()]));
    let out = ok(run(&[
        "--json",
        "restore",
        "--from",
        plain.to_str().unwrap(),
        "--to",
        copy.to_str().unwrap(),
        "--database",
        "storbench",
        "--compare",
        "managed:bkp",
    ]));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    physical_restore_figures(&r, size(&plain) as f64);
    // The copy is the server user's, 0700, and was shut down cleanly; its
    // configuration is the backup's, untouched by the temporary server's.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(owner(&copy), uid_of("postgres"));
    assert_eq!(std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777, 0o700);
    // The binaries of the copy's version, found as the restore finds them.
    let bindir = storbench_instances::pg::bindir_for(&copy).unwrap();
    let control = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bindir.join("pg_controldata"))
        .arg(&copy)
        .output()
        .unwrap();
    let control = String::from_utf8_lossy(&control.stdout);
    assert!(
        control.lines().any(|l| l.starts_with("Database cluster state:") && l.ends_with("shut down")),
        "{control}"
    );
    for f in ["postgresql.conf", "postgresql.auto.conf"] {
        assert_eq!(std::fs::read(plain.join(f)).unwrap(), std::fs::read(copy.join(f)).unwrap(), "{f}");
    }
    assert!(servers_on(&copy).is_empty(), "a server was left on {}", copy.display());
    // Without --database every database but the templates is checked:
    // storbench's and postgres.
    // Through a link to the backup: the copy is a directory of its own,
    // and the backup is byte for byte as taken (regression: cp -a copied
    // the link, and the server ran on the backup itself).
    let copy2 = m.0.join("copy2");
    let _no_server2 = NoServerOn(copy2.clone());
    let latest = m.0.join("latest");
    std::os::unix::fs::symlink(&plain, &latest).unwrap();
    let before = fingerprint(&plain);
    let out =
        ok(run(&["--json", "restore", "--from", latest.to_str().unwrap(), "--to", copy2.to_str().unwrap()]));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(metric(&r, "restore.databases"), 2.0);
    assert!(servers_on(&copy2).is_empty());
    assert!(!std::fs::symlink_metadata(&copy2).unwrap().is_symlink(), "the copy is a link");
    assert!(fingerprint(&plain) == before, "restoring through a link changed the backup");
    assert_eq!(metric(&r, "backup.bytes"), size(&plain) as f64, "the link's size, not the backup's");
    // Ctrl-C while the temporary server is up: it is stopped all the same,
    // and the run is interrupted (exit 130).
    let copy3 = m.0.join("copy3");
    let _no_server3 = NoServerOn(copy3.clone());
    let child = restore_until_its_server_runs(&m.0, &plain, &copy3);
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(servers_on(&copy3).is_empty(), "a server was left on {}", copy3.display());
    // SIGKILL while the temporary server is up: nothing of storbench stops
    // it, so the next restore does, and removes the copy it ran on.
    // Regression: the server was in no registry and ran on for good.
    let copy4 = m.0.join("copy4");
    let _no_server4 = NoServerOn(copy4.clone());
    let mut child = restore_until_its_server_runs(&m.0, &plain, &copy4);
    child.kill().unwrap();
    child.wait().unwrap();
    let orphans = servers_on(&copy4);
    assert!(!orphans.is_empty(), "the server did not outlive storbench: the test shows nothing");
    let copy5 = m.0.join("copy5");
    let _no_server5 = NoServerOn(copy5.clone());
    ok(run(&["restore", "--from", plain.to_str().unwrap(), "--to", copy5.to_str().unwrap()]));
    let running: Vec<_> = orphans.iter().filter(|p| alive(**p)).collect();
    assert!(running.is_empty(), "the killed restore's server still runs: {running:?}");
    assert!(!copy4.exists(), "the killed restore's copy {} was left", copy4.display());
    let left: Vec<_> =
        std::fs::read_dir(m.0.join("state/restore")).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The process runs (a zombie only waits to be reaped).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

#[test]
fn a_physical_restore_that_fails_leaves_no_copy_and_no_server() {
    let d = traversable_tempdir();
    let state = d.path().join("state");
    let fail = |from: &Path, to: &Path| {
        let _no_server = NoServerOn(to.to_path_buf());
        let out = sb(d.path())
            .env("STORBENCH_STATE", &state)
            .args(["restore", "--from", from.to_str().unwrap(), "--to", to.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!to.exists(), "the half-made copy {} was left", to.display());
        let work: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("prepare"))
            .collect();
        assert!(work.is_empty(), "a work copy was left: {work:?}");
        assert!(servers_on(to).is_empty(), "a server was left on {}", to.display());
        (out.status.code(), err)
    };
    // A mariadb-backup directory that is not a backup: --prepare refuses it.
    let mb = d.path().join("mb");
    std::fs::create_dir(&mb).unwrap();
    std::fs::write(mb.join("xtrabackup_checkpoints"), b"backup_type = full-backuped\n").unwrap();
    if Command::new("mariadb-backup").arg("--version").output().is_ok() {
        let (code, err) = fail(&mb, &d.path().join("c1"));
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("mariadb-backup --prepare failed"), "{err}");
    }
    // A PostgreSQL data directory with nothing in it but its version: the
    // copy is made, the server will not start on it.
    let pg = d.path().join("pg");
    std::fs::create_dir(&pg).unwrap();
    // The major version of the server binaries here, found as the product finds them.
    let postgres = storbench_instances::pg::find_bindir().unwrap().join("postgres");
    let v = Command::new(postgres).arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&v.stdout).split_whitespace().last().unwrap().to_string();
    std::fs::write(pg.join("PG_VERSION"), format!("{}\n", v.split('.').next().unwrap())).unwrap();
    let (code, err) = fail(&pg, &d.path().join("c2"));
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("starting PostgreSQL on") && err.contains("pg_control"), "{err}");
    let errors = error_lines(&err);
    assert_eq!(errors.len(), 1, "{err}");
    // Both are failed runs, and no run directory is left.
    let out = sb(d.path()).args(["--json", "results", "list"]).output().unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!list.as_array().unwrap().is_empty(), "the failed restores were recorded");
    assert!(
        list.as_array().unwrap().iter().all(|r| r["kind"] == "restore" && r["status"] == "failed"),
        "{list}"
    );
    let left: Vec<_> =
        std::fs::read_dir(state.join("restore")).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_mariadb_backup_to_a_target_too_small_fails_with_one_line_and_leaves_nothing() {
    if missing("mariadb-backup") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let fs = TinyFs::new(d.path());
    // The whole server's files (the mysql schema alone is more than 4 MiB).
    let to = fs.dir.join("mb");
    let out = sb(d.path())
        .args([
            "backup",
            "--db",
            &format!("{MY}/test"),
            "--method",
            "basebackup",
            "--to",
            to.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    let errors = error_lines(&err);
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("mariadb-backup failed") && errors[0].contains("No space left on device"),
        "{err}"
    );
    assert!(!to.exists());
    assert_eq!(runs(d.path()), 1);
}
