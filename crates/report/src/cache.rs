//! Cache tiers (S1): per configuration and step, the tier's hit ratio, its
//! warm-up, where the accesses went (the hottest 1, 5, 10, 20 % of the
//! lines accessed) and the headline figure against the same backing model
//! without a cache; and what the run's own trace predicts for sizes that
//! were not run (`emu.M.cache.mrc.POLICY.hit_ratio.SIZE`, written by the
//! recorder from the medium's `--trace`).

use serde_json::Value;

use crate::model::{Group, Report, Section};
use crate::table::Table;
use crate::units::fmt_num;
use crate::units::with_unit;

/// The medium whose cache figures a step has (`emu.NAME.cache.hit_ratio`).
fn tier_medium(g: &Group, step: &str) -> Option<String> {
    g.runs.iter().filter_map(|r| r.step(step)).find_map(|s| {
        s.metrics
            .keys()
            .find_map(|k| k.strip_prefix("emu.")?.strip_suffix(".cache.hit_ratio").map(str::to_string))
    })
}

/// The medium's model as the run recorded it (`env.db.medium.model`, or
/// `env.medium.model` for I/O runs).
fn model(g: &Group) -> Option<&Value> {
    let env = &g.runs.first()?.run.env;
    [&env["db"]["medium"]["model"], &env["medium"]["model"]].into_iter().find(|v| v.is_object())
}

/// The model without its cache tier, for finding the same device uncached.
fn bare(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(o) = m.as_object_mut() {
        o.remove("cache");
    }
    m
}

/// One step of one configuration with a cache tier.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheRow {
    /// The configuration (group label).
    pub config: String,
    /// The step.
    pub step: String,
    /// The tier's medium.
    pub medium: String,
    /// Cache size in bytes.
    pub size: f64,
    /// Line hit ratio, all accesses and reads (medians over repeats).
    pub hit: f64,
    /// Read line hit ratio.
    pub read_hit: Option<f64>,
    /// Seconds from the step's start to 90 % of its final hit ratio.
    pub warmup_s: Option<f64>,
    /// Shares of accesses taken by the hottest 1, 5, 10, 20 % of lines.
    pub hot: [Option<f64>; 4],
    /// The headline figure: stored name, label, unit, value.
    pub head: Option<(String, &'static str, String, f64)>,
    /// The headline figure of the same backing model without a cache, and
    /// that configuration's label.
    pub uncached: Option<(String, f64)>,
    /// Predicted hit ratios from the run's trace: (policy, size label, ratio).
    pub predicted: Vec<(String, String, f64)>,
}

/// Every step of a section whose medium had a cache tier.
pub fn rows(s: &Section<'_>) -> Vec<CacheRow> {
    let head = s.headline_figures().into_iter().next();
    let steps = s.step_labels();
    let mut out = Vec::new();
    for g in &s.groups {
        for step in &steps {
            let Some(medium) = tier_medium(g, step) else { continue };
            let p = format!("emu.{medium}.cache");
            let med = |m: &str| {
                let st = g.stat(step, m);
                (st.n() > 0).then(|| st.median())
            };
            let Some(hit) = med(&format!("{p}.hit_ratio")) else { continue };
            let head = head.as_ref().and_then(|h| {
                Some((h.metric.clone(), h.label, g.unit(&h.metric).unwrap_or_default(), med(&h.metric)?))
            });
            let uncached = head.as_ref().and_then(|(metric, ..)| {
                let want = bare(model(g)?);
                let other = s
                    .groups
                    .iter()
                    .find(|o| tier_medium(o, step).is_none() && model(o).is_some_and(|m| bare(m) == want))?;
                let st = other.stat(step, metric);
                (st.n() > 0).then(|| (other.label.clone(), st.median()))
            });
            let mrc = format!("{p}.mrc.");
            let mut predicted: Vec<(String, String, f64)> = g
                .runs
                .first()
                .and_then(|r| r.step(step))
                .map(|st| {
                    st.metrics
                        .iter()
                        .filter_map(|(k, v)| {
                            let rest = k.strip_prefix(&mrc)?;
                            let (policy, size) = rest.split_once(".hit_ratio.")?;
                            Some((policy.to_string(), size.to_string(), v.0))
                        })
                        .collect()
                })
                .unwrap_or_default();
            predicted.sort_by(|a, b| {
                let bytes = |s: &str| storbench_metrics::units::parse_size(s).unwrap_or(0);
                (a.0.as_str(), bytes(&a.1)).cmp(&(b.0.as_str(), bytes(&b.1)))
            });
            out.push(CacheRow {
                config: g.label.clone(),
                step: step.clone(),
                size: med(&format!("{p}.size.bytes")).unwrap_or(0.0),
                medium,
                hit,
                read_hit: med(&format!("{p}.read.hit_ratio")),
                warmup_s: med(&format!("{p}.warmup.s")),
                hot: [1, 5, 10, 20].map(|x| med(&format!("{p}.hot.top{x}"))),
                head,
                uncached,
                predicted,
            });
        }
    }
    out
}

fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{:.1} %", x * 100.0)).unwrap_or_else(|| "–".into())
}

/// The cache table of a section, and the what-if table when the runs
/// carried curves from their traces.
pub(crate) fn tables(s: &Section<'_>) -> Vec<Table> {
    let rows = rows(s);
    if rows.is_empty() {
        return Vec::new();
    }
    let label = rows.iter().find_map(|r| r.head.as_ref().map(|h| h.1)).unwrap_or("headline");
    let header = [
        "configuration",
        "step",
        "cache",
        "hit ratio",
        "read hit ratio",
        "warm-up s",
        "hottest 1 %",
        "5 %",
        "10 %",
        "20 %",
    ]
    .into_iter()
    .map(String::from)
    .chain([label.to_string(), format!("{label} without cache"), "ratio".into()])
    .collect();
    let body = rows
        .iter()
        .map(|r| {
            let (h, u, ratio) = match (&r.head, &r.uncached) {
                (Some((m, _, unit, v)), Some((ul, uv))) => (
                    with_unit(*v, m, unit),
                    format!("{} ({ul})", with_unit(*uv, m, unit)),
                    format!("{:.2}×", v / uv),
                ),
                (Some((m, _, unit, v)), None) => (with_unit(*v, m, unit), "–".into(), "–".into()),
                _ => ("–".into(), "–".into(), "–".into()),
            };
            let mut row = vec![
                r.config.clone(),
                r.step.clone(),
                storbench_metrics::units::format_size(r.size as u64),
                pct(Some(r.hit)),
                pct(r.read_hit),
                r.warmup_s.map(fmt_num).unwrap_or_else(|| "–".into()),
            ];
            row.extend(r.hot.iter().map(|x| pct(*x)));
            row.extend([h, u, ratio]);
            row
        })
        .collect();
    let mut out = vec![Table {
        title: format!("{} — cache tier: hit ratio, warm-up and hot data", s.title()),
        header,
        rows: body,
        notes: vec![
            "Hit ratios count cache-line accesses (as `cache mrc` does); warm-up is the seconds from the step's start until the trailing 5 s hit ratio reached 90 % of its final value; \"hottest N %\" is the share of the line accesses since the cache was emptied that the most-accessed N % of the lines touched took.".into(),
            "\"without cache\": the same backing model with no cache tier, same step.".into(),
        ],
    }];
    let what_if: Vec<&CacheRow> = rows.iter().filter(|r| !r.predicted.is_empty()).collect();
    if !what_if.is_empty() {
        let mut sizes: Vec<String> = Vec::new();
        for r in &what_if {
            for (_, sz, _) in &r.predicted {
                if !sizes.contains(sz) {
                    sizes.push(sz.clone());
                }
            }
        }
        sizes.sort_by_key(|s| storbench_metrics::units::parse_size(s).unwrap_or(0));
        let header = ["configuration", "step", "cache run", "measured", "policy"]
            .into_iter()
            .map(String::from)
            .chain(sizes.iter().map(|s| format!("predicted at {s}")))
            .collect();
        let mut body = Vec::new();
        for r in what_if {
            let mut policies: Vec<&str> = r.predicted.iter().map(|p| p.0.as_str()).collect();
            policies.dedup();
            for pol in policies {
                let mut row = vec![
                    r.config.clone(),
                    r.step.clone(),
                    storbench_metrics::units::format_size(r.size as u64),
                    pct(Some(r.hit)),
                    pol.to_string(),
                ];
                row.extend(
                    sizes
                        .iter()
                        .map(|sz| pct(r.predicted.iter().find(|p| p.0 == pol && &p.1 == sz).map(|p| p.2))),
                );
                body.push(row);
            }
        }
        out.push(Table {
            title: format!("{} — what-if: hit ratio by cache size from the run's own trace", s.title()),
            header,
            rows: body,
            notes: vec!["Miss-ratio curves over the medium's whole trace up to the run's end (LRU exact by stack distance, other policies simulated), the same line size as the tier; `measured` is the run's step. Sizes not run are predictions.".into()],
        });
    }
    out
}

/// One sentence per cached configuration's last step: "hdd-1g: hit ratio
/// 93.1 % (reads 91.0 %) after a 24 s warm-up; NOPM 1,234 against 456 on
/// hdd without a cache (2.71×); the hottest 10 % of lines took 71 % of the
/// accesses."
pub(crate) fn sentences(_report: &Report, s: &Section<'_>) -> Vec<String> {
    let rows = rows(s);
    let mut out = Vec::new();
    for r in &rows {
        // One sentence per configuration: its last step.
        if rows.iter().rev().find(|x| x.config == r.config).is_some_and(|x| x.step != r.step) {
            continue;
        }
        let warm = r.warmup_s.map(|w| format!(" after a {} s warm-up", fmt_num(w))).unwrap_or_default();
        let reads = r.read_hit.map(|x| format!(" (reads {})", pct(Some(x)))).unwrap_or_default();
        let vs = match (&r.head, &r.uncached) {
            (Some((m, label, unit, v)), Some((ul, uv))) => {
                // `978 NOPM` already names itself; `0.026 s` needs its label.
                let named = |x: f64| {
                    let t = with_unit(x, m, unit);
                    if t.ends_with(label) {
                        t
                    } else {
                        format!("{label} {t}")
                    }
                };
                format!("; {} against {} on {ul} without a cache ({:.2}×)", named(*v), named(*uv), v / uv)
            }
            _ => String::new(),
        };
        let hot = r.hot[2]
            .map(|h| format!("; the hottest 10 % of lines took {} of the accesses", pct(Some(h))))
            .unwrap_or_default();
        // The tier's own policy (LRU's curve is in the what-if table).
        let policy = r.predicted.iter().map(|p| p.0.as_str()).find(|p| *p != "lru").unwrap_or("lru");
        let what_if = r
            .predicted
            .iter()
            .filter(|p| p.0 == policy)
            .filter(|p| storbench_metrics::units::parse_size(&p.1).is_ok_and(|b| b as f64 != r.size))
            .map(|p| format!("{} at {}", pct(Some(p.2)), p.1))
            .collect::<Vec<_>>();
        let what_if = if what_if.is_empty() {
            String::new()
        } else {
            format!("; its trace predicts ({policy}) {}", what_if.join(", "))
        };
        out.push(format!(
            "{} at {} with a {} cache: hit ratio {}{reads}{warm}{vs}{hot}{what_if}.",
            r.config,
            r.step,
            storbench_metrics::units::format_size(r.size as u64),
            pct(Some(r.hit))
        ));
    }
    out
}
