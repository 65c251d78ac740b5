//! Errors and exit codes as the terminal shows them: the error classes and
//! the exit code each gives are `storbench_run::error`'s (its module
//! documentation has the table); here an error is printed on one line, and
//! a command-line mistake from clap is said on one line (exit 2).

use std::process::ExitCode;

pub use storbench_run::error::*;

/// Prints the error on one line (with its causes) and picks the exit code.
pub fn report(e: &anyhow::Error) -> ExitCode {
    eprintln!("storbench: error: {}", one_line(e));
    ExitCode::from(exit_code(e))
}

/// A command-line error from clap: help and version print as usual; a
/// mistake prints on one line (exit 2).
pub fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind as K;
    match e.kind() {
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        _ => {
            let args: Vec<String> = std::env::args().collect();
            eprintln!("storbench: error: {} (see --help)", clap_line(&e, &args));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// The one line for a clap error. clap's own first line leaves out what
/// follows on later lines (the missing arguments' names), and reads a
/// negative value given without `=` (`--rampup -1s`) as an unknown flag:
/// both are said in full here. `args` is the command line, to find the
/// flag a negative value was given to.
fn clap_line(e: &clap::Error, args: &[String]) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind as K};
    let invalid: Vec<String> = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(v)) => v.clone(),
        _ => Vec::new(),
    };
    match e.kind() {
        K::MissingRequiredArgument if !invalid.is_empty() => {
            return format!("the following required arguments were not provided: {}", invalid.join(", "));
        }
        K::UnknownArgument => {
            if let Some(bad) = invalid.first().filter(|a| {
                a.strip_prefix('-')
                    .and_then(|r| r.chars().next())
                    .is_some_and(|c| c.is_ascii_digit() || c == '.')
            }) {
                // The whole token (clap names only its first flag-like part)
                // and the flag before it.
                let at = args.iter().position(|a| a.starts_with(bad.as_str()));
                if let Some(i) = at.filter(|i| *i > 0 && args[i - 1].starts_with("--")) {
                    return format!(
                        "{} {}: negative values are not allowed; give 0 or more",
                        args[i - 1],
                        args[i]
                    );
                }
                return format!("'{bad}': negative values are not allowed; give 0 or more");
            }
        }
        _ => {}
    }
    let text = e.to_string();
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid command line");
    let first = first.trim().trim_start_matches("error: ").to_string();
    // clap lists the allowed values on a later line: say them on this one.
    match (e.kind(), e.get(ContextKind::ValidValue)) {
        (K::InvalidValue, Some(ContextValue::Strings(valid))) if !valid.is_empty() => {
            format!("{first}; use {}", valid.join(", "))
        }
        _ => first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_name_the_missing_arguments_and_negative_values() {
        use clap::Parser;
        let line = |argv: &[&str]| {
            let args: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            let e = crate::cli::Cli::try_parse_from(&args).unwrap_err();
            clap_line(&e, &args)
        };
        let l = line(&["storbench", "compare", "1"]);
        assert!(
            l.starts_with("the following required arguments were not provided: ") && l.contains('<'),
            "{l}"
        );
        let l = line(&["storbench", "media", "destroy"]);
        assert!(l.starts_with("the following required arguments were not provided: ") && l.len() > 32, "{l}");
        assert_eq!(
            line(&["storbench", "io", "--rampup", "-1s"]),
            "--rampup -1s: negative values are not allowed; give 0 or more"
        );
        assert!(line(&["storbench", "io", "--nosuch"]).contains("'--nosuch'"));
    }
}
