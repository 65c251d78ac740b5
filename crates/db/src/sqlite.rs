//! Embedded SQLite (rusqlite, bundled): WAL mode, durable commits
//! (`synchronous=FULL` unless the URL says `?synchronous=normal`), a busy
//! timeout so writers queue, and `BEGIN IMMEDIATE` so a reader never fails
//! on upgrading its lock. Files are opened through the timing VFS
//! (`vfs.rs`: each connection's state, in a call or not and in which of
//! the reads, writes, syncs and busy waits, which the wait sampler
//! samples) unless the URL says `?timing=off`.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::ToSql;

use crate::device::FileDevice;
use crate::error::{DbError, ErrorKind};
use crate::placeholder::to_sqlite;
use crate::url::DbUrl;
use crate::value::{Row, Stmt, StmtCache, Value};
use crate::vfs::{self, Active, ConnState, VfsConnections};
use crate::{Caps, Connection, Counters, Dialect, ServerInfo};

pub(crate) struct SqliteConn {
    db: Db,
    settings: Vec<(String, String)>,
    timing: Timing,
}

/// The connection itself, apart from its timing (so a call can hold its
/// [`Active`] while it uses the connection).
struct Db {
    /// `None` only while it closes (in `Drop`).
    conn: Option<rusqlite::Connection>,
    /// Translated SQL per statement id; rusqlite's own cache holds the
    /// prepared handles.
    sql: StmtCache<String>,
}

/// Whether a connection's state is kept (the timing VFS, `vfs.rs`).
enum Timing {
    /// Opened through the timing VFS: the database's connections, and
    /// this connection's own state among them.
    On(Arc<VfsConnections>, Arc<ConnState>),
    /// `?timing=off`: on the default VFS.
    Off,
    /// The timing VFS could not be registered (why): on the default VFS.
    Unavailable(String),
}

impl Timing {
    /// Marks a call of the connection (see `vfs::Active`).
    fn active(&self) -> Option<Active<'_>> {
        match self {
            Timing::On(_, c) => Some(Active::new(c)),
            _ => None,
        }
    }
}

fn map_err(e: rusqlite::Error) -> DbError {
    use rusqlite::ffi::ErrorCode;
    let kind = match &e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => ErrorKind::Retryable,
            ErrorCode::CannotOpen => ErrorKind::Connect,
            ErrorCode::PermissionDenied | ErrorCode::ReadOnly => ErrorKind::Permission,
            _ => ErrorKind::Other,
        },
        _ => ErrorKind::Other,
    };
    let msg = e.to_string();
    let kind = if msg.contains("no such table") || msg.contains("no such column") {
        ErrorKind::MissingObject
    } else {
        kind
    };
    DbError::new(kind, format!("sqlite: {msg}"))
}

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Value::Float(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

fn from_ref(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Float(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Text(String::from_utf8_lossy(b).into_owned()),
    }
}

impl SqliteConn {
    pub(crate) fn open(url: &DbUrl) -> Result<SqliteConn, DbError> {
        let (path, query) = match url.rest().split_once('?') {
            Some((p, q)) => (p, q),
            None => (url.rest(), ""),
        };
        let mut synchronous = "FULL".to_string();
        let mut timing = true;
        let mut model: Option<&str> = None;
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            match kv.split_once('=') {
                Some(("synchronous", v)) => {
                    let v = v.to_ascii_uppercase();
                    if !["OFF", "NORMAL", "FULL", "EXTRA"].contains(&v.as_str()) {
                        return Err(DbError::new(
                            ErrorKind::BadUrl,
                            format!("sqlite: synchronous='{v}' is not one of off, normal, full, extra"),
                        ));
                    }
                    synchronous = v;
                }
                Some(("model", "")) => {
                    return Err(DbError::new(
                        ErrorKind::BadUrl,
                        "sqlite: model= names no model (give a built-in model's name or a model file)",
                    ))
                }
                Some(("model", v)) => model = Some(v),
                Some(("timing", v)) => {
                    timing = match v {
                        "on" => true,
                        "off" => false,
                        _ => {
                            return Err(DbError::new(
                                ErrorKind::BadUrl,
                                format!("sqlite: timing='{v}' is not one of on, off"),
                            ))
                        }
                    };
                }
                _ => {
                    return Err(DbError::new(
                        ErrorKind::BadUrl,
                        format!(
                            "sqlite: unknown URL option '{kv}' (allowed: synchronous=off|normal|full|extra, \
                             timing=on|off, model=NAME|FILE.toml)"
                        ),
                    ))
                }
            }
        }
        if let Some(parent) = std::path::Path::new(path).parent() {
            if !parent.as_os_str().is_empty() && !parent.exists() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    DbError::new(
                        ErrorKind::Connect,
                        format!("sqlite: cannot create {}: {e}", parent.display()),
                    )
                })?;
            }
        }
        // Unseen when the shim cannot be registered: the run goes on, and
        // the wait sampler says why the waits are missing.
        let registered = if timing { vfs::register() } else { Ok(()) };
        // A device model under the files (`device.rs`) needs the VFS.
        let device = match model {
            None => None,
            Some(m) => {
                let bad = |why: String| DbError::new(ErrorKind::BadUrl, format!("sqlite: model={m}: {why}"));
                if !timing {
                    return Err(bad("a device model needs the timing VFS (drop timing=off)".into()));
                }
                if let Err(why) = &registered {
                    return Err(bad(format!("the timing VFS could not be registered: {why}")));
                }
                let dir = match std::path::Path::new(path).parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => std::path::Path::new("."),
                };
                Some(crate::device::open_device(m, dir).map_err(bad)?)
            }
        };
        Self::open_timed(path, &synchronous, timing, registered, device)
    }

    /// Opens `path` through the timing VFS when `timing` and it was
    /// `registered`, else on the default VFS (keeping why).
    fn open_timed(
        path: &str,
        synchronous: &str,
        timing: bool,
        registered: Result<(), String>,
        device: Option<Arc<dyn FileDevice>>,
    ) -> Result<SqliteConn, DbError> {
        let device_label = device.as_ref().map(|d| d.describe());
        let timing = match (timing, registered) {
            (false, _) => Timing::Off,
            (true, Err(why)) => Timing::Unavailable(why),
            (true, Ok(())) => {
                let db = vfs::connections_for(std::path::Path::new(path));
                // One device per database in a process: a connection that
                // names another, or none, would have its syncs go where the
                // others' do not.
                let clash = |what: String| {
                    Err(DbError::new(
                        ErrorKind::BadUrl,
                        format!("sqlite: {path}: {what} (one device per database)"),
                    ))
                };
                // The database's device: this one when it has none yet.
                match (&device, db.current_device()) {
                    (Some(d), _) => {
                        let had = db.device(d.clone());
                        if had.describe() != d.describe() {
                            return clash(format!(
                                "open already with the device {}, not {}",
                                had.describe(),
                                d.describe()
                            ));
                        }
                    }
                    (None, Some(had)) => {
                        return clash(format!(
                            "open already with the device {}: give its ?model= too",
                            had.describe()
                        ));
                    }
                    (None, None) => {}
                }
                let conn = db.connect();
                Timing::On(db, conn)
            }
        };
        let _active = timing.active();
        let cannot = |e| DbError::new(ErrorKind::Connect, format!("sqlite: cannot open {path}: {e}"));
        let conn = match &timing {
            Timing::On(..) => {
                rusqlite::Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), vfs::NAME)
            }
            _ => rusqlite::Connection::open(path),
        }
        .map_err(cannot)?;
        conn.busy_timeout(Duration::from_secs(60)).map_err(map_err)?;
        conn.set_prepared_statement_cache_capacity(256);
        conn.execute_batch(&format!(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous={synchronous}; PRAGMA foreign_keys=OFF;"
        ))
        .map_err(map_err)?;
        let vfs_name = match &timing {
            Timing::On(..) => vfs::NAME.to_string(),
            Timing::Off => "default".to_string(),
            Timing::Unavailable(why) => format!("default (the timing VFS could not be registered: {why})"),
        };
        let mut settings = vec![
            ("journal_mode".into(), "wal".into()),
            ("synchronous".into(), synchronous.to_lowercase()),
            ("vfs".into(), vfs_name),
        ];
        if let Some(d) = device_label {
            settings.push(("device".into(), d));
        }
        drop(_active);
        Ok(SqliteConn { db: Db { conn: Some(conn), sql: StmtCache::new() }, settings, timing })
    }
}

impl Db {
    fn c(&self) -> &rusqlite::Connection {
        self.conn.as_ref().expect("a SQLite connection is open until dropped")
    }

    fn translated(&mut self, stmt: &Stmt) -> String {
        if let Some(s) = self.sql.get(stmt.id()) {
            return s.clone();
        }
        let s = to_sqlite(stmt.sql());
        self.sql.insert(stmt.id(), s.clone());
        s
    }
}

impl Drop for SqliteConn {
    /// Closing is a call too: the last connection's close checkpoints the
    /// WAL into the database file and syncs it.
    fn drop(&mut self) {
        let _active = self.timing.active();
        drop(self.db.conn.take());
    }
}

impl Connection for SqliteConn {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn caps(&self) -> Caps {
        Caps {
            procedures: false,
            copy: false,
            concurrent_writers: false,
            server_counters: false,
            failed_commit_ends_transaction: false,
        }
    }

    fn execute(&mut self, stmt: &Stmt, params: &[Value]) -> Result<u64, DbError> {
        let _active = self.timing.active();
        let sql = self.db.translated(stmt);
        let mut s = self.db.c().prepare_cached(&sql).map_err(map_err)?;
        let n = s.execute(rusqlite::params_from_iter(params.iter())).map_err(map_err)?;
        Ok(n as u64)
    }

    fn query(&mut self, stmt: &Stmt, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let _active = self.timing.active();
        let sql = self.db.translated(stmt);
        let mut s = self.db.c().prepare_cached(&sql).map_err(map_err)?;
        let ncol = s.column_count();
        let mut rows = s.query(rusqlite::params_from_iter(params.iter())).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(map_err)? {
            let mut vals = Vec::with_capacity(ncol);
            for i in 0..ncol {
                vals.push(from_ref(r.get_ref(i).map_err(map_err)?));
            }
            out.push(Row(vals));
        }
        Ok(out)
    }

    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        let _active = self.timing.active();
        self.db.c().execute_batch(sql).map_err(map_err)
    }

    fn begin(&mut self) -> Result<(), DbError> {
        let _active = self.timing.active();
        self.db.c().execute_batch("BEGIN IMMEDIATE").map_err(map_err)
    }

    fn commit(&mut self) -> Result<(), DbError> {
        let _active = self.timing.active();
        self.db.c().execute_batch("COMMIT").map_err(map_err)
    }

    fn rollback(&mut self) -> Result<(), DbError> {
        let _active = self.timing.active();
        if self.db.c().is_autocommit() {
            return Ok(());
        }
        self.db.c().execute_batch("ROLLBACK").map_err(map_err)
    }

    fn load(&mut self, table: &str, columns: &[&str], rows: &[Vec<Value>]) -> Result<(), DbError> {
        let _active = self.timing.active();
        let conn = self.db.c();
        let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
        let sql = format!("INSERT INTO {table} ({}) VALUES ({})", columns.join(", "), marks.join(", "));
        // Inside the caller's transaction, or in one of its own.
        let own = conn.is_autocommit();
        if own {
            conn.execute_batch("BEGIN IMMEDIATE").map_err(map_err)?;
        }
        let res = (|| {
            let mut s = conn.prepare_cached(&sql).map_err(map_err)?;
            for r in rows {
                s.execute(rusqlite::params_from_iter(r.iter())).map_err(map_err)?;
            }
            Ok(())
        })();
        if own {
            let end = if res.is_ok() { "COMMIT" } else { "ROLLBACK" };
            let done = conn.execute_batch(end).map_err(map_err);
            res.and(done)
        } else {
            res
        }
    }

    fn counters(&mut self) -> Result<Option<Counters>, DbError> {
        Ok(None)
    }

    fn server_info(&mut self) -> Result<ServerInfo, DbError> {
        Ok(ServerInfo {
            engine: "sqlite".into(),
            version: rusqlite::version().to_string(),
            settings: self.settings.iter().cloned().collect(),
        })
    }

    fn is_closed(&self) -> bool {
        false
    }

    fn vfs_connections(&self) -> Result<Arc<VfsConnections>, String> {
        match &self.timing {
            Timing::On(db, _) => Ok(db.clone()),
            Timing::Off => Err("the SQLite database was opened with ?timing=off".into()),
            Timing::Unavailable(why) => Err(format!("SQLite's timing VFS could not be registered ({why})")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VfsStates;
    use std::sync::Mutex;

    fn open(dir: &tempfile::TempDir) -> SqliteConn {
        let url = DbUrl::parse(&format!("sqlite:{}", dir.path().join("t.db").display())).unwrap();
        SqliteConn::open(&url).unwrap()
    }

    #[test]
    fn executes_queries_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(&dir);
        c.batch("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, amount REAL)").unwrap();
        c.load(
            "t",
            &["id", "name", "amount"],
            &[vec![1.into(), "a".into(), 1.5.into()], vec![2.into(), "b".into(), Value::Null]],
        )
        .unwrap();
        let upd = Stmt::new("UPDATE t SET amount = $2 WHERE id = $1");
        c.begin().unwrap();
        assert_eq!(c.execute(&upd, &[2.into(), 7.0.into()]).unwrap(), 1);
        c.commit().unwrap();
        let q = Stmt::new("SELECT name, amount FROM t WHERE id = $1");
        let r = c.query_one(&q, &[2.into()]).unwrap();
        assert_eq!(r.text(0).unwrap(), "b");
        assert_eq!(r.float(1).unwrap(), 7.0);
        assert!(c.query_opt(&q, &[9.into()]).unwrap().is_none());
        assert!(c.counters().unwrap().is_none());
    }

    #[test]
    fn missing_table_is_reported_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(&dir);
        let e = c.query(&Stmt::new("SELECT * FROM nope"), &[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MissingObject);
    }

    fn open_with(dir: &tempfile::TempDir, options: &str) -> SqliteConn {
        let url = DbUrl::parse(&format!("sqlite:{}{options}", dir.path().join("t.db").display())).unwrap();
        SqliteConn::open(&url).unwrap()
    }

    /// Twenty one-row commits.
    fn commits(c: &mut SqliteConn) {
        c.batch("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)").unwrap();
        let ins = Stmt::new("INSERT INTO t (v) VALUES ($1)");
        for i in 0..20 {
            c.begin().unwrap();
            c.execute(&ins, &[format!("row {i}").into()]).unwrap();
            c.commit().unwrap();
        }
    }

    /// What a looker saw: how many of its looks saw a connection in each
    /// class, and the most connections inside a call at one look.
    #[derive(Debug, Default)]
    struct Seen {
        looks: u64,
        cpu: u64,
        write: u64,
        sync: u64,
        most_active: u32,
    }

    /// Runs `f` while another thread looks at the database's connections
    /// as often as it can (from before `f` begins to after it ends).
    fn watch(timings: &Arc<VfsConnections>, f: impl FnOnce()) -> Seen {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (started, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (t, go, st) = (timings.clone(), started.clone(), stop.clone());
        let looker = std::thread::spawn(move || {
            let mut seen = Seen::default();
            loop {
                let done = st.load(Ordering::Acquire);
                let s = t.states();
                go.store(true, Ordering::Release);
                seen.looks += 1;
                seen.cpu += u64::from(s.cpu > 0);
                seen.write += u64::from(s.write > 0);
                seen.sync += u64::from(s.sync > 0);
                seen.most_active = seen.most_active.max(s.active());
                if done {
                    return seen;
                }
                std::thread::yield_now();
            }
        });
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        f();
        stop.store(true, Ordering::Release);
        looker.join().unwrap()
    }

    /// The test directories are on a disk (/tmp here is ext4), where a
    /// sync blocks for a journal commit, so a looker running beside the
    /// commits sees them in it.
    #[test]
    fn looks_see_each_commit_s_sync_and_wal_works_through_the_timing_vfs() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open_with(&dir, "?synchronous=full");
        assert!(c.server_info().unwrap().settings["vfs"] == vfs::NAME);
        let timings = c.vfs_connections().expect("timed");
        // (Its CPU between the flushes may go unseen: a looker sharing
        // the writer's core runs while the writer waits; the test at
        // synchronous=off sees it.)
        let seen = watch(&timings, || commits(&mut c));
        assert!(seen.sync > 0, "{seen:?}");
        assert_eq!(seen.most_active, 1, "{seen:?}");
        // Between calls the connection is open and idle: not counted.
        assert_eq!(timings.states(), VfsStates { idle: 1, ..VfsStates::default() });
        // A second connection shares the states and sees the rows through
        // the WAL's shared memory.
        let mut d = open_with(&dir, "");
        assert!(Arc::ptr_eq(&timings, &d.vfs_connections().unwrap()));
        assert_eq!(timings.states().idle, 2);
        let n = d.query_one(&Stmt::new("SELECT COUNT(*) FROM t"), &[]).unwrap().int(0).unwrap();
        assert_eq!(n, 20);
        d.batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        let seen = watch(&timings, || commits(&mut d));
        assert!(seen.sync > 0, "{seen:?}");
        drop((c, d));
        let mut e = open_with(&dir, "");
        let n = e.query_one(&Stmt::new("SELECT COUNT(*) FROM t"), &[]).unwrap().int(0).unwrap();
        assert_eq!(n, 40);
    }

    #[test]
    fn synchronous_off_never_syncs_and_timing_off_keeps_no_states() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open_with(&dir, "?synchronous=off");
        // Turning a new database to WAL flushed it (before the
        // synchronous pragma); the commits after never do.
        let timings = c.vfs_connections().expect("timed");
        // Commits for half a second (they never block, so the looker runs
        // only where the host gives it a core beside them).
        let seen = watch(&timings, || {
            let until = std::time::Instant::now() + Duration::from_millis(500);
            while std::time::Instant::now() < until {
                commits(&mut c)
            }
        });
        assert!(seen.cpu > 0 && seen.looks >= 10, "{seen:?}");
        assert_eq!(seen.sync, 0, "{seen:?}");
        let dir = tempfile::tempdir().unwrap();
        let mut c = open_with(&dir, "?timing=off");
        commits(&mut c);
        assert!(c.vfs_connections().unwrap_err().contains("timing=off"));
        assert_eq!(c.server_info().unwrap().settings["vfs"], "default");
        let e = SqliteConn::open(&DbUrl::parse("sqlite:/tmp/x.db?timing=maybe").unwrap()).err().unwrap();
        assert!(e.to_string().contains("timing='maybe'"), "{e}");
    }

    #[test]
    fn a_writer_waiting_for_the_lock_is_seen_as_busy() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(&dir);
        commits(&mut c);
        let timings = c.vfs_connections().unwrap();
        c.begin().unwrap();
        let mut d = open(&dir);
        let waiter = std::thread::spawn(move || {
            d.begin().unwrap();
            d.commit().unwrap();
        });
        // The waiter sleeps in the busy handler (1 ms, then longer) and
        // tries again, until the lock is free; the holder is between its
        // calls, idle.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut busy = None;
        while busy.is_none() && std::time::Instant::now() < deadline {
            busy = Some(timings.states()).filter(|s| s.busy > 0);
            std::thread::sleep(Duration::from_millis(1));
        }
        c.commit().unwrap();
        waiter.join().unwrap();
        assert_eq!(busy, Some(VfsStates { idle: 1, busy: 1, ..VfsStates::default() }));
        assert_eq!(timings.states(), VfsStates { idle: 1, ..VfsStates::default() });
    }

    #[test]
    fn rejects_unknown_url_options() {
        let e = SqliteConn::open(&DbUrl::parse("sqlite:/tmp/x.db?cache=big").unwrap()).err().unwrap();
        assert!(e.to_string().contains("cache=big"));
    }

    /// Regression: a timing VFS that could not be registered was reported
    /// as `?timing=off`, which the user had not asked for.
    #[test]
    fn a_timing_vfs_that_could_not_be_registered_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut c = SqliteConn::open_timed(
            path.to_str().unwrap(),
            "FULL",
            true,
            Err("refused (code 1)".into()),
            None,
        )
        .unwrap();
        commits(&mut c);
        let vfs = &c.server_info().unwrap().settings["vfs"];
        assert_eq!(vfs, "default (the timing VFS could not be registered: refused (code 1))");
        let e = crate::waits::WaitSource::open(Box::new(c)).err().unwrap();
        assert!(e.contains("timing VFS could not be registered (refused (code 1))"), "{e}");
        assert!(!e.contains("timing=off"), "{e}");
    }

    /// A connection's close (the last one checkpoints the WAL into the
    /// database file and syncs it) is a call of the connection, seen as
    /// its waits; after it, nothing of it is counted.
    #[test]
    fn the_close_s_checkpoint_is_seen_and_a_closed_connection_is_not_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open_with(&dir, "?synchronous=full");
        commits(&mut c);
        let timings = c.vfs_connections().unwrap();
        let seen = watch(&timings, || drop(c));
        assert!(seen.sync > 0, "the close synced nothing a look saw: {seen:?}");
        assert_eq!(seen.most_active, 1, "{seen:?}");
        assert_eq!(timings.states(), VfsStates::default());
    }

    /// A device that counts what the VFS hands it.
    #[derive(Debug, Default)]
    struct Counting {
        files: Mutex<Vec<String>>,
        syncs: Mutex<Vec<u32>>,
        written: std::sync::atomic::AtomicU64,
    }

    impl FileDevice for Counting {
        fn open(&self, path: &std::path::Path) -> u32 {
            let mut f = self.files.lock().unwrap();
            f.push(path.display().to_string());
            (f.len() - 1) as u32
        }
        fn write(&self, _file: u32, _offset: u64, len: u64) {
            self.written.fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        }
        fn truncate(&self, _file: u32, _size: u64) {}
        fn sync(&self, file: u32) {
            self.syncs.lock().unwrap().push(file);
        }
        fn describe(&self) -> String {
            "counting".into()
        }
    }

    static COUNTING: std::sync::OnceLock<Arc<Counting>> = std::sync::OnceLock::new();

    fn counting(spec: &str, _dir: &std::path::Path) -> Result<Arc<dyn FileDevice>, String> {
        match spec {
            "counting" => Ok(COUNTING.get_or_init(Default::default).clone()),
            _ => Err(format!("no device '{spec}'")),
        }
    }

    /// A device under the files (`?model=`) is handed every commit's sync
    /// of the WAL: exactly one per commit, checked against the commits
    /// made; its writes; and the record names it.
    #[test]
    fn a_device_under_the_files_sees_one_wal_sync_per_commit() {
        crate::device::set_device_opener(counting);
        let dir = tempfile::tempdir().unwrap();
        let mut c = open_with(&dir, "?model=counting");
        assert_eq!(c.server_info().unwrap().settings["device"], "counting");
        c.batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").unwrap();
        let dev = COUNTING.get().unwrap();
        let wal = || {
            let files = dev.files.lock().unwrap();
            let wal = files.iter().position(|f| f.ends_with("t.db-wal")).expect("the WAL is on the device");
            dev.syncs.lock().unwrap().iter().filter(|&&f| f as usize == wal).count()
        };
        let before = wal();
        let written = dev.written.load(std::sync::atomic::Ordering::Relaxed);
        let ins = Stmt::new("INSERT INTO t (v) VALUES ($1)");
        for i in 0..25 {
            c.begin().unwrap();
            c.execute(&ins, &[format!("row {i}").into()]).unwrap();
            c.commit().unwrap();
        }
        assert_eq!(wal() - before, 25, "one WAL sync per commit");
        assert!(dev.written.load(std::sync::atomic::Ordering::Relaxed) >= written + 25 * 4096);
        // Bad input: a device the opener does not know, named; and a
        // model without the VFS.
        let bad = |o: &str| {
            let url = DbUrl::parse(&format!("sqlite:{}{o}", dir.path().join("u.db").display())).unwrap();
            SqliteConn::open(&url).err().expect("refused")
        };
        let e = bad("?model=nothing");
        assert_eq!(e.kind(), ErrorKind::BadUrl);
        assert!(e.to_string().contains("model=nothing: no device 'nothing'"), "{e}");
        let e = bad("?model=counting&timing=off");
        assert!(e.to_string().contains("needs the timing VFS"), "{e}");
        assert!(bad("?model=").to_string().contains("model= names no model"));
        // The database open with a device: a connection without one is
        // refused, not left to sync where the others do not.
        let url = DbUrl::parse(&format!("sqlite:{}", dir.path().join("t.db").display())).unwrap();
        let e = SqliteConn::open(&url).err().expect("refused");
        assert!(e.to_string().contains("open already with the device counting"), "{e}");
    }
}
