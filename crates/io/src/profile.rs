//! I/O profiles: what one step of `storbench io` does to the target, the
//! built-in profile sets (each traced to the study it comes from), and the
//! parsing of the values a profile is written with.

use std::time::Duration;

use serde::Serialize;

/// Random or sequential offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Offsets drawn from the access distribution.
    Random,
    /// Each thread walks its own stripe of the span in order.
    Sequential,
}

/// How random offsets are spread over the span.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Distribution {
    /// Every block equally likely.
    Uniform,
    /// Zipf with exponent θ (fio's `zipf:θ`): a few blocks take most I/Os.
    Zipf {
        /// The exponent, > 0 and ≠ 1.
        theta: f64,
    },
    /// `hot:P/Q`: P % of I/Os go to Q % of the span.
    Hot {
        /// Share of I/Os to the hot part, percent.
        p: f64,
        /// Size of the hot part, percent of the span.
        q: f64,
    },
}

/// One I/O profile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    /// Name (shown and stored as the step label).
    pub name: String,
    /// Block size in bytes.
    pub bs: u64,
    /// Random or sequential.
    pub pattern: Pattern,
    /// Share of reads, 0-100.
    pub read_pct: u8,
    /// I/Os in flight per thread.
    pub qd: u32,
    /// Threads, each with its own queue.
    pub threads: u32,
    /// Measured time.
    #[serde(with = "secs")]
    pub duration: Duration,
    /// Ramp-up before the measured time.
    #[serde(with = "secs")]
    pub rampup: Duration,
    /// O_DIRECT (bypass the page cache).
    pub direct: bool,
    /// Offsets are multiples of this (default: the block size).
    pub align: u64,
    /// Sync after every N writes (0 = never).
    pub fsync_every: u32,
    /// Use fdatasync rather than fsync.
    pub fdatasync: bool,
    /// Spread of random offsets.
    pub dist: Distribution,
    /// Target rate in IOPS over all threads; latency counts from the schedule.
    pub rate: Option<f64>,
    /// Bursts: with a rate, I/O is scheduled only in the first `burst` of
    /// every `burst + idle`, from the step's start (a neighbour that loads
    /// the device in phases); `(burst, idle)`.
    #[serde(with = "burst_secs")]
    pub bursts: Option<(Duration, Duration)>,
    /// Use only this many bytes from the start of the target (from
    /// `offset`, when that is set).
    pub span: Option<u64>,
    /// Where the span begins, bytes: a shard's part of the target.
    pub offset: u64,
    /// Uniform random offsets visit every block once per pass, per thread
    /// (fio's default random map); else each offset is an independent draw
    /// (fio's `--norandommap`).
    pub random_map: bool,
    /// Where the profile comes from.
    pub source: &'static str,
}

mod burst_secs {
    pub fn serialize<S: serde::Serializer>(
        b: &Option<(std::time::Duration, std::time::Duration)>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match b {
            Some((on, off)) => s.collect_map([("burst_s", on.as_secs_f64()), ("idle_s", off.as_secs_f64())]),
            None => s.serialize_none(),
        }
    }
}

mod secs {
    pub fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

impl Profile {
    /// A profile with the defaults: 8 KiB random reads, QD 1, 1 thread, 30 s,
    /// direct I/O, uniform.
    pub fn new(name: &str) -> Profile {
        Profile {
            name: name.to_string(),
            bs: 8192,
            pattern: Pattern::Random,
            read_pct: 100,
            qd: 1,
            threads: 1,
            duration: Duration::from_secs(30),
            rampup: Duration::ZERO,
            direct: true,
            align: 0,
            fsync_every: 0,
            fdatasync: false,
            dist: Distribution::Uniform,
            rate: None,
            bursts: None,
            span: None,
            offset: 0,
            random_map: false,
            source: "user",
        }
    }

    fn with(mut self, f: impl FnOnce(&mut Profile)) -> Profile {
        f(&mut self);
        self
    }

    /// The alignment offsets use.
    pub fn alignment(&self) -> u64 {
        if self.align == 0 {
            self.bs
        } else {
            self.align
        }
    }

    /// True when the profile writes.
    pub fn writes(&self) -> bool {
        self.read_pct < 100
    }

    /// Checks the profile against itself and the target's logical block size
    /// (for direct I/O); the error names the value and what is allowed.
    pub fn validate(&self, logical_block: u64) -> Result<(), String> {
        let n = &self.name;
        if self.bs == 0 || self.bs > 64 << 20 {
            return Err(format!("{n}: block size {}: must be 1 byte to 64 MiB", self.bs));
        }
        if self.direct {
            let lb = logical_block.max(512);
            if !self.bs.is_multiple_of(lb) {
                return Err(format!(
                    "{n}: block size {} is not a multiple of {lb} bytes, which direct I/O on this target needs (or use --buffered)",
                    self.bs
                ));
            }
            if !self.alignment().is_multiple_of(lb) {
                return Err(format!(
                    "{n}: alignment {} is not a multiple of {lb} bytes, which direct I/O on this target needs",
                    self.alignment()
                ));
            }
        }
        if self.read_pct > 100 {
            return Err(format!("{n}: read share {}: must be 0 to 100", self.read_pct));
        }
        if self.qd == 0 || self.qd > 4096 {
            return Err(format!("{n}: queue depth {}: must be 1 to 4096", self.qd));
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(format!("{n}: threads {}: must be 1 to 1024", self.threads));
        }
        if self.duration.is_zero() {
            return Err(format!("{n}: duration 0: must be more than zero"));
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(format!("{n}: rate {r}: must be a positive number of IOPS"));
            }
        }
        if let Some((on, _)) = self.bursts {
            if self.rate.is_none() {
                return Err(format!("{n}: --idle needs a rate (--rate or --rate-mbps) to shape"));
            }
            if on.is_zero() {
                return Err(format!("{n}: burst 0: must be more than zero"));
            }
        }
        match self.dist {
            Distribution::Zipf { theta } if !(theta > 0.0 && theta.is_finite() && theta != 1.0) => {
                return Err(format!("{n}: zipf:{theta}: θ must be > 0 and not 1"))
            }
            Distribution::Hot { p, q } if !((0.0..=100.0).contains(&p) && q > 0.0 && q < 100.0) => {
                return Err(format!("{n}: hot:{p}/{q}: P must be 0-100 and Q between 0 and 100"))
            }
            _ => {}
        }
        if self.random_map && self.pattern == Pattern::Random && self.dist != Distribution::Uniform {
            return Err(format!(
                "{n}: the random map visits every block once per pass, which only a uniform distribution can; use --norandommap with --dist"
            ));
        }
        Ok(())
    }
}

/// Parses `read|write|randread|randwrite|randrw|rw` (fio's `--rw`) into a
/// pattern and, for pure reads or writes, the read share.
pub fn parse_rw(s: &str) -> Result<(Pattern, Option<u8>), String> {
    Ok(match s {
        "read" => (Pattern::Sequential, Some(100)),
        "write" => (Pattern::Sequential, Some(0)),
        "randread" => (Pattern::Random, Some(100)),
        "randwrite" => (Pattern::Random, Some(0)),
        "randrw" => (Pattern::Random, None),
        "rw" | "readwrite" => (Pattern::Sequential, None),
        _ => {
            return Err(format!(
                "'{s}' is not an I/O pattern: use read, write, randread, randwrite, randrw or rw"
            ))
        }
    })
}

/// Parses `uniform`, `zipf:θ` or `hot:P/Q`.
pub fn parse_dist(s: &str) -> Result<Distribution, String> {
    let bad = || {
        format!(
            "'{s}' is not a distribution: use uniform, zipf:θ (e.g. zipf:1.2) or hot:P/Q (e.g. hot:90/10)"
        )
    };
    if s == "uniform" || s == "random" {
        return Ok(Distribution::Uniform);
    }
    if let Some(t) = s.strip_prefix("zipf:") {
        return t.parse().map(|theta| Distribution::Zipf { theta }).map_err(|_| bad());
    }
    if let Some(pq) = s.strip_prefix("hot:") {
        let (p, q) = pq.split_once('/').ok_or_else(bad)?;
        return Ok(Distribution::Hot { p: p.parse().map_err(|_| bad())?, q: q.parse().map_err(|_| bad())? });
    }
    Err(bad())
}

const SQLSERVER: &str = "STUDIES.md S5: diskspd profiles for SQL Server, 8 threads x 8 outstanding I/Os";
const S4_RAW: &str = "STUDIES.md S4: fio raw device check, QD32";
const S4_HCI: &str = "STUDIES.md S4: store-level check, QD8 x 4 threads";
const S3_SHAPES: &str = "STUDIES.md S3: the database engine's own I/O kinds";
const QUICK: &str = "storbench quick tour";

fn p(
    name: &str,
    bs: u64,
    pattern: Pattern,
    read: u8,
    qd: u32,
    threads: u32,
    source: &'static str,
) -> Profile {
    Profile::new(name).with(|x| {
        x.bs = bs;
        x.pattern = pattern;
        x.read_pct = read;
        x.qd = qd;
        x.threads = threads;
        x.source = source;
        x.duration = Duration::from_secs(20);
        x.rampup = Duration::from_secs(2);
    })
}

const K: u64 = 1024;
use Pattern::{Random as R, Sequential as S};

/// The names of the built-in sets.
pub const SETS: &[&str] = &["sqlserver-six", "nvme-vs-sata", "hci-mix", "db-shapes", "quick"];

/// A built-in profile set by name.
pub fn set(name: &str) -> Option<Vec<Profile>> {
    Some(match name {
        "sqlserver-six" => vec![
            p("read-random-8k", 8 * K, R, 100, 8, 8, SQLSERVER),
            p("read-random-64k", 64 * K, R, 100, 8, 8, SQLSERVER),
            p("write-random-8k", 8 * K, R, 0, 8, 8, SQLSERVER),
            p("read-seq-64k", 64 * K, S, 100, 8, 8, SQLSERVER),
            p("write-seq-8k", 8 * K, S, 0, 8, 8, SQLSERVER),
            p("read-seq-256k", 256 * K, S, 100, 8, 8, SQLSERVER),
        ],
        "nvme-vs-sata" => vec![
            p("randrw75-4k-qd32", 4 * K, R, 75, 32, 1, S4_RAW),
            p("read-seq-256k-qd32", 256 * K, S, 100, 32, 1, S4_RAW),
            p("write-seq-256k-qd32", 256 * K, S, 0, 32, 1, S4_RAW),
        ],
        "hci-mix" => vec![
            p("randrw70-4k", 4 * K, R, 70, 8, 4, S4_HCI),
            p("randrw70-64k", 64 * K, R, 70, 8, 4, S4_HCI),
            p("read-seq-128k", 128 * K, S, 100, 8, 4, S4_HCI),
            p("write-seq-128k", 128 * K, S, 0, 8, 4, S4_HCI),
        ],
        "db-shapes" => vec![
            p("oltp-data-8k", 8 * K, R, 70, 8, 4, S3_SHAPES),
            p("log-write-8k", 8 * K, S, 0, 1, 1, S3_SHAPES).with(|x| {
                x.fsync_every = 1;
                x.fdatasync = true;
            }),
            p("log-write-64k", 64 * K, S, 0, 1, 1, S3_SHAPES).with(|x| {
                x.fsync_every = 1;
                x.fdatasync = true;
            }),
            p("checkpoint-8k", 8 * K, R, 0, 32, 2, S3_SHAPES),
            p("backup-1m", 1024 * K, S, 100, 4, 1, S3_SHAPES),
            p("readahead-256k", 256 * K, S, 100, 8, 1, S3_SHAPES),
            p("sort-spill-write-64k", 64 * K, S, 0, 4, 1, S3_SHAPES),
            p("sort-spill-read-64k", 64 * K, S, 100, 4, 1, S3_SHAPES),
        ],
        "quick" => {
            let q = |x: &mut Profile| {
                x.duration = Duration::from_secs(12);
                x.rampup = Duration::from_secs(2);
            };
            vec![
                p("read-random-8k", 8 * K, R, 100, 8, 2, QUICK).with(q),
                p("write-random-8k", 8 * K, R, 0, 8, 2, QUICK).with(q),
                p("log-write-8k", 8 * K, S, 0, 1, 1, QUICK).with(|x| {
                    q(x);
                    x.fsync_every = 1;
                    x.fdatasync = true;
                }),
                p("read-seq-256k", 256 * K, S, 100, 8, 1, QUICK).with(q),
            ]
        }
        _ => return None,
    })
}

/// A built-in profile by name, from any set.
pub fn named(name: &str) -> Option<Profile> {
    SETS.iter().filter_map(|s| set(s)).flatten().find(|p| p.name == name)
}

/// Every built-in profile name, for error messages.
pub fn all_names() -> Vec<String> {
    let mut v: Vec<String> = SETS.iter().filter_map(|s| set(s)).flatten().map(|p| p.name).collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_hold_the_studies_profiles() {
        let six = set("sqlserver-six").unwrap();
        assert_eq!(six.len(), 6);
        assert!(six.iter().all(|p| p.threads == 8 && p.qd == 8));
        let w = six.iter().find(|p| p.name == "write-seq-8k").unwrap();
        assert_eq!((w.bs, w.pattern, w.read_pct), (8192, Pattern::Sequential, 0));
        let n = set("nvme-vs-sata").unwrap();
        assert_eq!((n[0].bs, n[0].read_pct, n[0].qd), (4096, 75, 32));
        let log = named("log-write-8k").unwrap();
        assert!(log.fdatasync && log.fsync_every == 1 && log.qd == 1);
        for s in SETS {
            for p in set(s).unwrap() {
                p.validate(512).unwrap();
            }
        }
        assert!(set("nope").is_none());
    }

    #[test]
    fn parsing_good_and_bad_values() {
        assert_eq!(parse_rw("randrw").unwrap(), (Pattern::Random, None));
        assert_eq!(parse_rw("write").unwrap(), (Pattern::Sequential, Some(0)));
        assert!(parse_rw("randomread").unwrap_err().contains("'randomread'"));
        assert_eq!(parse_dist("zipf:1.2").unwrap(), Distribution::Zipf { theta: 1.2 });
        assert_eq!(parse_dist("hot:90/10").unwrap(), Distribution::Hot { p: 90.0, q: 10.0 });
        assert!(parse_dist("hot:90").is_err());
        assert!(parse_dist("pareto").unwrap_err().contains("uniform, zipf"));
    }

    #[test]
    fn validation_names_the_value() {
        let mut p = Profile::new("x");
        p.bs = 1000;
        assert!(p.validate(512).unwrap_err().contains("block size 1000 is not a multiple of 512"));
        p.direct = false;
        p.validate(512).unwrap();
        p.bs = 8192;
        p.direct = true;
        assert!(p.validate(16384).unwrap_err().contains("multiple of 16384"));
        p.duration = Duration::ZERO;
        assert!(p.validate(512).unwrap_err().contains("duration 0"));
        let mut q = Profile::new("y");
        q.dist = Distribution::Zipf { theta: 1.0 };
        assert!(q.validate(512).is_err());
        q.dist = Distribution::Hot { p: 90.0, q: 0.0 };
        assert!(q.validate(512).is_err());
        q.dist = Distribution::Uniform;
        q.qd = 0;
        assert!(q.validate(512).unwrap_err().contains("queue depth 0"));
    }
}
