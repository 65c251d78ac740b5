//! A shard's identity (`--shard i/N`), its part of the load, and the common
//! start instant (`--start-at RFC3339` or `--start-in 30s`) at which all
//! shards begin, so shards whose pods came up at different times measure the
//! same wall-clock window and their rates add.
//!
//! How the load splits (each a [`split_range`] of the whole, so the parts are
//! contiguous, disjoint, cover everything and differ in size by at most one):
//! - I/O: threads split with `split_range(i, n, threads)`; the target's byte
//!   range splits with [`split_aligned`] on the block size, so two shards
//!   never touch the same block unless the user asks for overlap.
//! - TPC-C: as HammerDB's multi-host mode does, virtual users split with
//!   `split_range(i, n, users)` and home warehouses with
//!   `split_range(i, n, warehouses)` (plus one: warehouses count from 1); a
//!   shard's users take their home warehouses round-robin from its own range,
//!   while remote (2% / 15%) warehouses are still drawn from all of them.
//! - TPC-B: clients split with `split_range(i, n, clients)`; accounts are
//!   still drawn from all branches, as in one pgbench with that many clients.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Errors from shard and start-instant options; each names the bad value and
/// what is allowed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ShardError {
    /// `--shard` is not `i/N` with `0 <= i < N`.
    #[error("'{0}' is not a shard: use i/N with 0 <= i < N (e.g. 0/3, 1/3, 2/3; i is JOB_COMPLETION_INDEX)")]
    BadShard(String),
    /// `--start-at` is not RFC 3339.
    #[error("--start-at '{0}': use an RFC 3339 instant, e.g. 2026-11-23T20:00:00Z")]
    BadStartAt(String),
    /// `--start-at` lies in the past: this shard came up too late to start
    /// with the others.
    #[error("--start-at '{at}' is in the past ({late:.1} s ago): give a later instant, or --start-in (a shard that comes up after it would measure other seconds than the rest)", at = .0.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true), late = .1)]
    StartPassed(DateTime<Utc>, f64),
    /// `--start-in` is beyond what a clock can add.
    #[error("--start-in: {0}")]
    BadStartIn(String),
    /// Both were given.
    #[error("--start-at and --start-in: give one, not both")]
    Both,
}

/// A shard's identity: shard `index` (from 0, as Kubernetes'
/// `JOB_COMPLETION_INDEX`) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// From 0.
    pub index: u32,
    /// How many shards in all, at least 1.
    pub count: u32,
}

impl Shard {
    /// The whole load: shard 0 of 1.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `i/N`.
    pub fn parse(s: &str) -> Result<Shard, ShardError> {
        let bad = || ShardError::BadShard(s.to_string());
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of `total` items (see [`split_range`]).
    pub fn part(&self, total: u64) -> Range<u64> {
        split_range(self.index, self.count, total)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Part `i` of `n` of the items `0..total`: contiguous, disjoint, together
/// exactly `0..total`; the first `total % n` parts have one item more.
/// Panics if `n == 0` or `i >= n` (a [`Shard`] never has them).
pub fn split_range(i: u32, n: u32, total: u64) -> Range<u64> {
    assert!(n > 0 && i < n, "split_range({i}, {n}, _): need 0 <= i < n");
    let (i, n) = (u64::from(i), u64::from(n));
    let (base, extra) = (total / n, total % n);
    let start = i * base + i.min(extra);
    let len = base + u64::from(i < extra);
    start..start + len
}

/// Part `i` of `n` of the bytes `0..total`, in whole blocks of `align`
/// bytes (a tail shorter than a block goes to no shard).
pub fn split_aligned(i: u32, n: u32, total: u64, align: u64) -> Range<u64> {
    let align = align.max(1);
    let r = split_range(i, n, total / align);
    r.start * align..r.end * align
}

/// When a run begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartAt {
    /// As soon as it is ready (no option given).
    Now,
    /// At this wall-clock instant.
    At(DateTime<Utc>),
}

/// Reads `--start-at` / `--start-in` against `now`. An instant already past
/// is refused (a late shard would measure a different window and the merge
/// would add rates of different seconds); `--start-in` (a duration, parsed
/// with the command line) counts from `now`.
pub fn parse_start(
    at: Option<DateTime<Utc>>,
    start_in: Option<std::time::Duration>,
    now: DateTime<Utc>,
) -> Result<StartAt, ShardError> {
    match (at, start_in) {
        (Some(_), Some(_)) => Err(ShardError::Both),
        (None, None) => Ok(StartAt::Now),
        (None, Some(d)) => {
            let d = chrono::Duration::from_std(d).map_err(|e| ShardError::BadStartIn(e.to_string()))?;
            Ok(StartAt::At(now + d))
        }
        (Some(t), None) => {
            let late = (now - t).num_milliseconds() as f64 / 1000.0;
            // A second's grace: pods started together by one Job may read
            // the clock just after the instant written into their spec.
            if late > 1.0 {
                return Err(ShardError::StartPassed(t, late));
            }
            Ok(StartAt::At(t))
        }
    }
}

/// `--start-at`'s parser: an RFC 3339 instant, in UTC (an offset is
/// converted); the error names the value and what is allowed.
pub fn parse_instant(s: &str) -> Result<DateTime<Utc>, ShardError> {
    DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| ShardError::BadStartAt(s.to_string()))
}

/// Sleeps until `start` (wall clock), waking every 100 ms to look at `halt`
/// so an interrupt while waiting ends the wait at once. Returns `false` if
/// `halt` was set, `true` when the instant has come.
pub fn wait_until(start: StartAt, halt: &AtomicBool) -> bool {
    let StartAt::At(t) = start else { return !halt.load(Ordering::Relaxed) };
    loop {
        if halt.load(Ordering::Relaxed) {
            return false;
        }
        let left = (t - Utc::now()).num_milliseconds();
        if left <= 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(left.min(100) as u64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_parses_and_refuses_with_the_value_named() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(Shard::parse(" 0/1 ").unwrap(), Shard::WHOLE);
        for bad in ["3/3", "1/0", "x/3", "1", "-1/3", "1/3/4", ""] {
            let e = Shard::parse(bad).unwrap_err();
            assert_eq!(e, ShardError::BadShard(bad.to_string()));
            assert!(e.to_string().contains(&format!("'{bad}'")), "{e}");
        }
        assert_eq!(Shard { index: 1, count: 4 }.to_string(), "1/4");
    }

    #[test]
    fn split_range_covers_everything_once() {
        for n in 1..=7u32 {
            for total in [0u64, 1, 5, 6, 7, 100, 1001] {
                let mut next = 0;
                for i in 0..n {
                    let r = split_range(i, n, total);
                    assert_eq!(r.start, next, "contiguous: {i}/{n} of {total}");
                    let len = r.end - r.start;
                    assert!(len == total / u64::from(n) || len == total / u64::from(n) + 1);
                    next = r.end;
                }
                assert_eq!(next, total, "all of {total} in {n} parts");
            }
        }
        assert_eq!(split_range(0, 3, 10), 0..4);
        assert_eq!(split_range(1, 3, 10), 4..7);
        assert_eq!(split_range(2, 3, 10), 7..10);
        // TPC-C: 10 warehouses over 3 shards, counted from 1: 1-4, 5-7, 8-10.
        let w = |i| {
            let r = split_range(i, 3, 10);
            (r.start + 1, r.end)
        };
        assert_eq!([w(0), w(1), w(2)], [(1, 4), (5, 7), (8, 10)]);
    }

    #[test]
    fn split_aligned_keeps_blocks_whole() {
        let k = 8192;
        let total = 10 * k + 100;
        assert_eq!(split_aligned(0, 3, total, k), 0..4 * k);
        assert_eq!(split_aligned(1, 3, total, k), 4 * k..7 * k);
        assert_eq!(split_aligned(2, 3, total, k), 7 * k..10 * k);
    }

    #[test]
    fn start_options_parse_and_refuse() {
        let now = DateTime::parse_from_rfc3339("2026-11-23T20:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(parse_start(None, None, now), Ok(StartAt::Now));
        let secs = std::time::Duration::from_secs;
        assert_eq!(
            parse_start(None, Some(secs(30)), now),
            Ok(StartAt::At(now + chrono::Duration::seconds(30)))
        );
        let at = |s: &str| parse_instant(s).unwrap();
        assert_eq!(at("2026-11-23T21:00:00+01:00"), now, "offsets are converted to UTC");
        assert_eq!(parse_start(Some(now), Some(secs(1)), now), Err(ShardError::Both));
        assert_eq!(parse_instant("tomorrow"), Err(ShardError::BadStartAt("tomorrow".into())));
        assert!(matches!(parse_start(None, Some(secs(u64::MAX)), now), Err(ShardError::BadStartIn(_))));
        let e = parse_start(Some(at("2026-11-23T19:59:50Z")), None, now).unwrap_err();
        assert_eq!(e, ShardError::StartPassed(at("2026-11-23T19:59:50Z"), 10.0));
        assert!(
            e.to_string().starts_with("--start-at '2026-11-23T19:59:50Z' is in the past (10.0 s ago)"),
            "{e}"
        );
        assert!(parse_start(Some(at("2026-11-23T19:59:59.500Z")), None, now).is_ok(), "within the grace");
    }

    #[test]
    fn wait_until_waits_and_stops_on_halt() {
        let halt = AtomicBool::new(false);
        let t0 = std::time::Instant::now();
        let at = StartAt::At(Utc::now() + chrono::Duration::milliseconds(250));
        assert!(wait_until(at, &halt));
        assert!(t0.elapsed() >= Duration::from_millis(240), "waited {:?}", t0.elapsed());
        halt.store(true, Ordering::Relaxed);
        let t1 = std::time::Instant::now();
        assert!(!wait_until(StartAt::At(Utc::now() + chrono::Duration::seconds(60)), &halt));
        assert!(t1.elapsed() < Duration::from_secs(1));
    }
}
