//! `storbench pg up --standby`: streaming replication between real
//! PostgreSQL servers, the sync level in effect, the delay proxy in the
//! standby's path, and nothing left running afterwards. Every test has its
//! own state directory and a guard that runs `pg down --all --destroy`,
//! even when it fails.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::{managed_psql as psql, State};

/// What these tests ask of their place beyond the shared one.
trait Repl {
    fn at(&self, p: &str) -> String;
    fn status(&self, name: &str) -> Value;
}

impl Repl for State {
    /// A path inside the place, as an argument.
    fn at(&self, p: &str) -> String {
        self.path(p).to_str().unwrap().to_string()
    }

    fn status(&self, name: &str) -> Value {
        serde_json::from_str(&self.ok(&["--json", "pg", "status", name])).unwrap()
    }
}

/// Processes whose command line mentions `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(needle) {
                found.push(c);
            }
        }
    }
    found
}

fn nothing_left(s: &State, name: &str, proxy_port: Option<u64>) {
    s.ok(&["pg", "down", name, "--destroy"]);
    assert!(processes_with(&s.at("")).is_empty(), "{:?}", processes_with(&s.at("")));
    if let Some(p) = proxy_port {
        let left = processes_with(&format!("--listen-port {p} "));
        assert!(left.is_empty(), "proxy left: {left:?}");
    }
    let list: Value = serde_json::from_str(&s.ok(&["--json", "pg", "list"])).unwrap();
    assert_eq!(list, serde_json::json!([]));
}

#[test]
fn a_remote_apply_standby_streams_sync_and_sees_each_commit_at_once() {
    let s = State::parallel();
    let (data, sdata) = (s.at("pd"), s.at("sd"));
    s.ok(&[
        "pg",
        "up",
        "ra",
        "--data",
        &data,
        "--standby",
        "1",
        "--standby-data",
        &sdata,
        "--sync",
        "remote_apply",
    ]);
    let st = s.status("ra");
    let port = st["port"].as_u64().unwrap();
    assert_eq!(psql(port, "SHOW synchronous_commit"), "remote_apply");
    assert_eq!(psql(port, "SHOW synchronous_standby_names"), "FIRST 1 (s1)");
    let sb = &st["standbys"][0];
    assert_eq!(sb["name"], "s1");
    assert_eq!(sb["instance"], "ra-s1");
    assert_eq!(sb["state"], "streaming");
    assert_eq!(sb["sync_state"], "sync");
    assert_eq!(sb["placement"]["data"]["path"], format!("{sdata}-s1"));
    let sport = sb["port"].as_u64().unwrap();
    assert_eq!(psql(sport, "SELECT pg_is_in_recovery()"), "t");
    // remote_apply: once the commit returns, the standby has replayed it.
    psql(port, "CREATE TABLE t (a int); INSERT INTO t SELECT generate_series(1, 1000)");
    assert_eq!(psql(sport, "SELECT count(*) FROM t"), "1000");
    // The standby is a managed instance of its own: managed:ra-s1 works.
    let text = s.ok(&["pg", "status", "ra"]);
    assert!(text.contains("synchronous_commit=remote_apply") && text.contains("streaming"), "{text}");
    nothing_left(&s, "ra", None);
    assert!(!Path::new(&format!("{sdata}-s1")).exists());
}

#[test]
fn local_leaves_the_standby_async_and_a_link_puts_the_proxy_in_its_path() {
    let s = State::parallel();
    let data = s.at("pd");
    // Per direction: 10 ms for the acknowledgements, 30 ms for the WAL.
    s.ok(&[
        "pg",
        "up",
        "lo",
        "--data",
        &data,
        "--standby",
        "1",
        "--sync",
        "local",
        "--link",
        "up=10ms,down=30ms",
    ]);
    let st = s.status("lo");
    let port = st["port"].as_u64().unwrap();
    assert_eq!(psql(port, "SHOW synchronous_commit"), "local");
    assert_eq!(psql(port, "SHOW synchronous_standby_names"), "");
    assert_eq!(st["standbys"][0]["sync_state"], "async");
    assert_eq!(st["standbys"][0]["link"], "up=10ms,down=30ms");
    let s1 = s.status("lo-s1");
    let proxy = &s1["proxy"];
    assert_eq!(proxy["running"], true);
    assert_eq!(proxy["rtt_us"], 40_000);
    assert!(proxy["floor_us"].as_u64().unwrap() < 40_000, "{proxy}");
    let proxy_port = proxy["port"].as_u64().unwrap();
    // The standby reaches its primary only through the proxy.
    let sport = s1["port"].as_u64().unwrap();
    let conninfo = psql(sport, "SHOW primary_conninfo");
    assert!(conninfo.contains(&format!("port={proxy_port} ")), "{conninfo}");
    // With the primary now waiting for s1 (ALTER SYSTEM on it), a commit
    // waits a round trip through the proxy: at least the 10 + 30 ms asked.
    psql(port, "ALTER SYSTEM SET synchronous_standby_names = 's1'");
    psql(port, "ALTER SYSTEM SET synchronous_commit = 'on'");
    psql(port, "SELECT pg_reload_conf()");
    psql(port, "CREATE TABLE t (a int)");
    let t0 = Instant::now();
    psql(port, "INSERT INTO t VALUES (1)");
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(40), "a sync commit over a 40 ms link took {took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // A daemon is supervised, not trusted: killed, status says so, and
    // `pg up` brings it back and the standby streams through it again.
    let pid = proxy["pid"].as_i64().unwrap();
    Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(s.status("lo-s1")["proxy"]["running"], false);
    s.ok(&["pg", "up", "lo"]);
    let again = s.status("lo-s1");
    assert_eq!(again["proxy"]["running"], true);
    assert_ne!(again["proxy"]["pid"].as_i64().unwrap(), pid);
    let t0 = Instant::now();
    while s.status("lo")["standbys"][0]["state"] != "streaming" {
        assert!(t0.elapsed() < Duration::from_secs(60), "s1 did not stream again through the new proxy");
        std::thread::sleep(Duration::from_millis(500));
    }
    nothing_left(&s, "lo", Some(proxy_port));
}

/// Polls `f` every 200 ms for up to 20 s until it holds; the last value
/// it saw when it never does.
fn eventually<T: std::fmt::Debug>(what: &str, mut f: impl FnMut() -> (bool, T)) -> T {
    let t0 = Instant::now();
    loop {
        let (ok, v) = f();
        if ok {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{what}: still {v:?} after 20 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Each standby's `pg_stat_replication.sync_state` as the primary's
/// `pg status` reports it, by name.
fn sync_states(s: &State, name: &str) -> Vec<(String, String)> {
    let st = s.status(name);
    st["standbys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (x["name"].as_str().unwrap().to_string(), x["sync_state"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

#[test]
fn two_standbys_under_any_1_are_a_quorum_and_under_first_1_one_is_sync_and_one_potential() {
    let s = State::parallel();
    let pair = |x: &str, y: &str| vec![("s1".to_string(), x.to_string()), ("s2".to_string(), y.to_string())];
    for (name, form, names, states) in [
        ("qa", "ANY 1", "ANY 1 (s1, s2)", pair("quorum", "quorum")),
        ("qf", "first 1", "FIRST 1 (s1, s2)", pair("sync", "potential")),
    ] {
        let data = s.at(&format!("{name}-pd"));
        s.ok(&["pg", "up", name, "--data", &data, "--standby", "2", "--sync", "on", "--sync-names", form]);
        let st = s.status(name);
        let port = st["port"].as_u64().unwrap();
        assert_eq!(psql(port, "SHOW synchronous_commit"), "on");
        assert_eq!(psql(port, "SHOW synchronous_standby_names"), names, "--sync-names '{form}'");
        assert_eq!(st["sync_names"], names);
        // The primary assigns sync states once both stream under the new
        // names; both `pg status` and the server itself say the same.
        eventually(&format!("{form}: sync states"), || {
            let v = sync_states(&s, name);
            (v == states, v)
        });
        let direct =
            psql(port, "SELECT string_agg(application_name || '=' || sync_state, ',' ORDER BY application_name) FROM pg_stat_replication");
        assert_eq!(direct, format!("s1={},s2={}", states[0].1, states[1].1));
        // A commit waits for (one of) them and returns.
        psql(port, "CREATE TABLE t (a int); INSERT INTO t VALUES (1)");
        nothing_left(&s, name, None);
    }
}

#[test]
fn bad_replication_flags_are_one_line_exit_2_and_make_nothing() {
    let s = State::parallel();
    let data = s.at("pd");
    for (args, says) in [
        (
            vec!["--standby", "1", "--sync", "maybe"],
            "--sync maybe: use one of off, local, remote_write, on, remote_apply",
        ),
        (
            vec!["--standby", "1", "--sync", "on", "--sync-names", "ANY 2"],
            "--sync-names 'ANY 2': use \"FIRST n\" or \"ANY n\" with n from 1 to 1",
        ),
        (vec!["--sync", "on", "--link", "rtt=1ms"], "--sync-names and --link need --standby N"),
        (
            vec!["--standby", "1", "--link", "rtt=1ms,up=1ms"],
            "--link rtt=1ms,up=1ms: give rtt= (half each way) or up=/down=",
        ),
        (
            vec!["--standby", "1", "--link", "rtt=1ms,bw=fast"],
            "--link rtt=1ms,bw=fast: 'fast' is not a bandwidth",
        ),
        // 1 µs is below any proxy's own round trip (tens of µs): refused
        // after measuring the floor, before anything is made.
        (
            vec!["--standby", "1", "--sync", "on", "--link", "rtt=0.001ms"],
            "--link rtt=0.001ms: below the delay proxy's own floor of ",
        ),
    ] {
        let out = s.sb().args(["pg", "up", "bad", "--data", &data]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!Path::new(&data).exists());
        if let Some(rest) = err.split_once("own floor of ").map(|x| x.1) {
            // The line names the floor it measured, in ms, above the value.
            let floor: f64 = rest.split("ms").next().unwrap().parse().unwrap_or_else(|_| panic!("{err}"));
            assert!(floor > 0.001, "{err}");
        }
    }
    let list: Value = serde_json::from_str(&s.ok(&["--json", "pg", "list"])).unwrap();
    assert_eq!(list, serde_json::json!([]));
}

#[test]
fn a_run_samples_the_lag_and_a_stopped_sync_standby_is_said_and_does_not_hang_the_step() {
    let s = State::parallel();
    let data = s.at("pd");
    s.ok(&["pg", "up", "st", "--data", &data, "--standby", "1", "--sync", "on"]);
    s.ok(&["tpcb", "init", "--db", "managed:st", "--scale", "1"]);
    // While s1 streams: its lag is sampled each second and summarised.
    let rec: Value =
        serde_json::from_str(&s.ok(&["--json", "tpcb", "run", "--db", "managed:st", "--duration", "3s"]))
            .unwrap();
    let env = &rec["run"]["env"]["db"]["managed"]["replication"];
    assert_eq!(env["synchronous_commit"], "on");
    assert_eq!(env["standbys"][0]["name"], "s1");
    let m = &rec["steps"][0]["metrics"];
    assert_eq!(m["repl.s1.down"]["value"], 0.0, "{m}");
    assert_eq!(m["repl.released"]["value"], 0.0, "{m}");
    assert!(m["repl.s1.flush_lag.p99"]["value"].as_f64().unwrap() >= 0.0, "{m}");
    assert!(m["repl.wal"]["value"].as_f64().unwrap() > 0.0, "{m}");
    // Stop s1 mid-run: the commits wait (PostgreSQL's semantics); the run
    // says so within a few seconds and the step still ends at its time.
    let mut run = s
        .sb()
        .args(["--json", "tpcb", "run", "--db", "managed:st", "--clients", "2", "--duration", "8s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let stderr = run.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .map(|l| (t0.elapsed(), l))
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_secs(2));
    s.ok(&["pg", "down", "st-s1"]);
    let stopped = t0.elapsed();
    let out = run.wait_with_output().unwrap();
    let took = t0.elapsed();
    let lines = said.join().unwrap();
    assert!(out.status.success(), "{lines:?}");
    assert!(took < Duration::from_secs(25), "the run took {took:?} for an 8 s step");
    let (at, _) = lines
        .iter()
        .find(|(_, l)| l == "storbench: commits waiting for standby s1, which is down")
        .unwrap_or_else(|| panic!("not said: {lines:?}"));
    assert!(*at < stopped + Duration::from_secs(5), "said at {at:?}, s1 stopped by {stopped:?}");
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &rec["steps"][0]["metrics"];
    assert!(m["repl.s1.down"]["value"].as_f64().unwrap() >= 2.0, "{m}");
    assert!(m["repl.released"]["value"].as_f64().unwrap() >= 1.0, "{m}");
    // `up` on the running primary brings the stopped standby back.
    s.ok(&["pg", "up", "st"]);
    assert_eq!(s.status("st")["standbys"][0]["running"], true);
    nothing_left(&s, "st", None);
}

#[test]
fn kill_9_of_a_sync_on_primary_loses_no_acknowledged_commit_on_the_promoted_standby() {
    let s = State::parallel();
    s.ok(&["pg", "up", "fo", "--data", &s.at("pd"), "--standby", "1", "--sync", "on"]);
    // The primary's shared memory segments: a kill -9 leaves them unless
    // storbench removes them.
    let pid = std::fs::read_to_string(Path::new(&s.at("pd")).join("postmaster.pid")).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", pid.lines().next().unwrap().trim())).unwrap();
    let segs: Vec<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with("/dev/shm/PostgreSQL."))
        .collect();
    assert!(!segs.is_empty(), "the primary maps its control segment");
    let out: Value =
        serde_json::from_str(&s.ok(&["--json", "pg", "failover-check", "fo", "--kill-after", "2s"])).unwrap();
    for seg in &segs {
        assert!(!Path::new(seg).exists(), "{seg} left by the kill -9");
    }
    assert_eq!(out["synchronous_commit"], "on");
    assert_eq!(out["waits_for_standby"], true);
    assert!(out["acknowledged"].as_i64().unwrap() > 0, "{out}");
    assert_eq!(out["missing"], 0, "{out}");
    for c in out["clients"].as_array().unwrap() {
        assert_eq!(c["acknowledged"], c["on_standby"], "{c}");
    }
    // The promoted standby takes writes now.
    let st = s.status("fo-s1");
    psql(st["port"].as_u64().unwrap(), "INSERT INTO storbench_failover VALUES (999, 1)");
    nothing_left(&s, "fo", None);

    // With local, nothing waits for the standby: the check reports what was
    // lost (how much depends on timing) and does not fail.
    s.ok(&["pg", "up", "fl", "--data", &s.at("pd2"), "--standby", "1", "--sync", "local"]);
    let out: Value =
        serde_json::from_str(&s.ok(&["--json", "pg", "failover-check", "fl", "--kill-after", "2s"])).unwrap();
    assert_eq!(out["waits_for_standby"], false);
    let (acked, missing) = (out["acknowledged"].as_i64().unwrap(), out["missing"].as_i64().unwrap());
    assert!(acked > 0 && (0..=acked).contains(&missing), "{out}");
    nothing_left(&s, "fl", None);
}

#[test]
fn sync_on_over_a_5ms_link_costs_one_client_at_least_the_round_trip_per_commit() {
    let s = State::parallel();
    s.ok(&[
        "pg",
        "up",
        "tp",
        "--data",
        &s.at("pd"),
        "--standby",
        "1",
        "--sync",
        "local",
        "--link",
        "rtt=5ms",
    ]);
    s.ok(&["tpcb", "init", "--db", "managed:tp", "--scale", "1"]);
    let tps = |s: &State| {
        let rec: Value =
            serde_json::from_str(&s.ok(&["--json", "tpcb", "run", "--db", "managed:tp", "--duration", "4s"]))
                .unwrap();
        rec["steps"][0]["metrics"]["tps"]["value"].as_f64().unwrap()
    };
    let local = tps(&s);
    let port = s.status("tp")["port"].as_u64().unwrap();
    psql(port, "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (s1)'");
    psql(port, "ALTER SYSTEM SET synchronous_commit = 'on'");
    psql(port, "SELECT pg_reload_conf()");
    let on = tps(&s);
    // One TPC-B transaction is one commit; under `on` each waits at least
    // the 5 ms round trip, so one client cannot pass 200 TPS, and the model
    // 1 / (t_local + RTT + t_standby_flush) puts it within an order of
    // magnitude of that (a busy machine only slows both).
    assert!(on < local, "on {on} TPS, local {local} TPS");
    assert!(on <= 200.0, "on {on} TPS over a 5 ms link");
    let model = 1.0 / (1.0 / local + 0.005 + 1.0 / local);
    assert!(on > model / 10.0, "on {on} TPS, model {model:.0} TPS (local {local})");
    nothing_left(&s, "tp", None);
}
