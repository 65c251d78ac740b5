//! The daemon: a FUSE filesystem holding one file (`image`, the medium)
//! whose reads come from a read-only mapping of the backing image on the
//! host disk (or pread, where the volatile cache holds part of them) and
//! whose writes go to it with pwrite, each completing when the model says
//! ([`crate::sched`]). The
//! volatile write cache of a model that has one holds written blocks in
//! memory until a flush drains them to the image, so a power cut
//! (SIGUSR1) loses exactly what was not yet durable; later I/O fails.
//! SIGUSR2 empties a cache tier (`media cache reset`). [`control_signal`]
//! makes it read a [`Command`] from [`array_files`]' control file: a time
//! scale for any model (`media scale`, storage sensitivity), whose state
//! it writes to [`scale_file`], or, on an array, `media fail` and `media
//! rebuild`; it keeps the array's state in the status file there (written
//! when it changes, read at start, so a restarted daemon's array is as
//! degraded as it was). A restarted daemon starts at scale 1.
//!
//! It must never do I/O on the filesystem above the loop device it serves
//! (that would deadlock): it touches only the backing image, its counters,
//! trace and pid files, all on the host disk. It marks itself an I/O
//! flusher (PR_SET_IO_FLUSHER) so memory reclaim does not wait on it.
//! SIGTERM, SIGINT or SIGHUP unmount and end it.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::BufWriter;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, KernelConfig, LockOwner,
    MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, WriteFlags,
};
use serde::{Deserialize, Serialize};

use crate::model::{blocks, ArrayCommand, Op, Req, Spec, VolatileCache, CACHE_BLOCK};
use crate::ring;
use crate::sched::{Completion, Sched};
use crate::EmuError;
use storbench_cache::TraceWriter;

/// prctl option (Linux 5.6, include/uapi/linux/prctl.h); the libc crate lacks it.
const PR_SET_IO_FLUSHER: libc::c_int = 57;

/// The largest request (max_write; the loop device's largest I/O), and
/// what a ring entry's payload holds.
const MAX_REQUEST: usize = 1 << 20;

/// The name of the served file under the mount point.
pub const SERVED_NAME: &str = "image";

/// Everything the daemon needs, written by the medium's creator as JSON.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DaemonConfig {
    /// The medium's name (for messages).
    pub name: String,
    /// The backing image on the host disk.
    pub image: PathBuf,
    /// Where the FUSE filesystem is mounted; the medium is `mountpoint/image`.
    pub mountpoint: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// The model.
    pub spec: Spec,
    /// The per-second counters file (JSON lines).
    pub counters: PathBuf,
    /// Written once the filesystem is mounted and serving; removed at exit.
    pub pid_file: PathBuf,
    /// The I/O trace to write, if any.
    pub trace: Option<PathBuf>,
    /// The round trip the loop device, FUSE and the daemon add (ns),
    /// measured when the medium was made: absorbed into every reply
    /// ([`Sched::set_floor`]). 0: not absorbed.
    #[serde(default)]
    pub floor_ns: u64,
    /// The same for a 64 KiB request (ns; [`Sched::set_floor_by_size`]).
    /// 0: the 4 KiB floor for every size.
    #[serde(default)]
    pub floor_64k_ns: u64,
    /// How much earlier than that a reply that waits for the timer leaves,
    /// by its wait: the wake-ups such a reply pays and one sent at once
    /// does not ([`Sched::set_lead`]). Zero: none.
    #[serde(default)]
    pub lead: crate::sched::Lead,
    /// The write journal to record, if the medium records one
    /// ([`crate::journal`]; `media create --record`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<PathBuf>,
}

impl DaemonConfig {
    /// The served file: what the loop device is attached to.
    pub fn served(&self) -> PathBuf {
        self.mountpoint.join(SERVED_NAME)
    }
}

/// The volatile write cache's data: whole blocks not yet on the image.
struct DataCache {
    shape: Option<VolatileCache>,
    blocks: Mutex<Cached>,
    /// Signalled when a spilled cache is on the image ([`Cached::out`] gone).
    spilled: Condvar,
    /// Signalled when a full cache is spilled, for the spill thread.
    spill: Condvar,
    /// Set under the lock by a power cut: nothing drains to the image after it.
    cut: AtomicBool,
    /// Blocks present at the last background destage tick.
    aged: Mutex<Vec<u64>>,
}

/// What the volatile cache holds.
#[derive(Default)]
struct Cached {
    /// Blocks written since they were last made durable.
    live: HashMap<u64, Box<[u8]>>,
    /// A full cache, durable since it filled (the model charged its
    /// write-back then), being written to the image by the spill thread:
    /// reads see it until that is done. Writing it back in the request
    /// path held every write for as long as copying the cache took (64
    /// MiB: ~20 ms, so a model of 1.3 GB/s of 256 KiB writes at QD 32 gave
    /// 1.0 GB/s with a p99 of 28 ms instead of 6.6; 2026-11-28).
    out: Option<Arc<HashMap<u64, Box<[u8]>>>>,
}

impl Cached {
    /// The newest cached copy of block `b`, if any.
    fn get(&self, b: u64) -> Option<&[u8]> {
        self.live.get(&b).or_else(|| self.out.as_ref().and_then(|o| o.get(&b))).map(|d| &d[..])
    }
}

type CacheGuard<'a> = std::sync::MutexGuard<'a, Cached>;

impl DataCache {
    fn lock(&self) -> CacheGuard<'_> {
        self.blocks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits, with the lock, until no spilled cache is still being written.
    fn settle<'a>(&self, mut g: CacheGuard<'a>) -> CacheGuard<'a> {
        while g.out.is_some() {
            g = self.spilled.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g
    }

    /// Whether the cache holds more than its capacity.
    fn full(&self, g: &Cached) -> bool {
        g.live.len() as u64 * CACHE_BLOCK > self.shape.map_or(u64::MAX, |c| c.capacity)
    }

    /// A full cache: its blocks are handed to the spill thread (after the
    /// previous spill is written: a drive whose cache fills while it is
    /// still writing back waits for it) and the cache starts empty. The
    /// model charges the write-back's time.
    fn spill_if_full<'a>(&self, g: CacheGuard<'a>) -> CacheGuard<'a> {
        if !self.full(&g) {
            return g;
        }
        let mut g = self.settle(g);
        // Decided again after the wait: another writer may have spilled
        // the cache meanwhile (what is cached since is not full, so not
        // durable), or the power may have been cut (nothing is written).
        if self.cut.load(Ordering::SeqCst) || !self.full(&g) {
            return g;
        }
        let full = std::mem::take(&mut g.live);
        g.out = Some(Arc::new(full));
        self.spill.notify_one();
        g
    }

    /// The spill thread: writes each spilled cache to the image, in offset
    /// order, until `stop` with none left. Its own flag, set once the
    /// daemon's last drain is done: the daemon's `stop` is set by the
    /// signal that ends it, before a spill handed over then is written.
    /// Blocks it could not write go back to the cache (unless rewritten
    /// since), so the next flush tries them again and fails as it did.
    fn run_spills(&self, file: &File, stop: &AtomicBool) {
        // Behind the request threads for the CPU (nice 10): a spill has
        // until the cache fills again, a request only its model time.
        // SAFETY: setpriority on this thread (a tid is a PRIO_PROCESS who).
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10) };
        let mut g = self.lock();
        loop {
            let Some(out) = g.out.clone() else {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                g = self
                    .spill
                    .wait_timeout(g, Duration::from_millis(200))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                continue;
            };
            drop(g);
            let mut keys: Vec<u64> = out.keys().copied().collect();
            keys.sort_unstable();
            let mut unwritten: &[u64] = &[];
            for (i, b) in keys.iter().enumerate() {
                if let Err(e) = file.write_all_at(&out[b], b * CACHE_BLOCK) {
                    eprintln!("storbench: error: writing a full cache back to the image: {e}");
                    unwritten = &keys[i..];
                    break;
                }
            }
            g = self.lock();
            for b in unwritten {
                g.live.entry(*b).or_insert_with(|| out[b].clone());
            }
            let written = g.out.take();
            self.spilled.notify_all();
            // Its blocks are freed outside the lock (16,384 frees for 64
            // MiB held every request for ~1 ms).
            drop(g);
            drop((written, out));
            g = self.lock();
        }
    }

    /// Power cut: what the cache holds is gone, and it never drains again
    /// (a spilled cache was durable already and is still written).
    fn cut(&self) {
        let mut g = self.lock();
        self.cut.store(true, Ordering::SeqCst);
        g.live.clear();
    }

    /// Background destage, once a second: blocks that were already cached
    /// at the previous tick go to the image, so a block stays volatile for
    /// one to two seconds, as a drive writes its cache back when it can.
    /// This is what a power cut can lose, flushed or (with lie_on_flush)
    /// not; it changes what is durable, not what a request costs.
    fn age_out(&self, file: &File) {
        // After a spill in progress: it may hold an older copy of a block
        // written since, which must not land after the newer one.
        let mut g = self.settle(self.lock());
        if self.cut.load(Ordering::SeqCst) {
            return;
        }
        let mut aged = self.aged.lock().unwrap_or_else(|p| p.into_inner());
        aged.sort_unstable();
        for b in aged.drain(..) {
            if let Some(data) = g.live.remove(&b) {
                if file.write_all_at(&data, b * CACHE_BLOCK).is_err() {
                    g.live.insert(b, data);
                }
            }
        }
        aged.extend(g.live.keys().copied());
    }

    /// Writes every cached block to the image, in offset order, once a
    /// spilled cache is written.
    fn drain<'a>(&self, g: CacheGuard<'a>, file: &File) -> (CacheGuard<'a>, std::io::Result<()>) {
        let mut g = self.settle(g);
        if self.cut.load(Ordering::SeqCst) {
            return (g, Err(std::io::Error::from_raw_os_error(libc::EIO)));
        }
        let mut keys: Vec<u64> = g.live.keys().copied().collect();
        keys.sort_unstable();
        for b in keys {
            if let Err(e) = file.write_all_at(&g.live[&b], b * CACHE_BLOCK) {
                return (g, Err(e));
            }
        }
        g.live.clear();
        (g, Ok(()))
    }
}

/// The image mapped read-only (MAP_SHARED: it sees every pwrite at once).
/// A read none of whose blocks the volatile cache holds is answered
/// straight from here: the reply's writev copies from the host's page
/// cache into the loop device's pages, with no pread and no copy of ours.
/// Mapped once per daemon process and never unmapped (leaked), because a
/// reply may be written by the timer thread after the filesystem is gone.
struct Image {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only for us and lives as long as the process.
unsafe impl Send for Image {}
// SAFETY: as above; concurrent readers of a read-only mapping are fine.
unsafe impl Sync for Image {}

impl Image {
    /// Maps `file` (`len` bytes) for the life of the process, or None
    /// (then reads use pread).
    fn map(file: &File, len: u64) -> Option<&'static Image> {
        if len == 0 || len > isize::MAX as u64 {
            return None;
        }
        // SAFETY: a fresh read-only shared mapping of a descriptor we own;
        // checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        Some(Box::leak(Box::new(Image { ptr: p as *const u8, len: len as usize })))
    }

    /// Faults the range's pages in now, in the reader thread (one load per
    /// page; nothing when mapped already), so a reply the timer thread
    /// writes later never waits for the host disk. Not for a reply written
    /// at once: its writev faults the pages in itself, and a touch first
    /// only doubles the page walks.
    fn touch(&self, offset: u64, len: usize) {
        let (start, end) = (offset as usize, offset as usize + len);
        let mut at = start;
        while at < end {
            // SAFETY: at < end <= self.len (the caller clipped the range).
            unsafe { std::ptr::read_volatile(self.ptr.add(at)) };
            at = (at & !4095) + 4096;
        }
    }

    /// The bytes at `offset`: what the image holds now. The host may
    /// change them under us (a pwrite of an overlapping write in flight);
    /// the kernel copies whatever is there, as a device would return
    /// either contents for a read overlapping a write.
    fn slice(&self, offset: u64, len: usize) -> &[u8] {
        assert!(offset as usize + len <= self.len, "a read past the image");
        // SAFETY: within the mapping, which is never unmapped.
        unsafe { std::slice::from_raw_parts(self.ptr.add(offset as usize), len) }
    }
}

/// Read buffers, reused: a read takes one, its reply gives it back, so a
/// read allocates (and zeroes) nothing once the pool has warmed up. At most
/// [`POOL_KEEP`] buffers of at most [`POOL_MAX_LEN`] bytes are kept.
static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
const POOL_KEEP: usize = 64;
const POOL_MAX_LEN: usize = 1 << 20;

/// A buffer of at least `len` bytes (its contents are stale: the caller
/// fills `..len`).
fn take_buf(len: usize) -> Vec<u8> {
    let mut b = POOL.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_default();
    if b.len() < len {
        b.resize(len, 0);
    }
    b
}

fn give_buf(b: Vec<u8>) {
    if b.len() <= POOL_MAX_LEN {
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < POOL_KEEP {
            pool.push(b);
        }
    }
}

struct Fs {
    file: File,
    image: Option<&'static Image>,
    size: u64,
    sched: Arc<Sched<Done>>,
    cache: Arc<DataCache>,
    /// The write journal, when recording.
    journal: Option<crate::journal::Recorder>,
    /// Whether an INIT reply may ask for FUSE over io_uring: the rings
    /// are prepared, and no earlier connection's were refused.
    offer_uring: AtomicBool,
    /// The last INIT reply asked for it ([`crate::ring`]).
    uring: AtomicBool,
}

/// The filesystem as fuser serves it (the rings serve the same [`Fs`]).
struct FuseFs(Arc<Fs>);

impl std::ops::Deref for FuseFs {
    type Target = Fs;
    fn deref(&self) -> &Fs {
        &self.0
    }
}

const TTL: Duration = Duration::from_secs(1);

impl Fs {
    fn attr(&self, ino: u64) -> FileAttr {
        let dir = ino == 1;
        FileAttr {
            ino: INodeNo(ino),
            size: if dir { 0 } else { self.size },
            blocks: if dir { 0 } else { self.size.div_ceil(512) },
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind: if dir { FileType::Directory } else { FileType::RegularFile },
            perm: if dir { 0o755 } else { 0o600 },
            nlink: if dir { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }

    /// What a read of `len` bytes at `offset` is answered with: the image,
    /// with what the volatile cache holds laid over it. When the cache
    /// holds none of its blocks (always, for a model without one), the
    /// mapped image itself, without the lock, so reads go on in parallel;
    /// else a pooled buffer filled by pread and the overlay under the lock
    /// (a destage must not move a block from the map to the image between
    /// the two). A block cached after the check comes from a write that
    /// overlaps this read in flight: a device may return either contents.
    fn read_data(&self, offset: u64, len: usize) -> std::io::Result<ReadData> {
        let end = offset + len as u64;
        let plain = |image: Option<&'static Image>| -> std::io::Result<ReadData> {
            if let Some(img) = image {
                return Ok(ReadData::Mapped(img, offset));
            }
            let mut buf = take_buf(len);
            match self.file.read_exact_at(&mut buf[..len], offset) {
                Ok(()) => Ok(ReadData::Buf(buf)),
                Err(e) => {
                    give_buf(buf);
                    Err(e)
                }
            }
        };
        if self.cache.shape.is_none() {
            return plain(self.image);
        }
        let map = self.cache.lock();
        if !blocks(offset, len as u64).any(|b| map.get(b).is_some()) {
            drop(map);
            return plain(self.image);
        }
        let mut buf = take_buf(len);
        if let Err(e) = self.file.read_exact_at(&mut buf[..len], offset) {
            drop(map);
            give_buf(buf);
            return Err(e);
        }
        for b in blocks(offset, len as u64) {
            if let Some(data) = map.get(b) {
                let bstart = b * CACHE_BLOCK;
                let from = bstart.max(offset);
                let to = (bstart + CACHE_BLOCK).min(end);
                if from < to {
                    buf[(from - offset) as usize..(to - offset) as usize]
                        .copy_from_slice(&data[(from - bstart) as usize..(to - bstart) as usize]);
                }
            }
        }
        Ok(ReadData::Buf(buf))
    }

    fn write_data(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        if self.cache.shape.is_none() {
            self.file.write_all_at(data, offset)?;
            return self.record(|j| j.write(offset, data));
        }
        let mut map = self.cache.lock();
        if self.cache.cut.load(Ordering::SeqCst) {
            // Past the power cut (a write that passed the scheduler's check
            // before it): nothing more is cached.
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        // Recorded under the cache's lock: in the order flushes drain.
        self.record(|j| j.write(offset, data))?;
        let end = offset + data.len() as u64;
        for b in blocks(offset, data.len() as u64) {
            let bstart = b * CACHE_BLOCK;
            let from = bstart.max(offset);
            let to = (bstart + CACHE_BLOCK).min(end);
            let src = &data[(from - offset) as usize..(to - offset) as usize];
            let at = (from - bstart) as usize..(to - bstart) as usize;
            let c = &mut *map;
            match c.live.entry(b) {
                Entry::Occupied(mut o) => o.get_mut()[at].copy_from_slice(src),
                Entry::Vacant(v) if src.len() as u64 == CACHE_BLOCK => {
                    // A whole block: nothing to zero or read.
                    v.insert(Box::from(src));
                }
                Entry::Vacant(v) => {
                    // A partial block: start from its copy being spilled,
                    // else from what the image holds.
                    let mut block = match c.out.as_ref().and_then(|o| o.get(&b)) {
                        Some(old) => old.clone(),
                        None => {
                            let mut block = vec![0u8; CACHE_BLOCK as usize];
                            let n = CACHE_BLOCK.min(self.size.saturating_sub(bstart)) as usize;
                            self.file.read_exact_at(&mut block[..n], bstart)?;
                            block.into()
                        }
                    };
                    block[at].copy_from_slice(src);
                    v.insert(block);
                }
            }
        }
        drop(self.cache.spill_if_full(map));
        Ok(())
    }

    /// Hands a read whose data is ready to the scheduler; `reply` wraps the
    /// data into the transport's answer. A mapped read that is still
    /// pending has its pages faulted in now, so the later reply never waits
    /// for the host disk (a race with the timer thread's reply is harmless:
    /// this only warms the pages).
    fn submit_read(
        &self,
        t0: u64,
        offset: u64,
        len: usize,
        data: ReadData,
        reply: impl FnOnce(ReadData) -> Done,
    ) {
        let mapped = match data {
            ReadData::Mapped(img, _) => Some(img),
            ReadData::Buf(_) => None,
        };
        let req = Req { op: Op::Read, offset, len: len as u64 };
        if self.sched.submit(req, t0, reply(data)) {
            if let Some(img) = mapped {
                img.touch(offset, len);
            }
        }
    }

    /// Punches a hole: the volatile cache forgets the range, the image
    /// frees it.
    fn punch(&self, offset: u64, length: u64, mode: i32) -> std::io::Result<()> {
        {
            // After a spill in progress, which would write the range again.
            let mut map = self.cache.settle(self.cache.lock());
            for b in blocks(offset, length) {
                map.live.remove(&b);
            }
            self.record(|j| j.zero(offset, length))?;
        }
        // SAFETY: fallocate on a descriptor we own; the range is the kernel's.
        let r = unsafe {
            libc::fallocate(self.file.as_raw_fd(), mode, offset as libc::off_t, length as libc::off_t)
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn flush_data(&self) -> std::io::Result<()> {
        match self.cache.shape {
            Some(s) if !s.lie_on_flush => {
                let (_map, drained) = self.cache.drain(self.cache.lock(), &self.file);
                drained?;
                self.record(|j| j.flush())
            }
            _ => self.record(|j| j.flush()),
        }
    }

    /// Appends to the write journal, when recording.
    fn record(
        &self,
        f: impl FnOnce(&crate::journal::Recorder) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.journal.as_ref().map_or(Ok(()), f)
    }

    /// A read of up to `size` bytes at `offset`, answered when the model
    /// says (both transports).
    fn read_op<R: ReadAnswer>(&self, offset: u64, size: u32, reply: R) {
        let t0 = self.sched.now_ns();
        if self.sched.is_dead() {
            return reply.fail(libc::EIO);
        }
        let len = (size as usize).min(self.size.saturating_sub(offset) as usize).min(reply.capacity());
        if len == 0 {
            // At or past the end: nothing the device holds.
            return reply.no_data();
        }
        match self.read_data(offset, len) {
            Ok(data) => self.submit_read(t0, offset, len, data, |d| reply.read_done(d, len)),
            Err(e) => reply.fail(errno(&e)),
        }
    }

    /// A write at `offset`. The data is written into the image (or the
    /// volatile cache) before the request is answered, so its view of the
    /// transport's buffer has ended when the answer (possibly at once, for
    /// a model that adds nothing) writes that buffer.
    fn write_op<W: WriteIn>(&self, offset: u64, w: W) {
        let t0 = self.sched.now_ns();
        let len = w.data().len();
        let res = if self.sched.is_dead() {
            Err(libc::EIO)
        } else if offset + len as u64 > self.size {
            Err(libc::ENOSPC)
        } else {
            self.write_data(offset, w.data()).map_err(|e| errno(&e))
        };
        let reply = w.answer();
        match res {
            Ok(()) => {
                let req = Req { op: Op::Write, offset, len: len as u64 };
                self.sched.submit(req, t0, reply.write_done(len as u32));
            }
            Err(e) => reply.fail(e),
        }
    }

    /// A device flush (fsync reaching the medium): drains the volatile
    /// cache, unless the model lies about flushes, and costs the model's
    /// flush.
    fn fsync_op<R: EmptyAnswer>(&self, reply: R) {
        let t0 = self.sched.now_ns();
        if self.sched.is_dead() {
            return reply.fail(libc::EIO);
        }
        match self.flush_data() {
            Ok(()) => {
                self.sched.submit(Req { op: Op::Flush, offset: 0, len: 0 }, t0, reply.empty_done());
            }
            Err(e) => reply.fail(errno(&e)),
        }
    }

    /// fallocate: a punched hole is a discard (the model prices it);
    /// allocation is nothing (the image is as large as the medium already).
    fn fallocate_op<R: EmptyAnswer>(&self, offset: u64, length: u64, mode: i32, reply: R) {
        let t0 = self.sched.now_ns();
        if self.sched.is_dead() {
            return reply.fail(libc::EIO);
        }
        if mode & libc::FALLOC_FL_PUNCH_HOLE == 0 {
            return reply.empty_now();
        }
        match self.punch(offset, length, mode) {
            Ok(()) => {
                let req = Req { op: Op::Discard, offset, len: length };
                self.sched.submit(req, t0, reply.empty_done());
            }
            Err(e) => reply.fail(errno(&e)),
        }
    }
}

/// How a transport answers a device op: fuser's reply types over
/// /dev/fuse, a ring entry's [`ring::Reply`] over io_uring. The ops
/// ([`Fs::read_op`], ...) are written once, over these.
trait Answer: Sized {
    /// Answers now with an error (a positive errno).
    fn fail(self, errno: i32);
}

trait ReadAnswer: Answer {
    /// The most data the answer can carry.
    fn capacity(&self) -> usize;
    /// Answers now with no data.
    fn no_data(self);
    /// The answer the scheduler gives at the completion time.
    fn read_done(self, data: ReadData, len: usize) -> Done;
}

trait WriteAnswer: Answer {
    /// The answer (n bytes written) the scheduler gives at the completion time.
    fn write_done(self, n: u32) -> Done;
}

trait EmptyAnswer: Answer {
    /// Answers now with success.
    fn empty_now(self);
    /// The answer the scheduler gives at the completion time.
    fn empty_done(self) -> Done;
}

/// A write as a transport delivers it: its data, and its answer, which
/// can be had only by giving up the data's view.
trait WriteIn {
    type Answer: WriteAnswer;
    fn data(&self) -> &[u8];
    fn answer(self) -> Self::Answer;
}

impl Answer for ReplyData {
    fn fail(self, e: i32) {
        self.error(Errno::from_i32(e));
    }
}
impl ReadAnswer for ReplyData {
    fn capacity(&self) -> usize {
        usize::MAX
    }
    fn no_data(self) {
        self.data(&[]);
    }
    fn read_done(self, data: ReadData, len: usize) -> Done {
        Done::Data(self, data, len)
    }
}
impl Answer for ReplyWrite {
    fn fail(self, e: i32) {
        self.error(Errno::from_i32(e));
    }
}
impl WriteAnswer for ReplyWrite {
    fn write_done(self, n: u32) -> Done {
        Done::Write(self, n)
    }
}
impl Answer for ReplyEmpty {
    fn fail(self, e: i32) {
        self.error(Errno::from_i32(e));
    }
}
impl EmptyAnswer for ReplyEmpty {
    fn empty_now(self) {
        self.ok();
    }
    fn empty_done(self) -> Done {
        Done::Empty(self)
    }
}
/// fuser hands a write's data and its reply separately.
struct FuserWrite<'a>(&'a [u8], ReplyWrite);
impl WriteIn for FuserWrite<'_> {
    type Answer = ReplyWrite;
    fn data(&self) -> &[u8] {
        self.0
    }
    fn answer(self) -> ReplyWrite {
        self.1
    }
}

impl Answer for ring::Reply {
    fn fail(self, e: i32) {
        self.error(e);
    }
}
impl ReadAnswer for ring::Reply {
    fn capacity(&self) -> usize {
        ring::Reply::capacity(self)
    }
    fn no_data(self) {
        self.ok(&[]);
    }
    fn read_done(self, data: ReadData, len: usize) -> Done {
        Done::RingData(self, data, len)
    }
}
impl WriteAnswer for ring::Reply {
    fn write_done(self, n: u32) -> Done {
        Done::RingWrite(self, n)
    }
}
impl EmptyAnswer for ring::Reply {
    fn empty_now(self) {
        self.ok(&[]);
    }
    fn empty_done(self) -> Done {
        Done::RingEmpty(self)
    }
}
/// A ring entry's write: its data is the first `len` bytes of the payload.
struct RingWrite(ring::Request, usize);
impl WriteIn for RingWrite {
    type Answer = ring::Reply;
    fn data(&self) -> &[u8] {
        &self.0.payload()[..self.1]
    }
    fn answer(self) -> ring::Reply {
        self.0.reply()
    }
}

/// The errno of a failed host operation (EIO where it has none).
fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// A read's data: a pooled buffer, or the mapped image at an offset.
enum ReadData {
    Buf(Vec<u8>),
    Mapped(&'static Image, u64),
}

/// How a request is answered at its completion time: a plain value, so a
/// request costs no allocation (a read's buffer comes from the pool and
/// goes back to it once the reply is written).
enum Done {
    /// A read of `len` bytes and where its data is.
    Data(ReplyData, ReadData, usize),
    /// A write of this many bytes.
    Write(ReplyWrite, u32),
    /// A flush or discard.
    Empty(ReplyEmpty),
    /// A read answered through a ring.
    RingData(ring::Reply, ReadData, usize),
    /// A write answered through a ring (fuse_write_out).
    RingWrite(ring::Reply, u32),
    /// A flush or discard answered through a ring.
    RingEmpty(ring::Reply),
}

impl Completion for Done {
    fn ok(self) {
        match self {
            Done::Data(r, ReadData::Buf(buf), len) => {
                r.data(&buf[..len]);
                give_buf(buf);
            }
            Done::Data(r, ReadData::Mapped(img, offset), len) => r.data(img.slice(offset, len)),
            Done::Write(r, n) => r.written(n),
            Done::Empty(r) => r.ok(),
            Done::RingData(r, ReadData::Buf(buf), len) => {
                r.ok(&buf[..len]);
                give_buf(buf);
            }
            Done::RingData(r, ReadData::Mapped(img, offset), len) => r.ok(img.slice(offset, len)),
            Done::RingWrite(r, n) => {
                let mut out = [0u8; 8];
                out[..4].copy_from_slice(&n.to_ne_bytes());
                r.ok(&out);
            }
            Done::RingEmpty(r) => r.ok(&[]),
        }
    }
    fn fail(self, e: i32) {
        let e = Errno::from_i32(e);
        match self {
            Done::Data(r, data, _) => {
                r.error(e);
                if let ReadData::Buf(buf) = data {
                    give_buf(buf);
                }
            }
            Done::Write(r, _) => r.error(e),
            Done::Empty(r) => r.error(e),
            Done::RingData(r, data, _) => {
                r.error(e.code());
                if let ReadData::Buf(buf) = data {
                    give_buf(buf);
                }
            }
            Done::RingWrite(r, _) | Done::RingEmpty(r) => r.error(e.code()),
        }
    }
}

impl Filesystem for FuseFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // FUSE over io_uring where the kernel offers it and the rings are
        // ready to register (see crate::ring for why, and serve for the
        // fallback).
        let ask = self.offer_uring.load(Ordering::SeqCst)
            && config.add_capabilities(fuser::InitFlags::FUSE_OVER_IO_URING).is_ok();
        self.uring.store(ask, Ordering::SeqCst);
        // Asynchronous direct I/O: the loop device's requests reach us
        // concurrently, so queueing is the model's, not the kernel's.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_ASYNC_DIO);
        // Up to 1 MiB per request (the loop device's largest), so a large
        // I/O is one request, priced once, as the device sees it.
        let _ = config.set_max_write(MAX_REQUEST as u32);
        // The loop device's asynchronous requests are FUSE background
        // requests: allow far more in flight than any queue depth we test,
        // so the kernel never holds them back (the model queues them).
        let _ = config.set_max_background(512);
        let _ = config.set_congestion_threshold(384);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == 1 && name == SERVED_NAME {
            reply.entry(&TTL, &self.attr(2), fuser::Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino.0 {
            1 | 2 => reply.attr(&TTL, &self.attr(ino.0)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // A medium's size is fixed.
        if size.is_some_and(|s| s != self.size) {
            return reply.error(Errno::EPERM);
        }
        reply.attr(&TTL, &self.attr(ino.0));
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 != 2 {
            return reply.error(Errno::EISDIR);
        }
        // FOPEN_DIRECT_IO: the kernel sends every read and write here
        // without the page-cache path (the loop device opens with O_DIRECT
        // anyway; this skips the generic direct-I/O checks and the
        // exclusive inode lock for writes, which FOPEN_PARALLEL_DIRECT_WRITES
        // then relaxes to a shared one, so writes reach us concurrently).
        // No keep_cache: there is no cache to keep. FOPEN_NOFLUSH: close(2)
        // is not a device flush, so the kernel need not ask.
        reply.opened(
            FileHandle(0),
            FopenFlags::FOPEN_DIRECT_IO
                | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
                | FopenFlags::FOPEN_NOFLUSH,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.read_op(offset, size, reply);
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.write_op(offset, FuserWrite(data, reply));
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lo: LockOwner, reply: ReplyEmpty) {
        // close(2): not a device flush.
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.fsync_op(reply);
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.fallocate_op(offset, length, mode, reply);
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino.0 != 1 {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (1u64, FileType::Directory, "."),
            (1, FileType::Directory, ".."),
            (2, FileType::RegularFile, SERVED_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let blocks = self.size / 4096;
        reply.statfs(blocks, 0, 0, 2, 0, 4096, 255, 4096);
    }
}

/// FUSE opcodes (include/uapi/linux/fuse.h) the rings answer.
mod opcode {
    pub const LOOKUP: u32 = 1;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const FLUSH: u32 = 25;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FALLOCATE: u32 = 43;
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Appends `struct fuse_attr` for `ino` (the same attributes [`Fs::attr`]
/// gives fuser).
fn put_attr(out: &mut Vec<u8>, size: u64, ino: u64) {
    let dir = ino == 1;
    let (size, blocks) = if dir { (0, 0) } else { (size, size.div_ceil(512)) };
    let mode = if dir { libc::S_IFDIR | 0o755 } else { libc::S_IFREG | 0o600 };
    for v in [ino, size, blocks, 0, 0, 0] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    // atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags
    for v in [0u32, 0, 0, mode, if dir { 2 } else { 1 }, 0, 0, 0, 4096, 0] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
}

/// `struct fuse_attr_out` (valid for [`TTL`]).
fn attr_out(size: u64, ino: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(104);
    out.extend_from_slice(&TTL.as_secs().to_ne_bytes());
    out.extend_from_slice(&[0u8; 8]);
    put_attr(&mut out, size, ino);
    out
}

impl ring::Handler for Fs {
    fn handle(&self, req: ring::Request) {
        let ino = req.nodeid;
        match req.opcode {
            opcode::LOOKUP => {
                let name = req.payload().split(|b| *b == 0).next().unwrap_or(&[]);
                if ino != 1 || name != SERVED_NAME.as_bytes() {
                    return req.reply().error(libc::ENOENT);
                }
                // struct fuse_entry_out: nodeid, generation, entry_valid,
                // attr_valid, their nsecs, then the attributes.
                let mut out = Vec::with_capacity(128);
                for v in [2u64, 0, TTL.as_secs(), TTL.as_secs()] {
                    out.extend_from_slice(&v.to_ne_bytes());
                }
                out.extend_from_slice(&[0u8; 8]);
                put_attr(&mut out, self.size, 2);
                req.reply().ok(&out);
            }
            opcode::GETATTR => match ino {
                1 | 2 => req.reply().ok(&attr_out(self.size, ino)),
                _ => req.reply().error(libc::ENOENT),
            },
            opcode::SETATTR => {
                // struct fuse_setattr_in: valid, padding, fh, size, ...
                const FATTR_SIZE: u32 = 1 << 3;
                let op_in = req.op_in();
                if le_u32(op_in, 0) & FATTR_SIZE != 0 && le_u64(op_in, 16) != self.size {
                    return req.reply().error(libc::EPERM);
                }
                req.reply().ok(&attr_out(self.size, ino));
            }
            opcode::OPEN | opcode::OPENDIR => {
                let open = req.opcode == opcode::OPEN;
                if open && ino != 2 {
                    return req.reply().error(libc::EISDIR);
                }
                // struct fuse_open_out: fh, open_flags, backing_id. The
                // same flags as the fuser path (see its open).
                let flags = if open {
                    (FopenFlags::FOPEN_DIRECT_IO
                        | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
                        | FopenFlags::FOPEN_NOFLUSH)
                        .bits()
                } else {
                    0
                };
                let mut out = [0u8; 16];
                out[8..12].copy_from_slice(&flags.to_ne_bytes());
                req.reply().ok(&out);
            }
            opcode::RELEASE | opcode::RELEASEDIR | opcode::FLUSH => req.reply().ok(&[]),
            opcode::STATFS => {
                // struct fuse_kstatfs: blocks, bfree, bavail, files, ffree,
                // bsize, namelen, frsize, padding, spare[6].
                let mut out = Vec::with_capacity(80);
                for v in [self.size / 4096, 0, 0, 2, 0] {
                    out.extend_from_slice(&v.to_ne_bytes());
                }
                for v in [4096u32, 255, 4096, 0] {
                    out.extend_from_slice(&v.to_ne_bytes());
                }
                out.extend_from_slice(&[0u8; 24]);
                req.reply().ok(&out);
            }
            opcode::READDIR => {
                if ino != 1 {
                    return req.reply().error(libc::ENOTDIR);
                }
                // struct fuse_read_in: fh, offset, size, ...
                let (offset, size) = (le_u64(req.op_in(), 8), le_u32(req.op_in(), 16) as usize);
                let entries: [(u64, u32, &str); 3] = [
                    (1, libc::DT_DIR as u32, "."),
                    (1, libc::DT_DIR as u32, ".."),
                    (2, libc::DT_REG as u32, SERVED_NAME),
                ];
                let mut out = Vec::new();
                for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
                    // struct fuse_dirent: ino, off, namelen, type, name, padded to 8.
                    let len = (24 + name.len()).next_multiple_of(8);
                    if out.len() + len > size {
                        break;
                    }
                    out.extend_from_slice(&ino.to_ne_bytes());
                    out.extend_from_slice(&((i + 1) as u64).to_ne_bytes());
                    out.extend_from_slice(&(name.len() as u32).to_ne_bytes());
                    out.extend_from_slice(&kind.to_ne_bytes());
                    out.extend_from_slice(name.as_bytes());
                    out.resize(out.len().next_multiple_of(8), 0);
                }
                req.reply().ok(&out);
            }
            // struct fuse_read_in / fuse_write_in: fh, offset, size, ...
            opcode::READ => {
                let (offset, size) = (le_u64(req.op_in(), 8), le_u32(req.op_in(), 16));
                self.read_op(offset, size, req.reply());
            }
            opcode::WRITE => {
                let (offset, size) = (le_u64(req.op_in(), 8), le_u32(req.op_in(), 16) as usize);
                if size > req.payload().len() {
                    return req.reply().error(libc::EINVAL);
                }
                self.write_op(offset, RingWrite(req, size));
            }
            opcode::FSYNC => self.fsync_op(req.reply()),
            opcode::FALLOCATE => {
                // struct fuse_fallocate_in: fh, offset, length, mode.
                let op_in = req.op_in();
                let (offset, length, mode) = (le_u64(op_in, 8), le_u64(op_in, 16), le_u32(op_in, 24) as i32);
                self.fallocate_op(offset, length, mode, req.reply());
            }
            // What fuser answers for what a filesystem does not implement.
            _ => req.reply().error(libc::ENOSYS),
        }
    }
}

extern "C" fn on_sigbus(_: libc::c_int) {
    const MSG: &[u8] =
        b"storbench: error: reading the image failed (SIGBUS: a host I/O error, or the image was truncated)\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        libc::_exit(1);
    }
}

/// A named daemon thread (`emu-NAME`, seen in `top -H`), an error naming it
/// when the system cannot start one.
fn thread<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>, EmuError> {
    std::thread::Builder::new()
        .name(format!("emu-{name}"))
        .spawn(f)
        .map_err(|e| EmuError::Failed(format!("starting the {name} thread: {e}")))
}

/// The I/O trace's writer, buffered.
fn create_trace(p: &Path) -> Result<TraceWriter<BufWriter<File>>, EmuError> {
    File::create(p)
        .and_then(|f| TraceWriter::new(BufWriter::with_capacity(1 << 16, f)))
        .map_err(|e| EmuError::Failed(format!("creating the trace {}: {e}", p.display())))
}

/// The daemon process's settings, before any thread exists: the signals
/// one thread waits for blocked (every thread inherits the mask), a word in
/// the log on SIGBUS, I/O-flusher status and a favoured nice level.
fn process_setup() -> libc::sigset_t {
    // Signals go to one thread that waits for them; block them before any
    // thread exists so every thread inherits the mask.
    // SAFETY: building and installing a signal mask for this thread.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1, libc::SIGUSR2, control_signal()] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    // Reads come from the mapped image: a host I/O error there is SIGBUS,
    // not EIO. Say so in the log before dying (the medium then fails as a
    // killed daemon does), rather than vanish without a word.
    // SAFETY: installing a handler that only calls async-signal-safe write
    // and _exit.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
    // SAFETY: prctl with constant arguments. Ignored where unsupported.
    unsafe { libc::prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) };
    // The reader threads (and the others, which inherit it from this one)
    // run at nice -10: favoured on a busy host, so a request is picked up
    // (and its arrival stamped) promptly, but in the normal scheduling
    // class. Real-time readers were tried: each request then preempted its
    // way in and put a reader to sleep after it (a context switch per
    // request even at QD16, against about one per ten here) and the wake-up
    // went to the reader's last CPU rather than the waker's, which on a VM
    // costs an idle vCPU's wake-up; both cost more than they saved. The
    // timer thread alone runs SCHED_FIFO (below). Where refused (no
    // privilege), things stay as they are; the counters' `late` shows it.
    // SAFETY: setpriority on the calling thread with a constant value.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) };
    set
}

/// An array: its saved state back, then a thread that writes it when it
/// changes (a rebuild's progress).
fn watch_array(sched: &Arc<Sched<Done>>, stop: &Arc<AtomicBool>, status_file: &Path) -> Result<(), EmuError> {
    let Some(a) = sched.model().array() else { return Ok(()) };
    if let Ok(text) = std::fs::read_to_string(status_file) {
        if let Ok(saved) = serde_json::from_str(&text) {
            a.restore(&saved);
        }
    }
    let (s, st, path) = (sched.clone(), stop.clone(), status_file.to_path_buf());
    thread("array", move || {
        let mut last = None;
        while !st.load(Ordering::Relaxed) {
            let now = s.model().array().expect("an array").status(s.model_ns());
            if last.as_ref() != Some(&now) {
                write_status(&path, &now);
                last = Some(now);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })?;
    Ok(())
}

/// The thread that waits for the daemon's signals: SIGUSR1 cuts the power
/// (new I/O refused, what is queued failed, the volatile cache lost),
/// SIGUSR2 empties the cache tier (`media cache reset`), the control signal
/// reads a command (a time scale, an array's fail or rebuild), and the
/// others stop the daemon by unmounting its filesystem.
fn handle_signals(
    set: libc::sigset_t,
    stop: &Arc<AtomicBool>,
    mut unmounter: fuser::SessionUnmounter,
    sched: &Arc<Sched<Done>>,
    cache: Arc<DataCache>,
    pid_file: &Path,
) -> Result<(), EmuError> {
    let (status_file, ctl_file) = array_files(pid_file);
    let scale_path = scale_file(pid_file);
    let (s, stop) = (sched.clone(), stop.clone());
    let control = move || {
        let Ok(text) = std::fs::read_to_string(&ctl_file) else { return };
        match serde_json::from_str::<Command>(&text) {
            Ok(Command::Scale { factor, seq }) => {
                let error = s.set_scale(factor).err().unwrap_or_default();
                eprintln!("storbench: info: scale command {text}: now ×{}", s.scale());
                write_scale(&scale_path, &ScaleStatus { scale: s.scale(), applied: seq, error });
            }
            Ok(Command::Array(cmd)) => array_control(&s, &cmd, &text, &status_file),
            Err(_) => eprintln!("storbench: note: ignored an unreadable command in {}", ctl_file.display()),
        }
    };
    let s = sched.clone();
    thread("signals", move || loop {
        let mut sig = 0;
        // SAFETY: waiting on the mask `process_setup` built.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            continue;
        }
        if sig == libc::SIGUSR1 {
            s.cut();
            cache.cut();
        } else if sig == libc::SIGUSR2 {
            if let Some(t) = s.model().tier() {
                t.reset();
            }
        } else if sig == control_signal() {
            control();
        } else {
            stop.store(true, Ordering::Relaxed);
            let _ = unmounter.unmount();
            return;
        }
    })?;
    Ok(())
}

/// The medium's image, opened for reading and writing; one smaller than
/// the medium is refused (it is mapped whole).
fn open_image(cfg: &DaemonConfig) -> Result<File, EmuError> {
    let file = File::options()
        .read(true)
        .write(true)
        .open(&cfg.image)
        .map_err(|e| EmuError::Failed(format!("opening {}: {e}", cfg.image.display())))?;
    let have = file.metadata().map(|m| m.len()).unwrap_or(0);
    if have < cfg.size {
        return Err(EmuError::Usage(format!(
            "the image {} holds {have} bytes, less than the medium's {} (it is mapped whole)",
            cfg.image.display(),
            cfg.size
        )));
    }
    Ok(file)
}

/// Gives the scheduler the floor and the lead the medium was made with,
/// and says so in the log.
fn absorb<C: crate::sched::Completion>(sched: &Sched<C>, cfg: &DaemonConfig) {
    // A 64 KiB floor of 0 (not measured) is the 4 KiB one: `floor_of` reads
    // any 64 KiB floor under the 4 KiB one so.
    sched.set_floor_by_size(Duration::from_nanos(cfg.floor_ns), Duration::from_nanos(cfg.floor_64k_ns));
    let large = cfg.floor_64k_ns.max(cfg.floor_ns);
    sched.set_lead(cfg.lead);
    if cfg.floor_ns > 0 {
        let us = |ns: u64| ns as f64 / 1e3;
        eprintln!(
            "storbench: info: absorbing the emulator's floor of {:.1} µs ({:.1} µs at 64 KiB) and a timed reply's wake-ups ({:.1} µs after a {:.0} µs wait, {:.1} µs after {:.0} µs): replies leave at arrival + model time − floor (− wake-ups when they wait for the timer), never before arrival",
            us(cfg.floor_ns),
            us(large),
            us(cfg.lead.near.1),
            us(cfg.lead.near.0),
            us(cfg.lead.far.1),
            us(cfg.lead.far.0),
        );
    }
}

/// Runs the daemon in this process until it is told to stop (SIGTERM,
/// SIGINT, SIGHUP) or its filesystem is unmounted. SIGUSR1 cuts the power.
pub fn serve(cfg: &DaemonConfig) -> Result<(), EmuError> {
    let model = cfg.spec.build(cfg.size).map_err(|e| EmuError::Usage(e.to_string()))?;
    let file = open_image(cfg)?;
    let trace = cfg.trace.as_deref().map(create_trace).transpose()?;
    let set = process_setup();
    let cache = Arc::new(DataCache {
        shape: model.volatile_cache(),
        blocks: Mutex::new(Cached::default()),
        spilled: Condvar::new(),
        spill: Condvar::new(),
        cut: AtomicBool::new(false),
        aged: Mutex::new(Vec::new()),
    });
    let destage_file =
        file.try_clone().map_err(|e| EmuError::Failed(format!("opening the image twice: {e}")))?;
    let exit_file =
        file.try_clone().map_err(|e| EmuError::Failed(format!("opening the image twice: {e}")))?;
    let spill_file =
        file.try_clone().map_err(|e| EmuError::Failed(format!("opening the image twice: {e}")))?;
    let exit_cache = cache.clone();
    let sched = Arc::new(Sched::new(model, trace));
    absorb(&sched, cfg);
    let image = Image::map(&file, cfg.size);
    let journal = match &cfg.journal {
        Some(p) => Some(
            crate::journal::Recorder::create(p, cfg.size)
                .map_err(|e| EmuError::Failed(format!("creating the write journal {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let fs = Arc::new(Fs {
        file,
        image,
        size: cfg.size,
        sched: sched.clone(),
        cache: cache.clone(),
        journal,
        offer_uring: AtomicBool::new(false),
        uring: AtomicBool::new(false),
    });
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("storbench-emu:{}", cfg.name)),
        MountOption::Subtype("storbench".into()),
    ];
    config.n_threads = Some(4);
    config.clone_fd = true;
    std::fs::create_dir_all(&cfg.mountpoint)
        .map_err(|e| EmuError::Failed(format!("creating {}: {e}", cfg.mountpoint.display())))?;
    let (mut session, rings) = mount(&fs, &cfg.mountpoint, &config)?;
    let stop = Arc::new(AtomicBool::new(false));
    let timer = {
        let s = sched.clone();
        thread("timer", move || {
            // A reply leaves when it is due, whatever else the host is doing:
            // the timer thread runs SCHED_FIFO at a low real-time priority,
            // so a busy machine delays it by microseconds, not by a
            // scheduler slice.
            // SAFETY: sched_setscheduler on the calling thread, valid parameter.
            unsafe {
                let p = libc::sched_param { sched_priority: 10 };
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
            }
            s.run_timer()
        })?
    };
    let ticker = {
        let (s, p, st) = (sched.clone(), cfg.counters.clone(), stop.clone());
        thread("counters", move || crate::counters::run(&s, &p, &st))?
    };
    let spills_done = Arc::new(AtomicBool::new(false));
    let spills = if cache.shape.is_some() {
        let (c, st) = (cache.clone(), spills_done.clone());
        Some(thread("spill", move || c.run_spills(&spill_file, &st))?)
    } else {
        None
    };
    if cache.shape.is_some() {
        let (c, st) = (cache.clone(), stop.clone());
        thread("destage", move || {
            while !st.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1));
                c.age_out(&destage_file);
            }
        })?;
    }
    watch_array(&sched, &stop, &array_files(&cfg.pid_file).0)?;
    write_scale(&scale_file(&cfg.pid_file), &ScaleStatus { scale: 1.0, applied: 0, error: String::new() });
    handle_signals(set, &stop, session.unmount_callable(), &sched, cache, &cfg.pid_file)?;
    std::fs::write(&cfg.pid_file, format!("{}\n", std::process::id()))
        .map_err(|e| EmuError::Failed(format!("writing {}: {e}", cfg.pid_file.display())))?;
    let res = session.run();
    // The connection is gone: the queues' threads end (and the rings'
    // descriptor of it closes).
    drop(rings);
    // A clean stop is not a power cut: the drive writes its cache back
    // (after a cut, drain refuses and what was volatile stays lost).
    // A spilled cache is written first, even after a cut (it was durable).
    let _ = exit_cache.drain(exit_cache.lock(), &exit_file);
    stop.store(true, Ordering::Relaxed);
    spills_done.store(true, Ordering::SeqCst);
    if let Some(t) = spills {
        let _ = t.join();
    }
    sched.stop();
    let _ = timer.join();
    let _ = ticker.join();
    sched.flush_trace();
    let _ = std::fs::remove_file(&cfg.pid_file);
    res.map_err(|e| EmuError::Failed(format!("serving {}: {e}", cfg.mountpoint.display())))
}

/// Mounts the filesystem and chooses its transport, saying which in the
/// log: FUSE over io_uring where the kernel offers it (the rings are
/// prepared first, so the INIT reply asks for them only when all that is
/// left is their registration), else /dev/fuse. If the kernel refuses a
/// ring's registration, that connection would hold every request for
/// good: it is unmounted and the filesystem mounted again over /dev/fuse
/// (nothing has used it yet: the loop device is attached after the
/// daemon serves).
fn mount(
    fs: &Arc<Fs>,
    mountpoint: &Path,
    config: &fuser::Config,
) -> Result<(fuser::Session<FuseFs>, Option<ring::Rings>), EmuError> {
    let new = || {
        fuser::Session::new(FuseFs(fs.clone()), mountpoint, config).map_err(|e| {
            EmuError::Failed(format!("mounting the FUSE filesystem on {}: {e}", mountpoint.display()))
        })
    };
    let mut rings = match uring_switch() {
        Err(why) => {
            eprintln!("storbench: info: serving through /dev/fuse ({why})");
            None
        }
        Ok(()) => {
            match ring::Rings::prepare(MAX_REQUEST) {
                Ok(r) => Some(r),
                Err(e) => {
                    eprintln!("storbench: note: serving through /dev/fuse (the io_uring queues could not be made: {e})");
                    None
                }
            }
        }
    };
    fs.offer_uring.store(rings.is_some(), Ordering::SeqCst);
    let session = new()?;
    let Some(r) = rings.as_mut() else { return Ok((session, None)) };
    if !fs.uring.load(Ordering::SeqCst) {
        eprintln!("storbench: info: serving through /dev/fuse (the kernel did not offer FUSE over io_uring)");
        return Ok((session, None));
    }
    use std::os::fd::AsFd;
    match r.register(session.as_fd(), fs.clone()) {
        Ok(()) => {
            eprintln!("storbench: info: serving through FUSE over io_uring (one queue per CPU)");
            Ok((session, rings))
        }
        Err(e) => {
            eprintln!(
                "storbench: note: the kernel refused the io_uring queues ({e}); mounting again, serving through /dev/fuse"
            );
            drop(rings);
            fs.offer_uring.store(false, Ordering::SeqCst);
            drop(session);
            Ok((new()?, None))
        }
    }
}

/// The kernel's switch for FUSE over io_uring, off by default: turned on
/// (as root) unless `STORBENCH_EMU_NO_URING` is set, since the rings keep a
/// request's round trip on one CPU (BENCHMARKS.md: the QD1 floor). It only
/// lets FUSE servers that ask for rings use them; others are unaffected.
/// Said in the daemon's log when it does. An error says why the rings are
/// not to be used.
fn uring_switch() -> Result<(), &'static str> {
    const SWITCH: &str = "/sys/module/fuse/parameters/enable_uring";
    if std::env::var_os("STORBENCH_EMU_NO_URING").is_some() {
        return Err("STORBENCH_EMU_NO_URING is set");
    }
    match std::fs::read_to_string(SWITCH).map(|v| v.trim() == "Y") {
        Err(_) => Err("this kernel has no FUSE over io_uring"),
        Ok(true) => Ok(()),
        Ok(false) => {
            if std::fs::write(SWITCH, "Y").is_err() {
                return Err("FUSE over io_uring is switched off, and only root can switch it on");
            }
            eprintln!("storbench: info: turned FUSE over io_uring on ({SWITCH} = Y)");
            Ok(())
        }
    }
}

/// The signal that makes the daemon read its array command file (the
/// second real-time signal after the C library's own).
pub fn control_signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

/// Applies an array command (the daemon's controller), writing the
/// array's state with the command's sequence number; a command to a model
/// that is not an array is noted in the log and ignored.
fn array_control<C: Completion>(s: &Sched<C>, cmd: &ArrayCommand, text: &str, status_file: &Path) {
    let Some(a) = s.model().array() else {
        eprintln!("storbench: note: ignored an array command to a model that is not an array: {text}");
        return;
    };
    let st = match a.control(cmd, s.model_ns()) {
        Ok(st) => st,
        Err(e) => {
            let mut st = a.status(s.model_ns());
            st.applied = match *cmd {
                ArrayCommand::Fail { seq, .. }
                | ArrayCommand::Rebuild { seq, .. }
                | ArrayCommand::Pause { seq } => seq,
            };
            st.error = e.0;
            st
        }
    };
    eprintln!("storbench: info: array command {text}: now {}", st.state);
    write_status(status_file, &st);
}

/// A command to a medium's daemon, written whole to its control file
/// ([`array_files`]) before [`control_signal`]. Its JSON is tagged by
/// `cmd`: `{"cmd":"scale","factor":0.5,"seq":3}`, or an array's command
/// as [`ArrayCommand`] writes it (`{"cmd":"fail","disk":1,"seq":2}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Command {
    /// Multiply the device's service times by `factor` from now on
    /// ([`Sched::set_scale`]); any model.
    Scale {
        /// The time scale (0.5: twice as fast, 2: half as fast, 1: as modelled).
        factor: f64,
        /// Sequence number, echoed in [`ScaleStatus::applied`].
        seq: u64,
    },
    /// An array's command.
    #[serde(untagged)]
    Array(ArrayCommand),
}

/// The time scale in effect, as the daemon writes it to [`scale_file`]
/// at start (1) and after every scale command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScaleStatus {
    /// The factor in effect.
    pub scale: f64,
    /// The last scale command taken (its sequence number; 0: none).
    pub applied: u64,
    /// Why that command was refused (empty: applied).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// The file the daemon writes its [`ScaleStatus`] to, beside its pid file.
pub fn scale_file(pid_file: &Path) -> PathBuf {
    pid_file.with_extension("scale")
}

fn write_scale(path: &Path, st: &ScaleStatus) {
    let tmp = path.with_extension("scale.tmp");
    if std::fs::write(&tmp, serde_json::to_string(st).expect("serialises")).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// An array's status file (the daemon writes it) and command file (`media
/// fail`/`rebuild` write it), beside the daemon's pid file.
pub fn array_files(pid_file: &Path) -> (PathBuf, PathBuf) {
    (pid_file.with_extension("array"), pid_file.with_extension("ctl"))
}

/// Writes the status whole (a temporary file renamed over it), so a reader
/// never sees half of it.
fn write_status(path: &Path, st: &crate::model::ArrayStatus) {
    let tmp = path.with_extension("array.tmp");
    if std::fs::write(&tmp, serde_json::to_string(st).expect("serialises")).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// Where a medium's daemon files live: `DIR/NAME.{json,pid,counters,log}`.
pub fn files(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.json")),
        dir.join(format!("{name}.pid")),
        dir.join(format!("{name}.counters")),
        dir.join(format!("{name}.log")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_file_holds_a_scale_or_an_arrays_command() {
        let scale: Command = serde_json::from_str(r#"{"cmd":"scale","factor":0.5,"seq":3}"#).unwrap();
        assert_eq!(scale, Command::Scale { factor: 0.5, seq: 3 });
        // What `media fail` has always written still reads as an array's.
        let fail = serde_json::to_string(&ArrayCommand::Fail { disk: 1, seq: 2 }).unwrap();
        let cmd: Command = serde_json::from_str(&fail).unwrap();
        assert_eq!(cmd, Command::Array(ArrayCommand::Fail { disk: 1, seq: 2 }));
        assert_eq!(serde_json::to_string(&cmd).unwrap(), fail);
        assert_eq!(serde_json::to_string(&scale).unwrap(), r#"{"cmd":"scale","factor":0.5,"seq":3}"#);
        assert!(serde_json::from_str::<Command>(r#"{"cmd":"shrink","seq":1}"#).is_err());
    }
}
