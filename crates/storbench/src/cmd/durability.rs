//! `storbench durability`: does the stack keep what it acknowledged? Clients
//! insert numbered rows into a managed PostgreSQL whose files are on a
//! modelled medium, each remembering the last row whose commit was
//! acknowledged; mid-run the medium's power is cut (`media powercut`: the
//! model's volatile cache is lost, every later I/O fails). The medium is
//! then recovered with exactly what was durable, the server restarted (its
//! own crash recovery runs) and every acknowledged row looked for. Zero
//! missing is the pass (exit 0); missing rows are counted per client and
//! fail the check (exit 1). The diskchecker.pl idea, on one machine.

use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use storbench_db::{connect, DbUrl, Stmt, Value};
use storbench_metrics::units::parse_duration;

use crate::cli::Global;
use crate::error::usage;

/// Options of `storbench durability`.
#[derive(Debug, Args)]
pub struct DurabilityArgs {
    /// The managed PostgreSQL instance (`managed:NAME` or NAME); its data and WAL should be on the medium.
    #[arg(long)]
    pub db: String,
    /// The modelled medium whose power is cut (made with `media create --model`).
    #[arg(long)]
    pub medium: String,
    /// Clients committing rows at once.
    #[arg(long, default_value_t = 4)]
    pub clients: u32,
    /// How long the clients commit before the power is cut.
    #[arg(long, default_value = "5s")]
    pub cut_after: String,
}

const TABLE: &str = "sb_durability";

fn as_user(user: &str, prog: &std::path::Path) -> Command {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 && user != "root" {
        let mut c = Command::new("runuser");
        c.args(["-u", user, "--"]).arg(prog);
        c
    } else {
        Command::new(prog)
    }
}

/// After a power cut no server process survives; here the old postmaster
/// may linger as a zombie nobody reaps, which PostgreSQL takes for a live
/// server. A lock file whose process is gone or a zombie is removed, as a
/// reboot would leave it meaningless.
fn remove_stale_lock(lock: &std::path::Path) {
    let Some(pid) =
        std::fs::read_to_string(lock).ok().and_then(|t| t.lines().next()?.trim().parse::<u32>().ok())
    else {
        return;
    };
    let t0 = Instant::now();
    loop {
        if !storbench_media::process_runs(pid) {
            let _ = std::fs::remove_file(lock);
            return;
        }
        if t0.elapsed() > std::time::Duration::from_secs(10) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Runs the check.
pub fn run(g: &Global, a: DurabilityArgs) -> Result<ExitCode> {
    // Validate everything first.
    let name = a.db.strip_prefix("managed:").unwrap_or(&a.db).to_string();
    let inst = storbench_media::pg::get(&name).map_err(|e| anyhow!("{e}"))?.ok_or_else(|| {
        usage(format!("--db {}: no managed instance named '{name}' (storbench pg list)", a.db))
    })?;
    let medium = storbench_media::get(&a.medium)
        .map_err(|e| anyhow!("{e}"))?
        .ok_or_else(|| usage(format!("--medium {}: no such medium (storbench media list)", a.medium)))?;
    if medium.model.is_none() {
        return Err(usage(format!(
            "--medium {}: not a modelled medium; a power cut needs one made with --model",
            a.medium
        )));
    }
    if a.clients == 0 || a.clients > 64 {
        return Err(usage(format!("--clients {}: give 1 to 64", a.clients)));
    }
    let cut_after = parse_duration(&a.cut_after).map_err(|e| usage(format!("--cut-after {e}")))?;
    let url = storbench_media::pg::resolve(&name).map_err(|e| usage(format!("--db {}: {e}", a.db)))?;
    let url = DbUrl::parse(&url).map_err(usage)?;

    let mut setup = connect(&url).map_err(|e| usage(format!("--db {}: {e}", a.db)))?;
    setup.batch(&format!(
        "DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (client int NOT NULL, seq bigint NOT NULL, PRIMARY KEY (client, seq))"
    ))?;
    drop(setup);

    // Commit until the power goes.
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Vec<AtomicI64>> = Arc::new((0..a.clients).map(|_| AtomicI64::new(0)).collect());
    let mut workers = Vec::new();
    for c in 0..a.clients {
        let (stop, acked, url) = (stop.clone(), acked.clone(), url.clone());
        workers.push(std::thread::spawn(move || -> Result<()> {
            let mut conn = connect(&url)?;
            let ins = Stmt::new(format!("INSERT INTO {TABLE} (client, seq) VALUES ($1, $2)"));
            let mut seq = 0i64;
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                if conn.execute(&ins, &[Value::Int(c as i64), Value::Int(seq)]).is_err() {
                    break;
                }
                // Autocommit: the server acknowledged this row's commit.
                acked[c as usize].store(seq, Ordering::SeqCst);
            }
            Ok(())
        }));
    }
    std::thread::sleep(cut_after);
    storbench_media::emu::powercut(&a.medium).map_err(|e| anyhow!("{e}"))?;
    let cut_at = Instant::now();
    // The acknowledged counts are final from here: anything after the cut fails.
    let acked_at_cut: Vec<i64> = acked.iter().map(|x| x.load(Ordering::SeqCst)).collect();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    let clients_stopped = cut_at.elapsed();
    let acked_final: Vec<i64> = acked.iter().map(|x| x.load(Ordering::SeqCst)).collect();

    // Bring the medium back, then the server (its crash recovery replays the WAL it finds).
    let _ = as_user(&inst.os_user, &inst.bindir.join("pg_ctl"))
        .arg("-D")
        .arg(&inst.data)
        .args(["-m", "immediate", "-w", "-t", "30", "stop"])
        .output();
    storbench_media::emu::recover(&a.medium).map_err(|e| anyhow!("{e}"))?;
    remove_stale_lock(&inst.data.join("postmaster.pid"));
    let log = inst.socket_dir.join("server.log");
    let out = as_user(&inst.os_user, &inst.bindir.join("pg_ctl"))
        .arg("-D")
        .arg(&inst.data)
        .arg("-l")
        .arg(&log)
        .args(["-w", "-t", "120", "start"])
        .output()
        .context("restarting PostgreSQL after the power cut")?;
    if !out.status.success() {
        return Err(anyhow!(
            "PostgreSQL '{name}' did not start after the power cut (its log: {}); the medium lost more than the database can recover",
            log.display()
        ));
    }
    let mut conn = connect(&url).context("connecting after recovery")?;
    let count = Stmt::new(format!("SELECT count(*) FROM {TABLE} WHERE client = $1 AND seq <= $2"));
    let mut per_client = Vec::new();
    let (mut total_acked, mut total_missing) = (0i64, 0i64);
    for (c, &n) in acked_final.iter().enumerate() {
        let found = conn.query_one(&count, &[Value::Int(c as i64), Value::Int(n)])?.int(0)?;
        let missing = n - found;
        total_acked += n;
        total_missing += missing;
        per_client
            .push(serde_json::json!({ "client": c, "acknowledged": n, "found": found, "missing": missing }));
    }
    conn.batch(&format!("DROP TABLE {TABLE}"))?;
    let model = medium.model.as_ref().map(|s| s.label()).unwrap_or_default();
    let record = serde_json::json!({
        "medium": a.medium, "model": model, "db": format!("managed:{name}"),
        "clients": a.clients, "cut_after_s": cut_after.as_secs_f64(),
        "acknowledged": total_acked, "missing": total_missing,
        "acknowledged_at_cut": acked_at_cut.iter().sum::<i64>(),
        "clients_stopped_ms": clients_stopped.as_millis() as u64,
        "per_client": per_client, "pass": total_missing == 0,
    });
    if g.json {
        println!("{}", serde_json::to_string_pretty(&record)?);
    }
    // The result: on stdout (stderr with --json), whatever --quiet says.
    crate::oltp::result(
        g,
        format!(
            "durability on {} ({model}): {total_acked} commits acknowledged by {} clients before the power cut; {total_missing} missing after recovery: {}",
            a.medium,
            a.clients,
            if total_missing == 0 { "pass" } else { "FAIL" }
        ),
    );
    Ok(if total_missing == 0 { ExitCode::SUCCESS } else { ExitCode::from(crate::error::EXIT_FAILED) })
}
