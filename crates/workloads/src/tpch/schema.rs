//! The eight TPC-H tables (clause 1.4) per engine family, their primary
//! keys, the secondary indexes a DBA would add, and statistics.
//!
//! Keys and indexes come after the load, never before: building a B-tree
//! once over loaded rows is several times cheaper than maintaining it row by
//! row. MySQL/MariaDB is the exception for primary keys: InnoDB clusters the
//! table on its primary key, and adding one afterwards rebuilds the table, so
//! there the key is declared up front (the generators emit rows in key order
//! within each part, so the clustered inserts stay mostly sequential).

use storbench_db::Dialect;

/// Tables in the order they are dropped (children first).
pub const TABLES: [&str; 8] =
    ["lineitem", "orders", "partsupp", "customer", "supplier", "part", "nation", "region"];

struct Table {
    name: &'static str,
    /// `(column, portable type)`; `DEC`, `DATE`, `ID` (a key that may pass
    /// 2^31 at large scale factors) are rewritten per dialect.
    columns: &'static [(&'static str, &'static str)],
    pkey: &'static [&'static str],
}

const SCHEMA: [Table; 8] = [
    Table {
        name: "region",
        columns: &[("r_regionkey", "INTEGER"), ("r_name", "CHAR(25)"), ("r_comment", "VARCHAR(152)")],
        pkey: &["r_regionkey"],
    },
    Table {
        name: "nation",
        columns: &[
            ("n_nationkey", "INTEGER"),
            ("n_name", "CHAR(25)"),
            ("n_regionkey", "INTEGER"),
            ("n_comment", "VARCHAR(152)"),
        ],
        pkey: &["n_nationkey"],
    },
    Table {
        name: "part",
        columns: &[
            ("p_partkey", "INTEGER"),
            ("p_name", "VARCHAR(55)"),
            ("p_mfgr", "CHAR(25)"),
            ("p_brand", "CHAR(10)"),
            ("p_type", "VARCHAR(25)"),
            ("p_size", "INTEGER"),
            ("p_container", "CHAR(10)"),
            ("p_retailprice", "DEC"),
            ("p_comment", "VARCHAR(23)"),
        ],
        pkey: &["p_partkey"],
    },
    Table {
        name: "supplier",
        columns: &[
            ("s_suppkey", "INTEGER"),
            ("s_name", "CHAR(25)"),
            ("s_address", "VARCHAR(40)"),
            ("s_nationkey", "INTEGER"),
            ("s_phone", "CHAR(15)"),
            ("s_acctbal", "DEC"),
            ("s_comment", "VARCHAR(101)"),
        ],
        pkey: &["s_suppkey"],
    },
    Table {
        name: "partsupp",
        columns: &[
            ("ps_partkey", "INTEGER"),
            ("ps_suppkey", "INTEGER"),
            ("ps_availqty", "INTEGER"),
            ("ps_supplycost", "DEC"),
            ("ps_comment", "VARCHAR(199)"),
        ],
        pkey: &["ps_partkey", "ps_suppkey"],
    },
    Table {
        name: "customer",
        columns: &[
            ("c_custkey", "INTEGER"),
            ("c_name", "VARCHAR(25)"),
            ("c_address", "VARCHAR(40)"),
            ("c_nationkey", "INTEGER"),
            ("c_phone", "CHAR(15)"),
            ("c_acctbal", "DEC"),
            ("c_mktsegment", "CHAR(10)"),
            ("c_comment", "VARCHAR(117)"),
        ],
        pkey: &["c_custkey"],
    },
    Table {
        name: "orders",
        columns: &[
            ("o_orderkey", "ID"),
            ("o_custkey", "INTEGER"),
            ("o_orderstatus", "CHAR(1)"),
            ("o_totalprice", "DEC"),
            ("o_orderdate", "DATE"),
            ("o_orderpriority", "CHAR(15)"),
            ("o_clerk", "CHAR(15)"),
            ("o_shippriority", "INTEGER"),
            ("o_comment", "VARCHAR(79)"),
        ],
        pkey: &["o_orderkey"],
    },
    Table {
        name: "lineitem",
        columns: &[
            ("l_orderkey", "ID"),
            ("l_partkey", "INTEGER"),
            ("l_suppkey", "INTEGER"),
            ("l_linenumber", "INTEGER"),
            ("l_quantity", "DEC"),
            ("l_extendedprice", "DEC"),
            ("l_discount", "DEC"),
            ("l_tax", "DEC"),
            ("l_returnflag", "CHAR(1)"),
            ("l_linestatus", "CHAR(1)"),
            ("l_shipdate", "DATE"),
            ("l_commitdate", "DATE"),
            ("l_receiptdate", "DATE"),
            ("l_shipinstruct", "CHAR(25)"),
            ("l_shipmode", "CHAR(10)"),
            ("l_comment", "VARCHAR(44)"),
        ],
        pkey: &["l_orderkey", "l_linenumber"],
    },
];

/// Secondary indexes a DBA would add for the 22 queries: one per foreign
/// key that is not the leading column of a primary key (the joins of
/// Q2, Q5, Q7–Q11, Q20, Q21), and the two date columns the range predicates
/// of Q1, Q3–Q7, Q10, Q12, Q14, Q15 and Q20 filter on.
pub const INDEXES: [(&str, &str, &str); 9] = [
    ("nation", "nation_regionkey", "n_regionkey"),
    ("supplier", "supplier_nationkey", "s_nationkey"),
    ("customer", "customer_nationkey", "c_nationkey"),
    ("partsupp", "partsupp_suppkey", "ps_suppkey"),
    ("orders", "orders_custkey", "o_custkey"),
    ("orders", "orders_orderdate", "o_orderdate"),
    ("lineitem", "lineitem_part_supp", "l_partkey, l_suppkey"),
    ("lineitem", "lineitem_suppkey", "l_suppkey"),
    ("lineitem", "lineitem_shipdate", "l_shipdate"),
];

fn column_type(d: Dialect, ty: &str) -> &str {
    match (d, ty) {
        (Dialect::Sqlite, "DEC") => "REAL",
        (Dialect::Sqlite, "DATE") => "TEXT",
        (Dialect::Sqlite, "ID") => "INTEGER",
        (_, "DEC") => "DECIMAL(15,2)",
        (_, "ID") => "BIGINT",
        (_, t) => t,
    }
}

/// The columns of `table` in generator order.
pub fn columns(table: &str) -> Vec<&'static str> {
    SCHEMA
        .iter()
        .find(|t| t.name == table)
        .map(|t| t.columns.iter().map(|c| c.0).collect())
        .unwrap_or_default()
}

/// CREATE TABLE statements.
pub fn create(d: Dialect) -> Vec<String> {
    SCHEMA
        .iter()
        .map(|t| {
            let mut cols: Vec<String> =
                t.columns.iter().map(|(c, ty)| format!("{c} {} NOT NULL", column_type(d, ty))).collect();
            if d == Dialect::Mysql {
                cols.push(format!("PRIMARY KEY ({})", t.pkey.join(", ")));
            }
            let tail = if d == Dialect::Mysql { " ENGINE=InnoDB" } else { "" };
            format!("CREATE TABLE {} ({}){tail}", t.name, cols.join(", "))
        })
        .collect()
}

/// Primary keys and secondary indexes: statements that may run in parallel
/// with each other (PostgreSQL builds the key as a unique index first and
/// then attaches it, so no statement takes an exclusive lock while another
/// builds on the same table).
pub fn indexes(d: Dialect) -> Vec<String> {
    let mut out = Vec::new();
    for t in &SCHEMA {
        match d {
            Dialect::Mysql => {}
            _ => {
                out.push(format!("CREATE UNIQUE INDEX {}_pkey ON {} ({})", t.name, t.name, t.pkey.join(", ")))
            }
        }
    }
    if d == Dialect::Mysql {
        // One ALTER per table: InnoDB builds its indexes in one pass, and
        // two DDL statements on one table would only queue on its metadata
        // lock.
        for t in &SCHEMA {
            let adds: Vec<String> = INDEXES
                .iter()
                .filter(|i| i.0 == t.name)
                .map(|(_, name, cols)| format!("ADD INDEX {name} ({cols})"))
                .collect();
            if !adds.is_empty() {
                out.push(format!("ALTER TABLE {} {}", t.name, adds.join(", ")));
            }
        }
        return out;
    }
    for (table, name, cols) in INDEXES {
        out.push(format!("CREATE INDEX {name} ON {table} ({cols})"));
    }
    out
}

/// Statements that turn PostgreSQL's unique indexes into primary keys
/// (instant: the index exists).
pub fn attach_keys(d: Dialect) -> Vec<String> {
    match d {
        Dialect::Postgres => SCHEMA
            .iter()
            .map(|t| {
                format!(
                    "ALTER TABLE {} ADD CONSTRAINT {}_pkey PRIMARY KEY USING INDEX {}_pkey",
                    t.name, t.name, t.name
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Statistics statements, one per table where the engine takes them so.
pub fn analyze(d: Dialect) -> Vec<String> {
    match d {
        Dialect::Sqlite => vec!["ANALYZE".into()],
        Dialect::Postgres => SCHEMA.iter().map(|t| format!("ANALYZE {}", t.name)).collect(),
        Dialect::Mysql => SCHEMA.iter().map(|t| format!("ANALYZE TABLE {}", t.name)).collect(),
    }
}

/// DROP statements, Q15's leftover views first.
pub fn drop(_d: Dialect, views: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = views.map(|v| format!("DROP VIEW IF EXISTS {v}")).collect();
    out.extend(TABLES.iter().map(|t| format!("DROP TABLE IF EXISTS {t}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dialect_gets_eight_tables_and_their_keys() {
        for d in [Dialect::Sqlite, Dialect::Postgres, Dialect::Mysql] {
            let c = create(d);
            assert_eq!(c.len(), 8);
            let keys_in_create = c.iter().filter(|s| s.contains("PRIMARY KEY")).count();
            let keys_after = indexes(d).iter().filter(|s| s.contains("UNIQUE")).count();
            assert_eq!(keys_in_create + keys_after, 8, "{d:?}");
        }
        assert!(create(Dialect::Sqlite)[7].contains("l_shipdate TEXT"));
        assert!(create(Dialect::Postgres)[7].contains("l_orderkey BIGINT"));
        assert_eq!(columns("lineitem").len(), 16);
    }
}
