//! `media calibrate`'s work: running the grid on a device (each step
//! handed to the caller to run, record and show), fitting a model family to
//! what it measured or to a table of published figures (with an optional
//! held-out check), and the model file's text with its provenance. The
//! caller writes the file ([`super::model_file::write_model`]) after it has
//! shown the fit.

use std::path::Path;

use storbench_emu::fit::{self, Cell, CellFit, Family, Fitted, Row, Sustained};
use storbench_io::{Prepared, Profile};
use storbench_sysmon::PathInfo;

use super::{figures, now, sustained, CalError, Grid, Ran, Stepped, Timing};

/// What the grid measured: a row per cell and the sustained write.
#[derive(Debug, Default)]
pub struct Measured {
    /// Each cell's figures.
    pub rows: Vec<Row>,
    /// The sustained write's once-a-second MB/s (when it ran).
    pub sustained: Option<Sustained>,
}

/// Runs the grid's `profiles` (a profile per cell, then the sustained
/// write when there is one) on `prep`. `step` runs one profile with the
/// progress text it is given (`cell 3/17 rand-4k-r100-qd1`) and records it.
pub fn measure<E>(
    prep: &Prepared,
    cells: &[Cell],
    profiles: &[Profile],
    t: &Timing,
    step: &mut dyn FnMut(&Profile, &str) -> Result<Stepped, E>,
) -> Result<Grid<Measured>, E> {
    let n = profiles.len();
    let source = format!("measured on {}", prep.target.path.display());
    let mut out = Measured::default();
    for (i, p) in profiles.iter().enumerate() {
        let what = match cells.get(i) {
            Some(c) => format!("cell {}/{n} {}", i + 1, c.label()),
            None => format!("{}/{n} sustained 256k write, {} s", i + 1, t.sustained.as_secs()),
        };
        let s = step(p, &what)?;
        match s.ran {
            Ran::Done => {}
            Ran::Stopped => return Ok(Grid::Stopped(out)),
            Ran::Failed(f) => return Ok(Grid::Failed(f)),
        }
        match cells.get(i) {
            Some(c) => {
                let fig = s.kept().map(|r| figures(c, r)).unwrap_or_default();
                out.rows.push(Row { cell: *c, fig, source: source.clone() });
            }
            None => out.sustained = Some(sustained(s.per_second, source.clone())),
        }
    }
    Ok(Grid::Done(out))
}

/// A fitted model and its model file's text.
pub struct Calibrated {
    /// The fit.
    pub fitted: Fitted,
    /// The model file (TOML, with its provenance).
    pub model: String,
}

/// Fits `family` to what the grid measured on `prep` (`info`: the path's
/// filesystem and device) and writes the model file's text.
pub fn fit_measured(
    family: Family,
    m: &Measured,
    prep: &Prepared,
    info: &PathInfo,
    quick: bool,
) -> Result<Calibrated, CalError> {
    // A disk's probe is a slice of the disk: its seeks are short ones, and
    // the seek curve is fitted on the disk's stroke (`disk_size`), not the
    // probe's.
    let given: Vec<fit::Given> = match family {
        Family::Hdd if info.disk_bytes > prep.target.size => vec![fit::Given {
            key: "disk_size".into(),
            value: info.disk_bytes.to_string(),
            source: format!(
                "the size of {} (/sys/block/{0}/size), the disk the probe is a slice of",
                info.disk
            ),
        }],
        _ => Vec::new(),
    };
    let fitted = fit::fit(family, &m.rows, m.sustained.as_ref(), prep.target.size, &given)
        .map_err(|e| CalError::Failed(format!("fitting {}: {e}", family.as_str())))?;
    let host = storbench_sysmon::host_env();
    let mut prov = toml::Table::new();
    prov.insert("from".into(), "measured".into());
    prov.insert(
        "device".into(),
        format!(
            "{} ({}{})",
            prep.target.path.display(),
            if prep.target.is_block {
                "block device".to_string()
            } else {
                format!("file on {}", info.device)
            },
            if info.fs_type.is_empty() || prep.target.is_block {
                String::new()
            } else {
                format!(", {}", info.fs_type)
            }
        )
        .into(),
    );
    prov.insert("host".into(), host["host"].as_str().unwrap_or_default().into());
    prov.insert("kernel".into(), host["kernel"].as_str().unwrap_or_default().into());
    prov.insert("date".into(), now().into());
    prov.insert("storbench_version".into(), env!("CARGO_PKG_VERSION").into());
    prov.insert("grid".into(), Timing::grid_name(quick).into());
    prov.insert("size".into(), (prep.target.size as i64).into());
    prov.insert("engine".into(), prep.engine.name().into());
    let model = storbench_emu::table::model_file(&fitted, prov);
    Ok(Calibrated { fitted, model })
}

/// A model fitted to a table of published figures.
pub struct TableFit {
    /// The fit (on every row, or on every other row with a holdout).
    pub fitted: Fitted,
    /// The rows left out, predicted by the fit (empty without a holdout).
    pub held: Vec<CellFit>,
    /// Rows fitted.
    pub fitted_rows: usize,
    /// Rows held out.
    pub held_out_rows: usize,
    /// The model file (TOML, with its provenance).
    pub model: String,
}

/// Splits the rows for a held-out check: even rows fitted, odd rows held out.
fn split(table: &Path, rows: &[Row], holdout: bool) -> Result<(Vec<Row>, Vec<Row>), CalError> {
    if !holdout {
        return Ok((rows.to_vec(), Vec::new()));
    }
    if rows.len() < 4 {
        return Err(CalError::Usage(format!(
            "--holdout: {} has {} rows; a held-out check needs at least 4",
            table.display(),
            rows.len()
        )));
    }
    let (tr, te): (Vec<_>, Vec<_>) = rows.iter().cloned().enumerate().partition(|(i, _)| i % 2 == 0);
    Ok((tr.into_iter().map(|x| x.1).collect(), te.into_iter().map(|x| x.1).collect()))
}

/// Fits `family` to the table at `table` (CSV, docs/media.md) for a medium
/// of `size` bytes; with `holdout`, on every other row, predicting the rest.
pub fn fit_table(table: &Path, family: Family, size: u64, holdout: bool) -> Result<TableFit, CalError> {
    let text = std::fs::read_to_string(table)
        .map_err(|e| CalError::Usage(format!("--from-table {}: {e}", table.display())))?;
    let rows = storbench_emu::table::parse(&table.display().to_string(), &text).map_err(CalError::Usage)?;
    let given = storbench_emu::table::given(&table.display().to_string(), &text).map_err(CalError::Usage)?;
    let (train, test) = split(table, &rows, holdout)?;
    // A disk's rows describe the whole disk (a data sheet's seek is over
    // its stroke): with its size given, that is the span they are fitted
    // and predicted over.
    let size = match given.iter().find(|g| g.key == "disk_size") {
        Some(g) => storbench_metrics::units::parse_size(&g.value).ok().filter(|&d| d > 0).unwrap_or(size),
        None => size,
    };
    let fitted = fit::fit(family, &train, None, size, &given)
        .map_err(|e| CalError::Usage(format!("--from-table {}: {e}", table.display())))?;
    let held = if holdout {
        fit::evaluate(&fitted.spec, &test, size).map_err(|e| CalError::Failed(e.to_string()))?
    } else {
        Vec::new()
    };
    let mut prov = toml::Table::new();
    prov.insert("from".into(), "table".into());
    prov.insert("table".into(), table.display().to_string().into());
    let mut sources: Vec<String> = rows.iter().map(|r| r.source.clone()).collect();
    sources.sort();
    sources.dedup();
    prov.insert("table_sources".into(), toml::Value::Array(sources.into_iter().map(Into::into).collect()));
    let comments: Vec<toml::Value> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix('#'))
        .map(|c| c.trim().to_string().into())
        .collect();
    if !comments.is_empty() {
        prov.insert("table_notes".into(), toml::Value::Array(comments));
    }
    prov.insert("date".into(), now().into());
    prov.insert("storbench_version".into(), env!("CARGO_PKG_VERSION").into());
    prov.insert("size".into(), (size as i64).into());
    if holdout {
        prov.insert("holdout".into(), toml::Value::Table(holdout_table(&held, train.len(), test.len())));
    }
    let model = storbench_emu::table::model_file(&fitted, prov);
    Ok(TableFit { fitted, held, fitted_rows: train.len(), held_out_rows: test.len(), model })
}

/// The model file's `[calibration.holdout]`: rows, median errors, cells.
fn holdout_table(held: &[CellFit], fitted: usize, held_out: usize) -> toml::Table {
    let refs: Vec<&CellFit> = held.iter().collect();
    let [i, m, p] = fit::median_abs(&refs);
    let mut h = toml::Table::new();
    h.insert("fitted_rows".into(), (fitted as i64).into());
    h.insert("held_out_rows".into(), (held_out as i64).into());
    for (k, v) in [("median_abs_iops_pct", i), ("median_abs_mean_pct", m), ("median_abs_p99_pct", p)] {
        if let Some(v) = v {
            h.insert(k.into(), ((v * 100.0).round() / 100.0).into());
        }
    }
    h.insert("cells".into(), storbench_emu::table::cells_toml(held));
    h
}
