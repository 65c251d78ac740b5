//! Crash points end to end (`storbench durability --crash-points`): a real
//! SQLite database on a recording modelled medium (`media create --record`),
//! every crash point's image mounted on a real loop device and recovered by
//! SQLite. The known-safe case must lose nothing; the known-unsafe ones must
//! lose acknowledged rows, or the check is not working.

use crate::common;
use common::State;

/// A recording medium named `name` with a volatile write cache, its mount point.
fn medium(s: &State, name: &str) -> String {
    s.ok(&["media", "create", name, "--size", "64M", "--fs", "ext4", "--model", "sata-ssd", "--record"]);
    s.state().join("mnt").join(name).to_string_lossy().into_owned()
}

/// The matrix of a `--json` crash-point run (the exit code is 1 when any point was bad).
fn matrix(s: &State, args: &[&str]) -> (i32, Vec<serde_json::Value>) {
    let (code, doc) = matrix_doc(s, args);
    (code, doc["cells"].as_array().unwrap().clone())
}

/// The whole `--json` document (the stored run's id in `run`).
fn matrix_doc(s: &State, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["--json", "durability"];
    all.extend_from_slice(args);
    let (code, out, err) = s.run(&all);
    assert!(code == 0 || code == 1, "storbench {all:?}: {code} {err}");
    (code, serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}")))
}

fn cell<'a>(cells: &'a [serde_json::Value], setting: &str, cache: &str) -> &'a serde_json::Value {
    cells
        .iter()
        .find(|c| c["setting"] == setting && c["cache"] == cache)
        .unwrap_or_else(|| panic!("{cells:?}"))
}

/// Nothing of the crash images is left: no scratch directory beside the backing files.
fn no_scratch_left(s: &State) {
    let left: Vec<_> = std::fs::read_dir(s.state().join("backing"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("storbench-crash"))
        .collect();
    assert!(left.is_empty(), "crash images left: {left:?}");
}

/// A cell whose `tried` points all recovered with nothing lost and consistent.
fn clean(c: &serde_json::Value, tried: u64, why: &str) {
    assert_eq!(c["tried"], tried, "{c}");
    for k in ["lost_max", "inconsistent", "failed"] {
        assert_eq!(c[k], 0, "{why}: {c}");
    }
}

/// No crash image, and no temporary server on one (their data directories
/// are under the scratch directory, `storbench-crash-PID`, in this test's
/// own directory: other tests' servers, running beside it, do not count).
fn nothing_left(s: &State) {
    no_scratch_left(s);
    let mine = format!("{}.*storbench-crash-", s.path("").display());
    let temp = std::process::Command::new("pgrep").args(["-f", &mine]).output().unwrap();
    assert!(temp.stdout.is_empty(), "a temporary server is left: {}", String::from_utf8_lossy(&temp.stdout));
}

#[test]
fn sqlite_full_sync_on_an_honest_device_loses_nothing_at_any_crash_point() {
    let s = State::new();
    let mnt = medium(&s, "crash-honest");
    let db = format!("sqlite:{mnt}/t.db");
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            &db,
            "--medium",
            "crash-honest",
            "--clients",
            "1",
            "--cut-after",
            "150ms",
            "--crash-points",
            "all",
            "--settings",
            "synchronous=full",
            "--cache",
            "honest,none",
        ],
    );
    for c in &cells {
        assert!(c["acknowledged"].as_i64().unwrap() > 0, "{c}");
        assert!(c["points"].as_u64().unwrap() > 3, "{c}");
        assert_eq!(c["tried"], c["points"], "every point: {c}");
        assert_eq!(c["lost_max"], 0, "{c}");
        assert_eq!(c["inconsistent"], 0, "{c}");
        assert_eq!(c["failed"], 0, "{c}");
    }
    assert_eq!(code, 0);
    no_scratch_left(&s);
}

#[test]
fn a_lying_cache_and_synchronous_off_lose_acknowledged_rows() {
    let s = State::new();
    let mnt = medium(&s, "crash-unsafe");
    // Past the lying cache's destage window: the filesystem itself is durable.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let db = format!("sqlite:{mnt}/t.db");
    let (code, doc) = matrix_doc(
        &s,
        &[
            "--db",
            &db,
            "--medium",
            "crash-unsafe",
            "--clients",
            "2",
            "--cut-after",
            "3s",
            "--crash-points",
            "8",
            "--settings",
            "synchronous=full,off",
            "--cache",
            "honest,lying",
        ],
    );
    assert_eq!(code, 1, "bad points exit 1");
    let cells = doc["cells"].as_array().unwrap().clone();
    let lying = cell(&cells, "synchronous=full", "lying");
    assert!(lying["lost_max"].as_i64().unwrap() > 0, "a cache that ignores flushes loses commits: {lying}");
    assert!(lying["first_bad"].is_u64(), "{lying}");
    let honest = cell(&cells, "synchronous=full", "honest");
    assert_eq!((honest["lost_max"].as_i64(), honest["failed"].as_i64()), (Some(0), Some(0)), "{honest}");
    let off = cell(&cells, "synchronous=off", "honest");
    let (lost, acked) = (off["lost_max"].as_i64().unwrap(), off["acknowledged"].as_i64().unwrap());
    assert!(lost > 0 && lost <= acked, "synchronous=off loses some, never more than acknowledged: {off}");

    // The loss distribution: p50 ≤ p90 ≤ max, every bad point listed.
    for c in &cells {
        let (p50, p90, max) = (
            c["lost_p50"].as_i64().unwrap(),
            c["lost_p90"].as_i64().unwrap(),
            c["lost_max"].as_i64().unwrap(),
        );
        assert!(p50 <= p90 && p90 <= max, "{c}");
        let bad = c["bad_points"].as_array().unwrap();
        for k in ["points_losing", "inconsistent", "failed"] {
            assert!(bad.len() as i64 >= c[k].as_i64().unwrap(), "every bad point listed: {c}");
        }
        assert_eq!(
            bad.first().map(|b| b["index"].clone()),
            c["first_bad"].as_u64().map(serde_json::Value::from),
            "{c}"
        );
    }

    // The matrix is in the results store: a step per cell, its figures and bad points.
    let run = doc["run"].as_i64().expect("the stored run's id").to_string();
    let (code, out, err) = s.run(&["--json", "results", "show", &run]);
    assert_eq!(code, 0, "{err}");
    let stored: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stored["run"]["kind"], "crash-points", "{stored}");
    let steps = stored["steps"].as_array().unwrap();
    assert_eq!(steps.len(), cells.len(), "{stored}");
    let step = steps
        .iter()
        .find(|st| st["label"] == "synchronous=full / lying")
        .unwrap_or_else(|| panic!("{stored}"));
    assert_eq!(step["metrics"]["crash.lost.max"]["value"].as_f64(), lying["lost_max"].as_f64(), "{step}");
    assert_eq!(step["metrics"]["crash.lost.p50"]["value"].as_f64(), lying["lost_p50"].as_f64(), "{step}");
    assert_eq!(step["metrics"]["crash.points.tried"]["value"].as_f64(), lying["tried"].as_f64(), "{step}");
    assert_eq!(step["params"]["bad_points"], lying["bad_points"], "{step}");
    let (code, text, err) = s.run(&["results", "show", &run]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("bad_points.0.index"), "{text}");
    let (code, report, err) = s.run(&["report", &run, "--text"]);
    assert_eq!(code, 0, "{err}");
    assert!(report.contains("crash"), "{report}");

    // The first bad point, checked again from the kept run, twice: the same.
    let k = lying["first_bad"].as_u64().unwrap().to_string();
    let again = |_: u32| {
        let (_, c) = matrix(
            &s,
            &[
                "--db",
                &db,
                "--medium",
                "crash-unsafe",
                "--crash-point",
                &k,
                "--last-run",
                "--settings",
                "synchronous=full",
                "--cache",
                "lying",
            ],
        );
        let c = c[0].clone();
        (c["lost_max"].clone(), c["inconsistent"].clone(), c["failed"].clone(), c["first_bad"].clone())
    };
    let (a, b) = (again(1), again(2));
    assert_eq!(a, b, "a crash point reproduced by its index");
    assert_eq!(a.3.as_u64().map(|i| i.to_string()), Some(k.clone()), "{a:?}");
    no_scratch_left(&s);
}

#[test]
fn a_medium_that_does_not_record_is_refused() {
    let s = State::new();
    s.ok(&["media", "create", "crash-norec", "--size", "64M", "--fs", "ext4", "--model", "sata-ssd"]);
    let db = format!("sqlite:{}/t.db", s.state().join("mnt/crash-norec").display());
    let (code, _, err) =
        s.run(&["durability", "--db", &db, "--medium", "crash-norec", "--crash-points", "3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--record"), "{err}");
    let (code, _, err) =
        s.run(&["durability", "--db", &db, "--medium", "crash-norec", "--crash-points", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'0' for '--crash-points <N|all>': '0' is not a number of crash points"), "{err}");
}

#[test]
fn postgres_crash_points_lose_nothing_when_honest_and_lose_when_the_cache_lies_or_commits_are_async() {
    let s = State::new();
    s.ok(&[
        "media", "create", "crash-pg", "--size", "512M", "--fs", "ext4", "--model", "sata-ssd", "--record",
    ]);
    s.ok(&["pg", "up", "crash-pg1", "--data", "crash-pg", "-c", "shared_buffers=32MB"]);
    // Past the lying cache's destage window: the cluster itself is durable.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            "managed:crash-pg1",
            "--medium",
            "crash-pg",
            "--clients",
            "2",
            "--cut-after",
            "3s",
            "--crash-points",
            "4",
            "--settings",
            "synchronous_commit=on,off",
            "--cache",
            "honest,lying",
        ],
    );
    assert_eq!(code, 1, "bad points exit 1");
    let honest = cell(&cells, "synchronous_commit=on", "honest");
    clean(honest, 4, "an honest device with synchronous commits");
    let lying = cell(&cells, "synchronous_commit=on", "lying");
    assert!(lying["lost_max"].as_i64().unwrap() > 0, "a cache that ignores flushes loses commits: {lying}");
    // synchronous_commit=off loses at most the WAL writer's window
    // (3 × wal_writer_delay = 0.6 s by default): here, at most 1 s of a 3 s run.
    let off = cell(&cells, "synchronous_commit=off", "honest");
    let (lost, acked) = (off["lost_max"].as_i64().unwrap(), off["acknowledged"].as_i64().unwrap());
    assert!(lost > 0 && lost * 3 <= acked, "asynchronous commits lose a bounded window: {off}");
    assert_eq!((off["inconsistent"].as_i64(), off["failed"].as_i64()), (Some(0), Some(0)), "{off}");
    nothing_left(&s);
}

#[test]
fn ctrl_c_finishes_the_point_in_progress_and_leaves_nothing() {
    let s = State::new();
    let mnt = medium(&s, "crash-intr");
    let db = format!("sqlite:{mnt}/t.db");
    let child = s
        .sb()
        .args(["--json", "durability", "--db", &db, "--medium", "crash-intr", "--clients", "1"])
        .args(["--cut-after", "1s", "--crash-points", "all", "--cache", "honest"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once the points are being checked (their scratch directory exists).
    let backing = s.state().join("backing");
    let t0 = std::time::Instant::now();
    while !std::fs::read_dir(&backing)
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("storbench-crash")))
        .unwrap_or(false)
    {
        assert!(t0.elapsed().as_secs() < 60, "the points never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(700));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    let c = &doc["cells"][0];
    let (tried, points) = (c["tried"].as_u64().unwrap(), c["points"].as_u64().unwrap());
    assert!(tried >= 1 && tried < points, "stopped early, with what it had: {c}");
    no_scratch_left(&s);
}

#[test]
fn postgres_tpcc_crash_points_lose_no_order_when_honest_and_lose_orders_when_the_cache_lies() {
    let s = State::new();
    s.ok(&[
        "media",
        "create",
        "crash-tpcc",
        "--size",
        "1G",
        "--fs",
        "ext4",
        "--model",
        "sata-ssd",
        "--record",
    ]);
    let up: serde_json::Value = serde_json::from_str(&s.ok(&[
        "--json",
        "pg",
        "up",
        "crash-tpcc1",
        "--data",
        "crash-tpcc",
        "-c",
        "shared_buffers=64MB",
    ]))
    .unwrap();
    let port = up["port"].as_u64().unwrap_or_else(|| panic!("{up}"));
    // Without a TPC-C schema: refused, naming what to do.
    let (code, _, err) = s.run(&[
        "durability",
        "--db",
        "managed:crash-tpcc1",
        "--medium",
        "crash-tpcc",
        "--workload",
        "tpcc",
        "--crash-points",
        "2",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("tpcc build"), "{err}");
    s.ok(&["tpcc", "build", "--db", "managed:crash-tpcc1", "--warehouses", "1"]);
    // Past the lying cache's destage window: the build itself is durable.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            "managed:crash-tpcc1",
            "--medium",
            "crash-tpcc",
            "--workload",
            "tpcc",
            "--clients",
            "2",
            "--cut-after",
            "3s",
            "--crash-points",
            "3",
            "--cache",
            "honest,lying",
        ],
    );
    assert_eq!(code, 1, "bad points exit 1");
    let honest = cell(&cells, "", "honest");
    assert!(honest["acknowledged"].as_i64().unwrap() > 0, "New-Orders acknowledged: {honest}");
    clean(honest, 3, "an honest device with synchronous commits");
    let lying = cell(&cells, "", "lying");
    assert!(lying["lost_max"].as_i64().unwrap() > 0, "a cache that ignores flushes loses orders: {lying}");
    // An index that no longer matches its table (the function of its
    // expression changed under it): TPC-C's conditions never read it,
    // pg_amcheck does, so every recovered point is inconsistent.
    common::managed_psql(
        port,
        "CREATE FUNCTION sb_probe_f(int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT $1'; \
         CREATE TABLE sb_probe (a int); INSERT INTO sb_probe SELECT generate_series(1, 100); \
         CREATE INDEX sb_probe_i ON sb_probe (sb_probe_f(a)); \
         CREATE OR REPLACE FUNCTION sb_probe_f(int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT -$1'",
    );
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            "managed:crash-tpcc1",
            "--medium",
            "crash-tpcc",
            "--workload",
            "tpcc",
            "--clients",
            "2",
            "--cut-after",
            "1s",
            "--crash-points",
            "2",
            "--cache",
            "honest",
        ],
    );
    assert_eq!(code, 1, "bad points exit 1");
    let broken = cell(&cells, "", "honest");
    assert_eq!((broken["tried"].as_u64(), broken["inconsistent"].as_u64()), (Some(2), Some(2)), "{broken}");
    assert_eq!((broken["lost_max"].as_i64(), broken["failed"].as_u64()), (Some(0), Some(0)), "{broken}");
    for b in broken["bad_points"].as_array().unwrap() {
        let why = b["inconsistent"].as_str().unwrap_or("");
        assert!(why.contains("pg_amcheck") && why.contains("sb_probe_i"), "found by pg_amcheck: {broken}");
    }
    common::managed_psql(port, "DROP TABLE sb_probe; DROP FUNCTION sb_probe_f(int)");
    // A schema without stored routines: no New-Order's transaction id is
    // read before it commits, so `all` has no WAL-extent reduction, and
    // says so (a line, even with --quiet, and a note on the cell).
    // Interrupted once said: every point would be recovered.
    common::managed_psql(port, "UPDATE storbench_tpcc_meta SET procedures = 0");
    let child = s
        .sb()
        .args(["--json", "durability", "--db", "managed:crash-tpcc1", "--medium", "crash-tpcc"])
        .args(["--workload", "tpcc", "--clients", "2", "--cut-after", "500ms", "--crash-points", "all"])
        .args(["--cache", "honest"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (said, out, err) = interrupt_at_line(child, "WAL-extent reduction off");
    common::managed_psql(port, "UPDATE storbench_tpcc_meta SET procedures = 1");
    let said = said.unwrap_or_else(|| panic!("no line says the reduction is off: {err}"));
    assert!(said.contains("stored routines") && said.contains("every point is recovered"), "{said}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {err}", String::from_utf8_lossy(&out.stdout)));
    let off = &doc["cells"][0];
    let note = off["note"].as_str().unwrap_or_else(|| panic!("no note: {off}"));
    assert!(note.starts_with("WAL-extent reduction off:") && note.contains("stored routines"), "{off}");
    assert_eq!(off["predicted"], 0, "{off}");
    nothing_left(&s);
}

#[test]
fn a_tpcc_workload_needs_its_schema_on_sqlite_and_crash_points() {
    let s = State::new();
    let mnt = medium(&s, "crash-tpcc-bad");
    let db = format!("sqlite:{mnt}/t.db");
    // Each refused with one line naming the flag (exit 2).
    let refused = |db: &str, extra: &[&str], want: &str| {
        let mut args = vec!["durability", "--db", db, "--medium", "crash-tpcc-bad"];
        args.extend_from_slice(extra);
        let (code, _, err) = s.run(&args);
        assert_eq!((code, err.lines().count()), (2, 1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    refused(
        &db,
        &["--workload", "tpcc", "--crash-points", "2"],
        "build one first (storbench tpcc build --db sqlite:",
    );
    refused(
        &db,
        &["--workload", "tpc-c", "--crash-points", "2"],
        "'tpc-c' for '--workload <rows|tpcc>'; use rows, tpcc",
    );
    refused(
        &db,
        &["--crash-points", "2", "--cache", "honest,maybe"],
        "'maybe' is not a cache mode: use honest, lying, none",
    );
    refused("managed:x", &["--workload", "tpcc"], "only with --crash-points");
    refused("managed:x", &["--torn-pages"], "--torn-pages: only with --crash-points");
    refused(
        &db,
        &["--crash-points", "2", "--checkpoint-every", "1s"],
        "--checkpoint-every 1s: PostgreSQL only",
    );
}

#[test]
fn pg_up_data_checksums_makes_an_instance_that_checks_its_pages() {
    let s = State::new();
    let data = s.path("crash-ck-data");
    let data = data.to_str().unwrap();
    let up: serde_json::Value = serde_json::from_str(&s.ok(&[
        "--json",
        "pg",
        "up",
        "crash-ck",
        "--data",
        data,
        "--data-checksums",
        "-c",
        "shared_buffers=16MB",
    ]))
    .unwrap();
    let port = up["port"].as_u64().unwrap_or_else(|| panic!("{up}"));
    assert_eq!(common::managed_psql(port, "SHOW data_checksums"), "on");
    // Chosen at initdb: asking for them on an instance that exists is refused.
    let (code, _, err) = s.run(&["pg", "up", "crash-ck", "--data-checksums"]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(err.contains("--data-checksums"), "{err}");
    // Without the flag: none (PostgreSQL 15's initdb default).
    let up: serde_json::Value = serde_json::from_str(&s.ok(&[
        "--json",
        "pg",
        "up",
        "crash-nock",
        "--data",
        s.path("crash-nock-data").to_str().unwrap(),
        "-c",
        "shared_buffers=16MB",
    ]))
    .unwrap();
    assert_eq!(common::managed_psql(up["port"].as_u64().unwrap(), "SHOW data_checksums"), "off");
}

#[test]
fn postgres_torn_data_pages_are_found_without_full_page_writes_and_repaired_with_them() {
    let s = State::new();
    s.ok(&[
        "media",
        "create",
        "crash-torn",
        "--size",
        "512M",
        "--fs",
        "ext4",
        "--model",
        "sata-ssd",
        "--record",
    ]);
    s.ok(&[
        "pg",
        "up",
        "crash-torn1",
        "--data",
        "crash-torn",
        "--data-checksums",
        "-c",
        "shared_buffers=32MB",
    ]);
    // Checkpoints within the run write the table's pages; only the points
    // tearing one of those writes are taken. Not every torn point shows
    // (2 of 6 did not in one run: a tear can leave a page as it was): 8
    // points without full-page images make missing every one unlikely.
    let torn = |setting: &str, points: &str| {
        let (code, cells) = matrix(
            &s,
            &[
                "--db",
                "managed:crash-torn1",
                "--medium",
                "crash-torn",
                "--clients",
                "2",
                "--cut-after",
                "3s",
                "--checkpoint-every",
                "300ms",
                "--torn-pages",
                "--crash-points",
                points,
                "--settings",
                setting,
                "--cache",
                "honest",
            ],
        );
        (code, cell(&cells, setting, "honest").clone())
    };
    let (code, on) = torn("full_page_writes=on", "5");
    assert_eq!(code, 0, "{on}");
    let (code, off) = torn("full_page_writes=off", "8");
    assert_eq!(code, 1, "bad points exit 1");
    assert!(on["tried"].as_u64().unwrap() >= 3, "torn data pages to try: {on}");
    for k in ["lost_max", "inconsistent", "failed"] {
        assert_eq!(on[k], 0, "the WAL's full-page images repair a torn page: {on}");
    }
    assert!(off["tried"].as_u64().unwrap() >= 3, "{off}");
    assert!(
        off["inconsistent"].as_u64().unwrap() >= 1,
        "a torn page without full-page images is found: {off}"
    );
    assert_eq!(off["failed"], 0, "a damaged page counts as inconsistent, not as a failed recovery: {off}");
    let why = off["bad_points"].as_array().unwrap().iter().filter_map(|b| b["inconsistent"].as_str());
    assert!(
        why.clone().all(|w| w.contains("invalid page") || w.contains("checksum") || w.contains("pg_amcheck")),
        "found by the pages' checksums or amcheck: {off}"
    );
    nothing_left(&s);
}

#[test]
fn mariadb_crash_points_lose_nothing_with_a_log_flush_per_commit_and_lose_without() {
    let s = State::new();
    let mnt = medium(&s, "crash-maria");
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            "mysql://root@localhost/test",
            "--medium",
            "crash-maria",
            "--clients",
            "2",
            "--cut-after",
            "3s",
            "--crash-points",
            "4",
            "--settings",
            "innodb_flush_log_at_trx_commit=1,0",
            "--cache",
            "honest",
        ],
    );
    assert_eq!(code, 1, "bad points exit 1");
    assert!(std::path::Path::new(&mnt).join("storbench-mariadb/mysql").is_dir(), "its data is on the medium");
    // Only the server's own directory changed owner, not the medium's root
    // (which may hold other databases).
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&mnt).unwrap());
    assert_eq!(owner, 0, "{mnt} was given to uid {owner}");
    let safe = cell(&cells, "innodb_flush_log_at_trx_commit=1", "honest");
    assert!(safe["acknowledged"].as_i64().unwrap() > 0, "{safe}");
    clean(safe, 4, "a redo log flushed at each commit on an honest device");
    // =0 leaves writing and flushing the redo log to InnoDB's background
    // work: a crash loses the commits since it last did.
    let lazy = cell(&cells, "innodb_flush_log_at_trx_commit=0", "honest");
    let (lost, acked) = (lazy["lost_max"].as_i64().unwrap(), lazy["acknowledged"].as_i64().unwrap());
    assert!(lost > 0 && lost <= acked, "{lazy}");
    assert_eq!((lazy["inconsistent"].as_i64(), lazy["failed"].as_i64()), (Some(0), Some(0)), "{lazy}");
    // The same recorded run of =1 under a cache that ignores flushes: the
    // redo log's flush at each commit promises nothing, and the last 2 s
    // of it (the model's destage window) may be gone at a point. What that
    // costs varies with what the cache held: acknowledged rows gone, or
    // (the data directory being made just before the run) InnoDB's pages
    // or the filesystem's own blocks, so InnoDB refuses to start or the
    // directory fails its checksum (CI, 2026-11-28: 3 points, no row lost,
    // each a damaged database). Each is a bad point; none is a clean one.
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            "mysql://root@localhost/test",
            "--medium",
            "crash-maria",
            "--last-run",
            "--crash-points",
            "3",
            "--settings",
            "innodb_flush_log_at_trx_commit=1",
            "--cache",
            "lying",
        ],
    );
    assert_eq!(code, 1, "bad points exit 1");
    let lying = cell(&cells, "innodb_flush_log_at_trx_commit=1", "lying");
    let (lost, acked) = (lying["lost_max"].as_i64().unwrap(), lying["acknowledged"].as_i64().unwrap());
    let bad = lying["bad_points"].as_array().map_or(0, Vec::len);
    assert!(bad > 0 && lost <= acked, "a cache that ignores flushes loses commits or the database: {lying}");
    nothing_left(&s);
}

/// InnoDB's torn data pages: only the points tearing a write of its
/// tablespaces (`ibdata1`, which holds the doublewrite buffer, and the
/// `.ibd` files). `innodb_max_dirty_pages_pct=0` makes the page cleaner
/// write the table's pages within a 3 s run. With the doublewrite buffer
/// recovery mends every torn page; without it a torn page fails its
/// checksum when redo reads it.
#[test]
fn mariadb_torn_data_pages_are_mended_by_the_doublewrite_buffer_and_found_without_it() {
    let s = State::new();
    s.ok(&[
        "media",
        "create",
        "crash-maria-torn",
        "--size",
        "256M",
        "--fs",
        "ext4",
        "--model",
        "sata-ssd",
        "--record",
    ]);
    let torn = |dw: &str, points: &str| {
        let (code, cells) = matrix(
            &s,
            &[
                "--db",
                "mysql://root@localhost/test",
                "--medium",
                "crash-maria-torn",
                "--clients",
                "2",
                "--cut-after",
                "3s",
                "--torn-pages",
                "--crash-points",
                points,
                "--settings",
                dw,
                "--settings",
                "innodb_max_dirty_pages_pct=0",
                "--cache",
                "honest",
            ],
        );
        (code, cell(&cells, &format!("{dw},innodb_max_dirty_pages_pct=0"), "honest").clone())
    };
    let (code, on) = torn("innodb_doublewrite=ON", "4");
    assert_eq!(code, 0, "{on}");
    assert!(on["tried"].as_u64().unwrap() >= 3, "torn data pages to try: {on}");
    for k in ["lost_max", "inconsistent", "failed"] {
        assert_eq!(on[k], 0, "the doublewrite buffer mends a torn page: {on}");
    }
    // Every torn point: about a third of them are found (a torn page that
    // recovery rebuilds from the redo log's page initialisation, or never
    // reads, is not), bunched in parts of the run, so 8 sampled could all
    // miss (a CI run saw it).
    let (code, off) = torn("innodb_doublewrite=OFF", "all");
    assert_eq!(code, 1, "bad points exit 1: {off}");
    assert!(off["tried"].as_u64().unwrap() >= 3, "{off}");
    assert!(
        off["inconsistent"].as_u64().unwrap() >= 1,
        "a torn page without the doublewrite buffer is found: {off}"
    );
    assert_eq!(
        off["failed"], 0,
        "a page failing its checksum counts as inconsistent, not as a failed recovery: {off}"
    );
    let why = off["bad_points"].as_array().unwrap().iter().filter_map(|b| b["inconsistent"].as_str());
    assert!(
        why.clone().all(|w| w.contains("corrupt") || w.contains("checksum") || w.contains("CHECK TABLE")),
        "found by the pages' checksums or CHECK TABLE: {off}"
    );
    nothing_left(&s);
}

/// TPC-C on storbench's own mariadbd (scale 1, built on the medium by the
/// first run): with the redo log flushed at each commit on an honest
/// device no acknowledged New-Order is lost and every point passes `tpcc
/// check`'s conditions and `CHECK TABLE`; a cache that ignores flushes
/// loses acknowledged orders.
#[test]
fn mariadb_tpcc_crash_points_lose_no_order_when_honest_and_go_bad_when_the_cache_lies() {
    let s = State::new();
    s.ok(&[
        "media",
        "create",
        "crash-maria-tpcc",
        "--size",
        "1G",
        "--fs",
        "ext4",
        "--model",
        "sata-ssd",
        "--record",
    ]);
    let run = |cache: &str, points: &str| {
        let (code, cells) = matrix(
            &s,
            &[
                "--db",
                "mysql://root@localhost/test",
                "--medium",
                "crash-maria-tpcc",
                "--workload",
                "tpcc",
                "--clients",
                "2",
                "--cut-after",
                "3s",
                "--crash-points",
                points,
                "--settings",
                "innodb_flush_log_at_trx_commit=1",
                "--cache",
                cache,
            ],
        );
        (code, cell(&cells, "innodb_flush_log_at_trx_commit=1", cache).clone())
    };
    // The first run builds the schema; the second, on a schema built
    // long enough before (past the lying cache's 2 s window), runs again.
    let (code, honest) = run("honest", "3");
    assert_eq!(code, 0, "{honest}");
    assert!(honest["acknowledged"].as_i64().unwrap() > 0, "New-Orders acknowledged: {honest}");
    clean(&honest, 3, "a redo log flushed at each commit on an honest device");
    let (code, lying) = run("lying", "3");
    assert_eq!(code, 1, "bad points exit 1");
    // What a cache that ignores flushes costs varies with what it held at
    // the point: acknowledged orders gone, or pages or the filesystem's
    // own journal torn so recovery fails or InnoDB refuses its tablespace.
    // Each is a bad point; none is a clean one.
    let (lost, acked) = (lying["lost_max"].as_i64().unwrap(), lying["acknowledged"].as_i64().unwrap());
    let bad = lying["bad_points"].as_array().map_or(0, Vec::len);
    assert!(bad > 0 && lost <= acked, "a cache that ignores flushes loses orders or the database: {lying}");
    nothing_left(&s);
}

/// Every crash point of a TPC-C run through the WAL-extent reduction: the
/// points it covers without recovery, the ones it recovers (each non-WAL
/// state, and a spread) and, on every recovered one, the prediction equal
/// to what recovery found. With `synchronous_commit=off` the WAL-extent pass
/// itself must find lost orders: at more points than were recovered.
#[test]
fn every_tpcc_crash_point_is_covered_by_its_wal_extent_and_recovery_agrees() {
    let s = State::new();
    s.ok(&[
        "media",
        "create",
        "crash-wal",
        "--size",
        "1G",
        "--fs",
        "ext4",
        "--model",
        "sata-ssd",
        "--record",
    ]);
    s.ok(&["pg", "up", "crash-wal1", "--data", "crash-wal", "-c", "shared_buffers=64MB"]);
    s.ok(&["tpcc", "build", "--db", "managed:crash-wal1", "--warehouses", "1"]);
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            "managed:crash-wal1",
            "--medium",
            "crash-wal",
            "--workload",
            "tpcc",
            "--clients",
            "2",
            "--cut-after",
            "500ms",
            "--crash-points",
            "all",
            "--settings",
            "synchronous_commit=off",
            "--cache",
            "honest",
        ],
    );
    assert_eq!(code, 1, "asynchronous commits lose acknowledged orders: exit 1");
    let c = cell(&cells, "synchronous_commit=off", "honest");
    let (points, tried, predicted) =
        (c["points"].as_u64().unwrap(), c["tried"].as_u64().unwrap(), c["predicted"].as_u64().unwrap());
    assert!(c["acknowledged"].as_i64().unwrap() > 0, "{c}");
    assert_eq!(tried + predicted, points, "every point covered: {c}");
    assert!(
        predicted > 0 && tried >= 16.min(points),
        "points covered by their WAL extent, a spread recovered: {c}"
    );
    assert_eq!(c["disagreed"], 0, "recovery found what the WAL extent predicted: {c}");
    assert!(
        c["points_losing"].as_u64().unwrap() > tried,
        "the WAL-extent pass finds the lost orders of asynchronous commits: {c}"
    );
    for k in ["inconsistent", "failed"] {
        assert_eq!(c[k], 0, "asynchronous commits stay consistent: {c}");
    }
    nothing_left(&s);
}

/// The mariadbd servers (not `mariadb-install-db`'s bootstrap) whose
/// socket is in this test's directory.
fn mariadbds(s: &State) -> Vec<u32> {
    let out = std::process::Command::new("pgrep")
        .args(["-f", &format!("mariadbd .*--socket={}.*--skip-grant-tables", s.path("").display())])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// A storbench killed outright (SIGKILL: no Ctrl-C handling, no drops)
/// during a MariaDB crash-point run takes its own mariadbd, whose data is
/// on the medium, with it.
#[test]
fn a_killed_storbench_leaves_no_mariadbd_of_its_crash_points_running() {
    let s = State::new();
    let mnt = medium(&s, "crash-maria-kill");
    let mut child = s
        .sb()
        .args(["durability", "--db", "mysql://root@localhost/test", "--medium", "crash-maria-kill"])
        .args(["--clients", "1", "--cut-after", "30s", "--crash-points", "2", "--cache", "honest"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once its server runs on the medium (made by
    // mariadb-install-db first), with the run's clients at work.
    let t0 = std::time::Instant::now();
    let mut running = Vec::new();
    while running.is_empty() && t0.elapsed().as_secs() < 90 && child.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(100));
        running = mariadbds(&s);
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let gone = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        mariadbds(&s).is_empty()
    });
    let left = mariadbds(&s);
    for &pid in &left {
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    assert!(!running.is_empty(), "no mariadbd of the run on {mnt} was seen running");
    assert!(gone, "mariadbd {left:?} outlived the storbench that started it");
}

/// bench/crash-points.sh's progress: the per-point lines of a real run
/// (SQLite, every point) summed up by bench/crash-progress.py into a line
/// per tenth of a cell's points, the last one saying every point was done;
/// the other lines pass through.
#[test]
fn the_bench_scripts_progress_sums_up_the_point_lines() {
    let s = State::new();
    let mnt = medium(&s, "crash-progress");
    let db = format!("sqlite:{mnt}/t.db");
    // Not --quiet (State::sb's): the point lines are what is summed up.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_storbench"))
        .current_dir(s.dir.path())
        .env("STORBENCH_STATE", s.state())
        .env("STORBENCH_RESULTS", s.path("r.db"))
        .args(["--json", "durability", "--db", &db, "--medium", "crash-progress", "--clients", "1"])
        .args(["--cut-after", "150ms", "--crash-points", "all", "--cache", "honest"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    let points = doc["cells"][0]["tried"].as_u64().unwrap();
    let lines = err.lines().filter(|l| l.contains("] point ")).count() as u64;
    assert!(
        points > 12 && lines == points,
        "a line per point to sum up: {points} points, {lines} lines: {err}"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/crash-progress.py");
    let mut sum = std::process::Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut sum.stdin.take().unwrap(), &out.stderr).unwrap();
    let summed = sum.wait_with_output().unwrap();
    assert!(summed.status.success());
    let summed = String::from_utf8_lossy(&summed.stdout);
    eprintln!("{points} points summed up:\n{summed}");
    assert!(!summed.contains("] point "), "no line per point: {summed}");
    let progress: Vec<&str> = summed.lines().filter(|l| l.starts_with("  [honest] ")).collect();
    assert!((2..=11).contains(&progress.len()), "a line per tenth: {summed}");
    let last = progress.last().unwrap();
    assert!(last.starts_with(&format!("  [honest] {points}/{points} points: 0 losing")), "{summed}");
    assert!(summed.lines().any(|l| l.starts_with("run: ")), "other lines pass: {summed}");
    no_scratch_left(&s);
}

/// SQLite under `--torn-pages`: only points that tear a write of the
/// database file itself (its pages, from FIEMAP after the run). With
/// `synchronous=full` in rollback-journal mode each page's old contents
/// are in the journal, flushed before the file is written, so opening the
/// database rolls a torn page back: nothing lost, `PRAGMA
/// integrity_check` ok, at every such point. With `synchronous=off`
/// nothing is flushed within the run: its one point (at the run's end)
/// is bad (in one run: every row lost, "database disk image is malformed").
#[test]
fn sqlite_torn_database_pages_are_rolled_back_with_full_sync_and_break_the_database_without() {
    let s = State::new();
    let mnt = medium(&s, "crash-sqtorn");
    let db = format!("sqlite:{mnt}/t.db");
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            &db,
            "--medium",
            "crash-sqtorn",
            "--clients",
            "2",
            "--cut-after",
            "1s",
            "--torn-pages",
            "--crash-points",
            "6",
            "--settings",
            "synchronous=full,off",
            "--settings",
            "journal_mode=delete",
            "--cache",
            "honest",
        ],
    );
    let c = cell(&cells, "synchronous=full,journal_mode=delete", "honest");
    assert!(c["acknowledged"].as_i64().unwrap() > 0, "{c}");
    // One torn point per flush interval that writes the file: many here
    // (each commit writes its pages between two flushes).
    assert!(c["points"].as_u64().unwrap() >= 6, "torn database pages to try: {c}");
    clean(c, 6, "a torn page rolled back from the flushed journal");
    let off = cell(&cells, "synchronous=off,journal_mode=delete", "honest");
    assert!(off["tried"].as_u64().unwrap() >= 1, "{off}");
    let bad = ["lost_max", "inconsistent", "failed"].iter().any(|k| off[k].as_u64() > Some(0));
    assert!(bad, "unflushed writes and a torn page: {off}");
    assert_eq!(code, 1, "bad points exit 1");
    no_scratch_left(&s);
}

/// TPC-C crash points on SQLite (a schema `tpcc build` made on the
/// medium): with `synchronous=full` every sampled point keeps every
/// acknowledged New-Order, passes `PRAGMA integrity_check` and TPC-C's
/// consistency conditions; with `synchronous=off` (nothing flushed within
/// the run) acknowledged New-Orders are lost, never more than were
/// acknowledged, and the database stays consistent (WAL mode).
#[test]
fn sqlite_tpcc_crash_points_lose_no_order_with_full_sync_and_lose_orders_without() {
    let s = State::new();
    s.ok(&[
        "media",
        "create",
        "crash-sqtpcc",
        "--size",
        "512M",
        // XFS: no periodic journal commit within the run (ext4's, every
        // 5 s, flushes the device and makes `synchronous=off`'s orders up
        // to it durable, so under load all sampled points could be clean).
        "--fs",
        "xfs",
        "--model",
        "sata-ssd",
        "--record",
    ]);
    let db = format!("sqlite:{}/tpcc.db", s.state().join("mnt/crash-sqtpcc").display());
    s.ok(&["tpcc", "build", "--db", &db, "--warehouses", "1"]);
    let (code, cells) = matrix(
        &s,
        &[
            "--db",
            &db,
            "--medium",
            "crash-sqtpcc",
            "--workload",
            "tpcc",
            "--clients",
            "2",
            "--cut-after",
            "2s",
            "--crash-points",
            "3",
            "--settings",
            "synchronous=full,off",
            "--cache",
            "honest",
        ],
    );
    assert_eq!(code, 1, "bad points exit 1");
    let full = cell(&cells, "synchronous=full", "honest");
    assert!(full["acknowledged"].as_i64().unwrap() > 0, "New-Orders acknowledged: {full}");
    clean(full, 3, "full sync on an honest device");
    let off = cell(&cells, "synchronous=off", "honest");
    let (lost, acked) = (off["lost_max"].as_i64().unwrap(), off["acknowledged"].as_i64().unwrap());
    assert!(lost > 0 && lost <= acked, "unflushed commits are lost: {off}");
    assert_eq!((off["inconsistent"].as_i64(), off["failed"].as_i64()), (Some(0), Some(0)), "{off}");
    nothing_left(&s);
}

/// Each point's line of a crash-point run's progress (stderr), by cell
/// (the lines after each `run:` line, one cache mode after another, are
/// told apart by `done` starting again at 1): `(done, of, index, what it
/// showed)` in the order printed, the timings cut off.
fn point_lines(err: &str) -> Vec<(u64, u64, u64, String)> {
    err.lines()
        .filter(|l| l.trim_start().starts_with('[') && l.contains("] point "))
        .map(|l| {
            let (_, rest) = l.split_once("] point ").unwrap();
            let (done, rest) = rest.split_once('/').unwrap();
            let (of, rest) = rest.split_once(" (#").unwrap();
            let (index, rest) = rest.split_once(' ').unwrap();
            let (_, showed) = rest.split_once("): ").unwrap();
            let cut = showed.rfind(" s: image").unwrap_or_else(|| panic!("no timings: {l}"));
            let what = showed[..cut].rsplit_once(" (").unwrap().0.to_string();
            (done.parse().unwrap(), of.parse().unwrap(), index.parse().unwrap(), what)
        })
        .collect()
}

/// The loop devices and mounts of this test's crash images (under its own
/// directory: other tests' do not count).
fn loops_and_mounts(s: &State) -> Vec<String> {
    let mine = s.path("").display().to_string();
    let loops = std::process::Command::new("losetup").arg("-a").output().unwrap();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    String::from_utf8_lossy(&loops.stdout)
        .lines()
        .chain(mounts.lines())
        .filter(|l| l.contains(&mine) && l.contains("storbench-crash"))
        .map(str::to_string)
        .collect()
}

/// `text` with each temporary server's address (`postgres://…/storbench`:
/// its run directory names the process and the worker, its port is free
/// when picked) as `postgres://SERVER/storbench`: what a point showed, not where.
fn unplaced(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("postgres://") {
        let Some(j) = rest[i..].find("/storbench:").or_else(|| rest[i..].find("/storbench ")) else { break };
        out.push_str(&rest[..i]);
        out.push_str("postgres://SERVER");
        rest = &rest[i + j..];
    }
    out.push_str(rest);
    // A worker's scratch directory (`storbench-crash-PID/wN`) and loop device.
    let mut text = String::new();
    for (k, piece) in out.split("storbench-crash-").enumerate() {
        let digits = |t: &str| t.trim_start_matches(|c: char| c.is_ascii_digit()).to_string();
        let after = if k == 0 { piece.to_string() } else { digits(piece) };
        let after = if k == 0 { after } else { after.strip_prefix("/w").map_or(after.clone(), digits) };
        text.push_str(if k == 0 { "" } else { "SCRATCH" });
        text.push_str(&after);
    }
    let mut out = String::new();
    for (k, piece) in text.split("/dev/loop").enumerate() {
        out.push_str(if k == 0 { piece } else { piece.trim_start_matches(|c: char| c.is_ascii_digit()) });
    }
    out
}

#[test]
fn two_jobs_recover_the_same_points_with_the_same_outcomes_as_one() {
    let s = State::new();
    // SQLite: nothing writes to the medium between the runs, so the
    // recorded run's points are the same ones (a live PostgreSQL's later
    // writes move the last flush interval's point).
    let db = format!("sqlite:{}/t.db", medium(&s, "crash-jobs"));
    let args = |jobs: &'static str, last: bool| {
        let mut a = vec!["--json", "durability", "--db", db.as_str(), "--medium", "crash-jobs"];
        a.extend(["--clients", "2", "--cut-after", "2s", "--crash-points", "6", "--cache", "honest,lying"]);
        a.extend(["--settings", "synchronous=full"]);
        a.extend(["--jobs", jobs]);
        if last {
            a.push("--last-run");
        }
        a
    };
    let mut runs = Vec::new();
    for (jobs, last) in [("1", false), ("2", true)] {
        // Not --quiet (State::sb's): the point lines are the progress.
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_storbench"))
            .current_dir(s.path(""))
            .env("STORBENCH_STATE", s.state())
            .env("STORBENCH_RESULTS", s.path("r.db"))
            .args(args(jobs, last))
            .output()
            .unwrap();
        let code = run.status.code().unwrap_or(-1);
        let (out, err) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
        assert!(code == 0 || code == 1, "--jobs {jobs}: {code} {err}");
        let doc: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
        let lines = point_lines(&unplaced(&err));
        assert_eq!(lines.len(), 12, "--jobs {jobs}: a line per point of both cells: {err}");
        // `done` counts up 1..=of within each cell, whatever order the points finish in.
        for (cell, chunk) in lines.chunks(6).enumerate() {
            let done: Vec<u64> = chunk.iter().map(|l| l.0).collect();
            assert_eq!(done, (1..=6).collect::<Vec<_>>(), "--jobs {jobs}, cell {cell}: {err}");
            assert!(chunk.iter().all(|l| l.1 == 6), "{err}");
        }
        // Per point (by cell and index): what it showed.
        let mut points: Vec<(usize, u64, String)> =
            lines.iter().enumerate().map(|(i, l)| (i / 6, l.2, l.3.clone())).collect();
        points.sort();
        let doc: serde_json::Value = serde_json::from_str(&unplaced(&doc.to_string())).unwrap();
        let mut cells = doc["cells"].as_array().unwrap().clone();
        for c in &mut cells {
            c.as_object_mut().unwrap().remove("seconds_per_point");
        }
        assert!(loops_and_mounts(&s).is_empty(), "--jobs {jobs}: left: {:?}", loops_and_mounts(&s));
        nothing_left(&s);
        runs.push((code, points, cells));
    }
    let lying = cell(&runs[0].2, "synchronous=full", "lying");
    assert!(!lying["bad_points"].as_array().unwrap().is_empty(), "bad points to compare too: {lying}");
    assert_eq!(runs[0].0, runs[1].0, "the same exit code");
    assert_eq!(runs[0].1, runs[1].1, "each point showed the same with 1 and 2 jobs");
    assert_eq!(runs[0].2, runs[1].2, "the same tallies with 1 and 2 jobs");
}

#[test]
fn a_wal_segment_recycled_within_the_run_turns_the_wal_extent_reduction_off_and_says_which() {
    let s = State::new();
    s.ok(&[
        "media",
        "create",
        "crash-recy",
        "--size",
        "1G",
        "--fs",
        "ext4",
        "--model",
        "sata-ssd",
        "--record",
    ]);
    // The smallest WAL the server keeps (two 16 MB segments): a checkpoint
    // within the run removes or recycles the segments before its redo point.
    s.ok(&["pg", "up", "crash-recy1", "--data", "crash-recy", "-c", "shared_buffers=64MB"]);
    s.ok(&["tpcc", "build", "--db", "managed:crash-recy1", "--warehouses", "1"]);
    let child = s
        .sb()
        .args(["--json", "durability", "--db", "managed:crash-recy1", "--medium", "crash-recy"])
        .args(["--workload", "tpcc", "--clients", "2", "--cut-after", "4s", "--crash-points", "all"])
        .args([
            "--checkpoint-every",
            "100ms",
            "--settings",
            "max_wal_size=32MB",
            "--settings",
            "min_wal_size=32MB",
        ])
        .args(["--cache", "honest"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (said, out, err) = interrupt_at_line(child, "WAL-extent reduction off");
    let said = said.unwrap_or_else(|| panic!("no line says the reduction is off: {err}"));
    // The segment's file name: 24 hexadecimal digits, timeline first.
    let segment = said
        .split(|c: char| !c.is_ascii_hexdigit())
        .find(|w| w.len() == 24 && w.starts_with("00000001"))
        .unwrap_or_else(|| panic!("no segment named: {said}"));
    assert!(said.contains(&format!("WAL segment {segment} of the run was recycled")), "{said}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {err}", String::from_utf8_lossy(&out.stdout)));
    let off = &doc["cells"][0];
    let note = off["note"].as_str().unwrap_or_else(|| panic!("no note: {off}"));
    assert!(note.starts_with("WAL-extent reduction off:") && note.contains(segment), "{off}");
    assert!(note.contains("recycled"), "{off}");
    assert_eq!(off["predicted"], 0, "{off}");
    nothing_left(&s);
    assert!(loops_and_mounts(&s).is_empty(), "left: {:?}", loops_and_mounts(&s));
}

/// Reads a running storbench's stderr until a line holds `needle` (at most
/// 180 s: without it the run would go on through every point), then
/// interrupts it (Ctrl-C): that line, its output, and all of its stderr.
fn interrupt_at_line(
    mut child: std::process::Child,
    needle: &str,
) -> (Option<String>, std::process::Output, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for l in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l.clone());
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let said = std::iter::from_fn(|| {
        rx.recv_timeout(give_up.saturating_duration_since(std::time::Instant::now())).ok()
    })
    .find(|l| l.contains(needle));
    // SAFETY: a signal to the child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    (said, out, reader.join().unwrap())
}
