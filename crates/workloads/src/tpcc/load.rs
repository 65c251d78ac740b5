//! Row generation for the initial population (TPC-C clause 4.3.3.1), in
//! batches handed to a sink: each loader thread writes its own batches where
//! the engine takes concurrent writers, else one writer takes them in turn.

use storbench_db::{DbError, Value};

use crate::rand_tpc::{c_last, TpcRng};

/// Rows per batch handed to the sink.
pub const BATCH: usize = 10_000;

/// Rows one warehouse adds (order lines counted at their mean of 10).
pub const ROWS_PER_WAREHOUSE: u64 = 1 + 10 + 30_000 + 30_000 + 100_000 + 30_000 + 9_000 + 300_000;

/// Columns of each table in the order the generator fills them.
pub fn columns(table: &str) -> &'static [&'static str] {
    match table {
        "item" => &["i_id", "i_im_id", "i_name", "i_price", "i_data"],
        "warehouse" => {
            &["w_id", "w_name", "w_street_1", "w_street_2", "w_city", "w_state", "w_zip", "w_tax", "w_ytd"]
        }
        "district" => &[
            "d_id",
            "d_w_id",
            "d_name",
            "d_street_1",
            "d_street_2",
            "d_city",
            "d_state",
            "d_zip",
            "d_tax",
            "d_ytd",
            "d_next_o_id",
        ],
        "customer" => &[
            "c_id",
            "c_d_id",
            "c_w_id",
            "c_first",
            "c_middle",
            "c_last",
            "c_street_1",
            "c_street_2",
            "c_city",
            "c_state",
            "c_zip",
            "c_phone",
            "c_since",
            "c_credit",
            "c_credit_lim",
            "c_discount",
            "c_balance",
            "c_ytd_payment",
            "c_payment_cnt",
            "c_delivery_cnt",
            "c_data",
        ],
        "history" => &["h_c_id", "h_c_d_id", "h_c_w_id", "h_d_id", "h_w_id", "h_date", "h_amount", "h_data"],
        "stock" => &[
            "s_i_id",
            "s_w_id",
            "s_quantity",
            "s_dist_01",
            "s_dist_02",
            "s_dist_03",
            "s_dist_04",
            "s_dist_05",
            "s_dist_06",
            "s_dist_07",
            "s_dist_08",
            "s_dist_09",
            "s_dist_10",
            "s_ytd",
            "s_order_cnt",
            "s_remote_cnt",
            "s_data",
        ],
        "orders" => {
            &["o_id", "o_d_id", "o_w_id", "o_c_id", "o_entry_d", "o_carrier_id", "o_ol_cnt", "o_all_local"]
        }
        "new_order" => &["no_o_id", "no_d_id", "no_w_id"],
        "order_line" => &[
            "ol_o_id",
            "ol_d_id",
            "ol_w_id",
            "ol_number",
            "ol_i_id",
            "ol_supply_w_id",
            "ol_delivery_d",
            "ol_quantity",
            "ol_amount",
            "ol_dist_info",
        ],
        _ => &[],
    }
}

/// Where generated batches go: (table, rows). Returns the sink's error.
pub type Sink<'a> = dyn FnMut(&'static str, Vec<Vec<Value>>) -> Result<(), DbError> + 'a;

struct Batcher<'a, 'b> {
    table: &'static str,
    rows: Vec<Vec<Value>>,
    sink: &'a mut Sink<'b>,
}

impl<'a, 'b> Batcher<'a, 'b> {
    fn new(table: &'static str, sink: &'a mut Sink<'b>) -> Self {
        Batcher { table, rows: Vec::with_capacity(BATCH), sink }
    }
    #[inline]
    fn push(&mut self, row: Vec<Value>) -> Result<(), DbError> {
        self.rows.push(row);
        if self.rows.len() >= BATCH {
            let full = std::mem::replace(&mut self.rows, Vec::with_capacity(BATCH));
            (self.sink)(self.table, full)?;
        }
        Ok(())
    }
    fn finish(mut self) -> Result<(), DbError> {
        if !self.rows.is_empty() {
            (self.sink)(self.table, std::mem::take(&mut self.rows))?;
        }
        Ok(())
    }
}

fn money(cents: i64) -> Value {
    Value::Float(cents as f64 / 100.0)
}

fn data(r: &mut TpcRng, lo: usize, hi: usize) -> Value {
    let mut s = r.astring(lo, hi);
    if r.uniform(1, 10) == 1 {
        let at = r.uniform(0, (s.len() - 8) as i64) as usize;
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    Value::Text(s)
}

fn zip(r: &mut TpcRng) -> Value {
    let mut s = r.nstring(4, 4);
    s.push_str("11111");
    Value::Text(s)
}

fn text(s: String) -> Value {
    Value::Text(s)
}

/// The 100,000 items.
pub fn items(seed: u64, sink: &mut Sink<'_>) -> Result<(), DbError> {
    let mut r = TpcRng::seeded(seed);
    let mut b = Batcher::new("item", sink);
    for i in 1..=100_000i64 {
        b.push(vec![
            Value::Int(i),
            Value::Int(r.uniform(1, 10_000)),
            text(r.astring(14, 24)),
            money(r.uniform(100, 10_000)),
            data(&mut r, 26, 50),
        ])?;
    }
    b.finish()
}

/// Everything of warehouse `w`: the warehouse, its districts, customers,
/// history, stock, orders, new orders and order lines.
pub fn warehouse(w: i64, c_load: i64, now: &str, seed: u64, sink: &mut Sink<'_>) -> Result<(), DbError> {
    let mut r = TpcRng::seeded(seed ^ (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let now = Value::Text(now.to_string());
    warehouse_and_districts(w, &mut r, sink)?;
    customers_and_history(w, c_load, &now, &mut r, sink)?;
    stock(w, &mut r, sink)?;
    orders(w, &now, &mut r, sink)?;
    Ok(())
}

/// The warehouse row and its ten districts.
fn warehouse_and_districts(w: i64, r: &mut TpcRng, sink: &mut Sink<'_>) -> Result<(), DbError> {
    {
        let mut b = Batcher::new("warehouse", sink);
        b.push(vec![
            Value::Int(w),
            text(r.astring(6, 10)),
            text(r.astring(10, 20)),
            text(r.astring(10, 20)),
            text(r.astring(10, 20)),
            text(r.astring(2, 2)),
            zip(r),
            Value::Float(r.uniform(0, 2000) as f64 / 10_000.0),
            Value::Float(300_000.0),
        ])?;
        b.finish()?;
    }
    {
        let mut b = Batcher::new("district", sink);
        for d in 1..=10 {
            b.push(vec![
                Value::Int(d),
                Value::Int(w),
                text(r.astring(6, 10)),
                text(r.astring(10, 20)),
                text(r.astring(10, 20)),
                text(r.astring(10, 20)),
                text(r.astring(2, 2)),
                zip(r),
                Value::Float(r.uniform(0, 2000) as f64 / 10_000.0),
                Value::Float(30_000.0),
                Value::Int(3001),
            ])?;
        }
        b.finish()?;
    }
    Ok(())
}

/// 3,000 customers per district and a history row each.
fn customers_and_history(
    w: i64,
    c_load: i64,
    now: &Value,
    r: &mut TpcRng,
    sink: &mut Sink<'_>,
) -> Result<(), DbError> {
    {
        let mut b = Batcher::new("customer", sink);
        for d in 1..=10 {
            for c in 1..=3000i64 {
                let last = if c <= 1000 { c - 1 } else { r.nurand(255, 0, 999, c_load) };
                b.push(vec![
                    Value::Int(c),
                    Value::Int(d),
                    Value::Int(w),
                    text(r.astring(8, 16)),
                    Value::Text("OE".into()),
                    text(c_last(last)),
                    text(r.astring(10, 20)),
                    text(r.astring(10, 20)),
                    text(r.astring(10, 20)),
                    text(r.astring(2, 2)),
                    zip(r),
                    text(r.nstring(16, 16)),
                    now.clone(),
                    Value::Text(if r.uniform(1, 10) == 1 { "BC" } else { "GC" }.into()),
                    Value::Float(50_000.0),
                    Value::Float(r.uniform(0, 5000) as f64 / 10_000.0),
                    Value::Float(-10.0),
                    Value::Float(10.0),
                    Value::Int(1),
                    Value::Int(0),
                    text(r.astring(300, 500)),
                ])?;
            }
        }
        b.finish()?;
    }
    {
        let mut b = Batcher::new("history", sink);
        for d in 1..=10 {
            for c in 1..=3000i64 {
                b.push(vec![
                    Value::Int(c),
                    Value::Int(d),
                    Value::Int(w),
                    Value::Int(d),
                    Value::Int(w),
                    now.clone(),
                    Value::Float(10.0),
                    text(r.astring(12, 24)),
                ])?;
            }
        }
        b.finish()?;
    }
    Ok(())
}

/// 100,000 stock rows.
fn stock(w: i64, r: &mut TpcRng, sink: &mut Sink<'_>) -> Result<(), DbError> {
    {
        let mut b = Batcher::new("stock", sink);
        for i in 1..=100_000i64 {
            let mut row = Vec::with_capacity(17);
            row.push(Value::Int(i));
            row.push(Value::Int(w));
            row.push(Value::Int(r.uniform(10, 100)));
            for _ in 0..10 {
                row.push(text(r.astring(24, 24)));
            }
            row.extend([Value::Int(0), Value::Int(0), Value::Int(0)]);
            row.push(data(r, 26, 50));
            b.push(row)?;
        }
        b.finish()?;
    }
    Ok(())
}

/// 3,000 orders per district with their lines, the last 900 of them new.
fn orders(w: i64, now: &Value, r: &mut TpcRng, sink: &mut Sink<'_>) -> Result<(), DbError> {
    // Orders: a random permutation of customers per district.
    let mut perm: Vec<i64> = (1..=3000).collect();
    let mut counts = [0u8; 3001];
    {
        let mut b = Batcher::new("orders", sink);
        for d in 1..=10 {
            for i in (1..perm.len()).rev() {
                let j = r.uniform(0, i as i64) as usize;
                perm.swap(i, j);
            }
            for o in 1..=3000i64 {
                let cnt = r.uniform(5, 15);
                counts[o as usize] = cnt as u8;
                b.push(vec![
                    Value::Int(o),
                    Value::Int(d),
                    Value::Int(w),
                    Value::Int(perm[o as usize - 1]),
                    now.clone(),
                    if o < 2101 { Value::Int(r.uniform(1, 10)) } else { Value::Null },
                    Value::Int(cnt),
                    Value::Int(1),
                ])?;
            }
            // Order lines of this district's orders follow their orders; a
            // second batcher keeps tables apart.
            let mut ol = Batcher::new("order_line", b.sink);
            for o in 1..=3000i64 {
                for n in 1..=counts[o as usize] as i64 {
                    let delivered = o < 2101;
                    ol.push(vec![
                        Value::Int(o),
                        Value::Int(d),
                        Value::Int(w),
                        Value::Int(n),
                        Value::Int(r.uniform(1, 100_000)),
                        Value::Int(w),
                        if delivered { now.clone() } else { Value::Null },
                        Value::Int(5),
                        if delivered { Value::Float(0.0) } else { money(r.uniform(1, 999_999)) },
                        text(r.astring(24, 24)),
                    ])?;
                }
            }
            ol.finish()?;
        }
        b.finish()?;
    }
    {
        let mut b = Batcher::new("new_order", sink);
        for d in 1..=10 {
            for o in 2101..=3000i64 {
                b.push(vec![Value::Int(o), Value::Int(d), Value::Int(w)])?;
            }
        }
        b.finish()?;
    }
    Ok(())
}

/// The current UTC time as `YYYY-MM-DD HH:MM:SS`, which every engine reads
/// as a timestamp.
pub fn now_text() -> String {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rem / 3600, (rem / 60) % 60, rem % 60)
}
