//! A hard disk: service time = command overhead + seek + rotational wait +
//! media transfer (Ruemmler & Wilkes, "An introduction to disk drive
//! modeling", 1994), with an optional volatile write cache that a flush
//! drains and command queueing (NCQ) that serves the queued request with the
//! shortest positioning time first, which is how random IOPS rises with
//! queue depth.
//!
//! Geometry, kept simple and written down so a script can recompute it:
//! - the disk spans the full stroke; a byte offset's radial position is
//!   `offset / capacity` (0 = outer edge), where `capacity` is the whole
//!   disk's (`disk_size`) when the medium stands for a slice of it (a
//!   partition at its outer edge: a 3 GB medium for a database on a 1 TB
//!   disk seeks over 0.3 % of the stroke, as the database on the disk
//!   did), else the medium's;
//! - seek over a fraction `d` of the stroke: 0 for d = 0; short seeks grow as
//!   √d, `t2t + (avg - t2t)·√(3d)` up to d = 1/3 (the mean distance of a
//!   random seek, where a datasheet's average seek applies); long seeks are
//!   linear, `avg + (full - avg)·(d - 1/3)/(2/3)`, reaching the full-stroke
//!   time at d = 1;
//! - a sector's angle is `frac(offset / track_bytes)` with `track_bytes =
//!   outer_rate · rev`; the platter's angle at time t is `frac(t / rev)`,
//!   so the rotational wait is the angle still to turn after the seek;
//! - the transfer rate falls linearly from `outer_rate` at offset 0 to
//!   `inner_rate` at the end (zoned recording);
//! - a read that starts where the last transfer ended pays transfer only
//!   (the drive's track buffer and read-ahead keep streaming); so does a
//!   platter write queued behind it (it arrives within the command
//!   overhead, which the drive overlaps with the transfer). A write that
//!   arrives later has missed its sector, which passed under the head when
//!   the last transfer ended, and waits for it to come round: one
//!   revolution less the pause. With the write cache off this is what
//!   bounds a log's commits to about one per revolution (120/s at 7,200
//!   rpm), the classic figure `pg_test_fsync` shows on such a disk.

use std::time::Duration;

use super::{
    cache_from, xfer, Builtin, Kind, ModelError, Op, Param, Params, Req, State, VolatileCache, CACHE_BLOCK,
};

pub(crate) const HDD: Builtin = Builtin {
    name: "hdd",
    about: "a 7,200 rpm desktop disk: seek curve, rotation, zoned transfer, 32 MB write cache, NCQ",
    params: &[
        Param { key: "rpm", default: "7200", kind: Kind::Int, doc: "spindle speed; half a revolution is the mean rotational wait (4.17 ms at 7,200)" },
        Param { key: "avg_seek", default: "8.5ms", kind: Kind::Dur, doc: "seek over 1/3 of the stroke (the mean random seek); desktop 7,200 rpm datasheets give 8.5 ms for reads" },
        Param { key: "track_to_track", default: "1ms", kind: Kind::Dur, doc: "the shortest seek; datasheets give about 1 ms" },
        Param { key: "full_stroke", default: "16ms", kind: Kind::Dur, doc: "seek across the whole stroke; datasheets that quote it give about twice the average" },
        Param { key: "overhead", default: "0.1ms", kind: Kind::Dur, doc: "controller time per command (Ruemmler & Wilkes measured ~1 ms on 1990s drives; current SATA drives are near 0.1 ms)" },
        Param { key: "outer_rate", default: "200MB/s", kind: Kind::Rate, doc: "media rate at the outer edge (offset 0); 2-4 TB 7,200 rpm datasheets give 180-210 MB/s sustained" },
        Param { key: "inner_rate", default: "100MB/s", kind: Kind::Rate, doc: "media rate at the inner edge (zoned recording: about half the outer)" },
        Param { key: "interface_rate", default: "600MB/s", kind: Kind::Rate, doc: "host interface (SATA 6 Gb/s after 8b/10b coding): cache hits move at this rate" },
        Param { key: "write_cache", default: "true", kind: Kind::Bool, doc: "volatile write cache on (the default of desktop drives): writes are acknowledged from DRAM, a flush destages them" },
        Param { key: "cache_size", default: "32M", kind: Kind::Size, doc: "bytes of dirty data the cache holds before a write must wait for destaging (drives carry 64-256 MB of DRAM)" },
        Param { key: "lie_on_flush", default: "false", kind: Kind::Bool, doc: "acknowledge a flush without destaging (as some consumer drives did): a power cut then loses acknowledged writes" },
        Param { key: "ncq_depth", default: "32", kind: Kind::Int, doc: "queued commands the drive reorders among (SATA NCQ has 32 tags); 1 serves in arrival order" },
        Param { key: "disk_size", default: "0", kind: Kind::Size, doc: "the whole disk's capacity (its data sheet's) when the medium is a slice of it at the outer edge: seeks and zones span the disk, not the medium; 0: the medium is the whole disk" },
    ],
};

/// A 15,000 rpm enterprise SAS disk, from the Seagate Cheetah 15K.7 data
/// sheet (ST3600057SS and siblings, publication 100516571): the disk S3's
/// RAID 5 and most 2010s SAN shelves were built of.
pub(crate) const HDD_15K: Builtin = Builtin {
    name: "hdd-15k",
    about: "a 15,000 rpm SAS disk (Seagate Cheetah 15K.7 data sheet): 3.4 ms seeks, 2 ms rotation, 122-204 MB/s; cache off behind a RAID controller",
    params: &[
        Param { key: "rpm", default: "15000", kind: Kind::Int, doc: "Cheetah 15K.7 data sheet: 15,000 rpm, average latency 2.0 ms (half a revolution)" },
        Param { key: "avg_seek", default: "3.4ms", kind: Kind::Dur, doc: "Cheetah 15K.7 data sheet: average seek, read 3.4 ms (write 3.9 ms)" },
        Param { key: "track_to_track", default: "0.2ms", kind: Kind::Dur, doc: "Cheetah 15K.7 data sheet: single-track seek, read 0.2 ms (write 0.44 ms)" },
        Param { key: "full_stroke", default: "7ms", kind: Kind::Dur, doc: "not on the data sheet: about twice the average, as for the 7,200 rpm model" },
        Param { key: "overhead", default: "0.1ms", kind: Kind::Dur, doc: "controller time per command (as the 7,200 rpm model; not on the data sheet)" },
        Param { key: "outer_rate", default: "204MB/s", kind: Kind::Rate, doc: "Cheetah 15K.7 data sheet: sustained transfer rate 122 to 204 MB/s (outer zone)" },
        Param { key: "inner_rate", default: "122MB/s", kind: Kind::Rate, doc: "Cheetah 15K.7 data sheet: sustained transfer rate 122 to 204 MB/s (inner zone)" },
        Param { key: "interface_rate", default: "600MB/s", kind: Kind::Rate, doc: "SAS 6 Gb/s after 8b/10b coding" },
        Param { key: "write_cache", default: "false", kind: Kind::Bool, doc: "off: RAID controllers disable member disks' volatile caches (the data sheet's drive has 16 MB)" },
        Param { key: "cache_size", default: "16M", kind: Kind::Size, doc: "Cheetah 15K.7 data sheet: 16 MB cache, if write_cache is turned on" },
        Param { key: "lie_on_flush", default: "false", kind: Kind::Bool, doc: "acknowledge a flush without destaging" },
        Param { key: "ncq_depth", default: "32", kind: Kind::Int, doc: "queued commands the drive reorders among (not inside an array, whose members serve in order)" },
        Param { key: "disk_size", default: "0", kind: Kind::Size, doc: "the whole disk's capacity (its data sheet's) when the medium is a slice of it at the outer edge: seeks and zones span the disk, not the medium; 0: the medium is the whole disk" },
    ],
};

/// A hard disk model.
#[derive(Clone, Debug)]
pub struct Hdd {
    /// Bytes the stroke spans (the disk's size, or the medium's).
    pub capacity: u64,
    /// One revolution.
    pub rev: Duration,
    /// Shortest seek.
    pub track_to_track: Duration,
    /// Seek over a third of the stroke.
    pub avg_seek: Duration,
    /// Seek over the whole stroke.
    pub full_stroke: Duration,
    /// Controller time per command.
    pub overhead: Duration,
    /// Media rate at offset 0, bytes/s.
    pub outer_rate: f64,
    /// Media rate at the end, bytes/s.
    pub inner_rate: f64,
    /// Host interface rate, bytes/s.
    pub interface_rate: f64,
    /// Volatile write cache, if on.
    pub cache: Option<VolatileCache>,
    /// Commands reordered among.
    pub ncq_depth: usize,
}

impl Hdd {
    pub(crate) fn from_params(p: &Params, capacity: u64) -> Result<Hdd, ModelError> {
        let rpm = p.int("rpm");
        if !(1000..=20000).contains(&rpm) {
            return Err(p.bad("rpm", "give 1000 to 20000"));
        }
        let h = Hdd {
            capacity: capacity.max(p.size("disk_size")).max(1),
            rev: Duration::from_nanos((60e9 / rpm as f64).round() as u64),
            track_to_track: p.dur("track_to_track"),
            avg_seek: p.dur("avg_seek"),
            full_stroke: p.dur("full_stroke"),
            overhead: p.dur("overhead"),
            outer_rate: p.rate("outer_rate"),
            inner_rate: p.rate("inner_rate"),
            interface_rate: p.rate("interface_rate"),
            cache: cache_from(p)?,
            ncq_depth: p.int("ncq_depth").max(1) as usize,
        };
        if !(h.track_to_track <= h.avg_seek && h.avg_seek <= h.full_stroke) {
            return Err(p.bad("avg_seek", "track_to_track ≤ avg_seek ≤ full_stroke must hold"));
        }
        Ok(h)
    }

    /// Seek time between two byte offsets.
    pub fn seek(&self, from: u64, to: u64) -> Duration {
        if from == to {
            return Duration::ZERO;
        }
        let d = (from.abs_diff(to) as f64 / self.capacity as f64).min(1.0);
        let (t2t, avg, full) =
            (self.track_to_track.as_secs_f64(), self.avg_seek.as_secs_f64(), self.full_stroke.as_secs_f64());
        let s = if d <= 1.0 / 3.0 {
            t2t + (avg - t2t) * (3.0 * d).sqrt()
        } else {
            avg + (full - avg) * (d - 1.0 / 3.0) * 1.5
        };
        Duration::from_secs_f64(s)
    }

    /// Media rate at an offset, bytes/s.
    pub fn rate_at(&self, offset: u64) -> f64 {
        let f = (offset as f64 / self.capacity as f64).min(1.0);
        self.outer_rate - (self.outer_rate - self.inner_rate) * f
    }

    fn track_bytes(&self) -> f64 {
        self.outer_rate * self.rev.as_secs_f64()
    }

    /// Rotational wait for `offset` when the head settles at `t_ns`.
    pub fn rotation(&self, offset: u64, t_ns: u64) -> Duration {
        let rev = self.rev.as_nanos() as u64;
        let target = (offset as f64 / self.track_bytes()).fract();
        let now = (t_ns % rev) as f64 / rev as f64;
        let turn = (target - now).rem_euclid(1.0);
        Duration::from_nanos((turn * rev as f64).round() as u64)
    }

    /// Seek plus rotational wait to reach `offset` starting at `t_ns`
    /// (zero for a read continuing the last transfer, see the module's
    /// notes for a write).
    fn positioning(&self, offset: u64, write: bool, st: &State, t_ns: u64) -> Duration {
        if st.last_end == Some(offset) {
            let pause = t_ns.saturating_sub(st.last_end_ns);
            let rev = self.rev.as_nanos() as u64;
            if !write || pause <= self.overhead.as_nanos() as u64 || rev == 0 {
                return Duration::ZERO;
            }
            return Duration::from_nanos(rev - pause % rev);
        }
        let seek = self.seek(st.head, offset);
        seek + self.rotation(offset, t_ns + seek.as_nanos() as u64)
    }

    /// Reads or writes the platter: positioning + transfer, from `t_ns`.
    fn media(&self, offset: u64, len: u64, write: bool, st: &mut State, t_ns: u64) -> Duration {
        let d = self.positioning(offset, write, st, t_ns) + xfer(len, self.rate_at(offset));
        st.head = offset + len;
        st.last_end = Some(offset + len);
        st.last_end_ns = t_ns + d.as_nanos() as u64;
        d
    }

    /// Writes every dirty block to the platter, in one ascending sweep from
    /// the head (C-LOOK), merging adjacent blocks; empties the cache.
    fn destage(&self, st: &mut State, t_ns: u64) -> Duration {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &b in &st.dirty {
            match runs.last_mut() {
                Some((start, n)) if *start + *n == b => *n += 1,
                _ => runs.push((b, 1)),
            }
        }
        st.dirty.clear();
        let head_block = st.head / CACHE_BLOCK;
        let first = runs.iter().position(|(s, _)| *s >= head_block).unwrap_or(0);
        runs.rotate_left(first);
        let mut total = Duration::ZERO;
        for (b, n) in runs {
            total += self.media(b * CACHE_BLOCK, n * CACHE_BLOCK, true, st, t_ns + total.as_nanos() as u64);
        }
        total
    }

    pub(crate) fn service_time(&self, r: &Req, st: &mut State, start_ns: u64) -> Duration {
        let t = start_ns + self.overhead.as_nanos() as u64;
        let body = match r.op {
            Op::Read if st.all_dirty(r.offset, r.len) => xfer(r.len, self.interface_rate),
            Op::Read => self.media(r.offset, r.len, false, st, t),
            Op::Write => match self.cache {
                Some(c) => {
                    let new = super::blocks(r.offset, r.len).filter(|b| !st.dirty.contains(b)).count() as u64;
                    let mut d = Duration::ZERO;
                    if st.dirty_bytes() + new * CACHE_BLOCK > c.capacity {
                        d += self.destage(st, t);
                    }
                    st.mark_dirty(r.offset, r.len);
                    d + xfer(r.len, self.interface_rate)
                }
                None => self.media(r.offset, r.len, true, st, t),
            },
            Op::Flush => match self.cache {
                Some(c) if !c.lie_on_flush => self.destage(st, t),
                _ => Duration::ZERO,
            },
            Op::Discard => {
                for b in super::blocks(r.offset, r.len) {
                    st.dirty.remove(&b);
                }
                Duration::ZERO
            }
        };
        self.overhead + body
    }

    /// NCQ: the queued request with the shortest positioning time; requests
    /// the cache answers count as zero. A flush is not reordered: requests
    /// queued after it wait for it.
    pub(crate) fn pick(&self, queue: &[Req], st: &State, start_ns: u64) -> usize {
        let t = start_ns + self.overhead.as_nanos() as u64;
        let mut best = (0, Duration::MAX);
        for (i, r) in queue.iter().enumerate() {
            let cost = match r.op {
                Op::Flush => {
                    if i == 0 {
                        return 0;
                    }
                    break;
                }
                Op::Read if st.all_dirty(r.offset, r.len) => Duration::ZERO,
                Op::Write if self.cache.is_some() => Duration::ZERO,
                Op::Discard => Duration::ZERO,
                _ => self.positioning(r.offset, r.op == Op::Write, st, t),
            };
            if cost < best.1 {
                best = (i, cost);
            }
        }
        best.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Model, Spec};
    use super::*;

    const GIB: u64 = 1 << 30;

    fn hdd(sets: &[&str]) -> Hdd {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        match Spec::parse("hdd", &sets).unwrap().build(8 * GIB).unwrap() {
            Model::Hdd(h) => h,
            _ => unreachable!(),
        }
    }

    /// A small deterministic generator for test offsets.
    fn lcg(x: &mut u64) -> u64 {
        *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *x >> 33
    }

    #[test]
    fn the_seek_curve_meets_its_datasheet_points() {
        let h = hdd(&[]);
        assert_eq!(h.rev, Duration::from_nanos(8_333_333));
        assert_eq!(h.seek(100, 100), Duration::ZERO);
        let third = 8 * GIB / 3;
        assert!((h.seek(0, third).as_secs_f64() - 0.0085).abs() < 1e-6);
        assert!((h.seek(0, 8 * GIB).as_secs_f64() - 0.016).abs() < 1e-6);
        // √ for short seeks: a twelfth of the stroke is half-way in √ terms.
        let twelfth = 8 * GIB / 12;
        assert!((h.seek(0, twelfth).as_secs_f64() - (0.001 + 0.0075 * 0.5)).abs() < 1e-6);
        // Continuous at the knee, monotonic.
        assert!(h.seek(0, third + 4096) >= h.seek(0, third));
    }

    #[test]
    fn rotation_waits_for_the_sector() {
        let h = hdd(&[]);
        // Sector at angle 0, platter at angle 0: no wait; a quarter turn late: ¾ revolution.
        assert_eq!(h.rotation(0, 0), Duration::ZERO);
        let quarter = h.rev.as_nanos() as u64 / 4;
        let w = h.rotation(0, quarter).as_secs_f64();
        assert!((w - 0.75 * h.rev.as_secs_f64()).abs() < 1e-6, "{w}");
    }

    #[test]
    fn random_reads_at_qd1_average_overhead_seek_half_rev_and_transfer() {
        let h = hdd(&[]);
        let mut st = State::default();
        let (mut x, mut t, n) = (7u64, 0u64, 20_000);
        let (mut sum, mut seek_sum) = (0.0, 0.0);
        for _ in 0..n {
            let off = (lcg(&mut x) % (2 * GIB)) * 4096 % (8 * GIB);
            seek_sum += h.seek(st.head, off).as_secs_f64();
            let d = h.service_time(&Req { op: Op::Read, offset: off, len: 4096 }, &mut st, t);
            // The host takes ~100 µs between requests, at a random phase.
            t += d.as_nanos() as u64 + 100_000 + lcg(&mut x) % 1_000_000;
            sum += d.as_secs_f64();
        }
        let mean = sum / n as f64;
        let expect = 0.0001 + seek_sum / n as f64 + h.rev.as_secs_f64() / 2.0 + 4096.0 / 150e6;
        assert!((mean - expect).abs() / expect < 0.03, "mean {mean} expected {expect}");
        // About 12.6 ms: ~80 IOPS, as 7,200 rpm disks do at QD1.
        assert!((0.0115..0.0135).contains(&mean), "{mean}");
    }

    #[test]
    fn sequential_requests_pay_transfer_only() {
        let h = hdd(&[]);
        let mut st = State { head: 0, last_end: Some(1 << 20), ..State::default() };
        let d = h.service_time(&Req { op: Op::Read, offset: 1 << 20, len: 1 << 20 }, &mut st, 12345);
        let expect = h.overhead + xfer(1 << 20, h.rate_at(1 << 20));
        assert_eq!(d, expect);
    }

    /// With the cache off, a log's next write after a pause (a commit's
    /// fsync round trip) has missed its sector and waits a revolution less
    /// the pause; one queued behind the last streams on.
    #[test]
    fn a_sequential_write_after_a_pause_waits_for_its_sector() {
        let h = hdd(&["write_cache=false"]);
        let rev = h.rev.as_nanos() as u64;
        let mut st = State::default();
        let w = |st: &mut State, off: u64, t: u64| {
            h.service_time(&Req { op: Op::Write, offset: off, len: 8192 }, st, t)
        };
        let first = w(&mut st, 0, 0);
        let done = first.as_nanos() as u64;
        // Queued: the next write starts as the last completes.
        let queued = w(&mut st, 8192, done);
        assert_eq!(queued, h.overhead + xfer(8192, h.rate_at(8192)));
        // After a 300 µs pause: a revolution less the pause and the overhead.
        let t = done + queued.as_nanos() as u64 + 300_000;
        let paused = w(&mut st, 16384, t);
        let wait = rev - (300_000 + h.overhead.as_nanos() as u64);
        assert_eq!(paused, h.overhead + Duration::from_nanos(wait) + xfer(8192, h.rate_at(16384)));
        // So a one-at-a-time log commits about once a revolution: 120/s.
        let (mut t, mut n) = (0u64, 0);
        let mut st = State::default();
        while t < 1_000_000_000 {
            t += w(&mut st, n * 8192, t).as_nanos() as u64 + 50_000;
            n += 1;
        }
        assert!((100..=125).contains(&n), "{n} commits in a second");
        // A read continuing the last transfer still streams (read-ahead).
        let r = h.service_time(&Req { op: Op::Read, offset: n * 8192, len: 8192 }, &mut st, t + 5_000_000);
        assert_eq!(r, h.overhead + xfer(8192, h.rate_at(n * 8192)));
    }

    #[test]
    fn a_flush_drains_the_write_cache_and_costs_the_destage() {
        let h = hdd(&[]);
        let mut st = State::default();
        let w = h.service_time(&Req { op: Op::Write, offset: 4 * GIB, len: 8192 }, &mut st, 0);
        assert_eq!(w, h.overhead + xfer(8192, 600e6));
        assert_eq!(st.dirty_bytes(), 8192);
        // A read of what is cached is a cache hit.
        let r = h.service_time(&Req { op: Op::Read, offset: 4 * GIB, len: 4096 }, &mut st, 0);
        assert_eq!(r, h.overhead + xfer(4096, 600e6));
        let start = 1_000_000;
        let f = h.service_time(&Req { op: Op::Flush, offset: 0, len: 0 }, &mut st, start);
        let t = start + h.overhead.as_nanos() as u64;
        let seek = h.seek(0, 4 * GIB);
        let expect = h.overhead
            + seek
            + h.rotation(4 * GIB, t + seek.as_nanos() as u64)
            + xfer(8192, h.rate_at(4 * GIB));
        assert_eq!(f, expect);
        assert_eq!(st.dirty_bytes(), 0);
        assert_eq!(st.head, 4 * GIB + 8192);
        // Nothing dirty: a flush costs the command overhead.
        assert_eq!(h.service_time(&Req { op: Op::Flush, offset: 0, len: 0 }, &mut st, 0), h.overhead);
    }

    #[test]
    fn a_lying_drive_acknowledges_flushes_and_keeps_the_data_volatile() {
        let h = hdd(&["lie_on_flush=true"]);
        let mut st = State::default();
        h.service_time(&Req { op: Op::Write, offset: GIB, len: 4096 }, &mut st, 0);
        assert_eq!(h.service_time(&Req { op: Op::Flush, offset: 0, len: 0 }, &mut st, 0), h.overhead);
        assert_eq!(st.dirty_bytes(), 4096);
    }

    #[test]
    fn without_a_write_cache_writes_go_to_the_platter() {
        let h = hdd(&["write_cache=false"]);
        let mut st = State::default();
        let d = h.service_time(&Req { op: Op::Write, offset: 2 * GIB, len: 4096 }, &mut st, 0);
        assert!(d > Duration::from_millis(1), "{d:?}");
        assert!(st.dirty.is_empty());
    }

    /// A closed loop: `qd` requests always outstanding, one actuator.
    fn iops(h: &Hdd, qd: usize) -> f64 {
        let mut st = State::default();
        let mut x = 99u64;
        let mut next =
            || Req { op: Op::Read, offset: (lcg(&mut x) % (2 * GIB)) * 4096 % (8 * GIB), len: 4096 };
        let mut q: Vec<Req> = (0..qd).map(|_| next()).collect();
        let (mut t, n) = (0u64, 5000);
        for _ in 0..n {
            let w = q.len().min(h.ncq_depth);
            let i = h.pick(&q[..w], &st, t);
            let r = q.remove(i);
            t += h.service_time(&r, &mut st, t).as_nanos() as u64;
            q.push(next());
        }
        n as f64 / (t as f64 / 1e9)
    }

    #[test]
    fn ncq_raises_random_iops_with_queue_depth() {
        let h = hdd(&[]);
        let (q1, q4, q32) = (iops(&h, 1), iops(&h, 4), iops(&h, 32));
        assert!((75.0..90.0).contains(&q1), "{q1}");
        assert!(q4 > 1.4 * q1, "{q1} {q4}");
        // ~190 at QD32: what 7,200 rpm disks with NCQ reach on 4k random reads.
        assert!((170.0..230.0).contains(&q32), "{q1} {q32}");
        // Without NCQ, depth buys nothing.
        let fifo = hdd(&["ncq_depth=1"]);
        assert!((iops(&fifo, 32) / q1 - 1.0).abs() < 0.05);
    }

    /// A medium that is a slice of a larger disk seeks over the slice's
    /// share of the stroke: random reads over an 8 GiB medium of a 1 TiB
    /// disk pay about track-to-track plus rotation, not the average seek.
    #[test]
    fn a_slice_of_a_large_disk_seeks_over_its_own_span() {
        let whole = hdd(&[]);
        let slice = hdd(&["disk_size=1T"]);
        assert_eq!(slice.capacity, 1 << 40);
        assert_eq!(hdd(&["disk_size=1G"]).capacity, 8 * GIB, "a disk smaller than the medium is the medium");
        let (w, s) = (iops(&whole, 1), iops(&slice, 1));
        // Whole: 0.1 + ~8.5 seek + 4.17 rotation ≈ 12.8 ms; slice (8 GiB of
        // 1 TiB, d ≤ 0.8 %): seek ≈ 1 + 7.5·√(3·0.004) ≈ 1.8 ms.
        assert!((75.0..90.0).contains(&w), "{w}");
        assert!((150.0..190.0).contains(&s), "{s}");
        // The outer zone's rate all over the slice.
        assert!((slice.rate_at(8 * GIB) / slice.outer_rate - 1.0).abs() < 0.01);
    }
}
