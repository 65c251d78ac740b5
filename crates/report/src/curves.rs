//! Miss-ratio curves (`storbench cache mrc`) for a reader: the summary
//! lines (footprint, method, knees, the size that reaches a target hit
//! ratio), the table of miss ratios per size, CSV, and the series the
//! chart ([`crate::mrc`]) draws. Only builds strings.

use storbench_cache::mrc::MrcResult;
use storbench_cache::trace::Format;
use storbench_cache::PolicyKind;
use storbench_metrics::units::format_size;

use crate::table::Table;

/// One chart series per policy: LRU's fine-grained exact curve, the other
/// policies at the sizes run.
pub fn series(r: &MrcResult) -> Vec<crate::mrc::Series> {
    r.curves
        .iter()
        .map(|c| {
            let points = if c.policy == PolicyKind::Lru {
                r.lru_fine.clone()
            } else {
                r.sizes.iter().copied().zip(c.miss_ratio.iter().copied()).collect()
            };
            crate::mrc::Series { label: format!("{} ({})", c.policy, c.method), points, knee: c.knee }
        })
        .collect()
}

fn method_line(r: &MrcResult) -> String {
    match r.method {
        "exact" => "exact (every access)".to_string(),
        m => format!(
            "{m}, rate {:.4} ({} of {} accesses sampled)",
            r.sample_rate, r.sampled_accesses, r.accesses
        ),
    }
}

/// The lines above the table (and under the chart): footprint, method,
/// knees, the target hit ratio's size, and whether the trace was cut short.
pub fn summary_lines(r: &MrcResult) -> Vec<String> {
    let mut out = vec![
        format!(
            "{} accesses of {} lines, footprint {} lines ({}){}",
            r.accesses,
            format_size(r.line),
            r.footprint_lines,
            human(r.footprint_lines * r.line),
            if r.method == "exact" { "" } else { " (estimated)" }
        ),
        format!("method: {}", method_line(r)),
    ];
    for c in &r.curves {
        if let Some(k) = c.knee {
            out.push(format!("knee: {} at {}", c.policy, human(k)));
        }
    }
    if let Some(t) = r.target {
        for c in &r.curves {
            let how = if c.policy == PolicyKind::Lru { "" } else { " (smallest of the sizes run)" };
            out.push(match c.size_for_target {
                Some(s) => format!("hit ratio {t}: {} needs {}{how}", c.policy, human(s)),
                None if c.policy == PolicyKind::Lru => {
                    format!("hit ratio {t}: {} never reaches it (cold misses alone prevent it)", c.policy)
                }
                None => format!("hit ratio {t}: {} does not reach it at any size run", c.policy),
            });
        }
    }
    if r.interrupted {
        out.push("interrupted: the curves cover only the accesses read".into());
    }
    out
}

/// Bytes in binary units: whole where exact, else two decimals.
fn human(b: u64) -> String {
    for (u, m) in [("t", 1u64 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)] {
        if b >= m {
            return if b.is_multiple_of(m) {
                format!("{}{u}", b / m)
            } else {
                format!("{:.2}{u}", b as f64 / m as f64)
            };
        }
    }
    b.to_string()
}

/// The terminal's text: the trace line, the summary lines, and the miss
/// ratio of each policy at each size.
pub fn to_text(r: &MrcResult, f: Format, requests: u64, skipped: u64) -> String {
    let mut title =
        vec![format!("trace: {requests} requests ({}), {skipped} flushes/discards/empty skipped", f.name())];
    title.extend(summary_lines(r));
    let mut header = vec!["cache size".to_string()];
    header.extend(r.curves.iter().map(|c| format!("{} miss", c.policy)));
    let rows = r
        .sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let mut row = vec![format_size(s)];
            row.extend(r.curves.iter().map(|c| format!("{:.4}", c.miss_ratio[i])));
            row
        })
        .collect();
    Table { title: title.join("\n"), header, rows, notes: Vec::new() }.to_text()
}

/// `size_bytes,POLICY...` with a row per size.
pub fn to_csv(r: &MrcResult) -> String {
    let mut out = String::from("size_bytes");
    for c in &r.curves {
        out.push(',');
        out.push_str(c.policy.name());
    }
    out.push('\n');
    for (i, s) in r.sizes.iter().enumerate() {
        out.push_str(&s.to_string());
        for c in &r.curves {
            out.push_str(&format!(",{:.6}", c.miss_ratio[i]));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(1 << 30), "1g");
        assert_eq!(human(1536 << 20), "1.50g");
        assert_eq!(human((1 << 30) + 1), "1.00g");
    }
}
