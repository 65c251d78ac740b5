//! What each workload kind shows, as data: its name in sentences, its main
//! figures (the first is the headline of a finding), its latency prefix, its
//! per-second series, and whether its runs are setup (`tpcb init`, `tpcc
//! build`: timings in one table, no charts). A kind that needs more than a
//! table row here (TPC-H's per-query bars) adds an entry and its own
//! renderers behind [`KindSpec::extra`] and [`KindSpec::extra_charts`];
//! nothing else in the report names a kind.
//!
//! Also here: how a figure's name and unit read to a person. A figure may
//! carry its source as a dotted suffix (`tpm.server`, `tpm.client`,
//! `nopm.districts`); the label comes from the suffix, so a new source needs
//! no change here. Units read as TPS, IOPS, MB/s, µs or ms, never `per_s`.

use crate::model::Section;
use crate::tables::Table;
use crate::ReportError;

/// A main figure of a kind: its base name (sources are dotted suffixes of
/// it), what people call it, and who counted the bare-named figure. The
/// database workloads' lists are their own (`storbench_workloads`'s
/// `FIGURES`); only kinds that are not a workload (I/O, backup) are listed
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

/// Every kind the report knows; an unknown kind is reported with the
/// generic figures of [`OTHER`].
const KINDS: &[KindSpec] = &[
    KindSpec { series: &["tps"], ..spec("tpcb", "TPC-B", storbench_workloads::tpcb::FIGURES) },
    KindSpec { series: &["tpm", "nopm"], ..spec("tpcc", "TPC-C", storbench_workloads::tpcc::FIGURES) },
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
    KindSpec {
        extra: Some(crate::tpch::tables),
        extra_charts: Some(crate::tpch::charts),
        ..spec("tpch", "TPC-H", storbench_workloads::tpch::FIGURES)
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
    KindSpec { setup: true, ..spec("tpcb-init", "TPC-B init", storbench_workloads::tpcb::INIT_FIGURES) },
    KindSpec { setup: true, ..spec("tpcc-build", "TPC-C build", storbench_workloads::tpcc::BUILD_FIGURES) },
];

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
    KINDS.iter().find(|k| k.kind == kind).copied().unwrap_or(
        if kind.ends_with("-init") || kind.ends_with("-build") {
            KindSpec { setup: true, figures: &[], ..OTHER }
        } else {
            OTHER
        },
    )
}

/// Suffixes that qualify a figure rather than name its source
/// (`tpm.per_user`, `lat.p99`).
fn is_qualifier(suffix: &str) -> bool {
    suffix.starts_with("per_")
        || suffix.starts_with('p') && suffix[1..].chars().all(|c| c.is_ascii_digit() || c == '.')
        || matches!(suffix, "mean" | "max" | "min" | "count" | "lat" | "tps" | "iops" | "mbps" | "seconds")
}

/// The source of `name` as a variant of figure `base`: `Some("")` for the
/// bare name, `Some("client")` for `base.client`, None when `name` is not a
/// variant of `base`.
pub fn source_of<'a>(base: &str, name: &'a str) -> Option<&'a str> {
    if name == base {
        return Some("");
    }
    let suffix = name.strip_prefix(base)?.strip_prefix('.')?;
    let word = suffix.starts_with(|c: char| c.is_ascii_alphabetic()) && !suffix.contains('.');
    (word && !is_qualifier(suffix)).then_some(suffix)
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

/// How a source suffix reads (`server` → `server counters`).
pub fn source_label(suffix: &str) -> String {
    match suffix {
        "server" => "server counters".into(),
        "client" => "client count".into(),
        "districts" => "districts' order ids".into(),
        other => other.replace('_', " "),
    }
}

/// Order of sources for the headline: the bare name, then anything the
/// server or the data counted, the client's own count last (a cross-check).
pub fn source_rank(suffix: &str) -> u8 {
    match suffix {
        "" => 0,
        "server" => 1,
        "client" => 3,
        _ => 2,
    }
}

/// A unit as people read it, for a figure: `TPS`, `IOPS`, `TPM`, `/s`,
/// `MB/s`, `µs`, `%`; empty for a plain count.
pub fn human_unit(metric: &str, unit: &str) -> String {
    let base = metric.split('.').next().unwrap_or(metric);
    match unit {
        "per_s" if base == "tps" || metric.ends_with(".tps") => "TPS".into(),
        "per_s" if metric.ends_with("iops") => "IOPS".into(),
        "per_s" => "/s".into(),
        "per_min" if base == "tpm" => "TPM".into(),
        "per_min" if base == "nopm" => "NOPM".into(),
        "per_min" => "/min".into(),
        "us" => "µs".into(),
        "count" | "ratio" => String::new(),
        other => other.into(),
    }
}

/// A display scale for values of one unit: latencies of a millisecond and
/// more read in ms. Returns (divisor, unit label).
pub fn scale_for(metric: &str, unit: &str, largest: f64) -> (f64, String) {
    match unit {
        "us" if largest >= 1000.0 => (1000.0, "ms".into()),
        "ms" if largest >= 10_000.0 => (1000.0, "s".into()),
        _ => (1.0, human_unit(metric, unit)),
    }
}

/// One value with its unit, scaled for reading: `1.33 ms`, `74 TPS`, `12.5 %`.
pub fn with_unit(v: f64, metric: &str, unit: &str) -> String {
    let (div, u) = scale_for(metric, unit, v.abs());
    let n = crate::model::fmt_num(v / div);
    match u.as_str() {
        "" => n,
        "%" => format!("{n} %"),
        _ => format!("{n} {u}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_come_from_the_suffix() {
        assert_eq!(source_of("tpm", "tpm"), Some(""));
        assert_eq!(source_of("tpm", "tpm.server"), Some("server"));
        assert_eq!(source_of("nopm", "nopm.districts"), Some("districts"));
        assert_eq!(source_of("tpm", "tpm.per_user"), None);
        assert_eq!(source_of("tps", "tpsx"), None);
        assert_eq!(source_of("io.lat", "io.lat.p99"), None);
        assert_eq!(source_of("io.lat.p99", "io.lat.p99.9"), None);
        assert_eq!(source_label("client"), "client count");
        assert_eq!(source_label("wal_records"), "wal records");
    }

    #[test]
    fn units_read_as_people_write_them() {
        assert_eq!(with_unit(74.0, "tps", "per_s"), "74 TPS");
        assert_eq!(with_unit(39745.7, "io.iops", "per_s"), "39746 IOPS");
        assert_eq!(with_unit(1331.2, "io.lat.p99", "us"), "1.33 ms");
        assert_eq!(with_unit(348.4, "lat.p50", "us"), "348 µs");
        assert_eq!(with_unit(8220.0, "nopm.client", "per_min"), "8220 NOPM");
        assert_eq!(with_unit(12.5, "cpu.iowait", "%"), "12.5 %");
        assert_eq!(with_unit(5.5, "rows.per_s", "per_s"), "5.50 /s");
        assert_eq!(human_unit("txn.new_order.tps", "per_s"), "TPS");
    }

    #[test]
    fn unknown_kinds_are_reported_generically() {
        assert_eq!(spec_of("tpcb").name, "TPC-B");
        assert!(spec_of("tpch-build").setup);
        assert!(!spec_of("something").setup);
        assert_eq!(spec_of("something").figures[0].base, "tps");
    }
}
