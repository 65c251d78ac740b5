//! Storage sensitivity (issue 28): a measured step re-run on its modelled
//! medium with the device's times scaled (`--sensitivity 0.5,2`), the
//! scale put back to 1 after each re-run whatever happens (a
//! [`storbench_media::emu::ScaleGuard`]). Here: the factors' parsing, the
//! medium the run's data lives on (refused when there is none), and the
//! loop over the factors. The figures and the sentence are
//! `storbench_report::sensitivity`'s, from the store; the step itself is
//! run by the caller's closure, which records it.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::OpsError;

/// What a run's sensitivity re-runs: the medium, the factors in order,
/// and each re-run's measured time (`None`: the step's own).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The modelled medium holding the run's data.
    pub medium: String,
    /// Time scales, as given (0.5: twice as fast).
    pub factors: Vec<f64>,
    /// Measured time of each re-run.
    pub duration: Option<Duration>,
}

/// `--sensitivity 0.5,2`: time scales, each 0.01 to 100 and not 1 (that is
/// the step itself), none twice. The error names the bad value.
pub fn parse_factors(s: &str) -> Result<Vec<f64>, String> {
    let mut out: Vec<f64> = Vec::new();
    for part in s.split(',').map(str::trim) {
        let f: f64 = part
            .parse()
            .map_err(|_| format!("'{part}' is not a number (a list of device-time factors such as 0.5,2)"))?;
        storbench_emu::sched::check_scale(f).map_err(|e| format!("{part}: {e}"))?;
        if f == 1.0 {
            return Err(
                "1 is the step itself: give other factors (0.5: twice as fast, 2: half as fast)".into()
            );
        }
        if out.contains(&f) {
            return Err(format!("{part} is given twice"));
        }
        out.push(f);
    }
    Ok(out)
}

/// The modelled medium the run's data lives on (the first of `paths` on
/// one). Bad input when none is: only a model's time can be scaled.
pub fn medium_for(paths: &[PathBuf]) -> Result<String, OpsError> {
    let mut seen = Vec::new();
    for p in paths {
        match storbench_media::describe_path(p) {
            Some(m) if !m["model"].is_null() => {
                return Ok(m["name"].as_str().unwrap_or_default().to_string());
            }
            Some(m) => seen.push(format!(
                "{} is on medium '{}', which has no device model",
                p.display(),
                m["name"].as_str().unwrap_or("?")
            )),
            None => seen.push(format!("{} is on no storbench medium", p.display())),
        }
    }
    let why =
        if seen.is_empty() { "the run's data is not on this machine".to_string() } else { seen.join("; ") };
    Err(OpsError::Usage(format!(
        "--sensitivity needs the data on a modelled medium (storbench media create NAME --size 1G --fs ext4 --model hdd): {why}"
    )))
}

impl Plan {
    /// Runs `step` once per factor with the medium at that scale, putting
    /// it back to 1 after each (on an error or a panic too). Stops at the
    /// first error, or when `stop` says so before a factor; returns what
    /// each finished `step` gave, with its factor.
    pub fn each<T, E: From<OpsError>>(
        &self,
        stop: &dyn Fn() -> bool,
        mut step: impl FnMut(f64) -> Result<T, E>,
    ) -> Result<Vec<(f64, T)>, E> {
        let mut out = Vec::new();
        for &f in &self.factors {
            if stop() {
                break;
            }
            let guard = storbench_media::emu::ScaleGuard::set(&self.medium, f).map_err(OpsError::from)?;
            let r = step(f);
            guard.restore().map_err(OpsError::from)?;
            out.push((f, r?));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_are_a_list_of_device_time_scales() {
        assert_eq!(parse_factors("0.5,2"), Ok(vec![0.5, 2.0]));
        assert_eq!(parse_factors(" 0.25 , 4 "), Ok(vec![0.25, 4.0]));
        assert!(parse_factors("fast").unwrap_err().contains("'fast' is not a number"));
        assert!(parse_factors("0.5,").unwrap_err().contains("'' is not a number"));
        assert!(parse_factors("0").unwrap_err().contains("0.01 to 100"));
        assert!(parse_factors("1").unwrap_err().contains("the step itself"));
        assert!(parse_factors("2,2").unwrap_err().contains("twice"));
    }

    #[test]
    fn a_path_on_no_medium_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("STORBENCH_STATE", dir.path().join("state"));
        let e = medium_for(&[dir.path().to_path_buf()]).unwrap_err();
        assert!(matches!(e, OpsError::Usage(_)));
        let e = e.to_string();
        assert!(
            e.contains("--sensitivity needs the data on a modelled medium")
                && e.contains("on no storbench medium"),
            "{e}"
        );
        assert!(medium_for(&[]).unwrap_err().to_string().contains("not on this machine"));
    }
}
