//! A device model driven in process, under a page cache of its own
//! (issue 25): what SQLite's files see through `?model=` (the db crate's
//! `FileDevice`, which the ops crate implements with this). The FUSE
//! daemon serves a model to anything that opens a file, but adds its own
//! round trip (12-41 µs here, BENCHMARKS.md) to every request, as large as
//! this host's disk takes to commit; a database whose commits are that
//! short cannot be held against its model through it. Here the model is
//! asked directly, by the thread that syncs, and the thread waits for the
//! model's completion itself: what remains is its own wake-up, which it
//! avoids for the last [`SPIN`] by spinning.
//!
//! What reaches the device is what the kernel sends on a file's fsync on
//! ext4 (fs/ext4/fsync.c; the SQLite storbench bundles calls fsync, as it
//! is built without `HAVE_FDATASYNC`): the file's dirty pages written back
//! (contiguous pages merged into requests of at most [`MAX_IO`], queued at
//! once, so a device with several units serves them side by side); then,
//! when the inode changed, its change made durable ([`Metadata`]); then one
//! flush of the device's cache. The inode changes when the file's size
//! does (a growing WAL) and when a write changes its mtime: ext4 stamps a
//! write with the kernel's coarse clock (`CLOCK_REALTIME_COARSE`, one tick
//! a jiffy: 4 ms on this host), so a write in a tick after the file's
//! last stamp dirties the inode and one in the same tick does not. The
//! device reads that same clock. Counted on this host's disk (ext4 with
//! no journal, /sys/block/vda/stat, 400 fsyncs each, 2026-11-29): a 4 KiB
//! overwrite and fsync back to back is 1.04 writes and 1 flush; with 5 ms
//! between them, 2.05 writes (the inode's block, every time); a growing
//! file, 2.00 (`bench/fsync-writes.sh`). Not modelled: a stat of the file between writes,
//! which makes the next stamp a fine-grained one (multigrain timestamps,
//! Linux 6.13) and so always a change (2.0 writes a sync when counted).
//! Writes themselves only dirty the page cache, and reads are its hits:
//! the database is taken to be in memory (`FileDevice::read`), as a small
//! database built just before its run is on the host's page cache.
//!
//! Where the files are on the device: each file of the database gets a
//! region of its own ([`REGION`] bytes, in the order they are opened), so
//! a disk model seeks between the WAL and the database as it would
//! between two files of a small filesystem; the journal has the last one.
//! Requests are served in arrival order by the model's first free unit (a
//! disk's command-queue reordering, which only matters with many
//! requests queued at once, is not applied).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::{Model, Op, Req, State};

/// The device's size: what the model is built for.
pub const CAPACITY: u64 = 1 << 30;
/// Each file's region on the device.
pub const REGION: u64 = 128 << 20;
/// How many files get regions of their own (the last region is the
/// journal's; more files wrap round).
const FILES: u64 = CAPACITY / REGION - 1;
/// A page of the page cache.
pub const PAGE: u64 = 4096;
/// The largest writeback request (the block layer splits larger ones).
pub const MAX_IO: u64 = 512 << 10;
/// A journal commit that records an inode's change: a descriptor block,
/// the inode's block and the commit block (jbd2).
pub const JOURNAL_COMMIT: u64 = 3 * PAGE;

/// How the filesystem makes an inode's change durable on fsync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metadata {
    /// A journal commit ([`JOURNAL_COMMIT`] bytes at the journal's head),
    /// after the data: ext4 with a journal (mkfs's default), xfs's log.
    Journal,
    /// The inode's block written where it is, after the data: ext4
    /// without a journal (this host's root filesystem). The block bitmap
    /// of a file that grew is not among a sync's writes (counted: an
    /// append and fsync is 2.00 writes, the page and the inode).
    InPlace,
}

impl std::fmt::Display for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Metadata::Journal => "inode changes by journal commit",
            Metadata::InPlace => "inode changes written in place (no journal)",
        })
    }
}

/// The kernel's coarse wall clock, the one ext4 stamps a write's mtime
/// with: one value a tick.
fn coarse_now() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}
/// A wait shorter than this is spun, not slept: a sleeping thread wakes
/// tens of µs late on this host, which would be as large as the commits
/// the model is held against.
pub const SPIN: Duration = Duration::from_micros(150);

/// A device model under a page cache, in process.
#[derive(Debug)]
pub struct PageCacheDevice {
    model: Model,
    label: String,
    metadata: Metadata,
    /// The mtime clock ([`coarse_now`]; a test's own).
    clock: fn() -> i64,
    epoch: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The model's state.
    st: State,
    /// When each of the model's units is free again (ns since `epoch`).
    units: Vec<u64>,
    files: Vec<File>,
    /// Where the journal's next commit goes, within its region.
    journal_head: u64,
    /// What has reached the device: requests per op (read, write, flush,
    /// discard), bytes written.
    requests: [u64; 4],
    written: u64,
}

#[derive(Debug)]
struct File {
    /// Its path, as SQLite names it (whole).
    path: PathBuf,
    /// Its region's first byte on the device.
    base: u64,
    /// Dirty pages (page numbers within the file).
    dirty: BTreeSet<u64>,
    /// Its size now, and at its last sync (a change is the inode's).
    size: u64,
    synced_size: u64,
    /// Its mtime (the coarse clock at its last stamp; none yet).
    mtime: Option<i64>,
    /// Whether a write changed its mtime since its last sync.
    stamped: bool,
}

/// What a device has served: requests per op and bytes written (for
/// tests and the run's record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Write requests (writeback and the inode's changes).
    pub writes: u64,
    /// Flushes (one per sync).
    pub flushes: u64,
    /// Bytes written.
    pub written: u64,
}

impl PageCacheDevice {
    /// A device of `model` under a filesystem that makes inode changes
    /// durable by `metadata` (`label`: what the run's record calls it).
    pub fn new(model: Model, label: String, metadata: Metadata) -> PageCacheDevice {
        let units = vec![0; model.units().max(1)];
        PageCacheDevice {
            model,
            label,
            metadata,
            clock: coarse_now,
            epoch: Instant::now(),
            inner: Mutex::new(Inner { units, ..Inner::default() }),
        }
    }

    /// What it is.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// How its filesystem makes an inode's change durable.
    pub fn metadata(&self) -> Metadata {
        self.metadata
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A file is opened; its id. A path opened before (by another
    /// connection) is the same file, as its inode is in the kernel: one
    /// region, one set of dirty pages, one size. A new one's size now is
    /// in the page cache, clean.
    pub fn open(&self, path: &Path) -> u32 {
        let mut g = self.lock();
        if let Some(id) = g.files.iter().position(|f| f.path == path) {
            return id as u32;
        }
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let id = g.files.len() as u64;
        g.files.push(File {
            path: path.to_path_buf(),
            base: (id % FILES) * REGION,
            dirty: BTreeSet::new(),
            size,
            synced_size: size,
            mtime: None,
            stamped: false,
        });
        id as u32
    }

    /// `len` bytes written at `offset` of `file`: its pages dirty.
    pub fn write(&self, file: u32, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let now = (self.clock)();
        let mut g = self.lock();
        let Some(f) = g.files.get_mut(file as usize) else { return };
        f.dirty.extend(offset / PAGE..=(offset + len - 1) / PAGE);
        f.size = f.size.max(offset + len);
        if f.mtime != Some(now) {
            f.mtime = Some(now);
            f.stamped = true;
        }
    }

    /// The file at `path` was deleted: made again, it is empty and clean
    /// (it keeps its id and region).
    pub fn delete(&self, path: &Path) {
        let mut g = self.lock();
        if let Some(f) = g.files.iter_mut().find(|f| f.path == path) {
            f.dirty.clear();
            (f.size, f.synced_size) = (0, 0);
            (f.mtime, f.stamped) = (None, false);
        }
    }

    /// `file` cut to `size`: the pages past it are no longer dirty.
    pub fn truncate(&self, file: u32, size: u64) {
        let mut g = self.lock();
        let Some(f) = g.files.get_mut(file as usize) else { return };
        f.dirty.retain(|p| p * PAGE < size);
        f.size = size;
        f.stamped = true;
    }

    /// `file`'s fsync: queues its writeback, its inode's change when its
    /// size or mtime changed ([`Metadata`]) and the flush, then waits for
    /// the flush.
    pub fn sync(&self, file: u32) {
        let done = {
            let mut g = self.lock();
            let now = self.now_ns();
            let Some(f) = g.files.get_mut(file as usize) else { return };
            let base = f.base;
            let extents = extents(&std::mem::take(&mut f.dirty));
            let inode = f.stamped || f.size != f.synced_size;
            f.synced_size = f.size;
            f.stamped = false;
            let mut end = now;
            for (off, len) in extents {
                // Within the file's region: a run that crosses its end
                // wraps to the region's start as two requests.
                let at = off % REGION;
                let first = len.min(REGION - at);
                end = end.max(self.issue(&mut g, Req { op: Op::Write, offset: base + at, len: first }, now));
                if first < len {
                    end = end.max(self.issue(
                        &mut g,
                        Req { op: Op::Write, offset: base, len: len - first },
                        now,
                    ));
                }
            }
            if inode {
                // After the data's writeback has completed, as the kernel
                // waits for it first.
                end = match self.metadata {
                    Metadata::Journal => {
                        let at = FILES * REGION + g.journal_head;
                        g.journal_head = (g.journal_head + JOURNAL_COMMIT) % (REGION - JOURNAL_COMMIT);
                        self.issue(&mut g, Req { op: Op::Write, offset: at, len: JOURNAL_COMMIT }, end)
                    }
                    Metadata::InPlace => {
                        // The metadata region (the last): the inode table's
                        // block of this file.
                        let table = FILES * REGION + (file as u64 % 1024) * PAGE;
                        self.issue(&mut g, Req { op: Op::Write, offset: table, len: PAGE }, end)
                    }
                };
            }
            self.issue(&mut g, Req { op: Op::Flush, offset: 0, len: 0 }, end)
        };
        self.wait_until(done);
    }

    /// The same device with `clock` as its mtime clock (a test's).
    #[cfg(test)]
    fn with_clock(mut self, clock: fn() -> i64) -> PageCacheDevice {
        self.clock = clock;
        self
    }

    /// What it has served so far.
    pub fn served(&self) -> Served {
        let g = self.lock();
        Served {
            writes: g.requests[Op::Write.index()],
            flushes: g.requests[Op::Flush.index()],
            written: g.written,
        }
    }

    /// Queues `req` at `at_ns` for the model's first free unit; when its
    /// completion reaches the host (ns since `epoch`).
    fn issue(&self, g: &mut Inner, req: Req, at_ns: u64) -> u64 {
        g.requests[req.op.index()] += 1;
        if req.op == Op::Write {
            g.written += req.len;
        }
        let ready = self.model.approach(&req, &mut g.st, at_ns);
        let unit = (0..g.units.len()).min_by_key(|&i| g.units[i]).expect("at least one unit");
        let start = ready.max(g.units[unit]);
        let svc = self.model.service_time(&req, &mut g.st, start).as_nanos() as u64;
        g.units[unit] = start + svc;
        start + svc + self.model.back(&req).as_nanos() as u64
    }

    /// Returns at `ns` (since `epoch`): sleeps the most of a long wait,
    /// spins its last [`SPIN`].
    fn wait_until(&self, ns: u64) {
        let spin = SPIN.as_nanos() as u64;
        loop {
            let now = self.now_ns();
            if now >= ns {
                return;
            }
            let left = ns - now;
            if left > spin {
                std::thread::sleep(Duration::from_nanos(left - spin));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Dirty pages as requests: (offset, length) runs of contiguous pages, at
/// most [`MAX_IO`] each, in file order.
fn extents(pages: &BTreeSet<u64>) -> Vec<(u64, u64)> {
    let most = MAX_IO / PAGE;
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut run: Option<(u64, u64)> = None; // first page, pages
    for &p in pages {
        run = match run {
            Some((first, n)) if first + n == p && n < most => Some((first, n + 1)),
            Some((first, n)) => {
                out.push((first * PAGE, n * PAGE));
                Some((p, 1))
            }
            None => Some((p, 1)),
        };
    }
    if let Some((first, n)) = run {
        out.push((first * PAGE, n * PAGE));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Spec;

    thread_local! {
        /// The test's coarse clock: a tick passes when the test says.
        static TICK: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
    }

    fn tick() -> i64 {
        TICK.with(|t| t.get())
    }

    fn next_tick() {
        TICK.with(|t| t.set(t.get() + 4_000_000));
    }

    fn device(sets: &[&str], metadata: Metadata) -> PageCacheDevice {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let model = Spec::parse("constant", &sets).unwrap().build(CAPACITY).unwrap();
        PageCacheDevice::new(model, "constant".into(), metadata).with_clock(tick)
    }

    fn constant(sets: &[&str]) -> PageCacheDevice {
        device(sets, Metadata::Journal)
    }

    #[test]
    fn dirty_pages_become_requests_of_contiguous_runs() {
        let pages: BTreeSet<u64> = [0, 1, 2, 5, 6, 9].into_iter().collect();
        assert_eq!(extents(&pages), vec![(0, 3 * PAGE), (5 * PAGE, 2 * PAGE), (9 * PAGE, PAGE)]);
        let long: BTreeSet<u64> = (0..MAX_IO / PAGE + 1).collect();
        assert_eq!(extents(&long), vec![(0, MAX_IO), (MAX_IO, PAGE)]);
        assert!(extents(&BTreeSet::new()).is_empty());
    }

    #[test]
    fn a_sync_writes_back_what_is_dirty_journals_a_new_size_and_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let d = constant(&["units=1", "write=1ms", "flush=2ms", "read=0"]);
        let f = d.open(&dir.path().join("absent.db"));
        // Two runs of pages: two writes; the file grew: a journal commit.
        d.write(f, 0, 8192);
        d.write(f, 100 * PAGE, 100);
        let t = Instant::now();
        d.sync(f);
        let took = t.elapsed();
        assert_eq!(d.served(), Served { writes: 3, flushes: 1, written: 8192 + PAGE + JOURNAL_COMMIT });
        // One unit: three 1 ms writes one after another, then the flush.
        assert!(took >= Duration::from_millis(5), "{took:?}");
        assert!(took < Duration::from_millis(50), "{took:?}");
        // Rewriting a page within the size: one write, no journal.
        d.write(f, 0, 100);
        let t = Instant::now();
        d.sync(f);
        assert!(t.elapsed() >= Duration::from_millis(3), "{:?}", t.elapsed());
        assert_eq!(d.served(), Served { writes: 4, flushes: 2, written: 8192 + 2 * PAGE + JOURNAL_COMMIT });
        // Another connection's handle on the same path is the same file:
        // its writes are this sync's too.
        let g = d.open(&dir.path().join("absent.db"));
        assert_eq!(g, f);
        d.write(g, PAGE, 10);
        d.sync(f);
        assert_eq!(d.served().writes, 5, "the other handle's page written back");
        assert_eq!(d.served().flushes, 3);
        // Nothing dirty: the flush alone.
        d.sync(f);
        assert_eq!(d.served().writes, 5);
        assert_eq!(d.served().flushes, 4);
        // A truncated file's dropped pages are not written back.
        d.write(f, 200 * PAGE, PAGE);
        d.truncate(f, 200 * PAGE);
        d.sync(f);
        assert_eq!(d.served().writes, 6, "only the journal's commit of the new size");
        // Deleted and made again: empty, so its first write grows it.
        d.delete(&dir.path().join("absent.db"));
        d.write(f, 0, PAGE);
        d.sync(f);
        assert_eq!(d.served().writes, 8, "the page and the journal's commit of the new size");
        // A run across the end of the file's region: two requests.
        d.write(f, REGION - PAGE, 2 * PAGE);
        d.sync(f);
        assert_eq!(d.served().writes, 11, "two halves and the journal's commit");
        // A tick later, a rewrite within the size changes the mtime: the
        // journal commits the inode.
        next_tick();
        d.write(f, 0, 100);
        d.sync(f);
        assert_eq!(d.served().writes, 13, "the page and the journal's commit of the new mtime");
        d.write(f, 0, 100);
        d.sync(f);
        assert_eq!(d.served().writes, 14, "same tick: the page alone");
    }

    #[test]
    fn without_a_journal_the_inode_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let d = device(&["units=1", "write=1ms", "flush=1ms", "read=0"], Metadata::InPlace);
        let f = d.open(&dir.path().join("wal"));
        // A new file grows: the page and the inode.
        d.write(f, 0, PAGE);
        d.sync(f);
        assert_eq!(d.served(), Served { writes: 2, flushes: 1, written: 2 * PAGE });
        // Rewritten in the same tick: the page alone.
        d.write(f, 0, PAGE);
        let t = Instant::now();
        d.sync(f);
        assert!(t.elapsed() >= Duration::from_millis(2), "a write and a flush: {:?}", t.elapsed());
        assert_eq!(d.served().writes, 3);
        // A tick later: the page, then the inode after it, then the flush
        // (one unit: 1 + 1 + 1 ms).
        next_tick();
        d.write(f, 0, PAGE);
        let t = Instant::now();
        d.sync(f);
        assert!(t.elapsed() >= Duration::from_millis(3), "{:?}", t.elapsed());
        assert_eq!(d.served().writes, 5, "the page and the inode");
        assert_eq!(d.metadata(), Metadata::InPlace);
    }

    #[test]
    fn a_device_with_units_writes_back_side_by_side() {
        let dir = tempfile::tempdir().unwrap();
        let d = constant(&["units=4", "write=2ms", "flush=0"]);
        let f = d.open(&dir.path().join("x.db"));
        for i in 0..4 {
            d.write(f, i * 2 * PAGE, PAGE);
        }
        d.truncate(f, 8 * PAGE);
        d.sync(f);
        let t = Instant::now();
        for i in 0..4 {
            d.write(f, i * 2 * PAGE, PAGE);
        }
        d.sync(f);
        let took = t.elapsed();
        // Four separate pages on four units: 2 ms, not 8.
        assert!(took >= Duration::from_millis(2) && took < Duration::from_millis(6), "{took:?}");
    }
}
