//! MySQL and MariaDB through mysql_async, driven on the caller's thread by a
//! private single-threaded runtime. Counters come from `SHOW GLOBAL STATUS`
//! (Com_commit + Com_rollback: server-wide, as HammerDB reads them). A
//! statement is cancelled by `KILL QUERY` from a second connection.

use mysql_async::consts::ColumnType;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Statement};
use tokio::runtime::Runtime;

use crate::error::{DbError, ErrorKind};
use crate::placeholder::to_mysql;
use crate::url::DbUrl;
use crate::value::{Row, Stmt, StmtCache, Value};
use crate::{Cancel, Caps, Connection, Counters, Dialect, ServerInfo};

pub(crate) struct MyConn {
    rt: Runtime,
    conn: Option<Conn>,
    /// Prepared statement and the order in which to bind `$n` parameters.
    stmts: StmtCache<(Statement, Vec<usize>)>,
    closed: bool,
    /// What a cancel needs: the options to connect again, and this
    /// session's id for `KILL QUERY`.
    opts: Opts,
    id: u32,
}

/// Cancels a statement by `KILL QUERY <id>` from a connection of its own
/// (MySQL has no cancel message in its protocol).
struct MyCancel {
    opts: Opts,
    id: u32,
}

impl Cancel for MyCancel {
    fn cancel(&self) -> Result<(), DbError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DbError::new(ErrorKind::Other, format!("mysql: cannot start runtime: {e}")))?;
        let r = rt.block_on(async {
            let mut c = Conn::new(self.opts.clone()).await?;
            let r = c.query_drop(format!("KILL QUERY {}", self.id)).await;
            let _ = c.disconnect().await;
            r
        });
        match r.map_err(map_err) {
            Ok(()) => Ok(()),
            // 1094, unknown thread: the session is gone, nothing to cancel.
            Err(e) if e.code() == Some("1094") => Ok(()),
            Err(e) => Err(DbError::new(e.kind(), format!("mysql: cannot send KILL QUERY: {e}"))),
        }
    }
}

fn map_err(e: mysql_async::Error) -> DbError {
    match e {
        mysql_async::Error::Server(s) => {
            let kind = match s.code {
                1213 | 1205 => ErrorKind::Retryable,
                1045 => ErrorKind::Auth,
                1044 | 1142 | 1227 | 1370 => ErrorKind::Permission,
                1146 | 1049 | 1305 | 1054 => ErrorKind::MissingObject,
                1053 | 1927 => ErrorKind::Closed,
                _ => ErrorKind::Other,
            };
            DbError::new(kind, format!("mysql: {} ({})", s.message, s.code)).with_code(s.code.to_string())
        }
        mysql_async::Error::Io(e) => DbError::new(ErrorKind::Closed, format!("mysql: {e}")),
        mysql_async::Error::Driver(e) => {
            let msg = e.to_string();
            let kind = if msg.contains("closed") || msg.contains("Connection") {
                ErrorKind::Closed
            } else {
                ErrorKind::Other
            };
            DbError::new(kind, format!("mysql: {msg}"))
        }
        other => DbError::new(ErrorKind::Other, format!("mysql: {other}")),
    }
}

fn to_my(v: &Value) -> mysql_async::Value {
    match v {
        Value::Null => mysql_async::Value::NULL,
        Value::Int(i) => mysql_async::Value::Int(*i),
        Value::Float(f) => mysql_async::Value::Double(*f),
        Value::Text(s) => mysql_async::Value::Bytes(s.as_bytes().to_vec()),
    }
}

fn from_my(v: mysql_async::Value, ty: ColumnType) -> Value {
    use mysql_async::Value as M;
    match v {
        M::NULL => Value::Null,
        M::Int(i) => Value::Int(i),
        M::UInt(u) => Value::Int(u as i64),
        M::Float(f) => Value::Float(f as f64),
        M::Double(d) => Value::Float(d),
        M::Bytes(b) => {
            let s = String::from_utf8_lossy(&b).into_owned();
            match ty {
                ColumnType::MYSQL_TYPE_DECIMAL
                | ColumnType::MYSQL_TYPE_NEWDECIMAL
                | ColumnType::MYSQL_TYPE_FLOAT
                | ColumnType::MYSQL_TYPE_DOUBLE => s.parse().map(Value::Float).unwrap_or(Value::Text(s)),
                ColumnType::MYSQL_TYPE_TINY
                | ColumnType::MYSQL_TYPE_SHORT
                | ColumnType::MYSQL_TYPE_LONG
                | ColumnType::MYSQL_TYPE_INT24
                | ColumnType::MYSQL_TYPE_LONGLONG => s.parse().map(Value::Int).unwrap_or(Value::Text(s)),
                _ => Value::Text(s),
            }
        }
        other => Value::Text(other.as_sql(true).trim_matches('\'').to_string()),
    }
}

fn to_row(r: mysql_async::Row) -> Row {
    let types: Vec<ColumnType> = r.columns_ref().iter().map(|c| c.column_type()).collect();
    Row(r.unwrap().into_iter().zip(types).map(|(v, t)| from_my(v, t)).collect())
}

/// Quotes a value as a MySQL literal for multi-row INSERTs.
fn literal(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("NULL"),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => out.push_str(&f.to_string()),
        Value::Text(s) => {
            out.push('\'');
            for c in s.chars() {
                match c {
                    '\'' => out.push_str("''"),
                    '\\' => out.push_str("\\\\"),
                    '\0' => out.push_str("\\0"),
                    c => out.push(c),
                }
            }
            out.push('\'');
        }
    }
}

/// How long a login may take (PostgreSQL's default here too).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl MyConn {
    pub(crate) fn connect(url: &DbUrl) -> Result<MyConn, DbError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DbError::new(ErrorKind::Other, format!("mysql: cannot start runtime: {e}")))?;
        let raw = url.expose().replacen("mariadb://", "mysql://", 1);
        let opts = Opts::from_url(&raw).map_err(|e| {
            DbError::new(ErrorKind::BadUrl, format!("mysql: bad URL {}: {e}", url.redacted()))
        })?;
        // mysql_async closes prepared statements it evicts from its cache
        // (32 by default) while our per-connection cache still holds them:
        // keep every statement a workload uses unless the URL says otherwise.
        // A URL without a password takes the mysql client's MYSQL_PWD, as a
        // pod reads it from a Kubernetes Secret (`k8s render`).
        let opts = match std::env::var("MYSQL_PWD").ok().filter(|p| !p.is_empty()) {
            Some(pw) if opts.pass().is_none() => {
                mysql_async::OptsBuilder::from_opts(opts).pass(Some(pw)).into()
            }
            _ => opts,
        };
        let opts = if raw.contains("stmt_cache_size") {
            opts
        } else {
            mysql_async::OptsBuilder::from_opts(opts).stmt_cache_size(1024).into()
        };
        // The login is bounded at 10 s, PostgreSQL's default here (mysql_async
        // has no connect timeout of its own): a server that takes the
        // connection but never answers would otherwise hold the caller.
        let conn = rt
            .block_on(async { tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(opts.clone())).await })
            .map_err(|_| {
                DbError::new(
                    ErrorKind::Connect,
                    format!(
                        "cannot connect to {}: no answer within {} s",
                        url.redacted(),
                        CONNECT_TIMEOUT.as_secs()
                    ),
                )
            })?
            .map_err(|e| {
                let err = map_err(e);
                let kind = if err.kind() == ErrorKind::Closed { ErrorKind::Connect } else { err.kind() };
                DbError::new(kind, format!("cannot connect to {}: {err}", url.redacted()))
            })?;
        let id = conn.id();
        Ok(MyConn { rt, conn: Some(conn), stmts: StmtCache::new(), closed: false, opts, id })
    }

    fn conn(&mut self) -> Result<&mut Conn, DbError> {
        self.conn.as_mut().ok_or_else(|| DbError::new(ErrorKind::Closed, "mysql: connection closed"))
    }

    fn track<T>(&mut self, r: Result<T, DbError>) -> Result<T, DbError> {
        if let Err(e) = &r {
            if e.kind() == ErrorKind::Closed {
                self.closed = true;
            }
        }
        r
    }

    fn statement(&mut self, stmt: &Stmt) -> Result<(Statement, Vec<usize>), DbError> {
        if let Some(s) = self.stmts.get(stmt.id()) {
            return Ok(s.clone());
        }
        let (sql, order) = to_mysql(stmt.sql());
        let rt = &self.rt;
        let conn =
            self.conn.as_mut().ok_or_else(|| DbError::new(ErrorKind::Closed, "mysql: connection closed"))?;
        let r = rt.block_on(conn.prep(sql)).map_err(map_err);
        let s = self.track(r)?;
        self.stmts.insert(stmt.id(), (s.clone(), order.clone()));
        Ok((s, order))
    }

    fn simple(&mut self, sql: &str) -> Result<(), DbError> {
        let rt = &self.rt;
        let conn =
            self.conn.as_mut().ok_or_else(|| DbError::new(ErrorKind::Closed, "mysql: connection closed"))?;
        let r = rt.block_on(conn.query_drop(sql)).map_err(map_err);
        self.track(r)
    }

    fn text_rows(&mut self, sql: &str) -> Result<Vec<Row>, DbError> {
        let rt = &self.rt;
        let conn =
            self.conn.as_mut().ok_or_else(|| DbError::new(ErrorKind::Closed, "mysql: connection closed"))?;
        let r = rt.block_on(conn.query::<mysql_async::Row, _>(sql)).map_err(map_err);
        Ok(self.track(r)?.into_iter().map(to_row).collect())
    }
}

impl Connection for MyConn {
    fn dialect(&self) -> Dialect {
        Dialect::Mysql
    }

    fn caps(&self) -> Caps {
        Caps {
            procedures: true,
            copy: false,
            concurrent_writers: true,
            server_counters: true,
            failed_commit_ends_transaction: false,
        }
    }

    fn execute(&mut self, stmt: &Stmt, params: &[Value]) -> Result<u64, DbError> {
        let (s, order) = self.statement(stmt)?;
        let p = Params::Positional(
            order.iter().map(|&i| params.get(i).map(to_my).unwrap_or(mysql_async::Value::NULL)).collect(),
        );
        let rt = &self.rt;
        let conn =
            self.conn.as_mut().ok_or_else(|| DbError::new(ErrorKind::Closed, "mysql: connection closed"))?;
        let r = rt.block_on(conn.exec_drop(&s, p)).map(|_| ()).map_err(map_err);
        self.track(r)?;
        Ok(self.conn()?.affected_rows())
    }

    fn query(&mut self, stmt: &Stmt, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let (s, order) = self.statement(stmt)?;
        let p = Params::Positional(
            order.iter().map(|&i| params.get(i).map(to_my).unwrap_or(mysql_async::Value::NULL)).collect(),
        );
        let rt = &self.rt;
        let conn =
            self.conn.as_mut().ok_or_else(|| DbError::new(ErrorKind::Closed, "mysql: connection closed"))?;
        let r = rt.block_on(conn.exec::<mysql_async::Row, _, _>(&s, p)).map_err(map_err);
        Ok(self.track(r)?.into_iter().map(to_row).collect())
    }

    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        self.simple(sql)
    }

    fn begin(&mut self) -> Result<(), DbError> {
        self.simple("BEGIN")
    }

    fn commit(&mut self) -> Result<(), DbError> {
        self.simple("COMMIT")
    }

    fn rollback(&mut self) -> Result<(), DbError> {
        self.simple("ROLLBACK")
    }

    fn load(&mut self, table: &str, columns: &[&str], rows: &[Vec<Value>]) -> Result<(), DbError> {
        // Multi-row INSERTs of ~1000 rows: within max_allowed_packet for TPC rows.
        for chunk in rows.chunks(1000) {
            let mut sql = format!("INSERT INTO {table} ({}) VALUES ", columns.join(", "));
            for (i, r) in chunk.iter().enumerate() {
                sql.push_str(if i == 0 { "(" } else { ",(" });
                for (j, v) in r.iter().enumerate() {
                    if j > 0 {
                        sql.push(',');
                    }
                    literal(v, &mut sql);
                }
                sql.push(')');
            }
            self.simple(&sql)?;
        }
        Ok(())
    }

    fn counters(&mut self) -> Result<Option<Counters>, DbError> {
        let rows = self.text_rows(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit','Com_rollback','Innodb_buffer_pool_reads','Innodb_buffer_pool_read_requests','Innodb_os_log_fsyncs')",
        )?;
        let mut c = Counters { scope: "server", ..Default::default() };
        for r in rows {
            let v = r.int(1).unwrap_or(0).max(0) as u64;
            match r.text(0)?.as_str() {
                "Com_commit" | "Com_rollback" => c.xact_all += v,
                "Innodb_buffer_pool_reads" => c.blocks_read = v,
                "Innodb_buffer_pool_read_requests" => c.blocks_hit += v,
                "Innodb_os_log_fsyncs" => c.log_flushes = Some(v),
                _ => {}
            }
        }
        c.blocks_hit = c.blocks_hit.saturating_sub(c.blocks_read);
        c.xact_db = c.xact_all;
        Ok(Some(c))
    }

    fn server_info(&mut self) -> Result<ServerInfo, DbError> {
        let version =
            self.text_rows("SELECT VERSION()")?.first().map(|r| r.text(0)).transpose()?.unwrap_or_default();
        let mut settings = std::collections::BTreeMap::new();
        for r in self.text_rows(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_buffer_pool_size','innodb_flush_log_at_trx_commit','innodb_flush_method','innodb_log_file_size','sync_binlog','innodb_doublewrite','transaction_isolation','tx_isolation')",
        )? {
            settings.insert(r.text(0)?, r.text(1).unwrap_or_default());
        }
        Ok(ServerInfo { engine: "mysql".into(), version, settings })
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn canceller(&self) -> Option<Box<dyn Cancel>> {
        Some(Box::new(MyCancel { opts: self.opts.clone(), id: self.id }))
    }
}

impl Drop for MyConn {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            let _ = self.rt.block_on(c.disconnect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_escaped() {
        let mut s = String::new();
        literal(&Value::Text("it's a \\ test".into()), &mut s);
        assert_eq!(s, "'it''s a \\\\ test'");
        s.clear();
        literal(&Value::Null, &mut s);
        assert_eq!(s, "NULL");
    }

    #[test]
    fn decimals_arrive_as_floats() {
        let v = from_my(mysql_async::Value::Bytes(b"12.50".to_vec()), ColumnType::MYSQL_TYPE_NEWDECIMAL);
        assert_eq!(v, Value::Float(12.5));
        let v = from_my(mysql_async::Value::Bytes(b"abc".to_vec()), ColumnType::MYSQL_TYPE_VAR_STRING);
        assert_eq!(v, Value::Text("abc".into()));
    }
}
