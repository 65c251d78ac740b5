//! The live progress line: one line on stderr, redrawn in place, only when
//! stderr is a terminal and `--quiet` is not given; the io step's line and
//! the bar of a test file's filling, shared by `io` and `media calibrate |
//! validate`.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use storbench_io::target::{self, Plan, TargetError};
use storbench_io::Tick;

/// A live line; a no-op when hidden.
pub struct Live {
    bar: Option<ProgressBar>,
}

impl Live {
    /// A spinner line, hidden when `quiet` or stderr is not a terminal.
    pub fn line(quiet: bool) -> Live {
        if quiet || !std::io::stderr().is_terminal() {
            return Live { bar: None };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
        bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("static template"));
        bar.enable_steady_tick(Duration::from_millis(250));
        Live { bar: Some(bar) }
    }

    /// A bar of `len` units, hidden when `quiet` or stderr is not a terminal.
    pub fn bar(quiet: bool, len: u64, template: &str) -> Live {
        if quiet || !std::io::stderr().is_terminal() {
            return Live { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(4));
        bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Live { bar: Some(bar) }
    }

    /// Replaces the line's message.
    pub fn set(&self, msg: impl Into<String>) {
        if let Some(b) = &self.bar {
            b.set_message(msg.into());
        }
    }

    /// Shows an io step's second (`storbench_run::io::tick_line`).
    pub fn io_tick(&self, what: &str, t: &Tick) {
        self.set(storbench_run::io::tick_line(what, t));
    }

    /// Sets the bar's position.
    pub fn pos(&self, p: u64) {
        if let Some(b) = &self.bar {
            b.set_position(p);
        }
    }

    /// Prints a line above the live line (or plainly when hidden).
    pub fn println(&self, msg: impl AsRef<str>) {
        match &self.bar {
            Some(b) => b.println(msg.as_ref()),
            None => eprintln!("{}", msg.as_ref()),
        }
    }

    /// Removes the line.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// Fills the test file at `path` when `plan` says it needs it, with a
/// progress bar (hidden when `quiet`).
pub fn fill(quiet: bool, plan: &Plan, path: &Path) -> Result<(), TargetError> {
    if let Plan::Fill { size } = *plan {
        let bar = Live::bar(quiet, size, "preparing {msg} {bar:30} {bytes}/{total_bytes} ({bytes_per_sec})");
        bar.set(path.display().to_string());
        target::fill(path, size, &mut |d| bar.pos(d))?;
        bar.finish();
    }
    Ok(())
}

impl Drop for Live {
    fn drop(&mut self) {
        self.finish();
    }
}
