//! The one runner: virtual users, ramp-up, a measured window, an optional
//! target rate, think times, retries, reconnects and the once-a-second
//! collector, for any [`Workload`] on any engine.
//!
//! Each user is an OS thread with its own connection (the model pgbench
//! uses: no cross-thread wake-ups on the hot path). Users record into their
//! own histograms and atomic counters; a collector reads the counters once a
//! second for the per-second samples and the progress callback, and the
//! histograms are merged when the step ends. Connection time is kept out of
//! the step: every user connects, then all start together.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use storbench_db::{Connection, DbError};
use storbench_metrics::{Figure, LatencyHistogram, ProcessCpu, StepReport, Unit};

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
}

/// One virtual user's transactions.
pub trait Worker: Send {
    /// Chooses the next transaction and its inputs; returns the keying time
    /// to wait before it (zero unless think times are on).
    fn next(&mut self) -> Duration {
        Duration::ZERO
    }
    /// Runs the chosen transaction. `attempt` is 0 the first time and counts
    /// retries of the same inputs after a retryable error.
    fn run_one(&mut self, conn: &mut dyn Connection, attempt: u32) -> Result<Done, DbError>;
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
    first_error: Option<String>,
}

/// The step's timeline, fixed once every user is connected.
#[derive(Clone, Copy)]
struct Timeline {
    start: Instant,
    measure_from: Instant,
    end: Instant,
}

/// State every user and the collector see.
struct Shared<'a> {
    spec: &'a StepSpec,
    stop: &'a AtomicBool,
    halt: AtomicBool,
    fatal: Mutex<Option<(DbError, bool)>>,
    timeline: Mutex<Option<Timeline>>,
}

impl Shared<'_> {
    fn should_stop(&self) -> bool {
        self.halt.load(Ordering::Relaxed) || self.stop.load(Ordering::Relaxed)
    }

    /// Records the first fatal error (`lost` = the database went away) and
    /// halts every user.
    fn fail(&self, e: DbError, lost: bool) {
        let mut f = self.fatal.lock().expect("fatal lock");
        if f.is_none() {
            *f = Some((e, lost));
        }
        self.halt.store(true, Ordering::Relaxed);
    }
}

/// Sleeps until `until`, waking early when the step must stop. Returns
/// false when it woke early.
fn sleep_until(until: Instant, sh: &Shared<'_>) -> bool {
    loop {
        if sh.should_stop() {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

/// Runs one step of `w` at `spec.users` users and returns its measured
/// window. `stop` ends the step early (Ctrl-C); what was measured is kept
/// and `stopped` is set. `tick` is called once a second from this thread.
pub fn run_step(
    w: &dyn Workload,
    connect: Connector<'_>,
    spec: &StepSpec,
    stop: &AtomicBool,
    tick: &mut dyn FnMut(&Tick),
) -> Result<StepResult, StepError> {
    let users = spec.users.max(1);
    let kinds = w.kinds().len();
    let sh = Shared {
        spec,
        stop,
        halt: AtomicBool::new(false),
        fatal: Mutex::new(None),
        timeline: Mutex::new(None),
    };
    let lives: Vec<Arc<Live>> = (0..users)
        .map(|_| Arc::new(Live { kinds: (0..kinds).map(|_| AtomicU64::new(0)).collect(), ..Live::default() }))
        .collect();
    let barrier = Barrier::new(users + 1);
    let mut observer = connect().map_err(|source| StepError::Connect { user: 0, source })?;

    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(users);
        for (u, live) in lives.iter().enumerate() {
            let worker = w.worker(u, users);
            let (sh, barrier, live) = (&sh, &barrier, live.clone());
            let h = std::thread::Builder::new()
                .name(format!("user-{u}"))
                .stack_size(256 * 1024)
                .spawn_scoped(s, move || user_loop(u, users, worker, connect, sh, barrier, &live, kinds))
                .expect("spawning a user thread");
            handles.push(h);
        }
        // Every user connects (or fails) before the barrier; the clock
        // starts when all are through.
        let start = Instant::now();
        let tl =
            Timeline { start, measure_from: start + spec.rampup, end: start + spec.rampup + spec.duration };
        *sh.timeline.lock().expect("timeline") = Some(tl);
        barrier.wait();
        let connect_failed = sh.fatal.lock().expect("fatal").is_some();

        let mut before: Option<Probe> = None;
        let mut after: Option<Probe> = None;
        let mut report = StepReport::default();
        let mut prev = vec![(0u64, 0u64); users];
        let mut prev_kinds = vec![0u64; kinds];
        let mut next_tick = start + Duration::from_secs(1);
        let mut stopped_at = None;
        // The driver's own CPU over the window: read where the window begins
        // and ends, like the probes.
        let mut cpu_from = None;
        if spec.rampup.is_zero() && !connect_failed {
            cpu_from = Some(ProcessCpu::now());
            before = w.probe(observer.as_mut()).ok();
        }
        loop {
            if connect_failed {
                break;
            }
            let window_due = cpu_from.is_none();
            let next = if window_due { next_tick.min(tl.measure_from) } else { next_tick }.min(tl.end);
            let on_time = sleep_until(next, &sh);
            let now = Instant::now();
            if !on_time {
                stopped_at = Some(now);
                break;
            }
            if window_due && now >= tl.measure_from {
                cpu_from = Some(ProcessCpu::now());
                before = w.probe(observer.as_mut()).ok();
            }
            if now >= next_tick || now >= tl.end {
                let (mut n, mut lat, mut errors) = (0u64, 0u64, 0u64);
                for (i, l) in lives.iter().enumerate() {
                    let (c, ns) = (l.count.load(Ordering::Relaxed), l.lat_ns.load(Ordering::Relaxed));
                    n += c - prev[i].0;
                    lat += ns - prev[i].1;
                    prev[i] = (c, ns);
                    errors += l.errors.load(Ordering::Relaxed);
                }
                let mut kind_tps = vec![0.0; kinds];
                for (k, p) in prev_kinds.iter_mut().enumerate() {
                    let c: u64 = lives.iter().map(|l| l.kinds[k].load(Ordering::Relaxed)).sum();
                    kind_tps[k] = (c - *p) as f64;
                    *p = c;
                }
                let secs = (now - (next_tick - Duration::from_secs(1))).as_secs_f64().max(1e-3);
                let t = Tick {
                    elapsed: now - start,
                    rampup: now < tl.measure_from,
                    tps: n as f64 / secs,
                    lat_mean_us: if n > 0 { lat as f64 / n as f64 / 1e3 } else { 0.0 },
                    kind_tps: kind_tps.iter().map(|c| c / secs).collect(),
                    errors,
                };
                let t_ms = (now - start).as_millis() as u64;
                report.sample(t_ms, "tps", t.tps);
                if n > 0 {
                    report.sample(t_ms, "lat.mean", t.lat_mean_us);
                }
                report.sample(t_ms, "errors", errors as f64);
                for (k, name) in w.kinds().iter().enumerate() {
                    report.sample(t_ms, format!("txn.{name}.tps"), t.kind_tps[k]);
                }
                tick(&t);
                next_tick += Duration::from_secs(1);
            }
            if now >= tl.end {
                break;
            }
        }
        let window_end = stopped_at.unwrap_or(tl.end);
        let cpu = cpu_from.map(|from| (from, ProcessCpu::now()));
        if sh.fatal.lock().expect("fatal").is_none() && window_end >= tl.measure_from {
            if let Some(b) = &before {
                after = w.probe(observer.as_mut()).ok().filter(|a| !a.is_empty() || b.is_empty());
            }
        }
        sh.halt.store(true, Ordering::Relaxed);
        let outs: Vec<UserOut> =
            handles.into_iter().map(|h| h.join().expect("user thread panicked")).collect();

        let window = window_end.saturating_duration_since(tl.measure_from);
        let fatal = sh.fatal.lock().expect("fatal").take();
        let result = StepResult {
            report: summarise(w, spec, &outs, report, window, cpu, before.as_ref().zip(after.as_ref())),
            stopped: stopped_at.is_some() && fatal.is_none(),
            window,
            measure_from: tl.measure_from,
            started: start,
        };
        match fatal {
            None => Ok(result),
            Some((source, true)) => {
                Err(StepError::Lost { waited: spec.reconnect_for, source, partial: Box::new(Some(result)) })
            }
            Some((source, false)) if connect_failed => Err(StepError::Connect { user: 0, source }),
            Some((source, false)) => Err(StepError::Workload(source)),
        }
    })
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
    report.histograms.push(("lat".into(), all));
    for (k, name) in names.iter().enumerate() {
        let h = std::mem::replace(&mut per_kind[k], LatencyHistogram::new());
        if h.count() > 0 {
            report.histograms.push((format!("txn.{name}.lat"), h));
        }
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
    sh: &Shared<'_>,
    lost_at: Instant,
) -> Result<Box<dyn Connection>, DbError> {
    let mut backoff = Duration::from_millis(100);
    loop {
        match connect() {
            Ok(c) => return Ok(c),
            Err(e) => {
                if lost_at.elapsed() >= sh.spec.reconnect_for || sh.should_stop() {
                    return Err(e);
                }
                let _ = sleep_until(Instant::now() + backoff, sh);
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// One virtual user: connect, wait for the others, run transactions until
/// the step ends.
#[allow(clippy::too_many_arguments)]
fn user_loop(
    user: usize,
    users: usize,
    mut worker: Box<dyn Worker>,
    connect: Connector<'_>,
    sh: &Shared<'_>,
    barrier: &Barrier,
    live: &Live,
    kinds: usize,
) -> UserOut {
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
        first_error: None,
    };
    let conn = connect();
    if let Err(e) = &conn {
        sh.fail(e.clone(), false);
    }
    barrier.wait();
    let Ok(mut conn) = conn else { return out };
    let tl = sh.timeline.lock().expect("timeline").expect("timeline set before the barrier");
    let spec = sh.spec;
    let per_user_rate = spec.rate.map(|r| r / users as f64);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (user as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut scheduled = tl.start;
    let mut consecutive_errors = 0u32;
    while !sh.should_stop() && Instant::now() < tl.end {
        let keying = worker.next();
        if !keying.is_zero() && !sleep_until(Instant::now() + keying, sh) {
            break;
        }
        let mut began = Instant::now();
        if let Some(r) = per_user_rate {
            scheduled += next_arrival(&mut rng, r);
            if scheduled > began {
                if !sleep_until(scheduled, sh) {
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
        let res = loop {
            match worker.run_one(conn.as_mut(), attempt) {
                Err(e) if e.is_retryable() && attempt + 1 < spec.max_tries => {
                    attempt += 1;
                    out.retries += 1;
                }
                other => break other,
            }
        };
        let done_at = Instant::now();
        match res {
            Ok(done) => {
                consecutive_errors = 0;
                let from = if per_user_rate.is_some() { scheduled } else { began };
                let lat = done_at - from;
                live.count.fetch_add(1, Ordering::Relaxed);
                live.lat_ns.fetch_add(lat.as_nanos() as u64, Ordering::Relaxed);
                live.kinds[done.kind].fetch_add(1, Ordering::Relaxed);
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
                if !done.think.is_zero() && !sleep_until(Instant::now() + done.think, sh) {
                    break;
                }
            }
            Err(e) => {
                out.errors += 1;
                live.errors.fetch_add(1, Ordering::Relaxed);
                if out.first_error.is_none() {
                    out.first_error = Some(e.to_string());
                }
                use storbench_db::ErrorKind as K;
                let lost = matches!(e.kind(), K::Closed | K::Connect) || conn.is_closed();
                match e.kind() {
                    _ if lost => {
                        let lost_at = Instant::now();
                        match reconnect(connect, sh, lost_at) {
                            Ok(c) => {
                                conn = c;
                                out.reconnects += 1;
                                out.gap += lost_at.elapsed();
                            }
                            Err(e) => {
                                if !sh.should_stop() {
                                    sh.fail(e, true);
                                }
                                break;
                            }
                        }
                    }
                    K::Retryable | K::Other => {
                        consecutive_errors += 1;
                        if consecutive_errors >= 100 {
                            sh.fail(e, false);
                            break;
                        }
                    }
                    _ => {
                        sh.fail(e, false);
                        break;
                    }
                }
            }
        }
    }
    out
}
