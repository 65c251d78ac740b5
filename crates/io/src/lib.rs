//! The storage I/O engine: database-shaped I/O profiles against a file or a
//! block device, per-I/O latency in HDR histograms, optional rate and
//! verification. Engines sit behind one small trait ([`IoEngine`]):
//! io_uring (default), psync, and null (no device) for testing the runner.
//! Profiles run on the shared step runner (`storbench_runner`).
//! Nothing here prints.

#![deny(missing_docs)]

pub mod buf;
pub mod diskspd;
pub mod dist;
pub mod engine;
pub mod engines;
pub mod error;
pub mod fio_job;
pub mod profile;
pub mod session;
pub mod target;
pub mod verify;

pub use engine::{run_profile, IoFailure, ProfileResult, RunOptions, Tick};
pub use engines::{Caps, IoEngine, Queue};
pub use error::IoError;
pub use profile::{Distribution, Pattern, Profile};
pub use session::{prepare, Overrides, PrepareError, Prepared, Verdict};
pub use target::{Target, TargetError};

/// The profiles of `--fio JOB.fio` or `--diskspd ARGS`, if either is
/// given; the error is the one-line refusal.
pub fn import(
    fio: Option<&std::path::Path>,
    diskspd: Option<&str>,
) -> Result<Option<fio_job::Import>, String> {
    match (fio, diskspd) {
        (Some(f), _) => fio_job::import_file(f).map(Some),
        (None, Some(d)) => diskspd::parse(d).map(Some),
        (None, None) => Ok(None),
    }
}
