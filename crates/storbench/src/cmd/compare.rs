//! `storbench compare A B`: every figure two runs (or two groups of repeats,
//! `PLAN:LABEL`) share, step by step, with the ratio B/A and whether the
//! difference is within the repeats' noise; it opens with the headline
//! figures and the settings in which the sides differ. `--headline` and
//! `--metric` keep fewer rows. A run compared with itself is bad input.
//! Reads the store only.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use storbench_report::{Comparison, Filter, Side};

use crate::cli::Global;
use crate::cmd::report::{open_store, report_error};

/// Options of `storbench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline: a run id, a uuid prefix, or PLAN:LABEL (the repeats of one
    /// plan cell, LABEL = its axis values, e.g. `s5:target=hdd`).
    #[arg(value_name = "A")]
    pub a: String,
    /// The other side, in the same forms as A.
    #[arg(value_name = "B")]
    pub b: String,
    /// Only the figures whose names match PATTERN: a part of the name
    /// (`p99`) or a glob (`dev.*.w_await`); repeat or separate with commas.
    #[arg(long, value_name = "PATTERN", value_delimiter = ',', value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub metric: Vec<String>,
    /// Only the headline figures of the kind (TPS; NOPM and TPM; IOPS,
    /// MB/s and p99 latency), as the report leads with them.
    #[arg(long)]
    pub headline: bool,
    /// Print Markdown.
    #[arg(long, group = "format")]
    pub md: bool,
    /// Print a text table (the default). JSON: the global `--json`.
    #[arg(long, group = "format")]
    pub text: bool,
}

/// Runs `storbench compare`.
pub fn run(g: &Global, a: CompareArgs) -> Result<ExitCode> {
    let store = open_store(g)?;
    let side_a = Side::load(&store, &a.a).map_err(report_error)?;
    let side_b = Side::load(&store, &a.b).map_err(report_error)?;
    let mut cmp = Comparison::new(side_a, side_b).map_err(report_error)?;
    cmp.retain(&Filter { metrics: a.metric.clone(), headline: a.headline }).map_err(report_error)?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&cmp.to_json())?);
    } else if a.md {
        print!("{}", cmp.to_markdown());
    } else {
        print!("{}", cmp.to_text());
    }
    Ok(ExitCode::SUCCESS)
}
