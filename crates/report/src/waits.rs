//! The database's own wait events as a run recorded them
//! (`storbench_db::waits`: `wait.share.CLASS` figures and per-second
//! samples, `wait.aas`): the top classes of a step in words
//! ("Lock:transactionid 74 %, IO:WALSync 8 % of 6.5 active sessions"), the
//! report's line per step, and the per-second bands of the HTML report's
//! stacked chart. Only what was recorded; nothing here samples or prints.

use std::collections::BTreeMap;

use crate::model::{Section, StepData};

/// The prefix of a class's share (as `storbench_db::waits::SHARE`).
pub const SHARE: &str = "wait.share.";
/// Average active sessions (as `storbench_db::waits::AAS`).
pub const AAS: &str = "wait.aas";
/// Classes named in a step's line; the rest are left out.
pub const TOP: usize = 3;
/// Classes drawn as their own band in the chart; the rest are "other".
pub const BANDS: usize = 6;

/// `IO.WALSync` as people read it: `IO:WALSync`.
pub fn display(class: &str) -> String {
    class.replacen('.', ":", 1)
}

/// The classes' shares among `figures` (name, value), largest first, named
/// as people read them.
pub fn shares<'a>(figures: impl IntoIterator<Item = (&'a str, f64)>) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = figures
        .into_iter()
        .filter_map(|(k, x)| Some((display(k.strip_prefix(SHARE)?), x)))
        .filter(|(_, x)| x.is_finite() && *x > 0.0)
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// "Lock:transactionid 74 %, Lock:tuple 10 %, IO:WALSync 8 % of 6.5 active
/// sessions": the [`TOP`] classes of a step's figures; none when it has no
/// shares (not sampled, or no session was active).
pub fn words<'a>(figures: impl IntoIterator<Item = (&'a str, f64)> + Clone) -> Option<String> {
    let all = shares(figures.clone());
    if all.is_empty() {
        return None;
    }
    let top: Vec<String> = all.iter().take(TOP).map(|(c, x)| format!("{c} {:.0} %", x * 100.0)).collect();
    let aas = figures.into_iter().find(|(k, _)| *k == AAS).map(|(_, v)| v);
    let of = aas.map(|a| format!(" of {a:.1} active sessions")).unwrap_or_default();
    Some(format!("{}{of}", top.join(", ")))
}

/// A recorded step's words ([`words`] of its figures).
pub fn step_words(s: &StepData) -> Option<String> {
    words(s.metrics.iter().map(|(k, v)| (k.as_str(), v.0)))
}

/// The report's lines for a section: per configuration (its first run),
/// `clients=8: Lock:transactionid 74 %, …`, prefixed with the
/// configuration when the section has several.
pub(crate) fn section_lines(s: &Section<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for g in &s.groups {
        let Some(run) = g.runs.first() else { continue };
        for step in &run.steps {
            let Some(w) = step_words(step) else { continue };
            let head = if s.groups.len() > 1 { format!("{} ", s.short_label(g)) } else { String::new() };
            out.push(format!("{head}{}: {w}", step.label));
        }
    }
    out
}

/// The per-second bands of a run's steps laid end to end (step `i`'s
/// second `t` at `offsets[i] + t`, as the time chart lays them): the
/// [`BANDS`] classes with the largest shares over the run and `other`,
/// each as (seconds, share) points; empty when nothing was sampled.
pub(crate) fn bands(steps: &[StepData], offsets: &[f64]) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut total: BTreeMap<&str, f64> = BTreeMap::new();
    for s in steps {
        for (k, pts) in s.samples.iter().filter(|(k, _)| k.starts_with(SHARE)) {
            *total.entry(k.as_str()).or_default() += pts.iter().map(|p| p.1).sum::<f64>();
        }
    }
    if total.is_empty() {
        return Vec::new();
    }
    let mut order: Vec<(&str, f64)> = total.into_iter().collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1));
    let kept: Vec<&str> = order.iter().take(BANDS).map(|x| x.0).collect();
    let mut names: Vec<String> = kept.iter().map(|k| display(&k[SHARE.len()..])).collect();
    let other = order.len() > BANDS;
    if other {
        names.push("other".into());
    }
    let mut out: Vec<(String, Vec<(f64, f64)>)> = names.into_iter().map(|n| (n, Vec::new())).collect();
    for (s, offset) in steps.iter().zip(offsets) {
        // The seconds this step has shares for, each with every band's share.
        let mut secs: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
        for (k, pts) in s.samples.iter().filter(|(k, _)| k.starts_with(SHARE)) {
            let band = kept.iter().position(|c| c == k).unwrap_or(BANDS);
            for (t, v) in pts {
                secs.entry(*t).or_insert_with(|| vec![0.0; out.len()])[band.min(out.len() - 1)] += v;
            }
        }
        for (t, vals) in secs {
            for (i, v) in vals.into_iter().enumerate() {
                out[i].1.push((offset + t as f64 / 1000.0, v));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_name_the_top_classes_largest_first_and_the_sessions() {
        let f = [
            ("wait.share.CPU", 0.04),
            ("wait.share.Lock.transactionid", 0.74),
            ("wait.share.IO.WALSync", 0.075),
            ("wait.share.Lock.tuple", 0.1),
            ("wait.aas", 6.53),
            ("tps.client", 715.0),
        ];
        assert_eq!(
            words(f.iter().copied()).unwrap(),
            "Lock:transactionid 74 %, Lock:tuple 10 %, IO:WALSync 8 % of 6.5 active sessions"
        );
        assert_eq!(words([("tps.client", 1.0)].iter().copied()), None);
    }

    #[test]
    fn bands_keep_the_largest_classes_and_put_the_rest_in_other() {
        let mut s = StepData {
            idx: 0,
            label: "clients=8".into(),
            params: serde_json::json!({}),
            metrics: BTreeMap::new(),
            samples: BTreeMap::new(),
            notes: BTreeMap::new(),
        };
        for i in 0..8 {
            let v = (i + 1) as f64 / 36.0;
            s.samples.insert(format!("{SHARE}LWLock.L{i}"), vec![(1000, v), (2000, v)]);
        }
        let b = bands(&[s], &[0.0]);
        assert_eq!(b.len(), BANDS + 1);
        assert_eq!(b[0].0, "LWLock:L7");
        assert_eq!(b[BANDS].0, "other");
        // The two smallest (1/36 and 2/36) are "other".
        assert!((b[BANDS].1[0].1 - 3.0 / 36.0).abs() < 1e-12);
        let sum: f64 = b.iter().map(|x| x.1[0].1).sum();
        assert!((sum - 1.0).abs() < 1e-12);
    }
}
