//! Preparing a calibration's target and running one step of its grid with
//! our own io engine. The caller times, records and shows the step; this
//! only runs it and says how it ended.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use storbench_io::engine::Tick;
use storbench_io::{run_profile, PrepareError, Prepared, Profile, ProfileResult, RunOptions, Verdict};
use storbench_metrics::StepReport;

use super::CalError;

/// Checks the target and the grid's profiles before anything is written:
/// a file or a block device, writable when `destroy` allows it.
pub fn prepare(
    target: &Path,
    size: u64,
    profiles: &[Profile],
    destroy: bool,
    engine: &str,
) -> Result<Prepared, CalError> {
    if let Ok(m) = std::fs::metadata(target) {
        use std::os::unix::fs::FileTypeExt;
        if !m.is_file() && !m.file_type().is_block_device() {
            return Err(CalError::Usage(format!("{}: not a file or a block device", target.display())));
        }
    }
    storbench_io::prepare(target, size, profiles, destroy, engine).map_err(|e| match e {
        PrepareError::Refused(m) => CalError::Usage(m.replace("add --force", "add --destroy-data")),
        other => CalError::Usage(other.to_string()),
    })
}

/// Why a step failed.
#[derive(Debug)]
pub enum StepFailure {
    /// It could not run (`profile: why`).
    Run(String),
    /// The target failed under it (an I/O error).
    Target(String),
}

/// How a step (or a grid) ended.
#[derive(Debug)]
pub enum Ran {
    /// Ran its time.
    Done,
    /// Cut short by the stop flag.
    Stopped,
    /// Failed.
    Failed(StepFailure),
}

/// A step that ran.
pub struct Stepped {
    /// What the engine returned; None when the step could not run.
    pub result: Option<ProfileResult>,
    /// How it ended.
    pub ran: Ran,
    /// MB/s of each measured second (ramp-up left out).
    pub per_second: Vec<f64>,
}

impl Stepped {
    /// The step's report when it measured something worth keeping (what
    /// the caller records).
    pub fn kept(&self) -> Option<&StepReport> {
        self.result.as_ref().filter(|r| r.worth_keeping()).map(|r| &r.report)
    }
}

/// Runs one profile on a prepared target until its time is up or `stop`
/// is set; `tick` sees each second.
pub fn run_step(prep: &Prepared, p: &Profile, stop: &AtomicBool, tick: &mut dyn FnMut(&Tick)) -> Stepped {
    let opts = RunOptions { engine: prep.engine.clone(), verify: false };
    let mut per_second = Vec::new();
    let res = run_profile(p, &prep.target, &opts, stop, &mut |t| {
        if !t.rampup {
            per_second.push(t.mbps);
        }
        tick(t);
    });
    match res {
        Ok(r) => {
            let ran = match r.verdict(p) {
                Verdict::Complete => Ran::Done,
                Verdict::Stopped => Ran::Stopped,
                Verdict::Failed(why) => Ran::Failed(StepFailure::Target(why)),
            };
            Stepped { result: Some(r), ran, per_second }
        }
        Err(e) => Stepped {
            result: None,
            ran: Ran::Failed(StepFailure::Run(format!("{}: {e}", p.name))),
            per_second,
        },
    }
}

/// How a grid of steps ended: with what it gathered, cut short with what
/// it gathered so far, or failed at a step.
#[derive(Debug)]
pub enum Grid<T> {
    /// Every step ran.
    Done(T),
    /// Stopped (what was gathered before).
    Stopped(T),
    /// A step failed.
    Failed(StepFailure),
}
