//! Storage sensitivity (issue 28): what faster or slower storage would buy,
//! from a step re-run on a modelled medium with its device times scaled
//! (`--sensitivity 0.5,2`). Each re-run is a step of its own, tagged
//! `params.sensitivity = {scale, of, medium}` (`of`: the index of the step
//! it re-runs); the base step carries the note `sensitivity` with the
//! sentence. Everything here is computed from the store's figures, so the
//! recorded sentence is what [`measure`] gives again.
//!
//! The change is the headline's at each factor against the base step's;
//! the elasticity is `ln(H_f / H_1) / ln(1 / f)`: 1 when the headline
//! follows the device's speed exactly (storage-bound), 0 when storage
//! does not matter. Nothing here runs anything or prints.

use crate::kinds::spec_of;
use crate::model::{RunData, Section, StepData};
use crate::units::{source_of, source_rank};

/// The note name on the base step.
pub const NOTE: &str = "sensitivity";

// The step parameter that tags a sensitivity re-run, and its test: kept
// with the model, which leaves re-runs out of a run's load levels.
pub use crate::model::{is_rerun, PARAM};

/// The headline at one factor.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The time scale (0.5: twice as fast).
    pub factor: f64,
    /// The headline figure at that scale.
    pub value: f64,
    /// value / base − 1.
    pub change: f64,
    /// ln(value / base) / ln(1 / factor); `None` at factor 1 or a zero figure.
    pub elasticity: Option<f64>,
}

/// One step's sensitivity.
#[derive(Clone, Debug, PartialEq)]
pub struct Sensitivity {
    /// The base step's index and label.
    pub step_idx: i64,
    /// Its label (`clients=1`).
    pub label: String,
    /// The headline's metric name (`tps.client`) and what people call it (`TPS`).
    pub metric: String,
    /// What people call the headline.
    pub name: String,
    /// The base step's headline.
    pub base: f64,
    /// One per factor, in the order they ran.
    pub points: Vec<Point>,
    /// The headline is a time (`power.geomean`, in s): it falls when the
    /// device gets faster, and the elasticity is taken of its inverse.
    pub lower_better: bool,
    /// The modelled device's busy share of the base step's time (its
    /// service time per second, all operations, at most 1), from the
    /// daemon's own figures; `None` without them.
    pub device_share: Option<f64>,
}

/// The modelled medium `medium`'s busy share of a step's time: the sum
/// over its operations of `emu.NAME.OP.iops` × `emu.NAME.OP.svc.mean`
/// (µs), at most 1. At one client, whose transactions wait for the device
/// one at a time, it is the device's part of each transaction's time, and
/// the rest (CPU, the round trips to the medium) does not scale with it.
pub fn device_share(s: &StepData, medium: &str) -> Option<f64> {
    let head = format!("emu.{medium}.");
    let mut busy_us = None;
    for (name, (iops, _)) in s.metrics.range(head.clone()..) {
        let Some(op) = name.strip_prefix(&head) else { break };
        let Some(op) = op.strip_suffix(".iops") else { continue };
        let Some((svc, _)) = s.metrics.get(&format!("{head}{op}.svc.mean")) else { continue };
        *busy_us.get_or_insert(0.0) += iops * svc;
    }
    busy_us.map(|us: f64| (us / 1e6).clamp(0.0, 1.0))
}

/// What the headline would be at time scale `factor` if only the
/// device's share `u` of the time scaled (Amdahl): `1 / (1 − u + u·f)`
/// times the base.
pub fn expected_ratio(u: f64, factor: f64) -> f64 {
    1.0 / (1.0 - u + u * factor)
}

/// The scale a step ran at, when it is a sensitivity re-run, and the index
/// of the step it re-runs.
pub fn tag(s: &StepData) -> Option<(f64, i64)> {
    let t = s.params.get(PARAM)?;
    Some((t.get("scale")?.as_f64()?, t.get("of")?.as_i64()?))
}

/// How a factor reads: `twice as fast (×0.5 device time)`.
pub fn factor_words(f: f64) -> String {
    let speed = if (f - 0.5).abs() < 1e-9 {
        "twice as fast".to_string()
    } else if (f - 2.0).abs() < 1e-9 {
        "half as fast".to_string()
    } else if f < 1.0 {
        format!("{} times as fast", trim(1.0 / f))
    } else {
        format!("{} times as slow", trim(f))
    };
    format!("{speed} (×{} device time)", trim(f))
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The headline metric of a step: the kind's first figure, by the
/// report's source ranking (the bare name, the server's, the client's).
fn headline(kind: &str, s: &StepData) -> Option<(String, &'static str)> {
    let f = spec_of(kind).figures.first()?;
    s.metrics
        .keys()
        .filter_map(|n| source_of(f.base, n).map(|src| (source_rank(src), n)))
        .min()
        .map(|(_, n)| (n.clone(), f.label))
}

/// Every base step's sensitivity, from the run as stored.
pub fn measure(run: &RunData) -> Vec<Sensitivity> {
    let mut out = Vec::new();
    for base in &run.steps {
        let reruns: Vec<(&StepData, f64)> = run
            .sensitivity
            .iter()
            .filter_map(|s| tag(s).filter(|(_, of)| *of == base.idx).map(|(f, _)| (s, f)))
            .collect();
        if reruns.is_empty() {
            continue;
        }
        let medium = run
            .sensitivity
            .iter()
            .find_map(|s| tag(s).filter(|(_, of)| *of == base.idx).and(s.params[PARAM]["medium"].as_str()));
        let device_share = medium.and_then(|m| device_share(base, m));
        let Some((metric, name)) = headline(&run.run.kind, base) else { continue };
        let Some(b) = base.metrics.get(&metric).map(|m| m.0).filter(|v| v.is_finite() && *v > 0.0) else {
            continue;
        };
        let lower_better =
            base.metrics.get(&metric).is_some_and(|m| matches!(m.1.as_str(), "s" | "ms" | "us" | "µs"));
        let points = reruns
            .into_iter()
            .filter_map(|(s, factor)| {
                let value = s.metrics.get(&metric)?.0;
                let ratio = if lower_better { b / value } else { value / b };
                let elasticity = (factor != 1.0 && value > 0.0).then(|| ratio.ln() / (1.0 / factor).ln());
                Some(Point { factor, value, change: value / b - 1.0, elasticity })
            })
            .collect();
        out.push(Sensitivity {
            step_idx: base.idx,
            label: base.label.clone(),
            metric,
            name: name.to_string(),
            base: b,
            points,
            lower_better,
            device_share,
        });
    }
    out
}

impl Sensitivity {
    /// "TPS +31 % if this storage were twice as fast (×0.5 device time),
    /// −38 % if half as fast (×2 device time)" with the elasticities.
    pub fn sentence(&self) -> String {
        let parts: Vec<String> = self
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let pct = p.change * 100.0;
                let sign = if pct >= 0.0 { "+" } else { "−" };
                let lead = if i == 0 { "if this storage were" } else { "if" };
                format!("{sign}{:.0} % {lead} {}", pct.abs(), factor_words(p.factor))
            })
            .collect();
        let el: Vec<String> = self
            .points
            .iter()
            .filter_map(|p| p.elasticity.map(|e| format!("{e:.2} at ×{}", trim(p.factor))))
            .collect();
        let mut s = format!("{} {}", self.name, parts.join(", "));
        if !el.is_empty() {
            s.push_str(&format!(
                "; elasticity {} (1: bound by the device, 0: untouched by it)",
                el.join(", ")
            ));
        }
        if let Some(u) = self.device_share.filter(|_| !self.points.is_empty()) {
            let exp: Vec<String> = self
                .points
                .iter()
                .map(|p| {
                    let r = expected_ratio(u, p.factor);
                    let pct = (if self.lower_better { 1.0 / r } else { r } - 1.0) * 100.0;
                    let sign = if pct >= 0.0 { "+" } else { "−" };
                    format!("{sign}{:.0} % at ×{}", pct.abs(), trim(p.factor))
                })
                .collect();
            s.push_str(&format!(
                "; the device was busy {:.0} % of the base step's time: if only its time scaled, {}",
                u * 100.0,
                exp.join(", ")
            ));
        }
        s
    }

    /// The notes the store keeps on the base step.
    pub fn notes(&self) -> [(&'static str, String); 1] {
        [(NOTE, self.sentence())]
    }
}

/// The sensitivities a section's runs recorded, for the report's opening
/// (first run of each configuration): `clients=1: TPS +31 % if …`. Only
/// what was recorded (the note), as the verdicts.
pub(crate) fn section_lines(s: &Section<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for g in &s.groups {
        let Some(run) = g.runs.first() else { continue };
        for step in &run.steps {
            let Some(text) = step.notes.get(NOTE) else { continue };
            let head = if s.groups.len() > 1 { format!("{} ", s.short_label(g)) } else { String::new() };
            out.push(format!("{head}{}: {text}", step.label));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn factors_read_as_speeds() {
        assert_eq!(factor_words(0.5), "twice as fast (×0.5 device time)");
        assert_eq!(factor_words(2.0), "half as fast (×2 device time)");
        assert_eq!(factor_words(0.25), "4 times as fast (×0.25 device time)");
        assert_eq!(factor_words(4.0), "4 times as slow (×4 device time)");
    }

    #[test]
    fn the_devices_share_is_its_service_time_per_second() {
        let mut s = StepData {
            idx: 0,
            label: "clients=1".into(),
            params: Value::Null,
            metrics: Default::default(),
            samples: Default::default(),
            notes: Default::default(),
        };
        assert_eq!(device_share(&s, "m"), None);
        for (name, v) in [
            ("emu.m.flush.iops", 50.0),
            ("emu.m.flush.svc.mean", 16_000.0),
            ("emu.m.write.iops", 100.0),
            ("emu.m.write.svc.mean", 100.0),
            ("emu.m.scale", 1.0),
            ("emu.mm.flush.iops", 1000.0),
            ("emu.mm.flush.svc.mean", 1000.0),
        ] {
            s.metrics.insert(name.into(), (v, String::new()));
        }
        // 50 × 16 ms + 100 × 0.1 ms a second; another medium's figures not.
        assert!((device_share(&s, "m").unwrap() - 0.81).abs() < 1e-9);
        assert!((expected_ratio(0.8, 0.5) - 1.0 / 0.6).abs() < 1e-9);
        assert!((expected_ratio(1.0, 2.0) - 0.5).abs() < 1e-9);
        assert_eq!(expected_ratio(0.0, 0.5), 1.0);
    }

    #[test]
    fn the_sentence_gives_the_change_and_the_elasticity() {
        let s = Sensitivity {
            step_idx: 0,
            label: "clients=1".into(),
            metric: "tps.client".into(),
            name: "TPS".into(),
            base: 100.0,
            points: vec![
                Point {
                    factor: 0.5,
                    value: 131.0,
                    change: 0.31,
                    elasticity: Some((1.31f64).ln() / 2f64.ln()),
                },
                Point {
                    factor: 2.0,
                    value: 62.0,
                    change: -0.38,
                    elasticity: Some((0.62f64).ln() / 0.5f64.ln()),
                },
            ],
            lower_better: false,
            device_share: None,
        };
        assert_eq!(
            s.sentence(),
            "TPS +31 % if this storage were twice as fast (×0.5 device time), −38 % if half as fast (×2 device time); \
             elasticity 0.39 at ×0.5, 0.69 at ×2 (1: bound by the device, 0: untouched by it)"
        );
        let s = Sensitivity { device_share: Some(0.9), ..s };
        assert!(
            s.sentence().ends_with(
                "; the device was busy 90 % of the base step's time: if only its time scaled, +82 % at ×0.5, −47 % at ×2"
            ),
            "{}",
            s.sentence()
        );
        // A time headline falls as the device gets faster.
        let s = Sensitivity { lower_better: true, name: "geomean query time".into(), ..s };
        let p =
            Point { factor: 0.5, value: 6.0, change: -0.4, elasticity: Some((10f64 / 6.0).ln() / 2f64.ln()) };
        let s = Sensitivity { points: vec![p], ..s };
        assert_eq!(
            s.sentence(),
            "geomean query time −40 % if this storage were twice as fast (×0.5 device time); \
             elasticity 0.74 at ×0.5 (1: bound by the device, 0: untouched by it); \
             the device was busy 90 % of the base step's time: if only its time scaled, −45 % at ×0.5"
        );
    }
}
