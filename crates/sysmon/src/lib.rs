//! What the machine is and what its devices do while a run runs.
//!
//! [`host_env`] and [`path_env`] describe the host and a target path (its
//! filesystem, block size and the device behind it) for a run's `env_json`.
//! [`Monitor`] samples CPU and device counters once a second while a workload
//! runs and turns a time window into a step's samples and figures. Reads
//! /proc and /sys only; never prints.

#![deny(missing_docs)]

mod env;
mod monitor;
pub mod procfs;
pub mod server;

pub use env::{host_env, path_env, PathInfo};
pub use monitor::{devices_behind, disk_fields, summarise, Monitor, Snapshot, STEAL_FLAG_PCT};
