//! The exact merge of N shard runs into one run, on the results store's API.
//!
//! Step by step (steps match by index):
//! - Histograms of one name merge; every latency figure (`.mean`, `.p50` …
//!   `.max`) is recomputed from the merged histogram, so a merged p99 is the
//!   p99 of all operations of all shards — never an average of percentiles.
//!   `.clamped` counts add (the serialised histogram does not keep them).
//! - Rates and counts (units per_s, per_min, MB/s, count, bytes) add: with a
//!   common start instant the shards measure the same window.
//! - Server-side figures — names ending `.server` or `.districts`, the
//!   wait-event sampler's `wait.aas`, `wait.samples` and `wait.missed`, and in a
//!   `tpcc` run `tpm` (when from the server's counters, see the run's
//!   `tpm_source`) and `nopm` (from the districts) — see the whole server,
//!   not one shard's part, so they are taken once: the largest over the
//!   shards, which is the shard whose window covered the others' (a shard
//!   that started late or stopped early saw less growth).
//! - `%`, ratio and per-operation figures (µs of CPU per I/O, ms) are the
//!   mean over shards, and the merged run's notes say so; seconds (the
//!   window) are the longest.
//! - Per-second samples align on wall-clock seconds: a sample's instant is
//!   its step's `started_at` plus `t_ms`, rounded to the second from the
//!   earliest shard's start. Within a second, rates add, server-side series
//!   and per-second quantiles take the largest (an upper bound: a quantile
//!   of the union is not recoverable from quantiles), means and `%` average.
//!
//! - Text notes (`verdict.kind`, `verdict.evidence`: what limited the
//!   step, judged on each shard's own host) are kept as the shards wrote
//!   them: one text when every shard that has the note agrees, else each
//!   shard's text after its identity (`1/2: cpu; 2/2: contention`). A
//!   merged verdict is not judged again: the merge sees no host's CPU.
//!
//! A shard missing (by the `shard` identity `i/N` in each run's config), or
//! one that did not complete, makes the merged run `failed` (or
//! `interrupted`) with a warning naming it; what the others measured is kept.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::DateTime;
use serde_json::{json, Value};
use storbench_metrics::{LatencyHistogram, StepReport, Unit};
use storbench_results::{
    HistogramRow, MetricRow, NewRun, NoteRow, RunRow, SampleRow, Status, StepRow, Store, StoreError,
};

use crate::shard::Shard;

/// The figure suffixes [`StepReport::latency`] derives from a histogram.
const LATENCY_SUFFIXES: [&str; 8] = ["mean", "p50", "p90", "p95", "p99", "p99.9", "max", "clamped"];
/// Per-second quantile series: merged as the largest (an upper bound).
const QUANTILE_SUFFIXES: [&str; 6] = [".p50", ".p90", ".p95", ".p99", ".p99.9", ".max"];

/// Errors from merging.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Nothing to merge.
    #[error("merge: no runs given: name shard runs (ids or uuid prefixes) or --from FILE")]
    Empty,
    /// One run given twice.
    #[error("merge: run {0} is given twice")]
    DuplicateRun(String),
    /// Runs of different kinds.
    #[error("merge: run {run} is a '{kind}' run, the first is '{first}': only runs of one kind merge")]
    KindMismatch {
        /// The odd run.
        run: String,
        /// Its kind.
        kind: String,
        /// The first run's kind.
        first: String,
    },
    /// Two runs claim one shard, or disagree on the count.
    #[error("merge: runs {a} and {b} are shards {sa} and {sb}: each shard i/N once, one N")]
    ShardClash {
        /// A run.
        a: String,
        /// Its shard.
        sa: String,
        /// Another run.
        b: String,
        /// Its shard.
        sb: String,
    },
    /// A run that was never a shard: merging it would record a "merged"
    /// run of whole runs, counted as parts of one.
    #[error(
        "merge: run {0} was not run as a shard (no config.shard i/N): only runs made with --shard i/N merge"
    )]
    NotSharded(String),
    /// A stored histogram could not be read.
    #[error("merge: run {run} step {step}: histogram {name}: {message}")]
    Histogram {
        /// The run.
        run: String,
        /// The step.
        step: i64,
        /// The histogram.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// A stored time is not RFC 3339.
    #[error("merge: run {run}: time '{value}' is not RFC 3339")]
    BadTime {
        /// The run.
        run: String,
        /// The text.
        value: String,
    },
}

impl MergeError {
    /// Whether the error is the user's selection (exit 2) rather than a failure.
    pub fn is_usage(&self) -> bool {
        !matches!(self, MergeError::Store(_) | MergeError::Histogram { .. } | MergeError::BadTime { .. })
    }
}

/// One shard's run, read whole from a store.
#[derive(Clone, Debug)]
pub struct ShardRun {
    /// The run.
    pub run: RunRow,
    /// Its steps.
    pub steps: Vec<StepRow>,
    /// Its figures.
    pub metrics: Vec<MetricRow>,
    /// Its per-second samples.
    pub samples: Vec<SampleRow>,
    /// Its histograms.
    pub histograms: Vec<HistogramRow>,
    /// Its text notes (verdicts).
    pub notes: Vec<NoteRow>,
}

impl ShardRun {
    /// Reads run `key` (id or uuid prefix) of `store`.
    pub fn load(store: &Store, key: &str) -> Result<ShardRun, MergeError> {
        let run = store.run(key)?;
        Ok(ShardRun {
            steps: store.steps(run.id)?,
            metrics: store.metrics(run.id)?,
            samples: store.samples(run.id)?,
            histograms: store.histograms(run.id)?,
            notes: store.notes(run.id)?,
            run,
        })
    }

    /// Reads the newest run of `store` (a shard's own results file holds one).
    pub fn latest(store: &Store) -> Result<Option<ShardRun>, MergeError> {
        let newest = store.runs(&storbench_results::RunFilter { limit: Some(1), ..Default::default() })?;
        match newest.first() {
            Some(r) => ShardRun::load(store, &r.id.to_string()).map(Some),
            None => Ok(None),
        }
    }

    /// Reads every run of `store`, oldest first (a shard's file from a
    /// sharded plan holds one run per cell).
    pub fn all(store: &Store) -> Result<Vec<ShardRun>, MergeError> {
        let mut runs = store.runs(&storbench_results::RunFilter::default())?;
        runs.sort_by_key(|r| r.id);
        runs.iter().map(|r| ShardRun::load(store, &r.id.to_string())).collect()
    }

    /// The shard identity in the run's config (`"shard": "i/N"`), if any.
    pub fn shard(&self) -> Option<Shard> {
        self.run.config.get("shard").and_then(Value::as_str).and_then(|s| Shard::parse(s).ok())
    }

    fn name(&self) -> String {
        self.run.short().to_string()
    }
}

/// One merged step, ready to write.
#[derive(Debug)]
pub struct MergedStep {
    /// Index.
    pub idx: i64,
    /// Label (the first shard's).
    pub label: String,
    /// Parameters (the first shard's).
    pub params: Value,
    /// Earliest shard start.
    pub started_at: String,
    /// Latest shard end.
    pub finished_at: String,
    /// Figures, samples and merged histograms.
    pub report: StepReport,
    /// Text notes: name → text (module docs).
    pub notes: Vec<(String, String)>,
}

/// N shard runs merged: what [`write_merged`] records.
#[derive(Debug)]
pub struct Merged {
    /// The shards' kind.
    pub kind: String,
    /// `complete` only if every shard is there and complete.
    pub status: Status,
    /// Missing or unfinished shards, steps some shards lack.
    pub warnings: Vec<String>,
    /// How figures were combined where not by adding.
    pub notes: Vec<String>,
    /// The merged steps.
    pub steps: Vec<MergedStep>,
    /// The merged run's config: the shards and the first shard's config.
    pub config: Value,
    /// The first shard's environment.
    pub env: Value,
    /// The plan and cell the shards ran (the first shard's tags), so the
    /// merged runs of a sharded plan report as that plan.
    pub plan: Option<String>,
    /// See `plan`.
    pub cell: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum How {
    Sum,
    Max,
    Mean,
}

fn combine(how: How, vals: &[f64]) -> f64 {
    match how {
        How::Sum => vals.iter().sum(),
        How::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        How::Mean => vals.iter().sum::<f64>() / vals.len().max(1) as f64,
    }
}

/// Whether `name` is a server-side figure of a `kind` run (module docs).
fn server_side(kind: &str, name: &str, tpm_from_client: bool) -> bool {
    name.ends_with(".server")
        || name.ends_with(".districts")
        || (kind == "tpcc" && (name == "nopm" || (name == "tpm" && !tpm_from_client)))
        // Every shard's wait-event sampler looks at the same server's
        // sessions: its counts are taken once (its shares, ratios, average).
        || matches!(name, "wait.aas" | "wait.samples" | "wait.missed")
}

fn how_for_unit(unit: Option<Unit>) -> How {
    match unit {
        Some(Unit::Percent | Unit::Ratio | Unit::Us | Unit::Ms) => How::Mean,
        Some(Unit::S) => How::Max,
        _ => How::Sum,
    }
}

fn epoch_ms(run: &ShardRun, t: &str) -> Result<i64, MergeError> {
    DateTime::parse_from_rfc3339(t)
        .map(|d| d.timestamp_millis())
        .map_err(|_| MergeError::BadTime { run: run.name(), value: t.to_string() })
}

/// Checks the shards' identities: each `i/N` once and one `N`. Returns
/// warnings for shards without identity or missing, and whether any is missing.
fn check_identities(shards: &[ShardRun]) -> Result<(Vec<String>, bool), MergeError> {
    let mut warnings = Vec::new();
    let mut seen: BTreeMap<u32, &ShardRun> = BTreeMap::new();
    let mut count: Option<(u32, &ShardRun)> = None;
    for s in shards {
        let Some(id) = s.shard() else {
            return Err(MergeError::NotSharded(s.name()));
        };
        let clash = |o: &ShardRun| MergeError::ShardClash {
            a: o.name(),
            sa: o.shard().map(|x| x.to_string()).unwrap_or_default(),
            b: s.name(),
            sb: id.to_string(),
        };
        if let Some((n, o)) = count {
            if n != id.count {
                return Err(clash(o));
            }
        } else {
            count = Some((id.count, s));
        }
        if let Some(o) = seen.insert(id.index, s) {
            return Err(clash(o));
        }
    }
    let mut any_missing = false;
    if let Some((n, _)) = count {
        let missing: Vec<String> =
            (0..n).filter(|i| !seen.contains_key(i)).map(|i| format!("{i}/{n}")).collect();
        if !missing.is_empty() {
            any_missing = true;
            warnings.push(format!(
                "shard {} missing: the merged run covers {} of {n} shards",
                missing.join(", "),
                seen.len()
            ));
        }
    }
    Ok((warnings, any_missing))
}

/// Merges shard runs (module docs for how each figure combines).
pub fn merge(shards: &[ShardRun]) -> Result<Merged, MergeError> {
    let first = shards.first().ok_or(MergeError::Empty)?;
    let mut uuids = BTreeSet::new();
    for s in shards {
        if !uuids.insert(s.run.uuid.as_str()) {
            return Err(MergeError::DuplicateRun(s.name()));
        }
        if s.run.kind != first.run.kind {
            return Err(MergeError::KindMismatch {
                run: s.name(),
                kind: s.run.kind.clone(),
                first: first.run.kind.clone(),
            });
        }
    }
    let kind = first.run.kind.clone();
    let (mut warnings, missing) = check_identities(shards)?;
    let mut status = if missing { Status::Failed } else { Status::Complete };
    for s in shards {
        if s.run.status != Status::Complete {
            warnings.push(format!("run {} (shard {}) is {}", s.name(), shard_text(s), s.run.status.as_str()));
            status = match (status, s.run.status) {
                (Status::Failed, _) | (_, Status::Failed) => Status::Failed,
                _ => Status::Interrupted,
            };
        }
    }
    let tpm_from_client = shards.iter().any(|s| {
        [&s.run.env, &s.run.config]
            .iter()
            .filter_map(|v| v.get("tpm_source").and_then(Value::as_str))
            .any(|t| t.starts_with("client"))
    });
    let mut notes = BTreeSet::new();
    let idxs: BTreeSet<i64> = shards.iter().flat_map(|s| s.steps.iter().map(|st| st.idx)).collect();
    let mut steps = Vec::new();
    for idx in idxs {
        let having: Vec<(&ShardRun, &StepRow)> =
            shards.iter().filter_map(|s| s.steps.iter().find(|st| st.idx == idx).map(|st| (s, st))).collect();
        if having.len() < shards.len() {
            warnings.push(format!(
                "step {idx} ({}): recorded by {} of {} shard runs",
                having[0].1.label,
                having.len(),
                shards.len()
            ));
            if status == Status::Complete {
                status = Status::Interrupted;
            }
        }
        steps.push(merge_step(&kind, idx, &having, tpm_from_client, &mut notes)?);
    }
    let mut from = Vec::new();
    for s in shards {
        from.push(json!({
            "uuid": s.run.uuid, "shard": s.shard().map(|x| x.to_string()),
            "status": s.run.status.as_str(), "started_at": s.run.started_at, "label": s.run.label,
        }));
    }
    let notes: Vec<String> = notes.into_iter().collect();
    // The shards' own config (its axes too, so a merged plan cell reports
    // as one host's would), less the shard's identity, plus where it came from.
    let mut config = first.run.config.clone();
    if let Some(o) = config.as_object_mut() {
        o.remove("shard");
        o.insert("merged_from".into(), json!(from));
        o.insert("merge".into(), json!({ "warnings": warnings, "notes": notes }));
    }
    Ok(Merged {
        kind,
        status,
        warnings,
        notes,
        steps,
        config,
        env: first.run.env.clone(),
        plan: first.run.plan.clone(),
        cell: first.run.cell.clone(),
    })
}

fn shard_text(s: &ShardRun) -> String {
    s.shard().map(|x| x.to_string()).unwrap_or_else(|| "?".into())
}

fn merge_step(
    kind: &str,
    idx: i64,
    having: &[(&ShardRun, &StepRow)],
    tpm_from_client: bool,
    notes: &mut BTreeSet<String>,
) -> Result<MergedStep, MergeError> {
    let mut report = StepReport::default();
    // Histograms first: their names decide which figures are recomputed.
    let mut hists: BTreeMap<&str, LatencyHistogram> = BTreeMap::new();
    for (s, _) in having {
        for h in s.histograms.iter().filter(|h| h.step_idx == idx) {
            let one = LatencyHistogram::from_bytes(&h.hdr).map_err(|e| MergeError::Histogram {
                run: s.name(),
                step: idx,
                name: h.name.clone(),
                message: e.to_string(),
            })?;
            hists.entry(h.name.as_str()).or_default().merge(&one);
        }
    }
    let derived = |name: &str| {
        hists.keys().any(|h| {
            name.strip_prefix(h)
                .and_then(|r| r.strip_prefix('.'))
                .is_some_and(|suf| LATENCY_SUFFIXES.contains(&suf))
        })
    };
    // Figures, in the first shard's order, grouped by name.
    let mut order: Vec<&str> = Vec::new();
    let mut figs: HashMap<&str, (Vec<f64>, &str)> = HashMap::new();
    for (s, _) in having {
        for m in s.metrics.iter().filter(|m| m.step_idx == idx) {
            figs.entry(m.name.as_str())
                .or_insert_with(|| {
                    order.push(m.name.as_str());
                    (Vec::new(), m.unit.as_str())
                })
                .0
                .push(m.value);
        }
    }
    let mut units: HashMap<&str, Option<Unit>> = HashMap::new();
    for name in &order {
        let (vals, unit_text) = &figs[name];
        let unit = Unit::parse(unit_text);
        units.insert(name, unit);
        if derived(name) || *name == "tpm.per_user" {
            continue;
        }
        let how = if server_side(kind, name, tpm_from_client) {
            if vals.len() > 1 {
                notes.insert(format!("{name}: server-side, taken once (the largest of the shards)"));
            }
            How::Max
        } else {
            how_for_unit(unit)
        };
        if how == How::Mean && vals.len() > 1 {
            notes.insert(format!("{name}: mean over shards ({unit_text} does not add)"));
        }
        report.figure(*name, combine(how, vals), unit.unwrap_or(Unit::Count));
    }
    for (name, h) in &hists {
        report.latency(name, h);
        let clamped = format!("{name}.clamped");
        if let Some((vals, _)) = figs.get(clamped.as_str()) {
            if let Some(f) = report.figures.iter_mut().find(|f| f.name == clamped) {
                f.value = vals.iter().sum();
            }
        }
    }
    if figs.contains_key("tpm.per_user") {
        if let (Some(tpm), Some(users)) = (report.get("tpm"), report.get("users")) {
            report.figure("tpm.per_user", tpm / users.max(1.0), Unit::PerMin);
        }
    }
    // Samples on wall-clock seconds from the earliest shard's start.
    let starts: Vec<i64> =
        having.iter().map(|(s, st)| epoch_ms(s, &st.started_at)).collect::<Result<_, _>>()?;
    let base = starts.iter().copied().min().unwrap_or(0);
    // (name, second) → per shard: the values of that shard in that second.
    let mut cells: BTreeMap<(&str, i64), Vec<Vec<f64>>> = BTreeMap::new();
    for (k, ((s, _), start)) in having.iter().zip(&starts).enumerate() {
        for x in s.samples.iter().filter(|x| x.step_idx == idx) {
            let sec = ((start + x.t_ms - base) as f64 / 1000.0).round() as i64;
            let per_shard =
                cells.entry((x.name.as_str(), sec)).or_insert_with(|| vec![Vec::new(); having.len()]);
            per_shard[k].push(x.value);
        }
    }
    for ((name, sec), per_shard) in cells {
        let how = if QUANTILE_SUFFIXES.iter().any(|q| name.ends_with(q)) {
            notes.insert(format!("{name} (per second): the largest shard's, an upper bound of the whole's"));
            How::Max
        } else if server_side(kind, name, tpm_from_client) && !is_client_series(kind, name) {
            How::Max
        } else if name.ends_with(".mean") || name == "lat.mean" {
            How::Mean
        } else {
            how_for_unit(units.get(name).copied().flatten())
        };
        // Two samples of one shard that round to one second are one reading.
        let vals: Vec<f64> =
            per_shard.iter().filter(|v| !v.is_empty()).map(|v| combine(How::Mean, v)).collect();
        report.sample((sec.max(0) * 1000) as u64, name, combine(how, &vals));
    }
    let (first_step, started_at) = (having[0].1, pick_time(having, |st| &st.started_at, false)?);
    let finished_at = pick_time(having, |st| &st.finished_at, true)?;
    Ok(MergedStep {
        idx,
        label: first_step.label.clone(),
        params: first_step.params.clone(),
        started_at,
        finished_at,
        report,
        notes: merge_notes(idx, having),
    })
}

/// A step's notes over the shards that have it: one text where they agree,
/// else each shard's after its identity, in shard order.
fn merge_notes(idx: i64, having: &[(&ShardRun, &StepRow)]) -> Vec<(String, String)> {
    // Per note name: each shard's (index, identity, text).
    type Texts<'a> = Vec<(Option<u32>, String, &'a str)>;
    let mut by_name: BTreeMap<&str, Texts<'_>> = BTreeMap::new();
    for (s, _) in having {
        for n in s.notes.iter().filter(|n| n.step_idx == idx) {
            let at = s.shard().map(|x| x.index);
            by_name.entry(n.name.as_str()).or_default().push((at, shard_text(s), n.text.as_str()));
        }
    }
    by_name
        .into_iter()
        .map(|(name, mut texts)| {
            texts.sort_by_key(|t| t.0);
            let text = if texts.iter().all(|t| t.2 == texts[0].2) {
                texts[0].2.to_string()
            } else {
                texts.iter().map(|(_, sh, t)| format!("{sh}: {t}")).collect::<Vec<_>>().join("; ")
            };
            (name.to_string(), text)
        })
        .collect()
}

/// `tpm` / `nopm` samples of a `tpcc` run are client counts per second
/// (from `tps`), so they add even though the figures of those names do not.
fn is_client_series(kind: &str, name: &str) -> bool {
    kind == "tpcc" && (name == "tpm" || name == "nopm")
}

/// The earliest (or, with `latest`, the latest) of the steps' times.
fn pick_time(
    having: &[(&ShardRun, &StepRow)],
    pick: impl Fn(&StepRow) -> &String,
    latest: bool,
) -> Result<String, MergeError> {
    let mut best: Option<(i64, &String)> = None;
    for (s, st) in having {
        let t = epoch_ms(s, pick(st))?;
        if best.is_none_or(|(b, _)| if latest { t > b } else { t < b }) {
            best = Some((t, pick(st)));
        }
    }
    Ok(best.map(|(_, s)| s.clone()).unwrap_or_default())
}

/// Records `merged` as a new run of `store` labelled `label`, with the
/// merged status. Returns the new run.
pub fn write_merged(store: &mut Store, merged: &Merged, label: &str) -> Result<RunRow, MergeError> {
    let run = store.begin_run(&NewRun {
        kind: merged.kind.clone(),
        label: label.to_string(),
        config: merged.config.clone(),
        env: merged.env.clone(),
        plan: merged.plan.clone(),
        cell: merged.cell.clone(),
    })?;
    for st in &merged.steps {
        if let Err(e) = store.write_step(
            run.id,
            st.idx,
            &st.label,
            &st.params,
            &st.started_at,
            &st.finished_at,
            &st.report,
        ) {
            // Never leave a half-written merge looking like a run in progress.
            let _ = store.finish_run(run.id, Status::Failed);
            return Err(e.into());
        }
        let notes: Vec<(&str, &str)> = st.notes.iter().map(|(k, t)| (k.as_str(), t.as_str())).collect();
        if let Err(e) = store.write_notes(run.id, st.idx, &notes) {
            let _ = store.finish_run(run.id, Status::Failed);
            return Err(e.into());
        }
    }
    store.finish_run(run.id, merged.status)?;
    Ok(store.run(&run.id.to_string())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_side_figures_are_told_by_name_and_source() {
        assert!(server_side("tpcc", "nopm", false));
        assert!(server_side("tpcc", "tpm", false));
        assert!(!server_side("tpcc", "tpm", true), "TPM counted by the client adds");
        assert!(!server_side("tpcc", "tpm.client", false));
        assert!(!server_side("tpcb", "tpm", false), "only tpcc's tpm is the server's");
        assert!(server_side("tpcb", "tps.server", false));
        assert!(server_side("io", "x.districts", false));
        assert!(server_side("tpcb", "wait.aas", false), "every shard sees the server's sessions");
        assert!(!server_side("tpcb", "wait.share.Lock.tuple", false), "a share is averaged");
    }

    #[test]
    fn units_decide_how_figures_combine() {
        assert_eq!(how_for_unit(Some(Unit::PerS)), How::Sum);
        assert_eq!(how_for_unit(Some(Unit::Count)), How::Sum);
        assert_eq!(how_for_unit(Some(Unit::Percent)), How::Mean);
        assert_eq!(how_for_unit(Some(Unit::Us)), How::Mean);
        assert_eq!(how_for_unit(Some(Unit::S)), How::Max);
        assert_eq!(combine(How::Sum, &[1.0, 2.0, 4.0]), 7.0);
        assert_eq!(combine(How::Max, &[1.0, 4.0, 2.0]), 4.0);
        assert_eq!(combine(How::Mean, &[1.0, 2.0, 6.0]), 3.0);
    }
}
