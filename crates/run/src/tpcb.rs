//! A TPC-B run, pgbench's built-in script: the tables inspected and the
//! options checked (rate, latency limit, progress as pgbench reads them),
//! the run's environment, and the steps driven at each client count
//! ([`crate::oltp::run_steps`]), TPS as pgbench defines it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use storbench_exporter::LiveValues;
use storbench_metrics::units::{parse_duration, Given};
use storbench_workloads::tpcb::{self, Tpcb};
use storbench_workloads::StepSpec;

use crate::dbarg::{self, Db};
use crate::error::usage;
use crate::oltp::{self, Screen, Steps};
use crate::record::{RecordOptions, Recorder};

/// `tpcb run`'s options, as given.
pub struct TpcbRun {
    /// The database URL.
    pub db: String,
    /// Clients per step (a list, a range or fib:N, as typed).
    pub clients: Given<Vec<usize>>,
    /// The scale the tables must have.
    pub scale: Option<i64>,
    /// Measured time per step.
    pub duration: Duration,
    /// Ramp-up per step.
    pub rampup: Duration,
    /// Target rate in transactions per second over all clients.
    pub rate: Option<f64>,
    /// Latency limit ([`parse_latency_limit`]).
    pub latency_limit: Option<Duration>,
    /// Progress line interval ([`parse_progress`]).
    pub progress: Option<Duration>,
    /// Seed for key choice.
    pub seed: u64,
    /// How long a client retries a lost connection.
    pub reconnect_for: Duration,
    /// `--sensitivity`: the device-time factors, as typed.
    pub sensitivity: Option<Given<Vec<f64>>>,
    /// `--sensitivity-duration`: each re-run's measured time, as typed.
    pub sensitivity_duration: Option<Given<Duration>>,
    /// Sample the database's wait events.
    pub waits: bool,
}

/// Runs the script at each client count, recorded.
pub fn run(g: RecordOptions, screen: &dyn Screen, a: TpcbRun) -> Result<ExitCode> {
    let sharding = g.sharding;
    let sens =
        oltp::sensitivity_flags(a.sensitivity.as_ref(), a.sensitivity_duration.as_ref(), sharding.split())?;
    let (clients, duration, rampup, reconnect_for) =
        (a.clients.value.clone(), a.duration, a.rampup, a.reconnect_for);
    let shard_clients = sharding.levels(&clients, "clients")?;
    if let Some(r) = a.rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(usage(format!("--rate {r}: must be a positive number of transactions per second")));
    }
    let db = Db::parse(&a.db)?;
    oltp::require_sqlite_file(&db, "tpcb init")?;
    let mut conn = db.open()?;
    let scale = crate::dataset::built(&tpcb::Data, &db, conn.as_mut())?;
    if let Some(want) = a.scale.filter(|&w| w != scale) {
        return Err(usage(format!("--scale {want}: the tables in {} are at scale {scale}", db.shown)));
    }
    let env_db = dbarg::env(&db, conn.as_mut());
    let (durability, warnings) =
        oltp::durability(conn.as_mut(), &env_db, (rampup + duration) * clients.len() as u32);
    let env = json!({
        "db": env_db, "scale": scale, "durability": durability, "warnings": warnings,
        "sources": {
            "tps.client": "transactions the clients finished in the window over the window (pgbench's tps)",
            "tps.server": "the server's commits + rollbacks over the window",
        },
    });
    let targets: Vec<_> = dbarg::data_dir(&db, conn.as_mut()).into_iter().collect();
    drop(conn);
    let sensitivity = oltp::sensitivity_plan(sens, &targets)?;
    let config = json!({
        "db": db.shown, "scale": scale, "clients": clients,
        "duration_s": duration.as_secs_f64(), "rampup_s": rampup.as_secs_f64(),
        "rate": a.rate, "latency_limit_ms": a.latency_limit.map(|d| d.as_secs_f64() * 1e3),
        "progress_s": a.progress.map(|d| d.as_secs_f64()), "seed": a.seed,
    });
    let label = format!("tpcb scale {scale} clients {}", a.clients.text);
    let rec = Recorder::begin(g, "tpcb", label, config, env, &targets)?;
    oltp::warn_line(&rec, &warnings);
    let specs = shard_clients
        .iter()
        .zip(&clients)
        .map(|(&c, &whole)| StepSpec {
            users: c,
            rampup,
            duration,
            // A shard's share of the whole run's rate.
            rate: a.rate.map(|r| r * c as f64 / whole as f64),
            latency_limit: a.latency_limit,
            reconnect_for,
            ..StepSpec::default()
        })
        .collect();
    let workload = Tpcb::new(scale, sharding.seed(a.seed));
    let steps = Steps {
        level: "clients",
        specs,
        labels: clients.clone(),
        progress: a.progress,
        live: None,
        publish: &|t| LiveValues {
            tps: Some(t.tps),
            latency: Some(t.latency.clone()),
            ..LiveValues::default()
        },
        sensitivity,
        waits: a.waits,
    };
    let connect = db.connector();
    oltp::run_steps(rec, screen, &workload, &connect, steps, &warnings)
}

/// `--progress`: a duration of at least a second (a bare number is
/// seconds, as pgbench's `-P` reads it).
pub fn parse_progress(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d >= Duration::from_secs(1) => Ok(d),
        _ => Err(format!("'{s}' must be at least 1s (figures are taken once a second)")),
    }
}

/// `--latency-limit`: a bare number is milliseconds, as pgbench's `-L`
/// reads it; a duration with a unit (`50ms`, `0.1s`) as written. Must be
/// more than zero.
pub fn parse_latency_limit(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms >= 0.0 => Duration::from_secs_f64(ms / 1e3),
        Ok(_) => return Err("must be a positive number of milliseconds".into()),
        Err(_) => parse_duration(s)?,
    };
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_latency_limit_is_milliseconds_as_in_pgbench() {
        assert_eq!(parse_latency_limit("50"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_latency_limit("2.5"), Ok(Duration::from_micros(2500)));
        assert_eq!(parse_latency_limit("50ms"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_latency_limit("1s"), Ok(Duration::from_secs(1)));
        assert!(parse_latency_limit("0").is_err());
        assert!(parse_latency_limit("-5").is_err());
        assert!(parse_latency_limit("soon").is_err());
    }
}
