//! The refresh functions (clause 2.5): RF1 inserts SF × 1,500 new orders
//! with their 1–7 lineitems each; RF2 deletes as many orders and their
//! lineitems.
//!
//! New orders come from the same generators as the initial population, so
//! their values follow dbgen's distributions, and take keys the initial
//! population never uses: dbgen's order keys are sparse (of every 32 keys
//! only the first 8 are used), and refresh pair `p` puts its orders in the
//! slot `8 × (1 + (p − 1) mod 3)` above its source order's key — dbgen's
//! update sets use those same spare bits. RF2 of pair `p` deletes the orders
//! RF1 of pair `p` inserted, so every completed run leaves the database as
//! it was built and `check` still holds after any number of runs (clause
//! 2.5's RF2 deletes old orders of the initial population; the row and index
//! work is the same, the rows deleted are warmer in cache).

use storbench_db::{Connection, DbError, Stmt, Value};
use tpchgen::generators::{LineItemGenerator, OrderGenerator};

use super::load::{lineitem_row, order_row};
use super::schema::columns;

/// Orders one refresh function touches at scale `sf` (at least one).
pub fn orders_per_refresh(sf: f64) -> usize {
    ((sf * 1500.0).round() as usize).max(1)
}

fn slot_offset(pair: usize) -> i64 {
    8 * (1 + ((pair.max(1) - 1) % 3) as i64)
}

/// The source order indices (1-based) of refresh pair `pair`.
fn source_range(pair: usize, sf: f64) -> (i64, i64) {
    let n = orders_per_refresh(sf) as i64;
    let first = (pair.max(1) as i64 - 1) * n + 1;
    (first, first + n - 1)
}

/// The order keys refresh pair `pair` inserts and deletes.
pub fn keys(pair: usize, sf: f64) -> Vec<i64> {
    let (a, b) = source_range(pair, sf);
    (a..=b).map(|i| OrderGenerator::make_order_key(i) + slot_offset(pair)).collect()
}

/// What a refresh function did.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct RefreshCount {
    /// Orders inserted or deleted.
    pub orders: u64,
    /// Lineitems inserted or deleted.
    pub lineitems: u64,
}

/// The rows RF1 of pair `pair` inserts, generated ahead of the timed part
/// (dbgen writes them to files before a run; generating is not the
/// database's work).
pub struct Rf1Rows {
    orders: Vec<Vec<Value>>,
    lines: Vec<Vec<Value>>,
}

/// Generates RF1's rows for pair `pair` (1-based) at scale `sf`.
pub fn rf1_rows(pair: usize, sf: f64) -> Rf1Rows {
    let (a, b) = source_range(pair, sf);
    let off = slot_offset(pair);
    let first_key = OrderGenerator::make_order_key(a);
    let last_key = OrderGenerator::make_order_key(b);
    let orders = OrderGenerator::new(sf, 1, 1)
        .iter()
        .skip((a - 1) as usize)
        .take((b - a + 1) as usize)
        .map(|o| order_row(&o, o.o_orderkey + off))
        .collect();
    let lines = LineItemGenerator::new(sf, 1, 1)
        .iter()
        .skip_while(|l| l.l_orderkey < first_key)
        .take_while(|l| l.l_orderkey <= last_key)
        .map(|l| lineitem_row(&l, l.l_orderkey + off))
        .collect();
    Rf1Rows { orders, lines }
}

/// RF1: inserts `rows` in one transaction (rolled back on any error,
/// a failed COMMIT included, by the guard).
pub fn rf1(conn: &mut dyn Connection, rows: &Rf1Rows) -> Result<RefreshCount, DbError> {
    let count = RefreshCount { orders: rows.orders.len() as u64, lineitems: rows.lines.len() as u64 };
    let mut tx = conn.transaction()?;
    tx.load("orders", &columns("orders"), &rows.orders)?;
    tx.load("lineitem", &columns("lineitem"), &rows.lines)?;
    tx.commit().map(|_| count)
}

fn delete_keys(conn: &mut dyn Connection, keys: &[i64]) -> Result<RefreshCount, DbError> {
    let mut count = RefreshCount::default();
    for chunk in keys.chunks(1000) {
        let list = chunk.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(",");
        count.lineitems +=
            conn.execute(&Stmt::new(format!("DELETE FROM lineitem WHERE l_orderkey IN ({list})")), &[])?;
        count.orders +=
            conn.execute(&Stmt::new(format!("DELETE FROM orders WHERE o_orderkey IN ({list})")), &[])?;
    }
    Ok(count)
}

/// RF2 of pair `pair`, in one transaction (rolled back on any error).
pub fn rf2(conn: &mut dyn Connection, pair: usize, sf: f64) -> Result<RefreshCount, DbError> {
    let keys = keys(pair, sf);
    let mut tx = conn.transaction()?;
    let count = delete_keys(&mut *tx, &keys)?;
    tx.commit().map(|_| count)
}

/// Removes what an interrupted earlier run's RF1 of pairs `1..=pairs` left
/// behind, so this run's RF1 finds its keys free. Not timed.
pub fn clean(conn: &mut dyn Connection, pairs: usize, sf: f64) -> Result<(), DbError> {
    for p in 1..=pairs.clamp(1, 3) {
        // Pairs p and p + 3k share a slot: sweep the whole slot range the
        // run will use.
        let all: Vec<i64> = (p..=pairs).step_by(3).flat_map(|q| keys(q, sf)).collect();
        let leftover = conn.query_one(
            &Stmt::new(format!(
                "SELECT COUNT(*) FROM orders WHERE o_orderkey IN ({})",
                all.iter().take(1000).map(|k| k.to_string()).collect::<Vec<_>>().join(",")
            )),
            &[],
        )?;
        if leftover.int(0)? > 0 || all.len() > 1000 {
            let mut tx = conn.transaction()?;
            delete_keys(&mut *tx, &all)?;
            tx.commit()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_keys_never_collide_with_the_initial_population_or_each_other() {
        let sf = 0.01;
        let n = OrderGenerator::calculate_row_count(sf, 1, 1);
        let initial: std::collections::HashSet<i64> = (1..=n).map(OrderGenerator::make_order_key).collect();
        let mut seen = std::collections::HashSet::new();
        for p in 1..=7 {
            let k = keys(p, sf);
            assert_eq!(k.len(), 15);
            for key in k {
                assert!(!initial.contains(&key), "pair {p} key {key}");
                assert!(seen.insert(key), "pair {p} repeats {key}");
            }
        }
    }
}
