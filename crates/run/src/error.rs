//! Errors and exit codes, so a script can tell a typo from an outage:
//!
//! | code | meaning | raised as |
//! |---|---|---|
//! | 0 | done | |
//! | 1 | the run failed (what was measured is kept) | any other error |
//! | 2 | bad input: nothing was created or written | [`UsageError`] ([`usage`]), a [`DbError`] of kind `BadUrl`, or a results store that is not one |
//! | 3 | a database or service could not be reached: connection refused, DNS, authentication, a managed instance that is down | [`UnreachableError`] ([`unreachable`]), or a [`DbError`] of kind `Connect`/`Auth` |
//! | 4 | a target failed: an I/O error on the device or file, a medium or managed instance that could not be made or started | [`TargetError`] ([`target_failed`]) |
//! | 130 | interrupted (the step in progress is kept) | |
//!
//! A marker anywhere in the error's chain (or attached as context) gives its
//! code, so context added with `anyhow::Context` keeps it.

use std::fmt;

use storbench_db::{DbError, ErrorKind};
use storbench_ops::error::OpsError;

/// Bad input: the message names the bad value and what is allowed (exit 2).
#[derive(Debug)]
pub struct UsageError(pub String);

/// A database or service that could not be reached (exit 3): connection
/// refused, a name that does not resolve, credentials the server refused,
/// a managed instance that is not running.
#[derive(Debug)]
pub struct UnreachableError(pub String);

/// A target that failed (exit 4): an I/O error on the device or file under
/// test, a medium (loop device, filesystem, mount) or a managed instance
/// that could not be made or started.
#[derive(Debug)]
pub struct TargetError(pub String);

macro_rules! message_error {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::error::Error for $t {}
    )*};
}
message_error!(UsageError, UnreachableError, TargetError);

/// Builds a usage error (exit 2).
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// Builds a "could not reach" error (exit 3).
pub fn unreachable(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UnreachableError(msg.into()))
}

/// Builds a target failure (exit 4).
pub fn target_failed(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(TargetError(msg.into()))
}

/// Exit code: the run ran and ended as failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad input.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a database or service could not be reached.
pub const EXIT_UNREACHABLE: u8 = 3;
/// Exit code: the target (device, file, medium) failed.
pub const EXIT_TARGET: u8 = 4;
/// Exit code: interrupted by the user.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The exit code an error ends the process with (see the module's table).
/// Bad input outranks an outage, which outranks a failed target: an error
/// that carries two markers is reported as the one a user fixes first.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    // `downcast_ref` sees markers attached as context; the chain walk sees
    // those under a library error's `source()`.
    fn has<T: std::error::Error + Send + Sync + 'static>(e: &anyhow::Error) -> bool {
        e.downcast_ref::<T>().is_some() || e.chain().any(|c| c.is::<T>())
    }
    let db_unreachable = e
        .chain()
        .filter_map(|c| c.downcast_ref::<DbError>())
        .chain(e.downcast_ref::<DbError>())
        .any(|d| matches!(d.kind(), ErrorKind::Connect | ErrorKind::Auth));
    let db_bad_url = e
        .chain()
        .filter_map(|c| c.downcast_ref::<DbError>())
        .chain(e.downcast_ref::<DbError>())
        .any(|d| d.kind() == ErrorKind::BadUrl);
    // `--results` naming a file that is not a results store (issue 24:
    // `--results /etc/passwd` was a failed run).
    let not_a_store = e.chain().filter_map(|c| c.downcast_ref::<storbench_results::StoreError>()).any(|s| {
        matches!(s, storbench_results::StoreError::Sqlite { source, .. }
            if source.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase))
    });
    if has::<UsageError>(e) || db_bad_url || not_a_store {
        EXIT_USAGE
    } else if has::<UnreachableError>(e) || db_unreachable {
        EXIT_UNREACHABLE
    } else if has::<TargetError>(e) {
        EXIT_TARGET
    } else {
        EXIT_FAILED
    }
}

/// The error on one line, with those of its causes that add something.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg
}

/// A media error in these classes: bad input 2 or a failed target 4.
pub fn media_err(e: storbench_media::MediaError) -> anyhow::Error {
    match e {
        storbench_media::MediaError::Usage(m) => usage(m),
        storbench_media::MediaError::Failed(m) => target_failed(m),
    }
}

/// An operation's error (`storbench_ops`) in these classes: bad input 2,
/// unreachable 3, else 1.
pub fn ops_err(e: OpsError) -> anyhow::Error {
    match e {
        OpsError::Usage(m) => usage(m),
        OpsError::Unreachable(m) => unreachable(m),
        OpsError::Failed(m) => anyhow::anyhow!(m),
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn each_marker_gives_its_code_through_added_context() {
        let wrap = |e: anyhow::Error| e.context("while doing something");
        assert_eq!(exit_code(&wrap(usage("--qd 0: use 1 or more"))), EXIT_USAGE);
        assert_eq!(exit_code(&wrap(unreachable("cannot reach db"))), EXIT_UNREACHABLE);
        assert_eq!(exit_code(&wrap(target_failed("read /dev/loop9: EIO"))), EXIT_TARGET);
        assert_eq!(exit_code(&anyhow::anyhow!("anything else")), EXIT_FAILED);
    }

    #[test]
    fn a_database_connect_or_auth_error_is_unreachable_and_others_are_failures() {
        let db = |k| -> anyhow::Error { anyhow::Error::new(DbError::new(k, "x")) };
        assert_eq!(exit_code(&db(ErrorKind::Connect)), EXIT_UNREACHABLE);
        assert_eq!(exit_code(&db(ErrorKind::Auth)), EXIT_UNREACHABLE);
        assert_eq!(exit_code(&db(ErrorKind::Closed)), EXIT_FAILED);
        assert_eq!(exit_code(&db(ErrorKind::Other)), EXIT_FAILED);
        assert_eq!(exit_code(&db(ErrorKind::BadUrl)), EXIT_USAGE);
        let r: Result<(), DbError> = Err(DbError::new(ErrorKind::Connect, "refused"));
        assert_eq!(exit_code(&r.context("step users=1").unwrap_err()), EXIT_UNREACHABLE);
    }

    #[test]
    fn bad_input_outranks_an_outage() {
        let e = unreachable("cannot reach db").context(UsageError("bad --db".into()));
        assert_eq!(exit_code(&e), EXIT_USAGE);
    }

    #[test]
    fn one_line_joins_causes_that_add_something() {
        let e = anyhow::anyhow!("disk gone").context("saving step 'a'");
        assert_eq!(one_line(&e), "saving step 'a': disk gone");
    }
}
