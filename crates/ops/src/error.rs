//! The operations' error: bad input (exit 2), a server that cannot be
//! reached (exit 3), or a failure of the operation (exit 1).

/// An operation's error.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// Bad input: names the value and what is allowed.
    #[error("{0}")]
    Usage(String),
    /// A server that must be up is not, or cannot be reached.
    #[error("{0}")]
    Unreachable(String),
    /// The operation failed.
    #[error("{0}")]
    Failed(String),
}

impl From<storbench_db::DbError> for OpsError {
    fn from(e: storbench_db::DbError) -> OpsError {
        OpsError::Failed(e.to_string())
    }
}

impl From<storbench_instances::InstanceError> for OpsError {
    fn from(e: storbench_instances::InstanceError) -> OpsError {
        match e {
            storbench_instances::InstanceError::Usage(m) => OpsError::Usage(m),
            storbench_instances::InstanceError::Failed(m) => OpsError::Failed(m),
        }
    }
}

impl From<storbench_media::MediaError> for OpsError {
    fn from(e: storbench_media::MediaError) -> OpsError {
        match e {
            storbench_media::MediaError::Usage(m) => OpsError::Usage(m),
            storbench_media::MediaError::Failed(m) => OpsError::Failed(m),
        }
    }
}
