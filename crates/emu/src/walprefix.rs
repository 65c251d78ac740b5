//! How much of a database's log each crash point's image holds intact,
//! read from the write journal without making the image: the reduction
//! that lets every crash point of a run be covered (`durability
//! --crash-points all`) without starting the engine on each.
//!
//! The log (PostgreSQL's WAL) is a byte sequence at positions (LSNs)
//! `lo..hi`, laid on the image by a [`LogMap`] (each segment file's
//! extents). Its *final* bytes are what the journal's last writes there
//! hold (up to a time after the run). A point's image holds the log
//! *intact up to* `X` when every byte `lo..X` on the image equals the final
//! byte at that position; `X` is the first position where they differ.
//! A record whose bytes all lie below `X` is the record the run wrote; one
//! reaching `X` or past it differs somewhere (its checksum fails, or the
//! page there is older or zero), and crash recovery stops before it. So the
//! records recovery replays on the image are the final log's records that
//! end at or below `X` — provided the log's readers stop at the first bad
//! record (PostgreSQL's does) and everything else on the image lets
//! recovery run at all, which [`Reading::other`] tells apart: points with the
//! same count of non-log writes (and none among their volatile pieces) have
//! the same non-log bytes, and differ in their log alone.
//!
//! Everything works on bytes: which writes land in the log, which of a
//! point's volatile pieces ([`crate::crash::kept`]: the same function the
//! image is made with) change it, and the comparison with the final bytes,
//! by 512-byte sector.

use std::collections::{BTreeSet, HashMap};

use crate::crash::{kept, Point};
use crate::journal::{Journal, Kind};

const SECTOR: u64 = 512;

/// Where a log lies on the image: pieces `(image offset, length, log position)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogMap {
    pieces: Vec<(u64, u64, u64)>,
}

impl LogMap {
    /// From pieces `(image offset, length, log position)` (any order; they must not overlap on the image).
    pub fn new(mut pieces: Vec<(u64, u64, u64)>) -> LogMap {
        pieces.retain(|p| p.1 > 0);
        pieces.sort_unstable();
        LogMap { pieces }
    }

    /// The pieces, sorted by image offset.
    pub fn pieces(&self) -> &[(u64, u64, u64)] {
        &self.pieces
    }

    /// The parts of image bytes `at..end` in the log: `(image offset, log position, length)`.
    fn overlaps(&self, at: u64, end: u64) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let i = self.pieces.partition_point(|&(o, l, _)| o + l <= at);
        self.pieces[i..].iter().take_while(move |&&(o, _, _)| o < end).map(move |&(o, l, pos)| {
            let (from, to) = (o.max(at), (o + l).min(end));
            (from, pos + (from - o), to - from)
        })
    }

    /// Whether every byte of `at..end` is in the log.
    fn covers(&self, at: u64, end: u64) -> bool {
        self.overlaps(at, end).map(|(_, _, l)| l).sum::<u64>() == end - at
    }
}

/// What [`Prefix::read`] says of one point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// The log is intact on the point's image up to this position.
    pub intact_to: u64,
    /// Writes or discards outside the log among the entries the image holds whole.
    pub other: usize,
    /// Whether the point's volatile pieces change anything outside the log.
    pub other_extra: bool,
}

/// The log's state on the image as the journal is replayed forward.
pub struct Prefix<'a> {
    j: &'a Journal,
    map: LogMap,
    lo: u64,
    hi: u64,
    want: Vec<u8>,
    have: Vec<u8>,
    /// Per sector of `lo..hi`: how many of its first bytes match.
    good: Vec<u16>,
    /// The sectors not wholly matching.
    short: BTreeSet<usize>,
    applied: usize,
    other: usize,
    log_only: Vec<bool>,
}

impl<'a> Prefix<'a> {
    /// The log at positions `lo..hi` of journal `j`, laid out by `map`;
    /// its final bytes are those the journal's entries up to time `until_ns` leave.
    pub fn new(j: &'a Journal, map: LogMap, lo: u64, hi: u64, until_ns: u64) -> std::io::Result<Prefix<'a>> {
        let n = (hi.saturating_sub(lo)) as usize;
        let log_only = j
            .entries
            .iter()
            .map(|e| e.kind == Kind::Write && e.len > 0 && map.covers(e.offset, e.offset + e.len))
            .collect();
        let sectors = n.div_ceil(SECTOR as usize);
        let mut p = Prefix {
            j,
            map,
            lo,
            hi: lo + n as u64,
            want: vec![0; n],
            have: vec![0; n],
            good: vec![0; sectors],
            short: BTreeSet::new(),
            applied: 0,
            other: 0,
            log_only,
        };
        for e in &j.entries {
            if e.t_ns > until_ns {
                break;
            }
            match e.kind {
                Kind::Write if p.touches(e.offset, e.offset + e.len) => {
                    let data = j.data(e)?;
                    Self::lay(&p.map, p.lo, p.hi, &mut p.want, e.offset, &data, e.offset, e.offset + e.len);
                }
                Kind::Zero => {
                    Self::lay(&p.map, p.lo, p.hi, &mut p.want, e.offset, &[], e.offset, e.offset + e.len)
                }
                _ => {}
            }
        }
        for s in 0..sectors {
            p.measure(s);
        }
        Ok(p)
    }

    fn touches(&self, at: u64, end: u64) -> bool {
        self.map.overlaps(at, end).any(|(_, pos, l)| pos < self.hi && pos + l > self.lo)
    }

    /// Lays image bytes `at..end` (of a write at `offset` with `data`; no data: zeros) on `buf`.
    #[allow(clippy::too_many_arguments)]
    fn lay(map: &LogMap, lo: u64, hi: u64, buf: &mut [u8], offset: u64, data: &[u8], at: u64, end: u64) {
        for (img, pos, len) in map.overlaps(at, end) {
            let (from, to) = (pos.max(lo), (pos + len).min(hi));
            if from >= to {
                continue;
            }
            let dst = &mut buf[(from - lo) as usize..(to - lo) as usize];
            if data.is_empty() {
                dst.fill(0);
            } else {
                let src = (img + (from - pos) - offset) as usize;
                dst.copy_from_slice(&data[src..src + dst.len()]);
            }
        }
    }

    /// The sectors of the log that image bytes `at..end` touch.
    fn sectors(&self, at: u64, end: u64) -> Vec<usize> {
        let mut v = Vec::new();
        for (_, pos, len) in self.map.overlaps(at, end) {
            let (from, to) = (pos.max(self.lo), (pos + len).min(self.hi));
            if from < to {
                v.extend(((from - self.lo) / SECTOR) as usize..=((to - 1 - self.lo) / SECTOR) as usize);
            }
        }
        v
    }

    fn measure(&mut self, s: usize) {
        let from = s * SECTOR as usize;
        let to = (from + SECTOR as usize).min(self.want.len());
        let (h, w) = (&self.have[from..to], &self.want[from..to]);
        let same = h.iter().zip(w).take_while(|(a, b)| a == b).count();
        self.good[s] = same as u16;
        if same == to - from {
            self.short.remove(&s);
        } else {
            self.short.insert(s);
        }
    }

    fn apply_entry(&mut self, i: usize) -> std::io::Result<()> {
        let e = self.j.entries[i];
        if e.kind == Kind::Flush {
            return Ok(());
        }
        if !self.log_only[i] {
            self.other += 1;
        }
        if !self.touches(e.offset, e.offset + e.len) {
            return Ok(());
        }
        let data = if e.kind == Kind::Write { self.j.data(&e)? } else { Vec::new() };
        Self::lay(&self.map, self.lo, self.hi, &mut self.have, e.offset, &data, e.offset, e.offset + e.len);
        for s in self.sectors(e.offset, e.offset + e.len) {
            self.measure(s);
        }
        Ok(())
    }

    fn intact_to(&self) -> u64 {
        match self.short.first() {
            Some(&s) => self.lo + s as u64 * SECTOR + self.good[s] as u64,
            None => self.hi,
        }
    }

    /// Point `p`: how far its image holds the log intact, and what it
    /// holds outside the log. Points read in order of their base are read
    /// in one pass; going back replays from the start.
    pub fn read(&mut self, p: &Point) -> std::io::Result<Reading> {
        if p.base() < self.applied {
            self.have.fill(0);
            self.applied = 0;
            self.other = 0;
            for s in 0..self.good.len() {
                self.measure(s);
            }
        }
        while self.applied < p.base() {
            self.apply_entry(self.applied)?;
            self.applied += 1;
        }
        let pieces = kept(self.j, p);
        let other_extra = pieces.iter().any(|x| !self.map.covers(x.at, x.end));
        let mine: Vec<_> = pieces.into_iter().filter(|x| self.touches(x.at, x.end)).collect();
        if mine.is_empty() {
            return Ok(Reading { intact_to: self.intact_to(), other: self.other, other_extra });
        }
        // Lay the pieces on the state, read, and put the state back.
        let mut saved: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut data: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut touched: Vec<usize> = Vec::new();
        for x in &mine {
            let e = self.j.entries[x.entry];
            if let std::collections::hash_map::Entry::Vacant(v) = data.entry(x.entry) {
                v.insert(self.j.data(&e)?);
            }
            for s in self.sectors(x.at, x.end) {
                let from = s * SECTOR as usize;
                let to = (from + SECTOR as usize).min(self.have.len());
                saved.push((s, self.have[from..to].to_vec()));
                touched.push(s);
            }
            Self::lay(&self.map, self.lo, self.hi, &mut self.have, e.offset, &data[&x.entry], x.at, x.end);
        }
        touched.sort_unstable();
        touched.dedup();
        for &s in &touched {
            self.measure(s);
        }
        let r = Reading { intact_to: self.intact_to(), other: self.other, other_extra };
        for (s, bytes) in saved.into_iter().rev() {
            let from = s * SECTOR as usize;
            self.have[from..from + bytes.len()].copy_from_slice(&bytes);
        }
        for &s in &touched {
            self.measure(s);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::{points, CacheMode, Shape};
    use crate::journal::Recorder;

    /// A log of 3 sectors at image offset 1 MiB (positions 1000..2536),
    /// written as a database appends to its last page, and a data file at 0.
    fn run(dir: &std::path::Path) -> (Journal, LogMap) {
        let p = dir.join("j");
        let r = Recorder::create(&p, 4 << 20).unwrap();
        let log = 1 << 20;
        let mut page = vec![0u8; 1536];
        // Flush 0: the log's first 100 bytes.
        page[..100].fill(1);
        r.write(log, &page).unwrap();
        r.flush().unwrap();
        // Flush 1: 700 bytes (over a sector's end), and a data page.
        page[100..700].fill(2);
        r.write(log, &page).unwrap();
        r.write(0, &[9u8; 4096]).unwrap();
        r.flush().unwrap();
        // Flush 2: the rest.
        page[700..].fill(3);
        r.write(log, &page).unwrap();
        r.flush().unwrap();
        (Journal::open(&p).unwrap(), LogMap::new(vec![(log, 1536, 1000)]))
    }

    #[test]
    fn each_point_holds_the_log_to_its_last_flush() {
        let dir = tempfile::tempdir().unwrap();
        let (j, map) = run(dir.path());
        let all = points(&j, CacheMode::Honest, 0, u64::MAX);
        let mut pre = Prefix::new(&j, map, 1000, 2536, u64::MAX).unwrap();
        let dropped: Vec<Reading> =
            all.iter().filter(|p| p.shape == Shape::Dropped).map(|p| pre.read(p).unwrap()).collect();
        // Flush 0 promised 100 bytes, flush 1 700, flush 2 all; the data
        // page (outside the log) counts from flush 1 on.
        let ends: Vec<u64> = dropped.iter().map(|r| r.intact_to).collect();
        assert_eq!(ends, vec![1100, 1700, 2536], "{dropped:?}");
        let other: Vec<usize> = dropped.iter().map(|r| r.other).collect();
        assert_eq!(other, vec![0, 1, 1]);
        // A partial point after flush 0 keeps pages of both writes: the data
        // page is outside the log; the log is intact to at least flush 0's end.
        let partial = all.iter().find(|p| p.shape == Shape::Partial && p.flush == 1).unwrap();
        let r = pre.read(partial).unwrap();
        assert!(r.intact_to >= 1100, "{r:?}");
        // Reading again (backwards) gives the same.
        assert_eq!(pre.read(&all[0]).unwrap(), dropped[0]);
        assert_eq!(pre.read(partial).unwrap(), r);
    }

    #[test]
    fn a_torn_log_write_ends_the_intact_log_at_its_first_lost_sector() {
        let dir = tempfile::tempdir().unwrap();
        let (j, map) = run(dir.path());
        let all = points(&j, CacheMode::Honest, 0, u64::MAX);
        let mut pre = Prefix::new(&j, map, 1000, 2536, u64::MAX).unwrap();
        for p in all.iter().filter(|p| p.shape == Shape::Torn) {
            let r = pre.read(p).unwrap();
            let drop = all.iter().find(|d| d.flush == p.flush && d.shape == Shape::Dropped).unwrap();
            let base = pre.read(drop).unwrap().intact_to;
            // Never below what the flush promised, and a sector bound or the log's end past it.
            assert!(r.intact_to >= base, "{p:?} {r:?}");
            assert!(
                r.intact_to == base || (r.intact_to - 1000).is_multiple_of(512) || r.intact_to == 2536,
                "{r:?}"
            );
        }
    }

    #[test]
    fn a_lying_cache_holds_less_log_than_an_honest_one() {
        let dir = tempfile::tempdir().unwrap();
        let (j, map) = run(dir.path());
        let lying = points(&j, CacheMode::Lying, 0, u64::MAX);
        let mut pre = Prefix::new(&j, map, 1000, 2536, u64::MAX).unwrap();
        let r = pre.read(lying.iter().find(|p| p.shape == Shape::Dropped).unwrap()).unwrap();
        assert_eq!(r.intact_to, 1000, "nothing written within the destage window is kept");
    }
}
