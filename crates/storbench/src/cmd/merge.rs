//! `storbench merge RUN... [--from FILE...]`: one run from N shard runs,
//! exactly (crates/cluster's merge: histograms merged, rates added,
//! server-side figures taken once). Shard runs come from the results store
//! by id or uuid prefix, and from other results files (`--from`, e.g. each
//! pod's own file on a shared volume), whose newest run is the shard. The
//! merged run is recorded in the results store; a shard missing or failed
//! makes it `failed` with a warning, and the command exits 1.

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
    /// Another results file whose newest run is a shard (repeatable).
    #[arg(long, value_name = "FILE")]
    pub from: Vec<PathBuf>,
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
    // Everything is read and checked before the merged run is written.
    if a.runs.is_empty() && a.from.is_empty() {
        return Err(usage("merge: no runs given: name shard runs (ids or uuid prefixes) or --from FILE"));
    }
    let mut shards = Vec::new();
    for f in &a.from {
        if !f.is_file() {
            return Err(usage(format!("--from '{}': no such results file", f.display())));
        }
        let other = Store::open(f)?;
        match ShardRun::latest(&other).map_err(merge_error)? {
            Some(s) => shards.push(s),
            None => return Err(usage(format!("--from '{}': the results file holds no run", f.display()))),
        }
    }
    if !a.runs.is_empty() && !g.results.exists() {
        return Err(usage(format!(
            "no results store at '{}' to find runs {} in",
            g.results.display(),
            a.runs.join(", ")
        )));
    }
    let mut store = Store::open(&g.results)?;
    for k in &a.runs {
        shards.push(ShardRun::load(&store, k).map_err(|e| match e {
            MergeError::Store(s) => usage(s.to_string()),
            e => merge_error(e),
        })?);
    }
    let merged = merge(&shards).map_err(merge_error)?;
    let label = g.label.clone().unwrap_or_else(|| format!("merge of {} shards", shards.len()));
    let run = write_merged(&mut store, &merged, &label).map_err(merge_error)?;
    for w in &merged.warnings {
        eprintln!("warning: {w}");
    }
    if g.json {
        let out = json!({
            "id": run.id, "uuid": run.uuid, "kind": run.kind, "label": run.label,
            "status": run.status.as_str(), "shards": shards.len(),
            "warnings": merged.warnings, "notes": merged.notes,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "merged {} shard runs into run {} ({}), {}: `storbench results show {}`",
            shards.len(),
            run.id,
            run.short(),
            run.status.as_str(),
            run.id
        );
        for n in &merged.notes {
            println!("  note: {n}");
        }
    }
    Ok(if run.status == Status::Complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::error::EXIT_FAILED)
    })
}
