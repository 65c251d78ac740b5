//! The OLTP runs on this terminal: the driving is `storbench_run::oltp`'s;
//! here its [`Screen`] is the terminal, and the flags every database run
//! shares are defined.
//!
//! Output: the results (the summary table) on stdout, or on stderr with
//! `--json`, whose run record then is stdout's only content; the live line,
//! each step's line as it ends, `--progress` lines and the one-line warning
//! on stderr. `--quiet` hides only the live line.

use std::time::Duration;

use anyhow::Result;
use storbench_metrics::units::{parse_positive_duration, Given};
use storbench_ops::sensitivity::parse_factors;
use storbench_workloads::{Bar, Progress};

use crate::cli::Global;
use crate::live::Live;
pub use storbench_run::oltp::*;

/// The terminal as the driver shows itself on it.
pub struct Term<'a>(pub &'a Global);

impl Screen for Term<'_> {
    fn live(&self, quiet: bool) -> Box<dyn LiveLine + '_> {
        Box::new(Live::line(quiet))
    }

    fn step_line(&self, line: &str) {
        eprintln!("{line}");
    }

    fn result(&self, text: &str) {
        result(self.0, text);
    }

    fn bar(&self, quiet: bool, bar: Bar) -> Box<dyn ProgressLine + '_> {
        Box::new(match bar {
            Bar::Percent => {
                BuildBar::Percent(Live::bar(quiet, 100, "building {bar:40} {pos}% {msg} (eta {eta})"))
            }
            Bar::Rows { what, total } => BuildBar::Rows(Live::bar(
                quiet,
                total,
                &format!("loading {what} {{bar:40}} {{pos}}/{{len}} rows ({{per_sec}}, eta {{eta}})"),
            )),
        })
    }
}

/// A build's bar: percent with the table being loaded, or one table's rows.
enum BuildBar {
    Percent(Live),
    Rows(Live),
}

impl ProgressLine for BuildBar {
    fn show(&self, p: Progress) {
        match self {
            BuildBar::Percent(bar) => {
                if let Some(pct) = (p.rows_done * 100).checked_div(p.rows_total) {
                    bar.pos(pct.min(100));
                }
                bar.set(p.table.to_string());
            }
            BuildBar::Rows(bar) => bar.pos(p.rows_done),
        }
    }

    fn finish(&self) {
        match self {
            BuildBar::Percent(bar) | BuildBar::Rows(bar) => bar.finish(),
        }
    }
}

impl LiveLine for Live {
    fn set(&self, msg: String) {
        Live::set(self, msg);
    }

    fn println(&self, msg: String) {
        Live::println(self, msg);
    }

    fn finish(&self) {
        Live::finish(self);
    }
}

/// The flag every database run shares that turns the wait-event sampler off.
#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// Do not sample the database's wait events (by default they are looked
    /// at 10 times a second on a connection of their own, and stored as
    /// per-second shares: docs/report.md, "Wait events").
    #[arg(long)]
    pub no_wait_events: bool,
}

/// Prints a result: on stdout, or on stderr with `--json` (stdout then
/// carries only the run record).
pub fn result(g: &Global, text: impl AsRef<str>) {
    if g.json {
        eprintln!("{}", text.as_ref());
    } else {
        println!("{}", text.as_ref());
    }
}

/// The storage-sensitivity flags `tpcb run`, `tpcc run` and `io` share.
#[derive(Debug, clap::Args)]
pub struct SensitivityArgs {
    /// Storage sensitivity: re-run the last step (io: the last profile)
    /// with the modelled medium's device times scaled by each factor (0.5:
    /// twice as fast, 2: half as fast) and report what that buys. The data
    /// must be on a modelled medium (media create … --model).
    #[arg(long, value_name = "FACTORS", value_parser = Given::parser(parse_factors))]
    pub sensitivity: Option<Given<Vec<f64>>>,
    /// Measured time of each sensitivity re-run (default: the step's).
    #[arg(long, value_name = "DURATION", value_parser = Given::parser(parse_positive_duration))]
    pub sensitivity_duration: Option<Given<Duration>>,
}

impl SensitivityArgs {
    /// The flags together ([`sensitivity_flags`]); refused with `--shard`.
    pub fn parse(&self, sharded: bool) -> Result<Option<Factors>> {
        sensitivity_flags(self.sensitivity.as_ref(), self.sensitivity_duration.as_ref(), sharded)
    }
}
