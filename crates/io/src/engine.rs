//! The engine: one thread per profile thread, each with its own queue
//! (io_uring with registered file and buffers, or psync with one I/O in
//! flight), its own histograms and its own counters; the calling thread
//! collects once a second and assembles the step's figures at the end.
//!
//! Latency is submission to completion, per I/O, in nanoseconds; with a
//! rate, from the scheduled time (an I/O that waits for a free slot carries
//! that wait). Only I/Os that complete inside the measured window count.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};
use storbench_metrics::{LatencyHistogram, ProcessCpu, StepReport, Unit};

use crate::dist::Offsets;
use crate::profile::Profile;
use crate::target::Target;
use crate::verify;

/// Which engine submits the I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// io_uring: the queue kept full, completions reaped in batches.
    Uring,
    /// pread/pwrite: one I/O in flight per thread.
    Psync,
}

impl Engine {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Uring => "io_uring",
            Engine::Psync => "psync",
        }
    }
}

/// Whether io_uring works here; the reason when it does not.
pub fn uring_available() -> Result<(), String> {
    IoUring::new(2).map(|_| ()).map_err(|e| format!("io_uring is unavailable ({e})"))
}

/// A heap buffer aligned for direct I/O.
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is plain memory owned by one thread at a time.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// `len` zeroed bytes aligned to `align`.
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len.max(1), align.max(8)).expect("valid buffer layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating an I/O buffer");
        AlignedBuf { ptr, layout }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for layout.size() bytes for the buffer's life.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }

    fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in new().
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Options of one run of a profile.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The engine to use.
    pub engine: Engine,
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
    /// When the step started.
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

#[derive(Clone, Copy)]
struct Timeline {
    start: Instant,
    measure_from: Instant,
    end: Instant,
}

struct Ctx<'a> {
    p: &'a Profile,
    target: &'a Target,
    opts: &'a RunOptions,
    stop: &'a AtomicBool,
    halt: AtomicBool,
    timeline: Mutex<Option<Timeline>>,
}

impl Ctx<'_> {
    fn stopping(&self) -> bool {
        self.halt.load(Ordering::Relaxed) || self.stop.load(Ordering::Relaxed)
    }
}

/// Runs one profile against a prepared target.
pub fn run_profile(
    p: &Profile,
    target: &Target,
    opts: &RunOptions,
    stop: &AtomicBool,
    tick: &mut dyn FnMut(&Tick),
) -> Result<ProfileResult, String> {
    let threads = p.threads as usize;
    let ctx = Ctx { p, target, opts, stop, halt: AtomicBool::new(false), timeline: Mutex::new(None) };
    let lives: Vec<Arc<Live>> = (0..threads)
        .map(|_| Arc::new(Live { interval: Mutex::new(Some(LatencyHistogram::new())), ..Live::default() }))
        .collect();
    let barrier = Barrier::new(threads + 1);
    let setup_error: Mutex<Option<String>> = Mutex::new(None);

    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (ctx, barrier, live, setup_error) = (&ctx, &barrier, lives[t].clone(), &setup_error);
                std::thread::Builder::new()
                    .name(format!("io-{t}"))
                    .spawn_scoped(s, move || thread_main(t, ctx, barrier, &live, setup_error))
                    .expect("spawning an I/O thread")
            })
            .collect();
        let start = Instant::now();
        let tl = Timeline { start, measure_from: start + p.rampup, end: start + p.rampup + p.duration };
        *ctx.timeline.lock().expect("timeline") = Some(tl);
        barrier.wait();
        let failed_setup = setup_error.lock().expect("setup").is_some();

        let mut report = StepReport::default();
        let mut prev = vec![(0u64, 0u64, 0u64); threads];
        let mut next_tick = start + Duration::from_secs(1);
        let mut cpu_from = if p.rampup.is_zero() { Some(ProcessCpu::now()) } else { None };
        let mut stopped_at = None;
        loop {
            if failed_setup {
                break;
            }
            let wake =
                if cpu_from.is_none() { next_tick.min(tl.measure_from) } else { next_tick }.min(tl.end);
            while Instant::now() < wake && !ctx.stopping() {
                std::thread::sleep((wake - Instant::now()).min(Duration::from_millis(20)));
            }
            let now = Instant::now();
            if ctx.stopping() {
                stopped_at = Some(now);
                break;
            }
            if cpu_from.is_none() && now >= tl.measure_from {
                cpu_from = Some(ProcessCpu::now());
            }
            if now >= next_tick || now >= tl.end {
                let secs = (now - (next_tick - Duration::from_secs(1))).as_secs_f64().max(1e-3);
                let (mut r, mut w, mut b) = (0u64, 0u64, 0u64);
                let mut interval = LatencyHistogram::new();
                for (i, l) in lives.iter().enumerate() {
                    let (lr, lw, lb) = (
                        l.reads.load(Ordering::Relaxed),
                        l.writes.load(Ordering::Relaxed),
                        l.bytes.load(Ordering::Relaxed),
                    );
                    r += lr - prev[i].0;
                    w += lw - prev[i].1;
                    b += lb - prev[i].2;
                    prev[i] = (lr, lw, lb);
                    if let Some(h) = l.interval.lock().expect("interval").as_mut() {
                        interval.merge(h);
                        h.reset();
                    }
                }
                let t_ms = (now - start).as_millis() as u64;
                let t = Tick {
                    elapsed: now - start,
                    rampup: now < tl.measure_from,
                    iops: (r + w) as f64 / secs,
                    mbps: b as f64 / 1e6 / secs,
                    p99_us: if interval.count() > 0 { interval.quantile_us(0.99) } else { 0.0 },
                };
                report.sample(t_ms, "io.iops", t.iops);
                report.sample(t_ms, "io.read.iops", r as f64 / secs);
                report.sample(t_ms, "io.write.iops", w as f64 / secs);
                report.sample(t_ms, "io.mbps", t.mbps);
                if interval.count() > 0 {
                    report.sample(t_ms, "io.lat.p99", t.p99_us);
                }
                tick(&t);
                next_tick += Duration::from_secs(1);
            }
            if now >= tl.end {
                break;
            }
        }
        let window_end = stopped_at.unwrap_or(tl.end).min(tl.end);
        let cpu_to = ProcessCpu::now();
        ctx.halt.store(true, Ordering::Relaxed);
        let outs: Vec<ThreadOut> =
            handles.into_iter().map(|h| h.join().expect("I/O thread panicked")).collect();
        if let Some(e) = setup_error.lock().expect("setup").take() {
            return Err(e);
        }
        let window = window_end.saturating_duration_since(tl.measure_from);
        Ok(assemble(outs, report, window, cpu_from.map(|c| (c, cpu_to)), stopped_at.is_some(), tl))
    })
}

fn assemble(
    outs: Vec<ThreadOut>,
    mut report: StepReport,
    window: Duration,
    cpu: Option<(ProcessCpu, ProcessCpu)>,
    stopped: bool,
    tl: Timeline,
) -> ProfileResult {
    let mut read = LatencyHistogram::new();
    let mut write = LatencyHistogram::new();
    let mut sync = LatencyHistogram::new();
    let (mut rb, mut wb, mut errors, mut mismatch_count) = (0u64, 0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    let mut mismatches = Vec::new();
    for o in outs {
        read.merge(&o.read);
        write.merge(&o.write);
        sync.merge(&o.sync);
        rb += o.read_bytes;
        wb += o.write_bytes;
        errors += o.error_count;
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
    report.figure("io.errors", errors as f64, Unit::Count);
    report.figure("io.window", secs, Unit::S);
    if let Some((from, to)) = cpu {
        report.cpu("io.cpu", "io", from, to, nr + nw, secs);
    }
    report.figure("io.verify.mismatches", mismatch_count as f64, Unit::Count);
    if nr > 0.0 {
        report.histograms.push(("io.read.lat".into(), read));
    }
    if nw > 0.0 {
        report.histograms.push(("io.write.lat".into(), write));
    }
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

fn open(p: &Profile, target: &Target) -> Result<File, String> {
    let mut o = OpenOptions::new();
    o.read(true).write(p.writes());
    if p.direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(&target.path).map_err(|e| format!("opening {}: {e}", target.path.display()))
}

/// Per-thread state shared by both engines.
struct Worker<'a> {
    ctx: &'a Ctx<'a>,
    tl: Timeline,
    live: &'a Live,
    out: ThreadOut,
    offsets: Offsets,
    rng: u64,
    seq: u64,
    writes_since_sync: u32,
    rate_step: Option<Duration>,
    next_due: Instant,
}

impl Worker<'_> {
    fn is_write(&mut self) -> bool {
        match self.ctx.p.read_pct {
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

    /// The time an I/O is due: now without a rate, else its schedule.
    fn due(&mut self) -> Instant {
        match self.rate_step {
            None => Instant::now(),
            Some(step) => {
                let d = self.next_due;
                self.next_due += step;
                d
            }
        }
    }

    fn record(&mut self, write: bool, from: Instant, done: Instant, bytes: u64) {
        let lat = done.saturating_duration_since(from);
        if write {
            self.live.writes.fetch_add(1, Ordering::Relaxed);
        } else {
            self.live.reads.fetch_add(1, Ordering::Relaxed);
        }
        self.live.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(h) = self.live.interval.lock().expect("interval").as_mut() {
            h.record(lat);
        }
        if done >= self.tl.measure_from && done <= self.tl.end {
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
        if let verify::Check::Bad = verify::check(buf, offset) {
            self.out.mismatch_count += 1;
            if self.out.mismatches.len() < 10 {
                self.out.mismatches.push(offset);
            }
        }
    }
}

fn thread_main(
    t: usize,
    ctx: &Ctx<'_>,
    barrier: &Barrier,
    live: &Live,
    setup_error: &Mutex<Option<String>>,
) -> ThreadOut {
    let p = ctx.p;
    let setup = open(p, ctx.target).and_then(|f| {
        let offsets = Offsets::new(p, ctx.target.size, t, ctx.opts.verify)?;
        Ok((f, offsets))
    });
    let setup = match setup {
        Ok(s) => Some(s),
        Err(e) => {
            *setup_error.lock().expect("setup") = Some(e);
            ctx.halt.store(true, Ordering::Relaxed);
            None
        }
    };
    barrier.wait();
    let Some((file, offsets)) = setup else { return ThreadOut::new() };
    let tl = ctx.timeline.lock().expect("timeline").expect("set before the barrier");
    let rate_step = p.rate.map(|r| Duration::from_secs_f64(p.threads as f64 / r));
    let mut w = Worker {
        ctx,
        tl,
        live,
        out: ThreadOut::new(),
        offsets,
        rng: 0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
        seq: 0,
        writes_since_sync: 0,
        rate_step,
        next_due: tl.start,
    };
    let res = match ctx.opts.engine {
        Engine::Uring => uring_loop(&mut w, &file),
        Engine::Psync => psync_loop(&mut w, &file),
    };
    if let Err(e) = res {
        *setup_error.lock().expect("setup") = Some(e);
        ctx.halt.store(true, Ordering::Relaxed);
    }
    w.out
}

fn fill_write(buf: &mut [u8], offset: u64, seq: u64, verify_on: bool) {
    if verify_on {
        verify::stamp(buf, offset, seq);
    }
}

fn filler(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for c in buf.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes());
    }
}

fn sync_now(w: &mut Worker<'_>, fd: i32) -> Result<(), String> {
    let t0 = Instant::now();
    // SAFETY: fd is an open descriptor for the life of the loop.
    let r = unsafe {
        if w.ctx.p.fdatasync {
            libc::fdatasync(fd)
        } else {
            libc::fsync(fd)
        }
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        w.out.fail(0, e.raw_os_error().unwrap_or(0), format!("sync failed: {e}"));
        w.ctx.halt.store(true, Ordering::Relaxed);
    }
    let done = Instant::now();
    if done >= w.tl.measure_from && done <= w.tl.end {
        w.out.sync.record(done - t0);
    }
    Ok(())
}

fn wait_until(w: &Worker<'_>, due: Instant) -> bool {
    while Instant::now() < due {
        if w.ctx.stopping() {
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

fn psync_loop(w: &mut Worker<'_>, file: &File) -> Result<(), String> {
    let p = w.ctx.p;
    let bs = p.bs as usize;
    let mut buf = AlignedBuf::new(bs, 4096);
    filler(buf.as_mut_slice(), w.rng);
    let fd = file.as_raw_fd();
    let verify_on = w.ctx.opts.verify;
    while !w.ctx.stopping() && Instant::now() < w.tl.end {
        let due = w.due();
        if w.rate_step.is_some() && !wait_until(w, due) {
            break;
        }
        let write = w.is_write();
        let offset = w.offsets.next(&[]);
        let start = if w.rate_step.is_some() { due } else { Instant::now() };
        if write {
            w.seq += 1;
            fill_write(buf.as_mut_slice(), offset, w.seq, verify_on);
        }
        // SAFETY: buf is valid for bs bytes; fd is open.
        let n = unsafe {
            if write {
                libc::pwrite(fd, buf.ptr() as *const libc::c_void, bs, offset as i64)
            } else {
                libc::pread(fd, buf.ptr() as *mut libc::c_void, bs, offset as i64)
            }
        };
        if n != bs as isize {
            let e = std::io::Error::last_os_error();
            let errno = if n < 0 { e.raw_os_error().unwrap_or(0) } else { 0 };
            let what = if n < 0 { e.to_string() } else { format!("short transfer: {n} of {bs} bytes") };
            w.out.fail(
                offset,
                errno,
                format!("{} at offset {offset}: {what}", if write { "write" } else { "read" }),
            );
            w.ctx.halt.store(true, Ordering::Relaxed);
            break;
        }
        let done = Instant::now();
        w.record(write, start, done, bs as u64);
        if write && p.fsync_every > 0 {
            w.writes_since_sync += 1;
            if w.writes_since_sync >= p.fsync_every {
                w.writes_since_sync = 0;
                sync_now(w, fd)?;
            }
        }
        if !write && verify_on {
            w.check(buf.as_slice(), offset);
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct Slot {
    offset: u64,
    write: bool,
    start: Instant,
    busy: bool,
}

fn uring_loop(w: &mut Worker<'_>, file: &File) -> Result<(), String> {
    let p = w.ctx.p;
    let qd = p.qd as usize;
    let bs = p.bs as usize;
    let verify_on = w.ctx.opts.verify;
    let entries = (qd as u32).next_power_of_two().max(2);
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .build(entries)
        .or_else(|_| IoUring::new(entries))
        .map_err(|e| format!("setting up io_uring: {e}"))?;
    let fd = file.as_raw_fd();
    let fixed_file = ring.submitter().register_files(&[fd]).is_ok();
    let mut bufs: Vec<AlignedBuf> = (0..qd).map(|_| AlignedBuf::new(bs, 4096)).collect();
    for (i, b) in bufs.iter_mut().enumerate() {
        filler(b.as_mut_slice(), w.rng ^ i as u64);
    }
    let iovecs: Vec<libc::iovec> =
        bufs.iter().map(|b| libc::iovec { iov_base: b.ptr() as *mut libc::c_void, iov_len: bs }).collect();
    // SAFETY: the buffers outlive the ring (dropped after it, below).
    let fixed_bufs = qd <= u16::MAX as usize && unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
    let now = Instant::now();
    let mut slots = vec![Slot { offset: 0, write: false, start: now, busy: false }; qd];
    let mut free: Vec<usize> = (0..qd).rev().collect();
    let mut inflight = 0usize;
    let mut in_flight_offsets: Vec<u64> = Vec::new();
    let mut draining_for_sync = false;
    let submit_each = p.pattern == crate::profile::Pattern::Sequential;
    let mut stop_submitting = false;

    loop {
        let now = Instant::now();
        if !stop_submitting && (w.ctx.stopping() || now >= w.tl.end) {
            stop_submitting = true;
        }
        if stop_submitting && inflight == 0 {
            break;
        }
        // Keep the queue full (or as full as the schedule allows).
        if !stop_submitting && !draining_for_sync {
            while let Some(&i) = free.last() {
                let due = if w.rate_step.is_some() {
                    if w.next_due > Instant::now() {
                        break;
                    }
                    w.due()
                } else {
                    now
                };
                free.pop();
                let write = w.is_write();
                let offset = if verify_on {
                    in_flight_offsets.clear();
                    in_flight_offsets.extend(slots.iter().filter(|s| s.busy).map(|s| s.offset));
                    w.offsets.next(&in_flight_offsets)
                } else {
                    w.offsets.next(&[])
                };
                if write {
                    w.seq += 1;
                    fill_write(bufs[i].as_mut_slice(), offset, w.seq, verify_on);
                }
                slots[i] = Slot { offset, write, start: due, busy: true };
                let ptr = bufs[i].ptr();
                let entry = match (write, fixed_bufs, fixed_file) {
                    (false, true, true) => opcode::ReadFixed::new(types::Fixed(0), ptr, bs as u32, i as u16)
                        .offset(offset)
                        .build(),
                    (false, true, false) => {
                        opcode::ReadFixed::new(types::Fd(fd), ptr, bs as u32, i as u16).offset(offset).build()
                    }
                    (true, true, true) => opcode::WriteFixed::new(types::Fixed(0), ptr, bs as u32, i as u16)
                        .offset(offset)
                        .build(),
                    (true, true, false) => opcode::WriteFixed::new(types::Fd(fd), ptr, bs as u32, i as u16)
                        .offset(offset)
                        .build(),
                    (false, false, _) => {
                        opcode::Read::new(types::Fd(fd), ptr, bs as u32).offset(offset).build()
                    }
                    (true, false, _) => {
                        opcode::Write::new(types::Fd(fd), ptr, bs as u32).offset(offset).build()
                    }
                }
                .user_data(i as u64);
                // SAFETY: the buffer and slot stay valid until the completion is reaped.
                unsafe {
                    ring.submission()
                        .push(&entry)
                        .map_err(|_| "io_uring submission queue full".to_string())?
                };
                inflight += 1;
                if submit_each {
                    // Sequential I/O submitted as a batch is merged by the
                    // block layer's plug into larger requests: submit one by
                    // one so each I/O reaches the device as itself (as fio's
                    // default iodepth_batch of 1 does).
                    ring.submit().map_err(|e| format!("io_uring submit: {e}"))?;
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
        // Submit and wait for at least one completion; with a rate and room
        // in the queue, wake in time for the next scheduled I/O.
        let want = if inflight > 0 { 1 } else { 0 };
        if want == 0 {
            if draining_for_sync {
                // Nothing in flight: sync now.
            } else if w.rate_step.is_some() && !stop_submitting {
                let due = w.next_due;
                if !wait_until(w, due) {
                    stop_submitting = true;
                }
                continue;
            } else {
                continue;
            }
        } else if w.rate_step.is_some() && !free.is_empty() && !draining_for_sync && !stop_submitting {
            let left = w.next_due.saturating_duration_since(Instant::now());
            let ts = types::Timespec::from(left.max(Duration::from_micros(1)));
            let args = types::SubmitArgs::new().timespec(&ts);
            match ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) || e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(format!("io_uring submit: {e}")),
            }
        } else {
            match ring.submit_and_wait(want) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(format!("io_uring submit: {e}")),
            }
        }
        // Reap everything that is done.
        let done_at = Instant::now();
        let mut reaped: [(usize, i32); 64] = [(0, 0); 64];
        loop {
            let mut n = 0;
            for cqe in ring.completion().take(64) {
                reaped[n] = (cqe.user_data() as usize, cqe.result());
                n += 1;
            }
            if n == 0 {
                break;
            }
            for &(i, res) in &reaped[..n] {
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
                    w.out.fail(
                        s.offset,
                        errno,
                        format!("{} at offset {}: {what}", if s.write { "write" } else { "read" }, s.offset),
                    );
                    w.ctx.halt.store(true, Ordering::Relaxed);
                    continue;
                }
                w.record(s.write, s.start, done_at, bs as u64);
                if !s.write && verify_on {
                    w.check(bufs[i].as_slice(), s.offset);
                }
            }
        }
        if draining_for_sync && inflight == 0 {
            w.writes_since_sync = 0;
            sync_now(w, fd)?;
            draining_for_sync = false;
        }
    }
    drop(ring);
    drop(bufs);
    Ok(())
}
