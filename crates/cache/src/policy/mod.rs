//! Cache replacement policies behind one small trait, one file per policy
//! (as libCacheSim keeps them), used both by the emulator's cache tier and by
//! the offline simulation of `cache mrc`. A policy decides only what stays:
//! keys are cache-line numbers, every line is the same size, and capacity is
//! counted in lines. Dirty bits and write-back live once, in [`Cache`], so
//! the emulator adds only timing on top.

mod arc;
mod clock;
mod list;
mod lru;
#[cfg(test)]
mod reference;
mod s3fifo;
mod sieve;
mod twoq;

use std::collections::BTreeSet;
use std::str::FromStr;

pub use arc::Arc;
pub use clock::Clock;
pub use list::{Direct, Hashed, Keys};
pub use lru::Lru;
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;
pub use twoq::TwoQ;

/// A replacement policy over fixed-size lines.
///
/// The caller looks a line up; on a miss it decides to admit it (a cache
/// may bypass, e.g. for a write-around mode), and the policy names the line
/// it evicted to make room.
pub trait Policy: Send {
    /// The policy's name as the command line spells it.
    fn name(&self) -> &'static str;
    /// Capacity in lines (at least 1).
    fn capacity(&self) -> usize;
    /// Lines resident now.
    fn len(&self) -> usize;
    /// No line resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether `key` is resident, without touching the policy's state.
    fn contains(&self, key: u64) -> bool;
    /// Looks `key` up; a hit updates recency or frequency. False on a miss,
    /// which changes nothing until [`Policy::admit`].
    fn lookup(&mut self, key: u64) -> bool;
    /// Admits a line that [`Policy::lookup`] just missed; returns the line
    /// evicted to make room, if the cache was full.
    fn admit(&mut self, key: u64) -> Option<u64>;
    /// A write to a resident line, after its lookup. None of the six
    /// policies treats writes apart; the hook is where one that does would.
    fn on_write(&mut self, _key: u64) {}
    /// Lookup, then admit on a miss: (hit, evicted line).
    #[inline]
    fn access(&mut self, key: u64) -> (bool, Option<u64>) {
        if self.lookup(key) {
            (true, None)
        } else {
            (false, self.admit(key))
        }
    }
}

/// The policies by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    /// Least recently used.
    Lru,
    /// CLOCK (second chance), one reference bit.
    Clock,
    /// ARC (Megiddo & Modha, FAST'03).
    Arc,
    /// 2Q, the full version (Johnson & Shasha, VLDB'94).
    TwoQ,
    /// S3-FIFO (Yang et al., SOSP'23).
    S3Fifo,
    /// SIEVE (Zhang et al., NSDI'24).
    Sieve,
}

impl PolicyKind {
    /// Every policy, in the order the help lists them.
    pub const ALL: [PolicyKind; 6] = [
        PolicyKind::Lru,
        PolicyKind::Clock,
        PolicyKind::Arc,
        PolicyKind::TwoQ,
        PolicyKind::S3Fifo,
        PolicyKind::Sieve,
    ];

    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Lru => "lru",
            PolicyKind::Clock => "clock",
            PolicyKind::Arc => "arc",
            PolicyKind::TwoQ => "2q",
            PolicyKind::S3Fifo => "s3fifo",
            PolicyKind::Sieve => "sieve",
        }
    }

    /// A new, empty policy of `lines` capacity (at least 1).
    pub fn build(self, lines: usize) -> Box<dyn Policy> {
        match self {
            PolicyKind::Lru => Box::new(Lru::new(lines)),
            PolicyKind::Clock => Box::new(Clock::new(lines)),
            PolicyKind::Arc => Box::new(Arc::new(lines)),
            PolicyKind::TwoQ => Box::new(TwoQ::new(lines)),
            PolicyKind::S3Fifo => Box::new(S3Fifo::new(lines)),
            PolicyKind::Sieve => Box::new(Sieve::new(lines)),
        }
    }
}

impl FromStr for PolicyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<PolicyKind, String> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("'{s}' is not a cache policy: use lru, clock, arc, 2q, s3fifo or sieve"))
    }
}

/// Serialised as the command line spells it (`2q`, not `twoq`).
impl serde::Serialize for PolicyKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How writes are handled by [`Cache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// A write goes to the backing store at once; lines stay clean.
    Through,
    /// A write only marks the line dirty; it is destaged later or on eviction.
    Back,
}

/// A line that left the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// Its line number.
    pub key: u64,
    /// It held data not yet on the backing store (write-back): the caller
    /// must write it there before reusing the space.
    pub dirty: bool,
}

/// What one access did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The line was resident.
    pub hit: bool,
    /// The line evicted to admit this one.
    pub evicted: Option<Evicted>,
}

/// A policy plus dirty bits: the cache tier's state without timing. Writes
/// allocate (a write miss admits the line).
pub struct Cache {
    policy: Box<dyn Policy>,
    mode: WriteMode,
    /// Ordered, so destaging can sweep in offset order ([`Cache::next_dirty`]).
    dirty: BTreeSet<u64>,
}

impl Cache {
    /// An empty cache of `lines` lines.
    pub fn new(kind: PolicyKind, lines: usize, mode: WriteMode) -> Cache {
        Cache { policy: kind.build(lines), mode, dirty: BTreeSet::new() }
    }

    /// The policy underneath.
    pub fn policy(&self) -> &dyn Policy {
        &*self.policy
    }

    /// A read of `key`.
    pub fn read(&mut self, key: u64) -> Outcome {
        let (hit, ev) = self.policy.access(key);
        Outcome { hit, evicted: ev.map(|k| self.evicted(k)) }
    }

    /// A write of `key`: in write-back mode the line becomes dirty.
    pub fn write(&mut self, key: u64) -> Outcome {
        let (hit, ev) = self.policy.access(key);
        if hit {
            self.policy.on_write(key);
        }
        let evicted = ev.map(|k| self.evicted(k));
        if self.mode == WriteMode::Back {
            self.dirty.insert(key);
        }
        Outcome { hit, evicted }
    }

    fn evicted(&mut self, key: u64) -> Evicted {
        Evicted { key, dirty: !self.dirty.is_empty() && self.dirty.remove(&key) }
    }

    /// Lines holding data not yet on the backing store.
    pub fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    /// The first dirty line at or after `from`, else the first of all: an
    /// elevator's next destage.
    pub fn next_dirty(&self, from: u64) -> Option<u64> {
        self.dirty.range(from..).next().or_else(|| self.dirty.first()).copied()
    }

    /// Marks a line clean once it has been written to the backing store;
    /// false if it was not dirty.
    pub fn clean(&mut self, key: u64) -> bool {
        self.dirty.remove(&key)
    }

    /// Whether `key` is dirty.
    pub fn is_dirty(&self, key: u64) -> bool {
        self.dirty.contains(&key)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashSet;

    use super::*;

    /// A small deterministic generator (splitmix64) so tests need no seed plumbing.
    pub struct Rng(pub u64);
    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        pub fn below(&mut self, n: u64) -> u64 {
            ((self.next() as u128 * n as u128) >> 64) as u64
        }
    }

    /// Invariants every policy keeps on any trace: never above capacity,
    /// the evicted line is gone and was resident, a hit is exactly a resident
    /// line, and len counts what `contains` sees.
    fn check_invariants(kind: PolicyKind, cap: usize, trace: &[u64]) {
        let mut p = kind.build(cap);
        let mut resident: HashSet<u64> = HashSet::new();
        for &k in trace {
            let was = resident.contains(&k);
            assert_eq!(p.contains(k), was, "{kind}: contains({k})");
            let (hit, ev) = p.access(k);
            assert_eq!(hit, was, "{kind}: hit on {k}");
            if let Some(v) = ev {
                assert!(!hit, "{kind}: evicted on a hit");
                assert!(resident.remove(&v), "{kind}: evicted {v} that was not resident");
                assert!(!p.contains(v), "{kind}: {v} still resident after eviction");
            }
            resident.insert(k);
            assert!(p.contains(k), "{kind}: {k} not resident after access");
            assert_eq!(p.len(), resident.len(), "{kind}: len");
            assert!(p.len() <= cap, "{kind}: over capacity");
            if !hit && ev.is_none() {
                assert!(p.len() <= cap);
            }
        }
    }

    #[test]
    fn every_policy_keeps_its_invariants() {
        let mut r = Rng(1);
        let trace: Vec<u64> =
            (0..20_000).map(|i| if i % 3 == 0 { r.below(20) } else { r.below(300) }).collect();
        for kind in PolicyKind::ALL {
            for cap in [1, 2, 7, 64, 500] {
                check_invariants(kind, cap, &trace);
            }
        }
    }

    #[test]
    fn a_full_cache_evicts_exactly_when_a_new_line_arrives() {
        for kind in PolicyKind::ALL {
            let mut p = kind.build(10);
            for k in 0..10 {
                assert_eq!(p.access(k), (false, None), "{kind}");
            }
            let (hit, ev) = p.access(100);
            assert!(!hit && ev.is_some(), "{kind}");
            assert_eq!(p.len(), 10);
        }
    }

    /// A loop over k + 1 lines in a cache of k. LRU misses every time; so do
    /// CLOCK and SIEVE (no hit ever sets a bit, so both are FIFO here) and
    /// ARC (T1 holds all c lines, so it evicts without a ghost and never
    /// adapts). 2Q and S3-FIFO remember evicted keys in a ghost queue and
    /// promote them, keeping most of the loop.
    #[test]
    fn a_loop_one_longer_than_the_cache() {
        let k = 100;
        let trace: Vec<u64> = (0..50).flat_map(|_| 0..=k as u64).collect();
        for kind in PolicyKind::ALL {
            let mut p = kind.build(k);
            let hits = trace.iter().filter(|&&x| p.access(x).0).count();
            match kind {
                PolicyKind::TwoQ | PolicyKind::S3Fifo => {
                    assert!(hits * 10 > trace.len() * 8, "{kind}: {hits} hits of {}", trace.len())
                }
                _ => assert_eq!(hits, 0, "{kind}"),
            }
        }
    }

    /// A hot set of 100 lines read four times, then a scan of 300 lines
    /// never seen again, fifty times over, in a cache of 200. The scan is
    /// longer than the cache, so LRU loses the hot set every round: the
    /// first pass misses, the other three hit, exactly 3/4. S3-FIFO (the
    /// scan passes through its small queue) and ARC (the hot set lives in T2,
    /// the scan in T1) keep the hot set. 2Q does not here: the four passes
    /// all fall while the hot lines sit in A1in, which 2Q counts as one
    /// correlated burst, and the scan then fills A1out, so it is LRU's 3/4.
    #[test]
    fn scan_resistance_of_s3fifo_and_arc_against_lru() {
        let mut next_scan = 1_000_000u64;
        let mut trace = Vec::new();
        for _ in 0..50 {
            for _ in 0..4 {
                trace.extend(0..100u64);
            }
            trace.extend(next_scan..next_scan + 300);
            next_scan += 300;
        }
        let hot_hit_ratio = |kind: PolicyKind| {
            let mut p = kind.build(200);
            let (mut hot, mut hits) = (0, 0);
            for &k in &trace {
                let hit = p.access(k).0;
                if k < 100 {
                    hot += 1;
                    hits += hit as u32;
                }
            }
            hits as f64 / hot as f64
        };
        assert_eq!(hot_hit_ratio(PolicyKind::Lru), 0.75);
        assert_eq!(hot_hit_ratio(PolicyKind::TwoQ), 0.75);
        for kind in [PolicyKind::S3Fifo, PolicyKind::Arc] {
            let r = hot_hit_ratio(kind);
            assert!(r > 0.95, "{kind}: hot-set hit ratio {r}");
        }
    }

    #[test]
    fn names_parse_back() {
        for k in PolicyKind::ALL {
            assert_eq!(k.name().parse::<PolicyKind>().unwrap(), k);
        }
        assert_eq!(
            "mru".parse::<PolicyKind>().unwrap_err(),
            "'mru' is not a cache policy: use lru, clock, arc, 2q, s3fifo or sieve"
        );
    }

    #[test]
    fn write_back_reports_a_dirty_victim_once() {
        let mut c = Cache::new(PolicyKind::Lru, 2, WriteMode::Back);
        assert_eq!(c.write(1), Outcome { hit: false, evicted: None });
        assert_eq!(c.read(2), Outcome { hit: false, evicted: None });
        assert_eq!(c.dirty_count(), 1);
        assert_eq!(c.read(3).evicted, Some(Evicted { key: 1, dirty: true }));
        assert_eq!(c.read(4).evicted, Some(Evicted { key: 2, dirty: false }));
        assert_eq!(c.dirty_count(), 0);
        c.write(3);
        c.write(4);
        assert_eq!((c.next_dirty(0), c.next_dirty(4), c.next_dirty(5)), (Some(3), Some(4), Some(3)));
        assert!(c.clean(3));
        assert!(!c.clean(3));
        assert_eq!(c.read(5).evicted, Some(Evicted { key: 3, dirty: false }));
        assert!(c.is_dirty(4));
        let mut t = Cache::new(PolicyKind::S3Fifo, 2, WriteMode::Through);
        t.write(1);
        assert_eq!(t.dirty_count(), 0);
    }
}
