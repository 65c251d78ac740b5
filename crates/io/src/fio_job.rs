//! fio job files as storbench profiles: `storbench io --fio JOB.fio` runs
//! the jobs a user already has. Each job becomes one [`Profile`], run in the
//! file's order; `[global]` options apply to the jobs after them, as in
//! fio. Sizes read as fio reads them (`kb_base=1024` by default: `4k` is
//! 4096, `4ki` is 4000), times as fio's (seconds unless a suffix says).
//!
//! What cannot be run faithfully is refused, never approximated: the error
//! is one line naming the file, the line, the job and the option. Options
//! that change only fio's own reporting are accepted and ignored. The
//! mapping table is in docs/io.md ("Your fio job files and diskspd command
//! lines"). Nothing here prints or touches the target.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::profile::{parse_dist, parse_rw, Distribution, Pattern, Profile};

/// Profiles imported from a fio job file or a diskspd command line, with
/// what the source says about the run as a whole.
#[derive(Clone, Debug)]
pub struct Import {
    /// One profile per job, in the order they run.
    pub profiles: Vec<Profile>,
    /// The file or device the source names (`filename=`, diskspd's target).
    pub target: Option<PathBuf>,
    /// The file size the source asks for (`size=`, diskspd's `-c`).
    pub size: Option<u64>,
    /// The engine the source asks for (`ioengine=`).
    pub engine: Option<&'static str>,
    /// Where the source and storbench differ in ways that do not change
    /// what is measured much, one line each, for the user to read.
    pub notes: Vec<String>,
    /// The source as recorded in the run's config: its text and where it
    /// came from.
    pub origin: Value,
}

/// fio's defaults for what a job leaves out (fio's HOWTO): 4 KiB
/// sequential reads, QD 1, one job, buffered, psync.
fn fio_default(name: &str) -> Profile {
    let mut p = Profile::new(name);
    p.bs = 4096;
    p.pattern = Pattern::Sequential;
    p.read_pct = 100;
    p.direct = false;
    p.duration = Duration::ZERO;
    p.random_map = true;
    p.source = "fio job file";
    p
}

/// Options that change only what fio reports or how it seeds, not the I/O
/// a job issues: accepted and ignored (storbench always measures latency
/// per I/O in histograms).
const IGNORED: &[&str] = &[
    "description",
    "group_reporting",
    "new_group",
    "thread",
    "gtod_reduce",
    "randrepeat",
    "allrandrepeat",
    "randseed",
    "random_generator",
    "clat_percentiles",
    "lat_percentiles",
    "slat_percentiles",
    "percentile_list",
    "disable_lat",
    "disable_clat",
    "disable_slat",
    "disable_bw_measurement",
    "significant_figures",
    "unified_rw_reporting",
    "unit_base",
    "invalidate",
];

/// One `key[=value]` line of a section.
#[derive(Clone, Debug)]
struct Opt {
    key: String,
    value: Option<String>,
    line: usize,
}

/// One `[name]` section.
struct Section {
    name: String,
    line: usize,
    opts: Vec<Opt>,
}

/// Reads and maps a job file; the origin records its path and text.
pub fn import_file(path: &Path) -> Result<Import, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--fio {}: cannot read it: {e}", path.display()))?;
    let mut imp = parse(&text, &path.display().to_string())?;
    imp.origin = json!({ "fio_job": { "path": path, "text": text } });
    Ok(imp)
}

/// Splits the text into sections; lines before the first section, `include`
/// and environment variables are refused.
fn sections(text: &str, file: &str) -> Result<Vec<Section>, String> {
    let mut out: Vec<Section> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        // fio ends a line at ';' or '#' (parse.c, strip_blank_end).
        let l = raw.split([';', '#']).next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        if l.contains("${") || l.starts_with("include ") {
            return Err(format!(
                "{file}:{line}: '{l}': include files and ${{VAR}} expansion are not supported; write the values out"
            ));
        }
        if let Some(name) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            out.push(Section { name: name.trim().to_string(), line, opts: Vec::new() });
            continue;
        }
        let Some(sec) = out.last_mut() else {
            return Err(format!("{file}:{line}: '{l}' is outside any [job] section"));
        };
        let (key, value) = match l.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (l, None),
        };
        sec.opts.push(Opt { key: key.to_ascii_lowercase(), value, line });
    }
    Ok(out)
}

/// Maps a job file's text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Import, String> {
    let mut global: Vec<Opt> = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut imp = Import {
        profiles: Vec::new(),
        target: None,
        size: None,
        engine: None,
        notes: Vec::new(),
        origin: Value::Null,
    };
    for sec in sections(text, file)? {
        if sec.name == "global" {
            global.extend(sec.opts);
            continue;
        }
        let mut opts = global.clone();
        opts.extend(sec.opts);
        let job = map_job(&sec.name, &opts, file)?;
        if let Some(prev) = jobs.last().filter(|_| !job.stonewall) {
            return Err(format!(
                "{file}:{}: job [{}] runs alongside [{}] in fio (no stonewall before it), and storbench runs profiles one after another: add stonewall to [{}]",
                sec.line, sec.name, prev.section, sec.name
            ));
        }
        for (what, a, b) in [
            ("file", jobs.first().map(|j| format!("{:?}", j.target)), format!("{:?}", job.target)),
            ("ioengine", jobs.first().map(|j| j.engine.to_string()), job.engine.to_string()),
        ] {
            if a.as_ref().is_some_and(|a| *a != b) {
                return Err(format!(
                    "{file}:{}: job [{}]: {what} differs from [{}]'s, and a storbench run uses one {what}: run the jobs apart",
                    sec.line, sec.name, jobs[0].section
                ));
            }
        }
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Err(format!("{file}: no job section: a job file needs at least one [job]"));
    }
    imp.size = jobs.iter().filter_map(|j| j.size).max();
    imp.target = jobs[0].target.clone();
    imp.engine = Some(jobs[0].engine);
    for mut j in jobs {
        // A job smaller than the file works on its first `size` bytes, as in fio.
        if j.size.is_some() && j.size != imp.size {
            j.profile.span = j.size;
        }
        let mut name = j.profile.name.clone();
        while imp.profiles.iter().any(|p| p.name == name) {
            name = format!("{name}-{}", j.section);
        }
        j.profile.name = name;
        imp.notes.extend(j.notes);
        imp.profiles.push(j.profile);
    }
    Ok(imp)
}

/// A mapped job.
struct Job {
    section: String,
    profile: Profile,
    target: Option<PathBuf>,
    size: Option<u64>,
    engine: &'static str,
    stonewall: bool,
    notes: Vec<String>,
}

/// The values of a job's options as fio would end up with them (the last
/// one given wins), before they are turned into a profile.
#[derive(Default)]
struct Raw {
    rw: Option<Opt>,
    bs: Option<Opt>,
    rate: Option<Opt>,
    rwmixread: Option<u8>,
    rwmixwrite: Option<u8>,
    runtime: Option<Duration>,
    time_based: bool,
    filename: Option<String>,
    directory: Option<String>,
    dist: Option<Distribution>,
    norandommap: bool,
    sync: Option<(u32, bool)>,
}

/// Maps one job's options (the globals before it, then its own).
fn map_job(section: &str, opts: &[Opt], file: &str) -> Result<Job, String> {
    let mut p = fio_default(section);
    let mut raw = Raw::default();
    let mut job = Job {
        section: section.to_string(),
        profile: Profile::new(section),
        target: None,
        size: None,
        engine: "psync",
        stonewall: false,
        notes: Vec::new(),
    };
    let kb_base = match opts.iter().rev().find(|o| o.key == "kb_base") {
        None => 1024,
        Some(o) => match o.value.as_deref() {
            Some("1024") => 1024,
            Some("1000") => 1000,
            v => return Err(bad(file, section, o, &format!("'{}': use 1000 or 1024", v.unwrap_or("")))),
        },
    };
    for o in opts {
        let v = o.value.as_deref().unwrap_or("");
        let err = |why: &str| bad(file, section, o, why);
        let size = || fio_size(v, kb_base).map_err(|e| err(&e));
        let num = |max: u32| match v.parse::<u32>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(err(&format!("'{v}': use a whole number up to {max}"))),
        };
        let flag = || match o.value.as_deref() {
            None | Some("1") => Ok(true),
            Some("0") => Ok(false),
            Some(x) => Err(err(&format!("'{x}': use 0 or 1"))),
        };
        match o.key.as_str() {
            k if IGNORED.contains(&k) => {}
            "kb_base" => {}
            "name" => p.name = v.to_string(),
            "rw" | "readwrite" => raw.rw = Some(o.clone()),
            "bs" | "blocksize" => raw.bs = Some(o.clone()),
            "bsrange" | "blocksize_range" => {
                let (lo, hi) = v.split_once(['-', ':']).ok_or_else(|| err("use MIN-MAX"))?;
                if fio_size(lo, kb_base) != fio_size(hi, kb_base) || lo.contains(',') {
                    return Err(err(
                        "a range of block sizes is not supported: storbench uses one block size",
                    ));
                }
                raw.bs = Some(Opt { value: Some(lo.to_string()), ..o.clone() });
            }
            "ba" | "blockalign" => p.align = size()?,
            "iodepth" => p.qd = num(4096)?.max(1),
            "numjobs" => p.threads = num(1024)?.max(1),
            "size" => job.size = Some(size()?),
            "runtime" | "timeout" => raw.runtime = Some(fio_time(v).map_err(|e| err(&e))?),
            "ramp_time" => p.rampup = fio_time(v).map_err(|e| err(&e))?,
            "time_based" => raw.time_based = flag()?,
            "direct" => p.direct = flag()?,
            "buffered" => p.direct = !flag()?,
            "rwmixread" => raw.rwmixread = Some(num(100)? as u8),
            "rwmixwrite" => raw.rwmixwrite = Some(num(100)? as u8),
            "fsync" => raw.sync = Some((num(u32::MAX)?, false)),
            "fdatasync" => raw.sync = Some((num(u32::MAX)?, true)),
            "rate" | "rate_iops" => raw.rate = Some(o.clone()),
            "random_distribution" => {
                raw.dist = Some(if v == "random" {
                    Distribution::Uniform
                } else if v.starts_with("zipf:") && v.matches(':').count() == 1 {
                    parse_dist(v).map_err(|e| err(&e))?
                } else {
                    return Err(err("storbench has random and zipf:θ (use --dist hot:P/Q for a hot set)"));
                })
            }
            "norandommap" => raw.norandommap = flag()?,
            "filename" => raw.filename = Some(v.to_string()),
            "directory" => raw.directory = Some(v.to_string()),
            "ioengine" => {
                job.engine =
                    engine(v).ok_or_else(|| err("use libaio, io_uring, psync, sync, pvsync or null"))?
            }
            "stonewall" | "wait_for_previous" => job.stonewall = flag()?,
            "loops" if v == "1" => {}
            "offset" if fio_size(v, kb_base) == Ok(0) => {}
            _ => {
                return Err(err(
                    "storbench cannot run this option faithfully (the options it maps are in docs/io.md)",
                ))
            }
        }
    }
    finish(job, p, raw, opts, file)
}

/// Turns the collected values into the profile: what depends on more than
/// one option (the pattern and its block size, mix, rate, time and file).
fn finish(mut job: Job, mut p: Profile, raw: Raw, opts: &[Opt], file: &str) -> Result<Job, String> {
    let section = job.section.clone();
    let at = |key: &str| opts.iter().rev().find(|o| o.key == key).expect("the option was seen");
    let err = |key: &str, why: &str| bad(file, &section, at(key), why);
    let (pattern, pure) = match &raw.rw {
        None => (Pattern::Sequential, Some(100)),
        Some(o) => parse_rw(o.value.as_deref().unwrap_or("")).map_err(|e| bad(file, &section, o, &e))?,
    };
    p.pattern = pattern;
    p.read_pct = match (pure, raw.rwmixread, raw.rwmixwrite) {
        (Some(r), _, _) => r,
        (None, Some(r), Some(w)) if u32::from(r) + u32::from(w) != 100 => {
            return Err(err("rwmixwrite", &format!("{w} with rwmixread={r}: the two must add up to 100")))
        }
        (None, Some(r), _) => r,
        (None, None, Some(w)) => 100 - w,
        (None, None, None) => 50,
    };
    let mixed = pure.is_none() && p.read_pct > 0 && p.read_pct < 100;
    if let Some(o) = &raw.bs {
        let (r, w) = split_rw(o.value.as_deref().unwrap_or(""), "4096");
        let pick = |s: &str| fio_size(s, kb_base(opts)).map_err(|e| bad(file, &section, o, &e));
        let (r, w) = (pick(&r)?, pick(&w)?);
        if mixed && r != w {
            return Err(bad(
                file,
                &section,
                o,
                "reads and writes of different sizes are not supported: storbench uses one block size",
            ));
        }
        p.bs = if p.read_pct == 0 { w } else { r };
    }
    if let Some((n, fdatasync)) = raw.sync.filter(|s| s.0 > 0) {
        p.fsync_every = n;
        p.fdatasync = fdatasync;
    }
    if let Some(o) = &raw.rate {
        let iops = o.key == "rate_iops";
        if mixed {
            return Err(bad(
                file,
                &section,
                o,
                "fio caps reads and writes apart, storbench the sum: give a rate only to a pure read or write job",
            ));
        }
        let (r, w) = split_rw(o.value.as_deref().unwrap_or(""), "");
        let s = if p.read_pct == 0 { w } else { r };
        if !s.is_empty() {
            let n = fio_size(&s, kb_base(opts)).map_err(|e| bad(file, &section, o, &e))? as f64;
            // fio's rate is per job, and each of numjobs clones is a job.
            let per_job = if iops { n } else { n / p.bs as f64 };
            p.rate = Some(per_job * f64::from(p.threads));
        }
    }
    match (raw.runtime, raw.time_based) {
        (Some(d), true) if !d.is_zero() => p.duration = d,
        _ => {
            let o = opts.iter().rev().find(|o| o.key == "runtime" || o.key == "timeout");
            let why = "fio ends this job after size= of I/O (or runtime, whichever comes first), storbench after a time: add time_based and runtime=";
            return Err(match o {
                Some(o) => bad(file, &section, o, why),
                None => format!("{file}: job [{section}]: no runtime with time_based: {why}"),
            });
        }
    }
    // The random map means something only for uniform random offsets.
    p.random_map = false;
    if pattern == Pattern::Random {
        match raw.dist {
            Some(d @ Distribution::Zipf { .. }) => {
                // fio turns the random map off for a non-uniform distribution.
                p.dist = d;
                p.random_map = false;
            }
            _ => p.random_map = !raw.norandommap,
        }
    }
    job.target = match (raw.directory, raw.filename) {
        (_, Some(f)) if f.contains(':') => {
            return Err(err("filename", "several files per job are not supported: storbench uses one target"))
        }
        (Some(d), Some(f)) => Some(Path::new(&d).join(f)),
        (None, Some(f)) => Some(PathBuf::from(f)),
        (Some(d), None) => Some(Path::new(&d).join(format!("{section}.0.0"))),
        (None, None) => None,
    };
    if p.threads > 1 && p.pattern == Pattern::Sequential {
        job.notes.push(format!(
            "job [{section}]: each of the {} threads walks its own stripe of the file; fio's clones each walk the whole file from its start",
            p.threads
        ));
    }
    job.profile = p;
    Ok(job)
}

fn kb_base(opts: &[Opt]) -> u64 {
    match opts.iter().rev().find(|o| o.key == "kb_base").and_then(|o| o.value.as_deref()) {
        Some("1000") => 1000,
        _ => 1024,
    }
}

/// fio's `read,write[,trim]` values: a value left out inherits the one
/// before it; one left empty keeps `default`.
fn split_rw(v: &str, default: &str) -> (String, String) {
    let mut parts = v.split(',');
    let r = parts.next().unwrap_or("").trim();
    let w = match parts.next() {
        None => r,
        Some(w) => w.trim(),
    };
    let or = |s: &str| if s.is_empty() { default.to_string() } else { s.to_string() };
    (or(r), or(w))
}

fn bad(file: &str, section: &str, o: &Opt, why: &str) -> String {
    let opt = match &o.value {
        Some(v) => format!("{}={v}", o.key),
        None => o.key.clone(),
    };
    format!("{file}:{}: job [{section}]: {opt}: {why}", o.line)
}

/// fio's engines to ours: the asynchronous kernel interfaces to io_uring,
/// the synchronous ones to psync (one I/O in flight, as fio's sync engines).
fn engine(v: &str) -> Option<&'static str> {
    Some(match v {
        "libaio" | "io_uring" => "io_uring",
        "psync" | "sync" | "pvsync" => "psync",
        "null" => "null",
        _ => return None,
    })
}

/// A fio size: decimal or `0x` hex, with fio's suffixes. With `kb_base` 1024
/// (fio's default) `k`/`kb` are 1024 and `ki`/`kib` 1000, with 1000 the
/// other way round (fio's HOWTO, "int").
pub fn fio_size(s: &str, kb_base: u64) -> Result<u64, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a size: use e.g. 4096, 4k, 1m, 10g");
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).map_err(|_| bad());
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let unit = unit.to_ascii_lowercase();
    let unit = unit.strip_suffix('b').unwrap_or(&unit);
    let (prefix, iec) = match unit.strip_suffix('i') {
        Some(p) => (p, true),
        None => (unit, false),
    };
    let power = match prefix {
        "" if !iec => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        _ => return Err(bad()),
    };
    let base = if iec == (kb_base == 1024) { 1000f64 } else { 1024f64 };
    let v = n * base.powi(power);
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 || v.fract() != 0.0 {
        return Err(bad());
    }
    Ok(v as u64)
}

/// A fio time: seconds unless a suffix says `d`, `h`, `m`, `s`/`sec`,
/// `ms`/`msec` or `us`/`usec` (not case sensitive).
pub fn fio_time(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a time: use e.g. 60, 60s, 500ms, 10m, 1h");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" => n,
        "ms" | "msec" => n / 1e3,
        "us" | "usec" => n / 1e6,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_fio_reads_them() {
        // kb_base=1024, fio's default: k/kb are 1024, ki/kib 1000.
        for (s, want) in [("4096", 4096), ("4k", 4096), ("4K", 4096), ("4kB", 4096), ("4KB", 4096), ("4b", 4)]
        {
            assert_eq!(fio_size(s, 1024), Ok(want), "{s}");
        }
        assert_eq!(fio_size("4ki", 1024), Ok(4000));
        assert_eq!(fio_size("1mi", 1024), Ok(1_000_000));
        assert_eq!(fio_size("1m", 1024), Ok(1 << 20));
        assert_eq!(fio_size("10g", 1024), Ok(10 << 30));
        assert_eq!(fio_size("1t", 1024), Ok(1 << 40));
        assert_eq!(fio_size("0x1000", 1024), Ok(4096));
        // kb_base=1000: the other way round.
        assert_eq!(fio_size("4k", 1000), Ok(4000));
        assert_eq!(fio_size("4KiB", 1000), Ok(4096));
        for bad in ["", "4x", "k", "50%", "1.0001k", "-4k"] {
            assert!(fio_size(bad, 1024).unwrap_err().contains(&format!("'{bad}' is not a size")), "{bad}");
        }
    }

    #[test]
    fn times_read_as_fio_reads_them() {
        let s = Duration::from_secs;
        for (t, want) in [
            ("900", s(900)),
            ("60s", s(60)),
            ("10m", s(600)),
            ("10M", s(600)),
            ("1h", s(3600)),
            ("1d", s(86400)),
            ("500ms", Duration::from_millis(500)),
            ("250usec", Duration::from_micros(250)),
        ] {
            assert_eq!(fio_time(t), Ok(want), "{t}");
        }
        assert!(fio_time("soon").unwrap_err().contains("'soon' is not a time"));
    }

    #[test]
    fn globals_apply_to_the_jobs_after_them_and_a_job_overrides_them() {
        let text = "[global]\nbs=8k\ntime_based\nruntime=5\nrw=randread\n\n[a]\nbs=16k\n\n[global]\niodepth=8\n\n[b]\nstonewall\n";
        let imp = parse(text, "j.fio").unwrap();
        let [a, b] = &imp.profiles[..] else { panic!() };
        assert_eq!((a.bs, a.qd), (16384, 1), "the later [global] does not reach back to [a]");
        assert_eq!((b.bs, b.qd, b.pattern), (8192, 8, Pattern::Random));
        // fio's defaults for what a job leaves out.
        let d = &parse("[d]\ntime_based\nruntime=1\n", "d.fio").unwrap();
        let p = &d.profiles[0];
        assert_eq!((p.bs, p.pattern, p.read_pct, p.qd, p.direct), (4096, Pattern::Sequential, 100, 1, false));
        assert_eq!((d.engine, d.target.clone(), d.size), (Some("psync"), None, None));
    }

    #[test]
    fn bad_values_are_refused_naming_the_option_and_line() {
        for (text, want) in [
            ("[a]\ntime_based\nruntime=1\nrw=randrw\nbs=4k,8k\n", "x.fio:5: job [a]: bs=4k,8k: reads and writes of different sizes"),
            ("[a]\ntime_based\nruntime=1\nrw=randrw\nrate=1m\n", "x.fio:5: job [a]: rate=1m: fio caps reads and writes apart"),
            ("[a]\ntime_based\nruntime=1\nrandom_distribution=pareto:0.9\n", "x.fio:4: job [a]: random_distribution=pareto:0.9: storbench has random and zipf"),
            ("[a]\nioengine=posixaio\n", "x.fio:2: job [a]: ioengine=posixaio: use libaio, io_uring"),
            ("[a]\niodepth=deep\n", "x.fio:2: job [a]: iodepth=deep: 'deep': use a whole number"),
            ("[a]\nrwmixread=60\nrwmixwrite=30\ntime_based\nruntime=1\nrw=rw\n", "x.fio:3: job [a]: rwmixwrite=30: 30 with rwmixread=60"),
            ("[a]\nfilename=a:b\ntime_based\nruntime=1\n", "x.fio:2: job [a]: filename=a:b: several files"),
            ("bs=4k\n", "x.fio:1: 'bs=4k' is outside any [job] section"),
            ("[a]\nsize=${SIZE}\n", "x.fio:2: 'size=${SIZE}': include files"),
            ("[a]\nnumjobs=2\nrw=write\ntime_based\nruntime=1\n[b]\nstonewall\nioengine=null\ntime_based\nruntime=1\n", "x.fio:6: job [b]: ioengine differs from [a]'s"),
        ] {
            let e = parse(text, "x.fio").unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_rate_in_bytes_is_iops_at_the_block_size_times_the_jobs() {
        let t = "[a]\ntime_based\nruntime=1\nrw=randread\nbs=8k\nnumjobs=4\nrate=800k\n[b]\nstonewall\nrw=write\ntime_based\nruntime=1\nrate_iops=100,50\nnumjobs=2\nfsync=8\n";
        let imp = parse(t, "r.fio").unwrap();
        assert_eq!(imp.profiles[0].rate, Some(100.0 * 4.0));
        assert_eq!(imp.profiles[1].rate, Some(50.0 * 2.0), "a writing job takes the write rate");
        assert_eq!((imp.profiles[1].fsync_every, imp.profiles[1].fdatasync), (8, false));
    }
}
