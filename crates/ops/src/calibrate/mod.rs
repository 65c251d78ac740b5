//! Calibrating a device model and validating it: the measurement grid
//! (random and sequential; read, write and 70/30; 4 KiB to 256 KiB; QD 1 to
//! 32; write-then-flush at QD1), each cell as an io profile for our own
//! engine and its figures as the fit reads them, the sustained-write
//! segment that shows a write cache filling, and the emulator's envelope
//! (which cells a modelled medium can serve faithfully). [`run`] prepares
//! the target and runs a step, [`measure`] runs the calibration grid and
//! fits (or fits a table), [`validate`] runs the grid on a device and on an
//! emulated medium and compares, [`model_file`] reads and writes model
//! files. Nothing here prints or records: the binary is handed each step
//! to record and show, and prints what these return.

pub mod measure;
pub mod model_file;
pub mod run;
pub mod validate;

pub use run::{prepare, run_step, Grid, Ran, StepFailure, Stepped};

use std::time::Duration;

use storbench_emu::fit::{Cell, Figures, Pattern, Sustained};
use storbench_io::profile::Pattern as IoPattern;
use storbench_io::Profile;
use storbench_metrics::StepReport;

/// How long each cell runs.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Measured time per cell.
    pub cell: Duration,
    /// Ramp-up per cell.
    pub rampup: Duration,
    /// The sustained write's length.
    pub sustained: Duration,
}

impl Timing {
    /// The default grid's: 46 cells of 1 + 5 s and a 60 s sustained write
    /// (about 6 minutes with the file's preparation).
    pub const DEFAULT: Timing = Timing {
        cell: Duration::from_secs(5),
        rampup: Duration::from_secs(1),
        sustained: Duration::from_secs(60),
    };
    /// `--quick`: 16 cells of 0.5 + 3 s and 15 s sustained (about 75 s).
    pub const QUICK: Timing = Timing {
        cell: Duration::from_secs(3),
        rampup: Duration::from_millis(500),
        sustained: Duration::from_secs(15),
    };

    /// The grid's timing: `--quick`'s or the default's, or with `cell` a
    /// measured time per cell (testing), a quarter of it as ramp-up and
    /// three times it as the sustained write.
    pub fn for_grid(quick: bool, cell: Option<Duration>) -> Timing {
        let mut t = if quick { Timing::QUICK } else { Timing::DEFAULT };
        if let Some(d) = cell {
            t.cell = d;
            t.rampup = d / 4;
            t.sustained = d * 3;
        }
        t
    }

    /// The grid's name as recorded: `quick` or `default`.
    pub fn grid_name(quick: bool) -> &'static str {
        if quick {
            "quick"
        } else {
            "default"
        }
    }
}

/// A calibration's or validation's error, kept apart as the binary's exit
/// codes are: bad input, a failed target (or medium), or a failure.
#[derive(Debug, thiserror::Error)]
pub enum CalError {
    /// Bad input: names the value and what is allowed.
    #[error("{0}")]
    Usage(String),
    /// The target or the emulated medium failed.
    #[error("{0}")]
    Target(String),
    /// Anything else failed.
    #[error("{0}")]
    Failed(String),
}

impl From<storbench_media::MediaError> for CalError {
    fn from(e: storbench_media::MediaError) -> CalError {
        match e {
            storbench_media::MediaError::Usage(m) => CalError::Usage(m),
            storbench_media::MediaError::Failed(m) => CalError::Target(m),
        }
    }
}

/// Now, as a model file dates things: RFC 3339 UTC, to the second.
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

const K: u64 = 1024;

/// The grid: the default's cells, or `--quick`'s fewer.
pub fn grid(quick: bool) -> Vec<Cell> {
    let mut out = Vec::new();
    let (sizes, qds): (&[u64], &[u32]) =
        if quick { (&[4 * K, 64 * K], &[1, 32]) } else { (&[4 * K, 16 * K, 64 * K, 256 * K], &[1, 4, 32]) };
    for &bs in sizes {
        for read_pct in [100u8, 0, 70] {
            for &qd in qds {
                out.push(Cell { bs, pattern: Pattern::Random, read_pct, qd });
            }
        }
    }
    let seq: &[(u64, u8, u32)] = if quick {
        &[(4 * K, 100, 1), (256 * K, 100, 32), (256 * K, 0, 32)]
    } else {
        &[
            (4 * K, 100, 1),
            (4 * K, 100, 32),
            (4 * K, 0, 1),
            (4 * K, 0, 32),
            (256 * K, 100, 1),
            (256 * K, 100, 32),
            (256 * K, 0, 1),
            (256 * K, 0, 32),
        ]
    };
    for &(bs, read_pct, qd) in seq {
        out.push(Cell { bs, pattern: Pattern::Sequential, read_pct, qd });
    }
    let flush: &[u64] = if quick { &[8 * K] } else { &[4 * K, 8 * K] };
    for &bs in flush {
        out.push(Cell { bs, pattern: Pattern::Flush, read_pct: 0, qd: 1 });
    }
    out
}

/// A short name for a cell's step: `rand-4k-r100-qd1`, `flush-8k`.
pub fn step_name(c: &Cell) -> String {
    let bs = storbench_emu::fit::size_label(c.bs);
    match c.pattern {
        Pattern::Flush => format!("flush-{bs}"),
        Pattern::Random => format!("rand-{bs}-r{}-qd{}", c.read_pct, c.qd),
        Pattern::Sequential => format!("seq-{bs}-r{}-qd{}", c.read_pct, c.qd),
    }
}

/// The io profile that measures a cell: direct I/O, one thread, uniform
/// random offsets (independent draws) over the whole target; a flush cell
/// writes consecutive blocks of a 16 MiB span, each followed by fdatasync.
pub fn profile(c: &Cell, t: &Timing) -> Profile {
    let mut p = Profile::new(&step_name(c));
    p.bs = c.bs;
    p.read_pct = c.read_pct;
    p.qd = c.qd;
    p.duration = t.cell;
    p.rampup = t.rampup;
    p.source = "media calibrate grid";
    match c.pattern {
        Pattern::Random => p.pattern = IoPattern::Random,
        Pattern::Sequential => p.pattern = IoPattern::Sequential,
        Pattern::Flush => {
            p.pattern = IoPattern::Sequential;
            p.read_pct = 0;
            p.qd = 1;
            p.fsync_every = 1;
            p.fdatasync = true;
            p.span = Some(16 << 20);
        }
    }
    p
}

/// The sustained write: 256 KiB sequential writes at QD32.
pub fn sustained_profile(t: &Timing) -> Profile {
    let mut p = Profile::new("sustained-write-256k");
    p.bs = 256 * K;
    p.pattern = IoPattern::Sequential;
    p.read_pct = 0;
    p.qd = 32;
    p.duration = t.sustained;
    p.rampup = Duration::ZERO;
    p.source = "media calibrate sustained write";
    p
}

/// A sustained write's figures from its once-a-second MB/s.
pub fn sustained(per_second: Vec<f64>, source: String) -> Sustained {
    Sustained { bs: 256 * K, mb_s: per_second, source }
}

/// What a cell's step measured, as the fit reads it. A flush cell's
/// latency is a write and its fdatasync: the inverse of the pairs' rate.
pub fn figures(c: &Cell, r: &StepReport) -> Figures {
    let get = |k: &str| r.get(k).filter(|v| v.is_finite() && *v > 0.0);
    if c.pattern == Pattern::Flush {
        let iops = get("io.write.iops");
        return Figures {
            iops,
            mb_s: iops.map(|i| i * c.bs as f64 / 1e6),
            lat_mean_us: iops.map(|i| 1e6 / i),
            lat_p50_us: None,
            lat_p99_us: None,
        };
    }
    Figures {
        iops: get("io.iops"),
        mb_s: get("io.mbps"),
        lat_mean_us: get("io.lat.mean"),
        lat_p50_us: get("io.lat.p50"),
        lat_p99_us: get("io.lat.p99"),
    }
}

/// What the emulator can serve faithfully on this machine.
#[derive(Clone, Copy, Debug)]
pub struct Envelope {
    /// The daemon's round trip at QD1, µs (absorbed by the daemon).
    pub floor_us: f64,
    /// How much later than its model time a reply at a deadline arrives
    /// after that, µs (0: not measured).
    pub timed_extra_us: f64,
    /// 4 KiB reads per second at QD16 with a model that takes no time
    /// (0: unknown).
    pub ceiling_iops: f64,
    /// MB/s of 256 KiB writes from 16 threads with a model that takes no
    /// time (0: unknown).
    pub ceiling_write_mb_s: f64,
}

/// A model's time must be at least this many floors for a cell to be
/// inside the envelope.
pub const FLOOR_TIMES: f64 = 3.0;
/// A cell's IOPS must be under this share of the ceiling.
pub const CEILING_SHARE: f64 = 0.8;

impl Envelope {
    /// Why a cell whose model figures are `model` (and which writes
    /// `write_mb_s` MB/s, where known) is outside the envelope, or None
    /// when inside.
    pub fn outside(&self, model: &Figures, write_mb_s: Option<f64>) -> Option<String> {
        if let Some(l) = model.lat_mean_us {
            // The larger of what a request costs the daemon: its round
            // trip, or how late a reply at a deadline comes.
            let (cost, what) = if self.timed_extra_us > self.floor_us {
                (self.timed_extra_us, "a timed reply's lateness")
            } else {
                (self.floor_us, "the daemon's round trip")
            };
            if l < FLOOR_TIMES * cost {
                return Some(format!("model time {l:.0} µs under {FLOOR_TIMES}× {what} ({cost:.0} µs)"));
            }
        }
        if let Some(i) = model.iops {
            if self.ceiling_iops > 0.0 && i > CEILING_SHARE * self.ceiling_iops {
                return Some(format!(
                    "model IOPS {i:.0} above {:.0} % of the emulator's ceiling ({:.0} IOPS)",
                    CEILING_SHARE * 100.0,
                    self.ceiling_iops
                ));
            }
        }
        if let Some(w) = write_mb_s {
            if self.ceiling_write_mb_s > 0.0 && w > CEILING_SHARE * self.ceiling_write_mb_s {
                return Some(format!(
                    "model writes {w:.0} MB/s, above {:.0} % of the emulator's ceiling for large writes ({:.0} MB/s)",
                    CEILING_SHARE * 100.0,
                    self.ceiling_write_mb_s
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grids_cover_what_the_fit_needs() {
        for quick in [false, true] {
            let g = grid(quick);
            let has = |p: Pattern, r: u8, qd: u32| {
                g.iter().any(|c| c.pattern == p && c.read_pct == r && c.qd == qd)
            };
            assert!(
                has(Pattern::Random, 100, 1) && has(Pattern::Random, 0, 1) && has(Pattern::Random, 100, 32)
            );
            assert!(
                has(Pattern::Sequential, 100, 32)
                    && has(Pattern::Sequential, 100, 1)
                    && has(Pattern::Flush, 0, 1)
            );
            assert!(g.iter().any(|c| c.bs == 256 * K) && g.iter().any(|c| c.read_pct == 70));
        }
        assert_eq!(grid(false).len(), 46);
        assert_eq!(grid(true).len(), 16);
    }

    #[test]
    fn the_envelope_keeps_out_fast_cells_and_cells_above_the_ceiling() {
        let e = Envelope {
            floor_us: 20.0,
            timed_extra_us: 0.0,
            ceiling_iops: 50_000.0,
            ceiling_write_mb_s: 500.0,
        };
        let f =
            |lat: f64, iops: f64| Figures { lat_mean_us: Some(lat), iops: Some(iops), ..Figures::default() };
        assert!(e.outside(&f(100.0, 10_000.0), None).is_none());
        assert!(e.outside(&f(50.0, 10_000.0), None).unwrap().contains("under 3× the daemon's round trip"));
        assert!(e.outside(&f(500.0, 45_000.0), None).unwrap().contains("ceiling"));
        // A reply at a deadline 30 µs late: a 66 µs model time is outside
        // although the round trip (7 µs) is far under it.
        let late =
            Envelope { floor_us: 7.0, timed_extra_us: 30.0, ceiling_iops: 0.0, ceiling_write_mb_s: 0.0 };
        assert!(late.outside(&f(66.0, 10_000.0), None).unwrap().contains("a timed reply's lateness (30 µs)"));
        assert!(late.outside(&f(100.0, 10_000.0), None).is_none());
        // Large writes above most of the emulator's write ceiling (500 MB/s):
        // 2,000 writes of 256 KiB a second are 524 MB/s.
        assert!(e
            .outside(&f(8000.0, 2_000.0), Some(524.0))
            .unwrap()
            .contains("ceiling for large writes (500 MB/s)"));
        assert!(e.outside(&f(8000.0, 2_000.0), Some(300.0)).is_none());
        assert!(late.outside(&f(8000.0, 2_000.0), Some(5_000.0)).is_none());
    }
}
