//! `storbench run PLAN.toml`: a study's matrix, unattended.
//!
//! The plan is validated whole before anything runs (every cell's command
//! line is parsed by the same parser the commands use). Each cell then runs
//! as a child `storbench` process tagged with the plan and cell, so a cell
//! is exactly the run a user would get by typing its command, and a crash
//! in one cell cannot take the plan down. Completed cells are skipped on a
//! rerun (`--fresh` redoes them); a failed cell is recorded and the plan
//! goes on (`--stop-on-error` stops). Media and managed databases the plan
//! created are torn down at the end, on error and on Ctrl-C.
//!
//! `storbench_plan::exec` decides what runs; `storbench_ops::plan` prepares
//! and runs each cell. This verb checks the plan, keeps the results store,
//! the progress and the report, and says how the plan went.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Parser};
use serde_json::json;
use storbench_metrics::units::format_duration;
use storbench_ops::plan::{self as plan_ops, PlanError};
use storbench_plan::{db_placeholder, exec, target_placeholder, Cell, Plan};
use storbench_results::{NewRun, Status, Store};

use crate::cli::{Cli, Global};
use crate::error::{usage, EXIT_INTERRUPTED};

/// Options of `storbench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plan file.
    pub plan: PathBuf,
    /// Run the plan's quick form (its [quick] table).
    #[arg(long)]
    pub quick: bool,
    /// Print the expanded matrix and an estimate of its duration; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Redo cells already completed by an earlier run of this plan.
    #[arg(long)]
    pub fresh: bool,
    /// Stop at the first failed cell.
    #[arg(long)]
    pub stop_on_error: bool,
    /// Where to write the HTML report when the plan ends (default: PLAN-NAME-report.html).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Do not write a report at the end.
    #[arg(long)]
    pub no_report: bool,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
}

/// Runs `storbench run`.
pub fn run(g: &Global, a: RunArgs) -> Result<ExitCode> {
    let sharding = g.sharding();
    let plan = storbench_plan::load(&a.plan, a.quick).map_err(|e| usage(e.to_string()))?;
    let name = plan.def.name.clone();
    validate_cells(&plan)?;
    plan_ops::validate_targets(&plan).map_err(plan_err)?;
    // What would measure something other than storage: said before a
    // dry run too, so a plan is fixed before it takes an afternoon.
    for w in plan.warnings() {
        eprintln!("storbench: warning: plan {name}: {w}");
    }
    if a.dry_run {
        // What a run would skip: cells complete in the store (never made
        // by a dry run), unless --fresh.
        let done = if g.results.exists() && !a.fresh {
            complete_cells(&plan, &Store::open_read(&g.results)?)?
        } else {
            Default::default()
        };
        print_matrix(&plan, &done);
        return Ok(ExitCode::SUCCESS);
    }
    let store = Store::open(&g.results)?;
    let exe = std::env::current_exe().context("finding the storbench executable")?;
    let opts = plan_ops::Options {
        shard: g.run.shard.clone().filter(|_| sharding.given),
        build: !sharding.split(),
        metrics: g.run.metrics_addr.clone(),
    };
    let mut env = plan_ops::Setup::new(&plan, exe, g.results.clone(), opts);
    // The common start instant gates the first measured command only: the
    // cells after it begin when this shard is done with the one before.
    let start_at = sharding.start_rfc3339();
    let started = Instant::now();
    let opts = exec::Options { fresh: a.fresh, stop_on_error: a.stop_on_error };
    // Progress is a line per cell, not a bar: each cell is a child
    // storbench whose own lines would run into a bar drawn over them.
    let complete = if a.fresh { Default::default() } else { complete_cells(&plan, &store)? };
    let mut cells = Cells {
        g,
        store: &store,
        env: &mut env,
        start_at,
        cell_started: String::new(),
        cell_t0: Instant::now(),
        eta: exec::Eta::default(),
        complete,
    };
    let sum = exec::execute(&plan, opts, &mut cells)?;
    let (done, skipped, failed, interrupted) = (sum.done, sum.skipped, sum.failed, sum.interrupted);
    let teardown = env.teardown();
    eprintln!(
        "plan {name}: {done} cell(s) run, {skipped} already complete, {} failed{} in {}",
        failed.len(),
        if interrupted { ", interrupted" } else { "" },
        format_duration(Duration::from_secs(started.elapsed().as_secs()))
    );
    if let Err(e) = teardown {
        eprintln!("storbench: warning: cleaning up after plan {name}: {e:#}");
    }
    if !interrupted && !a.no_report && done + skipped > 0 {
        let html = a.report.clone().unwrap_or_else(|| PathBuf::from(format!("{name}-report.html")));
        print_report(&store, &name, &html);
    }
    Ok(ExitCode::from(if interrupted {
        EXIT_INTERRUPTED
    } else if failed.is_empty() {
        0
    } else {
        crate::error::EXIT_FAILED
    }))
}

/// The binary's side of a plan's execution: targets and databases
/// prepared, each cell a child `storbench`, failures recorded, a progress
/// line per cell with the plan's time left.
struct Cells<'a, 'p> {
    g: &'a Global,
    store: &'a Store,
    env: &'a mut plan_ops::Setup<'p>,
    /// When the cell in hand started, for its time and the plan's ETA.
    cell_t0: Instant,
    eta: exec::Eta,
    /// Cells complete before this run started (skipped unless --fresh).
    complete: std::collections::BTreeSet<String>,
    /// The common start instant: it gates the first measured command only;
    /// the cells after it begin when this shard is done with the one before.
    start_at: Option<String>,
    /// When the cell in hand started (a failed cell's run begins then).
    cell_started: String,
}

impl exec::CellRunner for Cells<'_, '_> {
    type Error = anyhow::Error;

    fn completed(&mut self, cell: &Cell) -> Result<bool> {
        Ok(self.store.completed_cell(&self.env.plan().def.name, &cell.id)?.is_some())
    }

    fn run(&mut self, cell: &Cell) -> std::result::Result<i32, String> {
        self.cell_started = storbench_results::now_rfc3339();
        self.env.run_cell(cell, self.start_at.take()).map_err(|e| e.to_string())
    }

    fn record_failure(&mut self, cell: &Cell, why: &str) -> Result<()> {
        record_failure(self.g, &self.env.plan().def.name, cell, why, &self.cell_started)
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
                if !self.g.quiet {
                    eprintln!(
                        "cell {n}/{of} {id}: running (about {}; the plan about {} more)",
                        format_duration(e.cell.estimate),
                        format_duration(Duration::from_secs(left.as_secs()))
                    );
                }
            }
            exec::What::Skipped if !self.g.quiet => {
                eprintln!("cell {n}/{of} {id}: complete already, skipped")
            }
            exec::What::Skipped => {}
            exec::What::Complete => {
                self.eta.ran(e.cell.estimate, self.cell_t0.elapsed());
                if !self.g.quiet {
                    eprintln!("cell {n}/{of} {id}: complete in {}", took());
                }
            }
            exec::What::Failed(why) => {
                self.eta.ran(e.cell.estimate, self.cell_t0.elapsed());
                match why {
                    exec::Failure::Exit(code) => {
                        eprintln!("cell {n}/{of} {id}: FAILED (exit code {code}) after {}", took())
                    }
                    exec::Failure::Error(why) => eprintln!("cell {n}/{of} {id}: FAILED: {why}"),
                }
            }
        }
    }
}

/// `--dry-run`: the expanded matrix and its estimated duration.
/// The ids of the plan's cells the store holds a complete run of.
fn complete_cells(plan: &Plan, store: &Store) -> Result<std::collections::BTreeSet<String>> {
    let mut done = std::collections::BTreeSet::new();
    for c in &plan.cells {
        if store.completed_cell(&plan.def.name, &c.id)?.is_some() {
            done.insert(c.id.clone());
        }
    }
    Ok(done)
}

fn print_matrix(plan: &storbench_plan::Plan, done: &std::collections::BTreeSet<String>) {
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
    println!("plan {} ({}): {} cells, {left}", plan.def.name, plan.file.display(), plan.cells.len());
    for (i, c) in plan.cells.iter().enumerate() {
        let time = if done.contains(&c.id) {
            format!("{:>7}", "done")
        } else {
            format!("~{:>6}", format_duration(c.estimate))
        };
        println!("{:>4}  {:<40} {time}  storbench {}", i + 1, c.id, shown(plan, c));
    }
}

/// Writes the plan's report and prints its summary (a warning if it fails:
/// the cells' runs are recorded either way).
fn print_report(store: &Store, name: &str, html: &std::path::Path) {
    match end_report(store, name, html) {
        Ok(summary) => {
            println!("{summary}");
            eprintln!("report: {}", html.display());
        }
        Err(e) => eprintln!("storbench: warning: the report of plan {name} could not be written: {e:#}"),
    }
}

/// The report a plan ends with: the HTML file, written whole, and the short
/// summary for the terminal (findings, main tables, the configurations
/// compared in a line; the full environment stays in the HTML and in
/// `results show`).
fn end_report(store: &Store, name: &str, html: &Path) -> Result<String> {
    let report = storbench_report::Report::load(store, &[name.to_string()])?;
    crate::cmd::report::write_whole(html, &report.to_html()?)?;
    Ok(report.to_summary())
}

/// The cell's command as a user would type it (placeholders shown by name).
fn shown(plan: &Plan, c: &Cell) -> String {
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

/// Every cell's command lines parse as the commands themselves would parse
/// them: unknown flags and bad flag values fail before anything runs.
fn validate_cells(plan: &Plan) -> Result<()> {
    for c in &plan.cells {
        let parts = c.parts();
        let argvs = parts.iter().flat_map(|(_, before, command)| {
            before.iter().map(Vec::as_slice).chain(std::iter::once(*command))
        });
        for argv in argvs {
            let filled: Vec<String> = argv
                .iter()
                .map(|a| {
                    let mut a = a.clone();
                    for t in plan.def.targets.keys() {
                        a = a.replace(&target_placeholder(t), "/tmp");
                    }
                    for d in plan.def.dbs.keys() {
                        a = a.replace(&db_placeholder(d), "sqlite:/tmp/x.db");
                    }
                    a
                })
                .collect();
            let mut full = vec!["storbench".to_string()];
            full.extend(filled);
            if let Err(e) = Cli::try_parse_from(&full) {
                let msg = e.to_string();
                let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid").trim();
                let first = first.trim_start_matches("error: ");
                return Err(usage(format!(
                    "{}: workload '{}' (`storbench {}`): {first}",
                    plan.file.display(),
                    c.workload,
                    argv[..argv.len().min(2)].join(" ")
                )));
            }
        }
    }
    Ok(())
}

/// A plan error as the binary reports it: bad input exits 2.
fn plan_err(e: PlanError) -> anyhow::Error {
    match e {
        PlanError::Usage(m) => usage(m),
        e => anyhow!(e),
    }
}

/// A cell that failed before its command could record a run still leaves a
/// trace: a `failed` run tagged with the plan and cell, saying why.
fn record_failure(g: &Global, plan: &str, cell: &Cell, why: &str, since: &str) -> Result<()> {
    let mut store = Store::open(&g.results)?;
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
        env: crate::record::base_env(json!({})),
        plan: Some(plan.to_string()),
        cell: Some(cell.id.clone()),
    })?;
    store.finish_run(run.id, Status::Failed)?;
    Ok(())
}
