//! Shards and `storbench merge` through the binary: three real `storbench
//! io --shard i/3` processes on one target, each into its own results file
//! as each pod of an Indexed Job writes one, merged with `--from`; a failed
//! shard making the merge exit 1; the Kubernetes manifests.

use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{json, Value};
use storbench_metrics::LatencyHistogram;
use storbench_results::{NewRun, Status, Store};

use crate::common;
use common::psql;

fn sb(results: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.env("STORBENCH_RESULTS", results).arg("--quiet");
    c
}

fn figure(store: &Store, run: i64, name: &str) -> f64 {
    store.metrics(run).unwrap().into_iter().find(|m| m.name == name).unwrap().value
}

/// The step's figures and the wall-clock start of a shard file's only run.
fn only_run(file: &Path) -> (Store, i64, Value, String) {
    let s = Store::open(file).unwrap();
    let r = s.runs(&Default::default()).unwrap().remove(0);
    let started = s.steps(r.id).unwrap().remove(0).started_at;
    (s, r.id, r.config, started)
}

#[test]
fn three_io_shards_split_one_target_start_together_and_merge_exactly() {
    let d = tempfile::tempdir().unwrap();
    // One 24 MiB target, as a shared volume would hold it, made first so
    // no shard fills it while another reads.
    let target = d.path().join("t.dat");
    std::fs::write(&target, vec![7u8; 24 << 20]).unwrap();
    let files: Vec<_> = (0..3).map(|i| d.path().join(format!("shard-{i}.db"))).collect();
    // The pods' command line: the same flags, the shard from the index.
    let children: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, db)| {
            sb(db)
                .args(["io", "--shard", &format!("{i}/3"), "--start-in", "4s"])
                .args(["--size", "24M", "--bs", "4k", "--rw", "randread", "--threads", "3", "--qd", "2"])
                .args(["--duration", "2s", "--rampup", "0s", "--target"])
                .arg(&target)
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
    }
    let mut starts = Vec::new();
    let (mut iops, mut ios, mut union) = (0.0, 0.0, LatencyHistogram::new());
    let mut parts = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let (s, id, config, started) = only_run(f);
        assert_eq!(config["shard"], format!("{i}/3"));
        assert!(config["start_at"].is_string(), "{config}");
        let p = &config["profiles"][0];
        assert_eq!(p["threads"], 1, "3 threads over 3 shards");
        parts.push((p["offset"].as_u64().unwrap(), p["span"].as_u64().unwrap()));
        starts.push(chrono::DateTime::parse_from_rfc3339(&started).unwrap());
        iops += figure(&s, id, "io.iops");
        ios += figure(&s, id, "io.read.count");
        let h = s.histograms(id).unwrap().into_iter().find(|h| h.name == "io.lat").unwrap();
        union.merge(&LatencyHistogram::from_bytes(&h.hdr).unwrap());
    }
    // Disjoint, block-aligned parts that cover the target: 6144 blocks.
    assert_eq!(parts, vec![(0, 2048 * 4096), (2048 * 4096, 2048 * 4096), (4096 * 4096, 2048 * 4096)]);
    let spread = starts.iter().max().unwrap().signed_duration_since(*starts.iter().min().unwrap());
    assert!(spread.num_milliseconds() < 100, "shards began {spread} apart");

    let merged_db = d.path().join("merged.db");
    let mut c = sb(&merged_db);
    c.args(["--json", "merge", "--label", "all"]);
    for f in &files {
        c.arg("--from").arg(f);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["status"], "complete");
    assert_eq!(rec["shards"], 3);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"), "every shard is there");

    let store = Store::open(&merged_db).unwrap();
    let id = rec["id"].as_i64().unwrap();
    assert_eq!(store.run(&id.to_string()).unwrap().label, "all");
    assert!((figure(&store, id, "io.iops") - iops).abs() < 1e-6 * iops, "merged IOPS = sum");
    assert_eq!(figure(&store, id, "io.read.count"), ios, "merged count = sum, exactly");
    assert_eq!(union.count() as f64, ios, "the union histogram holds every I/O once");
    assert_eq!(figure(&store, id, "io.lat.p99"), union.quantile_us(0.99), "p99 of the union");
}

/// Drops the test's database whether the test passed or not.
struct Database(&'static str);
impl Drop for Database {
    fn drop(&mut self) {
        let _ = psql("postgres", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.0));
    }
}

/// Three `tpcc run --shard i/3` processes against the local PostgreSQL, as
/// HammerDB's multi-host mode splits them: users and home warehouses apart,
/// one start instant. The districts grew by exactly the New-Orders the three
/// shards' users committed, and the merged run takes the server-side NOPM
/// once, not three times.
#[test]
fn three_tpcc_shards_split_users_and_warehouses_and_merge_to_the_districts() {
    let db = Database("storbench_shards");
    psql("postgres", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", db.0));
    psql("postgres", &format!("CREATE DATABASE {}", db.0));
    let url = format!("postgres://root@127.0.0.1:5432/{}", db.0);
    let d = tempfile::tempdir().unwrap();
    let build = d.path().join("build.db");
    let st =
        sb(&build).args(["tpcc", "build", "--warehouses", "3", "--db", &url]).stdout(Stdio::null()).status();
    assert!(st.unwrap().success());
    let next0: i64 = psql(db.0, "SELECT SUM(d_next_o_id) FROM district").parse().unwrap();
    let files: Vec<_> = (0..3).map(|i| d.path().join(format!("shard-{i}.db"))).collect();
    let children: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            sb(f)
                .args(["tpcc", "run", "--shard", &format!("{i}/3"), "--start-in", "5s"])
                .args(["--db", &url, "--users", "3,6", "--rampup", "0s", "--duration", "3s"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        assert!(c.wait_with_output().unwrap().status.success());
    }
    let grown = psql(db.0, "SELECT SUM(d_next_o_id) FROM district").parse::<i64>().unwrap() - next0;

    let mut committed = 0.0;
    for (i, f) in files.iter().enumerate() {
        let (s, id, config, _) = only_run(f);
        assert_eq!(config["shard"], format!("{i}/3"));
        assert_eq!(config["home_warehouses"], json!([i + 1, i + 1]), "one home warehouse each");
        let steps = s.steps(id).unwrap();
        assert_eq!(steps.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(), ["users=3", "users=6"]);
        assert_eq!(steps[1].params["shard_users"], 2, "6 users over 3 shards");
        committed += s
            .metrics(id)
            .unwrap()
            .iter()
            .filter(|m| m.name == "step.txn.new_order.count")
            .map(|m| m.value)
            .sum::<f64>();
    }
    assert_eq!(committed, grown as f64, "the districts grew by the New-Orders the shards committed");

    let merged_db = d.path().join("merged.db");
    let mut c = sb(&merged_db);
    c.args(["--json", "merge"]);
    for f in &files {
        c.arg("--from").arg(f);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let store = Store::open(&merged_db).unwrap();
    let id = rec["id"].as_i64().unwrap();
    let merged: f64 = store
        .metrics(id)
        .unwrap()
        .iter()
        .filter(|m| m.name == "step.txn.new_order.count")
        .map(|m| m.value)
        .sum();
    assert_eq!(merged, grown as f64, "merged New-Orders = the server's district growth");
    // Server-side NOPM is every shard's view of the same districts over the
    // same seconds: taken once. Three times would be ~3× the clients' sum.
    for step in store.steps(id).unwrap() {
        let m: Vec<_> = store.metrics(id).unwrap().into_iter().filter(|m| m.step_idx == step.idx).collect();
        let get = |n: &str| m.iter().find(|x| x.name == n).map(|x| x.value).unwrap();
        let (districts, client) = (get("nopm.districts"), get("nopm.client"));
        assert!(
            districts < 1.5 * client && districts > 0.5 * client,
            "{}: {districts} vs {client}",
            step.label
        );
    }
}

/// One GET of `/metrics`, the body.
fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).ok()?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// `--metrics-addr` on a real run: scraped while it measures, the live
/// IOPS, latency and the monitor's CPU figures parse, labelled by run,
/// step and shard; a port in use is bad input and leaves no run.
#[test]
fn metrics_are_served_live_during_a_run_and_parse() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("r.db");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = sb(&db)
        .current_dir(d.path())
        .args(["io", "--metrics-addr", &addr, "--shard", "0/1"])
        .args(["--size", "8M", "--bs", "4k", "--rw", "randread", "--duration", "5s", "--rampup", "0s"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut body = String::new();
    while std::time::Instant::now() < until {
        if let Some(b) = scrape(&addr) {
            if b.contains("storbench_iops{") && b.contains("name=\"cpu.iowait\"") {
                body = b;
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(child.wait().unwrap().success());
    assert!(!body.is_empty(), "no live IOPS and CPU figures were served");
    // The value of the series whose line starts with `prefix` and holds `label`.
    let value = |prefix: &str, label: &str| -> f64 {
        let line = body
            .lines()
            .find(|l| l.starts_with(prefix) && l.contains(label))
            .unwrap_or_else(|| panic!("{prefix}…{label} in {body}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("storbench_iops{", "") > 0.0);
    // Latency is a classic histogram: cumulative buckets ending at +Inf,
    // which equals the count, with a positive sum; no quantile gauges.
    let buckets: Vec<(String, f64)> = body
        .lines()
        .filter(|l| l.starts_with("storbench_latency_seconds_bucket{"))
        .map(|l| {
            let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
            (le, l.rsplit(' ').next().unwrap().parse().unwrap())
        })
        .collect();
    assert!(buckets.len() > 10, "bucket lines in {body}");
    assert_eq!(buckets.last().unwrap().0, "+Inf");
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "buckets are cumulative: {buckets:?}");
    let count = value("storbench_latency_seconds_count{", "");
    assert!(count > 0.0 && buckets.last().unwrap().1 == count, "{count} {buckets:?}");
    assert!(value("storbench_latency_seconds_sum{", "") > 0.0);
    assert!(body.contains("# TYPE storbench_latency_seconds histogram"));
    assert!(!body.contains("quantile") && !body.contains("latency_microseconds"), "{body}");
    let iowait = value("storbench_system{", "name=\"cpu.iowait\"");
    assert!((0.0..=100.0).contains(&iowait), "iowait {iowait}");
    let iops_line = body.lines().find(|l| l.starts_with("storbench_iops{")).unwrap();
    let run = Store::open(&db).unwrap().runs(&Default::default()).unwrap().remove(0);
    for label in [format!("run=\"{}\"", run.short()), "step=\"custom\"".into(), "shard=\"0/1\"".into()] {
        assert!(iops_line.contains(&label), "{label} in {iops_line}");
    }
    assert!(body.trim_end().ends_with("# EOF"), "OpenMetrics text ends with # EOF");

    // The address in use: exit 2, one line naming it, no run recorded.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap().to_string();
    let out = sb(&db)
        .current_dir(d.path())
        .args(["io", "--metrics-addr", &taken, "--size", "8M", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("--metrics-addr '{taken}'")) && err.lines().count() == 1, "{err}");
    assert_eq!(Store::open(&db).unwrap().runs(&Default::default()).unwrap().len(), 1);
}

/// The rendered manifests, run here as the cluster would: each shard pod's
/// exact command and environment (the index substituted as Kubernetes does,
/// its own working directory as each pod has its own /work), then the
/// collector's own script. Every shard's run carries its identity and the
/// common start, and the merge finds all three.
#[test]
fn the_pods_commands_run_locally_shard_and_merge() {
    use serde::Deserialize;
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"name = "podcheck"
[target.data]
path = "./storbench-data"
[axes]
bs = ["4k", "8k"]
[[workload]]
kind = "io"
run = { target = "{target}/t.dat", size = "12M", bs = "{bs}", rw = "randread", threads = 3, duration = "2s", rampup = "0s" }
"#,
    )
    .unwrap();
    let start = (chrono::Utc::now() + chrono::Duration::seconds(8))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out = sb(&d.path().join("r.db"))
        .args(["k8s", "render"])
        .arg(&plan)
        .args(["--shards", "3", "--start-at", &start])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let yaml = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> =
        serde_norway::Deserializer::from_str(&yaml).map(|doc| Value::deserialize(doc).unwrap()).collect();
    let container = |job: &str| {
        let j = docs
            .iter()
            .find(|d| d["kind"] == "Job" && d["metadata"]["name"].as_str().unwrap().ends_with(job));
        j.unwrap()["spec"]["template"]["spec"]["containers"][0].clone()
    };
    let (shard, merge) = (container("-shards"), container("-merge"));
    let results = d.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let local = |s: &str, i: usize| {
        s.replace("$(JOB_COMPLETION_INDEX)", &i.to_string())
            .replace("/plan/plan.toml", plan.to_str().unwrap())
            .replace("/results", results.to_str().unwrap())
    };
    let pods: Vec<_> = (0..3)
        .map(|i| {
            let work = d.path().join(format!("pod{i}"));
            std::fs::create_dir(&work).unwrap();
            let mut c = Command::cargo_bin("storbench").unwrap();
            c.current_dir(&work).stdout(Stdio::null()).stderr(Stdio::null()).env_remove("STORBENCH_RESULTS");
            for a in shard["args"].as_array().unwrap() {
                c.arg(local(a.as_str().unwrap(), i));
            }
            for e in shard["env"].as_array().unwrap() {
                match e["value"].as_str() {
                    Some(v) => c.env(e["name"].as_str().unwrap(), local(v, i)),
                    None => c.env(e["name"].as_str().unwrap(), i.to_string()),
                };
            }
            c.spawn().unwrap()
        })
        .collect();
    for p in pods {
        assert!(p.wait_with_output().unwrap().status.success());
    }
    for i in 0..3 {
        let s = Store::open(results.join(format!("shard-{i}.db"))).unwrap();
        let runs = s.runs(&Default::default()).unwrap();
        assert_eq!(runs.len(), 2, "one run per cell");
        for r in runs {
            assert_eq!(r.config["shard"], format!("{i}/3"));
            assert_eq!(r.config["profiles"][0]["threads"], 1);
        }
    }
    // A run a shard's file holds that is no shard's (a cell that failed
    // before recording, a command run by hand) is left out, with a warning.
    let mut s0 = Store::open(results.join("shard-0.db")).unwrap();
    let stray = s0
        .begin_run(&NewRun {
            kind: "tpcb-init".into(),
            label: "by hand".into(),
            config: json!({}),
            env: json!({}),
            plan: Some("podcheck".into()),
            cell: Some("x".into()),
        })
        .unwrap();
    s0.finish_run(stray.id, Status::Complete).unwrap();
    drop(s0);
    let script = local(merge["args"][0].as_str().unwrap(), 0);
    let mut c = Command::new(merge["command"][0].as_str().unwrap());
    c.arg(merge["command"][1].as_str().unwrap()).arg(&script).env("PATH", {
        let bin = assert_cmd::cargo::cargo_bin("storbench");
        format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap())
    });
    for e in merge["env"].as_array().unwrap() {
        c.env(e["name"].as_str().unwrap(), local(e["value"].as_str().unwrap(), 0));
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("(by hand) has no shard identity: left out of the merge"), "{err}");
    // Each cell merged on its own, tagged with the plan and cell, so the
    // merged store reports as the plan.
    let store = Store::open(results.join("merged.db")).unwrap();
    let merged = store.runs(&Default::default()).unwrap();
    assert_eq!(merged.len(), 2, "{merged:?}");
    for m in &merged {
        assert_eq!(m.status, Status::Complete);
        assert_eq!(m.plan.as_deref(), Some("podcheck"));
        assert_eq!(m.config["merged_from"].as_array().map(Vec::len), Some(3), "{}", m.config);
        assert!(m.config["axes"]["bs"].is_string(), "the cell's axes stay in its config");
    }
    let cells: std::collections::BTreeSet<_> = merged.iter().map(|m| m.cell.clone().unwrap()).collect();
    assert_eq!(cells.len(), 2);
    let out = sb(&results.join("merged.db")).args(["report", "podcheck", "--text"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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
        .args(["--start-at", "2999-01-01T00:00:00Z", "--metrics-addr", ":9184"])
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
        "exec storbench merge --label s5-alloc-merged",
        "    [target.node]",
        "- --metrics-addr=0.0.0.0:9184",
        "prometheus.io/scrape: 'true'",
        "containerPort: 9184",
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
        (vec!["--shards", "2", "--start-at", "noon"], "--start-at 'noon': use an RFC 3339 instant"),
        (vec!["--shards", "2", "--cpu", "two"], "'two' is not a Kubernetes quantity"),
        (vec!["--shards", "2", "--memory", "1GB"], "'1GB' is not a Kubernetes quantity"),
        (vec!["--shards", "2", "--storage", "0"], "'0' is not a Kubernetes quantity"),
    ] {
        let out = sb(&d.path().join("r.db")).args(["k8s", "render"]).arg(&plan).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(needle), "{args:?}");
        assert!(out.stdout.is_empty(), "nothing half-written");
    }
}

/// `k8s render` of a plan whose database URLs carry passwords (issue 24):
/// stdout (the ConfigMap's plan included) holds no password, the Secret is
/// written 0600 to `--secret-file` only, the shard pods read it through
/// `secretKeyRef`, both files validate, and without `--secret-file` the
/// render is refused (exit 2) before anything is printed.
#[test]
fn k8s_render_keeps_passwords_in_a_secret_only() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"name = "secretive"
[target.node]
path = "/mnt/bench"
[db.pg]
url = "postgres://root:Sup3r%40Secret@db.example:5432/test?sslmode=require"
[db.my]
url = "mysql://root:MyS3cretPw@db.example:3306/test"
[axes]
target = ["node"]
db = ["pg", "my"]
[[workload]]
kind = "tpcb"
init = { scale = 1 }
run = { db = "{db}", clients = "1", duration = "5s" }
"#,
    )
    .unwrap();
    let secrets = ["Sup3r%40Secret", "Sup3r@Secret", "MyS3cretPw"];
    let render = |extra: &[&str]| {
        sb(&d.path().join("r.db"))
            .args(["k8s", "render"])
            .arg(&plan)
            .args(["--shards", "2", "--start-at", "2999-01-01T00:00:00Z"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = render(&[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--secret-file") && err.lines().count() == 1, "{err}");
    assert!(out.stdout.is_empty());
    assert!(secrets.iter().all(|s| !err.contains(s)), "{err}");

    let secret_file = d.path().join("secret.yaml");
    let out = render(&["--secret-file", secret_file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let yaml = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    for s in secrets {
        assert!(!yaml.contains(s) && !err.contains(s), "'{s}' shown:\n{yaml}\n{err}");
    }
    assert!(!yaml.contains("kind: Secret"));
    // The ConfigMap's plan keeps the URLs, passwords out.
    assert!(yaml.contains("postgres://root@db.example:5432/test?sslmode=require"), "{yaml}");
    assert!(yaml.contains("mysql://root@db.example:3306/test"), "{yaml}");
    for var in ["PGPASSWORD", "MYSQL_PWD"] {
        assert!(yaml.contains(&format!("name: {var}")), "{yaml}");
    }
    assert_eq!(yaml.matches("secretKeyRef:").count(), 2, "{yaml}");
    assert!(yaml.contains("name: storbench-secretive-db"), "{yaml}");

    let secret = std::fs::read_to_string(&secret_file).unwrap();
    let mode = std::fs::metadata(&secret_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(secret.contains("kind: Secret"), "{secret}");
    // Base64 of the decoded passwords, as Kubernetes' `data` holds them.
    assert!(secret.contains("PGPASSWORD: U3VwM3JAU2VjcmV0"), "{secret}");
    assert!(secret.contains("MYSQL_PWD: TXlTM2NyZXRQdw=="), "{secret}");

    let manifests = d.path().join("m.yaml");
    std::fs::write(&manifests, &yaml).unwrap();
    for (file, n) in [(&manifests, 4), (&secret_file, 1)] {
        let v = Command::new("kubernetes-validate")
            .args(["-k", "1.33.0", "--strict"])
            .arg(file)
            .output()
            .expect("kubernetes-validate is installed by .ci/run (pip install kubernetes-validate)");
        let report = String::from_utf8_lossy(&v.stdout).to_string() + &String::from_utf8_lossy(&v.stderr);
        assert!(v.status.success(), "{report}");
        assert_eq!(report.matches(" passed for resource ").count(), n, "{report}");
    }

    // Two passwords for one engine cannot share PGPASSWORD.
    let two = std::fs::read_to_string(&plan).unwrap().replace(
        "[db.my]\nurl = \"mysql://root:MyS3cretPw@db.example:3306/test\"",
        "[db.my]\nurl = \"postgres://root:Other@db2.example/test\"",
    );
    std::fs::write(&plan, two).unwrap();
    let out = render(&["--secret-file", secret_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("different PGPASSWORD passwords") && !err.contains("Other"), "{err}");
}

/// `merge` of runs never made as shards is bad input (issue 24: it wrote a
/// "merged" run of two whole runs): exit 2, one line naming the run, and no
/// run written.
#[test]
fn merging_runs_that_were_never_sharded_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("r.db");
    let mut store = Store::open(&db).unwrap();
    let mut ids = Vec::new();
    for i in 0..2 {
        let run = store
            .begin_run(&NewRun {
                kind: "io".into(),
                label: format!("whole{i}"),
                config: json!({}),
                env: json!({}),
                plan: None,
                cell: None,
            })
            .unwrap();
        store.finish_run(run.id, Status::Complete).unwrap();
        ids.push(run.id.to_string());
    }
    drop(store);
    let out = sb(&db).args(["merge", &ids[0], &ids[1]]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("was not run as a shard") && err.contains("--shard i/N"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(Store::open(&db).unwrap().runs(&Default::default()).unwrap().len(), 2, "nothing written");
}
