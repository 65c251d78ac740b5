//! The nine TPC-C tables per dialect: created bare before the load, keys and
//! secondary indexes added after it where that is faster (PostgreSQL), or
//! declared up front where the table is clustered on its key (InnoDB) or
//! the key is the table (SQLite).

use storbench_db::Dialect;

/// Schema version stored in `storbench_tpcc_meta`.
pub const VERSION: i64 = 1;

/// Table names, in load order.
pub const TABLES: [&str; 9] =
    ["item", "warehouse", "district", "customer", "history", "stock", "orders", "new_order", "order_line"];

struct Types {
    int: &'static str,
    money: &'static str,
    ts: &'static str,
}

fn types(d: Dialect) -> Types {
    match d {
        Dialect::Postgres => Types { int: "integer", money: "numeric", ts: "timestamp" },
        Dialect::Mysql => Types { int: "int", money: "decimal", ts: "datetime" },
        Dialect::Sqlite => Types { int: "integer", money: "numeric", ts: "text" },
    }
}

/// Primary keys of the tables that have one.
const KEYS: [(&str, &str); 8] = [
    ("item", "i_id"),
    ("warehouse", "w_id"),
    ("district", "d_w_id, d_id"),
    ("customer", "c_w_id, c_d_id, c_id"),
    ("stock", "s_w_id, s_i_id"),
    ("orders", "o_w_id, o_d_id, o_id"),
    ("new_order", "no_w_id, no_d_id, no_o_id"),
    ("order_line", "ol_w_id, ol_d_id, ol_o_id, ol_number"),
];

/// Secondary indexes: (name, table, columns).
const INDEXES: [(&str, &str, &str); 2] = [
    ("customer_last", "customer", "c_w_id, c_d_id, c_last, c_first"),
    ("orders_customer", "orders", "o_w_id, o_d_id, o_c_id, o_id"),
];

/// Whether keys are added after the load (else declared in CREATE TABLE).
pub fn keys_after_load(d: Dialect) -> bool {
    d == Dialect::Postgres
}

/// CREATE TABLE statements (one per entry), with the storbench_tpcc_meta table first.
pub fn create(d: Dialect) -> Vec<String> {
    let Types { int, money, ts } = types(d);
    let engine = if d == Dialect::Mysql { " ENGINE=InnoDB" } else { "" };
    let key = |t: &str| -> String {
        if keys_after_load(d) {
            String::new()
        } else {
            KEYS.iter()
                .find(|(n, _)| *n == t)
                .map(|(_, k)| format!(", PRIMARY KEY ({k})"))
                .unwrap_or_default()
        }
    };
    let body: [(&str, String); 9] = [
        ("item", format!("i_id {int} NOT NULL, i_im_id {int}, i_name varchar(24), i_price {money}(5,2), i_data varchar(50)")),
        ("warehouse", format!("w_id {int} NOT NULL, w_name varchar(10), w_street_1 varchar(20), w_street_2 varchar(20), w_city varchar(20), w_state char(2), w_zip char(9), w_tax {money}(4,4), w_ytd {money}(12,2)")),
        ("district", format!("d_id {int} NOT NULL, d_w_id {int} NOT NULL, d_name varchar(10), d_street_1 varchar(20), d_street_2 varchar(20), d_city varchar(20), d_state char(2), d_zip char(9), d_tax {money}(4,4), d_ytd {money}(12,2), d_next_o_id {int}")),
        ("customer", format!("c_id {int} NOT NULL, c_d_id {int} NOT NULL, c_w_id {int} NOT NULL, c_first varchar(16), c_middle char(2), c_last varchar(16), c_street_1 varchar(20), c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9), c_phone char(16), c_since {ts}, c_credit char(2), c_credit_lim {money}(12,2), c_discount {money}(4,4), c_balance {money}(12,2), c_ytd_payment {money}(12,2), c_payment_cnt {int}, c_delivery_cnt {int}, c_data varchar(500)")),
        ("history", format!("h_c_id {int}, h_c_d_id {int}, h_c_w_id {int}, h_d_id {int}, h_w_id {int}, h_date {ts}, h_amount {money}(6,2), h_data varchar(24)")),
        ("stock", format!("s_i_id {int} NOT NULL, s_w_id {int} NOT NULL, s_quantity {int}, s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24), s_dist_05 char(24), s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24), s_dist_09 char(24), s_dist_10 char(24), s_ytd {int}, s_order_cnt {int}, s_remote_cnt {int}, s_data varchar(50)")),
        ("orders", format!("o_id {int} NOT NULL, o_d_id {int} NOT NULL, o_w_id {int} NOT NULL, o_c_id {int}, o_entry_d {ts}, o_carrier_id {int}, o_ol_cnt {int}, o_all_local {int}")),
        ("new_order", format!("no_o_id {int} NOT NULL, no_d_id {int} NOT NULL, no_w_id {int} NOT NULL")),
        ("order_line", format!("ol_o_id {int} NOT NULL, ol_d_id {int} NOT NULL, ol_w_id {int} NOT NULL, ol_number {int} NOT NULL, ol_i_id {int}, ol_supply_w_id {int}, ol_delivery_d {ts}, ol_quantity {int}, ol_amount {money}(6,2), ol_dist_info char(24)")),
    ];
    let mut v = vec![format!(
        "CREATE TABLE storbench_tpcc_meta (warehouses {int} NOT NULL, c_load {int} NOT NULL, version {int} NOT NULL, procedures {int} NOT NULL){engine}"
    )];
    for (t, cols) in body {
        v.push(format!("CREATE TABLE {t} ({cols}{}){engine}", key(t)));
    }
    v
}

/// Statements run after the load: keys (PostgreSQL), secondary indexes,
/// statistics.
pub fn after_load(d: Dialect) -> Vec<String> {
    let mut v = Vec::new();
    if keys_after_load(d) {
        for (t, k) in KEYS {
            v.push(format!("ALTER TABLE {t} ADD PRIMARY KEY ({k})"));
        }
    }
    for (n, t, c) in INDEXES {
        v.push(format!("CREATE INDEX {n} ON {t} ({c})"));
    }
    v
}

/// Statistics statements. On PostgreSQL a VACUUM as well: the freshly
/// loaded rows are then hinted and all-visible, so the run neither pays for
/// setting their hint bits (a write of every page it first reads) nor
/// fetches heap pages in index-only scans, as after the VACUUM a DBA runs
/// after a bulk load. (FREEZE would cost twice as long for nothing a run
/// of minutes sees.)
pub fn analyze(d: Dialect) -> Vec<String> {
    match d {
        Dialect::Postgres => TABLES.iter().map(|t| format!("VACUUM (ANALYZE) {t}")).collect(),
        Dialect::Mysql => TABLES.iter().map(|t| format!("ANALYZE TABLE {t}")).collect(),
        Dialect::Sqlite => vec!["ANALYZE".into()],
    }
}

/// DROP statements for everything `create` and the procedures made.
pub fn drop(d: Dialect) -> Vec<String> {
    let mut v = Vec::new();
    match d {
        Dialect::Postgres => {
            for f in super::procs::NAMES {
                v.push(format!("DROP FUNCTION IF EXISTS {f} CASCADE"));
            }
        }
        Dialect::Mysql => {
            for f in super::procs::NAMES {
                v.push(format!("DROP PROCEDURE IF EXISTS {f}"));
            }
        }
        Dialect::Sqlite => {}
    }
    for t in TABLES.iter().rev().chain(["storbench_tpcc_meta"].iter()) {
        v.push(format!("DROP TABLE IF EXISTS {t}"));
    }
    v
}
