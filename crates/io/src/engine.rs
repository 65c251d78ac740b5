//! Runs one profile: the shared step runner ([`storbench_runner`])
//! starts one thread per profile thread; each opens its own [`Queue`] from
//! the chosen [`IoEngine`] and builds its offset generator before the clock
//! starts, then keeps its queue full until the window ends. Each thread has
//! its own histograms and counters; the sampler reads the counters once a
//! second and the step's figures are assembled at the end.
//!
//! Latency is submission to completion, per I/O, in nanoseconds; with a
//! rate, from the scheduled time (an I/O that waits for a free slot carries
//! that wait). Only I/Os that complete inside the measured window count in
//! the figures; `io.completed` counts every I/O the device served in the
//! step (ramp-up and the drain after the window included), the number a
//! device's own counters can be checked against.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use storbench_metrics::{LatencyHistogram, ProcessCpu, StepReport, Unit};
use storbench_runner::{Clock, Interval, Sampler, Shared, StepPlan};

use crate::dist::Offsets;
use crate::engines::{Completion, IoEngine, Op, Queue};
use crate::error::IoError;
use crate::profile::{Pattern, Profile};
use crate::target::Target;
use crate::verify::{self, Ledger};

/// Options of one run of a profile.
#[derive(Clone)]
pub struct RunOptions {
    /// The engine to use.
    pub engine: Arc<dyn IoEngine>,
    /// Write verifiable blocks and check what is read.
    pub verify: bool,
}

/// Once-a-second progress.
#[derive(Clone, Debug)]
pub struct Tick {
    /// Since the step started.
    pub elapsed: Duration,
    /// In ramp-up.
    pub rampup: bool,
    /// I/Os per second over the last interval.
    pub iops: f64,
    /// MB/s over the last interval.
    pub mbps: f64,
    /// 99th percentile latency over the last interval, µs.
    pub p99_us: f64,
    /// The last interval's latencies as live-export buckets.
    pub latency: storbench_metrics::LiveLatency,
}

/// An I/O that failed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IoFailure {
    /// Byte offset.
    pub offset: u64,
    /// errno, or 0 for a short transfer.
    pub errno: i32,
    /// What happened.
    pub what: String,
}

/// The result of one profile.
#[derive(Debug)]
pub struct ProfileResult {
    /// Figures, samples and histograms of the measured window.
    pub report: StepReport,
    /// Failed I/Os (the first few), counted in `io.errors`.
    pub failures: Vec<IoFailure>,
    /// Offsets of blocks that failed verification (the first few).
    pub mismatches: Vec<u64>,
    /// Blocks that failed verification.
    pub mismatch_count: u64,
    /// Ended early by the stop flag.
    pub stopped: bool,
    /// When the step started (every thread ready).
    pub started: Instant,
    /// When the measured window began.
    pub measure_from: Instant,
}

#[derive(Default)]
struct Live {
    reads: AtomicU64,
    writes: AtomicU64,
    bytes: AtomicU64,
    interval: Mutex<Option<LatencyHistogram>>,
}

struct ThreadOut {
    read: LatencyHistogram,
    write: LatencyHistogram,
    sync: LatencyHistogram,
    read_bytes: u64,
    write_bytes: u64,
    completed: u64,
    failures: Vec<IoFailure>,
    error_count: u64,
    mismatches: Vec<u64>,
    mismatch_count: u64,
}

impl ThreadOut {
    fn new() -> ThreadOut {
        ThreadOut {
            read: LatencyHistogram::new(),
            write: LatencyHistogram::new(),
            sync: LatencyHistogram::new(),
            read_bytes: 0,
            write_bytes: 0,
            completed: 0,
            failures: Vec::new(),
            error_count: 0,
            mismatches: Vec::new(),
            mismatch_count: 0,
        }
    }

    fn fail(&mut self, offset: u64, errno: i32, what: String) {
        self.error_count += 1;
        if self.failures.len() < 10 {
            self.failures.push(IoFailure { offset, errno, what });
        }
    }
}

/// The per-second sampler: IOPS, MB/s and p99 of the last second.
struct IoSampler<'a> {
    lives: &'a [Arc<Live>],
    prev: Vec<(u64, u64, u64)>,
    report: StepReport,
    tick: &'a mut dyn FnMut(&Tick),
}

impl Sampler for IoSampler<'_> {
    fn sample(&mut self, i: &Interval) {
        let (mut r, mut w, mut b) = (0u64, 0u64, 0u64);
        let mut interval = LatencyHistogram::new();
        for (t, l) in self.lives.iter().enumerate() {
            let (lr, lw, lb) = (
                l.reads.load(Ordering::Relaxed),
                l.writes.load(Ordering::Relaxed),
                l.bytes.load(Ordering::Relaxed),
            );
            r += lr - self.prev[t].0;
            w += lw - self.prev[t].1;
            b += lb - self.prev[t].2;
            self.prev[t] = (lr, lw, lb);
            if let Some(h) = l.interval.lock().expect("interval").as_mut() {
                interval.merge(h);
                h.reset();
            }
        }
        let secs = i.secs;
        let t = Tick {
            elapsed: i.elapsed,
            rampup: i.rampup,
            iops: (r + w) as f64 / secs,
            mbps: b as f64 / 1e6 / secs,
            p99_us: if interval.count() > 0 { interval.quantile_us(0.99) } else { 0.0 },
            latency: interval.live(),
        };
        let t_ms = i.elapsed.as_millis() as u64;
        let report = &mut self.report;
        report.sample(t_ms, "io.iops", t.iops);
        report.sample(t_ms, "io.read.iops", r as f64 / secs);
        report.sample(t_ms, "io.write.iops", w as f64 / secs);
        report.sample(t_ms, "io.mbps", t.mbps);
        if interval.count() > 0 {
            report.sample(t_ms, "io.lat.p99", t.p99_us);
        }
        (self.tick)(&t);
    }
}

/// What a thread builds before the clock starts.
struct Ready {
    queue: Box<dyn Queue>,
    offsets: Offsets,
    depth: usize,
}

/// Runs one profile against a prepared target. Each thread opens its queue
/// and builds its offsets before the clock starts; a failure there is
/// returned as an error and nothing is measured. `stop` ends the profile
/// early (what was measured is kept, `stopped` set); `tick` is called once
/// a second from this thread.
pub fn run_profile(
    p: &Profile,
    target: &Target,
    opts: &RunOptions,
    stop: &AtomicBool,
    tick: &mut dyn FnMut(&Tick),
) -> Result<ProfileResult, IoError> {
    let threads = p.threads as usize;
    let engine = opts.engine.as_ref();
    // Without asynchronous submission a queue holds one I/O.
    let depth = if engine.caps().asynchronous { p.qd as usize } else { 1 };
    let ledger = if opts.verify { Some(Ledger::open(target, p).map_err(IoError::Ledger)?) } else { None };
    let lives: Vec<Arc<Live>> = (0..threads)
        .map(|_| Arc::new(Live { interval: Mutex::new(Some(LatencyHistogram::new())), ..Live::default() }))
        .collect();
    let loop_error: Mutex<Option<String>> = Mutex::new(None);
    let plan =
        StepPlan { workers: threads, rampup: p.rampup, duration: p.duration, name: "io", stack_size: None };
    let setup = |t: usize| -> Result<Ready, IoError> {
        let mut queue = engine.open(target, p, depth)?;
        let offsets = Offsets::new(p, target.size, t, opts.verify).map_err(IoError::Setup)?;
        let seed = seed_of(t);
        for slot in 0..depth {
            filler(queue.buf(slot), seed ^ slot as u64);
        }
        Ok(Ready { queue, offsets, depth })
    };
    let (lives_ref, loop_error_ref, ledger_ref) = (&lives, &loop_error, ledger.as_ref());
    let work = move |t: usize, ready: Ready, sh: &Shared<'_>| {
        let Ready { mut queue, offsets, depth } = ready;
        let clock = sh.clock();
        let mut w = Worker {
            p,
            sh,
            clock,
            ledger: ledger_ref,
            live: &lives_ref[t],
            out: ThreadOut::new(),
            offsets,
            rng: seed_of(t),
            writes_since_sync: 0,
            rate_step: p.rate.map(|r| Duration::from_secs_f64(p.threads as f64 / r)),
            next_due: in_burst(p.bursts, clock.start, clock.start),
        };
        if let Err(e) = io_loop(&mut w, queue.as_mut(), depth) {
            *loop_error_ref.lock().expect("loop error") = Some(e);
            sh.halt();
        }
        drop(queue);
        w.out
    };
    let mut sampler =
        IoSampler { lives: &lives, prev: vec![(0, 0, 0); threads], report: StepReport::default(), tick };
    let ran = storbench_runner::run_step(&plan, stop, &setup, &work, &mut sampler).map_err(|f| f.error)?;
    if let Some(e) = loop_error.into_inner().expect("loop error") {
        return Err(IoError::Engine(e));
    }
    if let Some(l) = &ledger {
        l.save().map_err(IoError::Ledger)?;
    }
    Ok(assemble(ran.outs, sampler.report, ran.window, ran.cpu, ran.stopped, ran.clock))
}

fn seed_of(t: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)
}

fn assemble(
    outs: Vec<ThreadOut>,
    mut report: StepReport,
    window: Duration,
    cpu: Option<(ProcessCpu, ProcessCpu)>,
    stopped: bool,
    tl: Clock,
) -> ProfileResult {
    let mut read = LatencyHistogram::new();
    let mut write = LatencyHistogram::new();
    let mut sync = LatencyHistogram::new();
    let (mut rb, mut wb, mut errors, mut mismatch_count, mut completed) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    let mut mismatches = Vec::new();
    for o in outs {
        read.merge(&o.read);
        write.merge(&o.write);
        sync.merge(&o.sync);
        rb += o.read_bytes;
        wb += o.write_bytes;
        errors += o.error_count;
        completed += o.completed;
        mismatch_count += o.mismatch_count;
        failures.extend(o.failures);
        mismatches.extend(o.mismatches);
    }
    failures.truncate(10);
    mismatches.sort_unstable();
    mismatches.truncate(10);
    let secs = window.as_secs_f64();
    let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    let (nr, nw) = (read.count() as f64, write.count() as f64);
    report.figure("io.iops", per_s(nr + nw), Unit::PerS);
    report.figure("io.read.iops", per_s(nr), Unit::PerS);
    report.figure("io.write.iops", per_s(nw), Unit::PerS);
    report.figure("io.mbps", per_s((rb + wb) as f64) / 1e6, Unit::MBps);
    report.figure("io.read.mbps", per_s(rb as f64) / 1e6, Unit::MBps);
    report.figure("io.write.mbps", per_s(wb as f64) / 1e6, Unit::MBps);
    let mut all = LatencyHistogram::new();
    all.merge(&read);
    all.merge(&write);
    if all.count() > 0 {
        report.latency("io.lat", &all);
    }
    if nr > 0.0 {
        report.latency("io.read.lat", &read);
    }
    if nw > 0.0 {
        report.latency("io.write.lat", &write);
    }
    if sync.count() > 0 {
        report.latency("io.sync.lat", &sync);
    }
    report.figure("io.sync.count", sync.count() as f64, Unit::Count);
    report.figure("io.read.count", nr, Unit::Count);
    report.figure("io.write.count", nw, Unit::Count);
    report.figure("io.completed", completed as f64, Unit::Count);
    report.figure("io.errors", errors as f64, Unit::Count);
    report.figure("io.window", secs, Unit::S);
    if let Some((from, to)) = cpu {
        report.cpu("io.cpu", "io", from, to, nr + nw, secs);
    }
    report.figure("io.verify.mismatches", mismatch_count as f64, Unit::Count);
    ProfileResult {
        report,
        failures,
        mismatches,
        mismatch_count,
        stopped,
        started: tl.start,
        measure_from: tl.measure_from,
    }
}

/// Per-thread state of the submission loop.
struct Worker<'a> {
    p: &'a Profile,
    sh: &'a Shared<'a>,
    clock: Clock,
    ledger: Option<&'a Ledger>,
    live: &'a Live,
    out: ThreadOut,
    offsets: Offsets,
    rng: u64,
    writes_since_sync: u32,
    rate_step: Option<Duration>,
    next_due: Instant,
}

/// `t`, or the start of the next burst when `t` falls in an idle part of
/// the `(burst, idle)` periods counted from `start`.
fn in_burst(bursts: Option<(Duration, Duration)>, start: Instant, t: Instant) -> Instant {
    let Some((on, off)) = bursts else { return t };
    let period = on + off;
    if period.is_zero() {
        return t;
    }
    let since = t.saturating_duration_since(start).as_nanos();
    let phase = since % period.as_nanos();
    if phase < on.as_nanos() {
        t
    } else {
        t + Duration::from_nanos((period.as_nanos() - phase) as u64)
    }
}

impl Worker<'_> {
    fn is_write(&mut self) -> bool {
        match self.p.read_pct {
            100 => false,
            0 => true,
            r => {
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                (self.rng % 100) as u8 >= r
            }
        }
    }

    /// The time an I/O is due: now without a rate, else its schedule
    /// (which skips the idle part of each burst period).
    fn due(&mut self, now: Instant) -> Instant {
        match self.rate_step {
            None => now,
            Some(step) => {
                let d = self.next_due;
                self.next_due = in_burst(self.p.bursts, self.clock.start, self.next_due + step);
                d
            }
        }
    }

    fn record(&mut self, write: bool, from: Instant, done: Instant, bytes: u64) {
        let lat = done.saturating_duration_since(from);
        self.out.completed += 1;
        if write {
            self.live.writes.fetch_add(1, Ordering::Relaxed);
        } else {
            self.live.reads.fetch_add(1, Ordering::Relaxed);
        }
        self.live.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(h) = self.live.interval.lock().expect("interval").as_mut() {
            h.record(lat);
        }
        if self.clock.in_window(done) {
            if write {
                self.out.write.record(lat);
                self.out.write_bytes += bytes;
            } else {
                self.out.read.record(lat);
                self.out.read_bytes += bytes;
            }
        }
    }

    fn check(&mut self, buf: &[u8], offset: u64) {
        let ledger = self.ledger.expect("verifying");
        if let verify::Check::Bad = ledger.check(buf, offset) {
            self.out.mismatch_count += 1;
            if self.out.mismatches.len() < 10 {
                self.out.mismatches.push(offset);
            }
        }
    }

    fn sync(&mut self, q: &mut dyn Queue) {
        let t0 = Instant::now();
        if let Err(e) = q.sync(self.p.fdatasync) {
            self.out.fail(0, e.raw_os_error().unwrap_or(0), format!("sync failed: {e}"));
            self.sh.halt();
        }
        let done = Instant::now();
        if self.clock.in_window(done) {
            self.out.sync.record(done - t0);
        }
    }

    /// Waits for `due`; false when the step must stop first.
    fn wait_until(&self, due: Instant) -> bool {
        while Instant::now() < due {
            if self.sh.should_stop() {
                return false;
            }
            let left = due - Instant::now();
            if left > Duration::from_micros(200) {
                std::thread::sleep((left - Duration::from_micros(100)).min(Duration::from_millis(20)));
            } else {
                std::hint::spin_loop();
            }
        }
        true
    }
}

/// Fills a write buffer with incompressible bytes once, at set-up.
fn filler(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for c in buf.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes());
    }
}

#[derive(Clone, Copy)]
struct Slot {
    offset: u64,
    write: bool,
    start: Instant,
    busy: bool,
}

/// One thread's submission loop over any engine's queue: keep the queue
/// full (or as full as the schedule allows), wait for at least one
/// completion, reap them all; with `fsync_every`, drain and sync as a
/// database log does.
fn io_loop(w: &mut Worker<'_>, q: &mut dyn Queue, depth: usize) -> Result<(), String> {
    let p = w.p;
    let bs = p.bs as usize;
    let verify_on = w.ledger.is_some();
    let now = Instant::now();
    let mut slots = vec![Slot { offset: 0, write: false, start: now, busy: false }; depth];
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut inflight = 0usize;
    let mut draining_for_sync = false;
    // An offset drawn while the same block was in flight (verifying only:
    // a thread never reads or rewrites a block it has in flight).
    let mut deferred: Option<u64> = None;
    // Sequential I/O submitted as a batch is merged by the block layer's
    // plug into larger requests: submit one by one so each I/O reaches the
    // device as itself (as fio's default iodepth_batch of 1 does).
    let submit_each = p.pattern == Pattern::Sequential;
    let mut stop_submitting = false;
    let mut reaped: Vec<Completion> = Vec::with_capacity(depth);

    loop {
        let now = Instant::now();
        if !stop_submitting && (w.sh.should_stop() || now >= w.clock.end) {
            stop_submitting = true;
        }
        if stop_submitting && inflight == 0 {
            break;
        }
        if !stop_submitting && !draining_for_sync {
            while let Some(&i) = free.last() {
                if w.rate_step.is_some() && w.next_due > Instant::now() {
                    break;
                }
                let offset = deferred.take().unwrap_or_else(|| w.offsets.next_offset());
                if verify_on && slots.iter().any(|s| s.busy && s.offset == offset) {
                    deferred = Some(offset);
                    break;
                }
                let due = w.due(now);
                free.pop();
                let write = w.is_write();
                if write {
                    if let Some(l) = w.ledger {
                        verify::stamp(q.buf(i), offset, l.next_stamp(offset));
                    }
                }
                slots[i] = Slot { offset, write, start: due, busy: true };
                q.push(Op { slot: i, offset, write })?;
                inflight += 1;
                if submit_each {
                    q.submit()?;
                }
                if write && p.fsync_every > 0 {
                    w.writes_since_sync += 1;
                    if w.writes_since_sync >= p.fsync_every {
                        // Like a database log: wait for the writes, then sync.
                        draining_for_sync = true;
                        break;
                    }
                }
            }
        }
        if inflight == 0 {
            if draining_for_sync {
                w.writes_since_sync = 0;
                w.sync(q);
                draining_for_sync = false;
            } else if w.rate_step.is_some() && !stop_submitting {
                let due = w.next_due;
                if !w.wait_until(due) {
                    stop_submitting = true;
                }
            }
            continue;
        }
        // Submit and wait for at least one completion; with a rate and room
        // in the queue, wake in time for the next scheduled I/O.
        if w.rate_step.is_some() && !free.is_empty() && !draining_for_sync && !stop_submitting {
            let left = w.next_due.saturating_duration_since(Instant::now());
            q.wait(1, Some(left))?;
        } else {
            q.wait(1, None)?;
        }
        let done_at = Instant::now();
        reaped.clear();
        q.reap(&mut reaped);
        for &(i, res) in &reaped {
            let s = slots[i];
            slots[i].busy = false;
            inflight -= 1;
            free.push(i);
            if res != bs as i32 {
                let (errno, what) = if res < 0 {
                    (-res, std::io::Error::from_raw_os_error(-res).to_string())
                } else {
                    (0, format!("short transfer: {res} of {bs} bytes"))
                };
                let kind = if s.write { "write" } else { "read" };
                w.out.fail(s.offset, errno, format!("{kind} at offset {}: {what}", s.offset));
                w.sh.halt();
                continue;
            }
            w.record(s.write, s.start, done_at, bs as u64);
            if !s.write && verify_on {
                w.check(q.buf(i), s.offset);
            }
        }
        if draining_for_sync && inflight == 0 {
            w.writes_since_sync = 0;
            w.sync(q);
            draining_for_sync = false;
        }
    }
    Ok(())
}
