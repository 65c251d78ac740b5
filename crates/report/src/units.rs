//! How figures read to a person: numbers (the one formatter every storbench
//! output shares), units (TPS, IOPS, MB/s, µs or ms, never `per_s`), a
//! figure's source from its dotted suffix (`tpm.server`, `tpm.client`,
//! `nopm.districts`: the label comes from the suffix, so a new source needs
//! no change here), ratios and load levels in words. The bottom of the
//! report: it knows no run, section or kind, and imports nothing of the crate.

/// Formats a figure: the one formatter every storbench output shares.
pub(crate) use storbench_metrics::units::format_figure as fmt_num;

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
    let n = fmt_num(v / div);
    match u.as_str() {
        "" => n,
        "%" => format!("{n} %"),
        _ => format!("{n} {u}"),
    }
}

/// A ratio with three significant digits: `12.9`, `1.09`, `150`.
pub(crate) fn ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// How a load level reads: `1 client`, `4 users`; a profile as its name.
pub(crate) fn level_words(axis: &str, label: &str, level: Option<f64>) -> String {
    match (axis, level) {
        ("users" | "clients", Some(v)) => {
            let one = axis.trim_end_matches('s');
            if v == 1.0 {
                format!("1 {one}")
            } else {
                format!("{} {axis}", fmt_num(v))
            }
        }
        _ => label.to_string(),
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
    fn levels_read_as_words() {
        assert_eq!(level_words("clients", "clients=1", Some(1.0)), "1 client");
        assert_eq!(level_words("users", "users=8", Some(8.0)), "8 users");
        assert_eq!(level_words("profile", "read-random-8k", None), "read-random-8k");
        assert_eq!([ratio(12.857), ratio(1.0909), ratio(150.2)], ["12.9", "1.09", "150"]);
    }
}
