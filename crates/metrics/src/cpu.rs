//! The process's own CPU time, for "what does the tool itself cost" figures:
//! read at the start and end of a measured window, divided by the
//! operations of that window.

use std::time::Duration;

use crate::{StepReport, Unit};

/// User and system CPU time of the whole process (every thread) so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessCpu {
    /// User time.
    pub user: Duration,
    /// System (kernel) time.
    pub sys: Duration,
}

impl ProcessCpu {
    /// Reads `getrusage(RUSAGE_SELF)`.
    pub fn now() -> ProcessCpu {
        // SAFETY: getrusage fills the struct we own.
        let r = unsafe {
            let mut r: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut r);
            r
        };
        let d = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        ProcessCpu { user: d(r.ru_utime), sys: d(r.ru_stime) }
    }
}

impl StepReport {
    /// Adds `{prefix}.user_per_{op}` and `{prefix}.sys_per_{op}` (µs of this
    /// process's CPU per operation) and `{prefix}.percent` (of one CPU) for
    /// the `ops` operations of a `secs`-second window that began at `from`
    /// and ended at `to`.
    pub fn cpu(&mut self, prefix: &str, op: &str, from: ProcessCpu, to: ProcessCpu, ops: f64, secs: f64) {
        let n = ops.max(1.0);
        let (user, sys) = (to.user.saturating_sub(from.user), to.sys.saturating_sub(from.sys));
        self.figure(format!("{prefix}.user_per_{op}"), user.as_secs_f64() * 1e6 / n, Unit::Us);
        self.figure(format!("{prefix}.sys_per_{op}"), sys.as_secs_f64() * 1e6 / n, Unit::Us);
        let pct = if secs > 0.0 { (user + sys).as_secs_f64() / secs * 100.0 } else { 0.0 };
        self.figure(format!("{prefix}.percent"), pct, Unit::Percent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work_and_divides_per_op() {
        let a = ProcessCpu::now();
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let b = ProcessCpu::now();
        assert!(b.user + b.sys > a.user + a.sys, "{a:?} -> {b:?}");

        let mut r = StepReport::default();
        let from = ProcessCpu { user: Duration::from_millis(100), sys: Duration::from_millis(50) };
        let to = ProcessCpu { user: Duration::from_millis(300), sys: Duration::from_millis(150) };
        r.cpu("driver.cpu", "txn", from, to, 1000.0, 2.0);
        assert_eq!(r.get("driver.cpu.user_per_txn"), Some(200.0));
        assert_eq!(r.get("driver.cpu.sys_per_txn"), Some(100.0));
        assert_eq!(r.get("driver.cpu.percent"), Some(15.0));
    }
}
