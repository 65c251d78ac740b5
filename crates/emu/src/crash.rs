//! Crash points from a write journal ([`crate::journal`]): which states
//! the medium could be in had the power gone at some moment of a recorded
//! run, and the images of those states, made from the journal alone (a
//! sparse copy of a checkpoint image plus the journal's writes up to the
//! point), never by running the workload again.
//!
//! A crash point is a state and a time: every write the state holds was
//! received before the time, and a crash at that time could leave exactly
//! that state under the cache mode's rules. A commit acknowledged before
//! the time must be in the state. The journal is read the same way for
//! each cache mode, so one run serves all three:
//!
//! - [`CacheMode::Honest`] (a volatile write cache whose flushes drain it):
//!   after flush k, until flush k+1 drains, the cache may be lost whole
//!   ([`Shape::Dropped`]: the state flush k promised, timed just before
//!   flush k+1), in part ([`Shape::Partial`]: a random half of the 4 KiB
//!   pages written since flush k, each with its latest data), or with one
//!   write torn ([`Shape::Torn`]: a random subset of its 512-byte sectors).
//! - [`CacheMode::None`] (no volatile cache: a write is durable when
//!   answered): the state after flush k, timed before the next write
//!   arrives; every write up to a random one after it; that write torn.
//! - [`CacheMode::Lying`] (a cache that acknowledges flushes without
//!   draining, the model's `lie_on_flush`): flushes promise nothing; the
//!   model's background destage writes a block back within
//!   [`LYING_DESTAGE`] of its write, so a crash at time t keeps every write
//!   received before t − 2 s and loses the rest whole, in part, or torn.
//!
//! Not covered: a page's intermediate versions (a partial state holds a
//! page at its latest data in the interval or its data at flush k), and
//! reordering of writes with no volatile cache (the prefix order is the
//! order received).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::journal::{Entry, Journal, Kind};

/// The longest a block stays in the model's volatile cache without a
/// flush draining it (the daemon destages once a second what was cached
/// at the previous tick).
pub const LYING_DESTAGE: u64 = 2_000_000_000;

/// What the volatile cache holds or drops as one: the model's cache block.
const PAGE: u64 = crate::model::CACHE_BLOCK;
const SECTOR: u64 = 512;

/// How the device's cache treats data not yet flushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// A volatile write cache with honest flushes.
    Honest,
    /// A volatile write cache that acknowledges flushes and keeps the data.
    Lying,
    /// No volatile cache: a write is durable when answered.
    None,
}

impl CacheMode {
    /// Its name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Honest => "honest",
            CacheMode::Lying => "lying",
            CacheMode::None => "none",
        }
    }

    /// From its name.
    pub fn parse(s: &str) -> Option<CacheMode> {
        [CacheMode::Honest, CacheMode::Lying, CacheMode::None].into_iter().find(|m| m.name() == s)
    }
}

/// What the cache kept of the data since the last durable state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Nothing.
    Dropped,
    /// Some of it.
    Partial,
    /// One write, torn at sector granularity.
    Torn,
}

impl Shape {
    /// For display.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Dropped => "dropped",
            Shape::Partial => "partial",
            Shape::Torn => "torn",
        }
    }
}

/// One crash point of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// Its index in the run's list for the cache mode (reproduces it).
    pub index: usize,
    /// The flush it follows (0: the last before the run, 1: the run's first).
    pub flush: usize,
    /// What of the volatile data it keeps.
    pub shape: Shape,
    /// The moment of the crash (CLOCK_MONOTONIC ns): commits acknowledged
    /// before it must survive.
    pub t_ns: u64,
    /// Journal entries applied whole: `entries[..base]`.
    base: usize,
    /// Writes `entries[from..to]` of which a random half of the pages is kept.
    subset: Option<(usize, usize)>,
    /// A write applied torn.
    torn: Option<usize>,
}

/// splitmix64: the point's choices from its index, reproducibly.
fn mix(seed: u64, x: u64) -> u64 {
    let mut z = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ x.wrapping_add(0x632B_E59B_D9B4_E019);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Every crash point of the run between `start_ns` and `end_ns` under `mode`.
pub fn points(j: &Journal, mode: CacheMode, start_ns: u64, end_ns: u64) -> Vec<Point> {
    points_tearing(j, mode, start_ns, end_ns, None)
}

/// Byte ranges of the image, `(offset, length)`: where a database's data
/// pages are ([`file_extents`] of its data files), so torn points can tear
/// those writes only.
pub type Regions = [(u64, u64)];

/// `r` sorted by offset, overlapping and touching ranges merged.
fn merged(r: &Regions) -> Vec<(u64, u64)> {
    let mut v = r.to_vec();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (o, l) in v {
        match out.last_mut() {
            Some(last) if o <= last.0 + last.1 => last.1 = last.1.max(o + l - last.0),
            _ => out.push((o, l)),
        }
    }
    out
}

/// Whether a write of `len` bytes at `offset` lands in any of `r` (sorted, merged).
fn lands_in(r: &Regions, offset: u64, len: u64) -> bool {
    // The first range ending after the write's start: it lands if that one starts before its end.
    let i = r.partition_point(|&(o, l)| o + l <= offset);
    r.get(i).is_some_and(|&(o, _)| o < offset + len)
}

/// As [`points`]; with `pages`, only the [`Shape::Torn`] points, each
/// tearing a write that lands in `pages` (one per flush interval that
/// holds one): a data page torn, as a checkpoint's or the background
/// writer's page write cut by the power. The writes torn by plain points
/// are mostly the log's (its commits flush), which the log's own checksums
/// catch; a torn data page is caught only by the pages' checksums or the
/// log's full-page images.
pub fn points_tearing(
    j: &Journal,
    mode: CacheMode,
    start_ns: u64,
    end_ns: u64,
    pages: Option<&Regions>,
) -> Vec<Point> {
    let e = &j.entries;
    let only_torn = pages.is_some();
    let pages = pages.map(merged);
    let tears =
        |i: usize| e[i].len > SECTOR && pages.as_deref().is_none_or(|r| lands_in(r, e[i].offset, e[i].len));
    // The flushes of the run, after the last one before it: a crash early
    // in the run (or in a run that never flushes) leaves what that one promised.
    let before = (0..e.len()).rev().find(|&i| e[i].kind == Kind::Flush && e[i].t_ns < start_ns);
    let flushes: Vec<usize> = before
        .into_iter()
        .chain(
            (0..e.len())
                .filter(|&i| e[i].kind == Kind::Flush && e[i].t_ns >= start_ns && e[i].t_ns <= end_ns),
        )
        .collect();
    let mut out = Vec::new();
    for (k, &f) in flushes.iter().enumerate() {
        // The next flush (any, even after the run) bounds this interval.
        let next = (f + 1..e.len()).find(|&i| e[i].kind == Kind::Flush).unwrap_or(e.len());
        let t_next = e.get(next).map_or(end_ns, |x| x.t_ns.min(end_ns));
        let seed = out.len() as u64;
        let mut push = |shape, t_ns, base, subset, torn| {
            if only_torn && shape != Shape::Torn {
                return;
            }
            let index = out.len();
            out.push(Point { index, flush: k, shape, t_ns, base, subset, torn });
        };
        let writes: Vec<usize> = (f + 1..next).filter(|&i| e[i].kind == Kind::Write).collect();
        let tearable: Vec<usize> = writes.iter().copied().filter(|&i| tears(i)).collect();
        match mode {
            CacheMode::Honest => {
                push(Shape::Dropped, t_next, f + 1, None, None);
                if !writes.is_empty() {
                    push(Shape::Partial, t_next, f + 1, Some((f + 1, next)), None);
                }
                if !tearable.is_empty() {
                    let w = tearable[(mix(seed, 1) % tearable.len() as u64) as usize];
                    push(Shape::Torn, t_next, f + 1, None, Some(w));
                }
            }
            CacheMode::None => {
                let t0 = writes.first().map(|&w| e[w].t_ns).unwrap_or(t_next);
                push(Shape::Dropped, t0, f + 1, None, None);
                if !writes.is_empty() {
                    let m = writes[(mix(seed, 2) % writes.len() as u64) as usize];
                    let t = e.get(m + 1).map(|x| x.t_ns).unwrap_or(end_ns).min(t_next.max(e[m].t_ns));
                    push(Shape::Partial, t, m + 1, None, None);
                }
                if !tearable.is_empty() {
                    let w = tearable[(mix(seed, 3) % tearable.len() as u64) as usize];
                    push(Shape::Torn, e[w].t_ns, w, None, Some(w));
                }
            }
            CacheMode::Lying => {
                let t = t_next;
                let base = e.partition_point(|x| x.t_ns < t.saturating_sub(LYING_DESTAGE));
                let upto = e.partition_point(|x| x.t_ns < t);
                let volatile: Vec<usize> = (base..upto).filter(|&i| e[i].kind == Kind::Write).collect();
                push(Shape::Dropped, t, base, None, None);
                if !volatile.is_empty() {
                    push(Shape::Partial, t, base, Some((base, upto)), None);
                }
                let tear: Vec<usize> = volatile.into_iter().filter(|&i| tears(i)).collect();
                if !tear.is_empty() {
                    let w = tear[(mix(seed, 4) % tear.len() as u64) as usize];
                    push(Shape::Torn, t, base, None, Some(w));
                }
            }
        }
    }
    out
}

/// Where a file's data is on the block device under its filesystem
/// (`FS_IOC_FIEMAP`, after the file's dirty pages are written back so
/// each has its place): `(offset, length)` ranges, which on a medium are
/// the image's offsets too (its filesystem spans the whole device).
/// Extents with no known place (inline, delayed) are left out.
pub fn file_extents(path: &Path) -> std::io::Result<Vec<(u64, u64)>> {
    Ok(file_map(path)?.into_iter().map(|(_, physical, len)| (physical, len)).collect())
}

/// As [`file_extents`], each with its offset in the file too:
/// `(file offset, image offset, length)`.
pub fn file_map(path: &Path) -> std::io::Result<Vec<(u64, u64, u64)>> {
    // struct fiemap and struct fiemap_extent (linux/fiemap.h).
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Extent {
        logical: u64,
        physical: u64,
        length: u64,
        reserved64: [u64; 2],
        flags: u32,
        reserved: [u32; 3],
    }
    const COUNT: usize = 256;
    #[repr(C)]
    struct Fiemap {
        start: u64,
        length: u64,
        flags: u32,
        mapped: u32,
        count: u32,
        reserved: u32,
        extents: [Extent; COUNT],
    }
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FLAG_SYNC: u32 = 1;
    const LAST: u32 = 0x1;
    const UNKNOWN: u32 = 0x2 | 0x4 | 0x200; // unknown, delayed allocation, inline
    let f = File::open(path).map_err(|e| io("opening", path, e))?;
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        let mut m = Fiemap {
            start,
            length: u64::MAX - start,
            flags: FLAG_SYNC,
            mapped: 0,
            count: COUNT as u32,
            reserved: 0,
            extents: [Extent::default(); COUNT],
        };
        // SAFETY: FS_IOC_FIEMAP fills at most `count` extents of the struct we own.
        if unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP, &mut m as *mut Fiemap) } != 0 {
            return Err(io("mapping", path, std::io::Error::last_os_error()));
        }
        let got = &m.extents[..m.mapped as usize];
        out.extend(got.iter().filter(|x| x.flags & UNKNOWN == 0).map(|x| (x.logical, x.physical, x.length)));
        match got.last() {
            Some(x) if x.flags & LAST == 0 => start = x.logical + x.length,
            _ => return Ok(out),
        }
    }
}

/// `n` points spread evenly over `all` (one from the middle of each of `n`
/// equal strata); all of them when `n` is at least their number.
pub fn sample(all: &[Point], n: usize) -> Vec<Point> {
    if n >= all.len() {
        return all.to_vec();
    }
    let mut picked: Vec<usize> = (0..n).map(|i| ((2 * i + 1) * all.len()) / (2 * n)).collect();
    picked.dedup();
    picked.into_iter().map(|i| all[i]).collect()
}

/// Builds crash images: a checkpoint image brought forward through the
/// journal, copied (sparse, or a reflink where the host filesystem has
/// them) for each point, with the point's volatile writes laid on the copy.
pub struct Replayer {
    journal: Journal,
    checkpoint: PathBuf,
    file: File,
    applied: usize,
}

fn io(what: &str, p: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()))
}

impl Replayer {
    /// A replayer of `journal` whose checkpoint image is `checkpoint` (made, sparse).
    pub fn new(journal: Journal, checkpoint: &Path) -> std::io::Result<Replayer> {
        let file = File::create(checkpoint).map_err(|e| io("creating", checkpoint, e))?;
        file.set_len(journal.size)?;
        Ok(Replayer { journal, checkpoint: checkpoint.to_path_buf(), file, applied: 0 })
    }

    /// The journal.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    fn apply(&self, f: &File, e: &Entry, keep: impl Fn(u64) -> bool, unit: u64) -> std::io::Result<()> {
        match e.kind {
            Kind::Flush => Ok(()),
            Kind::Zero => {
                // SAFETY: fallocate on a file we own.
                let r = unsafe {
                    libc::fallocate(
                        f.as_raw_fd(),
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        e.offset as libc::off_t,
                        e.len as libc::off_t,
                    )
                };
                if r != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            }
            Kind::Write => {
                let data = self.journal.data(e)?;
                let end = e.offset + e.len;
                let mut at = e.offset;
                while at < end {
                    let piece_end = ((at / unit + 1) * unit).min(end);
                    if keep(at / unit) {
                        let d = &data[(at - e.offset) as usize..(piece_end - e.offset) as usize];
                        f.write_all_at(d, at)?;
                    }
                    at = piece_end;
                }
                Ok(())
            }
        }
    }

    /// Brings the checkpoint to `entries[..base]` (from the start if it is past it).
    fn advance(&mut self, base: usize) -> std::io::Result<()> {
        if base < self.applied {
            self.file.set_len(0)?;
            self.file.set_len(self.journal.size)?;
            self.applied = 0;
        }
        for i in self.applied..base {
            let e = self.journal.entries[i];
            self.apply(&self.file, &e, |_| true, PAGE)?;
        }
        self.applied = base;
        Ok(())
    }

    /// Makes point `p`'s image at `out` (a new file).
    pub fn materialise(&mut self, p: &Point, out: &Path) -> std::io::Result<()> {
        self.advance(p.base)?;
        // No fsync here or on the copy: the copy reads the checkpoint
        // through the page cache, and the point's loop device (buffered,
        // not direct I/O) reads the copy the same way. With the fsyncs a
        // point's copy took 0.49-0.62 s here, without 0.24 s; its writes
        // then reach the disk at the mount instead (0.04 → 0.2 s), so a
        // point gains 0.15-0.3 s in all (BENCHMARKS.md, 2026-11-28).
        let st = std::process::Command::new("cp")
            .args(["--sparse=always", "--reflink=auto"])
            .arg(&self.checkpoint)
            .arg(out)
            .status()
            .map_err(|e| io("copying", &self.checkpoint, e))?;
        if !st.success() {
            return Err(std::io::Error::other(format!(
                "cp {} {}: {st}",
                self.checkpoint.display(),
                out.display()
            )));
        }
        let f = std::fs::OpenOptions::new().write(true).open(out).map_err(|e| io("opening", out, e))?;
        for piece in kept(&self.journal, p) {
            let e = &self.journal.entries[piece.entry];
            let data = self.journal.data(e)?;
            f.write_all_at(&data[(piece.at - e.offset) as usize..(piece.end - e.offset) as usize], piece.at)?;
        }
        Ok(())
    }
}

/// A piece of a journal write that a point's image holds on top of
/// `entries[..base]`: bytes `at..end` of the image, from `entries[entry]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The write it comes from.
    pub entry: usize,
    /// Its first byte on the image.
    pub at: u64,
    /// Past its last byte.
    pub end: u64,
}

/// What point `p` keeps of the volatile writes, in the order laid on its
/// image: a random half of the pages of its subset (each page its latest
/// data), then the torn write's kept sectors. One function for the image
/// ([`Replayer::materialise`]) and for what reasons about it without one
/// ([`crate::walprefix`]), so both see the same bytes.
pub fn kept(j: &Journal, p: &Point) -> Vec<Piece> {
    let mut out = Vec::new();
    let seed = mix(p.index as u64, 0x5eed);
    let mut cut = |entry: usize, keep: &dyn Fn(u64) -> bool, unit: u64| {
        let e = &j.entries[entry];
        let end = e.offset + e.len;
        let mut at = e.offset;
        while at < end {
            let piece_end = ((at / unit + 1) * unit).min(end);
            if keep(at / unit) {
                out.push(Piece { entry, at, end: piece_end });
            }
            at = piece_end;
        }
    };
    if let Some((from, to)) = p.subset {
        for i in from..to {
            if j.entries[i].kind == Kind::Write {
                cut(i, &|page| mix(seed, page) & 1 == 1, PAGE);
            }
        }
    }
    if let Some(w) = p.torn {
        let e = j.entries[w];
        let (first, last) = (e.offset / SECTOR, (e.offset + e.len - 1) / SECTOR);
        let kept = |s: u64| mix(seed ^ 0x70e4, s) & 1 == 1;
        // Torn means some sectors and not all: the first is kept if none
        // would be, the last lost if all would be.
        let none = (first..=last).all(|s| !kept(s));
        let all = (first..=last).all(kept);
        cut(
            w,
            &|s| {
                if none {
                    s == first
                } else if all {
                    s != last
                } else {
                    kept(s)
                }
            },
            SECTOR,
        );
    }
    out
}

impl Point {
    /// Journal entries its image holds whole: `entries[..base()]`.
    pub fn base(&self) -> usize {
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Recorder;

    fn journal(dir: &Path) -> Journal {
        let p = dir.join("j");
        let r = Recorder::create(&p, 1 << 20).unwrap();
        r.write(0, &[1u8; 8192]).unwrap();
        r.flush().unwrap();
        r.write(8192, &[2u8; 8192]).unwrap();
        r.write(0, &[3u8; 4096]).unwrap();
        r.flush().unwrap();
        Journal::open(&p).unwrap()
    }

    fn image(rp: &mut Replayer, p: &Point, dir: &Path) -> Vec<u8> {
        let out = dir.join(format!("p{}", p.index));
        rp.materialise(p, &out).unwrap();
        let b = std::fs::read(&out).unwrap();
        std::fs::remove_file(out).unwrap();
        b
    }

    #[test]
    fn honest_points_hold_what_each_flush_promised() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        let all = points(&j, CacheMode::Honest, 0, u64::MAX);
        // Flush 0: dropped, partial, torn; flush 1 (nothing after it): dropped.
        let shapes: Vec<Shape> = all.iter().map(|p| p.shape).collect();
        assert_eq!(shapes, vec![Shape::Dropped, Shape::Partial, Shape::Torn, Shape::Dropped]);
        assert_eq!(all[0].t_ns, j.entries[4].t_ns, "dropped lasts until the next flush");
        let mut rp = Replayer::new(j, &dir.path().join("ck")).unwrap();
        let first = image(&mut rp, &all[0], dir.path());
        assert!(first[..8192].iter().all(|&b| b == 1) && first[8192..16384].iter().all(|&b| b == 0));
        let last = image(&mut rp, &all[3], dir.path());
        assert!(last[..4096].iter().all(|&b| b == 3) && last[8192..16384].iter().all(|&b| b == 2));
        // Going back rebuilds the checkpoint; the same index gives the same image.
        let torn = image(&mut rp, &all[2], dir.path());
        assert_eq!(torn, image(&mut rp, &all[2], dir.path()));
        let changed = torn.chunks(512).zip(first.chunks(512)).filter(|(a, b)| a != b).count();
        assert!(changed > 0 && changed < 16, "a torn write keeps some sectors, not all: {changed}");
    }

    #[test]
    fn a_lying_cache_keeps_nothing_recent() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        let all = points(&j, CacheMode::Lying, 0, u64::MAX);
        let mut rp = Replayer::new(j, &dir.path().join("ck")).unwrap();
        let img = image(&mut rp, &all[0], dir.path());
        assert!(img.iter().all(|&b| b == 0), "the flush promised nothing within the destage window");
    }

    #[test]
    fn a_run_without_flushes_is_held_to_the_flush_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        // A "run" after the last flush: no flush of its own.
        let start = j.entries[4].t_ns + 1;
        let all = points(&j, CacheMode::Honest, start, start + 1_000);
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].shape, all[0].t_ns), (Shape::Dropped, start + 1_000), "a crash at the run's end");
    }

    #[test]
    fn torn_page_points_tear_only_writes_in_the_pages() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        // The pages: the second 8 KiB only (flush 0's interval writes it and page 0).
        let pages = [(8192u64, 8192u64)];
        let all = points_tearing(&j, CacheMode::Honest, 0, u64::MAX, Some(&pages));
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!((all[0].shape, all[0].torn), (Shape::Torn, Some(2)), "the write at 8192 is torn");
        assert!(points_tearing(&j, CacheMode::Honest, 0, u64::MAX, Some(&[(1 << 19, 4096)])).is_empty());
    }

    #[test]
    fn a_write_lands_in_merged_regions() {
        let r = merged(&[(8192, 4096), (0, 4096), (4096, 100)]);
        assert_eq!(r, vec![(0, 4196), (8192, 4096)]);
        assert!(lands_in(&r, 4000, 512) && lands_in(&r, 8000, 512) && lands_in(&r, 12287, 1));
        assert!(!lands_in(&r, 4196, 3996) && !lands_in(&r, 12288, 512));
    }

    #[test]
    fn a_files_extents_hold_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![7u8; 64 << 10]).unwrap();
        let x = file_extents(&p).unwrap();
        assert_eq!(x.iter().map(|e| e.1).sum::<u64>(), 64 << 10, "{x:?}");
        assert!(x.iter().all(|e| e.0 > 0), "{x:?}");
    }

    #[test]
    fn a_sample_spreads_over_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        let all = points(&j, CacheMode::Honest, 0, u64::MAX);
        let s: Vec<usize> = sample(&all, 2).iter().map(|p| p.index).collect();
        assert_eq!(s, vec![1, 3]);
        assert_eq!(sample(&all, 10).len(), all.len());
    }
}
