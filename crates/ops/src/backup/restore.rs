//! What a backup holds, told from its contents ([`kind_of`]), and the
//! restore of a logical one (a pg_dump directory, a mariadb-dump SQL file,
//! an SQLite file) into a fresh database: made, loaded by the engine's
//! tool, analysed and checked ([`super::verify`]). A restore that fails
//! drops the database it made. A physical backup is [`super::physical`]'s.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use storbench_db::{Connection, DbUrl, Engine, Stmt};
use storbench_metrics::{StepReport, Unit};

use super::tools::{mysql_conn_args, pg_conn, remove, run_tool, server_parts, size_of, tool, Usage};
use super::verify::{analyze, verify};
use super::{with_database, BackupError, Database, Restored};

/// What a backup path holds, told from its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pg_dump directory (`-Fd`).
    PgDump,
    /// A plain pg_basebackup: a data directory.
    PgBase,
    /// A tar pg_basebackup (base.tar and pg_wal.tar, compressed or not).
    PgBaseTar,
    /// A mariadb-dump SQL file.
    MysqlSql,
    /// A mariadb-backup directory.
    MariaBackup,
    /// An SQLite file.
    Sqlite,
}

impl Kind {
    /// A physical backup, restored into a new data directory by a
    /// temporary server ([`super::physical`]).
    pub fn is_physical(self) -> bool {
        matches!(self, Kind::PgBase | Kind::PgBaseTar | Kind::MariaBackup)
    }
}

/// What the backup at `p` is; bad input when it is none storbench knows.
pub fn kind_of(p: &Path) -> Result<Kind, BackupError> {
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
        return Err(BackupError::Usage(format!("--from {}: no such file or directory", p.display())));
    }
    Err(BackupError::Usage(format!(
        "--from {}: not a backup storbench knows (a pg_dump directory, a mariadb-dump SQL file, an SQLite file, a mariadb-backup directory or a plain pg_basebackup)",
        p.display()
    )))
}

/// `name` as a database name storbench will create: letters, digits, `_`.
fn check_name(shown: &str, name: &str) -> Result<(), BackupError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(BackupError::Usage(format!(
            "--to {shown}: database name '{name}' must be letters, digits and _"
        )));
    }
    Ok(())
}

/// The maintenance database of a server restored into, connected, and the
/// name of the fresh database it makes.
struct Admin {
    db: Database,
    conn: Box<dyn Connection>,
    name: String,
}

/// A logical restore checked and ready to run.
pub struct LogicalRestore {
    db: Database,
    kind: Kind,
    from: PathBuf,
    jobs: usize,
    compare: Option<Database>,
    bin: Option<PathBuf>,
    admin: Option<Admin>,
    backup_bytes: f64,
}

/// The server's maintenance database, where a fresh one is made.
fn admin_of(db: &Database) -> Result<Database, BackupError> {
    let engine = db.url.engine();
    let url =
        DbUrl::parse(&with_database(&db.url, if engine == Engine::Postgres { "postgres" } else { "mysql" }))
            .map_err(BackupError::Usage)?;
    let shown = url.redacted();
    Ok(Database::new(url, shown))
}

impl LogicalRestore {
    /// A logical backup holds one database: `--database` is bad input.
    pub fn check_scope(database: Option<&str>) -> Result<(), BackupError> {
        match database {
            Some(d) => Err(BackupError::Usage(format!(
                "--database {d}: only a physical backup (mariadb-backup, pg_basebackup) holds several databases"
            ))),
            None => Ok(()),
        }
    }

    /// The backup `kind` at `from` restores into `db` with `jobs`.
    pub fn check_target(kind: Kind, from: &Path, db: &Database, jobs: usize) -> Result<(), BackupError> {
        let want = match kind {
            Kind::PgDump => Engine::Postgres,
            Kind::MysqlSql => Engine::Mysql,
            Kind::Sqlite => Engine::Sqlite,
            Kind::PgBase | Kind::PgBaseTar | Kind::MariaBackup => {
                unreachable!("a physical backup is physical::restore's")
            }
        };
        if db.url.engine() != want {
            return Err(BackupError::Usage(format!(
                "--to {}: the backup in {} is for {want:?}",
                db.shown,
                from.display()
            )));
        }
        if jobs > 1 && kind != Kind::PgDump {
            return Err(BackupError::Usage(format!("--jobs {jobs}: only pg_restore runs jobs")));
        }
        Ok(())
    }

    /// Finds the tool and checks that the fresh database does not exist
    /// (on a server, over a connection to its maintenance database, kept
    /// for the run). Creates nothing.
    pub fn plan(
        kind: Kind,
        from: PathBuf,
        db: Database,
        jobs: usize,
        compare: Option<Database>,
    ) -> Result<LogicalRestore, BackupError> {
        let bin = match kind {
            Kind::PgDump => Some(tool("pg_restore", "postgresql-client")?),
            Kind::MysqlSql => Some(tool("mariadb", "mariadb-client")?),
            _ => None,
        };
        let engine = db.url.engine();
        let admin = match engine {
            Engine::Sqlite => {
                let p = db.sqlite_path().expect("an SQLite URL");
                if p.exists() {
                    return Err(BackupError::Usage(format!(
                        "--to {}: already exists; give a new file",
                        db.shown
                    )));
                }
                None
            }
            _ => {
                let name = db
                    .url
                    .database()
                    .ok_or_else(|| BackupError::Usage(format!("--to {}: names no database", db.shown)))?;
                check_name(&db.shown, name)?;
                let admin = admin_of(&db)?;
                let mut c = admin.open()?;
                let q = if engine == Engine::Postgres {
                    format!("SELECT 1 FROM pg_database WHERE datname = '{name}'")
                } else {
                    format!("SELECT 1 FROM information_schema.schemata WHERE schema_name = '{name}'")
                };
                if c.query_opt(&Stmt::new(q), &[]).map_err(|e| admin.error(e))?.is_some() {
                    return Err(BackupError::Usage(format!(
                        "--to {}: database '{name}' already exists; restore makes a fresh one",
                        db.shown
                    )));
                }
                Some(Admin { db: admin, conn: c, name: name.to_string() })
            }
        };
        let backup_bytes = size_of(&from) as f64;
        Ok(LogicalRestore { db, kind, from, jobs, compare, bin, admin, backup_bytes })
    }

    /// The backup's size (`backup.bytes`).
    pub fn backup_bytes(&self) -> f64 {
        self.backup_bytes
    }

    /// The server restored into: its maintenance database, connected
    /// (none for SQLite).
    pub fn admin(&mut self) -> Option<(&Database, &mut (dyn Connection + 'static))> {
        self.admin.as_mut().map(|a| (&a.db, a.conn.as_mut()))
    }

    /// Makes the fresh database, loads the backup, analyses and checks the
    /// copy. A restore that fails before the check drops what it made;
    /// a copy that fails its check stays, for inspection.
    pub fn run(mut self) -> Result<Restored, BackupError> {
        let t0 = Instant::now();
        let admin = self.admin.take();
        let (mut r, mut conn) = match self.load(admin, t0) {
            Ok(x) => x,
            Err(e) => {
                // A half-loaded copy is not left to be taken for a restore.
                drop_copy(&self.db);
                return Err(e);
            }
        };
        r.figure("backup.bytes", self.backup_bytes, Unit::Bytes);
        if let Some(s) = r.get("restore.ready_seconds") {
            r.figure("restore.mb_per_s", self.backup_bytes / 1e6 / s.max(1e-9), Unit::MBps);
        }
        // Integrity: a copy that loses rows or breaks a TPC-C condition is an error.
        let verdict = verify(&self.db, conn.as_mut(), self.compare.as_ref(), &mut r);
        Ok(Restored { report: r, verdict })
    }

    /// Makes the fresh database, loads the backup and analyses it; returns
    /// the figures and a connection to the copy.
    fn load(
        &self,
        admin: Option<Admin>,
        t0: Instant,
    ) -> Result<(StepReport, Box<dyn Connection>), BackupError> {
        let (db, from) = (&self.db, &self.from);
        let mut r = StepReport::default();
        let used;
        let mut conn;
        match self.kind {
            Kind::Sqlite => {
                let before = Usage::own();
                let dst = db.sqlite_path().expect("an SQLite URL");
                let mut out = rusqlite::Connection::open(&dst)
                    .map_err(|e| BackupError::Target(format!("creating {}: {e}", dst.display())))?;
                out.restore(rusqlite::MAIN_DB, from, None::<fn(rusqlite::backup::Progress)>).map_err(
                    |e| {
                        remove(&dst);
                        BackupError::Target(format!("SQLite restore into {}: {e}", dst.display()))
                    },
                )?;
                drop(out);
                conn = db.open()?;
                r.figure("restore.open_seconds", t0.elapsed().as_secs_f64(), Unit::S);
                used = before.own_since();
            }
            _ => {
                let Admin { db: admin, conn: mut ac, name } =
                    admin.expect("a server restore has an admin connection");
                ac.batch(&format!("CREATE DATABASE {name}")).map_err(|e| admin.error(e))?;
                conn = db.open()?;
                r.figure("restore.open_seconds", t0.elapsed().as_secs_f64(), Unit::S);
                let mut c = Command::new(self.bin.as_ref().expect("found by plan"));
                if self.kind == Kind::PgDump {
                    pg_conn(&mut c, db);
                    c.arg("-j").arg(self.jobs.to_string()).arg("--no-owner").arg(from);
                    c.arg("--exit-on-error");
                    used = run_tool(c, "pg_restore")?;
                } else {
                    let s = server_parts(db)?;
                    mysql_conn_args(&mut c, &s);
                    c.arg(&s.db);
                    c.stdin(
                        File::open(from)
                            .map_err(|e| BackupError::Failed(format!("opening {}: {e}", from.display())))?,
                    );
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
        used.figures(&mut r);
        Ok((r, conn))
    }
}

/// Drops the database (or removes the file) a failed restore made.
fn drop_copy(db: &Database) {
    match db.url.engine() {
        Engine::Sqlite => {
            if let Some(p) = db.sqlite_path() {
                remove(&p);
            }
        }
        engine => {
            let (Some(name), Ok(admin)) = (db.url.database(), admin_of(db)) else {
                return;
            };
            if let Ok(mut c) = admin.open() {
                let force = if engine == Engine::Postgres { " WITH (FORCE)" } else { "" };
                let _ = c.batch(&format!("DROP DATABASE IF EXISTS {name}{force}"));
            }
        }
    }
}
