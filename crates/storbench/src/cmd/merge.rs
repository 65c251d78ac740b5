//! `storbench merge RUN... [--from FILE...]`: one run from N shard runs,
//! exactly (crates/cluster's merge: histograms merged, rates added,
//! server-side figures taken once). Shard runs come from the results store
//! by id or uuid prefix, and from other results files (`--from`, e.g. each
//! pod's own file on a shared volume). A file holding one run is that
//! shard's run; files holding one run per plan cell (each shard ran a
//! plan) are merged cell by cell, each merged run keeping its plan and
//! cell so `storbench report PLAN` reads the merged store as it would one
//! host's. Merged runs are recorded in the results store; a shard missing
//! or failed makes its merged run `failed` with a warning, and the command
//! exits 1.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;
use storbench_cluster::{merge, write_merged, MergeError, ShardRun};
use storbench_results::{Status, Store};

use crate::cli::Global;
use crate::error::usage;

/// Options of `storbench merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Shard runs in the results store: ids or uuid prefixes.
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
    /// A shard's results file (repeatable): its run, or its runs of a
    /// plan's cells, each merged with the same cell of the other files.
    #[arg(long, value_name = "FILE")]
    pub from: Vec<PathBuf>,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

fn merge_error(e: MergeError) -> anyhow::Error {
    if e.is_usage() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

/// Runs `storbench merge`.
pub fn run(g: &Global, a: MergeArgs) -> Result<ExitCode> {
    // Everything is read and checked before a merged run is written.
    if a.runs.is_empty() && a.from.is_empty() {
        return Err(usage("merge: no runs given: name shard runs (ids or uuid prefixes) or --from FILE"));
    }
    let mut files = Vec::new();
    for f in &a.from {
        if !f.is_file() {
            return Err(usage(format!("--from '{}': no such results file", f.display())));
        }
        let runs = ShardRun::all(&Store::open_read(f)?).map_err(merge_error)?;
        if runs.is_empty() {
            return Err(usage(format!("--from '{}': the results file holds no run", f.display())));
        }
        files.push(runs);
    }
    if !a.runs.is_empty() && !g.results.exists() {
        return Err(usage(format!(
            "no results store at '{}' to find runs {} in",
            g.results.display(),
            a.runs.join(", ")
        )));
    }
    let mut store = Store::open(&g.results)?;
    let mut named = Vec::new();
    for k in &a.runs {
        named.push(ShardRun::load(&store, k).map_err(|e| match e {
            MergeError::Store(s) => usage(s.to_string()),
            e => merge_error(e),
        })?);
    }
    let groups = group(files, named);
    if groups.is_empty() {
        return Err(usage("merge: no run in the files given carries a shard identity (config.shard i/N)"));
    }
    let merged: Vec<_> =
        groups.iter().map(|shards| merge(shards).map_err(merge_error)).collect::<Result<_>>()?;
    let mut all_complete = true;
    let mut out = Vec::new();
    for (shards, m) in groups.iter().zip(&merged) {
        // One group: the label given, or the shards' count; a sharded plan's
        // cells keep their own labels.
        let label = match (&g.record.label, groups.len()) {
            (Some(l), 1) => l.clone(),
            (_, 1) => format!("merge of {} shards", shards.len()),
            _ => shards[0].run.label.clone(),
        };
        let run = write_merged(&mut store, m, &label).map_err(merge_error)?;
        for w in &m.warnings {
            eprintln!("warning: {}{w}", cell_prefix(&run.cell, groups.len()));
        }
        all_complete &= run.status == Status::Complete;
        if g.json {
            out.push(json!({
                "id": run.id, "uuid": run.uuid, "kind": run.kind, "label": run.label, "cell": run.cell,
                "status": run.status.as_str(), "shards": shards.len(),
                "warnings": m.warnings, "notes": m.notes,
            }));
        } else {
            println!(
                "{}merged {} shard runs into run {} ({}), {}: `storbench results show {}`",
                cell_prefix(&run.cell, groups.len()),
                shards.len(),
                run.id,
                run.short(),
                run.status.as_str(),
                run.id
            );
            for n in &m.notes {
                println!("  note: {n}");
            }
        }
    }
    if g.json {
        // One merged run: its record; a sharded plan's cells: an array.
        let v = if out.len() == 1 { out.remove(0) } else { json!(out) };
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(if all_complete { ExitCode::SUCCESS } else { ExitCode::from(crate::error::EXIT_FAILED) })
}

fn cell_prefix(cell: &Option<String>, groups: usize) -> String {
    match cell {
        Some(c) if groups > 1 => format!("cell {c}: "),
        _ => String::new(),
    }
}

/// The merges to make. Runs named by id, and files holding one run each,
/// are the shards of one run. When a file holds several runs (each shard
/// ran a plan: one run per cell), the runs of all files that carry a shard
/// identity are grouped by their plan cell, in the order the cells first
/// appear, and each cell is merged on its own; a run without a shard
/// identity (a cell that failed before it could record, a command run by
/// hand) is no shard and is left out, with a warning.
fn group(files: Vec<Vec<ShardRun>>, named: Vec<ShardRun>) -> Vec<Vec<ShardRun>> {
    if files.iter().all(|f| f.len() == 1) {
        let mut one: Vec<ShardRun> = files.into_iter().flatten().collect();
        one.extend(named);
        return vec![one];
    }
    // Keyed by (plan, cell).
    type Cell = (Option<String>, Option<String>);
    let mut groups: Vec<(Cell, Vec<ShardRun>)> = Vec::new();
    for r in files.into_iter().flatten().chain(named) {
        if r.shard().is_none() {
            eprintln!(
                "warning: run {} ({}) has no shard identity: left out of the merge",
                r.run.short(),
                r.run.label
            );
            continue;
        }
        let key = (r.run.plan.clone(), r.run.cell.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}
