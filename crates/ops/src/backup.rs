//! Backup and restore of a database as operations a front end calls: the
//! engines' own tools do the work (`pg_basebackup`, `pg_dump`/`pg_restore`,
//! `mariadb-dump`/`mariadb`, `mariadb-backup`, SQLite's online backup API
//! and `VACUUM INTO`; a physical backup is restored by starting a
//! temporary server on a copy, see [`physical`]); this module finds them,
//! runs them, reads their process's I/O and CPU, and checks what a restore
//! made ([`verify`]). It never reimplements a tool, and a backup that
//! fails is removed, never reported as a result.
//!
//! Each operation comes in two stages: a plan that checks everything and
//! creates nothing (bad input leaves no debris), then a run that returns
//! the step's figures. Nothing here prints or records: the caller says what
//! was done and keeps the run.

use std::path::{Path, PathBuf};

use storbench_db::{connect, Connection, DbError, DbUrl, Engine};

pub(crate) mod mariadbd;
pub mod physical;
mod restore;
mod take;
mod tools;
pub mod verify;

pub use restore::{kind_of, Kind, LogicalRestore};
pub use take::{Backup, BackupOptions, Checkpoint, Compress, Format, Method};

/// A backup or restore's error. The kinds are the binary's exit codes: bad
/// input (2), a server that cannot be reached (3), a target that failed
/// (4: disk full, permission, a server that could not start), or a failure
/// of the operation (1); a database error keeps the database it concerns,
/// for the caller to classify.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// Bad input: names the value and what is allowed.
    #[error("{0}")]
    Usage(String),
    /// A server that refused the tool or is down.
    #[error("{0}")]
    Unreachable(String),
    /// The target failed: no space, no permission, a server that would not start.
    #[error("{0}")]
    Target(String),
    /// The operation failed.
    #[error("{0}")]
    Failed(String),
    /// A database error on `url` (shown as `shown`).
    #[error("{shown}: {source}")]
    Db {
        /// The database's URL.
        url: DbUrl,
        /// The database as the user gave it, redacted.
        shown: String,
        /// The error.
        source: DbError,
    },
    /// An SQLite error of the backup API.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The caller's interrupt flag was raised.
    #[error("interrupted")]
    Interrupted,
    /// Several errors (a check of each database of a copy), a failure.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<BackupError>),
    /// An error in a step the context names, a failure.
    #[error("{context}: {source}")]
    Context {
        /// What was being done.
        context: String,
        /// The error.
        source: Box<BackupError>,
    },
}

impl From<storbench_instances::InstanceError> for BackupError {
    /// Bad input stays bad input; a temporary server that could not be
    /// made or started is a failed target.
    fn from(e: storbench_instances::InstanceError) -> BackupError {
        match e {
            storbench_instances::InstanceError::Usage(m) => BackupError::Usage(m),
            storbench_instances::InstanceError::Failed(m) => BackupError::Target(m),
        }
    }
}

/// A database URL with the way it is shown (what the user gave, redacted).
#[derive(Clone, Debug)]
pub struct Database {
    /// The URL to connect to (a managed instance resolved).
    pub url: DbUrl,
    /// What the user gave, redacted, for messages.
    pub shown: String,
}

impl Database {
    /// A database at `url`, shown as `shown`.
    pub fn new(url: DbUrl, shown: impl Into<String>) -> Database {
        Database { url, shown: shown.into() }
    }

    /// The SQLite file, if this is an embedded database.
    pub fn sqlite_path(&self) -> Option<PathBuf> {
        (self.url.engine() == Engine::Sqlite).then(|| PathBuf::from(self.url.rest()))
    }

    /// Connects; a failure is a [`BackupError::Db`].
    pub fn open(&self) -> Result<Box<dyn Connection>, BackupError> {
        connect(&self.url).map_err(|e| self.error(e))
    }

    /// A database error on this database.
    pub fn error(&self, e: DbError) -> BackupError {
        BackupError::Db { url: self.url.clone(), shown: self.shown.clone(), source: e }
    }
}

/// The path a `TARGET[:/path]` names: `MEDIUM:/sub` is inside the medium's
/// mount point; anything else is a path as given.
pub fn resolve_target(s: &str) -> Result<PathBuf, BackupError> {
    if let Some((name, sub)) = s.split_once(':') {
        if !name.is_empty() && !name.contains('/') {
            let dir =
                storbench_media::target_dir(name).map_err(|e| BackupError::Usage(format!("{s}: {e}")))?;
            if dir.as_path() == Path::new(name) {
                return Err(BackupError::Usage(format!(
                    "{s}: no medium named '{name}' (storbench media list)"
                )));
            }
            return Ok(dir.join(sub.trim_start_matches('/')));
        }
    }
    Ok(PathBuf::from(s))
}

/// The same server URL naming another database, as a URL to parse.
pub fn with_database(url: &DbUrl, name: &str) -> String {
    let raw = url.expose();
    let (scheme, rest) = raw.split_once("://").expect("a server URL");
    let (hostpart, path) = rest.split_once('/').unwrap_or((rest, ""));
    let query = path.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
    format!("{scheme}://{hostpart}/{name}{query}")
}

/// What a restore did: the step's figures, and the verdict of its checks
/// (rows, checksums, TPC-C's conditions; a physical restore's server
/// stopped). The figures are whole either way.
pub struct Restored {
    /// The step's figures.
    pub report: storbench_metrics::StepReport,
    /// Whether the copy passed its checks.
    pub verdict: Result<(), BackupError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_medium_target_is_inside_its_mount_point_and_a_path_is_as_given() {
        assert_eq!(resolve_target("/backups/a").unwrap(), PathBuf::from("/backups/a"));
        assert_eq!(resolve_target("rel/b.sql").unwrap(), PathBuf::from("rel/b.sql"));
        let e = resolve_target("nosuchmedium-xyz:/a").unwrap_err();
        assert!(e.to_string().contains("'nosuchmedium-xyz' is neither a medium"), "{e}");
    }

    #[test]
    fn another_database_on_the_same_server_keeps_the_query() {
        let url = DbUrl::parse("postgres://u:p@h:5432/a?sslmode=disable").unwrap();
        assert_eq!(with_database(&url, "postgres"), "postgres://u:p@h:5432/postgres?sslmode=disable");
    }
}
