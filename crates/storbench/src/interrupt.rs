//! Ctrl-C (and SIGTERM): the first one sets the flag every running
//! workload polls (`storbench_run::interrupt`), so the step in progress
//! ends cleanly and is kept; a second one exits at once with 130.

pub use storbench_run::interrupt::{flag, requested};

/// Installs the handler; call once at start.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if storbench_run::interrupt::request() {
            std::process::exit(130);
        }
        eprintln!("\nstorbench: interrupted: finishing the current step (Ctrl-C again to quit at once)");
    });
}
