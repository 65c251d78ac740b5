//! Latency histograms, their summaries, and the figures and samples a step
//! reports.
//!
//! Every latency storbench reports is recorded here, per worker, and merged
//! into a step's figures; percentiles of a pooled run always come from merged
//! histograms, never from averaging per-worker percentiles (the pitfall fio's
//! users hit). This crate uses no other storbench crate and does no I/O (it reads
//! the process's own CPU time, [`ProcessCpu`]). The step runner the I/O
//! engine and the database workloads share is the crate above this one,
//! `storbench-runner`.
//!
//! Error bound: histograms are HDR histograms with 3 significant digits, so any
//! recorded value is reported within 0.1 % of its true value (fio's log-linear
//! buckets are within 0.78 %). Values are recorded in **nanoseconds** — not
//! microseconds as DESIGN.md first said — because a 4 KiB read at queue depth 1
//! completes in ~20-40 µs, where whole-microsecond bins would cost up to 5 %.
//! The trackable range is 1 ns to 1 hour; larger values are clamped to the top,
//! counted in [`LatencyHistogram::clamped`], and reported beside the
//! percentiles as the figure `<name>.clamped` ([`StepReport::latency`]).

#![deny(missing_docs)]

mod cpu;
mod figure;
mod histogram;
mod live;

pub use cpu::ProcessCpu;
pub use figure::{Figure, Sample, StepReport, Unit};
pub use histogram::{HistogramError, LatencyHistogram, Summary};
pub use live::{live_bucket, LiveLatency, LIVE_BOUNDS_S};

pub mod units;
