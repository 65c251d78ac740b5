//! Taking a backup: [`Backup::plan`] checks the options against the engine
//! and finds the tool (creating nothing), [`Backup::inspect`] reads what the
//! server holds, and [`Backup::run`] runs the tool (or SQLite's API in this
//! process) and returns the step's figures. A backup that fails or is
//! interrupted is removed, never left to be taken for one.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use storbench_db::{Connection, Dialect, Engine, Stmt};
use storbench_metrics::{StepReport, Unit};

use super::tools::{
    major_version, mysql_conn_args, pg_conn, remove, run_tool, server_parts, size_of, tool, Usage,
};
use super::{resolve_target, BackupError, Database};

/// How a backup is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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

impl Method {
    /// The method's name as `--method` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Method::Basebackup => "basebackup",
            Method::Dump => "dump",
            Method::Online => "online",
            Method::VacuumInto => "vacuum-into",
        }
    }
}

/// pg_basebackup's starting checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Checkpoint {
    /// Checkpoint at once, at full speed.
    Fast,
    /// Wait for a spread checkpoint, as the server paces them.
    Spread,
}

/// pg_basebackup's output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// A data directory a server can start on.
    Plain,
    /// base.tar and pg_wal.tar.
    Tar,
}

/// Compression of the backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// The compression's name as `--compress` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Compress::None => "none",
            Compress::Lz4 => "lz4",
            Compress::Zstd => "zstd",
            Compress::Gzip => "gzip",
        }
    }
}

/// Where to back up to and how (the database is [`Backup::plan`]'s own
/// argument, so a front end holds these beside the URL it has yet to
/// resolve).
pub struct BackupOptions {
    /// Where the backup goes: PATH or MEDIUM:/path; it must not exist yet.
    pub to: String,
    /// How; the engine's default when not given (dump, or SQLite's online).
    pub method: Option<Method>,
    /// pg_basebackup's format.
    pub format: Option<Format>,
    /// Parallel jobs (pg_dump, mariadb-backup), at least 1.
    pub jobs: usize,
    /// pg_basebackup's starting checkpoint.
    pub checkpoint: Checkpoint,
    /// Compression.
    pub compress: Compress,
}

/// A backup checked and ready to run.
pub struct Backup {
    db: Database,
    o: BackupOptions,
    method: Method,
    out: PathBuf,
    parent: PathBuf,
    bin: Option<PathBuf>,
    logical: Option<f64>,
}

/// The method, the engine's default when none is given; a method the
/// engine has not is bad input.
fn method_for(db: &Database, method: Option<Method>) -> Result<Method, BackupError> {
    let engine = db.url.engine();
    Ok(match (engine, method) {
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
            return Err(BackupError::Usage(format!("--method {}: {} takes {allowed}", m.name(), db.shown)));
        }
    })
}

/// The format, jobs and compression the engine and method allow.
fn check_flags(engine: Engine, o: &BackupOptions, method: Method) -> Result<(), BackupError> {
    let usage = |m: String| Err(BackupError::Usage(m));
    if o.format.is_some() && method != Method::Basebackup {
        return usage("--format: only --method basebackup has a format (plain or tar)".into());
    }
    if engine == Engine::Mysql && o.format == Some(Format::Tar) {
        return usage("--format tar: mariadb-backup writes a directory (--format plain)".into());
    }
    let parallel =
        matches!((engine, method), (Engine::Postgres, Method::Dump) | (Engine::Mysql, Method::Basebackup));
    if o.jobs > 1 && !parallel {
        return usage(format!(
            "--jobs {}: only pg_dump (--method dump on PostgreSQL) and mariadb-backup (--method basebackup on MySQL/MariaDB) run jobs",
            o.jobs
        ));
    }
    if o.compress != Compress::None {
        let ok = match method {
            // mariadb-backup's own --compress (QuickLZ) is deprecated.
            Method::Basebackup => engine == Engine::Postgres,
            // pg_dump's lz4 and zstd need version 16; checked with the tool.
            Method::Dump if engine == Engine::Postgres => true,
            _ => false,
        };
        if !ok {
            return usage(format!(
                "--compress {}: allowed with PostgreSQL's basebackup and dump only",
                o.compress.name()
            ));
        }
    }
    Ok(())
}

/// The tool that takes the backup (none for SQLite: this process does).
fn tool_for(engine: Engine, method: Method, compress: Compress) -> Result<Option<PathBuf>, BackupError> {
    Ok(match (engine, method) {
        (Engine::Postgres, Method::Basebackup) => Some(tool("pg_basebackup", "postgresql-client")?),
        (Engine::Postgres, _) => {
            let t = tool("pg_dump", "postgresql-client")?;
            let major = major_version(&t);
            if matches!(compress, Compress::Lz4 | Compress::Zstd) && major.is_some_and(|m| m < 16) {
                return Err(BackupError::Usage(format!(
                    "--compress {}: pg_dump {} has gzip only (lz4 and zstd came in 16)",
                    compress.name(),
                    major.unwrap_or(0)
                )));
            }
            Some(t)
        }
        (Engine::Mysql, Method::Basebackup) => Some(tool("mariadb-backup", "mariadb-backup")?),
        (Engine::Mysql, _) => Some(tool("mariadb-dump", "mariadb-client")?),
        _ => None,
    })
}

impl Backup {
    /// Checks everything before anything is created: the method, format,
    /// jobs and compression against the engine, the target (new, its
    /// parent there), the tool (found, its version able), an SQLite file
    /// that exists.
    pub fn plan(db: Database, o: BackupOptions) -> Result<Backup, BackupError> {
        let engine = db.url.engine();
        let method = method_for(&db, o.method)?;
        check_flags(engine, &o, method)?;
        let out = resolve_target(&o.to)?;
        if out.exists() {
            return Err(BackupError::Usage(format!(
                "--to {}: already exists; give a new path",
                out.display()
            )));
        }
        let parent =
            out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        if !parent.is_dir() {
            return Err(BackupError::Usage(format!(
                "--to {}: the directory {} does not exist",
                out.display(),
                parent.display()
            )));
        }
        let bin = tool_for(engine, method, o.compress)?;
        if engine == Engine::Sqlite && !db.sqlite_path().is_some_and(|p| p.is_file()) {
            return Err(BackupError::Usage(format!("{}: no such SQLite file", db.shown)));
        }
        Ok(Backup { db, o, method, out, parent, bin, logical: None })
    }

    /// The options it was planned with.
    pub fn options(&self) -> &BackupOptions {
        &self.o
    }

    /// The method (the engine's default when none was given).
    pub fn method(&self) -> Method {
        self.method
    }

    /// Where the backup goes.
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// The directory the backup is made in.
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// The tool's file name (none for SQLite).
    pub fn tool_name(&self) -> Option<String> {
        self.bin.as_deref().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned())
    }

    /// Reads what the backup will hold (`db.bytes`) over `conn`;
    /// `data_dir_here` says whether the server's data directory is on this
    /// machine, which mariadb-backup needs.
    pub fn inspect(&mut self, conn: &mut dyn Connection, data_dir_here: bool) -> Result<(), BackupError> {
        if self.db.url.engine() == Engine::Mysql && self.method == Method::Basebackup && !data_dir_here {
            // mariadb-backup copies the files under the server's data directory.
            return Err(BackupError::Usage(format!(
                "--method basebackup: {}'s data directory is not on this machine; mariadb-backup runs where the server does",
                self.db.shown
            )));
        }
        self.logical = db_bytes(&self.db, conn, self.method == Method::Basebackup);
        Ok(())
    }

    /// Takes the backup and returns its figures: `backup.seconds`,
    /// `backup.bytes`, `backup.mb_per_s`, `db.bytes` and `logical.mb_per_s`
    /// when known, and the tool's I/O and CPU. A backup that fails, or that
    /// ends after `interrupted` was raised, is removed.
    pub fn run(&self, interrupted: &AtomicBool) -> Result<StepReport, BackupError> {
        let t0 = Instant::now();
        let res = self.take();
        let elapsed = t0.elapsed().as_secs_f64();
        let used = match res {
            Ok(u) => u,
            Err(e) => {
                // Never leave a half-backup behind to be mistaken for one.
                remove(&self.out);
                return Err(e);
            }
        };
        if interrupted.load(Ordering::Relaxed) {
            remove(&self.out);
            return Err(BackupError::Interrupted);
        }
        let bytes = size_of(&self.out) as f64;
        let mut r = StepReport::default();
        r.figure("backup.seconds", elapsed, Unit::S);
        r.figure("backup.bytes", bytes, Unit::Bytes);
        r.figure("backup.mb_per_s", bytes / 1e6 / elapsed.max(1e-9), Unit::MBps);
        if let Some(l) = self.logical {
            r.figure("db.bytes", l, Unit::Bytes);
            r.figure("logical.mb_per_s", l / 1e6 / elapsed.max(1e-9), Unit::MBps);
        }
        used.figures(&mut r);
        Ok(r)
    }

    /// Runs the tool (or SQLite's API).
    fn take(&self) -> Result<Usage, BackupError> {
        let (o, db, out) = (&self.o, &self.db, &self.out);
        let bin = || self.bin.as_ref().expect("found by plan");
        match (db.url.engine(), self.method) {
            (Engine::Sqlite, m) => sqlite_backup(db, out, m),
            (Engine::Postgres, Method::Basebackup) => {
                let mut c = Command::new(bin());
                pg_conn(&mut c, db);
                c.arg("-D").arg(out).arg("-X").arg("stream").arg("--no-sync");
                c.arg(match o.checkpoint {
                    Checkpoint::Fast => "--checkpoint=fast",
                    Checkpoint::Spread => "--checkpoint=spread",
                });
                c.arg(match o.format.unwrap_or(Format::Plain) {
                    Format::Plain => "-Fp",
                    Format::Tar => "-Ft",
                });
                if o.compress != Compress::None {
                    // Plain output can only be compressed on the server (the client
                    // unpacks it); tar output is compressed by the client.
                    let side = if o.format == Some(Format::Tar) { "client" } else { "server" };
                    c.arg(format!("--compress={side}-{}", o.compress.name()));
                }
                run_tool(c, "pg_basebackup")
            }
            (Engine::Postgres, _) => {
                let mut c = Command::new(bin());
                pg_conn(&mut c, db);
                c.arg("-Fd").arg("-j").arg(o.jobs.to_string()).arg("-f").arg(out);
                // -Z LEVEL is gzip in every version; --compress=METHOD from 16.
                match o.compress {
                    Compress::None => c.arg("-Z0"),
                    Compress::Gzip => c.arg("-Z6"),
                    m => c.arg(format!("--compress={}", m.name())),
                };
                run_tool(c, "pg_dump")
            }
            (_, Method::Basebackup) => {
                let s = server_parts(db)?;
                let mut c = Command::new(bin());
                // --no-defaults (first: the tool reads it there only): none of
                // the host's option files (/etc/my.cnf, /etc/mysql/my.cnf,
                // ~/.my.cnf), whose [mariadb-backup] group could leave databases
                // out or send the copy elsewhere. The data directory and InnoDB
                // layout are the server's own: the tool asks it for them.
                c.arg("--no-defaults").arg("--backup").arg(format!("--target-dir={}", out.display()));
                mysql_conn_args(&mut c, &s);
                c.arg(format!("--parallel={}", o.jobs));
                run_tool(c, "mariadb-backup")
            }
            _ => mysql_dump(db, bin(), out),
        }
    }
}

/// `db.bytes`: the logical size of what the backup holds, as the engine
/// counts it. A dump holds the URL's database; a basebackup (`whole`) the
/// whole server: every database (PostgreSQL: `pg_database_size` of each,
/// templates too, that the role may connect to; MariaDB: `data_length +
/// index_length` of every schema's tables, `mysql` and `sys` included, but
/// not `information_schema` and `performance_schema`, which have no files).
fn db_bytes(db: &Database, conn: &mut dyn Connection, whole: bool) -> Option<f64> {
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

/// SQLite: the online backup API, or `VACUUM INTO`, in this process; the
/// figures are this process's own I/O and CPU over the copy.
fn sqlite_backup(db: &Database, out: &Path, method: Method) -> Result<Usage, BackupError> {
    let before = Usage::own();
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
            BackupError::Target(msg)
        } else {
            BackupError::Failed(msg)
        }
    })?;
    Ok(before.own_since())
}

/// mariadb-dump of one database into one SQL file (password through the
/// environment, never on the command line).
fn mysql_dump(db: &Database, bin: &Path, out: &Path) -> Result<Usage, BackupError> {
    let s = server_parts(db)?;
    let file =
        File::create(out).map_err(|e| BackupError::Target(format!("creating {}: {e}", out.display())))?;
    let mut c = Command::new(bin);
    mysql_conn_args(&mut c, &s);
    // The database as a plain argument (not --databases): the dump then
    // neither creates nor selects a database, so it restores into any name.
    c.args(["--single-transaction", "--routines", "--triggers"]).arg(&s.db);
    c.stdout(file);
    run_tool(c, "mariadb-dump")
}
