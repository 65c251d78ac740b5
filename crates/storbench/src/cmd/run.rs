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

use anyhow::{Context, Result};
use clap::Args;
use storbench_metrics::units::format_duration;
use storbench_ops::plan::{self as plan_ops};
use storbench_plan::{db_placeholder, exec, target_placeholder, Plan};
use storbench_results::Store;

use crate::cli::Global;
use crate::error::{usage, EXIT_INTERRUPTED};
use storbench_run::plan::{complete_cells, matrix_text, plan_err, Cells};

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

/// Runs `storbench run`; `parses` is the command line's own parser (Ok
/// when an argv parses as the commands would parse it).
pub fn run(g: &Global, a: RunArgs, parses: &dyn Fn(&[String]) -> Result<(), String>) -> Result<ExitCode> {
    let sharding = g.sharding();
    let plan = storbench_plan::load(&a.plan, a.quick).map_err(|e| usage(e.to_string()))?;
    let name = plan.def.name.clone();
    validate_cells(&plan, parses)?;
    plan_ops::validate_targets(&plan).map_err(plan_err)?;
    // What would measure something other than storage: said before a
    // dry run too, so a plan is fixed before it takes an afternoon.
    for w in plan.warnings() {
        eprintln!("storbench: warning: plan {name}: {w}");
    }
    let changed = |l: &str| eprintln!("storbench: plan {name}: {l}");
    if a.dry_run {
        // What a run would skip: cells complete in the store (never made
        // by a dry run), unless --fresh.
        let done = if g.results.exists() && !a.fresh {
            complete_cells(&plan, &Store::open_read(&g.results)?, &changed)?
        } else {
            Default::default()
        };
        println!("{}", matrix_text(&plan, &done));
        return Ok(ExitCode::SUCCESS);
    }
    let store = Store::open(&g.results)?;
    let exe = std::env::current_exe().context("finding the storbench executable")?;
    let opts = plan_ops::Options {
        shard: g.run.shard.filter(|_| sharding.given).map(|s| s.to_string()),
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
    let complete = if a.fresh { Default::default() } else { complete_cells(&plan, &store, &changed)? };
    let say = |l: &str| eprintln!("{l}");
    let mut cells = Cells {
        quiet: g.quiet,
        results: &g.results,
        build: crate::record::BUILD,
        say: &say,
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

/// `--dry-run`: the expanded matrix and its estimated duration.
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

/// Every cell's command lines parse as the commands themselves would parse
/// them: unknown flags and bad flag values fail before anything runs.
fn validate_cells(plan: &Plan, parses: &dyn Fn(&[String]) -> Result<(), String>) -> Result<()> {
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
            if let Err(msg) = parses(&full) {
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
