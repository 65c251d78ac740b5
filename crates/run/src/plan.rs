//! A plan's execution as a front end runs it: `storbench_plan::exec`
//! decides what runs, `storbench_ops::plan` prepares and runs each cell;
//! here the cells are kept against the results store (complete ones
//! skipped, a failed one recorded), progress is said per cell, and the
//! matrix is shown as a user would type it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde_json::json;
use storbench_metrics::units::format_duration;
use storbench_ops::plan::{self as plan_ops, PlanError};
use storbench_plan::{db_placeholder, exec, target_placeholder, Cell, Plan};
use storbench_results::{NewRun, Status, Store};

use crate::error::usage;
use crate::record::Build;

/// A plan's execution as a front end runs it: targets and databases
/// prepared, each cell a child `storbench`, failures recorded, a progress
/// line per cell with the plan's time left (said through `say`).
pub struct Cells<'a, 'p> {
    /// No progress lines but failures.
    pub quiet: bool,
    /// The results store's file (a failed cell's run is written there).
    pub results: &'a Path,
    /// The build that records a failed cell's run.
    pub build: Build,
    /// Where the progress lines go (stderr).
    pub say: &'a dyn Fn(&str),
    /// The plan's targets and databases.
    pub env: &'a mut plan_ops::Setup<'p>,
    /// When the cell in hand started, for its time and the plan's ETA.
    pub cell_t0: Instant,
    /// The plan's time left.
    pub eta: exec::Eta,
    /// Cells complete before this run started (skipped unless --fresh).
    pub complete: std::collections::BTreeSet<String>,
    /// The common start instant: it gates the first measured command only;
    /// the cells after it begin when this shard is done with the one before.
    pub start_at: Option<String>,
    /// When the cell in hand started (a failed cell's run begins then).
    pub cell_started: String,
}

impl exec::CellRunner for Cells<'_, '_> {
    type Error = anyhow::Error;

    fn completed(&mut self, cell: &Cell) -> Result<bool> {
        Ok(self.complete.contains(&cell.id))
    }

    fn run(&mut self, cell: &Cell) -> std::result::Result<i32, String> {
        self.cell_started = storbench_results::now_rfc3339();
        self.env.run_cell(cell, self.start_at.take()).map_err(|e| e.to_string())
    }

    fn record_failure(&mut self, cell: &Cell, why: &str) -> Result<()> {
        record_failure(self.results, &self.build, &self.env.plan().def.name, cell, why, &self.cell_started)
    }

    fn release(&mut self, later: &[Cell]) {
        self.env.release(later);
    }

    fn interrupted(&self) -> bool {
        crate::interrupt::requested()
    }

    fn event(&mut self, e: exec::Event<'_>) {
        let (n, of, id) = (e.index + 1, e.of, &e.cell.id);
        let took = || format_duration(Duration::from_secs(self.cell_t0.elapsed().as_secs()));
        match e.what {
            exec::What::Next if self.complete.contains(id) => {}
            exec::What::Next => {
                self.cell_t0 = Instant::now();
                let rest = self.env.plan().cells[e.index..].iter().filter(|c| !self.complete.contains(&c.id));
                let left = self.eta.left(rest);
                if !self.quiet {
                    (self.say)(&format!(
                        "cell {n}/{of} {id}: running (about {}; the plan about {} more)",
                        format_duration(e.cell.estimate),
                        format_duration(Duration::from_secs(left.as_secs()))
                    ));
                }
            }
            exec::What::Skipped if !self.quiet => {
                (self.say)(&format!("cell {n}/{of} {id}: complete already, skipped"))
            }
            exec::What::Skipped => {}
            exec::What::Complete => {
                self.eta.ran(e.cell.estimate, self.cell_t0.elapsed());
                if !self.quiet {
                    (self.say)(&format!("cell {n}/{of} {id}: complete in {}", took()));
                }
            }
            exec::What::Failed(why) => {
                self.eta.ran(e.cell.estimate, self.cell_t0.elapsed());
                match why {
                    exec::Failure::Exit(code) => {
                        (self.say)(&format!("cell {n}/{of} {id}: FAILED (exit code {code}) after {}", took()))
                    }
                    exec::Failure::Error(why) => (self.say)(&format!("cell {n}/{of} {id}: FAILED: {why}")),
                }
            }
        }
    }
}

/// What a resumed plan skips: the ids of the plan's cells the store holds
/// a complete run of, made as the cell is now defined (with its present
/// digest, or recorded before runs carried digests). A cell whose complete
/// run was made with another digest (its target, database or commands
/// changed since) runs again, and `say` is told so.
pub fn complete_cells(
    plan: &Plan,
    store: &Store,
    say: &dyn Fn(&str),
) -> Result<std::collections::BTreeSet<String>> {
    let mut complete = std::collections::BTreeSet::new();
    for c in &plan.cells {
        let Some(run) = store.completed_cell(&plan.def.name, &c.id)? else { continue };
        match run.config.get("cell_digest").and_then(|d| d.as_str()) {
            Some(d) if d != c.digest => say(&format!(
                "cell {}: run {} completed it as the plan defined it then; its target, database or commands \
                 changed since, so it runs again",
                c.id, run.id
            )),
            _ => {
                complete.insert(c.id.clone());
            }
        }
    }
    Ok(complete)
}

/// `--dry-run`: the expanded matrix and its estimated duration, as text.
pub fn matrix_text(plan: &storbench_plan::Plan, done: &std::collections::BTreeSet<String>) -> String {
    let total: Duration = plan.cells.iter().filter(|c| !done.contains(&c.id)).map(|c| c.estimate).sum();
    let left = if done.len() == plan.cells.len() && !done.is_empty() {
        "all complete: nothing to run (--fresh redoes them)".to_string()
    } else if done.is_empty() {
        format!("about {} (plus setup)", format_duration(total))
    } else {
        format!(
            "{} already complete (a run skips them; --fresh redoes them), about {} (plus setup)",
            done.len(),
            format_duration(total)
        )
    };
    let mut out =
        format!("plan {} ({}): {} cells, {left}", plan.def.name, plan.file.display(), plan.cells.len());
    for (i, c) in plan.cells.iter().enumerate() {
        let time = if done.contains(&c.id) {
            format!("{:>7}", "done")
        } else {
            format!("~{:>6}", format_duration(c.estimate))
        };
        out.push_str(&format!("\n{:>4}  {:<40} {time}  storbench {}", i + 1, c.id, shown(plan, c)));
    }
    out
}

/// The cell's command as a user would type it (placeholders shown by name).
pub fn shown(plan: &Plan, c: &Cell) -> String {
    let mut out = c
        .parts()
        .into_iter()
        .map(|(_, before, command)| {
            let mut s: Vec<String> = before.iter().map(|b| b.join(" ") + " && storbench").collect();
            s.push(command.join(" "));
            s.join(" ")
        })
        .collect::<Vec<_>>()
        .join("  &  storbench ");
    for t in plan.def.targets.keys() {
        out = out.replace(&target_placeholder(t), &format!("<{t}>"));
    }
    for d in plan.def.dbs.keys() {
        out = out.replace(&db_placeholder(d), &format!("<db {d}>"));
    }
    out
}

/// A plan error in the error classes: bad input exits 2.
pub fn plan_err(e: PlanError) -> anyhow::Error {
    match e {
        PlanError::Usage(m) => usage(m),
        e => anyhow!(e),
    }
}

/// A cell that failed before its command could record a run still leaves a
/// trace: a `failed` run tagged with the plan and cell, saying why.
pub fn record_failure(
    results: &Path,
    build: &Build,
    plan: &str,
    cell: &Cell,
    why: &str,
    since: &str,
) -> Result<()> {
    let mut store = Store::open(results)?;
    // The command recorded its own run when it got that far.
    let recorded = store
        .runs(&storbench_results::RunFilter { plan: Some(plan.to_string()), ..Default::default() })?
        .into_iter()
        .any(|r| r.cell.as_deref() == Some(&cell.id) && r.started_at.as_str() >= since);
    if recorded {
        return Ok(());
    }
    let kind = cell.command.first().cloned().unwrap_or_default();
    let run = store.begin_run(&NewRun {
        kind,
        label: cell.label.clone(),
        config: json!({ "command": cell.command, "axes": cell.axes, "error": why }),
        env: crate::record::base_env(json!({}), build),
        plan: Some(plan.to_string()),
        cell: Some(cell.id.clone()),
    })?;
    store.finish_run(run.id, Status::Failed)?;
    Ok(())
}
