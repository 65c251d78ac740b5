//! Streaming replication: standbys made from a base backup, the delay
//! proxy daemon on their link, the primary's view of them
//! (`pg_stat_replication`), and the failure tools (kill -9, promote).

use super::*;

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

/// Checks `--standby`, `--sync`, `--sync-names` and `--link` together,
/// before anything is made.
pub(crate) fn check_replication(name: &str, o: &UpOptions) -> Result<(), InstanceError> {
    if let Some(level) = &o.sync {
        if !SYNC_LEVELS.contains(&level.as_str()) {
            return Err(InstanceError::Usage(format!(
                "--sync {level}: use one of {}",
                SYNC_LEVELS.join(", ")
            )));
        }
    }
    let n = o.standbys.len();
    if n == 0 && (o.sync_names.is_some() || o.link.is_some()) {
        return Err(InstanceError::Usage(format!("pg up {name}: --sync-names and --link need --standby N")));
    }
    if let Some(names) = &o.sync_names {
        sync_standby_names(names, n)?;
    }
    if n > 0 {
        if let Some(existing) = get(name)? {
            if existing.standbys.len() != n {
                return Err(InstanceError::Usage(format!(
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
pub fn sync_standby_names(form: &str, standbys: usize) -> Result<String, InstanceError> {
    let bad = || {
        InstanceError::Usage(format!(
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

/// Makes the standbys of a freshly made primary (base backup, standby
/// settings, a proxy each when there is a link), starts them, then sets
/// `synchronous_commit` and `synchronous_standby_names` on the primary and
/// waits until every standby streams.
pub(crate) fn replicate(prim: &Instance, o: &UpOptions, floor_us: u64) -> Result<Instance, InstanceError> {
    let mut prim = prim.clone();
    for (idx, place) in o.standbys.iter().enumerate() {
        let sname = format!("s{}", idx + 1);
        let iname = format!("{}-{sname}", prim.name);
        let socket_dir = state_dir().join("pg").join(&iname);
        private_dir(&socket_dir, &prim.os_user)?;
        // The standby has the primary's roles, so its password too; its
        // walreceiver reads it from a pgpass file (0600) for TCP.
        let pgpass = socket_dir.join("pgpass");
        if let Some(pw) = password(&prim) {
            write_private(&socket_dir.join(PASSWORD_FILE), &pw, &prim.os_user)?;
            write_private(&pgpass, &format!("*:*:*:root:{pw}\n"), &prim.os_user)?;
        }
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
        c.arg("-h")
            .arg(&prim.socket_dir)
            .args(["-p", &prim.port.to_string(), "-U", "root", "-D"])
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
        inst.port =
            free_port().ok_or_else(|| InstanceError::Failed("no free port from 5433 to 5998".into()))?;
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
        let passfile =
            if pgpass.exists() { format!(" passfile=''{}''", pgpass.display()) } else { String::new() };
        let conf = format!(
            "\n# storbench pg up {}: standby {sname} of {}\nport = {}\nunix_socket_directories = '{}'\nhot_standby = on\nprimary_conninfo = 'host=127.0.0.1 port={upstream} user=root application_name={sname}{passfile}'\n",
            prim.name,
            prim.name,
            inst.port,
            socket_dir.display()
        );
        let conf_path = place.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path)
            .map_err(|e| InstanceError::Failed(format!("reading {}: {e}", conf_path.display())))?;
        text.push_str(&conf);
        std::fs::write(&conf_path, text)
            .and_then(|_| std::fs::write(place.data.join("standby.signal"), ""))
            .map_err(|e| InstanceError::Failed(format!("writing {}: {e}", conf_path.display())))?;
        chown(&place.data, &prim.os_user)?;
        // The server refuses a data directory others can read.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&place.data, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| InstanceError::Failed(format!("chmod 700 {}: {e}", place.data.display())))?;
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
        exec(&prim, &format!("ALTER SYSTEM SET synchronous_commit = '{level}'"))?;
        prim.sync = Some(level);
    }
    if !names.is_empty() {
        exec(&prim, &format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'"))?;
        prim.sync_names = Some(names);
    }
    exec(&prim, "SELECT pg_reload_conf()")?;
    register(&[prim.clone()])?;
    wait_streaming(&prim, n, prim.sync_names.is_some())?;
    Ok(prim)
}

/// Waits (up to 60 s) until `n` standbys stream from `prim` and, when
/// `synchronous_standby_names` lists them (`named`), until the primary
/// counts each as a synchronous candidate (`sync`, `potential` or
/// `quorum`): after the reload a walsender reads the new names a moment
/// later, and until then says `async`.
pub(crate) fn wait_streaming(prim: &Instance, n: usize, named: bool) -> Result<(), InstanceError> {
    let sql = if named {
        "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state <> 'async'"
    } else {
        "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
    };
    let mut seen = Ok(0);
    let streaming = storbench_proc::wait_until(Duration::from_secs(60), || {
        seen = query_int(prim, sql);
        seen.as_ref().is_err() || seen.as_ref().is_ok_and(|k| *k >= n as i64)
    });
    let out = seen?;
    if !streaming {
        return Err(InstanceError::Failed(format!(
            "'{}': {out} of {n} standbys streaming after 60 s (see {}/server.log of each standby)",
            prim.name,
            state_dir().join("pg").display()
        )));
    }
    Ok(())
}

/// Starts a delay proxy daemon toward `to_port` and waits until it listens.
pub(crate) fn start_proxy(
    dir: &Path,
    to_port: u16,
    link: &Link,
    floor_us: u64,
    command: &[String],
) -> Result<ProxyDaemon, InstanceError> {
    let (prog, pre) = command.split_first().ok_or_else(|| {
        InstanceError::Failed("a link needs the proxy's command (the storbench binary)".into())
    })?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| InstanceError::Failed(format!("finding a port for the proxy: {e}")))?;
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

pub(crate) fn spawn_proxy(dir: &Path, mut d: ProxyDaemon) -> Result<ProxyDaemon, InstanceError> {
    use std::os::unix::process::CommandExt;
    let log = std::fs::File::create(dir.join("proxy.log"))
        .map_err(|e| InstanceError::Failed(format!("creating {}: {e}", dir.join("proxy.log").display())))?;
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
        .map_err(|e| InstanceError::Failed(format!("starting the delay proxy: {e}")))?;
    d.pid = child.id();
    let listens = storbench_proc::wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", d.port)).is_ok()
    });
    if !listens {
        stop_proxy(&d);
        let why = std::fs::read_to_string(dir.join("proxy.log")).unwrap_or_default();
        return Err(InstanceError::Failed(format!(
            "the delay proxy did not listen on port {} within 10 s: {}",
            d.port,
            why.lines().last().unwrap_or("no output")
        )));
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

pub(crate) fn stop_proxy(d: &ProxyDaemon) {
    if let Some(who) = Identity::of(d.pid).filter(|_| proxy_running(d)) {
        // SIGKILL: the binary turns SIGTERM into a Ctrl-C flag, and the
        // proxy holds nothing that needs flushing.
        let _ = storbench_proc::stop(who, "delay proxy", &[Step::new(Sig::SIGKILL, Duration::from_secs(5))]);
    }
}

/// Starts a primary's stopped standbys (and their proxies).
pub(crate) fn start_standbys(prim: &Instance) -> Result<(), InstanceError> {
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

/// Takes a [`Probe`] (one connection, 2 s connect timeout; plain
/// SELECTs, which never wait for a standby).
pub fn probe(prim: &Instance) -> Result<Probe, InstanceError> {
    let mut c = connect(prim, 2)?;
    let fail = |e: storbench_db::DbError| InstanceError::Failed(format!("probing '{}': {e}", prim.name));
    let head = c
        .query_one(
            &Stmt::new(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, \
                 (SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep')",
            ),
            &[],
        )
        .map_err(fail)?;
    let rows = c.query(&Stmt::new(REPLICATION_SQL), &[]).map_err(fail)?;
    Ok(Probe {
        wal_bytes: head.int(0).unwrap_or(0),
        sync_waiting: head.int(1).unwrap_or(0),
        standbys: rows.iter().map(replica).collect(),
    })
}

/// Cancels every wait for a standby's confirmation on `prim`: PostgreSQL
/// then returns those commits to their clients with a warning (they are
/// committed locally, not yet on the standby). Returns how many.
pub fn release_sync_waiters(prim: &Instance) -> Result<i64, InstanceError> {
    query_int(prim, "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
}

/// Kills an instance's server as a crash would: SIGKILL to the postmaster
/// and then to each of its children, so no backend acknowledges anything
/// after; once they are gone, the shared memory they leave is removed. For
/// failure tests.
pub fn kill9(i: &Instance) -> Result<(), InstanceError> {
    let pm = find_postmaster(&i.data)
        .ok_or_else(|| InstanceError::Failed(format!("{}: no server runs on it", i.data.display())))?;
    let segs = shm_segments(pm);
    let kill = [Step::new(Sig::SIGKILL, Duration::from_secs(10)).with_children()];
    storbench_proc::stop(pm, &format!("PostgreSQL '{}'", i.name), &kill)
        .map_err(|e| InstanceError::Failed(e.to_string()))?;
    remove_shm(&segs);
    Ok(())
}

/// Promotes a standby to a primary and waits (60 s) until it is one.
pub fn promote(s: &Instance) -> Result<(), InstanceError> {
    let mut c = as_user(&s.os_user, &s.bindir.join("pg_ctl"));
    c.arg("-D").arg(&s.data).args(["-w", "-t", "60", "promote"]);
    run(c, &format!("promoting standby '{}'", s.name))?;
    Ok(())
}

/// What a run on a primary records about its replication in `env_json`:
/// sync level, standby names, and each standby's link and the proxy's floor.
pub fn replication_env(prim: &Instance, medium_of: MediumOf) -> serde_json::Value {
    if prim.standbys.is_empty() {
        return serde_json::Value::Null;
    }
    let standbys: Vec<serde_json::Value> = prim
        .standbys
        .iter()
        .filter_map(|n| get(n).ok().flatten())
        .map(|s| {
            serde_json::json!({
                "name": s.standby_name, "instance": s.name, "placement": placement(&s, medium_of),
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
pub fn replication(prim: &Instance) -> Result<Vec<ReplicaState>, InstanceError> {
    Ok(query(prim, REPLICATION_SQL)?.iter().map(replica).collect())
}

/// One row of [`REPLICATION_SQL`].
pub(crate) fn replica(r: &Row) -> ReplicaState {
    let text = |i: usize| r.text(i).unwrap_or_default();
    ReplicaState {
        name: text(0),
        state: text(1),
        sync_state: text(2),
        sent_replay_bytes: r.int(3).unwrap_or(0),
        write_lag_ms: r.float(4).ok(),
        flush_lag_ms: r.float(5).ok(),
        replay_lag_ms: r.float(6).ok(),
    }
}
