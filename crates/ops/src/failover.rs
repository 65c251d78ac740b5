//! The failover check of synchronous replication: clients insert numbered
//! rows into the primary, counting what it acknowledged ([`crate::acked`]);
//! the primary is killed with SIGKILL mid-load (postmaster and backends),
//! its first standby promoted, and every acknowledged row looked for there.
//! The check consumes the instance: its old primary is not rejoined.

use std::time::{Duration, Instant};

use storbench_db::{connect, Connection, DbUrl, Stmt};
use storbench_instances::pg::{self, Instance};

use crate::acked::{self, ClientCount, Writers};
use crate::error::OpsError;

const TABLE: &str = "storbench_failover";

/// What the check found.
#[derive(Clone, Debug)]
pub struct Failover {
    /// The standby promoted.
    pub standby: String,
    /// The primary's `synchronous_commit`.
    pub synchronous_commit: String,
    /// Its `synchronous_standby_names`, if any.
    pub sync_names: Option<String>,
    /// Whether that level makes a commit wait for the standby.
    pub waits_for_standby: bool,
    /// Each client's acknowledged rows and those found on the standby.
    pub clients: Vec<ClientCount>,
    /// From the kill to every client's stop.
    pub clients_stopped: Duration,
}

impl Failover {
    /// Commits acknowledged, all clients.
    pub fn acknowledged(&self) -> i64 {
        self.clients.iter().map(|c| c.acknowledged).sum()
    }

    /// Acknowledged commits missing on the promoted standby.
    pub fn missing(&self) -> i64 {
        self.clients.iter().map(|c| c.missing()).sum()
    }
}

fn conn(i: &Instance) -> Result<Box<dyn Connection>, OpsError> {
    let url = DbUrl::parse(&pg::url(i, "storbench")).map_err(OpsError::Failed)?;
    connect(&url)
        .map_err(|e| OpsError::Unreachable(format!("managed:{} (127.0.0.1:{}): {e}", i.name, i.port)))
}

/// Runs the check on primary `name` with `clients` writers (1 to 256),
/// killing the primary after `kill_after`; `killed` hears of the kill (the
/// standby about to be promoted, and how long the clients took to stop).
pub fn check(
    name: &str,
    clients: u32,
    kill_after: Duration,
    killed: impl FnOnce(&str, Duration),
) -> Result<Failover, OpsError> {
    let prim = pg::get(name)?
        .ok_or_else(|| OpsError::Usage(format!("no managed instance named '{name}' (storbench pg list)")))?;
    let standby: Instance =
        prim.standbys.first().and_then(|s| pg::get(s).ok().flatten()).ok_or_else(|| {
            OpsError::Usage(format!(
                "pg failover-check {name}: it has no standby (pg up {name} --standby 1 ...)"
            ))
        })?;
    if !(1..=256).contains(&clients) {
        return Err(OpsError::Usage(format!("--clients {clients}: use 1 to 256")));
    }
    if !pg::running(&prim) || !pg::running(&standby) {
        return Err(OpsError::Unreachable(format!(
            "pg failover-check {name}: the primary and its standby must be running (storbench pg up {name})"
        )));
    }
    conn(&prim)?.batch(&acked::create_table(TABLE))?;
    // The table must be on the standby before the load, or a lost table
    // would read as lost rows.
    let mut sc = conn(&standby)?;
    let has = Stmt::new(format!("SELECT count(*) FROM pg_class WHERE relname = '{TABLE}'"));
    let mut seen = Ok(0);
    let arrived = storbench_proc::wait_until(Duration::from_secs(30), || {
        seen = sc.query_one(&has, &[]).and_then(|r| r.int(0));
        !matches!(seen, Ok(0))
    });
    seen?;
    if !arrived {
        return Err(OpsError::Failed("the standby did not receive the check's table within 30 s".into()));
    }
    drop(sc);
    let conns = (0..clients).map(|_| conn(&prim)).collect::<Result<Vec<_>, _>>()?;
    let writers = Writers::start(TABLE, conns);
    std::thread::sleep(kill_after);
    pg::kill9(&prim)?;
    let killed_at = Instant::now();
    let acked = writers.stop();
    let clients_stopped = killed_at.elapsed();
    killed(&standby.name, clients_stopped);
    pg::promote(&standby)?;
    let found = acked::look_for(conn(&standby)?.as_mut(), TABLE, &acked)?;
    let level = prim.sync.clone().unwrap_or_else(|| "on".into());
    let waits = prim.sync_names.is_some() && ["remote_write", "on", "remote_apply"].contains(&level.as_str());
    Ok(Failover {
        standby: standby.name,
        synchronous_commit: level,
        sync_names: prim.sync_names,
        waits_for_standby: waits,
        clients: found,
        clients_stopped,
    })
}
