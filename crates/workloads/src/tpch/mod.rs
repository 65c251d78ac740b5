//! The TPC-H-like workload: the eight tables from the `tpchgen` crate
//! (dbgen's generators) loaded in parallel, keys, indexes and statistics;
//! the 22 queries per engine family with qgen-style parameters; the refresh
//! functions; the power and throughput tests and their figures
//! (Power@Size, Throughput@Size, QphH@Size, clause 5.4); and answer checks.
//!
//! Library half only: `storbench tpch` records and prints. Nothing here
//! prints; progress and finished queries go to callbacks.

pub mod answer;
pub mod load;
pub mod params;
pub mod queries;
pub mod refresh;
pub mod schema;
pub mod test;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use storbench_db::{Connection, DbError, Dialect, ErrorKind, Row, Stmt, Value};

use crate::runner::Connector;
pub use params::{stream_order, Param, Params};
pub use queries::QueryText;
pub use refresh::RefreshCount;

/// Load progress, reported from the loader threads (the table is the
/// table of the batch just written, or the phase).
pub use crate::dataset::Progress as LoadProgress;

/// What [`build`] did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BuildStats {
    /// Rows loaded.
    pub rows: u64,
    /// Seconds from start to end (tables, load, keys, indexes, statistics).
    pub seconds: f64,
    /// Seconds of the row load alone.
    pub load_seconds: f64,
    /// Seconds of primary keys and indexes.
    pub index_seconds: f64,
    /// Seconds of statistics.
    pub analyze_seconds: f64,
    /// Rows per table.
    pub per_table: BTreeMap<String, u64>,
}

impl BuildStats {
    /// The build step's figures ([`crate::build_report`]), rows per table
    /// included.
    pub fn report(&self) -> storbench_metrics::StepReport {
        crate::build_report(&crate::BuildFigures {
            rows: self.rows,
            load_seconds: self.load_seconds,
            phases: &[
                ("build.seconds", self.seconds),
                ("build.load_seconds", self.load_seconds),
                ("build.index_seconds", self.index_seconds),
                ("build.analyze_seconds", self.analyze_seconds),
            ],
            per_table: Some(&self.per_table),
        })
    }
}

/// TPC-H's headline figures, headline first.
pub const FIGURES: &[crate::FigureSpec] = &[
    crate::FigureSpec { base: "power.geomean", label: "geomean query time", source: "client clock" },
    crate::FigureSpec { base: "tpch.qphh", label: "QphH@Size", source: "client clock" },
];

/// How a `tpch` run reads: its power and throughput figures (per query,
/// the report's own tables and charts), no per-second series.
pub const RUN: crate::figures::Description = crate::figures::Description::run("tpch", "TPC-H", FIGURES);

/// What a built schema is.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SchemaInfo {
    /// The scale factor, from SUPPLIER's cardinality (SF × 10,000).
    pub scale: f64,
}

fn run_all(conn: &mut dyn Connection, stmts: &[String]) -> Result<(), DbError> {
    for s in stmts {
        conn.batch(s)?;
    }
    Ok(())
}

fn first_error(results: Vec<std::thread::Result<Result<(), DbError>>>) -> Result<(), DbError> {
    let mut first = Ok(());
    for r in results {
        let r = r.unwrap_or_else(|_| Err(DbError::new(ErrorKind::Other, "tpch: a worker panicked")));
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Runs independent statements over `jobs` connections, in the order given
/// (lineitem's first, it takes longest).
fn run_parallel(connect: Connector<'_>, setup: &str, stmts: &[String], jobs: usize) -> Result<(), DbError> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs.min(stmts.len()).max(1))
            .map(|_| {
                s.spawn(|| -> Result<(), DbError> {
                    let mut c = connect()?;
                    if !setup.is_empty() {
                        c.batch(setup)?;
                    }
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(sql) = stmts.get(i) else { return Ok(()) };
                        c.batch(sql)?;
                    }
                })
            })
            .collect();
        first_error(handles.into_iter().map(|h| h.join()).collect())
    })
}

/// Creates the eight tables and loads scale factor `sf` with `jobs`
/// connections (SQLite: `jobs` generator threads feeding its one writer),
/// then primary keys, the indexes of [`schema::INDEXES`], and statistics.
pub fn build(
    connect: Connector<'_>,
    sf: f64,
    jobs: usize,
    progress: &(dyn Fn(LoadProgress) + Sync),
) -> Result<BuildStats, DbError> {
    build_until(connect, sf, jobs, &AtomicBool::new(false), progress)
}

fn interrupted() -> DbError {
    DbError::new(ErrorKind::Workload, "tpch: build interrupted")
}

/// [`build`], stopping at the next batch once `stop` is set (the error then
/// says the build was interrupted; the schema is left half-loaded for
/// `--replace` or `drop`).
pub fn build_until(
    connect: Connector<'_>,
    sf: f64,
    jobs: usize,
    stop_flag: &AtomicBool,
    progress: &(dyn Fn(LoadProgress) + Sync),
) -> Result<BuildStats, DbError> {
    if !(sf > 0.0 && sf.is_finite()) {
        return Err(DbError::new(ErrorKind::Workload, format!("tpch: scale factor {sf} must be above 0")));
    }
    let t0 = Instant::now();
    let jobs = jobs.max(1);
    let mut conn = connect()?;
    let dialect = conn.dialect();
    let caps = conn.caps();
    run_all(conn.as_mut(), &schema::create(dialect))?;

    let units = load::units(sf);
    let rows_total = load::total_rows(sf);
    let done = AtomicU64::new(0);
    let per_table: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());
    let account = |table: &'static str, n: usize| {
        let d = done.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        *per_table.lock().expect("per_table").entry(table.to_string()).or_default() += n as u64;
        progress(LoadProgress { rows_done: d, rows_total, table });
    };
    let next_unit = AtomicUsize::new(0);

    let t_load = Instant::now();
    if caps.concurrent_writers {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..jobs.min(units.len()))
                .map(|_| {
                    s.spawn(|| -> Result<(), DbError> {
                        let mut c = connect()?;
                        let mut sink = |t: &'static str, rows: Vec<Vec<Value>>| {
                            if stop_flag.load(Ordering::Relaxed) {
                                return Err(interrupted());
                            }
                            c.load(t, &schema::columns(t), &rows)?;
                            account(t, rows.len());
                            Ok(())
                        };
                        loop {
                            let i = next_unit.fetch_add(1, Ordering::Relaxed);
                            let Some(u) = units.get(i) else { return Ok(()) };
                            load::generate(*u, sf, &mut sink)?;
                        }
                    })
                })
                .collect();
            first_error(handles.into_iter().map(|h| h.join()).collect())
        })?;
    } else {
        // One writer (SQLite): generators run in parallel and hand batches
        // over a bounded channel, so at most 2 × jobs batches are in memory.
        let (tx, rx) = mpsc::sync_channel::<(&'static str, Vec<Vec<Value>>)>(jobs * 2);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| -> Result<(), DbError> {
            let handles: Vec<_> = (0..jobs.min(units.len()))
                .map(|_| {
                    let tx = tx.clone();
                    let (next_unit, units, stop) = (&next_unit, &units, &stop);
                    s.spawn(move || -> Result<(), DbError> {
                        let mut sink = |t: &'static str, rows: Vec<Vec<Value>>| {
                            if stop_flag.load(Ordering::Relaxed) {
                                return Err(interrupted());
                            }
                            if stop.load(Ordering::Relaxed) || tx.send((t, rows)).is_err() {
                                return Err(DbError::new(ErrorKind::Other, "tpch: the writer stopped"));
                            }
                            Ok(())
                        };
                        loop {
                            let i = next_unit.fetch_add(1, Ordering::Relaxed);
                            let Some(u) = units.get(i) else { return Ok(()) };
                            load::generate(*u, sf, &mut sink)?;
                        }
                    })
                })
                .collect();
            std::mem::drop(tx);
            let res = write_batches(conn.as_mut(), rx, &stop, &account);
            let gen = first_error(handles.into_iter().map(|h| h.join()).collect());
            res.and(gen)
        })?;
    }
    let load_seconds = t_load.elapsed().as_secs_f64();
    if stop_flag.load(Ordering::Relaxed) {
        return Err(interrupted());
    }

    progress(LoadProgress { rows_done: done.load(Ordering::Relaxed), rows_total, table: "indexes" });
    let t_idx = Instant::now();
    let idx = schema::indexes(dialect);
    let setup = if dialect == Dialect::Postgres && maintenance_memory_is_default(conn.as_mut())? {
        "SET maintenance_work_mem = '256MB'"
    } else {
        ""
    };
    run_spread(conn.as_mut(), connect, caps.concurrent_writers, setup, &idx, jobs)?;
    run_all(conn.as_mut(), &schema::attach_keys(dialect))?;
    let index_seconds = t_idx.elapsed().as_secs_f64();
    if stop_flag.load(Ordering::Relaxed) {
        return Err(interrupted());
    }

    progress(LoadProgress { rows_done: done.load(Ordering::Relaxed), rows_total, table: "analyze" });
    let t_an = Instant::now();
    let an = schema::analyze(dialect);
    run_spread(conn.as_mut(), connect, caps.concurrent_writers, "", &an, jobs)?;
    let analyze_seconds = t_an.elapsed().as_secs_f64();
    let per_table = per_table.into_inner().expect("per_table");
    Ok(BuildStats {
        rows: per_table.values().sum(),
        seconds: t0.elapsed().as_secs_f64(),
        load_seconds,
        index_seconds,
        analyze_seconds,
        per_table,
    })
}

/// Whether the server leaves `maintenance_work_mem` at its default, so the
/// index builds may raise it (256 MB a connection, `jobs` at once); a
/// server that sets it anywhere (its configuration, a managed instance's
/// `conf`, the database or the role) keeps its own. A server held to a
/// small memory limit needs one: two builds at 256 MB in a 384 MB group
/// were killed by the group's OOM killer.
pub fn maintenance_memory_is_default(conn: &mut dyn Connection) -> Result<bool, DbError> {
    let q = Stmt::new("SELECT source FROM pg_settings WHERE name = 'maintenance_work_mem'");
    Ok(conn.query_one(&q, &[])?.text(0)? == "default")
}

/// Runs `stmts` over `jobs` connections (each after `setup`) where writers
/// may run together, else one after another on `conn`.
fn run_spread(
    conn: &mut dyn Connection,
    connect: Connector<'_>,
    concurrent: bool,
    setup: &str,
    stmts: &[String],
    jobs: usize,
) -> Result<(), DbError> {
    if concurrent {
        run_parallel(connect, setup, stmts, jobs)
    } else {
        run_all(conn, stmts)
    }
}

/// The one writer of a load (SQLite): writes the generators' batches as
/// they come, committing every ~500k rows (big transactions, bounded WAL);
/// on an error tells the generators to stop.
fn write_batches(
    conn: &mut dyn Connection,
    rx: mpsc::Receiver<(&'static str, Vec<Vec<Value>>)>,
    stop: &AtomicBool,
    account: &dyn Fn(&'static str, usize),
) -> Result<(), DbError> {
    let mut in_txn = 0usize;
    let mut res = Ok(());
    for (t, rows) in rx.iter() {
        let r = (|| {
            if in_txn == 0 {
                conn.begin()?;
            }
            conn.load(t, &schema::columns(t), &rows)?;
            in_txn += rows.len();
            if in_txn >= 500_000 {
                conn.commit()?;
                in_txn = 0;
            }
            Ok(())
        })();
        if let Err(e) = r {
            res = Err(e);
            stop.store(true, Ordering::Relaxed);
            break;
        }
        account(t, rows.len());
    }
    std::mem::drop(rx);
    if res.is_ok() && in_txn > 0 {
        res = conn.commit();
    }
    res
}

/// The built schema, or `None` when there is none.
pub fn inspect(conn: &mut dyn Connection) -> Result<Option<SchemaInfo>, DbError> {
    let q = Stmt::new("SELECT COUNT(*) FROM supplier");
    match conn.query_one(&q, &[]) {
        Ok(r) => {
            let n = r.int(0)?;
            if n == 0 {
                return Ok(None);
            }
            // Round to the scale factors tpchgen accepts (SUPPLIER is
            // SF × 10,000 rows, floored).
            let sf = (n as f64 / 10_000.0 * 1e4).round() / 1e4;
            Ok(Some(SchemaInfo { scale: sf }))
        }
        Err(e) if e.kind() == ErrorKind::MissingObject => Ok(None),
        Err(e) if e.to_string().contains("doesn't exist") => Ok(None),
        Err(e) => Err(e),
    }
}

/// Tables only TPC-H has; CUSTOMER and ORDERS are also TPC-C's.
const OWN_TABLES: [&str; 6] = ["lineitem", "partsupp", "supplier", "part", "nation", "region"];

/// A table of another schema (TPC-C's CUSTOMER or ORDERS) that a TPC-H
/// build would collide with, when no TPC-H table is there.
pub fn foreign_table(conn: &mut dyn Connection) -> Result<Option<&'static str>, DbError> {
    crate::names::foreign(conn, &OWN_TABLES)
}

/// Drops the eight tables and any Q15 view a stopped run left. CUSTOMER
/// and ORDERS are dropped only beside a TPC-H table: in a database that
/// holds TPC-C's tables of those names and nothing of TPC-H, they stay.
pub fn drop(conn: &mut dyn Connection) -> Result<(), DbError> {
    let ours = crate::names::holds_any(conn, &OWN_TABLES)?;
    let stmts = schema::drop(conn.dialect(), (0..=40).map(queries::view_name));
    run_all(conn, &crate::names::keep_foreign(stmts, ours))
}

/// How `tpch build` builds: the scale factor and loading connections.
#[derive(Clone, Copy, Debug)]
pub struct BuildOptions {
    /// Scale factor, above 0.
    pub scale: f64,
    /// Connections loading in parallel.
    pub jobs: usize,
}

/// How `tpch check` checks: which queries (all when empty), and the
/// database whose answers to compare with instead of the SF 1 reference
/// answers.
pub struct CheckOptions {
    /// Only these queries.
    pub queries: Vec<u8>,
    /// Another engine's database of the same scale.
    pub against: Option<Box<dyn Connection>>,
}

/// TPC-H's data behind the workload contract ([`crate::Dataset`]).
pub struct Data;

impl crate::Checked for CheckResult {
    fn passed(&self) -> bool {
        CheckResult::passed(self)
    }
}

impl crate::Dataset for Data {
    type Options = BuildOptions;
    type Info = SchemaInfo;
    type CheckOptions = CheckOptions;
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
        format!("a TPC-H schema of scale {}", info.scale)
    }
    fn foreign_table(
        &self,
        conn: &mut dyn Connection,
    ) -> Result<Option<(&'static str, &'static str)>, DbError> {
        Ok(foreign_table(conn)?.map(|t| (t, "TPC-C")))
    }
    fn build_label(&self, o: &BuildOptions) -> String {
        format!("tpch build SF {}", o.scale)
    }
    fn build_config(&self, o: &BuildOptions) -> serde_json::Value {
        serde_json::json!({ "scale": o.scale, "jobs": o.jobs, "indexes": schema::INDEXES })
    }
    fn build_params(&self, o: &BuildOptions) -> serde_json::Value {
        serde_json::json!({ "scale": o.scale, "jobs": o.jobs })
    }
    fn build(
        &self,
        connect: Connector<'_>,
        o: &BuildOptions,
        stop: &AtomicBool,
        progress: &(dyn Fn(crate::Progress) + Sync),
    ) -> Result<crate::Built, crate::BuildError> {
        let s = match build_until(connect, o.scale, o.jobs, stop, progress) {
            Ok(s) => s,
            Err(_) if stop.load(Ordering::Relaxed) => return Err(crate::BuildError::Interrupted),
            Err(e) => return Err(e.into()),
        };
        let line = format!(
            "tpch build: SF {}, {}",
            o.scale,
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
    fn check(
        &self,
        conn: &mut dyn Connection,
        info: &SchemaInfo,
        mut o: CheckOptions,
    ) -> Result<Vec<CheckResult>, DbError> {
        let against: Option<&mut dyn Connection> = match o.against.as_mut() {
            Some(c) => Some(c.as_mut()),
            None => None,
        };
        check(conn, against, info.scale, &o.queries, &|_| {})
    }
    fn drop(&self, conn: &mut dyn Connection) -> Result<(), DbError> {
        drop(conn)
    }
}

/// How one query or refresh function ended.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// It ran to the end.
    Ok,
    /// The server cancelled it at `--timeout`.
    TimedOut,
    /// The user stopped the run while it ran; the server cancelled it.
    Cancelled,
    /// It failed.
    Failed(String),
}

/// A unit of a stream: a query or a refresh function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Item {
    /// Query 1–22.
    Query(u8),
    /// RF1 of refresh pair N (1-based).
    Rf1(usize),
    /// RF2 of refresh pair N.
    Rf2(usize),
}

impl Item {
    /// `q14`, `rf1`, `rf2`.
    pub fn label(&self) -> String {
        match self {
            Item::Query(q) => format!("q{q}"),
            Item::Rf1(_) => "rf1".into(),
            Item::Rf2(_) => "rf2".into(),
        }
    }
}

/// What running one item gave.
#[derive(Clone, Debug)]
pub struct ItemResult {
    /// Stream number (0 = power test; the refresh stream of a throughput
    /// test is numbered after the query streams).
    pub stream: usize,
    /// What ran.
    pub item: Item,
    /// Wall seconds, first statement sent to last result read.
    pub seconds: f64,
    /// Rows returned (queries) or orders + lineitems written (refresh).
    pub rows: u64,
    /// How it ended.
    pub status: Status,
    /// The substitution values (queries).
    pub params: Params,
    /// The answer (queries that completed).
    pub answer: Vec<Row>,
    /// Bytes of temporary files the server wrote meanwhile (PostgreSQL,
    /// power test only: the counter is per database).
    pub temp_bytes: Option<u64>,
}

/// Whether `e` is the server's statement timeout (PostgreSQL 57014 by
/// message, MariaDB 1969, MySQL 3024).
fn is_timeout(e: &DbError) -> bool {
    let m = e.to_string();
    m.contains("statement timeout")
        || m.contains("max_statement_time")
        || m.contains("execution time exceeded")
}

/// Sets (or with `None` clears) the server-side per-statement time limit of
/// this connection. SQLite has none through this connection API: an error.
pub fn set_timeout(conn: &mut dyn Connection, t: Option<Duration>) -> Result<(), DbError> {
    let ms = t.map(|t| t.as_millis().max(1)).unwrap_or(0);
    match conn.dialect() {
        Dialect::Postgres => conn.batch(&format!("SET statement_timeout = {ms}")),
        Dialect::Mysql => {
            // MariaDB counts seconds in max_statement_time; MySQL counts
            // milliseconds in max_execution_time (SELECTs only).
            conn.batch(&format!("SET SESSION max_statement_time = {}", ms as f64 / 1000.0))
                .or_else(|_| conn.batch(&format!("SET SESSION max_execution_time = {ms}")))
        }
        Dialect::Sqlite if t.is_none() => Ok(()),
        Dialect::Sqlite => Err(DbError::new(
            ErrorKind::Workload,
            "tpch: SQLite cannot cancel a statement through storbench's connection API (no --timeout)",
        )),
    }
}

/// The server's id for this connection (PostgreSQL backend pid, MySQL
/// connection id), used to cancel its statement from another connection.
pub fn backend_id(conn: &mut dyn Connection) -> Result<Option<i64>, DbError> {
    let sql = match conn.dialect() {
        Dialect::Postgres => "SELECT pg_backend_pid()",
        Dialect::Mysql => "SELECT CONNECTION_ID()",
        Dialect::Sqlite => return Ok(None),
    };
    Ok(Some(conn.query_one(&Stmt::new(sql), &[])?.int(0)?))
}

/// Cancels the statement running on backend `id`, from `conn`.
pub fn cancel(conn: &mut dyn Connection, id: i64) -> Result<(), DbError> {
    match conn.dialect() {
        Dialect::Postgres => conn.batch(&format!("SELECT pg_cancel_backend({id})")),
        Dialect::Mysql => conn.batch(&format!("KILL QUERY {id}")),
        Dialect::Sqlite => Ok(()),
    }
}

/// PostgreSQL's temp-file bytes of this database so far, with this
/// backend's pending statistics flushed first (PostgreSQL 15 holds them up
/// to a second otherwise); `None` elsewhere.
pub fn temp_bytes(conn: &mut dyn Connection) -> Option<u64> {
    if conn.dialect() != Dialect::Postgres {
        return None;
    }
    let _ = conn.batch("SELECT pg_stat_force_next_flush()");
    conn.query_one(
        &Stmt::new("SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()"),
        &[],
    )
    .ok()
    .and_then(|r| r.int(0).ok())
    .map(|v| v.max(0) as u64)
}

/// Runs one query (Q15: view, query, drop view) and times it.
pub fn run_query(conn: &mut dyn Connection, stream: usize, qt: &QueryText, params: Params) -> ItemResult {
    let t = Instant::now();
    let mut res = (|| -> Result<Vec<Row>, DbError> {
        for s in &qt.before {
            conn.batch(s)?;
        }
        conn.query(&Stmt::new(qt.main.clone()), &[])
    })();
    for s in &qt.after {
        let r = conn.batch(s);
        if res.is_ok() {
            if let Err(e) = r {
                res = Err(e);
            }
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let (status, answer) = match res {
        Ok(rows) => (Status::Ok, rows),
        Err(e) if is_timeout(&e) => (Status::TimedOut, Vec::new()),
        Err(e) => (Status::Failed(e.to_string()), Vec::new()),
    };
    ItemResult {
        stream,
        item: Item::Query(qt.number),
        seconds,
        rows: answer.len() as u64,
        status,
        params,
        answer,
        temp_bytes: None,
    }
}

/// Runs one refresh function and times it (RF1's rows are generated
/// before the clock starts).
pub fn run_refresh(conn: &mut dyn Connection, stream: usize, item: Item, sf: f64) -> ItemResult {
    let rows = match item {
        Item::Rf1(p) => Some(refresh::rf1_rows(p, sf)),
        _ => None,
    };
    let t = Instant::now();
    let r = match (item, &rows) {
        (Item::Rf1(_), Some(rows)) => refresh::rf1(conn, rows),
        (Item::Rf2(p), _) => refresh::rf2(conn, p, sf),
        _ => Ok(RefreshCount::default()),
    };
    let seconds = t.elapsed().as_secs_f64();
    let (status, rows) = match r {
        Ok(c) => (Status::Ok, c.orders + c.lineitems),
        Err(e) => (Status::Failed(e.to_string()), 0),
    };
    ItemResult {
        stream,
        item,
        seconds,
        rows,
        status,
        params: Vec::new(),
        answer: Vec::new(),
        temp_bytes: None,
    }
}

/// What a run does: which queries, with what parameters.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The scale factor of the schema.
    pub scale: f64,
    /// Seed of the parameter draws.
    pub seed: u64,
    /// The specification's validation parameters instead of drawn ones.
    pub validation: bool,
    /// Only these queries (in stream order); empty = all 22.
    pub only: Vec<u8>,
    /// Per-query server-side time limit.
    pub timeout: Option<Duration>,
}

impl RunOptions {
    /// The queries stream `s` runs, in its order.
    pub fn order(&self, s: usize) -> Vec<u8> {
        stream_order(s).into_iter().filter(|q| self.only.is_empty() || self.only.contains(q)).collect()
    }

    /// Query `q` of stream `s`, rendered for `d`.
    pub fn query(&self, q: u8, s: usize, d: Dialect) -> (QueryText, Params) {
        let p = if self.validation {
            params::validation(q, self.scale)
        } else {
            params::generate(q, self.scale, s, self.seed)
        };
        (queries::text(q, &p, d, s), p)
    }
}

/// Cancels the running statements of registered backends once `stop` is
/// set: Ctrl-C ends a long query at once, and the finished ones are kept.
pub struct Canceller<'a> {
    ids: Mutex<Vec<i64>>,
    stop: &'a AtomicBool,
    done: AtomicBool,
}

impl<'a> Canceller<'a> {
    /// A canceller watching `stop`.
    pub fn new(stop: &'a AtomicBool) -> Self {
        Canceller { ids: Mutex::new(Vec::new()), stop, done: AtomicBool::new(false) }
    }

    /// Registers a connection whose statements `stop` should cancel.
    pub fn register(&self, conn: &mut dyn Connection) {
        if let Ok(Some(id)) = backend_id(conn) {
            self.ids.lock().expect("ids").push(id);
        }
    }

    /// Watches until [`Canceller::finish`]; run it on its own thread.
    pub fn watch(&self, connect: Connector<'_>) {
        while !self.done.load(Ordering::Relaxed) {
            if self.stop.load(Ordering::Relaxed) {
                let ids = self.ids.lock().expect("ids").clone();
                if !ids.is_empty() {
                    if let Ok(mut c) = connect() {
                        for id in ids {
                            let _ = cancel(c.as_mut(), id);
                        }
                    }
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ends [`Canceller::watch`].
    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// Runs one query stream on its own connection: the queries of `opts` in
/// stream `s`'s order, each reported to `on_done` as it ends. Stops early
/// when `stop` is set.
pub fn query_stream(
    conn: &mut dyn Connection,
    s: usize,
    opts: &RunOptions,
    stop: &AtomicBool,
    on_done: &(dyn Fn(ItemResult) + Sync),
) -> Result<(), DbError> {
    if opts.timeout.is_some() {
        set_timeout(conn, opts.timeout)?;
    }
    let d = conn.dialect();
    for q in opts.order(s) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (qt, p) = opts.query(q, s, d);
        let mut r = run_query(conn, s, &qt, p);
        if stop.load(Ordering::Relaxed) && r.status != Status::Ok {
            r.status = Status::Cancelled;
        }
        on_done(r);
    }
    Ok(())
}

/// What a throughput test measured.
#[derive(Clone, Debug, Default)]
pub struct ThroughputRun {
    /// Seconds from the first stream's start to the last stream's end (Ts).
    pub seconds: f64,
    /// Every item that ended.
    pub items: Vec<ItemResult>,
    /// The test was stopped before every stream ended.
    pub interrupted: bool,
}

/// The throughput test (clause 5.3.4): `streams` query streams (numbered
/// 1..=S) on their own connections, and one refresh stream doing S RF1/RF2
/// pairs (pairs 2..=S+1; the power test uses pair 1).
pub fn throughput(
    connect: Connector<'_>,
    streams: usize,
    opts: &RunOptions,
    stop: &AtomicBool,
    on_done: &(dyn Fn(&ItemResult) + Sync),
) -> Result<ThroughputRun, DbError> {
    let items = Mutex::new(Vec::new());
    let record = |r: ItemResult| {
        on_done(&r);
        items.lock().expect("items").push(r);
    };
    let canceller = Canceller::new(stop);
    {
        let mut c = connect()?;
        refresh::clean(c.as_mut(), streams + 1, opts.scale)?;
    }
    let t0 = Instant::now();
    let res = std::thread::scope(|sc| {
        sc.spawn(|| canceller.watch(connect));
        let mut handles = Vec::new();
        for s in 1..=streams {
            let (record, canceller) = (&record, &canceller);
            handles.push(sc.spawn(move || -> Result<(), DbError> {
                let mut c = connect()?;
                canceller.register(c.as_mut());
                query_stream(c.as_mut(), s, opts, stop, record)
            }));
        }
        let refresh_stream = streams + 1;
        let (record, canceller) = (&record, &canceller);
        handles.push(sc.spawn(move || -> Result<(), DbError> {
            let mut c = connect()?;
            canceller.register(c.as_mut());
            for pair in 2..=streams + 1 {
                for item in [Item::Rf1(pair), Item::Rf2(pair)] {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    record(run_refresh(c.as_mut(), refresh_stream, item, opts.scale));
                }
            }
            Ok(())
        }));
        let r = first_error(handles.into_iter().map(|h| h.join()).collect());
        canceller.finish();
        r
    });
    let seconds = t0.elapsed().as_secs_f64();
    res?;
    Ok(ThroughputRun {
        seconds,
        items: items.into_inner().expect("items"),
        interrupted: stop.load(Ordering::Relaxed),
    })
}

/// Geometric mean of positive values (zeros count as the specification's
/// floor; see [`power_size`]).
pub fn geomean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    (v.iter().map(|x| x.max(1e-9).ln()).sum::<f64>() / v.len() as f64).exp()
}

/// Power@Size (clause 5.4.1): 3600 × SF / (Π QI × Π RI)^(1/24). Clause
/// 5.4.1.4 raises a *query* interval below 1/1000 of the longest query's
/// to that 1/1000; refresh intervals are used as measured. Over fewer than
/// 24 intervals (a subset), the root is their count's.
pub fn power_size(sf: f64, query_s: &[f64], refresh_s: &[f64]) -> f64 {
    if query_s.is_empty() && refresh_s.is_empty() {
        return 0.0;
    }
    let longest = query_s.iter().copied().fold(0.0, f64::max);
    let all: Vec<f64> =
        query_s.iter().map(|&x| x.max(longest / 1000.0)).chain(refresh_s.iter().copied()).collect();
    3600.0 * sf / geomean(&all)
}

/// Throughput@Size (clause 5.4.2): S × 22 × 3600 / Ts × SF.
pub fn throughput_size(sf: f64, streams: usize, queries_per_stream: usize, ts: f64) -> f64 {
    if ts <= 0.0 {
        return 0.0;
    }
    streams as f64 * queries_per_stream as f64 * 3600.0 / ts * sf
}

/// QphH@Size (clause 5.4.3): √(Power@Size × Throughput@Size).
pub fn qphh(power: f64, throughput: f64) -> f64 {
    (power * throughput).sqrt()
}

/// One query's check.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckResult {
    /// Query number.
    pub query: u8,
    /// Rows the checked engine returned.
    pub rows: usize,
    /// The first difference, or `None` when the answer matches.
    pub mismatch: Option<answer::Mismatch>,
    /// The query could not run (message), counted as a failure.
    pub error: Option<String>,
}

impl CheckResult {
    /// The answer matched.
    pub fn passed(&self) -> bool {
        self.mismatch.is_none() && self.error.is_none()
    }
}

/// Runs the 22 queries with the validation parameters and compares each
/// answer with `reference(q)` (rows of cells), or, where that gives `None`,
/// with the same query on `against`.
pub fn check(
    conn: &mut dyn Connection,
    against: Option<&mut dyn Connection>,
    scale: f64,
    only: &[u8],
    on_done: &dyn Fn(&CheckResult),
) -> Result<Vec<CheckResult>, DbError> {
    let opts = RunOptions { scale, seed: 0, validation: true, only: only.to_vec(), timeout: None };
    let mut other = against;
    let mut out = Vec::new();
    for q in 1..=22u8 {
        if !only.is_empty() && !only.contains(&q) {
            continue;
        }
        let (qt, p) = opts.query(q, 0, conn.dialect());
        let got = run_query(conn, 0, &qt, p.clone());
        let sf1 = other.is_none();
        let want: Result<Vec<Vec<answer::Cell>>, String> = match other.as_deref_mut() {
            Some(o) => {
                let (qt, p) = opts.query(q, 0, o.dialect());
                let r = run_query(o, 0, &qt, p);
                match r.status {
                    Status::Ok => Ok(answer::cells(&r.answer)),
                    s => Err(format!("the reference engine: {s:?}")),
                }
            }
            None => answer::reference_sf1(q).ok_or_else(|| format!("no reference answer for Q{q}")),
        };
        let res = match (&got.status, want) {
            (Status::Ok, Ok(w)) => CheckResult {
                query: q,
                rows: got.answer.len(),
                mismatch: if sf1 {
                    answer::compare_sf1(q, &answer::cells(&got.answer), &w)
                } else {
                    answer::compare_engine(q, &answer::cells(&got.answer), &w)
                },
                error: None,
            },
            (Status::Ok, Err(e)) => {
                CheckResult { query: q, rows: got.answer.len(), mismatch: None, error: Some(e) }
            }
            (s, _) => CheckResult { query: q, rows: 0, mismatch: None, error: Some(format!("{s:?}")) },
        };
        on_done(&res);
        out.push(res);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_size_is_the_specifications_geometric_mean() {
        // 24 intervals of 1 s at SF 1: 3600.
        assert!((power_size(1.0, &[1.0; 22], &[1.0, 1.0]) - 3600.0).abs() < 1e-6);
        // Doubling every interval halves it.
        assert!((power_size(1.0, &[2.0; 22], &[2.0, 2.0]) - 1800.0).abs() < 1e-6);
        // A query below 1/1000 of the longest counts as 1/1000 of it.
        let mut q = [1.0; 22];
        q[0] = 1000.0;
        q[1] = 0.0001;
        let mut q2 = q;
        q2[1] = 1.0;
        assert!((power_size(1.0, &q, &[1.0, 1.0]) - power_size(1.0, &q2, &[1.0, 1.0])).abs() < 1e-6);
        assert!((throughput_size(1.0, 2, 22, 3600.0) - 44.0).abs() < 1e-9);
        assert!((qphh(100.0, 25.0) - 50.0).abs() < 1e-9);
        assert!((geomean(&[1.0, 4.0]) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn power_size_floors_query_intervals_but_not_refresh_intervals() {
        // Clause 5.4.1.4 adjusts query timing intervals only. Longest query
        // 1000 s: a 0.1 s query counts as 1 s, a 0.1 s refresh as 0.1 s.
        let mut q = [1.0; 22];
        q[0] = 1000.0;
        q[1] = 0.1;
        let rf = [0.1, 1.0];
        // Π = 1000 × 1 (Q2 floored) × 1^20 × 0.1 × 1 = 100, so the mean is 100^(1/24).
        let want = 3600.0 / 100f64.powf(1.0 / 24.0);
        let got = power_size(1.0, &q, &rf);
        assert!((got - want).abs() < 1e-9 * want, "{got} vs {want}");
        // Had the refresh interval been floored too, Π would be 1000.
        let floored_too = 3600.0 / 1000f64.powf(1.0 / 24.0);
        assert!((got - floored_too).abs() > 1.0, "{got} vs {floored_too}");
    }
}
