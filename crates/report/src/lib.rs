//! storbench-report: turns the results store into the tables and charts a
//! person would otherwise build in a spreadsheet — text, Markdown and CSV
//! tables, one self-contained HTML file with SVG charts (plotters), and
//! comparisons of two runs or groups of repeats with ratios and noise flags.
//!
//! The model is built once ([`Report::load`]) and every renderer reads it:
//! summary tables are [`Table`]s that render to text, Markdown and HTML alike.
//! A report leads with its findings (one sentence per workload, with the
//! numbers; a replication study leads with each sync level relative to
//! `local` and the one-client model, `repl.rs`), then the charts, the
//! tables and the environment. What each
//! workload kind shows is data in `kinds.rs`; a new kind adds a row there.
//! This crate never prints and never writes files; the binary does.

#![deny(missing_docs)]

pub mod against;
mod array;
mod cache;
mod chart;
mod compare;
pub mod curves;
mod findings;
mod html;
mod kinds;
mod model;
pub mod mrc;
mod neighbour;
mod repl;
pub mod sensitivity;
mod storage;
mod table;
mod tables;
mod tpch;
mod units;
pub mod verdict;
pub mod waits;

pub use compare::{metric_matches, CompareRow, Comparison, Filter, Noise, Side};
pub use findings::Finding;
pub use kinds::{ChartsFn, FigureSpec, KindSpec};
pub use model::{FigureCol, Group, Report, RunData, Section, Stat, StepData};
pub use neighbour::{rows as interference, Interference};
pub use repl::{ReplBlock, ReplLevel, ReplModel, ReplRow, ReplStudy};
pub use table::Table;

use storbench_results::StoreError;

/// Errors from building a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The results store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A selector named no run and no plan (bad input).
    #[error("no run or plan '{0}' in the results store (give a run id, a uuid prefix or a plan name; `storbench results list` shows them)")]
    NoSuchSelection(String),
    /// The selection was empty.
    #[error("the results store has no runs to report: run a benchmark first")]
    Empty,
    /// Two sides of a comparison cannot share a table (bad input).
    #[error("{0}")]
    Incomparable(String),
    /// A chart could not be drawn.
    #[error("chart '{0}': {1}")]
    Chart(String, String),
    /// A published file (`--against`) that does not fit the plan's runs
    /// (bad input).
    #[error("--against {0}")]
    Published(String),
}

impl ReportError {
    /// True when the error is the user's input (exit 2), not a failure.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ReportError::NoSuchSelection(_)
                | ReportError::Empty
                | ReportError::Incomparable(_)
                | ReportError::Published(_)
                | ReportError::Store(StoreError::NoSuchRun(_) | StoreError::Ambiguous(_))
        )
    }
}
