//! The replication headline (S3) on a real results store holding an
//! S3-shaped plan: TPC-B at 1, 8 and 32 clients on a primary with one
//! standby, `synchronous_commit` ∈ {off, local, on, remote_apply} at 1 ms
//! RTT and {local, on} at 5 ms, recorded the way `storbench` records them
//! (the level in the server's settings and the instance's replication
//! environment, the link in the first standby's, the standby's lag as
//! `repl.s1.*_lag.p50` figures). The 5 ms local run recorded no lag, so
//! its model takes t_standby_flush as 0 and says so.

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

/// One client level's figures: TPS, mean and p99 latency (µs), and the
/// standby's flush lag (ms; replay 0.3 ms behind it) when given.
struct Level {
    tps: f64,
    mean_us: f64,
    p99_us: f64,
    lag_ms: Option<f64>,
}

const fn lv(tps: f64, mean_us: f64, p99_us: f64, lag_ms: Option<f64>) -> Level {
    Level { tps, mean_us, p99_us, lag_ms }
}

/// One run of the plan: `sync` over a link of `rtt_ms`, at 1, 8 and 32 clients.
fn cell(st: &mut Store, sync: &str, rtt_ms: u64, levels: [Level; 3]) {
    let (rtt, rtt_us) = (format!("{rtt_ms}ms"), rtt_ms * 1000);
    let label = format!("rtt={rtt},swal=fast,sync={sync}");
    let waits = matches!(sync, "remote_write" | "on" | "remote_apply");
    let names = if waits { "FIRST 1 (s1)" } else { "" };
    let env = json!({ "host": "h", "db": {
        "engine": "postgres",
        "settings": { "synchronous_commit": sync, "synchronous_standby_names": names },
        "managed": { "name": format!("rep-{sync}-{rtt}"), "replication": {
            "synchronous_commit": sync, "synchronous_standby_names": names,
            "standbys": [{ "name": "s1", "instance": "x-s1",
                "link": { "rtt_us": rtt_us, "bw_bps": null, "jitter_us": 0 }, "proxy_floor_us": 40 }],
        } },
    } });
    let r = st
        .begin_run(&NewRun {
            kind: "tpcb".into(),
            label: label.clone(),
            config: json!({ "axes": { "rtt": rtt, "swal": "fast", "sync": sync } }),
            env,
            plan: Some("s3".into()),
            cell: Some(format!("{label}/tpcb#r1")),
        })
        .unwrap();
    for (i, (clients, l)) in [1, 8, 32].iter().zip(levels).enumerate() {
        let mut s = StepReport::default();
        s.figure("tps", l.tps, Unit::PerS);
        s.figure("lat.mean", l.mean_us, Unit::Us);
        s.figure("lat.p99", l.p99_us, Unit::Us);
        if let Some(lag) = l.lag_ms {
            s.figure("repl.s1.flush_lag.p50", lag, Unit::Ms);
            s.figure("repl.s1.replay_lag.p50", lag + 0.3, Unit::Ms);
        }
        let label = format!("clients={clients}");
        let params = json!({ "clients": clients });
        st.write_step(r.id, i as i64, &label, &params, &now_rfc3339(), &now_rfc3339(), &s).unwrap();
    }
    st.finish_run(r.id, Status::Complete).unwrap();
}

fn store() -> (Dir, Store) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = Dir(std::env::temp_dir().join(format!("storbench-report-repl-{}-{n}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut st = Store::open(dir.0.join("r.db")).unwrap();
    // Per cell (sync, RTT in ms), the levels at 1, 8 and 32 clients.
    //
    // 1 ms: local's one client takes 1 ms per transaction and its standby
    // flushes 1.2 ms behind it, so t_standby_flush = 0.2 ms and the model
    // for `on` is 1/(1 + 1 + 0.2 ms) = 455 TPS, 0.455× local. `on` at 8
    // clients keeps 0.60× of local: above 1.2 × 0.455 (group commit).
    // remote_apply's own run recorded its standby: replay 1.4 ms behind.
    // 5 ms: no lag recorded; the model takes t_standby_flush = 0.
    let local = |lag: [Option<f64>; 3]| {
        [
            lv(1000.0, 1000.0, 2000.0, lag[0]),
            lv(5000.0, 1600.0, 3000.0, lag[1]),
            lv(8000.0, 4000.0, 9000.0, lag[2]),
        ]
    };
    cell(&mut st, "local", 1, local([Some(1.2), Some(1.5), Some(2.0)]));
    cell(
        &mut st,
        "off",
        1,
        [lv(1500.0, 660.0, 1000.0, None), lv(6000.0, 1300.0, 2400.0, None), lv(8800.0, 3600.0, 8000.0, None)],
    );
    cell(
        &mut st,
        "on",
        1,
        [
            lv(420.0, 2380.0, 4400.0, None),
            lv(3000.0, 2660.0, 6000.0, None),
            lv(7000.0, 4500.0, 11000.0, None),
        ],
    );
    cell(
        &mut st,
        "remote_apply",
        1,
        [
            lv(400.0, 2500.0, 4600.0, Some(1.1)),
            lv(2800.0, 2850.0, 6400.0, None),
            lv(6800.0, 4700.0, 11500.0, None),
        ],
    );
    cell(&mut st, "local", 5, local([None; 3]));
    cell(
        &mut st,
        "on",
        5,
        [
            lv(160.0, 6250.0, 9000.0, None),
            lv(1200.0, 6660.0, 12000.0, None),
            lv(4000.0, 8000.0, 16000.0, None),
        ],
    );
    (dir, st)
}

#[test]
fn sync_levels_are_read_against_local_per_rtt_with_the_one_client_model() {
    let (_d, st) = store();
    let r = Report::load(&st, &["s3".into()]).unwrap();
    let studies = r.replication();
    assert_eq!(studies.len(), 1);
    let s = &studies[0];
    assert_eq!((s.figure.as_str(), s.figure_label.as_str(), s.p99.as_str()), ("tps", "TPS", "lat.p99"));
    assert_eq!(s.blocks.len(), 2);
    let b = &s.blocks[0];
    assert_eq!((b.rest.as_str(), b.rtt_us), ("swal=fast", 1000));
    let levels: Vec<&str> = b.rows.iter().map(|r| r.sync.as_str()).collect();
    assert_eq!(levels, ["local", "off", "on", "remote_apply"]);
    let on = &b.rows[2];
    assert!(on.waits && !b.rows[1].waits);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.abs().max(1.0);
    let ratios: Vec<f64> = on.levels.iter().map(|l| l.ratio.unwrap()).collect();
    assert!(close(ratios[0], 0.42) && close(ratios[1], 0.6) && close(ratios[2], 0.875), "{ratios:?}");
    assert!(close(on.levels[0].p99_ratio.unwrap(), 2.2));
    let m = on.model.as_ref().unwrap();
    assert!(close(m.t_local_us, 1000.0) && close(m.rtt_us, 1000.0), "{m:?}");
    assert!(close(m.t_standby_us, 200.0), "{m:?}");
    // `on` recorded no lag of its own: the local run's.
    assert_eq!(m.t_standby_from.as_deref(), Some("repl.s1.flush_lag.p50 (local run)"));
    assert!(close(m.tps, 1e6 / 2200.0) && close(m.ratio, 1000.0 / 2200.0), "{m:?}");
    assert_eq!(on.one_client_tps, Some(420.0), "the measured point beside the model");
    // 0.60 at 8 clients is above 1.2 × 0.455: group commit shares the wait.
    assert_eq!(on.diverges_at.as_ref().unwrap().step, "clients=8");
    // remote_apply waits for the replay: its lag, not the flush's, and
    // its own run's where it has one.
    let ra = b.rows[3].model.as_ref().unwrap();
    assert!(close(ra.t_standby_us, 400.0), "{ra:?}");
    assert_eq!(ra.t_standby_from.as_deref(), Some("repl.s1.replay_lag.p50 (remote_apply run)"));
    assert!(b.rows[1].model.is_none(), "off waits for nobody: no model");

    // 5 ms: nothing recorded about the standby, so 0 and a note.
    let b5 = &s.blocks[1];
    assert_eq!(b5.rtt_us, 5000);
    let m5 = b5.rows[1].model.as_ref().unwrap();
    assert_eq!((m5.t_standby_us, m5.t_standby_from.clone()), (0.0, None));
    assert!(close(m5.tps, 1e6 / 6000.0));
    assert!(
        s.notes.iter().any(|n| n.contains("t_standby is taken as 0") && n.contains("for on")),
        "{:?}",
        s.notes
    );
}

#[test]
fn the_report_leads_with_the_replication_headline_in_text_and_html() {
    let (_d, st) = store();
    let r = Report::load(&st, &["s3".into()]).unwrap();
    let f: Vec<String> = r.findings().into_iter().map(|f| f.text).collect();
    assert_eq!(
        f,
        [
            "TPC-B over a standby at 1 ms RTT (swal=fast), relative to local at 1 client → 32 clients: \
             off 1.50× → 1.10× TPS, p99 0.50× → 0.89×; \
             on 0.42× (model 0.45×) → 0.88× TPS, p99 2.20× → 1.22×; \
             remote_apply 0.40× (model 0.42×) → 0.85× TPS, p99 2.30× → 1.28×. \
             Model at 1 client, on: 1/(t_local 1 ms + RTT 1 ms + t_standby_flush 200 µs) = 455 TPS, measured 420; \
             group commit lets more clients share the wait, so they rise above the model: \
             on from 8 clients (0.60× against the model's 0.45×), \
             remote_apply from 8 clients (0.56× against the model's 0.42×).",
            "TPC-B over a standby at 5 ms RTT (swal=fast), relative to local at 1 client → 32 clients: \
             on 0.16× (model 0.17×) → 0.50× TPS, p99 4.50× → 1.78×. \
             Model at 1 client, on: 1/(t_local 1 ms + RTT 5 ms + t_standby_flush 0 (not recorded)) = 167 TPS, measured 160; \
             group commit lets more clients share the wait, so they rise above the model: \
             on from 8 clients (0.24× against the model's 0.17×).",
        ]
    );
    let text = r.to_text();
    let lead = text.find("TPC-B over a standby at 1 ms RTT").unwrap();
    let table = text.find("synchronous commit relative to local (TPS, p99 latency)").unwrap();
    assert!(lead < table && table < text.find("plan s3 · tpcb — TPS").unwrap(), "{text}");
    assert!(text.contains("t_standby is taken as 0"), "{text}");
    let summary = r.to_summary();
    assert!(summary.contains("synchronous commit relative to local"), "{summary}");
    let html = r.to_html().unwrap();
    let found = html.find("What was found").unwrap();
    let chart = html.find("one client against the link").unwrap();
    assert!(found < chart, "the headline, then its chart");
    assert!(html.contains("1/(t_local + RTT + t_standby_flush)"), "the model line is drawn and named");
    assert!(chart < html.find("synchronous commit relative to local").unwrap());
}
