//! `storbench backup` and `storbench restore`: a database backup and its
//! restore as measured runs (`storbench_run::backup`); this verb turns the
//! flags into its options.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
// The options' value enums are the library's own (its `clap` feature).
use storbench_ops::backup::{BackupOptions, Checkpoint, Compress, Format, Method};
use storbench_run::backup::{BackupRun, RestoreRun};

use crate::cli::Global;
use crate::oltp::Term;

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

/// Runs `storbench backup` (`storbench_run::backup::backup`).
pub fn backup(g: &Global, a: BackupArgs) -> Result<ExitCode> {
    let options = BackupOptions {
        to: a.to,
        method: a.method,
        format: a.format,
        jobs: a.jobs,
        checkpoint: a.checkpoint,
        compress: a.compress,
    };
    let run = BackupRun { db: a.db, options };
    storbench_run::backup::backup(g.into(), &Term(g), run)
}

/// Runs `storbench restore` (`storbench_run::backup::restore`).
pub fn restore(g: &Global, a: RestoreArgs) -> Result<ExitCode> {
    let run = RestoreRun { from: a.from, to: a.to, jobs: a.jobs, database: a.database, compare: a.compare };
    storbench_run::backup::restore(g.into(), &Term(g), run)
}
