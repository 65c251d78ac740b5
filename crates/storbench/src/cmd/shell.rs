//! `storbench completions SHELL` and `storbench man`: clap's own generators
//! over the command line as it is, so they cannot drift from it.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

/// Options of `storbench completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install e.g. with
    /// `storbench completions bash > /etc/bash_completion.d/storbench`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints the completions for a shell of the command line `cmd`.
pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> Result<ExitCode> {
    clap_complete::generate(a.shell, &mut cmd, "storbench", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Prints the man page of the command line `cmd`.
pub fn man(cmd: clap::Command) -> Result<ExitCode> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut page)?;
    std::io::stdout().write_all(&page)?;
    Ok(ExitCode::SUCCESS)
}
