//! `storbench cache mrc TRACE`: the what-if of a cache without re-running —
//! miss-ratio curves from a block trace (storbench's own `sbtrace`, blkparse
//! text or CSV), exact for LRU by stack distance or sampled by SHARDS, and
//! per-policy simulation at chosen sizes. Prints a table (or CSV, JSON, an
//! HTML page with the curve), the knee, and the size that reaches a target
//! hit ratio. Reads the trace only; the HTML file is written last, whole.
//!
//! `storbench cache gen` (hidden) writes a synthetic Zipf trace for the
//! benchmark script.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use storbench_cache::mrc::{self, MrcConfig, Sampling};
use storbench_cache::synth::Zipf;
use storbench_cache::trace::{self, Format, Lines, TraceWriter};
use storbench_cache::PolicyKind;
use storbench_metrics::units::{format_size, parse_size, parse_size_list};
use storbench_report::curves;

use crate::cli::Global;
use crate::error::{usage, EXIT_INTERRUPTED};
use crate::live::Live;

/// Options of `storbench cache`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub cmd: CacheCmd,
}

/// The verbs of `storbench cache`.
#[derive(Debug, Subcommand)]
pub enum CacheCmd {
    /// Miss-ratio curves of a block trace: exact LRU, SHARDS, per-policy simulation.
    Mrc(MrcArgs),
    /// Write a synthetic Zipf trace (sbtrace) for benchmarks.
    #[command(hide = true)]
    Gen(GenArgs),
}

/// Options of `storbench cache mrc`.
#[derive(Debug, Args)]
pub struct MrcArgs {
    /// The trace file: sbtrace (the emulator's --trace), blkparse text output,
    /// or CSV (timestamp,offset,size,op or MSR Cambridge); see docs/cache.md.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Policies, comma-separated: lru, clock, arc, 2q, s3fifo, sieve. LRU's
    /// curve comes from stack distances (every size in one pass), the others
    /// from simulation at each size.
    #[arg(long, default_value = "lru", value_delimiter = ',')]
    pub policy: Vec<PolicyKind>,
    /// Cache sizes: LO..HI (doubling from LO, HI included), a list 64M,1G,2G,
    /// or one size. Default: ten doublings up to the trace's footprint.
    #[arg(long, value_parser = cache_sizes)]
    pub sizes: Option<CacheSizes>,
    /// SHARDS sampling rate in (0, 1]: 0.01 reads 1 % of the lines (chosen by
    /// hash, the same every run). 1 or absent: exact.
    #[arg(long, value_parser = rate)]
    pub sample: Option<f64>,
    /// Fixed-size SHARDS: keep at most this many sampled lines, lowering the
    /// rate as more arrive (starts at --sample, else 1).
    #[arg(long, value_name = "LINES", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_max: Option<u64>,
    /// Cache line: the unit of caching; a request spanning lines touches
    /// each. A power of two from 4k to 16M, as `media create --cache-line`.
    #[arg(long, default_value = "64k", value_parser = cache_line)]
    pub line: u64,
    /// Trace format: sbtrace, blkparse or csv (default: detected).
    #[arg(long)]
    pub format: Option<Format>,
    /// Report the cache size that reaches this hit ratio (0-1), e.g. 0.9.
    #[arg(long, value_parser = hit_ratio)]
    pub target: Option<f64>,
    /// Print CSV (size_bytes, then one miss-ratio column per policy). JSON: the global --json.
    #[arg(long)]
    pub csv: bool,
    /// Also write an HTML page with the curves (SVG) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Options of `storbench cache gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Output file (sbtrace).
    #[arg(value_name = "FILE")]
    pub out: PathBuf,
    /// Requests to write.
    #[arg(long, default_value_t = 10_000_000)]
    pub requests: u64,
    /// Distinct lines drawn from.
    #[arg(long, default_value_t = 1_000_000)]
    pub lines: u64,
    /// Zipf exponent (0 is uniform).
    #[arg(long, default_value_t = 0.8)]
    pub zipf: f64,
    /// Request size = line: a power of two from 4k to 16M.
    #[arg(long, default_value = "64k", value_parser = cache_line)]
    pub line: u64,
    /// Share of writes, 0-1.
    #[arg(long, default_value_t = 0.3)]
    pub writes: f64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs `storbench cache`.
pub fn run(g: &Global, a: CacheArgs) -> Result<ExitCode> {
    match a.cmd {
        CacheCmd::Mrc(m) => run_mrc(g, m),
        CacheCmd::Gen(x) => run_gen(x),
    }
}

/// Everything `mrc` was asked, checked.
struct Checked {
    cfg: MrcConfig,
    format: Option<Format>,
}

/// `--sizes` as clap reads it, in the order given: a range already
/// doubled out, or the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSizes(Vec<u64>);

/// `--sizes`: `LO..HI` (doubling from LO, HI included) or a list of sizes.
fn cache_sizes(s: &str) -> Result<CacheSizes, String> {
    if let Some((lo, hi)) = s.split_once("..") {
        let (lo, hi) = (parse_size(lo)?, parse_size(hi)?);
        if lo == 0 || hi < lo {
            return Err(format!("'{s}' is not a range of sizes: use LO..HI with 0 < LO <= HI, e.g. 64M..8G"));
        }
        return Ok(CacheSizes(mrc::doubling(lo, hi)));
    }
    parse_size_list(s).map(CacheSizes)
}

/// The sizes to simulate: each at least one cache line, ascending, once.
fn sizes_of(s: &CacheSizes, line: u64) -> Result<Vec<u64>> {
    let mut v = s.0.clone();
    if let Some(&small) = v.iter().find(|&&x| x < line) {
        return Err(usage(format!(
            "--sizes: {} is smaller than one cache line ({}); sizes must be at least --line",
            format_size(small),
            format_size(line)
        )));
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// A cache line as clap reads it: a size, under the one rule the
/// emulator's tier keeps too (`storbench_cache::check_line`).
fn cache_line(s: &str) -> Result<u64, String> {
    storbench_cache::check_line(parse_size(s)?)
}

/// A SHARDS sampling rate: in (0, 1].
fn rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err("use a rate in (0, 1], e.g. 0.01".into()),
    }
}

/// A hit ratio to reach: in (0, 1].
fn hit_ratio(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err("use a hit ratio in (0, 1], e.g. 0.9".into()),
    }
}

fn check(a: &MrcArgs) -> Result<Checked> {
    let line = a.line;
    let mut policies = Vec::new();
    for &k in &a.policy {
        if !policies.contains(&k) {
            policies.push(k);
        }
    }
    let sizes = match &a.sizes {
        Some(s) => sizes_of(s, line)?,
        None => Vec::new(),
    };
    let rate = a.sample.unwrap_or(1.0);
    let sampling = match a.sample_max {
        Some(m) => Sampling::FixedSize { rate, max_lines: usize::try_from(m).unwrap_or(usize::MAX) },
        None if rate < 1.0 => Sampling::Rate(rate),
        None => Sampling::Exact,
    };
    let format = a.format;
    if let Some(h) = &a.html {
        if h.is_dir() {
            return Err(usage(format!("--html {}: is a directory; name a file", h.display())));
        }
    }
    Ok(Checked { cfg: MrcConfig { line, sizes, policies, sampling, target: a.target }, format })
}

fn run_mrc(g: &Global, a: MrcArgs) -> Result<ExitCode> {
    let c = check(&a)?;
    if !a.trace.is_file() {
        return Err(usage(format!("{}: no such trace file", a.trace.display())));
    }
    let (format, records) = trace::open(&a.trace, c.format).map_err(|e| usage(e.to_string()))?;
    let mut lines = Lines::new(records, c.cfg.line);
    let live = Live::line(g.quiet);
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let t0 = std::time::Instant::now();
    let res = mrc::analyze(&mut lines, &c.cfg, threads, &mut |p| {
        live.set(format!("{} accesses read, {:.0} s", p.accesses, t0.elapsed().as_secs_f64()));
        !crate::interrupt::requested()
    })
    .map_err(|e| usage(e.to_string()))?;
    live.finish();
    if res.accesses == 0 {
        return Err(usage(format!(
            "{}: no reads or writes in {} requests (read as {})",
            a.trace.display(),
            lines.requests,
            format.name()
        )));
    }
    let (requests, skipped) = (lines.requests, lines.skipped);
    if g.json {
        let mut v = serde_json::to_value(&res)?;
        v["trace"] = serde_json::json!({
            "path": a.trace.display().to_string(), "format": format.name(),
            "requests": requests, "skipped": skipped,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if a.csv {
        print!("{}", curves::to_csv(&res));
    } else {
        print!("{}", curves::to_text(&res, format, requests, skipped));
    }
    if let Some(h) = &a.html {
        let title = format!("Miss-ratio curves: {}", a.trace.display());
        let page = storbench_report::mrc::html(&title, &curves::series(&res), &curves::summary_lines(&res))?;
        // Written whole through a temporary name, so a failure leaves nothing half-written.
        let tmp = h.with_extension("html.tmp");
        std::fs::write(&tmp, page).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, h).with_context(|| format!("writing {}", h.display()))?;
    }
    if res.interrupted {
        eprintln!("storbench: interrupted: the curves cover the first {} accesses", res.accesses);
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_gen(a: GenArgs) -> Result<ExitCode> {
    let line = a.line;
    if a.lines == 0 || !(0.0..=1.0).contains(&a.writes) || a.zipf < 0.0 {
        return Err(usage("cache gen: --lines > 0, --writes in [0, 1], --zipf >= 0"));
    }
    let f = File::create(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut w = TraceWriter::new(BufWriter::with_capacity(1 << 20, f))?;
    for r in Zipf::new(a.lines, a.zipf, line, a.writes, a.seed).take(a.requests as usize) {
        w.write(&r)?;
    }
    w.finish()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_ranges_and_lists() {
        let parse_sizes = |s: &str, line: u64| sizes_of(&cache_sizes(s).map_err(usage)?, line);
        assert_eq!(parse_sizes("64M..256M", 65536).unwrap(), vec![64 << 20, 128 << 20, 256 << 20]);
        assert_eq!(parse_sizes("1G,64M,64M", 65536).unwrap(), vec![64 << 20, 1 << 30]);
        let e = parse_sizes("4k..1G", 65536).unwrap_err().to_string();
        assert_eq!(e, "--sizes: 4k is smaller than one cache line (64k); sizes must be at least --line");
        let e = cache_sizes("1G..64M").unwrap_err();
        assert!(e.contains("'1G..64M' is not a range of sizes: use LO..HI"), "{e}");
        assert!(cache_sizes("64M,,1G").unwrap_err().contains("not a list of sizes"));
        assert!(cache_sizes("64M,lots").unwrap_err().contains("'lots' is not a size"));
    }
}
