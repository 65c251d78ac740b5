//! The typed error of an I/O run: what failed, and for a failure of the
//! system on the target its `std::io::Error` (so its errno), which a front
//! end uses to tell a failed target (a device error, a full file system, a
//! file it may not open) from a run that could not be set up. Messages name
//! the path; nothing here prints.

use std::path::PathBuf;

/// Why a profile could not run.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The system refused an operation on the target (opening it, for one).
    #[error("{what} {}: {source}", path.display())]
    Target {
        /// What was being done: `opening`.
        what: &'static str,
        /// The target.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The engine could not be set up or driven (io_uring setup, a failed
    /// submission or wait).
    #[error("{0}")]
    Engine(String),
    /// The profile could not be laid out on the target (offsets, stripes).
    #[error("{0}")]
    Setup(String),
    /// The verification ledger beside the target could not be read or saved.
    #[error("{0}")]
    Ledger(String),
}

impl IoError {
    /// The errno of a failure of the system on the target.
    pub fn errno(&self) -> Option<i32> {
        match self {
            IoError::Target { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// Whether the target itself failed (rather than the run's setup).
    pub fn is_target(&self) -> bool {
        matches!(self, IoError::Target { .. })
    }
}
