//! The shipped Grafana dashboard (docs/grafana/storbench.json) asks only
//! for series the exporter serves: every metric name in its queries is one
//! the exporter registers, and every label it selects on is one the series
//! carry. A renamed metric fails here, not on a user's empty panel.

use std::collections::BTreeSet;

use serde_json::Value;
use storbench_cluster::{Exporter, LiveValues};

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
        latency_us: vec![("0.99".into(), 1.0)],
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

/// The label names selected on inside `{…}` and named in `by (…)` and
/// `label_values(…, L)`.
fn label_names(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [('{', '}'), ('(', ')')] {
        for part in q.split(open).skip(1) {
            let inner = part.split(close).next().unwrap_or("");
            for item in inner.split(',') {
                let item = item.trim();
                let name: String =
                    item.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let rest = item[name.len()..].trim_start();
                let is_selector = open == '{' && (rest.starts_with('=') || rest.starts_with('!'));
                let is_grouping =
                    open == '(' && rest.is_empty() && !name.is_empty() && !name.starts_with("storbench_");
                if is_selector || is_grouping {
                    out.push(name);
                }
            }
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
}
