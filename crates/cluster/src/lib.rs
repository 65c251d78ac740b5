//! storbench past one machine (DESIGN.md's `cluster` crate, layer 3): which
//! part of the load a shard `i/N` runs and when all shards begin together
//! ([`shard`]), and the exact merge of N shard runs into one ([`merge`]):
//! counts and rates add, histograms merge so percentiles are of the whole,
//! server-side figures are taken once; Kubernetes manifests for a sharded
//! plan ([`k8s`]). Live metrics for Prometheus, which single runs serve too,
//! are the crate `storbench-exporter`. This crate never prints.

#![deny(missing_docs)]

pub mod k8s;
pub mod merge;
pub mod shard;

pub use merge::{merge, write_merged, MergeError, Merged, ShardRun};
pub use shard::{
    parse_instant, parse_start, split_aligned, split_range, wait_until, Shard, ShardError, StartAt,
};
