//! `storbench results list | show RUN | export RUN --json|--csv | delete
//! RUN...`: read the results store, and remove runs from it. Only `delete`
//! writes to it (opening may mark dead runs interrupted).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use storbench_report::Table;
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
    /// Delete runs with all their figures (a run still running is refused;
    /// an unknown run deletes nothing).
    Delete {
        /// Run ids (numbers) or prefixes of their uuids (as `results list` shows them).
        #[arg(required = true)]
        runs: Vec<String>,
    },
}

/// Maps "no such run" and "ambiguous" to usage errors (exit 2).
pub fn lookup_error(e: storbench_results::StoreError) -> anyhow::Error {
    match e {
        storbench_results::StoreError::NoSuchRun(_)
        | storbench_results::StoreError::Ambiguous(_)
        | storbench_results::StoreError::StillRunning(_) => usage(e.to_string()),
        other => other.into(),
    }
}

/// Prints a run's settings or environment one key a line (a JSON object on
/// one line runs hundreds of columns wide); nested objects and lists of
/// objects are spelled out with dotted keys (`profiles.0.bs`).
fn print_keys(title: &str, v: &serde_json::Value) {
    let mut rows = Vec::new();
    flatten("", v, &mut rows);
    println!("{title}:");
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, text) in rows {
        println!("  {k:<width$}  {text}");
    }
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    use serde_json::Value;
    let key = |k: &str| if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
    match v {
        Value::Object(map) if !map.is_empty() => map.iter().for_each(|(k, v)| flatten(&key(k), v, out)),
        Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array()) => {
            items.iter().enumerate().for_each(|(i, v)| flatten(&key(&i.to_string()), v, out))
        }
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// Runs `storbench results`.
pub fn run(g: &Global, a: ResultsArgs) -> Result<ExitCode> {
    let store = crate::cmd::report::open_store(g)?;
    match a.verb {
        ResultsVerb::Delete { runs } => {
            drop(store);
            // Deleting writes: open to write (this migrates an older store).
            let mut store = Store::open(&g.results)?;
            let gone = store.delete_runs(&runs).map_err(lookup_error)?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&gone)?);
            } else {
                for r in &gone {
                    println!(
                        "deleted run {} ({}, {} '{}', {})",
                        r.id,
                        r.short(),
                        r.kind,
                        r.label,
                        r.started_at
                    );
                }
            }
            return Ok(ExitCode::SUCCESS);
        }
        ResultsVerb::List { kind, plan, limit } => {
            let runs = store.runs(&RunFilter { kind, plan, limit: Some(limit) })?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&runs)?);
                return Ok(ExitCode::SUCCESS);
            }
            let mut t = Table::with_header([
                "id",
                "uuid",
                "kind",
                "label",
                "status",
                "started",
                "steps",
                "plan/cell",
            ]);
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
                print!("{}", t.to_text());
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
            print_keys("config", &r.config);
            print_keys("env", &r.env);
            for s in &rec.steps {
                println!(
                    "\nstep {} — {}  ({} .. {})",
                    s.step.idx, s.step.label, s.step.started_at, s.step.finished_at
                );
                if s.step.params.as_object().is_some_and(|m| !m.is_empty()) {
                    print_keys("params", &s.step.params);
                }
                let mut t = Table::with_header(["figure", "value", "unit"]);
                for (name, v) in &s.metrics {
                    let value = v["value"].as_f64().unwrap_or(f64::NAN);
                    t.add_row([
                        name.clone(),
                        storbench_metrics::units::format_figure(value),
                        v["unit"].as_str().unwrap_or("").to_string(),
                    ]);
                }
                print!("{}", t.to_text());
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
