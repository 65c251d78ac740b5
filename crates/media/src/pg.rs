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

use crate::proxy::Link;
use crate::registry::{load_json, lock, save_json, state_dir};
use crate::sys::{chown, reachable};
use crate::{MediaError, MemoryGroup};

/// A managed instance.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
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
    /// Server settings given with `-c KEY=VALUE`, in postgresql.conf.
    pub settings: Vec<(String, String)>,
    /// The server's version.
    pub version: String,
    /// For a standby: its primary's instance name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// For a standby: its name on the primary (`application_name`, `s1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_name: Option<String>,
    /// For a primary: its standbys' instance names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub standbys: Vec<String>,
    /// For a primary: `synchronous_commit` as asked with `--sync`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<String>,
    /// For a primary: `synchronous_standby_names` as set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_names: Option<String>,
    /// For a standby behind a delay proxy: the proxy daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyDaemon>,
    /// The server runs in a cgroup-v1 memory group of this many bytes
    /// (page cache included), `storbench-pg-NAME` (`--memory-limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<u64>,
}

impl Instance {
    /// The name of the instance's memory group.
    fn memory_group(&self) -> String {
        format!("storbench-pg-{}", self.name)
    }
}

/// A delay proxy daemon between a standby and its primary.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProxyDaemon {
    /// Its process id.
    pub pid: u32,
    /// The port it listens on (the standby's `primary_conninfo` port).
    pub port: u16,
    /// The link it emulates.
    pub link: Link,
    /// Its own added round-trip latency at zero delay, in µs, measured by
    /// `pg up` ([`crate::proxy::floor`]).
    pub floor_us: u64,
    /// The command that runs it (restarted with the standby).
    pub command: Vec<String>,
}

/// The `synchronous_commit` levels PostgreSQL has.
pub const SYNC_LEVELS: [&str; 5] = ["off", "local", "remote_write", "on", "remote_apply"];

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
    if let Some(d) = debian_bindirs().into_iter().find(|d| d.join("initdb").exists()) {
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

/// The Debian layout's bin directories, `/usr/lib/postgresql/MAJOR/bin`,
/// newest major first (client tools alone may be there, without a server).
pub fn debian_bindirs() -> Vec<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.is_dir())
        .collect();
    versions.sort();
    versions.into_iter().rev().map(|(_, d)| d).collect()
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

/// What to start. For an instance that exists, a field left at its
/// default (empty `data`, `None`, no settings) is not asked for; any other
/// must match what the instance has ([`differences`]).
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
    /// Standbys to make, one placement each (a new instance only).
    pub standbys: Vec<StandbyPlace>,
    /// `synchronous_commit` (one of [`SYNC_LEVELS`]).
    pub sync: Option<String>,
    /// `FIRST n` or `ANY n`: how many standbys a commit waits for (default:
    /// `FIRST` all of them).
    pub sync_names: Option<String>,
    /// The link between each standby and the primary (a delay proxy).
    pub link: Option<Link>,
    /// Run the server in a memory group of this many bytes (page cache
    /// included): a database larger than it is read from the storage.
    pub memory_limit: Option<u64>,
    /// The command that runs a proxy daemon, before its own arguments
    /// (`[storbench, pg, proxy]`); `--listen-port P --to-port Q --link L`
    /// follow.
    pub proxy_command: Vec<String>,
}

/// Where one standby's data and WAL go.
#[derive(Clone, Debug, Default)]
pub struct StandbyPlace {
    /// Data directory (new or empty).
    pub data: PathBuf,
    /// WAL directory, if apart.
    pub wal: Option<PathBuf>,
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

/// The OS user a server storbench starts runs as: `postgres` as root,
/// else the user storbench runs as.
fn server_user() -> String {
    if crate::sys::is_root() {
        "postgres".to_string()
    } else {
        std::env::var("USER").unwrap_or_default()
    }
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
            return Err(MediaError::Usage(format!("-c {k}: not a setting name")));
        }
    }
    check_replication(name, o)?;
    if let Some(existing) = get(name)? {
        let diff = differences(&existing, o);
        if !diff.is_empty() {
            return Err(MediaError::Usage(format!(
                "managed instance '{name}' exists with other settings: {}; start it as it is (storbench pg up {name}) or remake it (storbench pg down {name} --destroy first)",
                diff.join("; ")
            )));
        }
        let standby_down = existing
            .standbys
            .iter()
            .filter_map(|n| get(n).ok().flatten())
            .any(|s| !running(&s) || s.proxy.as_ref().is_some_and(|d| !proxy_running(d)));
        if running(&existing) && standby_down {
            // A primary whose standby (or its link) was stopped: bring
            // those back, as the primary's commits may be waiting for them.
            start_standbys(&existing)?;
            return Ok(existing);
        }
        if running(&existing) {
            return Err(MediaError::Usage(format!(
                "managed instance '{name}' is already up on port {}",
                existing.port
            )));
        }
        let mut existing = existing;
        if o.memory_limit.is_some() && o.memory_limit != existing.memory_limit {
            existing.memory_limit = o.memory_limit;
            register(std::slice::from_ref(&existing))?;
        }
        start(&existing)?;
        start_standbys(&existing)?;
        return Ok(existing);
    }
    if o.data.as_os_str().is_empty() {
        return Err(MediaError::Usage(format!("pg up {name}: a new instance needs --data TARGET")));
    }
    let bindir = find_bindir()?;
    let user = server_user();
    let port = match o.port {
        Some(p) if TcpListener::bind(("127.0.0.1", p)).is_err() => {
            return Err(MediaError::Usage(format!("--port {p}: in use")));
        }
        Some(p) => p,
        None => free_port().ok_or_else(|| MediaError::Failed("no free port from 5433 to 5998".into()))?,
    };
    // Measured before anything is made, so a link the proxy cannot give
    // is refused with nothing to undo.
    let floor_us = match &o.link {
        Some(l) => {
            let f = crate::proxy::floor()?;
            if l.rtt_us > 0 && l.rtt_us < f {
                // The floor is a round trip's: compared with the two
                // one-way delays together.
                let asked = if l.up_us.is_some() {
                    format!(" (a round trip of {}ms)", l.rtt_us as f64 / 1000.0)
                } else {
                    String::new()
                };
                return Err(MediaError::Usage(format!(
                    "--link {}{asked}: below the delay proxy's own floor of {}ms on this machine (measured now); ask for rtt=0 or at least the floor",
                    l.to_arg(),
                    f as f64 / 1000.0
                )));
            }
            f
        }
        None => 0,
    };
    let lock_guard = lock()?;
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
        let mut inst = Instance {
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
            memory_limit: o.memory_limit,
            ..Instance::default()
        };
        start_on_a_free_port(&mut inst, &conf_path, o.port.is_none())?;
        let port = inst.port;
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
    drop(lock_guard);
    let prim = res?;
    if o.standbys.is_empty() && o.sync.is_none() {
        return Ok(prim);
    }
    match replicate(&prim, o, floor_us) {
        Ok(p) => Ok(p),
        Err(e) => {
            // Undo the whole set: the primary and any standby made.
            let _ = down(name, true);
            Err(e)
        }
    }
}

/// Starts a new instance; its port, when picked, is picked again as
/// [`on_a_free_port`] says (a later `port` line in postgresql.conf wins).
fn start_on_a_free_port(inst: &mut Instance, conf_path: &Path, repick: bool) -> Result<(), MediaError> {
    on_a_free_port(inst, repick, |i, repicked| {
        if repicked {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(conf_path)
                .map_err(|e| MediaError::Failed(format!("writing {}: {e}", conf_path.display())))?;
            std::io::Write::write_all(&mut f, format!("port = {}\n", i.port).as_bytes())
                .map_err(|e| MediaError::Failed(format!("writing {}: {e}", conf_path.display())))?;
            if i.primary.is_some() {
                register(std::slice::from_ref(i))?;
            }
        }
        start(i)
    })
}

/// Starts `inst` by `start_it`; when its port was picked (`repick`) and
/// another process took it between the pick and the start (parallel `pg
/// up`s or restores), picks another and starts again, up to 3 times.
/// `start_it` is told whether the port is a new pick.
fn on_a_free_port(
    inst: &mut Instance,
    repick: bool,
    mut start_it: impl FnMut(&Instance, bool) -> Result<(), MediaError>,
) -> Result<(), MediaError> {
    let mut attempt = 0;
    while let Err(e) = start_it(inst, attempt > 0) {
        let taken = e.to_string().contains("TCP/IP") || e.to_string().contains("in use");
        attempt += 1;
        if !repick || !taken || attempt == 3 {
            return Err(e);
        }
        inst.port = free_port().ok_or_else(|| MediaError::Failed("no free port from 5433 to 5998".into()))?;
    }
    Ok(())
}

/// Checks `--standby`, `--sync`, `--sync-names` and `--link` together,
/// before anything is made.
fn check_replication(name: &str, o: &UpOptions) -> Result<(), MediaError> {
    if let Some(level) = &o.sync {
        if !SYNC_LEVELS.contains(&level.as_str()) {
            return Err(MediaError::Usage(format!("--sync {level}: use one of {}", SYNC_LEVELS.join(", "))));
        }
    }
    let n = o.standbys.len();
    if n == 0 && (o.sync_names.is_some() || o.link.is_some()) {
        return Err(MediaError::Usage(format!("pg up {name}: --sync-names and --link need --standby N")));
    }
    if let Some(names) = &o.sync_names {
        sync_standby_names(names, n)?;
    }
    if n > 0 {
        if let Some(existing) = get(name)? {
            if existing.standbys.len() != n {
                return Err(MediaError::Usage(format!(
                    "managed instance '{name}' exists with {} standbys, not {n}; remake it (storbench pg down {name} --destroy first)",
                    existing.standbys.len()
                )));
            }
        }
    }
    Ok(())
}

/// `synchronous_standby_names` for `FIRST n`/`ANY n` over standbys
/// `s1..sN`; `n` must be 1..=N.
pub fn sync_standby_names(form: &str, standbys: usize) -> Result<String, MediaError> {
    let bad = || {
        MediaError::Usage(format!(
            "--sync-names '{form}': use \"FIRST n\" or \"ANY n\" with n from 1 to {standbys} (the standbys)"
        ))
    };
    let mut parts = form.split_whitespace();
    let kind = parts.next().map(str::to_ascii_uppercase).ok_or_else(bad)?;
    let k: usize = parts.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
    if !(kind == "FIRST" || kind == "ANY") || parts.next().is_some() || k == 0 || k > standbys {
        return Err(bad());
    }
    let names: Vec<String> = (1..=standbys).map(|i| format!("s{i}")).collect();
    Ok(format!("{kind} {k} ({})", names.join(", ")))
}

fn psql(i: &Instance, sql: &str) -> Result<String, MediaError> {
    let mut c = Command::new(i.bindir.join("psql"));
    c.args(["-X", "-q", "-At", "-F", "|", "-h", "127.0.0.1", "-p", &i.port.to_string()])
        .args(["-U", "root", "-d", "postgres", "-c", sql]);
    run(c, &format!("psql on '{}': {sql}", i.name))
}

/// Makes the standbys of a freshly made primary (base backup, standby
/// settings, a proxy each when there is a link), starts them, then sets
/// `synchronous_commit` and `synchronous_standby_names` on the primary and
/// waits until every standby streams.
fn replicate(prim: &Instance, o: &UpOptions, floor_us: u64) -> Result<Instance, MediaError> {
    let mut prim = prim.clone();
    for (idx, place) in o.standbys.iter().enumerate() {
        let sname = format!("s{}", idx + 1);
        let iname = format!("{}-{sname}", prim.name);
        let socket_dir = state_dir().join("pg").join(&iname);
        std::fs::create_dir_all(&socket_dir)
            .map_err(|e| MediaError::Failed(format!("creating {}: {e}", socket_dir.display())))?;
        chown(&socket_dir, &prim.os_user)?;
        let mut inst = Instance {
            name: iname.clone(),
            bindir: prim.bindir.clone(),
            data: place.data.clone(),
            wal: place.wal.clone(),
            temp: prim.temp.as_ref().map(|_| PathBuf::from(format!("{}-temp", place.data.display()))),
            port: 0,
            socket_dir: socket_dir.clone(),
            os_user: prim.os_user.clone(),
            settings: prim.settings.clone(),
            version: prim.version.clone(),
            primary: Some(prim.name.clone()),
            standby_name: Some(sname.clone()),
            ..Instance::default()
        };
        // Registered first, so an undo (`down --destroy` of the primary)
        // finds whatever of it was made.
        prim.standbys.push(iname.clone());
        register(&[prim.clone(), inst.clone()])?;
        fresh_dir(&place.data, "standby-data", &prim.os_user)?;
        if let Some(w) = &place.wal {
            fresh_dir(w, "standby-wal", &prim.os_user)?;
        }
        let mut c = as_user(&prim.os_user, &prim.bindir.join("pg_basebackup"));
        c.args(["-h", "127.0.0.1", "-p", &prim.port.to_string(), "-U", "root", "-D"])
            .arg(&place.data)
            .args(["-X", "stream", "-c", "fast", "--no-sync"]);
        if let Some(w) = &place.wal {
            c.arg("--waldir").arg(w);
        }
        if let (Some(pt), Some(st)) = (&prim.temp, &inst.temp) {
            fresh_dir(st, "standby-temp", &prim.os_user)?;
            c.arg(format!("--tablespace-mapping={}={}", pt.display(), st.display()));
        }
        run(c, &format!("pg_basebackup for standby {sname}"))?;
        inst.port = free_port().ok_or_else(|| MediaError::Failed("no free port from 5433 to 5998".into()))?;
        let upstream = match &o.link {
            Some(link) => {
                let d = start_proxy(&socket_dir, prim.port, link, floor_us, &o.proxy_command)?;
                let port = d.port;
                inst.proxy = Some(d);
                register(&[inst.clone()])?;
                port
            }
            None => prim.port,
        };
        let conf = format!(
            "\n# storbench pg up {}: standby {sname} of {}\nport = {}\nunix_socket_directories = '{}'\nhot_standby = on\nprimary_conninfo = 'host=127.0.0.1 port={upstream} user=root application_name={sname}'\n",
            prim.name,
            prim.name,
            inst.port,
            socket_dir.display()
        );
        let conf_path = place.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path)
            .map_err(|e| MediaError::Failed(format!("reading {}: {e}", conf_path.display())))?;
        text.push_str(&conf);
        std::fs::write(&conf_path, text)
            .and_then(|_| std::fs::write(place.data.join("standby.signal"), ""))
            .map_err(|e| MediaError::Failed(format!("writing {}: {e}", conf_path.display())))?;
        chown(&place.data, &prim.os_user)?;
        // The server refuses a data directory others can read.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&place.data, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| MediaError::Failed(format!("chmod 700 {}: {e}", place.data.display())))?;
        }
        register(&[inst.clone()])?;
        start_on_a_free_port(&mut inst, &conf_path, true)?;
    }
    let n = o.standbys.len();
    let level = o.sync.clone().unwrap_or_else(|| "on".into());
    // `off` and `local` never wait for a standby: no names, so
    // pg_stat_replication says `async`, which is what they are.
    let names = match (n, level.as_str()) {
        (0, _) | (_, "off" | "local") => String::new(),
        _ => sync_standby_names(o.sync_names.as_deref().unwrap_or(&format!("FIRST {n}")), n)?,
    };
    if o.sync.is_some() {
        psql(&prim, &format!("ALTER SYSTEM SET synchronous_commit = '{level}'"))?;
        prim.sync = Some(level);
    }
    if !names.is_empty() {
        psql(&prim, &format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'"))?;
        prim.sync_names = Some(names);
    }
    psql(&prim, "SELECT pg_reload_conf()")?;
    register(&[prim.clone()])?;
    wait_streaming(&prim, n)?;
    Ok(prim)
}

/// Adds or replaces these instances in the registry.
fn register(items: &[Instance]) -> Result<(), MediaError> {
    let _lock = lock()?;
    let mut all = load()?;
    for it in items {
        match all.iter_mut().find(|x| x.name == it.name) {
            Some(x) => *x = it.clone(),
            None => all.push(it.clone()),
        }
    }
    save(&all)
}

/// Waits (up to 60 s) until `n` standbys stream from `prim`.
fn wait_streaming(prim: &Instance, n: usize) -> Result<(), MediaError> {
    let t0 = Instant::now();
    loop {
        let out = psql(prim, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")?;
        if out.trim().parse::<usize>().unwrap_or(0) >= n {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(MediaError::Failed(format!(
                "'{}': {} of {n} standbys streaming after 60 s (see {}/server.log of each standby)",
                prim.name,
                out.trim(),
                state_dir().join("pg").display()
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Starts a delay proxy daemon toward `to_port` and waits until it listens.
fn start_proxy(
    dir: &Path,
    to_port: u16,
    link: &Link,
    floor_us: u64,
    command: &[String],
) -> Result<ProxyDaemon, MediaError> {
    let (prog, pre) = command.split_first().ok_or_else(|| {
        MediaError::Failed("a link needs the proxy's command (the storbench binary)".into())
    })?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| MediaError::Failed(format!("finding a port for the proxy: {e}")))?;
    let mut args: Vec<String> = pre.to_vec();
    args.extend(["--listen-port".into(), port.to_string(), "--to-port".into(), to_port.to_string()]);
    args.extend(["--link".into(), link.to_arg()]);
    let d = ProxyDaemon {
        pid: 0,
        port,
        link: link.clone(),
        floor_us,
        command: std::iter::once(prog.clone()).chain(args).collect(),
    };
    spawn_proxy(dir, d)
}

fn spawn_proxy(dir: &Path, mut d: ProxyDaemon) -> Result<ProxyDaemon, MediaError> {
    use std::os::unix::process::CommandExt;
    let log = std::fs::File::create(dir.join("proxy.log"))
        .map_err(|e| MediaError::Failed(format!("creating {}: {e}", dir.join("proxy.log").display())))?;
    // Its own process group: a Ctrl-C to the terminal stops the run, not the
    // link; `pg down` stops it. Its output goes to a file, never to the
    // caller's pipes (a caller waiting for them would wait forever).
    let child = Command::new(&d.command[0])
        .args(&d.command[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| MediaError::Failed(format!("starting the delay proxy: {e}")))?;
    d.pid = child.id();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", d.port)).is_err() {
        if t0.elapsed() > Duration::from_secs(10) {
            stop_proxy(&d);
            let why = std::fs::read_to_string(dir.join("proxy.log")).unwrap_or_default();
            return Err(MediaError::Failed(format!(
                "the delay proxy did not listen on port {} within 10 s: {}",
                d.port,
                why.lines().last().unwrap_or("no output")
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The process is reaped by init once storbench exits; this thread reaps
    // it if it ends while storbench still runs.
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    Ok(d)
}

/// Whether a proxy daemon is alive (its pid runs a storbench proxy).
pub fn proxy_running(d: &ProxyDaemon) -> bool {
    std::fs::read(format!("/proc/{}/cmdline", d.pid))
        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"--listen-port"))
}

fn stop_proxy(d: &ProxyDaemon) {
    if d.pid > 0 && proxy_running(d) {
        // SIGKILL: the binary turns SIGTERM into a Ctrl-C flag, and the
        // proxy holds nothing that needs flushing.
        // SAFETY: signalling a process we started (checked by its cmdline).
        unsafe { libc::kill(d.pid as i32, libc::SIGKILL) };
        let t0 = Instant::now();
        while proxy_running(d) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Starts a primary's stopped standbys (and their proxies).
fn start_standbys(prim: &Instance) -> Result<(), MediaError> {
    for sname in &prim.standbys {
        let Some(mut s) = get(sname)? else { continue };
        if let Some(d) = s.proxy.clone() {
            if !proxy_running(&d) {
                s.proxy = Some(spawn_proxy(&s.socket_dir, d)?);
                register(&[s.clone()])?;
            }
        }
        if !running(&s) {
            start(&s)?;
        }
    }
    Ok(())
}

/// One standby as the primary sees it (`pg_stat_replication`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ReplicaState {
    /// Its name on the primary (`s1`).
    pub name: String,
    /// `streaming`, `catchup`, ...
    pub state: String,
    /// `sync`, `async`, `potential`, `quorum`.
    pub sync_state: String,
    /// Bytes sent but not yet replayed.
    pub sent_replay_bytes: i64,
    /// Lags in ms (none when idle).
    pub write_lag_ms: Option<f64>,
    /// See `write_lag_ms`.
    pub flush_lag_ms: Option<f64>,
    /// See `write_lag_ms`.
    pub replay_lag_ms: Option<f64>,
}

/// The SQL [`replication`] reads; the binary's per-second sampler uses it too.
pub const REPLICATION_SQL: &str = "SELECT application_name, state, sync_state, \
    coalesce(pg_wal_lsn_diff(sent_lsn, replay_lsn), 0)::bigint, \
    extract(epoch from write_lag) * 1000, extract(epoch from flush_lag) * 1000, \
    extract(epoch from replay_lag) * 1000 FROM pg_stat_replication ORDER BY application_name";

/// One look at a primary for the per-second sampler: its WAL position in
/// bytes, how many backends wait for a standby to confirm a commit
/// (`wait_event = 'SyncRep'`), and its standbys as it sees them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Probe {
    /// `pg_current_wal_lsn()` as bytes from 0/0.
    pub wal_bytes: i64,
    /// Backends waiting in SyncRep.
    pub sync_waiting: i64,
    /// The connected standbys.
    pub standbys: Vec<ReplicaState>,
}

/// Takes a [`Probe`] (one psql, 2 s connect timeout; plain SELECTs, which
/// never wait for a standby).
pub fn probe(prim: &Instance) -> Result<Probe, MediaError> {
    let mut c = Command::new(prim.bindir.join("psql"));
    c.env("PGCONNECT_TIMEOUT", "2")
        .args(["-X", "-q", "-At", "-F", "|", "-h", "127.0.0.1", "-p", &prim.port.to_string()])
        .args(["-U", "root", "-d", "postgres", "-c"])
        .arg(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, \
             (SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep')",
        )
        .args(["-c", REPLICATION_SQL]);
    let out = run(c, &format!("probing '{}'", prim.name))?;
    let mut lines = out.lines();
    let head: Vec<i64> =
        lines.next().unwrap_or("").split('|').map(|x| x.trim().parse().unwrap_or(0)).collect();
    Ok(Probe {
        wal_bytes: head.first().copied().unwrap_or(0),
        sync_waiting: head.get(1).copied().unwrap_or(0),
        standbys: parse_replication(&lines.collect::<Vec<_>>().join("\n")),
    })
}

/// Cancels every wait for a standby's confirmation on `prim`: PostgreSQL
/// then returns those commits to their clients with a warning (they are
/// committed locally, not yet on the standby). Returns how many.
pub fn release_sync_waiters(prim: &Instance) -> Result<i64, MediaError> {
    let out = psql(
        prim,
        "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
    )?;
    Ok(out.trim().parse().unwrap_or(0))
}

/// Kills an instance's server as a crash would: SIGKILL to the postmaster
/// (pid from `postmaster.pid`) and then to each of its children, so no
/// backend acknowledges anything after. For failure tests.
pub fn kill9(i: &Instance) -> Result<(), MediaError> {
    let pm = postmaster_pid(&i.data).ok_or_else(|| {
        MediaError::Failed(format!("{}: no server pid", i.data.join("postmaster.pid").display()))
    })? as i32;
    let children: Vec<i32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // The parent pid is the second field after the ")" that ends the name.
            let ppid: i32 = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == pm).then_some(pid)
        })
        .collect();
    for pid in std::iter::once(pm).chain(children) {
        // SAFETY: signalling the server this instance's pid file names.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    Ok(())
}

/// Promotes a standby to a primary and waits (60 s) until it is one.
pub fn promote(s: &Instance) -> Result<(), MediaError> {
    let mut c = as_user(&s.os_user, &s.bindir.join("pg_ctl"));
    c.arg("-D").arg(&s.data).args(["-w", "-t", "60", "promote"]);
    run(c, &format!("promoting standby '{}'", s.name))?;
    Ok(())
}

/// What a run on a primary records about its replication in `env_json`:
/// sync level, standby names, and each standby's link and the proxy's floor.
pub fn replication_env(prim: &Instance) -> serde_json::Value {
    if prim.standbys.is_empty() {
        return serde_json::Value::Null;
    }
    let standbys: Vec<serde_json::Value> = prim
        .standbys
        .iter()
        .filter_map(|n| get(n).ok().flatten())
        .map(|s| {
            serde_json::json!({
                "name": s.standby_name, "instance": s.name, "placement": placement(&s),
                "link": s.proxy.as_ref().map(|d| &d.link),
                "proxy_floor_us": s.proxy.as_ref().map(|d| d.floor_us),
            })
        })
        .collect();
    serde_json::json!({
        "synchronous_commit": prim.sync, "synchronous_standby_names": prim.sync_names,
        "standbys": standbys,
    })
}

/// What the primary reports of its standbys now.
pub fn replication(prim: &Instance) -> Result<Vec<ReplicaState>, MediaError> {
    Ok(parse_replication(&psql(prim, REPLICATION_SQL)?))
}

fn parse_replication(out: &str) -> Vec<ReplicaState> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            let get = |i: usize| f.get(i).copied().unwrap_or("");
            ReplicaState {
                name: get(0).into(),
                state: get(1).into(),
                sync_state: get(2).into(),
                sent_replay_bytes: get(3).parse().unwrap_or(0),
                write_lag_ms: get(4).parse().ok(),
                flush_lag_ms: get(5).parse().ok(),
                replay_lag_ms: get(6).parse().ok(),
            }
        })
        .collect()
}

/// What `o` asks for that the existing instance `i` does not have, one
/// phrase each (`--port 5500 (it has 5433)`). Fields `o` leaves at their
/// default are not compared; settings are compared as a whole set when any
/// is given, since they are the server's configuration.
pub fn differences(i: &Instance, o: &UpOptions) -> Vec<String> {
    fn same(a: &Path, b: &Path) -> bool {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    }
    let mut out = Vec::new();
    if !o.data.as_os_str().is_empty() && !same(&o.data, &i.data) {
        out.push(format!("--data {} (it has {})", o.data.display(), i.data.display()));
    }
    let mut place = |flag: &str, asked: &Option<PathBuf>, has: &Option<PathBuf>, none: &str| {
        if let Some(a) = asked {
            if !has.as_deref().is_some_and(|h| same(a, h)) {
                let it = has.as_ref().map(|h| h.display().to_string()).unwrap_or_else(|| none.to_string());
                out.push(format!("--{flag} {} (it has {it})", a.display()));
            }
        }
    };
    place("wal", &o.wal, &i.wal, "its WAL in the data directory");
    place("temp", &o.temp, &i.temp, "no temp target");
    if let Some(s) = o.sync.as_deref().filter(|s| i.sync.as_deref() != Some(*s)) {
        out.push(format!("--sync {s} (it has {})", i.sync.as_deref().unwrap_or("no --sync")));
    }
    if let Some(p) = o.port.filter(|p| *p != i.port) {
        out.push(format!("--port {p} (it has {})", i.port));
    }
    if !o.settings.is_empty() {
        let has = |k: &str| i.settings.iter().rev().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
        let asked = |k: &str| o.settings.iter().rev().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
        for (k, v) in &o.settings {
            match has(k) {
                Some(h) if h == v => {}
                Some(h) => out.push(format!("-c {k}={v} (it has {k}={h})")),
                None => out.push(format!("-c {k}={v} (it does not set {k})")),
            }
        }
        for (k, v) in &i.settings {
            if asked(k).is_none() {
                out.push(format!("no -c {k} (it has {k}={v})"));
            }
        }
        out.dedup();
    }
    out
}

/// How long a managed server may take to accept connections: pg_ctl's
/// wait and then pg_isready's on its TCP port, together.
const START_TIMEOUT: Duration = Duration::from_secs(180);

fn start(i: &Instance) -> Result<(), MediaError> {
    start_with(i, None, &format!("starting managed PostgreSQL '{}'", i.name), START_TIMEOUT).map(|_| ())
}

/// Starts `i`'s server (its log in its socket directory), with `opts`
/// given to the server through `pg_ctl -o` when some, and waits until it
/// accepts connections on its TCP port, for at most `timeout` from its
/// launch ([`crate::tempserver::did_not_start`] after that). Returns the
/// time from the server's launch (`pg_ctl start`) to its first accepted
/// connection.
fn start_with(
    i: &Instance,
    opts: Option<&str>,
    what: &str,
    timeout: Duration,
) -> Result<Duration, MediaError> {
    // In the instance's memory group: pg_ctl, and the server it starts,
    // are then members; this process leaves again once it has started.
    let group = i.memory_limit.map(|b| MemoryGroup::create(&i.memory_group(), b)).transpose()?;
    if let Some(g) = &group {
        g.join()?;
    }
    let r = start_in(i, opts, what, timeout);
    if let Some(g) = &group {
        g.leave();
    }
    r
}

fn start_in(i: &Instance, opts: Option<&str>, what: &str, timeout: Duration) -> Result<Duration, MediaError> {
    let log = i.socket_dir.join("server.log");
    let last = || {
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        tail.lines()
            .rev()
            .find(|l| l.contains("FATAL") || l.contains("ERROR"))
            // A server that gives up before its logging starts (no
            // pg_control) says why in plain lines: the last is the reason.
            .or_else(|| tail.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let mut c = as_user(&i.os_user, &i.bindir.join("pg_ctl"));
    c.arg("-D").arg(&i.data).arg("-l").arg(&log);
    if let Some(o) = opts {
        c.arg("-o").arg(o);
    }
    c.args(["-w", "-t", &timeout.as_secs().max(1).to_string(), "start"]);
    let launched = Instant::now();
    run(c, what).map_err(|e| {
        if e.to_string().contains("did not start in time") || launched.elapsed() >= timeout {
            return crate::tempserver::did_not_start("postgres", &i.data, timeout, &last());
        }
        match last() {
            l if l.is_empty() => e,
            l => MediaError::Failed(format!("{e}: {l}")),
        }
    })?;
    while launched.elapsed() < timeout {
        let ok = Command::new(i.bindir.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &i.port.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Ok(launched.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(crate::tempserver::did_not_start("postgres", &i.data, timeout, &last()))
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

/// Whether the process `postmaster.pid` names is a live server (not gone,
/// not a zombie awaiting its parent) — `pg_ctl status` counts a killed
/// server's unreaped pid as running.
fn server_alive(i: &Instance) -> bool {
    postmaster_pid(&i.data).is_some_and(crate::sys::process_runs)
}

/// The postmaster's process id, `postmaster.pid`'s first line.
fn postmaster_pid(data: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Stops an instance cleanly, then its standbys and their proxies (the
/// primary first, so the standbys receive its shutdown checkpoint); with
/// `destroy`, removes their directories and forgets them.
pub fn down(name: &str, destroy: bool) -> Result<(), MediaError> {
    let i = get(name)?.ok_or_else(|| {
        MediaError::Usage(format!("no managed instance named '{name}' (storbench pg list)"))
    })?;
    let mut failed = None;
    if running(&i) && server_alive(&i) {
        let mut c = as_user(&i.os_user, &i.bindir.join("pg_ctl"));
        c.arg("-D").arg(&i.data).args(["-m", "fast", "-w", "-t", "120", "stop"]);
        // A server killed meanwhile (failover-check) is down all the same.
        if let Err(e) = run(c, &format!("stopping managed PostgreSQL '{name}'")) {
            if server_alive(&i) {
                failed = Some(e);
            }
        }
    }
    if let Some(d) = &i.proxy {
        stop_proxy(d);
    }
    if let Some(g) = MemoryGroup::existing(&i.memory_group()) {
        g.remove();
    }
    // The standbys go down even when the primary would not: nothing is
    // left running behind an error.
    for s in &i.standbys {
        if get(s)?.is_some() {
            if let Err(e) = down(s, destroy) {
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
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
        for x in all.iter_mut() {
            x.standbys.retain(|s| s != name);
        }
        save(&all)?;
    }
    Ok(())
}

/// The server binaries for a data directory: those of its major version
/// (`PG_VERSION`), from the Debian layout or [`find_bindir`]'s; a version
/// with no binaries here is named with the package that has them.
pub fn bindir_for(data: &Path) -> Result<PathBuf, MediaError> {
    let text = std::fs::read_to_string(data.join("PG_VERSION")).map_err(|e| {
        MediaError::Usage(format!("{}: no PG_VERSION ({e}): not a data directory", data.display()))
    })?;
    let major = text.trim().to_string();
    let debian = PathBuf::from(format!("/usr/lib/postgresql/{major}/bin"));
    if debian.join("postgres").is_file() && debian.join("pg_ctl").is_file() {
        return Ok(debian);
    }
    let found = find_bindir().ok().filter(|d| {
        Command::new(d.join("postgres")).arg("--version").output().is_ok_and(|o| {
            let v = String::from_utf8_lossy(&o.stdout).split_whitespace().last().unwrap_or("").to_string();
            v.split('.').next() == Some(major.as_str())
        })
    });
    found.ok_or_else(|| {
        MediaError::Usage(format!(
            "{} is a PostgreSQL {major} data directory and there are no PostgreSQL {major} server binaries here: install the Debian package postgresql-{major}",
            data.display()
        ))
    })
}

/// A server storbench starts for a while on a data directory it does not
/// manage (a restored base backup), and stops again. What it needs is given
/// on the server's command line, so the directory's own configuration is
/// left as it was (a Debian cluster's backup has none: its files live in
/// /etc): its own free port on 127.0.0.1, its Unix socket, log and access
/// rules in `run_dir`, `archive_mode` off (a copy must not archive into its
/// source's archive). The rules admit the Unix socket only (`trust`: any
/// role), and `run_dir` is the server user's, mode 0700: only that user and
/// root can connect; TCP is refused for every role. Not in the registry:
/// stopped by [`Temporary::stop`] or when dropped.
pub struct Temporary {
    inst: Instance,
    live: bool,
    started_in: Duration,
}

impl Temporary {
    /// Gives `data` to the server's user (`postgres` when run as root) with
    /// mode 0700, starts a server on it and waits until it accepts
    /// connections (after its recovery: a base backup replays its WAL).
    pub fn start(data: &Path, run_dir: &Path) -> Result<Temporary, MediaError> {
        use std::os::unix::fs::PermissionsExt;
        let bindir = bindir_for(data)?;
        let user = server_user();
        for p in [data, run_dir] {
            if p.to_string_lossy().contains(['\'', '\\', ',']) {
                return Err(MediaError::Usage(format!(
                    "{}: a path with ', \\ or , cannot be given to the server",
                    p.display()
                )));
            }
            if !reachable(p, &user) {
                return Err(MediaError::Usage(format!(
                    "{}: the server's user '{user}' cannot reach it; make its parents traversable (chmod o+x) or use a medium",
                    p.display()
                )));
            }
        }
        std::fs::write(run_dir.join("pg_hba.conf"), "# storbench: a temporary server\nlocal all all trust\n")
            .and_then(|_| std::fs::write(run_dir.join("pg_ident.conf"), ""))
            .and_then(|_| {
                std::fs::write(
                    run_dir.join("postgresql.conf"),
                    format!("include_if_exists '{}'\n", data.join("postgresql.conf").display()),
                )
            })
            .map_err(|e| MediaError::Failed(format!("writing into {}: {e}", run_dir.display())))?;
        chown(run_dir, &user)?;
        chown(data, &user)?;
        for p in [data, run_dir] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| MediaError::Failed(format!("chmod 700 {}: {e}", p.display())))?;
        }
        let mut inst = Instance {
            name: format!("temporary server on {}", data.display()),
            bindir,
            data: data.to_path_buf(),
            port: free_port().ok_or_else(|| MediaError::Failed("no free port from 5433 to 5998".into()))?,
            socket_dir: run_dir.to_path_buf(),
            os_user: user,
            ..Instance::default()
        };
        let what = format!("starting PostgreSQL on {}", data.display());
        // A port another process takes between the pick and the start is
        // picked again, as for a new managed instance.
        let mut started_in = Duration::ZERO;
        on_a_free_port(&mut inst, true, |i, _| {
            let r = |k: &str, p: &Path| format!("-c '{k}={}'", p.display());
            let opts = [
                r("config_file", &run_dir.join("postgresql.conf")),
                r("hba_file", &run_dir.join("pg_hba.conf")),
                r("ident_file", &run_dir.join("pg_ident.conf")),
                r("unix_socket_directories", run_dir),
                format!("-c port={}", i.port),
                "-c listen_addresses=127.0.0.1 -c archive_mode=off -c logging_collector=off".into(),
            ]
            .join(" ");
            match start_with(i, Some(&opts), &what, crate::tempserver::START_TIMEOUT) {
                Ok(d) => {
                    started_in = d;
                    Ok(())
                }
                Err(e) => {
                    // pg_ctl gave up: a server it started must not stay.
                    let _ = Temporary { inst: i.clone(), live: true, started_in }.stop();
                    Err(e)
                }
            }
        })?;
        Ok(Temporary { inst, live: true, started_in })
    }

    /// The TCP port (the Unix socket's name carries it too).
    pub fn port(&self) -> u16 {
        self.inst.port
    }

    /// The Unix socket's directory.
    pub fn socket_dir(&self) -> &Path {
        &self.inst.socket_dir
    }

    /// From the server's launch (`pg_ctl start`, after the copy was given
    /// to its user and its configuration written) to its first accepted
    /// connection: its start and recovery alone.
    pub fn start_time(&self) -> Duration {
        self.started_in
    }

    /// The postmaster's process id (`postmaster.pid`'s first line).
    pub fn pid(&self) -> Option<u32> {
        postmaster_pid(&self.inst.data)
    }

    /// Stops the server cleanly (`-m fast`: a shutdown checkpoint, so the
    /// directory starts again without recovery); one that will not stop in
    /// 120 s is stopped `immediate`ly and the error returned.
    pub fn stop(&mut self) -> Result<(), MediaError> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        let pg_ctl = |mode: &str| {
            let mut c = as_user(&self.inst.os_user, &self.inst.bindir.join("pg_ctl"));
            c.arg("-D").arg(&self.inst.data).args(["-m", mode, "-w", "-t", "120", "stop"]);
            c
        };
        if !self.inst.data.join("postmaster.pid").exists() {
            return Ok(());
        }
        let stopped = run(pg_ctl("fast"), &format!("stopping PostgreSQL on {}", self.inst.data.display()));
        if stopped.is_err() {
            let _ = run(pg_ctl("immediate"), "pg_ctl stop -m immediate");
        }
        stopped.map(|_| ())
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = self.stop();
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn inst() -> Instance {
        Instance {
            name: "a".into(),
            bindir: "/usr/bin".into(),
            data: "/nonexistent/sb/data".into(),
            wal: None,
            temp: None,
            port: 5433,
            socket_dir: "/nonexistent/sb/sock".into(),
            os_user: "postgres".into(),
            settings: vec![("shared_buffers".into(), "32MB".into())],
            version: "17".into(),
            ..Instance::default()
        }
    }

    #[test]
    fn flags_not_given_are_not_compared_and_equal_ones_pass() {
        let i = inst();
        assert!(differences(&i, &UpOptions::default()).is_empty());
        let same = UpOptions {
            data: i.data.clone(),
            port: Some(5433),
            settings: i.settings.clone(),
            ..UpOptions::default()
        };
        assert!(differences(&i, &same).is_empty());
    }

    #[test]
    fn each_differing_flag_is_named_with_what_the_instance_has() {
        let i = inst();
        let o = UpOptions {
            data: "/nonexistent/sb/other".into(),
            wal: Some("/nonexistent/sb/wal".into()),
            temp: None,
            port: Some(5500),
            settings: vec![("shared_buffers".into(), "64MB".into()), ("fsync".into(), "off".into())],
            ..UpOptions::default()
        };
        assert_eq!(
            differences(&i, &o),
            [
                "--data /nonexistent/sb/other (it has /nonexistent/sb/data)",
                "--wal /nonexistent/sb/wal (it has its WAL in the data directory)",
                "--port 5500 (it has 5433)",
                "-c shared_buffers=64MB (it has shared_buffers=32MB)",
                "-c fsync=off (it does not set fsync)",
            ]
        );
        let fewer = UpOptions { settings: vec![("fsync".into(), "off".into())], ..UpOptions::default() };
        assert_eq!(
            differences(&i, &fewer),
            ["-c fsync=off (it does not set fsync)", "no -c shared_buffers (it has shared_buffers=32MB)"]
        );
    }
}
