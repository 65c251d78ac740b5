//! `storbench backup` and `storbench restore`: a database backup and its
//! restore as measured runs. The engines' own tools do the work
//! (`pg_basebackup`, `pg_dump`/`pg_restore`, `mariadb-dump`/`mariadb`,
//! `mariadb-backup`, SQLite's online backup API and `VACUUM INTO`; a
//! physical backup is restored by starting a temporary server on a copy,
//! see `physical`); storbench only times them,
//! reads their process's I/O and CPU, and records the system monitor's
//! device figures for the same seconds. It never reimplements a tool, and a
//! backup that fails is removed, never reported as a result.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{anyhow, Result};
use clap::{Args, ValueEnum};
use serde_json::json;
use storbench_db::{Connection, Dialect, Engine, Stmt};
use storbench_metrics::{StepReport, Unit};
use storbench_workloads::tpcc;

use crate::cli::Global;
use crate::dbarg::{self, Db};
use crate::error::{target_failed, unreachable, usage};
use crate::record::{Outcome, Recorder};

mod physical;

/// Options of `storbench backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Database URL: sqlite:PATH, postgres://user@host:port/db, mysql://user@host:port/db, managed:NAME.
    #[arg(long, env = "STORBENCH_DB")]
    pub db: String,
    /// Where the backup goes: PATH, or MEDIUM:/path inside a medium made by
    /// `storbench media create`. It must not exist yet; its parent must.
    #[arg(long, value_name = "TARGET[:/path]")]
    pub to: String,
    /// How: basebackup or dump (PostgreSQL and MySQL/MariaDB; default dump),
    /// online or vacuum-into (SQLite; default online). basebackup is a
    /// physical copy of the whole server: pg_basebackup, or mariadb-backup
    /// (on the server's machine: it reads the data directory).
    #[arg(long, value_enum)]
    pub method: Option<Method>,
    /// pg_basebackup's format: a plain data directory or tar files
    /// (mariadb-backup writes a plain directory only).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Parallel jobs (pg_dump -Fd -j N, mariadb-backup --parallel=N).
    #[arg(long, short = 'j', default_value_t = 1)]
    pub jobs: usize,
    /// pg_basebackup's starting checkpoint: fast (storbench's default, so the
    /// time is the copy's) or spread (pg_basebackup's own default, which can
    /// wait checkpoint_completion_target × checkpoint_timeout before copying).
    #[arg(long, value_enum, default_value = "fast")]
    pub checkpoint: Checkpoint,
    /// Compression: pg_basebackup server-side (plain) or client-side (tar);
    /// pg_dump gzip, or lz4 and zstd from pg_dump 16.
    #[arg(long, value_enum, default_value = "none")]
    pub compress: Compress,
}

/// Options of `storbench restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// A backup made by `storbench backup` (PATH or MEDIUM:/path): a pg_dump
    /// directory, a mariadb-dump SQL file, an SQLite file, a mariadb-backup
    /// directory or a plain pg_basebackup directory.
    #[arg(long, value_name = "TARGET[:/path]")]
    pub from: String,
    /// Where to restore (it must not exist yet): a fresh database,
    /// postgres://…/NEWDB, mysql://…/NEWDB, managed:NAME/NEWDB or
    /// sqlite:NEWPATH; for a physical backup (mariadb-backup, pg_basebackup)
    /// a new data directory, PATH or MEDIUM:/path, that a temporary server
    /// is started on, checked and stopped.
    #[arg(long, value_name = "URL | TARGET[:/path]")]
    pub to: String,
    /// Parallel jobs (pg_restore -j N, mariadb-backup --copy-back --parallel=N).
    #[arg(long, short = 'j', default_value_t = 1)]
    pub jobs: usize,
    /// A physical backup holds every database of its server: analyse, count,
    /// check and compare only this one (default: every database but the
    /// server's own: mysql, sys, information_schema, performance_schema;
    /// PostgreSQL's templates).
    #[arg(long, value_name = "NAME")]
    pub database: Option<String>,
    /// Also compare every table's row count (and checksum where the engine
    /// has one) with this database, the backup's source: a difference fails the run.
    #[arg(long, value_name = "URL")]
    pub compare: Option<String>,
}

/// How a backup is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Method {
    /// A physical copy of the whole server: pg_basebackup (PostgreSQL) or
    /// mariadb-backup (MySQL/MariaDB).
    Basebackup,
    /// pg_dump -Fd (PostgreSQL) or mariadb-dump (MySQL/MariaDB): a logical copy.
    Dump,
    /// SQLite's online backup API (page by page, while others may write).
    Online,
    /// SQLite's `VACUUM INTO`: a compacted copy.
    VacuumInto,
}

/// pg_basebackup's starting checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Checkpoint {
    /// Checkpoint at once, at full speed.
    Fast,
    /// Wait for a spread checkpoint, as the server paces them.
    Spread,
}

/// pg_basebackup's output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A data directory a server can start on.
    Plain,
    /// base.tar and pg_wal.tar.
    Tar,
}

/// Compression of the backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compress {
    /// None.
    None,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
    /// gzip.
    Gzip,
}

impl Compress {
    fn name(self) -> &'static str {
        match self {
            Compress::None => "none",
            Compress::Lz4 => "lz4",
            Compress::Zstd => "zstd",
            Compress::Gzip => "gzip",
        }
    }
}

/// The path a `TARGET[:/path]` names: `MEDIUM:/sub` is inside the medium's
/// mount point; anything else is a path as given.
fn resolve_target(s: &str) -> Result<PathBuf> {
    if let Some((name, sub)) = s.split_once(':') {
        if !name.is_empty() && !name.contains('/') {
            let dir = storbench_media::target_dir(name).map_err(|e| usage(format!("{s}: {e}")))?;
            if dir.as_path() == Path::new(name) {
                return Err(usage(format!("{s}: no medium named '{name}' (storbench media list)")));
            }
            return Ok(dir.join(sub.trim_start_matches('/')));
        }
    }
    Ok(PathBuf::from(s))
}

/// The tool as found on PATH or in PostgreSQL's versioned bin directories;
/// a missing tool is bad input naming the Debian package that has it.
fn tool(name: &str, package: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(storbench_instances::pg::debian_bindirs())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| usage(format!("{name} not found on PATH: install the Debian package {package}")))
}

/// A URL component with its `%XX` escapes decoded (a password with `@` or
/// `:` in it is written `%40`, `%3A` in a URL).
fn pct_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// The major version a PostgreSQL tool prints (`pg_dump (PostgreSQL) 15.20 …`).
fn major_version(tool: &Path) -> Option<u32> {
    let out = Command::new(tool).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text.split_whitespace().find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    v.split('.').next()?.parse().ok()
}

/// Connection parts of a server URL, for tools that take them as flags.
struct Server {
    host: String,
    port: Option<String>,
    user: Option<String>,
    password: Option<String>,
    db: String,
}

fn server_parts(db: &Db) -> Result<Server> {
    let rest = db.url.rest();
    let (auth_host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let name = path.split('?').next().unwrap_or("").to_string();
    if name.is_empty() {
        return Err(usage(format!("{}: names no database", db.shown)));
    }
    let (auth, hostport) = match auth_host.rsplit_once('@') {
        Some((a, h)) => (Some(a), h),
        None => (None, auth_host),
    };
    let (user, password) = match auth {
        Some(a) => match a.split_once(':') {
            Some((u, p)) => (Some(pct_decode(u)), Some(pct_decode(p))),
            None => (Some(pct_decode(a)), None),
        },
        None => (None, None),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => {
            (h.to_string(), Some(p.to_string()))
        }
        _ => (hostport.to_string(), None),
    };
    Ok(Server { host, port, user, password, db: name })
}

/// What a finished child used, from the kernel's accounting of waited-for
/// children (`getrusage(RUSAGE_CHILDREN)`, deltas around the run): the
/// tool's own block I/O and CPU, its worker processes included.
#[derive(Default, Clone, Copy)]
struct Usage {
    read_bytes: f64,
    write_bytes: f64,
    user_s: f64,
    sys_s: f64,
}

fn rusage(who: libc::c_int) -> Usage {
    // SAFETY: getrusage fills the zeroed struct we own.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut r) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    // ru_inblock/ru_oublock count 512-byte blocks (read_bytes/write_bytes of /proc/PID/io).
    Usage {
        read_bytes: r.ru_inblock as f64 * 512.0,
        write_bytes: r.ru_oublock as f64 * 512.0,
        user_s: tv(r.ru_utime),
        sys_s: tv(r.ru_stime),
    }
}

fn usage_delta(a: Usage, b: Usage) -> Usage {
    Usage {
        read_bytes: b.read_bytes - a.read_bytes,
        write_bytes: b.write_bytes - a.write_bytes,
        user_s: b.user_s - a.user_s,
        sys_s: b.sys_s - a.sys_s,
    }
}

/// Runs a tool to the end; a failure is one line: the tool, its exit status
/// and the last line it printed (disk full and permission are the target's
/// failure, exit 4).
fn run_tool(mut cmd: Command, what: &str) -> Result<Usage> {
    let before = rusage(libc::RUSAGE_CHILDREN);
    let out = cmd.stderr(Stdio::piped()).output().map_err(|e| anyhow!("starting {what}: {e}"))?;
    let used = usage_delta(before, rusage(libc::RUSAGE_CHILDREN));
    if out.status.success() {
        return Ok(used);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    // mariadb-dump reports a full disk on its stdout as "Got errno 28 on write".
    let target = ["No space left on device", "Permission denied", "errno 28 "];
    // The line that names the target's failure when there is one (mariadb-backup
    // logs a few more after it), else the last.
    let last = err
        .lines()
        .find(|l| target.iter().any(|s| l.contains(s)))
        .or_else(|| err.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("no message")
        .trim();
    let last = storbench_db::redact_text(last);
    let msg = format!("{what} failed ({}): {last}", out.status);
    if target.iter().any(|s| err.contains(s)) {
        Err(target_failed(msg))
    } else if ["pg_hba.conf", "authentication failed", "Connection refused", "Access denied", "Can't connect"]
        .iter()
        .any(|s| err.contains(s))
    {
        // The server refused the tool (a replication entry missing, bad
        // credentials) or is down: an outage, not a failed backup.
        Err(unreachable(msg))
    } else {
        Err(anyhow!(msg))
    }
}

/// Bytes under a path (a file, or a directory's files).
fn size_of(p: &Path) -> u64 {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            std::fs::read_dir(p).map(|rd| rd.flatten().map(|e| size_of(&e.path())).sum()).unwrap_or(0)
        }
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// Removes a failed backup, and for a file SQLite's side files beside it
/// (`-journal`, `-wal`, `-shm`: a copy that hit a full disk leaves its
/// journal behind).
fn remove(p: &Path) {
    if p.is_dir() {
        let _ = std::fs::remove_dir_all(p);
        return;
    }
    let _ = std::fs::remove_file(p);
    for side in ["-journal", "-wal", "-shm"] {
        let mut s = p.as_os_str().to_owned();
        s.push(side);
        let _ = std::fs::remove_file(PathBuf::from(s));
    }
}

/// `db.bytes`: the logical size of what the backup holds, as the engine
/// counts it. A dump holds the URL's database; a basebackup (`whole`) the
/// whole server: every database (PostgreSQL: `pg_database_size` of each,
/// templates too, that the role may connect to; MariaDB: `data_length +
/// index_length` of every schema's tables, `mysql` and `sys` included, but
/// not `information_schema` and `performance_schema`, which have no files).
fn db_bytes(db: &Db, conn: &mut dyn Connection, whole: bool) -> Option<f64> {
    let sql = match conn.dialect() {
        // pg_database_size refuses a database the role may not connect to
        // (and the whole sum with it): those are left out.
        Dialect::Postgres if whole => {
            "SELECT sum(pg_database_size(oid))::float8 FROM pg_database WHERE has_database_privilege(oid, 'CONNECT') OR pg_has_role('pg_read_all_stats', 'MEMBER')"
        }
        Dialect::Postgres => "SELECT pg_database_size(current_database())::float8",
        Dialect::Mysql if whole => {
            "SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS DOUBLE) FROM information_schema.tables WHERE table_schema NOT IN ('information_schema', 'performance_schema')"
        }
        Dialect::Mysql => {
            "SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS DOUBLE) FROM information_schema.tables WHERE table_schema = DATABASE()"
        }
        Dialect::Sqlite => return db.sqlite_path().and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len() as f64),
    };
    conn.query_one(&Stmt::new(sql), &[]).ok()?.float(0).ok()
}

/// Runs `storbench backup`.
pub fn backup(g: &Global, a: BackupArgs) -> Result<ExitCode> {
    // Everything is validated before anything is created.
    if a.jobs == 0 {
        return Err(usage("--jobs 0: must be at least 1"));
    }
    let db = Db::parse(&a.db)?;
    let engine = db.url.engine();
    let method = match (engine, a.method) {
        (Engine::Sqlite, None) => Method::Online,
        // A managed instance is resolved to its PostgreSQL server by now.
        (_, None) => Method::Dump,
        (Engine::Postgres, Some(m @ (Method::Basebackup | Method::Dump))) => m,
        (Engine::Mysql, Some(m @ (Method::Basebackup | Method::Dump))) => m,
        (Engine::Sqlite, Some(m @ (Method::Online | Method::VacuumInto))) => m,
        (_, Some(m)) => {
            let allowed = match engine {
                Engine::Postgres => "basebackup or dump",
                Engine::Mysql => "basebackup or dump",
                _ => "online or vacuum-into",
            };
            let m = m.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
            return Err(usage(format!("--method {m}: {} takes {allowed}", db.shown)));
        }
    };
    if a.format.is_some() && method != Method::Basebackup {
        return Err(usage("--format: only --method basebackup has a format (plain or tar)"));
    }
    if engine == Engine::Mysql && a.format == Some(Format::Tar) {
        return Err(usage("--format tar: mariadb-backup writes a directory (--format plain)"));
    }
    let parallel =
        matches!((engine, method), (Engine::Postgres, Method::Dump) | (Engine::Mysql, Method::Basebackup));
    if a.jobs > 1 && !parallel {
        return Err(usage(format!(
            "--jobs {}: only pg_dump (--method dump on PostgreSQL) and mariadb-backup (--method basebackup on MySQL/MariaDB) run jobs",
            a.jobs
        )));
    }
    if a.compress != Compress::None {
        let ok = match method {
            // mariadb-backup's own --compress (QuickLZ) is deprecated.
            Method::Basebackup => engine == Engine::Postgres,
            // pg_dump's lz4 and zstd need version 16; checked with the tool below.
            Method::Dump if engine == Engine::Postgres => true,
            _ => false,
        };
        if !ok {
            return Err(usage(format!(
                "--compress {}: allowed with PostgreSQL's basebackup and dump only",
                a.compress.name()
            )));
        }
    }
    let out = resolve_target(&a.to)?;
    if out.exists() {
        return Err(usage(format!("--to {}: already exists; give a new path", out.display())));
    }
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(usage(format!(
            "--to {}: the directory {} does not exist",
            out.display(),
            parent.display()
        )));
    }
    let bin = match (engine, method) {
        (Engine::Postgres, Method::Basebackup) => Some(tool("pg_basebackup", "postgresql-client")?),
        (Engine::Postgres, _) => {
            let t = tool("pg_dump", "postgresql-client")?;
            let major = major_version(&t);
            if matches!(a.compress, Compress::Lz4 | Compress::Zstd) && major.is_some_and(|m| m < 16) {
                return Err(usage(format!(
                    "--compress {}: pg_dump {} has gzip only (lz4 and zstd came in 16)",
                    a.compress.name(),
                    major.unwrap_or(0)
                )));
            }
            Some(t)
        }
        (Engine::Mysql, Method::Basebackup) => Some(tool("mariadb-backup", "mariadb-backup")?),
        (Engine::Mysql, _) => Some(tool("mariadb-dump", "mariadb-client")?),
        _ => None,
    };
    if engine == Engine::Sqlite && !db.sqlite_path().is_some_and(|p| p.is_file()) {
        return Err(usage(format!("{}: no such SQLite file", db.shown)));
    }
    let mut conn = db.open()?;
    let env =
        json!({ "db": dbarg::env(&db, conn.as_mut()), "backup_dir": storbench_sysmon::path_env(parent) });
    let mut targets: Vec<_> = dbarg::data_dir(&db, conn.as_mut()).into_iter().collect();
    if engine == Engine::Mysql && method == Method::Basebackup && targets.is_empty() {
        // mariadb-backup copies the files under the server's data directory.
        return Err(usage(format!(
            "--method basebackup: {}'s data directory is not on this machine; mariadb-backup runs where the server does",
            db.shown
        )));
    }
    targets.push(parent.to_path_buf());
    let logical = db_bytes(&db, conn.as_mut(), method == Method::Basebackup);
    drop(conn);
    let method_name = method.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
    let config = json!({
        "db": db.shown, "to": out, "method": method_name, "format": a.format.map(|f| format!("{f:?}").to_lowercase()),
        "tool": bin.as_deref().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned()),
        "jobs": a.jobs, "compress": a.compress.name(),
        "checkpoint": (method == Method::Basebackup && engine == Engine::Postgres)
            .then(|| format!("{:?}", a.checkpoint).to_lowercase()),
    });
    let mut rec =
        Recorder::begin(g, "backup", format!("backup {method_name} of {}", db.shown), config, env, &targets)?;
    // Beside other workloads (a plan's `together` cell): begin with them.
    storbench_metrics::runner::wait_for_start_instant(crate::interrupt::flag());
    let clock = rec.clock();
    let t0 = Instant::now();
    let res = match (engine, method) {
        (Engine::Sqlite, m) => sqlite_backup(&db, &out, m),
        (Engine::Postgres, Method::Basebackup) => {
            let mut c = Command::new(bin.as_ref().expect("found above"));
            pg_conn(&mut c, &db);
            c.arg("-D").arg(&out).arg("-X").arg("stream").arg("--no-sync");
            c.arg(match a.checkpoint {
                Checkpoint::Fast => "--checkpoint=fast",
                Checkpoint::Spread => "--checkpoint=spread",
            });
            c.arg(match a.format.unwrap_or(Format::Plain) {
                Format::Plain => "-Fp",
                Format::Tar => "-Ft",
            });
            if a.compress != Compress::None {
                // Plain output can only be compressed on the server (the client
                // unpacks it); tar output is compressed by the client.
                let side = if a.format == Some(Format::Tar) { "client" } else { "server" };
                c.arg(format!("--compress={side}-{}", a.compress.name()));
            }
            run_tool(c, "pg_basebackup")
        }
        (Engine::Postgres, _) => {
            let mut c = Command::new(bin.as_ref().expect("found above"));
            pg_conn(&mut c, &db);
            c.arg("-Fd").arg("-j").arg(a.jobs.to_string()).arg("-f").arg(&out);
            // -Z LEVEL is gzip in every version; --compress=METHOD from 16.
            match a.compress {
                Compress::None => c.arg("-Z0"),
                Compress::Gzip => c.arg("-Z6"),
                m => c.arg(format!("--compress={}", m.name())),
            };
            run_tool(c, "pg_dump")
        }
        (_, Method::Basebackup) => {
            let s = server_parts(&db)?;
            let mut c = Command::new(bin.as_ref().expect("found above"));
            // --no-defaults (first: the tool reads it there only): none of
            // the host's option files (/etc/my.cnf, /etc/mysql/my.cnf,
            // ~/.my.cnf), whose [mariadb-backup] group could leave databases
            // out or send the copy elsewhere. The data directory and InnoDB
            // layout are the server's own: the tool asks it for them.
            c.arg("--no-defaults").arg("--backup").arg(format!("--target-dir={}", out.display()));
            mysql_conn_args(&mut c, &s);
            c.arg(format!("--parallel={}", a.jobs));
            run_tool(c, "mariadb-backup")
        }
        _ => mysql_dump(&db, bin.as_ref().expect("found above"), &out),
    };
    let elapsed = t0.elapsed().as_secs_f64();
    let used = match res {
        Ok(u) => u,
        Err(e) => {
            // Never leave a half-backup behind to be mistaken for one.
            remove(&out);
            // Ctrl-C reaches the tool too (same process group): it is an
            // interruption, not a failure of the backup.
            if crate::interrupt::requested() {
                return rec.finish(Outcome::Interrupted);
            }
            return rec.finish(Outcome::Failed(e.context(format!(
                "backup of {} to {}",
                db.shown,
                out.display()
            ))));
        }
    };
    if crate::interrupt::requested() {
        remove(&out);
        return rec.finish(Outcome::Interrupted);
    }
    let bytes = size_of(&out) as f64;
    let mut r = StepReport::default();
    r.figure("backup.seconds", elapsed, Unit::S);
    r.figure("backup.bytes", bytes, Unit::Bytes);
    r.figure("backup.mb_per_s", bytes / 1e6 / elapsed.max(1e-9), Unit::MBps);
    if let Some(l) = logical {
        r.figure("db.bytes", l, Unit::Bytes);
        r.figure("logical.mb_per_s", l / 1e6 / elapsed.max(1e-9), Unit::MBps);
    }
    tool_figures(&mut r, used);
    rec.write_step(clock, "backup", json!({ "method": method_name }), r)?;
    // The result: on stdout (stderr with --json), whatever --quiet says.
    crate::oltp::result(
        g,
        format!(
            "backup: {method_name} of {} to {}: {:.1} MB in {elapsed:.2} s ({:.1} MB/s written)",
            db.shown,
            out.display(),
            bytes / 1e6,
            bytes / 1e6 / elapsed.max(1e-9)
        ),
    );
    rec.finish(Outcome::Complete)
}

fn tool_figures(r: &mut StepReport, u: Usage) {
    r.figure("tool.read_bytes", u.read_bytes, Unit::Bytes);
    r.figure("tool.write_bytes", u.write_bytes, Unit::Bytes);
    r.figure("tool.cpu.user", u.user_s, Unit::S);
    r.figure("tool.cpu.sys", u.sys_s, Unit::S);
}

/// SQLite: the online backup API, or `VACUUM INTO`, in this process; the
/// figures are this process's own I/O and CPU over the copy.
fn sqlite_backup(db: &Db, out: &Path, method: Method) -> Result<Usage> {
    let before = rusage(libc::RUSAGE_SELF);
    let src = rusqlite::Connection::open_with_flags(
        db.sqlite_path().expect("an SQLite URL"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )?;
    let res = match method {
        Method::VacuumInto => src.execute("VACUUM INTO ?1", [out.to_string_lossy().as_ref()]).map(|_| ()),
        _ => src.backup(rusqlite::MAIN_DB, out, None::<fn(rusqlite::backup::Progress)>),
    };
    res.map_err(|e| {
        let msg =
            format!("SQLite {}: {e}", if method == Method::VacuumInto { "VACUUM INTO" } else { "backup" });
        let full = matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DiskFull))
            || matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
            );
        if full {
            target_failed(msg)
        } else {
            anyhow!(msg)
        }
    })?;
    Ok(usage_delta(before, rusage(libc::RUSAGE_SELF)))
}

/// mariadb-dump of one database into one SQL file (password through the
/// environment, never on the command line).
fn mysql_dump(db: &Db, bin: &Path, out: &Path) -> Result<Usage> {
    let s = server_parts(db)?;
    let file = File::create(out).map_err(|e| target_failed(format!("creating {}: {e}", out.display())))?;
    let mut c = Command::new(bin);
    mysql_conn_args(&mut c, &s);
    // The database as a plain argument (not --databases): the dump then
    // neither creates nor selects a database, so it restores into any name.
    c.args(["--single-transaction", "--routines", "--triggers"]).arg(&s.db);
    c.stdout(file);
    run_tool(c, "mariadb-dump")
}

/// The connection for a PostgreSQL tool: the URL without its password on
/// the command line (where `ps` shows it), the password in `PGPASSWORD`.
fn pg_conn(c: &mut Command, db: &Db) {
    let raw = db.url.expose();
    let (scheme, rest) = raw.split_once("://").unwrap_or(("postgres", raw));
    let (hostpart, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    let mut url = raw.to_string();
    if let Some((auth, host)) = hostpart.rsplit_once('@') {
        if let Some((user, pass)) = auth.split_once(':') {
            url = format!("{scheme}://{user}@{host}/{path}");
            c.env("PGPASSWORD", pct_decode(pass));
        }
    }
    c.arg("--dbname").arg(url);
}

fn mysql_conn_args(c: &mut Command, s: &Server) {
    c.arg(format!("--host={}", s.host));
    if let Some(p) = &s.port {
        c.arg(format!("--port={p}"));
    }
    if let Some(u) = &s.user {
        c.arg(format!("--user={u}"));
    }
    match &s.password {
        Some(p) => c.env("MYSQL_PWD", p),
        None => c.env_remove("MYSQL_PWD"),
    };
}

/// What a backup path holds, told from its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    PgDump,
    /// A plain pg_basebackup: a data directory.
    PgBase,
    /// A tar pg_basebackup (base.tar and pg_wal.tar, compressed or not).
    PgBaseTar,
    MysqlSql,
    /// A mariadb-backup directory.
    MariaBackup,
    Sqlite,
}

fn kind_of(p: &Path) -> Result<Kind> {
    if p.is_dir() {
        if p.join("toc.dat").is_file() {
            return Ok(Kind::PgDump);
        }
        if p.join("PG_VERSION").is_file() {
            return Ok(Kind::PgBase);
        }
        let tar = std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("base.tar"));
        if tar || p.join("backup_manifest").is_file() {
            return Ok(Kind::PgBaseTar);
        }
        // mariadb-backup's checkpoints file (renamed from xtrabackup_ in 11.x).
        if ["xtrabackup_checkpoints", "mariadb_backup_checkpoints"].iter().any(|f| p.join(f).is_file()) {
            return Ok(Kind::MariaBackup);
        }
    } else if p.is_file() {
        let mut head = [0u8; 64];
        let n = File::open(p).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
        let head = &head[..n];
        if head.starts_with(b"SQLite format 3\0") {
            return Ok(Kind::Sqlite);
        }
        let text = String::from_utf8_lossy(head);
        if text.contains("MariaDB dump") || text.contains("MySQL dump") {
            return Ok(Kind::MysqlSql);
        }
    } else {
        return Err(usage(format!("--from {}: no such file or directory", p.display())));
    }
    Err(usage(format!(
        "--from {}: not a backup storbench knows (a pg_dump directory, a mariadb-dump SQL file, an SQLite file, a mariadb-backup directory or a plain pg_basebackup)",
        p.display()
    )))
}

/// `name` as a database name storbench will create: letters, digits, `_`.
fn check_name(shown: &str, name: &str) -> Result<()> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(usage(format!("--to {shown}: database name '{name}' must be letters, digits and _")));
    }
    Ok(())
}

/// The same server URL naming another database.
pub(crate) fn with_database(db: &Db, name: &str) -> Result<Db> {
    let raw = db.url.expose();
    let (scheme, rest) = raw.split_once("://").expect("a server URL");
    let (hostpart, path) = rest.split_once('/').unwrap_or((rest, ""));
    let query = path.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
    Db::parse(&format!("{scheme}://{hostpart}/{name}{query}"))
}

/// The instance and database of a `managed:NAME/DB` URL.
pub(crate) fn managed_database(s: &str) -> Option<(&str, &str)> {
    s.strip_prefix("managed:").and_then(|r| r.split_once('/'))
}

/// A URL, or `managed:NAME/DB`: the database DB in the managed instance
/// NAME (whose own URL names its `storbench` database), shown as given.
pub(crate) fn managed_or_url(s: &str) -> Result<Db> {
    if let Some((inst, name)) = managed_database(s) {
        let mut db = with_database(&Db::parse(&format!("managed:{inst}"))?, name)?;
        db.shown = s.to_string();
        return Ok(db);
    }
    Db::parse(s)
}

/// Runs `storbench restore`.
pub fn restore(g: &Global, a: RestoreArgs) -> Result<ExitCode> {
    if a.jobs == 0 {
        return Err(usage("--jobs 0: must be at least 1"));
    }
    let from = resolve_target(&a.from)?;
    let kind = kind_of(&from)?;
    if matches!(kind, Kind::PgBase | Kind::PgBaseTar | Kind::MariaBackup) {
        return physical::restore(g, a, kind, &from);
    }
    if let Some(d) = &a.database {
        return Err(usage(format!(
            "--database {d}: only a physical backup (mariadb-backup, pg_basebackup) holds several databases"
        )));
    }
    // A fresh database DB in the managed instance NAME with managed:NAME/DB.
    let db = managed_or_url(&a.to)?;
    let engine = db.url.engine();
    let want = match kind {
        Kind::PgDump => Engine::Postgres,
        Kind::MysqlSql => Engine::Mysql,
        Kind::Sqlite => Engine::Sqlite,
        Kind::PgBase | Kind::PgBaseTar | Kind::MariaBackup => unreachable!("restored by physical::restore"),
    };
    if engine != want {
        return Err(usage(format!("--to {}: the backup in {} is for {want:?}", db.shown, from.display())));
    }
    if a.jobs > 1 && kind != Kind::PgDump {
        return Err(usage(format!("--jobs {}: only pg_restore runs jobs", a.jobs)));
    }
    let compare = a.compare.as_deref().map(Db::parse).transpose()?;
    let bin = match kind {
        Kind::PgDump => Some(tool("pg_restore", "postgresql-client")?),
        Kind::MysqlSql => Some(tool("mariadb", "mariadb-client")?),
        _ => None,
    };
    // The fresh database must not exist; its server's maintenance database
    // is where it is made.
    let admin = match engine {
        Engine::Sqlite => {
            let p = db.sqlite_path().expect("an SQLite URL");
            if p.exists() {
                return Err(usage(format!("--to {}: already exists; give a new file", db.shown)));
            }
            None
        }
        _ => {
            let name =
                db.url.database().ok_or_else(|| usage(format!("--to {}: names no database", db.shown)))?;
            check_name(&db.shown, name)?;
            let admin = with_database(&db, if engine == Engine::Postgres { "postgres" } else { "mysql" })?;
            let mut c = admin.open()?;
            let q = if engine == Engine::Postgres {
                format!("SELECT 1 FROM pg_database WHERE datname = '{name}'")
            } else {
                format!("SELECT 1 FROM information_schema.schemata WHERE schema_name = '{name}'")
            };
            if c.query_opt(&Stmt::new(q), &[]).map_err(|e| admin.error(e))?.is_some() {
                return Err(usage(format!(
                    "--to {}: database '{name}' already exists; restore makes a fresh one",
                    db.shown
                )));
            }
            Some((admin, c, name.to_string()))
        }
    };
    let backup_bytes = size_of(&from) as f64;
    let config = json!({ "from": from, "to": db.shown, "jobs": a.jobs, "kind": format!("{kind:?}") });
    let mut targets = vec![from.parent().unwrap_or(Path::new(".")).to_path_buf()];
    if let Some(p) = db.sqlite_path().and_then(|p| p.parent().map(Path::to_path_buf)) {
        targets.push(if p.as_os_str().is_empty() { PathBuf::from(".") } else { p });
    }
    let mut env =
        json!({ "backup_bytes": backup_bytes, "from_dir": storbench_sysmon::path_env(&targets[0]) });
    // The server restored into: its engine and version, and its data
    // directory's device for the monitor (the writes of a restore land there).
    let mut admin = admin;
    if let Some((adb, c, _)) = admin.as_mut() {
        let mut e = dbarg::env(adb, c.as_mut());
        e["url"] = json!(db.shown);
        env["db"] = e;
        targets.extend(dbarg::data_dir(adb, c.as_mut()));
    }
    let mut rec = Recorder::begin(
        g,
        "restore",
        format!("restore {} into {}", from.display(), db.shown),
        config,
        env,
        &targets,
    )?;
    let clock = rec.clock();
    let t0 = Instant::now();
    let res = do_restore(&db, kind, &from, a.jobs, bin.as_deref(), admin, t0);
    let (mut r, mut conn) = match res {
        Ok(x) => x,
        Err(e) => {
            // A half-loaded copy is not left to be taken for a restore.
            drop_copy(&db);
            return rec.finish(Outcome::Failed(e.context(format!(
                "restore of {} into {}",
                from.display(),
                db.shown
            ))));
        }
    };
    r.figure("backup.bytes", backup_bytes, Unit::Bytes);
    if let Some(s) = r.get("restore.ready_seconds") {
        r.figure("restore.mb_per_s", backup_bytes / 1e6 / s.max(1e-9), Unit::MBps);
    }
    // Integrity: a copy that loses rows or breaks a TPC-C condition is an error.
    let verdict = verify(&db, conn.as_mut(), compare.as_ref(), &mut r);
    rec.write_step(clock, "restore", json!({ "jobs": a.jobs }), r.clone())?;
    if let Err(e) = verdict {
        return rec.finish(Outcome::Failed(e));
    }
    crate::oltp::result(
        g,
        format!(
            "restore: {} into {}: open after {:.2} s, ready (indexes, ANALYZE) after {:.2} s",
            from.display(),
            db.shown,
            r.get("restore.open_seconds").unwrap_or(0.0),
            r.get("restore.ready_seconds").unwrap_or(0.0)
        ),
    );
    rec.finish(Outcome::Complete)
}

/// Drops the database (or removes the file) a failed restore made.
fn drop_copy(db: &Db) {
    match db.url.engine() {
        Engine::Sqlite => {
            if let Some(p) = db.sqlite_path() {
                remove(&p);
            }
        }
        engine => {
            let (Some(name), Ok(admin)) = (
                db.url.database(),
                with_database(db, if engine == Engine::Postgres { "postgres" } else { "mysql" }),
            ) else {
                return;
            };
            if let Ok(mut c) = admin.open() {
                let force = if engine == Engine::Postgres { " WITH (FORCE)" } else { "" };
                let _ = c.batch(&format!("DROP DATABASE IF EXISTS {name}{force}"));
            }
        }
    }
}

type Admin = Option<(Db, Box<dyn Connection>, String)>;

/// Makes the fresh database, loads the backup and analyses it; returns the
/// figures and a connection to the copy.
fn do_restore(
    db: &Db,
    kind: Kind,
    from: &Path,
    jobs: usize,
    bin: Option<&Path>,
    admin: Admin,
    t0: Instant,
) -> Result<(StepReport, Box<dyn Connection>)> {
    let mut r = StepReport::default();
    let used;
    let mut conn;
    match kind {
        Kind::Sqlite => {
            let before = rusage(libc::RUSAGE_SELF);
            let dst = db.sqlite_path().expect("an SQLite URL");
            let mut out = rusqlite::Connection::open(&dst)
                .map_err(|e| target_failed(format!("creating {}: {e}", dst.display())))?;
            out.restore(rusqlite::MAIN_DB, from, None::<fn(rusqlite::backup::Progress)>).map_err(|e| {
                remove(&dst);
                target_failed(format!("SQLite restore into {}: {e}", dst.display()))
            })?;
            drop(out);
            conn = db.open()?;
            r.figure("restore.open_seconds", t0.elapsed().as_secs_f64(), Unit::S);
            used = usage_delta(before, rusage(libc::RUSAGE_SELF));
        }
        _ => {
            let (admin, mut ac, name) = admin.expect("a server restore has an admin connection");
            ac.batch(&format!("CREATE DATABASE {name}")).map_err(|e| admin.error(e))?;
            conn = db.open()?;
            r.figure("restore.open_seconds", t0.elapsed().as_secs_f64(), Unit::S);
            let bin = bin.expect("found above");
            let mut c = Command::new(bin);
            if kind == Kind::PgDump {
                pg_conn(&mut c, db);
                c.arg("-j").arg(jobs.to_string()).arg("--no-owner").arg(from);
                c.arg("--exit-on-error");
                used = run_tool(c, "pg_restore")?;
            } else {
                let s = server_parts(db)?;
                mysql_conn_args(&mut c, &s);
                c.arg(&s.db);
                c.stdin(File::open(from).map_err(|e| anyhow!("opening {}: {e}", from.display()))?);
                used = run_tool(c, "mariadb")?;
            }
        }
    }
    r.figure(
        "restore.load_seconds",
        t0.elapsed().as_secs_f64() - r.get("restore.open_seconds").unwrap_or(0.0),
        Unit::S,
    );
    let t_an = Instant::now();
    analyze(db, conn.as_mut())?;
    r.figure("restore.analyze_seconds", t_an.elapsed().as_secs_f64(), Unit::S);
    r.figure("restore.ready_seconds", t0.elapsed().as_secs_f64(), Unit::S);
    tool_figures(&mut r, used);
    Ok((r, conn))
}

/// Statistics for every table of the connected database, as a restore
/// must gather them before it is ready for queries.
fn analyze(db: &Db, conn: &mut dyn Connection) -> Result<()> {
    match conn.dialect() {
        Dialect::Mysql => {
            for t in tables(conn)? {
                conn.query(&Stmt::new(format!("ANALYZE TABLE `{t}`")), &[]).map_err(|e| db.error(e))?;
            }
        }
        _ => conn.batch("ANALYZE").map_err(|e| db.error(e))?,
    }
    Ok(())
}

/// The base tables of the connected database.
fn tables(conn: &mut dyn Connection) -> Result<Vec<String>> {
    let sql = match conn.dialect() {
        Dialect::Postgres => {
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        }
        Dialect::Mysql => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY 1"
        }
        Dialect::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY 1"
        }
    };
    let rows = conn.query(&Stmt::new(sql), &[]).map_err(|e| anyhow!("listing tables: {e}"))?;
    rows.iter().map(|r| r.text(0).map_err(|e| anyhow!("listing tables: {e}"))).collect()
}

/// Row count and, where the engine has one, a checksum of a table.
fn table_sum(conn: &mut dyn Connection, t: &str) -> Result<(i64, String)> {
    let (count, sum) = match conn.dialect() {
        Dialect::Postgres => (
            format!("SELECT count(*) FROM \"{t}\""),
            // An order-free sum of each row's 64-bit hash (as numeric, no
            // overflow): constant memory, unlike aggregating every row's text.
            Some(format!(
                "SELECT coalesce(sum(('x' || substr(md5(x::text), 1, 16))::bit(64)::bigint), 0)::text FROM \"{t}\" x"
            )),
        ),
        Dialect::Mysql => (format!("SELECT COUNT(*) FROM `{t}`"), Some(format!("CHECKSUM TABLE `{t}`"))),
        Dialect::Sqlite => (format!("SELECT count(*) FROM \"{t}\""), None),
    };
    let n = conn
        .query_one(&Stmt::new(count), &[])
        .and_then(|r| r.int(0))
        .map_err(|e| anyhow!("counting {t}: {e}"))?;
    let s = match sum {
        Some(q) => {
            let row = conn.query_one(&Stmt::new(q), &[]).map_err(|e| anyhow!("checksum of {t}: {e}"))?;
            // CHECKSUM TABLE gives (table, checksum).
            let i = if conn.dialect() == Dialect::Mysql { 1 } else { 0 };
            row.text(i).unwrap_or_default()
        }
        None => String::new(),
    };
    Ok((n, s))
}

/// Checks the copy: TPC-C's consistency conditions when it holds that
/// schema, and with `--compare` every table's rows and checksum against
/// the source. Records `restore.rows` and `restore.tables`.
fn verify(db: &Db, conn: &mut dyn Connection, compare: Option<&Db>, r: &mut StepReport) -> Result<()> {
    let names = tables(conn)?;
    let mut rows = 0i64;
    let mut copy = Vec::new();
    for t in &names {
        let s = table_sum(conn, t)?;
        rows += s.0;
        copy.push((t.clone(), s));
    }
    r.figure("restore.tables", names.len() as f64, Unit::Count);
    r.figure("restore.rows", rows as f64, Unit::Count);
    if tpcc::inspect(conn).map_err(|e| db.error(e))?.is_some() {
        let res = tpcc::check(conn).map_err(|e| anyhow!("tpcc check of {}: {e}", db.shown))?;
        let failed: Vec<String> =
            res.iter().filter(|c| !c.passed).map(|c| format!("{} ({})", c.number, c.detail)).collect();
        r.figure("restore.tpcc_check_failed", failed.len() as f64, Unit::Count);
        if !failed.is_empty() {
            return Err(anyhow!(
                "the restored copy {} fails TPC-C condition(s) {}",
                db.shown,
                failed.join(", ")
            ));
        }
    }
    if let Some(src) = compare {
        let mut sc = src.open()?;
        let mut lost = Vec::new();
        for t in tables(sc.as_mut())? {
            let want = table_sum(sc.as_mut(), &t)?;
            match copy.iter().find(|(n, _)| *n == t) {
                None => lost.push(format!("{t} missing")),
                Some((_, got)) if got.0 != want.0 => {
                    lost.push(format!("{t} has {} rows, source {}", got.0, want.0))
                }
                Some((_, got)) if got.1 != want.1 => lost.push(format!("{t} checksum differs")),
                _ => {}
            }
        }
        if !lost.is_empty() {
            return Err(anyhow!(
                "the restored copy {} differs from {}: {}",
                db.shown,
                src.shown,
                lost.join("; ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_tool_gets_the_password_in_its_environment_not_its_arguments() {
        let db = Db::parse("postgres://bob:p%40ss@db.example:5433/shop?sslmode=disable").unwrap();
        let mut c = Command::new("pg_dump");
        pg_conn(&mut c, &db);
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["--dbname", "postgres://bob@db.example:5433/shop?sslmode=disable"]);
        let env: Vec<_> = c.get_envs().collect();
        assert_eq!(env, [(std::ffi::OsStr::new("PGPASSWORD"), Some(std::ffi::OsStr::new("p@ss")))]);
    }

    #[test]
    fn a_mariadb_tool_gets_the_password_in_its_environment_not_its_arguments() {
        // mariadb-dump and mariadb-backup alike (mariadb-backup reads MYSQL_PWD too).
        let s = server_parts(&Db::parse("mysql://root:se%3Acr%40t@127.0.0.1:3306/tpcc").unwrap()).unwrap();
        let mut c = Command::new("mariadb-backup");
        mysql_conn_args(&mut c, &s);
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["--host=127.0.0.1", "--port=3306", "--user=root"]);
        let env: Vec<_> = c.get_envs().collect();
        assert_eq!(env, [(std::ffi::OsStr::new("MYSQL_PWD"), Some(std::ffi::OsStr::new("se:cr@t")))]);
    }

    #[test]
    fn a_percent_escape_is_decoded_and_a_broken_one_kept_as_written() {
        assert_eq!(pct_decode("a%40b%3ac%2F"), "a@b:c/");
        assert_eq!(pct_decode("100%"), "100%");
        assert_eq!(pct_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn a_mysql_url_splits_into_the_tools_flags() {
        let s = server_parts(&Db::parse("mysql://root:a%3Ab@127.0.0.1:3307/tpcc").unwrap()).unwrap();
        assert_eq!(
            (s.host.as_str(), s.port.as_deref(), s.user.as_deref(), s.password.as_deref(), s.db.as_str()),
            ("127.0.0.1", Some("3307"), Some("root"), Some("a:b"), "tpcc")
        );
        let s = server_parts(&Db::parse("mysql://localhost/x").unwrap()).unwrap();
        assert_eq!((s.host.as_str(), s.port, s.user, s.password), ("localhost", None, None, None));
    }

    #[test]
    fn a_medium_target_is_inside_its_mount_point_and_a_path_is_as_given() {
        assert_eq!(resolve_target("/backups/a").unwrap(), PathBuf::from("/backups/a"));
        assert_eq!(resolve_target("rel/b.sql").unwrap(), PathBuf::from("rel/b.sql"));
        let e = resolve_target("nosuchmedium-xyz:/a").unwrap_err();
        assert!(e.to_string().contains("'nosuchmedium-xyz' is neither a medium"), "{e}");
    }
}
