//! `storbench merge` through the binary: three real `storbench io` runs,
//! each into its own results file as each pod of an Indexed Job writes one,
//! merged with `--from`; and a failed shard making the merge exit 1.

use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{json, Value};
use storbench_metrics::LatencyHistogram;
use storbench_results::{NewRun, Status, Store};

fn sb(results: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.env("STORBENCH_RESULTS", results).arg("--quiet");
    c
}

fn figure(store: &Store, run: i64, name: &str) -> f64 {
    store.metrics(run).unwrap().into_iter().find(|m| m.name == name).unwrap().value
}

#[test]
fn three_io_shards_merge_from_their_files() {
    let d = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 0..3 {
        let db = d.path().join(format!("shard{i}.db"));
        let out = sb(&db)
            .current_dir(d.path())
            .args(["io", "--size", "16M", "--bs", "4k", "--rw", "randread", "--threads", "1"])
            .args(["--duration", "1s", "--rampup", "0s", "--target", &format!("t{i}.dat")])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        files.push(db);
    }
    let merged_db = d.path().join("merged.db");
    let mut c = sb(&merged_db);
    c.args(["--json", "--label", "all", "merge"]);
    for f in &files {
        c.arg("--from").arg(f);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["status"], "complete");
    assert_eq!(rec["shards"], 3);
    // The io runs carry no shard identity yet (--shard is wired later): said.
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no shard identity"));

    let store = Store::open(&merged_db).unwrap();
    let id = rec["id"].as_i64().unwrap();
    assert_eq!(store.run(&id.to_string()).unwrap().label, "all");
    let (mut iops, mut union) = (0.0, LatencyHistogram::new());
    for f in &files {
        let s = Store::open(f).unwrap();
        let r = s.runs(&Default::default()).unwrap().remove(0);
        iops += figure(&s, r.id, "io.iops");
        let h = s.histograms(r.id).unwrap().into_iter().find(|h| h.name == "io.lat").unwrap();
        union.merge(&LatencyHistogram::from_bytes(&h.hdr).unwrap());
    }
    assert!((figure(&store, id, "io.iops") - iops).abs() < 1e-6 * iops, "merged IOPS = sum");
    assert_eq!(figure(&store, id, "io.lat.p99"), union.quantile_us(0.99), "p99 of the union");
}

#[test]
fn a_failed_shard_makes_merge_exit_1_and_bad_input_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("r.db");
    let mut store = Store::open(&db).unwrap();
    let mut ids = Vec::new();
    for (i, status) in [Status::Complete, Status::Failed].into_iter().enumerate() {
        let run = store
            .begin_run(&NewRun {
                kind: "io".into(),
                label: format!("s{i}"),
                config: json!({ "shard": format!("{i}/3") }),
                env: json!({}),
                plan: None,
                cell: None,
            })
            .unwrap();
        store.finish_run(run.id, status).unwrap();
        ids.push(run.id.to_string());
    }
    drop(store);
    let out = sb(&db).args(["merge", &ids[0], &ids[1]]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: shard 2/3 missing"), "{err}");
    assert!(err.contains("(shard 1/3) is failed"), "{err}");
    let store = Store::open(&db).unwrap();
    let merged = store.runs(&Default::default()).unwrap().remove(0);
    assert_eq!(merged.status, Status::Failed);
    assert_eq!(merged.label, "merge of 2 shards");

    for (args, needle) in [
        (vec!["merge"], "no runs given"),
        (vec!["merge", "999"], "no run '999'"),
        (vec!["merge", "--from", "/nonexistent.db"], "--from '/nonexistent.db'"),
        (vec!["merge", &ids[0], &ids[0]], "given twice"),
    ] {
        let out = sb(&db).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle) && err.lines().count() == 1, "{args:?}: {err}");
    }
    assert_eq!(Store::open(&db).unwrap().runs(&Default::default()).unwrap().len(), 3, "nothing written");
}

/// `k8s render` on a plan with a node path and a relative path: the YAML
/// validates against the Kubernetes 1.33 schemas (kubernetes-validate,
/// installed by .ci/run), and holds what the pods need.
#[test]
fn k8s_render_validates_against_the_kubernetes_schemas() {
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"name = "s5_alloc"
[target.data]
path = "./storbench-data"
[target.node]
path = "/mnt/bench"
[axes]
target = ["data", "node"]
[[workload]]
kind = "io"
run = { target = "{target}/t.dat", set = "quick", duration = "5s" }
"#,
    )
    .unwrap();
    let out = sb(&d.path().join("r.db"))
        .args(["k8s", "render"])
        .arg(&plan)
        .args(["--shards", "3", "--image", "reg.example/storbench:1", "--namespace", "bench"])
        .args(["--start-at", "2999-01-01T00:00:00Z"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let yaml = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<&str> = yaml.split("---\n").collect();
    let kinds: Vec<&str> = docs.iter().map(|d| d.lines().nth(1).unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "kind: ConfigMap",
            "kind: PersistentVolumeClaim",
            "kind: PersistentVolumeClaim",
            "kind: Job",
            "kind: Job"
        ]
    );
    for needle in [
        "completionMode: Indexed",
        "backoffLimitPerIndex: 0",
        "completions: 3",
        "parallelism: 3",
        "- $(JOB_COMPLETION_INDEX)/3",
        "- --start-at=2999-01-01T00:00:00Z",
        "value: /results/shard-$(JOB_COMPLETION_INDEX).db",
        "image: reg.example/storbench:1",
        "namespace: bench",
        "path: /mnt/bench",
        "mountPath: /work/storbench-data",
        "claimName: storbench-s5-alloc-data",
        "suspend: true",
        "exec storbench --label s5-alloc-merged merge",
        "    [target.node]",
    ] {
        assert!(yaml.contains(needle), "no '{needle}' in\n{yaml}");
    }
    let file = d.path().join("m.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let v = Command::new("kubernetes-validate")
        .args(["-k", "1.33.0", "--strict"])
        .arg(&file)
        .output()
        .expect("kubernetes-validate is installed by .ci/run (pip install kubernetes-validate)");
    let report = String::from_utf8_lossy(&v.stdout).to_string() + &String::from_utf8_lossy(&v.stderr);
    assert!(v.status.success(), "{report}");
    assert_eq!(report.matches(" passed for resource ").count(), 5, "{report}");

    for (args, needle) in [
        (vec!["--shards", "0"], "--shards 0"),
        (vec!["--shards", "2", "--start-at", "2020-01-01T00:00:00Z"], "is in the past"),
        (vec!["--shards", "2", "--start-in", "soon"], "'soon'"),
    ] {
        let out = sb(&d.path().join("r.db")).args(["k8s", "render"]).arg(&plan).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(needle), "{args:?}");
        assert!(out.stdout.is_empty(), "nothing half-written");
    }
}
