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

use crate::model::{fmt_num, Group, Report, Section};
use crate::tables::Table;

/// A workload's headline figure and its p99 latency, by kind.
fn figures(kind: &str) -> Option<(&'static str, &'static str, Option<&'static str>)> {
    match kind {
        "tpcc" => Some(("nopm.districts", "NOPM", Some("lat.p99"))),
        "tpcb" => Some(("tps.client", "TPS", Some("lat.p99"))),
        "io" => Some(("io.iops", "IOPS", Some("io.lat.p99"))),
        "backup" => Some(("backup.mb_per_s", "MB/s", None)),
        _ => None,
    }
}

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
    /// The configuration (the cell's axis values, without the tags).
    pub config: String,
    /// The workload's name in the plan.
    pub workload: String,
    /// What ran beside it (names joined by `+`).
    pub with: String,
    /// The step.
    pub step: String,
    /// The headline figure's stored name and what people call it.
    pub metric: &'static str,
    /// What people call it (`NOPM`).
    pub label: &'static str,
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
}

/// Every workload step of a section that ran beside neighbours and alone.
pub fn rows(s: &Section<'_>) -> Vec<Interference> {
    let Some((metric, label, p99)) = figures(s.kind) else { return Vec::new() };
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
        let config = if rest.is_empty() {
            "all".to_string()
        } else {
            rest.values().cloned().collect::<Vec<_>>().join("/")
        };
        for step in s.step_labels() {
            let (a, t) = (alone.stat(&step, metric), g.stat(&step, metric));
            if a.n() == 0 || t.n() == 0 {
                continue;
            }
            let p99 = p99.and_then(|m| {
                let (a, t) = (alone.stat(&step, m), g.stat(&step, m));
                (a.n() > 0 && t.n() > 0).then(|| (a.median(), t.median()))
            });
            let both =
                |suffixes: &[&str]| Some((device(alone, &step, suffixes)?, device(g, &step, suffixes)?));
            let (util, await_ms) = (both(&[".util"]), both(&[".r_await", ".w_await"]));
            out.push(Interference {
                config: config.clone(),
                workload: workload.clone(),
                with: with.clone(),
                step,
                metric,
                label,
                alone: a.median(),
                together: t.median(),
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
                r.config.clone(),
                r.workload.clone(),
                r.step.clone(),
                r.with.clone(),
                r.label.to_string(),
                fmt_num(r.alone),
                fmt_num(r.together),
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

/// What a neighbour did while it ran: its own headline over its run
/// (the first step), e.g. `52.4 MB/s` for an I/O neighbour or a backup.
fn neighbour_rate(
    report: &Report,
    plan: Option<&str>,
    name: &str,
    rest: &BTreeMap<String, String>,
) -> Option<String> {
    let g = report.groups.iter().find(|g| {
        g.plan.as_deref() == plan && tags(g).is_some_and(|(w, x, r)| w == name && x != "alone" && r == *rest)
    })?;
    let run = g.runs.first()?;
    let step = run.steps.first()?;
    let get = |m: &str| step.metrics.get(m).map(|x| x.0);
    let text = match g.kind.as_str() {
        "io" => format!("{} MB/s", fmt_num(get("io.mbps")?)),
        "backup" => format!("{} MB/s", fmt_num(get("backup.mb_per_s")?)),
        "tpcc" => format!("{} NOPM", fmt_num(get("nopm.districts").or(get("nopm.client"))?)),
        "tpcb" => format!("{} TPS", fmt_num(get("tps.client").or(get("tps"))?)),
        _ => return None,
    };
    Some(format!("{name} ran at {text}"))
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
                .map(|(a, t)| format!(", p99 {:.2}× ({} → {} µs)", t / a, fmt_num(a), fmt_num(t)))
                .unwrap_or_default();
            let rest: BTreeMap<String, String> = s
                .groups
                .iter()
                .find_map(|g| tags(g).filter(|(w, x, _)| *w == r.workload && *x == r.with).map(|t| t.2))
                .unwrap_or_default();
            let rates: Vec<String> =
                r.with.split('+').filter_map(|n| neighbour_rate(report, s.plan, n, &rest)).collect();
            let rates =
                if rates.is_empty() { String::new() } else { format!(", while {}", rates.join(" and ")) };
            format!(
                "{} at {} on {}: {} {verb} from {} alone to {} beside {} ({:+.0} %){p99}{rates}.",
                r.workload,
                r.step,
                r.config,
                r.label,
                fmt_num(r.alone),
                fmt_num(r.together),
                r.with,
                change
            )
        })
        .collect()
}
