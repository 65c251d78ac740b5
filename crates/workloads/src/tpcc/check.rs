//! The TPC-C consistency conditions (clause 3.3.2), all twelve. Each
//! reports the first offending keys. Condition 11 holds only until a
//! district's first Delivery, so it is checked on the districts that have
//! had none (every district of a freshly built database).

use std::collections::BTreeMap;

use storbench_db::{Connection, DbError, Row, Stmt};

use super::CheckResult;

const EPS: f64 = 0.005;
const SHOW: usize = 5;
/// The loader's first undelivered order of every district (clause 4.3.3.1).
const FIRST_UNDELIVERED: i64 = 2101;

fn rows(conn: &mut dyn Connection, sql: &str) -> Result<Vec<Row>, DbError> {
    conn.query(&Stmt::new(sql), &[])
}

fn opt_f(r: &Row, i: usize) -> Result<Option<f64>, DbError> {
    if r.is_null(i)? {
        Ok(None)
    } else {
        r.float(i).map(Some)
    }
}

fn result(number: u32, name: &str, bad: Vec<String>) -> CheckResult {
    let n = bad.len();
    let mut detail: Vec<String> = bad.into_iter().take(SHOW).collect();
    if n > SHOW {
        detail.push(format!("… {} more", n - SHOW));
    }
    CheckResult { number, name: name.to_string(), passed: n == 0, detail: detail.join("; ") }
}

/// Runs every condition.
pub fn check(conn: &mut dyn Connection) -> Result<Vec<CheckResult>, DbError> {
    let mut out = Vec::new();
    orders_and_districts(conn, &mut out)?;
    deliveries_and_history(conn, &mut out)?;
    customers_and_backlog(conn, &mut out)?;
    Ok(out)
}

/// Conditions 1-4: warehouse and district totals, order ids, order lines.
fn orders_and_districts(conn: &mut dyn Connection, out: &mut Vec<CheckResult>) -> Result<(), DbError> {
    // 1. W_YTD = sum(D_YTD)
    let mut bad = Vec::new();
    for r in rows(conn, "SELECT w_id, w_ytd, (SELECT SUM(d_ytd) FROM district WHERE d_w_id = w_id) FROM warehouse ORDER BY w_id")? {
        let (w, a, b) = (r.int(0)?, r.float(1)?, opt_f(&r, 2)?.unwrap_or(0.0));
        if (a - b).abs() > EPS {
            bad.push(format!("w_id={w}: w_ytd={a:.2} but sum(d_ytd)={b:.2}"));
        }
    }
    out.push(result(1, "W_YTD = sum(D_YTD)", bad));

    // 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)
    let mut bad = Vec::new();
    for r in rows(
        conn,
        "SELECT d_w_id, d_id, d_next_o_id - 1, \
         (SELECT MAX(o_id) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id), \
         (SELECT MAX(no_o_id) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id) \
         FROM district ORDER BY d_w_id, d_id",
    )? {
        let (w, d, next) = (r.int(0)?, r.int(1)?, r.int(2)?);
        let mo = if r.is_null(3)? { None } else { Some(r.int(3)?) };
        let mno = if r.is_null(4)? { None } else { Some(r.int(4)?) };
        if mo != Some(next) {
            bad.push(format!("w_id={w} d_id={d}: d_next_o_id-1={next} but max(o_id)={}", show(mo)));
        } else if mno.is_some() && mno != Some(next) {
            bad.push(format!("w_id={w} d_id={d}: d_next_o_id-1={next} but max(no_o_id)={}", show(mno)));
        }
    }
    out.push(result(2, "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)", bad));

    // 3. max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW_ORDER)
    let mut bad = Vec::new();
    for r in rows(
        conn,
        "SELECT no_w_id, no_d_id, MAX(no_o_id) - MIN(no_o_id) + 1, COUNT(*) FROM new_order \
         GROUP BY no_w_id, no_d_id ORDER BY no_w_id, no_d_id",
    )? {
        let (w, d, span, n) = (r.int(0)?, r.int(1)?, r.int(2)?, r.int(3)?);
        if span != n {
            bad.push(format!("w_id={w} d_id={d}: max-min+1={span} but {n} new_order rows"));
        }
    }
    out.push(result(3, "NEW_ORDER ids contiguous", bad));

    // 4. sum(O_OL_CNT) = count(ORDER_LINE) per district
    let mut lines = BTreeMap::new();
    for r in rows(conn, "SELECT ol_w_id, ol_d_id, COUNT(*) FROM order_line GROUP BY ol_w_id, ol_d_id")? {
        lines.insert((r.int(0)?, r.int(1)?), r.int(2)?);
    }
    let mut bad = Vec::new();
    for r in rows(
        conn,
        "SELECT o_w_id, o_d_id, SUM(o_ol_cnt) FROM orders GROUP BY o_w_id, o_d_id ORDER BY o_w_id, o_d_id",
    )? {
        let (w, d, s) = (r.int(0)?, r.int(1)?, r.int(2)?);
        let n = lines.get(&(w, d)).copied().unwrap_or(0);
        if s != n {
            bad.push(format!("w_id={w} d_id={d}: sum(o_ol_cnt)={s} but {n} order_line rows"));
        }
    }
    out.push(result(4, "sum(O_OL_CNT) = count(ORDER_LINE)", bad));
    Ok(())
}

/// Conditions 5-9: carriers, order lines per order, delivery dates, payments.
fn deliveries_and_history(conn: &mut dyn Connection, out: &mut Vec<CheckResult>) -> Result<(), DbError> {
    // 5. O_CARRIER_ID null exactly when a NEW_ORDER row exists
    let bad = keys(
        conn,
        "SELECT o_w_id, o_d_id, o_id FROM orders LEFT JOIN new_order \
         ON no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id \
         WHERE (o_carrier_id IS NULL) <> (no_o_id IS NOT NULL) ORDER BY 1, 2, 3 LIMIT 6",
        &["w_id", "d_id", "o_id"],
        "o_carrier_id null-ness disagrees with new_order",
    )?;
    out.push(result(5, "O_CARRIER_ID null iff NEW_ORDER row", bad));

    // 6. O_OL_CNT = count(ORDER_LINE) per order
    let bad = keys(
        conn,
        "SELECT o_w_id, o_d_id, o_id FROM orders LEFT JOIN \
         (SELECT ol_w_id, ol_d_id, ol_o_id, COUNT(*) AS n FROM order_line GROUP BY ol_w_id, ol_d_id, ol_o_id) x \
         ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
         WHERE x.n IS NULL OR x.n <> o_ol_cnt ORDER BY 1, 2, 3 LIMIT 6",
        &["w_id", "d_id", "o_id"],
        "o_ol_cnt differs from its order lines",
    )?;
    out.push(result(6, "O_OL_CNT = order lines per order", bad));

    // 7. OL_DELIVERY_D null exactly when O_CARRIER_ID null
    let bad = keys(
        conn,
        "SELECT ol_w_id, ol_d_id, ol_o_id, ol_number FROM order_line JOIN orders \
         ON o_w_id = ol_w_id AND o_d_id = ol_d_id AND o_id = ol_o_id \
         WHERE (ol_delivery_d IS NULL) <> (o_carrier_id IS NULL) ORDER BY 1, 2, 3, 4 LIMIT 6",
        &["w_id", "d_id", "o_id", "ol_number"],
        "ol_delivery_d null-ness disagrees with o_carrier_id",
    )?;
    out.push(result(7, "OL_DELIVERY_D null iff O_CARRIER_ID null", bad));

    // 8. W_YTD = sum(H_AMOUNT)
    let mut bad = Vec::new();
    for r in rows(
        conn,
        "SELECT w_id, w_ytd, (SELECT SUM(h_amount) FROM history WHERE h_w_id = w_id) FROM warehouse ORDER BY w_id",
    )? {
        let (w, a, b) = (r.int(0)?, r.float(1)?, opt_f(&r, 2)?.unwrap_or(0.0));
        if (a - b).abs() > EPS {
            bad.push(format!("w_id={w}: w_ytd={a:.2} but sum(h_amount)={b:.2}"));
        }
    }
    out.push(result(8, "W_YTD = sum(H_AMOUNT)", bad));

    // 9. D_YTD = sum(H_AMOUNT) per district
    let mut hist = BTreeMap::new();
    for r in rows(conn, "SELECT h_w_id, h_d_id, SUM(h_amount) FROM history GROUP BY h_w_id, h_d_id")? {
        hist.insert((r.int(0)?, r.int(1)?), r.float(2)?);
    }
    let mut bad = Vec::new();
    for r in rows(conn, "SELECT d_w_id, d_id, d_ytd FROM district ORDER BY d_w_id, d_id")? {
        let (w, d, y) = (r.int(0)?, r.int(1)?, r.float(2)?);
        let h = hist.get(&(w, d)).copied().unwrap_or(0.0);
        if (y - h).abs() > EPS {
            bad.push(format!("w_id={w} d_id={d}: d_ytd={y:.2} but sum(h_amount)={h:.2}"));
        }
    }
    out.push(result(9, "D_YTD = sum(H_AMOUNT)", bad));
    Ok(())
}

/// Conditions 10-12: customer balances and the undelivered backlog.
fn customers_and_backlog(conn: &mut dyn Connection, out: &mut Vec<CheckResult>) -> Result<(), DbError> {
    // 10 and 12: customer balances against delivered lines and payments.
    let base = "SELECT c_w_id, c_d_id, c_id, c_balance, c_ytd_payment, COALESCE(dl.s, 0), COALESCE(h.s, 0) \
         FROM customer \
         LEFT JOIN (SELECT o_w_id AS w, o_d_id AS d, o_c_id AS c, SUM(ol_amount) AS s FROM orders JOIN order_line \
           ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id WHERE ol_delivery_d IS NOT NULL \
           GROUP BY o_w_id, o_d_id, o_c_id) dl ON dl.w = c_w_id AND dl.d = c_d_id AND dl.c = c_id \
         LEFT JOIN (SELECT h_c_w_id AS w, h_c_d_id AS d, h_c_id AS c, SUM(h_amount) AS s FROM history \
           GROUP BY h_c_w_id, h_c_d_id, h_c_id) h ON h.w = c_w_id AND h.d = c_d_id AND h.c = c_id";
    let mut bad10 = Vec::new();
    let mut bad12 = Vec::new();
    for r in rows(
        conn,
        &format!(
            "{base} WHERE ABS(c_balance - (COALESCE(dl.s, 0) - COALESCE(h.s, 0))) > 0.005 \
             OR ABS(c_balance + c_ytd_payment - COALESCE(dl.s, 0)) > 0.005 ORDER BY 1, 2, 3"
        ),
    )? {
        let (w, d, c) = (r.int(0)?, r.int(1)?, r.int(2)?);
        let (bal, ytd, del, paid) = (r.float(3)?, r.float(4)?, r.float(5)?, r.float(6)?);
        if (bal - (del - paid)).abs() > EPS {
            bad10.push(format!(
                "w_id={w} d_id={d} c_id={c}: c_balance={bal:.2} but delivered-paid={:.2}",
                del - paid
            ));
        }
        if (bal + ytd - del).abs() > EPS {
            bad12.push(format!(
                "w_id={w} d_id={d} c_id={c}: c_balance+c_ytd_payment={:.2} but delivered={del:.2}",
                bal + ytd
            ));
        }
    }
    out.push(result(10, "C_BALANCE = delivered - paid", bad10));

    // 11. count(ORDER) - count(NEW_ORDER) = 2100 per district. New-Order
    // adds one row to each, so only Delivery moves the difference: the
    // condition applies where the oldest undelivered order is still the
    // loader's first, 2101.
    let mut bad = Vec::new();
    let (mut applicable, mut districts) = (0usize, 0usize);
    for r in rows(
        conn,
        "SELECT d_w_id, d_id, \
         (SELECT COUNT(*) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id), \
         (SELECT COUNT(*) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id), \
         (SELECT MIN(no_o_id) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id) \
         FROM district ORDER BY d_w_id, d_id",
    )? {
        districts += 1;
        let oldest = if r.is_null(4)? { None } else { Some(r.int(4)?) };
        if oldest != Some(FIRST_UNDELIVERED) {
            continue;
        }
        applicable += 1;
        let (w, d, o, no) = (r.int(0)?, r.int(1)?, r.int(2)?, r.int(3)?);
        if o - no != FIRST_UNDELIVERED - 1 {
            bad.push(format!("w_id={w} d_id={d}: count(orders)-count(new_order)={} but 2100", o - no));
        }
    }
    let mut eleven = result(11, "count(ORDER) - count(NEW_ORDER) = 2100", bad);
    if eleven.passed && applicable == 0 {
        eleven.detail = format!("not applicable: all {districts} districts have had deliveries");
    } else if eleven.passed && applicable < districts {
        eleven.detail =
            format!("{applicable} of {districts} districts checked: the others have had deliveries");
    }
    out.push(eleven);
    out.push(result(12, "C_BALANCE + C_YTD_PAYMENT = delivered", bad12));
    Ok(())
}

fn show(v: Option<i64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "none".into())
}

fn keys(conn: &mut dyn Connection, sql: &str, names: &[&str], what: &str) -> Result<Vec<String>, DbError> {
    let mut bad = Vec::new();
    for r in rows(conn, sql)? {
        let mut k = Vec::new();
        for (i, n) in names.iter().enumerate() {
            k.push(format!("{n}={}", r.int(i)?));
        }
        bad.push(format!("{}: {what}", k.join(" ")));
    }
    Ok(bad)
}
