//! `storbench pg failover-check NAME`: the durability check of synchronous
//! replication, in the manner of diskchecker.pl. Clients insert numbered
//! rows (one commit each) into the primary and count what the server
//! acknowledged; the primary is killed with SIGKILL mid-load (postmaster and
//! backends), the first standby is promoted, and every acknowledged row is
//! looked for on it. With a level that waits for the standby (`remote_write`,
//! `on`, `remote_apply`) none may be missing (exit 1 otherwise); with `off`
//! or `local` the count lost is the finding. The check consumes the
//! instance: its old primary is not rejoined (`pg down NAME --destroy`).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde_json::json;
use storbench_db::{connect, Connection, DbUrl, Stmt, Value};
use storbench_media::pg::{self, Instance};

use crate::cli::Global;
use crate::error::{unreachable, usage};

const TABLE: &str = "storbench_failover";

fn conn(port: u16) -> Result<Box<dyn Connection>> {
    let url = DbUrl::parse(&format!("postgres://root@127.0.0.1:{port}/storbench")).map_err(|e| anyhow!(e))?;
    connect(&url).map_err(|e| unreachable(format!("127.0.0.1:{port}: {e}")))
}

/// Runs the check on primary `name` with `clients` writers, killing the
/// primary after `kill_after`.
pub fn run(g: &Global, name: &str, clients: u32, kill_after: Duration) -> Result<ExitCode> {
    let prim = pg::get(name)?
        .ok_or_else(|| usage(format!("no managed instance named '{name}' (storbench pg list)")))?;
    let standby: Instance =
        prim.standbys.first().and_then(|s| pg::get(s).ok().flatten()).ok_or_else(|| {
            usage(format!("pg failover-check {name}: it has no standby (pg up {name} --standby 1 ...)"))
        })?;
    if !(1..=256).contains(&clients) {
        return Err(usage(format!("--clients {clients}: use 1 to 256")));
    }
    if !pg::running(&prim) || !pg::running(&standby) {
        return Err(unreachable(format!(
            "pg failover-check {name}: the primary and its standby must be running (storbench pg up {name})"
        )));
    }
    let mut c = conn(prim.port)?;
    c.batch(&format!(
        "DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (client int, seq bigint, PRIMARY KEY (client, seq))"
    ))?;
    // The table must be on the standby before the load, or a lost table
    // would read as lost rows.
    let mut sc = conn(standby.port)?;
    let t0 = Instant::now();
    let has = Stmt::new(format!("SELECT count(*) FROM pg_class WHERE relname = '{TABLE}'"));
    while sc.query_one(&has, &[])?.int(0)? == 0 {
        if t0.elapsed() > Duration::from_secs(30) {
            return Err(anyhow!("the standby did not receive the check's table within 30 s"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(sc);
    let acked: Arc<Vec<AtomicI64>> = Arc::new((0..clients).map(|_| AtomicI64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for id in 0..clients {
        let mut c = conn(prim.port)?;
        let (acked, stop) = (acked.clone(), stop.clone());
        workers.push(std::thread::spawn(move || {
            let ins = Stmt::new(format!("INSERT INTO {TABLE} (client, seq) VALUES ($1, $2)"));
            let mut seq = 1i64;
            while !stop.load(Ordering::Relaxed) {
                // An error is the primary going away: this client stops,
                // having counted only what the server acknowledged.
                if c.execute(&ins, &[Value::Int(id as i64), Value::Int(seq)]).is_err() {
                    break;
                }
                acked[id as usize].store(seq, Ordering::SeqCst);
                seq += 1;
            }
        }));
    }
    std::thread::sleep(kill_after);
    pg::kill9(&prim)?;
    let killed_at = Instant::now();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    if !g.quiet {
        eprintln!(
            "storbench: killed the primary {name} (SIGKILL) after {:.1} s; clients stopped within {:.0} ms; promoting {}",
            kill_after.as_secs_f64(),
            killed_at.elapsed().as_secs_f64() * 1e3,
            standby.name
        );
    }
    pg::promote(&standby)?;
    let mut sc = conn(standby.port)?;
    let count = Stmt::new(format!("SELECT count(*) FROM {TABLE} WHERE client = $1 AND seq <= $2"));
    let mut rows = Vec::new();
    let (mut total, mut missing) = (0i64, 0i64);
    for id in 0..clients {
        let a = acked[id as usize].load(Ordering::SeqCst);
        let found = sc.query_one(&count, &[Value::Int(id as i64), Value::Int(a)])?.int(0)?;
        total += a;
        missing += a - found;
        rows.push(json!({ "client": id, "acknowledged": a, "on_standby": found, "missing": a - found }));
    }
    let level = prim.sync.clone().unwrap_or_else(|| "on".into());
    let waits = prim.sync_names.is_some() && ["remote_write", "on", "remote_apply"].contains(&level.as_str());
    let out = json!({
        "instance": name, "standby": standby.name, "synchronous_commit": level,
        "synchronous_standby_names": prim.sync_names, "clients": rows,
        "acknowledged": total, "missing": missing, "waits_for_standby": waits,
    });
    if g.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "failover check of {name}: synchronous_commit={level} standbys={}, {clients} client(s), primary killed after {:.1} s, {} promoted",
            prim.sync_names.as_deref().unwrap_or("(none: async)"),
            kill_after.as_secs_f64(),
            standby.name
        );
        for r in out["clients"].as_array().into_iter().flatten() {
            println!(
                "client {:>3}: {} acknowledged, {} on the standby, {} missing",
                r["client"], r["acknowledged"], r["on_standby"], r["missing"]
            );
        }
        println!("total: {total} acknowledged, {missing} missing on the promoted standby");
        println!("(the instance is consumed: storbench pg down {name} --destroy)");
    }
    if waits && missing > 0 {
        return Err(anyhow!(
            "{missing} commit(s) acknowledged under synchronous_commit={level} are missing on the promoted standby"
        ));
    }
    Ok(ExitCode::SUCCESS)
}
