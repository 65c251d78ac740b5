//! SQL on a managed instance through `storbench_db` connections (TCP with
//! its password), never `psql` text.

use super::*;

/// A connection to the instance's database `postgres` (TCP, with its
/// password), giving up after `timeout_s` seconds.
pub(crate) fn connect(i: &Instance, timeout_s: u32) -> Result<Box<dyn Connection>, InstanceError> {
    let u = DbUrl::parse(&format!("{}?connect_timeout={timeout_s}", url(i, "postgres")))
        .map_err(|e| InstanceError::Failed(format!("managed instance '{}': {e}", i.name)))?;
    storbench_db::connect(&u)
        .map_err(|e| InstanceError::Failed(format!("managed instance '{}': {e}", i.name)))
}

/// Runs statements (no rows wanted) on the instance.
pub(crate) fn exec(i: &Instance, sql: &str) -> Result<(), InstanceError> {
    connect(i, 10)?.batch(sql).map_err(|e| InstanceError::Failed(format!("'{}': {sql}: {e}", i.name)))
}

/// The rows of one query on the instance.
pub(crate) fn query(i: &Instance, sql: &str) -> Result<Vec<Row>, InstanceError> {
    connect(i, 10)?
        .query(&Stmt::new(sql), &[])
        .map_err(|e| InstanceError::Failed(format!("'{}': {sql}: {e}", i.name)))
}

/// The one integer a query returns.
pub(crate) fn query_int(i: &Instance, sql: &str) -> Result<i64, InstanceError> {
    let rows = query(i, sql)?;
    rows.first()
        .and_then(|r| r.int(0).ok())
        .ok_or_else(|| InstanceError::Failed(format!("'{}': {sql}: no integer returned", i.name)))
}
