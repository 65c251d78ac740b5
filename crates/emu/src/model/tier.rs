//! A cache tier: a fast device model (the cache, e.g. `nvme`) in front of a
//! slow one (the backing, e.g. `hdd`), with a replacement policy over fixed
//! cache lines deciding what is resident ([`storbench_cache::Cache`], the
//! same code `cache mrc` simulates with, so a trace of this medium and the
//! curve agree line for line).
//!
//! Timing, all in the model's time (the daemon's clock):
//! - a request whose lines are all resident costs the cache device's time;
//! - a read that misses reads the missing lines (whole lines, one span from
//!   the first to the last missing line) from the backing device (a network
//!   backing's round trip and link first: a NAS behind the cache), which
//!   serves one request at a time on its own timeline (`backing_free_ns`):
//!   misses queue behind each other and behind destages (an array backing
//!   queues them at its members instead, so misses on different members
//!   overlap, as they do behind a RAID controller). The line fill
//!   into the cache device is not on the request's path (caches answer the
//!   read from the backing's data and fill behind it);
//! - a write is written to the cache device and allocates its lines (no
//!   read-fill of a partial line: the tier keeps per-line validity as
//!   flashcache and bcache keep per-sector); write-through also writes the
//!   backing and completes when both are done; write-back marks the lines
//!   dirty;
//! - dirty lines go to the backing at its cost when evicted (queued on the
//!   backing's timeline: later misses wait for them, the evicting request
//!   does not) and in the background whenever the backing is idle, in
//!   offset order from where the last destage ended (an elevator), as
//!   write-back caches write back when the disk has time;
//! - a flush costs the cache device's flush; write-through also flushes the
//!   backing (a write-back tier's dirty lines are on non-volatile flash:
//!   durable without reaching the backing).
//!
//! Hits and misses are counted per line access, as `cache mrc` counts them.
//! The tier's state (resident lines, dirty lines, access counts) lives as
//! long as the daemon, so a second run on the same medium starts warm;
//! [`Tiered::reset`] empties it (`media cache reset`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use foldhash::fast::FixedState;
use serde::{Deserialize, Serialize};
use storbench_cache::{Cache, PolicyKind, WriteMode};

use super::{Model, ModelError, Op, Req, Spec, State};

/// The cache tier as the user asked for it (`media create --cache …`):
/// stored in the medium's [`Spec`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierSpec {
    /// Cache capacity in bytes.
    pub size: u64,
    /// The cache device's built-in model (`nvme`, `sata-ssd`, …).
    pub model: String,
    /// Bytes per cache line.
    pub line: u64,
    /// Replacement policy (`lru`, `clock`, `arc`, `2q`, `s3fifo`, `sieve`).
    pub policy: String,
    /// `back` or `through`.
    pub write: String,
    /// `none` (empty at start) or `sequential` (filled with the medium's
    /// first lines, as a sequential read would leave it).
    pub warm: String,
}

/// A tier's options as a user writes them (`media create --cache-*`, a
/// plan's `cache_*` keys); `None` takes the default.
#[derive(Clone, Debug, Default)]
pub struct TierOptions<'a> {
    /// Capacity in bytes (`2G` as the front end parsed it).
    pub size: u64,
    /// The cache device's model (default `nvme`).
    pub model: Option<&'a str>,
    /// The line in bytes (default 64 KiB), as the front end parsed it.
    pub line: Option<u64>,
    /// The policy (default `s3fifo`).
    pub policy: Option<&'a str>,
    /// `back` (default) or `through`.
    pub write: Option<&'a str>,
    /// `none` (default) or `sequential`.
    pub warm: Option<&'a str>,
}

impl TierSpec {
    /// A spec from options as written, with the defaults filled in (every
    /// field is checked against the medium by [`TierSpec::check`]).
    pub fn from_options(o: &TierOptions<'_>) -> TierSpec {
        TierSpec {
            size: o.size,
            model: o.model.unwrap_or("nvme").to_string(),
            line: o.line.unwrap_or(64 << 10),
            policy: o.policy.unwrap_or("s3fifo").to_string(),
            write: o.write.unwrap_or("back").to_string(),
            warm: o.warm.unwrap_or("none").to_string(),
        }
    }

    /// Checks every field against `capacity` (the medium's bytes).
    pub fn check(&self, capacity: u64) -> Result<(), ModelError> {
        let l = self.line;
        // One rule with `cache mrc --line` (storbench_cache::check_line).
        if let Err(why) = storbench_cache::check_line(l) {
            return Err(ModelError(format!("--cache-line {l}: {why}")));
        }
        if self.size < l {
            return Err(ModelError(format!(
                "--cache {}: a cache holds at least one line ({l} bytes)",
                self.size
            )));
        }
        if self.size > capacity {
            return Err(ModelError(format!(
                "--cache {}: larger than the medium ({capacity} bytes); a cache is smaller than what it caches",
                self.size
            )));
        }
        if super::is_network(&self.model) || super::builtin(&self.model).is_none() {
            return Err(ModelError(format!(
                "--cache-model {}: use a device model: nvme, sata-ssd, hdd or constant",
                self.model
            )));
        }
        self.policy().map_err(|e| ModelError(format!("--cache-policy {e}")))?;
        self.mode()?;
        match self.warm.as_str() {
            "none" | "sequential" => Ok(()),
            w => Err(ModelError(format!("--cache-warm {w}: use none or sequential"))),
        }
    }

    fn policy(&self) -> Result<PolicyKind, String> {
        self.policy.parse()
    }

    fn mode(&self) -> Result<WriteMode, ModelError> {
        match self.write.as_str() {
            "back" => Ok(WriteMode::Back),
            "through" => Ok(WriteMode::Through),
            w => Err(ModelError(format!("--cache-write {w}: use back or through"))),
        }
    }

    /// `2G nvme cache, s3fifo, write-back`.
    pub fn label(&self) -> String {
        format!(
            "{} {} cache, {}, write-{}",
            storbench_metrics::units::format_size(self.size),
            self.model,
            self.policy,
            self.write
        )
    }
}

/// Counts since the last [`Tiered::take`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierCounts {
    /// Read line accesses that hit.
    pub read_hits: u64,
    /// Read line accesses that missed.
    pub read_misses: u64,
    /// Write line accesses that hit.
    pub write_hits: u64,
    /// Write line accesses that missed (and allocated).
    pub write_misses: u64,
    /// Dirty lines written to the backing.
    pub destaged: u64,
}

/// The tier's figures at one instant: the counts since the last take and
/// its state now. One second of it is a line of the daemon's counters
/// (`cache`, the counts flattened into it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TierSnapshot {
    /// Counts since the last take.
    #[serde(flatten)]
    pub counts: TierCounts,
    /// Dirty lines now.
    pub dirty: u64,
    /// Resident lines now.
    pub resident: u64,
    /// Capacity in lines.
    pub lines: u64,
    /// Bytes per line.
    pub line: u64,
    /// Distinct lines accessed since the cache was emptied.
    pub footprint: u64,
    /// The share of the line accesses since the cache was emptied that the
    /// hottest 1, 5, 10 and 20 % of the lines accessed took.
    pub hot: [f64; 4],
}

impl TierSnapshot {
    /// Line accesses, hits and misses.
    pub fn accesses(&self) -> u64 {
        let c = &self.counts;
        c.read_hits + c.read_misses + c.write_hits + c.write_misses
    }

    /// Hits of both kinds.
    pub fn hits(&self) -> u64 {
        self.counts.read_hits + self.counts.write_hits
    }
}

/// The hottest shares [`TierSnapshot::hot`] gives, in percent of lines.
pub const HOT_PERCENTS: [u32; 4] = [1, 5, 10, 20];

struct TierState {
    cache: Cache,
    dev: State,
    backing: State,
    /// When the backing device is free again (model time, ns).
    backing_free_ns: u64,
    /// Where the background destage goes on from.
    cursor: u64,
    counts: TierCounts,
    /// Accesses per line since the cache was emptied.
    heat: Heat,
}

/// Accesses per line, and how many lines have each count: the hot-data
/// shares come from the counts' histogram, kept as lines are touched, so
/// the per-second snapshot neither copies nor sorts anything per line
/// under the tier's lock (a large medium's footprint is millions of lines).
#[derive(Default)]
struct Heat {
    per_line: HashMap<u64, u32, FixedState>,
    /// Access count → lines with that count.
    lines_with: BTreeMap<u32, u64>,
    total: u64,
}

impl Heat {
    fn touch(&mut self, line: u64) {
        let c = self.per_line.entry(line).or_insert(0);
        if *c > 0 {
            if let std::collections::btree_map::Entry::Occupied(mut e) = self.lines_with.entry(*c) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
        }
        *c += 1;
        *self.lines_with.entry(*c).or_insert(0) += 1;
        self.total += 1;
    }

    fn lines(&self) -> u64 {
        self.per_line.len() as u64
    }

    /// [`hot_shares`] of the lines' counts, from the histogram.
    fn shares(&self) -> [f64; 4] {
        let n = self.lines();
        if self.total == 0 {
            return [0.0; 4];
        }
        let mut out = [0.0; 4];
        for (i, p) in HOT_PERCENTS.iter().enumerate() {
            let mut k = (n * *p as u64).div_ceil(100).clamp(1, n);
            let mut sum = 0u64;
            for (&count, &lines) in self.lines_with.iter().rev() {
                let take = lines.min(k);
                sum += take * count as u64;
                k -= take;
                if k == 0 {
                    break;
                }
            }
            out[i] = sum as f64 / self.total as f64;
        }
        out
    }
}

/// A built cache tier.
#[derive(Clone)]
pub struct Tiered {
    /// The cache device.
    pub dev: Model,
    /// The backing device.
    pub backing: Model,
    /// Bytes per line.
    pub line: u64,
    /// Capacity in lines.
    pub lines: usize,
    /// The policy.
    pub policy: PolicyKind,
    /// Write-back or write-through.
    pub mode: WriteMode,
    /// Filled sequentially at start (and never after a reset).
    pub warm: bool,
    capacity: u64,
    state: Arc<Mutex<TierState>>,
}

impl std::fmt::Debug for Tiered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiered")
            .field("dev", &self.dev)
            .field("backing", &self.backing)
            .field("line", &self.line)
            .field("lines", &self.lines)
            .field("policy", &self.policy)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl Tiered {
    /// A tier from its spec in front of `backing`, for a medium of
    /// `capacity` bytes.
    pub fn new(t: &TierSpec, backing: Model, capacity: u64) -> Result<Tiered, ModelError> {
        t.check(capacity)?;
        let dev = Spec { base: t.model.clone(), ..Spec::default() }.build(t.size)?;
        let policy = t.policy().map_err(ModelError)?;
        let mode = t.mode()?;
        let lines = (t.size / t.line) as usize;
        let tier = Tiered {
            dev,
            backing,
            line: t.line,
            lines,
            policy,
            mode,
            warm: t.warm == "sequential",
            capacity,
            state: Arc::new(Mutex::new(TierState::empty(policy, lines, mode))),
        };
        if tier.warm {
            let mut s = tier.lock();
            let last = capacity.div_ceil(t.line);
            for l in 0..(lines as u64).min(last) {
                s.cache.read(l);
            }
        }
        Ok(tier)
    }

    fn lock(&self) -> MutexGuard<'_, TierState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cache lines a range touches.
    fn span(&self, offset: u64, len: u64) -> std::ops::RangeInclusive<u64> {
        let first = offset / self.line;
        let last = if len == 0 { first } else { (offset + len - 1) / self.line };
        first..=last
    }

    /// Puts a backing request on the backing's timeline no earlier than
    /// `at_ns`; returns when it is back. A network backing's trip there
    /// (half its round trip, its payload on the link behind the ones ahead)
    /// comes first and its trip back last, outside the backing's timeline,
    /// as the daemon serves a network model. An array backing (behind a
    /// network too) keeps its members' timelines itself: the request goes
    /// to it when it arrives and queues at the members it touches, so
    /// misses on different members overlap (one timeline would serve a
    /// 6-disk array as one disk), and `backing_free_ns` is when the last
    /// of its requests ends.
    fn on_backing(&self, s: &mut TierState, req: &Req, at_ns: u64) -> u64 {
        let ready = self.backing.approach(req, &mut s.backing, at_ns);
        let back = self.backing.back(req).as_nanos() as u64;
        if self.backing.array().is_some() {
            let end = ready + self.backing.service_time(req, &mut s.backing, ready).as_nanos() as u64;
            s.backing_free_ns = s.backing_free_ns.max(end);
            return end + back;
        }
        let start = s.backing_free_ns.max(ready);
        let d = self.backing.service_time(req, &mut s.backing, start);
        s.backing_free_ns = start + d.as_nanos() as u64;
        s.backing_free_ns + back
    }

    fn line_req(&self, op: Op, first: u64, last: u64) -> Req {
        let offset = first * self.line;
        let end = ((last + 1) * self.line).min(self.capacity);
        Req { op, offset, len: end.saturating_sub(offset).max(1) }
    }

    /// Writes a dirty line back, queued on the backing's timeline.
    fn destage(&self, s: &mut TierState, key: u64, at_ns: u64) {
        let r = self.line_req(Op::Write, key, key);
        self.on_backing(s, &r, at_ns);
        s.counts.destaged += 1;
        s.cursor = key + 1;
    }

    /// Background destage: while the backing had idle time before `now_ns`,
    /// it writes dirty lines back, in offset order from the cursor.
    fn catch_up(&self, s: &mut TierState, now_ns: u64) {
        while s.backing_free_ns < now_ns {
            let Some(key) = s.cache.next_dirty(s.cursor) else { return };
            s.cache.clean(key);
            let at = s.backing_free_ns;
            self.destage(s, key, at);
        }
    }

    /// Looks the request's lines up (admitting what missed); returns the
    /// first and last missing line, if any.
    fn access(&self, s: &mut TierState, req: &Req, start_ns: u64) -> Option<(u64, u64)> {
        let write = req.op == Op::Write;
        let mut missed: Option<(u64, u64)> = None;
        for l in self.span(req.offset, req.len) {
            let o = if write { s.cache.write(l) } else { s.cache.read(l) };
            s.heat.touch(l);
            match (write, o.hit) {
                (false, true) => s.counts.read_hits += 1,
                (false, false) => s.counts.read_misses += 1,
                (true, true) => s.counts.write_hits += 1,
                (true, false) => s.counts.write_misses += 1,
            }
            if !o.hit {
                missed = Some(missed.map_or((l, l), |(a, _)| (a, l)));
            }
            if let Some(ev) = o.evicted.filter(|e| e.dirty) {
                self.destage(s, ev.key, start_ns);
            }
        }
        missed
    }

    /// How long the request occupies one of the cache device's units.
    pub(crate) fn service_time(&self, req: &Req, start_ns: u64) -> Duration {
        let mut g = self.lock();
        let s = &mut *g;
        self.catch_up(s, start_ns);
        let end = match req.op {
            Op::Read => {
                let missed = self.access(s, req, start_ns);
                let hit = start_ns + self.dev.service_time(req, &mut s.dev, start_ns).as_nanos() as u64;
                match missed {
                    None => hit,
                    Some((a, b)) => {
                        let r = self.line_req(Op::Read, a, b);
                        self.on_backing(s, &r, start_ns).max(hit)
                    }
                }
            }
            Op::Write => {
                self.access(s, req, start_ns);
                let cached = start_ns + self.dev.service_time(req, &mut s.dev, start_ns).as_nanos() as u64;
                match self.mode {
                    WriteMode::Back => cached,
                    WriteMode::Through => self.on_backing(s, req, start_ns).max(cached),
                }
            }
            Op::Flush => {
                let f = start_ns + self.dev.service_time(req, &mut s.dev, start_ns).as_nanos() as u64;
                match self.mode {
                    WriteMode::Back => f,
                    WriteMode::Through => self.on_backing(s, req, start_ns).max(f),
                }
            }
            Op::Discard => start_ns + self.dev.service_time(req, &mut s.dev, start_ns).as_nanos() as u64,
        };
        Duration::from_nanos(end - start_ns)
    }

    /// The figures since the last take (and background destage up to
    /// `now_ns`, so an idle medium's dirty lines drain).
    pub fn take(&self, now_ns: u64) -> TierSnapshot {
        let mut g = self.lock();
        self.catch_up(&mut g, now_ns);
        let counts = std::mem::take(&mut g.counts);
        TierSnapshot {
            counts,
            dirty: g.cache.dirty_count() as u64,
            resident: g.cache.policy().len() as u64,
            lines: self.lines as u64,
            line: self.line,
            footprint: g.heat.lines(),
            hot: g.heat.shares(),
        }
    }

    /// Empties the cache: dirty lines are written back first (at no cost:
    /// a reset is an administrator's act, not a workload's), counts and
    /// access heat start again.
    pub fn reset(&self) {
        let mut g = self.lock();
        let backing = std::mem::take(&mut g.backing);
        let free = g.backing_free_ns;
        *g = TierState::empty(self.policy, self.lines, self.mode);
        g.backing = backing;
        g.backing_free_ns = free;
    }
}

impl TierState {
    fn empty(policy: PolicyKind, lines: usize, mode: WriteMode) -> TierState {
        TierState {
            cache: Cache::new(policy, lines.max(1), mode),
            dev: State::default(),
            backing: State::default(),
            backing_free_ns: 0,
            cursor: 0,
            counts: TierCounts::default(),
            heat: Heat::default(),
        }
    }
}

/// The share of all accesses the hottest 1, 5, 10, 20 % of lines took
/// (at least one line each); zeros when nothing was accessed.
pub fn hot_shares(counts: &mut [u32]) -> [f64; 4] {
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    if total == 0 {
        return [0.0; 4];
    }
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let n = counts.len();
    let mut out = [0.0; 4];
    for (i, p) in HOT_PERCENTS.iter().enumerate() {
        let k = ((n as u64 * *p as u64).div_ceil(100) as usize).clamp(1, n);
        out[i] = counts[..k].iter().map(|&c| c as u64).sum::<u64>() as f64 / total as f64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier(policy: &str, write: &str, size: u64) -> Tiered {
        let t = TierSpec {
            size,
            model: "constant".into(),
            line: 64 << 10,
            policy: policy.into(),
            write: write.into(),
            warm: "none".into(),
        };
        // Backing: a constant 10 ms device; the cache device: constant's
        // defaults, overridden to 0.1 ms reads and writes below.
        let backing =
            Spec::parse("constant", &["read=10ms".into(), "write=10ms".into(), "flush=20ms".into()])
                .unwrap()
                .build(1 << 30)
                .unwrap();
        let mut tr = Tiered::new(&t, backing, 1 << 30).unwrap();
        tr.dev = Spec::parse("constant", &["read=100us".into(), "write=100us".into(), "flush=1ms".into()])
            .unwrap()
            .build(size)
            .unwrap();
        tr
    }

    fn read(off: u64) -> Req {
        Req { op: Op::Read, offset: off, len: 4096 }
    }

    #[test]
    fn a_miss_costs_the_backing_and_a_hit_the_cache() {
        let t = tier("lru", "back", 1 << 20);
        assert_eq!(t.service_time(&read(0), 0), Duration::from_millis(10));
        // The same line again, later: a hit.
        assert_eq!(t.service_time(&read(4096), 20_000_000), Duration::from_micros(100));
        // Two misses at once queue on the backing: the second ends 20 ms in.
        assert_eq!(t.service_time(&read(1 << 20), 30_000_000), Duration::from_millis(10));
        assert_eq!(t.service_time(&read(2 << 20), 30_000_000), Duration::from_millis(20));
        let s = t.take(30_000_000);
        assert_eq!(s.counts.read_hits, 1);
        assert_eq!(s.counts.read_misses, 3);
        assert_eq!(s.resident, 3);
    }

    /// A 1 MiB cache (of `constant`'s zero times) in front of a RAID 0 of
    /// 6 members of one unit each, 10 ms a read, 64 KiB chunks; behind a
    /// network model `net` with its `sets`, if given.
    fn before_raid0_of_six(net: Option<(&str, &[&str])>) -> Tiered {
        let t = TierSpec {
            size: 1 << 20,
            model: "constant".into(),
            line: 64 << 10,
            policy: "lru".into(),
            write: "back".into(),
            warm: "none".into(),
        };
        use super::super::{ArrayOptions, ArraySpec};
        let a = ArrayOptions {
            layout: "raid0",
            disks: Some(6),
            chunk: Some(64 << 10),
            member: Some("constant"),
            member_sets: &["read=10ms".into(), "write=10ms".into(), "units=1".into()],
            ..Default::default()
        };
        let (base, set) = match net {
            None => ("array", BTreeMap::new()),
            Some((n, sets)) => (
                n,
                sets.iter().map(|s| s.split_once('=').unwrap()).map(|(k, v)| (k.into(), v.into())).collect(),
            ),
        };
        let spec = Spec {
            base: base.into(),
            set,
            array: Some(ArraySpec::from_options(&a).unwrap()),
            ..Spec::default()
        };
        Tiered::new(&t, spec.build(1 << 30).unwrap(), 1 << 30).unwrap()
    }

    #[test]
    fn misses_on_different_members_of_an_array_backing_overlap() {
        let tr = before_raid0_of_six(None);
        // Six misses at once, one on each member: each ends 10 ms in.
        for m in 0..6u64 {
            assert_eq!(tr.service_time(&read(m << 16), 0), Duration::from_millis(10), "member {m}");
        }
        // A seventh on member 0 (the next stripe) waits for that member only.
        assert_eq!(tr.service_time(&read(6 << 16), 0), Duration::from_millis(20));
    }

    #[test]
    fn a_miss_through_a_network_to_an_array_pays_the_trip_the_link_and_one_member() {
        // S1: the flash cache, the iSCSI hop, the NAS's RAID 0. A 0.4 ms
        // round trip and a link that moves a 64 KiB line in 1 ms.
        let tr = before_raid0_of_six(Some(("gbe-nas", &["rtt=0.4ms", "link_rate=65.536MB/s"])));
        assert!(tr.backing.array().is_some(), "the array is seen through the network");
        let us = Duration::from_micros;
        // Alone: 0.2 ms there, 1 ms of payload, 10 ms at member 0, 0.2 ms back.
        assert_eq!(tr.service_time(&read(0), 0), us(11_400));
        // Five misses at once on members 1 to 5: their payloads queue on
        // the one link (1 ms each), their reads overlap at their members.
        let t0 = 100_000_000;
        for m in 1..6u64 {
            assert_eq!(tr.service_time(&read(m << 16), t0), us(11_400 + (m - 1) * 1000), "member {m}");
        }
        // A sixth, on member 0 again (the next stripe), crosses the link
        // after them (6.2 ms in) and is read at once: member 0 is idle.
        assert_eq!(tr.service_time(&read(6 << 16), t0), us(16_400));
        let a = tr.backing.array().unwrap().take(t0);
        let reads: Vec<u64> = a.members.iter().map(|m| m.reads).collect();
        assert_eq!(reads, [2, 1, 1, 1, 1, 1], "every miss reads one member, all members serve");
        assert_eq!(tr.take(t0).counts.read_misses, 7);
    }

    #[test]
    fn write_back_acknowledges_from_the_cache_and_destages_when_idle() {
        let t = tier("lru", "back", 1 << 20);
        let w = Req { op: Op::Write, offset: 0, len: 8192 };
        assert_eq!(t.service_time(&w, 0), Duration::from_micros(100));
        assert_eq!(t.take(0).dirty, 1);
        // The backing is idle from 0: by 50 ms the line is written back.
        let s = t.take(50_000_000);
        assert_eq!((s.dirty, s.counts.destaged), (0, 1));
        // A flush costs the cache device's flush only.
        let f = Req { op: Op::Flush, offset: 0, len: 0 };
        assert_eq!(t.service_time(&f, 60_000_000), Duration::from_millis(1));
    }

    #[test]
    fn write_through_waits_for_the_backing_and_flushes_it() {
        let t = tier("lru", "through", 1 << 20);
        let w = Req { op: Op::Write, offset: 0, len: 8192 };
        assert_eq!(t.service_time(&w, 0), Duration::from_millis(10));
        assert_eq!(t.take(0).dirty, 0);
        let f = Req { op: Op::Flush, offset: 0, len: 0 };
        assert_eq!(t.service_time(&f, 10_000_000), Duration::from_millis(20));
    }

    #[test]
    fn an_evicted_dirty_line_delays_the_next_miss() {
        // One line of cache: a write, then a read of another line evicts it.
        let t = tier("lru", "back", 64 << 10);
        t.service_time(&Req { op: Op::Write, offset: 0, len: 4096 }, 0);
        // At 0 the backing is busy with nothing, so catch-up does not run
        // before the read: the read's miss evicts the dirty line, whose
        // destage (10 ms) goes on the backing first; the read waits.
        let d = t.service_time(&read(1 << 20), 0);
        assert_eq!(d, Duration::from_millis(20));
        assert_eq!(t.take(0).counts.destaged, 1);
    }

    #[test]
    fn a_loop_over_more_lines_than_fit_misses_always_under_lru() {
        let t = tier("lru", "back", 4 * (64 << 10));
        for round in 0..3u64 {
            for l in 0..5u64 {
                t.service_time(&read(l * (64 << 10)), round * 1_000_000_000 + l * 100_000_000);
            }
        }
        let s = t.take(10_000_000_000);
        assert_eq!(s.counts.read_hits, 0);
        assert_eq!(s.counts.read_misses, 15);
    }

    #[test]
    fn reset_empties_the_cache_and_sequential_warm_fills_it() {
        let mut spec = TierSpec {
            size: 1 << 20,
            model: "nvme".into(),
            line: 64 << 10,
            policy: "s3fifo".into(),
            write: "back".into(),
            warm: "sequential".into(),
        };
        let backing = Spec::parse("hdd", &[]).unwrap().build(1 << 30).unwrap();
        let t = Tiered::new(&spec, backing.clone(), 1 << 30).unwrap();
        assert_eq!(t.take(0).resident, 16);
        t.service_time(&read(0), 0);
        assert_eq!(t.take(0).counts.read_hits, 1);
        t.reset();
        let s = t.take(0);
        assert_eq!((s.resident, s.footprint), (0, 0));
        spec.warm = "hot".into();
        assert!(Tiered::new(&spec, backing, 1 << 30).unwrap_err().0.contains("--cache-warm hot"));
    }

    #[test]
    fn hot_shares_rank_lines_by_accesses() {
        // 100 lines: one with 901 accesses, 99 with one each.
        let mut c = vec![1u32; 99];
        c.push(901);
        let h = hot_shares(&mut c);
        assert!((h[0] - 0.901).abs() < 1e-9, "{h:?}");
        assert!((h[1] - 0.905).abs() < 1e-9, "{h:?}");
        assert_eq!(hot_shares(&mut []), [0.0; 4]);
    }

    #[test]
    fn the_heat_histogram_gives_the_shares_of_the_sorted_counts() {
        // A skewed pattern over 1,000 lines (line i touched about 1000/(i+1)
        // times, in an interleaved order), against sorting the counts.
        let mut heat = Heat::default();
        let mut counts = vec![0u32; 1000];
        for round in 0..1000u64 {
            for line in 0..1000u64 {
                if round * (line + 1) < 1000 + (line * 7) % 13 {
                    heat.touch(line);
                    counts[line as usize] += 1;
                }
            }
        }
        let want = hot_shares(&mut counts);
        let got = heat.shares();
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
        assert!(got[0] > 0.1 && got[0] < got[3], "{got:?}");
        assert_eq!(heat.lines(), 1000);
        assert_eq!(Heat::default().shares(), [0.0; 4]);
    }
}
