//! Database workloads (TPC-C-like, TPC-B-like, TPC-H-like) and the one runner that
//! drives them all.
//!
//! A workload is data plus a per-user [`Worker`] that runs one transaction at
//! a time over the [`storbench_db::Connection`] trait; the [`runner`] owns
//! users, ramp-up, steps, rate, think times, retries, reconnects and the
//! once-a-second collector. The runner never asks which workload or engine
//! it drives. Nothing here prints: progress goes to a callback.

#![deny(missing_docs)]

pub mod catalog;
pub mod dataset;
pub mod figures;
mod names;
pub mod rand_tpc;
pub mod runner;
pub mod tpcb;
pub mod tpcc;
pub mod tpch;

pub use dataset::{Bar, BuildError, Built, Checked, Dataset, Progress};
pub use figures::{build_report, BuildFigures, Column, Description, FigureSpec};
pub use runner::{Connector, Done, Probe, StepError, StepResult, StepSpec, Tick, Worker, Workload};
