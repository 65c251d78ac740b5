//! The model files shipped in models/ (issue 26): each loads and builds,
//! and names a source for every parameter it sets — a datasheet or
//! published figure (a table row), or what was assumed and why — in its
//! `[sources]` table. A parameter set without one fails here: a model is a
//! set of cited facts, never numbers tuned to the result it predicts.

use std::path::{Path, PathBuf};

use storbench_emu::model::Spec;

fn shipped() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../models"));
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    out.sort();
    out
}

/// The parameters `path` sets (it must load and build) without a source
/// of at least a few words in its `[sources]`.
fn uncited(path: &Path) -> Vec<String> {
    let spec = Spec::from_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    spec.build(1 << 30).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let table: toml::Table = std::fs::read_to_string(path).unwrap().parse().unwrap();
    let sources = table.get("sources").and_then(|s| s.as_table()).cloned().unwrap_or_default();
    let cited = |k: &str| sources.get(k).and_then(|v| v.as_str()).is_some_and(|s| s.trim().len() >= 10);
    spec.set.keys().filter(|k| !cited(k)).cloned().collect()
}

#[test]
fn every_shipped_model_builds_and_cites_each_parameter() {
    let files = shipped();
    assert!(files.len() >= 10, "the studies' models are missing: {files:?}");
    for path in files {
        let missing = uncited(&path);
        assert!(missing.is_empty(), "{}: no source in [sources] for {missing:?}", path.display());
    }
}

#[test]
fn a_parameter_without_a_source_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.toml");
    let text = "base = \"sata-ssd\"\nread = \"80us\"\nunits = 4\nflush = \"1ms\"\n\
                [sources]\nread = \"a data sheet, p. 2\"\nflush = \"?\"\n";
    std::fs::write(&p, text).unwrap();
    assert_eq!(uncited(&p), ["flush", "units"], "a missing source and a source of no words");
}
