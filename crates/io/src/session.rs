//! The steps of an `io` run that are not the binary's: overriding built-in
//! profiles with flags, choosing the engine, inspecting the target and
//! validating every profile against both (before anything is written), and
//! turning a profile's result into the step's parameters and its verdict.
//! The binary only parses flags, records and prints.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::engines::{self, IoEngine};
use crate::profile::{Distribution, Pattern, Profile};
use crate::target::{self, Plan, Target, TargetError};
use crate::ProfileResult;

/// Profile values given as flags, applied over built-in profiles (or over
/// the defaults for a profile made from flags). `None` leaves a value.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// Block size.
    pub bs: Option<u64>,
    /// Pattern and, for pure reads or writes, the read share (`--rw`).
    pub rw: Option<(Pattern, Option<u8>)>,
    /// Read share of a mix.
    pub read_pct: Option<u8>,
    /// Queue depth per thread.
    pub qd: Option<u32>,
    /// Threads.
    pub threads: Option<u32>,
    /// Measured time.
    pub duration: Option<Duration>,
    /// Ramp-up.
    pub rampup: Option<Duration>,
    /// Through the page cache.
    pub buffered: bool,
    /// Offset alignment.
    pub align: Option<u64>,
    /// Sync after every N writes.
    pub fsync_every: Option<u32>,
    /// fdatasync rather than fsync (after every write unless `fsync_every`).
    pub fdatasync: bool,
    /// Random offset distribution.
    pub dist: Option<Distribution>,
    /// Target IOPS.
    pub rate: Option<f64>,
    /// Target MB/s (10^6 bytes), turned into IOPS at the profile's block size.
    pub rate_mbps: Option<f64>,
    /// Bursts of I/O and idle phases between them (with a rate).
    pub bursts: Option<(Duration, Duration)>,
    /// Bytes of the target used.
    pub span: Option<u64>,
    /// The random map on (true) or off (false).
    pub random_map: Option<bool>,
}

impl Overrides {
    /// Applies the flags to `p`. `custom`: the profile is made from flags,
    /// so a mixed `--rw` without `--read` means 50 % reads.
    pub fn apply(&self, p: &mut Profile, custom: bool) {
        if let Some(bs) = self.bs {
            p.bs = bs;
        }
        if let Some((pattern, read)) = self.rw {
            p.pattern = pattern;
            p.read_pct = read.unwrap_or(if custom { 50 } else { p.read_pct });
        }
        if let Some(r) = self.read_pct {
            p.read_pct = r;
        }
        if let Some(q) = self.qd {
            p.qd = q;
        }
        if let Some(t) = self.threads {
            p.threads = t;
        }
        if let Some(d) = self.duration {
            p.duration = d;
        }
        if let Some(d) = self.rampup {
            p.rampup = d;
        }
        if self.buffered {
            p.direct = false;
        }
        if let Some(a) = self.align {
            p.align = a;
        }
        if let Some(n) = self.fsync_every {
            p.fsync_every = n;
        }
        if self.fdatasync {
            p.fdatasync = true;
            if p.fsync_every == 0 {
                p.fsync_every = 1;
            }
        }
        if let Some(d) = self.dist {
            p.dist = d;
        }
        if let Some(r) = self.rate {
            p.rate = Some(r);
        }
        if let Some(m) = self.rate_mbps {
            p.rate = Some(m * 1e6 / p.bs as f64);
        }
        if let Some(b) = self.bursts {
            p.bursts = Some(b);
        }
        if let Some(s) = self.span {
            p.span = Some(s);
        }
        if let Some(m) = self.random_map {
            p.random_map = m;
        }
    }
}

/// A run ready to start: the target checked, the engine chosen, every
/// profile valid for both.
pub struct Prepared {
    /// The target.
    pub target: Target,
    /// What the target needs before the run (a file to fill).
    pub plan: Plan,
    /// The engine.
    pub engine: Arc<dyn IoEngine>,
    /// Things the user should know (a fallback engine, an unreachable
    /// queue depth), one line each.
    pub notes: Vec<String>,
}

/// Why a run cannot start.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// Bad input: the message names the value and what is allowed.
    #[error("{0}")]
    Refused(String),
    /// The system failed while inspecting the target.
    #[error(transparent)]
    Target(TargetError),
}

/// Checks everything before anything is written: the engine by name, the
/// target (its size, block size, whether it may be written), and each
/// profile against the target and the engine.
pub fn prepare(
    path: &Path,
    size: u64,
    profiles: &[Profile],
    force: bool,
    engine: &str,
) -> Result<Prepared, PrepareError> {
    let (engine, fallback) = engines::choose(engine).map_err(PrepareError::Refused)?;
    let writes = profiles.iter().any(Profile::writes);
    let (target, plan) = target::inspect(path, size, writes, force).map_err(|e| match e {
        TargetError::Refused(m) => PrepareError::Refused(m),
        other => PrepareError::Target(other),
    })?;
    for p in profiles {
        p.validate(target.logical_block).map_err(PrepareError::Refused)?;
        if let Some(span) = p.span.filter(|s| *s > target.size) {
            return Err(PrepareError::Refused(format!(
                "--span {}: larger than the target {} ({}); give at most its size",
                storbench_metrics::units::format_size(span),
                path.display(),
                storbench_metrics::units::format_size(target.size)
            )));
        }
    }
    let mut notes: Vec<String> = fallback.into_iter().collect();
    if !engine.caps().asynchronous && profiles.iter().any(|p| p.qd > 1) {
        notes.push(format!(
            "{} keeps one I/O in flight per thread: queue depths above 1 are not reached",
            engine.name()
        ));
    }
    Ok(Prepared { target, plan, engine, notes })
}

/// Refuses `--verify` where it would check nothing: every profile only
/// reads, and no verifying run has written the target (a file keeps the
/// record of what such runs wrote beside it, `PATH.sbverify`; a block
/// device keeps none across runs). A read never judges a block that no
/// verifying run wrote.
pub fn check_verify(target: &Target, profiles: &[Profile]) -> Result<(), PrepareError> {
    if profiles.iter().any(Profile::writes) {
        return Ok(());
    }
    let ledger = {
        let mut s = target.path.clone().into_os_string();
        s.push(".sbverify");
        std::path::PathBuf::from(s)
    };
    if !target.is_block && ledger.exists() {
        return Ok(());
    }
    let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
    Err(PrepareError::Refused(format!(
        "--verify with read-only profile(s) {}: {} holds no blocks a verifying run wrote, so nothing would be checked; add a writing profile (e.g. --rw randrw) or run one with --verify first",
        names.join(", "),
        target.path.display()
    )))
}

/// How a profile ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Ran its time.
    Complete,
    /// Cut short by the stop flag; what was measured is kept.
    Stopped,
    /// An I/O failed or a block failed verification: the run fails, with
    /// this one-line reason.
    Failed(String),
}

impl ProfileResult {
    /// The verdict on this profile.
    pub fn verdict(&self, p: &Profile) -> Verdict {
        if let Some(f) = self.failures.first() {
            return Verdict::Failed(format!(
                "profile {}: I/O error at offset {} (errno {})",
                p.name, f.offset, f.errno
            ));
        }
        if self.mismatch_count > 0 {
            let offs: Vec<String> = self.mismatches.iter().map(u64::to_string).collect();
            return Verdict::Failed(format!(
                "profile {}: {} block(s) failed verification, at offset(s) {}",
                p.name,
                self.mismatch_count,
                offs.join(", ")
            ));
        }
        if self.stopped {
            Verdict::Stopped
        } else {
            Verdict::Complete
        }
    }

    /// True when the step holds something worth keeping.
    pub fn worth_keeping(&self) -> bool {
        self.report.get("io.window").unwrap_or(0.0) > 0.0 || !self.failures.is_empty()
    }

    /// The step's parameters as recorded: the profile, the engine, the
    /// access pattern that ran, whether it was cut short, and what failed.
    pub fn params(&self, p: &Profile, engine: &dyn IoEngine) -> Value {
        let mut v = serde_json::to_value(p).expect("a profile serialises");
        v["partial"] = json!(self.stopped || !self.failures.is_empty());
        v["engine"] = json!(engine.name());
        v["access"] = json!(access(p));
        if !self.failures.is_empty() {
            v["failures"] = serde_json::to_value(&self.failures).expect("failures serialise");
        }
        if self.mismatch_count > 0 {
            v["mismatch_offsets"] = json!(self.mismatches);
        }
        v
    }
}

/// The access pattern a profile runs, in words a run record keeps:
/// `sequential`, `random-map` (every block once per pass, per thread),
/// `random` (independent uniform draws), `zipf:θ` or `hot:P/Q`.
pub fn access(p: &Profile) -> String {
    match (p.pattern, p.dist) {
        (Pattern::Sequential, _) => "sequential".into(),
        (Pattern::Random, Distribution::Uniform) if p.random_map => "random-map".into(),
        (Pattern::Random, Distribution::Uniform) => "random".into(),
        (Pattern::Random, Distribution::Zipf { theta }) => format!("zipf:{theta}"),
        (Pattern::Random, Distribution::Hot { p, q }) => format!("hot:{p}/{q}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_over_a_built_in_profile() {
        let mut p = crate::profile::named("read-random-8k").unwrap();
        let o = Overrides {
            rw: Some((Pattern::Random, None)),
            qd: Some(3),
            random_map: Some(true),
            fdatasync: true,
            ..Overrides::default()
        };
        o.apply(&mut p, false);
        assert_eq!((p.read_pct, p.qd, p.random_map, p.fsync_every), (100, 3, true, 1));
        let mut c = Profile::new("c");
        o.apply(&mut c, true);
        assert_eq!(c.read_pct, 50, "a mix made from flags is 50/50");
        assert_eq!(access(&c), "random-map");
        // A rate in MB/s is IOPS at the profile's own block size.
        let mbps = Overrides { rate_mbps: Some(16.384), ..Overrides::default() };
        let mut q = Profile::new("q");
        q.bs = 65536;
        mbps.apply(&mut q, true);
        assert_eq!(q.rate, Some(250.0));
    }

    #[test]
    fn prepare_refuses_bad_input_before_anything_is_written() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x/t.dat");
        std::fs::create_dir(d.path().join("x")).unwrap();
        let bad = |ps: &[Profile], engine: &str| match prepare(&f, 1 << 20, ps, false, engine) {
            Err(PrepareError::Refused(m)) => m,
            other => panic!("{:?}", other.map(|p| p.notes)),
        };
        assert_eq!(bad(&[Profile::new("a")], "aio"), "--engine aio: use io_uring, psync or null");
        let mut z = Profile::new("z");
        z.dist = Distribution::Zipf { theta: 1.2 };
        z.random_map = true;
        assert!(bad(&[z], "psync").contains("only a uniform distribution"));
        let mut q = Profile::new("q");
        q.qd = 8;
        let ok = prepare(&f, 1 << 20, &[q], false, "psync").unwrap();
        assert_eq!(
            ok.notes,
            ["psync keeps one I/O in flight per thread: queue depths above 1 are not reached"]
        );
        assert_eq!(ok.plan, Plan::Fill { size: 1 << 20 });
        assert!(!f.exists(), "nothing was created");
        let mut wide = Profile::new("w");
        wide.span = Some(2 << 20);
        assert!(bad(&[wide], "psync").starts_with("--span 2m: larger than the target"));
    }
}
