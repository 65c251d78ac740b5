//! Managed servers: PostgreSQL instances whose data, WAL and temp files live
//! where a study wants them ([`pg`]), their standbys and the delay proxy on
//! a standby's link ([`proxy`]), and temporary servers on restored copies
//! ([`tempserver`], [`pg::Temporary`]). Servers are queried through
//! `storbench_db` connections and stopped through `storbench_proc`'s
//! escalation. Where a path lives (which medium) is the caller's to say:
//! this crate does not know media. Nothing here prints.

#![deny(missing_docs)]

pub mod pg;
pub mod proxy;
pub mod tempserver;

/// An instance error: bad input or a missing facility (exit 2), or a failure.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// Bad input or something the machine lacks; names what and what is allowed.
    #[error("{0}")]
    Usage(String),
    /// A step failed (its undo has been done).
    #[error("{0}")]
    Failed(String),
}

impl From<storbench_proc::ProcError> for InstanceError {
    fn from(e: storbench_proc::ProcError) -> InstanceError {
        match e {
            storbench_proc::ProcError::Refused(m) => InstanceError::Usage(m),
            other => InstanceError::Failed(other.to_string()),
        }
    }
}
