//! The TPC-C-like workload: schema, parallel load, server-side routines,
//! the five transactions and the consistency checks.
//!
//! Library half only: `storbench tpcc` builds, inspects, checks and drops
//! through [`Data`] (the workload contract, [`crate::Dataset`]) and drives
//! a [`Tpcc`] with the runner.

mod check;
mod load;
mod procs;
mod schema;
mod txn;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use storbench_db::{Connection, DbError, Dialect, ErrorKind, Stmt, Value};
use storbench_metrics::{Figure, Sample, StepReport, Unit};

use crate::figures::{build_report, BuildFigures, Column, FigureSpec};
use crate::rand_tpc::TpcRng;
use crate::runner::{Connector, Done, Probe, Worker, Workload};
pub use schema::TABLES;
pub use txn::{Input, Keys, Line};

/// Transaction kinds, in the order [`Done::kind`] indexes them. A New-Order
/// that rolled back by design (clause 2.4.2.3, 1 %) is its own kind,
/// `new_order_rollback`, so `txn.new_order.*` counts only the orders
/// committed and every transaction is counted under exactly one kind.
pub const KINDS: [&str; 6] =
    ["new_order", "payment", "order_status", "delivery", "stock_level", "new_order_rollback"];

/// TPC-C's headline figures, headline first: NOPM from the districts'
/// next order ids (HammerDB's method), TPM from the server's counters.
pub const FIGURES: &[FigureSpec] = &[
    FigureSpec { base: "nopm", label: "NOPM", source: "districts' order ids" },
    FigureSpec { base: "tpm", label: "TPM", source: "server counters" },
];

/// The figures of a `tpcc-build` run the report shows.
pub const BUILD_FIGURES: &[FigureSpec] =
    &[FigureSpec { base: "build.seconds", label: "build time", source: "" }];

/// How a `tpcc` run reads: NOPM and TPM, and their per-second series.
pub const RUN: crate::figures::Description = crate::figures::Description {
    series: &["tpm", "nopm"],
    ..crate::figures::Description::run("tpcc", "TPC-C", FIGURES)
};

/// How a `tpcc-build` run reads.
pub const BUILD: crate::figures::Description =
    crate::figures::Description::setup("tpcc-build", "TPC-C build", BUILD_FIGURES);

/// A step's line and the run's summary.
pub const COLUMNS: &[Column] = &[
    ("nopm.districts", "NOPM"),
    ("nopm.client", "NOPM client"),
    ("tpm.server", "TPM server"),
    ("tpm.client", "TPM client"),
    ("txn.new_order.lat.p95", "NO p95 µs"),
    ("lat.p99", "p99 µs"),
    ("lat.p99.9", "p99.9 µs"),
    ("lat.max", "max µs"),
    ("errors", "errors"),
    ("retries", "retries"),
];

/// How a run drives the schema.
#[derive(Clone, Debug)]
pub struct Options {
    /// Warehouses to use (at most those built; 0 = all built).
    pub warehouses: u32,
    /// Every transaction picks a random warehouse instead of the user's home.
    pub all_warehouses: bool,
    /// Client-driven SQL even where routines exist.
    pub client_sql: bool,
    /// Keying and think times from the specification.
    pub think: bool,
    /// Seed of the users' random sources (user `u` uses `seed + u`).
    pub seed: u64,
    /// A shard's part of the load (HammerDB's multi-host split): its users
    /// take their home warehouses round-robin from its own range instead of
    /// from all of them (remote warehouses are still drawn from all), and
    /// its user `u` seeds its random source as user `u × count + index` of
    /// the whole run, so no two shards' users draw the same keys.
    pub part: Option<Part>,
}

/// A shard's identity and home warehouses (see [`Options::part`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// This shard, from 0.
    pub index: u32,
    /// Shards in all, at least 1.
    pub count: u32,
    /// The first home warehouse (from 1).
    pub first_home: u32,
    /// How many home warehouses, at least 1.
    pub homes: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options { warehouses: 0, all_warehouses: false, client_sql: false, think: false, seed: 1, part: None }
    }
}

/// Load progress, reported from the loader threads (the table is the
/// table of the batch just written, or the phase).
pub use crate::dataset::Progress as LoadProgress;

/// What [`build`] did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BuildStats {
    /// Rows loaded.
    pub rows: u64,
    /// Seconds from start to end (tables, load, indexes, routines, statistics).
    pub seconds: f64,
    /// Seconds of the row load alone.
    pub load_seconds: f64,
    /// Seconds of keys and indexes after the load.
    pub index_seconds: f64,
    /// Seconds of statistics (and, on PostgreSQL, VACUUM).
    pub analyze_seconds: f64,
    /// Rows per table.
    pub per_table: BTreeMap<String, u64>,
    /// Whether server-side routines were created.
    pub procedures: bool,
}

impl BuildStats {
    /// The build step's figures ([`build_report`]).
    pub fn report(&self) -> StepReport {
        build_report(&BuildFigures {
            rows: self.rows,
            load_seconds: self.load_seconds,
            phases: &[
                ("build.seconds", self.seconds),
                ("build.load_seconds", self.load_seconds),
                ("build.index_seconds", self.index_seconds),
                ("build.analyze_seconds", self.analyze_seconds),
            ],
            per_table: None,
        })
    }
}

/// What a built schema is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SchemaInfo {
    /// Warehouses loaded.
    pub warehouses: u32,
    /// The load-time C of C_LAST's NURand.
    pub c_load: i64,
    /// The server-side routines exist.
    pub has_procedures: bool,
}

/// One consistency condition's outcome.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckResult {
    /// Condition number (clause 3.3.2.N).
    pub number: u32,
    /// What it asserts.
    pub name: String,
    /// It holds.
    pub passed: bool,
    /// The first offending keys when it does not.
    pub detail: String,
}

fn run_all(conn: &mut dyn Connection, stmts: &[String]) -> Result<(), DbError> {
    for s in stmts {
        conn.batch(s)?;
    }
    Ok(())
}

/// Runs independent statements over `jobs` connections, the biggest
/// tables' first (order lines, then stock).
fn run_parallel(connect: Connector<'_>, stmts: &[String], jobs: usize) -> Result<(), DbError> {
    let mut order: Vec<&String> = stmts.iter().collect();
    order.sort_by_key(|s| std::cmp::Reverse(s.contains("order_line") as u8 * 2 + s.contains("stock") as u8));
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| -> Result<(), DbError> {
        let handles: Vec<_> = (0..jobs.min(order.len()))
            .map(|_| {
                s.spawn(|| -> Result<(), DbError> {
                    let mut c = connect()?;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(sql) = order.get(i) else { return Ok(()) };
                        c.batch(sql)?;
                    }
                })
            })
            .collect();
        let mut first = Ok(());
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(DbError::new(ErrorKind::Other, "tpcc: a DDL worker panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
}

/// Creates the schema and loads `warehouses` warehouses with `jobs`
/// connections, then keys, indexes, routines and statistics.
pub fn build(
    connect: Connector<'_>,
    warehouses: u32,
    jobs: usize,
    progress: &(dyn Fn(LoadProgress) + Sync),
) -> Result<BuildStats, DbError> {
    if warehouses == 0 {
        return Err(DbError::new(ErrorKind::Workload, "tpcc: warehouses must be at least 1"));
    }
    let t0 = Instant::now();
    let jobs = jobs.max(1);
    let mut conn = connect()?;
    let dialect = conn.dialect();
    let caps = conn.caps();
    run_all(conn.as_mut(), &schema::create(dialect))?;

    let mut seed_rng = TpcRng::seeded(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7),
    );
    let c_load = seed_rng.uniform(0, 255);
    let seed = seed_rng.uniform(0, i64::MAX) as u64;
    let now = load::now_text();
    let rows_total = 100_000 + warehouses as u64 * load::ROWS_PER_WAREHOUSE;
    let done = AtomicU64::new(0);
    let per_table: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());
    let next_unit = AtomicUsize::new(0);
    let units = warehouses as usize + 1;
    let account = |table: &'static str, n: usize| {
        let d = done.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        *per_table.lock().expect("per_table").entry(table.to_string()).or_default() += n as u64;
        progress(LoadProgress { rows_done: d, rows_total, table });
    };
    let generate = |unit: usize, sink: &mut load::Sink<'_>| -> Result<(), DbError> {
        if unit == 0 {
            load::items(seed, sink)
        } else {
            load::warehouse(unit as i64, c_load, &now, seed, sink)
        }
    };

    let t_load = Instant::now();
    let work = Units { next: &next_unit, count: units, generate: &generate, account: &account };
    if caps.concurrent_writers {
        load_parallel(connect, &work, jobs.min(units))?;
    } else {
        load_one_writer(conn.as_mut(), &work, jobs.min(units).max(1))?;
    }
    let load_seconds = t_load.elapsed().as_secs_f64();

    // Keys and indexes, spread over the jobs where writers may run together.
    let t_idx = Instant::now();
    progress(LoadProgress { rows_done: done.load(Ordering::Relaxed), rows_total, table: "indexes" });
    let stmts = schema::after_load(dialect);
    if caps.concurrent_writers && jobs > 1 {
        run_parallel(connect, &stmts, jobs)?;
    } else {
        run_all(conn.as_mut(), &stmts)?;
    }
    let index_seconds = t_idx.elapsed().as_secs_f64();

    progress(LoadProgress { rows_done: done.load(Ordering::Relaxed), rows_total, table: "procedures" });
    let routines = procs::create(dialect);
    for r in &routines {
        conn.batch(r)?;
    }
    let has_procs = !routines.is_empty();
    conn.execute(
        &Stmt::new(
            "INSERT INTO storbench_tpcc_meta (warehouses, c_load, version, procedures) VALUES ($1, $2, $3, $4)",
        ),
        &[
            Value::Int(warehouses as i64),
            Value::Int(c_load),
            Value::Int(schema::VERSION),
            Value::Int(has_procs as i64),
        ],
    )?;
    progress(LoadProgress { rows_done: done.load(Ordering::Relaxed), rows_total, table: "analyze" });
    let t_analyze = Instant::now();
    let stmts = schema::analyze(dialect);
    if caps.concurrent_writers && jobs > 1 {
        run_parallel(connect, &stmts, jobs)?;
    } else {
        run_all(conn.as_mut(), &stmts)?;
    }

    let per_table = per_table.into_inner().expect("per_table");
    Ok(BuildStats {
        rows: per_table.values().sum(),
        seconds: t0.elapsed().as_secs_f64(),
        load_seconds,
        index_seconds,
        analyze_seconds: t_analyze.elapsed().as_secs_f64(),
        per_table,
        procedures: has_procs,
    })
}

/// The units of a load (unit 0 the items, unit w warehouse w) and how to
/// make and count one; loaders take the next unit until none is left.
struct Units<'a> {
    next: &'a AtomicUsize,
    count: usize,
    generate: &'a (dyn Fn(usize, &mut load::Sink<'_>) -> Result<(), DbError> + Sync),
    account: &'a (dyn Fn(&'static str, usize) + Sync),
}

/// Loads over `threads` connections, each generating and writing its units.
fn load_parallel(connect: Connector<'_>, work: &Units<'_>, threads: usize) -> Result<(), DbError> {
    std::thread::scope(|s| -> Result<(), DbError> {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> Result<(), DbError> {
                    let mut c = connect()?;
                    let mut sink = |t: &'static str, rows: Vec<Vec<Value>>| {
                        c.load(t, load::columns(t), &rows)?;
                        (work.account)(t, rows.len());
                        Ok(())
                    };
                    loop {
                        let u = work.next.fetch_add(1, Ordering::Relaxed);
                        if u >= work.count {
                            return Ok(());
                        }
                        (work.generate)(u, &mut sink)?;
                    }
                })
            })
            .collect();
        let mut first = Ok(());
        for h in handles {
            let r =
                h.join().unwrap_or_else(|_| Err(DbError::new(ErrorKind::Other, "tpcc: a loader panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
}

/// One writer (`conn`): `threads` generators run in parallel and hand
/// batches over.
fn load_one_writer(conn: &mut dyn Connection, work: &Units<'_>, threads: usize) -> Result<(), DbError> {
    let (tx, rx) = mpsc::sync_channel::<(&'static str, Vec<Vec<Value>>)>(2 * threads);
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| -> Result<(), DbError> {
        for _ in 0..threads {
            let tx = tx.clone();
            let failed = &failed;
            s.spawn(move || {
                let mut sink = |t: &'static str, rows: Vec<Vec<Value>>| {
                    tx.send((t, rows)).map_err(|_| DbError::new(ErrorKind::Other, "tpcc: writer stopped"))
                };
                loop {
                    let u = work.next.fetch_add(1, Ordering::Relaxed);
                    if u >= work.count || failed.load(Ordering::Relaxed) {
                        return;
                    }
                    if (work.generate)(u, &mut sink).is_err() {
                        return;
                    }
                }
            });
        }
        std::mem::drop(tx);
        let mut result = Ok(());
        for (t, rows) in rx {
            if result.is_err() {
                continue;
            }
            match conn.load(t, load::columns(t), &rows) {
                Ok(()) => (work.account)(t, rows.len()),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    result = Err(e);
                }
            }
        }
        result
    })
}

/// The schema's description, or `None` when no TPC-C schema is there.
pub fn inspect(conn: &mut dyn Connection) -> Result<Option<SchemaInfo>, DbError> {
    if !crate::tpcb::table_exists(conn, "storbench_tpcc_meta")? {
        return Ok(None);
    }
    let q = Stmt::new("SELECT warehouses, c_load, version, procedures FROM storbench_tpcc_meta");
    match conn.query_opt(&q, &[]) {
        Ok(Some(r)) => {
            let version = r.int(2)?;
            if version != schema::VERSION {
                return Err(DbError::new(
                    ErrorKind::Workload,
                    format!("tpcc: schema version {version} here, this storbench expects {}: drop and build again", schema::VERSION),
                ));
            }
            Ok(Some(SchemaInfo {
                warehouses: r.int(0)? as u32,
                c_load: r.int(1)?,
                has_procedures: r.int(3)? != 0 && conn.caps().procedures,
            }))
        }
        Ok(None) => Ok(None),
        Err(e) if e.kind() == ErrorKind::MissingObject => Ok(None),
        Err(e) => Err(e),
    }
}

/// All twelve consistency conditions (11 on the districts not yet delivered to).
pub fn check(conn: &mut dyn Connection) -> Result<Vec<CheckResult>, DbError> {
    check::check(conn)
}

/// Tables only TPC-C has; CUSTOMER and ORDERS are also TPC-H's.
const OWN_TABLES: [&str; 8] =
    ["warehouse", "district", "history", "stock", "new_order", "order_line", "item", "storbench_tpcc_meta"];

/// A table of another schema (TPC-H's CUSTOMER or ORDERS) that a TPC-C
/// build would collide with, when no TPC-C table is there.
pub fn foreign_table(conn: &mut dyn Connection) -> Result<Option<&'static str>, DbError> {
    crate::names::foreign(conn, &OWN_TABLES)
}

/// Drops every table and routine the build made. CUSTOMER and ORDERS are
/// dropped only beside a TPC-C table: in a database that holds TPC-H's
/// tables of those names and nothing of TPC-C, they stay.
pub fn drop(conn: &mut dyn Connection) -> Result<(), DbError> {
    let ours = crate::names::holds_any(conn, &OWN_TABLES)?;
    let stmts = schema::drop(conn.dialect());
    run_all(conn, &crate::names::keep_foreign(stmts, ours))
}

/// How `tpcc build` builds: warehouses and loading connections.
#[derive(Clone, Copy, Debug)]
pub struct BuildOptions {
    /// Warehouses, at least 1.
    pub warehouses: u32,
    /// Connections loading in parallel.
    pub jobs: usize,
}

/// TPC-C's data behind the workload contract ([`crate::Dataset`]).
pub struct Data;

impl crate::Checked for CheckResult {
    fn passed(&self) -> bool {
        self.passed
    }
}

impl crate::Dataset for Data {
    type Options = BuildOptions;
    type Info = SchemaInfo;
    type CheckOptions = ();
    type Check = CheckResult;

    fn name(&self) -> &'static str {
        RUN.kind
    }
    fn title(&self) -> &'static str {
        RUN.title
    }
    fn inspect(&self, conn: &mut dyn Connection) -> Result<Option<SchemaInfo>, DbError> {
        inspect(conn)
    }
    fn describe(&self, info: &SchemaInfo) -> String {
        format!("a TPC-C schema of {} warehouse(s)", info.warehouses)
    }
    fn foreign_table(
        &self,
        conn: &mut dyn Connection,
    ) -> Result<Option<(&'static str, &'static str)>, DbError> {
        Ok(foreign_table(conn)?.map(|t| (t, "TPC-H")))
    }
    fn build_label(&self, o: &BuildOptions) -> String {
        format!("tpcc build {} warehouses", o.warehouses)
    }
    fn build_config(&self, o: &BuildOptions) -> serde_json::Value {
        serde_json::json!({ "warehouses": o.warehouses, "jobs": o.jobs })
    }
    fn build_params(&self, o: &BuildOptions) -> serde_json::Value {
        self.build_config(o)
    }
    fn build(
        &self,
        connect: Connector<'_>,
        o: &BuildOptions,
        _stop: &std::sync::atomic::AtomicBool,
        progress: &(dyn Fn(crate::Progress) + Sync),
    ) -> Result<crate::Built, crate::BuildError> {
        let s = build(connect, o.warehouses, o.jobs, progress)?;
        let line = format!(
            "tpcc build: {} warehouse(s), indexes and procedures included: {}",
            o.warehouses,
            crate::figures::build_summary(
                s.rows,
                s.seconds,
                s.load_seconds,
                s.index_seconds,
                s.analyze_seconds
            )
        );
        Ok(crate::Built { report: s.report(), line })
    }
    fn check(&self, conn: &mut dyn Connection, _: &SchemaInfo, _: ()) -> Result<Vec<CheckResult>, DbError> {
        check(conn)
    }
    fn drop(&self, conn: &mut dyn Connection) -> Result<(), DbError> {
        drop(conn)
    }
}

/// The run-time C for C_LAST: differs from `c_load` by 65..=119, never 96
/// or 112 (clause 2.1.6.1).
pub fn run_c_last(c_load: i64, r: &mut TpcRng) -> i64 {
    loop {
        let delta = r.uniform(65, 119);
        if delta == 96 || delta == 112 {
            continue;
        }
        let c = if c_load + delta <= 255 { c_load + delta } else { c_load - delta };
        if (0..=255).contains(&c) {
            return c;
        }
    }
}

/// The workload the runner drives.
pub struct Tpcc {
    opts: Options,
    keys: Keys,
    procs: bool,
    sql: Arc<txn::SqlSets>,
    tally: Arc<Tally>,
}

/// Transactions the workers finished, per kind, whatever the window:
/// the database's own counts (district growth, commits) are compared with
/// these, exactly, over a whole step.
#[derive(Default)]
struct Tally {
    kinds: [AtomicU64; KINDS.len()],
    /// The counts when the current step's users were made.
    step_base: Mutex<[u64; KINDS.len()]>,
}

impl Tally {
    fn now(&self) -> [u64; KINDS.len()] {
        std::array::from_fn(|k| self.kinds[k].load(Ordering::Relaxed))
    }
}

impl Tpcc {
    /// A workload over the schema `info` describes.
    pub fn new(opts: Options, info: &SchemaInfo) -> Tpcc {
        let mut r = TpcRng::seeded(opts.seed ^ 0x7063_7463);
        let warehouses =
            if opts.warehouses == 0 { info.warehouses } else { opts.warehouses.min(info.warehouses) };
        let keys = Keys {
            warehouses: warehouses.max(1) as i64,
            c_last: run_c_last(info.c_load, &mut r),
            c_id: r.uniform(0, 1023),
            ol_i_id: r.uniform(0, 8191),
        };
        Tpcc {
            procs: info.has_procedures && !opts.client_sql,
            opts,
            keys,
            sql: txn::SqlSets::new(),
            tally: Arc::default(),
        }
    }

    /// Transactions every worker of this workload finished so far, per
    /// kind in [`KINDS`] order (ramp-up and the transactions still in
    /// flight when a window ended included).
    pub fn finished(&self) -> Vec<u64> {
        self.tally.now().to_vec()
    }

    /// Runs one transaction with the given inputs on `conn` (routines or
    /// client SQL as the options say); true when it rolled back by design.
    /// For tests and tools; the runner goes through [`Workload::worker`].
    pub fn run_input(&self, conn: &mut dyn Connection, input: &Input) -> Result<bool, DbError> {
        let dialect = conn.dialect();
        let q = self.sql.get(dialect);
        let mut bufs = txn::Bufs::default();
        if self.procs && conn.caps().procedures && dialect != Dialect::Sqlite {
            txn::run_proc(conn, q, input, &mut bufs)
        } else {
            txn::run_client(conn, q, input, &mut bufs)
        }
    }

    /// The key constants in use (run-time C values).
    pub fn keys(&self) -> Keys {
        self.keys
    }
}

/// Keying times and mean think times (s) per kind (clause 5.2.5).
const KEYING: [f64; 5] = [18.0, 3.0, 2.0, 2.0, 2.0];
const THINK: [f64; 5] = [12.0, 12.0, 10.0, 5.0, 5.0];
/// The kind of a New-Order that rolled back by design.
const NEW_ORDER_ROLLBACK: usize = 5;

/// The 23-card deck: 10 New-Order, 10 Payment, 1 of each other.
const DECK: [usize; 23] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4];

/// The kind index of a New-Order (in [`Workload::kinds`] order).
pub const NEW_ORDER: usize = 0;

/// The next transaction's kind, drawn from the 23-card deck of clause
/// 5.2.3 (10 New-Order, 10 Payment, one each of the others).
pub fn deal(rng: &mut TpcRng) -> usize {
    DECK[rng.uniform(0, 22) as usize]
}

struct TpccWorker {
    rng: TpcRng,
    home: i64,
    all: bool,
    think: bool,
    keys: Keys,
    procs: bool,
    sql: Arc<txn::SqlSets>,
    input: Input,
    bufs: txn::Bufs,
    tally: Arc<Tally>,
}

impl Workload for Tpcc {
    fn kinds(&self) -> &[&'static str] {
        &KINDS
    }

    fn worker(&self, user: usize, _users: usize) -> Box<dyn Worker> {
        if user == 0 {
            // A step's users are made before any of them runs.
            *self.tally.step_base.lock().expect("tally") = self.tally.now();
        }
        let (global_user, home) = match self.opts.part {
            None => (user as u64, (user as i64 % self.keys.warehouses) + 1),
            Some(p) => (
                user as u64 * u64::from(p.count.max(1)) + u64::from(p.index),
                i64::from(p.first_home) + user as i64 % i64::from(p.homes.max(1)),
            ),
        };
        Box::new(TpccWorker {
            rng: TpcRng::seeded(self.opts.seed.wrapping_add(global_user).wrapping_mul(0x2545_F491_4F6C_DD1D)),
            home,
            all: self.opts.all_warehouses,
            think: self.opts.think,
            keys: self.keys,
            procs: self.procs,
            sql: self.sql.clone(),
            input: Input {
                lines: Vec::with_capacity(15),
                last: String::with_capacity(16),
                ..Default::default()
            },
            bufs: txn::Bufs::default(),
            tally: self.tally.clone(),
        })
    }

    fn probe(&self, conn: &mut dyn Connection) -> Result<Probe, DbError> {
        let mut p = Probe::new();
        if let Some(c) = conn.counters()? {
            p.insert("xact_all".into(), c.xact_all as f64);
            p.insert("xact_db".into(), c.xact_db as f64);
            crate::figures::probe_log_flushes(&mut p, &c);
            if conn.dialect() == Dialect::Postgres {
                p.insert(crate::figures::PUBLISHED_LATE.into(), 1.0);
            }
        }
        let r = conn.query_one(&Stmt::new("SELECT SUM(d_next_o_id) FROM district"), &[])?;
        p.insert("next_o_id".into(), r.float(0)?);
        Ok(p)
    }

    fn probe_figures(&self, before: &Probe, after: &Probe, window: Duration) -> Vec<Figure> {
        let mins = window.as_secs_f64() / 60.0;
        let mut f = Vec::new();
        if mins <= 0.0 {
            return f;
        }
        let delta = |k: &str| Some(after.get(k)? - before.get(k)?);
        // A server count that went back (a restart within the step) is
        // server_rate's to flag; it is never read as a rate of zero.
        if let Some(x) = delta("xact_db") {
            let late = before.contains_key(crate::figures::PUBLISHED_LATE);
            crate::figures::server_rate(&mut f, "tpm.server", Unit::PerMin, x, window, late);
        }
        if let Some(x) = delta("next_o_id").map(|x| x.max(0.0)) {
            f.push(Figure::new("nopm.districts", x / mins, Unit::PerMin));
        }
        crate::figures::log_flush_figures(&mut f, before, after, window);
        // Over the whole step (every user has ended when this is called):
        // what the districts grew by, for an exact check.
        let base = *self.tally.step_base.lock().expect("tally");
        let now = self.tally.now();
        let step: Vec<u64> = now.iter().zip(base).map(|(n, b)| n - b).collect();
        f.push(Figure::new("step.txn.count", step.iter().sum::<u64>() as f64, Unit::Count));
        f.push(Figure::new("step.txn.new_order.count", step[txn::NEW_ORDER] as f64, Unit::Count));
        f
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    /// Adds the client's NOPM and the per-second client TPM and NOPM
    /// series. `txn.new_order.*` counts committed New-Orders only: the
    /// designed rollbacks are their own kind (`txn.new_order_rollback.*`).
    fn derive(&self, r: &mut StepReport, window: Duration) {
        let minutes = window.as_secs_f64() / 60.0;
        let new_orders = r.get("txn.new_order.count").unwrap_or(0.0);
        if minutes > 0.0 {
            r.figure("nopm.client", new_orders / minutes, Unit::PerMin);
        }
        let extra: Vec<Sample> = r
            .samples
            .iter()
            .filter_map(|s| match s.name.as_str() {
                "tps" => Some(Sample { t_ms: s.t_ms, name: "tpm.client".into(), value: s.value * 60.0 }),
                "txn.new_order.tps" => {
                    Some(Sample { t_ms: s.t_ms, name: "nopm.client".into(), value: s.value * 60.0 })
                }
                _ => None,
            })
            .collect();
        r.samples.extend(extra);
    }
}

impl Worker for TpccWorker {
    fn next(&mut self) -> Duration {
        let kind = deal(&mut self.rng);
        let w = if self.all { self.rng.uniform(1, self.keys.warehouses) } else { self.home };
        self.input.choose(kind, w, &self.keys, &mut self.rng);
        if self.think {
            Duration::from_secs_f64(KEYING[kind])
        } else {
            Duration::ZERO
        }
    }

    fn run_one(&mut self, conn: &mut dyn Connection, _attempt: u32) -> Result<Done, DbError> {
        let dialect = conn.dialect();
        let q = self.sql.get(dialect);
        let rolled_back = if self.procs && conn.caps().procedures && dialect != Dialect::Sqlite {
            txn::run_proc(conn, q, &self.input, &mut self.bufs)?
        } else {
            txn::run_client(conn, q, &self.input, &mut self.bufs)?
        };
        let think = if self.think {
            Duration::from_secs_f64(self.rng.think_secs(THINK[self.input.kind]))
        } else {
            Duration::ZERO
        };
        let kind = if rolled_back { NEW_ORDER_ROLLBACK } else { self.input.kind };
        self.tally.kinds[kind].fetch_add(1, Ordering::Relaxed);
        Ok(Done { kind, rolled_back, think })
    }
}
