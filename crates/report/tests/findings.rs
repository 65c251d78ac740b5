//! The report leads with what was found: built on a real results store
//! holding an S2-shaped plan (TPC-B at 1, 10 and 100 clients on `hdd`, two
//! repeats, and `nvme`, one) and a TPC-C plan whose figures carry their
//! sources as suffixes (`tpm.server`, `nopm.districts`, `*.client`), with a
//! recorded setting warning and a flagged step.

use serde_json::json;
use storbench_metrics::{StepReport, Unit};
use storbench_report::Report;
use storbench_results::{now_rfc3339, NewRun, Status, Store};

fn run(
    store: &mut Store,
    kind: &str,
    plan: &str,
    label: &str,
    rep: u32,
    env: serde_json::Value,
    steps: &[(&str, StepReport)],
) {
    let (axis, value) = label.split_once('=').unwrap();
    let r = store
        .begin_run(&NewRun {
            kind: kind.into(),
            label: label.into(),
            config: json!({ "axes": { axis: value } }),
            env,
            plan: Some(plan.into()),
            cell: Some(format!("{label}/{kind}#r{rep}")),
        })
        .unwrap();
    for (i, (l, s)) in steps.iter().enumerate() {
        let (k, v) = l.split_once('=').unwrap();
        let params = json!({ k: v.parse::<u32>().unwrap() });
        store.write_step(r.id, i as i64, l, &params, &now_rfc3339(), &now_rfc3339(), s).unwrap();
    }
    store.finish_run(r.id, Status::Complete).unwrap();
}

fn tps(v: f64, steal: Option<f64>) -> StepReport {
    let mut s = StepReport::default();
    s.figure("tps", v, Unit::PerS);
    if let Some(x) = steal {
        s.figure("flag.steal", 1.0, Unit::Count);
        s.figure("cpu.steal", x, Unit::Percent);
    }
    s
}

/// A directory of its own for one test's store, removed when dropped.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn store() -> (Dir, Store) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = Dir(std::env::temp_dir().join(format!("storbench-report-test-{}-{n}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut st = Store::open(dir.0.join("r.db")).unwrap();
    let env = |medium: &str| json!({ "host": "h", "medium": medium, "port": if medium == "hdd" { 5433 } else { 5434 } });
    // hdd: 70 and 78 at 1 client (median 74), flat as clients grow.
    for (rep, one) in [(1, 70.0), (2, 78.0)] {
        let mut e = env("hdd");
        if rep == 2 {
            e["warnings"] = json!(["fsync=off"]);
        }
        if rep == 1 {
            // The same warning where a database part of the environment keeps it.
            e["db"] = json!({ "warnings": { "fsync": "off" } });
        }
        let steps = [
            ("clients=1", tps(one, None)),
            ("clients=10", tps(75.0, None)),
            ("clients=100", tps(80.0, None)),
        ];
        run(&mut st, "tpcb", "s2", "target=hdd", rep, e, &steps);
    }
    let steps = [
        ("clients=1", tps(951.0, None)),
        ("clients=10", tps(1300.0, Some(12.0))),
        ("clients=100", tps(1480.0, None)),
    ];
    run(&mut st, "tpcb", "s2", "target=nvme", 1, env("nvme"), &steps);
    // Each cell's init: setup runs, labelled alike, that are not repeats.
    for cell in ["target=hdd/tpcb#r1", "target=hdd/tpcb#r2", "target=nvme/tpcb#r1"] {
        let r = st
            .begin_run(&NewRun {
                kind: "tpcb-init".into(),
                label: "tpcb init scale 2".into(),
                config: json!({ "axes": { "target": cell[7..].split('/').next().unwrap() } }),
                env: env("x"),
                plan: Some("s2".into()),
                cell: Some(format!("{cell}:tpcb-init")),
            })
            .unwrap();
        let mut load = StepReport::default();
        load.figure("load.seconds", 2.5, Unit::S);
        st.write_step(r.id, 0, "init", &json!({}), &now_rfc3339(), &now_rfc3339(), &load).unwrap();
        st.finish_run(r.id, Status::Complete).unwrap();
    }

    let tpcc = |server: f64| {
        let mut s = StepReport::default();
        s.figure("tpm.server", server, Unit::PerMin);
        s.figure("tpm.client", server - 10.0, Unit::PerMin);
        s.figure("tpm.per_user", server, Unit::PerMin);
        s.figure("nopm.districts", server * 0.45, Unit::PerMin);
        s.figure("nopm.client", server * 0.45, Unit::PerMin);
        for t in 0..3 {
            s.sample(t * 1000, "tpm.client", server);
            s.sample(t * 1000, "nopm.client", server * 0.45);
        }
        s
    };
    run(
        &mut st,
        "tpcc",
        "s4",
        "target=ssd",
        1,
        env("ssd"),
        &[("users=1", tpcc(1000.0)), ("users=2", tpcc(1900.0))],
    );
    // A cell that failed before it measured: a run of its own kind, no steps.
    let failed = st
        .begin_run(&NewRun {
            kind: "io".into(),
            label: "target=ssd".into(),
            config: json!({ "axes": { "target": "ssd" } }),
            env: env("ssd"),
            plan: Some("s4".into()),
            cell: Some("target=ssd/io#r1".into()),
        })
        .unwrap();
    st.finish_run(failed.id, Status::Failed).unwrap();
    (dir, st)
}

#[test]
fn the_report_opens_with_one_sentence_per_workload_with_the_numbers() {
    let (_d, st) = store();
    let r = Report::load(&st, &["s2".into()]).unwrap();
    let f = r.findings();
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].text,
        "TPC-B at 1 client: hdd 74 TPS, nvme 951 — 12.9× (beyond noise); at 100 clients: hdd 80 TPS, nvme 1480 — 18.5× (beyond noise)."
    );
    assert_eq!(f[0].warnings, ["fsync=off (hdd)", "cpu.steal 12 % (nvme · clients=10)"]);
    let html = r.to_html().unwrap();
    assert!(html.contains("<h2>Setup runs</h2>") && html.contains("<td>2.50 s</td>"), "{html}");
    assert!(html.contains("<th>#6 target=nvme/tpcb#r1:tpcb-init</th>"), "setup runs name their cell: {html}");
    let found = html.find("What was found").unwrap();
    assert!(found < html.find("<svg").unwrap(), "the findings come before the charts");
    assert!(html.find("<svg").unwrap() < html.find("<table").unwrap(), "charts before tables");
    assert!(html.contains("⚠ fsync=off (hdd)"));
    // The flagged cells carry the mark beside the figure.
    assert!(html.contains("<td>74 (70–78, n=2) ⚠</td>"), "{html}");
    assert!(!html.contains("per_s"), "units read as people write them");
    // Only what differs between the runs compared: the medium and the port
    // (and the warning), not the host every run shares.
    let env = &html[html.find("<section class=\"env\">").unwrap()..];
    let differ = &env[..env.find("<details>").unwrap()];
    assert!(differ.contains("<th>medium</th><td>hdd</td><td>nvme</td>"), "{differ}");
    assert!(differ.contains("<th>port</th><td>5433</td><td>5434</td>"), "{differ}");
    assert!(!differ.contains("<th>host</th>"), "{differ}");
}

#[test]
fn figures_say_which_source_counted_them() {
    let (_d, st) = store();
    let r = Report::load(&st, &["s4".into()]).unwrap();
    let s = &r.sections()[0];
    let titles: Vec<String> = s.figures().iter().map(|f| f.title()).collect();
    assert_eq!(
        titles,
        ["NOPM (districts' order ids)", "NOPM (client count)", "TPM (server counters)", "TPM (client count)"]
    );
    let series: Vec<String> = s.workload_series().into_iter().map(|x| x.1).collect();
    assert_eq!(series, ["TPM (client count)", "NOPM (client count)"]);
    assert_eq!(r.findings()[0].text, "TPC-C: 450 NOPM at 1 user, 855 at 2 users (1.90×).");
    let html = r.to_html().unwrap();
    assert!(html.contains("plan s4 · tpcc — TPM (server counters)"));
    // The failed io cell is named at the top and has no empty section.
    assert!(html.contains("id=\"incomplete-note\"") && html.contains("failed"));
    assert!(!html.contains("<h2>plan s4 · io</h2>"), "an empty section");
    assert!(html.contains("TPM (client count)"), "the per-second chart names its source");
}

#[test]
fn the_terminal_summary_names_the_axes_not_the_environment() {
    let (_d, st) = store();
    let r = Report::load(&st, &["s2".into()]).unwrap();
    insta::assert_snapshot!(r.to_summary());
}

#[test]
fn other_sources_are_a_cross_check_sentence_under_the_one_table() {
    let (_d, st) = store();
    let text = Report::load(&st, &["s4".into()]).unwrap().to_summary();
    assert_eq!(text.matches("plan s4 · tpcc — NOPM").count(), 1, "{text}");
    assert_eq!(text.matches("plan s4 · tpcc — TPM").count(), 1, "{text}");
    // Two counts that agree exactly are still two counts.
    assert!(text.contains("\nCross-check, client count: the same NOPM exactly (nopm.client).\n"), "{text}");
    // 990 of 1000 and 1890 of 1900.
    assert!(
        text.contains(
            "\nCross-check, client count: TPM −1.0 % to −0.5 % against server counters (tpm.client).\n"
        ),
        "{text}"
    );
}
