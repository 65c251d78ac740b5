//! `storbench io`: database-shaped I/O profiles against a file or a block
//! device. Profiles come from a built-in set (`--set`), by name
//! (`--profile`), or from fio-style flags; flags given with a set or a named
//! profile override its values.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::json;
use storbench_io::profile::{self, parse_dist, parse_rw};
use storbench_io::target::{self, Plan};
use storbench_io::{run_profile, uring_available, Engine, Profile, RunOptions, TargetError};
use storbench_metrics::units::{format_size, parse_duration, parse_size};

use crate::cli::Global;
use crate::error::usage;
use crate::live::Live;
use crate::oltp::fmt_num;
use crate::record::{Outcome, Recorder};

/// Options of `storbench io`.
#[derive(Debug, Args)]
pub struct IoArgs {
    /// The file (created at --size and filled) or block device to test.
    #[arg(long, short = 't', default_value = "./storbench-data/io.dat")]
    pub target: PathBuf,
    /// Size of the test file (ignored for a block device).
    #[arg(long, default_value = "1G")]
    pub size: String,
    /// A built-in set: sqlserver-six, nvme-vs-sata, hci-mix, db-shapes, quick.
    #[arg(long, conflicts_with = "profile")]
    pub set: Option<String>,
    /// Built-in profiles by name, comma-separated (e.g. read-random-8k,log-write-8k).
    #[arg(long)]
    pub profile: Option<String>,
    /// Name of a profile made from flags.
    #[arg(long)]
    pub name: Option<String>,
    /// Block size (e.g. 4k, 8k, 64k, 1m).
    #[arg(long, alias = "blocksize")]
    pub bs: Option<String>,
    /// Pattern: read, write, randread, randwrite, randrw, rw.
    #[arg(long)]
    pub rw: Option<String>,
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
    #[arg(long, alias = "runtime")]
    pub duration: Option<String>,
    /// Ramp-up per profile, run but not counted.
    #[arg(long, alias = "ramp-time")]
    pub rampup: Option<String>,
    /// Buffered I/O (through the page cache) instead of direct I/O.
    #[arg(long)]
    pub buffered: bool,
    /// Offsets are multiples of this (default: the block size).
    #[arg(long)]
    pub align: Option<String>,
    /// Sync after every N writes.
    #[arg(long)]
    pub fsync_every: Option<u32>,
    /// Sync with fdatasync (after every write unless --fsync-every says otherwise).
    #[arg(long)]
    pub fdatasync: bool,
    /// Random offsets: uniform, zipf:θ or hot:P/Q (P % of I/Os to Q % of the span).
    #[arg(long, alias = "random-distribution")]
    pub dist: Option<String>,
    /// Target rate in IOPS over all threads (latency counts from the schedule).
    #[arg(long, alias = "rate-iops")]
    pub rate: Option<f64>,
    /// Use only this much of the target, from its start.
    #[arg(long)]
    pub span: Option<String>,
    /// Engine: io_uring (default) or psync.
    #[arg(long, default_value = "io_uring")]
    pub engine: String,
    /// Write verifiable blocks and check every block read; mismatches fail the run.
    #[arg(long)]
    pub verify: bool,
    /// Write to a block device even if it holds a filesystem or is mounted.
    #[arg(long)]
    pub force: bool,
}

fn parse_profiles(a: &IoArgs) -> Result<Vec<Profile>> {
    let mut profiles = if let Some(set) = &a.set {
        profile::set(set).ok_or_else(|| {
            usage(format!("--set {set}: unknown profile set; use one of {}", profile::SETS.join(", ")))
        })?
    } else if let Some(names) = &a.profile {
        names
            .split(',')
            .map(|n| {
                profile::named(n.trim()).ok_or_else(|| {
                    usage(format!(
                        "--profile {n}: unknown profile; built-in profiles are {}",
                        profile::all_names().join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?
    } else {
        let mut p = Profile::new(a.name.as_deref().unwrap_or("custom"));
        p.rampup = Duration::from_secs(2);
        vec![p]
    };
    let custom = a.set.is_none() && a.profile.is_none();
    for p in &mut profiles {
        if let Some(bs) = &a.bs {
            p.bs = parse_size(bs).map_err(|e| usage(format!("--bs {bs}: {e}")))?;
        }
        if let Some(rw) = &a.rw {
            let (pattern, read) = parse_rw(rw).map_err(|e| usage(format!("--rw: {e}")))?;
            p.pattern = pattern;
            p.read_pct = read.unwrap_or(if custom { 50 } else { p.read_pct });
        }
        if let Some(r) = a.read {
            if r > 100 {
                return Err(usage(format!("--read {r}: must be 0 to 100")));
            }
            p.read_pct = r;
        }
        if let Some(q) = a.qd {
            p.qd = q;
        }
        if let Some(t) = a.threads {
            p.threads = t;
        }
        if let Some(d) = &a.duration {
            p.duration = parse_duration(d).map_err(|e| usage(format!("--duration {d}: {e}")))?;
            if p.duration.is_zero() {
                return Err(usage(format!("--duration {d}: must be more than zero")));
            }
        }
        if let Some(d) = &a.rampup {
            p.rampup = parse_duration(d).map_err(|e| usage(format!("--rampup {d}: {e}")))?;
        }
        if a.buffered {
            p.direct = false;
        }
        if let Some(al) = &a.align {
            p.align = parse_size(al).map_err(|e| usage(format!("--align {al}: {e}")))?;
        }
        if let Some(n) = a.fsync_every {
            p.fsync_every = n;
        }
        if a.fdatasync {
            p.fdatasync = true;
            if p.fsync_every == 0 {
                p.fsync_every = 1;
            }
        }
        if let Some(d) = &a.dist {
            p.dist = parse_dist(d).map_err(|e| usage(format!("--dist: {e}")))?;
        }
        if let Some(r) = a.rate {
            p.rate = Some(r);
        }
        if let Some(s) = &a.span {
            p.span = Some(parse_size(s).map_err(|e| usage(format!("--span {s}: {e}")))?);
        }
    }
    Ok(profiles)
}

/// Runs `storbench io`.
pub fn run(g: &Global, a: IoArgs) -> Result<ExitCode> {
    let profiles = parse_profiles(&a)?;
    let mut engine = match a.engine.as_str() {
        "io_uring" | "uring" | "io-uring" => Engine::Uring,
        "psync" | "sync" => Engine::Psync,
        e => return Err(usage(format!("--engine {e}: use io_uring or psync"))),
    };
    let size = parse_size(&a.size).map_err(|e| usage(format!("--size {}: {e}", a.size)))?;
    let writes = profiles.iter().any(Profile::writes);
    let (tgt, plan) = target::inspect(&a.target, size, writes, a.force).map_err(|e| match e {
        TargetError::Refused(m) => usage(m),
        other => usage(other.to_string()),
    })?;
    for p in &profiles {
        p.validate(tgt.logical_block).map_err(usage)?;
    }
    let mut notes = Vec::new();
    if engine == Engine::Uring {
        if let Err(why) = uring_available() {
            notes.push(format!("{why}; using psync (one I/O in flight per thread)"));
            engine = Engine::Psync;
        }
    }
    if engine == Engine::Psync && profiles.iter().any(|p| p.qd > 1) {
        notes.push("psync keeps one I/O in flight per thread: queue depths above 1 are not reached".into());
    }
    for n in &notes {
        eprintln!("storbench: note: {n}");
    }

    // Prepare the file before the run is recorded: a failure here is the
    // target's, not a measurement's.
    if let Plan::Fill { size } = plan {
        let bar =
            Live::bar(g.quiet, size, "preparing {msg} {bar:30} {bytes}/{total_bytes} ({bytes_per_sec})");
        bar.set(a.target.display().to_string());
        target::fill(&a.target, size, &mut |d| bar.pos(d)).map_err(|e| anyhow!("{e}"))?;
        bar.finish();
    }
    let info = storbench_sysmon::path_env(&tgt.path);
    let env = json!({
        "target": {
            "path": tgt.path, "size": tgt.size, "block_device": tgt.is_block,
            "logical_block_size": tgt.logical_block, "fs_type": info.fs_type,
            "fs_block_size": info.block_size, "mount_point": info.mount_point,
            "device": info.device, "loop_backing_file": info.loop_backing_file,
        },
        "medium": storbench_media::describe_path(&tgt.path),
        "direct_io": profiles.iter().all(|p| p.direct),
        "engine": engine.as_str(),
        "notes": notes,
    });
    let config = json!({
        "target": tgt.path, "size": tgt.size, "engine": engine.as_str(), "verify": a.verify,
        "set": a.set, "profiles": profiles,
    });
    let label = a.set.clone().or(a.profile.clone()).unwrap_or_else(|| profiles[0].name.clone());
    let mut rec = Recorder::begin(
        g,
        "io",
        format!("io {label} on {}", a.target.display()),
        config,
        env,
        std::slice::from_ref(&tgt.path),
    )?;

    let opts = RunOptions { engine, verify: a.verify };
    let live = Live::line(g.quiet);
    let n = profiles.len();
    let mut rows = Vec::new();
    let mut outcome = Outcome::Complete;
    for (i, p) in profiles.iter().enumerate() {
        let mut clock = rec.clock();
        let res = run_profile(p, &tgt, &opts, crate::interrupt::flag(), &mut |t| {
            live.set(format!(
                "profile {}/{n} {}  {}{}s  {:.0} IOPS  {:.1} MB/s  p99 {:.0} µs",
                i + 1,
                p.name,
                if t.rampup { "ramp-up " } else { "" },
                t.elapsed.as_secs(),
                t.iops,
                t.mbps,
                t.p99_us
            ));
        });
        let r = match res {
            Ok(r) => r,
            Err(e) => {
                outcome = Outcome::Failed(anyhow!("profile {}: {e}", p.name));
                break;
            }
        };
        clock.start = r.started;
        clock.measure_from = r.measure_from;
        let partial = r.stopped || !r.failures.is_empty();
        let mut params = serde_json::to_value(p)?;
        params["partial"] = json!(partial);
        params["engine"] = json!(engine.as_str());
        if !r.failures.is_empty() {
            params["failures"] = serde_json::to_value(&r.failures)?;
        }
        if r.mismatch_count > 0 {
            params["mismatch_offsets"] = json!(r.mismatches);
        }
        let get = |k: &str| r.report.get(k).unwrap_or(0.0);
        rows.push(vec![
            p.name.clone(),
            fmt_num(get("io.read.iops")),
            fmt_num(get("io.write.iops")),
            format!("{:.1}", get("io.mbps")),
            fmt_num(get("io.lat.mean")),
            fmt_num(get("io.lat.p50")),
            fmt_num(get("io.lat.p99")),
            fmt_num(get("io.lat.p99.9")),
            fmt_num(get("io.lat.max")),
            format!("{:.2}", get("io.cpu.user_per_io") + get("io.cpu.sys_per_io")),
            fmt_num(get("io.errors")),
        ]);
        let (failures, mismatches, count, stopped) =
            (r.failures.clone(), r.mismatches.clone(), r.mismatch_count, r.stopped);
        if r.report.get("io.window").unwrap_or(0.0) > 0.0 || !failures.is_empty() {
            let figures = rec.write_step(clock, &p.name, params, r.report)?;
            if let Some(row) = rows.last_mut() {
                row.extend(crate::record::system_columns(&figures));
            }
        }
        if !failures.is_empty() {
            for f in &failures {
                live.println(format!("storbench: I/O error: {} (errno {})", f.what, f.errno));
            }
            outcome = Outcome::Failed(anyhow!(
                "profile {}: I/O error at offset {} (errno {})",
                p.name,
                failures[0].offset,
                failures[0].errno
            ));
            break;
        }
        if count > 0 {
            let offs: Vec<String> = mismatches.iter().map(u64::to_string).collect();
            outcome = Outcome::Failed(anyhow!(
                "profile {}: {count} block(s) failed verification, at offset(s) {}",
                p.name,
                offs.join(", ")
            ));
            break;
        }
        if stopped {
            outcome = Outcome::Interrupted;
            break;
        }
    }
    live.finish();
    if !g.quiet && !rows.is_empty() {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec![
            "profile",
            "read IOPS",
            "write IOPS",
            "MB/s",
            "lat mean µs",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "CPU µs/IO",
            "errors",
            "iowait %",
            "dev r_await ms",
            "dev w_await ms",
        ]);
        for r in rows {
            t.add_row(r);
        }
        eprintln!("{t}");
        eprintln!(
            "target {} ({}), {} I/O, engine {}",
            tgt.path.display(),
            format_size(tgt.size),
            if profiles.iter().all(|p| p.direct) { "direct" } else { "buffered" },
            engine.as_str()
        );
    }
    rec.finish(outcome)
}
