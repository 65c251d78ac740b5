//! The one runner: virtual users, ramp-up, a measured window, an optional
//! target rate, think times, retries, reconnects and the once-a-second
//! collector, for any [`Workload`] on any engine.
//!
//! Each user is an OS thread with its own connection (the model pgbench
//! uses: no cross-thread wake-ups on the hot path). Users record into their
//! own histograms and atomic counters; a collector reads the counters once a
//! second for the per-second samples and the progress callback, and the
//! histograms are merged when the step ends. Connection time is kept out of
//! the step: every user connects, then all start together, and the step's
//! clock starts then (the shared [`storbench_runner`] does this for
//! the I/O engine too).
//!
//! A call blocked on the server (a row lock) would hold its user, and so
//! the step, past the window's end and past Ctrl-C. Each user therefore
//! keeps its connection's [`Cancel`] handle in a [`Slot`] with a flag saying
//! it is inside a call; a watchdog thread next to the step cancels the calls
//! still running [`GRACE`] after the window's end, the stop flag or a fatal
//! error, and again every [`GRACE`] until they return. A cancelled call is
//! outside the window: it is rolled back, not counted as an error, and ends
//! its user.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use storbench_db::{Cancel, Connection, DbError};
use storbench_metrics::{
    live_bucket, Figure, LatencyHistogram, LiveLatency, ProcessCpu, StepReport, Unit, LIVE_BOUNDS_S,
};
use storbench_runner::{self as runner, Interval, Sampler, Shared, StepPlan};

/// Values read from the database at the start and end of the measured
/// window (e.g. commit counters, the sum of next order ids).
pub type Probe = BTreeMap<String, f64>;

/// A workload the runner can drive: hands out one [`Worker`] per user and,
/// optionally, reads the database before and after the measured window.
pub trait Workload: Send + Sync {
    /// The transaction kinds its workers report, in display order.
    fn kinds(&self) -> &[&'static str];
    /// The worker for user `user` (0-based) of `users`.
    fn worker(&self, user: usize, users: usize) -> Box<dyn Worker>;
    /// Reads what the window's figures are computed from (server counters,
    /// order ids). Default: nothing.
    fn probe(&self, _conn: &mut dyn Connection) -> Result<Probe, DbError> {
        Ok(Probe::new())
    }
    /// Figures from the probes at the start and end of a window of `window`.
    fn probe_figures(&self, _before: &Probe, _after: &Probe, _window: Duration) -> Vec<Figure> {
        Vec::new()
    }
    /// The figures a step's line and the run's summary show, in order.
    /// Default: none.
    fn columns(&self) -> &'static [crate::Column] {
        &[]
    }
    /// Adds the figures and series the workload derives from a finished
    /// step's report and its measured window (e.g. NOPM as the client
    /// counts it). Default: nothing.
    fn derive(&self, _report: &mut StepReport, _window: Duration) {}
}

/// One virtual user's transactions.
pub trait Worker: Send {
    /// Chooses the next transaction and its inputs; returns the keying time
    /// to wait before it (zero unless think times are on).
    fn next(&mut self) -> Duration {
        Duration::ZERO
    }
    /// Runs the chosen transaction. `attempt` is 0 the first time and counts
    /// retries of the same inputs after a retryable error. Whatever it
    /// returns, it leaves no transaction open on a live connection, and
    /// ends only the one it opened: the runner never rolls back for it.
    fn run_one(&mut self, conn: &mut dyn Connection, attempt: u32) -> Result<Done, DbError>;
}

/// Commits a worker's transaction; should the COMMIT fail, rolls back
/// unless the engine has ended the transaction itself
/// ([`storbench_db::Caps::failed_commit_ends_transaction`]: PostgreSQL, where a
/// ROLLBACK would draw warning 25P01) or the connection is gone, so the
/// worker leaves no transaction open ([`Worker::run_one`]). The COMMIT's
/// error is returned either way.
pub fn commit(conn: &mut dyn Connection) -> Result<(), DbError> {
    let e = match conn.commit() {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if !conn.caps().failed_commit_ends_transaction && !conn.is_closed() {
        let _ = conn.rollback();
    }
    Err(e)
}

/// What one transaction did.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    /// Index into [`Workload::kinds`].
    pub kind: usize,
    /// Rolled back by design (TPC-C's 1 % New-Order rollbacks), not an error.
    pub rolled_back: bool,
    /// Think time to wait after it.
    pub think: Duration,
}

impl Done {
    /// A committed transaction of kind `kind`, no think time.
    pub fn ok(kind: usize) -> Done {
        Done { kind, rolled_back: false, think: Duration::ZERO }
    }
}

/// One step: a load level held for a time.
#[derive(Clone, Debug)]
pub struct StepSpec {
    /// Virtual users (clients).
    pub users: usize,
    /// Ramp-up, run but kept out of the figures.
    pub rampup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Target transactions per second over all users (Poisson arrivals);
    /// latency then counts from the scheduled start.
    pub rate: Option<f64>,
    /// With a rate: transactions that would start later than this behind
    /// schedule are skipped and counted (pgbench --latency-limit); without
    /// one, transactions slower than this are counted as late.
    pub latency_limit: Option<Duration>,
    /// Tries per transaction for retryable errors (serialization, deadlock).
    pub max_tries: u32,
    /// How long a user keeps trying to reconnect before the step fails.
    pub reconnect_for: Duration,
}

impl Default for StepSpec {
    fn default() -> Self {
        StepSpec {
            users: 1,
            rampup: Duration::ZERO,
            duration: Duration::from_secs(10),
            rate: None,
            latency_limit: None,
            max_tries: 10,
            reconnect_for: Duration::from_secs(30),
        }
    }
}

/// Once-a-second progress, handed to the caller's callback.
#[derive(Clone, Debug)]
pub struct Tick {
    /// Seconds since the step started (ramp-up included).
    pub elapsed: Duration,
    /// True while in ramp-up.
    pub rampup: bool,
    /// Transactions per second over the last interval.
    pub tps: f64,
    /// Mean latency over the last interval, microseconds.
    pub lat_mean_us: f64,
    /// Transactions per second of each kind over the last interval.
    pub kind_tps: Vec<f64>,
    /// Errors so far in the step.
    pub errors: u64,
    /// The last interval's latencies as live-export buckets.
    pub latency: LiveLatency,
}

/// A finished step.
#[derive(Debug)]
pub struct StepResult {
    /// Figures, samples and histograms of the measured window.
    pub report: StepReport,
    /// The step ended early because the stop flag was raised.
    pub stopped: bool,
    /// The measured window actually held.
    pub window: Duration,
    /// When the measured window began.
    pub measure_from: Instant,
    /// When the step began.
    pub started: Instant,
    /// Why the figures read from the database at the window's edges (the
    /// server's counters, the districts' order ids) are missing, when they
    /// are: the probe failed even on a fresh connection.
    pub probe_error: Option<String>,
}

/// Why a step could not complete.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// Users could not connect at the start.
    #[error("connecting user {user}: {source}")]
    Connect {
        /// The user.
        user: usize,
        /// The error.
        source: DbError,
    },
    /// The database went away and did not come back in time; what was
    /// measured until then is in `partial`.
    #[error("the database was lost for longer than {waited:?}: {source}")]
    Lost {
        /// How long users tried to reconnect.
        waited: Duration,
        /// The last error.
        source: DbError,
        /// Measurements up to the loss.
        partial: Box<Option<StepResult>>,
    },
    /// A non-retryable error a workload raised (a bug or a broken schema).
    #[error("{0}")]
    Workload(DbError),
}

/// Opens a connection for a user (or the observer).
pub type Connector<'a> = &'a (dyn Fn() -> Result<Box<dyn Connection>, DbError> + Sync);

/// Shared counters of one user, read once a second by the collector.
#[derive(Default)]
struct Live {
    count: AtomicU64,
    lat_ns: AtomicU64,
    errors: AtomicU64,
    kinds: Vec<AtomicU64>,
    /// Transactions per live-export latency bucket (`LIVE_BOUNDS_S`).
    buckets: [AtomicU64; LIVE_BOUNDS_S.len() + 1],
}

/// How long calls still running when the step must end (window over, stop
/// flag, fatal error) are left to finish before they are cancelled, and how
/// often the cancel is sent again while they have not returned (a cancel
/// that reached the server between two statements of a transaction hits
/// nothing). A fixed second rather than a multiple of the step's p99: the
/// p99 is not known until the step's histograms are merged, after the
/// users end, and a second is long next to any transaction the runner
/// measures while short next to a lock wait.
pub const GRACE: Duration = Duration::from_secs(1);

/// One user's cancel handle, and whether it is inside a call.
#[derive(Default)]
struct Slot {
    cancel: Mutex<Option<Box<dyn Cancel>>>,
    busy: AtomicBool,
}

impl Slot {
    /// Keeps the handle of the user's (new) connection.
    fn register(&self, conn: &dyn Connection) {
        *self.cancel.lock().expect("cancel lock") = conn.canceller();
    }
}

/// The users' slots and what the watchdog needs to know when to act.
struct Cancels {
    slots: Vec<Slot>,
    /// The window's end, set by the first user that starts.
    end: OnceLock<Instant>,
    /// The step is over (every user has been joined): the watchdog ends.
    over: AtomicBool,
}

impl Cancels {
    /// Until the step is over: once it must end (window over, `stop`, a
    /// fatal error), waits [`GRACE`], then cancels every call still running,
    /// every [`GRACE`] until none is.
    fn watch(&self, stop: &AtomicBool, fatal: &Fatal) {
        let mut due: Option<Instant> = None;
        while !self.over.load(Ordering::Relaxed) {
            let now = Instant::now();
            match due {
                None => {
                    let ended = self.end.get().is_some_and(|e| now >= *e);
                    if ended || stop.load(Ordering::Relaxed) || fatal.is_set() {
                        due = Some(now + GRACE);
                    }
                }
                Some(d) if now >= d => {
                    for s in &self.slots {
                        if s.busy.load(Ordering::Acquire) {
                            if let Some(c) = s.cancel.lock().expect("cancel lock").as_ref() {
                                // Undeliverable means the server is gone: the
                                // call fails on its own then.
                                let _ = c.cancel();
                            }
                        }
                    }
                    due = Some(Instant::now() + GRACE);
                }
                Some(_) => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What a user thread hands back when it ends.
struct UserOut {
    kinds: Vec<LatencyHistogram>,
    all: LatencyHistogram,
    exec: LatencyHistogram,
    rolled_back: u64,
    retries: u64,
    reconnects: u64,
    gap: Duration,
    late: u64,
    skipped: u64,
    errors: u64,
    /// Calls the watchdog cancelled after the window's end: outside it,
    /// neither transactions nor errors, but rolled back on the server.
    cancelled: u64,
    first_error: Option<String>,
}

/// A user ready to start: its worker and its connection.
type Ready = (Box<dyn Worker>, Box<dyn Connection>);

/// The first fatal error of a step (`lost` = the database went away).
#[derive(Default)]
struct Fatal(Mutex<Option<(DbError, bool)>>);

impl Fatal {
    /// Records the first fatal error and halts every user.
    fn fail(&self, sh: &Shared<'_>, e: DbError, lost: bool) {
        let mut f = self.0.lock().expect("fatal lock");
        if f.is_none() {
            *f = Some((e, lost));
        }
        sh.halt();
    }

    fn is_set(&self) -> bool {
        self.0.lock().expect("fatal lock").is_some()
    }
}

/// The once-a-second collector of a step: turns the users' counters into
/// samples and ticks, and probes the database where the window begins and
/// ends.
struct Collector<'a> {
    w: &'a dyn Workload,
    lives: &'a [Arc<Live>],
    observer: Box<dyn Connection>,
    connect: Connector<'a>,
    probe_error: Option<String>,
    fatal: &'a Fatal,
    tick: &'a mut dyn FnMut(&Tick),
    report: StepReport,
    prev: Vec<(u64, u64)>,
    prev_kinds: Vec<u64>,
    prev_buckets: Vec<u64>,
    before: Option<Probe>,
    after: Option<Probe>,
}

impl Collector<'_> {
    /// Probes the database; a failed probe is tried once more on a fresh
    /// connection (the observer's session may have been terminated, as the
    /// users' may: they reconnect too). A second failure is kept as the
    /// step's `probe_error`, so the missing figures are explained.
    fn probe(&mut self) -> Option<Probe> {
        if let Ok(p) = self.w.probe(self.observer.as_mut()) {
            return Some(p);
        }
        let retried = (self.connect)().and_then(|mut c| {
            let p = self.w.probe(c.as_mut());
            self.observer = c;
            p
        });
        match retried {
            Ok(p) => Some(p),
            Err(e) => {
                self.probe_error =
                    Some(format!("probing the database failed, on a fresh connection too: {e}"));
                None
            }
        }
    }
}

impl Sampler for Collector<'_> {
    fn window_begins(&mut self) {
        self.before = self.probe();
    }

    fn sample(&mut self, i: &Interval) {
        let (mut n, mut lat, mut errors) = (0u64, 0u64, 0u64);
        for (u, l) in self.lives.iter().enumerate() {
            let (c, ns) = (l.count.load(Ordering::Relaxed), l.lat_ns.load(Ordering::Relaxed));
            n += c - self.prev[u].0;
            lat += ns - self.prev[u].1;
            self.prev[u] = (c, ns);
            errors += l.errors.load(Ordering::Relaxed);
        }
        let kinds = self.prev_kinds.len();
        let mut kind_tps = vec![0.0; kinds];
        for (k, p) in self.prev_kinds.iter_mut().enumerate() {
            let c: u64 = self.lives.iter().map(|l| l.kinds[k].load(Ordering::Relaxed)).sum();
            kind_tps[k] = (c - *p) as f64 / i.secs;
            *p = c;
        }
        let mut latency = LiveLatency { sum_s: lat as f64 / 1e9, ..LiveLatency::default() };
        for (b, p) in self.prev_buckets.iter_mut().enumerate() {
            let c: u64 = self.lives.iter().map(|l| l.buckets[b].load(Ordering::Relaxed)).sum();
            latency.counts[b] = c - *p;
            *p = c;
        }
        let t = Tick {
            elapsed: i.elapsed,
            rampup: i.rampup,
            tps: n as f64 / i.secs,
            lat_mean_us: if n > 0 { lat as f64 / n as f64 / 1e3 } else { 0.0 },
            kind_tps,
            errors,
            latency,
        };
        let t_ms = i.elapsed.as_millis() as u64;
        self.report.sample(t_ms, "tps", t.tps);
        if n > 0 {
            self.report.sample(t_ms, "lat.mean", t.lat_mean_us);
        }
        self.report.sample(t_ms, "errors", errors as f64);
        for (k, name) in self.w.kinds().iter().enumerate() {
            self.report.sample(t_ms, format!("txn.{name}.tps"), t.kind_tps[k]);
        }
        (self.tick)(&t);
    }

    fn window_ends(&mut self) {
        if self.fatal.is_set() {
            return;
        }
        if let Some(b) = self.before.clone() {
            self.after = self.probe().filter(|a| !a.is_empty() || b.is_empty());
        }
    }
}

/// Runs one step of `w` at `spec.users` users and returns its measured
/// window. `stop` ends the step early (Ctrl-C); what was measured is kept
/// and `stopped` is set. `tick` is called once a second from this thread.
///
/// The step is run by the shared runner ([`storbench_runner`]):
/// every user connects in its own thread, and the clock starts when the
/// last one is connected, so connecting never counts in the window.
pub fn run_step(
    w: &dyn Workload,
    connect: Connector<'_>,
    spec: &StepSpec,
    stop: &AtomicBool,
    tick: &mut dyn FnMut(&Tick),
) -> Result<StepResult, StepError> {
    let users = spec.users.max(1);
    let kinds = w.kinds().len();
    let lives: Vec<Arc<Live>> = (0..users)
        .map(|_| Arc::new(Live { kinds: (0..kinds).map(|_| AtomicU64::new(0)).collect(), ..Live::default() }))
        .collect();
    let observer = connect().map_err(|source| StepError::Connect { user: 0, source })?;
    let fatal = Fatal::default();
    let plan = StepPlan {
        workers: users,
        rampup: spec.rampup,
        duration: spec.duration,
        name: "user",
        stack_size: Some(256 * 1024),
    };
    let setup = |u: usize| -> Result<Ready, DbError> {
        let conn = connect()?;
        Ok((w.worker(u, users), conn))
    };
    let cancels = Cancels {
        slots: (0..users).map(|_| Slot::default()).collect(),
        end: OnceLock::new(),
        over: AtomicBool::new(false),
    };
    let (lives_ref, fatal_ref, cancels_ref) = (&lives, &fatal, &cancels);
    let work = move |u: usize, (worker, conn): Ready, sh: &Shared<'_>| {
        cancels_ref.end.get_or_init(|| sh.clock().end);
        let slot = &cancels_ref.slots[u];
        user_loop(u, users, worker, conn, connect, spec, sh, fatal_ref, &lives_ref[u], kinds, slot)
    };
    let mut col = Collector {
        w,
        lives: &lives,
        observer,
        connect,
        probe_error: None,
        fatal: &fatal,
        tick,
        report: StepReport::default(),
        prev: vec![(0, 0); users],
        prev_kinds: vec![0; kinds],
        prev_buckets: vec![0; LIVE_BOUNDS_S.len() + 1],
        before: None,
        after: None,
    };
    let ran = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("cancel-watch".into())
            .spawn_scoped(s, || cancels.watch(stop, &fatal))
            .expect("spawning the cancel watchdog");
        let ran = runner::run_step(&plan, stop, &setup, &work, &mut col);
        cancels.over.store(true, Ordering::Relaxed);
        ran
    })
    .map_err(|f| StepError::Connect { user: f.worker, source: f.error })?;
    let Collector { report, before, after, probe_error, .. } = col;
    let fatal = fatal.0.into_inner().expect("fatal lock");
    let result = StepResult {
        report: summarise(
            w,
            spec,
            &ran.outs,
            report,
            ran.window,
            ran.cpu,
            before.as_ref().zip(after.as_ref()),
        ),
        stopped: ran.stopped && fatal.is_none(),
        window: ran.window,
        measure_from: ran.clock.measure_from,
        started: ran.clock.start,
        probe_error,
    };
    match fatal {
        None => Ok(result),
        Some((source, true)) => {
            Err(StepError::Lost { waited: spec.reconnect_for, source, partial: Box::new(Some(result)) })
        }
        Some((source, false)) => Err(StepError::Workload(source)),
    }
}

/// Turns the users' histograms and counters into the step's figures.
fn summarise(
    w: &dyn Workload,
    spec: &StepSpec,
    outs: &[UserOut],
    mut report: StepReport,
    window: Duration,
    cpu: Option<(ProcessCpu, ProcessCpu)>,
    probes: Option<(&Probe, &Probe)>,
) -> StepReport {
    let secs = window.as_secs_f64();
    let names = w.kinds();
    let mut all = LatencyHistogram::new();
    let mut exec = LatencyHistogram::new();
    let mut per_kind: Vec<LatencyHistogram> = names.iter().map(|_| LatencyHistogram::new()).collect();
    let (mut rolled_back, mut retries, mut reconnects, mut late, mut skipped, mut errors) =
        (0, 0, 0, 0, 0, 0);
    let mut cancelled = 0;
    let mut gap = Duration::ZERO;
    for o in outs {
        all.merge(&o.all);
        exec.merge(&o.exec);
        for (k, h) in o.kinds.iter().enumerate() {
            per_kind[k].merge(h);
        }
        rolled_back += o.rolled_back;
        retries += o.retries;
        reconnects += o.reconnects;
        late += o.late;
        skipped += o.skipped;
        errors += o.errors;
        cancelled += o.cancelled;
        gap += o.gap;
    }
    let n = all.count() as f64;
    let rate = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    report.figure("users", spec.users as f64, Unit::Count);
    report.figure("window", secs, Unit::S);
    report.figure("txn.count", n, Unit::Count);
    report.figure("tps", rate(n), Unit::PerS);
    report.figure("tpm.client", rate(n) * 60.0, Unit::PerMin);
    report.latency("lat", &all);
    if spec.rate.is_some() {
        report.latency("lat.exec", &exec);
    }
    for (k, name) in names.iter().enumerate() {
        let c = per_kind[k].count() as f64;
        report.figure(format!("txn.{name}.count"), c, Unit::Count);
        report.figure(format!("txn.{name}.tps"), rate(c), Unit::PerS);
        if c > 0.0 {
            report.latency(&format!("txn.{name}.lat"), &per_kind[k]);
        }
    }
    report.figure("rolled_back", rolled_back as f64, Unit::Count);
    report.figure("errors", errors as f64, Unit::Count);
    report.figure("retries", retries as f64, Unit::Count);
    report.figure("cancelled", cancelled as f64, Unit::Count);
    report.figure("reconnects", reconnects as f64, Unit::Count);
    report.figure("reconnect.gap", gap.as_secs_f64() * 1e3, Unit::Ms);
    if let Some((from, to)) = cpu {
        report.cpu("driver.cpu", "txn", from, to, n, secs);
    }
    if spec.latency_limit.is_some() {
        report.figure("late", late as f64, Unit::Count);
    }
    if spec.rate.is_some() {
        report.figure("skipped", skipped as f64, Unit::Count);
    }
    if let Some((b, a)) = probes {
        report.figures.extend(w.probe_figures(b, a, window));
    }
    report
}

/// Exponential inter-arrival time for a Poisson process at `per_s`.
fn next_arrival(rng: &mut u64, per_s: f64) -> Duration {
    // xorshift64*: enough for arrival jitter, no shared state.
    *rng ^= *rng >> 12;
    *rng ^= *rng << 25;
    *rng ^= *rng >> 27;
    let u = ((rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    Duration::from_secs_f64(-u.ln() / per_s)
}

/// Reconnects with backoff (100 ms doubling to 2 s) until `reconnect_for`
/// has passed since `lost_at`.
fn reconnect(
    connect: Connector<'_>,
    spec: &StepSpec,
    sh: &Shared<'_>,
    lost_at: Instant,
) -> Result<Box<dyn Connection>, DbError> {
    let mut backoff = Duration::from_millis(100);
    loop {
        match connect() {
            Ok(c) => return Ok(c),
            Err(e) => {
                if lost_at.elapsed() >= spec.reconnect_for || sh.should_stop() {
                    return Err(e);
                }
                let _ = sh.sleep_until(Instant::now() + backoff);
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// What a user's error handling needs of its step.
struct User<'a, 's> {
    connect: Connector<'a>,
    spec: &'a StepSpec,
    sh: &'a Shared<'s>,
    fatal: &'a Fatal,
    live: &'a Live,
    slot: &'a Slot,
}

impl User<'_, '_> {
    /// Counts a failed transaction and decides whether the user goes on: a
    /// lost connection is reconnected (within `reconnect_for`), a retryable
    /// or other error is counted (100 in a row end the step), anything else
    /// ends the step.
    fn on_error(
        &self,
        e: DbError,
        conn: &mut Box<dyn Connection>,
        out: &mut UserOut,
        consecutive_errors: &mut u32,
    ) -> bool {
        out.errors += 1;
        self.live.errors.fetch_add(1, Ordering::Relaxed);
        if out.first_error.is_none() {
            out.first_error = Some(e.to_string());
        }
        use storbench_db::ErrorKind as K;
        let lost = matches!(e.kind(), K::Closed | K::Connect) || conn.is_closed();
        match e.kind() {
            _ if lost => {
                let lost_at = Instant::now();
                match reconnect(self.connect, self.spec, self.sh, lost_at) {
                    Ok(c) => {
                        *conn = c;
                        self.slot.register(conn.as_ref());
                        out.reconnects += 1;
                        out.gap += lost_at.elapsed();
                        true
                    }
                    Err(e) => {
                        if !self.sh.should_stop() {
                            self.fatal.fail(self.sh, e, true);
                        }
                        false
                    }
                }
            }
            K::Retryable | K::Other => {
                *consecutive_errors += 1;
                if *consecutive_errors >= 100 {
                    self.fatal.fail(self.sh, e, false);
                    return false;
                }
                true
            }
            _ => {
                self.fatal.fail(self.sh, e, false);
                false
            }
        }
    }
}

/// One virtual user, connected and started with the others: runs
/// transactions until the step ends.
#[allow(clippy::too_many_arguments)]
fn user_loop(
    user: usize,
    users: usize,
    mut worker: Box<dyn Worker>,
    mut conn: Box<dyn Connection>,
    connect: Connector<'_>,
    spec: &StepSpec,
    sh: &Shared<'_>,
    fatal: &Fatal,
    live: &Live,
    kinds: usize,
    slot: &Slot,
) -> UserOut {
    slot.register(conn.as_ref());
    let mut out = UserOut {
        kinds: (0..kinds).map(|_| LatencyHistogram::new()).collect(),
        all: LatencyHistogram::new(),
        exec: LatencyHistogram::new(),
        rolled_back: 0,
        retries: 0,
        reconnects: 0,
        gap: Duration::ZERO,
        late: 0,
        skipped: 0,
        errors: 0,
        cancelled: 0,
        first_error: None,
    };
    let tl = sh.clock();
    let per_user_rate = spec.rate.map(|r| r / users as f64);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (user as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut scheduled = tl.start;
    let mut consecutive_errors = 0u32;
    while !sh.should_stop() && Instant::now() < tl.end {
        let keying = worker.next();
        if !keying.is_zero() && !sh.sleep_until(Instant::now() + keying) {
            break;
        }
        let mut began = Instant::now();
        if let Some(r) = per_user_rate {
            scheduled += next_arrival(&mut rng, r);
            if scheduled > began {
                if !sh.sleep_until(scheduled) {
                    break;
                }
                began = Instant::now();
            }
            if let Some(limit) = spec.latency_limit {
                if began.saturating_duration_since(scheduled) > limit {
                    if began >= tl.measure_from {
                        out.skipped += 1;
                    }
                    continue;
                }
            }
        }
        if began >= tl.end {
            break;
        }
        let mut attempt = 0;
        slot.busy.store(true, Ordering::Release);
        let res = loop {
            match worker.run_one(conn.as_mut(), attempt) {
                Err(e) if e.is_cancelled() => break Err(e),
                Err(e) if e.is_retryable() && attempt + 1 < spec.max_tries => {
                    attempt += 1;
                    out.retries += 1;
                }
                other => break other,
            }
        };
        slot.busy.store(false, Ordering::Release);
        let done_at = Instant::now();
        match res {
            // Cancelled by the watchdog once the step had to end: outside
            // the window, so neither a transaction nor an error. Not a lost
            // connection either. (A cancel while the step runs, e.g. a
            // statement_timeout, is an error.) The worker has ended its
            // transaction (run_one's contract): a ROLLBACK from here would
            // find none open and leave a 25P01 warning in the server's log.
            Err(e) if e.is_cancelled() && (sh.should_stop() || done_at >= tl.end) => {
                out.cancelled += 1;
                break;
            }
            Ok(done) => {
                consecutive_errors = 0;
                let from = if per_user_rate.is_some() { scheduled } else { began };
                let lat = done_at - from;
                live.count.fetch_add(1, Ordering::Relaxed);
                live.lat_ns.fetch_add(lat.as_nanos() as u64, Ordering::Relaxed);
                live.kinds[done.kind].fetch_add(1, Ordering::Relaxed);
                live.buckets[live_bucket(lat.as_nanos() as u64)].fetch_add(1, Ordering::Relaxed);
                if done_at >= tl.measure_from && done_at <= tl.end {
                    out.all.record(lat);
                    out.kinds[done.kind].record(lat);
                    if per_user_rate.is_some() {
                        out.exec.record(done_at - began);
                    }
                    out.rolled_back += u64::from(done.rolled_back);
                    if spec.latency_limit.is_some_and(|l| lat > l) {
                        out.late += 1;
                    }
                }
                if !done.think.is_zero() && !sh.sleep_until(Instant::now() + done.think) {
                    break;
                }
            }
            Err(e) => {
                let user = User { connect, spec, sh, fatal, live, slot };
                if !user.on_error(e, &mut conn, &mut out, &mut consecutive_errors) {
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use storbench_db::{connect, DbUrl, Stmt};

    struct Select1;
    struct Sel;
    impl Workload for Select1 {
        fn kinds(&self) -> &[&'static str] {
            &["select"]
        }
        fn worker(&self, _: usize, _: usize) -> Box<dyn Worker> {
            Box::new(Sel)
        }
    }
    impl Worker for Sel {
        fn run_one(&mut self, conn: &mut dyn Connection, _: u32) -> Result<Done, DbError> {
            conn.query_one(&Stmt::new("SELECT 1"), &[])?;
            Ok(Done::ok(0))
        }
    }

    #[test]
    fn connecting_is_kept_out_of_the_window_with_no_ramp_up() {
        // Regression: the step's clock was stamped before the users had
        // connected, so with no ramp-up the window held the connect time
        // and TPS was understated by connect time / duration.
        let d = tempfile::tempdir().unwrap();
        let url = DbUrl::parse(&format!("sqlite:{}", d.path().join("t.db").display())).unwrap();
        let connected = Mutex::new(Vec::new());
        let connector = || -> Result<Box<dyn Connection>, DbError> {
            std::thread::sleep(Duration::from_millis(300));
            let c = connect(&url)?;
            connected.lock().unwrap().push(Instant::now());
            Ok(c)
        };
        let spec = StepSpec { users: 3, duration: Duration::from_millis(600), ..StepSpec::default() };
        let r = run_step(&Select1, &connector, &spec, &AtomicBool::new(false), &mut |_| {}).unwrap();
        let last = *connected.lock().unwrap().iter().max().unwrap();
        assert!(r.started >= last, "the window began before the last user connected");
        assert_eq!(r.measure_from, r.started);
        assert_eq!(r.window, Duration::from_millis(600));
        let n = r.report.get("txn.count").unwrap();
        assert_eq!(r.report.get("txn.select.count").unwrap(), n, "per-kind counts sum to the total");
        assert!((r.report.get("tps").unwrap() - n / 0.6).abs() < 1e-6);
    }
}
