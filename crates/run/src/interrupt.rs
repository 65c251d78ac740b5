//! The interrupt flag every running workload polls: the front end sets it
//! (the binary on Ctrl-C or SIGTERM), so the step in progress ends cleanly
//! and is kept.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Asks every running workload to stop; returns whether a stop had been
/// asked already (a second Ctrl-C quits at once).
pub fn request() -> bool {
    STOP.swap(true, Ordering::SeqCst)
}

/// The flag workloads poll: true once the user asked to stop.
pub fn flag() -> &'static AtomicBool {
    &STOP
}

/// True once the user asked to stop.
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
