//! TPC-C and TPC-H both name a table CUSTOMER and one ORDERS. Which
//! schema a database's tables of those names belong to is told by the
//! tables only one of the two has; a build refuses another schema's, and a
//! drop leaves them alone.

use storbench_db::{Connection, DbError};

use crate::tpcb::table_exists;

/// The names both schemas use.
const SHARED: [&str; 2] = ["customer", "orders"];

/// Whether any of a schema's `own` tables (those the other has not) is here.
pub(crate) fn holds_any(conn: &mut dyn Connection, own: &[&str]) -> Result<bool, DbError> {
    for t in own {
        if table_exists(conn, t)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A shared-name table that belongs to the other schema: present while
/// none of `own` is.
pub(crate) fn foreign(conn: &mut dyn Connection, own: &[&str]) -> Result<Option<&'static str>, DbError> {
    if holds_any(conn, own)? {
        return Ok(None);
    }
    for t in SHARED {
        if table_exists(conn, t)? {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// `stmts` without the DROPs of the shared names unless `ours` (the
/// schema's own tables are here, so the shared names are its too).
pub(crate) fn keep_foreign(stmts: Vec<String>, ours: bool) -> Vec<String> {
    stmts.into_iter().filter(|s| ours || !SHARED.iter().any(|t| s.ends_with(&format!(" {t}")))).collect()
}
