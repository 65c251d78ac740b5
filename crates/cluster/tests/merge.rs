//! The merge on a real results store: three shard runs written through the
//! store API with histograms of known values, merged, and the merged run read
//! back — IOPS add, p99 is the p99 of one histogram recorded from every
//! value, server-side figures are taken once, samples align on wall-clock
//! seconds, and a failed or missing shard makes the merged run say so.

use rand::{rngs::SmallRng, RngExt, SeedableRng};
use serde_json::json;
use storbench_cluster::{merge, write_merged, ShardRun};
use storbench_metrics::{LatencyHistogram, StepReport, Unit};
use storbench_results::{NewRun, Status, Store};

/// Writes one shard run: `n` latencies from `rng`, recorded into `all` too.
#[allow(clippy::too_many_arguments)]
fn shard(
    store: &mut Store,
    kind: &str,
    shard: &str,
    start: &str,
    iops: f64,
    nopm: f64,
    status: Status,
    rng: &mut SmallRng,
    all: &mut LatencyHistogram,
) -> String {
    let run = store
        .begin_run(&NewRun {
            kind: kind.into(),
            label: format!("shard {shard}"),
            config: json!({ "shard": shard, "threads": 4 }),
            env: json!({ "host": "test" }),
            plan: None,
            cell: None,
        })
        .unwrap();
    let mut h = LatencyHistogram::new();
    for _ in 0..20_000 {
        // A long tail so the union's p99 differs from any shard's.
        let ns = if rng.random_range(0..100) == 0 {
            rng.random_range(1_000_000..50_000_000)
        } else {
            rng.random_range(20_000..400_000)
        };
        let ns = ns * (1 + u64::from(shard.starts_with('2')) * 3);
        h.record_ns(ns);
        all.record_ns(ns);
    }
    let mut r = StepReport::default();
    r.figure("io.iops", iops, Unit::PerS);
    r.figure("io.errors", 1.0, Unit::Count);
    r.figure("io.window", 10.0, Unit::S);
    r.figure("io.cpu.percent", iops / 100.0, Unit::Percent);
    r.figure("nopm", nopm, Unit::PerMin);
    r.figure("tpm.client", iops * 60.0, Unit::PerMin);
    r.latency("io.lat", &h);
    for s in 1..=3u64 {
        r.sample(s * 1000 + 3, "io.iops", iops);
        r.sample(s * 1000 + 3, "io.lat.p99", iops);
    }
    let end = "2026-11-23T20:00:30.000Z";
    store.write_step(run.id, 0, "read-random-8k", &json!({ "bs": 8192 }), start, end, &r).unwrap();
    store.finish_run(run.id, status).unwrap();
    run.uuid
}

fn figure(store: &Store, run: i64, name: &str) -> f64 {
    store
        .metrics(run)
        .unwrap()
        .into_iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .value
}

#[test]
fn three_shards_merge_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("r.db")).unwrap();
    let mut rng = SmallRng::seed_from_u64(17);
    let mut all = LatencyHistogram::new();
    let starts = ["2026-11-23T20:00:00.000Z", "2026-11-23T20:00:00.400Z", "2026-11-23T20:00:02.000Z"];
    let iops = [1000.0, 2000.0, 4000.0];
    let nopm = [500.0, 510.0, 490.0];
    let mut keys = Vec::new();
    for i in 0..3 {
        keys.push(shard(
            &mut store,
            "tpcc",
            &format!("{i}/3"),
            starts[i],
            iops[i],
            nopm[i],
            Status::Complete,
            &mut rng,
            &mut all,
        ));
    }
    let shards: Vec<ShardRun> = keys.iter().map(|k| ShardRun::load(&store, k).unwrap()).collect();
    let merged = merge(&shards).unwrap();
    assert_eq!(merged.status, Status::Complete);
    assert!(merged.warnings.is_empty(), "{:?}", merged.warnings);
    let run = write_merged(&mut store, &merged, "merged").unwrap();
    assert_eq!(run.status, Status::Complete);
    assert_eq!(run.kind, "tpcc");

    assert_eq!(figure(&store, run.id, "io.iops"), 7000.0, "rates add");
    assert_eq!(figure(&store, run.id, "tpm.client"), 7000.0 * 60.0);
    assert_eq!(figure(&store, run.id, "io.errors"), 3.0, "counts add");
    assert_eq!(figure(&store, run.id, "io.window"), 10.0, "seconds: the longest, not a sum");
    assert_eq!(figure(&store, run.id, "nopm"), 510.0, "districts' NOPM is taken once");
    assert!((figure(&store, run.id, "io.cpu.percent") - 70.0 / 3.0).abs() < 1e-9, "% averaged");
    assert!(merged.notes.iter().any(|n| n.starts_with("io.cpu.percent: mean")), "{:?}", merged.notes);

    let p99 = figure(&store, run.id, "io.lat.p99");
    assert_eq!(p99, all.quantile_us(0.99), "p99 of the union");
    let avg: f64 =
        shards.iter().map(|s| s.metrics.iter().find(|m| m.name == "io.lat.p99").unwrap().value).sum::<f64>()
            / 3.0;
    assert!((p99 - avg).abs() > 1.0, "the union's p99 {p99} is not the mean of the shards' {avg}");
    assert_eq!(figure(&store, run.id, "io.lat.max"), all.max_us());
    let h = store.histograms(run.id).unwrap();
    assert_eq!(LatencyHistogram::from_bytes(&h[0].hdr).unwrap().count(), 60_000);

    // Samples: shard 0 at 1,2,3 s; shard 1 (0.4 s later) at 1,2,3 s too
    // (rounded); shard 2 (2 s later) at 3,4,5 s.
    let s: Vec<(i64, f64)> = store
        .samples(run.id)
        .unwrap()
        .into_iter()
        .filter(|x| x.name == "io.iops")
        .map(|x| (x.t_ms, x.value))
        .collect();
    assert_eq!(s, vec![(1000, 3000.0), (2000, 3000.0), (3000, 7000.0), (4000, 4000.0), (5000, 4000.0)]);
    let p: Vec<f64> = store
        .samples(run.id)
        .unwrap()
        .into_iter()
        .filter(|x| x.name == "io.lat.p99")
        .map(|x| x.value)
        .collect();
    assert_eq!(p, vec![2000.0, 2000.0, 4000.0, 4000.0, 4000.0], "per-second quantiles: the largest");
    let steps = store.steps(run.id).unwrap();
    assert_eq!(steps[0].started_at, starts[0]);
    assert_eq!(run.config["merged_from"].as_array().unwrap().len(), 3);
}

fn load(store: &Store, keys: &[&String]) -> Vec<ShardRun> {
    keys.iter().map(|k| ShardRun::load(store, k).unwrap()).collect()
}

#[test]
fn a_failed_or_missing_shard_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("r.db")).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut all = LatencyHistogram::new();
    let t = "2026-11-23T20:00:00.000Z";
    let a = shard(&mut store, "io", "0/3", t, 10.0, 0.0, Status::Complete, &mut rng, &mut all);
    let b = shard(&mut store, "io", "1/3", t, 10.0, 0.0, Status::Failed, &mut rng, &mut all);
    let c = shard(&mut store, "io", "2/3", t, 10.0, 0.0, Status::Complete, &mut rng, &mut all);

    let m = merge(&load(&store, &[&a, &b, &c])).unwrap();
    assert_eq!(m.status, Status::Failed);
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    assert!(m.warnings[0].contains("(shard 1/3) is failed"), "{}", m.warnings[0]);

    let m = merge(&load(&store, &[&a, &c])).unwrap();
    assert_eq!(m.status, Status::Failed);
    assert_eq!(m.warnings, vec!["shard 1/3 missing: the merged run covers 2 of 3 shards".to_string()]);
    let run = write_merged(&mut store, &m, "two of three").unwrap();
    assert_eq!(run.status, Status::Failed);
    assert_eq!(run.config["merge"]["warnings"][0], m.warnings[0].as_str());
    assert_eq!(figure(&store, run.id, "io.iops"), 20.0, "what the others measured is kept");

    // Bad selections are refused, naming the run.
    let e = merge(&load(&store, &[&a, &a])).unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("given twice"), "{e}");
    let d = shard(&mut store, "io", "0/3", t, 10.0, 0.0, Status::Complete, &mut rng, &mut all);
    let e = merge(&load(&store, &[&a, &d])).unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("shards 0/3 and 0/3"), "{e}");
    let x = shard(&mut store, "tpcb", "1/3", t, 10.0, 0.0, Status::Complete, &mut rng, &mut all);
    let e = merge(&load(&store, &[&a, &x])).unwrap_err();
    assert!(e.to_string().contains("'tpcb' run, the first is 'io'"), "{e}");
    assert!(matches!(merge(&[]), Err(storbench_cluster::MergeError::Empty)));
}

#[test]
fn notes_are_carried_one_text_where_the_shards_agree_each_shard_s_where_they_differ() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("r.db")).unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut all = LatencyHistogram::new();
    let t = "2026-11-23T20:00:00.000Z";
    let mut keys = Vec::new();
    // Given out of shard order: the merged text still reads 0/2 first.
    for (sh, kind) in [("1/2", "contention"), ("0/2", "cpu")] {
        let uuid = shard(&mut store, "tpcb", sh, t, 10.0, 0.0, Status::Complete, &mut rng, &mut all);
        let id = store.run(&uuid).unwrap().id;
        let evidence = "CPU 97 % busy";
        store.write_notes(id, 0, &[("verdict.kind", kind), ("verdict.evidence", evidence)]).unwrap();
        keys.push(uuid);
    }
    let m = merge(&load(&store, &[&keys[0], &keys[1]])).unwrap();
    let run = write_merged(&mut store, &m, "merged").unwrap();
    let notes: Vec<(i64, String, String)> =
        store.notes(run.id).unwrap().into_iter().map(|n| (n.step_idx, n.name, n.text)).collect();
    assert_eq!(
        notes,
        vec![
            (0, "verdict.evidence".to_string(), "CPU 97 % busy".to_string()),
            (0, "verdict.kind".to_string(), "0/2: cpu; 1/2: contention".to_string()),
        ]
    );
    // Shards without notes give a merged run without notes.
    let a = shard(&mut store, "io", "0/2", t, 10.0, 0.0, Status::Complete, &mut rng, &mut all);
    let b = shard(&mut store, "io", "1/2", t, 10.0, 0.0, Status::Complete, &mut rng, &mut all);
    let m = merge(&load(&store, &[&a, &b])).unwrap();
    let run = write_merged(&mut store, &m, "bare").unwrap();
    assert!(store.notes(run.id).unwrap().is_empty());
}
