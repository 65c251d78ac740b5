//! Comparing a query's answer with a reference: the SF 1 answers (dbgen's,
//! computed with the validation parameters: the `tpchgen` crate's copy, and
//! for Q11 the full answer of TPC-H Tools, `answers/q11.out`, because
//! `tpchgen`'s prints `ps_partkey` four characters wide), or the same
//! query's answer from another engine.
//!
//! Tolerances follow clause 2.1.3.5 column by column, by the kind TPC-H
//! Tools' `check_answers/colprecision.txt` gives each column (copied below
//! as data): single values (`s_acctbal`, `o_totalprice`: `num`) match to
//! the cent, keys (`int`) and counts (`cnt`) exactly, text (`str`) after
//! trimming CHAR(n) padding; a sum may differ by $100 once rounded to cents;
//! an average or a ratio by 1 % of the reference once rounded to cents.
//! No tolerance applies to a kind that the specification does not give one.
//! Another engine's answer ran on the same data, so it is compared more
//! tightly, but still by kind, since engines round averages and divisions
//! differently: keys and counts exactly, single values, averages and ratios
//! once rounded to cents, sums within two cents.

use storbench_db::{Row, Value};

/// A reference cell: the text as given.
pub type Cell = String;

/// The first difference between an answer and its reference.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Mismatch {
    /// 1-based row of the first difference (0 when only the row count differs).
    pub row: usize,
    /// What differed, for a person to read.
    pub detail: String,
}

/// What a column of an answer holds, as TPC-H Tools' `colprecision.txt`
/// names it; each kind has its tolerance (clause 2.1.3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Text (names, dates, flags): equal after trimming.
    Str,
    /// A key or other integer column: equal.
    Int,
    /// A COUNT: equal.
    Cnt,
    /// A single decimal value (an account balance, a price): equal to the cent.
    Num,
    /// A SUM: within $100 once both are rounded to cents.
    Sum,
    /// An AVG: rounded to cents, within 1 % of the reference.
    Avg,
    /// A ratio: rounded to cents, within 1 % of the reference.
    Rat,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Str => "text",
            Kind::Int => "key",
            Kind::Cnt => "count",
            Kind::Num => "single value",
            Kind::Sum => "sum",
            Kind::Avg => "average",
            Kind::Rat => "ratio",
        }
    }
}

/// The kinds of query `q`'s columns, in order (TPC-H Tools'
/// `dbgen/check_answers/colprecision.txt`, one line per query).
pub fn kinds(q: u8) -> Option<&'static [Kind]> {
    use Kind::*;
    const K: [&[Kind]; 22] = [
        &[Str, Str, Sum, Sum, Sum, Sum, Avg, Avg, Avg, Cnt],
        &[Num, Str, Str, Int, Str, Str, Str, Str],
        &[Int, Sum, Str, Int],
        &[Str, Cnt],
        &[Str, Sum],
        &[Sum],
        &[Str, Str, Int, Sum],
        &[Int, Rat],
        &[Str, Int, Sum],
        &[Int, Str, Sum, Num, Str, Str, Str, Str],
        &[Int, Sum],
        &[Str, Sum, Sum],
        &[Cnt, Cnt],
        &[Rat],
        &[Int, Str, Str, Str, Sum],
        &[Str, Str, Num, Cnt],
        &[Avg],
        &[Str, Int, Int, Str, Num, Sum],
        &[Sum],
        &[Str, Str],
        &[Str, Cnt],
        &[Num, Cnt, Sum],
    ];
    K.get(usize::from(q).checked_sub(1)?).copied()
}

/// TPC-H Tools' Q11 answer at SF 1 (`dbgen/answers/q11.out`), whole keys.
const Q11_SF1: &str = include_str!("answers/q11.out");

/// The SF 1 reference answer of query `q` as rows of cells (header dropped).
pub fn reference_sf1(q: u8) -> Option<Vec<Vec<Cell>>> {
    let text = if q == 11 { Q11_SF1 } else { tpchgen::q_and_a::answers_sf1::answer(q as i32)? };
    Some(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .skip(1)
            .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
            .collect(),
    )
}

/// A result value as comparable text: numbers in full precision.
pub fn cell(v: &Value) -> Cell {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Text(t) => t.trim().to_string(),
    }
}

/// Rows as cells.
pub fn cells(rows: &[Row]) -> Vec<Vec<Cell>> {
    rows.iter().map(|r| r.0.iter().map(cell).collect()).collect()
}

fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A value rounded to cents, as whole cents (exact to compare).
fn cents(v: f64) -> i64 {
    (v * 100.0).round() as i64
}

/// Whether `got` agrees with the reference cell `want` of a column of kind
/// `kind` (clause 2.1.3.5). Cells that do not read as numbers compare as text.
pub fn cell_matches(got: &str, want: &str, kind: Kind) -> bool {
    let (Some(g), Some(w)) = (number(got), number(want)) else { return got.trim() == want.trim() };
    match kind {
        Kind::Str => got.trim() == want.trim() || g == w,
        Kind::Int | Kind::Cnt => g == w,
        Kind::Num => cents(g) == cents(w),
        // Whole cents: $100 is 10 000 of them.
        Kind::Sum => (cents(g) - cents(w)).abs() <= 10_000,
        Kind::Avg | Kind::Rat => {
            let r = cents(g) as f64 / 100.0;
            let (lo, hi) = (0.99 * w, 1.01 * w);
            let (lo, hi) = (lo.min(hi), lo.max(hi));
            r >= lo - 1e-9 && r <= hi + 1e-9
        }
    }
}

/// Whether another engine's cell `got` agrees with `want` in a column of
/// kind `kind`. Both ran on the same data, but engines round differently:
/// MariaDB gives an average or a decimal division four places beyond its
/// operands (`div_precision_increment`), 25.522006 where PostgreSQL gives
/// 25.5220058532573370, and SQLite computes in floats. So text compares
/// after trimming, keys and counts exactly, single values, averages and
/// ratios once rounded to cents (or within a millionth, a difference at
/// MariaDB's sixth place that straddles a half cent), sums within two cents.
pub fn cell_matches_engine(got: &str, want: &str, kind: Kind) -> bool {
    let (Some(g), Some(w)) = (number(got), number(want)) else { return got.trim() == want.trim() };
    match kind {
        Kind::Str => got.trim() == want.trim() || g == w,
        Kind::Int | Kind::Cnt => g == w,
        Kind::Num | Kind::Avg | Kind::Rat => cents(g) == cents(w) || (g - w).abs() <= 1e-6,
        Kind::Sum => (cents(g) - cents(w)).abs() <= 2,
    }
}

/// Whether two numbers agree within a float's rounding (one part in 10¹²),
/// for an answer whose columns have no kind (none of queries 1–22).
fn float_matches(got: &str, want: &str) -> bool {
    match (number(got), number(want)) {
        (Some(g), Some(w)) => (g - w).abs() <= 1e-9_f64.max(1e-12 * g.abs().max(w.abs())),
        _ => got.trim() == want.trim(),
    }
}

fn first_difference(
    got: &[Vec<Cell>],
    want: &[Vec<Cell>],
    matches: &dyn Fn(usize, &str, &str) -> Result<(), String>,
) -> Option<Mismatch> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.len() != w.len() {
            return Some(Mismatch {
                row: i + 1,
                detail: format!("row {}: {} columns, reference has {}", i + 1, g.len(), w.len()),
            });
        }
        for (j, (a, b)) in g.iter().zip(w).enumerate() {
            if let Err(why) = matches(j, a, b) {
                return Some(Mismatch {
                    row: i + 1,
                    detail: format!(
                        "row {}, column {}: got {a}, reference {b}{why} (row [{}] vs [{}])",
                        i + 1,
                        j + 1,
                        g.join("|"),
                        w.join("|")
                    ),
                });
            }
        }
    }
    if got.len() != want.len() {
        return Some(Mismatch {
            row: got.len().min(want.len()) + 1,
            detail: format!("{} rows, reference has {}", got.len(), want.len()),
        });
    }
    None
}

/// The first difference between another engine's answer `want` to query
/// `q` and `got`, each column with its kind's tolerance between engines
/// ([`cell_matches_engine`]), or `None` when they agree. A query without
/// kinds (none of 1–22) compares within a float's rounding.
pub fn compare_engine(q: u8, got: &[Vec<Cell>], want: &[Vec<Cell>]) -> Option<Mismatch> {
    let Some(k) = kinds(q) else {
        return first_difference(got, want, &|_, a, b| {
            if float_matches(a, b) {
                Ok(())
            } else {
                Err(String::new())
            }
        });
    };
    first_difference(got, want, &|j, a, b| {
        let kind = k.get(j).copied().unwrap_or(Kind::Str);
        if cell_matches_engine(a, b, kind) {
            Ok(())
        } else {
            Err(format!(" ({} column: {})", kind.name(), engine_tolerance(kind)))
        }
    })
}

/// The first difference between `got` and the SF 1 reference answer `want`
/// of query `q` (from [`reference_sf1`]), each column with its kind's
/// tolerance (clause 2.1.3.5), or `None` when they agree. A query without
/// kinds (none outside 1–22) compares within a float's rounding.
pub fn compare_sf1(q: u8, got: &[Vec<Cell>], want: &[Vec<Cell>]) -> Option<Mismatch> {
    let Some(k) = kinds(q) else { return compare_engine(q, got, want) };
    first_difference(got, want, &|j, a, b| {
        let kind = k.get(j).copied().unwrap_or(Kind::Str);
        if cell_matches(a, b, kind) {
            Ok(())
        } else {
            Err(format!(" ({} column: {})", kind.name(), tolerance(kind)))
        }
    })
}

fn engine_tolerance(kind: Kind) -> &'static str {
    match kind {
        Kind::Str => "must match",
        Kind::Int | Kind::Cnt => "must match exactly",
        Kind::Num | Kind::Avg | Kind::Rat => "must match once rounded to cents",
        Kind::Sum => "within two cents",
    }
}

fn tolerance(kind: Kind) -> &'static str {
    match kind {
        Kind::Str => "must match",
        Kind::Int | Kind::Cnt => "must match exactly",
        Kind::Num => "must match to the cent",
        Kind::Sum => "within $100",
        Kind::Avg | Kind::Rat => "within 1 % once rounded to cents",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: &[&str]) -> Vec<Cell> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn reference_answers_load_for_every_query() {
        for q in 1..=22 {
            let r = reference_sf1(q).unwrap();
            assert!(!r.is_empty(), "Q{q}");
            assert!(r.iter().all(|row| row.len() == kinds(q).unwrap().len()), "Q{q}: a kind per column");
            assert_eq!(compare_sf1(q, &r, &r), None, "Q{q} against itself");
        }
        assert_eq!(reference_sf1(1).unwrap().len(), 4);
        assert_eq!(reference_sf1(1).unwrap()[0][9], "1478493");
        assert_eq!(reference_sf1(11).unwrap()[0], row(&["129760", "17538456.86"]));
        assert_eq!(reference_sf1(11).unwrap().len(), 1048);
        assert_eq!(kinds(0), None);
        assert_eq!(kinds(23), None);
    }

    #[test]
    fn tolerances_follow_the_specification() {
        use Kind::*;
        assert!(cell_matches("1478493", "1478493", Cnt));
        assert!(!cell_matches("1478494", "1478493", Cnt));
        assert!(cell_matches("17.0", "17", Int), "an integral value from a DECIMAL column");
        assert!(cell_matches("56586554400.73", "56586554400.73", Sum));
        assert!(cell_matches("56586554450.00", "56586554400.73", Sum), "a sum within $100");
        assert!(!cell_matches("56586554601.00", "56586554400.73", Sum), "a sum off by more than $100");
        assert!(cell_matches("25.5220058532573370", "25.52", Avg), "an average rounded to cents");
        assert!(cell_matches("25.70", "25.52", Avg), "an average within 1 %");
        assert!(!cell_matches("25.80", "25.52", Avg));
        assert!(cell_matches("0.0344", "0.03", Rat), "a ratio within 1 % once rounded");
        assert!(!cell_matches("0.0455", "0.03", Rat));
        assert!(cell_matches("9938.529999999999", "9938.53", Num), "a float's rounding");
        assert!(!cell_matches("9938.00", "9938.53", Num), "a single value has no tolerance");
        assert!(!cell_matches("9938.52", "9938.53", Num));
        assert!(cell_matches("GERMANY                  ", "GERMANY", Str));
        assert!(!cell_matches("FRANCE", "GERMANY", Str));
    }

    #[test]
    fn another_engine_matches_by_column_kind() {
        use Kind::*;
        // MariaDB's AVG of a DECIMAL(15,2), four places beyond: Q1 avg_qty.
        assert!(cell_matches_engine("25.522006", "25.5220058532573370", Avg));
        assert!(cell_matches_engine("0.050081", "0.05008133906964238", Avg));
        assert!(!cell_matches_engine("25.53", "25.5220058532573370", Avg), "a cent off an average");
        // A rounding at the sixth place that straddles a half cent.
        assert!(cell_matches_engine("12.345000", "12.3449999999999", Rat));
        assert!(cell_matches_engine("0.0344", "0.03", Rat), "equal once rounded to cents");
        assert!(!cell_matches_engine("0.0456", "0.03", Rat));
        assert!(cell_matches_engine("56586554400.7300001", "56586554400.73", Sum));
        assert!(cell_matches_engine("56586554400.75", "56586554400.73", Sum), "two cents off a sum");
        assert!(!cell_matches_engine("56586554401.73", "56586554400.73", Sum), "a dollar off a sum");
        assert!(!cell_matches_engine("9938.00", "9938.53", Num));
        assert!(cell_matches_engine("9938.529999999999", "9938.53", Num));
        assert!(!cell_matches_engine("14877", "14876", Cnt));
        assert!(cell_matches_engine("17.0", "17", Int));
        assert!(cell_matches_engine("GERMANY   ", "GERMANY", Str));
        // The whole Q1 row MariaDB gives against PostgreSQL's.
        let maria = row(&[
            "A",
            "F",
            "380456",
            "532348211.65",
            "505822441.4861",
            "526165934.000839",
            "25.575155",
            "35785.709307",
            "0.050081",
            "14876",
        ]);
        let pg = row(&[
            "A",
            "F",
            "380456",
            "532348211.65",
            "505822441.4861",
            "526165934.000839",
            "25.575154611454693",
            "35785.70930693735",
            "0.05008133906964238",
            "14876",
        ]);
        assert_eq!(compare_engine(1, std::slice::from_ref(&maria), std::slice::from_ref(&pg)), None);
        let mut off = maria;
        off[9] = "14875".into();
        let m = compare_engine(1, &[off], &[pg]).unwrap();
        assert!(m.detail.contains("count column: must match exactly"), "{}", m.detail);
    }

    #[test]
    fn q11s_partkeys_compare_whole() {
        // tpchgen's copy printed 129760 as 1297: any key starting so passed.
        let want = reference_sf1(11).unwrap();
        let mut got = want.clone();
        got[0][0] = "129761".into();
        let m = compare_sf1(11, &got, &want).unwrap();
        assert!(m.detail.contains("key column"), "{}", m.detail);
        got[0][0] = "1297".into();
        assert!(compare_sf1(11, &got, &want).is_some());
    }

    #[test]
    fn the_first_differing_row_is_named() {
        let want = vec![row(&["A", "1"]), row(&["B", "2"])];
        assert_eq!(compare_engine(0, &want, &want), None);
        let got = vec![row(&["A", "1"]), row(&["B", "3"])];
        let m = compare_engine(0, &got, &want).unwrap();
        assert_eq!(m.row, 2);
        assert!(m.detail.contains("got 3, reference 2"), "{}", m.detail);
        let m = compare_engine(0, &want[..1], &want).unwrap();
        assert_eq!(m.row, 2);
        assert!(m.detail.contains("1 rows, reference has 2"));
    }
}
