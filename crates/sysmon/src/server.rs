//! The database server's own CPU, once a second: the CPU time of its
//! process tree (PostgreSQL's postmaster and its backends; MariaDB's one
//! `mariadbd`) as a share of one CPU, so a CPU verdict can say how much of
//! the busy host was the server's (`server.cpu.percent`, as storbench's
//! own is `driver.cpu.percent`). Only for a server on this host (its
//! process visible in /proc); never prints.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use storbench_metrics::{StepReport, Unit};

/// The server's CPU figure and series: % of one CPU (200 % is two CPUs busy).
pub const SERVER_CPU: &str = "server.cpu.percent";

/// Half a second: a second belongs to a window when it ends more than this
/// into it (as the system monitor counts).
const HALF: Duration = Duration::from_millis(500);

/// Samples a process tree's CPU once a second; stops when dropped.
pub struct ServerCpu {
    history: Arc<Mutex<Vec<(Instant, u64)>>>,
    _sampler: storbench_proc::Background,
}

impl ServerCpu {
    /// Starts watching the tree under `root`; `None` when no such process.
    pub fn start(root: u32) -> Option<ServerCpu> {
        let first = storbench_proc::tree_cpu_ticks(root)?;
        let history = Arc::new(Mutex::new(vec![(Instant::now(), first)]));
        let h = history.clone();
        let sampler = storbench_proc::Background::spawn(move |st| {
            let t0 = Instant::now();
            let mut k = 1u32;
            while !st.load(Ordering::Relaxed) {
                let due = t0 + Duration::from_secs(k as u64);
                while Instant::now() < due && !st.load(Ordering::Relaxed) {
                    std::thread::sleep(
                        Duration::from_millis(50).min(due.saturating_duration_since(Instant::now())),
                    );
                }
                k += 1;
                let Some(t) = storbench_proc::tree_cpu_ticks(root) else { break };
                h.lock().expect("server cpu history").push((Instant::now(), t));
            }
        });
        Some(ServerCpu { history, _sampler: sampler })
    }

    /// Starts watching the server one of whose processes is `pid` (as
    /// `storbench_db::waits::server_pid` gives it): a PostgreSQL backend's
    /// parent, the postmaster, or a `mariadbd`/`mysqld` itself; `None`
    /// when `pid` is no server process on this host.
    pub fn for_server_process(pid: u32) -> Option<ServerCpu> {
        let (parent, name) = storbench_proc::parent_and_name(pid)?;
        let root = match name.as_str() {
            "postgres" | "postmaster" => {
                let (_, pname) = storbench_proc::parent_and_name(parent)?;
                (pname == "postgres" || pname == "postmaster").then_some(parent)?
            }
            "mariadbd" | "mysqld" => pid,
            _ => return None,
        };
        ServerCpu::start(root)
    }

    /// Per-second samples from `start` to `end` and the measured window's
    /// mean (seconds ending after `measure_from` + ½ s).
    pub fn window(&self, start: Instant, measure_from: Instant, end: Instant) -> StepReport {
        let h = self.history.lock().expect("server cpu history");
        window(&h, start, measure_from, end, storbench_proc::ticks_per_second() as f64)
    }
}

/// The share of one CPU between readings (`tick_hz` ticks a second).
fn window(
    h: &[(Instant, u64)],
    start: Instant,
    measure_from: Instant,
    end: Instant,
    tick_hz: f64,
) -> StepReport {
    let mut r = StepReport::default();
    let pct = |a: &(Instant, u64), b: &(Instant, u64)| {
        let secs = b.0.duration_since(a.0).as_secs_f64();
        (secs > 0.0).then(|| b.1.saturating_sub(a.1) as f64 / tick_hz / secs * 100.0)
    };
    let mut first: Option<&(Instant, u64)> = None;
    let mut last: Option<&(Instant, u64)> = None;
    for w in h.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if b.0 <= start || b.0 > end + HALF {
            continue;
        }
        if let Some(p) = pct(a, b) {
            r.sample(b.0.duration_since(start).as_millis() as u64, SERVER_CPU, p);
        }
        if b.0 > measure_from + HALF {
            first.get_or_insert(a);
            last = Some(b);
        }
    }
    if let Some(p) = first.zip(last).and_then(|(a, b)| pct(a, b)) {
        r.figure(SERVER_CPU, p, Unit::Percent);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_the_tree_s_ticks_over_its_seconds_as_a_share_of_one_cpu() {
        let t0 = Instant::now();
        let at = |ms: u64, ticks: u64| (t0 + Duration::from_millis(ms), ticks);
        // 100 ticks a second: 50, then 150 (1.5 CPUs), then 100 ticks a second.
        let h = [at(0, 0), at(1000, 50), at(2000, 200), at(3000, 300)];
        let r = window(&h, t0, t0 + Duration::from_millis(900), t0 + Duration::from_millis(3000), 100.0);
        let s: Vec<(u64, f64)> = r.samples.iter().map(|x| (x.t_ms, x.value)).collect();
        assert_eq!(s, vec![(1000, 50.0), (2000, 150.0), (3000, 100.0)]);
        // The window: the seconds ending after 1.4 s, from 1 s to 3 s.
        assert_eq!(r.get(SERVER_CPU), Some(125.0));
    }

    #[test]
    fn this_process_tree_is_watched_and_a_missing_one_is_none() {
        assert!(ServerCpu::start(std::process::id()).is_some());
        assert!(ServerCpu::start(u32::MAX - 1).is_none());
    }
}
