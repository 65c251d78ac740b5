//! Running a cell: its build and init commands one after another, then its
//! measured commands (one, or a `together` group side by side from one
//! instant), each a child `storbench` tagged with the plan, the cell and
//! its axes. Every child is waited for before any verdict, so none is left
//! running; the cell's exit code is what the executor judges.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use storbench_plan::exec::EXIT_INTERRUPTED;
use storbench_plan::{Cell, Cycles, CYCLE_PLACEHOLDER};

use super::{Parts, PlanError, Setup};

type Result<T> = std::result::Result<T, PlanError>;

/// How long before their common start a `together` cell's workloads are
/// started: time for each to connect, open and set up before the instant.
const TOGETHER_LEAD: Duration = Duration::from_secs(5);

/// How long before its instant a repeated workload's next cycle is started
/// (TOGETHER_LEAD for the first).
const CYCLE_LEAD: Duration = Duration::from_secs(2);

/// Why a child ended without an exit code: the signal, and for a SIGKILL
/// under `--memory-limit` the likely cause.
pub fn killed(st: &std::process::ExitStatus, argv: &[String]) -> String {
    use std::os::unix::process::ExitStatusExt;
    match st.signal() {
        Some(libc::SIGKILL) if argv.iter().any(|a| a == "--memory-limit") => {
            "was killed (SIGKILL: under --memory-limit most likely the memory group's OOM killer, as dmesg says; raise the limit)".to_string()
        }
        Some(sig) => format!("was killed (signal {sig})"),
        None => "was killed".to_string(),
    }
}

/// The axes as `STORBENCH_AXES` carries them.
fn json(v: &BTreeMap<String, String>) -> Result<String> {
    serde_json::to_string(v).map_err(|e| PlanError::Failed(e.to_string()))
}

impl Setup<'_> {
    /// Prepares `cell` (its targets and database) and runs its commands:
    /// see [`Setup::prepare`] and [`Setup::run_parts`].
    pub fn run_cell(&mut self, cell: &Cell, start_at: Option<String>) -> Result<i32> {
        let parts = self.prepare(cell)?;
        self.run_parts(cell, &parts, start_at)
    }

    /// Runs a cell's commands; returns the measured commands' exit code (the
    /// first that is not 0). The measured command begins its first step at
    /// `start_at` when given; the workloads of a `together` cell are started
    /// side by side and begin at one instant, `start_at` or a few seconds on.
    pub fn run_parts(&self, cell: &Cell, parts: &Parts, start_at: Option<String>) -> Result<i32> {
        if let Some(code) = self.run_builds(cell, parts)? {
            return Ok(code);
        }
        self.cold_cache(cell)?;
        let start_at = if parts.len() > 1 {
            start_at.or_else(|| {
                let t = chrono::Utc::now() + chrono::Duration::from_std(TOGETHER_LEAD).unwrap_or_default();
                Some(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            })
        } else {
            start_at
        };
        let spawn = |w: &str, argv: &[Vec<String>], at: Option<&String>, cycle: Option<(u32, u32)>| {
            let command: Vec<String> = argv[argv.len() - 1]
                .iter()
                .map(|a| a.replace(CYCLE_PLACEHOLDER, &cycle.map_or(1, |c| c.0).to_string()))
                .collect();
            let tags = cell.neighbour_axes(w);
            let mut axes = cell.axes.clone();
            axes.extend(tags.iter().cloned());
            let mut label = match tags.iter().find(|t| t.0 == "with") {
                Some((_, with)) if with == "alone" => format!("{} {w} alone", cell.label),
                Some((_, with)) => format!("{} {w} with {with}", cell.label),
                None => cell.label.clone(),
            };
            if let Some((k, n)) = cycle {
                axes.insert("cycle".into(), k.to_string());
                label = format!("{label} cycle {k}/{n}");
            }
            let mut c = self.child();
            c.args(&command)
                .arg("--label")
                .arg(&label)
                .env("STORBENCH_PLAN", &self.plan.def.name)
                .env("STORBENCH_CELL", &cell.id)
                .env("STORBENCH_CELL_DIGEST", &cell.digest)
                .env("STORBENCH_AXES", json(&axes)?)
                .stdout(Stdio::null());
            for (k, v) in [
                ("STORBENCH_SHARD", self.opts.shard.as_ref()),
                ("STORBENCH_METRICS_ADDR", self.opts.metrics.as_ref()),
                ("STORBENCH_START_AT", at),
            ] {
                if let Some(v) = v {
                    c.env(k, v);
                }
            }
            let child = c
                .spawn()
                .map_err(|e| PlanError::io(format!("running storbench {}", command.join(" ")), e))?;
            Ok::<_, PlanError>((command, child))
        };
        let mut once = Vec::new();
        let mut cycled = Vec::new();
        for (w, argv) in parts {
            match cell.cycles.get(w) {
                None => once.push(spawn(w, argv, start_at.as_ref(), None)),
                Some(c) => cycled.push((w, argv, *c)),
            }
        }
        let mut codes = Vec::new();
        let mut errors = Vec::new();
        if !cycled.is_empty() {
            // A spawn that failed leaves the others to be waited for below.
            let mut running: Vec<_> = once.iter_mut().filter_map(|r| r.as_mut().ok()).collect();
            let first = start_at
                .as_deref()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map_or_else(chrono::Utc::now, |t| t.with_timezone(&chrono::Utc));
            let (c, e) = self.run_cycles(cell, &cycled, first, &mut running, &spawn);
            codes.extend(c);
            errors.extend(e);
        }
        // Every child is waited for before any verdict, so none is left running.
        let ended: Vec<_> =
            once.into_iter().map(|r| r.map(|(argv, mut child)| (child.wait(), argv))).collect();
        for r in ended {
            match r.and_then(|(st, argv): (_, Vec<String>)| self.code_of(&argv, st)) {
                Ok(code) => codes.push(code),
                Err(e) => errors.push(e),
            }
        }
        if let Some(e) = errors.into_iter().next() {
            return Err(e);
        }
        // An interrupt outranks a failure; otherwise the first failure's code.
        Ok(if codes.contains(&EXIT_INTERRUPTED) {
            EXIT_INTERRUPTED
        } else {
            codes.into_iter().find(|&c| c != 0).unwrap_or(0)
        })
    }

    /// A child's exit code, or why it has none.
    fn code_of(&self, argv: &[String], st: std::io::Result<std::process::ExitStatus>) -> Result<i32> {
        let what = argv.join(" ");
        let st = st.map_err(|e| PlanError::io(format!("waiting for storbench {what}"), e))?;
        st.code().ok_or_else(|| PlanError::Failed(format!("storbench {what} {}", killed(&st, argv))))
    }

    /// Runs the repeated workloads' cycles beside `running` (the workloads
    /// that run once, already started): cycle k of each begins at `first`
    /// plus (k-1) × every, or at once (a moment on) when cycle k-1 ended
    /// later, and none begins once every workload of `running` has ended,
    /// nor after a cycle failed. Returns the cycles' exit codes and the
    /// errors met (a cycle that could not start or was killed); every cycle
    /// started has ended when it returns. A workload cut short says how
    /// many of its cycles ran.
    fn run_cycles<F>(
        &self,
        cell: &Cell,
        cycled: &[(&String, &Vec<Vec<String>>, Cycles)],
        first: chrono::DateTime<chrono::Utc>,
        running: &mut [&mut (Vec<String>, std::process::Child)],
        spawn: &F,
    ) -> (Vec<i32>, Vec<PlanError>)
    where
        F: Fn(
            &str,
            &[Vec<String>],
            Option<&String>,
            Option<(u32, u32)>,
        ) -> Result<(Vec<String>, std::process::Child)>,
    {
        struct State {
            done: u32,
            stopped: bool,
            child: Option<(Vec<String>, std::process::Child)>,
        }
        let mut states: Vec<State> =
            cycled.iter().map(|_| State { done: 0, stopped: false, child: None }).collect();
        let mut codes = Vec::new();
        let mut errors = Vec::new();
        loop {
            let others_running = running.iter_mut().any(|(_, c)| matches!(c.try_wait(), Ok(None)));
            for ((w, argv, cy), st) in cycled.iter().zip(states.iter_mut()) {
                if let Some((cmd, child)) = &mut st.child {
                    let ended = match child.try_wait() {
                        Ok(None) => continue,
                        Ok(Some(status)) => self.code_of(cmd, Ok(status)),
                        Err(e) => self.code_of(cmd, Err(e)),
                    };
                    match ended {
                        Ok(code) => {
                            st.stopped |= code != 0;
                            codes.push(code);
                        }
                        Err(e) => {
                            st.stopped = true;
                            errors.push(e);
                        }
                    }
                    st.done += 1;
                    st.child = None;
                }
                if st.stopped || st.done >= cy.times || !others_running {
                    continue;
                }
                let slot = first + chrono::Duration::from_std(cy.every * st.done).unwrap_or_default();
                let now = chrono::Utc::now();
                let lead = chrono::Duration::from_std(CYCLE_LEAD).unwrap_or_default();
                if now + lead < slot {
                    continue;
                }
                // A cycle that ran past its successor's slot: the next begins a moment on.
                let at = if st.done == 0 { slot } else { slot.max(now + lead) };
                let at = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                match spawn(w, argv, Some(&at), Some((st.done + 1, cy.times))) {
                    Ok(c) => st.child = Some(c),
                    Err(e) => {
                        st.stopped = true;
                        errors.push(e);
                    }
                }
            }
            if states.iter().all(|s| s.child.is_none()) && !others_running {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for ((w, _, cy), st) in cycled.iter().zip(&states) {
            if st.done < cy.times {
                eprintln!(
                    "cell {}: {w} ran {} of its {} cycles (every {}): {}",
                    cell.id,
                    st.done,
                    cy.times,
                    storbench_metrics::units::format_duration(cy.every),
                    if st.stopped { "a cycle failed" } else { "the workloads beside it had ended" }
                );
            }
        }
        (codes, errors)
    }

    /// The build and init commands of each workload of the cell, in order,
    /// when this process builds: the first non-zero exit code, if any.
    fn run_builds(&self, cell: &Cell, parts: &Parts) -> Result<Option<i32>> {
        for (_, argv) in parts {
            let before = &argv[..argv.len() - 1];
            for b in before.iter().filter(|_| self.opts.build) {
                let mut c = self.child();
                c.args(b)
                    .env("STORBENCH_PLAN", &self.plan.def.name)
                    .env("STORBENCH_CELL", format!("{}:{}", cell.id, b[..2.min(b.len())].join("-")))
                    .env("STORBENCH_CELL_DIGEST", &cell.digest)
                    .env("STORBENCH_AXES", json(&cell.axes)?)
                    .stdout(Stdio::null());
                let st =
                    c.status().map_err(|e| PlanError::io(format!("running storbench {}", b.join(" ")), e))?;
                match st.code() {
                    Some(0) => {}
                    Some(code) => return Ok(Some(code)),
                    None => {
                        return Err(PlanError::Failed(format!(
                            "storbench {} {}",
                            b.join(" "),
                            killed(&st, b)
                        )))
                    }
                }
            }
        }
        Ok(None)
    }
}
