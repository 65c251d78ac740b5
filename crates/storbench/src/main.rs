//! The storbench binary: parses the command line, dispatches to a command,
//! and maps outcomes to exit codes (0 done, 1 the run failed, 2 bad input,
//! 3 a database or service could not be reached, 4 the target failed, 130
//! interrupted; see `error`). Only this crate prints to the terminal.

mod cli;
mod cmd;
mod command;
mod dbarg;
mod error;
mod interrupt;
mod live;
mod memlimit;
mod oltp;
mod record;
mod shard;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Piped into `head`: end quietly like other Unix tools, not with a panic.
    // SAFETY: restoring the default action of a signal at start-up, before
    // any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let mut cli = match command::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return error::clap_error(e),
    };
    (cli.global.run, cli.global.record) = cli.command.take_flags();
    // Read once: `--start-in 30s` is one instant for the whole command.
    match shard::of(&cli.global.run) {
        Ok(s) => cli.global.sharding = Some(s),
        Err(e) => return error::report(&e),
    }
    // `pg up --memory-limit` is its own: it limits the server it starts,
    // for the instance's life (cmd/pg.rs), not this command.
    let _memory = match cli.global.run.memory_limit.as_ref().map(|m| memlimit::MemoryLimit::apply(m.value)) {
        Some(Ok(g)) => Some(g),
        Some(Err(e)) => return error::report(&e),
        None => None,
    };
    // Not in a medium's daemon: it takes its signals (stop, power cut,
    // cache reset) on one thread of its own, and a Ctrl-C handler's thread,
    // which would not block them, would take them instead and die of them.
    if !matches!(&cli.command, command::Command::Media(m) if matches!(m.verb, cmd::media::MediaVerb::Serve { .. }))
    {
        interrupt::install(matches!(&cli.command, command::Command::Run(_)));
    }
    // Server notices reach stderr, as libpq's default notice processor does,
    // less the chatter (NOTICE such as "does not exist, skipping", LOG, DEBUG).
    storbench_db::set_notice_handler(|n| {
        if !matches!(n.severity.as_str(), "NOTICE" | "LOG") && !n.severity.starts_with("DEBUG") {
            eprintln!("storbench: {n}");
        }
    });
    // `sqlite:PATH?model=SPEC`: a device model under SQLite's files.
    storbench_db::set_device_opener(storbench_ops::sqlite_device::open);
    match command::dispatch(&cli.global, cli.command) {
        Ok(code) => code,
        Err(e) => error::report(&e),
    }
}
