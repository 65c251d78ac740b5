//! The five transactions: inputs chosen by [`Input::choose`], run either as
//! one call of a server-side routine or as client-driven SQL.

use std::sync::Arc;

use storbench_db::{Connection, DbError, Dialect, ErrorKind, Stmt, Value};

use super::procs::ROLLBACK_CODES;
use crate::rand_tpc::{c_last, TpcRng};

/// Kind indexes, in [`super::KINDS`] order.
pub const NEW_ORDER: usize = 0;
/// Payment.
pub const PAYMENT: usize = 1;
/// Order-Status.
pub const ORDER_STATUS: usize = 2;
/// Delivery.
pub const DELIVERY: usize = 3;
/// Stock-Level.
pub const STOCK_LEVEL: usize = 4;

/// One order line's inputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Line {
    /// Item id (100,001 for the designed rollback).
    pub item: i64,
    /// Supplying warehouse.
    pub supply: i64,
    /// Quantity 1..10.
    pub qty: i64,
}

/// The inputs of one transaction, kept across retries.
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// Kind index.
    pub kind: usize,
    /// Home warehouse.
    pub w: i64,
    /// District.
    pub d: i64,
    /// Customer id (when not by name).
    pub c: i64,
    /// Customer's warehouse and district (Payment).
    pub c_w: i64,
    /// Customer's district (Payment).
    pub c_d: i64,
    /// Select the customer by last name.
    pub by_name: bool,
    /// The last name when by name.
    pub last: String,
    /// Payment amount.
    pub amount: f64,
    /// New-Order lines (sorted by supplier and item).
    pub lines: Vec<Line>,
    /// Every line from the home warehouse.
    pub all_local: bool,
    /// Delivery carrier.
    pub carrier: i64,
    /// Stock-Level threshold.
    pub threshold: i64,
}

/// Constants a worker draws keys with.
#[derive(Clone, Copy, Debug)]
pub struct Keys {
    /// Warehouses in the schema.
    pub warehouses: i64,
    /// Run-time C for C_LAST (A = 255).
    pub c_last: i64,
    /// C for C_ID (A = 1023).
    pub c_id: i64,
    /// C for OL_I_ID (A = 8191).
    pub ol_i_id: i64,
}

impl Input {
    /// Draws the inputs of a transaction of `kind` for home warehouse `w`.
    pub fn choose(&mut self, kind: usize, w: i64, k: &Keys, r: &mut TpcRng) {
        self.kind = kind;
        self.w = w;
        self.d = r.uniform(1, 10);
        self.by_name = false;
        self.last.clear();
        match kind {
            NEW_ORDER => {
                self.c = r.nurand(1023, 1, 3000, k.c_id);
                let n = r.uniform(5, 15) as usize;
                let rollback = r.uniform(1, 100) == 1;
                self.lines.clear();
                self.all_local = true;
                for i in 0..n {
                    let item =
                        if rollback && i == n - 1 { 100_001 } else { r.nurand(8191, 1, 100_000, k.ol_i_id) };
                    let supply = if k.warehouses > 1 && r.uniform(1, 100) == 1 {
                        self.all_local = false;
                        let mut o = r.uniform(1, k.warehouses - 1);
                        if o >= w {
                            o += 1;
                        }
                        o
                    } else {
                        w
                    };
                    self.lines.push(Line { item, supply, qty: r.uniform(1, 10) });
                }
                // A fixed lock order avoids deadlocks between New-Orders;
                // the rollback item (largest id) stays last of its supplier.
                self.lines.sort_unstable_by_key(|l| (l.supply, l.item));
            }
            PAYMENT => {
                if k.warehouses > 1 && r.uniform(1, 100) <= 15 {
                    let mut o = r.uniform(1, k.warehouses - 1);
                    if o >= w {
                        o += 1;
                    }
                    self.c_w = o;
                    self.c_d = r.uniform(1, 10);
                } else {
                    self.c_w = w;
                    self.c_d = self.d;
                }
                self.pick_customer(k, r);
                self.amount = r.uniform(100, 500_000) as f64 / 100.0;
            }
            ORDER_STATUS => {
                self.c_w = w;
                self.c_d = self.d;
                self.pick_customer(k, r);
            }
            DELIVERY => self.carrier = r.uniform(1, 10),
            _ => {
                debug_assert_eq!(kind, STOCK_LEVEL);
                self.threshold = r.uniform(10, 20);
            }
        }
    }

    fn pick_customer(&mut self, k: &Keys, r: &mut TpcRng) {
        if r.uniform(1, 100) <= 60 {
            self.by_name = true;
            self.last = c_last(r.nurand(255, 0, 999, k.c_last));
            self.c = 0;
        } else {
            self.c = r.nurand(1023, 1, 3000, k.c_id);
        }
    }
}

/// Prepared statements of one dialect.
pub struct Sql {
    /// Routines return a row (PostgreSQL functions) rather than none (CALL).
    call_returns_row: bool,
    // routines
    p_neword: Stmt,
    p_payment: Stmt,
    p_ostat: Stmt,
    p_delivery: Stmt,
    p_slev: Stmt,
    // new-order
    no_cust: Stmt,
    no_ware: Stmt,
    no_dist: Stmt,
    no_dist_upd: Stmt,
    no_order: Stmt,
    no_new: Stmt,
    no_item: Stmt,
    no_stock: Vec<Stmt>,
    no_stock_upd: Stmt,
    no_line: Stmt,
    // payment
    pay_ware: Stmt,
    pay_ware_sel: Stmt,
    pay_dist: Stmt,
    pay_dist_sel: Stmt,
    by_name: Stmt,
    pay_cust: Stmt,
    pay_cust_upd: Stmt,
    pay_cust_upd_bc: Stmt,
    pay_hist: Stmt,
    // order-status
    os_cust: Stmt,
    os_order: Stmt,
    os_lines: Stmt,
    // delivery
    dl_first: Stmt,
    dl_del: Stmt,
    dl_order: Stmt,
    dl_order_upd: Stmt,
    dl_lines_upd: Stmt,
    dl_sum: Stmt,
    dl_cust: Stmt,
    // stock-level
    sl_next: Stmt,
    sl_count: Stmt,
}

impl Sql {
    /// The statements for `d`.
    pub fn new(d: Dialect) -> Sql {
        let fu = if d == Dialect::Sqlite { "" } else { " FOR UPDATE" };
        let s = |q: &str| Stmt::new(q.replace("{fu}", fu));
        let bc_data = match d {
            Dialect::Mysql => "SUBSTRING(CONCAT($5, c_data), 1, 500)",
            _ => "SUBSTR($5 || c_data, 1, 500)",
        };
        let call = if d == Dialect::Mysql { "CALL" } else { "SELECT" };
        Sql {
            call_returns_row: d != Dialect::Mysql,
            p_neword: Stmt::new(format!("{call} sb_neword($1, $2, $3, $4, $5, $6, $7, $8)")),
            p_payment: Stmt::new(format!("{call} sb_payment($1, $2, $3, $4, $5, $6, $7, $8)")),
            p_ostat: Stmt::new(format!("{call} sb_ostat($1, $2, $3, $4, $5)")),
            p_delivery: Stmt::new(format!("{call} sb_delivery($1, $2)")),
            p_slev: Stmt::new(format!("{call} sb_slev($1, $2, $3)")),
            no_cust: s("SELECT c_discount, c_last, c_credit FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3"),
            no_ware: s("SELECT w_tax FROM warehouse WHERE w_id = $1"),
            no_dist: s("SELECT d_next_o_id, d_tax FROM district WHERE d_w_id = $1 AND d_id = $2{fu}"),
            no_dist_upd: s("UPDATE district SET d_next_o_id = $3 WHERE d_w_id = $1 AND d_id = $2"),
            no_order: s(&format!(
                "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local) \
                 VALUES ($1, $2, $3, $4, {}, NULL, $5, $6)",
                now(d)
            )),
            no_new: s("INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES ($1, $2, $3)"),
            no_item: s("SELECT i_price, i_name, i_data FROM item WHERE i_id = $1"),
            no_stock: (1..=10)
                .map(|i| s(&format!("SELECT s_quantity, s_dist_{i:02}, s_data FROM stock WHERE s_i_id = $1 AND s_w_id = $2{{fu}}")))
                .collect(),
            no_stock_upd: s("UPDATE stock SET s_quantity = $3, s_ytd = s_ytd + $4, s_order_cnt = s_order_cnt + 1, \
                 s_remote_cnt = s_remote_cnt + $5 WHERE s_i_id = $1 AND s_w_id = $2"),
            no_line: s("INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, \
                 ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8, $9)"),
            pay_ware: s("UPDATE warehouse SET w_ytd = w_ytd + $2 WHERE w_id = $1"),
            pay_ware_sel: s("SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse WHERE w_id = $1"),
            pay_dist: s("UPDATE district SET d_ytd = d_ytd + $3 WHERE d_w_id = $1 AND d_id = $2"),
            pay_dist_sel: s("SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district WHERE d_w_id = $1 AND d_id = $2"),
            by_name: s("SELECT c_id FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_last = $3 ORDER BY c_first"),
            pay_cust: s("SELECT c_first, c_middle, c_last, c_street_1, c_city, c_phone, c_credit, c_credit_lim, \
                 c_discount, c_balance FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3{fu}"),
            pay_cust_upd: s("UPDATE customer SET c_balance = c_balance - $4, c_ytd_payment = c_ytd_payment + $4, \
                 c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3"),
            pay_cust_upd_bc: Stmt::new(format!(
                "UPDATE customer SET c_balance = c_balance - $4, c_ytd_payment = c_ytd_payment + $4, \
                 c_payment_cnt = c_payment_cnt + 1, c_data = {bc_data} WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3"
            )),
            pay_hist: s(&format!(
                "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) \
                 VALUES ($1, $2, $3, $4, $5, {}, $6, $7)",
                now(d)
            )),
            os_cust: s("SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3"),
            os_order: s("SELECT o_id, o_carrier_id FROM orders WHERE o_w_id = $1 AND o_d_id = $2 AND o_c_id = $3 \
                 ORDER BY o_id DESC LIMIT 1"),
            os_lines: s("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount FROM order_line \
                 WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id = $3"),
            dl_first: s("SELECT no_o_id FROM new_order WHERE no_w_id = $1 AND no_d_id = $2 ORDER BY no_o_id LIMIT 1{fu}"),
            dl_del: s("DELETE FROM new_order WHERE no_w_id = $1 AND no_d_id = $2 AND no_o_id = $3"),
            dl_order: s("SELECT o_c_id FROM orders WHERE o_w_id = $1 AND o_d_id = $2 AND o_id = $3"),
            dl_order_upd: s("UPDATE orders SET o_carrier_id = $4 WHERE o_w_id = $1 AND o_d_id = $2 AND o_id = $3"),
            dl_lines_upd: s(&format!(
                "UPDATE order_line SET ol_delivery_d = {} WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id = $3",
                now(d)
            )),
            dl_sum: s("SELECT COALESCE(SUM(ol_amount), 0) FROM order_line WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id = $3"),
            dl_cust: s("UPDATE customer SET c_balance = c_balance + $4, c_delivery_cnt = c_delivery_cnt + 1 \
                 WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3"),
            sl_next: s("SELECT d_next_o_id FROM district WHERE d_w_id = $1 AND d_id = $2"),
            sl_count: s("SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id = $1 AND ol_d_id = $2 \
                 AND ol_o_id < $3 AND ol_o_id >= $4 AND s_w_id = $1 AND s_i_id = ol_i_id AND s_quantity < $5"),
        }
    }
}

fn now(d: Dialect) -> &'static str {
    match d {
        Dialect::Postgres => "LOCALTIMESTAMP",
        Dialect::Mysql => "NOW()",
        Dialect::Sqlite => "datetime('now')",
    }
}

/// Statement sets for the three dialects, shared by all workers.
pub struct SqlSets {
    sets: [Sql; 3],
}

impl SqlSets {
    /// All three.
    pub fn new() -> Arc<SqlSets> {
        Arc::new(SqlSets {
            sets: [Sql::new(Dialect::Sqlite), Sql::new(Dialect::Postgres), Sql::new(Dialect::Mysql)],
        })
    }
    /// The set for `d`.
    pub fn get(&self, d: Dialect) -> &Sql {
        match d {
            Dialect::Sqlite => &self.sets[0],
            Dialect::Postgres => &self.sets[1],
            Dialect::Mysql => &self.sets[2],
        }
    }
}

/// Reusable parameter buffers.
#[derive(Default)]
pub struct Bufs {
    p: Vec<Value>,
    s1: String,
    s2: String,
    s3: String,
}

fn set(p: &mut Vec<Value>, vals: &[i64]) {
    p.clear();
    p.extend(vals.iter().map(|v| Value::Int(*v)));
}

fn call(conn: &mut dyn Connection, q: &Sql, stmt: &Stmt, p: &[Value]) -> Result<(), DbError> {
    if q.call_returns_row {
        conn.query(stmt, p).map(|_| ())
    } else {
        conn.execute(stmt, p).map(|_| ())
    }
}

/// Runs `inp` by one routine call. Returns whether it rolled back by design.
pub fn run_proc(conn: &mut dyn Connection, q: &Sql, inp: &Input, b: &mut Bufs) -> Result<bool, DbError> {
    use std::fmt::Write;
    let p = &mut b.p;
    match inp.kind {
        NEW_ORDER => {
            b.s1.clear();
            b.s2.clear();
            b.s3.clear();
            for (i, l) in inp.lines.iter().enumerate() {
                let sep = if i > 0 { "," } else { "" };
                let _ = write!(b.s1, "{sep}{}", l.item);
                let _ = write!(b.s2, "{sep}{}", l.supply);
                let _ = write!(b.s3, "{sep}{}", l.qty);
            }
            set(p, &[inp.w, inp.d, inp.c, inp.lines.len() as i64, inp.all_local as i64]);
            p.push(Value::Text(std::mem::take(&mut b.s1)));
            p.push(Value::Text(std::mem::take(&mut b.s2)));
            p.push(Value::Text(std::mem::take(&mut b.s3)));
            // Both routines return a row: the order's total, NULL when it
            // rolled back by design.
            let r = conn.query(&q.p_neword, p);
            // Give the strings back to the buffers.
            for (slot, v) in [&mut b.s1, &mut b.s2, &mut b.s3].into_iter().zip(p.drain(5..)) {
                if let Value::Text(s) = v {
                    *slot = s;
                }
            }
            match r {
                Ok(rows) => match rows.first() {
                    Some(row) => row.is_null(0),
                    // A MySQL schema built before the routine returned its
                    // total: it signals its rollbacks (below).
                    None => Ok(false),
                },
                Err(e) if e.code().is_some_and(|c| ROLLBACK_CODES.contains(&c)) => Ok(true),
                Err(e) => Err(e),
            }
        }
        PAYMENT => {
            set(p, &[inp.w, inp.d, inp.c_w, inp.c_d, inp.c, inp.by_name as i64]);
            p.push(Value::Text(inp.last.clone()));
            p.push(Value::Float(inp.amount));
            call(conn, q, &q.p_payment, p).map(|_| false)
        }
        ORDER_STATUS => {
            set(p, &[inp.w, inp.d, inp.c, inp.by_name as i64]);
            p.push(Value::Text(inp.last.clone()));
            call(conn, q, &q.p_ostat, p).map(|_| false)
        }
        DELIVERY => {
            set(p, &[inp.w, inp.carrier]);
            call(conn, q, &q.p_delivery, p).map(|_| false)
        }
        _ => {
            set(p, &[inp.w, inp.d, inp.threshold]);
            call(conn, q, &q.p_slev, p).map(|_| false)
        }
    }
}

/// Runs `inp` as client-driven SQL inside one transaction. Returns whether
/// it rolled back by design. An error leaves no transaction open.
pub fn run_client(conn: &mut dyn Connection, q: &Sql, inp: &Input, b: &mut Bufs) -> Result<bool, DbError> {
    conn.begin()?;
    match client_body(conn, q, inp, b) {
        Ok(true) => {
            conn.rollback()?;
            Ok(true)
        }
        Ok(false) => {
            // A failed COMMIT may leave the transaction open (SQLITE_BUSY).
            crate::runner::commit(conn)?;
            Ok(false)
        }
        Err(e) => {
            if !conn.is_closed() {
                let _ = conn.rollback();
            }
            Err(e)
        }
    }
}

fn missing(what: &str) -> DbError {
    DbError::new(ErrorKind::Workload, format!("tpcc: {what} not found"))
}

fn customer_by_name(
    conn: &mut dyn Connection,
    q: &Sql,
    w: i64,
    d: i64,
    last: &str,
    p: &mut Vec<Value>,
) -> Result<i64, DbError> {
    set(p, &[w, d]);
    p.push(Value::Text(last.to_string()));
    let rows = conn.query(&q.by_name, p)?;
    if rows.is_empty() {
        return Err(missing("customer by last name"));
    }
    rows[(rows.len() - 1) / 2].int(0)
}

fn client_body(conn: &mut dyn Connection, q: &Sql, inp: &Input, b: &mut Bufs) -> Result<bool, DbError> {
    let p = &mut b.p;
    let (w, d) = (inp.w, inp.d);
    match inp.kind {
        NEW_ORDER => {
            set(p, &[w, d, inp.c]);
            let cust = conn.query_opt(&q.no_cust, p)?.ok_or_else(|| missing("customer"))?;
            let disc = cust.float(0)?;
            set(p, &[w]);
            let w_tax = conn.query_one(&q.no_ware, p)?.float(0)?;
            set(p, &[w, d]);
            let dist = conn.query_one(&q.no_dist, p)?;
            let o = dist.int(0)?;
            let d_tax = dist.float(1)?;
            set(p, &[w, d, o + 1]);
            conn.execute(&q.no_dist_upd, p)?;
            set(p, &[o, d, w, inp.c, inp.lines.len() as i64, inp.all_local as i64]);
            conn.execute(&q.no_order, p)?;
            set(p, &[o, d, w]);
            conn.execute(&q.no_new, p)?;
            let mut total = 0.0;
            for (n, l) in inp.lines.iter().enumerate() {
                set(p, &[l.item]);
                let Some(item) = conn.query_opt(&q.no_item, p)? else {
                    return Ok(true);
                };
                let price = item.float(0)?;
                set(p, &[l.item, l.supply]);
                let st = conn.query_one(&q.no_stock[d as usize - 1], p)?;
                let sq = st.int(0)?;
                let dist_info = st.text(1)?;
                let nq = if sq - l.qty >= 10 { sq - l.qty } else { sq - l.qty + 91 };
                set(p, &[l.item, l.supply, nq, l.qty, (l.supply != w) as i64]);
                conn.execute(&q.no_stock_upd, p)?;
                let amount = (l.qty as f64 * price * 100.0).round() / 100.0;
                total += amount;
                set(p, &[o, d, w, n as i64 + 1, l.item, l.supply, l.qty]);
                p.push(Value::Float(amount));
                p.push(Value::Text(dist_info));
                conn.execute(&q.no_line, p)?;
            }
            let _ = total * (1.0 - disc) * (1.0 + w_tax + d_tax);
            Ok(false)
        }
        PAYMENT => {
            set(p, &[w]);
            p.push(Value::Float(inp.amount));
            conn.execute(&q.pay_ware, p)?;
            set(p, &[w]);
            let wn = conn.query_one(&q.pay_ware_sel, p)?.text(0)?;
            set(p, &[w, d]);
            p.push(Value::Float(inp.amount));
            conn.execute(&q.pay_dist, p)?;
            set(p, &[w, d]);
            let dn = conn.query_one(&q.pay_dist_sel, p)?.text(0)?;
            let c =
                if inp.by_name { customer_by_name(conn, q, inp.c_w, inp.c_d, &inp.last, p)? } else { inp.c };
            set(p, &[inp.c_w, inp.c_d, c]);
            let cust = conn.query_opt(&q.pay_cust, p)?.ok_or_else(|| missing("customer"))?;
            if cust.text(6)? == "BC" {
                set(p, &[inp.c_w, inp.c_d, c]);
                p.push(Value::Float(inp.amount));
                p.push(Value::Text(format!("{c} {} {} {d} {w} {:.2} | ", inp.c_d, inp.c_w, inp.amount)));
                conn.execute(&q.pay_cust_upd_bc, p)?;
            } else {
                set(p, &[inp.c_w, inp.c_d, c]);
                p.push(Value::Float(inp.amount));
                conn.execute(&q.pay_cust_upd, p)?;
            }
            set(p, &[c, inp.c_d, inp.c_w, d, w]);
            p.push(Value::Float(inp.amount));
            p.push(Value::Text(format!("{wn}    {dn}")));
            conn.execute(&q.pay_hist, p)?;
            Ok(false)
        }
        ORDER_STATUS => {
            let c = if inp.by_name { customer_by_name(conn, q, w, d, &inp.last, p)? } else { inp.c };
            set(p, &[w, d, c]);
            conn.query_opt(&q.os_cust, p)?.ok_or_else(|| missing("customer"))?;
            if let Some(o) = conn.query_opt(&q.os_order, p)? {
                set(p, &[w, d, o.int(0)?]);
                conn.query(&q.os_lines, p)?;
            }
            Ok(false)
        }
        DELIVERY => {
            for d in 1..=10 {
                set(p, &[w, d]);
                let Some(first) = conn.query_opt(&q.dl_first, p)? else { continue };
                let o = first.int(0)?;
                set(p, &[w, d, o]);
                if conn.execute(&q.dl_del, p)? == 0 {
                    continue;
                }
                let c = conn.query_one(&q.dl_order, p)?.int(0)?;
                set(p, &[w, d, o, inp.carrier]);
                conn.execute(&q.dl_order_upd, p)?;
                set(p, &[w, d, o]);
                conn.execute(&q.dl_lines_upd, p)?;
                let sum = conn.query_one(&q.dl_sum, p)?.float(0)?;
                set(p, &[w, d, c]);
                p.push(Value::Float(sum));
                conn.execute(&q.dl_cust, p)?;
            }
            Ok(false)
        }
        _ => {
            set(p, &[w, d]);
            let next = conn.query_one(&q.sl_next, p)?.int(0)?;
            set(p, &[w, d, next, next - 20, inp.threshold]);
            conn.query_one(&q.sl_count, p)?;
            Ok(false)
        }
    }
}
