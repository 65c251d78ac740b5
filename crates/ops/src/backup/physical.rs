//! The restore of a physical backup: a mariadb-backup directory (copied
//! with `cp -a` into a work directory beside the new data directory, the
//! copy prepared, then `--move-back` into the new data directory: the
//! backup itself is only read, so it restores the same way again and an
//! interrupted prepare cannot spoil it) or a plain pg_basebackup (copied
//! with `cp -a`).
//! A temporary server is then started on the copy, timed to accepting
//! connections (its crash recovery or WAL replay included) and to ready
//! (`ANALYZE` done), checked as a logical restore is (rows, `tpcc check`,
//! the comparison with a source), and stopped — always: after a failed
//! check, an error or an interruption too (the server has its own process
//! group, so the terminal's Ctrl-C reaches the caller, which raises the
//! flag it hands in). The copy stays, as a logical restore's database
//! does; a restore that fails before its server accepts connections
//! removes it. Should the caller be killed, the server is recorded
//! ([`tempserver`]) and the next physical restore's [`sweep`] stops it and
//! removes its copy.
//!
//! The temporary server can be reached by its Unix socket only, in a run
//! directory under storbench's state that only the server's user and root
//! can enter, and there admits any role (MariaDB: `--skip-networking
//! --skip-grant-tables`; PostgreSQL: `trust` on the socket, TCP refused),
//! so a restore needs, asks and stores no password. Nothing here prints.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use storbench_db::{DbUrl, Engine, Stmt};
use storbench_instances::pg::Temporary;
use storbench_instances::tempserver::{self, Record, Registration};
use storbench_metrics::{StepReport, Unit};

use super::mariadbd::Mariadbd;
use super::restore::Kind;
use super::tools::{pct, remove, run_tool, server_parts, size_of, tool, Usage};
use super::verify::{analyze, verify_all, Copy};
use super::{resolve_target, BackupError, Database, Restored};

/// The longest Unix socket path the kernel takes (`sun_path` is 108 bytes).
const SOCKET_PATH_MAX: usize = 107;

/// MariaDB's own schemas, left out of the checks by default.
const MARIADB_SYSTEM: [&str; 4] = ["mysql", "sys", "information_schema", "performance_schema"];

/// Stops every temporary server a killed storbench left running and
/// removes the copy it ran on; returns what it swept, for the caller to
/// say. Call it after every check, so bad input changes nothing.
pub fn sweep() -> Vec<Record> {
    tempserver::sweep()
}

/// A physical restore's paths and options, checked.
pub struct Checked {
    kind: Kind,
    engine: Engine,
    /// The backup itself (links resolved; only read).
    from: PathBuf,
    /// The new data directory, absolute.
    to: PathBuf,
    to_parent: PathBuf,
    /// mariadb-backup's work copy of the backup, beside `to`.
    work: PathBuf,
    jobs: usize,
    database: Option<String>,
}

/// Checks a physical restore of the backup `kind` at `from` into the new
/// data directory `to` (PATH or MEDIUM:/path), with `jobs` and the
/// database in scope. Creates nothing.
pub fn check(
    kind: Kind,
    from: &Path,
    to: &str,
    jobs: usize,
    database: Option<&str>,
) -> Result<Checked, BackupError> {
    let usage = |m: String| BackupError::Usage(m);
    if kind == Kind::PgBaseTar {
        return Err(usage(format!(
            "--from {}: a tar pg_basebackup; restore takes a plain one (--format plain), or unpack base.tar into a new directory and pg_wal.tar into its pg_wal",
            from.display()
        )));
    }
    let (engine, what) = match kind {
        Kind::MariaBackup => (Engine::Mysql, "a mariadb-backup"),
        _ => (Engine::Postgres, "a pg_basebackup"),
    };
    if to.contains("://") || to.starts_with("sqlite:") || to.starts_with("managed:") {
        return Err(usage(format!(
            "--to {}: {what} is restored into a new data directory: give PATH or MEDIUM:/path",
            storbench_db::redact_text(to)
        )));
    }
    let to = resolve_target(to)?;
    if to.exists() {
        return Err(usage(format!("--to {}: already exists; give a new path", to.display())));
    }
    let to_parent = to.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    if !to_parent.is_dir() {
        return Err(usage(format!(
            "--to {}: the directory {} does not exist",
            to.display(),
            to_parent.display()
        )));
    }
    // The server is given absolute paths: it runs from its own directory.
    let to = std::path::absolute(&to).map_err(|e| usage(format!("--to {}: {e}", to.display())))?;
    // mariadb-backup prepares a copy of the backup, made beside the new data
    // directory (the same filesystem: --move-back then renames its files).
    let work = to.with_file_name(format!(
        ".{}.storbench-prepare",
        to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    // The backup itself, not a link to it: `cp -a` copies a link named on
    // its command line as a link, and the copy (prepared, moved back,
    // served) would then be the backup.
    let from = std::fs::canonicalize(from).map_err(|e| usage(format!("--from {}: {e}", from.display())))?;
    if kind == Kind::PgBase && jobs > 1 {
        return Err(usage(format!(
            "--jobs {jobs}: a pg_basebackup is copied by one cp; jobs are pg_restore's and mariadb-backup's"
        )));
    }
    if kind == Kind::PgBase && std::fs::read_dir(from.join("pg_tblspc")).is_ok_and(|mut d| d.next().is_some())
    {
        return Err(usage(format!(
            "--from {}: has tablespaces (pg_tblspc) outside its directory; storbench restores a base backup without them",
            from.display()
        )));
    }
    if let Some(d) = database {
        if d.is_empty() || !d.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            return Err(usage(format!("--database '{d}': a database name is letters, digits, _ and $")));
        }
    }
    let database = database.map(str::to_string);
    Ok(Checked { kind, engine, from, to, to_parent, work, jobs, database })
}

/// What restores a physical backup: the tools, found before anything is made.
enum Tools {
    Maria {
        backup: PathBuf,
        server: PathBuf,
        cp: PathBuf,
    },
    /// `bindir`: the server binaries of the backup's major version.
    Pg {
        cp: PathBuf,
        bindir: PathBuf,
    },
}

impl Checked {
    /// The engine the backup is for.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Checks the source to compare with (`compare`: the same engine, the
    /// database in scope), finds the tools, and names the run directory.
    /// Creates nothing.
    pub fn plan(self, compare: Option<Database>) -> Result<Physical, BackupError> {
        let c = self;
        if let Some(cmp) = &compare {
            if cmp.url.engine() != c.engine {
                return Err(BackupError::Usage(format!(
                    "--compare {}: the backup in {} is for {:?}",
                    cmp.shown,
                    c.from.display(),
                    c.engine
                )));
            }
            if let (Some(d), Some(cd)) = (&c.database, cmp.url.database()) {
                if d != cd {
                    return Err(BackupError::Usage(format!(
                        "--compare {}: compares database '{cd}', and --database names '{d}'; give the same",
                        cmp.shown
                    )));
                }
            }
        }
        let tools = match c.kind {
            Kind::MariaBackup => Tools::Maria {
                backup: tool("mariadb-backup", "mariadb-backup")?,
                server: super::mariadbd::server_bin()?,
                cp: tool("cp", "coreutils")?,
            },
            _ => Tools::Pg {
                bindir: storbench_instances::pg::bindir_for(&c.from)?,
                cp: tool("cp", "coreutils")?,
            },
        };
        let run_dir = run_dir_path();
        let sock = run_dir.join("mariadbd.sock");
        if sock.as_os_str().len() > SOCKET_PATH_MAX {
            return Err(BackupError::Usage(format!(
                "{}: longer than a Unix socket path may be ({SOCKET_PATH_MAX} bytes): set STORBENCH_STATE to a shorter directory",
                sock.display()
            )));
        }
        let version = match &tools {
            Tools::Maria { server, .. } => first_line(Command::new(server).arg("--version")),
            Tools::Pg { bindir, .. } => first_line(Command::new(bindir.join("postgres")).arg("--version")),
        };
        let backup_bytes = size_of(&c.from) as f64;
        Ok(Physical { c, compare, tools, run_dir, version, backup_bytes, reg: None })
    }
}

/// A physical restore checked and ready to register and run.
pub struct Physical {
    c: Checked,
    compare: Option<Database>,
    tools: Tools,
    /// The run directory (socket, pid file, log, access rules).
    run_dir: PathBuf,
    version: Option<String>,
    backup_bytes: f64,
    reg: Option<Registration>,
}

impl Physical {
    /// The backup (links resolved).
    pub fn from(&self) -> &Path {
        &self.c.from
    }

    /// The new data directory.
    pub fn to(&self) -> &Path {
        &self.c.to
    }

    /// The directory the backup is in.
    pub fn from_parent(&self) -> PathBuf {
        self.c.from.parent().unwrap_or(Path::new("/")).to_path_buf()
    }

    /// The directory the new data directory is made in.
    pub fn to_parent(&self) -> &Path {
        &self.c.to_parent
    }

    /// The backup's size (`backup.bytes`).
    pub fn backup_bytes(&self) -> f64 {
        self.backup_bytes
    }

    /// The server's engine as a run records it: `mariadb` or `postgres`.
    pub fn server_engine(&self) -> &'static str {
        if self.c.engine == Engine::Mysql {
            "mariadb"
        } else {
            "postgres"
        }
    }

    /// The server's version line (`mariadbd --version`, `postgres --version`).
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Records the server about to run and what is made for it, so a
    /// caller killed from here on leaves nothing the next [`sweep`] does
    /// not remove. Call after [`sweep`]: a work copy a killed restore left
    /// is in the way.
    pub fn register(&mut self) -> Result<(), BackupError> {
        let mut made = vec![self.run_dir.clone()];
        if self.c.kind == Kind::MariaBackup {
            made.push(self.c.work.clone());
        }
        if self.c.kind == Kind::MariaBackup && self.c.work.exists() {
            return Err(BackupError::Usage(format!(
                "--to {}: {} exists (a work copy an earlier restore left): remove it",
                self.c.to.display(),
                self.c.work.display()
            )));
        }
        let program = if self.c.engine == Engine::Mysql { "mariadbd" } else { "postgres" };
        self.reg = Some(Registration::new(program, &self.c.to, &made)?);
        Ok(())
    }

    /// Copies the backup, starts a temporary server on the copy, analyses
    /// and checks its databases, and stops the server. An error before the
    /// server accepted connections removes the copy; `interrupted` (the
    /// caller's flag) ends the restore at its next step.
    pub fn run(mut self, interrupted: &AtomicBool) -> Result<Restored, BackupError> {
        let Some(mut reg) = self.reg.take() else {
            return Err(BackupError::Failed("a physical restore runs once registered".into()));
        };
        let mut r = StepReport::default();
        let run = OwnDir(self.run_dir.clone());
        let (mut server, mut copies) = match self.open_copy(&mut reg, interrupted, &mut r) {
            Ok(x) => x,
            Err(e) => {
                // The server (if it started) is stopped by now: its guard was
                // dropped on the way out. A copy no server opened is removed
                // (only one this restore made: `to` may have appeared since
                // it was checked).
                if reg.made_data() {
                    remove(&self.c.to);
                }
                drop(run);
                drop(reg);
                return Err(e);
            }
        };
        r.figure("backup.bytes", self.backup_bytes, Unit::Bytes);
        if let Some(s) = r.get("restore.ready_seconds") {
            r.figure("restore.mb_per_s", self.backup_bytes / 1e6 / s.max(1e-9), Unit::MBps);
        }
        // Integrity, per database: a copy that loses rows or breaks a TPC-C
        // condition is an error. The copy is kept for inspection either way.
        let verdict = verify_all(&mut copies, self.compare.as_ref(), &self.c.to, &mut r);
        drop(copies);
        let stopped = server.stop();
        drop(server);
        if stopped.is_ok() {
            drop(run);
            drop(reg);
        } else {
            // A server that would not stop keeps its record and run directory,
            // so the next restore's sweep stops it.
            std::mem::forget(run);
            std::mem::forget(reg);
        }
        Ok(Restored { report: r, verdict: verdict.and(stopped) })
    }

    /// Loads the copy, starts its server, waits for it and analyses the
    /// databases in scope. Returns the running server and a connection to
    /// each database; on an error the server is stopped.
    fn open_copy(
        &self,
        reg: &mut Registration,
        interrupted: &AtomicBool,
        r: &mut StepReport,
    ) -> Result<(Server, Vec<Copy>), BackupError> {
        let (from, to, run_dir) = (&self.c.from, &self.c.to, &self.run_dir);
        let t0 = Instant::now();
        self.load(reg, t0, r)?;
        if interrupted.load(Ordering::Relaxed) {
            return Err(BackupError::Interrupted);
        }
        make_run_dir(run_dir)?;
        let server = match &self.tools {
            Tools::Maria { server, .. } => {
                let settings = super::mariadbd::backup_settings(from);
                Server::Maria(Mariadbd::start(server, &settings, to, run_dir, reg, interrupted)?)
            }
            Tools::Pg { .. } => {
                let t = Temporary::start(to, run_dir)?;
                if let Some(pid) = t.pid() {
                    reg.set_pid(pid)?;
                }
                let role = pg_role(&t, self.compare.as_ref())?;
                Server::Pg(Box::new(t), role)
            }
        };
        // Open: the database accepts connections (Mariadbd::start and pg_role
        // return once one connected).
        r.figure("restore.start_seconds", server.start_time().as_secs_f64(), Unit::S);
        r.figure("restore.open_seconds", t0.elapsed().as_secs_f64(), Unit::S);
        let mut names = server.databases()?;
        if let Some(d) = &self.c.database {
            if !names.iter().any(|n| n == d) {
                return Err(BackupError::Failed(format!(
                    "--database {d}: the restored copy has no such database (it has {})",
                    names.join(", ")
                )));
            }
            names.retain(|n| n == d);
        }
        let t_an = Instant::now();
        let mut copies = Vec::new();
        for name in names {
            let db = server.db(&name, to)?;
            let mut conn = db.open()?;
            analyze(&db, conn.as_mut())?;
            copies.push((name, db, conn));
        }
        r.figure("restore.analyze_seconds", t_an.elapsed().as_secs_f64(), Unit::S);
        r.figure("restore.ready_seconds", t0.elapsed().as_secs_f64(), Unit::S);
        Ok((server, copies))
    }

    /// Makes the data directory and loads the copy into it (a work copy
    /// prepared and moved back, or cp); records the copy's figures.
    fn load(&self, reg: &mut Registration, t0: Instant, r: &mut StepReport) -> Result<(), BackupError> {
        let (from, to) = (&self.c.from, &self.c.to);
        // The data directory is made here, empty, and recorded before anything
        // goes into it (the sweep removes only the directory this made).
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(to)
            .map_err(|e| BackupError::Target(format!("creating {}: {e}", to.display())))?;
        if let Err(e) = reg.set_data_made() {
            let _ = std::fs::remove_dir(to);
            return Err(e.into());
        }
        let mut used = Usage::default();
        match &self.tools {
            Tools::Maria { backup, cp, .. } => {
                // --prepare rewrites what it prepares: a copy, never the backup.
                let work = OwnDir(self.c.work.clone());
                let mut c = Command::new(cp);
                c.arg("-a").arg(from).arg(&work.0);
                used.add(run_tool(c, "cp")?);
                let copied = t0.elapsed();
                // --no-defaults (first, as the tool wants it): the machine's
                // my.cnf may put redo logs or undo tablespaces in other
                // directories, which a move-back would then write into.
                let t = Instant::now();
                let mut c = Command::new(backup);
                c.args(["--no-defaults", "--prepare"]).arg(format!("--target-dir={}", work.0.display()));
                used.add(run_tool(c, "mariadb-backup --prepare")?);
                r.figure("restore.prepare_seconds", t.elapsed().as_secs_f64(), Unit::S);
                let t = Instant::now();
                let mut c = Command::new(backup);
                c.args(["--no-defaults", "--move-back"])
                    .arg(format!("--target-dir={}", work.0.display()))
                    .arg(format!("--datadir={}", to.display()))
                    .arg(format!("--parallel={}", self.c.jobs));
                used.add(run_tool(c, "mariadb-backup --move-back")?);
                drop(work);
                r.figure("restore.copy_seconds", (copied + t.elapsed()).as_secs_f64(), Unit::S);
            }
            Tools::Pg { cp, .. } => {
                let mut c = Command::new(cp);
                c.arg("-a").arg(from.join(".")).arg(to);
                used.add(run_tool(c, "cp")?);
                r.figure("restore.copy_seconds", t0.elapsed().as_secs_f64(), Unit::S);
            }
        }
        let load = t0.elapsed().as_secs_f64();
        r.figure("restore.load_seconds", load, Unit::S);
        used.figures(r);
        Ok(())
    }
}

/// The temporary server on the copy.
enum Server {
    Maria(Mariadbd),
    /// The server and the role storbench connects as.
    Pg(Box<Temporary>, String),
}

impl Server {
    /// A database of the copy, by its Unix socket; shown as the data
    /// directory and the database's name.
    fn db(&self, name: &str, to: &Path) -> Result<Database, BackupError> {
        match self {
            Server::Maria(m) => maria_db(m.socket(), name, to),
            Server::Pg(t, role) => pg_db(t, role, name, to),
        }
    }

    /// The databases of the copy, the server's own left out.
    fn databases(&self) -> Result<Vec<String>, BackupError> {
        let (admin, sql) = match self {
            Server::Maria(_) => (
                "mysql",
                format!(
                    "SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT IN ('{}') ORDER BY 1",
                    MARIADB_SYSTEM.join("', '")
                ),
            ),
            Server::Pg(..) => (
                "postgres",
                "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY 1".to_string(),
            ),
        };
        let db = self.db(admin, Path::new("the copy"))?;
        let mut c = db.open()?;
        let rows = c.query(&Stmt::new(sql), &[]).map_err(|e| db.error(e))?;
        rows.iter()
            .map(|r| r.text(0).map_err(|e| BackupError::Failed(format!("listing the copy's databases: {e}"))))
            .collect()
    }

    /// From the server's launch to its first accepted connection (the
    /// copy's chown and the server's configuration left out).
    fn start_time(&self) -> Duration {
        match self {
            Server::Maria(m) => m.started_in(),
            Server::Pg(t, _) => t.start_time(),
        }
    }

    fn stop(&mut self) -> Result<(), BackupError> {
        match self {
            Server::Maria(m) => m.stop(),
            Server::Pg(t, _) => t.stop().map_err(BackupError::from),
        }
    }
}

/// The role to connect to a restored PostgreSQL as: trust admits any that
/// exists, and which exist is only known by asking. The `compare`
/// source's user first (a copy has its source's roles), then `postgres`
/// (a Debian cluster's superuser), `root` (a managed instance's), and the
/// user storbench runs as.
fn pg_role(t: &Temporary, compare: Option<&Database>) -> Result<String, BackupError> {
    let mut tried: Vec<String> = Vec::new();
    let mut last = None;
    let mine = std::env::var("USER").ok();
    let from_compare = compare.and_then(|c| server_parts(c).ok()).and_then(|s| s.user);
    for role in [from_compare, Some("postgres".into()), Some("root".into()), mine].into_iter().flatten() {
        if tried.contains(&role) {
            continue;
        }
        match pg_db(t, &role, "postgres", Path::new("the copy")).and_then(|db| db.open()) {
            Ok(_) => return Ok(role),
            Err(e) => last = Some(e),
        }
        tried.push(role);
    }
    let context = format!("connecting to the copy as {}", tried.join(", "));
    Err(BackupError::Context {
        context,
        source: Box::new(last.unwrap_or(BackupError::Failed(String::new()))),
    })
}

/// A database of a restored MariaDB (crash points reach it by this path).
pub(crate) use super::mariadbd::maria_db;

/// A database of a restored PostgreSQL, by its Unix socket (the socket's
/// file is named for the port).
fn pg_db(t: &Temporary, role: &str, name: &str, to: &Path) -> Result<Database, BackupError> {
    let dir = pct(&t.socket_dir().to_string_lossy());
    let raw = format!("postgres://{}@{dir}:{}/{}", pct(role), t.port(), pct(name));
    Ok(Database::new(
        DbUrl::parse(&raw).map_err(BackupError::Failed)?,
        format!("{} (database {name})", to.display()),
    ))
}

/// A directory the restore makes for its while (the run directory: socket,
/// pid file, log, access rules; mariadb-backup's work copy), removed when
/// dropped.
struct OwnDir(PathBuf);

impl Drop for OwnDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Under the state directory (beside managed instances' sockets), named
/// for this process and instant.
fn run_dir_path() -> PathBuf {
    let n =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    storbench_media::state_dir().join("restore").join(format!("{}-{n}", std::process::id()))
}

/// Makes the run directory; its parents are made traversable for the
/// server's user (the state directory may be private), the directory itself
/// is given to that user, mode 0700, by the server's start.
fn make_run_dir(p: &Path) -> Result<(), BackupError> {
    std::fs::create_dir_all(p).map_err(|e| BackupError::Target(format!("creating {}: {e}", p.display())))?;
    for d in p.ancestors().skip(1).take(2) {
        let _ = Command::new("chmod").arg("o+x").arg(d).status();
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| BackupError::Target(format!("chmod 700 {}: {e}", p.display())))
}

fn first_line(c: &mut Command) -> Option<String> {
    let out = c.output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().next().map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_directory_is_escaped_whole_in_a_url() {
        assert_eq!(pct("/var/lib/storbench/restore/1-2"), "%2Fvar%2Flib%2Fstorbench%2Frestore%2F1-2");
        assert_eq!(pct("tpcc_1"), "tpcc_1");
    }
}
