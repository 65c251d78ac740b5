//! Running a cell: its build and init commands one after another, then its
//! measured commands (one, or a `together` group side by side from one
//! instant), each a child `storbench` tagged with the plan, the cell and
//! its axes. Every child is waited for before any verdict, so none is left
//! running; the cell's exit code is what the executor judges.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use storbench_plan::exec::EXIT_INTERRUPTED;
use storbench_plan::Cell;

use super::{Parts, PlanError, Setup};

type Result<T> = std::result::Result<T, PlanError>;

/// How long before their common start a `together` cell's workloads are
/// started: time for each to connect, open and set up before the instant.
const TOGETHER_LEAD: Duration = Duration::from_secs(5);

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
        let mut children = Vec::new();
        for (w, argv) in parts {
            let command = &argv[argv.len() - 1];
            let tags = cell.neighbour_axes(w);
            let mut axes = cell.axes.clone();
            axes.extend(tags.iter().cloned());
            let label = match tags.iter().find(|t| t.0 == "with") {
                Some((_, with)) if with == "alone" => format!("{} {w} alone", cell.label),
                Some((_, with)) => format!("{} {w} with {with}", cell.label),
                None => cell.label.clone(),
            };
            let mut c = self.child();
            c.args(command)
                .arg("--label")
                .arg(&label)
                .env("STORBENCH_PLAN", &self.plan.def.name)
                .env("STORBENCH_CELL", &cell.id)
                .env("STORBENCH_AXES", json(&axes)?)
                .stdout(Stdio::null());
            for (k, v) in [
                ("STORBENCH_SHARD", &self.opts.shard),
                ("STORBENCH_METRICS_ADDR", &self.opts.metrics),
                ("STORBENCH_START_AT", &start_at),
            ] {
                if let Some(v) = v {
                    c.env(k, v);
                }
            }
            let child = c
                .spawn()
                .map_err(|e| PlanError::io(format!("running storbench {}", command.join(" ")), e))?;
            children.push((command, child));
        }
        // Every child is waited for before any verdict, so none is left running.
        let ended: Vec<_> = children.into_iter().map(|(argv, mut child)| (argv, child.wait())).collect();
        let mut codes = Vec::new();
        for (argv, st) in ended {
            let what = argv.join(" ");
            let st = st.map_err(|e| PlanError::io(format!("waiting for storbench {what}"), e))?;
            codes.push(
                st.code()
                    .ok_or_else(|| PlanError::Failed(format!("storbench {what} {}", killed(&st, argv))))?,
            );
        }
        // An interrupt outranks a failure; otherwise the first failure's code.
        Ok(if codes.contains(&EXIT_INTERRUPTED) {
            EXIT_INTERRUPTED
        } else {
            codes.into_iter().find(|&c| c != 0).unwrap_or(0)
        })
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
