//! Waiting with a timeout: for a condition, polled with a backoff that
//! starts at 5 ms and doubles to 200 ms (a fast event is seen quickly, a
//! slow one costs few polls), and for a child process (`wait-timeout`).

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

/// Polls `done` until it holds (true) or `timeout` has passed (false); it is
/// asked once more at the end, so a zero timeout asks once.
pub fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        if done() {
            return true;
        }
        let left = timeout.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Waits up to `timeout` for `child` to exit: its status, or None when it
/// still runs (it is left running: the caller decides).
pub fn wait_child(child: &mut Child, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
    child.wait_timeout(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_comes_true_is_seen_and_one_that_never_does_times_out() {
        let t0 = Instant::now();
        let mut n = 0;
        assert!(wait_until(Duration::from_secs(5), || {
            n += 1;
            n == 4
        }));
        assert!(t0.elapsed() < Duration::from_secs(1));
        let t0 = Instant::now();
        assert!(!wait_until(Duration::from_millis(100), || false));
        assert!(t0.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn a_child_that_outlives_the_wait_is_reported_running() {
        let mut c = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert!(wait_child(&mut c, Duration::from_millis(50)).unwrap().is_none());
        c.kill().unwrap();
        assert!(wait_child(&mut c, Duration::from_secs(5)).unwrap().is_some());
    }
}
