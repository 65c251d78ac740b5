//! Figures (a step's summary numbers), samples (per-second series) and the
//! step report that carries both with the step's histograms to the results
//! store. Names are dotted and carry no unit (`io.read.lat.p99`); the unit is
//! a separate field, as DESIGN.md's results schema has it.

use serde::{Deserialize, Serialize};

use crate::{LatencyHistogram, Summary};

/// The unit of a figure, stored as text in the results store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// Microseconds.
    #[serde(rename = "us")]
    Us,
    /// Milliseconds.
    #[serde(rename = "ms")]
    Ms,
    /// Seconds.
    #[serde(rename = "s")]
    S,
    /// Events per second.
    #[serde(rename = "per_s")]
    PerS,
    /// Events per minute.
    #[serde(rename = "per_min")]
    PerMin,
    /// Megabytes (10^6 bytes) per second.
    #[serde(rename = "MB/s")]
    MBps,
    /// Percent.
    #[serde(rename = "%")]
    Percent,
    /// A plain count.
    #[serde(rename = "count")]
    Count,
    /// Bytes.
    #[serde(rename = "bytes")]
    Bytes,
    /// A dimensionless ratio.
    #[serde(rename = "ratio")]
    Ratio,
}

impl Unit {
    /// The text stored in the results store's `unit` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::PerS => "per_s",
            Unit::PerMin => "per_min",
            Unit::MBps => "MB/s",
            Unit::Percent => "%",
            Unit::Count => "count",
            Unit::Bytes => "bytes",
            Unit::Ratio => "ratio",
        }
    }

    /// Parses the stored text back; `None` for an unknown unit.
    pub fn parse(s: &str) -> Option<Unit> {
        Some(match s {
            "us" => Unit::Us,
            "ms" => Unit::Ms,
            "s" => Unit::S,
            "per_s" => Unit::PerS,
            "per_min" => Unit::PerMin,
            "MB/s" => Unit::MBps,
            "%" => Unit::Percent,
            "count" => Unit::Count,
            "bytes" => Unit::Bytes,
            "ratio" => Unit::Ratio,
            _ => return None,
        })
    }
}

/// One summary number of a step: `tps` = 1234.5 per_s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Dotted name without unit, e.g. `io.read.lat.p99`.
    pub name: String,
    /// The value in `unit`.
    pub value: f64,
    /// The unit.
    pub unit: Unit,
}

impl Figure {
    /// A figure.
    pub fn new(name: impl Into<String>, value: f64, unit: Unit) -> Self {
        Self { name: name.into(), value, unit }
    }
}

/// One point of a per-second series: `t_ms` since the step started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Milliseconds since the start of the step (ramp-up included).
    pub t_ms: u64,
    /// Dotted series name, e.g. `io.read.iops`.
    pub name: String,
    /// The value, in the unit of the figure of the same name.
    pub value: f64,
}

/// Everything one step (a load level) measured: what the results store keeps.
#[derive(Clone, Debug, Default)]
pub struct StepReport {
    /// Summary figures.
    pub figures: Vec<Figure>,
    /// Per-second series.
    pub samples: Vec<Sample>,
    /// Named histograms, e.g. `io.read.lat`.
    pub histograms: Vec<(String, LatencyHistogram)>,
}

impl StepReport {
    /// Adds a figure.
    pub fn figure(&mut self, name: impl Into<String>, value: f64, unit: Unit) {
        self.figures.push(Figure::new(name, value, unit));
    }

    /// Adds a sample.
    pub fn sample(&mut self, t_ms: u64, name: impl Into<String>, value: f64) {
        self.samples.push(Sample { t_ms, name: name.into(), value });
    }

    /// Adds the standard latency figures of `h` under `prefix`
    /// (`prefix.mean`, `.p50`, `.p90`, `.p95`, `.p99`, `.p99.9`, `.max`, in µs,
    /// and `.clamped`, the count of values above the histogram's hour that
    /// were recorded as an hour) and keeps the histogram itself under
    /// `prefix` — the one place a step's histogram is added.
    pub fn latency(&mut self, prefix: &str, h: &LatencyHistogram) {
        let s: Summary = h.summary();
        for (suffix, v) in [
            ("mean", s.mean_us),
            ("p50", s.p50_us),
            ("p90", s.p90_us),
            ("p95", s.p95_us),
            ("p99", s.p99_us),
            ("p99.9", s.p999_us),
            ("max", s.max_us),
        ] {
            self.figure(format!("{prefix}.{suffix}"), v, Unit::Us);
        }
        // Always written, zero included: a clamped value makes `.max` (and
        // perhaps `.p99.9`) a floor, and the serialised histogram does not
        // keep the count.
        self.figure(format!("{prefix}.clamped"), h.clamped() as f64, Unit::Count);
        self.histograms.push((prefix.to_string(), h.clone()));
    }

    /// The value of the figure named `name`, if present.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.figures.iter().find(|f| f.name == name).map(|f| f.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_text_round_trips() {
        for u in [
            Unit::Us,
            Unit::Ms,
            Unit::S,
            Unit::PerS,
            Unit::PerMin,
            Unit::MBps,
            Unit::Percent,
            Unit::Count,
            Unit::Bytes,
            Unit::Ratio,
        ] {
            assert_eq!(Unit::parse(u.as_str()), Some(u));
        }
        assert_eq!(Unit::parse("furlongs"), None);
    }

    #[test]
    fn latency_adds_named_percentiles_and_keeps_histogram() {
        let mut h = LatencyHistogram::new();
        for ns in 1..=1000u64 {
            h.record_ns(ns * 1000);
        }
        let mut r = StepReport::default();
        r.latency("io.read.lat", &h);
        assert_eq!(r.figures.len(), 8);
        assert_eq!(r.get("io.read.lat.clamped"), Some(0.0));
        assert!((r.get("io.read.lat.p99").unwrap() - 990.0).abs() < 1.0);
        assert_eq!(r.histograms[0].0, "io.read.lat");
        assert_eq!(r.get("io.read.lat.nope"), None);
    }

    #[test]
    fn latency_reports_how_many_values_were_clamped() {
        let mut h = LatencyHistogram::new();
        h.record(std::time::Duration::from_secs(2 * 3600));
        h.record_n_ns(5_000_000_000_000, 2);
        h.record_ns(1_000);
        let mut r = StepReport::default();
        r.latency("lat", &h);
        assert_eq!(r.get("lat.clamped"), Some(3.0));
        let f = r.figures.iter().find(|f| f.name == "lat.clamped").unwrap();
        assert_eq!(f.unit, Unit::Count);
    }
}
