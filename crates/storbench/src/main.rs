//! The storbench binary: parses the command line, dispatches to a command,
//! and maps outcomes to exit codes (0 done, 1 the run failed, 2 bad input,
//! 130 interrupted). Only this crate prints to the terminal.

mod cli;
mod cmd;
mod dbarg;
#[allow(dead_code)] // used as the commands land
mod error;
#[allow(dead_code)] // used as the commands land
mod interrupt;
#[allow(dead_code)] // used as the commands land
mod live;
mod oltp;
#[allow(dead_code)] // used as the commands land
mod record;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Piped into `head`: end quietly like other Unix tools, not with a panic.
    // SAFETY: restoring the default action of a signal at start-up, before
    // any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return error::clap_error(e),
    };
    interrupt::install();
    match cmd::dispatch(&cli.global, cli.command) {
        Ok(code) => code,
        Err(e) => error::report(&e),
    }
}
