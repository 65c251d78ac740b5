//! A database backup and its restore as measured runs. The work (finding
//! and running the engines' tools, temporary servers, checks) is
//! `storbench_ops::backup`'s; here the options become its plan, the run is
//! recorded (the system monitor's device figures for the same seconds)
//! and what was done is said through the front end's [`Screen`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use serde_json::json;
use storbench_db::Engine;
use storbench_ops::backup::{self as ops, Backup, BackupError, BackupOptions, Database, LogicalRestore};
use storbench_ops::backup::{physical, Kind};

use crate::dbarg::{self, managed_database, Db};
use crate::error::{target_failed, unreachable, usage};
use crate::oltp::Screen;
use crate::record::{Outcome, RecordOptions, Recorder};

/// A backup's error in the error classes: bad input 2, unreachable 3, a failed
/// target 4, else 1; a database error classified as `--db`'s are.
pub fn backup_err(e: BackupError) -> anyhow::Error {
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
pub fn database(db: &Db) -> Database {
    Database::new(db.url.clone(), db.shown.clone())
}

/// What to back up, where and how (`storbench backup`'s flags).
pub struct BackupRun {
    /// The database URL, resolved when the run begins.
    pub db: String,
    /// Where and how.
    pub options: BackupOptions,
}

/// Backs up a database as a measured run: one recorded step, its result
/// line through `screen`.
pub fn backup(g: RecordOptions, screen: &dyn Screen, a: BackupRun) -> Result<ExitCode> {
    // Everything is validated before anything is created.
    if a.options.jobs == 0 {
        return Err(usage("--jobs 0: must be at least 1"));
    }
    let db = Db::parse(&a.db)?;
    let engine = db.url.engine();
    let mut plan = Backup::plan(database(&db), a.options).map_err(backup_err)?;
    let (method, out, parent) = (plan.method(), plan.out().to_path_buf(), plan.parent().to_path_buf());
    let (o, method_name) = (plan.options(), method.name());
    let config = json!({
        "db": db.shown, "to": out, "method": method_name, "format": o.format.map(|f| format!("{f:?}").to_lowercase()),
        "tool": plan.tool_name(),
        "jobs": o.jobs, "compress": o.compress.name(),
        "checkpoint": (method == ops::Method::Basebackup && engine == Engine::Postgres)
            .then(|| format!("{:?}", o.checkpoint).to_lowercase()),
    });
    let mut conn = db.open()?;
    let env =
        json!({ "db": dbarg::env(&db, conn.as_mut()), "backup_dir": storbench_sysmon::path_env(&parent) });
    let mut targets: Vec<_> = dbarg::data_dir(&db, conn.as_mut()).into_iter().collect();
    plan.inspect(conn.as_mut(), !targets.is_empty()).map_err(backup_err)?;
    targets.push(parent);
    drop(conn);
    let mut rec =
        Recorder::begin(g, "backup", format!("backup {method_name} of {}", db.shown), config, env, &targets)?;
    // Beside other workloads (a plan's `together` cell): begin with them.
    storbench_runner::wait_for_start_instant(crate::interrupt::flag());
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
    screen.result(&format!(
        "backup: {method_name} of {} to {}: {:.1} MB in {elapsed:.2} s ({:.1} MB/s written)",
        db.shown,
        out.display(),
        bytes / 1e6,
        bytes / 1e6 / elapsed.max(1e-9)
    ));
    rec.finish(Outcome::Complete)
}

/// The same server URL naming another database.
pub fn with_database(db: &Db, name: &str) -> Result<Db> {
    Db::parse(&ops::with_database(&db.url, name))
}

/// A URL, or `managed:NAME/DB`: the database DB in the managed instance
/// NAME (whose own URL names its `storbench` database), shown as given.
pub fn managed_or_url(s: &str) -> Result<Db> {
    if let Some((inst, name)) = managed_database(s) {
        let mut db = with_database(&Db::parse(&format!("managed:{inst}"))?, name)?;
        db.shown = s.to_string();
        return Ok(db);
    }
    Db::parse(s)
}

/// What to restore and where (`storbench restore`'s flags).
pub struct RestoreRun {
    /// The backup (PATH or MEDIUM:/path).
    pub from: String,
    /// Where to restore: a fresh database URL, or for a physical backup a
    /// new data directory.
    pub to: String,
    /// Parallel jobs.
    pub jobs: usize,
    /// Of a physical backup, the one database to analyse, count, check and
    /// compare.
    pub database: Option<String>,
    /// The backup's source, to compare every table's rows with.
    pub compare: Option<String>,
}

/// Restores a backup as a measured run: one recorded step, its result
/// line through `screen`.
pub fn restore(g: RecordOptions, screen: &dyn Screen, a: RestoreRun) -> Result<ExitCode> {
    if a.jobs == 0 {
        return Err(usage("--jobs 0: must be at least 1"));
    }
    let from = ops::resolve_target(&a.from).map_err(backup_err)?;
    let kind = ops::kind_of(&from).map_err(backup_err)?;
    if kind.is_physical() {
        return restore_physical(g, screen, a, kind, &from);
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
    restored(screen, &from.display().to_string(), &db.shown, &r);
    rec.finish(Outcome::Complete)
}

/// Says a restore's result: on stdout (stderr with --json), whatever
/// --quiet says.
fn restored(screen: &dyn Screen, from: &str, to: &str, r: &storbench_metrics::StepReport) {
    screen.result(&format!(
        "restore: {from} into {to}: open after {:.2} s, ready (indexes, ANALYZE) after {:.2} s",
        r.get("restore.open_seconds").unwrap_or(0.0),
        r.get("restore.ready_seconds").unwrap_or(0.0)
    ));
}

/// Restores a physical backup (a mariadb-backup directory or a plain
/// pg_basebackup) into a new data directory, checked by a temporary server
/// on the copy (`storbench_ops::backup::physical`'s work); says what a
/// sweep of an earlier restore's leftovers stopped. The interrupt flag
/// stops the restore's server.
fn restore_physical(
    g: RecordOptions,
    screen: &dyn Screen,
    a: RestoreRun,
    kind: Kind,
    from: &Path,
) -> Result<ExitCode> {
    // Everything is validated before anything is created.
    let checked = physical::check(kind, from, &a.to, a.jobs, a.database.as_deref()).map_err(backup_err)?;
    let compare = a.compare.as_deref().map(Db::parse).transpose()?;
    let mut plan = checked.plan(compare.as_ref().map(database)).map_err(backup_err)?;
    let (from, to) = (plan.from().to_path_buf(), plan.to().to_path_buf());
    let (from_parent, to_parent) = (plan.from_parent(), plan.to_parent().to_path_buf());
    let config = json!({
        "from": from, "to": to, "jobs": a.jobs, "kind": format!("{kind:?}"), "database": a.database,
        "compare": compare.as_ref().map(|c| &c.shown),
    });
    let env = json!({
        "backup_bytes": plan.backup_bytes(),
        "from_dir": storbench_sysmon::path_env(&from_parent),
        "to_dir": storbench_sysmon::path_env(&to_parent),
        "server": { "engine": plan.server_engine(), "version": plan.version() },
    });
    // A temporary server a killed storbench left running (and the copy it
    // ran on) goes before this one starts (its work copy would be in this
    // one's way); after every check, so bad input changes nothing.
    for s in physical::sweep() {
        if !g.quiet {
            (g.voice.note)(&format!(
                "stopped the temporary {} on {} left by storbench {} (killed), and removed that copy",
                s.program,
                s.data.display(),
                s.owner
            ));
        }
    }
    // Recorded before anything is made, so a storbench killed from here on
    // leaves nothing the next restore's sweep does not remove.
    plan.register().map_err(backup_err)?;
    let mut rec = Recorder::begin(
        g,
        "restore",
        format!("restore {} into {}", from.display(), to.display()),
        config,
        env,
        &[from_parent, to_parent],
    )?;
    let clock = rec.clock();
    let done = match plan.run(crate::interrupt::flag()) {
        Ok(d) => d,
        Err(e) => {
            if crate::interrupt::requested() {
                return rec.finish(Outcome::Interrupted);
            }
            return rec.finish(Outcome::Failed(backup_err(e).context(format!(
                "restore of {} into {}",
                from.display(),
                to.display()
            ))));
        }
    };
    let r = done.report;
    rec.write_step(clock, "restore", json!({ "jobs": a.jobs }), r.clone())?;
    if crate::interrupt::requested() {
        return rec.finish(Outcome::Interrupted);
    }
    if let Err(e) = done.verdict {
        return rec.finish(Outcome::Failed(backup_err(e)));
    }
    restored(screen, &from.display().to_string(), &to.display().to_string(), &r);
    rec.finish(Outcome::Complete)
}
