//! Recording a run: the library's Recorder (`storbench_run::record`),
//! opened with this command's options and speaking on this terminal (the
//! run record on stdout with `--json`; notes and errors on stderr).

use serde_json::Value;
use storbench_run::record::{Build, RecordOptions, Voice};
pub use storbench_run::record::{Outcome, Recorder};

use crate::cli::Global;

/// This binary: its version, the commit and date it was built (build.rs).
pub const BUILD: Build = Build {
    version: env!("CARGO_PKG_VERSION"),
    commit: env!("STORBENCH_COMMIT"),
    date: env!("STORBENCH_BUILD_DATE"),
};

/// The terminal: stdout for the record, stderr for the rest.
pub const VOICE: Voice = Voice {
    out: |s| println!("{s}"),
    note: |s| eprintln!("storbench: {s}"),
    error: |e| {
        crate::error::report(e);
    },
};

impl From<&Global> for RecordOptions {
    fn from(g: &Global) -> RecordOptions {
        RecordOptions {
            results: g.results.clone(),
            json: g.json,
            quiet: g.quiet,
            memory_limit: g.run.memory_limit.as_ref().map(|m| m.text.clone()),
            metrics_addr: g.run.metrics_addr.clone(),
            label: g.record.label.clone(),
            axes: g.record.axes.clone(),
            plan: g.record.plan.clone(),
            cell: g.record.cell.clone(),
            cell_digest: g.record.cell_digest.clone(),
            sharding: g.sharding(),
            build: BUILD,
            voice: VOICE,
        }
    }
}

/// Environment facts every run records, merged under `extra`'s keys.
pub fn base_env(extra: Value) -> Value {
    storbench_run::record::base_env(extra, &BUILD)
}
