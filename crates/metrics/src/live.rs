//! Latency counts for live export (`--metrics-addr`): how many operations of
//! an interval fell at or below each of a fixed set of bounds, the classic
//! Prometheus histogram's buckets. Fixed bounds, the same for every workload
//! and every shard, so a dashboard's `histogram_quantile` can sum buckets
//! across shards and steps; a quantile read from them is as fine as the
//! buckets (the recorded run keeps the exact HDR histogram).

/// The buckets' upper bounds, in seconds: 1-2.5-5 per decade from 10 µs to
/// 10 s (an io `null` engine's completions to a stalled writer's seconds);
/// past the last one is `+Inf`.
pub const LIVE_BOUNDS_S: [f64; 19] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The bucket a latency of `ns` nanoseconds falls in: the first bound at or
/// above it, or `LIVE_BOUNDS_S.len()` (`+Inf`) past the last.
#[inline]
pub fn live_bucket(ns: u64) -> usize {
    let s = ns as f64 / 1e9;
    LIVE_BOUNDS_S.iter().position(|b| s <= *b).unwrap_or(LIVE_BOUNDS_S.len())
}

/// One interval's latencies as bucket counts.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveLatency {
    /// Operations per bucket (not cumulative): index i counts those above
    /// bound i-1 and at or below bound i; the last entry counts those past
    /// every bound. `LIVE_BOUNDS_S.len() + 1` entries.
    pub counts: Vec<u64>,
    /// The sum of the interval's latencies, seconds.
    pub sum_s: f64,
}

impl Default for LiveLatency {
    fn default() -> Self {
        LiveLatency { counts: vec![0; LIVE_BOUNDS_S.len() + 1], sum_s: 0.0 }
    }
}

impl LiveLatency {
    /// Operations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_rise_and_buckets_are_inclusive_above() {
        assert!(LIVE_BOUNDS_S.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(live_bucket(1), 0);
        assert_eq!(live_bucket(10_000), 0, "10 µs is at or below the first bound");
        assert_eq!(live_bucket(10_001), 1);
        assert_eq!(live_bucket(1_000_000), 6, "1 ms");
        assert_eq!(live_bucket(4_640_000_000), 17, "4.64 s is in the 5 s bucket");
        assert_eq!(live_bucket(60_000_000_000), LIVE_BOUNDS_S.len(), "a minute is past every bound");
    }
}
