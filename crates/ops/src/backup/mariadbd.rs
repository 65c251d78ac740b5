//! A temporary mariadbd on a restored data directory, or on a crash
//! point's image (the PostgreSQL one is `storbench_instances::pg::Temporary`):
//! its socket, pid file and error log in a run directory, no TCP, no grant
//! checks, its own process group, the settings it is given (a backup's own
//! InnoDB settings) and none of the machine's option files. Stopped by
//! [`Mariadbd::stop`] or when dropped (or killed: [`Mariadbd::kill`]);
//! never left running by a caller that returns, nor by a storbench that
//! is killed (it dies with the thread that started it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use storbench_db::{DbUrl, Stmt};
use storbench_instances::tempserver::{self, Registration};

use super::tools::pct;
use super::{BackupError, Database};

/// How long a temporary mariadbd may take to stop (its start's bound is
/// [`tempserver::START_TIMEOUT`], PostgreSQL's too).
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// A mariadbd storbench started on a restored data directory: stopped by
/// [`Mariadbd::stop`] (SIGTERM, a clean shutdown; SIGKILL after
/// [`STOP_TIMEOUT`]) or when dropped.
pub(crate) struct Mariadbd {
    child: Option<Child>,
    /// From the launch to the first accepted connection.
    started_in: Duration,
    socket: PathBuf,
    log: PathBuf,
}

impl Mariadbd {
    /// Starts the server on `data` with `settings` (options after
    /// `--no-defaults`) and its files in `run`, records its pid, and waits
    /// until it accepts a connection (after its crash recovery);
    /// `interrupted` ends the wait.
    pub(crate) fn start(
        bin: &Path,
        settings: &[String],
        data: &Path,
        run: &Path,
        reg: &mut Registration,
        interrupted: &AtomicBool,
    ) -> Result<Mariadbd, BackupError> {
        use std::os::unix::process::CommandExt;
        let user = server_user(data, run)?;
        let log = run.join("mariadbd.err");
        let mut c = Command::new(bin);
        // --no-defaults first (the server wants it so): nothing of the
        // machine's my.cnf, whose datadir, port and socket are the live
        // server's. The settings the data needs to be read (page size,
        // data file layout) are the backup's own, in backup-my.cnf.
        c.arg("--no-defaults");
        c.args(settings);
        c.arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", run.join("mariadbd.sock").display()))
            .arg(format!("--pid-file={}", run.join("mariadbd.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .args(["--skip-networking", "--skip-grant-tables", "--skip-slave-start"]);
        // Started as its user, not switched to it by `--user`: a switch of
        // ids clears the tie to storbench below. As root, root needs `--user=root`.
        match user.as_deref() {
            Some("root") => {
                c.arg("--user=root");
            }
            Some(u) => storbench_proc::run_as(&mut c, u)
                .map_err(|e| BackupError::from(storbench_instances::InstanceError::from(e)))?,
            None => {}
        }
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
        // A storbench killed outright (SIGKILL, the OOM killer) takes its
        // server with it: every caller stops the server before the thread
        // that started it returns, so the kernel's parent-death signal
        // never fires early, and it cannot miss (a pid file reaped at the
        // next start would leave the server running, its data directory
        // busy, until then).
        storbench_proc::die_with_parent(&mut c);
        let db = maria_db(&run.join("mariadbd.sock"), "mysql", data)?;
        let t0 = Instant::now();
        let child = c.spawn().map_err(|e| BackupError::Failed(format!("starting {}: {e}", bin.display())))?;
        let pid = child.id();
        let mut m = Mariadbd {
            child: Some(child),
            started_in: Duration::ZERO,
            socket: run.join("mariadbd.sock"),
            log,
        };
        reg.set_pid(pid)?;
        loop {
            if let Ok(mut c) = db.open() {
                // The socket is ours, so is the server; said, not assumed.
                let sock = c.query_one(&Stmt::new("SELECT @@socket"), &[]).and_then(|r| r.text(0));
                if sock.as_deref().ok() != Some(&*m.socket.to_string_lossy()) {
                    return Err(BackupError::Failed(format!(
                        "the server on {} reports socket {sock:?}",
                        m.socket.display()
                    )));
                }
                m.started_in = t0.elapsed();
                return Ok(m);
            }
            if let Some(st) = m.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                m.child = None;
                return Err(BackupError::Target(format!(
                    "mariadbd on {} exited ({st}): {}",
                    data.display(),
                    m.last_error()
                )));
            }
            if interrupted.load(Ordering::Relaxed) {
                return Err(BackupError::Interrupted);
            }
            if t0.elapsed() > tempserver::START_TIMEOUT {
                let last = m.last_error();
                return Err(
                    tempserver::did_not_start("mariadbd", data, tempserver::START_TIMEOUT, &last).into()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its pid, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Its Unix socket.
    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// From the launch to the first accepted connection.
    pub(crate) fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The server's last `[ERROR]` line, or its log's last line.
    fn last_error(&self) -> String {
        // The lines a server that gives up ends with, after the one that
        // says why (a page that fails its checksum, say).
        const AFTERMATH: [&str; 4] = [
            "[ERROR] Aborting",
            "registration as a STORAGE ENGINE failed",
            "init function returned error",
            "Unknown/unsupported storage engine",
        ];
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let errors = || text.lines().rev().filter(|l| l.contains("[ERROR]"));
        errors()
            .find(|l| !AFTERMATH.iter().any(|a| l.contains(a)))
            .or_else(|| errors().next())
            .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("no log")
            .trim()
            .to_string()
    }

    /// The first line of its log that complains of a page (`[ERROR]`, or
    /// an InnoDB `[Warning]` naming a page, corruption, a checksum or the
    /// doublewrite buffer): what recovery met, to say beside a check that
    /// failed.
    pub(crate) fn complaint(&self) -> Option<String> {
        const ABOUT: [&str; 4] = ["page", "corrupt", "checksum", "doublewrite"];
        let text = std::fs::read_to_string(&self.log).ok()?;
        let warns = |l: &str| {
            l.contains("[Warning]")
                && l.contains("InnoDB")
                && ABOUT.iter().any(|a| l.to_lowercase().contains(a))
        };
        let line =
            text.lines().find(|l| l.contains("[ERROR]")).or_else(|| text.lines().find(|l| warns(l)))?;
        Some(line.trim().to_string())
    }

    /// Stops the server: SIGTERM, then SIGKILL after [`STOP_TIMEOUT`] (an
    /// error: it did not stop cleanly).
    pub(crate) fn stop(&mut self) -> Result<(), BackupError> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        storbench_proc::signal(child.id(), storbench_proc::Sig::SIGTERM);
        if let Ok(Some(_)) = storbench_proc::wait_child(&mut child, STOP_TIMEOUT) {
            return Ok(());
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(BackupError::Failed(format!(
            "mariadbd did not stop within {} s of SIGTERM: killed",
            STOP_TIMEOUT.as_secs()
        )))
    }
}

impl Mariadbd {
    /// Stops the server at once (SIGKILL): for a copy nothing of which is kept.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The server program (Debian's mariadb-server package).
pub(crate) fn server_bin() -> Result<PathBuf, BackupError> {
    super::tools::tool("mariadbd", "mariadb-server")
        .or_else(|e| Some(PathBuf::from("/usr/sbin/mariadbd")).filter(|p| p.is_file()).ok_or(e))
}

/// Makes a new data directory at `data` (`mariadb-install-db`: the system
/// tables, root with no password, no test database), with the server
/// `settings` it will run with (the redo log's size is chosen here).
pub(crate) fn install(data: &Path, settings: &[String]) -> Result<(), BackupError> {
    let bin = super::tools::tool("mariadb-install-db", "mariadb-server")?;
    std::fs::create_dir_all(data)
        .map_err(|e| BackupError::Failed(format!("creating {}: {e}", data.display())))?;
    // Only the new data directory changes owner: its parent is the
    // medium's mount point, which may hold other databases.
    let user = server_user(data, data)?;
    let mut c = Command::new(bin);
    c.args(["--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db"])
        .arg(format!("--datadir={}", data.display()))
        .args(settings);
    if let Some(u) = &user {
        c.arg(format!("--user={u}"));
    }
    let out = c.output().map_err(|e| BackupError::Failed(format!("running mariadb-install-db: {e}")))?;
    if !out.status.success() {
        // A half-made directory would be taken for a made one next time.
        let _ = std::fs::remove_dir_all(data);
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(BackupError::Target(format!(
            "mariadb-install-db --datadir={}: {}",
            data.display(),
            err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("failed")
        )));
    }
    if let Some(u) = &user {
        storbench_proc::chown(data, u)
            .map_err(|e| BackupError::from(storbench_instances::InstanceError::from(e)))?;
    }
    Ok(())
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
fn server_user(data: &Path, run: &Path) -> Result<Option<String>, BackupError> {
    if !storbench_media::is_root() {
        return Ok(None);
    }
    if !(storbench_media::reachable(data, "mysql") && storbench_media::reachable(run, "mysql")) {
        return Ok(Some("root".into()));
    }
    for p in [data, run] {
        storbench_proc::chown(p, "mysql")
            .map_err(|e| BackupError::from(storbench_instances::InstanceError::from(e)))?;
    }
    Ok(Some("mysql".into()))
}

/// backup-my.cnf's `[mysqld]` settings (what mariadb-backup recorded of
/// the source's InnoDB layout), as `--loose-` options: one the server does
/// not know is warned about, not fatal.
pub(super) fn backup_settings(from: &Path) -> Vec<String> {
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

/// A database of a restored MariaDB, by its Unix socket.
pub(crate) fn maria_db(socket: &Path, name: &str, to: &Path) -> Result<Database, BackupError> {
    let raw = format!("mysql://root@localhost/{}?socket={}", pct(name), pct(&socket.to_string_lossy()));
    Ok(Database::new(
        DbUrl::parse(&raw).map_err(BackupError::Failed)?,
        format!("{} (database {name})", to.display()),
    ))
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
}
