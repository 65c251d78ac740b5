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
//!
//! Setup comes in two halves because of what asking commits to: once the
//! INIT reply asks for FUSE over io_uring, the kernel holds every new
//! request until all queues are registered, and never falls back. So
//! [`Rings::prepare`] makes everything that could fail on our side (the
//! buffers, the eventfds, the rings, the threads bound to their CPUs)
//! before the daemon asks, and asks only if it succeeded; after the
//! handshake, [`Rings::register`] only registers the entries. If the
//! kernel refuses one, the daemon unmounts that connection and mounts a
//! new one over /dev/fuse (daemon.rs), so nothing waits on a ring that
//! will never be ready.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

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

/// How many entries (requests in flight) each queue holds: the loop
/// device's own queue depth (the `loop` module's `hw_queue_depth`, 128 by
/// default), so that however its worker's requests fall on the CPUs, all
/// of them reach the model at once rather than waiting in the kernel for a
/// free entry (where the model would not see them queue). Payloads are
/// mapped without reserve and touched only as used.
const ENTRIES: usize = 128;

/// Test hook: makes the last queue's registration name a queue the kernel
/// does not have, so the kernel refuses it as it would a real mismatch
/// (tests/emu_cli.rs checks the fallback to /dev/fuse).
pub(crate) const REFUSE_ENV: &str = "STORBENCH_EMU_TEST_REFUSE_RING";

/// One ring queue (one per possible CPU, as the kernel requires): its
/// entries' buffers, for the life of the process.
pub(crate) struct Queue {
    qid: u16,
    entries: usize,
    headers: *mut u8,
    payloads: *mut u8,
    payload_sz: usize,
    /// Entries answered and waiting for their thread to commit them.
    outbox: Mutex<Vec<u16>>,
    /// Written by a thread other than the queue's to wake it.
    efd: OwnedFd,
    /// Where the queue's thread reads the eventfd's 8 bytes into (leaked:
    /// the kernel may write them after the thread has ended).
    wake_buf: *mut u64,
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
    /// The caller is the entry's one user now (see the Send impl), and no
    /// other view of the buffer is alive.
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

    /// Hands an answered entry to the queue's thread. Another thread
    /// wakes it only when the outbox was empty: the thread takes the whole
    /// outbox at once, so one wake-up serves every reply queued before it
    /// runs (a timer thread answering a burst writes the eventfd once).
    fn commit(&self, ent: u16) {
        let was_empty = {
            let mut o = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
            o.push(ent);
            o.len() == 1
        };
        if was_empty && !std::ptr::eq(MINE.with(|m| m.get()), self) {
            self.wake();
        }
    }

    fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: an 8-byte write to our eventfd.
        unsafe { libc::write(self.efd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// A request taken from a ring entry. Its views borrow the request, and
/// answering consumes it ([`Request::reply`]), so no view of the entry's
/// buffers is alive while the reply writes them.
pub(crate) struct Request {
    /// `fuse_in_header.opcode`.
    pub opcode: u32,
    /// `fuse_in_header.nodeid`.
    pub nodeid: u64,
    payload_len: usize,
    reply: Reply,
}

impl Request {
    /// The op's fixed argument (`fuse_read_in`, ...), 128 bytes.
    pub fn op_in(&self) -> &[u8] {
        let (q, ent) = (self.reply.q, self.reply.ent);
        // SAFETY: the entry is this request's until it is answered, which
        // consumes the request (and so ends this borrow).
        unsafe { std::slice::from_raw_parts(q.headers.add(ent as usize * HEADER_SZ + OP_IN), OP_IN) }
    }

    /// The rest of the request (a write's data, a name).
    pub fn payload(&self) -> &[u8] {
        let (q, ent) = (self.reply.q, self.reply.ent);
        // SAFETY: as in op_in; payload_len is at most payload_sz.
        unsafe { std::slice::from_raw_parts(q.payloads.add(ent as usize * q.payload_sz), self.payload_len) }
    }

    /// How to answer it (every request gets exactly one answer).
    pub fn reply(self) -> Reply {
        self.reply
    }
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
        // SAFETY: the Reply is the entry's one user until it commits (its
        // request, and so every view of the entry, is gone).
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
    /// Handles one request; answers it now or later through
    /// [`Request::reply`].
    fn handle(&self, req: Request);
}

/// What a prepared queue's thread is told once the handshake is done:
/// register on this connection (a descriptor of the rings' own), or end.
type Go = Option<(RawFd, Arc<dyn Handler>, bool)>;

/// The rings of one connection, one queue per possible CPU.
pub(crate) struct Rings {
    queues: Vec<&'static Queue>,
    threads: Vec<std::thread::JoinHandle<()>>,
    go: Vec<Sender<Go>>,
    registered: Receiver<std::io::Result<()>>,
    /// The rings' own descriptor of the connection: the session's may be
    /// closed first when it ends, and a queue must never submit on a
    /// closed (or reused) descriptor number.
    fd: Option<OwnedFd>,
}

impl Rings {
    /// Makes one queue per possible CPU (buffers, eventfd, ring) and its
    /// thread, bound to that CPU, without asking anything of the kernel's
    /// FUSE: what fails here fails before the daemon asks for the rings.
    pub(crate) fn prepare(payload_sz: usize) -> std::io::Result<Rings> {
        let cpus = possible_cpus()?;
        let (reg_tx, registered) = channel();
        let mut rings =
            Rings { queues: Vec::new(), threads: Vec::new(), go: Vec::new(), registered, fd: None };
        for qid in 0..cpus {
            let q = leak_queue(qid as u16, payload_sz)?;
            rings.queues.push(q);
            let (ready_tx, ready_rx) = channel();
            let (go_tx, go_rx) = channel();
            let reg = reg_tx.clone();
            let t = std::thread::Builder::new()
                .name(format!("emu-ring-{qid}"))
                .spawn(move || run(q, ready_tx, go_rx, reg))?;
            rings.threads.push(t);
            rings.go.push(go_tx);
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(std::io::Error::other("a ring thread ended during setup")),
            }
        }
        Ok(rings)
    }

    /// Registers every queue's entries on the connection `fd` (whose INIT
    /// reply asked for FUSE_OVER_IO_URING); the queues then answer its
    /// requests through `handler`. An error is the kernel refusing a
    /// registration: the caller must give up this connection.
    pub(crate) fn register(&mut self, fd: BorrowedFd<'_>, handler: Arc<dyn Handler>) -> std::io::Result<()> {
        // SAFETY: dup of a descriptor we borrow; checked.
        let own = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if own < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let own = unsafe { OwnedFd::from_raw_fd(own) };
        let raw = own.as_raw_fd();
        self.fd = Some(own);
        let refuse = std::env::var_os(REFUSE_ENV).is_some();
        let last = self.go.len() - 1;
        // One queue at a time, so a refusal is seen before the next asks.
        for (i, go) in self.go.iter().enumerate() {
            go.send(Some((raw, handler.clone(), refuse && i == last)))
                .map_err(|_| std::io::Error::other("a ring thread ended before registering"))?;
            match self.registered.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(std::io::Error::other("a ring thread ended while registering")),
            }
        }
        Ok(())
    }

    /// Ends the queues' threads (idle ones at once; registered ones see
    /// their entries completed with errors once the connection is gone,
    /// or stop when woken), then closes the rings' descriptor.
    pub(crate) fn stop(&mut self) {
        for go in self.go.drain(..) {
            let _ = go.send(None);
        }
        for q in &self.queues {
            q.stop.store(true, Ordering::SeqCst);
            q.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.fd = None;
    }
}

impl Drop for Rings {
    fn drop(&mut self) {
        self.stop();
    }
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

fn leak_queue(qid: u16, payload_sz: usize) -> std::io::Result<&'static Queue> {
    let payload_sz = payload_sz.next_multiple_of(4096);
    let len = ENTRIES * payload_sz + ENTRIES * HEADER_SZ;
    // SAFETY: eventfd with constant flags, checked.
    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if efd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let efd = unsafe { OwnedFd::from_raw_fd(efd) };
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
    let payloads = base as *mut u8;
    // SAFETY: within the mapping: the headers follow the payloads.
    let headers = unsafe { payloads.add(ENTRIES * payload_sz) };
    Ok(Box::leak(Box::new(Queue {
        qid,
        entries: ENTRIES,
        headers,
        payloads,
        payload_sz,
        outbox: Mutex::new(Vec::with_capacity(ENTRIES)),
        efd,
        wake_buf: Box::leak(Box::new(0u64)),
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

/// A REGISTER command for queue `qid`: `addr` points at the entry's two
/// iovecs (header, payload) and `len` must be 2, which the io-uring
/// crate's UringCmd80 does not set, so it is patched in the built entry
/// (a repr(C) io_uring_sqe: `len` at byte 24).
fn register_sqe(fd: RawFd, qid: u16, ent: u16, iov: *const libc::iovec) -> squeue::Entry128 {
    let e = opcode::UringCmd80::new(types::Fd(fd), CMD_REGISTER)
        .cmd(cmd_req(qid, 0))
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

fn commit_sqe(fd: RawFd, q: &Queue, ent: u16, unique: u64) -> squeue::Entry128 {
    opcode::UringCmd80::new(types::Fd(fd), CMD_COMMIT_AND_FETCH)
        .cmd(cmd_req(q.qid, unique))
        .build()
        .user_data(ent as u64)
}

type Ring = IoUring<squeue::Entry128, cqueue::Entry>;

fn push(ring: &mut Ring, e: &squeue::Entry128) -> std::io::Result<()> {
    loop {
        // SAFETY: every buffer an entry names is leaked (lives forever).
        if unsafe { ring.submission().push(e) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// A queue's thread: binds itself to its CPU and makes its ring, says so
/// on `ready`, waits for `go`, registers the entries (saying how that went
/// on `registered`), then answers requests until the connection ends.
fn run(
    q: &'static Queue,
    ready: Sender<std::io::Result<()>>,
    go: Receiver<Go>,
    registered: Sender<std::io::Result<()>>,
) {
    MINE.with(|m| m.set(q as *const Queue));
    // The kernel routes a request to the queue of the CPU it came from; a
    // thread elsewhere would turn every round trip into a cross-CPU
    // wake-up, which is what the rings are for avoiding. A CPU this thread
    // may not run on (offline, or outside the daemon's cpuset) issues no
    // requests either, so its queue's thread is left where the scheduler
    // puts it: it serves nothing, or (a CPU brought online later) serves
    // correctly, only slower.
    // SAFETY: sched_setaffinity on this thread with a set holding one CPU.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(q.qid as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    // SQEs of 128 bytes for the 80-byte command; one submitter (this
    // thread); completions run when it waits, not by interrupt.
    let made = Ring::builder().setup_single_issuer().setup_defer_taskrun().build((2 * ENTRIES + 4) as u32);
    let mut ring = match made {
        Ok(r) => {
            let _ = ready.send(Ok(()));
            r
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let Ok(Some((fd, handler, refuse))) = go.recv() else { return };
    // A refused registration completes at once with an error; anything
    // else already completed (a request) is handled in the loop below.
    let mut cqes: Vec<(u64, i32)> = Vec::with_capacity(2 * ENTRIES);
    let res = register(&mut ring, q, fd, refuse, &mut cqes);
    let failed = res.is_err();
    let _ = registered.send(res);
    if failed {
        return;
    }
    serve(q, &mut ring, fd, handler.as_ref(), cqes);
}

/// Registers every entry of `q` and arms the wake-up read.
fn register(
    ring: &mut Ring,
    q: &'static Queue,
    fd: RawFd,
    refuse: bool,
    cqes: &mut Vec<(u64, i32)>,
) -> std::io::Result<()> {
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
    let qid = if refuse { u16::MAX } else { q.qid };
    for (i, iov) in iovs.iter().enumerate() {
        push(ring, &register_sqe(fd, qid, i as u16, iov.as_ptr()))?;
    }
    push(ring, &wake_sqe(q))?;
    ring.submit()?;
    cqes.extend(ring.completion().map(|c| (c.user_data(), c.result())));
    if let Some(&(_, res)) = cqes.iter().find(|(ud, res)| *ud != WAKE && *res < 0) {
        return Err(std::io::Error::from_raw_os_error(-res));
    }
    Ok(())
}

/// The eventfd read that wakes the queue's thread.
fn wake_sqe(q: &Queue) -> squeue::Entry128 {
    let read = opcode::Read::new(types::Fd(q.efd.as_raw_fd()), q.wake_buf.cast(), 8);
    squeue::Entry128::from(read.build().user_data(WAKE))
}

/// Answers requests until the connection ends (every entry completed with
/// an error) or the rings stop.
fn serve(q: &'static Queue, ring: &mut Ring, fd: RawFd, handler: &dyn Handler, mut cqes: Vec<(u64, i32)>) {
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
                    if let Err(e) = push(ring, &wake_sqe(q)) {
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
            let (id, opcode, nodeid, plen) = {
                // SAFETY: a completed entry is this thread's until handed
                // on; this view ends before the request is made.
                let h = unsafe { q.header(ent) };
                (rd_u64(h, 8), rd_u32(h, 4), rd_u64(h, 16), rd_u32(h, ENT_IN_OUT + 16) as usize)
            };
            unique[ent as usize] = id;
            handler.handle(Request {
                opcode,
                nodeid,
                payload_len: plen.min(q.payload_sz),
                reply: Reply { q, ent, unique: id, done: false },
            });
        }
        {
            let mut o = q.outbox.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::swap(&mut *o, &mut outbox);
        }
        for ent in outbox.drain(..) {
            if let Err(e) = push(ring, &commit_sqe(fd, q, ent, unique[ent as usize])) {
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
