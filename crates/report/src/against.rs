//! A plan's runs against a study's published figures (`storbench report
//! PLAN --against PLAN.published.toml`): paper | here | ratio per published
//! cell, and the shape checks a study's lesson rests on — the gain from one
//! step to another (1 → 10 clients), the ordering of an axis's values at a
//! step (the media at 10 clients), the ratio of two cells (NVMe over SATA),
//! a cell's value within a factor — each with a verdict.
//!
//! The published file is data a user can write for their own reference
//! results:
//!
//! ```toml
//! plan = "s2-pgbench-media"          # the plan whose runs it is read against
//! source = "S2, results table"       # where the figures come from
//! figure = "tps.client"              # the figure and unit of every cell unless it names its own
//! unit = "per_s"
//!
//! [[cell]]
//! axes = { target = "model-hdd" }    # the plan's axes that pick the runs (repeats: their median)
//! step = "clients=1"                 # the step's label
//! value = 45
//! page = "table 1"                   # optional: where in the source
//!
//! [[check]]
//! kind = "gain"                      # here's gain from `from` to `to` within a factor of the paper's
//! axes = { target = "model-hdd" }
//! from = "clients=1"
//! to = "clients=10"
//! within = 1.5
//!
//! [[check]]
//! kind = "order"                     # the axis's values ordered by the figure at `step`, as in the paper
//! axis = "target"
//! step = "clients=10"
//!
//! [[check]]
//! kind = "ratio"                     # of / over at `step`, within a factor of the paper's
//! of = { target = "nvme" }
//! over = { target = "sata-ssd" }
//! step = "users=21"
//!
//! [[check]]
//! kind = "value"                     # here within a factor of the paper
//! # any check: figure = "cpu.iowait"  # read the cells of this figure where several share a step
//! axes = { target = "model-hdd" }
//! step = "clients=1"
//! within = 2
//! ```
//!
//! Every check reads the paper's side from the file's cells and here's
//! from the runs. An axis the plan's runs do not have, an axis value or a
//! step label of a load level none of them ran (`users=8` where the runs
//! have `clients=N`), a figure none recorded, or a unit other than the one
//! recorded is bad input, named; a cell the plan has not run yet in full
//! (a quick form's missing step, `clients=100`) is "not run" and its checks
//! "no data".

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use storbench_metrics::units::format_figure;
use storbench_results::Status;

use crate::model::{Report, RunData, Stat};
use crate::table::Table;
use crate::ReportError;

/// A published file, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// The file it came from (for errors; set by [`parse`]).
    #[serde(skip)]
    pub file: String,
    /// The plan whose runs it is read against.
    pub plan: String,
    /// Where the figures come from.
    #[serde(default)]
    pub source: String,
    /// The figure of every cell that names none.
    #[serde(default)]
    pub figure: Option<String>,
    /// Its unit (as the store writes units: `per_s`, `per_min`, `ms`, ...).
    #[serde(default)]
    pub unit: Option<String>,
    /// The published cells.
    #[serde(default, rename = "cell")]
    pub cells: Vec<PubCell>,
    /// The shape checks.
    #[serde(default, rename = "check")]
    pub checks: Vec<Check>,
}

/// One published figure.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PubCell {
    /// The plan's axes (name → value) that pick its runs.
    #[serde(default)]
    pub axes: BTreeMap<String, String>,
    /// The step's label.
    pub step: String,
    /// The published value.
    pub value: f64,
    /// The figure, when not the file's.
    #[serde(default)]
    pub figure: Option<String>,
    /// Its unit, when not the file's.
    #[serde(default)]
    pub unit: Option<String>,
    /// Where in the source.
    #[serde(default)]
    pub page: Option<String>,
}

/// A shape check (see the module's notes).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// `gain`, `order`, `ratio` or `value`.
    pub kind: String,
    /// A name for the table (default: made from the check).
    #[serde(default)]
    pub name: Option<String>,
    /// The cell's axes (`gain`, `value`; fixed axes for `order`).
    #[serde(default)]
    pub axes: BTreeMap<String, String>,
    /// The step (`order`, `ratio`, `value`).
    #[serde(default)]
    pub step: Option<String>,
    /// `gain`: from this step...
    #[serde(default)]
    pub from: Option<String>,
    /// ... to this one.
    #[serde(default)]
    pub to: Option<String>,
    /// `order`: the axis whose values are ordered.
    #[serde(default)]
    pub axis: Option<String>,
    /// `ratio`: the numerator's axes...
    #[serde(default)]
    pub of: BTreeMap<String, String>,
    /// ... and the denominator's.
    #[serde(default)]
    pub over: BTreeMap<String, String>,
    /// The figure of the cells it reads, where cells of several figures
    /// share an axis value and step (TPM and iowait at one step); default:
    /// the first cell there, whatever its figure.
    #[serde(default)]
    pub figure: Option<String>,
    /// The factor here may differ from the paper by (default 1.5; `value` 2).
    #[serde(default)]
    pub within: Option<f64>,
}

/// Units a published cell may name (as the store writes them).
const UNITS: &[&str] = &["us", "ms", "s", "per_s", "per_min", "MB/s", "%", "count", "bytes", "ratio"];

/// One published cell read against the runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CellRow {
    /// `target=model-hdd clients=1`.
    pub label: String,
    /// The figure.
    pub figure: String,
    /// The paper's value.
    pub paper: f64,
    /// Here: the median over the matching runs (None: not run yet).
    pub here: Option<f64>,
    /// Runs the median is over.
    pub runs: usize,
}

impl CellRow {
    /// here ÷ paper.
    pub fn ratio(&self) -> Option<f64> {
        self.here.filter(|_| self.paper != 0.0).map(|h| h / self.paper)
    }
}

/// A check's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Here keeps the paper's shape.
    Pass,
    /// It does not.
    Fail,
    /// A cell it needs has not run (or the paper's side is missing).
    NoData,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::NoData => "no data",
        }
    }
}

/// One check read against the runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckRow {
    /// What it checks.
    pub name: String,
    /// The paper's side, in words (`×3.0`, `a > b > c`).
    pub paper: String,
    /// Here's side.
    pub here: String,
    /// The outcome.
    pub verdict: Verdict,
}

/// The result: the cells and the checks.
#[derive(Clone, Debug)]
pub struct Against {
    /// The published file's plan.
    pub plan: String,
    /// Its source.
    pub source: String,
    /// Per cell.
    pub cells: Vec<CellRow>,
    /// Per check.
    pub checks: Vec<CheckRow>,
}

/// Parses a published file (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<Published, ReportError> {
    let mut p: Published = toml::from_str(text)
        .map_err(|e| ReportError::Published(format!("{file}: {}", e.message().trim())))?;
    p.file = file.to_string();
    Ok(p)
}

/// What the plan's runs hold, for checking a published file against.
struct Known<'a> {
    runs: Vec<&'a RunData>,
    axes: BTreeMap<String, BTreeSet<String>>,
    steps: BTreeSet<String>,
    units: BTreeMap<String, String>,
    /// Some run of the plan did not complete (interrupted, failed): a
    /// step or a figure none recorded may be one it never reached, read
    /// as "not run", not as a typo in the published file.
    incomplete: bool,
}

impl<'a> Known<'a> {
    fn of(report: &'a Report, plan: &str) -> Known<'a> {
        let runs: Vec<&RunData> = report.runs().filter(|r| r.run.plan.as_deref() == Some(plan)).collect();
        let mut axes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut steps = BTreeSet::new();
        let mut units = BTreeMap::new();
        for r in &runs {
            if let Some(a) = r.run.config.get("axes").and_then(|a| a.as_object()) {
                for (k, v) in a {
                    let v = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                    axes.entry(k.clone()).or_default().insert(v);
                }
            }
            for s in &r.steps {
                steps.insert(s.label.clone());
                for (name, (_, unit)) in &s.metrics {
                    units.entry(name.clone()).or_insert_with(|| unit.clone());
                }
            }
        }
        let incomplete = runs.iter().any(|r| r.run.status != Status::Complete);
        Known { runs, axes, steps, units, incomplete }
    }

    fn check_axes(&self, what: &str, axes: &BTreeMap<String, String>) -> Result<(), ReportError> {
        for (k, v) in axes {
            let Some(values) = self.axes.get(k) else {
                return Err(bad(format!(
                    "{what}: '{k}' is not an axis of the plan's runs (axes: {})",
                    list(self.axes.keys())
                )));
            };
            if !values.contains(v) {
                return Err(bad(format!(
                    "{what}: {k} = '{v}' is not a value the plan ran ({k}: {})",
                    list(values)
                )));
            }
        }
        Ok(())
    }

    /// A step label the runs recorded, or one of the same load level
    /// (`clients=100` beside `clients=1`: a quick form's missing step,
    /// "not run").
    fn check_step(&self, what: &str, step: &str) -> Result<(), ReportError> {
        let level = |l: &str| l.split_once('=').map(|(k, _)| k.to_string());
        if self.incomplete
            || self.steps.contains(step)
            || level(step).is_some_and(|k| self.steps.iter().any(|s| level(s) == Some(k.clone())))
        {
            return Ok(());
        }
        Err(bad(format!("{what}: no step '{step}' in the plan's runs (steps: {})", list(&self.steps))))
    }

    /// The median of `figure` at `step` over the runs whose axes include
    /// `axes`, and how many runs it is over.
    fn value(&self, axes: &BTreeMap<String, String>, step: &str, figure: &str) -> (Option<f64>, usize) {
        let values: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| {
                axes.iter().all(|(k, v)| {
                    r.run
                        .config
                        .get("axes")
                        .and_then(|a| a.get(k))
                        .is_some_and(|x| x.as_str() == Some(v.as_str()))
                })
            })
            .filter_map(|r| r.steps.iter().find(|s| s.label == step)?.metrics.get(figure).map(|m| m.0))
            .collect();
        let s = Stat { values };
        ((s.n() > 0).then(|| s.median()), s.n())
    }
}

fn bad(msg: String) -> ReportError {
    ReportError::Published(msg)
}

fn list<'s>(xs: impl IntoIterator<Item = &'s String>) -> String {
    let v: Vec<&str> = xs.into_iter().map(String::as_str).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn label(axes: &BTreeMap<String, String>, step: &str) -> String {
    let mut parts: Vec<String> = axes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.push(step.to_string());
    parts.join(" ")
}

/// Reads `p` against the plan's runs in `report`. Bad input names the
/// file and the cell or check.
pub fn against(report: &Report, p: &Published) -> Result<Against, ReportError> {
    read(report, p).map_err(|e| match e {
        ReportError::Published(m) if !p.file.is_empty() => ReportError::Published(format!("{}: {m}", p.file)),
        e => e,
    })
}

fn read(report: &Report, p: &Published) -> Result<Against, ReportError> {
    let known = Known::of(report, &p.plan);
    if known.runs.is_empty() {
        return Err(bad(format!("no run of plan '{}' in the selection (run the plan first)", p.plan)));
    }
    let mut cells = Vec::new();
    for (i, c) in p.cells.iter().enumerate() {
        let what = format!("cell {}", i + 1);
        let figure = c.figure.as_ref().or(p.figure.as_ref()).ok_or_else(|| {
            bad(format!("{what}: no figure (give figure = \"...\" in the cell or at the top of the file)"))
        })?;
        known.check_axes(&what, &c.axes)?;
        known.check_step(&what, &c.step)?;
        let recorded = known.units.get(figure);
        if recorded.is_none() && !known.incomplete {
            return Err(bad(format!("{what}: figure '{figure}' is not recorded by the plan's runs")));
        }
        if let Some(unit) = c.unit.as_ref().or(p.unit.as_ref()) {
            if !UNITS.contains(&unit.as_str()) {
                return Err(bad(format!(
                    "{what}: unit '{unit}' is not a unit (units: {})",
                    UNITS.join(", ")
                )));
            }
            if let Some(recorded) = recorded.filter(|r| *r != unit) {
                return Err(bad(format!(
                    "{what}: unit '{unit}' of {figure}: the runs record it in {recorded}"
                )));
            }
        }
        let (here, runs) = known.value(&c.axes, &c.step, figure);
        cells.push(CellRow {
            label: label(&c.axes, &c.step),
            figure: figure.clone(),
            paper: c.value,
            here,
            runs,
        });
    }
    let checks = p
        .checks
        .iter()
        .enumerate()
        .map(|(i, c)| check(&known, &cells, i, c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Against { plan: p.plan.clone(), source: p.source.clone(), cells, checks })
}

/// An axis value with its paper and here figures, for `order`.
type Ranked = (String, f64, Option<f64>);

/// The paper's and here's value of the published cell at `axes`, `step`
/// (of `figure`, when given).
fn pair(
    cells: &[CellRow],
    axes: &BTreeMap<String, String>,
    step: &str,
    figure: Option<&str>,
) -> Option<(f64, Option<f64>)> {
    let l = label(axes, step);
    cells.iter().find(|c| c.label == l && figure.is_none_or(|f| c.figure == f)).map(|c| (c.paper, c.here))
}

fn within(a: f64, b: f64, factor: f64) -> bool {
    a > 0.0 && b > 0.0 && (a / b).max(b / a) <= factor
}

fn check(known: &Known<'_>, cells: &[CellRow], i: usize, c: &Check) -> Result<CheckRow, ReportError> {
    let what = format!("check {} ({})", i + 1, c.kind);
    let need = |v: &Option<String>, key: &str| {
        v.clone().ok_or_else(|| bad(format!("{what}: needs {key} = \"...\"")))
    };
    let fig = c.figure.as_deref();
    let missing = |axes: &BTreeMap<String, String>, step: &str| {
        let of = fig.map(|f| format!(" of {f}")).unwrap_or_default();
        bad(format!("{what}: no published cell{of} at {} (add it as a [[cell]])", label(axes, step)))
    };
    match c.kind.as_str() {
        "gain" | "value" | "ratio" => {
            let (name, paper, here, factor) = match c.kind.as_str() {
                "gain" => {
                    let (from, to) = (need(&c.from, "from")?, need(&c.to, "to")?);
                    known.check_axes(&what, &c.axes)?;
                    let a = pair(cells, &c.axes, &from, fig).ok_or_else(|| missing(&c.axes, &from))?;
                    let b = pair(cells, &c.axes, &to, fig).ok_or_else(|| missing(&c.axes, &to))?;
                    let name = format!("gain {} {from} → {to}", label(&c.axes, "").trim_end());
                    (name, b.0 / a.0, b.1.zip(a.1).map(|(y, x)| y / x), c.within.unwrap_or(1.5))
                }
                "ratio" => {
                    let step = need(&c.step, "step")?;
                    known.check_axes(&what, &c.of)?;
                    known.check_axes(&what, &c.over)?;
                    let a = pair(cells, &c.of, &step, fig).ok_or_else(|| missing(&c.of, &step))?;
                    let b = pair(cells, &c.over, &step, fig).ok_or_else(|| missing(&c.over, &step))?;
                    let name = format!(
                        "{} ÷ {} at {step}",
                        label(&c.of, "").trim_end(),
                        label(&c.over, "").trim_end()
                    );
                    (name, a.0 / b.0, a.1.zip(b.1).map(|(x, y)| x / y), c.within.unwrap_or(1.5))
                }
                _ => {
                    let step = need(&c.step, "step")?;
                    known.check_axes(&what, &c.axes)?;
                    let a = pair(cells, &c.axes, &step, fig).ok_or_else(|| missing(&c.axes, &step))?;
                    (format!("value {}", label(&c.axes, &step)), a.0, a.1, c.within.unwrap_or(2.0))
                }
            };
            let verdict = match here {
                None => Verdict::NoData,
                Some(h) if within(h, paper, factor) => Verdict::Pass,
                Some(_) => Verdict::Fail,
            };
            let show =
                |v: f64| if c.kind == "value" { format_figure(v) } else { format!("×{}", format_figure(v)) };
            let name = match fig {
                Some(f) => format!("{f}: {name}"),
                None => name,
            };
            Ok(CheckRow {
                name: c.name.clone().unwrap_or(format!("{name} (within ×{factor})")),
                paper: show(paper),
                here: here.map(show).unwrap_or_else(|| "not run".into()),
                verdict,
            })
        }
        "order" => check_order(known, cells, &what, c),
        k => Err(bad(format!("{what}: kind '{k}' is not a check (gain, order, ratio, value)"))),
    }
}

/// An `order` check: the axis's published values at the step, ranked by
/// the paper and by here.
fn check_order(known: &Known<'_>, cells: &[CellRow], what: &str, c: &Check) -> Result<CheckRow, ReportError> {
    let need = |v: &Option<String>, key: &str| {
        v.clone().ok_or_else(|| bad(format!("{what}: needs {key} = \"...\"")))
    };
    let (axis, step) = (need(&c.axis, "axis")?, need(&c.step, "step")?);
    known.check_axes(what, &c.axes)?;
    let values = known
        .axes
        .get(&axis)
        .ok_or_else(|| bad(format!("{what}: '{axis}' is not an axis of the plan's runs")))?;
    let mut rows: Vec<Ranked> = Vec::new();
    for v in values {
        let mut axes = c.axes.clone();
        axes.insert(axis.clone(), v.clone());
        if let Some((paper, here)) = pair(cells, &axes, &step, c.figure.as_deref()) {
            rows.push((v.clone(), paper, here));
        }
    }
    if rows.len() < 2 {
        let of = c.figure.as_ref().map(|f| format!(" ({f})")).unwrap_or_default();
        return Err(bad(format!("{what}: fewer than two published cells of '{axis}' at {step}{of}")));
    }
    let order = |key: &dyn Fn(&Ranked) -> f64| {
        let mut r = rows.clone();
        r.sort_by(|a, b| key(b).total_cmp(&key(a)));
        r.into_iter().map(|x| x.0).collect::<Vec<_>>()
    };
    let paper = order(&|r| r.1);
    let complete = rows.iter().all(|r| r.2.is_some());
    let here = order(&|r| r.2.unwrap_or(f64::NEG_INFINITY));
    let verdict = match (complete, paper == here) {
        (false, _) => Verdict::NoData,
        (true, true) => Verdict::Pass,
        (true, false) => Verdict::Fail,
    };
    Ok(CheckRow {
        name: c.name.clone().unwrap_or(match &c.figure {
            Some(f) => format!("{f}: order of {axis} at {step}"),
            None => format!("order of {axis} at {step}"),
        }),
        paper: paper.join(" > "),
        here: if complete { here.join(" > ") } else { "not run".into() },
        verdict,
    })
}

impl Against {
    /// The cells' table: paper | here | ratio.
    pub fn cells_table(&self) -> Table {
        let title = if self.source.is_empty() {
            format!("plan {}: paper against here", self.plan)
        } else {
            format!("plan {}: paper ({}) against here", self.plan, self.source)
        };
        Table {
            title,
            header: ["cell", "figure", "paper", "here", "here ÷ paper", "runs"].map(String::from).to_vec(),
            rows: self
                .cells
                .iter()
                .map(|c| {
                    vec![
                        c.label.clone(),
                        c.figure.clone(),
                        format_figure(c.paper),
                        c.here.map(format_figure).unwrap_or_else(|| "not run".into()),
                        c.ratio().map(|r| format!("{:.2}", r)).unwrap_or_else(|| "-".into()),
                        c.runs.to_string(),
                    ]
                })
                .collect(),
            notes: Vec::new(),
        }
    }

    /// The checks' table, with the tally under it.
    pub fn checks_table(&self) -> Table {
        let count = |v: Verdict| self.checks.iter().filter(|c| c.verdict == v).count();
        Table {
            title: format!("plan {}: the study's shape", self.plan),
            header: ["check", "paper", "here", "verdict"].map(String::from).to_vec(),
            rows: self
                .checks
                .iter()
                .map(|c| vec![c.name.clone(), c.paper.clone(), c.here.clone(), c.verdict.word().into()])
                .collect(),
            notes: vec![format!(
                "{} of {} checks pass, {} fail, {} without data",
                count(Verdict::Pass),
                self.checks.len(),
                count(Verdict::Fail),
                count(Verdict::NoData)
            )],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped studies' published files parse (unknown keys refused),
    /// and every check names the cells it needs: a figure it reads has
    /// cells at its step.
    #[test]
    fn the_shipped_published_files_parse_and_their_checks_find_their_cells() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".published.toml") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let pub_ = parse(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!pub_.cells.is_empty() && !pub_.checks.is_empty(), "{name}");
            for c in &pub_.checks {
                if let Some(f) = &c.figure {
                    let has =
                        pub_.cells.iter().any(|x| x.figure.as_ref().or(pub_.figure.as_ref()) == Some(f));
                    assert!(has, "{name}: a check reads {f}, which no cell gives");
                }
            }
            n += 1;
        }
        assert!(n >= 2, "S2's and S4's published files ship");
    }
}
