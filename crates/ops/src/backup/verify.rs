//! What a restore made, checked: statistics gathered (`ANALYZE`, as a
//! restore must before it is ready for queries), every table's rows and
//! checksum (where the engine has one), TPC-C's consistency conditions
//! when the copy holds that schema, and with a source to compare with,
//! every table against it. A copy that loses rows or breaks a condition is
//! an error; the figures are recorded either way.

use std::path::Path;

use storbench_db::{Connection, Dialect, Stmt};
use storbench_metrics::{StepReport, Unit};
use storbench_workloads::tpcc;

use super::{BackupError, Database};

/// One database of a copy, connected: its name, URL and connection.
pub type Copy = (String, Database, Box<dyn Connection>);

/// Statistics for every table of the connected database, as a restore
/// must gather them before it is ready for queries.
pub fn analyze(db: &Database, conn: &mut dyn Connection) -> Result<(), BackupError> {
    match conn.dialect() {
        Dialect::Mysql => {
            for t in tables(conn)? {
                conn.query(&Stmt::new(format!("ANALYZE TABLE `{t}`")), &[]).map_err(|e| db.error(e))?;
            }
        }
        _ => conn.batch("ANALYZE").map_err(|e| db.error(e))?,
    }
    Ok(())
}

/// The base tables of the connected database.
fn tables(conn: &mut dyn Connection) -> Result<Vec<String>, BackupError> {
    let sql = match conn.dialect() {
        Dialect::Postgres => {
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        }
        Dialect::Mysql => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY 1"
        }
        Dialect::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY 1"
        }
    };
    let failed = |e: storbench_db::DbError| BackupError::Failed(format!("listing tables: {e}"));
    let rows = conn.query(&Stmt::new(sql), &[]).map_err(failed)?;
    rows.iter().map(|r| r.text(0).map_err(failed)).collect()
}

/// Row count and, where the engine has one, a checksum of a table.
fn table_sum(conn: &mut dyn Connection, t: &str) -> Result<(i64, String), BackupError> {
    let (count, sum) = match conn.dialect() {
        Dialect::Postgres => (
            format!("SELECT count(*) FROM \"{t}\""),
            // An order-free sum of each row's 64-bit hash (as numeric, no
            // overflow): constant memory, unlike aggregating every row's text.
            Some(format!(
                "SELECT coalesce(sum(('x' || substr(md5(x::text), 1, 16))::bit(64)::bigint), 0)::text FROM \"{t}\" x"
            )),
        ),
        Dialect::Mysql => (format!("SELECT COUNT(*) FROM `{t}`"), Some(format!("CHECKSUM TABLE `{t}`"))),
        Dialect::Sqlite => (format!("SELECT count(*) FROM \"{t}\""), None),
    };
    let n = conn
        .query_one(&Stmt::new(count), &[])
        .and_then(|r| r.int(0))
        .map_err(|e| BackupError::Failed(format!("counting {t}: {e}")))?;
    let s = match sum {
        Some(q) => {
            let row = conn
                .query_one(&Stmt::new(q), &[])
                .map_err(|e| BackupError::Failed(format!("checksum of {t}: {e}")))?;
            // CHECKSUM TABLE gives (table, checksum).
            let i = if conn.dialect() == Dialect::Mysql { 1 } else { 0 };
            row.text(i).unwrap_or_default()
        }
        None => String::new(),
    };
    Ok((n, s))
}

/// Checks the copy: TPC-C's consistency conditions when it holds that
/// schema, and with `compare` every table's rows and checksum against
/// the source. Records `restore.rows` and `restore.tables`.
pub fn verify(
    db: &Database,
    conn: &mut dyn Connection,
    compare: Option<&Database>,
    r: &mut StepReport,
) -> Result<(), BackupError> {
    let names = tables(conn)?;
    let mut rows = 0i64;
    let mut copy = Vec::new();
    for t in &names {
        let s = table_sum(conn, t)?;
        rows += s.0;
        copy.push((t.clone(), s));
    }
    r.figure("restore.tables", names.len() as f64, Unit::Count);
    r.figure("restore.rows", rows as f64, Unit::Count);
    if tpcc::inspect(conn).map_err(|e| db.error(e))?.is_some() {
        let res =
            tpcc::check(conn).map_err(|e| BackupError::Failed(format!("tpcc check of {}: {e}", db.shown)))?;
        let failed: Vec<String> =
            res.iter().filter(|c| !c.passed).map(|c| format!("{} ({})", c.number, c.detail)).collect();
        r.figure("restore.tpcc_check_failed", failed.len() as f64, Unit::Count);
        if !failed.is_empty() {
            return Err(BackupError::Failed(format!(
                "the restored copy {} fails TPC-C condition(s) {}",
                db.shown,
                failed.join(", ")
            )));
        }
    }
    if let Some(src) = compare {
        compare_with(db, &copy, src)?;
    }
    Ok(())
}

/// Every table of `src` against the copy's sums.
fn compare_with(db: &Database, copy: &[(String, (i64, String))], src: &Database) -> Result<(), BackupError> {
    let mut sc = src.open()?;
    let mut lost = Vec::new();
    for t in tables(sc.as_mut())? {
        let want = table_sum(sc.as_mut(), &t)?;
        match copy.iter().find(|(n, _)| *n == t) {
            None => lost.push(format!("{t} missing")),
            Some((_, got)) if got.0 != want.0 => {
                lost.push(format!("{t} has {} rows, source {}", got.0, want.0))
            }
            Some((_, got)) if got.1 != want.1 => lost.push(format!("{t} checksum differs")),
            _ => {}
        }
    }
    if !lost.is_empty() {
        return Err(BackupError::Failed(format!(
            "the restored copy {} differs from {}: {}",
            db.shown,
            src.shown,
            lost.join("; ")
        )));
    }
    Ok(())
}

/// Checks each database of a copy ([`verify`]), the one `compare` names
/// against its source; records their tables, rows and failed TPC-C
/// conditions summed, and `restore.databases`. `to` is the copy's data
/// directory, for messages.
pub fn verify_all(
    copies: &mut [Copy],
    compare: Option<&Database>,
    to: &Path,
    r: &mut StepReport,
) -> Result<(), BackupError> {
    let mut errors = Vec::new();
    let (mut tables, mut rows, mut tpcc_failed) = (0.0, 0.0, None::<f64>);
    let want = compare.and_then(|c| c.url.database().map(str::to_string));
    for (name, db, conn) in copies.iter_mut() {
        let mut one = StepReport::default();
        let cmp = compare.filter(|_| want.as_deref() == Some(name.as_str()));
        if let Err(e) = verify(db, conn.as_mut(), cmp, &mut one) {
            errors.push(e);
        }
        tables += one.get("restore.tables").unwrap_or(0.0);
        rows += one.get("restore.rows").unwrap_or(0.0);
        if let Some(f) = one.get("restore.tpcc_check_failed") {
            *tpcc_failed.get_or_insert(0.0) += f;
        }
    }
    if let (Some(c), Some(w)) = (compare, &want) {
        if !copies.iter().any(|(n, _, _)| n == w) {
            errors.push(BackupError::Failed(format!(
                "the restored copy {} has no database '{w}' to compare with {}",
                to.display(),
                c.shown
            )));
        }
    }
    r.figure("restore.databases", copies.len() as f64, Unit::Count);
    r.figure("restore.tables", tables, Unit::Count);
    r.figure("restore.rows", rows, Unit::Count);
    if let Some(f) = tpcc_failed {
        r.figure("restore.tpcc_check_failed", f, Unit::Count);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(BackupError::Several(errors))
    }
}
