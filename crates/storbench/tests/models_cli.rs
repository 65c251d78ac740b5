//! The shipped model files (models/*.toml): each parameter a file sets, and
//! each one its calibration assumed, has a source in its `[sources]` table
//! (issue 26: a model is built from device-level facts, each cited), and
//! every source names a parameter the file's base model has, so a source
//! cannot drift from the parameter it cites.

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

/// The parameters of each built-in model, as `media models` lists them,
/// with their defaults.
fn built_in_params() -> Vec<(String, BTreeMap<String, String>)> {
    let out = Command::cargo_bin("storbench").unwrap().args(["--json", "media", "models"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    v.iter()
        .map(|m| {
            let keys = m["params"].as_array().unwrap().iter().map(|p| {
                (p["key"].as_str().unwrap().to_string(), p["default"].as_str().unwrap_or("").to_string())
            });
            (m["name"].as_str().unwrap().to_string(), keys.collect())
        })
        .collect()
}

#[test]
fn every_shipped_model_file_cites_a_source_for_each_parameter() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models");
    let bases = built_in_params();
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let doc: toml::Table = std::fs::read_to_string(&p).unwrap().parse().unwrap();
        let base = doc.get("base").and_then(|b| b.as_str()).unwrap_or_else(|| panic!("{name}: no base"));
        let params_of = |m: &str| bases.iter().find(|(b, _)| b == m).map(|(_, p)| p);
        let params = params_of(base).unwrap_or_else(|| panic!("{name}: base {base}"));
        // A network model's device behind its link takes backing.KEY.
        let backing = params.get("backing").map(|d| doc.get("backing").and_then(|b| b.as_str()).unwrap_or(d));
        let backing_params = backing.and_then(params_of);
        let sources =
            doc.get("sources").and_then(|s| s.as_table()).unwrap_or_else(|| panic!("{name}: no [sources]"));
        for (k, v) in sources {
            let text = v.as_str().unwrap_or_else(|| panic!("{name}: source {k} is not text"));
            assert!(text.trim().len() >= 10, "{name}: source of {k} says nothing: {text:?}");
            let known = params.contains_key(k)
                || k.strip_prefix("array.").is_some() && doc.contains_key("array")
                || k.strip_prefix("backing.")
                    .is_some_and(|b| backing_params.is_some_and(|p| p.contains_key(b)));
            assert!(known, "{name}: a source for {k}, which base {base} has no parameter of");
        }
        // Each parameter the file sets (top-level values; the array's shape
        // as array.KEY) and each its calibration assumed.
        let mut cited: Vec<String> = doc
            .iter()
            .filter(|(k, v)| *k != "base" && !v.is_table() && !v.is_array())
            .map(|(k, _)| k.clone())
            .collect();
        if let Some(a) = doc.get("array").and_then(|a| a.as_table()) {
            cited.extend(a.keys().map(|k| format!("array.{k}")));
        }
        if let Some(assumed) =
            doc.get("calibration").and_then(|c| c.get("assumed")).and_then(|a| a.as_array())
        {
            cited.extend(assumed.iter().map(|a| a.as_str().unwrap().to_string()));
        }
        for k in &cited {
            assert!(sources.contains_key(k), "{name}: {k} is set or assumed, with no source in [sources]");
        }
        // And the binary takes the file as a model.
        let out =
            Command::cargo_bin("storbench").unwrap().args(["media", "models"]).arg(&p).output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        n += 1;
    }
    assert!(n >= 15, "the studies' model files ship: {n} found");
}
