//! Executing a plan: its cells in order, a cell already complete skipped
//! (unless `fresh`), a failed one recorded and the plan going on (unless
//! `stop_on_error`), an interrupted one ending the plan, and what the
//! plan made released as soon as no later cell needs it.
//!
//! The executor decides what runs and when the plan stops; a [`CellRunner`]
//! the caller hands in does the work (prepares targets and databases, runs
//! a cell's command, records a failure, answers whether a cell is complete)
//! and hears the plan's progress as [`Event`]s. Nothing here prints, starts
//! a process or opens the results store.

use crate::{Cell, Plan};

/// The exit code a cell's command gives when it was interrupted (Ctrl-C).
pub const EXIT_INTERRUPTED: i32 = 130;

/// How a plan is executed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Redo cells an earlier run of the plan completed.
    pub fresh: bool,
    /// Stop at the first failed cell.
    pub stop_on_error: bool,
}

/// What the executor tells its runner as the plan goes.
#[derive(Debug)]
pub struct Event<'a> {
    /// The cell's place in the plan, from 0.
    pub index: usize,
    /// The plan's cells.
    pub of: usize,
    /// The cell.
    pub cell: &'a Cell,
    /// What happened to it.
    pub what: What,
}

/// What happened to a cell.
#[derive(Debug)]
pub enum What {
    /// It is next.
    Next,
    /// It was complete already (an earlier run of the plan), so it is skipped.
    Skipped,
    /// It completed.
    Complete,
    /// It failed.
    Failed(Failure),
}

/// Why a cell failed.
#[derive(Debug)]
pub enum Failure {
    /// Its command exited with this code.
    Exit(i32),
    /// It could not run: preparing it or starting its command failed.
    Error(String),
}

impl Failure {
    /// The reason as recorded in the failed cell's run.
    pub fn reason(&self) -> String {
        match self {
            Failure::Exit(code) => format!("exit code {code}"),
            Failure::Error(e) => e.clone(),
        }
    }
}

/// The work of a plan's cells, done by the caller.
pub trait CellRunner {
    /// What stops the plan outright (the results store failing).
    type Error;
    /// Whether an earlier run of the plan completed `cell`.
    fn completed(&mut self, cell: &Cell) -> Result<bool, Self::Error>;
    /// Prepares and runs `cell`: its command's exit code, or why it could
    /// not run.
    fn run(&mut self, cell: &Cell) -> Result<i32, String>;
    /// Records a cell that failed without recording a run of its own.
    fn record_failure(&mut self, cell: &Cell, why: &str) -> Result<(), Self::Error>;
    /// Releases what no cell of `later` needs.
    fn release(&mut self, later: &[Cell]);
    /// Whether the plan was asked to stop (Ctrl-C).
    fn interrupted(&self) -> bool;
    /// Progress.
    fn event(&mut self, e: Event<'_>);
}

/// How the plan's cells went.
#[derive(Debug, Default)]
pub struct Summary {
    /// Cells run to completion.
    pub done: usize,
    /// Cells skipped, already complete.
    pub skipped: usize,
    /// Ids of the cells that failed.
    pub failed: Vec<String>,
    /// The plan stopped early on an interrupt.
    pub interrupted: bool,
}

/// Runs `plan`'s cells through `runner`.
pub fn execute<R: CellRunner>(plan: &Plan, opts: Options, runner: &mut R) -> Result<Summary, R::Error> {
    let mut sum = Summary::default();
    let of = plan.cells.len();
    for (index, cell) in plan.cells.iter().enumerate() {
        runner.event(Event { index, of, cell, what: What::Next });
        if runner.interrupted() {
            sum.interrupted = true;
            break;
        }
        if !opts.fresh && runner.completed(cell)? {
            sum.skipped += 1;
            runner.event(Event { index, of, cell, what: What::Skipped });
            continue;
        }
        match runner.run(cell) {
            Ok(0) => {
                sum.done += 1;
                runner.event(Event { index, of, cell, what: What::Complete });
            }
            Ok(EXIT_INTERRUPTED) => {
                sum.interrupted = true;
                break;
            }
            other => {
                let why = match other {
                    Ok(code) => Failure::Exit(code),
                    Err(e) => Failure::Error(e),
                };
                runner.record_failure(cell, &why.reason())?;
                runner.event(Event { index, of, cell, what: What::Failed(why) });
                sum.failed.push(cell.id.clone());
                if opts.stop_on_error {
                    break;
                }
            }
        }
        if runner.interrupted() {
            sum.interrupted = true;
            break;
        }
        if plan.def.cleanup {
            runner.release(&plan.cells[index + 1..]);
        }
    }
    Ok(sum)
}

/// The time a plan has left: the estimates of the cells still to run,
/// scaled by how long the cells run so far took against their own estimates
/// (an estimate leaves out setup and loading, so the first cells correct it).
/// Not a rate of cells per hour: cells of one plan differ by minutes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Eta {
    estimated: std::time::Duration,
    took: std::time::Duration,
}

impl Eta {
    /// A cell estimated at `estimate` ran for `took`.
    pub fn ran(&mut self, estimate: std::time::Duration, took: std::time::Duration) {
        self.estimated += estimate;
        self.took += took;
    }

    /// What `rest` (the cells still to run) should take.
    pub fn left<'c>(&self, rest: impl IntoIterator<Item = &'c Cell>) -> std::time::Duration {
        let sum: std::time::Duration = rest.into_iter().map(|c| c.estimate).sum();
        if self.estimated.is_zero() {
            return sum;
        }
        sum.mul_f64(self.took.as_secs_f64() / self.estimated.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_is_the_estimates_corrected_by_the_cells_run() {
        use std::time::Duration;
        let plan = plan(3);
        let cells = &plan.cells;
        let each = cells[0].estimate;
        assert!(each > Duration::ZERO);
        let mut eta = Eta::default();
        assert_eq!(eta.left(&cells[..]), each * 3, "nothing run yet: the estimates");
        // The first cell took twice its estimate: the rest will too.
        eta.ran(each, each * 2);
        assert_eq!(eta.left(&cells[1..]), each * 4);
        assert_eq!(eta.left(&cells[3..]), Duration::ZERO);
    }

    /// A runner that answers from lists and remembers what it was asked.
    #[derive(Default)]
    struct Scripted {
        complete: Vec<String>,
        codes: Vec<Result<i32, String>>,
        ran: Vec<String>,
        recorded: Vec<(String, String)>,
        released: Vec<usize>,
    }

    impl CellRunner for Scripted {
        type Error = String;
        fn completed(&mut self, cell: &Cell) -> Result<bool, String> {
            Ok(self.complete.contains(&cell.id))
        }
        fn run(&mut self, cell: &Cell) -> Result<i32, String> {
            self.ran.push(cell.id.clone());
            self.codes.remove(0)
        }
        fn record_failure(&mut self, cell: &Cell, why: &str) -> Result<(), String> {
            self.recorded.push((cell.id.clone(), why.to_string()));
            Ok(())
        }
        fn release(&mut self, later: &[Cell]) {
            self.released.push(later.len());
        }
        fn interrupted(&self) -> bool {
            false
        }
        fn event(&mut self, _: Event<'_>) {}
    }

    fn plan(repeats: u32) -> Plan {
        let text = format!(
            "name = \"p\"\nrepeats = {repeats}\n[target.a]\npath = \"/tmp/a\"\n[[workload]]\nkind = \"io\"\n\
             run = {{ target = \"{{target}}/io.dat\", set = \"quick\", duration = \"1s\" }}\n"
        );
        let (def, cells) = crate::parse("p.toml", &text, false).unwrap();
        Plan { file: "p.toml".into(), def, cells }
    }

    #[test]
    fn complete_cells_are_skipped_failures_recorded_and_the_plan_goes_on() {
        let p = plan(4);
        let ids: Vec<String> = p.cells.iter().map(|c| c.id.clone()).collect();
        let mut r = Scripted {
            complete: vec![ids[0].clone()],
            codes: vec![Ok(1), Err("no medium".into()), Ok(0)],
            ..Scripted::default()
        };
        let s = execute(&p, Options::default(), &mut r).unwrap();
        assert_eq!((s.done, s.skipped, s.failed.len(), s.interrupted), (1, 1, 2, false));
        assert_eq!(r.ran, ids[1..]);
        assert_eq!(
            r.recorded,
            [(ids[1].clone(), "exit code 1".into()), (ids[2].clone(), "no medium".into())]
        );
        assert_eq!(r.released, [2, 1, 0], "after each cell run, what later cells need");
    }

    #[test]
    fn stop_on_error_stops_and_an_interrupted_cell_ends_the_plan() {
        let p = plan(3);
        let mut r = Scripted { codes: vec![Ok(0), Ok(2)], ..Scripted::default() };
        let s = execute(&p, Options { fresh: true, stop_on_error: true }, &mut r).unwrap();
        assert_eq!((s.done, s.failed.len(), r.ran.len()), (1, 1, 2));
        let mut r = Scripted { codes: vec![Ok(EXIT_INTERRUPTED)], ..Scripted::default() };
        let s = execute(&p, Options::default(), &mut r).unwrap();
        assert!(s.interrupted);
        assert_eq!((s.done, s.failed.len(), r.ran.len()), (0, 0, 1));
    }
}
