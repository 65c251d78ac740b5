//! One instance's server: make it (`initdb`), start it and wait until it
//! accepts connections, find its postmaster, stop it with escalation and
//! check that it went, and `pg up`/`pg down` over a primary and its standbys.

use super::*;

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
    /// Data checksums (`initdb --data-checksums`): a torn or corrupt data
    /// page is reported when read. A new instance only.
    pub checksums: bool,
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

pub(crate) fn run(mut c: Command, what: &str) -> Result<String, InstanceError> {
    let out = c.output().map_err(|e| InstanceError::Failed(format!("{what}: {e}")))?;
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
        return Err(InstanceError::Failed(format!("{what}: {first}")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

pub(crate) fn free_port() -> Option<u16> {
    // Start at a point that differs between processes, so two storbench
    // processes starting instances at once do not pick the same port.
    let start = 5433 + (std::process::id() % 400) as u16;
    (start..5999).chain(5433..start).find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
}

/// The OS user a server storbench starts runs as: `postgres` as root,
/// else the user storbench runs as.
pub(crate) fn server_user() -> String {
    if storbench_proc::is_root() {
        "postgres".to_string()
    } else {
        std::env::var("USER").unwrap_or_default()
    }
}

pub(crate) fn fresh_dir(p: &Path, what: &str, user: &str) -> Result<(), InstanceError> {
    if p.exists() && std::fs::read_dir(p).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(InstanceError::Usage(format!("--{what} {}: exists and is not empty", p.display())));
    }
    check_place(p, what)?;
    std::fs::create_dir_all(p)
        .map_err(|e| InstanceError::Failed(format!("creating {}: {e}", p.display())))?;
    if !reachable(p, user) {
        let _ = std::fs::remove_dir(p);
        return Err(InstanceError::Usage(format!(
            "--{what} {}: the server's user '{user}' cannot reach it; make the directory's parents traversable (chmod o+x) or use a medium",
            p.display()
        )));
    }
    Ok(chown(p, user)?)
}

/// A place for `--what`: an existing directory, or a new one whose parent
/// exists (a mistyped path must not become a chain of directories).
pub(crate) fn check_place(p: &Path, what: &str) -> Result<(), InstanceError> {
    if p.is_dir() {
        return Ok(());
    }
    if p.exists() {
        return Err(InstanceError::Usage(format!("--{what} {}: not a directory", p.display())));
    }
    let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(InstanceError::Usage(format!(
            "--{what} {}: its parent directory {} does not exist",
            p.display(),
            parent.display()
        )));
    }
    Ok(())
}

/// Creates (initdb) and starts an instance, or starts an existing one that
/// is stopped. Waits until it accepts connections.
pub fn up(name: &str, o: &UpOptions) -> Result<Instance, InstanceError> {
    check_up(name, o)?;
    if let Some(existing) = get(name)? {
        if o.checksums {
            return Err(InstanceError::Usage(format!(
                "--data-checksums: only when making an instance ('{name}' exists; checksums are chosen at initdb)"
            )));
        }
        return up_existing(name, existing, o);
    }
    check_new(name, o)?;
    let bindir = find_bindir()?;
    let user = server_user();
    let port = match o.port {
        Some(p) if TcpListener::bind(("127.0.0.1", p)).is_err() => {
            return Err(InstanceError::Usage(format!("--port {p}: in use")));
        }
        Some(p) => p,
        None => free_port().ok_or_else(|| InstanceError::Failed("no free port from 5433 to 5998".into()))?,
    };
    // Measured before anything is made, so a link the proxy cannot give
    // is refused with nothing to undo.
    let floor_us = o.link.as_ref().map(link_floor).transpose()?.unwrap_or(0);
    let lock_guard = lock()?;
    let mut made: Vec<PathBuf> = Vec::new();
    let res = make_primary(name, o, &bindir, &user, port, &mut made);
    if res.is_err() {
        // Undo: stop a server that started, remove what was made.
        if let Some(pm) = find_postmaster(&o.data) {
            let _ = stop_postmaster(pm, name, &o.data, Duration::from_secs(5));
        }
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
            let _ = down(name, true, Duration::from_secs(10));
            Err(e)
        }
    }
}

/// The name, the setting names and the replication flags, before anything.
fn check_up(name: &str, o: &UpOptions) -> Result<(), InstanceError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(InstanceError::Usage(format!(
            "instance name '{name}': use letters, digits, '-', '_' or '.'"
        )));
    }
    for (k, _) in &o.settings {
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            return Err(InstanceError::Usage(format!("-c {k}: not a setting name")));
        }
    }
    check_replication(name, o)
}

/// `up` of an instance that exists: starts it as it is (what `o` gives
/// must match it), or brings back its stopped standbys.
fn up_existing(name: &str, existing: Instance, o: &UpOptions) -> Result<Instance, InstanceError> {
    {
        let diff = differences(&existing, o);
        if !diff.is_empty() {
            return Err(InstanceError::Usage(format!(
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
            return Err(InstanceError::Usage(format!(
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
        Ok(existing)
    }
}

/// A new instance's places: each an existing directory or a new one whose
/// parent exists.
fn check_new(name: &str, o: &UpOptions) -> Result<(), InstanceError> {
    if o.data.as_os_str().is_empty() {
        return Err(InstanceError::Usage(format!("pg up {name}: a new instance needs --data TARGET")));
    }
    check_place(&o.data, "data")?;
    for (p, what) in [(&o.wal, "wal"), (&o.temp, "temp")] {
        if let Some(p) = p {
            check_place(p, what)?;
        }
    }
    for s in &o.standbys {
        check_place(&s.data, "standby-data")?;
        if let Some(w) = &s.wal {
            check_place(w, "standby-wal")?;
        }
    }
    Ok(())
}

/// The delay proxy's own floor, measured now, when `l` asks for more.
fn link_floor(l: &Link) -> Result<u64, InstanceError> {
    let f = least_floor(l.rtt_us, crate::proxy::floor)?;
    if l.rtt_us > 0 && l.rtt_us < f {
        // The floor is a round trip's: compared with the two one-way
        // delays together.
        let asked = if l.up_us.is_some() {
            format!(" (a round trip of {}ms)", l.rtt_us as f64 / 1000.0)
        } else {
            String::new()
        };
        return Err(InstanceError::Usage(format!(
            "--link {}{asked}: below the delay proxy's own floor of {}ms on this machine (measured now); ask for rtt=0 or at least the floor",
            l.to_arg(),
            f as f64 / 1000.0
        )));
    }
    Ok(f)
}

/// The floor to hold a link of `rtt_us` against: one measurement, and up
/// to two more while the least so far is above the link asked, the least
/// kept. A moment of CPU steal put one measurement at 0.222 ms against a
/// link of 0.2 ms (S3's full run, 2026-11-28); a floor truly above the link
/// stays above it in all three. The least is also the floor recorded
/// (`pg status`, the runs' `proxy_floor_us`).
fn least_floor(
    rtt_us: u64,
    mut measure: impl FnMut() -> Result<u64, InstanceError>,
) -> Result<u64, InstanceError> {
    let mut f = measure()?;
    for _ in 0..2 {
        if rtt_us == 0 || rtt_us >= f {
            break;
        }
        f = f.min(measure()?);
    }
    Ok(f)
}

/// Makes and starts a new primary (initdb, its settings, its database and
/// temp tablespace) and registers it; what it made is pushed on `made` for
/// the caller's undo.
fn make_primary(
    name: &str,
    o: &UpOptions,
    bindir: &Path,
    user: &str,
    port: u16,
    made: &mut Vec<PathBuf>,
) -> Result<Instance, InstanceError> {
    let user = user.to_string();
    let socket_dir = state_dir().join("pg").join(name);
    made.push(socket_dir.clone());
    private_dir(&socket_dir, &user)?;
    // The state directory may be private: let the server's user
    // through to its own (private) socket directory.
    let _ = Command::new("chmod").arg("o+x").arg(state_dir()).arg(state_dir().join("pg")).status();
    let pwfile = socket_dir.join(PASSWORD_FILE);
    write_private(&pwfile, &new_password()?, &user)?;
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
    // The socket's directory is the server user's alone: trust there;
    // TCP asks for the password.
    c.args(["-D"]).arg(&o.data).args([
        "-U",
        "root",
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-instructions",
    ]);
    c.arg(format!("--pwfile={}", pwfile.display()));
    if o.checksums {
        c.arg("--data-checksums");
    }
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
        .map_err(|e| InstanceError::Failed(format!("reading {}: {e}", conf_path.display())))?;
    text.push_str(&conf);
    std::fs::write(&conf_path, text)
        .map_err(|e| InstanceError::Failed(format!("writing {}: {e}", conf_path.display())))?;
    let mut v = Command::new(bindir.join("postgres"));
    v.arg("--version");
    let version = run(v, "postgres --version")?.trim().to_string();
    let mut inst = Instance {
        name: name.to_string(),
        bindir: bindir.to_path_buf(),
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
    exec(&inst, "CREATE DATABASE storbench")?;
    if let Some(t) = &o.temp {
        let loc = t.display().to_string().replace('\'', "''");
        exec(&inst, &format!("CREATE TABLESPACE storbench_temp LOCATION '{loc}'"))?;
        exec(&inst, "ALTER SYSTEM SET temp_tablespaces = 'storbench_temp'")?;
        exec(&inst, "SELECT pg_reload_conf()")?;
    }
    let mut all = load()?;
    all.push(inst.clone());
    save(&all)?;
    Ok(inst)
}

/// Starts a new instance; its port, when picked, is picked again as
/// [`on_a_free_port`] says (a later `port` line in postgresql.conf wins).
pub(crate) fn start_on_a_free_port(
    inst: &mut Instance,
    conf_path: &Path,
    repick: bool,
) -> Result<(), InstanceError> {
    on_a_free_port(inst, repick, |i, repicked| {
        if repicked {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(conf_path)
                .map_err(|e| InstanceError::Failed(format!("writing {}: {e}", conf_path.display())))?;
            std::io::Write::write_all(&mut f, format!("port = {}\n", i.port).as_bytes())
                .map_err(|e| InstanceError::Failed(format!("writing {}: {e}", conf_path.display())))?;
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
pub(crate) fn on_a_free_port(
    inst: &mut Instance,
    repick: bool,
    mut start_it: impl FnMut(&Instance, bool) -> Result<(), InstanceError>,
) -> Result<(), InstanceError> {
    let mut attempt = 0;
    while let Err(e) = start_it(inst, attempt > 0) {
        let taken = e.to_string().contains("TCP/IP") || e.to_string().contains("in use");
        attempt += 1;
        if !repick || !taken || attempt == 3 {
            return Err(e);
        }
        inst.port =
            free_port().ok_or_else(|| InstanceError::Failed("no free port from 5433 to 5998".into()))?;
    }
    Ok(())
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
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Starts a stopped instance and waits until it accepts connections; a
/// server that will not start is an error carrying its own reason (the
/// last FATAL or PANIC line of its log).
pub fn start(i: &Instance) -> Result<(), InstanceError> {
    start_with(i, None, &format!("starting managed PostgreSQL '{}'", i.name), START_TIMEOUT).map(|_| ())
}

/// Starts `i`'s server (its log in its socket directory), with `opts`
/// given to the server through `pg_ctl -o` when some, and waits until it
/// accepts connections on its TCP port, for at most `timeout` from its
/// launch ([`crate::tempserver::did_not_start`] after that). Returns the
/// time from the server's launch (`pg_ctl start`) to its first accepted
/// connection.
pub(crate) fn start_with(
    i: &Instance,
    opts: Option<&str>,
    what: &str,
    timeout: Duration,
) -> Result<Duration, InstanceError> {
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

pub(crate) fn start_in(
    i: &Instance,
    opts: Option<&str>,
    what: &str,
    timeout: Duration,
) -> Result<Duration, InstanceError> {
    let log = i.socket_dir.join("server.log");
    // Only what this start wrote: the log is appended to across starts,
    // and an earlier start's complaint is not this one's reason.
    let from = std::fs::metadata(&log).map(|m| m.len() as usize).unwrap_or(0);
    let last = || {
        let all = std::fs::read(&log).unwrap_or_default();
        let tail = String::from_utf8_lossy(all.get(from..).unwrap_or(&all)).into_owned();
        tail.lines()
            .rev()
            .find(|l| l.contains("FATAL") || l.contains("PANIC") || l.contains("ERROR"))
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
            l => InstanceError::Failed(format!("{e}: {l}")),
        }
    })?;
    let ready = storbench_proc::wait_until(timeout.saturating_sub(launched.elapsed()), || {
        // Its Unix socket first (a temporary server may have no TCP), then TCP.
        let sock = (!i.socket_dir.as_os_str().is_empty()).then(|| i.socket_dir.clone());
        sock.into_iter().chain([PathBuf::from("127.0.0.1")]).any(|h| {
            // `-d postgres`: a probe for the user's own database (which
            // need not exist) would leave a FATAL in the server's log.
            Command::new(i.bindir.join("pg_isready"))
                .arg("-q")
                .arg("-h")
                .arg(&h)
                .args(["-p", &i.port.to_string(), "-d", "postgres"])
                .status()
                .is_ok_and(|s| s.success())
        })
    });
    if ready {
        return Ok(launched.elapsed());
    }
    Err(crate::tempserver::did_not_start("postgres", &i.data, timeout, &last()))
}

/// Whether the instance's server is running.
pub fn running(i: &Instance) -> bool {
    find_postmaster(&i.data).is_some()
}

/// The postmaster's process id, `postmaster.pid`'s first line.
pub(crate) fn postmaster_pid(data: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// The live postmaster serving `data`: the process `postmaster.pid` names
/// when it is a server started with `-D data`, else such a server found
/// among the processes (its pid file gone with a directory removed or a
/// medium unmounted under it). A killed server's unreaped pid (a zombie)
/// is not one, though `pg_ctl status` would count it.
pub(crate) fn find_postmaster(data: &Path) -> Option<Identity> {
    let canon = data.canonicalize().ok();
    let serves = |args: &[String]| {
        args.first().is_some_and(|a| a.ends_with("postgres") || a.ends_with("postmaster"))
            && args.windows(2).any(|w| {
                w[0] == "-D"
                    && (Path::new(&w[1]) == data
                        || canon.is_some() && Path::new(&w[1]).canonicalize().ok() == canon)
            })
    };
    if let Some(pid) = postmaster_pid(data) {
        let args = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> =
            args.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if serves(&args) {
            return Identity::of(pid);
        }
    }
    storbench_proc::find(|p| serves(&p.cmdline)).into_iter().find_map(Identity::of)
}

/// PostgreSQL's dynamic shared memory segments the server `pm` and its
/// children have mapped (`/dev/shm/PostgreSQL.N`): a server killed with
/// SIGKILL leaves them behind.
pub(crate) fn shm_segments(pm: Identity) -> Vec<PathBuf> {
    let mut pids = storbench_proc::children(pm.pid);
    pids.push(pm.pid);
    let mut segs: Vec<PathBuf> = pids
        .into_iter()
        .flat_map(|p| storbench_proc::mapped_files(p, Path::new("/dev/shm")))
        .filter(|f| f.file_name().is_some_and(|n| n.to_string_lossy().starts_with("PostgreSQL.")))
        .collect();
    segs.sort();
    segs.dedup();
    segs
}

/// Stops the server `pm` on `data` and checks that it went: a fast
/// shutdown (SIGINT: clients are disconnected, a shutdown checkpoint is
/// written) for up to `wait`, then an immediate one (SIGQUIT: no
/// checkpoint, recovery at the next start) for up to `wait` or 10 s, then
/// SIGKILL to it and its children. After a kill, the shared memory it
/// leaves is removed. An error when it survives all three.
pub(crate) fn stop_postmaster(
    pm: Identity,
    name: &str,
    data: &Path,
    wait: Duration,
) -> Result<Sig, InstanceError> {
    let segs = shm_segments(pm);
    let steps = [
        Step::new(Sig::SIGINT, wait),
        Step::new(Sig::SIGQUIT, wait.min(Duration::from_secs(10))),
        Step::new(Sig::SIGKILL, Duration::from_secs(5)).with_children(),
    ];
    let what = format!("PostgreSQL '{name}' on {}", data.display());
    let how = storbench_proc::stop(pm, &what, &steps)
        .map_err(|e| InstanceError::Failed(format!("stopping {what}: {e}")))?
        .unwrap_or(Sig::SIGINT);
    if how == Sig::SIGKILL {
        remove_shm(&segs);
    }
    Ok(how)
}

/// Removes shared memory segments no live process maps any more. A killed
/// server's children may still be exiting (their mappings go last), so
/// each segment is given up to 5 s for its last holder to go; one a live
/// process still maps after that is left alone.
pub(crate) fn remove_shm(segs: &[PathBuf]) {
    let unmapped = |s: &PathBuf| {
        storbench_proc::find(|p| storbench_proc::mapped_files(p.pid, Path::new("/dev/shm")).contains(s))
            .is_empty()
    };
    for s in segs {
        if storbench_proc::wait_until(Duration::from_secs(5), || unmapped(s)) {
            let _ = std::fs::remove_file(s);
        }
    }
}

/// Stops an instance's server at once, as after a crash (an immediate
/// shutdown: no checkpoint; SIGKILL after 30 s) and checks that it went.
pub fn stop_immediately(i: &Instance) -> Result<(), InstanceError> {
    let Some(pm) = find_postmaster(&i.data) else { return Ok(()) };
    let segs = shm_segments(pm);
    let steps = [
        Step::new(Sig::SIGQUIT, Duration::from_secs(30)),
        Step::new(Sig::SIGKILL, Duration::from_secs(5)).with_children(),
    ];
    let how = storbench_proc::stop(pm, &format!("PostgreSQL '{}'", i.name), &steps)
        .map_err(|e| InstanceError::Failed(e.to_string()))?;
    if how == Some(Sig::SIGKILL) {
        remove_shm(&segs);
    }
    Ok(())
}

/// How long `pg down` lets a fast shutdown take before it escalates.
pub const STOP_WAIT: Duration = Duration::from_secs(60);

/// Stops an instance, then its standbys and their proxies (the primary
/// first, so the standbys receive its shutdown checkpoint), escalating as
/// [`stop_postmaster`] says with `wait` for each step; with `destroy`,
/// removes their directories and forgets them. Nothing is removed or
/// forgotten while its server still runs.
pub fn down(name: &str, destroy: bool, wait: Duration) -> Result<(), InstanceError> {
    let i = get(name)?.ok_or_else(|| {
        InstanceError::Usage(format!("no managed instance named '{name}' (storbench pg list)"))
    })?;
    let mut failed = None;
    if let Some(pm) = find_postmaster(&i.data) {
        if let Err(e) = stop_postmaster(pm, name, &i.data, wait) {
            failed = Some(e);
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
            if let Err(e) = down(s, destroy, wait) {
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
                    .map_err(|e| InstanceError::Failed(format!("removing {}: {e}", p.display())))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_above_the_link_is_measured_again_and_the_least_kept() {
        // The floor kept and how many times it was measured.
        let run = |rtt: u64, v: &[u64]| {
            let mut it = v.iter().copied();
            let mut n = 0;
            let f = least_floor(rtt, || {
                n += 1;
                Ok(it.next().expect("measured more often than given"))
            })
            .unwrap();
            (f, n)
        };
        // A busy first measurement, a quiet second: the link is served,
        // and nothing is measured after.
        assert_eq!(run(200, &[222, 150, 190]), (150, 2));
        // Above the link in all three: the least, which the caller refuses.
        assert_eq!(run(200, &[222, 240, 210]), (210, 3));
        // Below the link at once, or no link delay asked: measured once.
        assert_eq!(run(200, &[120, 90]), (120, 1));
        assert_eq!(run(0, &[300, 90]), (300, 1));
    }

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
