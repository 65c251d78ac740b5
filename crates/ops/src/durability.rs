//! The durability check across a power cut: clients insert numbered rows
//! into a managed PostgreSQL whose files are on a modelled medium, counting
//! what was acknowledged ([`crate::acked`]); mid-run the medium's power is
//! cut (the model's volatile cache is lost, every later I/O fails). The
//! medium is then recovered with exactly what was durable, the server
//! restarted (its own crash recovery runs) and every acknowledged row
//! looked for. A server that does not start says its own reason.

use std::path::Path;
use std::time::{Duration, Instant};

use storbench_db::{connect, DbUrl};
use storbench_instances::pg::{self, Instance};

use crate::acked::{self, ClientCount, Writers};
use crate::error::OpsError;

const TABLE: &str = "sb_durability";

/// What the check found.
#[derive(Clone, Debug)]
pub struct Durability {
    /// Each client's acknowledged rows and those found after recovery.
    pub clients: Vec<ClientCount>,
    /// Commits acknowledged when the power was cut.
    pub acknowledged_at_cut: i64,
    /// From the cut to every client's stop.
    pub clients_stopped: Duration,
}

impl Durability {
    /// Commits acknowledged, all clients.
    pub fn acknowledged(&self) -> i64 {
        self.clients.iter().map(|c| c.acknowledged).sum()
    }

    /// Acknowledged commits missing after recovery.
    pub fn missing(&self) -> i64 {
        self.clients.iter().map(|c| c.missing()).sum()
    }
}

/// After a power cut no server process survives; here the old postmaster
/// may linger as a zombie nobody reaps, which PostgreSQL takes for a live
/// server. A lock file whose process is gone or a zombie is removed, as a
/// reboot would leave it meaningless.
fn remove_stale_lock(lock: &Path) {
    let Some(pid) =
        std::fs::read_to_string(lock).ok().and_then(|t| t.lines().next()?.trim().parse::<u32>().ok())
    else {
        return;
    };
    if storbench_proc::wait_until(Duration::from_secs(10), || !storbench_proc::alive(pid)) {
        let _ = std::fs::remove_file(lock);
    }
}

/// Runs the check on instance `inst` with `clients` writers, cutting the
/// power of modelled medium `medium` after `cut_after`.
pub fn check(
    inst: &Instance,
    medium: &str,
    clients: u32,
    cut_after: Duration,
) -> Result<Durability, OpsError> {
    let url = DbUrl::parse(&pg::resolve(&inst.name)?).map_err(OpsError::Usage)?;
    let open = || connect(&url).map_err(|e| OpsError::Unreachable(format!("managed:{}: {e}", inst.name)));
    open()?.batch(&acked::create_table(TABLE))?;
    let conns = (0..clients).map(|_| open()).collect::<Result<Vec<_>, _>>()?;
    // Commit until the power goes.
    let writers = Writers::start(TABLE, conns);
    std::thread::sleep(cut_after);
    storbench_media::emu::powercut(medium)?;
    let cut_at = Instant::now();
    // The acknowledged counts are final from here: anything after the cut fails.
    let at_cut: i64 = writers.acked().iter().sum();
    let acked = writers.stop();
    let clients_stopped = cut_at.elapsed();
    // Bring the medium back, then the server (its crash recovery replays the WAL it finds).
    pg::stop_immediately(inst)?;
    storbench_media::emu::recover(medium)?;
    remove_stale_lock(&inst.data.join("postmaster.pid"));
    if let Err(e) = pg::start(inst) {
        // The server's own reason (a PANIC about a missing checkpoint,
        // say) is in the error; the log holds the rest.
        return Err(OpsError::Failed(format!(
            "PostgreSQL '{}' did not start after the power cut: {e} (its log: {}); the medium lost more than the database can recover",
            inst.name,
            inst.socket_dir.join("server.log").display()
        )));
    }
    let mut conn = connect(&url).map_err(|e| OpsError::Failed(format!("connecting after recovery: {e}")))?;
    let found = acked::look_for(conn.as_mut(), TABLE, &acked)?;
    conn.batch(&format!("DROP TABLE {TABLE}"))?;
    Ok(Durability { clients: found, acknowledged_at_cut: at_cut, clients_stopped })
}
