//! `storbench results` through the binary: results on stdout (JSON with
//! `--json`, kept by `--quiet`), a number is a run id and nothing else, and
//! `%`/`_` in a key find no run.

use std::path::Path;
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

fn sb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("storbench").unwrap();
    c.current_dir(dir).env("STORBENCH_RESULTS", dir.join("r.db")).arg("--quiet");
    c
}

fn ok(dir: &Path, args: &[&str]) -> Output {
    let out = sb(dir).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn results_are_on_stdout_and_run_keys_are_exact() {
    let d = tempfile::tempdir().unwrap();
    let args = ["--json", "io", "--size", "16M", "--bs", "4k", "--rw", "randread", "--duration", "1s"];
    let rec: Value = serde_json::from_slice(&ok(d.path(), &args).stdout).unwrap();
    let id = rec["run"]["id"].as_i64().unwrap();
    let uuid = rec["run"]["uuid"].as_str().unwrap().to_string();

    // --quiet hides the live line, not the results.
    let list = ok(d.path(), &["results", "list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains(&uuid[..8]) && text.contains("complete"), "{text}");
    assert!(list.stderr.is_empty(), "{}", String::from_utf8_lossy(&list.stderr));
    let runs: Value = serde_json::from_slice(&ok(d.path(), &["--json", "results", "list"]).stdout).unwrap();
    assert_eq!(runs[0]["id"], id);
    let shown: Value =
        serde_json::from_slice(&ok(d.path(), &["--json", "results", "show", &id.to_string()]).stdout)
            .unwrap();
    assert_eq!(shown["run"]["uuid"], uuid.as_str());
    let by_prefix = ok(d.path(), &["results", "show", &uuid[..13]]);
    assert!(String::from_utf8_lossy(&by_prefix.stdout).contains(&uuid));

    // A number that names no run, and LIKE wildcards, find nothing: exit 2, one line.
    for key in [(id + 1).to_string(), "%".into(), "_".into(), "%%%%%%%%".into()] {
        for verb in ["show", "export"] {
            let out = sb(d.path()).args(["results", verb, &key]).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{verb} {key}: {err}");
            assert!(err.contains(&format!("no run '{key}'")), "{err}");
            assert_eq!(err.trim().lines().count(), 1);
            assert!(out.stdout.is_empty());
        }
    }
}

#[test]
fn results_delete_removes_the_named_runs_and_nothing_on_a_bad_key() {
    let d = tempfile::tempdir().unwrap();
    let args = ["--json", "io", "--size", "16M", "--bs", "4k", "--rw", "randread", "--duration", "1s"];
    let mut ids = Vec::new();
    for _ in 0..2 {
        let rec: Value = serde_json::from_slice(&ok(d.path(), &args).stdout).unwrap();
        ids.push(rec["run"]["id"].as_i64().unwrap().to_string());
    }
    let count = || {
        let runs: Value =
            serde_json::from_slice(&ok(d.path(), &["--json", "results", "list"]).stdout).unwrap();
        runs.as_array().unwrap().len()
    };
    // One unknown key among good ones: exit 2, one line, nothing deleted.
    let out = sb(d.path()).args(["results", "delete", &ids[0], "77"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no run '77'") && err.trim().lines().count() == 1, "{err}");
    assert_eq!(count(), 2);

    let out = ok(d.path(), &["results", "delete", &ids[0]]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with(&format!("deleted run {} (", ids[0])), "{text}");
    assert_eq!(count(), 1);
    let out = sb(d.path()).args(["results", "show", &ids[0]]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // `results show` prints the settings one key a line, not one JSON line.
    let shown = ok(d.path(), &["results", "show", &ids[1]]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.lines().any(|l| l == "config:"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 160), "a line wider than 160 columns:\n{text}");
}
