//! The userspace device emulator. A medium's image (a file on the host
//! disk) is served through a FUSE filesystem by a daemon process; the loop
//! device sits on the served file with direct I/O, so every request that
//! reaches the "device" passes the daemon, which completes it at the time a
//! device model gives. Here: the models ([`model`]: data plus one
//! function), the daemon ([`daemon`]: FUSE server, deadline queue, volatile
//! write cache, power cut), its per-second counters ([`counters`]) and the
//! optional I/O trace (written with `storbench_cache::TraceWriter`, which owns the format). Nothing here prints; the daemon writes
//! its own log file.

#![deny(missing_docs)]

pub mod counters;
pub mod crash;
pub mod daemon;
pub mod fit;
pub mod inproc;
pub mod journal;
pub mod model;
mod ring;
pub mod sched;
pub mod table;
pub mod walprefix;

pub use model::{
    parse_battery, parse_destage, ArrayCommand, ArrayOptions, ArraySpec, ArrayStatus, Destage, Model,
    ModelError, Op, Req, Spec, TierOptions, TierSpec,
};

/// An emulator error: bad input or a missing facility (exit 2), or a failure.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// Bad input or something the machine lacks; names what and what is allowed.
    #[error("{0}")]
    Usage(String),
    /// Something failed.
    #[error("{0}")]
    Failed(String),
}
