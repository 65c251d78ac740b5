//! The one step runner every measurement uses: worker threads that set up
//! (connect, open a file, build an offset table), one barrier, one step
//! clock started when every worker is ready, one once-a-second sampler, and
//! the measured window's own CPU time. The I/O engine and the database
//! workloads both drive their workers through [`run_step`]; what a worker
//! does and what a sample holds stay theirs.
//!
//! Why the clock starts after the barrier: set-up (a connection, a ring, a
//! zipf table) takes time that grows with the load level and the target; a
//! clock stamped before it would put that time inside the measured window
//! and understate every rate by set-up ÷ duration when there is no ramp-up.
//!
//! This crate spawns threads and sleeps; it does no I/O and never prints.
//! It uses only `metrics` (for the process's CPU time).

#![deny(missing_docs)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use storbench_metrics::ProcessCpu;

/// The step's clock, fixed once every worker is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// When every worker was ready and the step began (ramp-up starts).
    pub start: Instant,
    /// When the measured window begins (`start` + ramp-up).
    pub measure_from: Instant,
    /// When the measured window ends.
    pub end: Instant,
}

impl Clock {
    /// A clock starting at `start`.
    pub fn new(start: Instant, rampup: Duration, duration: Duration) -> Clock {
        Clock { start, measure_from: start + rampup, end: start + rampup + duration }
    }

    /// True when `t` falls in the measured window (both ends included).
    #[inline]
    pub fn in_window(&self, t: Instant) -> bool {
        t >= self.measure_from && t <= self.end
    }
}

/// The wall-clock instant the next step may begin at (`--start-at`):
/// taken by the first step that runs after it is set.
static NEXT_START: Mutex<Option<SystemTime>> = Mutex::new(None);

/// The next step to run (normally a process's first) begins no earlier
/// than `at`, wall clock: its workers set up as usual, then wait together
/// at the barrier until the instant, so shards on several hosts measure
/// the same seconds. Later steps start as soon as they are ready.
pub fn begin_next_step_at(at: SystemTime) {
    *NEXT_START.lock().expect("start instant") = Some(at);
}

/// For a command that does not run its work through [`run_step`] (a
/// backup): waits for the start instant [`begin_next_step_at`] set, if any,
/// so it begins with the steps of the processes beside it.
pub fn wait_for_start_instant(stop: &AtomicBool) {
    wait_for_start(&NEXT_START, stop);
}

/// Waits for a pending start instant, if one was set, in slices of at most
/// 20 ms so a stop raised meanwhile ends the wait at once.
fn wait_for_start(slot: &Mutex<Option<SystemTime>>, stop: &AtomicBool) {
    let Some(at) = slot.lock().expect("start instant").take() else { return };
    while !stop.load(Ordering::Relaxed) {
        match at.duration_since(SystemTime::now()) {
            Ok(left) if !left.is_zero() => std::thread::sleep(left.min(Duration::from_millis(20))),
            _ => return,
        }
    }
}

/// What a step is: how many workers, its ramp-up and measured time.
#[derive(Clone, Debug)]
pub struct StepPlan {
    /// Worker threads.
    pub workers: usize,
    /// Run but kept out of the figures.
    pub rampup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Thread names are `{name}-{i}`.
    pub name: &'static str,
    /// Stack size of each worker thread (None: the default).
    pub stack_size: Option<usize>,
}

/// State every worker and the sampler share.
pub struct Shared<'a> {
    stop: &'a AtomicBool,
    halt: AtomicBool,
    clock: OnceLock<Clock>,
}

impl Shared<'_> {
    /// True once the step must end: the caller's stop flag (Ctrl-C), a
    /// worker's fatal error, or the end of the window.
    #[inline]
    pub fn should_stop(&self) -> bool {
        self.halt.load(Ordering::Relaxed) || self.stop.load(Ordering::Relaxed)
    }

    /// Ends the step for everyone (a fatal error in one worker).
    pub fn halt(&self) {
        self.halt.store(true, Ordering::Relaxed);
    }

    /// The step's clock. Workers see it once their set-up is done.
    pub fn clock(&self) -> Clock {
        *self.clock.get().expect("the clock is set before workers start")
    }

    /// Sleeps until `until`, waking early when the step must stop; false
    /// when it woke early. Sleeps in slices of at most 20 ms.
    pub fn sleep_until(&self, until: Instant) -> bool {
        loop {
            if self.should_stop() {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(20)));
        }
    }
}

/// One second (or the last part of one) as the sampler sees it.
#[derive(Clone, Copy, Debug)]
pub struct Interval {
    /// Now.
    pub at: Instant,
    /// Since the clock started.
    pub elapsed: Duration,
    /// Length of the interval, seconds (≥ 1 ms).
    pub secs: f64,
    /// In ramp-up.
    pub rampup: bool,
}

/// The caller's side of a step, called on the calling thread.
pub trait Sampler {
    /// The measured window begins (read server counters here).
    fn window_begins(&mut self) {}
    /// Once a second, and at the end of the window.
    fn sample(&mut self, i: &Interval);
    /// The measured window ended (or was cut short), before the workers are
    /// told to stop.
    fn window_ends(&mut self) {}
}

/// What a step measured.
#[derive(Debug)]
pub struct Ran<O> {
    /// Each worker's output, in worker order.
    pub outs: Vec<O>,
    /// The step's clock.
    pub clock: Clock,
    /// The measured window actually held (shorter when stopped).
    pub window: Duration,
    /// Stopped before the end by the stop flag or a halt.
    pub stopped: bool,
    /// The process's CPU time over the window (None when the window never
    /// began).
    pub cpu: Option<(ProcessCpu, ProcessCpu)>,
}

/// A worker's set-up failed; the step did not run.
#[derive(Debug)]
pub struct SetupFailed<E> {
    /// The first worker that failed.
    pub worker: usize,
    /// Its error.
    pub error: E,
}

/// Runs one step: `setup(i)` in each worker's thread, then, once every
/// worker is ready, the clock starts and `work(i, state, shared)` runs in
/// each; `sampler` is called once a second from this thread until the
/// window ends or `stop` is raised, then workers are halted and joined.
/// A worker must return soon after [`Shared::should_stop`] turns true or
/// its clock's `end` passes. The state `W` a set-up makes never leaves
/// its thread (a connection need not be `Send`).
pub fn run_step<W, O, E>(
    plan: &StepPlan,
    stop: &AtomicBool,
    setup: &(dyn Fn(usize) -> Result<W, E> + Sync),
    work: &(dyn Fn(usize, W, &Shared<'_>) -> O + Sync),
    sampler: &mut dyn Sampler,
) -> Result<Ran<O>, SetupFailed<E>>
where
    O: Send,
    E: Send,
{
    let n = plan.workers.max(1);
    let shared = Shared { stop, halt: AtomicBool::new(false), clock: OnceLock::new() };
    let ready = Barrier::new(n + 1);
    let failed: Mutex<Option<SetupFailed<E>>> = Mutex::new(None);
    // Set before the barrier by a worker whose set-up failed; read after it.
    let any_failed = AtomicBool::new(false);

    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (shared, ready, failed, any_failed) = (&shared, &ready, &failed, &any_failed);
                let mut b = std::thread::Builder::new().name(format!("{}-{i}", plan.name));
                if let Some(sz) = plan.stack_size {
                    b = b.stack_size(sz);
                }
                b.spawn_scoped(s, move || {
                    let state = setup(i);
                    let state = match state {
                        Ok(st) => Some(st),
                        Err(error) => {
                            let mut f = failed.lock().expect("setup lock");
                            if f.is_none() {
                                *f = Some(SetupFailed { worker: i, error });
                            }
                            any_failed.store(true, Ordering::Relaxed);
                            shared.halt();
                            None
                        }
                    };
                    // First wait: this worker is ready. Second: the clock is set
                    // (or another worker's set-up failed: then no one runs).
                    ready.wait();
                    ready.wait();
                    let run = !any_failed.load(Ordering::Relaxed);
                    state.filter(|_| run).map(|st| work(i, st, shared))
                })
                .expect("spawning a worker thread")
            })
            .collect();
        ready.wait();
        // Every worker is ready: the step begins now, or at the common
        // start instant when one is pending.
        wait_for_start(&NEXT_START, stop);
        let clock = Clock::new(Instant::now(), plan.rampup, plan.duration);
        shared.clock.set(clock).expect("the clock is set once");
        ready.wait();
        let setup_failed = failed.lock().expect("setup lock").take();
        if let Some(f) = setup_failed {
            for h in handles {
                let _ = h.join();
            }
            return Err(f);
        }

        let mut cpu_from = None;
        let mut next_tick = clock.start + Duration::from_secs(1);
        let mut stopped_at = None;
        if plan.rampup.is_zero() {
            cpu_from = Some(ProcessCpu::now());
            sampler.window_begins();
        }
        loop {
            let window_due = cpu_from.is_none();
            let wake = if window_due { next_tick.min(clock.measure_from) } else { next_tick }.min(clock.end);
            let on_time = shared.sleep_until(wake);
            let now = Instant::now();
            if !on_time {
                stopped_at = Some(now);
                break;
            }
            if window_due && now >= clock.measure_from {
                cpu_from = Some(ProcessCpu::now());
                sampler.window_begins();
            }
            if now >= next_tick || now >= clock.end {
                let from = next_tick - Duration::from_secs(1);
                sampler.sample(&Interval {
                    at: now,
                    elapsed: now - clock.start,
                    secs: (now - from).as_secs_f64().max(1e-3),
                    rampup: now < clock.measure_from,
                });
                next_tick += Duration::from_secs(1);
            }
            if now >= clock.end {
                break;
            }
        }
        let window_end = stopped_at.unwrap_or(clock.end).min(clock.end);
        let cpu = cpu_from.map(|from| (from, ProcessCpu::now()));
        if cpu.is_some() {
            sampler.window_ends();
        }
        shared.halt();
        let outs: Vec<O> = handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked").expect("set-up succeeded"))
            .collect();
        Ok(Ran {
            outs,
            clock,
            window: window_end.saturating_duration_since(clock.measure_from),
            stopped: stopped_at.is_some(),
            cpu,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(Vec<Interval>, u32, u32);
    impl Sampler for Count {
        fn window_begins(&mut self) {
            self.1 += 1;
        }
        fn sample(&mut self, i: &Interval) {
            self.0.push(*i);
        }
        fn window_ends(&mut self) {
            self.2 += 1;
        }
    }

    fn plan(workers: usize, rampup_ms: u64, duration_ms: u64) -> StepPlan {
        StepPlan {
            workers,
            rampup: Duration::from_millis(rampup_ms),
            duration: Duration::from_millis(duration_ms),
            name: "t",
            stack_size: None,
        }
    }

    #[test]
    fn a_pending_start_instant_is_waited_for_once_and_a_stop_ends_the_wait() {
        let slot = Mutex::new(Some(SystemTime::now() + Duration::from_millis(300)));
        let (t0, stop) = (Instant::now(), AtomicBool::new(false));
        wait_for_start(&slot, &stop);
        assert!(t0.elapsed() >= Duration::from_millis(290), "waited {:?}", t0.elapsed());
        assert!(slot.lock().unwrap().is_none(), "the instant is taken by the step that waited");
        let t1 = Instant::now();
        wait_for_start(&slot, &stop);
        assert!(t1.elapsed() < Duration::from_millis(50), "a later step does not wait");
        *slot.lock().unwrap() = Some(SystemTime::now() + Duration::from_secs(60));
        stop.store(true, Ordering::Relaxed);
        let t2 = Instant::now();
        wait_for_start(&slot, &stop);
        assert!(t2.elapsed() < Duration::from_millis(50), "a stop ends the wait");
    }

    #[test]
    fn the_clock_starts_when_the_slowest_worker_is_ready() {
        // Regression: the clock was stamped before the barrier, so a slow
        // set-up (connecting) ran inside the measured window.
        let t0 = Instant::now();
        let stop = AtomicBool::new(false);
        let setup = |i: usize| -> Result<Instant, ()> {
            std::thread::sleep(Duration::from_millis(100 * i as u64));
            Ok(Instant::now())
        };
        let work = |_: usize, ready: Instant, sh: &Shared<'_>| {
            let c = sh.clock();
            let mut first = None;
            while !sh.should_stop() && Instant::now() < c.end {
                first.get_or_insert_with(Instant::now);
                std::thread::sleep(Duration::from_millis(5));
            }
            (ready, first.expect("ran at least once"))
        };
        let mut s = Count(Vec::new(), 0, 0);
        let r = run_step(&plan(4, 0, 300), &stop, &setup, &work, &mut s).unwrap();
        let last_ready = r.outs.iter().map(|o| o.0).max().unwrap();
        assert!(last_ready >= t0 + Duration::from_millis(300));
        assert!(r.clock.start >= last_ready, "the clock started before every worker was ready");
        assert!(r.outs.iter().all(|o| o.1 >= r.clock.start), "a worker ran before the clock");
        assert_eq!(r.window, Duration::from_millis(300));
        assert_eq!(r.clock.measure_from, r.clock.start);
        assert!(!r.stopped && r.cpu.is_some());
        assert_eq!((s.1, s.2), (1, 1), "window begins and ends once each");
        assert_eq!(s.0.len(), 1, "one sample, at the window's end");
    }

    #[test]
    fn a_failed_set_up_runs_no_worker_and_names_the_worker() {
        let stop = AtomicBool::new(false);
        let setup = |i: usize| if i == 2 { Err(format!("worker {i} cannot open")) } else { Ok(()) };
        let ran = std::sync::atomic::AtomicU32::new(0);
        let work = |_: usize, _: (), _: &Shared<'_>| {
            ran.fetch_add(1, Ordering::Relaxed);
        };
        let mut s = Count(Vec::new(), 0, 0);
        let e = run_step(&plan(3, 0, 10_000), &stop, &setup, &work, &mut s).unwrap_err();
        assert_eq!((e.worker, e.error.as_str()), (2, "worker 2 cannot open"));
        assert_eq!((s.0.len(), s.1), (0, 0));
        assert_eq!(ran.load(Ordering::Relaxed), 0, "no worker runs after a failed set-up");
    }

    #[test]
    fn ramp_up_samples_are_marked_and_the_stop_flag_cuts_the_window() {
        let stop = AtomicBool::new(false);
        let setup = |_: usize| Ok::<_, ()>(());
        let work = |_: usize, _: (), sh: &Shared<'_>| while sh.sleep_until(sh.clock().end) {};
        struct StopAt<'a>(&'a AtomicBool, Vec<Interval>, bool);
        impl Sampler for StopAt<'_> {
            fn window_begins(&mut self) {
                self.2 = true;
            }
            fn sample(&mut self, i: &Interval) {
                self.1.push(*i);
                if self.1.len() == 2 {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
        }
        let mut s = StopAt(&stop, Vec::new(), false);
        let r = run_step(&plan(2, 1500, 10_000), &stop, &setup, &work, &mut s).unwrap();
        assert!(r.stopped);
        assert!(s.1[0].rampup && !s.1[1].rampup, "second 1 is ramp-up, second 2 is not");
        assert!(s.2, "the window began at 1.5 s");
        assert!(r.window > Duration::ZERO && r.window < Duration::from_secs(2), "{:?}", r.window);
    }
}
