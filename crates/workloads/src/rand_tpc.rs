//! The random helpers TPC specifications define, in one place: uniform
//! integers, NURand (TPC-C clause 2.1.6), random strings and the C_LAST
//! syllables (clause 4.3.2.3). A fast non-cryptographic generator per user.

use rand::rngs::SmallRng;
use rand::{Rng, RngExt, SeedableRng};

/// A per-user random source with the TPC helpers.
pub struct TpcRng {
    rng: SmallRng,
}

impl TpcRng {
    /// Seeded (reproducible) generator.
    pub fn seeded(seed: u64) -> TpcRng {
        TpcRng { rng: SmallRng::seed_from_u64(seed) }
    }

    /// Uniform integer in `lo..=hi`.
    #[inline]
    pub fn uniform(&mut self, lo: i64, hi: i64) -> i64 {
        self.rng.random_range(lo..=hi)
    }

    /// Uniform float in `[0, 1)`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        self.rng.random()
    }

    /// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y − x + 1)) + x.
    #[inline]
    pub fn nurand(&mut self, a: i64, x: i64, y: i64, c: i64) -> i64 {
        (((self.uniform(0, a) | self.uniform(x, y)) + c) % (y - x + 1)) + x
    }

    /// A random alphanumeric string of length `lo..=hi`.
    pub fn astring(&mut self, lo: usize, hi: usize) -> String {
        let n = self.uniform(lo as i64, hi as i64) as usize;
        let mut s = String::with_capacity(n);
        self.push_astring(n, &mut s);
        s
    }

    /// Appends `n` random alphanumeric characters to `out`: ten 6-bit draws
    /// per 64-bit word, values past the 62 characters rejected (uniform, and
    /// several times cheaper than one ranged draw per character — the
    /// TPC-C load generates hundreds of millions of them).
    pub fn push_astring(&mut self, n: usize, out: &mut String) {
        const CHARS: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut left = n;
        while left > 0 {
            let mut word = self.rng.next_u64();
            for _ in 0..10 {
                let v = (word & 63) as usize;
                word >>= 6;
                if v < 62 {
                    out.push(CHARS[v] as char);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
        }
    }

    /// A random numeric string of length `lo..=hi`.
    pub fn nstring(&mut self, lo: usize, hi: usize) -> String {
        let n = self.uniform(lo as i64, hi as i64) as usize;
        let mut s = String::with_capacity(n);
        let mut left = n;
        while left > 0 {
            let mut word = self.rng.next_u64();
            for _ in 0..16 {
                let v = (word & 15) as u8;
                word >>= 4;
                if v < 10 {
                    s.push((b'0' + v) as char);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
        }
        s
    }

    /// An exponentially distributed delay with the given mean, capped at
    /// ten times the mean (TPC-C clause 5.2.5.4).
    pub fn think_secs(&mut self, mean: f64) -> f64 {
        let r = self.unit().max(f64::MIN_POSITIVE);
        (-r.ln() * mean).min(10.0 * mean)
    }
}

/// The customer last name for a number 0..=999 (TPC-C clause 4.3.2.3).
pub fn c_last(n: i64) -> String {
    const SYL: [&str; 10] = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];
    let n = n.clamp(0, 999) as usize;
    format!("{}{}{}", SYL[n / 100], SYL[(n / 10) % 10], SYL[n % 10])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut r = TpcRng::seeded(1);
        let mut hits = vec![0u32; 3001];
        for _ in 0..200_000 {
            let v = r.nurand(1023, 1, 3000, 259);
            assert!((1..=3000).contains(&v));
            hits[v as usize] += 1;
        }
        let max = *hits.iter().max().unwrap() as f64;
        let mean = 200_000.0 / 3000.0;
        assert!(max > 2.0 * mean, "NURand should be non-uniform (max {max}, mean {mean})");
    }

    #[test]
    fn last_names_follow_the_syllables() {
        assert_eq!(c_last(0), "BARBARBAR");
        assert_eq!(c_last(371), "PRICALLYOUGHT");
        assert_eq!(c_last(999), "EINGEINGEING");
    }

    #[test]
    fn think_time_is_capped_at_ten_means() {
        let mut r = TpcRng::seeded(3);
        let mut sum = 0.0;
        for _ in 0..100_000 {
            let t = r.think_secs(12.0);
            assert!((0.0..=120.0).contains(&t));
            sum += t;
        }
        let mean = sum / 100_000.0;
        assert!((mean - 12.0).abs() < 0.3, "mean {mean}");
    }

    #[test]
    fn strings_have_the_asked_lengths() {
        let mut r = TpcRng::seeded(9);
        for _ in 0..100 {
            let s = r.astring(8, 16);
            assert!((8..=16).contains(&s.len()));
            assert!(r.nstring(4, 4).chars().all(|c| c.is_ascii_digit()));
        }
        // Every character of the alphabet turns up, and only those.
        let s = r.astring(5000, 5000);
        let distinct: std::collections::BTreeSet<char> = s.chars().collect();
        assert_eq!(distinct.len(), 62);
        assert!(s.chars().all(|c| c.is_ascii_alphanumeric()));
        let digits: std::collections::BTreeSet<char> = r.nstring(2000, 2000).chars().collect();
        assert_eq!(digits.len(), 10);
    }
}
