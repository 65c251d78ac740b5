//! Query parameters as the specification's qgen draws them (clause 2.4.N.3,
//! one function per query), the validation parameters (clause 2.4.N.4) that
//! the SF 1 reference answers were computed with, and the query orders of
//! the streams (Appendix A).
//!
//! Dates are computed here, not in SQL: `date '1998-12-01' - interval '90'
//! day` becomes the literal `1998-09-02` for every engine, since SQLite has
//! no interval arithmetic and a planner folds the constant anyway.
//! Decimal bounds (Q6's discount ± 0.01) are computed as exact decimal text
//! for the same reason: SQLite stores REAL, and 0.06 + 0.01 in binary
//! floating point is not the 0.07 stored in the rows.

use storbench_db::Dialect;

use crate::rand_tpc::TpcRng;

/// The specification's ordered sets (Appendix A): stream `s` runs the
/// queries in `STREAM_ORDERS[s % 41]`; stream 0 is the power test's.
pub const STREAM_ORDERS: [[u8; 22]; 41] = [
    [14, 2, 9, 20, 6, 17, 18, 8, 21, 13, 3, 22, 16, 4, 11, 15, 1, 10, 19, 5, 7, 12],
    [21, 3, 18, 5, 11, 7, 6, 20, 17, 12, 16, 15, 13, 10, 2, 8, 14, 19, 9, 22, 1, 4],
    [6, 17, 14, 16, 19, 10, 9, 2, 15, 8, 5, 22, 12, 7, 13, 18, 1, 4, 20, 3, 11, 21],
    [8, 5, 4, 6, 17, 7, 1, 18, 22, 14, 9, 10, 15, 11, 20, 2, 21, 19, 13, 16, 12, 3],
    [5, 21, 14, 19, 15, 17, 12, 6, 4, 9, 8, 16, 11, 2, 10, 18, 1, 13, 7, 22, 3, 20],
    [21, 15, 4, 6, 7, 16, 19, 18, 14, 22, 11, 13, 3, 1, 2, 5, 8, 20, 12, 17, 10, 9],
    [10, 3, 15, 13, 6, 8, 9, 7, 4, 11, 22, 18, 12, 1, 5, 16, 2, 14, 19, 20, 17, 21],
    [18, 8, 20, 21, 2, 4, 22, 17, 1, 11, 9, 19, 3, 13, 5, 7, 10, 16, 6, 14, 15, 12],
    [19, 1, 15, 17, 5, 8, 9, 12, 14, 7, 4, 3, 20, 16, 6, 22, 10, 13, 2, 21, 18, 11],
    [8, 13, 2, 20, 17, 3, 6, 21, 18, 11, 19, 10, 15, 4, 22, 1, 7, 12, 9, 14, 5, 16],
    [6, 15, 18, 17, 12, 1, 7, 2, 22, 13, 21, 10, 14, 9, 3, 16, 20, 19, 11, 4, 8, 5],
    [15, 14, 18, 17, 10, 20, 16, 11, 1, 8, 4, 22, 5, 12, 3, 9, 21, 2, 13, 6, 19, 7],
    [1, 7, 16, 17, 18, 22, 12, 6, 8, 9, 11, 4, 2, 5, 20, 21, 13, 10, 19, 3, 14, 15],
    [21, 17, 7, 3, 1, 10, 12, 22, 9, 16, 6, 11, 2, 4, 5, 14, 8, 20, 13, 18, 15, 19],
    [2, 9, 5, 4, 18, 1, 20, 15, 16, 17, 7, 21, 13, 14, 19, 8, 22, 11, 10, 3, 12, 6],
    [16, 9, 17, 8, 14, 11, 10, 12, 6, 21, 7, 3, 15, 5, 22, 20, 1, 13, 19, 2, 4, 18],
    [1, 3, 6, 5, 2, 16, 14, 22, 17, 20, 4, 9, 10, 11, 15, 8, 12, 19, 18, 13, 7, 21],
    [3, 16, 5, 11, 21, 9, 2, 15, 10, 18, 17, 7, 8, 19, 14, 13, 1, 4, 22, 20, 6, 12],
    [14, 4, 13, 5, 21, 11, 8, 6, 3, 17, 2, 20, 1, 19, 10, 9, 12, 18, 15, 7, 22, 16],
    [4, 12, 22, 14, 5, 15, 16, 2, 8, 10, 17, 9, 21, 7, 3, 6, 13, 18, 11, 20, 19, 1],
    [16, 15, 14, 13, 4, 22, 18, 19, 7, 1, 12, 17, 5, 10, 20, 3, 9, 21, 11, 2, 6, 8],
    [20, 14, 21, 12, 15, 17, 4, 19, 13, 10, 11, 1, 16, 5, 18, 7, 8, 22, 9, 6, 3, 2],
    [16, 14, 13, 2, 21, 10, 11, 4, 1, 22, 18, 12, 19, 5, 7, 8, 6, 3, 15, 20, 9, 17],
    [18, 15, 9, 14, 12, 2, 8, 11, 22, 21, 16, 1, 6, 17, 5, 10, 19, 4, 20, 13, 3, 7],
    [7, 3, 10, 14, 13, 21, 18, 6, 20, 4, 9, 8, 22, 15, 2, 1, 5, 12, 19, 17, 11, 16],
    [18, 1, 13, 7, 16, 10, 14, 2, 19, 5, 21, 11, 22, 15, 8, 17, 20, 3, 4, 12, 6, 9],
    [13, 2, 22, 5, 11, 21, 20, 14, 7, 10, 4, 9, 19, 18, 6, 3, 1, 8, 15, 12, 17, 16],
    [14, 17, 21, 8, 2, 9, 6, 4, 5, 13, 22, 7, 15, 3, 1, 18, 16, 11, 10, 12, 20, 19],
    [10, 22, 1, 12, 13, 18, 21, 20, 2, 14, 16, 7, 15, 3, 4, 17, 5, 19, 6, 8, 9, 11],
    [10, 8, 9, 18, 12, 6, 1, 5, 20, 11, 17, 22, 16, 3, 13, 2, 15, 21, 14, 19, 7, 4],
    [7, 17, 22, 5, 3, 10, 13, 18, 9, 1, 14, 15, 21, 19, 16, 12, 8, 6, 11, 20, 4, 2],
    [2, 9, 21, 3, 4, 7, 1, 11, 16, 5, 20, 19, 18, 8, 17, 13, 10, 12, 15, 6, 14, 22],
    [15, 12, 8, 4, 22, 13, 16, 17, 18, 3, 7, 5, 6, 1, 9, 11, 21, 10, 14, 20, 19, 2],
    [15, 16, 2, 11, 17, 7, 5, 14, 20, 4, 21, 3, 10, 9, 12, 8, 13, 6, 18, 19, 22, 1],
    [1, 13, 11, 3, 4, 21, 6, 14, 15, 22, 18, 9, 7, 5, 10, 20, 12, 16, 17, 8, 19, 2],
    [14, 17, 22, 20, 8, 16, 5, 10, 1, 13, 2, 21, 12, 9, 4, 18, 3, 7, 6, 19, 15, 11],
    [9, 17, 7, 4, 5, 13, 21, 18, 11, 3, 22, 1, 6, 16, 20, 14, 15, 10, 8, 2, 12, 19],
    [13, 14, 5, 22, 19, 11, 9, 6, 18, 15, 8, 10, 7, 4, 17, 16, 3, 1, 12, 2, 21, 20],
    [20, 5, 4, 14, 11, 1, 6, 16, 8, 22, 7, 3, 2, 12, 21, 19, 17, 13, 10, 15, 18, 9],
    [3, 7, 14, 15, 6, 5, 21, 20, 18, 10, 4, 16, 19, 1, 13, 9, 8, 17, 11, 12, 22, 2],
    [13, 15, 17, 1, 22, 11, 3, 4, 7, 20, 14, 21, 9, 8, 2, 18, 16, 6, 10, 12, 5, 19],
];

/// The query order of stream `s`.
pub fn stream_order(s: usize) -> [u8; 22] {
    STREAM_ORDERS[s % STREAM_ORDERS.len()]
}

/// The 25 nations with their region keys (clause 4.2.3).
pub const NATIONS: [(&str, usize); 25] = [
    ("ALGERIA", 0),
    ("ARGENTINA", 1),
    ("BRAZIL", 1),
    ("CANADA", 1),
    ("EGYPT", 4),
    ("ETHIOPIA", 0),
    ("FRANCE", 3),
    ("GERMANY", 3),
    ("INDIA", 2),
    ("INDONESIA", 2),
    ("IRAN", 4),
    ("IRAQ", 4),
    ("JAPAN", 2),
    ("JORDAN", 4),
    ("KENYA", 0),
    ("MOROCCO", 0),
    ("MOZAMBIQUE", 0),
    ("PERU", 1),
    ("CHINA", 2),
    ("ROMANIA", 3),
    ("SAUDI ARABIA", 4),
    ("VIETNAM", 2),
    ("RUSSIA", 3),
    ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
];
/// The five regions.
pub const REGIONS: [&str; 5] = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];
const TYPE_S1: [&str; 6] = ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"];
const TYPE_S2: [&str; 5] = ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"];
const TYPE_S3: [&str; 5] = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"];
const CONTAINER_S1: [&str; 5] = ["SM", "LG", "MED", "JUMBO", "WRAP"];
const CONTAINER_S2: [&str; 8] = ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"];
const SEGMENTS: [&str; 5] = ["AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"];
const SHIPMODES: [&str; 7] = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"];
const WORD1: [&str; 4] = ["special", "pending", "unusual", "express"];
const WORD2: [&str; 4] = ["packages", "requests", "accounts", "deposits"];

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub fn days(y: i32, m: u32, d: u32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe as u32 * 365 + yoe as u32 / 4 - yoe as u32 / 100 + doy;
    era * 146_097 + doe as i32 - 719_468
}

/// The civil date of a day number.
pub fn civil(z: i32) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = (z - era * 146_097) as u32;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe as i32 + era * 400 + (m <= 2) as i32;
    (y, m, d)
}

fn add_months(z: i32, n: i32) -> i32 {
    let (y, m, d) = civil(z);
    let total = y * 12 + (m as i32 - 1) + n;
    days(total.div_euclid(12), total.rem_euclid(12) as u32 + 1, d)
}

/// One substituted value.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    /// An integer literal.
    Int(i64),
    /// An exact decimal literal, as text.
    Dec(String),
    /// A string literal (quoted when rendered).
    Str(String),
    /// A date, as days since 1970-01-01.
    Date(i32),
}

impl Param {
    /// The SQL literal for `d`.
    pub fn sql(&self, d: Dialect) -> String {
        match self {
            Param::Int(v) => v.to_string(),
            Param::Dec(s) => s.clone(),
            Param::Str(s) => format!("'{}'", s.replace('\'', "''")),
            Param::Date(z) => {
                let t = self.display_date(*z);
                match d {
                    Dialect::Sqlite => format!("'{t}'"),
                    _ => format!("date '{t}'"),
                }
            }
        }
    }

    fn display_date(&self, z: i32) -> String {
        let (y, m, d) = civil(z);
        format!("{y:04}-{m:02}-{d:02}")
    }

    /// The value as recorded with the run.
    pub fn display(&self) -> String {
        match self {
            Param::Int(v) => v.to_string(),
            Param::Dec(s) | Param::Str(s) => s.clone(),
            Param::Date(z) => self.display_date(*z),
        }
    }
}

/// A query's substitution values, in the `{1}`, `{2}`, ... order its text
/// refers to them, each with the specification's name.
pub type Params = Vec<(&'static str, Param)>;

fn date(y: i32, m: u32, d: u32) -> Param {
    Param::Date(days(y, m, d))
}

fn dec(v: f64, places: usize) -> Param {
    Param::Dec(format!("{v:.places$}"))
}

fn s(v: &str) -> Param {
    Param::Str(v.to_string())
}

/// Q11's FRACTION: 0.0001 / SF (clause 2.4.11.3), as exact-enough text.
fn fraction(sf: f64) -> Param {
    let v = 0.0001 / sf;
    let mut t = format!("{v:.12}");
    while t.ends_with('0') {
        t.pop();
    }
    Param::Dec(t)
}

fn with_month_offsets(name: &'static str, start: i32, months: i32) -> Params {
    vec![(name, Param::Date(start)), ("date_end", Param::Date(add_months(start, months)))]
}

/// The validation parameters of query `q` (clause 2.4.N.4).
pub fn validation(q: u8, sf: f64) -> Params {
    build(q, sf, &mut Draw::Validation)
}

/// qgen's parameters for query `q` of stream `stream` under `seed`: the
/// same triple always gives the same values, whatever order queries run in.
pub fn generate(q: u8, sf: f64, stream: usize, seed: u64) -> Params {
    let mix = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((stream as u64) << 8 | q as u64);
    build(q, sf, &mut Draw::Random(TpcRng::seeded(mix)))
}

enum Draw {
    Validation,
    Random(TpcRng),
}

impl Draw {
    /// `v` for validation, else a uniform draw in `lo..=hi`.
    fn int(&mut self, lo: i64, hi: i64, v: i64) -> i64 {
        match self {
            Draw::Validation => v,
            Draw::Random(r) => r.uniform(lo, hi),
        }
    }
    fn pick<'a>(&mut self, list: &[&'a str], v: &'a str) -> &'a str {
        match self {
            Draw::Validation => v,
            Draw::Random(r) => list[r.uniform(0, list.len() as i64 - 1) as usize],
        }
    }
    /// `n` distinct values of `lo..=hi`.
    fn distinct(&mut self, n: usize, lo: i64, hi: i64, v: &[i64]) -> Vec<i64> {
        match self {
            Draw::Validation => v.to_vec(),
            Draw::Random(r) => {
                let mut out: Vec<i64> = Vec::with_capacity(n);
                while out.len() < n {
                    let x = r.uniform(lo, hi);
                    if !out.contains(&x) {
                        out.push(x);
                    }
                }
                out
            }
        }
    }
    fn nation(&mut self, v: &'static str) -> &'static str {
        let names: Vec<&'static str> = NATIONS.iter().map(|n| n.0).collect();
        self.pick(&names, v)
    }
    fn color(&mut self, v: &'static str) -> String {
        let colors = tpchgen::distribution::Distributions::static_default().part_colors().get_values();
        self.pick(colors, v).to_string()
    }
    fn brand(&mut self, v: (i64, i64)) -> String {
        let m = self.int(1, 5, v.0);
        let n = self.int(1, 5, v.1);
        format!("Brand#{m}{n}")
    }
    /// The first of a month drawn from `from` to `to` (inclusive).
    fn month(&mut self, from: (i32, u32), to: (i32, u32), v: (i32, u32)) -> i32 {
        let a = from.0 as i64 * 12 + from.1 as i64 - 1;
        let b = to.0 as i64 * 12 + to.1 as i64 - 1;
        let k = self.int(a, b, v.0 as i64 * 12 + v.1 as i64 - 1);
        days((k / 12) as i32, (k % 12) as u32 + 1, 1)
    }
    fn jan1(&mut self, v: i32) -> i32 {
        days(self.int(1993, 1997, v as i64) as i32, 1, 1)
    }
}

fn build(q: u8, sf: f64, r: &mut Draw) -> Params {
    match q {
        1 => {
            let delta = r.int(60, 120, 90);
            vec![("delta", Param::Int(delta)), ("date", Param::Date(days(1998, 12, 1) - delta as i32))]
        }
        2 => {
            let size = r.int(1, 50, 15);
            let ty = r.pick(&TYPE_S3, "BRASS");
            let region = r.pick(&REGIONS, "EUROPE");
            vec![("size", Param::Int(size)), ("type", s(&format!("%{ty}"))), ("region", s(region))]
        }
        3 => {
            let seg = r.pick(&SEGMENTS, "BUILDING");
            let day = r.int(1, 31, 15) as u32;
            vec![("segment", s(seg)), ("date", date(1995, 3, day))]
        }
        4 => with_month_offsets("date", r.month((1993, 1), (1997, 10), (1993, 7)), 3),
        5 => {
            let region = r.pick(&REGIONS, "ASIA");
            let mut p = vec![("region", s(region))];
            p.extend(with_month_offsets("date", r.jan1(1994), 12));
            p
        }
        6 => {
            let mut p = with_month_offsets("date", r.jan1(1994), 12);
            let discount = r.int(2, 9, 6);
            let quantity = r.int(24, 25, 24);
            p.push(("discount_lo", dec((discount - 1) as f64 / 100.0, 2)));
            p.push(("discount_hi", dec((discount + 1) as f64 / 100.0, 2)));
            p.push(("quantity", Param::Int(quantity)));
            p
        }
        7 => {
            let n1 = r.nation("FRANCE");
            let mut n2 = r.nation("GERMANY");
            while n2 == n1 {
                n2 = r.nation("GERMANY");
            }
            vec![("nation1", s(n1)), ("nation2", s(n2))]
        }
        8 => {
            let nation = r.nation("BRAZIL");
            let region = NATIONS.iter().find(|n| n.0 == nation).map(|n| REGIONS[n.1]).unwrap_or("AMERICA");
            let ty = format!(
                "{} {} {}",
                r.pick(&TYPE_S1, "ECONOMY"),
                r.pick(&TYPE_S2, "ANODIZED"),
                r.pick(&TYPE_S3, "STEEL")
            );
            vec![("nation", s(nation)), ("region", s(region)), ("type", Param::Str(ty))]
        }
        9 => vec![("color", Param::Str(format!("%{}%", r.color("green"))))],
        10 => with_month_offsets("date", r.month((1993, 2), (1995, 1), (1993, 10)), 3),
        11 => vec![("nation", s(r.nation("GERMANY"))), ("fraction", fraction(sf))],
        12 => {
            let m1 = r.pick(&SHIPMODES, "MAIL");
            let mut m2 = r.pick(&SHIPMODES, "SHIP");
            while m2 == m1 {
                m2 = r.pick(&SHIPMODES, "SHIP");
            }
            let mut p = vec![("shipmode1", s(m1)), ("shipmode2", s(m2))];
            p.extend(with_month_offsets("date", r.jan1(1994), 12));
            p
        }
        13 => {
            let w1 = r.pick(&WORD1, "special");
            let w2 = r.pick(&WORD2, "requests");
            vec![("words", Param::Str(format!("%{w1}%{w2}%")))]
        }
        14 => with_month_offsets("date", r.month((1993, 1), (1997, 12), (1995, 9)), 1),
        15 => with_month_offsets("date", r.month((1993, 1), (1997, 10), (1996, 1)), 3),
        16 => {
            let brand = r.brand((4, 5));
            let ty = format!("{} {}%", r.pick(&TYPE_S1, "MEDIUM"), r.pick(&TYPE_S2, "POLISHED"));
            let sizes = r.distinct(8, 1, 50, &[49, 14, 23, 45, 19, 3, 36, 9]);
            let mut p = vec![("brand", Param::Str(brand)), ("type", Param::Str(ty))];
            const NAMES: [&str; 8] = ["size1", "size2", "size3", "size4", "size5", "size6", "size7", "size8"];
            p.extend(NAMES.iter().zip(sizes).map(|(n, v)| (*n, Param::Int(v))));
            p
        }
        17 => {
            let brand = r.brand((2, 3));
            let container = format!("{} {}", r.pick(&CONTAINER_S1, "MED"), r.pick(&CONTAINER_S2, "BOX"));
            vec![("brand", Param::Str(brand)), ("container", Param::Str(container))]
        }
        18 => vec![("quantity", Param::Int(r.int(312, 315, 300)))],
        19 => {
            let q1 = r.int(1, 10, 1);
            let q2 = r.int(10, 20, 10);
            let q3 = r.int(20, 30, 20);
            let b1 = r.brand((1, 2));
            let b2 = r.brand((2, 3));
            let b3 = r.brand((3, 4));
            vec![
                ("quantity1", Param::Int(q1)),
                ("quantity2", Param::Int(q2)),
                ("quantity3", Param::Int(q3)),
                ("brand1", Param::Str(b1)),
                ("brand2", Param::Str(b2)),
                ("brand3", Param::Str(b3)),
            ]
        }
        20 => {
            let color = format!("{}%", r.color("forest"));
            let mut p = vec![("color", Param::Str(color))];
            p.extend(with_month_offsets("date", r.jan1(1994), 12));
            p.push(("nation", s(r.nation("CANADA"))));
            p
        }
        21 => vec![("nation", s(r.nation("SAUDI ARABIA")))],
        22 => {
            let codes = r.distinct(7, 10, 34, &[13, 31, 23, 29, 30, 18, 17]);
            const NAMES: [&str; 7] = ["i1", "i2", "i3", "i4", "i5", "i6", "i7"];
            NAMES.iter().zip(codes).map(|(n, c)| (*n, Param::Str(c.to_string()))).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_months_add() {
        assert_eq!(days(1970, 1, 1), 0);
        assert_eq!(days(1992, 1, 1), 8035);
        assert_eq!(civil(days(1996, 2, 29)), (1996, 2, 29));
        assert_eq!(civil(add_months(days(1997, 10, 1), 3)), (1998, 1, 1));
        assert_eq!(Param::Date(days(1998, 12, 1) - 90).display(), "1998-09-02");
    }

    #[test]
    fn validation_parameters_are_the_specifications() {
        let q1 = validation(1, 1.0);
        assert_eq!(q1[1].1.sql(Dialect::Postgres), "date '1998-09-02'");
        assert_eq!(q1[1].1.sql(Dialect::Sqlite), "'1998-09-02'");
        let q6 = validation(6, 1.0);
        assert_eq!(q6[2].1.display(), "0.05");
        assert_eq!(q6[3].1.display(), "0.07");
        assert_eq!(validation(11, 1.0)[1].1.display(), "0.0001");
        assert_eq!(validation(11, 0.01)[1].1.display(), "0.01");
        assert_eq!(validation(16, 1.0)[0].1.display(), "Brand#45");
        assert_eq!(validation(22, 1.0).len(), 7);
    }

    #[test]
    fn generated_parameters_are_reproducible_and_in_range() {
        for q in 1..=22 {
            assert_eq!(generate(q, 1.0, 3, 42), generate(q, 1.0, 3, 42));
            assert!(!generate(q, 1.0, 0, 1).is_empty());
        }
        let mut seen = std::collections::BTreeSet::new();
        for st in 0..50 {
            let p = generate(18, 1.0, st, 7);
            let Param::Int(v) = p[0].1 else { panic!() };
            assert!((312..=315).contains(&v));
            seen.insert(v);
        }
        assert!(seen.len() > 1, "streams draw different values");
    }

    #[test]
    fn every_stream_order_is_a_permutation() {
        for o in STREAM_ORDERS {
            let mut v = o.to_vec();
            v.sort();
            assert_eq!(v, (1..=22).collect::<Vec<u8>>());
        }
    }
}
