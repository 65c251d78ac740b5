//! The report's model: which runs were selected, grouped into columns
//! (a plan cell's repeats form one group), with each step's figures and
//! samples loaded once. Renderers only read it.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use storbench_results::{RunFilter, RunRow, Status, Store, StoreError};

use crate::units::{fmt_num, with_unit};
use crate::ReportError;

/// One step of one run: its figures and per-second series.
#[derive(Clone, Debug, Serialize)]
pub struct StepData {
    /// Step index within the run.
    pub idx: i64,
    /// Step label (`users=8`, a profile name).
    pub label: String,
    /// Parameters of the load level.
    pub params: Value,
    /// Summary figures: name → (value, unit).
    pub metrics: BTreeMap<String, (f64, String)>,
    /// Per-second series: name → [(t_ms, value)].
    pub samples: BTreeMap<String, Vec<(i64, f64)>>,
    /// Text notes as recorded: name → text (`verdict.kind`,
    /// `verdict.evidence`); empty for runs recorded before them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub notes: BTreeMap<String, String>,
}

impl StepData {
    /// The numeric load level of the step (`users`, `clients`), if it has one.
    pub fn load_level(&self) -> Option<f64> {
        // Only a step that *is* a load level counts: an I/O profile's
        // `threads` is one of its settings, not the step's level.
        for key in ["users", "clients"] {
            if let Some(v) = self.params.get(key).and_then(Value::as_f64) {
                return Some(v);
            }
        }
        let (_, v) = self.label.split_once('=')?;
        v.trim().parse().ok()
    }
}

impl StepData {
    /// Flags raised during the step: figures `flag.NAME` with a value other
    /// than zero (`flag.steal` when the hypervisor took the CPU).
    pub fn flags(&self) -> Vec<(String, f64)> {
        self.metrics
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("flag.")?.to_string(), v.0)))
            .filter(|(_, v)| *v != 0.0 && !v.is_nan())
            .collect()
    }

    /// A flag as people read it: the figure it is about when the step has
    /// one (`flag.steal` → `cpu.steal 12.3 %`), else the flag's own value.
    pub fn flag_text(&self, name: &str, value: f64) -> String {
        // A workload's own flag (the server's short window) in its words.
        if let Some(words) = storbench_workloads::figures::flag_words(name, value) {
            return words;
        }
        let about = self.metrics.iter().find(|(k, _)| {
            !k.starts_with("flag.") && (k.as_str() == name || k.ends_with(&format!(".{name}")))
        });
        match about {
            Some((k, (v, u))) => format!("{k} {}", with_unit(*v, k, u)),
            None => format!("flag.{name} = {}", fmt_num(value)),
        }
    }
}

/// One run with all its steps.
#[derive(Clone, Debug, Serialize)]
pub struct RunData {
    /// The run row.
    pub run: RunRow,
    /// Its steps in order, sensitivity re-runs left out (they are load
    /// levels of no axis: see [`RunData::sensitivity`]).
    pub steps: Vec<StepData>,
    /// Its storage sensitivity re-runs (`params.sensitivity`), in order:
    /// read by [`crate::sensitivity`] only, so no table or chart takes a
    /// re-run at another device speed for a load level.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sensitivity: Vec<StepData>,
}

impl RunData {
    /// Loads run `run` from `store`.
    pub fn load(store: &Store, run: RunRow) -> Result<RunData, StoreError> {
        let metrics = store.metrics(run.id)?;
        let samples = store.samples(run.id)?;
        let notes = store.notes(run.id)?;
        let (sensitivity, steps): (Vec<StepData>, Vec<StepData>) = store
            .steps(run.id)?
            .into_iter()
            .map(|s| {
                let mut m = BTreeMap::new();
                for x in metrics.iter().filter(|x| x.step_idx == s.idx) {
                    m.insert(x.name.clone(), (x.value, x.unit.clone()));
                }
                let mut series: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
                for x in samples.iter().filter(|x| x.step_idx == s.idx) {
                    series.entry(x.name.clone()).or_default().push((x.t_ms, x.value));
                }
                let n = notes
                    .iter()
                    .filter(|x| x.step_idx == s.idx)
                    .map(|x| (x.name.clone(), x.text.clone()))
                    .collect();
                StepData {
                    idx: s.idx,
                    label: s.label,
                    params: s.params,
                    metrics: m,
                    samples: series,
                    notes: n,
                }
            })
            .partition(|s| is_rerun(&s.params));
        Ok(RunData { run, steps, sensitivity })
    }

    /// Warnings the run recorded in its environment (`warnings` or `flags`:
    /// settings that make a number meaningless, such as `fsync=off`).
    pub fn warnings(&self) -> Vec<String> {
        fn take(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Array(a) => a.iter().for_each(|x| take(x, out)),
                Value::String(s) if !s.is_empty() => out.push(s.clone()),
                Value::Object(m) => out.extend(m.iter().map(|(k, x)| match x {
                    Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })),
                Value::Null | Value::String(_) => {}
                other => out.push(other.to_string()),
            }
        }
        let mut out = Vec::new();
        // At the top of the environment or in one of its parts (`db`).
        let parts = std::iter::once(&self.run.env)
            .chain(self.run.env.as_object().into_iter().flat_map(|m| m.values()));
        for part in parts {
            for key in ["warnings", "flags"] {
                if let Some(v) = part.get(key) {
                    take(v, &mut out);
                }
            }
        }
        out.dedup();
        out
    }

    /// The step labelled `label`, if the run has one.
    pub fn step(&self, label: &str) -> Option<&StepData> {
        self.steps.iter().find(|s| s.label == label)
    }

    /// The run's emulated medium, if its environment names one (any key
    /// containing `emulat` with a value that is not null, false, empty or "none").
    pub fn emulation(&self) -> Option<String> {
        fn find(v: &Value) -> Option<String> {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        if k.contains("emulat") {
                            let s = match x {
                                Value::Null | Value::Bool(false) => continue,
                                Value::String(s) if s.is_empty() || s == "none" => continue,
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            };
                            return Some(s);
                        }
                        if let Some(s) = find(x) {
                            return Some(s);
                        }
                    }
                    None
                }
                Value::Array(a) => a.iter().find_map(find),
                _ => None,
            }
        }
        find(&self.run.env)
    }
}

/// Values of one figure over the repeats of a group: the median is shown, the
/// spread (min–max) judges noise.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stat {
    /// One value per repeat that has the figure.
    pub values: Vec<f64>,
}

impl Stat {
    /// The figure `metric` of step `step` over some repeats.
    pub fn over(runs: &[RunData], step: &str, metric: &str) -> Stat {
        Stat {
            values: runs
                .iter()
                .filter_map(|r| r.step(step)?.metrics.get(metric).map(|x| x.0))
                .filter(|v| v.is_finite())
                .collect(),
        }
    }

    /// Number of repeats.
    pub fn n(&self) -> usize {
        self.values.len()
    }
    /// The median (mean of the middle two for an even count).
    pub fn median(&self) -> f64 {
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }
    /// The smallest value.
    pub fn min(&self) -> f64 {
        self.values.iter().copied().fold(f64::INFINITY, f64::min)
    }
    /// The largest value.
    pub fn max(&self) -> f64 {
        self.values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }
    /// The same values divided by `div` (for display in a larger unit).
    pub fn scaled(&self, div: f64) -> Stat {
        Stat { values: self.values.iter().map(|v| v / div).collect() }
    }

    /// The median, with the min–max spread when there are repeats:
    /// `1234 (1200–1260, n=3)`.
    pub fn display(&self) -> String {
        match self.n() {
            0 => "–".into(),
            1 => fmt_num(self.values[0]),
            n => {
                format!("{} ({}–{}, n={n})", fmt_num(self.median()), fmt_num(self.min()), fmt_num(self.max()))
            }
        }
    }
}

/// A column of a report: one run, or the repeats of one plan cell.
#[derive(Clone, Debug, Serialize)]
pub struct Group {
    /// Kind of the runs.
    pub kind: String,
    /// Plan, when the runs came from one.
    pub plan: Option<String>,
    /// Column label: the cell's axis values, or the run's label and id.
    pub label: String,
    /// The repeats, oldest first.
    pub runs: Vec<RunData>,
}

impl Group {
    /// The figure `metric` of step `step` over the repeats.
    pub fn stat(&self, step: &str, metric: &str) -> Stat {
        Stat::over(&self.runs, step, metric)
    }

    /// The unit of `metric`, from the first run that has it.
    pub fn unit(&self, metric: &str) -> Option<String> {
        self.runs.iter().flat_map(|r| &r.steps).find_map(|s| s.metrics.get(metric).map(|x| x.1.clone()))
    }
}

/// The key that makes runs repeats of one another.
fn group_key(r: &RunRow) -> (String, Option<String>, String) {
    let label = match (&r.plan, &r.cell) {
        (Some(_), _) if !r.label.is_empty() => r.label.clone(),
        (Some(_), Some(cell)) => cell.split('#').next().unwrap_or(cell).to_string(),
        _ => format!("{} (#{})", r.label, r.id),
    };
    (r.kind.clone(), r.plan.clone(), label)
}

/// What a report shows: the selected runs grouped into columns.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The selectors as given (or what the default chose).
    pub selection: Vec<String>,
    /// The groups in order of their first run.
    pub groups: Vec<Group>,
}

/// A part of a report whose groups share tables: one kind within one plan
/// (or the runs outside any plan).
#[derive(Debug)]
pub struct Section<'a> {
    /// Kind.
    pub kind: &'a str,
    /// Plan, if any.
    pub plan: Option<&'a str>,
    /// Its groups (columns).
    pub groups: Vec<&'a Group>,
}

impl Section<'_> {
    /// A title: `plan s5 · io` or `runs · tpcc`.
    pub fn title(&self) -> String {
        match self.plan {
            Some(p) => format!("plan {p} · {}", self.kind),
            None => format!("runs · {}", self.kind),
        }
    }

    /// Step labels in load order (by users/clients where numeric, else as run).
    pub fn step_labels(&self) -> Vec<String> {
        let mut seen: Vec<(Option<f64>, String)> = Vec::new();
        for g in &self.groups {
            for r in &g.runs {
                for s in &r.steps {
                    if !seen.iter().any(|x| x.1 == s.label) {
                        seen.push((s.load_level(), s.label.clone()));
                    }
                }
            }
        }
        if seen.iter().all(|x| x.0.is_some()) {
            seen.sort_by(|a, b| a.0.unwrap_or(0.0).total_cmp(&b.0.unwrap_or(0.0)));
        }
        seen.into_iter().map(|x| x.1).collect()
    }

    /// The step label → load level map (for charts against users/clients).
    pub fn load_levels(&self) -> Vec<(String, Option<f64>)> {
        let labels = self.step_labels();
        labels
            .into_iter()
            .map(|l| {
                let lv = self
                    .groups
                    .iter()
                    .flat_map(|g| &g.runs)
                    .find_map(|r| r.step(&l).map(|s| s.load_level()))
                    .flatten();
                (l, lv)
            })
            .collect()
    }

    /// What the rows are: `users`, `clients`, `profile` or `step`.
    pub fn row_axis(&self) -> &'static str {
        let first = self.groups.iter().flat_map(|g| &g.runs).flat_map(|r| &r.steps).next();
        match first {
            Some(s) if s.params.get("users").is_some() || s.label.starts_with("users=") => "users",
            Some(s) if s.params.get("clients").is_some() || s.label.starts_with("clients=") => "clients",
            _ if self.kind == "io" => "profile",
            _ => "step",
        }
    }

    /// Every metric name any step of the section has.
    pub fn metric_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .groups
            .iter()
            .flat_map(|g| &g.runs)
            .flat_map(|r| &r.steps)
            .flat_map(|s| s.metrics.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The axis values of the section's groups that differ, as people say
    /// them: `hdd`, `nvme` for labels `target=hdd`, `target=nvme`.
    pub fn short_label(&self, g: &Group) -> String {
        short_label(&g.label)
    }
}

/// A cell label's values without their axis names (`target=hdd,db=pg` →
/// `hdd/pg`); other labels as they are.
pub fn short_label(label: &str) -> String {
    let parts: Vec<&str> = label.split(',').collect();
    if parts.iter().all(|p| p.contains('=') && !p.contains(' ')) {
        parts.iter().map(|p| p.split_once('=').map(|x| x.1).unwrap_or(p)).collect::<Vec<_>>().join("/")
    } else {
        label.to_string()
    }
}

/// One source of one main figure, as a table or chart shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct FigureCol {
    /// The stored metric name (`tpm.client`).
    pub metric: String,
    /// Its base name (`tpm`).
    pub base: &'static str,
    /// What people call it (`TPM`).
    pub label: &'static str,
    /// Who counted it (`server counters`), empty when unknown.
    pub source: String,
}

impl FigureCol {
    /// `TPM (server counters)`, or `TPM` when the source is unknown.
    pub fn title(&self) -> String {
        if self.source.is_empty() {
            self.label.to_string()
        } else if self.source.contains('(') {
            // A run's own words (`client count (engine has no counters)`):
            // no parentheses inside parentheses.
            format!("{}, {}", self.label, self.source)
        } else {
            format!("{} ({})", self.label, self.source)
        }
    }
}

impl Report {
    /// Loads the runs `selectors` name: each a run id, a uuid prefix or a plan
    /// name. None: the latest plan if any run belongs to one, else the latest run.
    pub fn load(store: &Store, selectors: &[String]) -> Result<Report, ReportError> {
        let mut runs: Vec<RunRow> = Vec::new();
        let mut selection = selectors.to_vec();
        if selectors.is_empty() {
            let all = store.runs(&RunFilter::default())?;
            if all.is_empty() {
                return Err(ReportError::Empty);
            }
            if let Some(p) = all.iter().find_map(|r| r.plan.clone()) {
                runs = plan_runs(store, &p)?;
                selection.push(p);
            } else {
                selection.push(all[0].id.to_string());
                runs.push(all[0].clone());
            }
        } else {
            // Validate every selector before loading anything.
            for s in selectors {
                runs.extend(select(store, s)?);
            }
        }
        runs.sort_by_key(|r| r.id);
        runs.dedup_by_key(|r| r.id);
        let mut groups: Vec<Group> = Vec::new();
        for r in runs {
            let (kind, plan, label) = group_key(&r);
            let data = RunData::load(store, r)?;
            match groups.iter_mut().find(|g| g.kind == kind && g.plan == plan && g.label == label) {
                Some(g) => g.runs.push(data),
                None => groups.push(Group { kind, plan, label, runs: vec![data] }),
            }
        }
        Ok(Report { selection, groups })
    }

    /// The sections: groups of one kind within one plan share tables; runs of
    /// different kinds get separate tables.
    pub fn sections(&self) -> Vec<Section<'_>> {
        let mut out: Vec<Section<'_>> = Vec::new();
        for g in &self.groups {
            match out.iter_mut().find(|s| s.kind == g.kind && s.plan == g.plan.as_deref()) {
                Some(s) => s.groups.push(g),
                None => out.push(Section { kind: &g.kind, plan: g.plan.as_deref(), groups: vec![g] }),
            }
        }
        out
    }

    /// Every run of the report.
    pub fn runs(&self) -> impl Iterator<Item = &RunData> {
        self.groups.iter().flat_map(|g| &g.runs)
    }

    /// The kinds present, in order.
    pub fn kinds(&self) -> Vec<&str> {
        let mut k: Vec<&str> = Vec::new();
        for g in &self.groups {
            if !k.contains(&g.kind.as_str()) {
                k.push(&g.kind);
            }
        }
        k
    }

    /// The emulated media the runs used (`hdd`, `sata-ssd`, ...), if any.
    pub fn emulated_media(&self) -> Vec<String> {
        let mut m: Vec<String> = self.runs().filter_map(RunData::emulation).collect();
        m.sort();
        m.dedup();
        m
    }

    /// A warning naming the runs that did not complete (interrupted, failed
    /// or still running): their figures cover only the steps they finished.
    pub fn incomplete_note(&self) -> Option<String> {
        let bad: Vec<String> = self
            .runs()
            .filter(|r| r.run.status != Status::Complete)
            .map(|r| format!("#{} {}", r.run.id, r.run.status.as_str()))
            .collect();
        (!bad.is_empty()).then(|| {
            format!(
                "Runs that did not complete ({}): their figures cover only the steps they finished.",
                bad.join(", ")
            )
        })
    }

    /// The note every report carries when a run used an emulated medium.
    pub fn emulation_note(&self) -> Option<String> {
        emulation_note(self.runs())
    }
}

/// The emulated-media note for these runs, if any used an emulated medium.
pub(crate) fn emulation_note<'a>(runs: impl Iterator<Item = &'a RunData>) -> Option<String> {
    let mut m: Vec<String> = runs.filter_map(RunData::emulation).collect();
    m.sort();
    m.dedup();
    (!m.is_empty()).then(|| {
        format!(
            "Emulated media ({}) are caps, not latency models: they limit throughput and IOPS \
             (blkio throttle) to the class's figures, but do not reproduce its seek or network latency.",
            m.join(", ")
        )
    })
}

/// The runs one selector names: a plan (by name) before a run (id or uuid
/// prefix), so a plan named like a hex prefix (`a`, `cafe`) is never read
/// as the one run whose uuid happens to begin so; a longer prefix still
/// finds such a run. Digits alone are a run id first (a script asking for
/// run 12 gets run 12), and a plan named so when no run has that id.
pub(crate) fn select(store: &Store, s: &str) -> Result<Vec<RunRow>, ReportError> {
    let plan = || plan_runs(store, s);
    let id = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !id {
        let runs = plan()?;
        if !runs.is_empty() {
            return Ok(runs);
        }
    }
    match store.run(s) {
        Ok(r) => Ok(vec![r]),
        Err(StoreError::NoSuchRun(_)) => {
            let runs = if id { plan()? } else { Vec::new() };
            if runs.is_empty() {
                Err(ReportError::NoSuchSelection(s.to_string()))
            } else {
                Ok(runs)
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// A plan's runs as a report reads them: see [`newest_per_cell`].
pub(crate) fn plan_runs(store: &Store, plan: &str) -> Result<Vec<RunRow>, StoreError> {
    Ok(newest_per_cell(store.runs(&RunFilter { plan: Some(plan.to_string()), ..Default::default() })?))
}

/// A plan's runs as a report reads them: where one cell has several runs
/// of the same part (a cell redone with `--fresh`, or run again after its
/// definition changed), the newest complete one, or the newest of all when
/// none completed; never the old and the new as if they were repeats
/// (repeats are cells of their own, `#r2`). The parts of a cell (a
/// `together` group's workloads, their cycles: the run's axes) and the
/// shards of a sharded run (`config.shard`) are told apart; runs outside a
/// cell are all kept.
fn newest_per_cell(mut runs: Vec<RunRow>) -> Vec<RunRow> {
    let key = |r: &RunRow| {
        r.cell.clone().map(|c| {
            (c, r.config.get("axes").map(Value::to_string), r.config.get("shard").map(Value::to_string))
        })
    };
    let complete: std::collections::BTreeSet<_> =
        runs.iter().filter(|r| r.status == Status::Complete).filter_map(key).collect();
    runs.sort_by_key(|r| std::cmp::Reverse(r.id));
    let mut seen = std::collections::BTreeSet::new();
    runs.retain(|r| match key(r) {
        None => true,
        Some(k) => (r.status == Status::Complete || !complete.contains(&k)) && seen.insert(k),
    });
    runs
}

/// Flattens a JSON value into `a.b.c = value` pairs (for environment tables).
pub(crate) fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, x, out);
            }
        }
        Value::Null => {}
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// The params key that tags a re-run.
pub const PARAM: &str = "sensitivity";

/// Whether a step's params tag it as a sensitivity re-run.
pub fn is_rerun(params: &Value) -> bool {
    params.get(PARAM).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_named_like_a_uuid_prefix_selects_the_plan() {
        let path = std::env::temp_dir().join(format!("sb-select-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut store = Store::open(&path).unwrap();
        let new = |plan: Option<&str>| storbench_results::NewRun {
            kind: "io".into(),
            label: "x".into(),
            config: serde_json::json!({}),
            env: serde_json::json!({}),
            plan: plan.map(str::to_string),
            cell: None,
        };
        // A run whose uuid begins with a letter (digits alone are an id).
        let lone = std::iter::repeat_with(|| store.begin_run(&new(None)).unwrap())
            .find(|r| r.uuid.as_bytes()[0].is_ascii_alphabetic())
            .unwrap();
        for _ in 0..2 {
            store.begin_run(&new(Some("plan-x"))).unwrap();
        }
        // A plan named as the lone run's uuid begins: the plan wins.
        let first = &lone.uuid[..1];
        for _ in 0..2 {
            store.begin_run(&new(Some(first))).unwrap();
        }
        let got = select(&store, first).unwrap();
        assert_eq!(got.len(), 2, "the plan's two runs, not the run whose uuid begins {first}");
        assert!(got.iter().all(|r| r.plan.as_deref() == Some(first)));
        // The run is still found by a prefix no plan is named, and by its id.
        assert_eq!(select(&store, &lone.uuid).unwrap()[0].id, lone.id);
        assert_eq!(select(&store, &lone.id.to_string()).unwrap()[0].id, lone.id);
        assert_eq!(select(&store, "plan-x").unwrap().len(), 2);
        assert!(matches!(select(&store, "nothing-so-named"), Err(ReportError::NoSuchSelection(_))));
        // A plan named in digits: a run id first, the plan when no run has it.
        for _ in 0..2 {
            store.begin_run(&new(Some("2024"))).unwrap();
        }
        assert_eq!(select(&store, "2024").unwrap().len(), 2);
        assert_eq!(select(&store, "1").unwrap().len(), 1, "run 1, not a plan");
        drop(store);
        let _ = std::fs::remove_file(&path);
    }

    /// Regression (S4's full run, 2026-11-28): a cell redone with
    /// `--fresh` was reported as two repeats, the old run's figures (a
    /// smaller memory limit, a server killed at 21 users) in the medians.
    #[test]
    fn a_cell_run_again_is_read_as_its_newest_complete_run_not_as_repeats() {
        let run = |id: i64, cell: Option<&str>, status: Status, config: Value| RunRow {
            id,
            uuid: format!("u{id}"),
            kind: "tpcc".into(),
            label: "x".into(),
            started_at: String::new(),
            finished_at: None,
            status,
            config,
            env: Value::Null,
            plan: Some("p".into()),
            cell: cell.map(str::to_string),
        };
        let none = Value::Null;
        let part = |w: &str| serde_json::json!({ "axes": { "workload": w } });
        let shard = |s: &str| serde_json::json!({ "shard": s });
        let kept = |runs: Vec<RunRow>| {
            let mut ids: Vec<i64> = newest_per_cell(runs).iter().map(|r| r.id).collect();
            ids.sort();
            ids
        };
        let a = Some("t=a/tpcc#r1");
        // Redone: the newest complete run; a later interrupted try does not
        // replace it; the second repeat is a cell of its own.
        assert_eq!(
            kept(vec![
                run(1, a, Status::Complete, none.clone()),
                run(2, a, Status::Complete, none.clone()),
                run(3, a, Status::Interrupted, none.clone()),
                run(4, Some("t=a/tpcc#r2"), Status::Complete, none.clone()),
            ]),
            [2, 4]
        );
        // Never completed: the newest try, so the report can say so.
        assert_eq!(
            kept(vec![run(1, a, Status::Failed, none.clone()), run(2, a, Status::Interrupted, none.clone())]),
            [2]
        );
        // A together cell's parts, a sharded run's shards, runs outside a
        // cell: all kept.
        assert_eq!(
            kept(vec![
                run(1, a, Status::Complete, part("tpcc")),
                run(2, a, Status::Complete, part("io")),
                run(3, a, Status::Complete, shard("0/2")),
                run(4, a, Status::Complete, shard("1/2")),
                run(5, None, Status::Complete, none.clone()),
                run(6, None, Status::Complete, none.clone()),
            ]),
            [1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn median_and_spread() {
        let s = Stat { values: vec![3.0, 1.0, 2.0, 10.0] };
        assert_eq!(s.median(), 2.5);
        assert_eq!(s.min(), 1.0);
        assert_eq!(s.max(), 10.0);
        assert_eq!(s.display(), "2.50 (1–10, n=4)");
        assert_eq!(Stat { values: vec![1234.4] }.display(), "1234");
        assert_eq!(Stat::default().display(), "–");
    }

    #[test]
    fn figure_titles_name_their_source() {
        let f = |source: &str| FigureCol {
            metric: "tpm".into(),
            base: "tpm",
            label: "TPM",
            source: source.into(),
        };
        assert_eq!(f("").title(), "TPM");
        assert_eq!(f("server counters").title(), "TPM (server counters)");
        assert_eq!(
            f("client count (engine has no counters)").title(),
            "TPM, client count (engine has no counters)"
        );
        assert_eq!(short_label("target=hdd,db=pg"), "hdd/pg");
        assert_eq!(short_label("sqlite tpcc (#5)"), "sqlite tpcc (#5)");
    }

    #[test]
    fn flatten_skips_nulls() {
        let mut out = Vec::new();
        flatten("", &serde_json::json!({"a": {"b": 1, "c": null}, "d": "x"}), &mut out);
        assert_eq!(out, vec![("a.b".to_string(), "1".to_string()), ("d".to_string(), "x".to_string())]);
    }
}
