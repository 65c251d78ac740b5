//! The engines' tools: finding them (PATH, PostgreSQL's versioned bin
//! directories), giving them a server's connection (the password in their
//! environment, never on their command line, where `ps` shows it), running
//! them to the end with their I/O and CPU read from the kernel's accounting,
//! and the files they leave (sizes, a failed backup removed). Nothing here
//! prints.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use storbench_metrics::{StepReport, Unit};

use super::{BackupError, Database};

/// The tool as found on PATH or in PostgreSQL's versioned bin directories;
/// a missing tool is bad input naming the Debian package that has it.
pub(crate) fn tool(name: &str, package: &str) -> Result<PathBuf, BackupError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(storbench_instances::pg::debian_bindirs())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            BackupError::Usage(format!("{name} not found on PATH: install the Debian package {package}"))
        })
}

/// A URL component with its `%XX` escapes decoded (a password with `@` or
/// `:` in it is written `%40`, `%3A` in a URL).
fn pct_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// The major version a PostgreSQL tool prints (`pg_dump (PostgreSQL) 15.20 …`).
pub(crate) fn major_version(tool: &Path) -> Option<u32> {
    let out = Command::new(tool).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text.split_whitespace().find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    v.split('.').next()?.parse().ok()
}

/// Connection parts of a server URL, for tools that take them as flags.
pub(crate) struct Server {
    pub(crate) host: String,
    pub(crate) port: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: String,
}

pub(crate) fn server_parts(db: &Database) -> Result<Server, BackupError> {
    let rest = db.url.rest();
    let (auth_host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let name = path.split('?').next().unwrap_or("").to_string();
    if name.is_empty() {
        return Err(BackupError::Usage(format!("{}: names no database", db.shown)));
    }
    let (auth, hostport) = match auth_host.rsplit_once('@') {
        Some((a, h)) => (Some(a), h),
        None => (None, auth_host),
    };
    let (user, password) = match auth {
        Some(a) => match a.split_once(':') {
            Some((u, p)) => (Some(pct_decode(u)), Some(pct_decode(p))),
            None => (Some(pct_decode(a)), None),
        },
        None => (None, None),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => {
            (h.to_string(), Some(p.to_string()))
        }
        _ => (hostport.to_string(), None),
    };
    Ok(Server { host, port, user, password, db: name })
}

/// The connection for a PostgreSQL tool: the URL without its password on
/// the command line (where `ps` shows it), the password in `PGPASSWORD`.
pub(crate) fn pg_conn(c: &mut Command, db: &Database) {
    let raw = db.url.expose();
    let (scheme, rest) = raw.split_once("://").unwrap_or(("postgres", raw));
    let (hostpart, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    let mut url = raw.to_string();
    if let Some((auth, host)) = hostpart.rsplit_once('@') {
        if let Some((user, pass)) = auth.split_once(':') {
            url = format!("{scheme}://{user}@{host}/{path}");
            c.env("PGPASSWORD", pct_decode(pass));
        }
    }
    c.arg("--dbname").arg(url);
}

pub(crate) fn mysql_conn_args(c: &mut Command, s: &Server) {
    c.arg(format!("--host={}", s.host));
    if let Some(p) = &s.port {
        c.arg(format!("--port={p}"));
    }
    if let Some(u) = &s.user {
        c.arg(format!("--user={u}"));
    }
    match &s.password {
        Some(p) => c.env("MYSQL_PWD", p),
        None => c.env_remove("MYSQL_PWD"),
    };
}

/// What a finished child used, from the kernel's accounting of waited-for
/// children (`getrusage(RUSAGE_CHILDREN)`, deltas around the run): the
/// tool's own block I/O and CPU, its worker processes included.
#[derive(Default, Clone, Copy)]
pub(crate) struct Usage {
    read_bytes: f64,
    write_bytes: f64,
    user_s: f64,
    sys_s: f64,
}

impl Usage {
    /// This process's own use so far (`RUSAGE_SELF`).
    pub(crate) fn own() -> Usage {
        rusage(libc::RUSAGE_SELF)
    }

    /// What was used since `self`, taken by [`Usage::own`].
    pub(crate) fn own_since(self) -> Usage {
        usage_delta(self, rusage(libc::RUSAGE_SELF))
    }

    /// Adds what another run used.
    pub(crate) fn add(&mut self, u: Usage) {
        self.read_bytes += u.read_bytes;
        self.write_bytes += u.write_bytes;
        self.user_s += u.user_s;
        self.sys_s += u.sys_s;
    }

    /// The tool's figures: `tool.read_bytes`, `tool.write_bytes`,
    /// `tool.cpu.user`, `tool.cpu.sys`.
    pub(crate) fn figures(self, r: &mut StepReport) {
        r.figure("tool.read_bytes", self.read_bytes, Unit::Bytes);
        r.figure("tool.write_bytes", self.write_bytes, Unit::Bytes);
        r.figure("tool.cpu.user", self.user_s, Unit::S);
        r.figure("tool.cpu.sys", self.sys_s, Unit::S);
    }
}

fn rusage(who: libc::c_int) -> Usage {
    // SAFETY: getrusage fills the zeroed struct we own.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut r) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    // ru_inblock/ru_oublock count 512-byte blocks (read_bytes/write_bytes of /proc/PID/io).
    Usage {
        read_bytes: r.ru_inblock as f64 * 512.0,
        write_bytes: r.ru_oublock as f64 * 512.0,
        user_s: tv(r.ru_utime),
        sys_s: tv(r.ru_stime),
    }
}

fn usage_delta(a: Usage, b: Usage) -> Usage {
    Usage {
        read_bytes: b.read_bytes - a.read_bytes,
        write_bytes: b.write_bytes - a.write_bytes,
        user_s: b.user_s - a.user_s,
        sys_s: b.sys_s - a.sys_s,
    }
}

/// Runs a tool to the end; a failure is one line: the tool, its exit status
/// and the last line it printed (disk full and permission are the target's
/// failure).
pub(crate) fn run_tool(mut cmd: Command, what: &str) -> Result<Usage, BackupError> {
    let before = rusage(libc::RUSAGE_CHILDREN);
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| BackupError::Failed(format!("starting {what}: {e}")))?;
    let used = usage_delta(before, rusage(libc::RUSAGE_CHILDREN));
    if out.status.success() {
        return Ok(used);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    // mariadb-dump reports a full disk on its stdout as "Got errno 28 on write".
    let target = ["No space left on device", "Permission denied", "errno 28 "];
    // The line that names the target's failure when there is one (mariadb-backup
    // logs a few more after it), else the last.
    let last = err
        .lines()
        .find(|l| target.iter().any(|s| l.contains(s)))
        .or_else(|| err.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("no message")
        .trim();
    let last = storbench_db::redact_text(last);
    let msg = format!("{what} failed ({}): {last}", out.status);
    if target.iter().any(|s| err.contains(s)) {
        Err(BackupError::Target(msg))
    } else if ["pg_hba.conf", "authentication failed", "Connection refused", "Access denied", "Can't connect"]
        .iter()
        .any(|s| err.contains(s))
    {
        // The server refused the tool (a replication entry missing, bad
        // credentials) or is down: an outage, not a failed backup.
        Err(BackupError::Unreachable(msg))
    } else {
        Err(BackupError::Failed(msg))
    }
}

/// Bytes under a path (a file, or a directory's files).
pub(crate) fn size_of(p: &Path) -> u64 {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            std::fs::read_dir(p).map(|rd| rd.flatten().map(|e| size_of(&e.path())).sum()).unwrap_or(0)
        }
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// Removes a failed backup, and for a file SQLite's side files beside it
/// (`-journal`, `-wal`, `-shm`: a copy that hit a full disk leaves its
/// journal behind).
pub(crate) fn remove(p: &Path) {
    if p.is_dir() {
        let _ = std::fs::remove_dir_all(p);
        return;
    }
    let _ = std::fs::remove_file(p);
    for side in ["-journal", "-wal", "-shm"] {
        let mut s = p.as_os_str().to_owned();
        s.push(side);
        let _ = std::fs::remove_file(PathBuf::from(s));
    }
}

/// What a URL component keeps as it is: letters, digits and `-._~`.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// A URL component with every other byte escaped (`%2F`).
pub(crate) fn pct(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use storbench_db::DbUrl;

    use super::*;

    fn db(s: &str) -> Database {
        let url = DbUrl::parse(s).unwrap();
        Database::new(url.clone(), url.redacted())
    }

    #[test]
    fn a_postgres_tool_gets_the_password_in_its_environment_not_its_arguments() {
        let db = db("postgres://bob:p%40ss@db.example:5433/shop?sslmode=disable");
        let mut c = Command::new("pg_dump");
        pg_conn(&mut c, &db);
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["--dbname", "postgres://bob@db.example:5433/shop?sslmode=disable"]);
        let env: Vec<_> = c.get_envs().collect();
        assert_eq!(env, [(std::ffi::OsStr::new("PGPASSWORD"), Some(std::ffi::OsStr::new("p@ss")))]);
    }

    #[test]
    fn a_mariadb_tool_gets_the_password_in_its_environment_not_its_arguments() {
        // mariadb-dump and mariadb-backup alike (mariadb-backup reads MYSQL_PWD too).
        let s = server_parts(&db("mysql://root:se%3Acr%40t@127.0.0.1:3306/tpcc")).unwrap();
        let mut c = Command::new("mariadb-backup");
        mysql_conn_args(&mut c, &s);
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["--host=127.0.0.1", "--port=3306", "--user=root"]);
        let env: Vec<_> = c.get_envs().collect();
        assert_eq!(env, [(std::ffi::OsStr::new("MYSQL_PWD"), Some(std::ffi::OsStr::new("se:cr@t")))]);
    }

    #[test]
    fn a_percent_escape_is_decoded_and_a_broken_one_kept_as_written() {
        assert_eq!(pct_decode("a%40b%3ac%2F"), "a@b:c/");
        assert_eq!(pct_decode("100%"), "100%");
        assert_eq!(pct_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn a_mysql_url_splits_into_the_tools_flags() {
        let s = server_parts(&db("mysql://root:a%3Ab@127.0.0.1:3307/tpcc")).unwrap();
        assert_eq!(
            (s.host.as_str(), s.port.as_deref(), s.user.as_deref(), s.password.as_deref(), s.db.as_str()),
            ("127.0.0.1", Some("3307"), Some("root"), Some("a:b"), "tpcc")
        );
        let s = server_parts(&db("mysql://localhost/x")).unwrap();
        assert_eq!((s.host.as_str(), s.port, s.user, s.password), ("localhost", None, None, None));
    }
}
