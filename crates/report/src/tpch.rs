//! TPC-H sections: seconds per query and refresh function per configuration
//! (a column per group, the median over repeats), the ratio of each query's
//! time between the first configuration and each other one (what a cache or
//! a faster medium did for that query), the storage figures per query (read
//! MB/s, iowait, PostgreSQL temp bytes), the geomean / Power@Size /
//! Throughput@Size / QphH@Size table, and per-query bars on a log scale.
//!
//! Reads only the steps `storbench tpch run` writes: `power qN`, `power rf1`,
//! `power rf2` and `summary`.

use plotters::prelude::*;

use crate::chart::{category_labels, draw_svg, figure, legend, Canvas, NARROW, WIDE};
use crate::model::Section;
use crate::table::Table;
use crate::units::fmt_num;
use crate::ReportError;

/// Power-test items in query-number order, then the refresh functions.
fn items() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = (1..=22).map(|q| (format!("power q{q}"), format!("Q{q}"))).collect();
    v.push(("power rf1".into(), "RF1".into()));
    v.push(("power rf2".into(), "RF2".into()));
    v
}

fn median(s: &Section<'_>, gi: usize, step: &str, metric: &str) -> f64 {
    s.groups[gi].stat(step, metric).median()
}

/// The figure over the system monitor's devices: the largest per-device read MB/s.
fn read_mbps(s: &Section<'_>, gi: usize, step: &str) -> f64 {
    let runs = &s.groups[gi].runs;
    let mut per_run: Vec<f64> = runs
        .iter()
        .filter_map(|r| {
            let st = r.step(step)?;
            st.metrics
                .iter()
                .filter(|(k, _)| {
                    k.starts_with("dev.") && (k.ends_with(".r_mbps") || k.ends_with(".read_mbps"))
                })
                .map(|(_, v)| v.0)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        })
        .collect();
    per_run.sort_by(f64::total_cmp);
    per_run.get(per_run.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The tables of a TPC-H section (empty when it holds no power test).
pub(crate) fn tables(s: &Section<'_>) -> Vec<Table> {
    let mut out = Vec::new();
    let names: Vec<String> = s.groups.iter().map(|g| g.label.clone()).collect();
    let has_power = s.groups.iter().any(|g| {
        g.runs
            .iter()
            .any(|r| r.step("power q1").is_some() || r.steps.iter().any(|st| st.label.starts_with("power q")))
    });
    if has_power {
        let mut header = vec!["query".to_string()];
        header.extend(names.iter().map(|n| format!("{n} s")));
        for n in names.iter().skip(1) {
            header.push(format!("{n} / {}", names[0]));
        }
        let mut rows = Vec::new();
        for (step, name) in items() {
            let vals: Vec<f64> = (0..s.groups.len()).map(|gi| median(s, gi, &step, "seconds")).collect();
            if vals.iter().all(|v| v.is_nan()) {
                continue;
            }
            let mut row = vec![name];
            row.extend(vals.iter().map(|v| fmt_num(*v)));
            for v in vals.iter().skip(1) {
                row.push(if vals[0] > 0.0 { format!("{:.2}×", v / vals[0]) } else { "–".into() });
            }
            rows.push(row);
        }
        out.push(Table {
            title: format!("{} — seconds per query (power test; median over repeats)", s.title()),
            header,
            rows,
            notes: Vec::new(),
        });

        let mut header = vec!["query".to_string()];
        for n in &names {
            header.extend([format!("{n} read MB/s"), format!("{n} iowait %"), format!("{n} temp MB")]);
        }
        let mut rows = Vec::new();
        for (step, name) in items() {
            let mut row = vec![name];
            let mut any = false;
            for gi in 0..s.groups.len() {
                let r = read_mbps(s, gi, &step);
                let io = median(s, gi, &step, "cpu.iowait");
                let tb = median(s, gi, &step, "temp_bytes") / 1e6;
                any |= !(r.is_nan() && io.is_nan() && tb.is_nan());
                row.extend([fmt_num(r), fmt_num(io), fmt_num(tb)]);
            }
            if any {
                rows.push(row);
            }
        }
        out.push(Table {
            title: format!("{} — storage per query (device read MB/s, CPU iowait, temp files)", s.title()),
            header,
            rows,
            notes: Vec::new(),
        });
    }
    let mut header = vec!["figure".to_string()];
    header.extend(names.iter().cloned());
    let mut rows = Vec::new();
    for (metric, label) in [
        ("power.geomean", "geometric mean of query seconds (power)"),
        ("throughput.seconds", "throughput test seconds (Ts)"),
        ("tpch.power", "Power@Size"),
        ("tpch.throughput", "Throughput@Size"),
        ("tpch.qphh", "QphH@Size"),
    ] {
        let stats: Vec<_> = s.groups.iter().map(|g| g.stat("summary", metric)).collect();
        if stats.iter().all(|x| x.n() == 0) {
            continue;
        }
        let mut row = vec![label.to_string()];
        row.extend(stats.iter().map(|x| x.display()));
        rows.push(row);
    }
    if !rows.is_empty() {
        out.push(Table {
            title: format!("{} — TPC-H figures", s.title()), header, rows, notes: Vec::new()
        });
    }
    out
}

/// Per-query bars (log scale), one bar per configuration.
fn bars(s: &Section<'_>, cv: Canvas) -> Result<Option<String>, ReportError> {
    let title = format!("{} — seconds per query (log scale)", s.title());
    let cats: Vec<(String, String)> = items()
        .into_iter()
        .filter(|(step, _)| (0..s.groups.len()).any(|gi| median(s, gi, step, "seconds") > 0.0))
        .collect();
    if cats.is_empty() {
        return Ok(None);
    }
    let vals: Vec<Vec<f64>> = (0..s.groups.len())
        .map(|gi| cats.iter().map(|(step, _)| median(s, gi, step, "seconds")).collect())
        .collect();
    let pos = vals.iter().flatten().copied().filter(|v| *v > 0.0);
    let lo = pos.clone().fold(f64::INFINITY, f64::min);
    let hi = pos.fold(0.0f64, f64::max);
    let (y0, y1) = (10f64.powf(lo.log10().floor()), 10f64.powf(hi.log10().ceil()).max(lo * 10.0));
    let n = cats.len();
    let w = if cv.narrow { cv.w } else { 960 };
    let names: Vec<String> = cats.iter().map(|c| c.1.clone()).collect();
    draw_svg(&title, (w, cv.h + cv.x_area(&names) - 40), |root, e| {
        let mut chart = ChartBuilder::on(root)
            .caption(&title, ("sans-serif", cv.caption))
            .margin(12)
            .x_label_area_size(cv.x_area(&names))
            .y_label_area_size(cv.y_area)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (y0..y1).log_scale())
            .map_err(|x| e(x.to_string()))?;
        let fmt = category_labels(names.clone(), |l| cv.x_label(n, l));
        chart
            .configure_mesh()
            .label_style(cv.font())
            .x_label_style(cv.x_label_style(n))
            .axis_desc_style(cv.font())
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&fmt)
            .y_label_formatter(&|v| fmt_num(*v))
            .y_desc("seconds")
            .draw()
            .map_err(|x| e(x.to_string()))?;
        let gn = s.groups.len().max(1) as f64;
        let width = 0.8 / gn;
        for (gi, g) in s.groups.iter().enumerate() {
            let c = Palette99::pick(gi).to_rgba();
            let left = |ci: usize| ci as f64 - 0.4 + gi as f64 * width;
            chart
                .draw_series(vals[gi].iter().enumerate().filter(|(_, v)| **v > 0.0).map(|(ci, v)| {
                    Rectangle::new([(left(ci), y0), (left(ci) + width * 0.9, *v)], c.filled())
                }))
                .map_err(|x| e(x.to_string()))?
                .label(g.label.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, cv.text, e)?;
        Ok(())
    })
    .map(Some)
}

/// A TPC-H section's chart as HTML: per-query bars on a log scale (the
/// report's `extra_charts` hook for the kind; its tables come through `extra`).
pub(crate) fn charts(s: &Section<'_>) -> Result<String, ReportError> {
    let mut out = String::new();
    if let (Some(wide), Some(narrow)) = (bars(s, WIDE)?, bars(s, NARROW)?) {
        figure(
            &mut out,
            "Seconds per query and refresh function, power test, median over repeats; log scale",
            &wide,
            &narrow,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use storbench_results::{RunRow, Status};

    use super::*;
    use crate::model::{Group, RunData, StepData};

    fn step(idx: i64, label: &str, metrics: &[(&str, f64)]) -> StepData {
        StepData {
            idx,
            label: label.into(),
            params: serde_json::json!({}),
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), (*v, "s".to_string()))).collect(),
            samples: BTreeMap::new(),
            notes: BTreeMap::new(),
        }
    }

    fn group(label: &str, q1: f64, q6: f64, power: f64) -> Group {
        let run = RunRow {
            id: 1,
            uuid: "u".into(),
            kind: "tpch".into(),
            label: label.into(),
            started_at: String::new(),
            finished_at: None,
            status: Status::Complete,
            config: serde_json::json!({}),
            env: serde_json::json!({}),
            plan: None,
            cell: None,
        };
        let steps = vec![
            step(0, "power q6", &[("seconds", q6), ("temp_bytes", 0.0), ("dev.vda.r_mbps", 50.0)]),
            step(1, "power q1", &[("seconds", q1), ("temp_bytes", 2e6), ("dev.vda.r_mbps", 120.0)]),
            step(2, "summary", &[("tpch.power", power), ("power.geomean", (q1 * q6).sqrt())]),
        ];
        Group {
            kind: "tpch".into(),
            plan: None,
            label: label.into(),
            runs: vec![RunData { run, steps, sensitivity: Vec::new() }],
        }
    }

    #[test]
    fn per_query_seconds_ratios_and_figures() {
        let (a, b) = (group("slow", 4.0, 1.0, 900.0), group("fast", 1.0, 0.5, 1800.0));
        let s = Section { kind: "tpch", plan: None, groups: vec![&a, &b] };
        let t = tables(&s);
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].header, ["query", "slow s", "fast s", "fast / slow"]);
        assert_eq!(t[0].rows[0], ["Q1", "4", "1", "0.25×"]);
        assert_eq!(t[0].rows[1], ["Q6", "1", "0.500", "0.50×"]);
        assert_eq!(t[1].rows[0][1..4], ["120", "–", "2"]);
        assert_eq!(t[2].rows[1], ["Power@Size", "900", "1800"]);
        let html = super::charts(&s).unwrap();
        assert!(html.contains("<svg") && html.contains("log scale"));
    }
}
