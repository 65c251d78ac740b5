//! `storbench backup` and `storbench restore`: a database backup and its
//! restore as measured runs. The work (finding and running the engines'
//! tools, temporary servers, checks) is `storbench_ops::backup`'s; this
//! verb turns the flags into its options, records the run (the system
//! monitor's device figures for the same seconds) and says what was done.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;
use storbench_db::Engine;
use storbench_ops::backup::{self as ops, Backup, BackupError, BackupOptions, Database, LogicalRestore};
// The options' value enums are the library's own (its `clap` feature).
use storbench_ops::backup::{Checkpoint, Compress, Format, Method};

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
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
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
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// A backup's error as the binary's: bad input 2, unreachable 3, a failed
/// target 4, else 1; a database error classified as `--db`'s are.
fn backup_err(e: BackupError) -> anyhow::Error {
    match e {
        BackupError::Usage(m) => usage(m),
        BackupError::Unreachable(m) => unreachable(m),
        BackupError::Target(m) => target_failed(m),
        BackupError::Failed(m) => anyhow!(m),
        BackupError::Db { url, shown, source } => Db { url, shown }.error(source),
        BackupError::Sqlite(e) => anyhow::Error::new(e),
        BackupError::Interrupted => anyhow!("interrupted"),
        BackupError::Several(v) => {
            anyhow!(v.into_iter().map(|e| backup_err(e).to_string()).collect::<Vec<_>>().join("; "))
        }
        BackupError::Context { context, source } => anyhow!("{context}: {}", backup_err(*source)),
    }
}

/// The database `--db` (or `--to`, `--compare`) named, for the library.
fn database(db: &Db) -> Database {
    Database::new(db.url.clone(), db.shown.clone())
}

/// Runs `storbench backup`.
pub fn backup(g: &Global, a: BackupArgs) -> Result<ExitCode> {
    // Everything is validated before anything is created.
    if a.jobs == 0 {
        return Err(usage("--jobs 0: must be at least 1"));
    }
    let db = Db::parse(&a.db)?;
    let engine = db.url.engine();
    let mut plan = Backup::plan(BackupOptions {
        db: database(&db),
        to: a.to.clone(),
        method: a.method,
        format: a.format,
        jobs: a.jobs,
        checkpoint: a.checkpoint,
        compress: a.compress,
    })
    .map_err(backup_err)?;
    let (method, out, parent) = (plan.method(), plan.out().to_path_buf(), plan.parent().to_path_buf());
    let mut conn = db.open()?;
    let env =
        json!({ "db": dbarg::env(&db, conn.as_mut()), "backup_dir": storbench_sysmon::path_env(&parent) });
    let mut targets: Vec<_> = dbarg::data_dir(&db, conn.as_mut()).into_iter().collect();
    plan.inspect(conn.as_mut(), !targets.is_empty()).map_err(backup_err)?;
    targets.push(parent);
    drop(conn);
    let method_name = method.name();
    let config = json!({
        "db": db.shown, "to": out, "method": method_name, "format": a.format.map(|f| format!("{f:?}").to_lowercase()),
        "tool": plan.tool_name(),
        "jobs": a.jobs, "compress": a.compress.name(),
        "checkpoint": (method == ops::Method::Basebackup && engine == Engine::Postgres)
            .then(|| format!("{:?}", a.checkpoint).to_lowercase()),
    });
    let mut rec =
        Recorder::begin(g, "backup", format!("backup {method_name} of {}", db.shown), config, env, &targets)?;
    // Beside other workloads (a plan's `together` cell): begin with them.
    storbench_metrics::runner::wait_for_start_instant(crate::interrupt::flag());
    let clock = rec.clock();
    let r = match plan.run(crate::interrupt::flag()) {
        Ok(r) => r,
        Err(e) => {
            // Ctrl-C reaches the tool too (same process group): it is an
            // interruption, not a failure of the backup.
            if crate::interrupt::requested() {
                return rec.finish(Outcome::Interrupted);
            }
            return rec.finish(Outcome::Failed(backup_err(e).context(format!(
                "backup of {} to {}",
                db.shown,
                out.display()
            ))));
        }
    };
    let (elapsed, bytes) = (r.get("backup.seconds").unwrap_or(0.0), r.get("backup.bytes").unwrap_or(0.0));
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

/// The same server URL naming another database.
pub(crate) fn with_database(db: &Db, name: &str) -> Result<Db> {
    Db::parse(&ops::with_database(&db.url, name))
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
    let from = ops::resolve_target(&a.from).map_err(backup_err)?;
    let kind = ops::kind_of(&from).map_err(backup_err)?;
    if kind.is_physical() {
        return physical::restore(g, a, kind, &from);
    }
    LogicalRestore::check_scope(a.database.as_deref()).map_err(backup_err)?;
    // A fresh database DB in the managed instance NAME with managed:NAME/DB.
    let db = managed_or_url(&a.to)?;
    LogicalRestore::check_target(kind, &from, &database(&db), a.jobs).map_err(backup_err)?;
    let compare = a.compare.as_deref().map(Db::parse).transpose()?;
    let mut plan =
        LogicalRestore::plan(kind, from.clone(), database(&db), a.jobs, compare.as_ref().map(database))
            .map_err(backup_err)?;
    let backup_bytes = plan.backup_bytes();
    let config = json!({ "from": from, "to": db.shown, "jobs": a.jobs, "kind": format!("{kind:?}") });
    let mut targets = vec![from.parent().unwrap_or(Path::new(".")).to_path_buf()];
    if let Some(p) = db.sqlite_path().and_then(|p| p.parent().map(Path::to_path_buf)) {
        targets.push(if p.as_os_str().is_empty() { PathBuf::from(".") } else { p });
    }
    let mut env =
        json!({ "backup_bytes": backup_bytes, "from_dir": storbench_sysmon::path_env(&targets[0]) });
    // The server restored into: its engine and version, and its data
    // directory's device for the monitor (the writes of a restore land there).
    if let Some((adb, c)) = plan.admin() {
        let adb = Db { url: adb.url.clone(), shown: adb.shown.clone() };
        let mut e = dbarg::env(&adb, c);
        e["url"] = json!(db.shown);
        env["db"] = e;
        targets.extend(dbarg::data_dir(&adb, c));
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
    let done = match plan.run() {
        Ok(d) => d,
        Err(e) => {
            return rec.finish(Outcome::Failed(backup_err(e).context(format!(
                "restore of {} into {}",
                from.display(),
                db.shown
            ))));
        }
    };
    let r = done.report;
    rec.write_step(clock, "restore", json!({ "jobs": a.jobs }), r.clone())?;
    if let Err(e) = done.verdict {
        return rec.finish(Outcome::Failed(backup_err(e)));
    }
    restored(g, &from.display().to_string(), &db.shown, &r);
    rec.finish(Outcome::Complete)
}

/// Says a restore's result: on stdout (stderr with --json), whatever
/// --quiet says.
fn restored(g: &Global, from: &str, to: &str, r: &storbench_metrics::StepReport) {
    crate::oltp::result(
        g,
        format!(
            "restore: {from} into {to}: open after {:.2} s, ready (indexes, ANALYZE) after {:.2} s",
            r.get("restore.open_seconds").unwrap_or(0.0),
            r.get("restore.ready_seconds").unwrap_or(0.0)
        ),
    );
}
