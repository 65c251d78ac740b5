//! `--db URL`: parsing, resolving `managed:NAME`, connecting with errors a
//! user can act on — a bad URL is bad input (exit 2), a server that cannot
//! be reached or refuses the credentials is an outage (exit 3), an SQLite
//! file that cannot be opened is a failed target (exit 4) — and what a run
//! records about the database in `env_json`.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::{json, Value};
use storbench_db::{connect, Connection, DbError, DbUrl, Dialect, Engine, ErrorKind, Stmt};

use crate::error::{target_failed, unreachable, usage};

/// A parsed, resolved database URL.
pub struct Db {
    /// The URL to connect to (managed instances resolved).
    pub url: DbUrl,
    /// What the user gave, redacted, for messages and records.
    pub shown: String,
}

impl Db {
    /// Parses `--db`; `managed:NAME` is resolved to the instance's server.
    pub fn parse(s: &str) -> Result<Db> {
        let url = DbUrl::parse(s).map_err(usage)?;
        let shown = url.redacted();
        let url = match url.engine() {
            Engine::Managed => resolve_managed(url.rest())?,
            _ => url,
        };
        Ok(Db { url, shown })
    }

    /// The SQLite file, if this is an embedded database.
    pub fn sqlite_path(&self) -> Option<PathBuf> {
        (self.url.engine() == Engine::Sqlite).then(|| PathBuf::from(self.url.rest()))
    }

    /// Connects; a failure is classified by [`Db::error`].
    pub fn open(&self) -> Result<Box<dyn Connection>> {
        connect(&self.url).map_err(|e| self.error(e))
    }

    /// A database error as a one-line error naming the database, with the
    /// exit code of its kind: bad URL or missing database 2, unreachable
    /// server or refused credentials 3, an SQLite file that cannot be opened
    /// 4, anything else 1.
    pub fn error(&self, e: DbError) -> anyhow::Error {
        let sqlite = self.url.engine() == Engine::Sqlite;
        let (what, make): (&str, fn(String) -> anyhow::Error) = match e.kind() {
            ErrorKind::BadUrl => ("bad URL", |m| usage(m)),
            ErrorKind::Connect if sqlite => ("cannot open", |m| target_failed(m)),
            ErrorKind::Permission if sqlite => ("no permission on", |m| target_failed(m)),
            ErrorKind::Connect => ("cannot reach", |m| unreachable(m)),
            ErrorKind::Auth => ("wrong credentials for", |m| unreachable(m)),
            ErrorKind::Permission => ("missing privileges on", |m| unreachable(m)),
            ErrorKind::MissingObject => ("missing database or object in", |m| usage(m)),
            _ => ("cannot use", |m| anyhow::anyhow!(m)),
        };
        let msg = e.to_string();
        if msg.contains(&self.shown) {
            make(msg)
        } else {
            make(format!("{what} {}: {msg}", self.shown))
        }
    }

    /// The same as [`Db::error`]; kept for the commands that call it by this
    /// name. Despite the name, an outage is exit 3, not 2.
    pub fn usage_error(&self, e: DbError) -> anyhow::Error {
        self.error(e)
    }

    /// A connector for the runner and loaders.
    pub fn connector(&self) -> impl Fn() -> Result<Box<dyn Connection>, DbError> + Sync + '_ {
        move || connect(&self.url)
    }
}

fn resolve_managed(name: &str) -> Result<DbUrl> {
    // An instance that exists but is stopped is an outage (exit 3); a name
    // that names no instance is a typo (exit 2).
    if let Ok(Some(i)) = storbench_instances::pg::get(name) {
        if !storbench_instances::pg::running(&i) {
            return Err(unreachable(format!(
                "managed:{name}: the instance is not running (storbench pg up {name})"
            )));
        }
    }
    let url = storbench_instances::pg::resolve(name).map_err(|e| usage(format!("managed:{name}: {e}")))?;
    DbUrl::parse(&url).map_err(usage)
}

/// The instance and database of a `managed:NAME/DB` URL.
pub fn managed_database(s: &str) -> Option<(&str, &str)> {
    s.strip_prefix("managed:").and_then(|r| r.split_once('/'))
}

/// What a run records about the database; a database of a managed
/// instance records the instance and its placement as `managed:NAME` does.
pub fn db_env(db: &Db, conn: &mut dyn Connection) -> Value {
    let Some((inst, _)) = managed_database(&db.shown) else { return env(db, conn) };
    let as_instance = Db { url: db.url.clone(), shown: format!("managed:{inst}") };
    let mut v = env(&as_instance, conn);
    v["url"] = json!(db.shown);
    v
}

/// What the run records about the database: URL (redacted), engine,
/// version, non-default settings, and where its data lives when local.
pub fn env(db: &Db, conn: &mut dyn Connection) -> Value {
    let info = conn.server_info().ok();
    let mut v = json!({
        "url": db.shown,
        "engine": info.as_ref().map(|i| i.engine.clone()),
        "version": info.as_ref().map(|i| i.version.clone()),
        "settings": info.as_ref().map(|i| i.settings.clone()),
        // The TLS the connection negotiated (null: in the clear).
        "tls": conn.tls(),
    });
    if let Some(name) = db.shown.strip_prefix("managed:") {
        if let Ok(Some(i)) = storbench_instances::pg::get(name) {
            v["managed"] = json!({ "name": i.name, "placement": storbench_instances::pg::placement(&i, &storbench_media::describe_path), "settings": i.settings, "memory_limit": i.memory_limit });
            v["managed"]["replication"] =
                storbench_instances::pg::replication_env(&i, &storbench_media::describe_path);
        }
    }
    if let Some(dir) = data_dir(db, conn) {
        let p = storbench_sysmon::path_env(&dir);
        v["data_dir"] = json!(dir);
        v["data_fs"] = json!({"fs_type": p.fs_type, "block_size": p.block_size, "device": p.device});
        if let Some(m) = storbench_media::describe_path(&dir) {
            v["medium"] = m;
        }
    }
    v
}

/// The directory holding the database's files, when it is on this machine.
pub fn data_dir(db: &Db, conn: &mut dyn Connection) -> Option<PathBuf> {
    let dir = match conn.dialect() {
        Dialect::Sqlite => {
            let p = db.sqlite_path()?;
            let p = if p.is_absolute() { p } else { std::env::current_dir().ok()?.join(p) };
            p.parent()?.to_path_buf()
        }
        Dialect::Postgres => {
            PathBuf::from(conn.query_one(&Stmt::new("SHOW data_directory"), &[]).ok()?.text(0).ok()?)
        }
        Dialect::Mysql => {
            PathBuf::from(conn.query_one(&Stmt::new("SELECT @@datadir"), &[]).ok()?.text(0).ok()?)
        }
    };
    let local = matches!(db.url.engine(), Engine::Sqlite)
        || ["127.0.0.1", "localhost", "[::1]", "/"].iter().any(|h| db.url.expose().contains(h));
    (local && dir.exists()).then_some(dir)
}
