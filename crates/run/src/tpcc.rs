//! A TPC-C run: the schema inspected and its options checked, the run's
//! environment (durability settings, figure sources, driver), and the
//! steps driven at each user count ([`crate::oltp::run_steps`]). TPM is
//! the database's count (`tpm.server`), NOPM the districts' growth
//! (`nopm.districts`), beside the client's own counts.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use storbench_exporter::LiveValues;
use storbench_metrics::units::Given;
use storbench_workloads::tpcc::{self, Options, Tpcc};
use storbench_workloads::StepSpec;

use crate::dbarg::{self, Db};
use crate::error::usage;
use crate::oltp::{self, Screen, Steps};
use crate::record::{RecordOptions, Recorder};

/// `tpcc run`'s options, as given.
pub struct TpccRun {
    /// The database URL.
    pub db: String,
    /// Virtual users per step (a list, a range or fib:N, as typed).
    pub users: Given<Vec<usize>>,
    /// Ramp-up per step.
    pub rampup: Duration,
    /// Measured time per step.
    pub duration: Duration,
    /// The warehouse count the schema must have.
    pub warehouses: Option<u32>,
    /// Every transaction picks a random warehouse.
    pub all_warehouses: bool,
    /// Client-side SQL instead of server-side procedures.
    pub client_sql: bool,
    /// Keying and think times.
    pub think: bool,
    /// Seed for key choice.
    pub seed: u64,
    /// How long a user retries a lost connection.
    pub reconnect_for: Duration,
    /// `--sensitivity`: the device-time factors, as typed.
    pub sensitivity: Option<Given<Vec<f64>>>,
    /// `--sensitivity-duration`: each re-run's measured time, as typed.
    pub sensitivity_duration: Option<Given<Duration>>,
    /// Sample the database's wait events.
    pub waits: bool,
}

/// Runs the transaction mix at each user count, recorded.
pub fn run(g: RecordOptions, screen: &dyn Screen, a: TpccRun) -> Result<ExitCode> {
    let sharding = g.sharding;
    let sens =
        oltp::sensitivity_flags(a.sensitivity.as_ref(), a.sensitivity_duration.as_ref(), sharding.split())?;
    let (users, duration, rampup, reconnect_for) =
        (a.users.value.clone(), a.duration, a.rampup, a.reconnect_for);
    let shard_users = sharding.levels(&users, "users")?;
    let db = Db::parse(&a.db)?;
    oltp::require_sqlite_file(&db, "tpcc build")?;
    let mut conn = db.open()?;
    let info = crate::dataset::built(&tpcc::Data, &db, conn.as_mut())?;
    if let Some(want) = a.warehouses.filter(|&w| w != info.warehouses) {
        return Err(usage(format!(
            "--warehouses {want}: the schema in {} has {}",
            db.shown, info.warehouses
        )));
    }
    let procedures = conn.caps().procedures && !a.client_sql;
    if procedures && !info.has_procedures {
        return Err(usage(format!(
            "the schema in {} has no stored procedures: rebuild it with `storbench tpcc build --replace` or use --client-sql",
            db.shown
        )));
    }
    let server_counters = conn.caps().server_counters;
    let scope = match conn.counters() {
        Ok(Some(c)) => c.scope,
        _ => "client",
    };
    let mut sources = json!({
        "tpm.client": "transactions the users finished in the window (New-Orders rolled back by design included)",
        "nopm.client": "New-Orders the users committed in the window (rollbacks excluded)",
        "nopm.districts": "growth of SUM(d_next_o_id) over the measured window",
    });
    if server_counters {
        sources["tpm.server"] =
            json!(format!("the server's commits + rollbacks over the window, scope {scope}"));
    }
    let env_db = dbarg::env(&db, conn.as_mut());
    let (durability, warnings) =
        oltp::durability(conn.as_mut(), &env_db, (rampup + duration) * users.len() as u32);
    let env = json!({
        "db": env_db,
        "warehouses": info.warehouses,
        "durability": durability,
        "warnings": warnings,
        "sources": sources,
        "driver": if procedures { "server-side procedures" } else { "client-side SQL" },
    });
    let targets: Vec<_> = dbarg::data_dir(&db, conn.as_mut()).into_iter().collect();
    drop(conn);
    let sensitivity = oltp::sensitivity_plan(sens, &targets)?;
    let config = json!({
        "db": db.shown, "warehouses": info.warehouses, "users": users,
        "duration_s": duration.as_secs_f64(), "rampup_s": rampup.as_secs_f64(),
        "all_warehouses": a.all_warehouses, "client_sql": !procedures, "think": a.think, "seed": a.seed,
    });
    let label = format!("tpcc {}w users {}", info.warehouses, a.users.text);
    // Refused before anything is recorded: a shard with no home warehouse.
    let homes = sharding.part_of(u64::from(info.warehouses), "warehouses")?;
    let mut config = config;
    if sharding.split() {
        config["home_warehouses"] = json!([homes.start + 1, homes.end]);
    }
    let rec = Recorder::begin(g, "tpcc", label, config, env, &targets)?;
    oltp::warn_line(&rec, &warnings);
    let part = sharding.split().then(|| tpcc::Part {
        index: sharding.shard.index,
        count: sharding.shard.count,
        first_home: homes.start as u32 + 1,
        homes: (homes.end - homes.start) as u32,
    });
    let opts = Options {
        warehouses: info.warehouses,
        all_warehouses: a.all_warehouses,
        client_sql: !procedures,
        think: a.think,
        seed: a.seed,
        part,
    };
    let workload = Tpcc::new(opts, &info);
    let specs = shard_users
        .iter()
        .map(|&u| StepSpec { users: u, rampup, duration, reconnect_for, ..StepSpec::default() })
        .collect();
    let steps = Steps {
        level: "users",
        specs,
        labels: users.clone(),
        progress: None,
        live: Some(&|t| {
            let nopm = t.kind_tps.first().copied().unwrap_or(0.0) * 60.0;
            format!("client TPM {:.0}  NOPM {:.0}  lat {:.2} ms", t.tps * 60.0, nopm, t.lat_mean_us / 1e3)
        }),
        publish: &|t| LiveValues {
            tpm: Some(t.tps * 60.0),
            nopm: Some(t.kind_tps.first().copied().unwrap_or(0.0) * 60.0),
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
