//! The replication sampler: once a second, beside the system monitor, it
//! asks a managed primary with standbys what `pg_stat_replication` says
//! (each standby's write, flush and replay lag, sent−replayed distance),
//! how far its WAL moved, and how many commits wait for a standby. A step
//! takes its seconds as samples and lag p50/p99/max as figures. When
//! commits wait and a standby they wait for is gone, it says so once
//! (a [`ReplNote`] handed to the caller, who prints it), within about two
//! seconds. It runs only for a run on a managed instance with standbys; it
//! never blocks the run (its queries are plain SELECTs with a connect
//! timeout, in its own thread) and never prints.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use storbench_instances::pg::{self, Instance, Probe};
use storbench_metrics::{StepReport, Unit};

/// Half a second: a second belongs to a step when it ends more than this
/// after the step's measured window begins (as the system monitor counts).
const HALF: Duration = Duration::from_millis(500);

struct Snap {
    at: Instant,
    /// None when the primary could not be asked.
    probe: Option<Probe>,
    /// Commits released from their wait for a standby this second.
    released: i64,
}

/// What the sampler has to say, once each: the caller shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplNote {
    /// Commits wait for this standby, which is down.
    StandbyDown(String),
    /// Commits still waiting for a standby at a step's end were released
    /// (once per step).
    Released,
}

impl fmt::Display for ReplNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplNote::StandbyDown(n) => write!(f, "commits waiting for standby {n}, which is down"),
            ReplNote::Released => write!(
                f,
                "released commits still waiting for a standby at the step's end (committed on the primary only; counted as repl.released)"
            ),
        }
    }
}

/// Says a [`ReplNote`] (from the sampler's thread).
pub type Notes = Box<dyn Fn(ReplNote) + Send>;

/// A running sampler; stops when dropped.
pub struct ReplProbe {
    names: Vec<String>,
    /// When the current step should be over (start + ramp-up + duration +
    /// a second of grace), set by [`ReplProbe::step_started`].
    deadline: Arc<Mutex<Option<Instant>>>,
    /// The run's ramp-up plus duration per step.
    step_len: Option<Duration>,
    history: Arc<Mutex<Vec<Snap>>>,
    _sampler: storbench_proc::Background,
}

/// Whether `sync_names` makes commits wait for standby `name`.
fn waits_for(sync_names: Option<&str>, name: &str) -> bool {
    sync_names.is_some_and(|n| n.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|w| w == name))
}

impl ReplProbe {
    /// Starts sampling when the managed instance `name` is a primary with
    /// standbys; otherwise none. `step_len` is a step's ramp-up plus
    /// duration when the run has one; `interrupted` is the run's interrupt flag
    /// (a stop releases waiting commits too); `notes` says what the
    /// sampler has to say.
    pub fn start(
        name: &str,
        step_len: Option<Duration>,
        interrupted: &'static AtomicBool,
        notes: Notes,
    ) -> Option<ReplProbe> {
        let prim: Instance = pg::get(name).ok().flatten()?;
        if prim.standbys.is_empty() {
            return None;
        }
        let names: Vec<String> =
            prim.standbys.iter().filter_map(|n| pg::get(n).ok().flatten()?.standby_name).collect();
        let history = Arc::new(Mutex::new(Vec::new()));
        let deadline: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let (h, watched, dl) = (history.clone(), names.clone(), deadline.clone());
        let sampler = storbench_proc::Background::spawn(move |st| {
            let t0 = Instant::now();
            let mut gone_for = vec![0u32; watched.len()];
            let mut said = vec![false; watched.len()];
            let mut said_release: Option<Instant> = None;
            let mut k = 1u32;
            while !st.load(Ordering::Relaxed) {
                // Each second, and at the step's deadline itself: the
                // release must come before the runner's own cancel of calls
                // still running a grace second after the window, or the
                // waiters it frees go uncounted.
                let tick = t0 + Duration::from_secs(k as u64);
                let step_end = dl.lock().expect("repl deadline").filter(|d| *d > Instant::now());
                let due = step_end.map_or(tick, |d| d.min(tick));
                while Instant::now() < due && !st.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50).min(due - Instant::now()));
                }
                if due == tick {
                    k += 1;
                }
                let probe = pg::probe(&prim).ok();
                if let Some(p) = &probe {
                    for (i, n) in watched.iter().enumerate() {
                        let streaming = p.standbys.iter().any(|s| &s.name == n && s.state == "streaming");
                        gone_for[i] = if streaming { 0 } else { gone_for[i] + 1 };
                        let stuck = p.sync_waiting > 0 && waits_for(prim.sync_names.as_deref(), n);
                        if gone_for[i] >= 2 && stuck && !said[i] {
                            notes(ReplNote::StandbyDown(n.clone()));
                            said[i] = true;
                        }
                        if streaming {
                            said[i] = false;
                        }
                    }
                }
                // PostgreSQL keeps a commit waiting for a standby for ever; a
                // step past its time (or a Ctrl-C) releases the waiters so
                // the run ends. Their commits are local only: said, and
                // counted as `repl.released`.
                let over = interrupted.load(Ordering::Relaxed)
                    || dl.lock().expect("repl deadline").is_some_and(|d| Instant::now() > d);
                let mut released = 0;
                if over && probe.as_ref().is_some_and(|p| p.sync_waiting > 0) {
                    released = pg::release_sync_waiters(&prim).unwrap_or(0);
                    // Said once per step.
                    let step = *dl.lock().expect("repl deadline");
                    if released > 0 && said_release != step {
                        said_release = step;
                        notes(ReplNote::Released);
                    }
                }
                h.lock().expect("repl history").push(Snap { at: Instant::now(), probe, released });
            }
        });
        Some(ReplProbe { names, deadline, step_len, history, _sampler: sampler })
    }

    /// A step starts now: its commits may wait for a standby until its
    /// length (plus half a second for its users' connecting) has passed —
    /// half a second before the workload runner's grace cancel
    /// (`storbench_workloads::runner::GRACE`).
    pub fn step_started(&self, at: Instant) {
        *self.deadline.lock().expect("repl deadline") = self.step_len.map(|l| at + l + HALF);
    }

    /// The samples from `start` to `end` and the figures of the measured
    /// window (seconds ending after `measure_from` + ½ s).
    pub fn window(&self, start: Instant, measure_from: Instant, end: Instant) -> StepReport {
        let h = self.history.lock().expect("repl history");
        let snaps: Vec<&Snap> = h.iter().filter(|s| s.at > start && s.at <= end + HALF).collect();
        let mut r = StepReport::default();
        let mut prev: Option<(Instant, i64)> = None;
        // Per standby and lag kind, the window's values (ms); bytes; down seconds.
        let kinds = ["write_lag", "flush_lag", "replay_lag"];
        let mut lags: Vec<[Vec<f64>; 3]> = vec![Default::default(); self.names.len()];
        let mut dist: Vec<f64> = vec![0.0; self.names.len()];
        let mut down: Vec<f64> = vec![0.0; self.names.len()];
        let (mut wal_rates, mut waiting_max) = (Vec::new(), 0.0f64);
        let released: i64 = snaps.iter().map(|s| s.released).sum();
        for s in &snaps {
            let t = s.at.saturating_duration_since(start).as_millis() as u64;
            let in_window = s.at > measure_from + HALF;
            let Some(p) = &s.probe else {
                r.sample(t, "repl.primary_up", 0.0);
                continue;
            };
            r.sample(t, "repl.primary_up", 1.0);
            r.sample(t, "repl.sync_waiting", p.sync_waiting as f64);
            if let Some((at0, w0)) = prev {
                let secs = s.at.duration_since(at0).as_secs_f64();
                if secs > 0.0 {
                    let rate = (p.wal_bytes - w0).max(0) as f64 / secs;
                    r.sample(t, "repl.wal_bytes_per_s", rate);
                    if in_window {
                        wal_rates.push(rate);
                    }
                }
            }
            prev = Some((s.at, p.wal_bytes));
            if in_window {
                waiting_max = waiting_max.max(p.sync_waiting as f64);
            }
            for (i, n) in self.names.iter().enumerate() {
                let st = p.standbys.iter().find(|x| &x.name == n && x.state == "streaming");
                r.sample(t, format!("repl.{n}.connected"), if st.is_some() { 1.0 } else { 0.0 });
                let Some(st) = st else {
                    if in_window {
                        down[i] += 1.0;
                    }
                    continue;
                };
                // A lag is NULL once the standby has caught up and no WAL
                // flows: nothing is behind, so 0.
                let vals = [st.write_lag_ms, st.flush_lag_ms, st.replay_lag_ms].map(|v| v.unwrap_or(0.0));
                for (k, v) in kinds.iter().zip(vals) {
                    r.sample(t, format!("repl.{n}.{k}"), v);
                }
                r.sample(t, format!("repl.{n}.sent_replay_bytes"), st.sent_replay_bytes as f64);
                if in_window {
                    for (j, v) in vals.iter().enumerate() {
                        lags[i][j].push(*v);
                    }
                    dist[i] = dist[i].max(st.sent_replay_bytes as f64);
                }
            }
        }
        let pct = |v: &mut Vec<f64>, q: f64| {
            v.sort_by(f64::total_cmp);
            v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
        };
        for (i, n) in self.names.iter().enumerate() {
            for (j, k) in kinds.iter().enumerate() {
                let v = &mut lags[i][j];
                if v.is_empty() {
                    continue;
                }
                r.figure(format!("repl.{n}.{k}.p50"), pct(v, 0.50), Unit::Ms);
                r.figure(format!("repl.{n}.{k}.p99"), pct(v, 0.99), Unit::Ms);
                r.figure(format!("repl.{n}.{k}.max"), pct(v, 1.0), Unit::Ms);
            }
            r.figure(format!("repl.{n}.sent_replay_bytes.max"), dist[i], Unit::Bytes);
            r.figure(format!("repl.{n}.down"), down[i], Unit::S);
        }
        if !wal_rates.is_empty() {
            let mean = wal_rates.iter().sum::<f64>() / wal_rates.len() as f64;
            r.figure("repl.wal", mean / 1e6, Unit::MBps);
        }
        r.figure("repl.sync_waiting.max", waiting_max, Unit::Count);
        r.figure("repl.released", released as f64, Unit::Count);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standby_is_waited_for_only_when_the_names_list_it() {
        assert!(waits_for(Some("FIRST 1 (s1)"), "s1"));
        assert!(waits_for(Some("ANY 1 (s1, s2)"), "s2"));
        assert!(!waits_for(Some("FIRST 1 (s1)"), "s2"));
        assert!(!waits_for(Some("FIRST 1 (s10)"), "s1"));
        assert!(!waits_for(None, "s1"));
    }
}
