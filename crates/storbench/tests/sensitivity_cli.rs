//! Storage sensitivity (issue 28) through the binary: `tpcb run
//! --sensitivity 0.5,2` on a modelled `hdd` re-runs the top step with the
//! device's times halved and doubled, records each re-run as a tagged
//! step and the base step's sentence as its note (which the store gives
//! again), puts the medium back at scale 1, and the report opens with it.
//! A run whose data is on no modelled medium is refused (exit 2).

use serde_json::Value;
use storbench_report::sensitivity::{device_share, expected_ratio, measure, NOTE};
use storbench_report::RunData;
use storbench_results::Store;

use crate::common;
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
        .args(["--json", "tpcb", "run", "--db", &db, "-c", "1", "-T", "30s", "--sensitivity", "0.5,2"])
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
    // flushes on the disk one at a time, so its time is the device's part
    // (which the scale multiplies) plus a part that does not scale
    // (SQLite's and storbench's CPU, the FUSE round trips: 2-4 ms per
    // transaction in a debug build on this host). The daemon's own figures
    // give the device's busy share u of the base step (0.88-0.91 here), and
    // TPS then follows 1 / (1 − u + u·f) (Amdahl), not 1/f: the issue's
    // "×0.5 → 2× within 10 %" holds where u is near 1 (the io test below:
    // 2.01×). SQLite's WAL autocheckpoint (every 1,000 pages, about 250
    // transactions) adds a 1-3 s flush of scattered pages now and then, so
    // the steps are 30 s long to hold several each.
    let lat = |s: &Value| s["metrics"]["lat.mean"]["value"].as_f64().unwrap();
    let (l_fast, l_base, l_slow) = (lat(&steps[1]), lat(&steps[0]), lat(&steps[2]));
    assert!(l_fast < l_base && l_base < l_slow, "lat {l_fast:.0} / {l_base:.0} / {l_slow:.0} µs\n{terminal}");
    let (base, fast, slow) = (tps(&steps[0]), tps(&steps[1]), tps(&steps[2]));
    let store = Store::open(s.path("r.db")).unwrap();
    let id = rec["run"]["id"].as_i64().unwrap().to_string();
    let run = RunData::load(&store, store.run(&id).unwrap()).unwrap();
    let u = device_share(&run.steps[0], "sens-hdd").expect("the daemon's figures on the base step");
    assert!(u > 0.75, "the device's share of a transaction at one client: {u:.2}\n{terminal}");
    let (want_up, want_down) = (expected_ratio(u, 0.5), expected_ratio(u, 2.0));
    let (up, down) = (fast / base, slow / base);
    let split =
        format!("u {u:.3}: ×0.5 {up:.2}× (expected {want_up:.2}×), ×2 {down:.2}× (expected {want_down:.2}×)");
    eprintln!("{split}");
    // Issue 28's goal is 10 %; checkpoint stalls (0-2 of 1-3 s in a 30 s
    // step) move a step's TPS by more than that now and then: 1.67× and
    // 2.14× were measured against 1.80× and 1.92× expected (-7 %, +11 %),
    // and 2.16× against 1.87× (+15.5 %, CI 2026-11-28: a 1.9 s stall in
    // the base step). 20 % still fails a scale that does not reach the
    // device (1.0×, −47 %). CPU steal that differs between the steps moves
    // the split more (2.20× against 1.73× expected, +27 %, with 16 % steal
    // in the base step and 6 % in the ×0.5 one: CI 2026-11-28), so where a
    // step lost over 5 % to steal (as the io test below) the bound is 35 %,
    // which a scale that does not reach the device still fails.
    let steal = steps.iter().filter_map(|s| s["metrics"]["cpu.steal"]["value"].as_f64()).fold(0.0, f64::max);
    let tol = if steal > 5.0 { 0.35 } else { 0.20 };
    assert!((up / want_up - 1.0).abs() <= tol, "steal {steal:.1} %: {split}\n{terminal}");
    // At ×2 a 30 s step holds only 500 transactions (two checkpoints):
    // a checkpoint more or less moves it by up to 15 %.
    assert!((down / want_down - 1.0).abs() <= tol, "steal {steal:.1} %: {split}\n{terminal}");
    // The medium is back at scale 1.
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(s.state().join("emu/sens-hdd.scale")).unwrap())
            .unwrap();
    assert_eq!(scale["scale"], 1.0);
    // The note is what the store's steps give again, and the terminal
    // printed it after the summary.
    let note = steps[0]["notes"][NOTE].as_str().unwrap_or_else(|| panic!("no note in {}", steps[0]));
    assert_eq!(run.steps.len(), 1, "re-runs are not load levels");
    let again = measure(&run);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].sentence(), note);
    assert!(
        note.starts_with("TPS +")
            && note.contains("if this storage were twice as fast (×0.5 device time)")
            && note.contains(&format!("the device was busy {:.0} % of the base step's time", u * 100.0)),
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

/// Issue 28's physics check where it is known, on PostgreSQL: at one
/// client every TPC-B commit waits for its WAL flush on the modelled disk,
/// and nearly nothing else of a transaction's time is spent outside the
/// device, so twice as fast a device gives twice the TPS (within 10 %).
/// The same base step's verdict is storage latency (issue 28's constructed
/// case, on a server's sessions rather than SQLite's VFS).
#[test]
fn postgres_tpcb_at_one_client_on_an_hdd_doubles_its_tps_on_twice_as_fast_a_device() {
    if !std::path::Path::new("/usr/lib/postgresql").exists() {
        eprintln!("PostgreSQL server binaries are not installed; skipped");
        return;
    }
    let s = State::new();
    s.ok(&["media", "create", "sens-pg", "--size", "1G", "--fs", "ext4", "--model", "hdd"]);
    let up: Value =
        serde_json::from_str(&s.ok(&["--json", "pg", "up", "sens-pgdb", "--data", "sens-pg"])).unwrap();
    let port = up["port"].as_u64().unwrap_or_else(|| panic!("{up}"));
    s.ok(&["tpcb", "init", "--db", "managed:sens-pgdb", "--scale", "1"]);
    // The load's pages written to the device now, not during the steps.
    common::managed_psql(port, "CHECKPOINT");
    let m = s.media().into_iter().find(|m| m["name"] == "sens-pg").unwrap();
    let st = std::process::Command::new("sync").arg("-f").arg(m["mount_point"].as_str().unwrap()).status();
    assert!(st.unwrap().success());
    let out = s
        .sb()
        .args(["--json", "tpcb", "run", "--db", "managed:sens-pgdb", "-c", "1", "-T", "10s"])
        .args(["--sensitivity", "0.5,2"])
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{terminal}");
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = rec["steps"].as_array().unwrap();
    let labels: Vec<&str> = steps.iter().map(|s| s["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["clients=1", "clients=1 ×0.5", "clients=1 ×2"]);
    let (base, fast, slow) = (tps(&steps[0]), tps(&steps[1]), tps(&steps[2]));
    let store = Store::open(s.path("r.db")).unwrap();
    let id = rec["run"]["id"].as_i64().unwrap().to_string();
    let run = RunData::load(&store, store.run(&id).unwrap()).unwrap();
    let u = device_share(&run.steps[0], "sens-pg").expect("the daemon's figures on the base step");
    let (up, down) = (fast / base, slow / base);
    let split =
        format!("TPS {base:.1}, ×0.5 {fast:.1} ({up:.2}×), ×2 {slow:.1} ({down:.2}×); device busy {u:.3}");
    eprintln!("{split}");
    // Issue 28's goal: ×0.5 device time → TPS within 10 % of twice the
    // base. What does not scale is the CPU of a transaction (the server's
    // and a debug storbench's) and the loop and FUSE round trips to the
    // medium: up to 0.8 ms of a 9 ms transaction here (two runs on a busy
    // host: 1.83× and 0.54×, then 2.01× and 0.50×, at 109 and 118 TPS), so
    // the device is 91-100 % of it, and Amdahl's 1 / (1 − u + u·f) at 91 %
    // gives 1.83× and 0.52×.
    // A host whose other guests take its CPU (cpu.steal, which the steps
    // flag) lengthens the part that does not scale: a CI run with 10-19 %
    // stolen gave 1.61× and 0.53× (2026-11-28), a rerun at 8-14 % 1.72×
    // and 0.52×. There the goal's 10 % becomes 20 %, which still fails a
    // scale that does not reach the device.
    let steal = steps.iter().filter_map(|s| s["metrics"]["cpu.steal"]["value"].as_f64()).fold(0.0, f64::max);
    let within = if steal > 5.0 { 0.20 } else { 0.10 };
    assert!((up / 2.0 - 1.0).abs() <= within, "steal {steal:.1} %: {split}\n{terminal}");
    // Half as fast a device: the part that does not scale weighs less, and
    // 0.5-0.55× is the physics for u from 97 % to 85 %.
    assert!((0.45..=0.6).contains(&down), "{split}\n{terminal}");
    // The base step: each commit waits on the device, one at a time.
    let notes = &steps[0]["notes"];
    assert_eq!(notes["verdict.kind"], "storage-latency", "{notes}\n{terminal}");
    assert!(notes["verdict.evidence"].as_str().unwrap().contains("IO:WALSync"), "{notes}");
    let again = storbench_report::verdict::judge(&run);
    assert_eq!(again[0].kind.as_str(), "storage-latency");
    assert_eq!(again[0].evidence, notes["verdict.evidence"].as_str().unwrap());
    s.ok(&["pg", "down", "sens-pgdb", "--destroy"]);
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
        (
            vec!["--sensitivity", "0"],
            "'0' for '--sensitivity <FACTORS>': 0: a time scale must be 0.01 to 100",
        ),
        (vec!["--sensitivity", "fast"], "'fast' for '--sensitivity <FACTORS>': 'fast' is not a number"),
        (vec!["--sensitivity", "1"], "1 is the step itself"),
        (vec!["--sensitivity-duration", "5s"], "--sensitivity-duration 5s: only with --sensitivity"),
        (
            vec!["--sensitivity", "0.5", "--sensitivity-duration", "soon"],
            "'soon' for '--sensitivity-duration",
        ),
        (vec!["--sensitivity", "0.5", "--sensitivity-duration", "0s"], "'0s' must be more than zero"),
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

#[test]
fn a_killed_storbench_leaves_no_time_scale_behind_and_media_list_shows_one() {
    let s = State::new();
    s.ok(&["media", "create", "sens-kill", "--size", "256M", "--fs", "ext4", "--model", "hdd"]);
    let m = s.media().into_iter().find(|m| m["name"] == "sens-kill").unwrap();
    let scale_file = s.state().join("emu/sens-kill.scale");
    let scale_now = || -> f64 {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&scale_file).unwrap()).unwrap();
        v["scale"].as_f64().unwrap()
    };
    // A scale the user set is the user's: listed, kept, no warning.
    s.ok(&["media", "scale", "sens-kill", "0.5"]);
    let (code, out, err) = s.run(&["media", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("model hdd ×0.5"), "{out}");
    let listed = s.media().into_iter().find(|m| m["name"] == "sens-kill").unwrap();
    assert_eq!(listed["scale"], 0.5);
    assert!(!err.contains("time scale"), "{err}");
    assert_eq!(scale_now(), 0.5);
    s.ok(&["media", "scale", "sens-kill", "1"]);
    // A storbench killed outright in a sensitivity re-run.
    let db = format!("sqlite:{}/tpcb.db", m["mount_point"].as_str().unwrap());
    s.ok(&["tpcb", "init", "--db", &db, "--scale", "1"]);
    let mut child = s
        .sb()
        .args([
            "tpcb",
            "run",
            "--db",
            &db,
            "-T",
            "1s",
            "--sensitivity",
            "2",
            "--sensitivity-duration",
            "120s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while scale_now() != 2.0 {
        assert!(t0.elapsed().as_secs() < 60, "the re-run never set ×2");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(scale_now(), 2.0, "SIGKILL undoes nothing by itself");
    // The next look at the medium puts it back, and says so.
    let (code, out, err) = s.run(&["media", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "medium 'sens-kill' was left at time scale ×2 by a storbench that ended without undoing it"
        ),
        "{err}"
    );
    assert!(out.contains("model hdd ") && !out.contains("×2"), "{out}");
    assert_eq!(scale_now(), 1.0);
    assert!(!s.state().join("emu/sens-kill.scale-owner").exists());
    // Once only.
    let (_, _, err) = s.run(&["media", "list"]);
    assert!(!err.contains("time scale"), "{err}");
}

#[test]
fn tpch_power_on_an_hdd_reruns_the_power_test_per_factor() {
    let s = State::new();
    s.ok(&["media", "create", "sens-tpch", "--size", "256M", "--fs", "ext4", "--model", "hdd"]);
    let m = s.media().into_iter().find(|m| m["name"] == "sens-tpch").unwrap();
    let db = format!("sqlite:{}/tpch.db", m["mount_point"].as_str().unwrap());
    s.ok(&["tpch", "build", "--db", &db, "--scale", "0.01"]);
    for (args, want) in [
        (vec!["--test", "throughput", "--sensitivity", "0.5"], "--sensitivity: only with --test power"),
        (
            vec!["--sensitivity", "0.5", "--sensitivity-duration", "5s"],
            "--sensitivity-duration 5s: tpch re-runs the whole power test",
        ),
        (vec!["--sensitivity", "1"], "1 is the step itself"),
    ] {
        let mut a = vec!["tpch", "run", "--db", &db];
        a.extend(args);
        let (code, _, err) = s.run(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(err.contains(want) && err.trim().lines().count() == 1, "{a:?}: {err}");
    }
    let out = s
        .sb()
        .args(["--json", "tpch", "run", "--db", &db, "--queries", "1,6", "--sensitivity", "0.5,2"])
        .output();
    let out = out.unwrap();
    let terminal = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{terminal}");
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = rec["steps"].as_array().unwrap();
    let labels: Vec<&str> = steps.iter().map(|s| s["label"].as_str().unwrap()).collect();
    // The power test's own steps, its summary, then one summary per factor
    // (the re-runs' queries are not steps of their own).
    assert_eq!(labels[labels.len() - 3..], ["summary", "summary ×0.5", "summary ×2"], "{labels:?}");
    let base = &steps[steps.len() - 3];
    for (st, f) in steps[steps.len() - 2..].iter().zip([0.5, 2.0]) {
        assert_eq!(st["params"]["sensitivity"]["scale"], f, "{}", st["params"]);
        assert_eq!(st["params"]["sensitivity"]["of"], base["idx"]);
        // Two cached queries at SF 0.01 may do no I/O in a whole second:
        // the daemon's figure, when there is one, says the scale.
        if let Some(seen) = st["metrics"]["emu.sens-tpch.scale"]["value"].as_f64() {
            assert!((seen - f).abs() < 0.01, "scale {seen} during the ×{f} re-run");
        }
        assert!(st["metrics"]["power.geomean"]["value"].as_f64().unwrap() > 0.0);
    }
    // The headline is a time: its change is the query time's.
    let note = base["notes"][NOTE].as_str().unwrap_or_else(|| panic!("no note in {base}"));
    assert!(
        note.starts_with("geomean query time ") && note.contains("twice as fast (×0.5 device time)"),
        "{note}"
    );
    assert!(terminal.contains(&format!("sensitivity summary: {note}")), "{terminal}");
    let store = Store::open(s.path("r.db")).unwrap();
    let id = rec["run"]["id"].as_i64().unwrap().to_string();
    let run = RunData::load(&store, store.run(&id).unwrap()).unwrap();
    let again = measure(&run);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].sentence(), note);
    assert!(again[0].lower_better);
    let scale: Value =
        serde_json::from_str(&std::fs::read_to_string(s.state().join("emu/sens-tpch.scale")).unwrap())
            .unwrap();
    assert_eq!(scale["scale"], 1.0);
    // The daemon took each factor and 1 after it, in order.
    let log = std::fs::read_to_string(s.state().join("emu/sens-tpch.log")).unwrap();
    let taken: Vec<&str> =
        log.lines().filter(|l| l.contains("scale command")).filter_map(|l| l.rsplit("now ").next()).collect();
    assert_eq!(taken, ["×0.5", "×1", "×2", "×1"], "{log}");
}
