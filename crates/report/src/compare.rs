//! `compare A B`: every figure the two sides share, step by step (matched by
//! step label), with the ratio B/A and a noise verdict. A side is one run or
//! the repeats of a plan cell (`PLAN:LABEL`); the verdict says "within noise"
//! when the repeats' min–max ranges overlap, and says no spread is known when
//! neither side has repeats. It opens with the headline figures (the kind's
//! main figures, as the report leads with them) and names the settings and
//! environment keys in which the two sides differ, so a ratio between runs
//! of different sizes or durations is never shown without a word. A
//! [`Filter`] keeps the headline figures only, or the figures whose names
//! match a pattern. A side compared with itself is refused.

use std::fmt::Write as _;

use serde::Serialize;
use storbench_results::Store;

use crate::model::{emulation_note, flatten, select, RunData, Stat};
use crate::table::Table;
use crate::ReportError;

/// One side of a comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    /// The selector as given.
    pub name: String,
    /// Kind of its runs.
    pub kind: String,
    /// Its runs (repeats), oldest first.
    pub runs: Vec<RunData>,
}

impl Side {
    /// Resolves a selector: a run id, `PLAN:LABEL` (the repeats of one cell
    /// of a plan, label = the cell's axis values), a plan whose runs are all
    /// one cell, or a run by uuid prefix (a plan's name first).
    pub fn load(store: &Store, selector: &str) -> Result<Side, ReportError> {
        let rows = match selector.split_once(':') {
            // No uuid holds a colon: PLAN:LABEL.
            Some((plan, label)) => {
                let runs: Vec<_> = crate::model::plan_runs(store, plan)?
                    .into_iter()
                    .filter(|r| {
                        r.label == label || r.cell.as_deref().and_then(|c| c.split('#').next()) == Some(label)
                    })
                    .collect();
                if runs.is_empty() {
                    return Err(ReportError::NoSuchSelection(selector.to_string()));
                }
                runs
            }
            // A plan by name before a uuid prefix, as `report` reads it.
            None => select(store, selector)?,
        };
        if rows.len() > 1 {
            let mut labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
            labels.sort();
            labels.dedup();
            if labels.len() > 1 {
                return Err(ReportError::Incomparable(format!(
                    "'{selector}' holds several cells ({}): name one as {selector}:LABEL",
                    labels.join(", ")
                )));
            }
        }
        let mut kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
        kinds.sort();
        kinds.dedup();
        if kinds.len() > 1 {
            return Err(ReportError::Incomparable(format!(
                "'{selector}' holds runs of several kinds ({}): name one run or PLAN:LABEL",
                kinds.join(", ")
            )));
        }
        let kind = kinds[0].to_string();
        let mut rows = rows;
        rows.sort_by_key(|r| r.id);
        let runs = rows.into_iter().map(|r| RunData::load(store, r)).collect::<Result<Vec<_>, _>>()?;
        Ok(Side { name: selector.to_string(), kind, runs })
    }

    fn stat(&self, step: &str, metric: &str) -> Stat {
        Stat::over(&self.runs, step, metric)
    }
}

/// Whether a difference is beyond the spread of the repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Noise {
    /// The min–max ranges overlap: the difference is within the noise.
    WithinNoise,
    /// The ranges do not overlap.
    Beyond,
    /// Neither side has repeats: no spread is known.
    Unknown,
}

impl Noise {
    /// Judges `a` against `b`.
    pub fn judge(a: &Stat, b: &Stat) -> Noise {
        if a.n() < 2 && b.n() < 2 {
            Noise::Unknown
        } else if a.min() <= b.max() && b.min() <= a.max() {
            Noise::WithinNoise
        } else {
            Noise::Beyond
        }
    }

    /// The verdict as shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Noise::WithinNoise => "within noise",
            Noise::Beyond => "beyond noise",
            Noise::Unknown => "no spread known",
        }
    }
}

/// One shared figure of one step.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    /// Step label.
    pub step: String,
    /// Metric name.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Side A's values.
    pub a: Stat,
    /// Side B's values.
    pub b: Stat,
    /// median(B) / median(A), when A's median is not zero.
    pub ratio: Option<f64>,
    /// The verdict.
    pub noise: Noise,
}

/// Two sides, side by side.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Side A (the baseline).
    pub a: Side,
    /// Side B.
    pub b: Side,
    /// Every shared figure of every shared step.
    pub rows: Vec<CompareRow>,
}

impl Comparison {
    /// Compares `a` with `b`. Different kinds share no figures: an error.
    pub fn new(a: Side, b: Side) -> Result<Comparison, ReportError> {
        if a.kind != b.kind {
            return Err(ReportError::Incomparable(format!(
                "'{}' is a {} run and '{}' a {} run: runs of different kinds share no figures to compare",
                a.name, a.kind, b.name, b.kind
            )));
        }
        let same: Vec<String> = a
            .runs
            .iter()
            .filter(|r| b.runs.iter().any(|x| x.run.id == r.run.id))
            .map(|r| format!("#{}", r.run.id))
            .collect();
        if !same.is_empty() {
            return Err(ReportError::Incomparable(format!(
                "'{}' and '{}' both hold run {}: a run compared with itself differs in nothing; give two different runs or cells",
                a.name,
                b.name,
                same.join(", ")
            )));
        }
        let mut steps: Vec<String> = Vec::new();
        for s in a.runs.iter().flat_map(|r| &r.steps) {
            if !steps.contains(&s.label) && b.runs.iter().any(|r| r.step(&s.label).is_some()) {
                steps.push(s.label.clone());
            }
        }
        let mut rows = Vec::new();
        for step in &steps {
            let mut names: Vec<(String, String)> = a
                .runs
                .iter()
                .filter_map(|r| r.step(step))
                .flat_map(|s| s.metrics.iter().map(|(k, v)| (k.clone(), v.1.clone())))
                .collect();
            names.sort();
            names.dedup_by(|x, y| x.0 == y.0);
            for (metric, unit) in names {
                let (sa, sb) = (a.stat(step, &metric), b.stat(step, &metric));
                if sa.n() == 0 || sb.n() == 0 {
                    continue;
                }
                let ma = sa.median();
                let ratio = (ma != 0.0).then(|| sb.median() / ma);
                let noise = Noise::judge(&sa, &sb);
                rows.push(CompareRow { step: step.clone(), metric, unit, a: sa, b: sb, ratio, noise });
            }
        }
        if rows.is_empty() {
            return Err(ReportError::Incomparable(format!(
                "'{}' and '{}' share no step with a common figure (steps are matched by label)",
                a.name, b.name
            )));
        }
        Ok(Comparison { a, b, rows })
    }

    /// Keeps the rows `filter` selects. A filter that keeps nothing is bad
    /// input (it names the figures there are).
    pub fn retain(&mut self, filter: &Filter) -> Result<(), ReportError> {
        if filter.is_empty() {
            return Ok(());
        }
        let heads = self.headline_metrics();
        let before: Vec<String> = {
            let mut v: Vec<String> = self.rows.iter().map(|r| r.metric.clone()).collect();
            v.sort();
            v.dedup();
            v
        };
        self.rows.retain(|r| {
            (!filter.headline || heads.iter().any(|h| h.0 == r.metric))
                && (filter.metrics.is_empty() || filter.metrics.iter().any(|p| metric_matches(p, &r.metric)))
        });
        if self.rows.is_empty() {
            let what = match (filter.headline, filter.metrics.is_empty()) {
                (true, true) => "--headline".to_string(),
                (false, _) => format!("--metric {}", filter.metrics.join(",")),
                (true, false) => format!("--headline with --metric {}", filter.metrics.join(",")),
            };
            let mut shown: Vec<&str> = before.iter().map(String::as_str).take(12).collect();
            if before.len() > 12 {
                shown.push("…");
            }
            return Err(ReportError::Incomparable(format!(
                "{what} keeps none of the figures the two sides share ({}); a pattern is part of a name, or a glob with *",
                shown.join(", ")
            )));
        }
        Ok(())
    }

    /// The headline metric of each main figure of the kind among the rows.
    fn headline_metrics(&self) -> Vec<(String, &'static str)> {
        let mut names: Vec<String> = self.rows.iter().map(|r| r.metric.clone()).collect();
        names.sort();
        names.dedup();
        crate::kinds::headline_metrics(&self.a.kind, &names)
    }

    /// What the comparison opens with: each headline figure, step by step,
    /// A → B with the ratio and the verdict.
    pub fn headline(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (metric, label) in self.headline_metrics() {
            let rows: Vec<&CompareRow> = self.rows.iter().filter(|r| r.metric == metric).collect();
            if rows.is_empty() {
                continue;
            }
            let clauses: Vec<String> = rows
                .iter()
                .take(8)
                .map(|r| {
                    let (a, b) = (r.a.median(), r.b.median());
                    let ratio =
                        r.ratio.map(|x| format!("{}×", crate::units::ratio(x))).unwrap_or_else(|| "–".into());
                    let verdict = match r.noise {
                        Noise::Unknown => String::new(),
                        n => format!(", {}", n.as_str()),
                    };
                    format!(
                        "{} {} → {} ({ratio}{verdict})",
                        r.step,
                        crate::units::with_unit(a, &r.metric, &r.unit),
                        crate::units::with_unit(b, &r.metric, &r.unit)
                    )
                })
                .collect();
            let more =
                if rows.len() > 8 { format!("; {} more steps below", rows.len() - 8) } else { String::new() };
            out.push(format!("{label}: {}{more}.", clauses.join("; ")));
        }
        out
    }

    /// The settings (`config`) and environment keys whose values differ
    /// between the sides: `duration: A 12s, B 3s`. Keys whose values differ
    /// among one side's repeats show each.
    pub fn differences(&self) -> (Vec<String>, Vec<String>) {
        let side_values = |s: &Side, env: bool| -> Vec<std::collections::BTreeMap<String, String>> {
            s.runs
                .iter()
                .map(|r| {
                    let mut v = Vec::new();
                    flatten("", if env { &r.run.env } else { &r.run.config }, &mut v);
                    v.into_iter().collect()
                })
                .collect()
        };
        let differ = |env: bool| -> Vec<String> {
            let (va, vb) = (side_values(&self.a, env), side_values(&self.b, env));
            let mut keys: Vec<&String> = va.iter().chain(&vb).flat_map(|m| m.keys()).collect();
            keys.sort();
            keys.dedup();
            let vals = |maps: &[std::collections::BTreeMap<String, String>], k: &str| {
                let mut v: Vec<String> =
                    maps.iter().map(|m| m.get(k).cloned().unwrap_or_else(|| "(none)".into())).collect();
                v.dedup();
                v.join(" | ")
            };
            keys.into_iter()
                .filter_map(|k| {
                    let (x, y) = (vals(&va, k), vals(&vb, k));
                    (x != y).then(|| format!("{k}: A {x}, B {y}"))
                })
                .collect()
        };
        (differ(false), differ(true))
    }

    fn table(&self) -> Table {
        let header =
            ["step", "metric", "unit", "A", "B", "B/A", "verdict"].iter().map(|s| s.to_string()).collect();
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.step.clone(),
                    r.metric.clone(),
                    crate::units::human_unit(&r.metric, &r.unit),
                    r.a.display(),
                    r.b.display(),
                    r.ratio.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into()),
                    r.noise.as_str().to_string(),
                ]
            })
            .collect();
        Table {
            title: format!(
                "A = {} ({}), B = {} ({})",
                self.a.name,
                self.describe(&self.a),
                self.b.name,
                self.describe(&self.b)
            ),
            header,
            rows,
            notes: Vec::new(),
        }
    }

    fn describe(&self, s: &Side) -> String {
        match s.runs.len() {
            1 => format!("{} run #{}", s.kind, s.runs[0].run.id),
            n => format!("{} runs, {n} repeats", s.kind),
        }
    }

    /// Lines above the table: the headline, then what differs between the
    /// sides besides what is measured.
    fn preamble(&self) -> Vec<String> {
        let mut out = Vec::new();
        let head = self.headline();
        if !head.is_empty() {
            out.push(format!("Headline, B against A — {}", head.join(" ")));
        }
        let (config, env) = self.differences();
        if config.is_empty() {
            out.push("Settings: the same on both sides.".into());
        } else {
            out.push(format!(
                "Settings differ ({}): {}. Ratios below compare runs made with different settings.",
                config.len(),
                config.join("; ")
            ));
        }
        if !env.is_empty() {
            let shown: Vec<&str> = env.iter().map(String::as_str).take(8).collect();
            let more = if env.len() > 8 {
                format!("; and {} more (storbench results show RUN)", env.len() - 8)
            } else {
                String::new()
            };
            out.push(format!("Environment differs ({}): {}{more}.", env.len(), shown.join("; ")));
        }
        out
    }

    fn notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        if self.a.runs.len() < 2 && self.b.runs.len() < 2 {
            n.push("Both sides are single runs: no spread is known, so no difference can be called noise or not; repeat the runs (a plan with repeats) to judge it.".to_string());
        } else {
            n.push(
                "Values are medians (min–max over repeats); \"within noise\" means the two ranges overlap."
                    .to_string(),
            );
        }
        let only = |x: &Side, y: &Side| {
            let mut v: Vec<&str> = x
                .runs
                .iter()
                .flat_map(|r| &r.steps)
                .filter(|s| y.runs.iter().all(|r| r.step(&s.label).is_none()))
                .map(|s| s.label.as_str())
                .collect();
            v.dedup();
            v.join(", ")
        };
        for (side, x, y) in [("A", &self.a, &self.b), ("B", &self.b, &self.a)] {
            let o = only(x, y);
            if !o.is_empty() {
                n.push(format!("Steps only in {side} (not compared): {o}."));
            }
        }
        if let Some(e) = emulation_note(self.a.runs.iter().chain(&self.b.runs)) {
            n.push(e);
        }
        let beyond = self.rows.iter().filter(|r| r.noise == Noise::Beyond).count();
        let within = self.rows.iter().filter(|r| r.noise == Noise::WithinNoise).count();
        n.push(format!(
            "{} figures compared: {beyond} beyond noise, {within} within noise{}.",
            self.rows.len(),
            if self.rows.len() > 20 {
                " (--headline: the main figures alone; --metric PATTERN: figures by name)"
            } else {
                ""
            }
        ));
        n
    }

    /// The comparison for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for l in self.preamble() {
            let _ = writeln!(out, "{l}");
        }
        out.push('\n');
        out.push_str(&self.table().to_text());
        for l in self.notes() {
            let _ = writeln!(out, "{l}");
        }
        out
    }

    /// The comparison as Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        for l in self.preamble() {
            let _ = writeln!(out, "{l}\n");
        }
        out.push_str(&self.table().to_markdown());
        for l in self.notes() {
            let _ = writeln!(out, "> {l}\n");
        }
        out
    }

    /// The comparison as JSON: sides (names, kinds, run ids) and rows.
    pub fn to_json(&self) -> serde_json::Value {
        let side = |s: &Side| {
            serde_json::json!({
                "name": s.name,
                "kind": s.kind,
                "runs": s.runs.iter().map(|r| r.run.id).collect::<Vec<_>>(),
            })
        };
        let (config, env) = self.differences();
        serde_json::json!({
            "a": side(&self.a),
            "b": side(&self.b),
            "headline": self.headline(),
            "settings_differ": config,
            "environment_differs": env,
            "rows": self.rows.iter().map(|r| serde_json::json!({
                "step": r.step,
                "metric": r.metric,
                "unit": r.unit,
                "a": {"median": r.a.median(), "min": r.a.min(), "max": r.a.max(), "n": r.a.n()},
                "b": {"median": r.b.median(), "min": r.b.min(), "max": r.b.max(), "n": r.b.n()},
                "ratio": r.ratio,
                "verdict": r.noise,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Which rows of a comparison to keep.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Patterns of metric names (any matching keeps a row): a part of the
    /// name, or a glob where `*` stands for any characters.
    pub metrics: Vec<String>,
    /// Keep only the kind's headline figures.
    pub headline: bool,
}

impl Filter {
    fn is_empty(&self) -> bool {
        self.metrics.is_empty() && !self.headline
    }
}

/// Whether metric `name` matches `pattern`: a glob when it holds `*` (the
/// whole name must match), else a part of the name.
pub fn metric_matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return name.contains(pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_verdicts() {
        let s = |v: &[f64]| Stat { values: v.to_vec() };
        assert_eq!(Noise::judge(&s(&[10.0]), &s(&[12.0])), Noise::Unknown);
        assert_eq!(Noise::judge(&s(&[10.0, 12.0]), &s(&[11.0, 13.0])), Noise::WithinNoise);
        assert_eq!(Noise::judge(&s(&[10.0, 12.0]), &s(&[13.0, 14.0])), Noise::Beyond);
        assert_eq!(Noise::judge(&s(&[10.0, 12.0]), &s(&[11.0])), Noise::WithinNoise);
        assert_eq!(Noise::judge(&s(&[10.0, 12.0]), &s(&[20.0])), Noise::Beyond);
    }

    #[test]
    fn metric_patterns_are_parts_or_globs() {
        assert!(metric_matches("p99", "lat.p99.9"));
        assert!(metric_matches("lat.*", "lat.p99"));
        assert!(!metric_matches("lat.*", "io.lat.p99"));
        assert!(metric_matches("*.p99", "io.lat.p99"));
        assert!(!metric_matches("*.p99", "io.lat.p99.9"));
        assert!(metric_matches("dev.*.w_await", "dev.loop0.w_await"));
        assert!(!metric_matches("dev.*.w_await", "dev.loop0.r_await"));
        assert!(metric_matches("*", "tps"));
    }
}
