//! The deadline queue: requests wait in arrival order until one of the
//! model's units is free; the model picks which queued request it serves
//! and prices it; the request is then held until its completion time and
//! answered by the one timer thread (or at once by the submitting thread
//! when it is already due). No thread sleeps per request.
//!
//! Time is the model's: a unit's next request starts when the unit became
//! free in model time (not when the timer thread happened to wake), so a
//! late wake-up delays one reply but never shifts the model's timeline.
//! Replies that leave later than their deadline by more than [`LATE`] are
//! counted (`late` in the counters): the model then asked for less than
//! the daemon can honour, and the counters say so.
//!
//! A time scale ([`Sched::set_scale`]) makes the device run faster or
//! slower (×0.5: twice as fast; ×2: half as fast), for storage
//! sensitivity (issue 28). The device model then lives on a clock of its
//! own that runs 1/scale times as fast as the host's: it is asked for its
//! service time at model time ([`Sched::model_ns`]) and the unit stays busy
//! scale × that long. Scaling only the durations would not do: a disk's
//! rotational wait depends on the platter's angle at the request's start,
//! and a sequential writer that comes back twice as early would find the
//! sector elsewhere. A network's trips ([`Model::approach`],
//! [`Model::back`]) are the link's, not the device's, and stay on the
//! host's clock; requests already started keep their time. At scale 1
//! from the start, model time is the host's, exactly.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use storbench_metrics::LatencyHistogram;

#[cfg(test)]
use crate::model::Op;
use crate::model::{Model, Req, State};
use storbench_cache::trace;

/// A reply later than its deadline by more than this is counted late.
pub const LATE: Duration = Duration::from_micros(200);

/// How a request is answered; the daemon gives one per request. A plain
/// value (the scheduler is generic over it), so answering a request
/// allocates nothing.
pub trait Completion: Send + Sized {
    /// The request succeeded.
    fn ok(self);
    /// The request failed with this errno.
    fn fail(self, errno: i32);
}

struct Entry<C> {
    /// Which submission (from 1), so `submit` can tell whether it answered it.
    id: u64,
    req: Req,
    arrival_ns: u64,
    /// When it reaches the device ([`Model::approach`]); it queues for a
    /// unit from then.
    ready_ns: u64,
    done: C,
}

/// A request in service: its unit started it at `start_ns`; the model
/// completes it at `model_ns` (its reply may leave earlier by the
/// daemon's floor, [`Sched::set_floor`]).
struct Job<C> {
    entry: Entry<C>,
    start_ns: u64,
    model_ns: u64,
    /// How much earlier than its target the reply was set to leave, for
    /// the wake-ups it will pay after ([`Sched::set_lead`]).
    led_ns: u64,
}

/// An event on the deadline heap: a reply due (`job`), or a unit that
/// frees before the reply of its request is due (a network's way back,
/// `None`): the timer wakes then to start what is queued.
struct Timed<C> {
    at_ns: u64,
    seq: u64,
    job: Option<Job<C>>,
}

impl<C> PartialEq for Timed<C> {
    fn eq(&self, o: &Self) -> bool {
        (self.at_ns, self.seq) == (o.at_ns, o.seq)
    }
}
impl<C> Eq for Timed<C> {}
impl<C> PartialOrd for Timed<C> {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl<C> Ord for Timed<C> {
    /// Reversed, so the max-heap pops the earliest first.
    fn cmp(&self, o: &Self) -> CmpOrdering {
        (o.at_ns, o.seq).cmp(&(self.at_ns, self.seq))
    }
}

/// Completions to call once the lock is released: usually none or one,
/// held inline, so the common path allocates nothing.
pub(crate) struct Batch<C> {
    first: Option<C>,
    rest: Vec<C>,
}

impl<C: Completion> Batch<C> {
    fn new() -> Batch<C> {
        Batch { first: None, rest: Vec::new() }
    }

    fn push(&mut self, c: C) {
        if self.first.is_none() {
            self.first = Some(c);
        } else {
            self.rest.push(c);
        }
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Answers every completion, in the order they were pushed; keeps
    /// the spill's capacity for the next round.
    fn answer(&mut self) {
        if let Some(c) = self.first.take() {
            c.ok();
        }
        for c in self.rest.drain(..) {
            c.ok();
        }
    }
}

/// Per-op figures of one interval.
#[derive(Default)]
pub(crate) struct OpStats {
    pub(crate) count: u64,
    pub(crate) bytes: u64,
    pub(crate) latency: LatencyHistogram,
    pub(crate) queue: LatencyHistogram,
    pub(crate) service: LatencyHistogram,
}

/// Figures since the last [`Sched::take_stats`].
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) ops: [OpStats; 4],
    /// Integral of outstanding requests over time (ns·requests).
    qd_area: u128,
    pub(crate) qd_max: u64,
    pub(crate) late: u64,
    pub(crate) errors: u64,
    since_ns: u64,
}

impl Stats {
    /// Mean outstanding requests over `[since, now]`.
    pub(crate) fn qd_avg(&self, now_ns: u64) -> f64 {
        let span = now_ns.saturating_sub(self.since_ns);
        if span == 0 {
            0.0
        } else {
            self.qd_area as f64 / span as f64
        }
    }
}

struct Inner<C> {
    state: State,
    /// When each unit is free again (model time, ns).
    units: Vec<u64>,
    queue: VecDeque<Entry<C>>,
    heap: BinaryHeap<Timed<C>>,
    seq: u64,
    outstanding: u64,
    last_change_ns: u64,
    stats: Stats,
    trace: Option<trace::TraceWriter<std::io::BufWriter<std::fs::File>>>,
    /// Scratch for [`Sched::dispatch`], kept to allocate once.
    cand: Vec<Req>,
    cand_at: Vec<usize>,
    /// The model's clock: at host time `.0` it read `.1` (ns), and it runs
    /// at 1/scale since ([`Sched::set_scale`]).
    clock_base: (u64, u64),
}

impl<C> Inner<C> {
    fn account(&mut self, now_ns: u64, delta: i64) {
        let dt = now_ns.saturating_sub(self.last_change_ns) as u128;
        self.stats.qd_area += dt * self.outstanding as u128;
        self.last_change_ns = now_ns.max(self.last_change_ns);
        self.outstanding = (self.outstanding as i64 + delta).max(0) as u64;
        self.stats.qd_max = self.stats.qd_max.max(self.outstanding);
    }
}

/// The scheduler of one medium; `C` answers a request.
pub struct Sched<C> {
    model: Model,
    inner: Mutex<Inner<C>>,
    cv: Condvar,
    clock: Instant,
    stop: AtomicBool,
    /// Power cut. Set under the lock (so a submit that holds the lock sees
    /// it or is failed by the cut), read without it by [`Sched::is_dead`].
    dead: AtomicBool,
    /// The daemon's own round trip (ns), absorbed: a reply leaves this
    /// much before the model's completion, never before its arrival.
    floor_ns: AtomicU64,
    /// The same for a 64 KiB request ([`Sched::set_floor_by_size`]).
    floor_64k_ns: AtomicU64,
    /// [`Lead`]: the near wait and its lead, the far wait and its lead (ns).
    lead: [AtomicU64; 4],
    /// The time scale's bits (an `f64`; 1.0 unless set).
    scale: AtomicU64,
}

/// How much of a timed reply's lateness the scheduler absorbs, by how far
/// its target is from its arrival (a vCPU asleep longer wakes slower):
/// the lead measured at a near and at a far wait, `(wait, lead)` in ns,
/// linear between them and the nearer one's beyond. Zero: none absorbed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Lead {
    /// The near wait and its lead.
    pub near: (u64, u64),
    /// The far wait and its lead (the near one again when only one was measured).
    pub far: (u64, u64),
}

impl Lead {
    /// One lead whatever the wait.
    pub fn flat(lead: Duration) -> Lead {
        let l = lead.as_nanos() as u64;
        Lead { near: (0, l), far: (0, l) }
    }

    /// The lead for a reply whose target is `away` ns after its arrival.
    pub fn at(&self, away: u64) -> u64 {
        let ((w0, l0), (w1, l1)) = (self.near, self.far);
        if away <= w0 || w1 <= w0 {
            l0
        } else if away >= w1 {
            l1
        } else {
            let f = (away - w0) as f64 / (w1 - w0) as f64;
            (l0 as f64 + f * (l1 as f64 - l0 as f64)).round() as u64
        }
    }
}

/// The smallest and largest time scale a scheduler takes: beyond them a
/// device would be faster than the daemon can answer, or so slow that a
/// filesystem above it times out.
pub const SCALE_RANGE: (f64, f64) = (0.01, 100.0);

/// Whether `factor` is a time scale a scheduler takes (finite, within
/// [`SCALE_RANGE`]); the error names the range.
pub fn check_scale(factor: f64) -> Result<(), String> {
    if factor.is_finite() && (SCALE_RANGE.0..=SCALE_RANGE.1).contains(&factor) {
        Ok(())
    } else {
        Err(format!(
            "a time scale must be {} to {} (×0.5: twice as fast, ×2: half as fast)",
            SCALE_RANGE.0, SCALE_RANGE.1
        ))
    }
}

/// A service time under a time scale: exact (untouched) at 1.
fn scaled(svc: Duration, scale: f64) -> u64 {
    let ns = svc.as_nanos() as u64;
    if scale == 1.0 {
        ns
    } else {
        (ns as f64 * scale).round() as u64
    }
}

impl<C: Completion> Sched<C> {
    /// A scheduler for `model`, optionally writing a trace.
    pub fn new(
        model: Model,
        trace: Option<trace::TraceWriter<std::io::BufWriter<std::fs::File>>>,
    ) -> Sched<C> {
        let units = vec![0; model.units()];
        let window = model.queue_window().max(1);
        Sched {
            model,
            inner: Mutex::new(Inner {
                state: State::default(),
                units,
                queue: VecDeque::new(),
                heap: BinaryHeap::new(),
                seq: 0,
                outstanding: 0,
                last_change_ns: 0,
                stats: Stats::default(),
                trace,
                cand: Vec::with_capacity(window),
                cand_at: Vec::with_capacity(window),
                clock_base: (0, 0),
            }),
            cv: Condvar::new(),
            clock: Instant::now(),
            stop: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            floor_ns: AtomicU64::new(0),
            floor_64k_ns: AtomicU64::new(0),
            lead: [0; 4].map(AtomicU64::new),
            scale: AtomicU64::new(1.0f64.to_bits()),
        }
    }

    /// Sets the time scale: each request started from now on takes
    /// `factor` times the device's service time the model gives it
    /// (checked by [`check_scale`]). The model's own state is priced as
    /// before; only the time a unit stays busy changes.
    pub fn set_scale(&self, factor: f64) -> Result<(), String> {
        check_scale(factor)?;
        // Under the lock, so a request dispatched after this returns sees it.
        let mut g = self.lock();
        let now = self.now_ns();
        g.clock_base = (now, self.to_model(&g, now));
        self.scale.store(factor.to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// Host time `t_ns` on the model's clock (a time before the last
    /// change of scale is taken back at the current rate).
    fn to_model(&self, g: &Inner<C>, t_ns: u64) -> u64 {
        let (host, model) = g.clock_base;
        let scale = self.scale();
        if scale == 1.0 {
            return (model + t_ns).saturating_sub(host);
        }
        let d = (t_ns.abs_diff(host) as f64 / scale).round() as u64;
        if t_ns >= host {
            model + d
        } else {
            model.saturating_sub(d)
        }
    }

    /// Now on the model's clock: the time to give the model's own
    /// timelines (an array's rebuild, a cache tier's figures).
    pub fn model_ns(&self) -> u64 {
        let g = self.lock();
        self.to_model(&g, self.now_ns())
    }

    /// The time scale in effect.
    pub fn scale(&self) -> f64 {
        f64::from_bits(self.scale.load(Ordering::Relaxed))
    }

    /// Absorbs the daemon's floor: the round trip the loop device, FUSE and
    /// the daemon add to every request (measured when the medium is made).
    /// A reply then leaves at arrival + model time − floor, never before
    /// the request arrived, so an application sees the model's time where
    /// that is above the floor. The model's own timeline (units, queueing,
    /// the counters' service and queue times) is unchanged.
    pub fn set_floor(&self, floor: Duration) {
        self.set_floor_by_size(floor, floor);
    }

    /// As [`Sched::set_floor`], with the floor of a 4 KiB request and of a
    /// 64 KiB one (the daemon copies the data through FUSE: a larger
    /// request's round trip is longer): linear between them, the 4 KiB
    /// floor below and the 64 KiB one above (not extrapolated).
    pub fn set_floor_by_size(&self, at_4k: Duration, at_64k: Duration) {
        self.floor_ns.store(at_4k.as_nanos() as u64, Ordering::Relaxed);
        self.floor_64k_ns.store(at_64k.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The floor being absorbed (of a 4 KiB request).
    pub fn floor(&self) -> Duration {
        Duration::from_nanos(self.floor_ns.load(Ordering::Relaxed))
    }

    /// The floor of a request of `len` bytes, ns.
    fn floor_of(&self, len: u64) -> u64 {
        const SMALL: u64 = 4 << 10;
        const LARGE: u64 = 64 << 10;
        let (small, large) =
            (self.floor_ns.load(Ordering::Relaxed), self.floor_64k_ns.load(Ordering::Relaxed));
        if len <= SMALL || large <= small {
            small
        } else {
            let f = (len.min(LARGE) - SMALL) as f64 / (LARGE - SMALL) as f64;
            small + (f * (large - small) as f64).round() as u64
        }
    }

    /// Absorbs a timed reply's wake-ups besides the floor: a reply that
    /// waits for the timer finds the loop device's worker and the
    /// application asleep, and their wake-ups (measured with the floor)
    /// come after it leaves; one sent at once pays none. Such a reply
    /// leaves [`Lead::at`] its wait before its target (arrival + model
    /// time − floor). A target less than that lead away leaves at once
    /// when under half of it away (early by less than half), else at the
    /// target (late by about the lead): the error is at most half the lead
    /// either way.
    pub fn set_lead(&self, lead: Lead) {
        let [a, b, c, d] = &self.lead;
        a.store(lead.near.0, Ordering::Relaxed);
        b.store(lead.near.1, Ordering::Relaxed);
        c.store(lead.far.0, Ordering::Relaxed);
        d.store(lead.far.1, Ordering::Relaxed);
    }

    /// The lead in effect.
    fn lead(&self) -> Lead {
        let [a, b, c, d] = self.lead.each_ref().map(|x| x.load(Ordering::Relaxed));
        Lead { near: (a, b), far: (c, d) }
    }

    /// When a reply due at `target` for a request that arrived at
    /// `arrival` leaves, and how much before its target.
    fn leave_at(&self, target: u64, arrival: u64) -> (u64, u64) {
        let away = target.saturating_sub(arrival);
        let lead = self.lead().at(away);
        if lead == 0 || away == 0 {
            (target.max(arrival), 0)
        } else if away > lead {
            (target - lead, lead)
        } else if away < lead / 2 {
            (arrival, 0)
        } else {
            (target, 0)
        }
    }

    /// Nanoseconds on the scheduler's clock.
    pub fn now_ns(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    fn lock(&self) -> MutexGuard<'_, Inner<C>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Submits a request that arrived at `arrival_ns` (its data already
    /// read or written); `done` is called at its completion time. Says
    /// whether the request is still pending on return (false: answered,
    /// or failed, by this call).
    pub fn submit(&self, req: Req, arrival_ns: u64, done: C) -> bool {
        let mut g = self.lock();
        if self.dead.load(Ordering::Relaxed) {
            g.stats.errors += 1;
            drop(g);
            done.fail(libc::EIO);
            return false;
        }
        let now = self.now_ns();
        g.account(now, 1);
        let ready_ns = self.model.approach(&req, &mut g.state, arrival_ns);
        g.seq += 1;
        let id = g.seq;
        g.queue.push_back(Entry { id, req, arrival_ns, ready_ns, done });
        let before = g.heap.peek().map(|t| t.at_ns);
        self.dispatch(&mut g, now);
        let mut due = Batch::new();
        let answered = self.pop_due(&mut g, now, id, &mut due).1;
        let after = g.heap.peek().map(|t| t.at_ns);
        drop(g);
        if after.is_some() && (before.is_none() || after < before) {
            self.cv.notify_one();
        }
        due.answer();
        !answered
    }

    /// Starts queued requests on units free by `now`. A unit that became
    /// free in the past starts its next request then (model time), and
    /// chooses among the requests that had reached the device by then.
    fn dispatch(&self, g: &mut Inner<C>, now: u64) {
        let window = self.model.queue_window().max(1);
        while !g.queue.is_empty() {
            let (u, free_at) = g.units.iter().copied().enumerate().min_by_key(|(_, f)| *f).expect("a unit");
            if free_at > now {
                break;
            }
            let first_ready = g.queue.iter().take(window).map(|e| e.ready_ns).min().expect("queued");
            let start = free_at.max(first_ready);
            g.cand.clear();
            g.cand_at.clear();
            for (i, e) in g.queue.iter().take(window).enumerate() {
                if e.ready_ns <= start {
                    g.cand.push(e.req);
                    g.cand_at.push(i);
                }
            }
            let at = self.to_model(g, start);
            let k = if g.cand.len() == 1 { 0 } else { self.model.pick(&g.cand, &g.state, at) };
            let e = g.queue.remove(g.cand_at[k]).expect("picked from the window");
            let svc = self.model.service_time(&e.req, &mut g.state, at);
            let free = start + scaled(svc, self.scale());
            g.units[u] = free;
            let back = self.model.back(&e.req).as_nanos() as u64;
            let model_ns = free + back;
            let target = model_ns.saturating_sub(self.floor_of(e.req.len));
            let (at_ns, led_ns) = self.leave_at(target, e.arrival_ns);
            if at_ns != free {
                // The unit frees at another time than the reply leaves (a
                // network's way back after it, the absorbed floor before
                // it): wake then, to start what is queued for it.
                g.seq += 1;
                let seq = g.seq;
                g.heap.push(Timed { at_ns: free, seq, job: None });
            }
            g.seq += 1;
            let seq = g.seq;
            g.heap.push(Timed { at_ns, seq, job: Some(Job { entry: e, start_ns: start, model_ns, led_ns }) });
        }
    }

    /// Takes every reply due by `now`, recording its figures; says whether
    /// anything was due (a reply, or a unit freeing), and whether request
    /// `mine` was among them.
    fn pop_due(&self, g: &mut Inner<C>, now: u64, mine: u64, out: &mut Batch<C>) -> (bool, bool) {
        let mut any = false;
        let mut found = false;
        while g.heap.peek().is_some_and(|t| t.at_ns <= now) {
            let t = g.heap.pop().expect("peeked");
            any = true;
            let Some(j) = t.job else { continue };
            g.account(now, -1);
            let (r, arrival, deadline) = (j.entry.req, j.entry.arrival_ns, j.model_ns);
            if now > t.at_ns + LATE.as_nanos() as u64 {
                g.stats.late += 1;
            }
            // As the application sees it: the daemon's time plus the floor
            // the request spent outside it, and the wake-ups a reply sent
            // early for them pays after it.
            let lat = now - arrival.min(now) + self.floor_of(r.len) + j.led_ns;
            // Queue: waiting for a unit once at the device; service: the
            // rest of the model's time (a network's trips and the device's).
            let queue = j.start_ns.saturating_sub(j.entry.ready_ns);
            let s = &mut g.stats.ops[r.op.index()];
            s.count += 1;
            s.bytes += r.len;
            s.latency.record_ns(lat);
            s.queue.record_ns(queue);
            s.service.record_ns(deadline.saturating_sub(arrival).saturating_sub(queue));
            if let Some(w) = g.trace.as_mut() {
                let _ = w.write(&trace::Record {
                    t_ns: arrival,
                    offset: r.offset,
                    len: r.len.min(u32::MAX as u64) as u32,
                    lat_ns: lat.min(u32::MAX as u64) as u32,
                    op: trace_op(r.op),
                });
            }
            found |= j.entry.id == mine;
            out.push(j.entry.done);
        }
        (any, found)
    }

    /// The timer thread's loop: answers requests at their deadlines until
    /// [`Sched::stop`].
    pub fn run_timer(&self) {
        // SAFETY: prctl on the calling thread; a 1 ns timer slack makes
        // the kernel wake us at the deadline, not up to 50 µs after it.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
        let mut due = Batch::new();
        let mut g = self.lock();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let now = self.now_ns();
            // Ids start at 1: 0 is no request's.
            if self.pop_due(&mut g, now, 0, &mut due).0 {
                self.dispatch(&mut g, now);
                self.pop_due(&mut g, now, 0, &mut due);
                if !due.is_empty() {
                    drop(g);
                    due.answer();
                    g = self.lock();
                }
                continue;
            }
            match g.heap.peek().map(|t| t.at_ns) {
                None => g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(deadline) => {
                    let wait = deadline.saturating_sub(now);
                    if wait < 30_000 {
                        // The last stretch: spin briefly rather than trust a wake-up.
                        drop(g);
                        while self.now_ns() < deadline {
                            std::hint::spin_loop();
                        }
                        g = self.lock();
                    } else {
                        let (ng, _) = self
                            .cv
                            .wait_timeout(g, Duration::from_nanos(wait - 20_000))
                            .unwrap_or_else(|p| p.into_inner());
                        g = ng;
                    }
                }
            }
        }
    }

    /// Ends the timer thread.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _g = self.lock();
        self.cv.notify_all();
    }

    /// Power cut: every queued and in-flight request fails, and so does
    /// every later one.
    pub fn cut(&self) {
        let mut g = self.lock();
        self.dead.store(true, Ordering::Relaxed);
        let mut failed: Vec<C> = g.queue.drain(..).map(|e| e.done).collect();
        failed.extend(g.heap.drain().filter_map(|t| t.job).map(|j| j.entry.done));
        g.stats.errors += failed.len() as u64;
        let now = self.now_ns();
        let n = failed.len() as i64;
        g.account(now, -n);
        drop(g);
        for f in failed {
            f.fail(libc::EIO);
        }
    }

    /// Whether the power is cut (no lock taken).
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    /// Hands over the figures since the last call and starts a new interval.
    pub(crate) fn take_stats(&self) -> (Stats, u64) {
        let mut g = self.lock();
        let now = self.now_ns();
        g.account(now, 0);
        let mut s = std::mem::take(&mut g.stats);
        g.stats.since_ns = now;
        g.stats.qd_max = g.outstanding;
        if let Some(t) = g.trace.as_mut() {
            let _ = t.flush();
        }
        s.since_ns = s.since_ns.min(now);
        (s, now)
    }

    /// Flushes the trace (at exit).
    pub fn flush_trace(&self) {
        if let Some(t) = self.lock().trace.as_mut() {
            let _ = t.flush();
        }
    }
}

/// The trace's op for a model op (the two enums are kept apart: the model's
/// is the emulator's, the trace's belongs to the format in `cache`).
fn trace_op(op: crate::model::Op) -> trace::Op {
    use crate::model::Op;
    match op {
        Op::Read => trace::Op::Read,
        Op::Write => trace::Op::Write,
        Op::Flush => trace::Op::Flush,
        Op::Discard => trace::Op::Discard,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::Arc;

    use super::*;
    use crate::model::Spec;

    struct Tx(mpsc::Sender<(u64, bool)>, Arc<Sched<Tx>>);

    impl Completion for Tx {
        fn ok(self) {
            let _ = self.0.send((self.1.now_ns(), true));
        }
        fn fail(self, _errno: i32) {
            let _ = self.0.send((self.1.now_ns(), false));
        }
    }

    fn sched(sets: &[&str]) -> Arc<Sched<Tx>> {
        model_sched("constant", sets)
    }

    fn model_sched(model: &str, sets: &[&str]) -> Arc<Sched<Tx>> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let m = Spec::parse(model, &sets).unwrap().build(1 << 30).unwrap();
        let s = Arc::new(Sched::new(m, None));
        let t = s.clone();
        std::thread::spawn(move || t.run_timer());
        s
    }

    #[test]
    fn requests_complete_at_the_model_time_and_queue_for_units() {
        let s = sched(&["read=5ms", "units=2"]);
        let (tx, rx) = mpsc::channel();
        let t0 = s.now_ns();
        for i in 0..4 {
            s.submit(Req { op: Op::Read, offset: i * 4096, len: 4096 }, t0, Tx(tx.clone(), s.clone()));
        }
        let mut done: Vec<u64> = (0..4)
            .map(|_| rx.recv().unwrap())
            .map(|(t, ok)| {
                assert!(ok);
                t - t0
            })
            .collect();
        done.sort();
        // Two units: two complete at 5 ms, two at 10 ms (the second pair
        // queued). Never early; how late depends on the host, so the bound
        // is loose (the daemon's lateness is measured in bench/, not here).
        for (i, d) in done.iter().enumerate() {
            let want = if i < 2 { 5_000_000 } else { 10_000_000 };
            assert!(*d >= want && *d < want + 100_000_000, "request {i} done at {d} ns, want {want}");
        }
        // In the model's time the queueing is exact: two waited 5 ms.
        let (st, _) = s.take_stats();
        let q = &st.ops[Op::Read.index()].queue;
        assert_eq!(q.count(), 4);
        assert!((q.quantile_us(1.0) - 5000.0).abs() < 10.0, "{}", q.quantile_us(1.0));
        assert!(q.quantile_us(0.5) < 1.0, "{}", q.quantile_us(0.5));
        assert!((st.ops[Op::Read.index()].service.mean_us() - 5000.0).abs() < 10.0);
        s.stop();
    }

    #[test]
    fn the_floor_is_absorbed_but_never_before_arrival() {
        let s = sched(&["read=100ms", "units=1"]);
        s.set_floor(Duration::from_millis(50));
        let (tx, rx) = mpsc::channel();
        let t0 = s.now_ns();
        s.submit(Req { op: Op::Read, offset: 0, len: 4096 }, t0, Tx(tx.clone(), s.clone()));
        let d = rx.recv().unwrap().0 - t0;
        // Replied at 100 − 50 ms (late by at most what the host adds).
        assert!((50_000_000..100_000_000).contains(&d), "answered after {d} ns");
        // The model's timeline is unchanged: the service time is 100 ms,
        // and the latency recorded is the application's (floor included).
        let (st, _) = s.take_stats();
        let o = &st.ops[Op::Read.index()];
        assert!((o.service.mean_us() - 100_000.0).abs() < 100.0, "{}", o.service.mean_us());
        assert!(o.latency.mean_us() >= 99_000.0, "{}", o.latency.mean_us());
        // Queued requests still start when the unit frees, though each
        // reply leaves before that (the floor): three on one unit.
        let q = sched(&["read=20ms", "units=1"]);
        q.set_floor(Duration::from_millis(10));
        let t0 = q.now_ns();
        for i in 0..3 {
            q.submit(Req { op: Op::Read, offset: i * 4096, len: 4096 }, t0, Tx(tx.clone(), q.clone()));
        }
        let mut done: Vec<u64> =
            (0..3).map(|_| rx.recv_timeout(Duration::from_secs(5)).expect("answered").0 - t0).collect();
        done.sort();
        for (i, d) in done.iter().enumerate() {
            let want = 10_000_000 + i as u64 * 20_000_000;
            assert!(*d >= want && *d < want + 100_000_000, "request {i} done at {d} ns, want {want}");
        }
        q.stop();
        // A model faster than the floor: answered at once, by the submitter.
        let f = sched(&["read=1ms"]);
        f.set_floor(Duration::from_millis(50));
        let pending = f.submit(Req { op: Op::Read, offset: 0, len: 4096 }, f.now_ns(), Tx(tx, f.clone()));
        assert!(!pending);
        s.stop();
        f.stop();
    }

    #[test]
    fn a_timed_reply_leaves_early_by_its_lead_and_records_it() {
        // Floor 10 ms, lead 30 ms throughout.
        let timed = |read: &str| {
            let s = sched(&[read, "units=1"]);
            s.set_floor(Duration::from_millis(10));
            s.set_lead(Lead::flat(Duration::from_millis(30)));
            s
        };
        let read = Req { op: Op::Read, offset: 0, len: 4096 };
        let (tx, rx) = mpsc::channel();
        // A 100 ms read leaves at 100 − 10 − 30.
        let s = timed("read=100ms");
        let t0 = s.now_ns();
        s.submit(read, t0, Tx(tx.clone(), s.clone()));
        let d = rx.recv().unwrap().0 - t0;
        assert!((60_000_000..90_000_000).contains(&d), "answered after {d} ns");
        // The latency recorded is the application's: the lead is paid after.
        let (st, _) = s.take_stats();
        let o = &st.ops[Op::Read.index()];
        assert!(o.latency.mean_us() >= 99_000.0, "{}", o.latency.mean_us());
        s.stop();
        // A target less than the lead away: under half of it, at once
        // (early by less than half the lead) ...
        let near = timed("read=20ms");
        assert!(!near.submit(read, near.now_ns(), Tx(tx.clone(), near.clone())), "10 ms away: at once");
        assert!(rx.try_recv().unwrap().1);
        near.stop();
        // ... over half of it, at the target (late by the lead, not early
        // by more than half of it).
        let far = timed("read=35ms");
        let t0 = far.now_ns();
        assert!(far.submit(read, t0, Tx(tx, far.clone())));
        let d = rx.recv().unwrap().0 - t0;
        assert!((25_000_000..75_000_000).contains(&d), "answered after {d} ns");
        far.stop();
    }

    #[test]
    fn a_larger_request_s_floor_is_the_64k_probe_s_and_linear_between() {
        let s = sched(&[]);
        s.set_floor_by_size(Duration::from_micros(20), Duration::from_micros(50));
        assert_eq!([s.floor_of(512), s.floor_of(4096)], [20_000, 20_000]);
        assert_eq!(s.floor_of(34 << 10), 35_000, "halfway from 4 KiB to 64 KiB");
        assert_eq!([s.floor_of(64 << 10), s.floor_of(1 << 20)], [50_000, 50_000], "not extrapolated");
        s.set_floor(Duration::from_micros(20));
        assert_eq!(s.floor_of(1 << 20), 20_000, "one floor for every size");
        s.stop();
    }

    #[test]
    fn a_lead_measured_at_two_waits_is_linear_between_them_and_flat_beyond() {
        let lead = Lead { near: (200_000, 20_000), far: (1_000_000, 60_000) };
        assert_eq!([lead.at(0), lead.at(200_000)], [20_000, 20_000], "the near lead below the near wait");
        assert_eq!(lead.at(600_000), 40_000, "halfway: halfway between");
        assert_eq!([lead.at(1_000_000), lead.at(9_000_000)], [60_000, 60_000], "the far lead beyond");
        assert_eq!(Lead::flat(Duration::from_micros(30)).at(5_000_000), 30_000);
        assert_eq!(Lead::default().at(1_000), 0, "none");
        // Farther waits lead by more: a 1 s wait with a far lead of 300 ms
        // leaves 300 ms before its target, a 150 ms one by the near 30 ms.
        let s = sched(&["read=1s", "units=1"]);
        s.set_lead(Lead { near: (100_000_000, 30_000_000), far: (900_000_000, 300_000_000) });
        let read = Req { op: Op::Read, offset: 0, len: 4096 };
        let (tx, rx) = mpsc::channel();
        let t0 = s.now_ns();
        s.submit(read, t0, Tx(tx, s.clone()));
        let d = rx.recv().unwrap().0 - t0;
        assert!((650_000_000..750_000_000).contains(&d), "answered after {d} ns");
        s.stop();
    }

    #[test]
    fn a_due_request_is_answered_by_the_submitter() {
        let s = sched(&[]);
        let (tx, rx) = mpsc::channel();
        let pending = s.submit(Req { op: Op::Write, offset: 0, len: 4096 }, s.now_ns(), Tx(tx, s.clone()));
        // Answered before submit returned, and submit says so.
        assert!(!pending);
        assert!(rx.try_recv().unwrap().1);
        s.stop();
    }

    #[test]
    fn a_power_cut_fails_what_is_queued_and_what_comes_later() {
        let s = sched(&["read=1s", "units=1"]);
        let (tx, rx) = mpsc::channel();
        for _ in 0..2 {
            s.submit(Req { op: Op::Read, offset: 0, len: 4096 }, s.now_ns(), Tx(tx.clone(), s.clone()));
        }
        s.cut();
        s.submit(Req { op: Op::Read, offset: 0, len: 4096 }, s.now_ns(), Tx(tx, s.clone()));
        for _ in 0..3 {
            let (t, ok) = rx.recv_timeout(Duration::from_millis(500)).unwrap();
            assert!(!ok, "failed at {t}");
        }
        assert!(s.is_dead());
        s.stop();
    }

    #[test]
    fn a_networks_round_trip_overlaps_the_devices_time() {
        // A NAS with a 2 ms round trip in front of a one-unit device taking
        // 1 ms; the link is fast enough not to matter (41 ns per 4 KiB).
        let s = model_sched(
            "gbe-nas",
            &["rtt=2ms", "link_rate=100GB/s", "backing=constant", "backing.read=1ms", "backing.units=1"],
        );
        let (tx, rx) = mpsc::channel();
        let t0 = s.now_ns();
        for i in 0..2 {
            s.submit(Req { op: Op::Read, offset: i * 4096, len: 4096 }, t0, Tx(tx.clone(), s.clone()));
        }
        let mut done: Vec<u64> = (0..2).map(|_| rx.recv().unwrap()).map(|(t, _)| t - t0).collect();
        done.sort();
        // Both reach the device at 1 ms; the device serves them one after
        // the other (1-2 ms, 2-3 ms); each reply travels 1 ms back: 3 ms
        // and 4 ms. Were the round trip to hold the device's only unit,
        // the second would end at 6 ms.
        for (i, d) in done.iter().enumerate() {
            let want = 3_000_000 + i as u64 * 1_000_000;
            assert!(*d >= want && *d < want + 100_000_000, "request {i} done at {d} ns, want {want}");
        }
        // In the model's time, exactly: the second waited 1 ms for the unit,
        // not 3 ms; service (all but that wait) is 3 ms for both.
        let (st, _) = s.take_stats();
        let o = &st.ops[Op::Read.index()];
        assert!((o.queue.quantile_us(1.0) - 1000.0).abs() < 5.0, "queue {}", o.queue.quantile_us(1.0));
        assert!(o.queue.quantile_us(0.5) < 1.0, "{}", o.queue.quantile_us(0.5));
        assert!((o.service.mean_us() - 3000.0).abs() < 5.0, "service {}", o.service.mean_us());
        s.stop();
    }

    /// One request alone on an idle scheduler: its service time in the
    /// model's time (exact: no host timing in it).
    fn one_service_us(s: &Arc<Sched<Tx>>) -> f64 {
        let (tx, rx) = mpsc::channel();
        s.take_stats();
        s.submit(Req { op: Op::Read, offset: 0, len: 4096 }, s.now_ns(), Tx(tx, s.clone()));
        rx.recv_timeout(Duration::from_secs(5)).expect("answered");
        let (st, _) = s.take_stats();
        st.ops[Op::Read.index()].service.mean_us()
    }

    #[test]
    fn the_time_scale_multiplies_the_devices_service_time() {
        let s = sched(&["read=10ms", "units=1"]);
        assert_eq!(s.scale(), 1.0);
        assert!((one_service_us(&s) - 10_000.0).abs() < 10.0);
        s.set_scale(0.5).unwrap();
        assert!((one_service_us(&s) - 5_000.0).abs() < 10.0, "×0.5");
        s.set_scale(2.0).unwrap();
        assert!((one_service_us(&s) - 20_000.0).abs() < 20.0, "×2");
        s.set_scale(1.0).unwrap();
        assert!((one_service_us(&s) - 10_000.0).abs() < 10.0, "back to 1");
        // Out of range or not a number: refused, and the scale stays.
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1000.0] {
            let e = s.set_scale(bad).unwrap_err();
            assert!(e.contains("0.01 to 100"), "{e}");
        }
        assert_eq!(s.scale(), 1.0);
        s.stop();
    }

    #[test]
    fn the_time_scale_leaves_a_networks_trips_alone() {
        // 2 ms round trip, 1 ms device: at ×2 the device takes 2 ms and
        // the trips stay 2 ms, so 4 ms in all (not 6 ms).
        let s = model_sched(
            "gbe-nas",
            &["rtt=2ms", "link_rate=100GB/s", "backing=constant", "backing.read=1ms", "backing.units=1"],
        );
        assert!((one_service_us(&s) - 3000.0).abs() < 5.0);
        s.set_scale(2.0).unwrap();
        let us = one_service_us(&s);
        assert!((us - 4000.0).abs() < 5.0, "service {us} µs");
        s.stop();
    }

    #[test]
    fn under_a_time_scale_the_model_runs_on_its_own_clock() {
        let s = sched(&["read=1ms"]);
        {
            // At scale 1 from the start, model time is the host's, exactly.
            let g = s.lock();
            assert_eq!(s.to_model(&g, 123_456_789), 123_456_789);
        }
        s.set_scale(0.5).unwrap();
        let (h, m) = s.lock().clock_base;
        {
            // Twice as fast: a host millisecond is two of the model's, and
            // a time before the change is taken back at the same rate.
            let g = s.lock();
            assert_eq!(s.to_model(&g, h + 1_000_000), m + 2_000_000);
            assert_eq!(s.to_model(&g, h.saturating_sub(1_000)), m.saturating_sub(2_000));
        }
        s.set_scale(2.0).unwrap();
        let (h2, m2) = s.lock().clock_base;
        // The clock went on from where it was: never backwards.
        assert!(m2 >= m + 2 * (h2 - h) - 2, "{m2} after {m}");
        let g = s.lock();
        assert_eq!(s.to_model(&g, h2 + 1_000_000), m2 + 500_000);
        drop(g);
        s.stop();
    }
}
