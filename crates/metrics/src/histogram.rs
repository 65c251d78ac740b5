//! The latency histogram (HDR, 3 significant digits, nanoseconds) and its
//! summary. Must stay allocation-free on the record path.

use std::time::Duration;

use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest trackable latency: one hour, in nanoseconds.
const MAX_NS: u64 = 3_600_000_000_000;
/// Significant digits kept: relative error below 0.1 %.
const SIGFIG: u8 = 3;

/// Errors from (de)serialising a histogram.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    /// The bytes are not a serialised HDR histogram.
    #[error("not a valid serialised histogram: {0}")]
    Decode(String),
    /// Serialisation failed (should not happen for in-memory buffers).
    #[error("could not serialise histogram: {0}")]
    Encode(String),
}

/// A latency histogram in nanoseconds: mergeable, serialisable, fixed memory
/// (about 128 KiB whatever the count; u32 counts, so at most 4·10^9 values per bucket).
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    h: Histogram<u32>,
    clamped: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram tracking 1 ns .. 1 h at 3 significant digits.
    pub fn new() -> Self {
        let h = Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("static bounds are valid");
        Self { h, clamped: 0 }
    }

    /// Records one latency.
    #[inline]
    pub fn record(&mut self, d: Duration) {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one latency given in nanoseconds; 0 is recorded as 1 ns and
    /// anything above an hour as an hour (and counted as clamped).
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        let v = if ns > MAX_NS {
            self.clamped += 1;
            MAX_NS
        } else {
            ns.max(1)
        };
        // Cannot fail: v is within the histogram's bounds.
        let _ = self.h.record(v);
    }

    /// Records `count` identical latencies.
    pub fn record_n_ns(&mut self, ns: u64, count: u64) {
        let v = if ns > MAX_NS {
            self.clamped += count;
            MAX_NS
        } else {
            ns.max(1)
        };
        let _ = self.h.record_n(v, u32::try_from(count).unwrap_or(u32::MAX));
    }

    /// Adds every value of `other` to this histogram.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Cannot fail: both histograms have the same bounds.
        let _ = self.h.add(&other.h);
        self.clamped += other.clamped;
    }

    /// Empties the histogram, keeping its memory.
    pub fn reset(&mut self) {
        self.h.reset();
        self.clamped = 0;
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// Values that exceeded an hour and were recorded as an hour.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    /// The value at quantile `q` (0..=1), in microseconds; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.h.is_empty() {
            return 0.0;
        }
        self.h.value_at_quantile(q) as f64 / 1000.0
    }

    /// Mean in microseconds; 0 when empty.
    pub fn mean_us(&self) -> f64 {
        if self.h.is_empty() {
            0.0
        } else {
            self.h.mean() / 1000.0
        }
    }

    /// Largest value in microseconds (within the histogram's precision).
    pub fn max_us(&self) -> f64 {
        if self.h.is_empty() {
            0.0
        } else {
            self.h.max() as f64 / 1000.0
        }
    }

    /// Smallest value in microseconds (within the histogram's precision).
    pub fn min_us(&self) -> f64 {
        if self.h.is_empty() {
            0.0
        } else {
            self.h.min() as f64 / 1000.0
        }
    }

    /// The histogram's values as live-export bucket counts
    /// ([`crate::LIVE_BOUNDS_S`]); each HDR bucket goes whole to the live
    /// bucket of its highest value, so a value within 0.1 % of a bound may
    /// land one bucket up.
    pub fn live(&self) -> crate::LiveLatency {
        let mut out = crate::LiveLatency::default();
        for v in self.h.iter_recorded() {
            out.counts[crate::live_bucket(v.value_iterated_to())] += v.count_at_value() as u64;
        }
        out.sum_s = self.mean_us() * self.count() as f64 / 1e6;
        out
    }

    /// Count, mean and the standard percentiles.
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count(),
            mean_us: self.mean_us(),
            min_us: self.min_us(),
            p50_us: self.quantile_us(0.50),
            p90_us: self.quantile_us(0.90),
            p95_us: self.quantile_us(0.95),
            p99_us: self.quantile_us(0.99),
            p999_us: self.quantile_us(0.999),
            max_us: self.max_us(),
        }
    }

    /// Serialises in HDR's V2 compressed format (interoperable with other HDR
    /// tools); typically a few hundred bytes. The clamped count is not part
    /// of the format: [`crate::StepReport::latency`] records it as the figure
    /// `<name>.clamped` beside the histogram.
    pub fn to_bytes(&self) -> Result<Vec<u8>, HistogramError> {
        let mut out = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.h, &mut out)
            .map_err(|e| HistogramError::Encode(format!("{e:?}")))?;
        Ok(out)
    }

    /// Reads a histogram written by [`LatencyHistogram::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, HistogramError> {
        let mut cursor = bytes;
        let read: Histogram<u32> = Deserializer::new()
            .deserialize(&mut cursor)
            .map_err(|e| HistogramError::Decode(format!("{e:?}")))?;
        let mut h = LatencyHistogram::new();
        h.h.add(&read).map_err(|e| HistogramError::Decode(format!("{e:?}")))?;
        Ok(h)
    }
}

/// The summary of a latency histogram; all latencies in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// Smallest value.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest value.
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn within(actual: f64, expected: f64, rel: f64) -> bool {
        (actual - expected).abs() <= expected.abs() * rel
    }

    #[test]
    fn uniform_distribution_percentiles_are_within_bound() {
        // 1..=100_000 ns, each once: pXX is XX % of the range.
        let mut h = LatencyHistogram::new();
        for ns in 1..=100_000u64 {
            h.record_ns(ns);
        }
        let s = h.summary();
        assert_eq!(s.count, 100_000);
        assert!(within(s.p50_us, 50.0, 0.001), "p50 {}", s.p50_us);
        assert!(within(s.p99_us, 99.0, 0.001), "p99 {}", s.p99_us);
        assert!(within(s.p999_us, 99.9, 0.001), "p99.9 {}", s.p999_us);
        assert!(within(s.mean_us, 50.0005, 0.001), "mean {}", s.mean_us);
        assert!(within(s.max_us, 100.0, 0.001));
    }

    #[test]
    fn exponential_distribution_matches_analytic_quantiles() {
        // Exponential with mean 1 ms: quantile q is -ln(1-q) * mean.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut h = LatencyHistogram::new();
        let n = 400_000;
        for _ in 0..n {
            let u: f64 = rng.random();
            h.record_ns((-(1.0 - u).ln() * 1_000_000.0) as u64);
        }
        let p50 = -(0.5f64).ln() * 1000.0;
        let p99 = -(0.01f64).ln() * 1000.0;
        // Sampling error dominates; 2 % is generous for 400k samples.
        assert!(within(h.quantile_us(0.5), p50, 0.02), "p50 {}", h.quantile_us(0.5));
        assert!(within(h.quantile_us(0.99), p99, 0.02), "p99 {}", h.quantile_us(0.99));
        assert!(within(h.mean_us(), 1000.0, 0.02));
    }

    #[test]
    fn merge_equals_recording_into_one() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        let mut all = LatencyHistogram::new();
        for ns in (1..50_000u64).step_by(7) {
            a.record_ns(ns);
            all.record_ns(ns);
        }
        for ns in (10_000..900_000u64).step_by(13) {
            b.record_ns(ns);
            all.record_ns(ns);
        }
        a.merge(&b);
        assert_eq!(a.summary(), all.summary());
    }

    #[test]
    fn pooled_percentile_differs_from_averaged_percentiles() {
        // A fast and a slow worker: the pooled p99 is the slow one's, which
        // averaging per-worker p99s would hide.
        let mut fast = LatencyHistogram::new();
        let mut slow = LatencyHistogram::new();
        for _ in 0..9_900 {
            fast.record_ns(10_000);
        }
        for _ in 0..100 {
            slow.record_ns(10_000_000);
        }
        let avg = (fast.quantile_us(0.995) + slow.quantile_us(0.995)) / 2.0;
        fast.merge(&slow);
        assert!(within(fast.quantile_us(0.995), 10_000.0, 0.001));
        assert!(avg < 6_000.0);
    }

    #[test]
    fn round_trips_through_bytes() {
        let mut h = LatencyHistogram::new();
        for ns in [1u64, 999, 38_000, 38_500, 1_000_000, 17_000_000_000] {
            h.record_ns(ns);
        }
        let bytes = h.to_bytes().unwrap();
        let back = LatencyHistogram::from_bytes(&bytes).unwrap();
        assert_eq!(h.summary(), back.summary());
        assert!(LatencyHistogram::from_bytes(b"garbage").is_err());
    }

    #[test]
    fn clamps_values_beyond_an_hour_and_counts_them() {
        let mut h = LatencyHistogram::new();
        h.record(Duration::from_secs(7200));
        h.record_ns(0);
        assert_eq!(h.count(), 2);
        assert_eq!(h.clamped(), 1);
        assert!(within(h.max_us(), 3.6e9, 0.001));
    }

    #[test]
    fn empty_histogram_reports_zeros() {
        let s = LatencyHistogram::new().summary();
        assert_eq!(s, Summary::default());
    }

    #[test]
    fn live_buckets_count_every_value_once_where_it_falls() {
        let mut h = LatencyHistogram::new();
        h.record_n_ns(8_000, 3); // 8 µs: the 10 µs bucket
        h.record_n_ns(700_000, 5); // 0.7 ms: the 1 ms bucket
        h.record_ns(4_640_000_000); // 4.64 s: the 5 s bucket
        h.record_ns(30_000_000_000); // 30 s: past every bound
        let l = h.live();
        assert_eq!(l.counts.len(), crate::LIVE_BOUNDS_S.len() + 1);
        assert_eq!((l.counts[0], l.counts[6], l.counts[17], l.counts[19]), (3, 5, 1, 1));
        assert_eq!(l.count(), 10);
        let sum = 3.0 * 8e-6 + 5.0 * 7e-4 + 4.64 + 30.0;
        assert!(within(l.sum_s, sum, 0.001), "{} vs {sum}", l.sum_s);
    }
}
