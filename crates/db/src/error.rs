//! The database error: opaque, with a kind a worker can act on (retry,
//! reconnect, give up) without matching engine internals. Messages are
//! redacted of passwords when built.

use crate::url::redact_text;

/// What kind of failure this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The server could not be reached.
    Connect,
    /// Wrong user or password.
    Auth,
    /// The user lacks a privilege.
    Permission,
    /// A table, database or function does not exist.
    MissingObject,
    /// Serialization failure, deadlock or busy database: retry the transaction.
    Retryable,
    /// The connection was lost mid-conversation.
    Closed,
    /// A result could not be read as the caller asked.
    Decode,
    /// A workload's own check failed (e.g. a row that must exist is absent).
    Workload,
    /// Anything else the server said.
    Other,
    /// The URL or a setting in it is invalid (a bad `sslmode`, a missing
    /// `sslrootcert` file): bad input, not an outage.
    BadUrl,
}

/// A database error.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{msg}")]
pub struct DbError {
    kind: ErrorKind,
    msg: String,
    code: Option<String>,
}

impl DbError {
    /// A new error; the message is redacted.
    pub fn new(kind: ErrorKind, msg: impl AsRef<str>) -> Self {
        Self { kind, msg: redact_text(msg.as_ref()), code: None }
    }

    /// Attaches the engine's error code (SQLSTATE, MySQL error number).
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The engine's error code, if any.
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// Retrying the transaction may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Retryable
    }

    /// The statement was cancelled on request ([`crate::Cancel`]):
    /// PostgreSQL's 57014, MySQL's 1317 (query interrupted).
    pub fn is_cancelled(&self) -> bool {
        matches!(self.code.as_deref(), Some("57014" | "1317"))
    }

    /// The connection is gone; reconnect before going on.
    pub fn is_closed(&self) -> bool {
        matches!(self.kind, ErrorKind::Closed | ErrorKind::Connect)
    }
}
