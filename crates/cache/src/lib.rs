//! Caches over block traces: the replacement policies (LRU, CLOCK, ARC, 2Q,
//! S3-FIFO, SIEVE) as one implementation shared by the emulator's cache tier
//! and the offline what-if; the I/O trace formats (storbench's `sbtrace`,
//! blkparse text, CSV); and miss-ratio curves (exact LRU by stack distance,
//! SHARDS sampling, per-policy simulation at chosen sizes).
//!
//! Everything here is computation over lines: no timing, no printing.
//! Progress on long traces is reported through a callback the caller hands in.

#![deny(missing_docs)]

pub mod mrc;
pub mod policy;
pub mod synth;
pub mod trace;

/// The smallest cache line, bytes: one page.
pub const LINE_MIN: u64 = 4096;
/// The largest cache line, bytes.
pub const LINE_MAX: u64 = 16 << 20;

/// The one rule for a cache line, for the emulator's tier (`media create
/// --cache-line`) and the offline what-if (`cache mrc --line`) alike: a
/// power of two from 4k to 16M. The error says what is allowed.
pub fn check_line(bytes: u64) -> Result<u64, String> {
    if bytes.is_power_of_two() && (LINE_MIN..=LINE_MAX).contains(&bytes) {
        Ok(bytes)
    } else {
        Err("give a power of two from 4k to 16M (default 64k)".into())
    }
}

pub use policy::{Cache, Evicted, Outcome, Policy, PolicyKind, WriteMode};
pub use trace::{Format, LineAccess, Lines, Op, Record, TraceError, TraceWriter};
