//! `--db URL`: parsed, resolved and connected by `storbench_run::dbarg`.

pub use storbench_run::dbarg::*;
