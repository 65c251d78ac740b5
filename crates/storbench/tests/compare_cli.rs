//! `storbench compare` on a results store built here with the store's own
//! API: two TPC-B runs made with different settings (a 512 MiB target for
//! 12 s against 1 GiB for 3 s) with each figure's sources (`tps`,
//! `tps.client`, `tps.server`), latency figures and device figures. The
//! comparison opens with the headline and names the settings that differ;
//! `--headline` and `--metric` keep fewer rows; a run against itself, or a
//! filter that keeps nothing, is bad input (exit 2).

use std::process::{Command, Output};

use serde_json::json;
use storbench_metrics::{StepReport, Unit};
use storbench_results::{now_rfc3339, NewRun, Status, Store};

fn add_run(store: &mut Store, size: &str, duration: &str, tps: f64) -> i64 {
    let run = store
        .begin_run(&NewRun {
            kind: "tpcb".into(),
            label: format!("tpcb {size}"),
            config: json!({ "size": size, "duration": duration, "clients": [1, 4] }),
            env: json!({ "host": "h", "db": { "engine": "sqlite", "settings": { "synchronous": "full" } } }),
            plan: None,
            cell: None,
        })
        .unwrap();
    for (i, c) in [1u32, 4].iter().enumerate() {
        let mut r = StepReport::default();
        let v = tps * f64::from(*c);
        r.figure("tps", v, Unit::PerS);
        r.figure("tps.client", v, Unit::PerS);
        r.figure("tps.server", v * 1.0004, Unit::PerS);
        r.figure("lat.p99", 900.0, Unit::Us);
        r.figure("lat.p99.9", 1900.0, Unit::Us);
        r.figure("dev.vda.w_await", 0.5, Unit::Ms);
        let label = format!("clients={c}");
        store
            .write_step(
                run.id,
                i as i64,
                &label,
                &json!({ "clients": c }),
                &now_rfc3339(),
                &now_rfc3339(),
                &r,
            )
            .unwrap();
    }
    store.finish_run(run.id, Status::Complete).unwrap();
    run.id
}

struct Fixture {
    dir: tempfile::TempDir,
    a: String,
    b: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("results.db")).unwrap();
    let a = add_run(&mut store, "512MiB", "12s", 300.0).to_string();
    let b = add_run(&mut store, "1GiB", "3s", 330.0).to_string();
    Fixture { dir, a, b }
}

fn compare(f: &Fixture, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_storbench"))
        .arg("--results")
        .arg(f.dir.path().join("results.db"))
        .arg("compare")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "failed: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn compare_opens_with_the_headline_and_names_the_settings_that_differ() {
    let f = fixture();
    let out = stdout(&compare(&f, &[&f.a, &f.b]));
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with("Headline, B against A — TPS: clients=1 300 TPS → 330 TPS (1.10×); clients=4 1200 TPS → 1320 TPS (1.10×)."),
        "{out}"
    );
    assert!(out.contains("Settings differ (2): duration: A 12s, B 3s; size: A 512MiB, B 1GiB."), "{out}");
    assert!(out.find("Settings differ").unwrap() < out.find("┆").unwrap(), "before the table: {out}");
    // Every shared figure is in the table by default.
    assert!(out.contains("dev.vda.w_await") && out.contains("tps.server"), "{out}");
}

#[test]
fn headline_and_metric_keep_fewer_rows() {
    let f = fixture();
    let rows = |out: &str| out.lines().filter(|l| l.contains("clients=")).count();
    let all = stdout(&compare(&f, &[&f.a, &f.b, "--md"]));
    let head = stdout(&compare(&f, &[&f.a, &f.b, "--headline", "--md"]));
    assert!(head.contains("| clients=1 | tps | TPS | 300 | 330 | 1.100 |"), "{head}");
    assert!(!head.contains("| tps.server |") && !head.contains("lat.p99"), "{head}");
    // The headline sentence, plus one table row per step.
    assert_eq!(rows(&head), 1 + 2, "{head}");
    assert!(rows(&all) > rows(&head));
    let lat = stdout(&compare(&f, &[&f.a, &f.b, "--metric", "lat.*", "--md"]));
    assert!(
        lat.contains("| lat.p99 |") && lat.contains("| lat.p99.9 |") && !lat.contains("| tps |"),
        "{lat}"
    );
    let dev = stdout(&compare(&f, &[&f.a, &f.b, "--metric", "w_await,tps.server", "--json"]));
    let json: serde_json::Value = serde_json::from_str(&dev).unwrap();
    let names: Vec<&str> =
        json["rows"].as_array().unwrap().iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(names, ["dev.vda.w_await", "tps.server", "dev.vda.w_await", "tps.server"]);
    assert_eq!(json["settings_differ"].as_array().unwrap().len(), 2);
}

#[test]
fn a_run_against_itself_or_a_filter_keeping_nothing_is_bad_input() {
    let f = fixture();
    for args in [vec![f.a.as_str(), f.a.as_str()], vec![f.a.as_str(), f.b.as_str(), "--metric", "nope"]] {
        let o = compare(&f, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(o.stdout.is_empty());
    }
    let err = String::from_utf8_lossy(&compare(&f, &[&f.a, &f.a]).stderr).to_string();
    assert!(err.contains("with itself"), "{err}");
    let err = String::from_utf8_lossy(&compare(&f, &[&f.a, &f.b, "--metric", "nope"]).stderr).to_string();
    assert!(err.contains("--metric nope") && err.contains("tps"), "{err}");
}
