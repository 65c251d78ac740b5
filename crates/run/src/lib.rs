//! Running and recording one run, the same for every front end (a command
//! of the binary, a plan's cell, a shard): the [`record::Recorder`] every
//! measuring command writes through, [`shard`]ing and the common start
//! instant, the database argument ([`dbarg`]), the error classes that give
//! the exit codes ([`error`]) and the interrupt flag workloads poll
//! ([`interrupt`]). Nothing here prints: what is said goes through the
//! [`record::Voice`] it is handed.

#![deny(missing_docs)]

pub mod dbarg;
pub mod error;
pub mod interrupt;
pub mod record;
pub mod shard;
