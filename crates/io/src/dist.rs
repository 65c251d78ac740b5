//! Where each I/O goes: sequential stripes per thread, or random blocks
//! drawn from the access distribution (uniform, zipf:θ, hot:P/Q). Uniform
//! draws are independent (fio's `--norandommap`) or, with the random map,
//! a fresh permutation of the blocks each pass, so every block is visited
//! once per pass (fio's default), per thread.
//!
//! Set-up is bounded whatever the target's size: the random map is a
//! keyed permutation (no bitmap), and zipf's normalising sum is computed
//! over at most [`ZETA_TERMS`] terms with the rest in closed form.

use crate::profile::{Distribution, Pattern, Profile};

/// The offset generator of one thread.
pub struct Offsets {
    kind: Kind,
    align: u64,
    rng: u64,
    /// Added to every offset: where the profile's span begins.
    base: u64,
}

enum Kind {
    /// Next offset, first and one-past-last offset of the stripe.
    Seq { next: u64, from: u64, to: u64, step: u64 },
    /// Random slot among `slots`; with `part`, only slots ≡ thread (mod part).
    Uniform { slots: u64, part: Option<(u64, u64)> },
    /// Each of `slots` once per pass, in a keyed pseudo-random order.
    Map { perm: Perm, part: Option<(u64, u64)> },
    /// Zipf over `slots` (Gray et al.), ranks scattered by a bijection.
    Zipf { slots: u64, theta: f64, zetan: f64, alpha: f64, eta: f64, mult: u64 },
    /// P of I/Os to the first `hot` slots.
    Hot { slots: u64, hot: u64, p: f64 },
}

/// Terms of zeta(n, θ) summed one by one; the rest is closed form. fio
/// caps the same sum at 10 M terms (lib/zipf.c, `ZIPF_MAX_GEN`, "1-2 s on
/// even slow machines") and drops the tail; here the tail is kept by the
/// Euler-Maclaurin formula, whose error past a million terms is below
/// 1e-12 of the sum, and set-up takes milliseconds on any device.
pub const ZETA_TERMS: u64 = 1 << 20;

/// zeta(n, θ) = Σ_{i=1..n} i^-θ.
fn zeta(n: u64, theta: f64) -> f64 {
    let m = n.min(ZETA_TERMS);
    let head: f64 = (1..=m).map(|i| (i as f64).powf(-theta)).sum();
    if n == m {
        return head;
    }
    // Σ_{i=a..b} f(i) ≈ ∫_a^b f + (f(a) + f(b))/2 + (f'(b) - f'(a))/12,
    // f(x) = x^-θ, over a = m + 1 .. b = n.
    let (a, b) = ((m + 1) as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let integral = (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta);
    head + integral + (f(a) + f(b)) / 2.0 + (df(b) - df(a)) / 12.0
}

/// A keyed pseudo-random permutation of 0..n: a 4-round Feistel network
/// over the next even power of two, cycle-walking past n (at most 4 steps
/// per value on average). A new key per pass gives a new order.
#[derive(Clone, Copy)]
pub struct Perm {
    n: u64,
    half: u32,
    keys: [u64; 4],
    next: u64,
}

impl Perm {
    fn new(n: u64, seed: u64) -> Perm {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        let mut p = Perm { n, half, keys: [0; 4], next: 0 };
        p.rekey(seed);
        p
    }

    fn rekey(&mut self, seed: u64) {
        let mut x = seed;
        for k in &mut self.keys {
            x = mix(x.wrapping_add(0x9E37_79B9_7F4A_7C15));
            *k = x;
        }
        self.next = 0;
    }

    fn permute(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut l, mut r) = (x >> self.half, x & mask);
        for k in self.keys {
            let f = mix(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half) | r
    }

    /// The next value of this pass, or None when the pass is done.
    fn step(&mut self) -> Option<u64> {
        let domain = 1u64 << (2 * self.half);
        while self.next < domain {
            let v = self.permute(self.next);
            self.next += 1;
            if v < self.n {
                return Some(v);
            }
        }
        None
    }
}

/// splitmix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Offsets {
    /// The generator for thread `t` of profile `p` over `size` bytes. With
    /// `partition`, threads use disjoint blocks (so verification never sees
    /// a block another thread is rewriting).
    pub fn new(p: &Profile, size: u64, t: usize, partition: bool) -> Result<Offsets, String> {
        let room = size.saturating_sub(p.offset);
        let span = p.span.unwrap_or(room).min(room);
        let align = p.alignment();
        if span < p.bs {
            return Err(format!(
                "{}: the span ({span} bytes) is smaller than one block ({} bytes)",
                p.name, p.bs
            ));
        }
        let slots = (span - p.bs) / align + 1;
        let threads = p.threads as u64;
        let rng = 0x2545_F491_4F6C_DD1D ^ ((t as u64 + 1) << 32) ^ span;
        let kind = match p.pattern {
            Pattern::Sequential => {
                let per = (slots / threads).max(1);
                let from_slot = (t as u64 * per).min(slots - 1);
                let to_slot = if t as u64 == threads - 1 { slots } else { (from_slot + per).min(slots) };
                let step = p.bs.max(align);
                let from = from_slot * align;
                let to = (to_slot * align).max(from + step);
                Kind::Seq { next: from, from, to, step }
            }
            Pattern::Random => match p.dist {
                Distribution::Uniform => {
                    let part = (partition && threads > 1 && slots >= threads).then_some((threads, t as u64));
                    if p.random_map {
                        let n = part.map_or(slots, |(k, _)| slots / k);
                        Kind::Map { perm: Perm::new(n, rng), part }
                    } else {
                        Kind::Uniform { slots, part }
                    }
                }
                Distribution::Zipf { theta } => {
                    let zetan = zeta(slots, theta);
                    let zeta2 = zeta(2, theta);
                    let alpha = 1.0 / (1.0 - theta);
                    let eta = (1.0 - (2.0 / slots as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
                    let mut mult = (0x9E37_79B9_7F4A_7C15 % slots.max(2)) | 1;
                    while gcd(mult, slots) != 1 {
                        mult += 2;
                    }
                    Kind::Zipf { slots, theta, zetan, alpha, eta, mult }
                }
                Distribution::Hot { p: hp, q } => Kind::Hot {
                    slots,
                    hot: ((slots as f64 * q / 100.0) as u64).clamp(1, slots),
                    p: hp / 100.0,
                },
            },
        };
        Ok(Offsets { kind, align, rng, base: p.offset })
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    #[inline]
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// The next offset.
    #[inline]
    pub fn next_offset(&mut self) -> u64 {
        self.base + self.next_in_span()
    }

    /// The next offset from the start of the span.
    fn next_in_span(&mut self) -> u64 {
        let align = self.align;
        match self.kind {
            Kind::Seq { next, from, to, step } => {
                let o = next;
                let mut n = next + step;
                if n + step > to + (step - step.min(to - from)) || n >= to {
                    n = from;
                }
                self.kind = Kind::Seq { next: n, from, to, step };
                o
            }
            Kind::Uniform { slots, part: None } => self.below(slots) * align,
            Kind::Uniform { slots, part: Some((k, t)) } => {
                let per = slots / k;
                (self.below(per) * k + t) * align
            }
            Kind::Map { ref mut perm, part } => {
                let v = match perm.step() {
                    Some(v) => v,
                    None => {
                        // A pass is done: a new order for the next one.
                        let seed = self.next_u64();
                        let Kind::Map { ref mut perm, .. } = self.kind else { unreachable!() };
                        perm.rekey(seed);
                        perm.step().expect("a pass holds at least one block")
                    }
                };
                match part {
                    None => v * align,
                    Some((k, t)) => (v * k + t) * align,
                }
            }
            Kind::Zipf { slots, theta, zetan, alpha, eta, mult } => {
                let u = self.unit();
                let uz = u * zetan;
                let rank = if uz < 1.0 {
                    0
                } else if uz < 1.0 + 0.5f64.powf(theta) {
                    1
                } else {
                    ((slots as f64) * (eta * u - eta + 1.0).powf(alpha)) as u64
                };
                let rank = rank.min(slots - 1);
                ((rank as u128 * mult as u128 % slots as u128) as u64) * align
            }
            Kind::Hot { slots, hot, p } => {
                if self.unit() < p || hot == slots {
                    self.below(hot) * align
                } else {
                    (hot + self.below(slots - hot)) * align
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(pattern: Pattern, dist: Distribution, threads: u32) -> Profile {
        let mut p = Profile::new("t");
        p.bs = 4096;
        p.pattern = pattern;
        p.dist = dist;
        p.threads = threads;
        p
    }

    #[test]
    fn sequential_stripes_cover_the_span_in_order_and_wrap() {
        let p = profile(Pattern::Sequential, Distribution::Uniform, 2);
        let mut a = Offsets::new(&p, 16 * 4096, 0, false).unwrap();
        let mut b = Offsets::new(&p, 16 * 4096, 1, false).unwrap();
        let xs: Vec<u64> = (0..9).map(|_| a.next_offset() / 4096).collect();
        assert_eq!(xs, [0, 1, 2, 3, 4, 5, 6, 7, 0]);
        assert_eq!(b.next_offset() / 4096, 8);
    }

    #[test]
    fn uniform_stays_in_the_span_aligned_and_partitioned() {
        let p = profile(Pattern::Random, Distribution::Uniform, 4);
        let mut o = Offsets::new(&p, 1 << 20, 2, true).unwrap();
        for _ in 0..10_000 {
            let x = o.next_offset();
            assert!(x + 4096 <= 1 << 20 && x.is_multiple_of(4096));
            assert_eq!((x / 4096) % 4, 2);
        }
    }

    #[test]
    fn an_offset_moves_every_pattern_into_its_part_of_the_target() {
        // A shard's part: blocks 100..150 of a 1000-block target.
        for (pattern, dist) in [
            (Pattern::Random, Distribution::Uniform),
            (Pattern::Sequential, Distribution::Uniform),
            (Pattern::Random, Distribution::Zipf { theta: 0.9 }),
            (Pattern::Random, Distribution::Hot { p: 90.0, q: 10.0 }),
        ] {
            let mut p = profile(pattern, dist, 2);
            (p.offset, p.span) = (100 * 4096, Some(50 * 4096));
            for t in 0..2 {
                let mut o = Offsets::new(&p, 1000 * 4096, t, true).unwrap();
                for _ in 0..5_000 {
                    let x = o.next_offset();
                    assert!((100 * 4096..150 * 4096).contains(&x), "{pattern:?} {x}");
                }
            }
        }
        // Without a span, the part runs from the offset to the end.
        let mut p = profile(Pattern::Random, Distribution::Uniform, 1);
        p.offset = 990 * 4096;
        let mut o = Offsets::new(&p, 1000 * 4096, 0, false).unwrap();
        assert!((0..1000).all(|_| (990 * 4096..1000 * 4096).contains(&o.next_offset())));
    }

    #[test]
    fn hot_sends_p_percent_to_q_percent() {
        let p = profile(Pattern::Random, Distribution::Hot { p: 90.0, q: 10.0 }, 1);
        let mut o = Offsets::new(&p, 1000 * 4096, 0, false).unwrap();
        let n = 100_000;
        let hot = (0..n).filter(|_| o.next_offset() < 100 * 4096).count();
        let share = hot as f64 / n as f64;
        assert!((share - 0.90).abs() < 0.01, "{share}");
    }

    #[test]
    fn zipf_matches_its_distribution() {
        // P(rank 0) = 1 / zeta(n, θ); the top rank must get that share.
        let theta = 1.2;
        let slots = 1000u64;
        let p = profile(Pattern::Random, Distribution::Zipf { theta }, 1);
        let mut o = Offsets::new(&p, slots * 4096, 0, false).unwrap();
        let mut counts = std::collections::HashMap::new();
        let n = 200_000;
        for _ in 0..n {
            *counts.entry(o.next_offset()).or_insert(0u64) += 1;
        }
        let mut v: Vec<u64> = counts.values().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        let expect = 1.0 / zeta(slots, theta);
        let got = v[0] as f64 / n as f64;
        assert!((got - expect).abs() / expect < 0.05, "top share {got}, expected {expect}");
        // The ten hottest blocks take most I/Os, and are not adjacent.
        let top10: u64 = v[..10].iter().sum();
        assert!(top10 as f64 / n as f64 > 0.5);
    }

    #[test]
    fn zeta_past_its_summed_terms_matches_the_exact_sum() {
        // Regression: the sum ran over every slot, seconds of set-up on a
        // large device inside the (then) measured window.
        for theta in [0.6, 1.2, 2.0] {
            let n = 3 * ZETA_TERMS + 12_345;
            let exact: f64 = (1..=n).map(|i| (i as f64).powf(-theta)).sum();
            let got = zeta(n, theta);
            assert!(((got - exact) / exact).abs() < 1e-9, "θ {theta}: {got} vs {exact}");
        }
        // A 16 TiB device of 4 KiB blocks: bounded, and finite.
        assert!(zeta(1 << 32, 1.2).is_finite());
    }

    #[test]
    fn the_random_map_visits_every_block_once_per_pass() {
        for (slots, threads, t) in [(1000u64, 1u32, 0usize), (1024, 1, 0), (999, 4, 3)] {
            let mut p = profile(Pattern::Random, Distribution::Uniform, threads);
            p.random_map = true;
            let mut o = Offsets::new(&p, slots * 4096, t, threads > 1).unwrap();
            let per = if threads > 1 { slots / threads as u64 } else { slots };
            for pass in 0..3 {
                let mut seen: Vec<u64> = (0..per).map(|_| o.next_offset() / 4096).collect();
                let first = seen.clone();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len() as u64, per, "pass {pass}: a block came twice");
                assert!(seen.iter().all(|b| *b < slots && (threads == 1 || b % 4 == 3)));
                assert_ne!(first, seen, "pass {pass} is in order");
            }
        }
        // Without the map, draws repeat within a pass (with replacement).
        let p = profile(Pattern::Random, Distribution::Uniform, 1);
        let mut o = Offsets::new(&p, 1000 * 4096, 0, false).unwrap();
        let mut seen: Vec<u64> = (0..1000).map(|_| o.next_offset()).collect();
        seen.sort_unstable();
        seen.dedup();
        assert!(seen.len() < 1000);
    }
}
