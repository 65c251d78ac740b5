//! `storbench completions SHELL` and `storbench man`: clap's own generators
//! over the command line as it is, so they cannot drift from it.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, CommandFactory};

use crate::cli::Cli;

/// Options of `storbench completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install e.g. with
    /// `storbench completions bash > /etc/bash_completion.d/storbench`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints the completions for a shell.
pub fn completions(a: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "storbench", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Prints the man page.
pub fn man() -> Result<ExitCode> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    std::io::stdout().write_all(&page)?;
    Ok(ExitCode::SUCCESS)
}
