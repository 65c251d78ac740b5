//! Ctrl-C (and SIGTERM): the first one sets a flag that every running
//! workload polls, so the step in progress ends cleanly and is kept; a second
//! one exits at once with 130.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Installs the handler; call once at start.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstorbench: interrupted: finishing the current step (Ctrl-C again to quit at once)");
    });
}

/// The flag workloads poll: true once the user asked to stop.
pub fn flag() -> &'static AtomicBool {
    &STOP
}

/// True once the user asked to stop.
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
