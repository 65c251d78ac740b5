//! What a report opens with: per section (a kind within a plan), one
//! sentence with the numbers, in the shape a study reports them — "TPC-B at
//! 1 client: hdd 74 TPS, nvme 951 — 12.9×" — and the warnings its runs
//! recorded (settings that make a figure meaningless, flagged steps) beside
//! it. Built from the same medians the tables show; nothing is computed
//! here that a table does not also show. A replication study (`repl.rs`)
//! gets one sentence per RTT and placement instead: each sync level
//! relative to `local`, and the one-client model.

use crate::compare::Noise;
use crate::kinds::spec_name;
use crate::model::{FigureCol, Report, Section, Stat};
use crate::units::{level_words, ratio, with_unit};

/// One sentence about one section.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The plan of the section, if any.
    pub plan: Option<String>,
    /// The section's title.
    pub section: String,
    /// The sentence, with its numbers.
    pub text: String,
    /// Warnings and flags recorded by the section's runs, each naming where.
    pub warnings: Vec<String>,
    /// What the section measured on (`storage.rs`): one line, or one per
    /// configuration; on the first finding of a section only.
    pub storage: Vec<String>,
    /// What the section's latency tells that its headline does not
    /// (stalls, a tail that jumps between load levels): a sentence each;
    /// on the first finding of a section only.
    pub latency: Vec<String>,
    /// What limited each step, as its runs recorded it (`verdict.rs`): a
    /// line per step; on the first finding of a section only.
    pub verdicts: Vec<String>,
    /// What faster or slower storage would buy each step that was re-run
    /// at another device speed (`sensitivity.rs`), as recorded; on the
    /// first finding of a section only.
    pub sensitivity: Vec<String>,
    /// The database's own wait events per step (`waits.rs`): its top
    /// classes, a line per step; on the first finding of a section only.
    pub waits: Vec<String>,
}

/// The figure a step is best told by: an I/O step of 64 KiB and more per
/// request by its MB/s, anything else by the section's headline.
fn figure_for<'a>(s: &Section<'_>, figs: &'a [FigureCol], step: &str) -> &'a FigureCol {
    let head = &figs[0];
    if let Some(mb) = figs.iter().find(|f| f.base == "io.mbps") {
        let mut size = Stat::default();
        for g in &s.groups {
            let (m, i) = (g.stat(step, &mb.metric).median(), g.stat(step, &head.metric).median());
            if i > 0.0 {
                size.values.push(m * 1e6 / i);
            }
        }
        if size.n() > 0 && size.median() >= 65536.0 {
            return mb;
        }
    }
    head
}

/// The sentence of a section with several configurations: per load level
/// (the first and the last) or per profile, each configuration's median and
/// the ratio of the largest to the smallest.
fn across_groups(s: &Section<'_>, figs: &[FigureCol]) -> String {
    let levels = s.load_levels();
    let axis = s.row_axis();
    let numeric = levels.iter().all(|l| l.1.is_some());
    let chosen: Vec<&(String, Option<f64>)> = if numeric && levels.len() > 2 {
        vec![&levels[0], &levels[levels.len() - 1]]
    } else {
        levels.iter().take(8).collect()
    };
    let mut clauses = Vec::new();
    for (label, level) in chosen {
        let fig = figure_for(s, figs, label);
        let stats: Vec<(String, Stat)> = s
            .groups
            .iter()
            .map(|g| (s.short_label(g), g.stat(label, &fig.metric)))
            .filter(|(_, st)| st.n() > 0)
            .collect();
        if stats.is_empty() {
            continue;
        }
        let unit = s.groups.iter().find_map(|g| g.unit(&fig.metric)).unwrap_or_default();
        let vals: Vec<String> = stats
            .iter()
            .enumerate()
            .map(|(i, (name, st))| {
                let v = if i == 0 {
                    with_unit(st.median(), &fig.metric, &unit)
                } else {
                    crate::units::fmt_num(st.median() / scale(&fig.metric, &unit, stats[0].1.median()))
                };
                format!("{name} {v}")
            })
            .collect();
        let at = if numeric { format!("at {}", level_words(axis, label, *level)) } else { label.clone() };
        let mut clause = format!("{at}: {}", vals.join(", "));
        let lo = stats.iter().min_by(|a, b| a.1.median().total_cmp(&b.1.median()));
        let hi = stats.iter().max_by(|a, b| a.1.median().total_cmp(&b.1.median()));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if stats.len() > 1 && lo.1.median() > 0.0 {
                let r = hi.1.median() / lo.1.median();
                clause.push_str(&format!(" — {}×", ratio(r)));
                match Noise::judge(&lo.1, &hi.1) {
                    Noise::WithinNoise => clause.push_str(" (within noise)"),
                    Noise::Beyond => clause.push_str(" (beyond noise)"),
                    Noise::Unknown => {}
                }
            }
        }
        clauses.push(clause);
    }
    if clauses.is_empty() {
        return String::new();
    }
    let name = spec_name(s, &s.spec());
    let lead = if numeric { name } else { format!("{name} per {axis} —") };
    format!("{lead} {}.", clauses.join("; "))
}

/// The divisor `with_unit` used for the first value, so the others of a
/// clause read in the same unit.
fn scale(metric: &str, unit: &str, first: f64) -> f64 {
    crate::units::scale_for(metric, unit, first.abs()).0
}

/// The sentence of a section with one configuration: how the headline grows
/// with the load (first and last level), or each profile's figure.
fn one_group(s: &Section<'_>, figs: &[FigureCol]) -> String {
    let g = s.groups[0];
    let levels = s.load_levels();
    let axis = s.row_axis();
    let numeric = levels.iter().all(|l| l.1.is_some());
    let name = spec_name(s, &s.spec());
    let head = &figs[0];
    let unit = g.unit(&head.metric).unwrap_or_default();
    if numeric {
        let have: Vec<&(String, Option<f64>)> =
            levels.iter().filter(|(l, _)| g.stat(l, &head.metric).n() > 0).collect();
        let (Some(first), Some(last)) = (have.first(), have.last()) else { return String::new() };
        let a = g.stat(&first.0, &head.metric).median();
        let mut text = format!(
            "{name}: {} at {}",
            with_unit(a, &head.metric, &unit),
            level_words(axis, &first.0, first.1)
        );
        if have.len() > 1 {
            let b = g.stat(&last.0, &head.metric).median();
            let b_text = crate::units::fmt_num(b / scale(&head.metric, &unit, a));
            text.push_str(&format!(", {b_text} at {}", level_words(axis, &last.0, last.1)));
            if a > 0.0 {
                text.push_str(&format!(" ({}×)", ratio(b / a)));
            }
        }
        text.push('.');
        return text;
    }
    let p99 = figs.iter().find(|f| f.base.ends_with("lat.p99"));
    let parts: Vec<String> = levels
        .iter()
        .take(8)
        .filter_map(|(label, _)| {
            let fig = figure_for(s, figs, label);
            let st = g.stat(label, &fig.metric);
            (st.n() > 0).then(|| {
                let u = g.unit(&fig.metric).unwrap_or_default();
                let mut p = format!("{label} {}", with_unit(st.median(), &fig.metric, &u));
                if let Some(l) = p99 {
                    let lst = g.stat(label, &l.metric);
                    if lst.n() > 0 {
                        let lu = g.unit(&l.metric).unwrap_or_default();
                        p.push_str(&format!(" (p99 {})", with_unit(lst.median(), &l.metric, &lu)));
                    }
                }
                p
            })
        })
        .collect();
    if parts.is_empty() {
        return String::new();
    }
    format!("{name}: {}.", parts.join(", "))
}

/// The warnings of a section's runs and the flags of their steps, each
/// once, naming the configurations (and steps) they concern.
pub(crate) fn section_warnings(s: &Section<'_>) -> Vec<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |what: String, wher: String| match out.iter_mut().find(|x| x.0 == what) {
        Some(x) if !x.1.contains(&wher) => x.1.push(wher),
        Some(_) => {}
        None => out.push((what, vec![wher])),
    };
    for g in &s.groups {
        for r in &g.runs {
            for w in r.warnings() {
                add(w, s.short_label(g));
            }
            for st in &r.steps {
                for (name, v) in st.flags() {
                    add(st.flag_text(&name, v), format!("{} · {}", s.short_label(g), st.label));
                }
            }
        }
    }
    out.into_iter().map(|(w, wher)| format!("{w} ({})", wher.join(", "))).collect()
}

/// One finding per section that has figures (setup runs have none).
pub(crate) fn findings(report: &Report) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in report.sections() {
        if s.spec().setup {
            continue;
        }
        let figs = s.headline_figures();
        if figs.is_empty() || s.groups.is_empty() {
            continue;
        }
        // A replication study leads with each sync level against `local`
        // per RTT (one sentence per RTT and placement), not the generic
        // comparison of its cells.
        // A noisy-neighbour study leads with what the neighbours cost each
        // workload (S4: "NOPM fell from X to Y while a backup ran at W MB/s").
        let mut texts = crate::neighbour::sentences(report, &s);
        texts.extend(match crate::repl::study(&s) {
            Some(st) => crate::repl::sentences(&s, &st),
            None if s.groups.len() > 1 => vec![across_groups(&s, &figs)],
            None => vec![one_group(&s, &figs)],
        });
        // A cache tier (S1): hit ratio, warm-up, against the uncached disk.
        texts.extend(crate::cache::sentences(report, &s));
        let mut warnings = section_warnings(&s);
        let mut storage = crate::storage::section_lines(&s);
        // Where the tail tells what the percentiles do not: stalls, jumps.
        let mut latency = latency_story(&s);
        let mut verdicts = crate::verdict::section_lines(&s);
        let mut sensitivity = crate::sensitivity::section_lines(&s);
        let mut waits = crate::waits::section_lines(&s);
        for text in texts.into_iter().filter(|t| !t.is_empty()) {
            out.push(Finding {
                plan: s.plan.map(str::to_string),
                section: s.title(),
                text,
                warnings: std::mem::take(&mut warnings),
                storage: std::mem::take(&mut storage),
                latency: std::mem::take(&mut latency),
                verdicts: std::mem::take(&mut verdicts),
                sensitivity: std::mem::take(&mut sensitivity),
                waits: std::mem::take(&mut waits),
            });
        }
    }
    out
}

/// A latency in µs as people read it: `272 µs`, `7.10 ms`, `4.64 s`.
fn lat_text(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", crate::units::fmt_num(us / 1e6))
    } else {
        with_unit(us, "lat", "us")
    }
}

/// The latency figures that tell what the headline does not, one sentence
/// each (said of the section, so without its name): stalls (a mean above p99, or a maximum of at least 100 ms and 50×
/// p99: a few operations far longer than the rest, which percentiles up to
/// p99 hide), and a tail that jumps between load levels (p99.9 growing 5×
/// or more, to at least 1 ms, from one level to the next). Medians over
/// repeats, as the latency table shows them.
pub(crate) fn latency_story(s: &Section<'_>) -> Vec<String> {
    let p = s.spec().latency_prefix;
    let levels = s.load_levels();
    let numeric = levels.iter().all(|l| l.1.is_some());
    let axis = s.row_axis();
    let many = s.groups.len() > 1;
    let mut out = Vec::new();
    for g in &s.groups {
        let who = if many { format!(" ({})", s.short_label(g)) } else { String::new() };
        let fig = |step: &str, w: &str| g.stat(step, &format!("{p}.{w}")).median();
        let at = |label: &str, level: Option<f64>| {
            if numeric {
                level_words(axis, label, level)
            } else {
                label.to_string()
            }
        };
        // Stalls: the step where the maximum stands furthest above p99.
        let mut worst: Option<(&str, Option<f64>, f64, f64, f64)> = None;
        for (label, level) in &levels {
            let (mean, p99, max) = (fig(label, "mean"), fig(label, "p99"), fig(label, "max"));
            if !(p99 > 0.0 && max.is_finite() && mean.is_finite()) {
                continue;
            }
            let stalls = mean > p99 || (max >= 100_000.0 && max >= 50.0 * p99);
            if stalls && worst.is_none_or(|w| max / p99 > w.4 / w.3) {
                worst = Some((label, *level, mean, p99, max));
            }
        }
        if let Some((label, level, mean, p99, max)) = worst {
            let lead = if mean > p99 {
                format!("mean {} above p99 {}", lat_text(mean), lat_text(p99))
            } else {
                format!("p99 {}", lat_text(p99))
            };
            let what = if max >= 1e6 { "multi-second stalls" } else { "stalls far longer than the rest" };
            out.push(format!(
                "Latency at {}{who}: {lead}, max {} — a few {what}.",
                at(label, level),
                lat_text(max)
            ));
        }
        // A tail that jumps from one load level to the next.
        if numeric {
            let pts: Vec<(&str, Option<f64>, f64, f64)> = levels
                .iter()
                .map(|(l, lv)| (l.as_str(), *lv, fig(l, "p99.9"), fig(l, "p99")))
                .filter(|x| x.2.is_finite() && x.2 > 0.0)
                .collect();
            let jump = pts
                .windows(2)
                .map(|w| (w[1].2 / w[0].2, w))
                .filter(|(r, w)| *r >= 5.0 && w[1].2 >= 1000.0)
                .max_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((r, w)) = jump {
                let (a, b) = (&w[0], &w[1]);
                let p99 = if a.3.is_finite() && b.3.is_finite() {
                    format!("; p99 {} → {}", lat_text(a.3), lat_text(b.3))
                } else {
                    String::new()
                };
                out.push(format!(
                    "p99.9 latency{who} jumps from {} at {} to {} at {} ({}×{p99}).",
                    lat_text(a.2),
                    at(a.0, a.1),
                    lat_text(b.2),
                    at(b.0, b.1),
                    ratio(r)
                ));
            }
        }
    }
    out
}

impl Report {
    /// What the report opens with: one sentence per section with figures.
    pub fn findings(&self) -> Vec<Finding> {
        findings(self)
    }
}
