//! TPC-B-like: pgbench's built-in `tpcb-like` script on every engine, on
//! pgbench's own tables, so `pgbench` and storbench can run against the same
//! PostgreSQL database and be compared.
//!
//! Per transaction (pgbench's script, clause for clause): pick `aid`, `bid`,
//! `tid` uniformly over the scale and `delta` in −5000..=5000; `BEGIN`;
//! update the account; read its balance back; update the teller and the
//! branch; insert a history row; `COMMIT`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storbench_db::{Connection, DbError, Dialect, ErrorKind, Stmt, Value};
use storbench_metrics::{Sample, StepReport};

use crate::figures::{Column, FigureSpec};
use crate::rand_tpc::TpcRng;
use crate::runner::{Connector, Done, Probe, Worker, Workload};

/// Accounts per unit of scale (pgbench's `naccounts`).
pub const ACCOUNTS: i64 = 100_000;
/// Tellers per unit of scale.
pub const TELLERS: i64 = 10;

/// Options of `tpcb init`.
#[derive(Clone, Debug)]
pub struct InitOptions {
    /// Scale factor: branches.
    pub scale: i64,
    /// Fill factor of accounts, tellers and branches (PostgreSQL only;
    /// other engines have no per-table fill factor).
    pub fillfactor: u32,
    /// Connections loading accounts in parallel.
    pub jobs: usize,
}

/// Load progress, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct LoadProgress {
    /// Account rows loaded so far.
    pub rows_done: u64,
    /// Account rows in all.
    pub rows_total: u64,
}

/// What `init` did.
#[derive(Clone, Debug)]
pub struct InitStats {
    /// Rows loaded over all tables.
    pub rows: u64,
    /// Seconds spent loading rows.
    pub load_seconds: f64,
    /// Seconds spent on keys, vacuum and analyze.
    pub index_seconds: f64,
}

impl InitStats {
    /// The init step's figures ([`crate::build_report`]).
    pub fn report(&self) -> StepReport {
        crate::build_report(&crate::BuildFigures {
            rows: self.rows,
            load_seconds: self.load_seconds,
            phases: &[("load.seconds", self.load_seconds), ("index.seconds", self.index_seconds)],
            per_table: None,
        })
    }
}

/// TPC-B's headline figure: TPS as pgbench counts it.
pub const FIGURES: &[FigureSpec] =
    &[FigureSpec { base: "tps", label: "TPS", source: "client count, as pgbench" }];

/// The figures of a `tpcb-init` run the report shows.
pub const INIT_FIGURES: &[FigureSpec] =
    &[FigureSpec { base: "load.seconds", label: "load time", source: "" }];

/// How a `tpcb` run reads: TPS, and its per-second series.
pub const RUN: crate::figures::Description = crate::figures::Description {
    series: &["tps"],
    ..crate::figures::Description::run("tpcb", "TPC-B", FIGURES)
};

/// How a `tpcb-init` run reads.
pub const INIT: crate::figures::Description =
    crate::figures::Description::setup("tpcb-init", "TPC-B init", INIT_FIGURES);

/// A step's line and the run's summary.
pub const COLUMNS: &[Column] = &[
    ("tps.client", "TPS"),
    ("tps.server", "TPS server"),
    ("lat.mean", "lat mean µs"),
    ("lat.p95", "p95 µs"),
    ("lat.p99", "p99 µs"),
    ("lat.max", "max µs"),
    ("log.commits_per_flush", "commits/flush"),
    ("errors", "errors"),
    ("retries", "retries"),
];

const TABLES: [&str; 4] = ["pgbench_history", "pgbench_tellers", "pgbench_accounts", "pgbench_branches"];

/// Drops pgbench's tables if they exist.
pub fn drop(conn: &mut dyn Connection) -> Result<(), DbError> {
    for t in TABLES {
        conn.batch(&format!("DROP TABLE IF EXISTS {t}"))?;
    }
    Ok(())
}

fn ddl(dialect: Dialect, fillfactor: u32) -> Vec<String> {
    let with = |t: &str| match dialect {
        Dialect::Postgres => format!("{t} WITH (fillfactor={fillfactor})"),
        Dialect::Mysql => format!("{t} ENGINE=InnoDB"),
        Dialect::Sqlite => t.to_string(),
    };
    // MySQL/InnoDB and SQLite cluster rows by primary key: create it up
    // front and load in key order. PostgreSQL adds keys after the load, as
    // pgbench does.
    let pk = |col: &str| {
        if dialect == Dialect::Postgres {
            String::new()
        } else {
            format!(", PRIMARY KEY ({col})")
        }
    };
    let history = match dialect {
        Dialect::Mysql => "CREATE TABLE pgbench_history (tid INT, bid INT, aid INT, delta INT, mtime TIMESTAMP NULL, filler CHAR(22)) ENGINE=InnoDB",
        _ => "CREATE TABLE pgbench_history (tid INT, bid INT, aid INT, delta INT, mtime TIMESTAMP, filler CHAR(22))",
    };
    vec![
        history.to_string(),
        with(&format!(
            "CREATE TABLE pgbench_tellers (tid INT NOT NULL, bid INT, tbalance INT, filler CHAR(84){})",
            pk("tid")
        )),
        with(&format!(
            "CREATE TABLE pgbench_accounts (aid INT NOT NULL, bid INT, abalance INT, filler CHAR(84){})",
            pk("aid")
        )),
        with(&format!(
            "CREATE TABLE pgbench_branches (bid INT NOT NULL, bbalance INT, filler CHAR(88){})",
            pk("bid")
        )),
    ]
}

/// Creates pgbench's tables at `opts.scale` and loads them (accounts in
/// parallel over `opts.jobs` connections where the engine takes concurrent
/// writers), then keys and statistics. Drops existing tables first.
///
/// A load that fails midway (a full disk) leaves nothing [`inspect`]
/// accepts: the tables it made are dropped, and should that fail too (a
/// full disk may refuse the drop), the branches — the rows `inspect`
/// counts — are loaded last, once every account is in and the keys and
/// statistics are made, so a database without them reads as no TPC-B
/// tables and `run` refuses it.
pub fn init(
    connect: Connector<'_>,
    opts: &InitOptions,
    progress: &(dyn Fn(LoadProgress) + Sync),
) -> Result<InitStats, DbError> {
    let mut conn = connect()?;
    let dialect = conn.dialect();
    drop(conn.as_mut())?;
    let made = (|| {
        for stmt in ddl(dialect, opts.fillfactor) {
            conn.batch(&stmt)?;
        }
        load(conn.as_mut(), connect, opts, progress)
    })();
    if made.is_err() {
        // Closing the connection ends whatever transaction it was in (no
        // ROLLBACK sent blind); a fresh one drops the tables.
        std::mem::drop(conn);
        if let Ok(mut c) = connect() {
            let _ = drop(c.as_mut());
        }
    }
    made
}

/// Loads the created tables, then keys and statistics (see [`init`]).
fn load(
    conn: &mut dyn Connection,
    connect: Connector<'_>,
    opts: &InitOptions,
    progress: &(dyn Fn(LoadProgress) + Sync),
) -> Result<InitStats, DbError> {
    let dialect = conn.dialect();
    let t0 = Instant::now();
    let scale = opts.scale;
    conn.begin()?;
    let tellers: Vec<Vec<Value>> = (1..=scale * TELLERS)
        .map(|t| {
            vec![Value::Int(t), Value::Int((t - 1) / TELLERS + 1), Value::Int(0), Value::Text(String::new())]
        })
        .collect();
    conn.load("pgbench_tellers", &["tid", "bid", "tbalance", "filler"], &tellers)?;
    conn.commit()?;

    let total = (scale * ACCOUNTS) as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    let jobs = if conn.caps().concurrent_writers { opts.jobs.clamp(1, scale as usize) } else { 1 };
    let load_range = |c: &mut dyn Connection, from: i64, to: i64| -> Result<(), DbError> {
        const CHUNK: i64 = 10_000;
        let mut aid = from;
        while aid <= to {
            let end = (aid + CHUNK - 1).min(to);
            let rows: Vec<Vec<Value>> = (aid..=end)
                .map(|a| {
                    vec![
                        Value::Int(a),
                        Value::Int((a - 1) / ACCOUNTS + 1),
                        Value::Int(0),
                        Value::Text(String::new()),
                    ]
                })
                .collect();
            c.begin()?;
            c.load("pgbench_accounts", &["aid", "bid", "abalance", "filler"], &rows)?;
            c.commit()?;
            let n = done.fetch_add((end - aid + 1) as u64, std::sync::atomic::Ordering::Relaxed)
                + (end - aid + 1) as u64;
            progress(LoadProgress { rows_done: n, rows_total: total });
            aid = end + 1;
        }
        Ok(())
    };
    if jobs == 1 {
        load_range(conn, 1, scale * ACCOUNTS)?;
    } else {
        let per = scale / jobs as i64;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..jobs as i64)
                .map(|j| {
                    let from_branch = j * per + 1;
                    let to_branch = if j == jobs as i64 - 1 { scale } else { (j + 1) * per };
                    let load_range = &load_range;
                    s.spawn(move || -> Result<(), DbError> {
                        let mut c = connect()?;
                        load_range(c.as_mut(), (from_branch - 1) * ACCOUNTS + 1, to_branch * ACCOUNTS)
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| h.join().expect("loader thread panicked"))
        })?;
    }
    let mut load_seconds = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    match dialect {
        Dialect::Postgres => {
            conn.batch(
                "VACUUM ANALYZE pgbench_branches, pgbench_tellers, pgbench_accounts, pgbench_history",
            )?;
            conn.batch(
                "ALTER TABLE pgbench_branches ADD PRIMARY KEY (bid); \
                 ALTER TABLE pgbench_tellers ADD PRIMARY KEY (tid); \
                 ALTER TABLE pgbench_accounts ADD PRIMARY KEY (aid)",
            )?;
        }
        Dialect::Mysql => {
            conn.batch("ANALYZE TABLE pgbench_branches, pgbench_tellers, pgbench_accounts, pgbench_history")?
        }
        Dialect::Sqlite => conn.batch("ANALYZE")?,
    }
    let mut index_seconds = t1.elapsed().as_secs_f64();
    // Last, once keys and statistics are in, as the mark of a whole init
    // (see init): `scale` rows, then their own statistics.
    let t2 = Instant::now();
    let branches: Vec<Vec<Value>> =
        (1..=scale).map(|b| vec![Value::Int(b), Value::Int(0), Value::Text(String::new())]).collect();
    conn.begin()?;
    conn.load("pgbench_branches", &["bid", "bbalance", "filler"], &branches)?;
    conn.commit()?;
    load_seconds += t2.elapsed().as_secs_f64();
    let t3 = Instant::now();
    conn.batch(match dialect {
        Dialect::Postgres => "ANALYZE pgbench_branches",
        Dialect::Mysql => "ANALYZE TABLE pgbench_branches",
        Dialect::Sqlite => "ANALYZE pgbench_branches",
    })?;
    index_seconds += t3.elapsed().as_secs_f64();
    Ok(InitStats { rows: (scale + scale * TELLERS) as u64 + total, load_seconds, index_seconds })
}

/// The scale of the pgbench tables in this database, or `None` when they
/// are absent (or empty).
pub fn inspect(conn: &mut dyn Connection) -> Result<Option<i64>, DbError> {
    if !table_exists(conn, "pgbench_branches")? {
        return Ok(None);
    }
    match conn.query_one(&Stmt::new("SELECT COUNT(*) FROM pgbench_branches"), &[]) {
        Ok(r) => {
            let n = r.int(0)?;
            Ok(if n > 0 { Some(n) } else { None })
        }
        Err(e) if e.kind() == ErrorKind::MissingObject => Ok(None),
        Err(e) => Err(e),
    }
}

/// TPC-B's data behind the workload contract ([`crate::Dataset`]):
/// pgbench's tables, built by `init`. It has no checks of its own.
pub struct Data;

/// A check of pgbench's tables: TPC-B has none.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub enum NoCheck {}

impl crate::Checked for NoCheck {
    fn passed(&self) -> bool {
        match *self {}
    }
}

impl crate::Dataset for Data {
    type Options = InitOptions;
    /// The scale.
    type Info = i64;
    type CheckOptions = ();
    type Check = NoCheck;

    fn name(&self) -> &'static str {
        RUN.kind
    }
    fn title(&self) -> &'static str {
        RUN.title
    }
    fn schema_words(&self) -> String {
        "TPC-B tables (pgbench_branches)".into()
    }
    fn build_verb(&self) -> &'static str {
        "init"
    }
    fn inspect(&self, conn: &mut dyn Connection) -> Result<Option<i64>, DbError> {
        inspect(conn)
    }
    fn describe(&self, scale: &i64) -> String {
        format!("pgbench tables at scale {scale}")
    }
    /// `tpcb` has no drop verb: `init --replace` loads the tables again.
    fn refuse_existing(&self, shown: &str, scale: &i64) -> String {
        format!("{shown} already holds {}: add --replace to load them again", self.describe(scale))
    }
    fn build_label(&self, o: &InitOptions) -> String {
        format!("tpcb init scale {}", o.scale)
    }
    fn build_config(&self, o: &InitOptions) -> serde_json::Value {
        serde_json::json!({ "scale": o.scale, "fillfactor": o.fillfactor, "jobs": o.jobs })
    }
    fn build_params(&self, o: &InitOptions) -> serde_json::Value {
        serde_json::json!({ "scale": o.scale })
    }
    fn bar(&self, o: &InitOptions) -> crate::Bar {
        crate::Bar::Rows { what: "accounts", total: (o.scale * ACCOUNTS) as u64 }
    }
    fn build(
        &self,
        connect: Connector<'_>,
        o: &InitOptions,
        _stop: &std::sync::atomic::AtomicBool,
        progress: &(dyn Fn(crate::Progress) + Sync),
    ) -> Result<crate::Built, crate::BuildError> {
        let p = |p: LoadProgress| {
            progress(crate::Progress { rows_done: p.rows_done, rows_total: p.rows_total, table: "" })
        };
        let s = init(connect, o, &p)?;
        let line = format!(
            "tpcb init: {} rows in {:.1} s ({:.0} rows/s), keys and statistics {:.1} s",
            s.rows,
            s.load_seconds,
            crate::figures::load_rate(s.rows, s.load_seconds),
            s.index_seconds
        );
        Ok(crate::Built { report: s.report(), line })
    }
    fn check(&self, _: &mut dyn Connection, _: &i64, _: ()) -> Result<Vec<NoCheck>, DbError> {
        Ok(Vec::new())
    }
    fn drop(&self, conn: &mut dyn Connection) -> Result<(), DbError> {
        drop(conn)
    }
}

/// Whether `table` exists, asked of the catalogue: querying a missing table
/// to find out would write an ERROR into the server's log.
pub(crate) fn table_exists(conn: &mut dyn Connection, table: &str) -> Result<bool, DbError> {
    let q = match conn.dialect() {
        Dialect::Postgres => "SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE schemaname = ANY (current_schemas(false)) AND tablename = $1",
        Dialect::Mysql => "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = $1",
        Dialect::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
    };
    Ok(conn.query_one(&Stmt::new(q), &[Value::Text(table.to_string())])?.int(0)? > 0)
}

/// The TPC-B-like workload at a given scale.
pub struct Tpcb {
    scale: i64,
    seed: u64,
    stmts: Stmts,
    /// Transactions the workers committed, whatever the window.
    committed: Arc<AtomicU64>,
    /// `committed` when the current step's users were made.
    step_base: AtomicU64,
}

#[derive(Clone)]
struct Stmts {
    upd_account: Stmt,
    sel_account: Stmt,
    upd_teller: Stmt,
    upd_branch: Stmt,
    ins_history: Stmt,
}

impl Tpcb {
    /// The workload over `scale` branches; `seed` makes key choice
    /// reproducible.
    pub fn new(scale: i64, seed: u64) -> Tpcb {
        Tpcb {
            scale,
            seed,
            committed: Arc::default(),
            step_base: AtomicU64::new(0),
            stmts: Stmts {
                upd_account: Stmt::new("UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"),
                sel_account: Stmt::new("SELECT abalance FROM pgbench_accounts WHERE aid = $1"),
                upd_teller: Stmt::new("UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2"),
                upd_branch: Stmt::new("UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2"),
                ins_history: Stmt::new(
                    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
                ),
            },
        }
    }

    /// Transactions every worker of this workload committed so far (ramp-up
    /// and the transactions still in flight when a window ended included):
    /// the database's own count of them is compared with this, exactly.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Relaxed)
    }
}

impl Workload for Tpcb {
    fn kinds(&self) -> &[&'static str] {
        &["tpcb"]
    }

    fn worker(&self, user: usize, _users: usize) -> Box<dyn Worker> {
        if user == 0 {
            // A step's users are made before any of them runs.
            self.step_base.store(self.committed(), Ordering::Relaxed);
        }
        Box::new(TpcbWorker {
            rng: TpcRng::seeded(self.seed ^ (user as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            scale: self.scale,
            stmts: self.stmts.clone(),
            keys: [0; 4],
            committed: self.committed.clone(),
        })
    }

    fn probe(&self, conn: &mut dyn Connection) -> Result<Probe, DbError> {
        let mut p = Probe::new();
        if let Some(c) = conn.counters()? {
            p.insert("xact".into(), c.xact_db as f64);
            crate::figures::probe_log_flushes(&mut p, &c);
            if conn.dialect() == Dialect::Postgres {
                p.insert(crate::figures::PUBLISHED_LATE.into(), 1.0);
            }
        }
        Ok(p)
    }

    fn probe_figures(
        &self,
        before: &Probe,
        after: &Probe,
        window: Duration,
    ) -> Vec<storbench_metrics::Figure> {
        use storbench_metrics::{Figure, Unit};
        let mut f = Vec::new();
        // The server's own count of the window: commits and rollbacks of
        // this database between the two probes, as its statistics show
        // them. PostgreSQL (15+) publishes a busy backend's counts when it
        // goes idle at most once a second (PGSTAT_MIN_INTERVAL), and no
        // session can make another publish, so each edge may miss up to a
        // second of each user's commits, which then count in the next
        // window: equal to the clients' count on average in a steady
        // state, not per window. It also holds the observer's own first
        // probe once that is published. Where every commit is published
        // as it happens the figure is exact: tests/tpcb.rs arranges that
        // and checks it against pg_stat_database read from another session.
        // On a short window that is more than noise: see server_rate.
        if let (Some(b), Some(a)) = (before.get("xact"), after.get("xact")) {
            let late = before.contains_key(crate::figures::PUBLISHED_LATE);
            crate::figures::server_rate(&mut f, "tps.server", Unit::PerS, a - b, window, late);
        }
        crate::figures::log_flush_figures(&mut f, before, after, window);
        // Over the whole step (every user has ended when this is called),
        // for an exact check against the database's counters.
        let step = self.committed() - self.step_base.load(Ordering::Relaxed);
        f.push(Figure::new("step.txn.count", step as f64, Unit::Count));
        f
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    /// Names the runner's client count by its source (`tps.client`,
    /// pgbench's definition: transactions finished in the window over the
    /// window), figure and per-second series, beside the server's
    /// `tps.server`.
    fn derive(&self, r: &mut StepReport, _window: Duration) {
        if let Some(tps) = r.get("tps") {
            r.figure("tps.client", tps, storbench_metrics::Unit::PerS);
        }
        let series: Vec<Sample> = r
            .samples
            .iter()
            .filter(|s| s.name == "tps")
            .map(|s| Sample { t_ms: s.t_ms, name: "tps.client".into(), value: s.value })
            .collect();
        r.samples.extend(series);
    }
}

struct TpcbWorker {
    rng: TpcRng,
    scale: i64,
    stmts: Stmts,
    /// aid, bid, tid, delta of the transaction in hand (kept for retries).
    keys: [i64; 4],
    committed: Arc<AtomicU64>,
}

impl TpcbWorker {
    /// The script's statements inside the transaction `run_one` opened.
    fn body(&mut self, conn: &mut dyn Connection) -> Result<(), DbError> {
        let [aid, bid, tid, delta] = self.keys;
        let s = &self.stmts;
        conn.execute(&s.upd_account, &[Value::Int(delta), Value::Int(aid)])?;
        conn.query_one(&s.sel_account, &[Value::Int(aid)])?;
        conn.execute(&s.upd_teller, &[Value::Int(delta), Value::Int(tid)])?;
        conn.execute(&s.upd_branch, &[Value::Int(delta), Value::Int(bid)])?;
        conn.execute(
            &s.ins_history,
            &[Value::Int(tid), Value::Int(bid), Value::Int(aid), Value::Int(delta)],
        )?;
        Ok(())
    }
}

impl Worker for TpcbWorker {
    fn next(&mut self) -> Duration {
        let r = &mut self.rng;
        self.keys = [
            r.uniform(1, ACCOUNTS * self.scale),
            r.uniform(1, self.scale),
            r.uniform(1, TELLERS * self.scale),
            r.uniform(-5000, 5000),
        ];
        Duration::ZERO
    }

    /// Rolls back only the transaction it opened: a BEGIN that failed
    /// opened none, and a COMMIT that failed is ended by
    /// [`crate::runner::commit`].
    fn run_one(&mut self, conn: &mut dyn Connection, _attempt: u32) -> Result<Done, DbError> {
        conn.begin()?;
        if let Err(e) = self.body(conn) {
            if !conn.is_closed() {
                let _ = conn.rollback();
            }
            return Err(e);
        }
        crate::runner::commit(conn)?;
        self.committed.fetch_add(1, Ordering::Relaxed);
        Ok(Done::ok(0))
    }
}
