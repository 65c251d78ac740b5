//! Plain reference versions of ARC, 2Q and S3-FIFO for the tests: each list
//! a `VecDeque` of keys (front the newest), every lookup a linear search.
//! They follow the same papers and the same case analysis as the fast
//! versions, with none of their machinery (slab, intrusive links, hash
//! table), so a fast version that gives a different hit or victim on any
//! access has changed the policy, not just its speed.

use std::collections::VecDeque;

use super::tests::Rng;
use super::PolicyKind;

fn find(l: &VecDeque<u64>, k: u64) -> Option<usize> {
    l.iter().position(|&x| x == k)
}

fn take(l: &mut VecDeque<u64>, k: u64) -> bool {
    find(l, k).and_then(|i| l.remove(i)).is_some()
}

/// ARC, Megiddo & Modha FAST'03 Figure 4, with the integer steps
/// δ1 = max(1, |B2|/|B1|), δ2 = max(1, |B1|/|B2|).
struct RefArc {
    c: usize,
    p: usize,
    t1: VecDeque<u64>,
    t2: VecDeque<u64>,
    b1: VecDeque<u64>,
    b2: VecDeque<u64>,
}

impl RefArc {
    fn new(c: usize) -> RefArc {
        let n = VecDeque::new;
        RefArc { c: c.max(1), p: 0, t1: n(), t2: n(), b1: n(), b2: n() }
    }

    fn replace(&mut self, in_b2: bool) -> Option<u64> {
        let t1 = self.t1.len();
        if t1 >= 1 && ((in_b2 && t1 == self.p) || t1 > self.p) || self.t2.is_empty() {
            let k = self.t1.pop_back()?;
            self.b1.push_front(k);
            Some(k)
        } else {
            let k = self.t2.pop_back()?;
            self.b2.push_front(k);
            Some(k)
        }
    }

    fn access(&mut self, x: u64) -> (bool, Option<u64>) {
        let c = self.c;
        // Case I.
        if take(&mut self.t1, x) || take(&mut self.t2, x) {
            self.t2.push_front(x);
            return (true, None);
        }
        let resident = self.t1.len() + self.t2.len();
        // Case II: x in B1.
        if find(&self.b1, x).is_some() {
            let (b1, b2) = (self.b1.len(), self.b2.len());
            self.p = (self.p + if b1 >= b2 { 1 } else { b2 / b1 }).min(c);
            let v = if resident >= c { self.replace(false) } else { None };
            take(&mut self.b1, x);
            self.t2.push_front(x);
            return (false, v);
        }
        // Case III: x in B2.
        if find(&self.b2, x).is_some() {
            let (b1, b2) = (self.b1.len(), self.b2.len());
            self.p = self.p.saturating_sub(if b2 >= b1 { 1 } else { b1 / b2 });
            let v = if resident >= c { self.replace(true) } else { None };
            take(&mut self.b2, x);
            self.t2.push_front(x);
            return (false, v);
        }
        // Case IV.
        let mut v = None;
        let l1 = self.t1.len() + self.b1.len();
        let total = l1 + self.t2.len() + self.b2.len();
        if l1 >= c {
            if self.t1.len() < c {
                self.b1.pop_back();
                v = self.replace(false);
            } else {
                v = self.t1.pop_back();
            }
        } else if total >= c {
            if total >= 2 * c {
                self.b2.pop_back();
            }
            if resident >= c {
                v = self.replace(false);
            }
        }
        self.t1.push_front(x);
        (false, v)
    }
}

/// Full 2Q, Johnson & Shasha VLDB'94: Kin = c/4, Kout = c/2.
struct RefTwoQ {
    cap: usize,
    kin: usize,
    kout: usize,
    a1in: VecDeque<u64>,
    am: VecDeque<u64>,
    a1out: VecDeque<u64>,
}

impl RefTwoQ {
    fn new(cap: usize) -> RefTwoQ {
        let cap = cap.max(1);
        let n = VecDeque::new;
        RefTwoQ { cap, kin: (cap / 4).max(1), kout: (cap / 2).max(1), a1in: n(), am: n(), a1out: n() }
    }

    fn access(&mut self, x: u64) -> (bool, Option<u64>) {
        if take(&mut self.am, x) {
            self.am.push_front(x);
            return (true, None);
        }
        if find(&self.a1in, x).is_some() {
            return (true, None);
        }
        let mut v = None;
        if self.a1in.len() + self.am.len() >= self.cap {
            if self.a1in.len() > self.kin || self.am.is_empty() {
                let y = self.a1in.pop_back().expect("A1in holds the lines");
                self.a1out.push_front(y);
                if self.a1out.len() > self.kout {
                    self.a1out.pop_back();
                }
                v = Some(y);
            } else {
                v = self.am.pop_back();
            }
        }
        if take(&mut self.a1out, x) {
            self.am.push_front(x);
        } else {
            self.a1in.push_front(x);
        }
        (false, v)
    }
}

/// S3-FIFO, Yang et al. SOSP'23, libCacheSim's parameters: S 10 %, G 90 %
/// of the lines, move to M when hit twice in S, 2-bit frequencies in M. The
/// ghost queue is the window of the last G evictions from S: a miss is a
/// ghost hit when the line's newest eviction in the window is newer than its
/// last admission (a ghost hit consumes the ghost, as libCacheSim does).
struct RefS3Fifo {
    cap: usize,
    small_cap: usize,
    ghost_cap: usize,
    freq: std::collections::HashMap<u64, u8>,
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    /// (line, event number), newest first.
    ghost: VecDeque<(u64, u64)>,
    admitted: std::collections::HashMap<u64, u64>,
    events: u64,
}

impl RefS3Fifo {
    fn new(cap: usize) -> RefS3Fifo {
        let cap = cap.max(1);
        RefS3Fifo {
            cap,
            small_cap: (cap / 10).max(1),
            ghost_cap: (cap * 9 / 10).max(1),
            freq: Default::default(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            admitted: Default::default(),
            events: 0,
        }
    }

    fn evict(&mut self) -> Option<u64> {
        if self.small.len() >= self.small_cap || self.main.is_empty() {
            while let Some(k) = self.small.pop_back() {
                if self.freq[&k] >= 2 {
                    self.freq.insert(k, 0);
                    self.main.push_front(k);
                } else {
                    self.freq.remove(&k);
                    self.events += 1;
                    self.ghost.push_front((k, self.events));
                    if self.ghost.len() > self.ghost_cap {
                        self.ghost.pop_back();
                    }
                    return Some(k);
                }
            }
        }
        while let Some(k) = self.main.pop_back() {
            let f = self.freq[&k];
            if f > 0 {
                self.freq.insert(k, f - 1);
                self.main.push_front(k);
            } else {
                self.freq.remove(&k);
                return Some(k);
            }
        }
        None
    }

    fn access(&mut self, x: u64) -> (bool, Option<u64>) {
        if let Some(f) = self.freq.get_mut(&x) {
            *f = (*f + 1).min(3);
            return (true, None);
        }
        let v = if self.small.len() + self.main.len() >= self.cap { self.evict() } else { None };
        self.freq.insert(x, 0);
        let evicted_at = self.ghost.iter().find(|g| g.0 == x).map(|g| g.1);
        let admitted_at = self.admitted.get(&x).copied().unwrap_or(0);
        self.events += 1;
        self.admitted.insert(x, self.events);
        if evicted_at.is_some_and(|e| e > admitted_at) {
            self.main.push_front(x);
        } else {
            self.small.push_front(x);
        }
        (false, v)
    }
}

/// A trace with a hot set, a warm set, loops and one-time scans mixed, so
/// every case of every policy (ghost hits in each ghost list, adaptation
/// both ways, evictions from every list) happens many times.
fn mixed_trace(seed: u64, n: usize, span: u64) -> Vec<u64> {
    let mut r = Rng(seed);
    let mut scan = 1_000_000u64;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match r.below(10) {
            0..=3 => out.push(r.below(span / 8)),
            4..=6 => out.push(r.below(span)),
            7 => {
                let from = r.below(span);
                out.extend(from..from + r.below(span / 2) + 1);
            }
            8 => {
                let len = r.below(span) + 1;
                out.extend(scan..scan + len);
                scan += len;
            }
            _ => {
                let k = r.below(span * 2);
                out.extend([k, k, k]);
            }
        }
    }
    out.truncate(n);
    out
}

fn agree(kind: PolicyKind, mut reference: impl FnMut(u64) -> (bool, Option<u64>), cap: usize, trace: &[u64]) {
    let mut fast = kind.build(cap);
    for (n, &k) in trace.iter().enumerate() {
        assert_eq!(fast.access(k), reference(k), "{kind}, {cap} lines: access {n} (line {k})");
    }
}

#[test]
fn arc_2q_and_s3fifo_make_the_reference_versions_choices_on_every_access() {
    for (seed, span) in [(1, 40), (2, 300), (3, 1500)] {
        let trace = mixed_trace(seed, 30_000, span);
        for cap in [1, 2, 3, 5, 8, 13, 64, 200, 700] {
            let mut a = RefArc::new(cap);
            agree(PolicyKind::Arc, |k| a.access(k), cap, &trace);
            let mut q = RefTwoQ::new(cap);
            agree(PolicyKind::TwoQ, |k| q.access(k), cap, &trace);
            let mut s = RefS3Fifo::new(cap);
            agree(PolicyKind::S3Fifo, |k| s.access(k), cap, &trace);
        }
    }
}

/// Hits of every simulated policy on 400,000 Zipf(0.8) accesses over
/// 100,000 ranks at three sizes (1,000, 10,000 and 40,000 lines), as the versions before the speed work
/// (slab + std HashMap, two lookups per miss) counted them: a change that
/// speeds a policy up must leave these exactly as they are.
#[test]
fn hits_on_a_zipf_trace_are_what_they_were_before_the_speed_work() {
    let keys: Vec<u64> =
        crate::synth::Zipf::new(100_000, 0.8, 1, 0.0, 7).take(400_000).map(|r| r.offset).collect();
    let mut got = Vec::new();
    for kind in PolicyKind::ALL {
        for lines in [1_000, 10_000, 40_000] {
            let mut p = kind.build(lines);
            got.push(keys.iter().filter(|&&k| p.access(k).0).count());
        }
    }
    #[rustfmt::skip]
    let before = [
        82_584, 192_087, 296_560,  // lru
        86_289, 196_590, 298_181,  // clock
        122_793, 215_865, 299_787, // arc
        117_890, 209_969, 289_880, // 2q
        125_068, 217_510, 298_900, // s3fifo
        119_895, 215_063, 300_680, // sieve
    ];
    assert_eq!(got, before);
}

/// The dense versions the simulation runs (`Arc<Direct>` and the others,
/// over lines renumbered by first access) make the reference versions'
/// choices too: the same hits, and the same victims once their ids are
/// mapped back to lines.
#[test]
fn the_dense_versions_make_the_reference_versions_choices_on_every_access() {
    use super::{Arc, Policy, S3Fifo, TwoQ};
    fn agree_dense(
        name: &str,
        mut fast: impl Policy,
        mut reference: impl FnMut(u64) -> (bool, Option<u64>),
        trace: &[u64],
        dense: &crate::mrc::DenseKeys,
    ) {
        let mut line_of = vec![0u64; dense.distinct];
        for (&k, &id) in trace.iter().zip(&dense.ids) {
            line_of[id as usize] = k;
        }
        for (n, (&k, &id)) in trace.iter().zip(&dense.ids).enumerate() {
            let (hit, v) = fast.access(id as u64);
            assert_eq!((hit, v.map(|v| line_of[v as usize])), reference(k), "{name}: access {n} (line {k})");
        }
    }
    for (seed, span) in [(1, 40), (2, 300), (3, 1500)] {
        let trace = mixed_trace(seed, 30_000, span);
        let dense = crate::mrc::DenseKeys::new(&trace).expect("few lines");
        let n = dense.distinct;
        for cap in [1, 2, 3, 5, 8, 13, 64, 200, 700] {
            let mut a = RefArc::new(cap);
            agree_dense("arc", Arc::dense(cap, n), |k| a.access(k), &trace, &dense);
            let mut q = RefTwoQ::new(cap);
            agree_dense("2q", TwoQ::dense(cap, n), |k| q.access(k), &trace, &dense);
            let mut s = RefS3Fifo::new(cap);
            agree_dense("s3fifo", S3Fifo::dense(cap, n), |k| s.access(k), &trace, &dense);
        }
    }
}
