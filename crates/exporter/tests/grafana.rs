//! The shipped Grafana dashboard (docs/grafana/storbench.json) asks only
//! for series the exporter serves: every metric name in its queries is one
//! the exporter registers, and every label it selects on is one the series
//! carry. A renamed metric fails here, not on a user's empty panel.

use std::collections::BTreeSet;

use serde_json::Value;
use storbench_exporter::{Exporter, LiveValues};
use storbench_metrics::{LiveLatency, LIVE_BOUNDS_S};

/// The metric names and label names a scrape shows, with every family set.
fn served() -> (BTreeSet<String>, BTreeSet<String>) {
    let e = Exporter::start("127.0.0.1:0", "ab12cd34", "0/1").unwrap();
    e.step("users=1");
    e.update(&LiveValues {
        tpm: Some(1.0),
        nopm: Some(1.0),
        tps: Some(1.0),
        iops: Some(1.0),
        mbps: Some(1.0),
        latency: Some(LiveLatency { counts: vec![1; LIVE_BOUNDS_S.len() + 1], sum_s: 1.0 }),
        system: vec![("cpu.iowait".into(), 1.0)],
    });
    let text = e.render();
    let mut names = BTreeSet::new();
    let mut labels = BTreeSet::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, _) = line.rsplit_once(' ').unwrap();
        let (name, rest) = series.split_once('{').unwrap_or((series, ""));
        names.insert(name.to_string());
        for pair in rest.trim_end_matches('}').split(',').filter(|p| !p.is_empty()) {
            labels.insert(pair.split_once('=').unwrap().0.to_string());
        }
    }
    (names, labels)
}

/// Every query of the dashboard: the panels' and the variables'.
fn queries(dash: &Value) -> Vec<String> {
    let mut out: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["targets"].as_array().unwrap().iter().map(|t| t["expr"].as_str().unwrap().to_string())
        })
        .collect();
    for v in dash["templating"]["list"].as_array().unwrap() {
        if v["type"] == "query" {
            out.push(v["query"].as_str().unwrap().to_string());
        }
    }
    out
}

/// The identifiers of `q` that start with `storbench_`.
fn metric_names(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = q.as_bytes();
    let mut i = 0;
    while let Some(at) = q[i..].find("storbench_") {
        let start = i + at;
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        out.push(q[start..end].to_string());
        i = end;
    }
    out
}

/// The label names selected on inside `{…}` and named in `by (…)`,
/// `without (…)` and `label_values(…, L)`.
fn label_names(q: &str) -> Vec<String> {
    let ident =
        |s: &str| -> String { s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    let mut out = Vec::new();
    for part in q.split('{').skip(1) {
        for item in part.split('}').next().unwrap_or("").split(',') {
            let item = item.trim();
            let name = ident(item);
            let rest = item[name.len()..].trim_start();
            if rest.starts_with('=') || rest.starts_with('!') {
                out.push(name);
            }
        }
    }
    for (at, _) in q.match_indices('(') {
        let before = q[..at].trim_end();
        let inner = q[at + 1..].split(')').next().unwrap_or("");
        if before.ends_with(" by") || before.ends_with(" without") || before == "by" || before == "without" {
            out.extend(inner.split(',').map(|i| ident(i.trim())).filter(|n| !n.is_empty()));
        } else if before.ends_with("label_values") {
            out.extend(inner.rsplit(',').next().map(|i| ident(i.trim())).filter(|n| !n.is_empty()));
        }
    }
    out
}

#[test]
fn the_dashboard_asks_only_for_series_the_exporter_serves() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/grafana/storbench.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (names, labels) = served();
    assert!(names.contains("storbench_tps") && labels.contains("shard"), "{names:?} {labels:?}");
    let qs = queries(&dash);
    assert!(qs.len() >= 8, "{qs:?}");
    let mut used = BTreeSet::new();
    for q in &qs {
        let ms = metric_names(q);
        assert!(!ms.is_empty(), "a query with no storbench metric: {q}");
        for m in ms {
            assert!(names.contains(&m), "'{m}' in '{q}' is not served; served: {names:?}");
            used.insert(m);
        }
        for l in label_names(q) {
            assert!(labels.contains(&l), "label '{l}' in '{q}' is not on the series; they carry {labels:?}");
        }
    }
    // Latency is read from the histogram's buckets, over a rate window,
    // never from a quantile gauge.
    for q in qs.iter().filter(|q| q.contains("_bucket")) {
        assert!(q.starts_with("histogram_quantile(") && q.contains("rate(") && q.contains("le"), "{q}");
    }
    assert!(qs.iter().filter(|q| q.contains("storbench_latency_seconds_bucket")).count() >= 2, "{qs:?}");
    assert!(!labels.contains("quantile"), "quantile gauges served: {labels:?}");
    // Every family the exporter serves has a panel.
    assert_eq!(used, names, "families without a panel");
}

#[test]
fn the_query_readers_find_what_they_should() {
    assert_eq!(metric_names("sum by (run) (storbench_tps{run=~\"$run\"})"), ["storbench_tps"]);
    assert_eq!(
        label_names("sum by (run, step) (storbench_tps{shard=~\"$shard\"})"),
        ["shard", "run", "step"]
    );
    assert_eq!(label_names("label_values(storbench_system, run)"), ["run"]);
    assert_eq!(label_names("storbench_x{nope=\"1\"}"), ["nope"]);
    assert_eq!(
        label_names("histogram_quantile(0.99, sum by (le) (rate(storbench_x_bucket{run=~\"$run\"}[1m])))"),
        ["run", "le"]
    );
}
