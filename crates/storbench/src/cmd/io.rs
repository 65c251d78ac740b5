//! `storbench io`: database-shaped I/O profiles against a file or a block
//! device. Profiles come from a built-in set (`--set`), by name
//! (`--profile`), or from fio-style flags; flags given with a set or a named
//! profile override its values. A thin verb: flags are parsed here, the
//! target, engine and profiles are checked by `storbench_io::prepare`, each
//! profile runs in `storbench_io::run_profile`; this file records and
//! prints. Results go to stdout (the run record with `--json`), the live
//! line to stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use serde_json::json;
use storbench_io::fio_job::Import;
use storbench_io::profile::{self, parse_dist, parse_rw, Distribution, Pattern};
use storbench_io::{Overrides, PrepareError, Profile};
use storbench_metrics::units::{parse_duration, parse_positive_duration, parse_size};

use crate::cli::Global;
use crate::error::{target_failed, usage};
use crate::oltp::Term;
use crate::record::{Outcome, Recorder};
use storbench_run::io::{env, results_text, run_profiles, sensitivity_reruns};

/// Options of `storbench io`.
#[derive(Debug, Args)]
pub struct IoArgs {
    /// The file (created at --size and filled) or block device to test
    /// [default: ./storbench-data/io.dat, or the --fio/--diskspd target].
    #[arg(long, short = 't')]
    pub target: Option<PathBuf>,
    /// The target, as diskspd takes it: last on the line (same as --target).
    #[arg(value_name = "TARGET", conflicts_with = "target")]
    pub target_arg: Option<PathBuf>,
    /// Size of the test file (ignored for a block device) [default: 1G,
    /// or the --fio/--diskspd size].
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Run a fio job file's jobs, one profile each, in order (see docs/io.md).
    #[arg(long, value_name = "JOB.fio", conflicts_with_all = ["set", "profile", "engine", "diskspd"])]
    pub fio: Option<PathBuf>,
    /// Run a diskspd command line, e.g. "-b8K -d60 -o8 -t8 -r -w30 -Sh -L".
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true, conflicts_with_all = ["set", "profile"])]
    pub diskspd: Option<String>,
    /// A built-in set: sqlserver-six, nvme-vs-sata, hci-mix, db-shapes, quick.
    #[arg(long, conflicts_with = "profile", value_parser = parse_set)]
    pub set: Option<String>,
    /// Built-in profiles by name, comma-separated (e.g. read-random-8k,log-write-8k).
    #[arg(long, value_parser = parse_profile_names)]
    pub profile: Option<String>,
    /// Name of a profile made from flags.
    #[arg(long)]
    pub name: Option<String>,
    /// Block size (e.g. 4k, 8k, 64k, 1m).
    #[arg(long, alias = "blocksize", value_parser = parse_size)]
    pub bs: Option<u64>,
    /// Pattern: read, write, randread, randwrite, randrw, rw.
    #[arg(long, value_parser = parse_rw)]
    pub rw: Option<(Pattern, Option<u8>)>,
    /// Read share of a mixed pattern, percent (fio's rwmixread).
    #[arg(long, alias = "rwmixread")]
    pub read: Option<u8>,
    /// I/Os in flight per thread.
    #[arg(long, alias = "iodepth")]
    pub qd: Option<u32>,
    /// Threads, each with its own queue.
    #[arg(long, alias = "numjobs")]
    pub threads: Option<u32>,
    /// Measured time per profile.
    #[arg(long, alias = "runtime", value_parser = parse_positive_duration)]
    pub duration: Option<Duration>,
    /// Ramp-up per profile, run but not counted.
    #[arg(long, alias = "ramp-time", value_parser = parse_duration)]
    pub rampup: Option<Duration>,
    /// Buffered I/O (through the page cache) instead of direct I/O.
    #[arg(long)]
    pub buffered: bool,
    /// Offsets are multiples of this (default: the block size).
    #[arg(long, value_parser = parse_size)]
    pub align: Option<u64>,
    /// Sync after every N writes (1 or more; leave it out for no syncs).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub fsync_every: Option<u32>,
    /// Sync with fdatasync (after every write unless --fsync-every says otherwise).
    #[arg(long)]
    pub fdatasync: bool,
    /// Random offsets: uniform, zipf:θ or hot:P/Q (P % of I/Os to Q % of the span).
    #[arg(long, alias = "random-distribution", value_parser = parse_dist)]
    pub dist: Option<Distribution>,
    /// Target rate in IOPS over all threads (latency counts from the schedule).
    #[arg(long, alias = "rate-iops")]
    pub rate: Option<f64>,
    /// Target rate in MB/s (10^6 bytes) over all threads: a bounded
    /// neighbour's load (IOPS = MB/s ÷ block size).
    #[arg(long, conflicts_with = "rate")]
    pub rate_mbps: Option<f64>,
    /// With a rate: after each --burst of I/O, this long idle (e.g. 5s).
    #[arg(long, requires = "burst", value_parser = parse_duration)]
    pub idle: Option<Duration>,
    /// With --idle: how long each burst of I/O lasts (e.g. 2s).
    #[arg(long, requires = "idle", value_parser = parse_duration)]
    pub burst: Option<Duration>,
    /// Use only this much of the target, from its start.
    #[arg(long, value_parser = parse_size)]
    pub span: Option<u64>,
    /// Engine: io_uring (default), psync, or null (no device: the runner's own cost).
    #[arg(long, default_value = "io_uring")]
    pub engine: String,
    /// Uniform random offsets visit every block once per pass, per thread (fio's default random map).
    #[arg(long, overrides_with = "norandommap")]
    pub randommap: bool,
    /// Uniform random offsets are independent draws (the default; fio's --norandommap).
    #[arg(long, overrides_with = "randommap")]
    pub norandommap: bool,
    /// Write verifiable blocks and check every block read; mismatches fail the run.
    #[arg(long)]
    pub verify: bool,
    /// Write to a block device even if it holds a filesystem or is mounted.
    #[arg(long)]
    pub force: bool,
    /// With --shard: every shard uses the whole span (their I/O overlaps)
    /// instead of its own block-aligned part of it.
    #[arg(long)]
    pub shared_span: bool,
    #[command(flatten)]
    pub sens: crate::oltp::SensitivityArgs,
    #[command(flatten)]
    pub run: crate::cli::RunFlags,
    #[command(flatten)]
    pub record: crate::cli::RecordFlags,
}

/// The profile flags (typed by clap) as overrides, with the checks that
/// take more than one flag.
fn overrides(a: &IoArgs) -> Result<Overrides> {
    let o = Overrides {
        bs: a.bs,
        rw: a.rw,
        read_pct: a.read,
        qd: a.qd,
        threads: a.threads,
        duration: a.duration,
        rampup: a.rampup,
        buffered: a.buffered,
        align: a.align,
        fsync_every: a.fsync_every,
        fdatasync: a.fdatasync,
        dist: a.dist,
        rate: a.rate,
        rate_mbps: a.rate_mbps,
        bursts: a.burst.zip(a.idle),
        span: a.span,
        random_map: if a.randommap {
            Some(true)
        } else if a.norandommap {
            Some(false)
        } else {
            None
        },
    };
    if let Some(m) = o.rate_mbps.filter(|m| !(m.is_finite() && *m > 0.0)) {
        return Err(usage(format!("--rate-mbps {m}: must be a positive number of MB/s")));
    }
    if o.bursts.is_some() && o.rate.is_none() && o.rate_mbps.is_none() {
        return Err(usage("--idle: give a rate to shape, --rate or --rate-mbps"));
    }
    if let Some(r) = o.read_pct.filter(|r| *r > 100) {
        return Err(usage(format!("--read {r}: must be 0 to 100")));
    }
    Ok(o)
}

/// `--set`'s parser: a built-in set's name; the error names the value
/// and the sets.
fn parse_set(s: &str) -> std::result::Result<String, String> {
    match profile::set(s) {
        Some(_) => Ok(s.to_string()),
        None => Err(format!("'{s}': unknown profile set; use one of {}", profile::SETS.join(", "))),
    }
}

/// `--profile`'s parser: built-in profiles' names, comma-separated; the
/// error names the first unknown one and the built-in names.
fn parse_profile_names(s: &str) -> std::result::Result<String, String> {
    match s.split(',').map(str::trim).find(|n| profile::named(n).is_none()) {
        Some(n) => {
            Err(format!("'{n}': unknown profile; built-in profiles are {}", profile::all_names().join(", ")))
        }
        None => Ok(s.to_string()),
    }
}

fn parse_profiles(a: &IoArgs, imp: Option<&Import>) -> Result<Vec<Profile>> {
    // `--set` and `--profile` name built-ins: their parsers above checked.
    let mut profiles = if let Some(imp) = imp {
        imp.profiles.clone()
    } else if let Some(set) = &a.set {
        profile::set(set).unwrap_or_default()
    } else if let Some(names) = &a.profile {
        names.split(',').filter_map(|n| profile::named(n.trim())).collect()
    } else {
        let mut p = Profile::new(a.name.as_deref().unwrap_or("custom"));
        p.rampup = Duration::from_secs(2);
        vec![p]
    };
    let custom = a.set.is_none() && a.profile.is_none() && imp.is_none();
    let o = overrides(a)?;
    for p in &mut profiles {
        o.apply(p, custom);
    }
    Ok(profiles)
}

/// Runs `storbench io`.
pub fn run(g: &Global, a: IoArgs) -> Result<ExitCode> {
    let sharding = g.sharding();
    let imp = storbench_io::import(a.fio.as_deref(), a.diskspd.as_deref()).map_err(usage)?;
    let mut profiles = parse_profiles(&a, imp.as_ref())?;
    let sens = a.sens.parse(sharding.split())?;
    let target = a.target.clone().or(a.target_arg.clone()).or(imp.as_ref().and_then(|i| i.target.clone()));
    let target = target.unwrap_or_else(|| PathBuf::from("./storbench-data/io.dat"));
    let size = a.size.or(imp.as_ref().and_then(|i| i.size)).unwrap_or(1 << 30);
    let engine = imp.as_ref().and_then(|i| i.engine).unwrap_or(&a.engine);
    let prep = storbench_io::prepare(&target, size, &profiles, a.force, engine).map_err(|e| match e {
        PrepareError::Refused(m) => usage(m),
        other => usage(other.to_string()),
    })?;
    let sensitivity = crate::oltp::sensitivity_plan(sens, std::slice::from_ref(&prep.target.path))?;
    if a.verify {
        storbench_io::session::check_verify(&prep.target, &profiles).map_err(|e| usage(e.to_string()))?;
    }
    for p in &mut profiles {
        sharding.io_profile(p, prep.target.size, a.shared_span)?;
    }
    for n in prep.notes.iter().chain(imp.iter().flat_map(|i| &i.notes)) {
        eprintln!("storbench: note: {n}");
    }
    // A --results file that is not a results store is bad input: found
    // before the target is filled, so it leaves nothing behind.
    if g.results.exists() {
        storbench_results::Store::open(&g.results)?;
    }
    // Prepare the file before the run is recorded: a failure here is the
    // target's, not a measurement's.
    // A target that cannot take its fill (full, failing) is a failed
    // target, exit 4.
    crate::live::fill(g.quiet, &prep.plan, &target).map_err(|e| target_failed(e.to_string()))?;
    let config = json!({
        "target": prep.target.path, "size": prep.target.size, "engine": prep.engine.name(),
        "verify": a.verify, "set": a.set, "profiles": profiles,
        "imported": imp.as_ref().map(|i| &i.origin),
    });
    let fio = a.fio.as_ref().map(|f| format!("fio job {}", f.display()));
    let label = a.set.clone().or(a.profile.clone()).or(fio).unwrap_or_else(|| profiles[0].name.clone());
    let mut rec = Recorder::begin(
        g,
        "io",
        format!("io {label} on {}", target.display()),
        config,
        env(&prep, &profiles),
        std::slice::from_ref(&prep.target.path),
    )?;
    let (rows, mut outcome) = run_profiles(&Term(g), &mut rec, &prep, &profiles, a.verify)?;
    let mut sens_lines = Vec::new();
    if let (Some(plan), Outcome::Complete, Some(base)) =
        (&sensitivity, &outcome, rec.last_idx().filter(|_| rows.len() == profiles.len()))
    {
        let last = profiles.last().expect("a profile");
        match sensitivity_reruns(&Term(g), &mut rec, &prep, last, a.verify, plan, base) {
            Ok(lines) => sens_lines = lines,
            Err(o) => outcome = o,
        }
    }
    if !g.json && !rows.is_empty() {
        println!("{}", results_text(rows, &prep, &profiles));
        for line in crate::oltp::verdict_lines(rec.verdicts()) {
            println!("{line}");
        }
        for line in sens_lines {
            println!("{line}");
        }
    }
    rec.finish(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<IoArgs, String> {
        let mut v = vec!["storbench", "io"];
        v.extend_from_slice(args);
        match crate::cli::Cli::try_parse_from(v).map_err(|e| e.to_string())?.command {
            crate::cli::Command::Io(a) => Ok(*a),
            _ => unreachable!(),
        }
    }

    #[test]
    fn sizes_durations_and_patterns_are_typed_by_clap() {
        let a = parse(&["--size", "8M", "--bs", "8k", "--duration", "2s", "--rampup", "0s", "--span", "1m"])
            .unwrap();
        assert_eq!((a.size, a.bs, a.span), (Some(8 << 20), Some(8192), Some(1 << 20)));
        assert_eq!((a.duration, a.rampup), (Some(Duration::from_secs(2)), Some(Duration::ZERO)));
        assert_eq!(parse(&["--rw", "randrw"]).unwrap().rw.map(|r| r.0), Some(Pattern::Random));
        for (args, want) in [
            (&["--bs", "big"][..], "'big' is not a size"),
            (&["--duration", "0s"], "must be more than zero"),
            (&["--rampup", "soon"], "'soon' is not a duration"),
            (&["--fsync-every", "0"], "'0'"),
        ] {
            let e = parse(args).err().unwrap();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }
}
