//! Storage sensitivity (issue 28) through the binary: `tpcb run
//! --sensitivity 0.5,2` on a modelled `hdd` re-runs the top step with the
//! device's times halved and doubled, records each re-run as a tagged
//! step and the base step's sentence as its note (which the store gives
//! again), puts the medium back at scale 1, and the report opens with it.
//! A run whose data is on no modelled medium is refused (exit 2).

use serde_json::Value;
use storbench_report::sensitivity::{measure, NOTE};
use storbench_report::RunData;
use storbench_results::Store;

mod common;
use common::State;

fn tps(step: &Value) -> f64 {
    step["metrics"]["tps.client"]["value"].as_f64().unwrap_or_else(|| panic!("no tps.client in {step}"))
}

#[test]
fn tpcb_at_one_client_on_an_hdd_follows_the_devices_speed() {
    let s = State::new();
    s.ok(&["media", "create", "sens-hdd", "--size", "256M", "--fs", "ext4", "--model", "hdd"]);
    let m = s.media().into_iter().find(|m| m["name"] == "sens-hdd").unwrap();
    let db = format!("sqlite:{}/tpcb.db", m["mount_point"].as_str().unwrap());
    s.ok(&["tpcb", "init", "--db", &db, "--scale", "1"]);
    // The load's dirty pages written back now, not during the base step.
    let st = std::process::Command::new("sync").arg("-f").arg(m["mount_point"].as_str().unwrap()).status();
    assert!(st.unwrap().success());
    let out = s
        .sb()
        .args(["--json", "tpcb", "run", "--db", &db, "-c", "1", "-T", "6s", "--sensitivity", "0.5,2"])
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{terminal}");
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = rec["steps"].as_array().unwrap();
    let labels: Vec<&str> = steps.iter().map(|s| s["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["clients=1", "clients=1 ×0.5", "clients=1 ×2"]);
    // Each re-run is tagged with its scale and the step it re-runs, and the
    // daemon's own counters say the scale was in effect.
    for (st, f) in steps[1..].iter().zip([0.5, 2.0]) {
        assert_eq!(st["params"]["sensitivity"]["scale"], f, "{}", st["params"]);
        assert_eq!(st["params"]["sensitivity"]["of"], steps[0]["idx"]);
        assert_eq!(st["params"]["sensitivity"]["medium"], "sens-hdd");
        let seen = st["metrics"]["emu.sens-hdd.scale"]["value"].as_f64().unwrap();
        assert!((seen - f).abs() < 0.01, "scale {seen} during the ×{f} step");
    }
    assert!(steps[0]["metrics"].get("emu.sens-hdd.scale").is_none(), "the base step ran as modelled");
    // Physics: at one client every transaction waits for its commits'
    // flushes on the disk, so its latency is a fixed part (SQLite's and
    // storbench's CPU, the FUSE round trips: about 4 ms per transaction in
    // a debug build on this host) plus the device's time, which the scale
    // multiplies. The bound (×0.5 → 2× TPS within 10 %) holds where
    // the device is everything (the io test below: 2.01×); here, on a busy
    // shared host, three runs gave 1.72×, 1.92× and 2.26× at ×0.5 and
    // 0.43-0.73× at ×2, so the bounds are the loosest that still fail when
    // the scale is not applied (1×) or applied backwards.
    let lat = |s: &Value| s["metrics"]["lat.mean"]["value"].as_f64().unwrap();
    let (l_fast, l_base, l_slow) = (lat(&steps[1]), lat(&steps[0]), lat(&steps[2]));
    assert!(l_fast < l_base && l_base < l_slow, "lat {l_fast:.0} / {l_base:.0} / {l_slow:.0} µs\n{terminal}");
    let (base, fast, slow) = (tps(&steps[0]), tps(&steps[1]), tps(&steps[2]));
    let up = fast / base;
    assert!((1.4..=2.6).contains(&up), "×0.5: {fast} TPS against {base} ({up:.2}×)\n{terminal}");
    assert!(slow / base < 0.8, "×2: {slow} TPS against {base}\n{terminal}");
    // The medium is back at scale 1.
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(s.state().join("emu/sens-hdd.scale")).unwrap())
            .unwrap();
    assert_eq!(scale["scale"], 1.0);
    // The note is what the store's steps give again, and the terminal
    // printed it after the summary.
    let note = steps[0]["notes"][NOTE].as_str().unwrap_or_else(|| panic!("no note in {}", steps[0]));
    let store = Store::open(s.path("r.db")).unwrap();
    let id = rec["run"]["id"].as_i64().unwrap().to_string();
    let run = RunData::load(&store, store.run(&id).unwrap()).unwrap();
    assert_eq!(run.steps.len(), 1, "re-runs are not load levels");
    let again = measure(&run);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].sentence(), note);
    assert!(
        note.starts_with("TPS +") && note.contains("if this storage were twice as fast (×0.5 device time)"),
        "{note}"
    );
    let line = format!("sensitivity clients=1: {note}");
    let summary = terminal.find('┌').expect("a summary table");
    assert!(
        terminal.find(&line).is_some_and(|at| at > summary),
        "no '{line}' after the summary in:\n{terminal}"
    );
    // The report opens with it, before any table, in text and in HTML.
    let text = s.ok(&["report", &id, "--text"]).replace("\n      ", " ");
    let at = text.find(&format!("  {line}")).unwrap_or_else(|| panic!("no '{line}' in:\n{text}"));
    assert!(text.find('┌').is_none_or(|t| t > at), "the sensitivity comes before the tables");
    let html = s.path("r.html");
    s.ok(&["report", &id, "--html", html.to_str().unwrap()]);
    let html = std::fs::read_to_string(html).unwrap();
    let at =
        html.find("<div class=\"verdict\">sensitivity clients=1: TPS ").expect("the sensitivity in the HTML");
    assert!(html.find("<table").is_none_or(|t| t > at));
}

#[test]
fn sensitivity_is_refused_off_a_modelled_medium_and_for_bad_factors() {
    let s = State::parallel();
    let db = "sqlite:sens/tpcb.db";
    s.ok(&["tpcb", "init", "--db", db, "--scale", "1"]);
    let (code, _, err) = s.run(&["tpcb", "run", "--db", db, "-T", "1s", "--sensitivity", "0.5,2"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--sensitivity needs the data on a modelled medium")
            && err.contains("on no storbench medium"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for (args, want) in [
        (vec!["--sensitivity", "0"], "--sensitivity 0: 0: a time scale must be 0.01 to 100"),
        (vec!["--sensitivity", "fast"], "--sensitivity fast: 'fast' is not a number"),
        (vec!["--sensitivity", "1"], "1 is the step itself"),
        (vec!["--sensitivity-duration", "5s"], "--sensitivity-duration 5s: only with --sensitivity"),
        (vec!["--sensitivity", "0.5", "--sensitivity-duration", "soon"], "--sensitivity-duration soon"),
    ] {
        let mut a = vec!["tpcb", "run", "--db", db, "-T", "1s"];
        a.extend(args);
        let (code, _, err) = s.run(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
    }
    // Nothing was recorded for a refused run (the init alone is).
    let runs = s.ok(&["--json", "results", "list"]);
    assert!(!runs.contains("\"tpcb\""), "{runs}");
}

#[test]
fn io_at_qd1_on_an_hdd_scales_its_iops_with_the_device() {
    let s = State::new();
    s.ok(&["media", "create", "sens-io", "--size", "1G", "--fs", "none", "--model", "hdd"]);
    let m = s.media().into_iter().find(|m| m["name"] == "sens-io").unwrap();
    let dev = m["device"].as_str().unwrap().to_string();
    let args = ["--json", "io", "--target", &dev, "--rw", "randread", "--bs", "4k", "--qd", "1"];
    let out = s.ok(&[&args[..], &["--duration", "3s", "--rampup", "0s", "--sensitivity", "0.5,2"]].concat());
    let rec: Value = serde_json::from_str(&out).unwrap();
    let steps = rec["steps"].as_array().unwrap();
    let iops = |i: usize| steps[i]["metrics"]["io.iops"]["value"].as_f64().unwrap();
    // Every read waits for a seek and a rotation: IOPS follow the device's
    // speed (measured 2.01× and 0.52×).
    let (up, down) = (iops(1) / iops(0), iops(2) / iops(0));
    assert!((1.8..=2.2).contains(&up), "×0.5: {up:.2}×");
    assert!((0.4..=0.6).contains(&down), "×2: {down:.2}×");
    let note = steps[0]["notes"][NOTE].as_str().unwrap();
    assert!(note.starts_with("IOPS +"), "{note}");
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(s.state().join("emu/sens-io.scale")).unwrap()).unwrap();
    assert_eq!(scale["scale"], 1.0);
}
