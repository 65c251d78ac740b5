//! `storbench pg up | down | status | list`: managed PostgreSQL instances
//! with data, WAL and temp files placed on chosen targets (media or
//! directories). `managed:NAME` is then a database URL everywhere. What is
//! started or shown goes to stdout (JSON with `--json`); `down` says what it
//! stopped on stderr (hidden by `--quiet`), or on stdout as JSON with `--json`.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use storbench_instances::pg::{self, StandbyPlace, UpOptions};
use storbench_instances::proxy::{self, Link};
use storbench_instances::InstanceError;
use storbench_metrics::units::{parse_duration, parse_size};
use storbench_report::Table;

use crate::cli::Global;
use crate::error::{target_failed, usage};

/// Options of `storbench pg`.
#[derive(Debug, Args)]
pub struct PgArgs {
    #[command(subcommand)]
    pub verb: PgVerb,
}

/// Options of `storbench pg up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Its name (use as managed:NAME).
    name: String,
    /// Data directory: a medium's name (a directory on it) or a path.
    #[arg(long)]
    data: Option<String>,
    /// WAL on another target: a medium's name or a path.
    #[arg(long)]
    wal: Option<String>,
    /// Temp files on another target (a tablespace for temp_tablespaces).
    #[arg(long)]
    temp: Option<String>,
    /// TCP port on 127.0.0.1 (default: the first free from 5433).
    #[arg(long)]
    port: Option<u16>,
    /// A server setting for postgresql.conf, as `postgres -c` takes it
    /// (repeatable): `-c shared_buffers=1GB -c fsync=off`. On an instance
    /// that exists, settings, placement and port given must match it.
    #[arg(short = 'c', long = "conf", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Make the instance with data checksums (`initdb --data-checksums`):
    /// a torn or corrupt data page is an error when read. A new instance only.
    #[arg(long)]
    data_checksums: bool,
    /// Streaming-replication standbys to make (base backup from the
    /// primary): managed instances NAME-s1, NAME-s2, ... named s1, s2 on
    /// the primary.
    #[arg(long, value_name = "N", default_value_t = 0)]
    standby: u32,
    /// The standbys' data target (default: beside --data). A medium gets
    /// a directory per standby; a path gets PATH-s1, PATH-s2, ...
    #[arg(long, value_name = "TARGET")]
    standby_data: Option<String>,
    /// The standbys' WAL on another target (as --standby-data).
    #[arg(long, value_name = "TARGET")]
    standby_wal: Option<String>,
    /// synchronous_commit on the primary: off, local, remote_write, on,
    /// remote_apply. With remote_write, on and remote_apply, commits wait
    /// for the standbys --sync-names says.
    #[arg(long, value_name = "LEVEL")]
    sync: Option<String>,
    /// Which standbys a commit waits for: "FIRST n" or "ANY n"
    /// (default: FIRST all of them).
    #[arg(long, value_name = "FORM")]
    sync_names: Option<String>,
    /// A delay proxy between each standby and the primary:
    /// rtt=1ms[,bw=1gbit][,jitter=0.1ms] (one-way delay rtt/2 each way),
    /// or per direction up=0.2ms,down=0.8ms[,up_bw=10mbit][,down_bw=1gbit]
    /// (up: standby to primary, the acknowledgements; down: the WAL).
    #[arg(long, value_name = "LINK")]
    link: Option<String>,
    /// Run the server in a memory cgroup of this size (page cache
    /// included) for the instance's life, so a database larger than it is
    /// read from the storage: e.g. 512M. Root; cgroup-v1 memory.
    #[arg(long, env = "STORBENCH_MEMORY_LIMIT", value_name = "SIZE", value_parser = parse_size)]
    memory_limit: Option<u64>,
}

/// What to do.
// Parsed once per process: the size of `Up` costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum PgVerb {
    /// Create (initdb) and start an instance, or start a stopped one.
    Up {
        #[command(flatten)]
        up: UpArgs,
    },
    /// Durability check: load the primary, kill -9 it, promote its first
    /// standby, and count acknowledged commits missing there. Consumes the
    /// instance (pg down NAME --destroy after).
    FailoverCheck {
        /// The primary (made with --standby).
        name: String,
        /// Writing clients, each inserting one row per commit.
        #[arg(long, default_value_t = 4)]
        clients: u32,
        /// When to kill the primary after the load starts.
        #[arg(long, default_value = "3s", value_parser = parse_duration)]
        kill_after: std::time::Duration,
    },
    /// The delay proxy daemon `up --link` starts (not for direct use).
    #[command(hide = true)]
    Proxy {
        /// Port to listen on (127.0.0.1).
        #[arg(long)]
        listen_port: u16,
        /// Port to forward to (127.0.0.1).
        #[arg(long)]
        to_port: u16,
        /// The link, as `up --link` takes it.
        #[arg(long)]
        link: String,
    },
    /// Stop an instance cleanly.
    Down {
        /// The instance.
        #[arg(required_unless_present = "all")]
        name: Option<String>,
        /// Every instance.
        #[arg(long)]
        all: bool,
        /// Also remove its directories and forget it.
        #[arg(long)]
        destroy: bool,
        /// How long a fast shutdown may take before it escalates to an
        /// immediate one (as long again, at most 10 s), then to SIGKILL.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        wait: std::time::Duration,
    },
    /// An instance's settings and where its data, WAL and temp files live.
    Status {
        /// The instance.
        name: String,
    },
    /// Every managed instance.
    List,
}

/// An instance error as the binary's: bad input (exit 2) or a failed
/// target (exit 4).
pub(crate) fn err(e: InstanceError) -> anyhow::Error {
    match e {
        InstanceError::Usage(m) => usage(m),
        InstanceError::Failed(m) => target_failed(m),
    }
}

/// A TARGET as a directory for `what` of instance `name`: a medium's name
/// gives `MOUNT/NAME-what`, a path is used as given.
fn place(target: &str, name: &str, what: &str) -> Result<std::path::PathBuf> {
    let dir = match storbench_media::target_dir(target) {
        Ok(d) => d,
        // For an instance that exists, a place is only compared with what
        // it has (pg::differences names a mismatch): no need to exist.
        Err(_) if pg::get(name).ok().flatten().is_some() => target.into(),
        Err(e) => return Err(usage(format!("--{what} {e}"))),
    };
    let p = if target.contains('/') { dir } else { dir.join(format!("pg-{name}-{what}")) };
    // Absolute: the server and its processes are found by it.
    Ok(std::path::absolute(&p).unwrap_or(p))
}

/// A standby's directory: on a medium `MOUNT/pg-NAME-sI-what`, for a path
/// `PATH-sI`.
fn standby_place(target: &str, name: &str, i: u32, what: &str) -> Result<std::path::PathBuf> {
    let dir = storbench_media::target_dir(target).map_err(|e| usage(format!("--standby-{what} {e}")))?;
    let p: std::path::PathBuf = if target.contains('/') {
        format!("{}-s{i}", dir.display()).into()
    } else {
        dir.join(format!("pg-{name}-s{i}-{what}"))
    };
    Ok(std::path::absolute(&p).unwrap_or(p))
}

/// What `status` (and `up --json`) shows of an instance.
fn status(i: &pg::Instance) -> serde_json::Value {
    let up = pg::running(i);
    let mut v = serde_json::json!({
        "name": i.name, "version": i.version, "running": up, "port": i.port,
        "url": format!("managed:{} = postgres://root@127.0.0.1:{}/storbench", i.name, i.port),
        "settings": i.settings, "placement": pg::placement(i, &storbench_media::describe_path), "socket_dir": i.socket_dir,
    });
    if let Some(p) = &i.primary {
        v["primary"] = p.clone().into();
        v["standby_name"] = i.standby_name.clone().into();
    }
    if let Some(d) = &i.proxy {
        v["proxy"] = serde_json::json!({
            "pid": d.pid, "port": d.port, "running": pg::proxy_running(d), "link": d.link.to_arg(),
            "rtt_us": d.link.rtt_us, "floor_us": d.floor_us,
        });
    }
    if !i.standbys.is_empty() || i.sync.is_some() {
        v["sync"] = i.sync.clone().into();
        v["sync_names"] = i.sync_names.clone().into();
        // As the primary sees them (pg_stat_replication), beside what each
        // standby's own server and proxy are doing.
        let seen = if up { pg::replication(i).unwrap_or_default() } else { Vec::new() };
        let standbys: Vec<serde_json::Value> = i
            .standbys
            .iter()
            .filter_map(|n| pg::get(n).ok().flatten())
            .map(|s| {
                let short = s.standby_name.clone().unwrap_or_default();
                let r = seen.iter().find(|r| r.name == short);
                serde_json::json!({
                    "instance": s.name, "name": short, "port": s.port, "running": pg::running(&s),
                    "placement": pg::placement(&s, &storbench_media::describe_path),
                    "link": s.proxy.as_ref().map(|d| d.link.to_arg()),
                    "proxy_floor_us": s.proxy.as_ref().map(|d| d.floor_us),
                    "state": r.map(|r| r.state.clone()).unwrap_or_else(|| "not connected".into()),
                    "sync_state": r.map(|r| r.sync_state.clone()),
                    "sent_replay_bytes": r.map(|r| r.sent_replay_bytes),
                    "write_lag_ms": r.and_then(|r| r.write_lag_ms),
                    "flush_lag_ms": r.and_then(|r| r.flush_lag_ms),
                    "replay_lag_ms": r.and_then(|r| r.replay_lag_ms),
                })
            })
            .collect();
        v["standbys"] = standbys.into();
    }
    v
}

/// Runs `storbench pg`: one thin verb each.
pub fn run(g: &Global, a: PgArgs) -> Result<ExitCode> {
    match a.verb {
        PgVerb::FailoverCheck { name, clients, kill_after } => {
            crate::cmd::failover::run(g, &name, clients, kill_after)
        }
        PgVerb::Proxy { listen_port, to_port, link } => serve_proxy(listen_port, to_port, &link),
        PgVerb::Up { up } => up_verb(g, up),
        PgVerb::Down { name, all, destroy, wait } => down_verb(g, name, all, destroy, wait),
        PgVerb::Status { name } => status_verb(g, &name),
        PgVerb::List => list_verb(g),
    }
}

/// `pg proxy`: the delay proxy daemon, until it is killed.
fn serve_proxy(listen_port: u16, to_port: u16, link: &str) -> Result<ExitCode> {
    let link = Link::parse(link).map_err(err)?;
    // Sleeps end close to their due time: the default 50 µs timer
    // slack would add to every chunk's delay.
    // SAFETY: a prctl on this process with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0, 0, 0) };
    let l = std::net::TcpListener::bind(("127.0.0.1", listen_port))
        .map_err(|e| target_failed(format!("proxy: listening on 127.0.0.1:{listen_port}: {e}")))?;
    proxy::serve(l, ([127, 0, 0, 1], to_port).into(), link)?;
    Ok(ExitCode::SUCCESS)
}

/// What `pg up`'s flags ask for, checked (nothing is made here).
fn up_options(a: &UpArgs) -> Result<UpOptions> {
    let name = &a.name;
    let mut kv = Vec::new();
    for s in &a.settings {
        let (k, v) = s.split_once('=').ok_or_else(|| usage(format!("-c {s}: use KEY=VALUE")))?;
        kv.push((k.trim().to_string(), v.trim().to_string()));
    }
    if a.data.is_none() && pg::get(name).map_err(err)?.is_none() {
        return Err(usage(format!("pg up {name}: a new instance needs --data TARGET")));
    }
    let sdata = a.standby_data.as_deref().or(a.data.as_deref());
    if a.standby > 0 && sdata.is_none() {
        return Err(usage(format!("pg up {name} --standby {}: give --data or --standby-data", a.standby)));
    }
    if a.standby == 0 && (a.standby_data.is_some() || a.standby_wal.is_some()) {
        return Err(usage("--standby-data and --standby-wal need --standby N".to_string()));
    }
    let mut standbys = Vec::new();
    for i in 1..=a.standby {
        standbys.push(StandbyPlace {
            data: standby_place(sdata.expect("checked"), name, i, "data")?,
            wal: a.standby_wal.as_deref().map(|w| standby_place(w, name, i, "wal")).transpose()?,
        });
    }
    // For an instance that exists, what is given is checked against
    // what it has (pg::differences); what is not given is not.
    Ok(UpOptions {
        data: a.data.as_deref().map(|d| place(d, name, "data")).transpose()?.unwrap_or_default(),
        wal: a.wal.as_deref().map(|w| place(w, name, "wal")).transpose()?,
        temp: a.temp.as_deref().map(|t| place(t, name, "temp")).transpose()?,
        port: a.port,
        settings: kv,
        checksums: a.data_checksums,
        standbys,
        sync: a.sync.clone(),
        sync_names: a.sync_names.clone(),
        link: a.link.as_deref().map(Link::parse).transpose().map_err(err)?,
        memory_limit: a.memory_limit,
        proxy_command: vec![std::env::current_exe()?.display().to_string(), "pg".into(), "proxy".into()],
    })
}

/// `pg up`.
fn up_verb(g: &Global, a: UpArgs) -> Result<ExitCode> {
    let o = up_options(&a)?;
    let i = pg::up(&a.name, &o).map_err(err)?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&status(&i))?);
    } else {
        println!(
            "managed PostgreSQL {} ({}) up on 127.0.0.1:{}: use --db managed:{}",
            i.name, i.version, i.port, i.name
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `pg down`: says what it stopped only once it is stopped.
fn down_verb(
    g: &Global,
    name: Option<String>,
    all: bool,
    destroy: bool,
    wait: std::time::Duration,
) -> Result<ExitCode> {
    let names: Vec<String> = if all {
        // Standbys go down with their primary.
        pg::list().map_err(err)?.into_iter().filter(|i| i.primary.is_none()).map(|i| i.name).collect()
    } else {
        vec![name.expect("required unless --all")]
    };
    let mut done = Vec::new();
    for n in names {
        pg::down(&n, destroy, wait).map_err(err)?;
        if !g.quiet && !g.json {
            eprintln!("managed PostgreSQL {n}: {}", if destroy { "stopped and removed" } else { "stopped" });
        }
        done.push(n);
    }
    if g.json {
        let key = if destroy { "removed" } else { "stopped" };
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ key: done }))?);
    }
    Ok(ExitCode::SUCCESS)
}

/// `pg status`.
fn status_verb(g: &Global, name: &str) -> Result<ExitCode> {
    let i = pg::get(name)
        .map_err(err)?
        .ok_or_else(|| usage(format!("no managed instance named '{name}' (storbench pg list)")))?;
    let v = status(&i);
    if g.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let state = if v["running"] == true { "running" } else { "stopped" };
    println!("managed PostgreSQL {} ({}), {state}, 127.0.0.1:{}", i.name, i.version, i.port);
    println!("url:      {}", v["url"].as_str().unwrap_or_default());
    for part in ["data", "wal", "temp"] {
        let p = &v["placement"][part];
        if p.is_null() {
            continue;
        }
        let medium = p["medium"]["name"].as_str().map(|m| format!(" (medium {m})")).unwrap_or_default();
        println!("{part:<9} {}{medium}", p["path"].as_str().unwrap_or_default());
    }
    let settings: Vec<String> = i.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("settings: {}", if settings.is_empty() { "(defaults)".into() } else { settings.join(" ") });
    if let Some(p) = &i.primary {
        println!("standby:  {} of {p}", i.standby_name.as_deref().unwrap_or("?"));
    }
    if let Some(p) = v.get("proxy") {
        println!(
            "link:     {} via proxy pid {} on port {} ({}, own floor {} us)",
            p["link"].as_str().unwrap_or_default(),
            p["pid"],
            p["port"],
            if p["running"] == true { "running" } else { "not running" },
            p["floor_us"]
        );
    }
    if let Some(sb) = v.get("standbys").and_then(|s| s.as_array()) {
        println!(
            "sync:     synchronous_commit={} synchronous_standby_names={}",
            i.sync.as_deref().unwrap_or("(default)"),
            i.sync_names.as_deref().unwrap_or("(none: async)")
        );
        print!("{}", standby_table(sb).to_text());
    }
    Ok(ExitCode::SUCCESS)
}

/// The standbys of `status` as a table.
fn standby_table(sb: &[serde_json::Value]) -> Table {
    let ms = |x: &serde_json::Value| x.as_f64().map(|f| format!("{f:.2}")).unwrap_or_else(|| "-".into());
    let mut t = Table::with_header([
        "standby",
        "instance",
        "port",
        "server",
        "state",
        "sync",
        "link",
        "sent-replay B",
        "write ms",
        "flush ms",
        "replay ms",
    ]);
    for s in sb {
        t.add_row([
            s["name"].as_str().unwrap_or_default().to_string(),
            s["instance"].as_str().unwrap_or_default().to_string(),
            s["port"].to_string(),
            if s["running"] == true { "running".into() } else { "stopped".to_string() },
            s["state"].as_str().unwrap_or_default().to_string(),
            s["sync_state"].as_str().unwrap_or("-").to_string(),
            s["link"].as_str().unwrap_or("direct").to_string(),
            s["sent_replay_bytes"].as_i64().map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
            ms(&s["write_lag_ms"]),
            ms(&s["flush_lag_ms"]),
            ms(&s["replay_lag_ms"]),
        ]);
    }
    t
}

/// `pg list`.
fn list_verb(g: &Global) -> Result<ExitCode> {
    let all = pg::list().map_err(err)?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(ExitCode::SUCCESS);
    }
    if all.is_empty() {
        println!("no managed instances (storbench pg up NAME --data DIR starts one)");
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::with_header(["name", "state", "port", "data", "wal", "temp"]);
    for i in &all {
        t.add_row([
            i.name.clone(),
            if pg::running(i) { "running".into() } else { "stopped".to_string() },
            i.port.to_string(),
            i.data.display().to_string(),
            i.wal.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(in data)".into()),
            i.temp.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "-".into()),
        ]);
    }
    print!("{}", t.to_text());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn verb(args: &[&str]) -> Result<PgVerb, String> {
        let argv = ["storbench", "pg"].iter().chain(args);
        match crate::cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command {
            crate::cli::Command::Pg(p) => Ok(p.verb),
            _ => unreachable!(),
        }
    }

    #[test]
    fn memory_limits_and_waits_are_typed_by_clap() {
        let Ok(PgVerb::Up { up }) = verb(&["up", "p", "--memory-limit", "512M"]) else { panic!("up") };
        assert_eq!(up.memory_limit, Some(512 << 20));
        let Ok(PgVerb::Down { wait, .. }) = verb(&["down", "p", "--wait", "2m"]) else { panic!("down") };
        assert_eq!(wait, std::time::Duration::from_secs(120));
        let e = verb(&["up", "p", "--memory-limit", "lots"]).err().unwrap();
        assert!(e.contains("'lots' is not a size"), "{e}");
        let e = verb(&["failover-check", "p", "--kill-after", "later"]).err().unwrap();
        assert!(e.contains("'later' is not a duration"), "{e}");
    }
}
