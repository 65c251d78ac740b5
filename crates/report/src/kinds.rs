//! What each kind of run shows, as data: its name in sentences, its main
//! figures (the first is the headline of a finding), its latency prefix, its
//! per-second series, and whether its runs are setup (`tpcb init`, `tpcc
//! build`: timings in one table, no charts). A database workload's kinds
//! are described by the workload itself (`storbench_workloads::catalog`:
//! `tpcb`, `tpcb-init`, `tpcc`, `tpcc-build`, `tpch`); the table here holds
//! only the kinds that are not a workload's — `io`, `backup` and
//! `crash-points` — and the renderers of a kind that needs more than a
//! table row (TPC-H's per-query bars, behind [`KindSpec::extra`] and
//! [`KindSpec::extra_charts`]); nothing else in the report names a kind.
//!
//! Also here: the methods of a [`Section`] that read its kind (its spec, its
//! main figures with their sources, its per-second series). How a figure's
//! name and unit read to a person is `units.rs`'.

use serde_json::Value;

use crate::model::{FigureCol, Section};
use crate::table::Table;
use crate::units::{source_label, source_of, source_rank};
use crate::ReportError;

/// A main figure of a kind: its base name (sources are dotted suffixes of
/// it), what people call it, and who counted the bare-named figure. The
/// database workloads' lists are their own (their `Description`s); only
/// kinds that are not a workload (I/O, backup, crash points) are listed
/// here.
pub use storbench_workloads::FigureSpec;

/// A kind's own charts: HTML (`<figure>`s with inline SVG) for a section.
pub type ChartsFn = fn(&Section<'_>) -> Result<String, ReportError>;

/// How one workload kind is reported.
#[derive(Clone, Copy)]
pub struct KindSpec {
    /// The `runs.kind` it describes.
    pub kind: &'static str,
    /// Its name in a sentence (`TPC-B`).
    pub name: &'static str,
    /// Main figures, headline first.
    pub figures: &'static [FigureSpec],
    /// Prefix of its latency figures (`lat`, `io.lat`).
    pub latency_prefix: &'static str,
    /// Base names of its per-second workload series.
    pub series: &'static [&'static str],
    /// Who counted a per-second series stored under its bare name (old
    /// runs: the clients counted every series; new ones say so by suffix).
    pub series_source: &'static str,
    /// Setup runs (load, build): one table of timings, no charts or findings.
    pub setup: bool,
    /// Extra tables of the kind's own (e.g. per-query times), if any: in
    /// every format, after the main tables.
    pub extra: Option<fn(&Section<'_>) -> Vec<Table>>,
    /// Extra charts of the kind's own, as HTML (`<figure>`s with inline
    /// SVG), if any: after the main charts.
    pub extra_charts: Option<ChartsFn>,
}

const fn f(base: &'static str, label: &'static str, source: &'static str) -> FigureSpec {
    FigureSpec { base, label, source }
}

const fn spec(kind: &'static str, name: &'static str, figures: &'static [FigureSpec]) -> KindSpec {
    KindSpec {
        kind,
        name,
        figures,
        latency_prefix: "lat",
        series: &[],
        series_source: "client count",
        setup: false,
        extra: None,
        extra_charts: None,
    }
}

/// The kinds that are not a workload's (a workload's are its
/// [`storbench_workloads::Description`]s); an unknown kind is reported
/// with the generic figures of [`OTHER`].
const KINDS: &[KindSpec] = &[
    KindSpec {
        latency_prefix: "io.lat",
        series: &["io.iops"],
        series_source: "completions",
        ..spec(
            "io",
            "I/O",
            &[
                f("io.iops", "IOPS", "completions"),
                f("io.mbps", "throughput", "completions"),
                f("io.lat.p99", "p99 latency", "client side"),
            ],
        )
    },
    // A backup run has one step: the tool's throughput, then its time.
    spec(
        "backup",
        "backup",
        &[f("backup.mb_per_s", "throughput", "tool's elapsed time"), f("backup.seconds", "backup time", "")],
    ),
    // `durability --crash-points`: a step per setting × cache mode.
    spec(
        "crash-points",
        "crash points",
        &[
            f("crash.lost.max", "acknowledged commits lost (worst point)", "recovered crash images"),
            f("crash.lost.p50", "lost (median point)", "recovered crash images"),
            f("crash.inconsistent", "inconsistent recoveries", "engine's consistency check"),
            f("crash.failed", "failed recoveries", ""),
            f("crash.points.tried", "crash points tried", ""),
        ],
    ),
];

/// A workload's kind as its description says, with the report's own
/// renderers where the kind has them (TPC-H's per-query tables and charts).
fn described(d: &storbench_workloads::Description) -> KindSpec {
    let k = KindSpec { series: d.series, setup: d.setup, ..spec(d.kind, d.title, d.figures) };
    match d.kind {
        "tpch" => KindSpec { extra: Some(crate::tpch::tables), extra_charts: Some(crate::tpch::charts), ..k },
        _ => k,
    }
}

/// A kind the report does not know: whichever of the common figures it has.
const OTHER: KindSpec = KindSpec {
    series: &["tps", "tpm", "io.iops"],
    ..spec(
        "",
        "",
        &[f("tps", "TPS", ""), f("tpm", "TPM", ""), f("nopm", "NOPM", ""), f("io.iops", "IOPS", "")],
    )
};

/// The spec of `kind`. Unknown kinds ending in `-init` or `-build` are setup.
pub fn spec_of(kind: &str) -> KindSpec {
    if let Some(d) = storbench_workloads::catalog::description(kind) {
        return described(d);
    }
    KINDS.iter().find(|k| k.kind == kind).copied().unwrap_or(
        if kind.ends_with("-init") || kind.ends_with("-build") {
            KindSpec { setup: true, figures: &[], ..OTHER }
        } else {
            OTHER
        },
    )
}

/// The headline metric of each main figure of `kind` among `names` (the
/// source ranked first by [`source_rank`]), with what people call it.
pub(crate) fn headline_metrics(kind: &str, names: &[String]) -> Vec<(String, &'static str)> {
    spec_of(kind)
        .figures
        .iter()
        .filter_map(|fs| {
            names
                .iter()
                .filter_map(|n| source_of(fs.base, n).map(|s| (source_rank(s), n)))
                .min()
                .map(|(_, n)| (n.clone(), fs.label))
        })
        .collect()
}

/// What a section shows, by its kind: the methods of [`Section`] that read
/// its kind's spec (the model itself knows no kind).
impl Section<'_> {
    /// How the section's kind is reported.
    pub fn spec(&self) -> KindSpec {
        spec_of(self.kind)
    }

    /// The main figures present in the section's data, each source of a
    /// figure apart (`tpm`, `tpm.client`): headline sources first.
    pub fn figures(&self) -> Vec<FigureCol> {
        let have = self.metric_names();
        let mut out = Vec::new();
        for fs in self.spec().figures {
            let mut variants: Vec<(&str, &String)> =
                have.iter().filter_map(|h| source_of(fs.base, h).map(|s| (s, h))).collect();
            variants.sort_by_key(|(s, h)| (source_rank(s), (*h).clone()));
            for (suffix, metric) in variants {
                let source = if suffix.is_empty() {
                    self.env_source(fs.base).unwrap_or_else(|| fs.source.to_string())
                } else {
                    source_label(suffix)
                };
                out.push(FigureCol { metric: metric.clone(), base: fs.base, label: fs.label, source });
            }
        }
        out
    }

    /// The headline source of each main figure (one per base name).
    pub fn headline_figures(&self) -> Vec<FigureCol> {
        let mut out: Vec<FigureCol> = Vec::new();
        for f in self.figures() {
            if !out.iter().any(|o| o.base == f.base) {
                out.push(f);
            }
        }
        out
    }

    /// What a run's environment says counted a bare-named figure
    /// (`tpm_source`), when every run of the section says the same.
    fn env_source(&self, base: &str) -> Option<String> {
        let key = format!("{base}_source");
        let mut vals =
            self.groups.iter().flat_map(|g| &g.runs).map(|r| r.run.env.get(&key).and_then(Value::as_str));
        let first = vals.next()??;
        vals.all(|v| v == Some(first)).then(|| first.to_string())
    }

    /// The per-second workload series present (name, label with its source).
    pub fn workload_series(&self) -> Vec<(String, String)> {
        let spec = self.spec();
        let mut names: Vec<String> = self
            .groups
            .iter()
            .flat_map(|g| &g.runs)
            .flat_map(|r| &r.steps)
            .flat_map(|s| s.samples.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        let mut out = Vec::new();
        for base in spec.series {
            let label = spec.figures.iter().find(|f| f.base == *base).map(|f| f.label).unwrap_or(base);
            let mut v: Vec<(u8, String, String)> = names
                .iter()
                .filter_map(|n| {
                    let suffix = source_of(base, n)?;
                    let src =
                        if suffix.is_empty() { spec.series_source.to_string() } else { source_label(suffix) };
                    Some((source_rank(suffix), n.clone(), format!("{label} ({src})")))
                })
                .collect();
            v.sort();
            // One series per label: a copy under another name (`tps` and
            // `tps.client`, both the clients' count) would draw each point twice.
            for (_, name, label) in v {
                if !out.iter().any(|(_, l)| *l == label) {
                    out.push((name, label));
                }
            }
        }
        out
    }
}

/// A section's kind in a sentence: its spec's name, else the kind itself.
pub(crate) fn spec_name(s: &Section<'_>, spec: &KindSpec) -> String {
    if spec.name.is_empty() {
        s.kind.to_string()
    } else {
        spec.name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kinds_are_reported_generically() {
        assert_eq!(spec_of("tpcb").name, "TPC-B");
        assert_eq!(spec_of("tpcc").series, ["tpm", "nopm"]);
        assert!(spec_of("tpcc-build").setup && spec_of("tpch").extra.is_some());
        assert_eq!(spec_of("io").latency_prefix, "io.lat");
        assert!(spec_of("tpch-build").setup);
        assert!(!spec_of("something").setup);
        assert_eq!(spec_of("something").figures[0].base, "tps");
    }
}
