//! `storbench report [RUN|PLAN ...] --html FILE | --md | --text | --csv`:
//! renders runs or plans from the results store as tables and charts. Reads
//! the store only; every selector is checked before anything is written, and
//! the HTML file appears whole (written to a temporary file, then renamed) or
//! not at all.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use storbench_report::{Report, ReportError};
use storbench_results::Store;

use crate::cli::Global;
use crate::error::usage;

/// Options of `storbench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Runs (id or uuid prefix) or plans (name) to report. None: the latest
    /// plan if any run belongs to one, else the latest run.
    #[arg(value_name = "RUN|PLAN")]
    pub select: Vec<String>,
    /// Write one self-contained HTML file (inline SVG charts and CSS; viewing
    /// it needs no network).
    #[arg(long, value_name = "FILE", group = "format")]
    pub html: Option<PathBuf>,
    /// Print Markdown tables (for issue trackers).
    #[arg(long, group = "format")]
    pub md: bool,
    /// Print text tables (the default).
    #[arg(long, group = "format")]
    pub text: bool,
    /// Print every figure as CSV: plan, kind, group, step, metric, unit, n,
    /// median, min, max.
    #[arg(long, group = "format")]
    pub csv: bool,
    /// Read the plan's runs against a study's published figures
    /// (PLAN.published.toml): paper | here | ratio per cell and the study's
    /// shape checks with a verdict each (text, or Markdown with --md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["html", "csv"])]
    pub against: Option<PathBuf>,
}

/// Opens the results store to read it, refusing (exit 2) when the file does
/// not exist rather than creating an empty one; an older store is read as it
/// is, not migrated (an older storbench may still be running on it).
pub fn open_store(g: &Global) -> Result<Store> {
    if !g.results.exists() {
        return Err(usage(format!(
            "no results store at '{}': run a benchmark first, or point --results (or STORBENCH_RESULTS) at one",
            g.results.display()
        )));
    }
    Ok(Store::open_read(&g.results)?)
}

/// Maps bad selections to usage errors (exit 2), the rest to failures.
pub fn report_error(e: ReportError) -> anyhow::Error {
    if e.is_usage() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

/// Checks that the HTML file can be written where asked, before any work.
fn check_output(path: &Path) -> Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(usage(format!(
            "--html '{}': directory '{}' does not exist",
            path.display(),
            parent.display()
        )));
    }
    if path.is_dir() {
        return Err(usage(format!("--html '{}' is a directory: give a file name", path.display())));
    }
    Ok(())
}

/// Writes `content` to `path` whole: a temporary file beside it, then a rename.
pub fn write_whole(path: &Path, content: &str) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Runs `storbench report`.
pub fn run(g: &Global, a: ReportArgs) -> Result<ExitCode> {
    if let Some(p) = &a.html {
        check_output(p)?;
    }
    let published = match &a.against {
        Some(f) => {
            let text = fs::read_to_string(f)
                .map_err(|e| usage(format!("--against '{}': cannot read it: {e}", f.display())))?;
            Some(storbench_report::against::parse(&f.display().to_string(), &text).map_err(report_error)?)
        }
        None => None,
    };
    let store = open_store(g)?;
    if let Some(p) = published {
        let select = if a.select.is_empty() { vec![p.plan.clone()] } else { a.select.clone() };
        let report = Report::load(&store, &select).map_err(report_error)?;
        let read = storbench_report::against::against(&report, &p).map_err(report_error)?;
        let (cells, checks) = (read.cells_table(), read.checks_table());
        if a.md {
            print!("{}{}", cells.to_markdown(), checks.to_markdown());
        } else {
            print!("{}\n{}", cells.to_text(), checks.to_text());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = Report::load(&store, &a.select).map_err(report_error)?;
    if let Some(path) = &a.html {
        let html = report.to_html().map_err(report_error)?;
        write_whole(path, &html)?;
        println!(
            "wrote {} ({} runs of {}; {} KiB)",
            path.display(),
            report.runs().count(),
            report.selection.join(", "),
            html.len() / 1024
        );
    } else if a.md {
        print!("{}", report.to_markdown());
    } else if a.csv {
        print!("{}", report.to_csv());
    } else {
        print!("{}", report.to_text());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn parses_selectors_and_one_format() {
        let c = Cli::try_parse_from(["storbench", "report", "s5", "12", "--html", "r.html"]).unwrap();
        let Command::Report(a) = c.command else { panic!("not report") };
        assert_eq!(a.select, ["s5", "12"]);
        assert_eq!(a.html.unwrap().to_str(), Some("r.html"));
        assert!(Cli::try_parse_from(["storbench", "report", "--md", "--csv"]).is_err());
    }
}
