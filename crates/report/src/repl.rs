//! The replication headline (S3): in a section whose runs were made on a
//! managed primary with standbys at more than one `synchronous_commit`
//! level, each level's headline figure (TPS, NOPM) and p99 latency relative
//! to `local` per link RTT (and per whatever else the cells vary, such as
//! the standby's WAL medium), and the model for one client,
//! `1 / (t_local + RTT + t_standby)`, beside the measured point. Group
//! commit lets more clients share one wait, so their ratio to `local`
//! rises above the model's; the headline says from which load level.
//!
//! Everything comes from what the runs recorded: the sync level from the
//! server's own settings (`env.db.settings.synchronous_commit`, what was in
//! effect), else the instance's (`env.db.managed.replication`), else the
//! cell's `sync` axis; the RTT from the first standby's link
//! (`standbys[0].link.rtt_us`; no link: 0); `t_local` from the `local`
//! run's mean latency at one client; `t_standby` from the standby's lag at
//! one client (`repl.s1.flush_lag.p50` for `on`, `write_lag` for
//! `remote_write`, `replay_lag` for `remote_apply`) less the RTT: the
//! level's own run's, where one commit at a time waits for it, else the
//! `local` run's (there the standby is out of the commit path and flushes
//! in batches: 2.0 ms of flush lag against 1.5 ms under `on` over the same
//! 1 ms link in the quick plan), else 0 with a note. This module computes
//! and words; the chart is drawn in `html.rs`.

use serde::Serialize;
use serde_json::Value;

use crate::model::{Group, Report, Section};
use crate::table::Table;
use crate::units::fmt_num;
use crate::units::with_unit;

/// `synchronous_commit` levels in the order a study reads them.
const LEVELS: [&str; 5] = ["off", "local", "remote_write", "on", "remote_apply"];

/// A load level's ratio to `local` counts as above the one-client model
/// when it exceeds the model's ratio by this factor (the model is a
/// sketch; 20 % keeps noise from being called group commit).
const DIVERGES: f64 = 1.2;

/// One `synchronous_commit` level at one load level, against `local`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplLevel {
    /// The step label (`clients=8`).
    pub step: String,
    /// Its load (clients, users), if numeric.
    pub load: Option<f64>,
    /// The headline figure's median.
    pub value: f64,
    /// `value` over `local`'s at the same load.
    pub ratio: Option<f64>,
    /// p99 latency's median, µs.
    pub p99_us: Option<f64>,
    /// p99 over `local`'s at the same load.
    pub p99_ratio: Option<f64>,
}

/// The model for one client at a level that waits for a standby:
/// `1 / (t_local + RTT + t_standby)` transactions per second.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplModel {
    /// Mean latency of one client at `local`, µs.
    pub t_local_us: f64,
    /// The link's round trip as asked, µs.
    pub rtt_us: f64,
    /// What the standby adds beyond the round trip (write, flush or
    /// apply, and the proxy's own floor), µs.
    pub t_standby_us: f64,
    /// The metric `t_standby_us` came from and whose run
    /// (`repl.s1.flush_lag.p50 (on run)`), or None when nothing was
    /// recorded and 0 was taken.
    pub t_standby_from: Option<String>,
    /// The model's transactions per second.
    pub tps: f64,
    /// The model's ratio to `local` (`t_local / (t_local + RTT + t_standby)`).
    /// The measured point beside it is the row's `one_client_tps`.
    pub ratio: f64,
}

/// One `synchronous_commit` level in a block.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplRow {
    /// The level (`on`).
    pub sync: String,
    /// Whether commits wait for a standby at this level.
    pub waits: bool,
    /// The column (group) label.
    pub group: String,
    /// Per load level, in load order.
    pub levels: Vec<ReplLevel>,
    /// Transactions per second of one client (`tps` at the step of load 1).
    pub one_client_tps: Option<f64>,
    /// The model for one client, for a level that waits.
    pub model: Option<ReplModel>,
    /// The first load above one client whose ratio to `local` is above
    /// the model's by more than [`DIVERGES`]: where group commit shares
    /// the wait.
    pub diverges_at: Option<ReplLevel>,
}

/// The levels of one RTT and placement, `local` among them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplBlock {
    /// What else the cells vary (`swal=fast`), empty when nothing.
    pub rest: String,
    /// The link's round trip, µs (0: no delay proxy).
    pub rtt_us: u64,
    /// The levels, `local` first, then in [`LEVELS`] order.
    pub rows: Vec<ReplRow>,
}

/// A section's replication headline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplStudy {
    /// The section's plan.
    pub plan: Option<String>,
    /// The section's kind.
    pub kind: String,
    /// The headline metric (`tps`, `nopm.districts`).
    pub figure: String,
    /// What people call it (`TPS`).
    pub figure_label: String,
    /// The metric of the latency compared (`lat.p99`).
    pub p99: String,
    /// One block per RTT and placement that has a `local` run.
    pub blocks: Vec<ReplBlock>,
    /// What the reader needs to judge the model (nothing recorded, ...).
    pub notes: Vec<String>,
}

/// Where one group sits in a study.
#[derive(Debug, PartialEq)]
struct Place {
    sync: String,
    waits: bool,
    rtt_us: u64,
    rest: String,
}

fn text(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// The sync level, link and other axes a group's first run recorded; None
/// for runs not made on a primary with standbys.
fn place(g: &Group) -> Option<Place> {
    let run = &g.runs.first()?.run;
    let repl = run.env.pointer("/db/managed/replication")?;
    let first = repl.get("standbys")?.as_array()?.first()?;
    let settings = run.env.pointer("/db/settings");
    let axes = run.config.get("axes");
    // `pg up --standby N` without `--sync` leaves PostgreSQL's default.
    let sync = text(settings.and_then(|s| s.get("synchronous_commit")))
        .or(text(repl.get("synchronous_commit")))
        .or(text(axes.and_then(|a| a.get("sync"))))
        .unwrap_or("on")
        .to_string();
    let names = text(settings.and_then(|s| s.get("synchronous_standby_names")))
        .or(text(repl.get("synchronous_standby_names")));
    let waits = matches!(sync.as_str(), "remote_write" | "on" | "remote_apply")
        && names.is_none_or(|n| !n.trim().is_empty());
    let rtt_us = first.pointer("/link/rtt_us").and_then(Value::as_u64).unwrap_or(0);
    // The other axes: not the level, not the link, whatever their names.
    let rest = axes
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    let v = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                    let link = v == sync
                        || v.contains("rtt=")
                        || storbench_metrics::units::parse_duration(&v).is_ok()
                        || matches!(k.as_str(), "sync" | "rtt" | "link");
                    (!link).then(|| format!("{k}={v}"))
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    Some(Place { sync, waits, rtt_us, rest })
}

fn level_rank(l: &str) -> usize {
    LEVELS.iter().position(|x| *x == l).unwrap_or(LEVELS.len())
}

/// The standby lag a level waits for, and what the model calls it.
fn standby_term(sync: &str) -> (&'static str, &'static str) {
    match sync {
        "remote_write" => ("write_lag", "t_standby_write"),
        "remote_apply" => ("replay_lag", "t_standby_apply"),
        _ => ("flush_lag", "t_standby_flush"),
    }
}

/// The median of `metric` at `step`, when recorded.
fn med(g: &Group, step: &str, metric: &str) -> Option<f64> {
    let s = g.stat(step, metric);
    (s.n() > 0).then(|| s.median())
}

fn ratio_of(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The replication headline of a section, when its groups were made on a
/// primary with standbys and at least one RTT has `local` and another level.
pub(crate) fn study(s: &Section<'_>) -> Option<ReplStudy> {
    if s.spec().setup {
        return None;
    }
    let head = s.headline_figures().into_iter().next()?;
    let p99 = format!("{}.p99", s.spec().latency_prefix);
    let mut placed: Vec<(Place, &Group)> = s.groups.iter().filter_map(|g| Some((place(g)?, *g))).collect();
    placed.sort_by(|a, b| {
        (&a.0.rest, a.0.rtt_us, level_rank(&a.0.sync)).cmp(&(&b.0.rest, b.0.rtt_us, level_rank(&b.0.sync)))
    });
    let levels = s.load_levels();
    let one = levels.iter().find(|l| l.1 == Some(1.0)).map(|l| l.0.clone());
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < placed.len() {
        let key = (placed[i].0.rest.clone(), placed[i].0.rtt_us);
        let mut j = i;
        while j < placed.len() && (placed[j].0.rest.clone(), placed[j].0.rtt_us) == key {
            j += 1;
        }
        let members = &placed[i..j];
        i = j;
        let Some((_, local)) = members.iter().find(|m| m.0.sync == "local") else { continue };
        if members.len() < 2 {
            continue;
        }
        let t_local = one.as_deref().and_then(|st| med(local, st, "lat.mean"));
        let mut rows = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        // `local` first: the base every other row is read against.
        let ordered = members
            .iter()
            .filter(|m| m.0.sync == "local")
            .take(1)
            .chain(members.iter().filter(|m| m.0.sync != "local"));
        for (p, g) in ordered {
            if seen.contains(&p.sync.as_str()) {
                continue;
            }
            seen.push(&p.sync);
            let lv = level_rows(&levels, g, local, &head.metric, &p99);
            let model = match (p.waits, one.as_deref(), t_local) {
                (true, Some(step), Some(t_local)) => Some(commit_model(p, g, local, step, t_local)),
                _ => None,
            };
            let diverges_at = model.as_ref().and_then(|m| {
                lv.iter()
                    .find(|l| {
                        l.load.is_some_and(|x| x > 1.0) && l.ratio.is_some_and(|r| r > m.ratio * DIVERGES)
                    })
                    .cloned()
            });
            rows.push(ReplRow {
                sync: p.sync.clone(),
                waits: p.waits,
                group: s.short_label(g),
                levels: lv,
                one_client_tps: one.as_deref().and_then(|st| med(g, st, "tps")),
                model,
                diverges_at,
            });
        }
        blocks.push(ReplBlock { rest: key.0, rtt_us: key.1, rows });
    }
    if blocks.is_empty() {
        return None;
    }
    let notes = study_notes(s, &blocks, one.is_some());
    Some(ReplStudy {
        plan: s.plan.map(str::to_string),
        kind: s.kind.to_string(),
        figure: head.metric.clone(),
        figure_label: head.label.to_string(),
        p99,
        blocks,
        notes,
    })
}

/// Each load level's figure and p99 for one group, with their ratios to
/// the `local` group's at the same step.
fn level_rows(
    levels: &[(String, Option<f64>)],
    g: &Group,
    local: &Group,
    metric: &str,
    p99: &str,
) -> Vec<ReplLevel> {
    levels
        .iter()
        .filter_map(|(step, load)| {
            let value = med(g, step, metric)?;
            let p99_us = med(g, step, p99);
            Some(ReplLevel {
                step: step.clone(),
                load: *load,
                value,
                ratio: ratio_of(Some(value), med(local, step, metric)),
                p99_us,
                p99_ratio: ratio_of(p99_us, med(local, step, p99)),
            })
        })
        .collect()
}

/// The one-client commit model `1 / (t_local + RTT + t_standby)` for a
/// synchronous level, at the one-client `step`.
fn commit_model(p: &Place, g: &Group, local: &Group, step: &str, t_local: f64) -> ReplModel {
    // The standby's turnaround while this level's one client waits for
    // it; under `local` the standby is out of the commit path and
    // batches, so its lag there is only the fallback.
    let (lag, _) = standby_term(&p.sync);
    let metric = format!("repl.s1.{lag}.p50");
    let lag = med(g, step, &metric)
        .map(|ms| (ms, p.sync.as_str()))
        .or_else(|| med(local, step, &metric).map(|ms| (ms, "local")));
    let rtt = p.rtt_us as f64;
    let t_standby = lag.map(|(ms, _)| (ms * 1000.0 - rtt).max(0.0)).unwrap_or(0.0);
    let total = t_local + rtt + t_standby;
    ReplModel {
        t_local_us: t_local,
        rtt_us: rtt,
        t_standby_us: t_standby,
        t_standby_from: lag.map(|(_, run)| format!("{metric} ({run} run)")),
        tps: 1e6 / total,
        ratio: t_local / total,
    }
}

/// What the study's reader must know about how the model was drawn.
fn study_notes(s: &Section<'_>, blocks: &[ReplBlock], has_one_client: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let rows = || blocks.iter().flat_map(|b| &b.rows);
    if rows().any(|r| r.waits) && !has_one_client {
        notes.push("No step at one client: the model (one client) is not drawn.".into());
    }
    let mut missing: Vec<&str> = rows()
        .filter_map(|r| r.model.as_ref().filter(|m| m.t_standby_from.is_none()).map(|_| r.sync.as_str()))
        .collect();
    if !missing.is_empty() {
        missing.sort_by_key(|l| level_rank(l));
        missing.dedup();
        notes.push(format!(
            "No standby lag was recorded (repl.s1.*_lag, in the level's own run or the local one): t_standby is taken as 0 in the model for {}, so it is an upper bound.",
            missing.join(", ")
        ));
    }
    if s.kind != "tpcb" {
        notes.push(format!(
            "The model counts every {} transaction as one commit that waits; read-only ones do not, so the measured ratio may sit above it.",
            crate::kinds::spec_name(s, &s.spec())
        ));
    }
    notes
}

/// A ratio as a factor: `0.48×`.
fn x(r: Option<f64>) -> String {
    r.map(|r| format!("{}×", crate::units::ratio(r))).unwrap_or_else(|| "–".into())
}

fn us(v: f64) -> String {
    with_unit(v, "lat", "us")
}

/// A load level in words (`1 client`, `32 clients`), or the step label.
fn load_words(s: &Section<'_>, l: &ReplLevel) -> String {
    crate::units::level_words(s.row_axis(), &l.step, l.load)
}

/// The RTT and placement a block is about: `1 ms RTT (swal=fast)`.
fn block_words(b: &ReplBlock) -> String {
    let rtt =
        if b.rtt_us == 0 { "no added delay".to_string() } else { format!("{} RTT", us(b.rtt_us as f64)) };
    if b.rest.is_empty() {
        rtt
    } else {
        format!("{rtt} ({})", b.rest)
    }
}

/// One sentence per block: each level's headline figure and p99 relative
/// to `local` at the first and the last load, the model's ratio beside the
/// one-client figure, then the model's terms and where more clients
/// diverge above it.
pub(crate) fn sentences(s: &Section<'_>, st: &ReplStudy) -> Vec<String> {
    let name = crate::kinds::spec_name(s, &s.spec());
    let mut out = Vec::new();
    for b in &st.blocks {
        let Some(local) = b.rows.iter().find(|r| r.sync == "local") else { continue };
        let (Some(first), Some(last)) = (local.levels.first(), local.levels.last()) else { continue };
        let span = if local.levels.len() > 1 {
            format!("{} → {}", load_words(s, first), load_words(s, last))
        } else {
            load_words(s, first)
        };
        let pick = |r: &ReplRow, step: &str| r.levels.iter().find(|l| l.step == step).cloned();
        let mut clauses = Vec::new();
        for r in b.rows.iter().filter(|r| r.sync != "local") {
            let (a, z) = (pick(r, &first.step), pick(r, &last.step));
            // The model's ratio beside the one-client figure it models.
            let model = match &r.model {
                Some(m) if first.load == Some(1.0) => format!(" (model {})", x(Some(m.ratio))),
                _ => String::new(),
            };
            let both = |f: fn(&ReplLevel) -> Option<f64>, beside: &str| {
                let fa = x(a.as_ref().and_then(f));
                if local.levels.len() > 1 {
                    format!("{fa}{beside} → {}", x(z.as_ref().and_then(f)))
                } else {
                    format!("{fa}{beside}")
                }
            };
            clauses.push(format!(
                "{} {} {}, p99 {}",
                r.sync,
                both(|l| l.ratio, &model),
                st.figure_label,
                both(|l| l.p99_ratio, "")
            ));
        }
        let mut text = format!(
            "{name} over a standby at {}, relative to local at {span}: {}.",
            block_words(b),
            clauses.join("; ")
        );
        // The model's terms, for the level the issue names (`on`) or the
        // first that waits.
        let shown = b.rows.iter().filter(|r| r.model.is_some()).min_by_key(|r| {
            if r.sync == "on" {
                0
            } else {
                1 + level_rank(&r.sync)
            }
        });
        if let Some(r) = shown {
            let m = r.model.as_ref().expect("filtered");
            let (_, term) = standby_term(&r.sync);
            let measured = r.one_client_tps.map(|v| format!(", measured {}", fmt_num(v))).unwrap_or_default();
            let t_standby =
                if m.t_standby_from.is_some() { us(m.t_standby_us) } else { "0 (not recorded)".into() };
            let one = local.levels.iter().find(|l| l.load == Some(1.0)).map(|l| load_words(s, l));
            text.push_str(&format!(
                " Model at {}, {}: 1/(t_local {} + RTT {} + {term} {t_standby}) = {} TPS{measured}",
                one.unwrap_or_else(|| "1 client".into()),
                r.sync,
                us(m.t_local_us),
                us(m.rtt_us),
                fmt_num(m.tps)
            ));
            let over: Vec<String> = b
                .rows
                .iter()
                .filter_map(|r| {
                    let d = r.diverges_at.as_ref()?;
                    Some(format!(
                        "{} from {} ({} against the model's {})",
                        r.sync,
                        load_words(s, d),
                        x(d.ratio),
                        x(r.model.as_ref().map(|m| m.ratio))
                    ))
                })
                .collect();
            let more = b.rows.iter().any(|r| r.levels.iter().any(|l| l.load.is_some_and(|v| v > 1.0)));
            if !over.is_empty() {
                text.push_str(&format!(
                    "; group commit lets more clients share the wait, so they rise above the model: {}.",
                    over.join(", ")
                ));
            } else if more {
                let within = ((DIVERGES - 1.0) * 100.0).round();
                text.push_str(&format!("; more clients stay within {within} % of the model's ratio."));
            } else {
                text.push('.');
            }
        }
        out.push(text);
    }
    out
}

/// The table of a study: one row per placement, RTT and level; per load
/// level the headline figure and p99 relative to `local` (the `local` row
/// gives its own values), and the one-client model.
pub(crate) fn table(s: &Section<'_>, st: &ReplStudy) -> Table {
    let steps: Vec<(String, Option<f64>)> = s.load_levels();
    let unit = s.groups.iter().find_map(|g| g.unit(&st.figure)).unwrap_or_default();
    let mut header = vec!["standby".to_string(), "RTT".into(), "sync".into()];
    for (step, _) in &steps {
        header.push(format!("{} {step}", st.figure_label));
        header.push(format!("p99 {step}"));
    }
    header.push("model, 1 client".into());
    let mut rows = Vec::new();
    for b in &st.blocks {
        for r in &b.rows {
            let mut row = vec![
                if b.rest.is_empty() { "–".into() } else { b.rest.clone() },
                if b.rtt_us == 0 { "0".into() } else { us(b.rtt_us as f64) },
                r.sync.clone(),
            ];
            for (step, _) in &steps {
                let l = r.levels.iter().find(|l| &l.step == step);
                if r.sync == "local" {
                    row.push(l.map(|l| with_unit(l.value, &st.figure, &unit)).unwrap_or_else(|| "–".into()));
                    row.push(l.and_then(|l| l.p99_us).map(us).unwrap_or_else(|| "–".into()));
                } else {
                    row.push(x(l.and_then(|l| l.ratio)));
                    row.push(x(l.and_then(|l| l.p99_ratio)));
                }
            }
            row.push(match &r.model {
                Some(m) => format!("{} ({} TPS)", x(Some(m.ratio)), fmt_num(m.tps)),
                None if r.sync == "local" => "base".into(),
                None => "no wait".into(),
            });
            rows.push(row);
        }
    }
    let mut notes = vec![
        "The local row gives its own medians; the others are ratios to it at the same load. The model is 1/(t_local + RTT + t_standby) for one client: t_local the local run's mean latency at one client, t_standby the standby's lag at one client (the level's own run, else local's) less the RTT.".to_string(),
    ];
    notes.extend(st.notes.iter().cloned());
    Table {
        title: format!(
            "{} — synchronous commit relative to local ({}, p99 latency)",
            s.title(),
            st.figure_label
        ),
        header,
        rows,
        notes,
    }
}

impl Report {
    /// The replication headline of every section that has one: each
    /// `synchronous_commit` level relative to `local` per RTT, with the
    /// one-client model.
    pub fn replication(&self) -> Vec<ReplStudy> {
        self.sections().iter().filter_map(study).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunData, StepData};
    use serde_json::json;
    use storbench_results::{RunRow, Status};

    fn group(env: Value, axes: Value) -> Group {
        let run = RunRow {
            id: 1,
            uuid: "u".into(),
            kind: "tpcb".into(),
            label: "l".into(),
            started_at: String::new(),
            finished_at: None,
            status: Status::Complete,
            config: json!({ "axes": axes }),
            env,
            plan: Some("p".into()),
            cell: None,
        };
        Group {
            kind: "tpcb".into(),
            plan: None,
            label: "l".into(),
            runs: vec![RunData { run, steps: Vec::<StepData>::new(), sensitivity: Vec::new() }],
        }
    }

    #[test]
    fn a_place_comes_from_the_settings_in_effect_then_the_instance_then_the_axis() {
        let repl = json!({ "synchronous_commit": "on", "synchronous_standby_names": "FIRST 1 (s1)",
            "standbys": [{ "name": "s1", "link": { "rtt_us": 1000, "bw_bps": null, "jitter_us": 0 } }] });
        let axes = json!({ "sync": "on", "rtt": "1ms", "swal": "slow" });
        let g = group(json!({ "db": { "managed": { "replication": repl } } }), axes.clone());
        assert_eq!(
            place(&g),
            Some(Place { sync: "on".into(), waits: true, rtt_us: 1000, rest: "swal=slow".into() })
        );
        // What the server said was in effect wins over what was asked.
        let env = json!({ "db": { "settings": { "synchronous_commit": "local" }, "managed": { "replication": repl } } });
        assert_eq!(place(&group(env, axes.clone())).unwrap().sync, "local");
        // No standby named: `on` does not wait.
        let mut r2 = repl.clone();
        r2["synchronous_standby_names"] = json!("");
        let p = place(&group(json!({ "db": { "managed": { "replication": r2 } } }), axes.clone())).unwrap();
        assert!(!p.waits);
        // Made without --sync: PostgreSQL's default, `on`, waiting for
        // the standbys `pg up` named.
        let mut r3 = repl.clone();
        r3["synchronous_commit"] = Value::Null;
        let p = place(&group(json!({ "db": { "managed": { "replication": r3 } } }), json!({}))).unwrap();
        assert_eq!((p.sync.as_str(), p.waits, p.rest.as_str()), ("on", true, ""));
        // Not a primary with standbys: no place.
        assert_eq!(place(&group(json!({ "db": { "managed": { "replication": null } } }), axes)), None);
    }
}
