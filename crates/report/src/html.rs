//! The self-contained HTML report: inline CSS, inline SVG charts drawn by
//! plotters, the same tables as the text report. Nothing is loaded from the
//! network. This module only builds a string; the binary writes the file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use plotters::prelude::*;

use crate::chart::{
    bar_chart, color, draw_svg, figure, legend, line_chart, pad_range, percentile_lines, time_panels, Bar,
    Canvas, Point, Series, NARROW, WIDE,
};
use crate::findings::findings;
use crate::model::{Report, Section};
use crate::table::{esc_html, Table};
use crate::tables::{
    axes_line, env_difference_table, env_shared_table, latency_table, runs_table, section_tables,
    summary_tables, system_table,
};
use crate::units::fmt_num;
use crate::units::scale_for;
use crate::ReportError;

/// Time-series charts drawn at most (one per group, first repeat).
const MAX_SERIES_CHARTS: usize = 24;
/// Series in one percentile chart at most (the rest are in the table).
const MAX_PCT_SERIES: usize = 12;

const CSS: &str = "body{font-family:sans-serif;margin:24px auto;padding:0 16px;color:#222;max-width:1100px;line-height:1.4}\
h1{font-size:1.5em;margin-bottom:.2em}h2{border-bottom:2px solid #ccc;padding-bottom:4px;margin-top:2em}\
h3{font-size:1.05em;margin-top:1.5em}.sub{color:#555;margin-top:0}\
.findings{background:#f3f7ff;border:1px solid #c9d8f2;border-radius:6px;padding:4px 18px 10px}\
.findings h2{border:none;margin-top:.6em}.findings li{margin:.35em 0;font-size:1.08em}\
.findings .warn{color:#8a4b00;font-size:.92em;list-style:none;padding-left:.5em}\
.findings .storage{color:#444;font-size:.88em}.findings .lat{color:#6b2f8a;font-size:.92em}p.storage{color:#333;background:#f4f4f4;padding:4px 8px;border-radius:4px}\
table.t{border-collapse:collapse;font-size:.85em;margin:.5em 0}\
table.t th,table.t td{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}\
table.t thead th{background:#eef;text-align:center}table.t tbody th{text-align:left;background:#f7f7f7}\
.note{background:#fff6d5;border-left:4px solid #e0b000;padding:6px 10px}p.flag{color:#8a4b00;margin:.2em 0}\
figure.chart{margin:1em 0}figure.chart figcaption{font-size:.85em;color:#555}\
figure.chart svg{max-width:100%;height:auto}figure.chart .narrow{display:none;overflow-x:auto}figure.chart .narrow svg{max-width:none}\
@media (max-width:600px){figure.chart .wide{display:none}figure.chart .narrow{display:block}}details{margin:.8em 0}summary{cursor:pointer;font-weight:bold}\
.scroll{overflow-x:auto}@media (max-width:600px){body{margin:8px auto;padding:0 8px}h1{font-size:1.25em}\
figure.chart{margin:1em -8px}figure.chart figcaption{padding:0 8px}}";

/// Charts of a section's main figures (each by its headline source): against
/// users/clients (one line per configuration) when the steps are load
/// levels, per profile (bars) otherwise.
fn main_charts(out: &mut String, s: &Section<'_>) -> Result<(), ReportError> {
    let levels = s.load_levels();
    let numeric = levels.iter().all(|l| l.1.is_some());
    let spread_note =
        if s.groups.iter().any(|g| g.runs.len() > 1) { "; bars: min–max over repeats" } else { "" };
    let steps: Vec<String> = levels.iter().map(|l| l.0.clone()).collect();
    for f in s.headline_figures() {
        let unit = s.groups.iter().find_map(|g| g.unit(&f.metric)).unwrap_or_default();
        let metric = f.metric.as_str();
        let largest = steps
            .iter()
            .flat_map(|l| s.groups.iter().map(move |g| g.stat(l, metric).max()))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let (div, u) = scale_for(&f.metric, &unit, largest);
        let y_desc =
            if u.is_empty() || u == f.label { f.label.to_string() } else { format!("{}, {u}", f.label) };
        let ctitle = format!("{} — {}", s.title(), f.title());
        let svg = if numeric && levels.len() > 1 {
            let series: Vec<Series> = s
                .groups
                .iter()
                .map(|g| {
                    let mut sr = Series { name: g.label.clone(), points: vec![], spread: vec![] };
                    for (xi, (label, _)) in levels.iter().enumerate() {
                        let st = g.stat(label, &f.metric).scaled(div);
                        if st.n() > 0 {
                            let x = xi as f64;
                            sr.points.push((x, st.median()));
                            if st.n() > 1 {
                                sr.spread.push((x, st.min(), st.max()));
                            }
                        }
                    }
                    sr
                })
                .collect();
            let names: Vec<String> =
                levels.iter().map(|(l, v)| v.map(fmt_num).unwrap_or_else(|| l.clone())).collect();
            (
                line_chart(WIDE, &ctitle, s.row_axis(), &names, &y_desc, &series)?,
                line_chart(NARROW, &ctitle, s.row_axis(), &names, &y_desc, &series)?,
            )
        } else {
            let groups: Vec<_> = s
                .groups
                .iter()
                .map(|g| {
                    let vals = steps
                        .iter()
                        .map(|c| {
                            let st = g.stat(c, &f.metric).scaled(div);
                            (st.n() > 0).then(|| (st.median(), st.min(), st.max()))
                        })
                        .collect();
                    (g.label.clone(), vals)
                })
                .collect();
            (
                bar_chart(WIDE, &ctitle, &y_desc, &steps, &groups)?,
                bar_chart(NARROW, &ctitle, &y_desc, &steps, &groups)?,
            )
        };
        figure(
            out,
            &format!("{} (median{spread_note}) per {} and configuration", f.title(), s.row_axis()),
            &svg.0,
            &svg.1,
        );
    }
    Ok(())
}

/// The replication headline's chart: transactions per second of one client
/// against the link's RTT, one marker series per sync level (and
/// placement), and per placement the model `1 / (t_local + RTT +
/// t_standby_flush)` as a dashed curve (its terms from the `on` rows, else
/// the first level that waits).
fn repl_chart(out: &mut String, s: &Section<'_>) -> Result<(), ReportError> {
    let Some(st) = crate::repl::study(s) else { return Ok(()) };
    // (rest, sync) -> points (rtt ms, tps)
    let mut measured: Vec<((String, String), Vec<Point>)> = Vec::new();
    let mut models: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for b in &st.blocks {
        let rtt = b.rtt_us as f64 / 1000.0;
        for r in &b.rows {
            let Some(tps) = r.one_client_tps else { continue };
            let key = (b.rest.clone(), r.sync.clone());
            match measured.iter_mut().find(|m| m.0 == key) {
                Some(m) => m.1.push((rtt, tps)),
                None => measured.push((key, vec![(rtt, tps)])),
            }
        }
        let m = b.rows.iter().filter(|r| r.model.is_some()).min_by_key(|r| r.sync != "on");
        if let Some(m) = m.and_then(|r| r.model.as_ref()) {
            let terms = (m.t_local_us, m.t_standby_us);
            match models.iter_mut().find(|x| x.0 == b.rest) {
                Some(x) => x.1.push(terms),
                None => models.push((b.rest.clone(), vec![terms])),
            }
        }
    }
    if measured.is_empty() {
        return Ok(());
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let x1 = measured.iter().flat_map(|m| m.1.iter().map(|p| p.0)).fold(0.0, f64::max).max(0.5) * 1.15;
    let curves: Vec<(String, Vec<Point>)> = models
        .into_iter()
        .map(|(rest, terms)| {
            let t_local = median(terms.iter().map(|t| t.0).collect());
            let t_standby = median(terms.iter().map(|t| t.1).collect());
            let pts = (0..=60).map(|i| {
                let rtt_ms = x1 * i as f64 / 60.0;
                (rtt_ms, 1e6 / (t_local + rtt_ms * 1000.0 + t_standby))
            });
            let name = if rest.is_empty() { "model".to_string() } else { format!("model, {rest}") };
            (name, pts.collect())
        })
        .collect();
    let y1 = measured
        .iter()
        .flat_map(|m| m.1.iter().map(|p| p.1))
        .chain(curves.iter().map(|c| c.1[0].1))
        .fold(f64::NEG_INFINITY, f64::max);
    // Headroom above the highest point for the legend.
    let (y0, y1) = pad_range(0.0, y1 * 1.3, true);
    let title = format!("{} — one client against the link's RTT, with the model", s.title());
    let draw = |cv: Canvas| -> Result<String, ReportError> {
        draw_svg(&title, (cv.w, cv.h), |root, e| {
            let mut chart = ChartBuilder::on(root)
                .caption(&title, ("sans-serif", cv.caption))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(cv.y_area)
                .build_cartesian_2d(0.0..x1, y0..y1)
                .map_err(|x| e(x.to_string()))?;
            chart
                .configure_mesh()
                .label_style(cv.font())
                .axis_desc_style(cv.font())
                .x_desc("RTT, ms (asked of the delay proxy)")
                .y_desc("transactions/s, 1 client")
                .x_label_formatter(&|v| fmt_num(*v))
                .y_label_formatter(&|v| fmt_num(*v))
                .draw()
                .map_err(|x| e(x.to_string()))?;
            for (i, (name, pts)) in curves.iter().enumerate() {
                let c = RGBColor(90, 90, 90).mix(1.0 - 0.3 * i as f64);
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 6, 4, c.stroke_width(2)))
                    .map_err(|x| e(x.to_string()))?
                    .label(format!("{name}: 1/(t_local + RTT + t_standby_flush)"))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            }
            let many = measured.iter().any(|m| !m.0 .0.is_empty());
            for (i, ((rest, sync), pts)) in measured.iter().enumerate() {
                let c = color(i);
                let mut pts = pts.clone();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let name = if many && !rest.is_empty() { format!("{sync}, {rest}") } else { sync.clone() };
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(1)))
                    .map_err(|x| e(x.to_string()))?;
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 5, c.filled())))
                    .map_err(|x| e(x.to_string()))?
                    .label(name)
                    .legend(move |(x, y)| Circle::new((x + 9, y), 5, c.filled()));
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight, cv.text, e)?;
            Ok(())
        })
    };
    let (wide, narrow) = (draw(WIDE)?, draw(NARROW)?);
    figure(
        out,
        "Measured transactions per second of one client (median) per sync level and RTT; dashed: the model for one client, its terms from the local run (mean latency, standby lag less the RTT)",
        &wide,
        &narrow,
    );
    Ok(())
}

/// Latency percentiles: one line per (group, step) across p50…p99.9.
fn percentile_chart(out: &mut String, s: &Section<'_>) -> Result<(), ReportError> {
    let p = s.spec().latency_prefix;
    let pcts = ["p50", "p90", "p99", "p99.9"];
    let mut series = Vec::new();
    let mut largest: f64 = 0.0;
    for step in s.step_labels() {
        for g in &s.groups {
            let pts: Vec<Point> = pcts
                .iter()
                .enumerate()
                .filter_map(|(i, name)| {
                    let st = g.stat(&step, &format!("{p}.{name}"));
                    (st.n() > 0).then(|| (i as f64, st.median()))
                })
                .collect();
            largest = pts.iter().map(|p| p.1).fold(largest, f64::max);
            if !pts.is_empty() {
                series.push(Series { name: format!("{} · {step}", g.label), points: pts, spread: vec![] });
            }
        }
    }
    if series.is_empty() {
        return Ok(());
    }
    let (div, unit) = scale_for(&format!("{p}.p99"), "us", largest);
    for sr in &mut series {
        for pt in &mut sr.points {
            pt.1 /= div;
        }
    }
    let shown = series.len().min(MAX_PCT_SERIES);
    let title = format!("{} — latency percentiles (client side)", s.title());
    let names: Vec<String> = pcts.iter().map(|p| p.to_string()).collect();
    let y_desc = format!("latency, {unit}, log scale");
    let wide = percentile_lines(WIDE, &title, &names, &y_desc, &series[..shown])?;
    let narrow = percentile_lines(NARROW, &title, &names, &y_desc, &series[..shown])?;
    let more = if series.len() > shown {
        format!(" (first {shown} of {}; all in the table)", series.len())
    } else {
        String::new()
    };
    figure(
        out,
        &format!("Latency percentiles ({p}.*) per configuration and {}{more}", s.row_axis()),
        &wide,
        &narrow,
    );
    Ok(())
}

/// Per-second series of each group's first run: the workload (each series
/// named with who counted it) above device await and CPU iowait, steps laid
/// end to end on one time axis. Groups without a workload series (setup
/// runs) draw nothing.
fn time_series(out: &mut String, s: &Section<'_>, budget: &mut usize) -> Result<(), ReportError> {
    let series = s.workload_series();
    if series.is_empty() {
        return Ok(());
    }
    for g in &s.groups {
        if *budget == 0 {
            return Ok(());
        }
        let Some(run) = g.runs.first() else { continue };
        let mut work: BTreeMap<String, Vec<Point>> = BTreeMap::new();
        let mut dev: BTreeMap<String, Vec<Point>> = BTreeMap::new();
        let mut cpu: BTreeMap<String, Vec<Point>> = BTreeMap::new();
        let mut cache: BTreeMap<String, Vec<Point>> = BTreeMap::new();
        let mut offset = 0.0;
        let mut starts = Vec::new();
        for step in &run.steps {
            starts.push((offset, step.label.clone()));
            let mut end: f64 = 0.0;
            for (name, pts) in &step.samples {
                let (target, label) = if let Some((_, l)) = series.iter().find(|x| &x.0 == name) {
                    (&mut work, l.clone())
                } else if name.starts_with("dev.")
                    && (name.ends_with(".r_await") || name.ends_with(".w_await"))
                {
                    (&mut dev, name.trim_start_matches("dev.").to_string())
                } else if name == "cpu.iowait" || name == "cpu.steal" {
                    (&mut cpu, name.trim_start_matches("cpu.").to_string())
                } else if let Some(m) =
                    name.strip_prefix("emu.").and_then(|n| n.strip_suffix(".cache.hit_ratio"))
                {
                    (&mut cache, format!("{m} hit ratio, %"))
                } else {
                    continue;
                };
                // A hit ratio is drawn in percent, beside CPU shares.
                let scale = if name.ends_with(".cache.hit_ratio") { 100.0 } else { 1.0 };
                let v = target.entry(label).or_default();
                for (t, y) in pts {
                    let t = *t as f64 / 1000.0;
                    end = end.max(t);
                    v.push((offset + t, *y * scale));
                }
            }
            offset += end + 1.0;
        }
        if work.is_empty() {
            continue;
        }
        let work_title = {
            let mut labels: Vec<&str> = series.iter().map(|x| x.1.split(" (").next().unwrap_or("")).collect();
            labels.dedup();
            labels.join(", ")
        };
        let mut panels = Vec::new();
        let offsets: Vec<f64> = starts.iter().map(|x| x.0).collect();
        let waits: Vec<(String, Vec<Point>)> = crate::waits::bands(&run.steps, &offsets)
            .into_iter()
            .map(|(n, pts)| (n, pts.into_iter().map(|(t, v)| (t, v * 100.0)).collect()))
            .collect();
        for (title, m) in [
            (work_title, work),
            ("cache hit ratio, % (the emulator's cache tier: warm-up)".to_string(), cache),
            ("device await, ms (diskstats)".to_string(), dev),
            ("CPU, % (/proc/stat)".to_string(), cpu),
        ] {
            if !m.is_empty() {
                panels.push((title, m.into_iter().collect::<Vec<_>>(), false));
            }
            // The database's own waits, stacked, right under its throughput.
            if panels.len() == 1 && !waits.is_empty() {
                let t = "wait events, % of active sessions (the database's own)".to_string();
                panels.push((t, waits.clone(), true));
            }
        }
        let steps: Vec<&str> = run.steps.iter().map(|x| x.label.as_str()).collect();
        let title = format!("{} — run #{}, per second", g.label, run.run.id);
        let wide = time_panels(WIDE, &title, &panels, &starts)?;
        let narrow = time_panels(NARROW, &title, &panels, &starts)?;
        figure(
            out,
            &format!(
                "{} · {}: steps {} laid end to end; the workload above the device's latency and the CPU's iowait in the same seconds",
                s.title(),
                g.label,
                steps.join(", ")
            ),
            &wide,
            &narrow,
        );
        *budget -= 1;
    }
    Ok(())
}

/// The hot data of a cache tier's runs: for each configuration and step,
/// the share of line accesses the hottest 1, 5, 10 and 20 % of the lines
/// accessed took (the S1 study's "which data ends up hot").
fn hot_data_chart(out: &mut String, s: &Section<'_>) -> Result<(), ReportError> {
    let rows = crate::cache::rows(s);
    if rows.is_empty() {
        return Ok(());
    }
    let cats: Vec<String> = ["hottest 1 %", "5 %", "10 %", "20 %"].map(String::from).to_vec();
    let several_steps = s.step_labels().len() > 1;
    let groups: Vec<(String, Vec<Bar>)> = rows
        .iter()
        .map(|r| {
            let name = if several_steps { format!("{} · {}", r.config, r.step) } else { r.config.clone() };
            (name, r.hot.iter().map(|h| h.map(|v| (v * 100.0, v * 100.0, v * 100.0))).collect())
        })
        .collect();
    let title = format!("{} — hot data: share of accesses by the hottest lines", s.title());
    let wide = bar_chart(WIDE, &title, "% of line accesses", &cats, &groups)?;
    let narrow = bar_chart(NARROW, &title, "% of line accesses", &cats, &groups)?;
    figure(
        out,
        "Share of the cache tier's line accesses (since the cache was emptied) taken by the most-accessed 1, 5, 10 and 20 % of the lines accessed; a uniform load would give 1, 5, 10 and 20 %",
        &wide,
        &narrow,
    );
    Ok(())
}

fn tables_html(out: &mut String, tables: impl IntoIterator<Item = Table>) {
    for t in tables {
        out.push_str("<div class=\"scroll\">");
        out.push_str(&t.to_html());
        out.push_str("</div>\n");
    }
}

impl Report {
    /// The whole report as one self-contained HTML document: the findings
    /// first, then per section its charts and tables, the setup runs, and
    /// the environment (what differs between the runs compared; what they
    /// share and the run list folded away).
    pub fn to_html(&self) -> Result<String, ReportError> {
        let mut out = String::with_capacity(256 * 1024);
        let title = format!("storbench report: {}", self.selection.join(", "));
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{CSS}</style></head><body>\n<h1>{}</h1>\n",
            esc_html(&title),
            esc_html(&title)
        );
        let starts: Vec<&str> = self.runs().map(|r| r.run.started_at.as_str()).collect();
        let span = match (starts.iter().min(), starts.iter().max()) {
            (Some(a), Some(b)) if a[..a.len().min(16)] != b[..b.len().min(16)] => {
                format!(", started {} to {}", &a[..a.len().min(16)], &b[..b.len().min(16)])
            }
            (Some(a), _) => format!(", started {}", &a[..a.len().min(16)]),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "<p class=\"sub\">{} runs ({}){}.</p>",
            self.runs().count(),
            esc_html(&self.kinds().join(", ")),
            esc_html(&span.replace('T', " "))
        );
        if let Some(n) = self.emulation_note() {
            let _ = writeln!(out, "<p class=\"note\" id=\"emulation-note\">{}</p>", esc_html(&n));
        }
        if let Some(n) = self.incomplete_note() {
            let _ = writeln!(out, "<p class=\"note\" id=\"incomplete-note\">{}</p>", esc_html(&n));
        }
        findings_html(&mut out, self);
        let sections = self.sections();
        let mut budget = MAX_SERIES_CHARTS;
        // A section whose runs finished no step (a cell that failed before
        // measuring) has nothing to show: the note at the top names it.
        for s in sections.iter().filter(|s| !s.spec().setup && !s.step_labels().is_empty()) {
            let _ = writeln!(
                out,
                "<section class=\"kind-{}\"><h2>{}</h2>",
                esc_html(s.kind),
                esc_html(&s.title())
            );
            // What the section measured on, before any figure of it.
            for l in crate::storage::section_lines(s) {
                let _ = writeln!(out, "<p class=\"storage\">Measured on {}</p>", esc_html(&l));
            }
            // A replication study leads with its headline: the model chart
            // and the table of each sync level relative to `local`.
            repl_chart(&mut out, s)?;
            tables_html(&mut out, crate::tables::repl_table(s));
            // A noisy-neighbour study: each workload beside its neighbours
            // against itself alone.
            tables_html(&mut out, crate::neighbour::table(s));
            main_charts(&mut out, s)?;
            tables_html(&mut out, crate::cache::tables(s));
            hot_data_chart(&mut out, s)?;
            tables_html(&mut out, crate::array::tables(s));
            if let Some(charts) = s.spec().extra_charts {
                out.push_str(&charts(s)?);
            }
            time_series(&mut out, s, &mut budget)?;
            tables_html(&mut out, summary_tables(s));
            if let Some(extra) = s.spec().extra {
                tables_html(&mut out, extra(s));
            }
            tables_html(&mut out, latency_table(s));
            percentile_chart(&mut out, s)?;
            tables_html(&mut out, system_table(s));
            out.push_str("</section>\n");
        }
        let setup: Vec<Table> = sections.iter().filter(|s| s.spec().setup).flat_map(section_tables).collect();
        if !setup.is_empty() {
            out.push_str("<section class=\"setup\"><h2>Setup runs</h2>\n");
            tables_html(&mut out, setup);
            out.push_str("</section>\n");
        }
        out.push_str("<section class=\"env\"><h2>Environment</h2>\n");
        let differ: Vec<Table> =
            sections.iter().filter(|s| !s.spec().setup).filter_map(env_difference_table).collect();
        if differ.is_empty() {
            out.push_str("<p>The runs compared share every recorded environment key.</p>\n");
        }
        tables_html(&mut out, differ);
        let shared = env_shared_table(self);
        let _ = writeln!(
            out,
            "<details><summary>{} ({} keys)</summary>",
            esc_html(&shared.title),
            shared.rows.len()
        );
        tables_html(&mut out, [shared]);
        out.push_str("</details>\n");
        let runs = runs_table(self);
        let _ = writeln!(out, "<details><summary>Runs ({})</summary>", runs.rows.len());
        tables_html(&mut out, [runs]);
        out.push_str("</details>\n</section>\n</body></html>\n");
        Ok(out)
    }
}

/// The findings first: one list per plan (headed by the plan's name when
/// there are several), each finding with what it measured on, its latency
/// story and its warnings, then the configurations compared.
fn findings_html(out: &mut String, r: &Report) {
    let found = findings(r);
    if !found.is_empty() {
        out.push_str("<section class=\"findings\" id=\"findings\"><h2>What was found</h2>\n");
        let mut plans: Vec<Option<&str>> = Vec::new();
        for f in &found {
            if !plans.contains(&f.plan.as_deref()) {
                plans.push(f.plan.as_deref());
            }
        }
        for p in plans {
            if plans_named(&found) {
                let _ = writeln!(
                    out,
                    "<h3>{}</h3>",
                    esc_html(&p.map(|p| format!("plan {p}")).unwrap_or_else(|| "runs outside a plan".into()))
                );
            }
            out.push_str("<ul>\n");
            for f in found.iter().filter(|f| f.plan.as_deref() == p) {
                let _ = write!(out, "<li>{}", esc_html(&f.text));
                for l in &f.storage {
                    let _ = write!(out, "<div class=\"storage\">measured on {}</div>", esc_html(l));
                }
                for l in &f.latency {
                    let _ = write!(out, "<div class=\"lat\">{}</div>", esc_html(l));
                }
                for v in &f.verdicts {
                    let _ = write!(out, "<div class=\"verdict\">verdict {}</div>", esc_html(v));
                }
                for v in &f.sensitivity {
                    let _ = write!(out, "<div class=\"verdict\">sensitivity {}</div>", esc_html(v));
                }
                for w in &f.waits {
                    let _ = write!(out, "<div class=\"waits\">waits {}</div>", esc_html(w));
                }
                if !f.warnings.is_empty() {
                    out.push_str("<ul class=\"warn\">");
                    for w in &f.warnings {
                        let _ = write!(out, "<li>⚠ {}</li>", esc_html(w));
                    }
                    out.push_str("</ul>");
                }
                out.push_str("</li>\n");
            }
            out.push_str("</ul>\n");
        }
        if let Some(a) = axes_line(r) {
            let _ = writeln!(out, "<p class=\"axes\">Configurations compared: {}.</p>", esc_html(&a));
        }
        out.push_str("</section>\n");
    }
}

/// Whether findings come from more than one plan (or from runs outside
/// one): then each plan gets a heading.
fn plans_named(found: &[crate::findings::Finding]) -> bool {
    found.iter().any(|f| f.plan != found[0].plan)
}
