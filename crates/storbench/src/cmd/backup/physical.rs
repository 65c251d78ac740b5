//! `storbench restore` of a physical backup: a mariadb-backup directory
//! (copied with `cp -a` into a work directory beside the new data
//! directory, the copy prepared, then `--move-back` into the new data
//! directory: the backup itself is only read, so it restores the same way
//! again and an interrupted prepare cannot spoil it) or a plain
//! pg_basebackup (copied with `cp -a`).
//! A temporary server is then started on the copy, timed to accepting
//! connections (its crash recovery or WAL replay included) and to ready
//! (`ANALYZE` done), checked as a logical restore is (rows, `tpcc check`,
//! `--compare`), and stopped — always: after a failed check, an error or
//! Ctrl-C too (the server has its own process group, so the terminal's
//! Ctrl-C reaches storbench, which stops it cleanly). The copy stays, as a
//! logical restore's database does; a restore that fails before its server
//! accepts connections removes it. Should storbench be killed, the server
//! is recorded ([`tempserver`]) and the next physical restore stops it and
//! removes its copy.
//!
//! The temporary server can be reached by its Unix socket only, in a run
//! directory under storbench's state that only the server's user and root
//! can enter, and there admits any role (MariaDB: `--skip-networking
//! --skip-grant-tables`; PostgreSQL: `trust` on the socket, TCP refused),
//! so a restore needs, asks and stores no password.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::json;
use storbench_db::{Connection, DbUrl, Engine, Stmt};
use storbench_instances::pg::Temporary;
use storbench_instances::tempserver::{self, Registration};
use storbench_metrics::{StepReport, Unit};

use super::{
    analyze, remove, resolve_target, run_tool, server_parts, size_of, tool, verify, Kind, RestoreArgs, Usage,
};
use crate::cli::Global;
use crate::cmd::pg::err as media;
use crate::dbarg::Db;
use crate::error::{target_failed, usage};
use crate::record::{Outcome, Recorder};

/// How long a temporary mariadbd may take to stop (its start's bound is
/// [`tempserver::START_TIMEOUT`], PostgreSQL's too).
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest Unix socket path the kernel takes (`sun_path` is 108 bytes).
const SOCKET_PATH_MAX: usize = 107;

/// MariaDB's own schemas, left out of the checks by default.
const MARIADB_SYSTEM: [&str; 4] = ["mysql", "sys", "information_schema", "performance_schema"];

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

/// Runs `storbench restore` for a physical backup.
pub(super) fn restore(g: &Global, a: RestoreArgs, kind: Kind, from: &Path) -> Result<ExitCode> {
    // Everything is validated before anything is created.
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
    if a.to.contains("://") || a.to.starts_with("sqlite:") || a.to.starts_with("managed:") {
        return Err(usage(format!(
            "--to {}: {what} is restored into a new data directory: give PATH or MEDIUM:/path",
            storbench_db::redact_text(&a.to)
        )));
    }
    let to = resolve_target(&a.to)?;
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
    if kind == Kind::PgBase && a.jobs > 1 {
        return Err(usage(format!(
            "--jobs {}: a pg_basebackup is copied by one cp; jobs are pg_restore's and mariadb-backup's",
            a.jobs
        )));
    }
    if kind == Kind::PgBase && std::fs::read_dir(from.join("pg_tblspc")).is_ok_and(|mut d| d.next().is_some())
    {
        return Err(usage(format!(
            "--from {}: has tablespaces (pg_tblspc) outside its directory; storbench restores a base backup without them",
            from.display()
        )));
    }
    if let Some(d) = &a.database {
        if d.is_empty() || !d.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            return Err(usage(format!("--database '{d}': a database name is letters, digits, _ and $")));
        }
    }
    let compare = a.compare.as_deref().map(Db::parse).transpose()?;
    if let Some(c) = &compare {
        if c.url.engine() != engine {
            return Err(usage(format!(
                "--compare {}: the backup in {} is for {engine:?}",
                c.shown,
                from.display()
            )));
        }
        if let (Some(d), Some(cd)) = (&a.database, c.url.database()) {
            if d != cd {
                return Err(usage(format!(
                    "--compare {}: compares database '{cd}', and --database names '{d}'; give the same",
                    c.shown
                )));
            }
        }
    }
    let tools = match kind {
        Kind::MariaBackup => Tools::Maria {
            backup: tool("mariadb-backup", "mariadb-backup")?,
            server: tool("mariadbd", "mariadb-server")
                .or_else(|e| Some(PathBuf::from("/usr/sbin/mariadbd")).filter(|p| p.is_file()).ok_or(e))?,
            cp: tool("cp", "coreutils")?,
        },
        _ => Tools::Pg {
            bindir: storbench_instances::pg::bindir_for(&from).map_err(media)?,
            cp: tool("cp", "coreutils")?,
        },
    };
    let run_dir = run_dir_path();
    let sock = run_dir.join("mariadbd.sock");
    if sock.as_os_str().len() > SOCKET_PATH_MAX {
        return Err(usage(format!(
            "{}: longer than a Unix socket path may be ({SOCKET_PATH_MAX} bytes): set STORBENCH_STATE to a shorter directory",
            sock.display()
        )));
    }
    let version = match &tools {
        Tools::Maria { server, .. } => first_line(Command::new(server).arg("--version")),
        Tools::Pg { bindir, .. } => first_line(Command::new(bindir.join("postgres")).arg("--version")),
    };

    let backup_bytes = size_of(&from) as f64;
    let from_parent = from.parent().unwrap_or(Path::new("/")).to_path_buf();
    let config = json!({
        "from": from, "to": to, "jobs": a.jobs, "kind": format!("{kind:?}"), "database": a.database,
        "compare": compare.as_ref().map(|c| &c.shown),
    });
    let env = json!({
        "backup_bytes": backup_bytes,
        "from_dir": storbench_sysmon::path_env(&from_parent),
        "to_dir": storbench_sysmon::path_env(&to_parent),
        "server": { "engine": if engine == Engine::Mysql { "mariadb" } else { "postgres" }, "version": version },
    });
    // Recorded before anything is made, so a storbench killed from here on
    // leaves nothing the next restore's sweep does not remove.
    let mut made = vec![run_dir.clone()];
    if kind == Kind::MariaBackup {
        made.push(work.clone());
    }
    // A temporary server a killed storbench left running (and the copy it
    // ran on) goes before this one starts (its work copy would be in this
    // one's way); after every check, so bad input changes nothing.
    for s in tempserver::sweep() {
        if !g.quiet {
            eprintln!(
                "storbench: stopped the temporary {} on {} left by storbench {} (killed), and removed that copy",
                s.program,
                s.data.display(),
                s.owner
            );
        }
    }
    if kind == Kind::MariaBackup && work.exists() {
        return Err(usage(format!(
            "--to {}: {} exists (a work copy an earlier restore left): remove it",
            to.display(),
            work.display()
        )));
    }
    let program = if engine == Engine::Mysql { "mariadbd" } else { "postgres" };
    let mut reg = Registration::new(program, &to, &made).map_err(media)?;
    let mut rec = Recorder::begin(
        g,
        "restore",
        format!("restore {} into {}", from.display(), to.display()),
        config,
        env,
        &[from_parent, to_parent],
    )?;
    let clock = rec.clock();
    let mut r = StepReport::default();
    let run = OwnDir(run_dir);
    let dirs = Dirs { from: &from, to: &to, work: &work, run: &run.0 };
    let opened = open_copy(&tools, &dirs, &mut reg, a.jobs, compare.as_ref(), a.database.as_deref(), &mut r);
    let (mut server, mut copies) = match opened {
        Ok(x) => x,
        Err(e) => {
            // The server (if it started) is stopped by now: its guard was
            // dropped on the way out. A copy no server opened is removed
            // (only one this restore made: `--to` may have appeared since
            // it was checked).
            if reg.made_data() {
                remove(&to);
            }
            drop(run);
            drop(reg);
            if crate::interrupt::requested() {
                return rec.finish(Outcome::Interrupted);
            }
            return rec.finish(Outcome::Failed(e.context(format!(
                "restore of {} into {}",
                from.display(),
                to.display()
            ))));
        }
    };
    r.figure("backup.bytes", backup_bytes, Unit::Bytes);
    if let Some(s) = r.get("restore.ready_seconds") {
        r.figure("restore.mb_per_s", backup_bytes / 1e6 / s.max(1e-9), Unit::MBps);
    }
    // Integrity, per database: a copy that loses rows or breaks a TPC-C
    // condition is an error. The copy is kept for inspection either way.
    let verdict = verify_all(&mut copies, compare.as_ref(), &to, &mut r);
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
    rec.write_step(clock, "restore", json!({ "jobs": a.jobs }), r.clone())?;
    if crate::interrupt::requested() {
        return rec.finish(Outcome::Interrupted);
    }
    if let Err(e) = verdict.and(stopped) {
        return rec.finish(Outcome::Failed(e));
    }
    crate::oltp::result(
        g,
        format!(
            "restore: {} into {}: open after {:.2} s, ready (indexes, ANALYZE) after {:.2} s",
            from.display(),
            to.display(),
            r.get("restore.open_seconds").unwrap_or(0.0),
            r.get("restore.ready_seconds").unwrap_or(0.0)
        ),
    );
    rec.finish(Outcome::Complete)
}

/// One database of the copy, connected.
type Copy = (String, Db, Box<dyn Connection>);

/// The directories of a physical restore.
struct Dirs<'a> {
    /// The backup (only read).
    from: &'a Path,
    /// The new data directory.
    to: &'a Path,
    /// mariadb-backup's work copy of the backup, beside `to`.
    work: &'a Path,
    /// The run directory (socket, pid file, log, access rules).
    run: &'a Path,
}

/// Loads the copy (a work copy prepared and moved back, or cp), starts its
/// server, waits for it and analyses the databases in scope. Returns the
/// running server and a connection to each database; on an error the
/// server is stopped.
fn open_copy(
    tools: &Tools,
    dirs: &Dirs,
    reg: &mut Registration,
    jobs: usize,
    compare: Option<&Db>,
    only: Option<&str>,
    r: &mut StepReport,
) -> Result<(Server, Vec<Copy>)> {
    let Dirs { from, to, run: run_dir, .. } = *dirs;
    let t0 = Instant::now();
    // The data directory is made here, empty, and recorded before anything
    // goes into it (the sweep removes only the directory this made).
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(to)
        .map_err(|e| target_failed(format!("creating {}: {e}", to.display())))?;
    if let Err(e) = reg.set_data_made() {
        let _ = std::fs::remove_dir(to);
        return Err(media(e));
    }
    let mut used = Usage::default();
    match tools {
        Tools::Maria { backup, cp, .. } => {
            // --prepare rewrites what it prepares: a copy, never the backup.
            let work = OwnDir(dirs.work.to_path_buf());
            let mut c = Command::new(cp);
            c.arg("-a").arg(from).arg(&work.0);
            add(&mut used, run_tool(c, "cp")?);
            let copied = t0.elapsed();
            // --no-defaults (first, as the tool wants it): the machine's
            // my.cnf may put redo logs or undo tablespaces in other
            // directories, which a move-back would then write into.
            let t = Instant::now();
            let mut c = Command::new(backup);
            c.args(["--no-defaults", "--prepare"]).arg(format!("--target-dir={}", work.0.display()));
            add(&mut used, run_tool(c, "mariadb-backup --prepare")?);
            r.figure("restore.prepare_seconds", t.elapsed().as_secs_f64(), Unit::S);
            let t = Instant::now();
            let mut c = Command::new(backup);
            c.args(["--no-defaults", "--move-back"])
                .arg(format!("--target-dir={}", work.0.display()))
                .arg(format!("--datadir={}", to.display()))
                .arg(format!("--parallel={jobs}"));
            add(&mut used, run_tool(c, "mariadb-backup --move-back")?);
            drop(work);
            r.figure("restore.copy_seconds", (copied + t.elapsed()).as_secs_f64(), Unit::S);
        }
        Tools::Pg { cp, .. } => {
            let mut c = Command::new(cp);
            c.arg("-a").arg(from.join(".")).arg(to);
            add(&mut used, run_tool(c, "cp")?);
            r.figure("restore.copy_seconds", t0.elapsed().as_secs_f64(), Unit::S);
        }
    }
    let load = t0.elapsed().as_secs_f64();
    r.figure("restore.load_seconds", load, Unit::S);
    super::tool_figures(r, used);
    if crate::interrupt::requested() {
        return Err(anyhow!("interrupted"));
    }
    make_run_dir(run_dir)?;
    let server = match tools {
        Tools::Maria { server, .. } => Server::Maria(Mariadbd::start(server, from, to, run_dir, reg)?),
        Tools::Pg { .. } => {
            let t = Temporary::start(to, run_dir).map_err(media)?;
            if let Some(pid) = t.pid() {
                reg.set_pid(pid).map_err(media)?;
            }
            let role = pg_role(&t, compare)?;
            Server::Pg(Box::new(t), role)
        }
    };
    // Open: the database accepts connections (Mariadbd::start and pg_role
    // return once one connected).
    r.figure("restore.start_seconds", server.start_time().as_secs_f64(), Unit::S);
    r.figure("restore.open_seconds", t0.elapsed().as_secs_f64(), Unit::S);
    let mut names = server.databases()?;
    if let Some(d) = only {
        if !names.iter().any(|n| n == d) {
            return Err(anyhow!(
                "--database {d}: the restored copy has no such database (it has {})",
                names.join(", ")
            ));
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

/// Checks each database of the copy ([`verify`]), the one `--compare`
/// names against its source; records their tables, rows and failed TPC-C
/// conditions summed.
fn verify_all(copies: &mut [Copy], compare: Option<&Db>, to: &Path, r: &mut StepReport) -> Result<()> {
    let mut errors = Vec::new();
    let (mut tables, mut rows, mut tpcc_failed) = (0.0, 0.0, None::<f64>);
    let want = compare.and_then(|c| c.url.database().map(str::to_string));
    for (name, db, conn) in copies.iter_mut() {
        let mut one = StepReport::default();
        let cmp = compare.filter(|_| want.as_deref() == Some(name.as_str()));
        if let Err(e) = verify(db, conn.as_mut(), cmp, &mut one) {
            errors.push(e.to_string());
        }
        tables += one.get("restore.tables").unwrap_or(0.0);
        rows += one.get("restore.rows").unwrap_or(0.0);
        if let Some(f) = one.get("restore.tpcc_check_failed") {
            *tpcc_failed.get_or_insert(0.0) += f;
        }
    }
    if let (Some(c), Some(w)) = (compare, &want) {
        if !copies.iter().any(|(n, _, _)| n == w) {
            errors.push(format!(
                "the restored copy {} has no database '{w}' to compare with {}",
                to.display(),
                c.shown
            ));
        }
    }
    r.figure("restore.databases", copies.len() as f64, Unit::Count);
    r.figure("restore.tables", tables, Unit::Count);
    r.figure("restore.rows", rows, Unit::Count);
    if let Some(f) = tpcc_failed {
        r.figure("restore.tpcc_check_failed", f, Unit::Count);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(errors.join("; ")))
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
    fn db(&self, name: &str, to: &Path) -> Result<Db> {
        match self {
            Server::Maria(m) => maria_db(&m.socket, name, to),
            Server::Pg(t, role) => pg_db(t, role, name, to),
        }
    }

    /// The databases of the copy, the server's own left out.
    fn databases(&self) -> Result<Vec<String>> {
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
        rows.iter().map(|r| r.text(0).map_err(|e| anyhow!("listing the copy's databases: {e}"))).collect()
    }

    /// From the server's launch to its first accepted connection (the
    /// copy's chown and the server's configuration left out).
    fn start_time(&self) -> Duration {
        match self {
            Server::Maria(m) => m.started_in,
            Server::Pg(t, _) => t.start_time(),
        }
    }

    fn stop(&mut self) -> Result<()> {
        match self {
            Server::Maria(m) => m.stop(),
            Server::Pg(t, _) => t.stop().map_err(media),
        }
    }
}

/// The role to connect to a restored PostgreSQL as: trust admits any that
/// exists, and which exist is only known by asking. The `--compare`
/// source's user first (a copy has its source's roles), then `postgres`
/// (a Debian cluster's superuser), `root` (a managed instance's), and the
/// user storbench runs as.
fn pg_role(t: &Temporary, compare: Option<&Db>) -> Result<String> {
    let mut tried: Vec<String> = Vec::new();
    let mut last = String::new();
    let mine = std::env::var("USER").ok();
    let from_compare = compare.and_then(|c| server_parts(c).ok()).and_then(|s| s.user);
    for role in [from_compare, Some("postgres".into()), Some("root".into()), mine].into_iter().flatten() {
        if tried.contains(&role) {
            continue;
        }
        match pg_db(t, &role, "postgres", Path::new("the copy")).and_then(|db| db.open()) {
            Ok(_) => return Ok(role),
            Err(e) => last = e.to_string(),
        }
        tried.push(role);
    }
    Err(anyhow!("connecting to the copy as {}: {last}", tried.join(", ")))
}

/// A database of a restored MariaDB, by its Unix socket.
fn maria_db(socket: &Path, name: &str, to: &Path) -> Result<Db> {
    let raw = format!("mysql://root@localhost/{}?socket={}", pct(name), pct(&socket.to_string_lossy()));
    Ok(Db {
        url: DbUrl::parse(&raw).map_err(|e| anyhow!(e))?,
        shown: format!("{} (database {name})", to.display()),
    })
}

/// A database of a restored PostgreSQL, by its Unix socket (the socket's
/// file is named for the port).
fn pg_db(t: &Temporary, role: &str, name: &str, to: &Path) -> Result<Db> {
    let dir = pct(&t.socket_dir().to_string_lossy());
    let raw = format!("postgres://{}@{dir}:{}/{}", pct(role), t.port(), pct(name));
    Ok(Db {
        url: DbUrl::parse(&raw).map_err(|e| anyhow!(e))?,
        shown: format!("{} (database {name})", to.display()),
    })
}

/// A mariadbd storbench started on a restored data directory: its socket,
/// pid file and error log in the run directory, no TCP, no grant checks,
/// its own process group; stopped by [`Mariadbd::stop`] (SIGTERM, a clean
/// shutdown; SIGKILL after [`STOP_TIMEOUT`]) or when dropped.
struct Mariadbd {
    child: Option<Child>,
    /// From the launch to the first accepted connection.
    started_in: Duration,
    socket: PathBuf,
    log: PathBuf,
}

impl Mariadbd {
    /// Starts the server and waits until it accepts a connection.
    fn start(bin: &Path, from: &Path, data: &Path, run: &Path, reg: &mut Registration) -> Result<Mariadbd> {
        use std::os::unix::process::CommandExt;
        let user = server_user(data, run)?;
        let log = run.join("mariadbd.err");
        let mut c = Command::new(bin);
        // --no-defaults first (the server wants it so): nothing of the
        // machine's my.cnf, whose datadir, port and socket are the live
        // server's. The settings the data needs to be read (page size,
        // data file layout) are the backup's own, in backup-my.cnf.
        c.arg("--no-defaults");
        c.args(backup_settings(from));
        c.arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", run.join("mariadbd.sock").display()))
            .arg(format!("--pid-file={}", run.join("mariadbd.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .args(["--skip-networking", "--skip-grant-tables", "--skip-slave-start"]);
        if let Some(u) = &user {
            c.arg(format!("--user={u}"));
        }
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
        let db = maria_db(&run.join("mariadbd.sock"), "mysql", data)?;
        let t0 = Instant::now();
        let child = c.spawn().map_err(|e| anyhow!("starting {}: {e}", bin.display()))?;
        let pid = child.id();
        let mut m = Mariadbd {
            child: Some(child),
            started_in: Duration::ZERO,
            socket: run.join("mariadbd.sock"),
            log,
        };
        reg.set_pid(pid).map_err(media)?;
        loop {
            if let Ok(mut c) = db.open() {
                // The socket is ours, so is the server; said, not assumed.
                let sock = c.query_one(&Stmt::new("SELECT @@socket"), &[]).and_then(|r| r.text(0));
                if sock.as_deref().ok() != Some(&*m.socket.to_string_lossy()) {
                    return Err(anyhow!("the server on {} reports socket {sock:?}", m.socket.display()));
                }
                m.started_in = t0.elapsed();
                return Ok(m);
            }
            if let Some(st) = m.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                m.child = None;
                return Err(target_failed(format!(
                    "mariadbd on {} exited ({st}): {}",
                    data.display(),
                    m.last_error()
                )));
            }
            if crate::interrupt::requested() {
                return Err(anyhow!("interrupted"));
            }
            if t0.elapsed() > tempserver::START_TIMEOUT {
                let last = m.last_error();
                return Err(media(tempserver::did_not_start(
                    "mariadbd",
                    data,
                    tempserver::START_TIMEOUT,
                    &last,
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's last `[ERROR]` line, or its log's last line.
    fn last_error(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .rev()
            .find(|l| l.contains("[ERROR]"))
            .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("no log")
            .trim()
            .to_string()
    }

    fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        storbench_proc::signal(child.id(), storbench_proc::Sig::SIGTERM);
        if let Ok(Some(_)) = storbench_proc::wait_child(&mut child, STOP_TIMEOUT) {
            return Ok(());
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(anyhow!("mariadbd did not stop within {} s of SIGTERM: killed", STOP_TIMEOUT.as_secs()))
    }
}

impl Drop for Mariadbd {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The user mariadbd runs as, given the data: as root, `mysql` when it
/// exists and can reach the data and run directories (both are then given
/// to it), else root itself (`--user=root`); not root, the user storbench
/// runs as (no `--user`).
fn server_user(data: &Path, run: &Path) -> Result<Option<String>> {
    if !storbench_media::is_root() {
        return Ok(None);
    }
    if !(storbench_media::reachable(data, "mysql") && storbench_media::reachable(run, "mysql")) {
        return Ok(Some("root".into()));
    }
    for p in [data, run] {
        storbench_proc::chown(p, "mysql").map_err(|e| media(e.into()))?;
    }
    Ok(Some("mysql".into()))
}

/// backup-my.cnf's `[mysqld]` settings (what mariadb-backup recorded of
/// the source's InnoDB layout), as `--loose-` options: one the server does
/// not know is warned about, not fatal.
fn backup_settings(from: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(from.join("backup-my.cnf")).unwrap_or_default();
    let mut out = Vec::new();
    let mut in_mysqld = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_mysqld = line == "[mysqld]";
        } else if in_mysqld && !line.is_empty() && !line.starts_with('#') {
            if let Some((k, v)) = line.split_once('=') {
                out.push(format!("--loose-{}={}", k.trim(), v.trim()));
            }
        }
    }
    out
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
fn make_run_dir(p: &Path) -> Result<()> {
    std::fs::create_dir_all(p).map_err(|e| target_failed(format!("creating {}: {e}", p.display())))?;
    for d in p.ancestors().skip(1).take(2) {
        let _ = Command::new("chmod").arg("o+x").arg(d).status();
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| target_failed(format!("chmod 700 {}: {e}", p.display())))
}

fn add(total: &mut Usage, u: Usage) {
    total.read_bytes += u.read_bytes;
    total.write_bytes += u.write_bytes;
    total.user_s += u.user_s;
    total.sys_s += u.sys_s;
}

/// What a URL component keeps as it is: letters, digits and `-._~`.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// A URL component with every other byte escaped (`%2F`).
fn pct(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

fn first_line(c: &mut Command) -> Option<String> {
    let out = c.output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().next().map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_my_cnf_settings_become_loose_options() {
        let d = std::env::temp_dir().join(format!("sb-physical-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("backup-my.cnf"),
            "# generated\n\n[mysqld]\ninnodb_page_size=16384\ninnodb_undo_directory=./\n\n[client]\nuser=x\n",
        )
        .unwrap();
        let got = backup_settings(&d);
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(got, ["--loose-innodb_page_size=16384", "--loose-innodb_undo_directory=./"]);
    }

    #[test]
    fn a_socket_directory_is_escaped_whole_in_a_url() {
        assert_eq!(pct("/var/lib/storbench/restore/1-2"), "%2Fvar%2Flib%2Fstorbench%2Frestore%2F1-2");
        assert_eq!(pct("tpcc_1"), "tpcc_1");
    }
}
