//! The report's tables — one model ([`Table`]) rendered to text (comfy-table),
//! Markdown and HTML — and the text, Markdown and CSV reports built from them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table as Comfy};

use crate::model::{flatten, Report, Section};

/// A table with a title, a header row and body rows of text cells.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Title shown above the table.
    pub title: String,
    /// Column headers.
    pub header: Vec<String>,
    /// Body rows (same length as the header).
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Renders for a terminal.
    pub fn to_text(&self) -> String {
        let mut t = Comfy::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
        t.set_header(self.header.clone());
        for r in &self.rows {
            t.add_row(r.clone());
        }
        format!("{}\n{t}\n", self.title)
    }

    /// Renders as a GitHub-flavoured Markdown table.
    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let mut out = format!(
            "### {}\n\n| {} |\n|",
            self.title,
            self.header.iter().map(|h| esc(h)).collect::<Vec<_>>().join(" | ")
        );
        for i in 0..self.header.len() {
            out.push_str(if i == 0 { " --- |" } else { " ---: |" });
        }
        out.push('\n');
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | "));
        }
        out.push('\n');
        out
    }

    /// Renders as an HTML table (escaped).
    pub fn to_html(&self) -> String {
        let mut out = format!("<h3>{}</h3>\n<table class=\"t\"><thead><tr>", esc_html(&self.title));
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", esc_html(h));
        }
        out.push_str("</tr></thead><tbody>\n");
        for r in &self.rows {
            out.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                let tag = if i == 0 { "th" } else { "td" };
                let _ = write!(out, "<{tag}>{}</{tag}>", esc_html(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
        out
    }
}

/// Escapes text for HTML.
pub(crate) fn esc_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn spread_note(section: &Section<'_>) -> &'static str {
    if section.groups.iter().any(|g| g.runs.len() > 1) {
        "median (min–max, n repeats)"
    } else {
        "single runs: no spread known"
    }
}

/// The summary tables of a section: rows = load level, columns = group,
/// one table per main figure.
pub(crate) fn summary_tables(section: &Section<'_>) -> Vec<Table> {
    let steps = section.step_labels();
    section
        .main_metrics()
        .into_iter()
        .map(|(metric, title)| {
            let mut header = vec![section.row_axis().to_string()];
            header.extend(section.groups.iter().map(|g| g.label.clone()));
            let rows = steps
                .iter()
                .map(|s| {
                    let mut row = vec![s.clone()];
                    row.extend(section.groups.iter().map(|g| g.stat(s, metric).display()));
                    row
                })
                .collect();
            let unit = section.groups.iter().find_map(|g| g.unit(metric)).unwrap_or_default();
            Table {
                title: format!("{} — {title} [{unit}] ({})", section.title(), spread_note(section)),
                header,
                rows,
            }
        })
        .collect()
}

/// Latency percentiles per step and group (µs, medians over repeats).
pub(crate) fn latency_table(section: &Section<'_>) -> Option<Table> {
    let p = section.latency_prefix();
    let cols = ["mean", "p50", "p90", "p99", "p99.9", "max"];
    let mut rows = Vec::new();
    for s in section.step_labels() {
        for g in &section.groups {
            let stats: Vec<_> = cols.iter().map(|c| g.stat(&s, &format!("{p}.{c}"))).collect();
            if stats.iter().all(|x| x.n() == 0) {
                continue;
            }
            let mut row = vec![s.clone(), g.label.clone()];
            row.extend(stats.iter().map(|x| x.display()));
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut header = vec![section.row_axis().to_string(), "target".to_string()];
    header.extend(cols.iter().map(|c| format!("{p}.{c} (us)")));
    Some(Table { title: format!("{} — latency percentiles", section.title()), header, rows })
}

/// The system beside the workload: iowait and each device's await (ms).
pub(crate) fn system_table(section: &Section<'_>) -> Option<Table> {
    let names: Vec<String> = section
        .metric_names()
        .into_iter()
        .filter(|n| {
            n == "cpu.iowait"
                || n == "cpu.iowait.p99"
                || (n.starts_with("dev.")
                    && (n.ends_with(".r_await") || n.ends_with(".w_await") || n.ends_with(".util")))
        })
        .collect();
    if names.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    for s in section.step_labels() {
        for g in &section.groups {
            let stats: Vec<_> = names.iter().map(|n| g.stat(&s, n)).collect();
            if stats.iter().all(|x| x.n() == 0) {
                continue;
            }
            let mut row = vec![s.clone(), g.label.clone()];
            row.extend(stats.iter().map(|x| x.display()));
            rows.push(row);
        }
    }
    let mut header = vec![section.row_axis().to_string(), "target".to_string()];
    let unit_of = |n: &str| section.groups.iter().find_map(|g| g.unit(n)).unwrap_or_default();
    header.extend(names.iter().map(|n| format!("{n} ({})", unit_of(n))));
    Some(Table { title: format!("{} — CPU iowait and device latency", section.title()), header, rows })
}

/// The environment: what all runs share, then what differs per run.
pub(crate) fn env_tables(report: &Report) -> Vec<Table> {
    let runs: Vec<_> = report.runs().collect();
    let flat: Vec<BTreeMap<String, String>> = runs
        .iter()
        .map(|r| {
            let mut v = Vec::new();
            flatten("", &r.run.env, &mut v);
            v.into_iter().collect()
        })
        .collect();
    let mut keys: Vec<&String> = flat.iter().flat_map(|m| m.keys()).collect();
    keys.sort();
    keys.dedup();
    let (common, differ): (Vec<&String>, Vec<&String>) =
        keys.into_iter().partition(|k| flat.iter().all(|m| m.get(*k) == flat[0].get(*k)));
    let mut out = vec![Table {
        title: format!("Environment shared by all {} runs", runs.len()),
        header: vec!["key".into(), "value".into()],
        rows: common.iter().map(|k| vec![(*k).clone(), flat[0][*k].clone()]).collect(),
    }];
    let header: Vec<String> = ["run", "uuid", "kind", "plan/cell", "label", "status", "started"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows = runs
        .iter()
        .map(|r| {
            let run = &r.run;
            vec![
                run.id.to_string(),
                run.uuid.chars().take(8).collect(),
                run.kind.clone(),
                match (&run.plan, &run.cell) {
                    (Some(p), Some(c)) => format!("{p}/{c}"),
                    (Some(p), None) => p.clone(),
                    _ => String::new(),
                },
                run.label.clone(),
                run.status.as_str().to_string(),
                run.started_at.clone(),
            ]
        })
        .collect();
    out.push(Table { title: "Runs".into(), header, rows });
    if !differ.is_empty() {
        // One row per differing key, one column per run: stays readable on a
        // terminal however many keys differ.
        let mut header = vec!["key".to_string()];
        header.extend(runs.iter().map(|r| format!("run {}", r.run.id)));
        let rows = differ
            .iter()
            .map(|k| {
                let mut row = vec![(*k).clone()];
                row.extend(flat.iter().map(|m| m.get(*k).cloned().unwrap_or_default()));
                row
            })
            .collect();
        out.push(Table { title: "What differs between the runs' environments".into(), header, rows });
    }
    out
}

/// Every table of the report, in order: per section its summaries, latency
/// and system tables; then the environment.
pub(crate) fn all_tables(report: &Report) -> Vec<Table> {
    let mut out = Vec::new();
    for s in report.sections() {
        out.extend(summary_tables(&s));
        out.extend(latency_table(&s));
        out.extend(system_table(&s));
    }
    out.extend(env_tables(report));
    out
}

fn preamble(report: &Report) -> Vec<String> {
    let mut lines = vec![format!(
        "storbench report: {} ({} runs, kinds: {})",
        report.selection.join(", "),
        report.runs().count(),
        report.kinds().join(", ")
    )];
    if report.kinds().len() > 1 {
        lines.push("Runs of different kinds share no table: each kind has its own tables.".into());
    }
    if let Some(n) = report.emulation_note() {
        lines.push(format!("Note: {n}"));
    }
    if let Some(n) = report.incomplete_note() {
        lines.push(format!("Warning: {n}"));
    }
    lines
}

impl Report {
    /// The report for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = preamble(self).join("\n");
        out.push_str("\n\n");
        for t in all_tables(self) {
            out.push_str(&t.to_text());
            out.push('\n');
        }
        out
    }

    /// The report as Markdown (for issue trackers).
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        for (i, l) in preamble(self).into_iter().enumerate() {
            if i == 0 {
                let _ = writeln!(out, "## {l}\n");
            } else {
                let _ = writeln!(out, "> {l}\n");
            }
        }
        for t in all_tables(self) {
            out.push_str(&t.to_markdown());
        }
        out
    }

    /// Every figure as CSV: one row per plan, kind, group, step and metric,
    /// with the median, min, max and number of repeats.
    pub fn to_csv(&self) -> String {
        let q = |s: &str| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut out = String::from("plan,kind,group,step,metric,unit,n,median,min,max\n");
        for s in self.sections() {
            let metrics = s.metric_names();
            for step in s.step_labels() {
                for g in &s.groups {
                    for m in &metrics {
                        let st = g.stat(&step, m);
                        if st.n() == 0 {
                            continue;
                        }
                        let _ = writeln!(
                            out,
                            "{},{},{},{},{},{},{},{},{},{}",
                            q(s.plan.unwrap_or("")),
                            q(s.kind),
                            q(&g.label),
                            q(&step),
                            q(m),
                            q(&g.unit(m).unwrap_or_default()),
                            st.n(),
                            st.median(),
                            st.min(),
                            st.max()
                        );
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table {
            title: "plan s5 · io — IOPS [per_s] (median (min–max, n repeats))".into(),
            header: vec!["profile".into(), "target=hdd".into(), "target=a|b".into()],
            rows: vec![
                vec!["oltp-read-8k".into(), "110 (100–120, n=2)".into(), "1050 (1000–1100, n=2)".into()],
                vec!["wal<append>".into(), "55".into(), "–".into()],
            ],
        }
    }

    #[test]
    fn table_renders_as_text() {
        insta::assert_snapshot!(table().to_text());
    }

    #[test]
    fn table_renders_as_markdown_with_pipes_escaped() {
        insta::assert_snapshot!(table().to_markdown());
    }

    #[test]
    fn table_renders_as_escaped_html() {
        insta::assert_snapshot!(table().to_html());
    }
}
