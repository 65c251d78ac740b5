//! Errors and exit codes. A [`UsageError`] is bad input (exit 2): it is raised
//! before anything is created or written. Anything else that ends a command
//! early is a failure (exit 1).

use std::fmt;
use std::process::ExitCode;

/// Bad input: the message names the bad value and what is allowed.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Builds a usage error (exit 2).
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// Exit code: the run ran and ended as failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad input.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: interrupted by the user.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Prints the error on one line (with its causes) and picks the exit code.
pub fn report(e: &anyhow::Error) -> ExitCode {
    let is_usage = e.chain().any(|c| c.downcast_ref::<UsageError>().is_some());
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    eprintln!("storbench: error: {msg}");
    ExitCode::from(if is_usage { EXIT_USAGE } else { EXIT_FAILED })
}

/// A command-line error from clap: help and version print as usual; a
/// mistake prints on one line (exit 2).
pub fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind as K;
    match e.kind() {
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        _ => {
            let text = e.to_string();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid command line");
            let first = first.trim().trim_start_matches("error: ");
            eprintln!("storbench: error: {first} (see --help)");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
