//! FUSE over io_uring: the transport the daemon uses, where the kernel
//! offers it (Linux 6.14+, `CONFIG_FUSE_IO_URING`, with
//! `/sys/module/fuse/parameters/enable_uring` set), instead of reading
//! /dev/fuse and writing replies to it.
//!
//! Why: the kernel hands a request to the ring queue of the CPU that
//! issued it (here, the loop device's worker), and each queue has its own
//! thread bound to that CPU. A round trip then stays on one CPU: the
//! worker queues the request and the queue's thread runs next on the same
//! CPU, its reply completes the loop device's request there, and the
//! submitter (fio, a database) is woken there too. Over /dev/fuse the
//! kernel wakes whichever reader has waited longest, mostly on the other
//! (idle, halted) vCPU, and the reply's completion wakes the submitter
//! back across: two wake-ups of a halted vCPU per request, which on a VM
//! cost more than everything else the daemon does. Committing a reply and
//! fetching the next request is also one submission, not a write and a
//! read.
//!
//! This module is the transport only (the uapi of
//! include/uapi/linux/fuse.h, "fuse-io-uring"): per queue, entries of a
//! header buffer and a payload buffer registered with the kernel
//! (`FUSE_IO_URING_CMD_REGISTER`), each completed when a request is in
//! it, answered with `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`. What a request
//! means is the daemon's ([`Handler`]). A reply may be written by any
//! thread (the scheduler's timer answers delayed requests): it fills the
//! entry's buffers and hands the entry to its queue's thread, the only one
//! that submits on the ring.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// `enum fuse_uring_cmd`.
const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// `struct fuse_uring_req_header`: in_out[128], op_in[128], then
/// `struct fuse_uring_ent_in_out` (flags, commit_id, payload_sz, ...).
const HEADER_SZ: usize = 288;
const OP_IN: usize = 128;
const ENT_IN_OUT: usize = 256;
/// The user data of the eventfd read that wakes a queue's thread.
const WAKE: u64 = u64::MAX;

/// One ring queue (one per possible CPU, as the kernel requires): its
/// entries' buffers, for the life of the process.
pub(crate) struct Queue {
    qid: u16,
    fd: RawFd,
    entries: usize,
    headers: *mut u8,
    payloads: *mut u8,
    payload_sz: usize,
    /// Entries answered and waiting for their thread to commit them.
    outbox: Mutex<Vec<u16>>,
    /// Written by a thread other than the queue's to wake it.
    efd: RawFd,
    stop: AtomicBool,
}

// SAFETY: each entry's buffers are used by one party at a time: the
// kernel (registered and not yet completed), the queue's thread (reading
// a request), or the holder of its [`Reply`] (writing the answer). The
// outbox is a mutex.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

thread_local! {
    /// The queue whose thread this is (null on other threads).
    static MINE: std::cell::Cell<*const Queue> = const { std::cell::Cell::new(std::ptr::null()) };
}

fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn rd_u64(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Queue {
    /// Entry `ent`'s header buffer.
    ///
    /// # Safety
    /// The caller is the entry's one user now (see the Send impl).
    #[allow(clippy::mut_from_ref)]
    unsafe fn header(&self, ent: u16) -> &mut [u8] {
        assert!((ent as usize) < self.entries);
        // SAFETY: within the leaked allocation; exclusive per the caller.
        unsafe { std::slice::from_raw_parts_mut(self.headers.add(ent as usize * HEADER_SZ), HEADER_SZ) }
    }

    /// Entry `ent`'s payload buffer.
    ///
    /// # Safety
    /// As for [`Queue::header`].
    #[allow(clippy::mut_from_ref)]
    unsafe fn payload(&self, ent: u16) -> &mut [u8] {
        assert!((ent as usize) < self.entries);
        // SAFETY: within the mapping; exclusive per the caller.
        unsafe {
            std::slice::from_raw_parts_mut(self.payloads.add(ent as usize * self.payload_sz), self.payload_sz)
        }
    }

    /// Hands an answered entry to the queue's thread.
    fn commit(&self, ent: u16) {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner()).push(ent);
        if !std::ptr::eq(MINE.with(|m| m.get()), self) {
            self.wake();
        }
    }

    fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: an 8-byte write to our eventfd.
        unsafe { libc::write(self.efd, (&one as *const u64).cast(), 8) };
    }
}

/// A request taken from a ring entry.
pub(crate) struct Request<'a> {
    /// `fuse_in_header.opcode`.
    pub opcode: u32,
    /// `fuse_in_header.nodeid`.
    pub nodeid: u64,
    /// The op's fixed argument (`fuse_read_in`, ...), 128 bytes.
    pub op_in: &'a [u8],
    /// The rest of the request (a write's data, a name).
    pub payload: &'a [u8],
    /// How to answer it.
    pub reply: Reply,
}

/// The answer to one request; every request gets exactly one (a reply
/// dropped unanswered answers EIO, so the kernel never waits forever).
pub(crate) struct Reply {
    q: &'static Queue,
    ent: u16,
    unique: u64,
    done: bool,
}

impl Reply {
    /// Answers with an error (a positive errno).
    pub fn error(mut self, errno: i32) {
        self.finish(-errno.abs(), 0);
    }

    /// Answers with `out` (the op's reply structure, or data).
    pub fn ok(self, out: &[u8]) {
        self.ok_with(out.len(), |p| p.copy_from_slice(out));
    }

    /// Answers with `len` bytes written into the payload by `fill`.
    pub fn ok_with(mut self, len: usize, fill: impl FnOnce(&mut [u8])) {
        // SAFETY: the Reply is the entry's one user until it commits.
        let p = unsafe { self.q.payload(self.ent) };
        if len > p.len() {
            return self.finish(-libc::EIO, 0);
        }
        fill(&mut p[..len]);
        self.finish(0, len);
    }

    /// The payload's capacity (what a reply may hold).
    pub fn capacity(&self) -> usize {
        self.q.payload_sz
    }

    fn finish(&mut self, error: i32, len: usize) {
        // SAFETY: as in ok_with.
        let h = unsafe { self.q.header(self.ent) };
        // fuse_out_header: len, error, unique.
        h[..4].copy_from_slice(&((16 + len) as u32).to_ne_bytes());
        h[4..8].copy_from_slice(&error.to_ne_bytes());
        h[8..16].copy_from_slice(&self.unique.to_ne_bytes());
        // fuse_uring_ent_in_out.payload_sz.
        h[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&(len as u32).to_ne_bytes());
        self.done = true;
        self.q.commit(self.ent);
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.done {
            self.finish(-libc::EIO, 0);
        }
    }
}

/// What answers the requests.
pub(crate) trait Handler: Send + Sync + 'static {
    /// Handles one request; answers it now or later through `req.reply`.
    fn handle(&self, req: Request<'_>);
}

/// The rings of one connection, one queue per possible CPU.
pub(crate) struct Rings {
    queues: Vec<&'static Queue>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// How many entries (requests in flight) each queue holds: more than the
/// deepest queue depth the loop device sends from one CPU in our benches.
const ENTRIES: usize = 64;

impl Rings {
    /// Starts one thread per possible CPU, bound to it, registering its
    /// queue's entries on the /dev/fuse descriptor `fd` (of a connection
    /// whose INIT reply asked for FUSE_OVER_IO_URING) with payloads of
    /// `payload_sz` bytes (at least the connection's max_write).
    pub(crate) fn start(
        fd: RawFd,
        payload_sz: usize,
        handler: std::sync::Arc<dyn Handler>,
    ) -> std::io::Result<Rings> {
        let cpus = possible_cpus()?;
        let mut rings = Rings { queues: Vec::new(), threads: Vec::new() };
        for qid in 0..cpus {
            let q = leak_queue(qid as u16, fd, payload_sz)?;
            rings.queues.push(q);
            let h = handler.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            let t = std::thread::Builder::new().name(format!("emu-ring-{qid}")).spawn(move || {
                run(q, h.as_ref(), tx);
            })?;
            rings.threads.push(t);
            // Each queue is registered before the next starts, so a
            // failure (the kernel refusing) is seen at once.
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    rings.stop();
                    return Err(e);
                }
                Err(_) => {
                    rings.stop();
                    return Err(std::io::Error::other("a ring thread ended during setup"));
                }
            }
        }
        Ok(rings)
    }

    /// Ends the queues' threads (after the connection is gone, their
    /// entries are completed with errors and they end by themselves).
    pub(crate) fn stop(&mut self) {
        for q in &self.queues {
            q.stop.store(true, Ordering::SeqCst);
            q.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Whether this process can make a ring of the kind the queues use
/// (checked before asking the kernel for FUSE over io_uring: once asked,
/// the kernel holds every request until the rings are registered).
pub(crate) fn available() -> bool {
    IoUring::<squeue::Entry128, cqueue::Entry>::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(4)
        .is_ok()
}

fn possible_cpus() -> std::io::Result<usize> {
    // "0-1", "0", "0-3,5": the kernel makes one queue per possible CPU
    // (num_possible_cpus) and routes by CPU number.
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut max = 0usize;
    for part in s.trim().split(',') {
        let last = part.rsplit('-').next().unwrap_or(part);
        max = max.max(last.parse::<usize>().map_err(|e| std::io::Error::other(e.to_string()))?);
    }
    Ok(max + 1)
}

fn leak_queue(qid: u16, fd: RawFd, payload_sz: usize) -> std::io::Result<&'static Queue> {
    let payload_sz = payload_sz.next_multiple_of(4096);
    let len = ENTRIES * payload_sz + ENTRIES * HEADER_SZ;
    // SAFETY: a fresh anonymous mapping (pages are touched only as used),
    // checked for failure; never unmapped (a reply may outlive the rings).
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: eventfd with constant flags.
    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if efd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let payloads = base as *mut u8;
    // SAFETY: within the mapping: the headers follow the payloads.
    let headers = unsafe { payloads.add(ENTRIES * payload_sz) };
    Ok(Box::leak(Box::new(Queue {
        qid,
        fd,
        entries: ENTRIES,
        headers,
        payloads,
        payload_sz,
        outbox: Mutex::new(Vec::with_capacity(ENTRIES)),
        efd,
        stop: AtomicBool::new(false),
    })))
}

fn cmd_req(qid: u16, commit_id: u64) -> [u8; 80] {
    // struct fuse_uring_cmd_req: flags u64, commit_id u64, qid u16, padding.
    let mut c = [0u8; 80];
    c[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    c[16..18].copy_from_slice(&qid.to_ne_bytes());
    c
}

/// A REGISTER command: `addr` points at the entry's two iovecs (header,
/// payload) and `len` must be 2, which the io-uring crate's UringCmd80
/// does not set, so it is patched in the built entry (a repr(C)
/// io_uring_sqe: `len` at byte 24).
fn register_sqe(q: &Queue, ent: u16, iov: *const libc::iovec) -> squeue::Entry128 {
    let e = opcode::UringCmd80::new(types::Fd(q.fd), CMD_REGISTER)
        .cmd(cmd_req(q.qid, 0))
        .addr(Some(iov as u64))
        .build()
        .user_data(ent as u64);
    // SAFETY: Entry128 is repr(C) over the 128-byte SQE; byte 24..28 is
    // the u32 `len` field.
    unsafe {
        let mut raw: [u8; 128] = std::mem::transmute(e);
        raw[24..28].copy_from_slice(&2u32.to_ne_bytes());
        std::mem::transmute::<[u8; 128], squeue::Entry128>(raw)
    }
}

fn commit_sqe(q: &Queue, ent: u16, unique: u64) -> squeue::Entry128 {
    opcode::UringCmd80::new(types::Fd(q.fd), CMD_COMMIT_AND_FETCH)
        .cmd(cmd_req(q.qid, unique))
        .build()
        .user_data(ent as u64)
}

fn push(ring: &mut IoUring<squeue::Entry128, cqueue::Entry>, e: &squeue::Entry128) -> std::io::Result<()> {
    loop {
        // SAFETY: every buffer an entry names is leaked (lives forever).
        if unsafe { ring.submission().push(e) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// A queue's thread: binds itself to its CPU, registers the entries, then
/// answers requests until the connection ends.
fn run(q: &'static Queue, handler: &dyn Handler, ready: std::sync::mpsc::Sender<std::io::Result<()>>) {
    MINE.with(|m| m.set(q as *const Queue));
    // SAFETY: sched_setaffinity on this thread with a set holding one CPU.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(q.qid as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    let setup = || -> std::io::Result<IoUring<squeue::Entry128, cqueue::Entry>> {
        IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build((2 * ENTRIES + 4) as u32)
    };
    let mut ring = match setup() {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let iovs: &'static mut [[libc::iovec; 2]] = Box::leak(
        (0..q.entries as u16)
            .map(|i| {
                // SAFETY: before registration the thread owns every entry.
                let (h, p) = unsafe { (q.header(i), q.payload(i)) };
                [
                    libc::iovec { iov_base: h.as_mut_ptr().cast(), iov_len: HEADER_SZ },
                    libc::iovec { iov_base: p.as_mut_ptr().cast(), iov_len: p.len() },
                ]
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let wake_buf: &'static mut u64 = Box::leak(Box::new(0u64));
    let wake_sqe = |buf: *mut u64| -> squeue::Entry128 {
        squeue::Entry128::from(opcode::Read::new(types::Fd(q.efd), buf.cast(), 8).build().user_data(WAKE))
    };
    let mut registered = Ok(());
    for (i, iov) in iovs.iter().enumerate() {
        if let Err(e) = push(&mut ring, &register_sqe(q, i as u16, iov.as_ptr())) {
            registered = Err(e);
            break;
        }
    }
    if registered.is_ok() {
        registered = push(&mut ring, &wake_sqe(wake_buf)).and_then(|_| ring.submit().map(|_| ()));
    }
    // A refused registration completes at once with an error; anything
    // else already completed (a request) is handled in the loop below.
    let mut cqes: Vec<(u64, i32)> = Vec::with_capacity(2 * ENTRIES);
    if registered.is_ok() {
        cqes.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        if let Some(&(_, res)) = cqes.iter().find(|(ud, res)| *ud != WAKE && *res < 0) {
            registered = Err(std::io::Error::from_raw_os_error(-res));
        }
    }
    let failed = registered.is_err();
    let _ = ready.send(registered);
    if failed {
        return;
    }
    let mut live = q.entries;
    let mut outbox: Vec<u16> = Vec::with_capacity(ENTRIES);
    let mut unique = vec![0u64; q.entries];
    let mut first = true;
    while live > 0 && !q.stop.load(Ordering::Relaxed) {
        if !first {
            if let Err(e) = ring.submit_and_wait(1) {
                if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EBUSY) {
                    continue;
                }
                if q.stop.load(Ordering::Relaxed) {
                    break;
                }
                fatal(q, e);
            }
            cqes.clear();
            cqes.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        }
        first = false;
        for &(ud, res) in &cqes {
            if ud == WAKE {
                if !q.stop.load(Ordering::Relaxed) {
                    if let Err(e) = push(&mut ring, &wake_sqe(wake_buf)) {
                        fatal(q, e);
                    }
                }
                continue;
            }
            let ent = ud as u16;
            if res < 0 {
                // The connection is gone (ENOTCONN), or the entry was
                // refused: it takes no more requests.
                live -= 1;
                continue;
            }
            // SAFETY: a completed entry is this thread's until handed on.
            let h = unsafe { q.header(ent) };
            let id = rd_u64(h, 8);
            unique[ent as usize] = id;
            let opcode = rd_u32(h, 4);
            let nodeid = rd_u64(h, 16);
            let plen = (rd_u32(h, ENT_IN_OUT + 16) as usize).min(q.payload_sz);
            // SAFETY: the entry is ours until answered; the request's
            // views are not used after its reply is given.
            let (op_in, payload) = unsafe {
                let h = q.headers.add(ent as usize * HEADER_SZ);
                (
                    std::slice::from_raw_parts(h.add(OP_IN), OP_IN),
                    std::slice::from_raw_parts(q.payloads.add(ent as usize * q.payload_sz), plen),
                )
            };
            handler.handle(Request {
                opcode,
                nodeid,
                op_in,
                payload,
                reply: Reply { q, ent, unique: id, done: false },
            });
        }
        {
            let mut o = q.outbox.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::swap(&mut *o, &mut outbox);
        }
        for ent in outbox.drain(..) {
            if let Err(e) = push(&mut ring, &commit_sqe(q, ent, unique[ent as usize])) {
                if q.stop.load(Ordering::Relaxed) {
                    break;
                }
                fatal(q, e);
            }
        }
    }
}

/// A running queue that cannot go on: once the kernel serves through the
/// rings it never falls back, so a queue that stopped would leave its
/// CPU's requests (and every process waiting on them) hanging for good.
/// Ending the daemon instead turns that into a dead medium, which a run
/// reports as such and `media destroy` cleans up.
fn fatal(q: &Queue, e: impl std::fmt::Display) -> ! {
    eprintln!("storbench: error: FUSE ring queue {}: {e}", q.qid);
    std::process::abort()
}
