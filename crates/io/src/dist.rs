//! Where each I/O goes: sequential stripes per thread, or random blocks
//! drawn from the access distribution (uniform, zipf:θ, hot:P/Q).

use crate::profile::{Distribution, Pattern, Profile};

/// The offset generator of one thread.
pub struct Offsets {
    kind: Kind,
    align: u64,
    rng: u64,
}

enum Kind {
    /// Next offset, first and one-past-last offset of the stripe.
    Seq { next: u64, from: u64, to: u64, step: u64 },
    /// Random slot among `slots`; with `part`, only slots ≡ thread (mod part).
    Uniform { slots: u64, part: Option<(u64, u64)> },
    /// Zipf over `slots` (Gray et al.), ranks scattered by a bijection.
    Zipf { slots: u64, theta: f64, zetan: f64, alpha: f64, eta: f64, mult: u64 },
    /// P of I/Os to the first `hot` slots.
    Hot { slots: u64, hot: u64, p: f64 },
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
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
        let span = p.span.unwrap_or(size).min(size);
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
                Distribution::Uniform => Kind::Uniform {
                    slots,
                    part: (partition && threads > 1 && slots >= threads).then_some((threads, t as u64)),
                },
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
        Ok(Offsets { kind, align, rng })
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

    /// The next offset, avoiding those in `busy` (in flight) when it can.
    pub fn next(&mut self, busy: &[u64]) -> u64 {
        for _ in 0..8 {
            let o = self.draw();
            if !busy.contains(&o) {
                return o;
            }
        }
        self.draw()
    }

    fn draw(&mut self) -> u64 {
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
        let xs: Vec<u64> = (0..9).map(|_| a.next(&[]) / 4096).collect();
        assert_eq!(xs, [0, 1, 2, 3, 4, 5, 6, 7, 0]);
        assert_eq!(b.next(&[]) / 4096, 8);
    }

    #[test]
    fn uniform_stays_in_the_span_aligned_and_partitioned() {
        let p = profile(Pattern::Random, Distribution::Uniform, 4);
        let mut o = Offsets::new(&p, 1 << 20, 2, true).unwrap();
        for _ in 0..10_000 {
            let x = o.next(&[]);
            assert!(x + 4096 <= 1 << 20 && x.is_multiple_of(4096));
            assert_eq!((x / 4096) % 4, 2);
        }
    }

    #[test]
    fn hot_sends_p_percent_to_q_percent() {
        let p = profile(Pattern::Random, Distribution::Hot { p: 90.0, q: 10.0 }, 1);
        let mut o = Offsets::new(&p, 1000 * 4096, 0, false).unwrap();
        let n = 100_000;
        let hot = (0..n).filter(|_| o.next(&[]) < 100 * 4096).count();
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
            *counts.entry(o.next(&[])).or_insert(0u64) += 1;
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
}
