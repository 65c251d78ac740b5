//! Synthetic traces with known shapes, for benchmarks and tests: Zipf-
//! distributed line accesses (rank r drawn with probability ∝ 1/r^s), the
//! ranks scattered over the medium by a fixed hash so hot lines are not
//! neighbours. Deterministic for a seed (splitmix64), so a benchmark's
//! trace is the same on every run.

use crate::mrc::hash_line;
use crate::trace::{Op, Record};

/// A Zipf request stream of whole lines.
pub struct Zipf {
    cdf: Vec<f64>,
    state: u64,
    line: u64,
    lines: u64,
    write_share: f64,
    t_ns: u64,
}

impl Zipf {
    /// `lines` distinct lines of `line` bytes, exponent `s` (0 is uniform),
    /// a `write_share` in [0, 1] of the requests writes.
    pub fn new(lines: u64, s: f64, line: u64, write_share: f64, seed: u64) -> Zipf {
        let mut cdf = Vec::with_capacity(lines as usize);
        let mut sum = 0.0;
        for r in 1..=lines {
            sum += 1.0 / (r as f64).powf(s);
            cdf.push(sum);
        }
        Zipf { cdf, state: seed, line, lines, write_share, t_ns: 0 }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Iterator for Zipf {
    type Item = Record;
    fn next(&mut self) -> Option<Record> {
        let total = *self.cdf.last()?;
        let u = self.unit() * total;
        let rank = self.cdf.partition_point(|&c| c < u) as u64;
        // Scatter ranks over [0, lines) with a bijection-free hash: collisions
        // merge a few ranks, which only shifts the shape slightly.
        let line = hash_line(rank) % (self.lines * 4);
        let op = if self.unit() < self.write_share { Op::Write } else { Op::Read };
        self.t_ns += 1000;
        Some(Record { t_ns: self.t_ns, offset: line * self.line, len: self.line as u32, lat_ns: 0, op })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_deterministic_and_skewed() {
        let a: Vec<Record> = Zipf::new(1000, 1.0, 4096, 0.3, 9).take(20_000).collect();
        let b: Vec<Record> = Zipf::new(1000, 1.0, 4096, 0.3, 9).take(20_000).collect();
        assert_eq!(a, b);
        let mut counts = std::collections::HashMap::new();
        a.iter().for_each(|r| *counts.entry(r.offset).or_insert(0u32) += 1);
        let mut c: Vec<u32> = counts.into_values().collect();
        c.sort_unstable_by(|x, y| y.cmp(x));
        // Rank 1 of Zipf(1) over 1000 takes 1/H(1000) ≈ 13 % of requests.
        let top = c[0] as f64 / a.len() as f64;
        assert!((top - 0.134).abs() < 0.01, "{top}");
        let w = a.iter().filter(|r| r.op == Op::Write).count() as f64 / a.len() as f64;
        assert!((w - 0.3).abs() < 0.02, "{w}");
    }
}
