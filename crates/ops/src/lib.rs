//! Multi-step operations a plan or the binary calls, above the engines (io,
//! workloads, media, emu, instances), each a library function that returns
//! what it found (nothing here prints): calibrating a device model and
//! validating it against a device, backup and restore with their checks,
//! the replication sampler a replicated step runs beside it, the
//! durability check across a power cut, the failover check of synchronous
//! replication, the acknowledged-writes bookkeeping both checks use, and
//! the running of a plan's cells (targets, managed databases, child
//! commands).

#![deny(missing_docs)]

pub mod acked;
pub mod backup;
pub mod calibrate;
pub mod crash;
pub mod durability;
pub mod error;
pub mod failover;
pub mod plan;
pub mod repl;
pub mod sensitivity;
pub mod sqlite_device;
