//! Interference: what a noisy neighbour did to a workload. A plan's
//! `together` group runs workloads side by side in one cell, and with
//! `alone = true` each of them also on its own; every such run carries
//! `axes.workload` (which one it is) and `axes.with` (`alone`, or the
//! neighbours' names joined by `+`). Here each workload's steps beside its
//! neighbours are set against the same workload alone in the same
//! configuration: the ratio together/alone of its headline figure (NOPM,
//! TPS, IOPS, MB/s) and of its p99 latency. The S4 sentence: "NOPM fell
//! from X to Y (−Z %) while a backup ran at W MB/s".

use std::collections::BTreeMap;

use serde_json::Value;

use crate::model::{Group, Report, Section};
use crate::table::Table;
use crate::units::fmt_num;
use crate::units::with_unit;

/// The neighbour tags and the other axes of a group's first run.
fn tags(g: &Group) -> Option<(String, String, BTreeMap<String, String>)> {
    let axes = g.runs.first()?.run.config.get("axes")?.as_object()?;
    let text = |k: &str| axes.get(k).and_then(Value::as_str).map(str::to_string);
    let (workload, with) = (text("workload")?, text("with")?);
    let rest = axes
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "workload" | "with"))
        .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
        .collect();
    Some((workload, with, rest))
}

/// One step of one workload, beside its neighbours and alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Interference {
    /// The configuration: the cell's axis values, without the tags.
    pub axes: BTreeMap<String, String>,
    /// The workload's name in the plan.
    pub workload: String,
    /// What ran beside it (names joined by `+`).
    pub with: String,
    /// The step.
    pub step: String,
    /// The headline figure's stored name (`nopm.districts`), as the
    /// section's tables lead with it.
    pub metric: String,
    /// What people call it (`NOPM`).
    pub label: &'static str,
    /// Its unit as stored (`per_min`).
    pub unit: String,
    /// Median over repeats, alone.
    pub alone: f64,
    /// Median over repeats, beside the neighbours.
    pub together: f64,
    /// p99 latency (µs) alone and together, where the kind has one.
    pub p99: Option<(f64, f64)>,
    /// The busiest watched device's utilisation (%) alone and together.
    pub util: Option<(f64, f64)>,
    /// The slowest watched device's average await (ms, reads or writes)
    /// alone and together.
    pub await_ms: Option<(f64, f64)>,
}

/// Over a group's repeats, the median of each run's largest `dev.*`
/// figure ending in one of `suffixes` at `step` (the busiest device).
fn device(g: &Group, step: &str, suffixes: &[&str]) -> Option<f64> {
    let mut per_run: Vec<f64> = g
        .runs
        .iter()
        .filter_map(|r| {
            r.step(step)?
                .metrics
                .iter()
                .filter(|(k, _)| k.starts_with("dev.") && suffixes.iter().any(|x| k.ends_with(x)))
                .map(|(_, v)| v.0)
                .filter(|v| v.is_finite())
                .reduce(f64::max)
        })
        .collect();
    per_run.sort_by(f64::total_cmp);
    let n = per_run.len();
    (n > 0).then(|| if n % 2 == 1 { per_run[n / 2] } else { (per_run[n / 2 - 1] + per_run[n / 2]) / 2.0 })
}

impl Interference {
    /// together ÷ alone of the headline figure.
    pub fn ratio(&self) -> f64 {
        self.together / self.alone
    }

    /// The configuration in a word: the axis values (`40/nvme`), or `all`.
    pub fn config(&self) -> String {
        if self.axes.is_empty() {
            "all".to_string()
        } else {
            self.axes.values().cloned().collect::<Vec<_>>().join("/")
        }
    }
}

/// Every workload step of a section that ran beside neighbours and alone.
pub fn rows(s: &Section<'_>) -> Vec<Interference> {
    // The section's own headline (what its tables and findings lead with)
    // and its latency figures' p99.
    let Some(head) = s.headline_figures().into_iter().next() else { return Vec::new() };
    let p99 = format!("{}.p99", s.spec().latency_prefix);
    let mut out = Vec::new();
    for g in &s.groups {
        let Some((workload, with, rest)) = tags(g) else { continue };
        if with == "alone" {
            continue;
        }
        let alone = s
            .groups
            .iter()
            .find(|a| tags(a).is_some_and(|(w, x, r)| w == workload && x == "alone" && r == rest));
        let Some(alone) = alone else { continue };
        for step in s.step_labels() {
            let both = |m: &str| {
                let (a, t) = (alone.stat(&step, m), g.stat(&step, m));
                (a.n() > 0 && t.n() > 0).then(|| (a.median(), t.median()))
            };
            let Some((a, t)) = both(&head.metric) else { continue };
            let p99 = both(&p99);
            let both =
                |suffixes: &[&str]| Some((device(alone, &step, suffixes)?, device(g, &step, suffixes)?));
            let (util, await_ms) = (both(&[".util"]), both(&[".r_await", ".w_await"]));
            out.push(Interference {
                axes: rest.clone(),
                workload: workload.clone(),
                with: with.clone(),
                step,
                metric: head.metric.clone(),
                label: head.label,
                unit: g.unit(&head.metric).unwrap_or_default(),
                alone: a,
                together: t,
                p99,
                util,
                await_ms,
            });
        }
    }
    out
}

fn pair(v: Option<(f64, f64)>) -> String {
    v.map(|(a, t)| format!("{} → {}", fmt_num(a), fmt_num(t))).unwrap_or_else(|| "–".into())
}

/// The interference table of a section, if it has such runs.
pub(crate) fn table(s: &Section<'_>) -> Option<Table> {
    let rows = rows(s);
    if rows.is_empty() {
        return None;
    }
    let header = ["configuration", "workload", "step", "beside", "figure", "alone", "together", "ratio"]
        .into_iter()
        .chain(["p99 alone µs", "p99 together µs", "p99 ratio", "dev util % alone → together"])
        .chain(["dev await ms alone → together"])
        .map(String::from)
        .collect();
    let body = rows
        .iter()
        .map(|r| {
            let (pa, pt, pr) = match r.p99 {
                Some((a, t)) => (fmt_num(a), fmt_num(t), format!("{:.2}×", t / a)),
                None => ("–".into(), "–".into(), "–".into()),
            };
            vec![
                r.config(),
                r.workload.clone(),
                r.step.clone(),
                r.with.clone(),
                r.label.to_string(),
                with_unit(r.alone, &r.metric, &r.unit),
                with_unit(r.together, &r.metric, &r.unit),
                format!("{:.2}×", r.ratio()),
                pa,
                pt,
                pr,
                pair(r.util),
                pair(r.await_ms),
            ]
        })
        .collect();
    Some(Table {
        title: format!("{} — interference: beside its neighbours vs alone", s.title()),
        header,
        rows: body,
        notes: vec!["Medians over repeats; each pair from the same configuration and step.".into()],
    })
}

/// What a neighbour did while it ran: the headline figure of its own
/// section over its first step (`40.0 MB/s` for a 64 KiB writer is its
/// IOPS × block size; a backup's MB/s), as its tables show it.
fn neighbour_rate(
    report: &Report,
    plan: Option<&str>,
    name: &str,
    axes: &BTreeMap<String, String>,
) -> Option<String> {
    let beside = |g: &Group| tags(g).is_some_and(|(w, with, r)| w == name && with != "alone" && r == *axes);
    let section =
        report.sections().into_iter().find(|x| x.plan == plan && x.groups.iter().any(|g| beside(g)))?;
    let g = section.groups.iter().find(|g| beside(g))?;
    let step = g.runs.first()?.steps.first()?;
    // An I/O neighbour is told by its bandwidth, the rate it was bounded to.
    let metric = if section.kind == "io" {
        "io.mbps".to_string()
    } else {
        section.headline_figures().into_iter().next()?.metric
    };
    let (v, unit) = step.metrics.get(&metric)?;
    Some(format!("{name} ran at {}", with_unit(*v, &metric, unit)))
}

/// One sentence per workload step beside neighbours: "tpcc at users=8 on
/// nvme: NOPM fell from 9,000 alone to 6,000 beside seqw (−33 %), p99
/// 1.4× (2,100 → 2,900 µs), while seqw ran at 50 MB/s."
pub(crate) fn sentences(report: &Report, s: &Section<'_>) -> Vec<String> {
    rows(s)
        .into_iter()
        .map(|r| {
            let change = (r.ratio() - 1.0) * 100.0;
            let verb = if change < 0.0 { "fell" } else { "rose" };
            let p99 = r
                .p99
                .map(|(a, t)| {
                    format!(
                        ", p99 {:.2}× ({} → {})",
                        t / a,
                        with_unit(a, "lat.p99", "us"),
                        with_unit(t, "lat.p99", "us")
                    )
                })
                .unwrap_or_default();
            let rates: Vec<String> =
                r.with.split('+').filter_map(|n| neighbour_rate(report, s.plan, n, &r.axes)).collect();
            let rates =
                if rates.is_empty() { String::new() } else { format!(", while {}", rates.join(" and ")) };
            format!(
                "{} at {} on {}: {} {verb} from {} alone to {} beside {} ({:+.0} %){p99}{rates}.",
                r.workload,
                r.step,
                r.config(),
                r.label,
                with_unit(r.alone, &r.metric, &r.unit),
                with_unit(r.together, &r.metric, &r.unit),
                r.with,
                change
            )
        })
        .collect()
}
