//! `storbench results list | show RUN | export RUN --json|--csv`: read the
//! results store. Never writes to it (opening may mark dead runs interrupted).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use storbench_results::{RunFilter, Store};

use crate::cli::Global;
use crate::error::usage;

/// Options of `storbench results`.
#[derive(Debug, Args)]
pub struct ResultsArgs {
    #[command(subcommand)]
    pub verb: ResultsVerb,
}

/// What to do with the results store.
#[derive(Debug, Subcommand)]
pub enum ResultsVerb {
    /// List recorded runs, newest first.
    List {
        /// Only runs of this kind (io, tpcc, tpcb, ...).
        #[arg(long)]
        kind: Option<String>,
        /// Only runs of this plan.
        #[arg(long)]
        plan: Option<String>,
        /// At most this many runs.
        #[arg(long, short = 'n', default_value_t = 50)]
        limit: usize,
    },
    /// Show one run: its settings, environment and every step's figures.
    Show {
        /// Run id (a number) or a prefix of its uuid (as `results list` shows it).
        run: String,
    },
    /// Export one run as JSON (the full record) or CSV (its figures).
    Export {
        /// Run id (a number) or a prefix of its uuid (as `results list` shows it).
        run: String,
        /// Export as JSON (default).
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Export as CSV: one row per step and figure.
        #[arg(long)]
        csv: bool,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

fn open_existing(g: &Global) -> Result<Store> {
    if !g.results.exists() {
        return Err(usage(format!(
            "no results store at '{}': run a benchmark first, or point --results (or STORBENCH_RESULTS) at one",
            g.results.display()
        )));
    }
    Ok(Store::open(&g.results)?)
}

/// Maps "no such run" and "ambiguous" to usage errors (exit 2).
pub fn lookup_error(e: storbench_results::StoreError) -> anyhow::Error {
    match e {
        storbench_results::StoreError::NoSuchRun(_) | storbench_results::StoreError::Ambiguous(_) => {
            usage(e.to_string())
        }
        other => other.into(),
    }
}

/// Runs `storbench results`.
pub fn run(g: &Global, a: ResultsArgs) -> Result<ExitCode> {
    let store = open_existing(g)?;
    match a.verb {
        ResultsVerb::List { kind, plan, limit } => {
            let runs = store.runs(&RunFilter { kind, plan, limit: Some(limit) })?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&runs)?);
                return Ok(ExitCode::SUCCESS);
            }
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header(["id", "uuid", "kind", "label", "status", "started", "steps", "plan/cell"]);
            for r in &runs {
                let steps = store.steps(r.id)?.len();
                let plan = match (&r.plan, &r.cell) {
                    (Some(p), Some(c)) => format!("{p}/{c}"),
                    (Some(p), None) => p.clone(),
                    _ => String::new(),
                };
                t.add_row([
                    r.id.to_string(),
                    r.short().to_string(),
                    r.kind.clone(),
                    r.label.clone(),
                    r.status.as_str().to_string(),
                    r.started_at.clone(),
                    steps.to_string(),
                    plan,
                ]);
            }
            if runs.is_empty() {
                println!("no runs in {}", store.path().display());
            } else {
                println!("{t}");
            }
        }
        ResultsVerb::Show { run } => {
            let rec = store.export(&run).map_err(lookup_error)?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&rec)?);
                return Ok(ExitCode::SUCCESS);
            }
            let r = &rec.run;
            println!("run {} ({}) — {} '{}' — {}", r.id, r.uuid, r.kind, r.label, r.status.as_str());
            println!("started {}  finished {}", r.started_at, r.finished_at.as_deref().unwrap_or("-"));
            if let (Some(p), Some(c)) = (&r.plan, &r.cell) {
                println!("plan {p}, cell {c}");
            }
            println!("config: {}", r.config);
            println!("env:    {}", r.env);
            for s in &rec.steps {
                println!(
                    "\nstep {} — {}  ({} .. {})",
                    s.step.idx, s.step.label, s.step.started_at, s.step.finished_at
                );
                let mut t = Table::new();
                t.load_preset(UTF8_FULL_CONDENSED);
                t.set_header(["figure", "value", "unit"]);
                for (name, v) in &s.metrics {
                    let value = v["value"].as_f64().unwrap_or(f64::NAN);
                    t.add_row([
                        name.clone(),
                        storbench_metrics::units::format_figure(value),
                        v["unit"].as_str().unwrap_or("").to_string(),
                    ]);
                }
                println!("{t}");
            }
        }
        ResultsVerb::Export { run, json: _, csv, output } => {
            let text = if csv {
                store.export_csv(&run).map_err(lookup_error)?
            } else {
                serde_json::to_string_pretty(&store.export(&run).map_err(lookup_error)?)? + "\n"
            };
            match output {
                Some(path) => {
                    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?
                }
                None => print!("{text}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
