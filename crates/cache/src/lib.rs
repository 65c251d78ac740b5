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

pub use policy::{Cache, Evicted, Outcome, Policy, PolicyKind, WriteMode};
pub use trace::{Format, LineAccess, Lines, Op, Record, TraceError, TraceWriter};
