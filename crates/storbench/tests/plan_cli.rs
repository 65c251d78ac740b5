//! `storbench run PLAN`: a plan runs its matrix as tagged runs, skips what
//! is complete on a rerun, records a failed cell and goes on, and refuses a
//! bad plan before anything runs.

use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

fn sb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(dir).env("STORBENCH_RESULTS", dir.join("r.db")).arg("--quiet");
    c
}

fn runs(dir: &Path) -> Vec<Value> {
    let out = sb(dir).args(["--json", "results", "list", "--plan", "t"]).output().unwrap();
    serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().cloned().unwrap()
}

const PLAN: &str = r#"
name = "t"
repeats = 2

[target.here]
path = "./data"

[axes]
target = ["here"]

[[workload]]
kind = "tpcb"
init = { scale = 1 }
run = { db = "sqlite:{target}/b.db", clients = "1", duration = "1s" }
"#;

#[test]
fn a_plan_runs_its_cells_and_a_rerun_skips_them() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("p.toml"), PLAN).unwrap();
    // Not quiet: a progress line per cell, with the plan's time left.
    let loud = || {
        let mut c = Command::cargo_bin("storbench").unwrap();
        c.current_dir(d.path()).env("STORBENCH_RESULTS", d.path().join("r.db"));
        c
    };
    let out = loud().args(["run", "p.toml", "--no-report"]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for n in ["1/2", "2/2"] {
        assert!(err.contains(&format!("cell {n} target=here/tpcb#r")), "{err}");
    }
    assert_eq!(err.matches(": running (about ").count(), 2, "{err}");
    assert_eq!(err.matches(": complete in ").count(), 2, "{err}");
    let list = runs(d.path());
    let measured: Vec<&Value> = list.iter().filter(|r| r["kind"] == "tpcb").collect();
    assert_eq!(measured.len(), 2, "one run per repeat");
    let mut cells: Vec<&str> = measured.iter().map(|r| r["cell"].as_str().unwrap()).collect();
    cells.sort();
    assert_eq!(cells, ["target=here/tpcb#r1", "target=here/tpcb#r2"]);
    for r in &measured {
        assert_eq!(r["status"], "complete");
        assert_eq!(r["label"], "target=here");
        assert_eq!(r["config"]["axes"]["target"], "here");
    }
    assert_eq!(list.iter().filter(|r| r["kind"] == "tpcb-init").count(), 2, "init runs are tagged too");
    assert!(d.path().join("data/b.db").exists(), "{{target}} is the target's directory");

    // A rerun finds every cell complete and runs nothing; a dry run says
    // so first (and --fresh would redo them).
    let dry = sb(d.path()).args(["run", "p.toml", "--dry-run"]).output().unwrap();
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(text.contains("2 cells, all complete: nothing to run"), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("   done  storbench")).count(), 2, "{text}");
    let fresh = sb(d.path()).args(["run", "p.toml", "--dry-run", "--fresh"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&fresh.stdout).contains("complete"));
    let out = loud().args(["run", "p.toml", "--no-report"]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("complete already, skipped").count(), 2, "{err}");
    assert!(!err.contains("running"), "{err}");
    assert_eq!(runs(d.path()).len(), list.len());
    // --fresh redoes them.
    assert!(sb(d.path()).args(["run", "p.toml", "--no-report", "--fresh"]).status().unwrap().success());
    assert_eq!(runs(d.path()).iter().filter(|r| r["kind"] == "tpcb").count(), 4);

    // A cell whose definition changed since its complete run (here its
    // target's directory) is not complete: a dry run and a run say so, and
    // the run redoes it; a comment changes nothing.
    std::fs::write(d.path().join("p.toml"), PLAN.replace("\"./data\"", "\"./data2\" # moved")).unwrap();
    let dry = sb(d.path()).args(["run", "p.toml", "--dry-run"]).output().unwrap();
    let err = String::from_utf8_lossy(&dry.stderr);
    assert_eq!(err.matches("changed since, so it runs again").count(), 2, "{err}");
    assert!(!String::from_utf8_lossy(&dry.stdout).contains("complete"), "{err}");
    assert!(sb(d.path()).args(["run", "p.toml", "--no-report"]).status().unwrap().success());
    assert_eq!(runs(d.path()).iter().filter(|r| r["kind"] == "tpcb").count(), 6);
    assert!(d.path().join("data2/b.db").exists());
    std::fs::write(d.path().join("p.toml"), PLAN.replace("\"./data\"", "\"./data2\" # a comment")).unwrap();
    let dry = sb(d.path()).args(["run", "p.toml", "--dry-run"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&dry.stdout).contains("all complete"),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
}

#[test]
fn a_failed_cell_is_recorded_and_the_plan_goes_on() {
    let d = tempfile::tempdir().unwrap();
    // The first workload runs on a database nobody initialised: it fails.
    let plan = PLAN.replace("repeats = 2", "repeats = 1").replace(
        "[[workload]]\nkind = \"tpcb\"\ninit",
        "[[workload]]\nkind = \"tpcb\"\nname = \"noinit\"\nrun = { db = \"sqlite:{target}/none.db\", duration = \"1s\" }\n\n[[workload]]\nkind = \"tpcb\"\ninit",
    );
    std::fs::write(d.path().join("p.toml"), plan).unwrap();
    let out = sb(d.path()).args(["run", "p.toml", "--no-report"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let list = runs(d.path());
    let failed: Vec<&Value> = list.iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["cell"], "target=here/noinit#r1");
    assert!(failed[0]["config"]["error"].as_str().unwrap().contains("exit code 2"));
    assert!(list.iter().any(|r| r["cell"] == "target=here/tpcb#r1" && r["status"] == "complete"));

    // --stop-on-error stops at it.
    let d2 = tempfile::tempdir().unwrap();
    std::fs::copy(d.path().join("p.toml"), d2.path().join("p.toml")).unwrap();
    let out = sb(d2.path()).args(["run", "p.toml", "--no-report", "--stop-on-error"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!runs(d2.path()).iter().any(|r| r["kind"] == "tpcb" && r["status"] == "complete"));
}

#[test]
fn a_bad_plan_is_refused_before_anything_runs() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        (
            PLAN.replace("target = [\"here\"]", "target = [\"there\"]"),
            "p.toml:9: axis 'target': 'there' is not defined",
        ),
        (PLAN.replace("kind = \"tpcb\"", "kind = \"tpce\""), "p.toml:12: unknown workload kind 'tpce'"),
        (
            PLAN.replace("clients = \"1\"", "clientz = \"1\""),
            "workload 'tpcb' (`storbench tpcb run`): unexpected argument '--clientz'",
        ),
        (PLAN.replace("target = [\"here\"]", "target = []"), "axis 'target' has no values"),
        (PLAN.replace("path = \"./data\"", "path = \"/nonexistent/deeper/data\""), "does not exist"),
        (PLAN.replace("[axes]", "[axis]"), "p.toml:8"),
    ];
    for (text, want) in cases {
        std::fs::write(d.path().join("p.toml"), &text).unwrap();
        let out = sb(d.path()).args(["run", "p.toml", "--no-report"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {err}");
        assert!(err.contains(want), "wanted '{want}' in: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!d.path().join("r.db").exists(), "{want}: the plan wrote results");
        assert!(!d.path().join("data").exists(), "{want}: the plan created its target");
    }
    // A dry run prints the matrix and creates nothing.
    std::fs::write(d.path().join("p.toml"), PLAN).unwrap();
    let out = sb(d.path()).args(["run", "p.toml", "--dry-run"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("2 cells") && text.contains("target=here/tpcb#r2"), "{text}");
    // The estimate counts an io set's own profiles: quick has 4, each 1 s
    // ramp-up + 3 s in the quick form.
    let quick = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans/quick.toml");
    let out = sb(d.path()).args(["run", "--dry-run", "--quick"]).arg(&quick).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let io = text.lines().find(|l| l.contains("all/io#r1")).unwrap_or_else(|| panic!("{text}"));
    assert!(io.contains("~   16s"), "{io}");
    assert!(!d.path().join("r.db").exists() && !d.path().join("data").exists());
}

#[test]
fn every_shipped_plan_and_its_quick_form_validate() {
    let plans = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans");
    let mut n = 0;
    for e in std::fs::read_dir(&plans).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".published.toml") {
            // A study's published figures (report --against) sit beside
            // their plan.
            assert!(plans.join(format!("{stem}.toml")).exists(), "{name}: no plan {stem}.toml beside it");
            continue;
        }
        if p.extension().is_some_and(|x| x == "toml") {
            for quick in [false, true] {
                let mut c = Command::cargo_bin("storbench").unwrap();
                // As a user runs them: from the repository's root, where a
                // plan's relative model files (models/*.toml) are found.
                c.current_dir(plans.join("..")).args(["run", "--dry-run"]).arg(&p);
                if quick {
                    c.arg("--quick");
                }
                let out = c.output().unwrap();
                assert!(out.status.success(), "{}: {}", p.display(), String::from_utf8_lossy(&out.stderr));
            }
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(text.starts_with("# "), "{}: a plan opens with a header comment", p.display());
            n += 1;
        }
    }
    assert!(n >= 5, "the quick plan and the four study plans ship");
}

#[test]
fn the_quick_plan_runs_end_to_end_and_ends_with_its_report() {
    let d = tempfile::tempdir().unwrap();
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans/quick.toml");
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(d.path()).env("STORBENCH_RESULTS", d.path().join("r.db"));
    let out = c.arg("run").arg(&plan).args(["--quick", "--report", "q.html"]).output().unwrap();
    let (so, se) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{se}");
    let list = {
        let out = sb(d.path()).args(["--json", "results", "list", "--plan", "quick"]).output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().cloned().unwrap()
    };
    for kind in ["io", "tpcb", "tpcc"] {
        let r = list.iter().find(|r| r["kind"] == kind).unwrap_or_else(|| panic!("no {kind} run"));
        assert_eq!(r["status"], "complete", "{kind}");
    }
    let html = std::fs::read_to_string(d.path().join("q.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("quick"));
    assert!(se.contains("report: q.html"), "{se}");
    // The terminal summary leads with one sentence per workload, then the
    // main tables; it names no environment key (that is the HTML's and
    // `results show`'s) and fits a terminal. A sentence's warnings stand
    // indented under it ("  ⚠ cpu.steal 11.2 %" on a host whose other
    // guests took CPU), as do what it measured on and what its latency
    // tells, so the sentences are read without them.
    let lines: Vec<&str> = so.lines().filter(|l| !l.starts_with("  ")).collect();
    assert!(lines[0].starts_with("storbench report: quick"), "{so}");
    assert!(lines[1].starts_with("I/O: read-random-8k ") && lines[1].contains(" IOPS (p99 "), "{so}");
    assert!(lines[2].starts_with("TPC-B: ") && lines[2].contains(" TPS at 1 client, "), "{so}");
    assert!(lines[3].starts_with("TPC-C: ") && lines[3].contains(" NOPM at 1 user, "), "{so}");
    assert!(so.contains("plan quick · tpcb — TPS"), "{so}");
    for key in ["db.url", "kernel", "What differs"] {
        assert!(!so.contains(key), "the summary lists the environment ({key}): {so}");
    }
    let widest = so.lines().filter(|l| !lines[..4].contains(l)).map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 120, "a summary line is {widest} columns wide: {so}");
    assert!(
        d.path().join("storbench-data/tpcc.db").exists() && d.path().join("storbench-data/io.dat").exists()
    );
}

#[test]
fn ctrl_c_stops_the_plan_keeps_the_step_and_a_rerun_continues() {
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let plan = PLAN.replace("repeats = 2", "repeats = 1").replace("duration = \"1s\"", "duration = \"30s\"");
    std::fs::write(d.path().join("p.toml"), plan).unwrap();
    let mut c = sb(d.path());
    c.args(["run", "p.toml", "--no-report"]).process_group(0);
    let mut child = c.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    // Ctrl-C reaches the whole process group: the plan and its cell.
    // SAFETY: signalling our own child's process group.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let list = runs(d.path());
    let r = list.iter().find(|r| r["kind"] == "tpcb").unwrap();
    assert_eq!(r["status"], "interrupted");
    // The cell is not complete: a rerun (shortened) runs it again.
    let short = std::fs::read_to_string(d.path().join("p.toml")).unwrap().replace("\"30s\"", "\"1s\"");
    std::fs::write(d.path().join("p.toml"), short).unwrap();
    assert!(sb(d.path()).args(["run", "p.toml", "--no-report"]).status().unwrap().success());
    let list = runs(d.path());
    let tpcb: Vec<&Value> = list.iter().filter(|r| r["kind"] == "tpcb").collect();
    assert_eq!(tpcb.len(), 2);
    assert!(tpcb.iter().any(|r| r["status"] == "complete"));
}

/// A repeated workload in a `together` cell (`every`, `times`): each cycle
/// a run of its own, begun `every` apart from the group's instant, its
/// `{cycle}` filled; the cycles stop when the workload beside them ends.
#[test]
fn a_repeated_workload_runs_its_cycles_every_so_often_beside_the_others() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("cy.toml"),
        r#"
name = "surface-cy"
[target.data]
path = "./data"
[[workload]]
kind = "io"
name = "main"
run = { target = "{target}/m.dat", size = "8M", rw = "randread", bs = "4k", duration = "7s", rampup = "0s" }
together = "g"
[[workload]]
kind = "io"
name = "tick"
run = { target = "{target}/t-{cycle}.dat", size = "4M", rw = "write", bs = "64k", duration = "1s", rampup = "0s" }
together = "g"
every = "3s"
times = 10
"#,
    )
    .unwrap();
    let out = sb(d.path()).args(["run", "cy.toml", "--no-report"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let list = sb(d.path()).args(["--json", "results", "list", "--plan", "surface-cy"]).output().unwrap();
    let all: Vec<Value> = serde_json::from_slice::<Value>(&list.stdout).unwrap().as_array().cloned().unwrap();
    let show = |id: &Value| -> Value {
        let out = sb(d.path()).args(["--json", "results", "show", &id.to_string()]).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let recs: Vec<Value> = all.iter().map(|r| show(&r["id"])).collect();
    let ticks: Vec<&Value> =
        recs.iter().filter(|r| r["run"]["config"]["axes"]["workload"] == "tick").collect();
    // 7 s of main: cycles at 0, 3 and 6 s; none after main has ended.
    assert_eq!(ticks.len(), 3, "{err}");
    assert!(
        err.contains("tick ran 3 of its 10 cycles (every 3s): the workloads beside it had ended"),
        "{err}"
    );
    let mut starts: Vec<(String, chrono::DateTime<chrono::FixedOffset>)> = ticks
        .iter()
        .map(|r| {
            let t = r["steps"][0]["started_at"].as_str().unwrap();
            (
                r["run"]["config"]["axes"]["cycle"].as_str().unwrap().to_string(),
                chrono::DateTime::parse_from_rfc3339(t).unwrap(),
            )
        })
        .collect();
    starts.sort();
    assert_eq!(starts.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["1", "2", "3"]);
    for w in starts.windows(2) {
        let gap = (w[1].1 - w[0].1).num_milliseconds();
        // A child started 2 s ahead of its instant may still come up late
        // on a busy host; one run back to back would be over 4 s apart.
        assert!((2900..=3600).contains(&gap), "cycles {gap} ms apart, not 3 s");
    }
    let main = recs.iter().find(|r| r["run"]["config"]["axes"]["workload"] == "main").unwrap();
    let main_start =
        chrono::DateTime::parse_from_rfc3339(main["steps"][0]["started_at"].as_str().unwrap()).unwrap();
    assert!(
        (starts[0].1 - main_start).num_milliseconds().abs() < 100,
        "the first cycle begins with the group"
    );
    for k in 1..=3 {
        assert!(d.path().join(format!("data/t-{k}.dat")).exists(), "cycle {k}'s own file");
    }
}

/// A `together` group with `alone = true`: each workload alone, then both
/// in one cell started at one instant; the report leads with what the
/// neighbour cost, from the recorded runs.
#[test]
fn workloads_together_start_at_one_instant_and_the_report_gives_the_interference() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("nb.toml"),
        r#"
name = "nb"
alone = true
[target.data]
path = "./data"
[[workload]]
kind = "tpcb"
init = { scale = 1 }
run = { db = "sqlite:{target}/b.db", clients = "2", duration = "3s", rampup = "0s" }
together = "g"
[[workload]]
kind = "io"
name = "seqw"
run = { target = "{target}/n.dat", size = "32M", rw = "write", bs = "64k", rate_mbps = 16, duration = "3s", rampup = "0s" }
together = "g"
"#,
    )
    .unwrap();
    let out = sb(d.path()).args(["run", "nb.toml", "--no-report"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list = sb(d.path()).args(["--json", "results", "list", "--plan", "nb"]).output().unwrap();
    let all: Vec<Value> = serde_json::from_slice::<Value>(&list.stdout).unwrap().as_array().cloned().unwrap();
    let measured: Vec<&Value> = all.iter().filter(|r| r["kind"] != "tpcb-init").collect();
    let cells: Vec<&str> = measured.iter().map(|r| r["cell"].as_str().unwrap()).collect();
    assert_eq!(measured.len(), 4, "{cells:?}");
    let together: Vec<&Value> =
        measured.iter().copied().filter(|r| r["cell"] == "all/tpcb+seqw#r1").collect();
    assert_eq!(together.len(), 2, "one run per workload, linked by their cell: {cells:?}");
    for id in ["all/tpcb-alone#r1", "all/seqw-alone#r1"] {
        assert!(cells.contains(&id), "{id} in {cells:?}");
    }
    // Both first steps began at the common instant.
    let show = |id: &Value| -> Value {
        let out = sb(d.path()).args(["--json", "results", "show", &id.to_string()]).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let recs: Vec<Value> = together.iter().map(|r| show(&r["id"])).collect();
    let starts: Vec<chrono::DateTime<chrono::FixedOffset>> = recs
        .iter()
        .map(|r| chrono::DateTime::parse_from_rfc3339(r["steps"][0]["started_at"].as_str().unwrap()).unwrap())
        .collect();
    let apart = (starts[0] - starts[1]).num_milliseconds().abs();
    assert!(apart < 100, "together workloads began {apart} ms apart");
    for r in &recs {
        assert!(r["run"]["config"]["start_at"].is_string());
        assert_eq!(
            r["run"]["config"]["axes"]["with"],
            if r["run"]["kind"] == "io" { "tpcb" } else { "seqw" }
        );
    }

    // The report's sentence and table come from the recorded figures.
    let tps = |cell: &str| -> f64 {
        let r = measured.iter().find(|r| r["cell"] == cell && r["kind"] == "tpcb").unwrap();
        show(&r["id"])["steps"][0]["metrics"]["tps.client"]["value"].as_f64().unwrap()
    };
    let (alone, beside) = (tps("all/tpcb-alone#r1"), tps("all/tpcb+seqw#r1"));
    let fmt = storbench_metrics::units::format_figure;
    let out = sb(d.path()).args(["report", "nb", "--text"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let change = (beside / alone - 1.0) * 100.0;
    let verb = if change < 0.0 { "fell" } else { "rose" };
    let want = format!(
        "tpcb at clients=2 on all: TPS {verb} from {} TPS alone to {} TPS beside seqw ({change:+.0} %)",
        fmt(alone),
        fmt(beside)
    );
    assert!(text.contains(&want), "wanted '{want}' in\n{text}");
    // The neighbour is told by the bandwidth it recorded (bounded to 16 MB/s;
    // on a busy disk it may fall short of that).
    let seqw = measured.iter().find(|r| r["cell"] == "all/tpcb+seqw#r1" && r["kind"] == "io").unwrap();
    let mbps = show(&seqw["id"])["steps"][0]["metrics"]["io.mbps"]["value"].as_f64().unwrap();
    assert!(mbps <= 16.0 * 1.01, "the rate bounds the neighbour: {mbps} MB/s");
    let rate = format!("while seqw ran at {} MB/s.", fmt(mbps));
    assert!(text.contains(&rate), "wanted '{rate}' in\n{text}");
    assert!(text.contains("interference: beside its neighbours vs alone"), "{text}");
}

/// Regression: a plan's managed PostgreSQL on a target (`data =
/// "{target}"`) failed to start once `pg up` refused a data place whose
/// parent did not exist; the plan makes the instance's directory on the
/// target, and removes it with the instance at the plan's end.
#[test]
fn a_plan_starts_a_managed_postgres_on_its_target_and_removes_it_after() {
    let d = tempfile::tempdir().unwrap();
    // The managed server's OS user must be able to traverse it.
    Command::new("chmod").arg("755").arg(d.path()).status().unwrap();
    std::fs::create_dir(d.path().join("data")).unwrap();
    let state = d.path().join("state");
    let plan = r#"
name = "t"

[target.here]
path = "./data"

[db.pg]
managed = { data = "{target}" }

[axes]
target = ["here"]

[[workload]]
kind = "tpcb"
init = { scale = 1 }
run = { db = "{db}", clients = "1", duration = "1s" }
"#;
    std::fs::write(d.path().join("p.toml"), plan).unwrap();
    let out =
        sb(d.path()).env("STORBENCH_STATE", &state).args(["run", "p.toml", "--no-report"]).output().unwrap();
    let left: Vec<_> = std::fs::read_dir(d.path().join("data")).unwrap().map(|e| e.unwrap().path()).collect();
    let listed = sb(d.path()).env("STORBENCH_STATE", &state).args(["--json", "pg", "list"]).output().unwrap();
    let _ = sb(d.path()).env("STORBENCH_STATE", &state).args(["pg", "down", "--all", "--destroy"]).output();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let measured: Vec<Value> = runs(d.path()).into_iter().filter(|r| r["kind"] == "tpcb").collect();
    assert_eq!(measured.len(), 1);
    assert_eq!(measured[0]["status"], "complete");
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
    assert_eq!(listed.as_array().map(Vec::len), Some(0), "the plan's instance is gone: {listed}");
    assert!(left.is_empty(), "the instance's directory went with it: {left:?}");
}

/// A plan whose TPC-B clients outnumber its scale measures lock waits on
/// the branch rows: `run` says so, with the remedy, before anything runs.
#[test]
fn a_plan_with_tpcb_clients_above_its_scale_is_warned_about_before_it_runs() {
    let d = tempfile::tempdir().unwrap();
    let plan = PLAN.replace("clients = \"1\"", "clients = \"1,8\"");
    std::fs::write(d.path().join("p.toml"), plan).unwrap();
    let out = sb(d.path()).args(["run", "p.toml", "--dry-run"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: plan t: workload 'tpcb': 8 clients on scale 1") && err.contains("at least 8"),
        "{err}"
    );
    std::fs::write(d.path().join("p.toml"), PLAN).unwrap();
    let out = sb(d.path()).args(["run", "p.toml", "--dry-run"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}
