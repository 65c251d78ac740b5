//! What a user sees first, on a results store shaped like the quick plan's
//! (I/O profiles, TPC-B at 1 and 4 clients and TPC-C at 1, 2 and 4 users on
//! SQLite, each run with the environment the binary records): every section
//! says what it measured on; each figure is shown once, its other sources
//! as a cross-check sentence (TPC-B's `tps` and `tps.client` are one count
//! under two names); the per-second chart draws each point once; and the
//! latency that tells the story (a mean above p99 from multi-second stalls,
//! a p99.9 that jumps between user steps) is said in words.

use serde_json::json;
use storbench_metrics::{StepReport, Unit};
use storbench_report::Report;
use storbench_results::{now_rfc3339, NewRun, Status, Store};

/// A directory of its own for one test's store, removed when dropped.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn add(
    st: &mut Store,
    kind: &str,
    env: serde_json::Value,
    steps: Vec<(String, serde_json::Value, StepReport)>,
) {
    let r = st
        .begin_run(&NewRun {
            kind: kind.into(),
            label: "target=data".into(),
            config: json!({ "axes": { "target": "data" }, "duration": "3s" }),
            env,
            plan: Some("quick".into()),
            cell: Some(format!("target=data/{kind}#r1")),
        })
        .unwrap();
    for (i, (l, p, s)) in steps.iter().enumerate() {
        st.write_step(r.id, i as i64, l, p, &now_rfc3339(), &now_rfc3339(), s).unwrap();
    }
    st.finish_run(r.id, Status::Complete).unwrap();
}

/// Latency figures in µs: mean, p50, p99, p99.9, max.
fn lat(r: &mut StepReport, p: &str, [mean, p50, p99, p999, max]: [f64; 5]) {
    for (n, v) in
        [("mean", mean), ("p50", p50), ("p90", p50 * 1.5), ("p99", p99), ("p99.9", p999), ("max", max)]
    {
        r.figure(format!("{p}.{n}"), v, Unit::Us);
    }
}

fn host() -> serde_json::Value {
    json!({ "host": "bench1", "cpus": 2, "kernel": "6.1.0-test", "storbench_version": "0.1.0" })
}

fn sqlite_env(file: &str) -> serde_json::Value {
    let mut e = host();
    e["db"] = json!({
        "url": format!("sqlite:./storbench-data/{file}"), "engine": "sqlite", "version": "3.45.1",
        "settings": { "journal_mode": "wal", "synchronous": "full" },
        "data_dir": "/home/u/storbench-data",
        "data_fs": { "fs_type": "ext4", "block_size": 4096, "device": "/dev/vda" },
    });
    e
}

fn store() -> (Dir, Store) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = Dir(std::env::temp_dir().join(format!("storbench-surface-test-{}-{n}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut st = Store::open(dir.0.join("r.db")).unwrap();

    let mut io_env = host();
    io_env["target"] =
        json!({ "path": "/home/u/storbench-data/io.dat", "fs_type": "ext4", "device": "/dev/vda" });
    io_env["direct_io"] = json!(true);
    io_env["engine"] = json!("io_uring");
    let io_steps = [("oltp-read-8k", 9000.0, 120.0), ("wal-append", 2000.0, 480.0)]
        .iter()
        .map(|(name, iops, p99)| {
            let mut r = StepReport::default();
            r.figure("io.iops", *iops, Unit::PerS);
            r.figure("io.mbps", iops * 8192.0 / 1e6, Unit::MBps);
            lat(&mut r, "io.lat", [p99 / 2.0, p99 / 2.5, *p99, p99 * 1.6, p99 * 3.0]);
            for t in 0..3 {
                r.sample(t * 1000, "io.iops", *iops);
            }
            (name.to_string(), json!({ "profile": name }), r)
        })
        .collect();
    add(&mut st, "io", io_env, io_steps);

    // TPC-B: `tps` and `tps.client` are the clients' count (as pgbench),
    // stored, and sampled, under both names; the server's within 0.04 %.
    let tpcb_steps = [(1, 300.0), (4, 700.0)]
        .iter()
        .map(|(c, tps)| {
            let mut r = StepReport::default();
            r.figure("tps", *tps, Unit::PerS);
            r.figure("tps.client", *tps, Unit::PerS);
            r.figure("tps.server", tps * 1.0004, Unit::PerS);
            lat(&mut r, "lat", [3000.0, 2500.0, 6000.0, 8000.0, 12000.0]);
            for t in 0..4 {
                let v = tps + t as f64;
                r.sample(t * 1000, "tps", v);
                r.sample(t * 1000, "tps.client", v);
            }
            (format!("clients={c}"), json!({ "clients": c }), r)
        })
        .collect();
    add(&mut st, "tpcb", sqlite_env("tpcb.db"), tpcb_steps);

    // TPC-C: at 1 user a mean above p99 from multi-second writer stalls;
    // p99.9 jumps from 8 ms at 2 users to 430 ms at 4.
    let tpcc_steps = [
        (1, 1000.0, [569.0, 150.0, 272.0, 7000.0, 4_640_000.0]),
        (2, 1900.0, [400.0, 180.0, 900.0, 8000.0, 20_000.0]),
        (4, 3500.0, [900.0, 300.0, 2500.0, 430_000.0, 600_000.0]),
    ]
    .iter()
    .map(|(u, tpm, l)| {
        let mut r = StepReport::default();
        r.figure("tpm.client", *tpm, Unit::PerMin);
        r.figure("nopm.districts", tpm * 0.45, Unit::PerMin);
        r.figure("nopm.client", tpm * 0.45 * 0.98, Unit::PerMin);
        lat(&mut r, "lat", *l);
        for t in 0..3 {
            r.sample(t * 1000, "tpm.client", *tpm);
            r.sample(t * 1000, "nopm.client", tpm * 0.45);
        }
        (format!("users={u}"), json!({ "users": u }), r)
    })
    .collect();
    add(&mut st, "tpcc", sqlite_env("tpcc.db"), tpcc_steps);
    (dir, st)
}

#[test]
fn the_terminal_summary_shows_each_figure_once_and_what_it_measured_on() {
    let (_d, st) = store();
    let r = Report::load(&st, &["quick".into()]).unwrap();
    let text = r.to_summary();
    assert_eq!(text.matches("quick · tpcb — TPS").count(), 1, "one TPS table: {text}");
    assert_eq!(text.matches("quick · tpcc — NOPM").count(), 1, "one NOPM table: {text}");
    assert!(text.contains("Cross-check, server counters: the same TPS within 0.1 % (tps.server)."), "{text}");
    assert!(!text.contains("(tps.client)"), "a copy of the headline is not a cross-check: {text}");
    assert!(
        text.contains("  measured on SQLite 3.45.1, WAL, synchronous=full\n    data in /home/u/storbench-data on ext4 over /dev/vda (virtio)\n"),
        "{text}"
    );
    assert!(
        text.contains("  measured on ext4 over /dev/vda (virtio), direct I/O, io_uring\n    target "),
        "{text}"
    );
    // It fits a terminal: every line but the sentences within 120 columns.
    let widest =
        text.lines().filter(|l| l.starts_with("  ") || !l.ends_with('.')).map(|l| l.chars().count()).max();
    assert!(widest.unwrap() <= 120, "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn the_markdown_report_says_what_it_measured_on() {
    let (_d, st) = store();
    let md = Report::load(&st, &["quick".into()]).unwrap().to_markdown();
    assert!(md.contains("  - measured on SQLite 3.45.1, WAL, synchronous=full\n"), "{md}");
    assert!(md.contains("  - Latency at 1 user: mean 569 µs above p99 272 µs"), "{md}");
}

#[test]
fn the_latency_that_tells_the_story_is_said_in_words() {
    let (_d, st) = store();
    let r = Report::load(&st, &["quick".into()]).unwrap();
    let found = r.findings();
    let tpcc = found.iter().find(|f| f.text.starts_with("TPC-C:")).unwrap();
    assert_eq!(
        tpcc.latency,
        [
            "Latency at 1 user: mean 569 µs above p99 272 µs, max 4.64 s — a few multi-second stalls.",
            "p99.9 latency jumps from 8 ms at 2 users to 430 ms at 4 users (53.8×; p99 900 µs → 2.50 ms).",
        ]
    );
    // TPC-B's and the I/O profiles' tails are unremarkable: no sentence.
    assert!(
        found.iter().filter(|f| !f.text.starts_with("TPC-C:")).all(|f| f.latency.is_empty()),
        "{found:#?}"
    );
    // Under the sentence in the terminal, and under the latency table.
    let text = r.to_text();
    assert!(text.contains("\n  Latency at 1 user: mean 569 µs above p99 272 µs, max 4.64 s"), "{text}");
    let table = &text[text.find("quick · tpcc — latency percentiles").unwrap()..];
    assert!(table.contains("┘\nLatency at 1 user:"), "{table}");
    let html = r.to_html().unwrap();
    assert!(
        html.contains("<div class=\"lat\">p99.9 latency jumps from 8 ms at 2 users"),
        "the report's first screen"
    );
}

/// The x coordinates of every `<polyline>` in `svg`, one list per line.
fn polylines(svg: &str) -> Vec<Vec<f64>> {
    svg.split("<polyline")
        .skip(1)
        .map(|p| {
            let pts = &p[p.find("points=\"").unwrap() + 8..];
            let pts = &pts[..pts.find('"').unwrap()];
            pts.split_whitespace().map(|xy| xy.split(',').next().unwrap().parse().unwrap()).collect()
        })
        .collect()
}

#[test]
fn a_charts_series_has_each_point_once() {
    let (_d, st) = store();
    let html = Report::load(&st, &["quick".into()]).unwrap().to_html().unwrap();
    let tpcb = &html[html.find("<section class=\"kind-tpcb\">").unwrap()..];
    let tpcb = &tpcb[..tpcb.find("</section>").unwrap()];
    let chart = tpcb
        .split("<figure class=\"chart\">")
        .find(|f| f.contains("per second"))
        .expect("a per-second chart");
    // Drawn for a desktop and for a phone: each names the workload series
    // once in its legend...
    let (wide, narrow) = chart.split_once("<div class=\"narrow\">").unwrap();
    assert_eq!(wide.matches("TPS (client count)").count(), 1, "{chart}");
    assert_eq!(narrow.matches("TPS (client count)").count(), 1, "{chart}");
    // ...and no line runs back across the chart: along every line x only grows.
    let lines = polylines(&html);
    assert!(lines.len() > 10);
    for l in &lines {
        assert!(l.windows(2).all(|w| w[1] >= w[0]), "a line runs back: {l:?}");
    }
    // The TPC-B time line: 8 samples (4 per step), each once.
    for svg in [wide, narrow] {
        let longest = polylines(svg).into_iter().map(|l| l.len()).max().unwrap();
        assert_eq!(longest, 8, "{svg}");
    }
}

#[test]
fn the_reports_first_screen_says_what_each_section_measured_on() {
    let (_d, st) = store();
    let html = Report::load(&st, &["quick".into()]).unwrap().to_html().unwrap();
    let found = &html[html.find("id=\"findings\"").unwrap()..html.find("</section>").unwrap()];
    assert!(
        found.contains("<div class=\"storage\">measured on ext4 over /dev/vda (virtio), direct I/O, io_uring; target /home/u/storbench-data/io.dat</div>"),
        "{found}"
    );
    assert_eq!(found.matches("measured on SQLite 3.45.1, WAL, synchronous=full").count(), 2, "{found}");
    // And at the top of each section, before its first chart.
    let tpcb = &html[html.find("<section class=\"kind-tpcb\">").unwrap()..];
    assert!(tpcb.find("<p class=\"storage\">Measured on SQLite").unwrap() < tpcb.find("<svg").unwrap());
}

#[test]
fn phone_charts_are_drawn_at_a_phones_width_with_text_that_reads() {
    let (_d, st) = store();
    let html = Report::load(&st, &["quick".into()]).unwrap().to_html().unwrap();
    let figures: Vec<&str> = html.split("<figure class=\"chart\">").skip(1).collect();
    assert!(figures.len() >= 8, "{}", figures.len());
    for f in figures {
        let (wide, narrow) = f.split_once("<div class=\"narrow\">").expect("a phone's drawing");
        assert!(wide.contains("<svg width=\"860\"") || wide.contains("<svg width=\"960\""), "{wide}");
        assert!(narrow.contains("<svg width=\"360\""), "{narrow}");
        // Every text of the phone's drawing at 11 px or more (shown at
        // the size it is drawn: report_cli's Chromium test measures it).
        let sizes: Vec<f64> = narrow
            .split("font-size=\"")
            .skip(1)
            .map(|x| x[..x.find('"').unwrap()].parse().unwrap())
            .collect();
        assert!(!sizes.is_empty());
        assert!(sizes.iter().all(|s| *s >= 11.0), "{sizes:?}");
    }
    // CSS shows one drawing: the phone's below 600 px, never scaled down.
    assert!(html.contains(
        "figure.chart .narrow{display:none;overflow-x:auto}figure.chart .narrow svg{max-width:none}"
    ));
    assert!(html.contains(
        "@media (max-width:600px){figure.chart .wide{display:none}figure.chart .narrow{display:block}}"
    ));
}

/// A PostgreSQL TPC-B step under 10 s carries the short-window flag: it
/// concerns the server's count only, so the headline (the clients' count)
/// has no ⚠, the flag reads in words, and the cross-check leaves the step
/// out and says so instead of reporting the short window's difference.
#[test]
fn a_short_server_window_flags_only_the_servers_count_in_words() {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = Dir(std::env::temp_dir().join(format!("storbench-surface-short-{}-{n}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut st = Store::open(dir.0.join("r.db")).unwrap();
    let steps = [(1, 900.0, 600.0, true), (4, 2000.0, 2001.0, false)]
        .iter()
        .map(|(c, client, server, short)| {
            let mut r = StepReport::default();
            r.figure("tps", *client, Unit::PerS);
            r.figure("tps.client", *client, Unit::PerS);
            r.figure("tps.server", *server, Unit::PerS);
            if *short {
                r.figure("flag.server_window", 4.0, Unit::S);
            }
            (format!("clients={c}"), json!({ "clients": c }), r)
        })
        .collect();
    add(&mut st, "tpcb", host(), steps);
    let r = Report::load(&st, &["quick".into()]).unwrap();
    let text = r.to_summary();
    assert!(
        !text.contains("900 ⚠") && !text.contains("900.0 ⚠"),
        "the clients' count is not flagged: {text}"
    );
    assert!(!text.contains("flag.server_window"), "the flag in words: {text}");
    assert!(!text.contains("−33"), "the short window's difference is left out: {text}");
    assert!(
        text.contains("One step is left out: its window was too short for the server's count."),
        "{text}"
    );
}
