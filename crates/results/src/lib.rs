//! The results store: one SQLite file holding every run, its steps, their
//! summary figures, per-second samples and serialised histograms, in the
//! schema DESIGN.md gives. Every figure a report shows is recomputable from it.
//!
//! Writes are whole: a step (its row, metrics, samples and histograms) goes in
//! one transaction, so a crash loses at most the step in progress. A run left
//! `running` by a process that no longer exists is marked `interrupted` the
//! next time the store is opened. This crate never prints.

#![deny(missing_docs)]

mod export;
mod schema;
mod store;

pub use export::{csv_field, RunExport, StepExport};
pub use store::{
    now_rfc3339, short_uuid, HistogramRow, MetricRow, NewRun, NoteRow, RunFilter, RunRow, SampleRow, Status,
    StepRow, Store, StoreError,
};
