//! PostgreSQL through tokio-postgres, driven on the caller's thread by a
//! private single-threaded runtime. Counters come from pg_stat_database:
//! commits + rollbacks over all databases (HammerDB's TPM source) and of the
//! connected database alone.

use std::error::Error as StdError;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use futures_util::SinkExt;
use tokio::runtime::Runtime;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{accepts, to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::{Client, NoTls, Statement};

use crate::error::{DbError, ErrorKind};
use crate::url::DbUrl;
use crate::value::{Row, Stmt, StmtCache, Value};
use crate::{Caps, Connection, Counters, Dialect, ServerInfo};

pub(crate) struct PgConn {
    rt: Runtime,
    client: Client,
    stmts: StmtCache<Statement>,
}

fn map_err(e: tokio_postgres::Error) -> DbError {
    if let Some(db) = e.as_db_error() {
        let code = db.code().clone();
        let kind = if code == SqlState::T_R_SERIALIZATION_FAILURE || code == SqlState::T_R_DEADLOCK_DETECTED {
            ErrorKind::Retryable
        } else if code == SqlState::INVALID_PASSWORD || code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            ErrorKind::Auth
        } else if code == SqlState::INSUFFICIENT_PRIVILEGE {
            ErrorKind::Permission
        } else if code == SqlState::UNDEFINED_TABLE
            || code == SqlState::UNDEFINED_FUNCTION
            || code == SqlState::INVALID_CATALOG_NAME
            || code == SqlState::UNDEFINED_COLUMN
        {
            ErrorKind::MissingObject
        } else if code == SqlState::ADMIN_SHUTDOWN || code == SqlState::CRASH_SHUTDOWN {
            ErrorKind::Closed
        } else {
            ErrorKind::Other
        };
        return DbError::new(kind, format!("postgres: {}", db.message())).with_code(code.code());
    }
    let kind = if e.is_closed() || e.source().is_some_and(|s| s.is::<std::io::Error>()) {
        ErrorKind::Closed
    } else {
        ErrorKind::Other
    };
    let mut msg = e.to_string();
    if let Some(s) = e.source() {
        msg = format!("{msg}: {s}");
    }
    DbError::new(kind, format!("postgres: {msg}"))
}

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => match *ty {
                Type::INT2 => (*v as i16).to_sql(ty, out),
                Type::INT4 => (*v as i32).to_sql(ty, out),
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

/// Writes `v` in NUMERIC's binary form (base-10000 digits), keeping 6
/// decimal places — enough for TPC money and rates.
fn write_numeric(v: f64, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
    if !v.is_finite() {
        return Err(format!("cannot send {v} as numeric").into());
    }
    let neg = v < 0.0;
    let scaled = (v.abs() * 1e6).round() as u128; // fixed point, 6 decimals
    let int = scaled / 1_000_000;
    let frac = (scaled % 1_000_000) as u64; // 6 digits -> two base-10000 groups (4 + 2 padded)
    let mut int_groups = Vec::new();
    let mut n = int;
    while n > 0 {
        int_groups.push((n % 10_000) as i16);
        n /= 10_000;
    }
    int_groups.reverse();
    let frac_groups = [(frac / 100) as i16, ((frac % 100) * 100) as i16];
    let mut digits: Vec<i16> = int_groups.clone();
    digits.extend_from_slice(&frac_groups);
    let mut weight = int_groups.len() as i16 - 1;
    // strip leading zero groups
    while digits.len() > 1 && digits[0] == 0 {
        digits.remove(0);
        weight -= 1;
    }
    while digits.last() == Some(&0) {
        digits.pop();
    }
    out.put_i16(digits.len() as i16);
    out.put_i16(if digits.is_empty() { 0 } else { weight });
    out.put_u16(if neg && !digits.is_empty() { 0x4000 } else { 0 });
    out.put_u16(6);
    for d in digits {
        out.put_i16(d);
    }
    Ok(IsNull::No)
}

/// NUMERIC read as f64.
struct NumericF64(f64);

impl<'a> FromSql<'a> for NumericF64 {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        if raw.len() < 8 {
            return Err("short numeric".into());
        }
        let rd = |i: usize| i16::from_be_bytes([raw[i], raw[i + 1]]);
        let ndigits = rd(0) as usize;
        let weight = rd(2) as i32;
        let sign = u16::from_be_bytes([raw[4], raw[5]]);
        if sign == 0xC000 {
            return Ok(NumericF64(f64::NAN));
        }
        let mut v = 0f64;
        for i in 0..ndigits {
            let d = rd(8 + 2 * i) as f64;
            v += d * 10_000f64.powi(weight - i as i32);
        }
        Ok(NumericF64(if sign == 0x4000 { -v } else { v }))
    }
    accepts!(NUMERIC);
}

fn to_value(row: &tokio_postgres::Row, i: usize) -> Result<Value, DbError> {
    let ty = row.columns()[i].type_();
    let dec = |e: tokio_postgres::Error| DbError::new(ErrorKind::Decode, format!("postgres column {i}: {e}"));
    Ok(match *ty {
        Type::INT2 => row.try_get::<_, Option<i16>>(i).map_err(dec)?.map(|v| Value::Int(v as i64)),
        Type::INT4 => row.try_get::<_, Option<i32>>(i).map_err(dec)?.map(|v| Value::Int(v as i64)),
        Type::INT8 => row.try_get::<_, Option<i64>>(i).map_err(dec)?.map(Value::Int),
        Type::OID => row.try_get::<_, Option<u32>>(i).map_err(dec)?.map(|v| Value::Int(v as i64)),
        Type::FLOAT4 => row.try_get::<_, Option<f32>>(i).map_err(dec)?.map(|v| Value::Float(v as f64)),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i).map_err(dec)?.map(Value::Float),
        Type::NUMERIC => row.try_get::<_, Option<NumericF64>>(i).map_err(dec)?.map(|v| Value::Float(v.0)),
        Type::BOOL => row.try_get::<_, Option<bool>>(i).map_err(dec)?.map(|v| Value::Int(v as i64)),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            row.try_get::<_, Option<String>>(i).map_err(dec)?.map(Value::Text)
        }
        ref other => {
            return Err(DbError::new(
                ErrorKind::Decode,
                format!("postgres column {i} has type {other}: cast it to text or a number in the query"),
            ))
        }
    }
    .unwrap_or(Value::Null))
}

/// Escapes a value for COPY's text format.
fn copy_text(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"\\N"),
        Value::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Float(f) => out.extend_from_slice(f.to_string().as_bytes()),
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
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DbError::new(ErrorKind::Other, format!("postgres: cannot start runtime: {e}")))?;
        let mut config: tokio_postgres::Config = url.expose().parse().map_err(|e| {
            DbError::new(ErrorKind::Connect, format!("postgres: bad URL {}: {e}", url.redacted()))
        })?;
        config.connect_timeout(Duration::from_secs(10));
        config.keepalives_idle(Duration::from_secs(10));
        config.application_name("storbench");
        let (client, connection) = rt.block_on(config.connect(NoTls)).map_err(|e| {
            let mut err = map_err(e);
            if err.kind() == ErrorKind::Closed || err.kind() == ErrorKind::Other {
                err =
                    DbError::new(ErrorKind::Connect, format!("cannot connect to {}: {err}", url.redacted()));
            } else {
                err = DbError::new(err.kind(), format!("{}: {err}", url.redacted()));
            }
            err
        })?;
        rt.spawn(async move {
            let _ = connection.await;
        });
        Ok(PgConn { rt, client, stmts: StmtCache::new() })
    }

    fn statement(&mut self, stmt: &Stmt) -> Result<Statement, DbError> {
        if let Some(s) = self.stmts.get(stmt.id()) {
            return Ok(s.clone());
        }
        let s = self.rt.block_on(self.client.prepare(stmt.sql())).map_err(map_err)?;
        self.stmts.insert(stmt.id(), s.clone());
        Ok(s)
    }

    fn simple(&mut self, sql: &str) -> Result<(), DbError> {
        self.rt.block_on(self.client.batch_execute(sql)).map_err(map_err)
    }

    fn scalar_text(&mut self, sql: &str) -> Result<String, DbError> {
        let row = self.rt.block_on(self.client.query_one(sql, &[])).map_err(map_err)?;
        row.try_get::<_, String>(0).map_err(map_err)
    }
}

fn refs(params: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

impl Connection for PgConn {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn caps(&self) -> Caps {
        Caps { procedures: true, copy: true, concurrent_writers: true, server_counters: true }
    }

    fn execute(&mut self, stmt: &Stmt, params: &[Value]) -> Result<u64, DbError> {
        let s = self.statement(stmt)?;
        self.rt.block_on(self.client.execute(&s, &refs(params))).map_err(map_err)
    }

    fn query(&mut self, stmt: &Stmt, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let s = self.statement(stmt)?;
        let rows = self.rt.block_on(self.client.query(&s, &refs(params))).map_err(map_err)?;
        rows.iter()
            .map(|r| (0..r.len()).map(|i| to_value(r, i)).collect::<Result<Vec<_>, _>>().map(Row))
            .collect()
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
        let mut buf = Vec::with_capacity(rows.len() * 64);
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
        let client = &self.client;
        self.rt
            .block_on(async move {
                let sink = client.copy_in::<_, bytes::Bytes>(sql.as_str()).await?;
                let mut sink = std::pin::pin!(sink);
                sink.send(bytes::Bytes::from(buf)).await?;
                sink.as_mut().finish().await
            })
            .map(|_| ())
            .map_err(map_err)
    }

    fn counters(&mut self) -> Result<Option<Counters>, DbError> {
        let sql = "SELECT COALESCE(SUM(xact_commit + xact_rollback), 0)::int8, \
                   COALESCE(SUM(CASE WHEN datname = current_database() THEN xact_commit + xact_rollback END), 0)::int8, \
                   COALESCE(SUM(CASE WHEN datname = current_database() THEN blks_read END), 0)::int8, \
                   COALESCE(SUM(CASE WHEN datname = current_database() THEN blks_hit END), 0)::int8 \
                   FROM pg_stat_database";
        // The statistics snapshot is per transaction: read outside one.
        let row = self.rt.block_on(self.client.query_one(sql, &[])).map_err(map_err)?;
        let g = |i: usize| row.try_get::<_, i64>(i).map(|v| v.max(0) as u64).map_err(map_err);
        Ok(Some(Counters {
            xact_all: g(0)?,
            xact_db: g(1)?,
            blocks_read: g(2)?,
            blocks_hit: g(3)?,
            scope: "database",
        }))
    }

    fn server_info(&mut self) -> Result<ServerInfo, DbError> {
        let version = self.scalar_text("SHOW server_version")?;
        let rows = self
            .rt
            .block_on(self.client.query(
                "SELECT name, setting FROM pg_settings WHERE source NOT IN ('default', 'override', 'client', 'session') ORDER BY name",
                &[],
            ))
            .map_err(map_err)?;
        let settings = rows
            .iter()
            .filter_map(|r| Some((r.try_get::<_, String>(0).ok()?, r.try_get::<_, String>(1).ok()?)))
            .collect();
        Ok(ServerInfo { engine: "postgres".into(), version, settings })
    }

    fn is_closed(&self) -> bool {
        self.client.is_closed()
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
            let back = NumericF64::from_sql(&Type::NUMERIC, &b).unwrap().0;
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
    }
}
