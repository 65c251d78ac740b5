//! Ctrl-C (and SIGTERM): the first one sets the flag every running
//! workload polls (`storbench_run::interrupt`), so the step in progress
//! ends cleanly and is kept; a second one exits at once with 130. A plan
//! (`storbench run`) takes one more: its cells are child processes of the
//! terminal's process group, which the second Ctrl-C stops at once, and
//! the plan then tears down the media and servers it made (a third Ctrl-C
//! quits at once and leaves them, as `media list` and `pg list` show).

use std::sync::atomic::{AtomicU32, Ordering};

pub use storbench_run::interrupt::{flag, requested};

/// Installs the handler; call once at start. `plan`: this process runs a
/// plan, whose teardown a second Ctrl-C does not skip.
pub fn install(plan: bool) {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let quit_at = if plan { 3 } else { 2 };
    let _ = ctrlc::set_handler(move || {
        storbench_run::interrupt::request();
        let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= quit_at {
            std::process::exit(130);
        }
        if n == 1 && plan {
            eprintln!(
                "\nstorbench: interrupted: finishing the current step, then tearing down what the plan made (Ctrl-C again to stop the step at once)"
            );
        } else if n == 1 {
            eprintln!("\nstorbench: interrupted: finishing the current step (Ctrl-C again to quit at once)");
        } else {
            eprintln!(
                "\nstorbench: stopping at once; tearing down what the plan made (Ctrl-C again to quit and leave it behind)"
            );
        }
    });
}
