//! The per-second system monitor. Placeholder API: the sampler arrives with
//! the storage-targets issue; until then it records nothing.

use std::path::PathBuf;
use std::time::Instant;

use storbench_metrics::StepReport;

/// Samples CPU and the devices behind some paths once a second.
pub struct Monitor {
    _targets: Vec<PathBuf>,
}

impl Monitor {
    /// Starts sampling for the devices behind `targets`.
    pub fn start(targets: &[PathBuf]) -> Monitor {
        Monitor { _targets: targets.to_vec() }
    }

    /// The samples of `start..end` (t_ms relative to `start`) and the summary
    /// figures of the measured window `measure_from..end` (ramp-up excluded).
    pub fn window(&self, _start: Instant, _measure_from: Instant, _end: Instant) -> StepReport {
        StepReport::default()
    }
}
