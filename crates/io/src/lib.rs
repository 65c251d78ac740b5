//! The storage I/O engine: database-shaped I/O profiles against a file or a
//! block device, with io_uring (default) or psync, per-I/O latency in HDR
//! histograms, optional rate and verification. Nothing here prints.

#![deny(missing_docs)]

pub mod dist;
pub mod engine;
pub mod profile;
pub mod target;
pub mod verify;

pub use engine::{run_profile, uring_available, Engine, IoFailure, ProfileResult, RunOptions, Tick};
pub use profile::{Distribution, Pattern, Profile};
pub use target::{Target, TargetError};
