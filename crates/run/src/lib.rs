//! Running and recording one run, the same for every front end (a command
//! of the binary, a plan's cell, a shard): the [`record::Recorder`] every
//! measuring command writes through, [`shard`]ing and the common start
//! instant, the database argument ([`dbarg`]), the error classes that give
//! the exit codes ([`error`]), the interrupt flag workloads poll
//! ([`interrupt`]); the steps of a workload driven through the runner
//! ([`oltp`]), a workload's build, check and drop through the workload
//! contract ([`dataset`]), and the runs themselves: [`io`], [`tpcc`], [`tpcb`],
//! [`tpch`], [`backup`] and restore, a [`plan`]'s cells. Nothing here
//! prints: what is said goes through the [`record::Voice`] or the
//! [`oltp::Screen`] it is handed, or is returned as text.

#![deny(missing_docs)]

pub mod backup;
pub mod dataset;
pub mod dbarg;
pub mod error;
pub mod interrupt;
pub mod io;
pub mod oltp;
pub mod plan;
pub mod record;
pub mod shard;
pub mod tpcb;
pub mod tpcc;
pub mod tpch;
