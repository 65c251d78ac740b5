//! Miss-ratio curves: the miss ratio of a cache as a function of its size.
//!
//! - LRU, exactly, for every size in one pass: Mattson et al.'s stack
//!   algorithm (1970). An access hits an LRU cache of c lines exactly when
//!   its stack distance (distinct lines touched since its previous access,
//!   itself included) is at most c. The distance is counted with a Fenwick
//!   tree over access times holding a 1 at each line's latest access, so a
//!   distance is a prefix sum: O(n log m) for n accesses and m distinct
//!   lines. Times are renumbered when the tree fills, so memory is O(m).
//! - LRU, sampled: SHARDS (Waldspurger et al., FAST'15). A line is in the
//!   sample when hash(line) mod P < T (rate R = T/P), the same lines every
//!   time, so a sampled line's reuse is seen whole; its distance scales by
//!   1/R. Fixed-rate uses SHARDS-adj (the difference between expected and
//!   actual sampled accesses is added to the first bucket, which corrects
//!   for hot lines that happen to fall in the sample); fixed-size keeps at
//!   most `s_max` lines, lowering T (and rescaling the counts by the new over
//!   the old rate) when more arrive, with the same adjustment against N·R.
//! - Any policy at chosen sizes: simulation over the (sampled) accesses; a
//!   sampled trace runs a cache of size × R (libCacheSim's spatial sampling).
//!
//! No printing: progress goes to a callback.

use std::collections::BinaryHeap;

use foldhash::fast::FixedState;

use crate::policy::{Policy, PolicyKind};
use crate::trace::{LineAccess, TraceError};

type Map<V> = std::collections::HashMap<u64, V, FixedState>;

/// SHARDS' modulus: rates are multiples of 2^-24.
const P: u64 = 1 << 24;

/// Murmur3's 64-bit finaliser: a fixed hash, so a sample is the same lines
/// on every run and every machine.
#[inline]
pub fn hash_line(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// A histogram of reuse distances in lines, with buckets `width` lines wide
/// (1 for the exact curve, 1/R for SHARDS), weighted so counts can be
/// rescaled when a fixed-size sample lowers its rate.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Histogram {
    /// Lines per bucket; bucket i holds distances in ((i-1)·width, i·width].
    pub width: f64,
    /// Weight per bucket (index 0 is unused).
    pub counts: Vec<f64>,
    /// First accesses: misses at every size.
    pub cold: f64,
    /// All accesses represented.
    pub total: f64,
}

impl Histogram {
    fn new(width: f64) -> Histogram {
        Histogram { width, counts: vec![0.0], cold: 0.0, total: 0.0 }
    }

    #[inline]
    fn add(&mut self, distance_lines: f64, w: f64) {
        let i = ((distance_lines / self.width).ceil() as usize).max(1);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0.0);
        }
        self.counts[i] += w;
        self.total += w;
    }

    fn scale(&mut self, f: f64) {
        self.counts.iter_mut().for_each(|c| *c *= f);
        self.cold *= f;
        self.total *= f;
    }

    /// The miss ratio of an LRU cache of `lines` lines.
    pub fn miss_ratio(&self, lines: u64) -> f64 {
        if self.total <= 0.0 {
            return 0.0;
        }
        let last = ((lines as f64 / self.width).floor() as usize).min(self.counts.len() - 1);
        if last == 0 {
            return 1.0;
        }
        let hits: f64 = self.counts[1..=last].iter().sum();
        ((self.total - hits) / self.total).clamp(0.0, 1.0)
    }

    /// The smallest LRU size (lines) whose hit ratio reaches `target`, or
    /// None when cold misses alone keep it below.
    pub fn lines_for_hit_ratio(&self, target: f64) -> Option<u64> {
        let need = target * self.total;
        let mut hits = 0.0;
        for (i, c) in self.counts.iter().enumerate().skip(1) {
            hits += c;
            // A little slack for the float sum of many weights.
            if hits >= need * (1.0 - 1e-12) && *c > 0.0 {
                return Some(((i as f64) * self.width).ceil() as u64);
            }
        }
        None
    }
}

/// Stack distances by Mattson's algorithm over a Fenwick tree.
pub struct StackDistance {
    last: Map<u32>,
    fen: Vec<u32>,
    now: u32,
    live: u32,
}

impl Default for StackDistance {
    fn default() -> Self {
        StackDistance::new()
    }
}

impl StackDistance {
    /// An empty stack.
    pub fn new() -> StackDistance {
        StackDistance { last: Map::default(), fen: vec![0; 1 << 16], now: 0, live: 0 }
    }

    /// Distinct lines seen (and not removed).
    pub fn distinct(&self) -> usize {
        self.live as usize
    }

    #[inline]
    fn add(&mut self, mut i: usize, v: i32) {
        let n = self.fen.len();
        while i < n {
            self.fen[i] = self.fen[i].wrapping_add_signed(v);
            i += i & i.wrapping_neg();
        }
    }

    #[inline]
    fn prefix(&self, mut i: usize) -> u32 {
        let mut s = 0;
        while i > 0 {
            s += self.fen[i];
            i &= i - 1;
        }
        s
    }

    /// Renumbers the live positions 1..=m and rebuilds the tree with room
    /// for as many accesses again.
    fn compact(&mut self) {
        let mut live: Vec<(u32, u64)> = self.last.iter().map(|(&k, &p)| (p, k)).collect();
        live.sort_unstable();
        let m = live.len();
        let size = (2 * m + (1 << 16)).next_power_of_two();
        self.fen = vec![0; size];
        for (i, (_, k)) in live.iter().enumerate() {
            self.last.insert(*k, i as u32 + 1);
            self.fen[i + 1] = 1;
        }
        // Linear Fenwick build: push each node's sum to its parent.
        for i in 1..size {
            let j = i + (i & i.wrapping_neg());
            if j < size {
                self.fen[j] += self.fen[i];
            }
        }
        self.now = m as u32;
    }

    /// Records an access; returns its stack distance (≥ 1), or None for a
    /// first access.
    #[inline]
    pub fn access(&mut self, key: u64) -> Option<u64> {
        if self.now as usize + 1 >= self.fen.len() {
            self.compact();
        }
        self.now += 1;
        let now = self.now;
        let old = self.last.insert(key, now);
        let d = match old {
            Some(p) => {
                let d = self.live - self.prefix(p as usize) + 1;
                self.add(p as usize, -1);
                Some(d as u64)
            }
            None => {
                self.live += 1;
                None
            }
        };
        self.add(now as usize, 1);
        d
    }

    /// Forgets a line (SHARDS fixed-size drops lines from the sample).
    pub fn remove(&mut self, key: u64) {
        if let Some(p) = self.last.remove(&key) {
            self.add(p as usize, -1);
            self.live -= 1;
        }
    }
}

/// How the LRU curve is computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Every access (exact).
    Exact,
    /// SHARDS at a fixed rate R in (0, 1].
    Rate(f64),
    /// SHARDS starting at rate R, keeping at most `max_lines` sampled lines.
    FixedSize {
        /// The starting rate.
        rate: f64,
        /// The most lines kept in the sample.
        max_lines: usize,
    },
}

/// The LRU curve's pass: exact or SHARDS.
pub struct LruCurve {
    sd: StackDistance,
    hist: Histogram,
    threshold: u64,
    seen: u64,
    sampled: u64,
    fixed: Option<(usize, BinaryHeap<(u64, u64)>)>,
    heap_keys: std::collections::HashSet<u64, FixedState>,
    adjust: bool,
    /// Stack distances are counted (off when no LRU curve is asked for:
    /// the pass then only samples).
    distances: bool,
}

impl LruCurve {
    /// A new pass.
    pub fn new(s: Sampling) -> LruCurve {
        let (rate, fixed, adjust) = match s {
            Sampling::Exact => (1.0, None, false),
            Sampling::Rate(r) => (r, None, true),
            Sampling::FixedSize { rate, max_lines } => {
                (rate, Some((max_lines.max(1), BinaryHeap::new())), true)
            }
        };
        let threshold = ((rate * P as f64).round() as u64).clamp(1, P);
        LruCurve {
            sd: StackDistance::new(),
            hist: Histogram::new(P as f64 / threshold as f64),
            threshold,
            seen: 0,
            sampled: 0,
            fixed,
            heap_keys: Default::default(),
            adjust,
            distances: true,
        }
    }

    /// The current sampling rate.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / P as f64
    }

    /// Whether `key` is in the sample at the current rate.
    #[inline]
    pub fn sampled(&self, key: u64) -> bool {
        self.threshold == P || hash_line(key) % P < self.threshold
    }

    /// Records one access.
    #[inline]
    pub fn access(&mut self, key: u64) {
        self.seen += 1;
        if self.threshold == P && self.fixed.is_none() {
            self.record(key);
            return;
        }
        let h = hash_line(key) % P;
        if h >= self.threshold {
            return;
        }
        if let Some((max, heap)) = &mut self.fixed {
            if self.heap_keys.insert(key) {
                heap.push((h, key));
                if heap.len() > *max {
                    // Lower T to the largest hash and drop every line at it.
                    let top = heap.peek().expect("heap over its size").0;
                    while heap.peek().is_some_and(|&(hh, _)| hh == top) {
                        let (_, k) = heap.pop().expect("peeked");
                        self.heap_keys.remove(&k);
                        self.sd.remove(k);
                    }
                    let old = self.threshold;
                    self.threshold = top.max(1);
                    self.hist.scale(self.threshold as f64 / old as f64);
                    if h >= self.threshold {
                        return;
                    }
                }
            }
        }
        self.record(key);
    }

    #[inline]
    fn record(&mut self, key: u64) {
        self.sampled += 1;
        if !self.distances {
            return;
        }
        match self.sd.access(key) {
            Some(d) => {
                let lines = d as f64 * P as f64 / self.threshold as f64;
                self.hist.add(lines, 1.0);
            }
            None => {
                self.hist.cold += 1.0;
                self.hist.total += 1.0;
            }
        }
    }

    /// Distinct lines, estimated from the sample (exact without sampling).
    pub fn footprint(&self) -> u64 {
        (self.sd.distinct() as f64 / self.rate()).round() as u64
    }

    /// The histogram, with SHARDS-adj applied for fixed-rate sampling.
    pub fn finish(mut self) -> Histogram {
        if self.adjust && self.hist.total > 0.0 {
            // Each access stands for R_final of an access once the counts
            // are rescaled, so N·R_final is expected for fixed-size too.
            let expected = self.seen as f64 * self.rate();
            let diff = expected - self.hist.total;
            if self.hist.counts.len() < 2 {
                self.hist.counts.resize(2, 0.0);
            }
            // The first bucket may go below zero: that is the correction
            // for hot lines the sample over-represents (miss ratios are
            // clamped to [0, 1] when read).
            self.hist.counts[1] += diff;
            self.hist.total += diff;
        }
        self.hist
    }
}

/// Hits and accesses of one simulated cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct SimResult {
    /// Accesses simulated.
    pub accesses: u64,
    /// Of which hits.
    pub hits: u64,
}

impl SimResult {
    /// Misses over accesses (0 for no accesses).
    pub fn miss_ratio(&self) -> f64 {
        if self.accesses == 0 {
            0.0
        } else {
            (self.accesses - self.hits) as f64 / self.accesses as f64
        }
    }
}

/// Runs `kind` with `lines` lines over `keys`.
pub fn simulate(kind: PolicyKind, lines: usize, keys: &[u64]) -> SimResult {
    use crate::policy::{Arc, Clock, Lru, S3Fifo, Sieve, TwoQ};
    // One loop per concrete type, so the policy's calls inline.
    fn run<P: Policy>(mut p: P, keys: &[u64]) -> SimResult {
        let mut hits = 0u64;
        for &k in keys {
            hits += p.access(k).0 as u64;
        }
        SimResult { accesses: keys.len() as u64, hits }
    }
    match kind {
        PolicyKind::Lru => run(Lru::new(lines), keys),
        PolicyKind::Clock => run(Clock::new(lines), keys),
        PolicyKind::Arc => run(Arc::new(lines), keys),
        PolicyKind::TwoQ => run(TwoQ::new(lines), keys),
        PolicyKind::S3Fifo => run(S3Fifo::new(lines), keys),
        PolicyKind::Sieve => run(Sieve::new(lines), keys),
    }
}

/// A trace's lines renumbered 0.. in order of first access: a policy over
/// dense ids ([`crate::policy::Direct`]) finds a line's node by indexing,
/// not hashing. Renumbering is one-to-one, so every policy makes the same
/// choices on the ids as on the lines.
#[derive(Debug, Clone)]
pub struct DenseKeys {
    /// One id per access.
    pub ids: Vec<u32>,
    /// Distinct lines: the ids are `0..distinct`.
    pub distinct: usize,
}

impl DenseKeys {
    /// Renumbers `keys`; None when there are too many distinct lines for a
    /// u32 id.
    pub fn new(keys: &[u64]) -> Option<DenseKeys> {
        const NONE: u32 = u32::MAX;
        let mut ids = Vec::with_capacity(keys.len());
        let mut next = 0u32;
        let max = keys.iter().copied().max().unwrap_or(0);
        // Lines of a device or a synthetic trace are small numbers: a table
        // indexed by line is quicker than a hash map when it is not much
        // larger than the trace.
        if max < (keys.len() as u64).saturating_mul(4).max(1 << 20) {
            let mut table = vec![NONE; max as usize + 1];
            for &k in keys {
                let t = &mut table[k as usize];
                if *t == NONE {
                    *t = next;
                    next += 1;
                }
                ids.push(*t);
            }
        } else {
            let mut map: Map<u32> = Map::default();
            for &k in keys {
                let id = *map.entry(k).or_insert(next);
                if id == next {
                    next = next.checked_add(1).filter(|&n| n < NONE - 1)?;
                }
                ids.push(id);
            }
        }
        Some(DenseKeys { ids, distinct: next as usize })
    }
}

/// [`simulate`] over renumbered lines: the same hits, faster.
pub fn simulate_dense(kind: PolicyKind, lines: usize, keys: &DenseKeys) -> SimResult {
    use crate::policy::{Arc, Clock, Lru, S3Fifo, Sieve, TwoQ};
    fn run<P: Policy>(mut p: P, ids: &[u32]) -> SimResult {
        let mut hits = 0u64;
        for &k in ids {
            hits += p.access(k as u64).0 as u64;
        }
        SimResult { accesses: ids.len() as u64, hits }
    }
    let (ids, n) = (&keys.ids[..], keys.distinct);
    match kind {
        PolicyKind::Lru => run(Lru::dense(lines, n), ids),
        PolicyKind::Clock => run(Clock::dense(lines, n), ids),
        PolicyKind::Arc => run(Arc::dense(lines, n), ids),
        PolicyKind::TwoQ => run(TwoQ::dense(lines, n), ids),
        PolicyKind::S3Fifo => run(S3Fifo::dense(lines, n), ids),
        PolicyKind::Sieve => run(Sieve::dense(lines, n), ids),
    }
}

/// CPU time this thread has run, from Linux's scheduler statistics (the
/// first field of /proc/thread-self/schedstat, in ns); None elsewhere.
fn thread_cpu() -> Option<std::time::Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok().map(std::time::Duration::from_nanos)
}

/// Sizes from `lo` to `hi` bytes, doubling (`hi` itself is always included).
pub fn doubling(lo: u64, hi: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = lo.max(1);
    while s < hi {
        v.push(s);
        s = s.saturating_mul(2);
    }
    v.push(hi.max(lo));
    v
}

/// The knee of a curve by Kneedle (Satopää et al., 2011) on log2(size) and
/// hit ratio, both normalised to [0, 1]: the point farthest above the chord
/// from the first to the last point. None if the curve is flat.
pub fn knee(sizes: &[u64], miss: &[f64]) -> Option<u64> {
    if sizes.len() < 3 {
        return None;
    }
    let xs: Vec<f64> = sizes.iter().map(|&s| (s.max(1) as f64).log2()).collect();
    let ys: Vec<f64> = miss.iter().map(|m| 1.0 - m).collect();
    let (x0, x1) = (xs[0], xs[xs.len() - 1]);
    let (y0, y1) = (ys.iter().cloned().fold(f64::MAX, f64::min), ys.iter().cloned().fold(f64::MIN, f64::max));
    if x1 <= x0 || y1 - y0 < 1e-9 {
        return None;
    }
    let mut best = (0.0, None);
    for i in 0..xs.len() {
        let d = (ys[i] - y0) / (y1 - y0) - (xs[i] - x0) / (x1 - x0);
        if d > best.0 {
            best = (d, Some(sizes[i]));
        }
    }
    best.1
}

/// What to compute over a trace.
#[derive(Debug, Clone)]
pub struct MrcConfig {
    /// Bytes per cache line.
    pub line: u64,
    /// Cache sizes in bytes for the table and simulations; empty for
    /// [`default_sizes`].
    pub sizes: Vec<u64>,
    /// Policies; LRU comes from stack distances, the others from simulation.
    pub policies: Vec<PolicyKind>,
    /// Exact or SHARDS.
    pub sampling: Sampling,
    /// A hit ratio whose cache size to find.
    pub target: Option<f64>,
}

/// Progress through a trace.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Line accesses read.
    pub accesses: u64,
}

/// One policy's curve.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Curve {
    /// The policy.
    pub policy: PolicyKind,
    /// `stack-distance` (all sizes in one pass) or `simulation`.
    pub method: &'static str,
    /// Simulated accesses per second of one thread, over all sizes (the
    /// simulation only, not reading the trace), per second of the thread's
    /// CPU time where Linux reports it (so a busy machine's other work does
    /// not count), else of wall time; None for stack distance.
    pub sim_accesses_per_s: Option<f64>,
    /// Miss ratio per size of [`MrcResult::sizes`].
    pub miss_ratio: Vec<f64>,
    /// The knee (bytes), see [`knee`].
    pub knee: Option<u64>,
    /// The smallest size (bytes) reaching the target hit ratio: exact for
    /// LRU, the smallest of the sizes run for the others; None if not reached.
    pub size_for_target: Option<u64>,
}

/// Everything `cache mrc` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MrcResult {
    /// Bytes per line.
    pub line: u64,
    /// Line accesses in the trace.
    pub accesses: u64,
    /// Distinct lines (estimated when sampled).
    pub footprint_lines: u64,
    /// `exact`, `shards` or `shards-fixed-size`.
    pub method: &'static str,
    /// The pass was stopped early: the curves cover the accesses read.
    pub interrupted: bool,
    /// The sampling rate at the end (1 when exact).
    pub sample_rate: f64,
    /// Accesses in the sample.
    pub sampled_accesses: u64,
    /// The target hit ratio asked for.
    pub target: Option<f64>,
    /// Cache sizes in bytes.
    pub sizes: Vec<u64>,
    /// One per policy asked for.
    pub curves: Vec<Curve>,
    /// LRU's miss ratio on a fine grid (8 points per doubling) for charts:
    /// (bytes, miss ratio); empty when LRU was not asked for.
    pub lru_fine: Vec<(u64, f64)>,
}

/// Reads `accesses` once: the LRU curve by stack distance (exact or SHARDS)
/// and, for the other policies, the (sampled) accesses kept for simulation
/// at every size, run on up to `threads` threads. `progress` is called every
/// 2^20 accesses; when it returns false the pass stops and the result covers
/// what was read, marked interrupted.
pub fn analyze<I>(
    accesses: I,
    cfg: &MrcConfig,
    threads: usize,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<MrcResult, TraceError>
where
    I: Iterator<Item = Result<LineAccess, TraceError>>,
{
    let mut lru = LruCurve::new(cfg.sampling);
    let need_keys = cfg.policies.iter().any(|&p| p != PolicyKind::Lru);
    // Without LRU the stack distances are not needed: the footprint comes
    // from the simulations' renumbering instead.
    let want_lru = cfg.policies.contains(&PolicyKind::Lru) || !need_keys;
    lru.distances = want_lru;
    let mut keys: Vec<u64> = Vec::new();
    let mut n = 0u64;
    let mut interrupted = false;
    for a in accesses {
        let a = a?;
        n += 1;
        lru.access(a.line);
        if need_keys && lru.sampled(a.line) {
            keys.push(a.line);
        }
        if n & 0xF_FFFF == 0 && !progress(Progress { accesses: n }) {
            interrupted = true;
            break;
        }
    }
    progress(Progress { accesses: n });
    let rate = lru.rate();
    if need_keys && rate < 1.0 {
        // A fixed-size sample may have lowered its rate after keeping some
        // lines: keep only those still in the sample.
        keys.retain(|&k| lru.sampled(k));
    }
    // Once for every simulation, outside their timing (libCacheSim too maps
    // a trace's ids before it simulates).
    let dense = if need_keys { DenseKeys::new(&keys) } else { None };
    let footprint = if want_lru {
        lru.footprint()
    } else {
        // The distinct sampled lines, as the stack would have counted them.
        let distinct = dense
            .as_ref()
            .map(|d| d.distinct)
            .unwrap_or_else(|| keys.iter().collect::<std::collections::HashSet<_, FixedState>>().len());
        (distinct as f64 / rate).round() as u64
    };
    let sampled = lru.sampled;
    let expected = lru.seen as f64 * rate;
    let hist = lru.finish();
    let cfg = &MrcConfig {
        sizes: if cfg.sizes.is_empty() { default_sizes(footprint, cfg.line) } else { cfg.sizes.clone() },
        ..cfg.clone()
    };
    let lines_of = |bytes: u64| bytes / cfg.line;

    let (sim, sim_secs) = simulate_all(cfg, &keys, dense.as_ref(), rate, expected, threads);

    let curves = cfg
        .policies
        .iter()
        .enumerate()
        .map(|(pi, &p)| {
            if p == PolicyKind::Lru {
                let miss: Vec<f64> = cfg.sizes.iter().map(|&s| hist.miss_ratio(lines_of(s))).collect();
                let fine = fine_sizes(&cfg.sizes, cfg.line);
                let fine_miss: Vec<f64> = fine.iter().map(|&s| hist.miss_ratio(lines_of(s))).collect();
                Curve {
                    policy: p,
                    method: "stack-distance",
                    sim_accesses_per_s: None,
                    knee: knee(&fine, &fine_miss),
                    size_for_target: cfg
                        .target
                        .and_then(|t| hist.lines_for_hit_ratio(t))
                        .map(|l| l * cfg.line),
                    miss_ratio: miss,
                }
            } else {
                let miss = sim[pi].clone();
                Curve {
                    policy: p,
                    method: "simulation",
                    sim_accesses_per_s: (sim_secs[pi] > 0.0)
                        .then(|| (keys.len() * cfg.sizes.len()) as f64 / sim_secs[pi]),
                    knee: knee(&cfg.sizes, &miss),
                    size_for_target: cfg.target.and_then(|t| {
                        cfg.sizes.iter().zip(&miss).find(|(_, &m)| 1.0 - m >= t).map(|(&s, _)| s)
                    }),
                    miss_ratio: miss,
                }
            }
        })
        .collect();
    let fine = fine_sizes(&cfg.sizes, cfg.line);
    let lru_fine =
        if want_lru { fine.iter().map(|&s| (s, hist.miss_ratio(lines_of(s)))).collect() } else { Vec::new() };
    Ok(MrcResult {
        line: cfg.line,
        accesses: n,
        footprint_lines: footprint,
        method: match cfg.sampling {
            Sampling::Exact => "exact",
            Sampling::Rate(_) => "shards",
            Sampling::FixedSize { .. } => "shards-fixed-size",
        },
        interrupted,
        sample_rate: rate,
        sampled_accesses: sampled,
        target: cfg.target,
        sizes: cfg.sizes.clone(),
        curves,
        lru_fine,
    })
}

/// The simulations: one job per (policy other than LRU, size), spread over
/// `threads` threads, on the sampled `keys` (a cache of `rate` × its lines),
/// renumbered as `dense` when they could be.
/// Per policy and size the miss ratio (SHARDS-adjusted against `expected`
/// accesses when sampled), and per policy the CPU seconds its jobs took.
fn simulate_all(
    cfg: &MrcConfig,
    keys: &[u64],
    dense: Option<&DenseKeys>,
    rate: f64,
    expected: f64,
    threads: usize,
) -> (Vec<Vec<f64>>, Vec<f64>) {
    let jobs: Vec<(usize, usize, PolicyKind, usize)> = cfg
        .policies
        .iter()
        .enumerate()
        .filter(|(_, &p)| p != PolicyKind::Lru)
        .flat_map(|(pi, &p)| {
            cfg.sizes
                .iter()
                .enumerate()
                .map(move |(si, &s)| (pi, si, p, ((s / cfg.line) as f64 * rate).round() as usize))
        })
        .collect();
    let mut sim = vec![vec![f64::NAN; cfg.sizes.len()]; cfg.policies.len()];
    let mut sim_secs = vec![0.0f64; cfg.policies.len()];
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(jobs.len().max(1)) {
            s.spawn(|| loop {
                let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(pi, si, kind, lines)) = jobs.get(j) else { break };
                // A cache smaller than one sampled line holds nothing.
                let (t0, c0) = (std::time::Instant::now(), thread_cpu());
                let m = if lines == 0 {
                    1.0
                } else {
                    let r = match dense {
                        Some(d) => simulate_dense(kind, lines, d),
                        None => simulate(kind, lines, keys),
                    };
                    // SHARDS-adj for simulations too: the misses over the
                    // accesses the sample stands for (N·R), as for LRU.
                    if rate < 1.0 && expected > 0.0 {
                        ((r.accesses - r.hits) as f64 / expected).min(1.0)
                    } else {
                        r.miss_ratio()
                    }
                };
                let secs = match (c0, thread_cpu()) {
                    (Some(a), Some(b)) => b.saturating_sub(a).as_secs_f64(),
                    _ => t0.elapsed().as_secs_f64(),
                };
                results.lock().expect("no panics hold the lock").push((pi, si, m, secs));
            });
        }
    });
    for (pi, si, m, secs) in results.into_inner().expect("threads done") {
        sim[pi][si] = m;
        sim_secs[pi] += secs;
    }
    (sim, sim_secs)
}

/// Without `--sizes`: doubling up to the footprint rounded up to a power of
/// two, over ten doublings (or from one line).
pub fn default_sizes(footprint_lines: u64, line: u64) -> Vec<u64> {
    let hi = footprint_lines.max(1).saturating_mul(line).next_power_of_two();
    doubling((hi >> 10).max(line), hi)
}

/// 8 sizes per doubling from the smallest to the largest size, whole lines.
fn fine_sizes(sizes: &[u64], line: u64) -> Vec<u64> {
    let (Some(&lo), Some(&hi)) = (sizes.iter().min(), sizes.iter().max()) else { return Vec::new() };
    let mut v: Vec<u64> = Vec::new();
    let mut x = (lo.max(line) as f64).log2();
    let end = (hi.max(line) as f64).log2();
    while x <= end + 1e-9 {
        let s = (2f64.powf(x) / line as f64).round() as u64 * line;
        if v.last() != Some(&s) {
            v.push(s);
        }
        x += 0.125;
    }
    if v.last() != Some(&hi) && hi >= line {
        v.push(hi / line * line);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::Rng;

    fn exact(keys: &[u64]) -> Histogram {
        let mut c = LruCurve::new(Sampling::Exact);
        keys.iter().for_each(|&k| c.access(k));
        c.finish()
    }

    /// Distances by brute force: distinct keys since the previous access.
    fn naive(keys: &[u64]) -> Vec<Option<u64>> {
        (0..keys.len())
            .map(|i| {
                let prev = (0..i).rev().find(|&j| keys[j] == keys[i])?;
                let mut set = std::collections::HashSet::new();
                keys[prev + 1..=i].iter().for_each(|k| {
                    set.insert(*k);
                });
                Some(set.len() as u64)
            })
            .collect()
    }

    #[test]
    fn fenwick_distances_match_brute_force_across_compactions() {
        let mut r = Rng(7);
        let keys: Vec<u64> = (0..3000).map(|_| r.below(200)).collect();
        let mut sd = StackDistance::new();
        sd.fen = vec![0; 256]; // force many compactions
        let got: Vec<Option<u64>> = keys.iter().map(|&k| sd.access(k)).collect();
        assert_eq!(got, naive(&keys));
    }

    /// A loop over k lines: after the first pass every access has distance
    /// exactly k, so LRU misses everything below k lines and only the cold
    /// misses at k.
    #[test]
    fn a_loop_over_k_lines_hits_only_at_k() {
        let k = 1000u64;
        let rounds = 20u64;
        let keys: Vec<u64> = (0..rounds).flat_map(|_| 0..k).collect();
        let h = exact(&keys);
        assert_eq!(h.miss_ratio(k - 1), 1.0);
        assert_eq!(h.miss_ratio(k), 1.0 / rounds as f64);
        assert_eq!(h.miss_ratio(10 * k), 1.0 / rounds as f64);
        assert_eq!(h.lines_for_hit_ratio(0.9), Some(k));
        assert_eq!(h.lines_for_hit_ratio(0.99), None);
        // And the simulated LRU agrees at every size.
        for c in [1, k - 1, k, k + 1] {
            assert_eq!(
                simulate(PolicyKind::Lru, c as usize, &keys).miss_ratio(),
                h.miss_ratio(c),
                "size {c}"
            );
        }
    }

    /// Uniform random accesses over F lines: an LRU of c lines hits with
    /// probability c/F once warm.
    #[test]
    fn uniform_random_hits_size_over_footprint() {
        let f = 10_000u64;
        let mut r = Rng(3);
        let keys: Vec<u64> = (0..400_000).map(|_| r.below(f)).collect();
        let h = exact(&keys);
        let cold = f as f64 / keys.len() as f64;
        for c in [1000, 2500, 5000, 7500] {
            let want = 1.0 - c as f64 / f as f64;
            // Warm-up: the first F accesses mostly miss; allow for them and noise.
            let got = h.miss_ratio(c);
            assert!((got - want).abs() < cold + 0.01, "size {c}: {got} vs {want}");
        }
    }

    #[test]
    fn exact_histogram_equals_lru_simulation_on_random_traces() {
        let mut r = Rng(11);
        let keys: Vec<u64> =
            (0..50_000).map(|i| if i % 2 == 0 { r.below(100) } else { r.below(5000) }).collect();
        let h = exact(&keys);
        for c in [1usize, 10, 99, 100, 1000, 4000, 6000] {
            let s = simulate(PolicyKind::Lru, c, &keys);
            assert!((s.miss_ratio() - h.miss_ratio(c as u64)).abs() < 1e-12, "size {c}");
        }
    }

    /// Zipf(0.8) over n lines, by inverse CDF.
    pub(crate) fn zipf(n: u64, len: usize, seed: u64) -> Vec<u64> {
        let mut cdf = Vec::with_capacity(n as usize);
        let mut s = 0.0;
        for i in 1..=n {
            s += 1.0 / (i as f64).powf(0.8);
            cdf.push(s);
        }
        let mut r = Rng(seed);
        (0..len)
            .map(|_| {
                let u = (r.next() >> 11) as f64 / (1u64 << 53) as f64 * s;
                // Scatter ranks so hot lines are not neighbours.
                hash_line(cdf.partition_point(|&c| c < u) as u64)
            })
            .collect()
    }

    fn mae(a: &Histogram, b: &Histogram, sizes: &[u64]) -> f64 {
        sizes.iter().map(|&c| (a.miss_ratio(c) - b.miss_ratio(c)).abs()).sum::<f64>() / sizes.len() as f64
    }

    /// FAST'15's claim at its own scale: 1 % fixed-rate and an 8,000-line
    /// fixed-size sample both stay within 0.01 of the exact curve (mean over
    /// 40 sizes) on a Zipf(0.8) trace of 5 M accesses to 1 M lines.
    #[test]
    fn shards_is_within_001_of_exact_on_zipf() {
        let keys = zipf(1_000_000, 5_000_000, 1);
        let e = exact(&keys);
        let sizes: Vec<u64> = (1..=40).map(|i| i * 25000).collect();
        let mut s = LruCurve::new(Sampling::Rate(0.01));
        keys.iter().for_each(|&k| s.access(k));
        let fp = s.footprint() as f64;
        assert!((fp / e_footprint(&keys) - 1.0).abs() < 0.05, "footprint {fp}");
        let err = mae(&e, &s.finish(), &sizes);
        assert!(err < 0.01, "fixed-rate MAE {err}");
        let mut f = LruCurve::new(Sampling::FixedSize { rate: 0.1, max_lines: 8000 });
        keys.iter().for_each(|&k| f.access(k));
        assert!(f.rate() < 0.01, "the rate fell to keep 8000 lines: {}", f.rate());
        let err = mae(&e, &f.finish(), &sizes);
        assert!(err < 0.01, "fixed-size MAE {err}");
    }

    fn e_footprint(keys: &[u64]) -> f64 {
        keys.iter().collect::<std::collections::HashSet<_>>().len() as f64
    }

    /// Renumbering changes no choice: every policy hits the same on the
    /// dense ids as on the lines, on a Zipf trace (the one whose hits
    /// policy::reference pins) and on sparse lines (the hash-map renumbering).
    #[test]
    fn dense_simulation_hits_exactly_as_the_simulation_over_lines() {
        let zipf: Vec<u64> =
            crate::synth::Zipf::new(100_000, 0.8, 1, 0.0, 7).take(400_000).map(|r| r.offset).collect();
        let sparse: Vec<u64> = zipf.iter().map(|&k| hash_line(k) | 1 << 63).collect();
        for keys in [&zipf, &sparse] {
            let d = DenseKeys::new(keys).unwrap();
            assert_eq!(d.distinct, e_footprint(keys) as usize);
            for kind in PolicyKind::ALL {
                for lines in [1_000, 10_000, 40_000] {
                    assert_eq!(
                        simulate_dense(kind, lines, &d),
                        simulate(kind, lines, keys),
                        "{kind} {lines}"
                    );
                }
            }
        }
    }

    /// Without LRU the stack distances are skipped: the footprint, the
    /// sample and the other curves are what they are with LRU, exact and
    /// sampled, and there is no LRU grid.
    #[test]
    fn without_lru_the_same_footprint_and_curves() {
        let keys = zipf(50_000, 300_000, 5);
        for sampling in
            [Sampling::Exact, Sampling::Rate(0.1), Sampling::FixedSize { rate: 0.5, max_lines: 2000 }]
        {
            let run = |policies: Vec<PolicyKind>| {
                let cfg = MrcConfig { line: 4096, sizes: Vec::new(), policies, sampling, target: None };
                let it = keys.iter().map(|&k| Ok(LineAccess { line: k, write: false }));
                analyze(it, &cfg, 1, &mut |_| true).unwrap()
            };
            let with = run(vec![PolicyKind::Lru, PolicyKind::Arc, PolicyKind::S3Fifo]);
            let without = run(vec![PolicyKind::Arc, PolicyKind::S3Fifo]);
            let key = |r: &MrcResult| {
                (r.footprint_lines, r.sampled_accesses, r.sample_rate, r.sizes.clone(), r.accesses)
            };
            assert_eq!(key(&with), key(&without), "{sampling:?}");
            assert_eq!(with.curves[1].miss_ratio, without.curves[0].miss_ratio, "{sampling:?}");
            assert_eq!(with.curves[2].miss_ratio, without.curves[1].miss_ratio, "{sampling:?}");
            assert!(!with.lru_fine.is_empty() && without.lru_fine.is_empty());
        }
    }

    #[test]
    fn knee_and_doubling() {
        assert_eq!(doubling(64, 1024), vec![64, 128, 256, 512, 1024]);
        assert_eq!(doubling(64, 100), vec![64, 100]);
        // A curve that drops at 256 then flattens: the knee is there.
        let sizes = doubling(64, 4096);
        let miss = [0.9, 0.8, 0.2, 0.18, 0.17, 0.16, 0.15];
        assert_eq!(knee(&sizes, &miss), Some(256));
        assert_eq!(knee(&sizes, &[0.5; 7]), None);
        // 1000 lines of 64 KiB: up to 64000 KiB rounded to 64 MiB, ten doublings down.
        let d = default_sizes(1000, 65536);
        assert_eq!((d[0], d[d.len() - 1], d.len()), (65536, 64 << 20, 11));
    }

    #[test]
    fn analyze_reports_lru_exactly_and_simulates_the_rest() {
        let keys: Vec<u64> = (0..10).flat_map(|_| 0..100u64).collect();
        let cfg = MrcConfig {
            line: 4096,
            sizes: vec![50 * 4096, 100 * 4096],
            policies: vec![PolicyKind::Lru, PolicyKind::S3Fifo],
            sampling: Sampling::Exact,
            target: Some(0.9),
        };
        let it = keys.iter().map(|&k| Ok(LineAccess { line: k, write: false }));
        let r = analyze(it, &cfg, 2, &mut |_| true).unwrap();
        assert_eq!((r.accesses, r.footprint_lines, r.sampled_accesses), (1000, 100, 1000));
        assert_eq!(r.curves[0].miss_ratio, vec![1.0, 0.1]);
        assert_eq!(r.curves[0].size_for_target, Some(100 * 4096));
        assert_eq!(r.curves[1].method, "simulation");
        assert_eq!(r.curves[1].miss_ratio[1], 0.1);
        // Half the loop's size: a line leaves S and its ghost entry is gone
        // (45 ghosts, 95 evictions) before it comes back, so every access misses.
        assert_eq!(r.curves[1].miss_ratio[0], 1.0);
    }
}
