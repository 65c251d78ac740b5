//! One connection API over embedded SQLite, PostgreSQL and MySQL/MariaDB.
//!
//! Workloads see only the [`Connection`] trait: statements are [`Stmt`]s
//! written once with `$1, $2, ...` placeholders (translated per engine) and
//! prepared lazily per connection, so they survive reconnects. Every
//! connection is synchronous to its caller: PostgreSQL speaks the wire
//! protocol over a blocking socket (`pgwire`), a MySQL connection owns a
//! single-threaded tokio runtime and drives its socket on the calling
//! thread, so one OS thread per virtual user costs no cross-thread wake-ups
//! (the model pgbench uses). Nothing here prints; every message that could
//! hold a URL is redacted.

#![deny(missing_docs)]

mod device;
mod error;
mod mysql;
mod notice;
mod pgtls;
mod pgwire;
mod placeholder;
mod postgres;
mod sqlite;
mod transaction;
mod url;
mod value;
mod vfs;
pub mod waits;

use std::collections::BTreeMap;

pub use device::{set_device_opener, DeviceOpener, FileDevice};
pub use error::{DbError, ErrorKind};
pub use notice::{set_notice_handler, Notice};
pub use pgwire::TlsInfo;
pub use transaction::Transaction;
pub use url::{redact_text, DbUrl, Engine};
pub use value::{Row, Stmt, Value};
pub use vfs::{VfsConnections, VfsStates};

/// The SQL dialect a connection speaks: what a workload picks its DDL and
/// procedure text by. The runner never looks at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// SQLite 3.
    Sqlite,
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    Mysql,
}

/// What an engine can do; workloads ask these, never the engine's name.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Caps {
    /// Server-side procedures or functions (one round trip per transaction).
    pub procedures: bool,
    /// A bulk path faster than batched inserts (PostgreSQL COPY).
    pub copy: bool,
    /// Several connections can write concurrently (false for SQLite, where
    /// writers take turns).
    pub concurrent_writers: bool,
    /// The server counts commits and rollbacks itself.
    pub server_counters: bool,
    /// A COMMIT that fails has ended the transaction (PostgreSQL, where a
    /// ROLLBACK then draws warning 25P01). Where false the transaction may
    /// still be open (SQLite on SQLITE_BUSY or a deferred constraint) and
    /// the caller rolls it back.
    pub failed_commit_ends_transaction: bool,
}

/// Server-side counters, read before and after a measured window.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Counters {
    /// Commits and rollbacks over every database of the server (HammerDB's
    /// TPM source).
    pub xact_all: u64,
    /// Commits and rollbacks of the benchmark's own database, where the
    /// engine separates them (PostgreSQL); else equal to `xact_all`.
    pub xact_db: u64,
    /// Blocks read from storage (PostgreSQL blks_read, InnoDB buffer pool reads).
    pub blocks_read: u64,
    /// Block requests served from the cache.
    pub blocks_hit: u64,
    /// Which scope `xact_db` counts: `database`, `server`.
    pub scope: &'static str,
    /// Flushes of the commit log, server-wide (PostgreSQL 14-17
    /// `pg_stat_wal.wal_sync`, 18+ `pg_stat_io`'s WAL fsyncs; InnoDB
    /// `Innodb_os_log_fsyncs`): against `xact_all`, how many commits each
    /// flush carried (group commit). None where the server does not count
    /// them (PostgreSQL before 14, SQLite).
    pub log_flushes: Option<u64>,
}

/// What the server is, for `env_json`.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ServerInfo {
    /// `sqlite`, `postgres` or `mysql`.
    pub engine: String,
    /// Version string as the server reports it.
    pub version: String,
    /// Settings that differ from the defaults (name → value).
    pub settings: BTreeMap<String, String>,
}

/// Cancels the statement a connection is running, from another thread.
///
/// Got from [`Connection::canceller`] while the connection is idle, kept
/// by whoever may need to interrupt it (the runner at a step's end, on a
/// timeout or Ctrl-C), and called while the connection's own thread is
/// blocked in `execute`/`query`/`commit`...: that call then returns an
/// error for which [`DbError::is_cancelled`] is true, and the connection
/// stays usable (a cancelled statement inside a transaction aborts the
/// transaction: roll back). It opens a connection of its own, so it costs a
/// connect; it is cheap to keep and safe to call from any number of
/// threads, any number of times.
///
/// What it cancels is whatever the connection runs when the server gets
/// the request: called when nothing runs it does nothing, but it can race
/// with the next statement (the protocol says so; libpq's PQcancel has the
/// same race). A handle belongs to one session: after a reconnect, ask the
/// new connection for a new one.
pub trait Cancel: Send + Sync {
    /// Sends the request and returns once the server has taken it. An error
    /// means the request could not be delivered (the server is gone).
    fn cancel(&self) -> Result<(), DbError>;
}

/// A database connection. Synchronous; one per thread.
pub trait Connection: Send {
    /// The SQL dialect.
    fn dialect(&self) -> Dialect;
    /// Capabilities.
    fn caps(&self) -> Caps;
    /// Runs a statement, returning the rows it affected.
    fn execute(&mut self, stmt: &Stmt, params: &[Value]) -> Result<u64, DbError>;
    /// Runs a query, returning all rows.
    fn query(&mut self, stmt: &Stmt, params: &[Value]) -> Result<Vec<Row>, DbError>;
    /// Runs one or more statements without parameters or results (DDL,
    /// scripts). Not prepared.
    fn batch(&mut self, sql: &str) -> Result<(), DbError>;
    /// Starts a transaction (SQLite: `BEGIN IMMEDIATE`, so writers queue on
    /// the busy timeout instead of failing on lock upgrade).
    fn begin(&mut self) -> Result<(), DbError>;
    /// Commits.
    fn commit(&mut self) -> Result<(), DbError>;
    /// Rolls back.
    fn rollback(&mut self) -> Result<(), DbError>;
    /// Loads rows into a table by the engine's fastest path (COPY, multi-row
    /// INSERT, or prepared inserts in one transaction).
    fn load(&mut self, table: &str, columns: &[&str], rows: &[Vec<Value>]) -> Result<(), DbError>;
    /// The server's counters, or `None` when the engine has none (SQLite).
    fn counters(&mut self) -> Result<Option<Counters>, DbError>;
    /// Server version and non-default settings.
    fn server_info(&mut self) -> Result<ServerInfo, DbError>;
    /// True once the connection is known to be gone.
    fn is_closed(&self) -> bool;

    /// A handle that cancels what this connection runs, from another
    /// thread (see [`Cancel`]); `None` where the engine has no way to
    /// (SQLite: its statements are in this process).
    fn canceller(&self) -> Option<Box<dyn Cancel>> {
        None
    }

    /// The TLS this connection runs over, for the run's record; `None` when
    /// it runs in the clear (or the engine has no network, or does not say).
    fn tls(&self) -> Option<TlsInfo> {
        None
    }

    /// SQLite: this database's connections (every one in this process),
    /// each with the state it is in now (in a call of SQLite or not, and
    /// in which of its VFS's reads, writes, syncs and busy waits) — what
    /// the wait sampler reads. Otherwise why there is none, as a clause: a
    /// server's connection, SQLite opened with `?timing=off`, or the
    /// timing VFS not registered.
    fn vfs_connections(&self) -> Result<std::sync::Arc<VfsConnections>, String> {
        Err("the database is not SQLite".into())
    }

    /// Runs a query that must return exactly one row.
    fn query_one(&mut self, stmt: &Stmt, params: &[Value]) -> Result<Row, DbError> {
        let mut rows = self.query(stmt, params)?;
        match rows.len() {
            1 => Ok(rows.pop().expect("one row")),
            n => Err(DbError::new(
                ErrorKind::Decode,
                format!("expected one row, got {n}, from: {}", stmt.sql()),
            )),
        }
    }

    /// Runs a query that returns at most one row.
    fn query_opt(&mut self, stmt: &Stmt, params: &[Value]) -> Result<Option<Row>, DbError> {
        let mut rows = self.query(stmt, params)?;
        Ok(if rows.is_empty() { None } else { Some(rows.swap_remove(0)) })
    }
}

/// Opens a connection for `url`. `managed:NAME` must have been resolved to a
/// concrete URL by the caller.
pub fn connect(url: &DbUrl) -> Result<Box<dyn Connection>, DbError> {
    match url.engine() {
        Engine::Sqlite => Ok(Box::new(sqlite::SqliteConn::open(url)?)),
        Engine::Postgres => Ok(Box::new(postgres::PgConn::connect(url)?)),
        Engine::Mysql => Ok(Box::new(mysql::MyConn::connect(url)?)),
        Engine::Managed => Err(DbError::new(
            ErrorKind::Connect,
            format!("'{}' must be resolved to a server URL first (storbench pg up)", url.redacted()),
        )),
    }
}
