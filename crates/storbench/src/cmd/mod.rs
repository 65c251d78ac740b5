//! One module per command noun. Each exposes its clap `Args` and a `run`
//! that validates everything first (no side effects), then acts.

pub mod backup;
pub mod cache;
pub mod calibrate;
pub mod compare;
pub mod crashpoints;
pub mod durability;
pub mod failover;
pub mod io;
pub mod k8s;
pub mod media;
pub mod merge;
pub mod pg;
pub mod report;
pub mod results;
pub mod run;
pub mod shell;
pub mod tpcb;
pub mod tpcc;
pub mod tpch;
