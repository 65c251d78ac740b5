//! What a server says beside its answers (PostgreSQL NOTICE, WARNING,
//! INFO...), handed to one process-wide handler.
//!
//! The workspace uses no logging facade and nothing below the binary
//! prints, so the binary installs the handler (printing to stderr, say);
//! until one is installed, notices are dropped. The handler is called on
//! the thread of the connection that received the notice, in the middle of
//! reading an answer: it must be quick and must not use a connection.

use std::fmt;
use std::sync::{Arc, RwLock};

/// A message from the server that is not an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// `postgres`.
    pub engine: &'static str,
    /// `NOTICE`, `WARNING`, `INFO`, `LOG`, `DEBUG1`..., untranslated.
    pub severity: String,
    /// SQLSTATE (`00000` for a plain `RAISE NOTICE`).
    pub code: String,
    /// The primary message.
    pub message: String,
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.engine, self.severity, self.message)?;
        if !self.code.is_empty() && self.code != "00000" {
            write!(f, " ({})", self.code)?;
        }
        Ok(())
    }
}

type Handler = Arc<dyn Fn(&Notice) + Send + Sync>;

static HANDLER: RwLock<Option<Handler>> = RwLock::new(None);

/// Installs the process-wide notice handler, replacing any earlier one.
pub fn set_notice_handler(handler: impl Fn(&Notice) + Send + Sync + 'static) {
    *HANDLER.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(handler));
}

/// Hands `n` to the handler, if one is installed. The handler runs outside
/// the lock, so it may itself replace the handler.
pub(crate) fn emit(n: &Notice) {
    let h = HANDLER.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(h) = h {
        h(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_reads_as_one_line() {
        let mut n = Notice {
            engine: "postgres",
            severity: "NOTICE".into(),
            code: "00000".into(),
            message: "hello".into(),
        };
        assert_eq!(n.to_string(), "postgres NOTICE: hello");
        n.severity = "WARNING".into();
        n.code = "01000".into();
        assert_eq!(n.to_string(), "postgres WARNING: hello (01000)");
    }
}
