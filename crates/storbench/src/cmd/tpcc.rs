//! `storbench tpcc build | run | check | drop`: the TPC-C-like workload on
//! any engine. `run` reports TPM as the database counts it (`tpm.server`)
//! and NOPM from the growth of the districts' next order ids
//! (`nopm.districts`, HammerDB's method), beside the client's own counts
//! (`tpm.client`, `nopm.client`): every figure and series names its source.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::json;
use storbench_workloads::tpcc::{self, Options, Tpcc};
use storbench_workloads::StepSpec;

use crate::cli::Global;
use crate::dbarg::{self, Db};
use crate::error::{usage, EXIT_FAILED};
use crate::live::Live;
use crate::oltp::{self, Steps};
use crate::record::{Outcome, Recorder};
use storbench_cluster::LiveValues;

/// Options of `storbench tpcc`.
#[derive(Debug, Args)]
pub struct TpccArgs {
    #[command(subcommand)]
    pub verb: TpccVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum TpccVerb {
    /// Create the nine tables, load them in parallel, add indexes and procedures.
    Build(BuildArgs),
    /// Run the transaction mix at one or more user counts.
    Run(RunArgs),
    /// Check the TPC-C consistency conditions; exit 1 if one fails.
    Check(DbArg),
    /// Drop the schema.
    Drop(DbArg),
}

/// The database to use.
#[derive(Debug, Args)]
pub struct DbArg {
    /// Database URL: sqlite:PATH, postgres://user@host:port/db, mysql://user@host:port/db, managed:NAME.
    #[arg(long, env = "STORBENCH_DB", default_value = "sqlite:storbench-data/tpcc.db")]
    pub db: String,
}

/// Options of `tpcc build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Warehouses (about 100 MB each).
    #[arg(long, short = 'w', default_value_t = 1)]
    pub warehouses: u32,
    /// Connections loading in parallel (default: the number of CPUs).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Drop an existing TPC-C schema first.
    #[arg(long)]
    pub replace: bool,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// Options of `tpcc run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Virtual users per step: a list (1,2,4), a range (1..8) or fib:N.
    #[arg(long, short = 'u', default_value = "1")]
    pub users: String,
    /// Ramp-up per step, run but not counted.
    #[arg(long, default_value = "30s")]
    pub rampup: String,
    /// Measured time per step.
    #[arg(long, short = 'T', default_value = "2m")]
    pub duration: String,
    /// The warehouse count the schema must have (default: whatever it has).
    #[arg(long, short = 'w')]
    pub warehouses: Option<u32>,
    /// Every transaction picks a random warehouse (HammerDB's "use all
    /// warehouses") instead of each user keeping a home warehouse.
    #[arg(long)]
    pub all_warehouses: bool,
    /// Drive the transactions with client-side SQL instead of server-side procedures.
    #[arg(long)]
    pub client_sql: bool,
    /// Keying and think times as the specification gives them (off by default).
    #[arg(long)]
    pub think: bool,
    /// Seed for key choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long a user retries a lost connection before the run fails.
    #[arg(long, default_value = "30s")]
    pub reconnect_for: String,
    #[command(flatten)]
    pub sens: oltp::SensitivityArgs,
    #[command(flatten)]
    pub waits: oltp::WaitArgs,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// Runs `storbench tpcc`.
pub fn run(g: &Global, a: TpccArgs) -> Result<ExitCode> {
    match a.verb {
        TpccVerb::Build(b) => build(g, b),
        TpccVerb::Run(r) => run_steps(g, r),
        TpccVerb::Check(d) => check(g, d),
        TpccVerb::Drop(d) => drop_schema(g, d),
    }
}

fn build(g: &Global, a: BuildArgs) -> Result<ExitCode> {
    if !(1..=100_000).contains(&a.warehouses) {
        return Err(usage(format!("--warehouses {}: must be 1 to 100000", a.warehouses)));
    }
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    if jobs == 0 {
        return Err(usage("--jobs 0: must be at least 1"));
    }
    let db = Db::parse(&a.db.db)?;
    oltp::make_sqlite_dir(&db)?;
    let mut conn = db.open()?;
    if let Some(info) = tpcc::inspect(conn.as_mut()).map_err(|e| db.usage_error(e))? {
        if !a.replace {
            return Err(usage(format!(
                "{} already holds a TPC-C schema of {} warehouse(s): add --replace to rebuild it, or `storbench tpcc drop`",
                db.shown, info.warehouses
            )));
        }
        tpcc::drop(conn.as_mut()).map_err(|e| db.usage_error(e))?;
    }
    if let Some(t) = tpcc::foreign_table(conn.as_mut()).map_err(|e| db.usage_error(e))? {
        return Err(usage(format!(
            "{} holds a table '{t}' that is not TPC-C's (TPC-H's?): build TPC-C in another database",
            db.shown
        )));
    }
    let env = json!({ "db": dbarg::env(&db, conn.as_mut()) });
    let targets: Vec<_> = dbarg::data_dir(&db, conn.as_mut()).into_iter().collect();
    drop(conn);
    let config = json!({ "db": db.shown, "warehouses": a.warehouses, "jobs": jobs });
    let label = format!("tpcc build {} warehouses", a.warehouses);
    let rec = Recorder::begin(g, "tpcc-build", label, config, env, &targets)?;
    oltp::build_step(g, rec, "build", json!({ "warehouses": a.warehouses, "jobs": jobs }), || {
        let bar = Live::bar(g.quiet, 100, "building {bar:40} {pos}% {msg} (eta {eta})");
        let res = tpcc::build(&db.connector(), a.warehouses, jobs, &|p| {
            if let Some(pct) = (p.rows_done * 100).checked_div(p.rows_total) {
                bar.pos(pct.min(100));
            }
            bar.set(p.table.to_string());
        });
        bar.finish();
        let s = res.map_err(|e| Outcome::Failed(anyhow::anyhow!("building in {}: {e}", db.shown)))?;
        let line = format!(
            "tpcc build: {} warehouse(s), indexes and procedures included: {}",
            a.warehouses,
            storbench_workloads::figures::build_summary(
                s.rows,
                s.seconds,
                s.load_seconds,
                s.index_seconds,
                s.analyze_seconds
            )
        );
        Ok((s.report(), line))
    })
}

fn run_steps(g: &Global, a: RunArgs) -> Result<ExitCode> {
    let sharding = g.sharding();
    let t = oltp::parse_timing("users", &a.users, &a.duration, &a.rampup, &a.reconnect_for)?;
    let sens = a.sens.parse(sharding.split())?;
    let (users, duration, rampup, reconnect_for) = (t.levels, t.duration, t.rampup, t.reconnect_for);
    let shard_users = sharding.levels(&users, "users")?;
    let db = Db::parse(&a.db.db)?;
    oltp::require_sqlite_file(&db, "tpcc build")?;
    let mut conn = db.open()?;
    let Some(info) = tpcc::inspect(conn.as_mut()).map_err(|e| db.usage_error(e))? else {
        return Err(usage(format!(
            "no TPC-C schema in {}: run `storbench tpcc build --db {}` first",
            db.shown, db.shown
        )));
    };
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
    let label = format!("tpcc {}w users {}", info.warehouses, a.users);
    // Refused before anything is recorded: a shard with no home warehouse.
    let homes = sharding.part_of(u64::from(info.warehouses), "warehouses")?;
    let mut config = config;
    if sharding.split() {
        config["home_warehouses"] = json!([homes.start + 1, homes.end]);
    }
    let rec = Recorder::begin(g, "tpcc", label, config, env, &targets)?;
    oltp::warn_line(&warnings);
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
        waits: !a.waits.no_wait_events,
    };
    let connect = db.connector();
    oltp::run_steps(rec, g, &workload, &connect, steps, &warnings)
}

fn check(g: &Global, a: DbArg) -> Result<ExitCode> {
    let db = Db::parse(&a.db)?;
    let mut conn = db.open()?;
    if tpcc::inspect(conn.as_mut()).map_err(|e| db.usage_error(e))?.is_none() {
        return Err(usage(format!("no TPC-C schema in {}", db.shown)));
    }
    let results = tpcc::check(conn.as_mut()).map_err(|e| anyhow::anyhow!("checking {}: {e}", db.shown))?;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["#", "condition", "result", "detail"]);
    for c in &results {
        t.add_row(vec![
            c.number.to_string(),
            c.name.to_string(),
            if c.passed { "pass".into() } else { "FAIL".to_string() },
            c.detail.clone(),
        ]);
    }
    if g.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        println!("{t}");
    }
    let failed = results.iter().filter(|c| !c.passed).count();
    if failed > 0 {
        eprintln!("storbench: {failed} consistency condition(s) failed in {}", db.shown);
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

fn drop_schema(g: &Global, a: DbArg) -> Result<ExitCode> {
    let db = Db::parse(&a.db)?;
    let mut conn = db.open()?;
    tpcc::drop(conn.as_mut())
        .map_err(|e| anyhow::anyhow!("dropping the TPC-C schema in {}: {e}", db.shown))?;
    if !g.quiet {
        eprintln!("tpcc: schema dropped from {}", db.shown);
    }
    Ok(ExitCode::SUCCESS)
}
