//! `storbench report` and `storbench compare` against a results store built
//! here with the store's own API: a plan of io runs (2 profiles × 2 targets ×
//! 2 repeats, one target on an emulated medium), a tpcc run with 3 user steps
//! and a tpcb run, each with per-second samples (workload, cpu.iowait,
//! dev.loop0.w_await) and histograms. The HTML report is then opened in
//! headless Chromium: screenshot must not be blank, DOM must hold the charts
//! and tables.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;
use storbench_metrics::{LatencyHistogram, StepReport, Unit};
use storbench_results::{now_rfc3339, NewRun, Status, Store};

struct Fixture {
    dir: tempfile::TempDir,
    tpcc: i64,
    tpcb: i64,
    init: i64,
    io_first: i64,
}

impl Fixture {
    fn db(&self) -> PathBuf {
        self.dir.path().join("results.db")
    }
}

fn env(medium: &str, emulated: bool) -> serde_json::Value {
    json!({
        "host": "bench1", "cpu_model": "Test CPU", "cpus": 2, "kernel": "6.1.0-test",
        "target": {"path": "/mnt/t", "fs_type": "xfs", "block_size": 4096, "device": "/dev/loop0"},
        "medium": {"name": medium, "emulation": if emulated { json!(medium) } else { json!(null) }},
    })
}

/// A step's report: the given figures, the latency figures of a histogram
/// around `lat_us`, sysmon figures, and `secs` per-second samples.
fn step(
    figs: &[(&str, f64, Unit)],
    lat_prefix: &str,
    lat_us: u64,
    series: &[(&str, f64)],
    secs: u64,
) -> StepReport {
    let mut r = StepReport::default();
    for (n, v, u) in figs {
        r.figure(*n, *v, *u);
    }
    let mut h = LatencyHistogram::new();
    for i in 0..1000u64 {
        h.record_ns((lat_us + i % 50) * 1000);
    }
    r.latency(lat_prefix, &h);
    r.figure("cpu.iowait", 12.5, Unit::Percent);
    r.figure("dev.loop0.w_await", 3.25, Unit::Ms);
    r.figure("dev.loop0.r_await", 1.5, Unit::Ms);
    for t in 0..secs {
        for (n, v) in series {
            r.sample(t * 1000, *n, v + t as f64);
        }
        r.sample(t * 1000, "cpu.iowait", 10.0 + t as f64);
        r.sample(t * 1000, "dev.loop0.w_await", 3.0 + (t % 3) as f64);
        r.sample(t * 1000, "dev.loop0.r_await", 1.0 + (t % 2) as f64);
    }
    r
}

fn add_run(
    store: &mut Store,
    kind: &str,
    label: &str,
    plan: Option<(&str, &str)>,
    env: serde_json::Value,
    steps: Vec<(String, serde_json::Value, StepReport)>,
) -> i64 {
    let axes = label.split_once('=').map(|(k, v)| json!({ k: v })).unwrap_or(json!({}));
    let run = store
        .begin_run(&NewRun {
            kind: kind.into(),
            label: label.into(),
            config: json!({ "axes": axes }),
            env,
            plan: plan.map(|p| p.0.to_string()),
            cell: plan.map(|p| p.1.to_string()),
        })
        .unwrap();
    for (i, (l, p, r)) in steps.iter().enumerate() {
        store.write_step(run.id, i as i64, l, p, &now_rfc3339(), &now_rfc3339(), r).unwrap();
    }
    store.finish_run(run.id, Status::Complete).unwrap();
    run.id
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("results.db")).unwrap();
    // (target, repeat) → (oltp-read-8k IOPS, wal-append MB/s)
    let io = [
        ("hdd", 1, 100.0, 50.0),
        ("hdd", 2, 120.0, 60.0),
        ("ssd", 1, 1000.0, 55.0),
        ("ssd", 2, 1100.0, 65.0),
    ];
    let mut io_first = 0;
    for (target, rep, iops, mbps) in io {
        let steps = vec![
            (
                "oltp-read-8k".to_string(),
                json!({"profile": "oltp-read-8k", "block_size": 8192}),
                step(
                    &[("io.iops", iops, Unit::PerS), ("io.mbps", iops * 8192.0 / 1e6, Unit::MBps)],
                    "io.lat",
                    if target == "hdd" { 8000 } else { 90 },
                    &[("io.iops", iops)],
                    5,
                ),
            ),
            (
                "wal-append".to_string(),
                json!({"profile": "wal-append"}),
                step(
                    &[("io.iops", mbps * 100.0, Unit::PerS), ("io.mbps", mbps, Unit::MBps)],
                    "io.lat",
                    200,
                    &[("io.iops", mbps * 100.0)],
                    5,
                ),
            ),
        ];
        let label = format!("target={target}");
        let cell = format!("{label}#r{rep}");
        let id = add_run(&mut store, "io", &label, Some(("s5", &cell)), env(target, target == "hdd"), steps);
        if io_first == 0 {
            io_first = id;
        }
    }
    let tpcc_steps = [(1, 1000.0), (2, 1900.0), (4, 3500.0)]
        .iter()
        .map(|(u, tpm)| {
            (
                format!("users={u}"),
                json!({ "users": u }),
                step(
                    &[
                        ("tpm", *tpm, Unit::PerMin),
                        ("nopm", tpm * 0.45, Unit::PerMin),
                        ("tps", tpm / 60.0, Unit::PerS),
                    ],
                    "lat",
                    2000,
                    &[("tpm", *tpm), ("nopm", tpm * 0.45)],
                    6,
                ),
            )
        })
        .collect();
    let tpcc = add_run(&mut store, "tpcc", "sqlite tpcc", None, env("nvme", false), tpcc_steps);
    let tpcb_steps = [(1, 300.0), (10, 1200.0)]
        .iter()
        .map(|(c, tps)| {
            (
                format!("clients={c}"),
                json!({ "clients": c }),
                step(&[("tps", *tps, Unit::PerS)], "lat", 800, &[("tps", *tps)], 4),
            )
        })
        .collect();
    let tpcb = add_run(&mut store, "tpcb", "sqlite tpcb", None, env("nvme", false), tpcb_steps);
    // Stopped by Ctrl-C after its two steps: reported, and flagged.
    store.finish_run(tpcb, Status::Interrupted).unwrap();
    // A setup run: timings and the system monitor's series, no workload series.
    let mut load = StepReport::default();
    load.figure("load.seconds", 2.5, Unit::S);
    load.figure("rows", 200022.0, Unit::Count);
    load.sample(0, "cpu.iowait", 3.0);
    let init_steps = vec![("init".to_string(), json!({}), load)];
    let init = add_run(&mut store, "tpcb-init", "tpcb init scale 2", None, env("nvme", false), init_steps);
    Fixture { dir, tpcc, tpcb, init, io_first }
}

fn storbench(f: &Fixture, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_storbench"))
        .arg("--results")
        .arg(f.db())
        .args(args)
        .current_dir(f.dir.path())
        .output()
        .unwrap()
}

fn ok_stdout(o: &Output) -> String {
    assert!(o.status.success(), "failed: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn text_report_of_a_plan_shows_medians_spread_and_the_emulation_note() {
    let f = fixture();
    let out = ok_stdout(&storbench(&f, &["report", "s5"]));
    assert!(out.contains("plan s5 · io — IOPS"), "{out}");
    // oltp-read-8k: hdd repeats 100 and 120, ssd 1000 and 1100.
    assert!(out.contains("110 (100–120, n=2)"), "{out}");
    assert!(out.contains("1050 (1000–1100, n=2)"), "{out}");
    assert!(out.contains("target=hdd") && out.contains("target=ssd"), "{out}");
    assert!(out.contains("Emulated media (hdd) are caps, not latency models"), "{out}");
    assert!(out.contains("w_await (ms)") && out.contains("┆ loop0 "), "{out}");
    assert!(out.contains("Environment shared by all 4 runs"), "{out}");
    // No argument: the latest plan, which is s5 (the tpcc/tpcb runs have none).
    let default = ok_stdout(&storbench(&f, &["report"]));
    assert!(default.contains("110 (100–120, n=2)"), "{default}");
}

#[test]
fn markdown_and_csv_give_the_same_figures() {
    let f = fixture();
    let md = ok_stdout(&storbench(&f, &["report", &f.tpcc.to_string(), "--md"]));
    assert!(md.contains("### runs · tpcc — NOPM"), "{md}");
    assert!(md.contains("| users=4 | 1575 |"), "{md}");
    assert!(md.contains("| users=2 | 1900 |"), "{md}");
    assert!(md.contains("single runs: no spread known"), "{md}");
    // Steps in load order.
    let (i1, i2, i4) =
        (md.find("| users=1 |").unwrap(), md.find("| users=2 |").unwrap(), md.find("| users=4 |").unwrap());
    assert!(i1 < i2 && i2 < i4);
    let csv = ok_stdout(&storbench(&f, &["report", "s5", "--csv"]));
    assert!(csv.starts_with("plan,kind,group,step,metric,unit,n,median,min,max\n"));
    assert!(csv.contains("s5,io,target=hdd,oltp-read-8k,io.iops,per_s,2,110,100,120\n"), "{csv}");
    assert!(csv.contains("s5,io,target=ssd,wal-append,io.mbps,MB/s,2,60,55,65\n"), "{csv}");
}

#[test]
fn mixed_kinds_get_separate_tables() {
    let f = fixture();
    let out = ok_stdout(&storbench(&f, &["report", &f.tpcc.to_string(), &f.tpcb.to_string()]));
    // Each kind has its own tables, and the report opens with a sentence each.
    assert!(out.contains("TPC-C: 450 NOPM at 1 user, 1575 at 4 users (3.50×)."), "{out}");
    assert!(out.contains("TPC-B: 300 TPS at 1 client, 1200 at 10 clients (4.00×)."), "{out}");
    assert!(out.find("TPC-C: 450").unwrap() < out.find("runs · tpcc — NOPM").unwrap(), "{out}");
    assert!(out.contains("runs · tpcc — TPM") && out.contains("runs · tpcb — TPS"), "{out}");
    assert!(out.contains("clients=10"), "{out}");
    assert!(out.contains(&format!("Warning: Runs that did not complete (#{} interrupted)", f.tpcb)), "{out}");
}

#[test]
fn compare_groups_gives_ratio_and_noise() {
    let f = fixture();
    let out = ok_stdout(&storbench(&f, &["compare", "s5:target=hdd", "s5:target=ssd"]));
    // IOPS 110 → 1050: ratio 9.545, ranges disjoint.
    let line = out
        .lines()
        .find(|l| l.contains("oltp-read-8k") && l.contains(" io.iops "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("9.545") && line.contains("beyond noise"), "{line}");
    // MB/s 55 (50–60) → 60 (55–65): overlapping ranges.
    let line = out
        .lines()
        .find(|l| l.contains("wal-append") && l.contains(" io.mbps "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("1.091") && line.contains("within noise"), "{line}");
    assert!(out.contains("Emulated media (hdd) are caps"), "{out}");
    let json: serde_json::Value = serde_json::from_str(&ok_stdout(&storbench(
        &f,
        &["compare", "s5:target=hdd", "s5:target=ssd", "--json"],
    )))
    .unwrap();
    assert_eq!(json["a"]["runs"].as_array().unwrap().len(), 2);
    assert!(json["rows"].as_array().unwrap().iter().any(|r| r["verdict"] == "within_noise"));
    // Two single runs: no spread known.
    let single = ok_stdout(&storbench(
        &f,
        &["compare", &f.io_first.to_string(), &(f.io_first + 2).to_string(), "--md"],
    ));
    assert!(single.contains("no spread known"), "{single}");
    assert!(
        single.contains("| oltp-read-8k | io.iops | IOPS | 100 | 1000 | 10.000 | no spread known |"),
        "{single}"
    );
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let f = fixture();
    let html = f.dir.path().join("r.html");
    let o = storbench(&f, &["report", "999", "--html", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("'999'") && err.lines().count() == 1, "{err}");
    let o = storbench(&f, &["report", "s5", "nope-plan", "--html", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope-plan"));
    assert!(!html.exists());
    let names: Vec<_> = std::fs::read_dir(f.dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(names.iter().all(|n| n.to_string_lossy().starts_with("results.db")), "{names:?}");
    // Kinds that share no figures.
    let o = storbench(&f, &["compare", &f.tpcc.to_string(), &f.tpcb.to_string()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("different kinds"));
    // A missing store is not created.
    let o = Command::new(env!("CARGO_BIN_EXE_storbench"))
        .args(["--results", f.dir.path().join("none.db").to_str().unwrap(), "report"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!f.dir.path().join("none.db").exists());
}

fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser"] {
        if let Ok(o) = Command::new("which").arg(name).output() {
            if o.status.success() {
                return PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            }
        }
    }
    panic!("headless Chromium is needed for this test: apt-get install chromium (CI installs it)");
}

fn headless(profile: &Path, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("120")
        .arg(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .unwrap()
}

/// A screenshot at `w`×`h` CSS pixels: its rows of RGB pixels.
fn screenshot(profile: &Path, url: &str, png: &Path, w: u32, h: u32) -> Vec<Vec<[u8; 3]>> {
    let o = headless(
        profile,
        &[&format!("--screenshot={}", png.display()), &format!("--window-size={w},{h}"), url],
    );
    assert!(png.exists(), "no screenshot: {}", String::from_utf8_lossy(&o.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (w, h));
    let bpp = info.line_size / info.width as usize;
    buf[..info.buffer_size()]
        .chunks(info.line_size)
        .map(|row| row.chunks(bpp).map(|p| [p[0], p[1], p[2]]).collect())
        .collect()
}

/// The findings box's background (`.findings` in the report's CSS).
const FINDINGS_BG: [u8; 3] = [0xf3, 0xf7, 0xff];

#[test]
fn html_report_renders_in_chromium_with_charts_and_tables() {
    let f = fixture();
    let html = f.dir.path().join("report.html");
    let (tpcc, tpcb, init) = (f.tpcc.to_string(), f.tpcb.to_string(), f.init.to_string());
    let out =
        ok_stdout(&storbench(&f, &["report", "s5", &tpcc, &tpcb, &init, "--html", html.to_str().unwrap()]));
    assert!(out.contains("wrote") && out.contains("7 runs"), "{out}");
    let text = std::fs::read_to_string(&html).unwrap();
    // Self-contained: no scripts, stylesheets, images or fonts from anywhere
    // (SVG's xmlns is a name, not a fetch).
    for fetch in ["<script", "<link", "<img", "src=", "url(", "@import"] {
        assert!(!text.contains(fetch), "the report must not load anything: found {fetch}");
    }
    assert!(text.contains("id=\"emulation-note\""));
    let url = format!("file://{}", html.display());
    let profile = f.dir.path().join("chromium-profile");

    let dom = headless(&profile, &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    // io: IOPS, MB/s and p99 bars, percentiles, 2 time series (one per target);
    // tpcc: NOPM and TPM lines, percentiles, 1 time series; tpcb: TPS,
    // percentiles, 1; the setup run: none (its table only).
    assert_eq!(dom.matches("<figure class=\"chart\">").count(), 13, "charts in the DOM");
    // Each drawn for a desktop and for a phone.
    assert_eq!(dom.matches("<svg").count(), 26, "drawings in the DOM");
    assert!(dom.matches("<table").count() >= 12, "tables missing from the DOM");
    for want in [
        "What was found",
        "I/O per profile — oltp-read-8k: hdd 110 IOPS, ssd 1050 — 9.55× (beyond noise)",
        "TPC-B: 300 TPS at 1 client, 1200 at 10 clients (4.00×).",
        "plan s5 · io — IOPS",
        "runs · tpcc — NOPM",
        "runs · tpcb — TPS",
        "Setup runs",
        "Environment",
        "110 (100–120, n=2)",
    ] {
        assert!(dom.contains(want), "DOM lacks {want}");
    }
    // Human units; the per-second charts say which source they draw.
    assert!(!dom.contains("per_s") && !dom.contains("[us]"), "raw units in the report");
    assert!(dom.contains("TPS (client count)") && dom.contains("IOPS (completions)"));
    assert!(dom.contains("<td>loop0</td>") && dom.contains("w_await (ms)") && dom.contains("cpu.iowait"));
    // Findings, then charts, then tables, then the environment.
    let at = |s: &str| dom.find(s).unwrap_or_else(|| panic!("DOM lacks {s}"));
    assert!(
        at("What was found") < at("<svg") && at("<svg") < at("<table") && at("<table") < at("Environment")
    );

    // Desktop: the findings box is on the first screen.
    let keep = std::env::var_os("STORBENCH_TEST_SHOT_DIR");
    for (name, w, h) in [("desktop", 1280, 2000), ("phone", 390, 1600)] {
        let png = f.dir.path().join(format!("{name}.png"));
        let rows = screenshot(&profile, &url, &png, w, h);
        // To look at what the test saw: STORBENCH_TEST_SHOT_DIR=/some/dir.
        if let Some(keep) = &keep {
            std::fs::copy(&png, Path::new(keep).join(format!("report-test-{name}.png"))).unwrap();
            std::fs::copy(&html, Path::new(keep).join("report-test.html")).unwrap();
        }
        let pixels: Vec<[u8; 3]> = rows.iter().flatten().copied().collect();
        let colours: HashSet<[u8; 3]> = pixels.iter().copied().collect();
        let non_white = pixels.iter().filter(|p| p.iter().any(|c| *c < 240)).count();
        assert!(colours.len() > 50, "{name}: only {} colours: blank screenshot?", colours.len());
        assert!(
            non_white * 100 > pixels.len(),
            "{name}: {non_white} of {} pixels are not white",
            pixels.len()
        );
        let first_screen = &rows[..700.min(rows.len())];
        let boxed: Vec<(usize, usize)> = first_screen
            .iter()
            .enumerate()
            .flat_map(|(y, r)| r.iter().enumerate().filter(|p| *p.1 == FINDINGS_BG).map(move |(x, _)| (x, y)))
            .collect();
        assert!(boxed.len() > 5000, "{name}: the findings are not on the first screen");
        // The page fits the width: the box ends inside the window, so
        // nothing (a wide table or chart) stretched the page past it.
        let right = boxed.iter().map(|p| p.0).max().unwrap();
        assert!(
            right < w as usize - 4,
            "{name}: the findings box runs to x={right} of {w}: the page is too wide"
        );
    }
}

/// The page `report` laid out at `width` CSS px, as a phone of that width
/// shows it, measured by Chromium: an iframe of that width (its own
/// viewport, so the report's media queries see the phone's width) whose
/// drawn charts a script measures into the DOM that `--dump-dom` prints.
/// (A headless window is at least 500 px wide, so the window cannot be the
/// phone.) Returns the page's and the window's width and, per chart shown,
/// its drawn width, its shown width and its smallest text in shown px.
fn laid_out(profile: &Path, html: &Path, width: u32) -> (f64, f64, Vec<(f64, f64, f64)>) {
    let page = html.with_file_name(format!("phone-{width}.html"));
    let name = html.file_name().unwrap().to_str().unwrap();
    std::fs::write(
        &page,
        format!(
            r#"<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="{name}" style="border:0;width:{width}px;height:30000px"></iframe>
<script>
document.getElementById('f').addEventListener('load', () => {{
  const f = document.getElementById('f'), doc = f.contentDocument, charts = [];
  for (const svg of doc.querySelectorAll('figure.chart svg')) {{
    const shown = svg.getBoundingClientRect().width;
    if (shown === 0) continue;
    const drawn = parseFloat(svg.getAttribute('width'));
    let text = Infinity;
    for (const t of svg.querySelectorAll('text'))
      if (t.textContent.trim()) text = Math.min(text, parseFloat(t.getAttribute('font-size')) * shown / drawn);
    charts.push([drawn, shown, text]);
  }}
  const pre = document.createElement('pre');
  pre.id = 'measured';
  pre.textContent = JSON.stringify([doc.documentElement.scrollWidth, f.contentWindow.innerWidth, charts]);
  document.body.appendChild(pre);
}});
</script></body></html>"#
        ),
    )
    .unwrap();
    let o = headless(
        profile,
        &["--allow-file-access-from-files", "--dump-dom", &format!("file://{}", page.display())],
    );
    let dom = String::from_utf8_lossy(&o.stdout);
    let json =
        dom.split("<pre id=\"measured\">").nth(1).and_then(|t| t.split("</pre>").next()).unwrap_or_else(
            || panic!("nothing measured at {width} px: {}", String::from_utf8_lossy(&o.stderr)),
        );
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let charts = v[2]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c[0].as_f64().unwrap(), c[1].as_f64().unwrap(), c[2].as_f64().unwrap()));
    (v[0].as_f64().unwrap(), v[1].as_f64().unwrap(), charts.collect())
}

/// Issue 30: on a phone the charts read. Each is shown at the width the
/// phone's drawing has, never scaled down (its text would shrink with it:
/// an 860 px chart on a 375 px phone took 10 px labels to 4 px), with no
/// text under 11 px; a phone narrower than the drawing scrolls the chart
/// sideways, not the page. A desktop shows the desktop's drawing, whole.
#[test]
fn html_charts_read_at_a_phones_width() {
    let f = fixture();
    let html = f.dir.path().join("report.html");
    let (tpcc, tpcb, init) = (f.tpcc.to_string(), f.tpcb.to_string(), f.init.to_string());
    ok_stdout(&storbench(&f, &["report", "s5", &tpcc, &tpcb, &init, "--html", html.to_str().unwrap()]));
    let profile = f.dir.path().join("chromium-profile");
    for width in [320, 360, 375, 412, 1280] {
        let (page, window, charts) = laid_out(&profile, &html, width);
        assert_eq!(window, f64::from(width), "the iframe is the phone");
        assert_eq!(charts.len(), 13, "{width} px: one drawing of each chart shown: {charts:?}");
        assert!(page <= window, "{width} px: the page is {page} px wide: something stretched it");
        for (drawn, shown, text) in charts {
            let phone = width < 600;
            assert_eq!(drawn <= 360.0, phone, "{width} px: a {drawn} px drawing shown");
            assert_eq!(shown, drawn, "{width} px: a {drawn} px chart shown at {shown} px");
            assert!(text >= if phone { 11.0 } else { 10.0 }, "{width} px: text at {text:.1} px");
        }
    }
}

/// A plan's TPC-B runs (target fast twice, slow once; 1 and 10 clients)
/// and a published file for them.
fn against_fixture() -> (Fixture, [[f64; 2]; 3]) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("results.db")).unwrap();
    // (target, repeat, tps at 1 client, at 10): repeats are cells of their
    // own (`#r1`, `#r2`), as a plan names them.
    let runs = [("fast", 1, [150.0, 1600.0]), ("fast", 2, [170.0, 1800.0]), ("slow", 1, [40.0, 140.0])];
    for (target, rep, tps) in runs {
        let steps = [1, 10]
            .iter()
            .zip(tps)
            .map(|(c, v)| {
                let mut r = StepReport::default();
                r.figure("tps.client", v, Unit::PerS);
                // A second figure at the same step: a check names which it reads.
                r.figure("lat.mean", 1000.0 / v, Unit::Ms);
                (format!("clients={c}"), json!({ "clients": c }), r)
            })
            .collect();
        let cell = format!("target={target}/tpcb#r{rep}");
        add_run(
            &mut store,
            "tpcb",
            &format!("target={target}"),
            Some(("s2", &cell)),
            env(target, true),
            steps,
        );
    }
    // A target that has run its first step only (a quick form's).
    let mut r = StepReport::default();
    r.figure("tps.client", 60.0, Unit::PerS);
    let steps = vec![("clients=1".to_string(), json!({ "clients": 1 }), r)];
    add_run(&mut store, "tpcb", "target=mid", Some(("s2", "target=mid/tpcb")), env("mid", true), steps);
    let f = Fixture { dir, tpcc: 0, tpcb: 0, init: 0, io_first: 0 };
    (f, [[150.0, 1600.0], [170.0, 1800.0], [40.0, 140.0]])
}

const PUBLISHED: &str = r#"
plan = "s2"
source = "the paper, table 1"
figure = "tps.client"
unit = "per_s"

[[cell]]
axes = { target = "fast" }
step = "clients=1"
value = 125
[[cell]]
axes = { target = "fast" }
step = "clients=10"
value = 1758
[[cell]]
axes = { target = "slow" }
step = "clients=1"
value = 45
[[cell]]
axes = { target = "slow" }
step = "clients=10"
value = 135

[[check]]
kind = "gain"
axes = { target = "fast" }
from = "clients=1"
to = "clients=10"
[[check]]
kind = "gain"
axes = { target = "slow" }
from = "clients=1"
to = "clients=10"
[[check]]
kind = "order"
axis = "target"
step = "clients=10"
[[check]]
kind = "value"
axes = { target = "slow" }
step = "clients=1"
within = 1.05
"#;

/// Table rows of Markdown output: cells split on `|`, trimmed.
fn md_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| l.starts_with('|') && !l.contains("---"))
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

#[test]
fn report_against_reads_each_published_cell_and_check_against_the_runs() {
    let (f, tps) = against_fixture();
    std::fs::write(f.dir.path().join("s2.published.toml"), PUBLISHED).unwrap();
    let out = storbench(&f, &["report", "--against", "s2.published.toml", "--md"]);
    let text = ok_stdout(&out);
    let rows = md_rows(&text);
    // Here is the median over the repeats; the ratio here ÷ paper.
    let fast1 = (tps[0][0] + tps[1][0]) / 2.0;
    let fast10 = (tps[0][1] + tps[1][1]) / 2.0;
    let (slow1, slow10) = (tps[2][0], tps[2][1]);
    let cell = |label: &str| rows.iter().find(|r| r[0] == label).unwrap_or_else(|| panic!("{label}: {text}"));
    for (label, paper, here, n) in [
        ("target=fast clients=1", 125.0, fast1, "2"),
        ("target=fast clients=10", 1758.0, fast10, "2"),
        ("target=slow clients=1", 45.0, slow1, "1"),
        ("target=slow clients=10", 135.0, slow10, "1"),
    ] {
        let r = cell(label);
        assert_eq!(r[3].parse::<f64>().unwrap(), here, "{label}");
        assert_eq!(r[4], format!("{:.2}", here / paper), "{label}");
        assert_eq!(r[5], n, "{label}");
    }
    // The gains: fast ×10.6 here against ×14.1 in the paper (within 1.5:
    // pass); slow ×3.5 against ×3.0 (pass); the order at 10 clients is the
    // paper's; slow at 1 client is 40 against 45, outside ×1.05: FAIL.
    let verdict = |name: &str| cell(name)[3].clone();
    assert!(within(fast10 / fast1, 1758.0 / 125.0, 1.5));
    assert_eq!(verdict("gain target=fast clients=1 → clients=10 (within ×1.5)"), "pass");
    assert_eq!(verdict("gain target=slow clients=1 → clients=10 (within ×1.5)"), "pass");
    assert_eq!(verdict("order of target at clients=10"), "pass");
    assert_eq!(cell("order of target at clients=10")[2], "fast > slow");
    assert_eq!(verdict("value target=slow clients=1 (within ×1.05)"), "FAIL");
    assert!(text.contains("3 of 4 checks pass, 1 fail, 0 without data"), "{text}");

    // A cell the plan has not run in full (a step one target lacks) reads
    // "not run", and the checks that need it "no data".
    let mid = "[[cell]]\naxes = { target = \"mid\" }\nstep = \"clients=1\"\nvalue = 50\n\
               [[cell]]\naxes = { target = \"mid\" }\nstep = \"clients=10\"\nvalue = 150\n\
               [[check]]\nkind = \"gain\"\naxes = { target = \"mid\" }\nfrom = \"clients=1\"\nto = \"clients=10\"\n";
    let partial = PUBLISHED.replacen("[[check]]", &format!("{mid}[[check]]"), 1);
    std::fs::write(f.dir.path().join("s2.published.toml"), partial).unwrap();
    let text = ok_stdout(&storbench(&f, &["report", "--against", "s2.published.toml", "--md"]));
    let rows = md_rows(&text);
    let cell = |label: &str| rows.iter().find(|r| r[0] == label).unwrap_or_else(|| panic!("{label}: {text}"));
    assert_eq!(cell("target=mid clients=1")[3], "60");
    assert_eq!(cell("target=mid clients=10")[3], "not run");
    assert_eq!(cell("gain target=mid clients=1 → clients=10 (within ×1.5)")[3], "no data");
    assert_eq!(cell("order of target at clients=10")[3], "no data");
    assert!(text.contains("2 of 5 checks pass, 1 fail, 2 without data"), "{text}");
    // A step of a level the runs have, none of them ran (a quick form's
    // clients=100): not run, not refused.
    let cell100 = "[[cell]]\naxes = { target = \"fast\" }\nstep = \"clients=100\"\nvalue = 2888\n[[check]]";
    let more = PUBLISHED.replacen("[[check]]", cell100, 1);
    std::fs::write(f.dir.path().join("s2.published.toml"), more).unwrap();
    let text = ok_stdout(&storbench(&f, &["report", "--against", "s2.published.toml", "--md"]));
    let rows = md_rows(&text);
    assert!(rows.iter().any(|r| r[0] == "target=fast clients=100" && r[3] == "not run"), "{text}");

    // Cells of a second figure at the same steps: a check that names the
    // figure reads its cells, not the first cell at the step (here the
    // latency orders the targets the other way round from TPS).
    let lat = "[[cell]]\naxes = { target = \"fast\" }\nstep = \"clients=10\"\nfigure = \"lat.mean\"\nunit = \"ms\"\nvalue = 5\n\
               [[cell]]\naxes = { target = \"slow\" }\nstep = \"clients=10\"\nfigure = \"lat.mean\"\nunit = \"ms\"\nvalue = 70\n\
               [[check]]\nkind = \"order\"\naxis = \"target\"\nstep = \"clients=10\"\nfigure = \"lat.mean\"\n\
               [[check]]\nkind = \"ratio\"\nof = { target = \"slow\" }\nover = { target = \"fast\" }\nstep = \"clients=10\"\nfigure = \"lat.mean\"\nwithin = 1.2\n[[check]]";
    let two = PUBLISHED.replacen("[[check]]", lat, 1);
    std::fs::write(f.dir.path().join("s2.published.toml"), two).unwrap();
    let text = ok_stdout(&storbench(&f, &["report", "--against", "s2.published.toml", "--md"]));
    let rows = md_rows(&text);
    let cell = |label: &str| rows.iter().find(|r| r[0] == label).unwrap_or_else(|| panic!("{label}: {text}"));
    let order = cell("lat.mean: order of target at clients=10");
    assert_eq!(
        (order[1].as_str(), order[2].as_str(), order[3].as_str()),
        ("slow > fast", "slow > fast", "pass")
    );
    // Paper ×14 (70 ÷ 5); here 1000/140 ÷ 1000/1700 = ×12.1: within ×1.2.
    let ratio = cell("lat.mean: target=slow ÷ target=fast at clients=10 (within ×1.2)");
    assert_eq!((ratio[1].as_str(), ratio[3].as_str()), ("×14", "pass"), "{text}");
    assert_eq!(cell("order of target at clients=10")[1], "fast > slow", "the TPS order is unchanged");
}

/// A plan's run that was interrupted (S1's TPC-H half stopped in a query)
/// never recorded its later steps nor their figures: a published cell of
/// them reads "not run", where a complete plan would call it a typo.
#[test]
fn report_against_reads_the_steps_an_interrupted_run_never_reached_as_not_run() {
    let (f, _) = against_fixture();
    let mut store = Store::open(f.dir.path().join("results.db")).unwrap();
    let run = store
        .begin_run(&NewRun {
            kind: "tpch".into(),
            label: "target=slow".into(),
            config: json!({ "axes": { "target": "slow" } }),
            env: env("slow", true),
            plan: Some("s2".into()),
            cell: Some("target=slow/tpch".into()),
        })
        .unwrap();
    let mut r = StepReport::default();
    r.figure("tpch.q1.seconds", 213.0, Unit::S);
    store.write_step(run.id, 0, "Q1", &json!({}), &now_rfc3339(), &now_rfc3339(), &r).unwrap();
    store.finish_run(run.id, Status::Interrupted).unwrap();
    drop(store);
    let summary = "[[cell]]\naxes = { target = \"slow\" }\nstep = \"summary\"\nfigure = \"tpch.power\"\nunit = \"count\"\nvalue = 400\n[[check]]";
    std::fs::write(f.dir.path().join("p.toml"), PUBLISHED.replacen("[[check]]", summary, 1)).unwrap();
    let text = ok_stdout(&storbench(&f, &["report", "--against", "p.toml", "--md"]));
    let rows = md_rows(&text);
    assert!(rows.iter().any(|r| r[0] == "target=slow summary" && r[3] == "not run"), "{text}");
}

fn within(a: f64, b: f64, f: f64) -> bool {
    (a / b).max(b / a) <= f
}

#[test]
fn report_against_refuses_an_unknown_axis_value_step_figure_or_unit_naming_it() {
    let (f, _) = against_fixture();
    for (from, to, says) in [
        (
            "axes = { target = \"fast\" }\nstep = \"clients=1\"",
            "axes = { medium = \"fast\" }\nstep = \"clients=1\"",
            "cell 1: 'medium' is not an axis of the plan's runs (axes: target)",
        ),
        (
            "axes = { target = \"fast\" }\nstep = \"clients=1\"",
            "axes = { target = \"nvme\" }\nstep = \"clients=1\"",
            "cell 1: target = 'nvme' is not a value the plan ran (target: fast, mid, slow)",
        ),
        (
            "axes = { target = \"fast\" }\nstep = \"clients=1\"",
            "axes = { target = \"fast\" }\nstep = \"users=5\"",
            "cell 1: no step 'users=5' in the plan's runs (steps: clients=1, clients=10)",
        ),
        (
            "unit = \"per_s\"",
            "unit = \"per_min\"",
            "cell 1: unit 'per_min' of tps.client: the runs record it in per_s",
        ),
        ("unit = \"per_s\"", "unit = \"tps\"", "cell 1: unit 'tps' is not a unit"),
        (
            "figure = \"tps.client\"",
            "figure = \"tps.clients\"",
            "cell 1: figure 'tps.clients' is not recorded by the plan's runs",
        ),
        ("kind = \"order\"", "kind = \"shape\"", "check 3 (shape): kind 'shape' is not a check"),
        (
            "kind = \"value\"",
            "kind = \"value\"\nfigure = \"lat.mean\"",
            "check 4 (value): no published cell of lat.mean at target=slow clients=1",
        ),
    ] {
        assert!(PUBLISHED.contains(from), "{from}");
        std::fs::write(f.dir.path().join("p.toml"), PUBLISHED.replacen(from, to, 1)).unwrap();
        let out = storbench(&f, &["report", "--against", "p.toml"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {err}");
        assert!(err.contains("p.toml: ") && err.contains(says), "{to}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty(), "nothing printed before the refusal");
    }
}
