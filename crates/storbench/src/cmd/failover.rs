//! `storbench pg failover-check NAME`: the durability check of synchronous
//! replication, in the manner of diskchecker.pl. Clients insert numbered
//! rows (one commit each) into the primary and count what the server
//! acknowledged; the primary is killed with SIGKILL mid-load (postmaster and
//! backends), the first standby is promoted, and every acknowledged row is
//! looked for on it. With a level that waits for the standby (`remote_write`,
//! `on`, `remote_apply`) none may be missing (exit 1 otherwise); with `off`
//! or `local` the count lost is the finding. The check consumes the
//! instance: its old primary is not rejoined (`pg down NAME --destroy`).
//! The check itself is `storbench_ops::failover`; this verb says what it
//! found.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use serde_json::json;

use crate::cli::Global;

/// An operation's error as the binary's (crash points use it by this path).
pub(crate) use crate::error::ops_err;

/// Runs the check on primary `name` with `clients` writers, killing the
/// primary after `kill_after`, and says what it found.
pub fn run(g: &Global, name: &str, clients: u32, kill_after: Duration) -> Result<ExitCode> {
    let quiet = g.quiet;
    let f = storbench_ops::failover::check(name, clients, kill_after, |standby, stopped| {
        if !quiet {
            eprintln!(
                "storbench: killed the primary {name} (SIGKILL) after {:.1} s; clients stopped within {:.0} ms; promoting {standby}",
                kill_after.as_secs_f64(),
                stopped.as_secs_f64() * 1e3,
            );
        }
    })
    .map_err(ops_err)?;
    let (total, missing, level) = (f.acknowledged(), f.missing(), &f.synchronous_commit);
    let rows: Vec<serde_json::Value> = f
        .clients
        .iter()
        .map(|c| {
            json!({ "client": c.client, "acknowledged": c.acknowledged, "on_standby": c.found, "missing": c.missing() })
        })
        .collect();
    let out = json!({
        "instance": name, "standby": f.standby, "synchronous_commit": level,
        "synchronous_standby_names": f.sync_names, "clients": rows,
        "acknowledged": total, "missing": missing, "waits_for_standby": f.waits_for_standby,
    });
    if g.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "failover check of {name}: synchronous_commit={level} standbys={}, {clients} client(s), primary killed after {:.1} s, {} promoted",
            f.sync_names.as_deref().unwrap_or("(none: async)"),
            kill_after.as_secs_f64(),
            f.standby
        );
        for c in &f.clients {
            println!(
                "client {:>3}: {} acknowledged, {} on the standby, {} missing",
                c.client,
                c.acknowledged,
                c.found,
                c.missing()
            );
        }
        println!("total: {total} acknowledged, {missing} missing on the promoted standby");
        println!("(the instance is consumed: storbench pg down {name} --destroy)");
    }
    if f.waits_for_standby && missing > 0 {
        return Err(anyhow!(
            "{missing} commit(s) acknowledged under synchronous_commit={level} are missing on the promoted standby"
        ));
    }
    Ok(ExitCode::SUCCESS)
}
