//! Managed PostgreSQL: an instance whose data, WAL and temp files live where
//! a study wants them (media or directories), made with the machine's own
//! server binaries, listening on 127.0.0.1 and a private Unix socket, run as
//! the `postgres` OS user when storbench runs as root. `managed:NAME` is then
//! a database URL everywhere.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::registry::{load_json, lock, save_json, state_dir};
use crate::MediaError;

/// A managed instance.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Instance {
    /// Its name.
    pub name: String,
    /// The server binaries' directory.
    pub bindir: PathBuf,
    /// The data directory.
    pub data: PathBuf,
    /// The WAL directory, when apart from the data.
    pub wal: Option<PathBuf>,
    /// The temp tablespace's directory, if any.
    pub temp: Option<PathBuf>,
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// The Unix socket's directory.
    pub socket_dir: PathBuf,
    /// The OS user the server runs as.
    pub os_user: String,
    /// Settings given with --set.
    pub settings: Vec<(String, String)>,
    /// The server's version.
    pub version: String,
}

const REGISTRY: &str = "pg.json";

/// Finds the server binaries: `pg_config --bindir`, the Debian layout
/// (`/usr/lib/postgresql/*/bin`, newest first), then PATH.
pub fn find_bindir() -> Result<PathBuf, MediaError> {
    if let Ok(o) = Command::new("pg_config").arg("--bindir").output() {
        let d = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        if o.status.success() && d.join("initdb").exists() {
            return Ok(d);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, d)) = versions.pop() {
        return Ok(d);
    }
    for d in std::env::var("PATH").unwrap_or_default().split(':') {
        if Path::new(d).join("initdb").exists() && Path::new(d).join("pg_ctl").exists() {
            return Ok(PathBuf::from(d));
        }
    }
    Err(MediaError::Usage(
        "no PostgreSQL server binaries found (pg_config, /usr/lib/postgresql/*/bin or initdb on PATH): install the postgresql package".into(),
    ))
}

fn load() -> Result<Vec<Instance>, MediaError> {
    load_json(REGISTRY)
}

fn save(all: &[Instance]) -> Result<(), MediaError> {
    save_json(REGISTRY, all)
}

/// Every managed instance.
pub fn list() -> Result<Vec<Instance>, MediaError> {
    load()
}

/// An instance by name.
pub fn get(name: &str) -> Result<Option<Instance>, MediaError> {
    Ok(load()?.into_iter().find(|i| i.name == name))
}

/// The URL `managed:NAME` stands for.
pub fn resolve(name: &str) -> Result<String, MediaError> {
    let i = get(name)?.ok_or_else(|| {
        MediaError::Usage(format!(
            "no managed instance named '{name}' (storbench pg up {name} --data TARGET)"
        ))
    })?;
    if !running(&i) {
        return Err(MediaError::Usage(format!(
            "managed instance '{name}' is not running (storbench pg up {name})"
        )));
    }
    Ok(format!("postgres://root@127.0.0.1:{}/storbench", i.port))
}

/// What to start.
#[derive(Clone, Debug, Default)]
pub struct UpOptions {
    /// Where the data directory goes (a new or empty directory).
    pub data: PathBuf,
    /// Where the WAL goes, if apart.
    pub wal: Option<PathBuf>,
    /// Where temp files go (a tablespace used by temp_tablespaces).
    pub temp: Option<PathBuf>,
    /// TCP port (default: a free one from 5433).
    pub port: Option<u16>,
    /// Settings for postgresql.conf.
    pub settings: Vec<(String, String)>,
}

fn as_user(user: &str, prog: &Path) -> Command {
    if crate::sys::is_root() && user != "root" {
        let mut c = Command::new("runuser");
        c.args(["-u", user, "--"]).arg(prog);
        c
    } else {
        Command::new(prog)
    }
}

fn run(mut c: Command, what: &str) -> Result<String, MediaError> {
    let out = c.output().map_err(|e| MediaError::Failed(format!("{what}: {e}")))?;
    if !out.status.success() {
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
        let first = text
            .lines()
            .find(|l| l.contains("FATAL") || l.contains("ERROR") || l.contains("error"))
            .or_else(|| text.lines().find(|l| !l.trim().is_empty()))
            .unwrap_or("failed")
            .trim()
            .to_string();
        return Err(MediaError::Failed(format!("{what}: {first}")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

fn free_port() -> Option<u16> {
    // Start at a point that differs between processes, so two storbench
    // processes starting instances at once do not pick the same port.
    let start = 5433 + (std::process::id() % 400) as u16;
    (start..5999).chain(5433..start).find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
}

fn chown(p: &Path, user: &str) -> Result<(), MediaError> {
    if crate::sys::is_root() && user != "root" {
        let mut c = Command::new("chown");
        c.args(["-R", &format!("{user}:")]).arg(p);
        run(c, &format!("giving {} to {user}", p.display()))?;
    }
    Ok(())
}

/// Can `user` reach (traverse to) `dir`?
fn reachable(dir: &Path, user: &str) -> bool {
    if !crate::sys::is_root() || user == "root" {
        return true;
    }
    let parent = dir.parent().unwrap_or(dir);
    Command::new("runuser")
        .args(["-u", user, "--", "test", "-x"])
        .arg(parent)
        .status()
        .is_ok_and(|s| s.success())
}

fn fresh_dir(p: &Path, what: &str, user: &str) -> Result<(), MediaError> {
    if p.exists() && std::fs::read_dir(p).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(MediaError::Usage(format!("--{what} {}: exists and is not empty", p.display())));
    }
    std::fs::create_dir_all(p).map_err(|e| MediaError::Failed(format!("creating {}: {e}", p.display())))?;
    if !reachable(p, user) {
        let _ = std::fs::remove_dir(p);
        return Err(MediaError::Usage(format!(
            "--{what} {}: the server's user '{user}' cannot reach it; make the directory's parents traversable (chmod o+x) or use a medium",
            p.display()
        )));
    }
    chown(p, user)
}

/// Creates (initdb) and starts an instance, or starts an existing one that
/// is stopped. Waits until it accepts connections.
pub fn up(name: &str, o: &UpOptions) -> Result<Instance, MediaError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(MediaError::Usage(format!(
            "instance name '{name}': use letters, digits, '-', '_' or '.'"
        )));
    }
    for (k, _) in &o.settings {
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            return Err(MediaError::Usage(format!("--set {k}: not a setting name")));
        }
    }
    if let Some(existing) = get(name)? {
        if running(&existing) {
            return Err(MediaError::Usage(format!(
                "managed instance '{name}' is already up on port {}",
                existing.port
            )));
        }
        start(&existing)?;
        return Ok(existing);
    }
    let bindir = find_bindir()?;
    let user = if crate::sys::is_root() {
        "postgres".to_string()
    } else {
        std::env::var("USER").unwrap_or_default()
    };
    let port = match o.port {
        Some(p) if TcpListener::bind(("127.0.0.1", p)).is_err() => {
            return Err(MediaError::Usage(format!("--port {p}: in use")));
        }
        Some(p) => p,
        None => free_port().ok_or_else(|| MediaError::Failed("no free port from 5433 to 5998".into()))?,
    };
    let _lock = lock()?;
    let mut made: Vec<PathBuf> = Vec::new();
    let res = (|| {
        let socket_dir = state_dir().join("pg").join(name);
        std::fs::create_dir_all(&socket_dir)
            .map_err(|e| MediaError::Failed(format!("creating {}: {e}", socket_dir.display())))?;
        made.push(socket_dir.clone());
        // The state directory may be private: let the server's user in.
        let _ = Command::new("chmod").arg("o+x").arg(state_dir()).arg(state_dir().join("pg")).status();
        chown(&socket_dir, &user)?;
        fresh_dir(&o.data, "data", &user)?;
        made.push(o.data.clone());
        if let Some(w) = &o.wal {
            fresh_dir(w, "wal", &user)?;
            made.push(w.clone());
        }
        if let Some(t) = &o.temp {
            fresh_dir(t, "temp", &user)?;
            made.push(t.clone());
        }
        let mut c = as_user(&user, &bindir.join("initdb"));
        c.args(["-D"]).arg(&o.data).args([
            "-U",
            "root",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-instructions",
        ]);
        if let Some(w) = &o.wal {
            c.arg("--waldir").arg(w);
        }
        run(c, "initdb")?;
        let mut conf = format!(
            "\n# storbench pg up {name}\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\nlogging_collector = off\n",
            socket_dir.display()
        );
        for (k, v) in &o.settings {
            conf.push_str(&format!("{k} = '{}'\n", v.replace('\'', "''")));
        }
        let conf_path = o.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path)
            .map_err(|e| MediaError::Failed(format!("reading {}: {e}", conf_path.display())))?;
        text.push_str(&conf);
        std::fs::write(&conf_path, text)
            .map_err(|e| MediaError::Failed(format!("writing {}: {e}", conf_path.display())))?;
        let mut v = Command::new(bindir.join("postgres"));
        v.arg("--version");
        let version = run(v, "postgres --version")?.trim().to_string();
        let inst = Instance {
            name: name.to_string(),
            bindir: bindir.clone(),
            data: o.data.clone(),
            wal: o.wal.clone(),
            temp: o.temp.clone(),
            port,
            socket_dir: socket_dir.clone(),
            os_user: user.clone(),
            settings: o.settings.clone(),
            version,
        };
        start(&inst)?;
        let psql = |sql: &str| {
            let mut c = Command::new(bindir.join("psql"));
            c.args([
                "-X",
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "root",
                "-d",
                "postgres",
                "-c",
                sql,
            ]);
            run(c, &format!("psql: {sql}"))
        };
        psql("CREATE DATABASE storbench")?;
        if let Some(t) = &o.temp {
            psql(&format!("CREATE TABLESPACE storbench_temp LOCATION '{}'", t.display()))?;
            psql("ALTER SYSTEM SET temp_tablespaces = 'storbench_temp'")?;
            psql("SELECT pg_reload_conf()")?;
        }
        let mut all = load()?;
        all.push(inst.clone());
        save(&all)?;
        Ok(inst)
    })();
    if res.is_err() {
        // Undo: stop a server that started, remove what was made.
        let _ = Command::new("runuser")
            .args(["-u", &user, "--"])
            .arg(bindir.join("pg_ctl"))
            .args(["-D"])
            .arg(&o.data)
            .args(["-m", "immediate", "stop"])
            .output();
        for p in made.iter().rev() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
    res
}

fn start(i: &Instance) -> Result<(), MediaError> {
    let log = i.socket_dir.join("server.log");
    let mut c = as_user(&i.os_user, &i.bindir.join("pg_ctl"));
    c.arg("-D").arg(&i.data).arg("-l").arg(&log).args(["-w", "-t", "120", "start"]);
    run(c, &format!("starting managed PostgreSQL '{}'", i.name)).map_err(|e| {
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        let last = tail
            .lines()
            .rev()
            .find(|l| l.contains("FATAL") || l.contains("ERROR"))
            .unwrap_or("")
            .trim()
            .to_string();
        if last.is_empty() {
            e
        } else {
            MediaError::Failed(format!("{e}: {last}"))
        }
    })?;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        let ok = Command::new(i.bindir.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &i.port.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(MediaError::Failed(format!("managed PostgreSQL '{}' did not accept connections within 60 s", i.name)))
}

/// Whether the instance's server is running.
pub fn running(i: &Instance) -> bool {
    as_user(&i.os_user, &i.bindir.join("pg_ctl"))
        .arg("-D")
        .arg(&i.data)
        .arg("status")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Stops an instance cleanly; with `destroy`, removes its directories and
/// forgets it.
pub fn down(name: &str, destroy: bool) -> Result<(), MediaError> {
    let i = get(name)?.ok_or_else(|| {
        MediaError::Usage(format!("no managed instance named '{name}' (storbench pg list)"))
    })?;
    if running(&i) {
        let mut c = as_user(&i.os_user, &i.bindir.join("pg_ctl"));
        c.arg("-D").arg(&i.data).args(["-m", "fast", "-w", "-t", "120", "stop"]);
        run(c, &format!("stopping managed PostgreSQL '{name}'"))?;
    }
    if destroy {
        let _lock = lock()?;
        for p in [Some(&i.data), i.wal.as_ref(), i.temp.as_ref(), Some(&i.socket_dir)].into_iter().flatten() {
            if p.exists() {
                std::fs::remove_dir_all(p)
                    .map_err(|e| MediaError::Failed(format!("removing {}: {e}", p.display())))?;
            }
        }
        let mut all = load()?;
        all.retain(|x| x.name != name);
        save(&all)?;
    }
    Ok(())
}

/// Where an instance's data, WAL and temp files live, with the medium each
/// is on, for `status` and `env_json`.
pub fn placement(i: &Instance) -> serde_json::Value {
    let place = |p: &Path| {
        serde_json::json!({
            "path": p, "medium": crate::describe_path(p),
        })
    };
    let wal = i.wal.clone().unwrap_or_else(|| i.data.join("pg_wal"));
    serde_json::json!({
        "data": place(&i.data), "wal": place(&wal), "temp": i.temp.as_deref().map(place),
    })
}
