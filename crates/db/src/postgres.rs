//! PostgreSQL over the blocking wire-protocol client in [`crate::pgwire`],
//! on the caller's thread. Counters come from pg_stat_database: commits +
//! rollbacks over all databases (HammerDB's TPM source) and of the connected
//! database alone.

use std::error::Error as StdError;
use std::time::Duration;

use bytes::BytesMut;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use crate::error::{DbError, ErrorKind};
use crate::pgwire::{write_numeric, PgCancel, Prepared, TlsInfo, Wire};
use crate::url::DbUrl;
use crate::value::{Row, Stmt, StmtCache, Value};
use crate::{Cancel, Caps, Connection, Counters, Dialect, ServerInfo};

pub(crate) struct PgConn {
    wire: Wire,
    stmts: StmtCache<Prepared>,
    /// COPY text of the last load, kept for its capacity.
    copy_buf: Vec<u8>,
}

/// An integer that does not fit the parameter's type: refused, never
/// truncated into another value.
fn out_of_range(v: i64, ty: &Type) -> Box<dyn StdError + Sync + Send> {
    format!("{v} does not fit the parameter's type {ty}").into()
}

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => match *ty {
                Type::INT2 => i16::try_from(*v).map_err(|_| out_of_range(*v, ty))?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*v).map_err(|_| out_of_range(*v, ty))?.to_sql(ty, out),
                Type::INT8 => v.to_sql(ty, out),
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                Type::NUMERIC => write_numeric(*v as f64, out),
                Type::BOOL => (*v != 0).to_sql(ty, out),
                _ => v.to_string().as_str().to_sql(ty, out),
            },
            Value::Float(v) => match *ty {
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                Type::FLOAT8 => v.to_sql(ty, out),
                Type::NUMERIC => write_numeric(*v, out),
                Type::INT2 | Type::INT4 | Type::INT8 => {
                    Err(format!("cannot send {v} as integer type {ty}").into())
                }
                _ => v.to_string().as_str().to_sql(ty, out),
            },
            Value::Text(s) => s.as_str().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Escapes a value for COPY's text format. The load's hot loop: numbers
/// are formatted without allocating, and text with nothing to escape (all
/// generated text) is copied whole.
fn copy_text(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"\\N"),
        Value::Int(i) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        Value::Float(f) => {
            use std::io::Write;
            let _ = write!(out, "{f}");
        }
        Value::Text(s) if !s.bytes().any(|b| matches!(b, b'\\' | b'\t' | b'\n' | b'\r')) => {
            out.extend_from_slice(s.as_bytes())
        }
        Value::Text(s) => {
            for &b in s.as_bytes() {
                match b {
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    _ => out.push(b),
                }
            }
        }
    }
}

impl PgConn {
    pub(crate) fn connect(url: &DbUrl) -> Result<PgConn, DbError> {
        // tokio_postgres::Config parses the rest of the URL; it knows
        // neither verify-ca/verify-full nor sslrootcert.
        let (rest, tls) = crate::pgtls::split_url(url.expose())
            .map_err(|e| DbError::new(e.kind(), format!("{}: {e}", url.redacted())))?;
        let mut config: tokio_postgres::Config = rest.parse().map_err(|e| {
            DbError::new(ErrorKind::BadUrl, format!("postgres: bad URL {}: {e}", url.redacted()))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        let wire = Wire::connect(&config, &tls).map_err(|err| match err.kind() {
            ErrorKind::Closed | ErrorKind::Other | ErrorKind::Connect => {
                DbError::new(ErrorKind::Connect, format!("cannot connect to {}: {err}", url.redacted()))
            }
            kind => DbError::new(kind, format!("{}: {err}", url.redacted())),
        })?;
        Ok(PgConn { wire, stmts: StmtCache::new(), copy_buf: Vec::new() })
    }

    /// Prepares `stmt` on this connection once.
    fn prepare(&mut self, stmt: &Stmt) -> Result<(), DbError> {
        if self.stmts.get(stmt.id()).is_none() {
            let p = self.wire.prepare(&format!("s{}", stmt.id()), stmt.sql())?;
            self.stmts.insert(stmt.id(), p);
        }
        Ok(())
    }

    fn simple(&mut self, sql: &str) -> Result<(), DbError> {
        self.wire.simple(sql).map(|_| ())
    }

    /// The column of the counters' query that gives the server's WAL
    /// flushes so far (see [`Counters::log_flushes`]):
    /// `pg_stat_wal.wal_sync` on 14-17, the WAL's fsyncs in `pg_stat_io`
    /// on 18 and later, NULL before 14. Zero where `wal_sync_method` is an
    /// open_* method (the server counts no syncs then).
    fn wal_flushes_sql(&self) -> &'static str {
        let major = self
            .wire
            .server_params
            .get("server_version")
            .and_then(|v| v.split(|c: char| !c.is_ascii_digit()).next()?.parse::<u32>().ok())
            .unwrap_or(0);
        match major {
            0..=13 => "NULL::int8",
            14..=17 => "(SELECT wal_sync FROM pg_stat_wal)::int8",
            _ => "(SELECT COALESCE(SUM(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal')::int8",
        }
    }
}

impl Connection for PgConn {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn caps(&self) -> Caps {
        Caps {
            procedures: true,
            copy: true,
            concurrent_writers: true,
            server_counters: true,
            failed_commit_ends_transaction: true,
        }
    }

    fn execute(&mut self, stmt: &Stmt, params: &[Value]) -> Result<u64, DbError> {
        self.prepare(stmt)?;
        let p = self.stmts.get(stmt.id()).expect("prepared");
        self.wire.run(p, params, |_, _| Ok(()))
    }

    fn query(&mut self, stmt: &Stmt, params: &[Value]) -> Result<Vec<Row>, DbError> {
        self.prepare(stmt)?;
        let p = self.stmts.get(stmt.id()).expect("prepared");
        let mut rows = Vec::new();
        self.wire.run(p, params, |p, row| {
            rows.push(p.row(row)?);
            Ok(())
        })?;
        Ok(rows)
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
        let mut buf = std::mem::take(&mut self.copy_buf);
        buf.clear();
        for r in rows {
            for (i, v) in r.iter().enumerate() {
                if i > 0 {
                    buf.push(b'\t');
                }
                copy_text(v, &mut buf);
            }
            buf.push(b'\n');
        }
        let sql = format!("COPY {table} ({}) FROM STDIN", columns.join(", "));
        let r = self.wire.copy_in(&sql, &buf);
        self.copy_buf = buf;
        r
    }

    fn counters(&mut self) -> Result<Option<Counters>, DbError> {
        // One statement, so reading the counters is one transaction.
        let sql = format!(
            "SELECT COALESCE(SUM(xact_commit + xact_rollback), 0)::int8, \
             COALESCE(SUM(CASE WHEN datname = current_database() THEN xact_commit + xact_rollback END), 0)::int8, \
             COALESCE(SUM(CASE WHEN datname = current_database() THEN blks_read END), 0)::int8, \
             COALESCE(SUM(CASE WHEN datname = current_database() THEN blks_hit END), 0)::int8, \
             {} FROM pg_stat_database",
            self.wal_flushes_sql()
        );
        // The statistics snapshot is per transaction: read outside one.
        let rows = self.wire.simple(&sql)?;
        let g = |i: usize| -> Result<u64, DbError> {
            rows.first()
                .and_then(|r| r.get(i))
                .and_then(|v| v.as_deref())
                .and_then(|v| v.parse::<i64>().ok())
                .map(|v| v.max(0) as u64)
                .ok_or_else(|| DbError::new(ErrorKind::Decode, "postgres: pg_stat_database gave no counters"))
        };
        Ok(Some(Counters {
            xact_all: g(0)?,
            xact_db: g(1)?,
            blocks_read: g(2)?,
            blocks_hit: g(3)?,
            scope: "database",
            log_flushes: g(4).ok(),
        }))
    }

    fn server_info(&mut self) -> Result<ServerInfo, DbError> {
        // Every server reports its version at login (ParameterStatus).
        let version = self.wire.server_params.get("server_version").cloned().unwrap_or_default();
        let rows = self.wire.simple(
            "SELECT name, setting FROM pg_settings WHERE source NOT IN ('default', 'override', 'client', 'session') ORDER BY name",
        )?;
        let settings = rows
            .into_iter()
            .filter_map(|mut r| {
                let v = r.pop()??;
                let k = r.pop()??;
                Some((k, v))
            })
            .collect();
        Ok(ServerInfo { engine: "postgres".into(), version, settings })
    }

    fn is_closed(&self) -> bool {
        self.wire.is_closed()
    }

    fn canceller(&self) -> Option<Box<dyn Cancel>> {
        self.wire.canceller().map(|c| Box::new(c) as Box<dyn Cancel>)
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.wire.tls().cloned()
    }
}

impl Cancel for PgCancel {
    fn cancel(&self) -> Result<(), DbError> {
        self.send()
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_binary_round_trips() {
        for v in [0.0, 1.0, -1.5, 12345.678901, 0.0001, 99999999.99, -0.5, 10000.0] {
            let mut b = BytesMut::new();
            write_numeric(v, &mut b).unwrap();
            let back = crate::pgwire::numeric_f64(&b).unwrap();
            assert!((back - v).abs() < 1e-6, "{v} -> {back}");
        }
    }

    #[test]
    fn copy_text_escapes() {
        let mut out = Vec::new();
        copy_text(&Value::Text("a\tb\\c\nd".into()), &mut out);
        assert_eq!(out, b"a\\tb\\\\c\\nd");
        out.clear();
        copy_text(&Value::Null, &mut out);
        assert_eq!(out, b"\\N");
        out.clear();
        for v in [Value::Int(-42), Value::Float(12.5), Value::Text("plain".into())] {
            copy_text(&v, &mut out);
            out.push(b'|');
        }
        assert_eq!(out, b"-42|12.5|plain|");
    }
}
