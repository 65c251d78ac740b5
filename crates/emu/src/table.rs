//! Device tables: a CSV a user writes from a datasheet, a review or a
//! paper (`media calibrate --from-table`), one measured cell per row, and
//! the model file a fit writes (parameters, where each came from, the
//! error per cell). The table's columns:
//!
//! `bs,pattern,read_pct,qd,iops,mb_s,lat_mean_us,lat_p99_us,source`, and
//! optionally `lat_p50_us`. Lines starting with `#` are comments; `pattern`
//! is `random`, `sequential` or `flush` (write `bs` then flush at QD1; its
//! latency is the pair's, what pg_test_fsync's ops/s inverts to); any of the
//! figures may be empty but a row has at least one; `source` is required.
//! Columns are found by name; others are ignored.
//!
//! A parameter a datasheet states outright (an HDD's spindle speed) is a
//! line `#param KEY = VALUE, SOURCE` ([`given`]): the fit keeps it and fits
//! the others around it, instead of assuming the class's value.

use crate::fit::{Cell, CellFit, Figures, Fitted, Given, Pattern, Row};

/// The table's `#param KEY = VALUE, SOURCE` lines; `name` (its path)
/// starts every error, which names the line and what is wrong.
pub fn given(name: &str, text: &str) -> Result<Vec<Given>, String> {
    let mut out: Vec<Given> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(rest) = line.trim().strip_prefix("#param") else { continue };
        let n = i + 1;
        let want =
            "want '#param KEY = VALUE, SOURCE' (e.g. '#param rpm = 15000, the product manual, table 2')";
        let (key, rest) = rest.split_once('=').ok_or_else(|| format!("{name} line {n}: no '=': {want}"))?;
        let (value, source) = rest
            .split_once(',')
            .ok_or_else(|| format!("{name} line {n}: no source after the value: {want}"))?;
        let (key, value, source) = (key.trim(), value.trim(), source.trim());
        if key.is_empty() || value.is_empty() || source.is_empty() {
            return Err(format!("{name} line {n}: '{}': {want}", line.trim()));
        }
        if out.iter().any(|g| g.key == key) {
            return Err(format!("{name} line {n}: parameter '{key}' is given twice"));
        }
        out.push(Given { key: key.into(), value: value.into(), source: source.into() });
    }
    Ok(out)
}

/// The columns a table must have.
pub const COLUMNS: [&str; 9] =
    ["bs", "pattern", "read_pct", "qd", "iops", "mb_s", "lat_mean_us", "lat_p99_us", "source"];

/// Splits one CSV line: commas, double-quoted fields (`""` is a quote).
fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

/// Parses a table; `name` (its path) starts every error, which names the
/// line, the column and the value.
pub fn parse(name: &str, text: &str) -> Result<Vec<Row>, String> {
    let mut lines =
        text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let (_, header) =
        lines.next().ok_or_else(|| format!("{name}: no header line (want {})", COLUMNS.join(",")))?;
    let header: Vec<String> = split(header).into_iter().map(|h| h.to_lowercase()).collect();
    let missing: Vec<&str> = COLUMNS.iter().copied().filter(|c| !header.iter().any(|h| h == c)).collect();
    if !missing.is_empty() {
        return Err(format!(
            "{name}: missing column(s) {}; a table's header is {} (lat_p50_us optional)",
            missing.join(", "),
            COLUMNS.join(",")
        ));
    }
    let col = |c: &str| header.iter().position(|h| h == c);
    let mut rows = Vec::new();
    for (i, line) in lines {
        let n = i + 1;
        let f = split(line);
        let get = |c: &str| col(c).and_then(|i| f.get(i)).map(String::as_str).unwrap_or("");
        let bad = |c: &str, v: &str, why: &str| format!("{name} line {n}: {c} '{v}': {why}");
        let bs_s = get("bs");
        let bs = storbench_metrics::units::parse_size(bs_s)
            .map_err(|_| bad("bs", bs_s, "give a size such as 4k, 128k, 1m"))?;
        if bs == 0 || !bs.is_multiple_of(512) {
            return Err(bad("bs", bs_s, "give a multiple of 512 bytes"));
        }
        let pat = get("pattern");
        let pattern =
            Pattern::parse(pat).ok_or_else(|| bad("pattern", pat, "use random, sequential or flush"))?;
        let rp = get("read_pct");
        let read_pct: u8 = rp
            .parse()
            .ok()
            .filter(|v| *v <= 100)
            .ok_or_else(|| bad("read_pct", rp, "give a whole number 0 to 100"))?;
        let q = get("qd");
        let qd: u32 = q
            .parse()
            .ok()
            .filter(|v| (1..=4096).contains(v))
            .ok_or_else(|| bad("qd", q, "give a whole number 1 to 4096"))?;
        if pattern == Pattern::Flush && (qd != 1 || read_pct != 0) {
            return Err(format!("{name} line {n}: a flush row is a write at QD1: read_pct 0, qd 1"));
        }
        let num = |c: &str| -> Result<Option<f64>, String> {
            let v = get(c);
            if v.is_empty() {
                return Ok(None);
            }
            let x: f64 = v.parse().map_err(|_| bad(c, v, "not a number"))?;
            if !x.is_finite() || x < 0.0 {
                return Err(bad(c, v, "must be a number ≥ 0"));
            }
            if x == 0.0 {
                return Err(bad(c, v, "must be more than 0 (leave it empty when unknown)"));
            }
            Ok(Some(x))
        };
        let fig = Figures {
            iops: num("iops")?,
            mb_s: num("mb_s")?,
            lat_mean_us: num("lat_mean_us")?,
            lat_p50_us: if col("lat_p50_us").is_some() { num("lat_p50_us")? } else { None },
            lat_p99_us: num("lat_p99_us")?,
        };
        if fig == Figures::default() {
            return Err(format!(
                "{name} line {n}: no figure: give at least one of iops, mb_s, lat_mean_us, lat_p99_us"
            ));
        }
        let source = get("source");
        if source.is_empty() {
            return Err(format!("{name} line {n}: source is empty: cite where the figures come from"));
        }
        rows.push(Row { cell: Cell { bs, pattern, read_pct, qd }, fig, source: source.to_string() });
    }
    if rows.is_empty() {
        return Err(format!("{name}: no rows under the header"));
    }
    Ok(rows)
}

fn opt(t: &mut toml::Table, k: &str, v: Option<f64>) {
    if let Some(v) = v {
        t.insert(k.into(), toml::Value::Float((v * 100.0).round() / 100.0));
    }
}

/// The error table's rows, as the model file keeps them.
pub fn cells_toml(cells: &[CellFit]) -> toml::Value {
    toml::Value::Array(
        cells
            .iter()
            .map(|c| {
                let mut t = toml::Table::new();
                t.insert("cell".into(), c.cell.label().into());
                t.insert("bs".into(), (c.cell.bs as i64).into());
                t.insert("pattern".into(), c.cell.pattern.as_str().into());
                t.insert("read_pct".into(), (c.cell.read_pct as i64).into());
                t.insert("qd".into(), (c.cell.qd as i64).into());
                opt(&mut t, "measured_iops", c.measured.iops_at(c.cell.bs));
                opt(&mut t, "measured_mean_us", c.measured.lat_mean_us);
                opt(&mut t, "measured_p99_us", c.measured.lat_p99_us);
                opt(&mut t, "predicted_iops", c.predicted.iops_at(c.cell.bs));
                opt(&mut t, "predicted_mean_us", c.predicted.lat_mean_us);
                opt(&mut t, "predicted_p99_us", c.predicted.lat_p99_us);
                let [i, m, p] = c.errors();
                opt(&mut t, "error_iops_pct", i);
                opt(&mut t, "error_mean_pct", m);
                opt(&mut t, "error_p99_pct", p);
                t.insert("source".into(), c.source.clone().into());
                toml::Value::Table(t)
            })
            .collect(),
    )
}

/// The model file of a fit: `base`, the parameters, `[calibration]`
/// (where it came from: `provenance`), `[sources]` (each parameter's),
/// `[fit_error]` (median absolute errors) and `[[cells]]`.
pub fn model_file(f: &Fitted, provenance: toml::Table) -> String {
    let mut top = toml::Table::new();
    top.insert("base".into(), f.spec.base.clone().into());
    for (k, v) in &f.spec.set {
        top.insert(k.clone(), v.clone().into());
    }
    let mut cal = provenance;
    cal.insert("family".into(), f.family.as_str().into());
    let undetermined: Vec<toml::Value> =
        f.params.iter().filter(|p| !p.determined).map(|p| p.key.clone().into()).collect();
    cal.insert("assumed".into(), toml::Value::Array(undetermined));
    top.insert("calibration".into(), toml::Value::Table(cal));
    let mut src = toml::Table::new();
    for p in &f.params {
        src.insert(p.key.clone(), p.source.clone().into());
    }
    top.insert("sources".into(), toml::Value::Table(src));
    let refs: Vec<&CellFit> = f.cells.iter().collect();
    let [i, m, p] = crate::fit::median_abs(&refs);
    let mut fe = toml::Table::new();
    opt(&mut fe, "median_abs_iops_pct", i);
    opt(&mut fe, "median_abs_mean_pct", m);
    opt(&mut fe, "median_abs_p99_pct", p);
    top.insert("fit_error".into(), toml::Value::Table(fe));
    top.insert("cells".into(), cells_toml(&f.cells));
    format!(
        "# A device model fitted by `storbench media calibrate` (docs/media.md).\n# Use it with `storbench media create NAME --model THIS.toml`; check it with `storbench media validate`.\n{}",
        toml::to_string(&top).expect("a model file serialises")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "bs,pattern,read_pct,qd,iops,mb_s,lat_mean_us,lat_p99_us,source\n";

    #[test]
    fn a_table_parses_with_comments_quotes_and_empty_figures() {
        let t = format!(
            "# a datasheet\n{HEAD}4k,random,100,1,,,85,,\"vendor datasheet rev 2, p.2\"\n8k,flush,0,1,,,2500,,\"pg_test_fsync, review X\"\n"
        );
        let rows = parse("t.csv", &t).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].cell, Cell { bs: 4096, pattern: Pattern::Random, read_pct: 100, qd: 1 });
        assert_eq!(rows[0].fig.lat_mean_us, Some(85.0));
        assert_eq!(rows[0].fig.iops, None);
        assert_eq!(rows[0].source, "vendor datasheet rev 2, p.2");
        assert_eq!(rows[1].cell.pattern, Pattern::Flush);
    }

    #[test]
    fn bad_tables_name_the_line_column_and_value() {
        let e = parse("t.csv", "bs,pattern,qd,iops,source\n4k,random,1,5,x\n").unwrap_err();
        assert!(e.contains("missing column(s) read_pct, mb_s, lat_mean_us, lat_p99_us"), "{e}");
        let e = parse("t.csv", &format!("{HEAD}4k,random,100,1,fast,,,,x\n")).unwrap_err();
        assert!(e.contains("line 2: iops 'fast': not a number"), "{e}");
        let e = parse("t.csv", &format!("{HEAD}4k,random,100,1,,,-5,,x\n")).unwrap_err();
        assert!(e.contains("lat_mean_us '-5'"), "{e}");
        let e = parse("t.csv", &format!("{HEAD}4k,zigzag,100,1,,,5,,x\n")).unwrap_err();
        assert!(e.contains("pattern 'zigzag'"), "{e}");
        let e = parse("t.csv", &format!("{HEAD}4k,random,100,1,,,5,,\n")).unwrap_err();
        assert!(e.contains("source is empty"), "{e}");
        let e = parse("t.csv", &format!("{HEAD}4k,random,100,1,,,,,x\n")).unwrap_err();
        assert!(e.contains("no figure"), "{e}");
    }

    #[test]
    fn param_lines_give_parameters_with_their_source() {
        let t = format!(
            "# notes\n#param rpm = 15000, Cheetah 15K.7 manual, p. 9\n{HEAD}4k,random,100,1,,,6000,,x\n"
        );
        let g = given("t.csv", &t).unwrap();
        assert_eq!(
            g,
            vec![Given {
                key: "rpm".into(),
                value: "15000".into(),
                source: "Cheetah 15K.7 manual, p. 9".into()
            }]
        );
        // A param line is a comment to the rows' parser.
        assert_eq!(parse("t.csv", &t).unwrap().len(), 1);
        let e = given("t.csv", "#param rpm 15000, x\n").unwrap_err();
        assert!(e.contains("t.csv line 1: no '='"), "{e}");
        let e = given("t.csv", "\n#param rpm = 15000\n").unwrap_err();
        assert!(e.contains("line 2: no source after the value"), "{e}");
        let e = given("t.csv", "#param rpm = 1, a\n#param rpm = 2, b\n").unwrap_err();
        assert!(e.contains("line 2: parameter 'rpm' is given twice"), "{e}");
    }
}
