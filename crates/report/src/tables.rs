//! The report's tables, assembled per section (figures, latency, system,
//! setup, environment) from the one table model (`table.rs`), and the text,
//! Markdown and CSV reports built from them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::findings::{findings, section_warnings};
use crate::model::{flatten, FigureCol, Group, Report, RunData, Section};
use crate::table::{wrap, Table, TERMINAL_WIDTH};
use crate::units::scale_for;

fn spread_note(section: &Section<'_>) -> &'static str {
    if section.groups.iter().any(|g| g.runs.len() > 1) {
        "median (min–max, n repeats)"
    } else {
        "single runs: no spread known"
    }
}

/// True when a run of the group recorded a warning, or a step `step` of one
/// raised a flag: its cells carry a mark.
fn flagged(g: &Group, step: &str, metric: &str) -> bool {
    g.runs.iter().any(|r| {
        !r.warnings().is_empty()
            || r.step(step).is_some_and(|s| s.flags().iter().any(|(name, _)| flag_concerns(name, metric)))
    })
}

/// Whether flag `name` (without `flag.`) concerns figure `metric`: a
/// workload's flag names the figures it is about (the short server window
/// only the server's count); any other concerns the whole step.
fn flag_concerns(name: &str, metric: &str) -> bool {
    storbench_workloads::figures::flag_concerns(name).is_none_or(|m| m.contains(&metric))
}

/// Whether some run of `g` flags its step `step` for figure `metric` alone
/// (a flag with a scope that holds it: the server's short window).
fn flagged_for(g: &Group, step: &str, metric: &str) -> bool {
    g.runs.iter().any(|r| {
        r.step(step).is_some_and(|s| {
            s.flags().iter().any(|(name, _)| {
                storbench_workloads::figures::flag_concerns(name).is_some_and(|m| m.contains(&metric))
            })
        })
    })
}

/// The divisor and unit label for every value of `metric` in a section:
/// one scale per table, chosen by its largest median.
fn section_scale(section: &Section<'_>, metric: &str, steps: &[String]) -> (f64, String) {
    let unit = section.groups.iter().find_map(|g| g.unit(metric)).unwrap_or_default();
    let largest = steps
        .iter()
        .flat_map(|s| section.groups.iter().map(move |g| g.stat(s, metric).median()))
        .filter(|v| v.is_finite())
        .fold(0.0, |a: f64, v| a.max(v.abs()));
    scale_for(metric, &unit, largest)
}

/// The summary tables of a section: rows = load level, columns = group,
/// one table per main figure, by its headline source. The other sources of
/// the figure (the server's count beside the clients') are a cross-check,
/// said in a sentence under the table; a source equal to the headline in
/// every cell (a copy under another name) is not repeated. Cells of flagged
/// steps carry ⚠, and the flags are named under the first table.
pub(crate) fn summary_tables(section: &Section<'_>) -> Vec<Table> {
    let steps = section.step_labels();
    let warnings = section_warnings(section);
    let all = section.figures();
    section
        .headline_figures()
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let mut header = vec![section.row_axis().to_string()];
            header.extend(section.groups.iter().map(|g| g.label.clone()));
            let (div, unit) = section_scale(section, &f.metric, &steps);
            let rows = steps
                .iter()
                .map(|s| {
                    let mut row = vec![s.clone()];
                    row.extend(section.groups.iter().map(|g| {
                        let st = g.stat(s, &f.metric);
                        let mark = if st.n() > 0 && flagged(g, s, &f.metric) { " ⚠" } else { "" };
                        format!("{}{mark}", st.scaled(div).display())
                    }));
                    row
                })
                .collect();
            let unit = if unit.is_empty() || unit == f.label { String::new() } else { format!(", {unit}") };
            let mut notes: Vec<String> =
                if i == 0 { warnings.iter().map(|w| format!("⚠ {w}")).collect() } else { Vec::new() };
            notes.extend(
                all.iter()
                    .filter(|o| o.base == f.base && o.metric != f.metric)
                    .filter_map(|o| cross_check(section, &f, o)),
            );
            Table {
                title: format!("{} — {}{unit} · {}", section.title(), f.title(), spread_note(section)),
                header,
                rows,
                notes,
            }
        })
        .collect()
}

/// How another source of a figure agrees with the headline, over every
/// step and configuration both have: "Cross-check, server counters: the
/// same TPS within 0.1 %." or the range of the differences. None
/// when they have no cell in common, or when the headline is a bare name
/// and the other equal to it in every cell (a copy of the headline under
/// another name).
pub(crate) fn cross_check(section: &Section<'_>, head: &FigureCol, other: &FigureCol) -> Option<String> {
    let mut diffs = Vec::new();
    // Cells whose step flags the other figure (the server's count over a
    // window too short for it) are left out, and said to be.
    let mut short = std::collections::BTreeSet::new();
    for s in section.step_labels() {
        for g in &section.groups {
            let (h, o) = (g.stat(&s, &head.metric), g.stat(&s, &other.metric));
            if h.n() > 0 && o.n() > 0 && h.median() != 0.0 {
                if flagged_for(g, &s, &other.metric) || flagged_for(g, &s, &head.metric) {
                    short.insert(s.clone());
                } else {
                    diffs.push(o.median() / h.median() - 1.0);
                }
            }
        }
    }
    let who = if other.source.is_empty() { other.metric.clone() } else { other.source.clone() };
    let left_out = match short.len() {
        0 => String::new(),
        1 => " One step is left out: its window was too short for the server's count.".to_string(),
        n => format!(" {n} steps are left out: their windows were too short for the server's count."),
    };
    if diffs.is_empty() {
        return (!short.is_empty()).then(|| {
            format!(
                "Cross-check, {who}: none — every step's window was too short for the server's count ({}).",
                other.metric
            )
        });
    }
    cross_check_sentence(head, other, &who, &diffs).map(|t| t + &left_out)
}

fn cross_check_sentence(head: &FigureCol, other: &FigureCol, who: &str, diffs: &[f64]) -> Option<String> {
    if diffs.iter().all(|d| d.abs() < 1e-12) {
        // The bare name beside a source equal in every cell is one count
        // stored twice (`tps` and `tps.client`); two named sources that
        // agree exactly are two counts that agree.
        return (head.metric != head.base)
            .then(|| format!("Cross-check, {who}: the same {} exactly ({}).", head.label, other.metric));
    }
    let (lo, hi) = diffs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |a, d| (a.0.min(*d), a.1.max(*d)));
    let against = if head.source.is_empty() { head.metric.clone() } else { head.source.clone() };
    let pct = |d: f64| {
        let v = d * 100.0;
        let t = if v.abs() >= 10.0 { format!("{v:+.0}") } else { format!("{v:+.1}") };
        t.replace('-', "−")
    };
    Some(if lo.abs().max(hi.abs()) <= 0.001 {
        format!("Cross-check, {who}: the same {} within 0.1 % ({}).", head.label, other.metric)
    } else if diffs.len() == 1 || (hi - lo).abs() < 0.0005 {
        format!("Cross-check, {who}: {} {} % against {against} ({}).", head.label, pct(hi), other.metric)
    } else {
        format!(
            "Cross-check, {who}: {} {} % to {} % against {against} ({}).",
            head.label,
            pct(lo),
            pct(hi),
            other.metric
        )
    })
}

/// Latency percentiles per step and group (medians over repeats), in µs or
/// ms as their size asks.
pub(crate) fn latency_table(section: &Section<'_>) -> Option<Table> {
    let p = section.spec().latency_prefix;
    let cols = ["mean", "p50", "p90", "p99", "p99.9", "max"];
    let steps = section.step_labels();
    let mut rows = Vec::new();
    let largest = steps
        .iter()
        .flat_map(|s| section.groups.iter().map(move |g| g.stat(s, &format!("{p}.p99")).median()))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let (div, unit) = scale_for(&format!("{p}.p99"), "us", largest);
    for s in &steps {
        for g in &section.groups {
            let stats: Vec<_> = cols.iter().map(|c| g.stat(s, &format!("{p}.{c}"))).collect();
            if stats.iter().all(|x| x.n() == 0) {
                continue;
            }
            let mut row = vec![s.clone(), g.label.clone()];
            row.extend(stats.iter().map(|x| x.scaled(div).display()));
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut header = vec![section.row_axis().to_string(), "target".to_string()];
    header.extend(cols.iter().map(|c| format!("{c} ({unit})")));
    Some(Table {
        title: format!("{} — latency percentiles ({p}.*), {unit}", section.title()),
        header,
        rows,
        notes: crate::findings::latency_story(section),
    })
}

/// The system beside the workload: CPU iowait and steal, then one row per
/// device the step saw (its `r_await`, `w_await` in ms and `util`). One row
/// per device keeps the table narrow when each configuration has its own
/// device (a plan's loop devices), where a column per device would be
/// mostly empty.
pub(crate) fn system_table(section: &Section<'_>) -> Option<Table> {
    const CPU: [&str; 3] = ["cpu.iowait", "cpu.iowait.p99", "cpu.steal"];
    const DEV: [&str; 3] = ["r_await", "w_await", "util"];
    let names = section.metric_names();
    let cpu: Vec<&str> = CPU.iter().copied().filter(|c| names.iter().any(|n| n == c)).collect();
    let mut devices: Vec<String> = names
        .iter()
        .filter_map(|n| {
            let rest = n.strip_prefix("dev.")?;
            let (dev, what) = rest.rsplit_once('.')?;
            DEV.contains(&what).then(|| dev.to_string())
        })
        .collect();
    devices.dedup();
    if cpu.is_empty() && devices.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    for s in section.step_labels() {
        for g in &section.groups {
            let cpu_cells: Vec<String> = cpu.iter().map(|c| g.stat(&s, c).display()).collect();
            let mut first = true;
            for d in &devices {
                let stats: Vec<_> = DEV.iter().map(|w| g.stat(&s, &format!("dev.{d}.{w}"))).collect();
                if stats.iter().all(|x| x.n() == 0) {
                    continue;
                }
                let mut row = vec![s.clone(), g.label.clone()];
                // The CPU's figures once per step and configuration.
                row.extend(if first { cpu_cells.clone() } else { vec![String::new(); cpu.len()] });
                row.push(d.clone());
                row.extend(stats.iter().map(|x| x.display()));
                rows.push(row);
                first = false;
            }
            if first && cpu_cells.iter().any(|c| c != "–") {
                let mut row = vec![s.clone(), g.label.clone()];
                row.extend(cpu_cells);
                row.extend(std::iter::repeat_n("–".to_string(), 1 + DEV.len()));
                rows.push(row);
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut header = vec![section.row_axis().to_string(), "configuration".to_string()];
    header.extend(cpu.iter().map(|c| format!("{c} (%)")));
    header.push("device".into());
    header.extend(["r_await (ms)", "w_await (ms)", "util (%)"].map(String::from));
    Some(Table {
        title: format!("{} — CPU and device latency", section.title()),
        header,
        rows,
        notes: Vec::new(),
    })
}

/// Setup runs (load, build): one row per run with its own figures (the
/// system monitor's are left to the runs that measure).
pub(crate) fn setup_table(section: &Section<'_>) -> Option<Table> {
    let names: Vec<String> = section
        .metric_names()
        .into_iter()
        .filter(|n| !["cpu.", "dev.", "psi."].iter().any(|p| n.starts_with(p)))
        .collect();
    if names.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    for g in &section.groups {
        for r in &g.runs {
            for st in &r.steps {
                // A plan's setup runs share one label; their cell says
                // which configuration each prepared.
                let name = r.run.cell.as_deref().unwrap_or(&r.run.label);
                let mut row = vec![format!("#{} {name}", r.run.id)];
                row.extend(names.iter().map(|n| {
                    st.metrics
                        .get(n)
                        .map(|(v, u)| crate::units::with_unit(*v, n, u))
                        .unwrap_or_else(|| "–".into())
                }));
                rows.push(row);
            }
        }
    }
    let mut header = vec!["run".to_string()];
    header.extend(names);
    let name = section.spec().name;
    let name = if name.is_empty() { section.kind } else { name };
    Some(Table { title: format!("{} — {name} (setup)", section.title()), header, rows, notes: Vec::new() })
}

/// Flattened environments of runs: key → value.
fn flat_env(runs: &[&RunData]) -> Vec<BTreeMap<String, String>> {
    runs.iter()
        .map(|r| {
            let mut v = Vec::new();
            flatten("", &r.run.env, &mut v);
            v.into_iter().collect()
        })
        .collect()
}

/// Keys whose values are not the same in every one of these environments.
fn differing_keys(flat: &[BTreeMap<String, String>]) -> Vec<String> {
    let mut keys: Vec<&String> = flat.iter().flat_map(|m| m.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().filter(|k| !flat.iter().all(|m| m.get(*k) == flat[0].get(*k))).cloned().collect()
}

/// What differs between the configurations a section compares: one row per
/// key, one column per configuration (repeats that differ show each value).
pub(crate) fn env_difference_table(section: &Section<'_>) -> Option<Table> {
    let runs: Vec<&RunData> = section.groups.iter().flat_map(|g| &g.runs).collect();
    if runs.len() < 2 {
        return None;
    }
    let flat = flat_env(&runs);
    let keys = differing_keys(&flat);
    if keys.is_empty() {
        return None;
    }
    let mut header = vec!["key".to_string()];
    header.extend(section.groups.iter().map(|g| g.label.clone()));
    let rows = keys
        .iter()
        .map(|k| {
            let mut row = vec![k.clone()];
            let mut i = 0;
            for g in &section.groups {
                let mut vals: Vec<String> = Vec::new();
                for _ in &g.runs {
                    let v = flat[i].get(k).cloned().unwrap_or_else(|| "–".into());
                    if !vals.contains(&v) {
                        vals.push(v);
                    }
                    i += 1;
                }
                row.push(vals.join(" | "));
            }
            row
        })
        .collect();
    Some(Table {
        title: format!("{} — what differs between the runs' environments", section.title()),
        header,
        rows,
        notes: Vec::new(),
    })
}

/// What every run of the report shares (host, CPU, kernel, version).
pub(crate) fn env_shared_table(report: &Report) -> Table {
    let runs: Vec<&RunData> = report.runs().collect();
    let flat = flat_env(&runs);
    let differ = differing_keys(&flat);
    let rows = flat
        .first()
        .map(|m| {
            m.iter().filter(|(k, _)| !differ.contains(k)).map(|(k, v)| vec![k.clone(), v.clone()]).collect()
        })
        .unwrap_or_default();
    Table {
        title: format!("Environment shared by all {} runs", runs.len()),
        header: vec!["key".into(), "value".into()],
        rows,
        notes: Vec::new(),
    }
}

/// Every run of the report: id, uuid, plan and cell, status, start.
pub(crate) fn runs_table(report: &Report) -> Table {
    let header: Vec<String> = ["run", "uuid", "kind", "plan/cell", "label", "status", "started"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows = report
        .runs()
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
    Table { title: "Runs".into(), header, rows, notes: Vec::new() }
}

/// The replication headline's table of a section, if it is a study of
/// sync levels (`repl.rs`).
pub(crate) fn repl_table(s: &Section<'_>) -> Option<Table> {
    crate::repl::study(s).map(|st| crate::repl::table(s, &st))
}

/// The tables of one section, in order: the replication headline's (if
/// any), its summaries, the kind's own, latency and system; a setup
/// section has its one table.
pub(crate) fn section_tables(s: &Section<'_>) -> Vec<Table> {
    let spec = s.spec();
    if spec.setup {
        return setup_table(s).into_iter().collect();
    }
    let mut out: Vec<Table> = repl_table(s).into_iter().collect();
    out.extend(crate::neighbour::table(s));
    out.extend(crate::cache::tables(s));
    out.extend(crate::array::tables(s));
    out.extend(summary_tables(s));
    if let Some(extra) = spec.extra {
        out.extend(extra(s));
    }
    out.extend(latency_table(s));
    out.extend(system_table(s));
    out
}

/// Every table of the report, in order: the measuring sections', the setup
/// runs', then the environment (what differs per section, what all share,
/// the runs).
pub(crate) fn all_tables(report: &Report) -> Vec<Table> {
    let sections = report.sections();
    let mut out = Vec::new();
    for s in sections.iter().filter(|s| !s.spec().setup) {
        out.extend(section_tables(s));
    }
    for s in sections.iter().filter(|s| s.spec().setup) {
        out.extend(section_tables(s));
    }
    for s in sections.iter().filter(|s| !s.spec().setup) {
        out.extend(env_difference_table(s));
    }
    out.push(env_shared_table(report));
    out.push(runs_table(report));
    out
}

/// The lines a report opens with: what it covers, its notes, then one
/// sentence per section with the numbers (and the warnings beside them).
fn preamble(report: &Report) -> Vec<String> {
    let mut lines = vec![format!(
        "storbench report: {} ({} runs, kinds: {})",
        report.selection.join(", "),
        report.runs().count(),
        report.kinds().join(", ")
    )];
    if let Some(n) = report.emulation_note() {
        lines.push(format!("Note: {n}"));
    }
    if let Some(n) = report.incomplete_note() {
        lines.push(format!("Warning: {n}"));
    }
    // Under each sentence, indented: what it measured on (split at its
    // parts, so a long data directory keeps the line inside a terminal),
    // what its latency tells, its warnings.
    for f in findings(report) {
        lines.push(f.text);
        for l in f.storage {
            let mut parts = l.split("; ");
            lines.push(format!("  measured on {}", parts.next().unwrap_or_default()));
            lines.extend(parts.map(|p| format!("    {p}")));
        }
        lines.extend(f.latency.into_iter().map(|l| format!("  {l}")));
        for v in f.verdicts {
            lines.extend(wrap(&format!("verdict {v}"), "  ", "      ", TERMINAL_WIDTH));
        }
        for v in f.sensitivity {
            lines.extend(wrap(&format!("sensitivity {v}"), "  ", "      ", TERMINAL_WIDTH));
        }
        for w in f.waits {
            lines.extend(wrap(&format!("waits {w}"), "  ", "      ", TERMINAL_WIDTH));
        }
        lines.extend(f.warnings.into_iter().map(|w| format!("  ⚠ {w}")));
    }
    lines
}

/// The configurations a report compares, by the axes of its plan runs:
/// `target = hdd, nvme (3 repeats each)`; empty without plan runs.
pub(crate) fn axes_line(report: &Report) -> Option<String> {
    let mut axes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in report.runs().filter(|r| r.run.plan.is_some()) {
        if let Some(m) = r.run.config.get("axes").and_then(|a| a.as_object()) {
            for (k, v) in m {
                let v = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                let e = axes.entry(k.clone()).or_default();
                if !e.contains(&v) {
                    e.push(v);
                }
            }
        }
    }
    if axes.is_empty() {
        return None;
    }
    let repeats = report
        .groups
        .iter()
        .filter(|g| g.plan.is_some() && !crate::kinds::spec_of(&g.kind).setup)
        .map(|g| g.runs.len())
        .max()
        .unwrap_or(1);
    let what = axes.iter().map(|(k, v)| format!("{k} = {}", v.join(", "))).collect::<Vec<_>>().join("; ");
    Some(if repeats > 1 { format!("{what} (up to {repeats} repeats each)") } else { what })
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

    /// The short summary a plan ends with on a terminal: the findings, the
    /// main tables, and the differences between configurations named in a
    /// line (the axis values); the full environment is left to `results
    /// show` and the HTML report.
    pub fn to_summary(&self) -> String {
        let mut out = preamble(self).join("\n");
        out.push_str("\n\n");
        for s in self.sections().iter().filter(|s| !s.spec().setup) {
            for t in repl_table(s)
                .into_iter()
                .chain(crate::neighbour::table(s))
                .chain(crate::cache::tables(s))
                .chain(summary_tables(s))
            {
                out.push_str(&t.to_text());
                out.push('\n');
            }
        }
        if let Some(a) = axes_line(self) {
            let _ = writeln!(out, "Configurations compared: {a}.");
        }
        out.push_str(
            "The environment of each run (and what differs between them): the HTML report, or `storbench results show RUN`.\n",
        );
        out
    }

    /// The report as Markdown (for issue trackers).
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        for (i, l) in preamble(self).into_iter().enumerate() {
            if i == 0 {
                let _ = writeln!(out, "## {l}\n");
            } else if l.starts_with("Note:") || l.starts_with("Warning:") || l.starts_with("  ⚠") {
                let _ = writeln!(out, "> {}\n", l.trim_start());
            } else if l.starts_with("  ") {
                let _ = writeln!(out, "  - {}\n", l.trim_start());
            } else {
                let _ = writeln!(out, "- {l}\n");
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
        let q = storbench_results::csv_field;
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
