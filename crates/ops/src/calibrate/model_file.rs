//! Model files: writing one whole, keeping a validation in it, and what
//! `media models` lists and says about each (where it came from, its
//! median validated error). Reads and writes files; never prints.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::validate::Validation;
use super::{now, CalError, Timing};

/// Writes the model file whole (a temporary file renamed over it).
pub fn write_model(out: &Path, text: &str) -> Result<(), CalError> {
    let tmp = out.with_extension("toml.partial");
    std::fs::write(&tmp, text).map_err(|e| CalError::Failed(format!("writing {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, out).map_err(|e| CalError::Failed(format!("writing {}: {e}", out.display())))?;
    Ok(())
}

/// Checks `--out`: a file name in a directory that exists.
pub fn check_out(out: &Path) -> Result<(), CalError> {
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(CalError::Usage(format!(
            "--out {}: {} is not a directory",
            out.display(),
            dir.display()
        )));
    }
    if out.is_dir() {
        return Err(CalError::Usage(format!(
            "--out {}: a directory; give a file name such as my-disk.toml",
            out.display()
        )));
    }
    Ok(())
}

/// Whether `model` (as `media validate` takes it) names a file rather than
/// a built-in model.
pub fn is_file(model: &str) -> bool {
    model.ends_with(".toml") || model.contains('/')
}

/// Rounds to `places` decimals, as a model file keeps its figures.
fn round(v: f64, places: i32) -> f64 {
    let k = 10f64.powi(places);
    (v * k).round() / k
}

/// The model file's `[validation]` table.
fn validation_table(v: &Validation) -> toml::Table {
    let mut t = toml::Table::new();
    t.insert("against".into(), v.against.display().to_string().into());
    t.insert("date".into(), now().into());
    t.insert("storbench_version".into(), env!("CARGO_PKG_VERSION").into());
    t.insert("grid".into(), Timing::grid_name(v.quick).into());
    t.insert("rounds".into(), (v.rounds as i64).into());
    t.insert("cells_inside".into(), (v.comparison.inside as i64).into());
    t.insert(
        "cells_outside".into(),
        toml::Value::Array(v.comparison.outside.iter().map(|s| s.clone().into()).collect()),
    );
    if let Some(f) = v.floor {
        t.insert("floor_us".into(), round(f.qd1_p50_us, 1).into());
        if let Some(l) = f.qd1_p50_64k_us {
            t.insert("floor_64k_us".into(), round(l, 1).into());
        }
        t.insert("timed_extra_us".into(), round(f.timed_extra_us, 1).into());
        t.insert("timed_lead_us".into(), round(f.timed_lead_us, 1).into());
        if let Some(far) = f.timed_lead_far_us {
            t.insert("timed_lead_far_us".into(), round(far, 1).into());
        }
        t.insert("ceiling_iops".into(), f.qd16_iops.round().into());
        t.insert("ceiling_write_mb_s".into(), f.write_mb_s.round().into());
    }
    for (k, m) in ["median_abs_iops_pct", "median_abs_mean_pct", "median_abs_p50_pct", "median_abs_p99_pct"]
        .iter()
        .zip(&v.comparison.medians)
    {
        if let Some(m) = m {
            t.insert(k.to_string(), round(*m, 2).into());
        }
    }
    let split = v.comparison.split;
    for (k, m) in [
        ("median_abs_mean_emulator_pct", split.emulator_mean),
        ("median_abs_mean_model_pct", split.model_mean),
        ("median_spread_mean_device_pct", split.device_spread),
    ] {
        if let Some(m) = m {
            t.insert(k.into(), round(m, 2).into());
        }
    }
    if !v.db.is_empty() {
        let mut d = toml::Table::new();
        for r in v.db {
            let mut x = toml::Table::new();
            x.insert("device".into(), round(r.device, 1).into());
            x.insert("emulated".into(), round(r.emulated, 1).into());
            if let Some(p) = r.error_pct() {
                x.insert("error_pct".into(), round(p, 2).into());
            }
            x.insert("in_process".into(), round(r.in_process, 1).into());
            if let Some(p) = r.in_process_error_pct() {
                x.insert("in_process_error_pct".into(), round(p, 2).into());
            }
            d.insert(r.step.clone(), toml::Value::Table(x));
        }
        t.insert("db".into(), toml::Value::Table(d));
    }
    t
}

/// Keeps a validation in the model file at `path` (what `media models`
/// shows), its leading comments kept. A file that cannot be read or is
/// not TOML is left as it is.
pub fn record_validation(path: &Path, v: &Validation) -> Result<(), CalError> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(()) };
    let Ok(mut top) = text.parse::<toml::Table>() else { return Ok(()) };
    top.insert("validation".into(), toml::Value::Table(validation_table(v)));
    let head: String = text.lines().take_while(|l| l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    let body = toml::to_string(&top).map_err(|e| CalError::Failed(e.to_string()))?;
    write_model(path, &format!("{head}{body}"))
}

/// Where a model file came from, from its `[calibration]`.
fn source(cal: Option<&toml::Table>) -> String {
    let Some(c) = cal else { return "a user's file (no calibration recorded)".into() };
    let s = |k: &str| c.get(k).and_then(|v| v.as_str()).unwrap_or("?");
    match c.get("from").and_then(|v| v.as_str()) {
        Some("table") => format!(
            "fitted to the table {} ({})",
            s("table"),
            c.get("table_sources")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|s| s.as_str()).collect::<Vec<_>>().join("; "))
                .unwrap_or_default()
        ),
        _ => format!("measured on {} ({}, {})", s("device"), s("host"), s("date")),
    }
}

/// `media models`' line for a model file: where it came from and its
/// median validated error.
pub fn model_file_summary(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let top: toml::Table = text.parse().ok()?;
    let base = top.get("base")?.as_str()?.to_string();
    let src = source(top.get("calibration").and_then(|v| v.as_table()));
    let f = |t: &toml::Table, k: &str| {
        t.get(k).and_then(|v| v.as_float()).map(|v| format!("{v:.1} %")).unwrap_or_else(|| "-".into())
    };
    let val = match top.get("validation").and_then(|v| v.as_table()) {
        Some(v) => format!(
            "validated against {} ({}): median |error| IOPS {}, mean {}, p99 {} over {} cells",
            v.get("against").and_then(|x| x.as_str()).unwrap_or("?"),
            v.get("date").and_then(|x| x.as_str()).unwrap_or("?"),
            f(v, "median_abs_iops_pct"),
            f(v, "median_abs_mean_pct"),
            f(v, "median_abs_p99_pct"),
            v.get("cells_inside").and_then(|x| x.as_integer()).unwrap_or(0)
        ),
        None => "not validated (storbench media validate FILE --against DEVICE)".into(),
    };
    Some(format!("{} (base {base})\n  source: {src}\n  {val}", path.display()))
}

/// Where the built-in models' values come from (each parameter's doc
/// cites its own).
pub const BUILTIN_SOURCE: &str =
    "typical of the class: each parameter's source is in its line below (datasheets, published measurements, REFERENCE)";

/// The model files `media models` lists: those given, else every `*.toml`
/// under ./models (none if it does not exist).
pub fn model_files(given: Vec<PathBuf>) -> Result<Vec<PathBuf>, CalError> {
    if !given.is_empty() {
        for f in &given {
            if !f.is_file() {
                return Err(CalError::Usage(format!(
                    "{}: not a file (give model files, e.g. models/my-disk.toml)",
                    f.display()
                )));
            }
        }
        return Ok(given);
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir("models")
        .map(|d| {
            d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect()
        })
        .unwrap_or_default();
    out.sort();
    Ok(out)
}

/// A model file as `media models --json` gives it.
pub fn model_file_json(path: &Path) -> serde_json::Value {
    let top: Option<toml::Table> = std::fs::read_to_string(path).ok().and_then(|t| t.parse().ok());
    let get =
        |k: &str| top.as_ref().and_then(|t| t.get(k)).map(|v| serde_json::to_value(v).unwrap_or_default());
    json!({
        "file": path, "base": get("base"), "calibration": get("calibration"), "sources": get("sources"),
        "fit_error": get("fit_error"), "validated": get("validation"),
    })
}
