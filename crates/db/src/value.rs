//! Values, rows and statements shared by every engine.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{DbError, ErrorKind};

/// A parameter or column value. NUMERIC/DECIMAL columns arrive as `Float`;
/// dates and times should be cast to text in the SQL.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point or decimal number.
    Float(f64),
    /// Text.
    Text(String),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v as i64)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(v as i64)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map(Into::into).unwrap_or(Value::Null)
    }
}

/// One result row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn at(&self, i: usize) -> Result<&Value, DbError> {
        self.0.get(i).ok_or_else(|| {
            DbError::new(ErrorKind::Decode, format!("no column {i} in a row of {}", self.0.len()))
        })
    }

    /// Column `i` as an integer (floats with no fraction and numeric text
    /// are accepted).
    pub fn int(&self, i: usize) -> Result<i64, DbError> {
        match self.at(i)? {
            Value::Int(v) => Ok(*v),
            Value::Float(f) if f.fract() == 0.0 => Ok(*f as i64),
            Value::Text(t) => t
                .trim()
                .parse()
                .map_err(|_| DbError::new(ErrorKind::Decode, format!("column {i}: '{t}' is not an integer"))),
            v => Err(DbError::new(ErrorKind::Decode, format!("column {i}: {v:?} is not an integer"))),
        }
    }

    /// Column `i` as a float (integers and numeric text are accepted).
    pub fn float(&self, i: usize) -> Result<f64, DbError> {
        match self.at(i)? {
            Value::Float(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            Value::Text(t) => t
                .trim()
                .parse()
                .map_err(|_| DbError::new(ErrorKind::Decode, format!("column {i}: '{t}' is not a number"))),
            v => Err(DbError::new(ErrorKind::Decode, format!("column {i}: {v:?} is not a number"))),
        }
    }

    /// Column `i` as text (numbers are formatted).
    pub fn text(&self, i: usize) -> Result<String, DbError> {
        match self.at(i)? {
            Value::Text(t) => Ok(t.clone()),
            Value::Int(v) => Ok(v.to_string()),
            Value::Float(v) => Ok(v.to_string()),
            Value::Null => Err(DbError::new(ErrorKind::Decode, format!("column {i} is NULL"))),
        }
    }

    /// True when column `i` is NULL.
    pub fn is_null(&self, i: usize) -> Result<bool, DbError> {
        Ok(matches!(self.at(i)?, Value::Null))
    }
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

/// A statement: SQL written once with `$1, $2, ...` placeholders, shared by
/// every connection (cheap to clone). Each connection prepares it on first
/// use and keeps it, indexed by the statement's id, so a reconnect simply
/// prepares again.
#[derive(Clone, Debug)]
pub struct Stmt {
    inner: Arc<StmtInner>,
}

#[derive(Debug)]
struct StmtInner {
    id: usize,
    sql: String,
}

impl Stmt {
    /// A statement with `$n` placeholders.
    pub fn new(sql: impl Into<String>) -> Stmt {
        Stmt { inner: Arc::new(StmtInner { id: NEXT_ID.fetch_add(1, Ordering::Relaxed), sql: sql.into() }) }
    }

    /// Process-unique id, the key of each connection's prepared cache.
    pub fn id(&self) -> usize {
        self.inner.id
    }

    /// The SQL as written.
    pub fn sql(&self) -> &str {
        &self.inner.sql
    }
}

/// A per-connection cache of prepared statements indexed by [`Stmt::id`].
pub(crate) struct StmtCache<T> {
    slots: Vec<Option<T>>,
}

impl<T> StmtCache<T> {
    pub(crate) fn new() -> Self {
        Self { slots: Vec::new() }
    }

    pub(crate) fn get(&self, id: usize) -> Option<&T> {
        self.slots.get(id).and_then(Option::as_ref)
    }

    pub(crate) fn insert(&mut self, id: usize, v: T) {
        if self.slots.len() <= id {
            self.slots.resize_with(id + 1, || None);
        }
        self.slots[id] = Some(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_accessors_convert_and_fail_clearly() {
        let r = Row(vec![Value::Int(3), Value::Float(2.5), Value::Text("12".into()), Value::Null]);
        assert_eq!(r.int(0).unwrap(), 3);
        assert_eq!(r.float(0).unwrap(), 3.0);
        assert_eq!(r.float(1).unwrap(), 2.5);
        assert!(r.int(1).is_err());
        assert_eq!(r.int(2).unwrap(), 12);
        assert!(r.is_null(3).unwrap());
        assert!(r.text(3).is_err());
        assert!(r.int(9).unwrap_err().to_string().contains("no column 9"));
    }

    #[test]
    fn statements_get_distinct_ids() {
        let a = Stmt::new("SELECT 1");
        let b = Stmt::new("SELECT 1");
        assert_ne!(a.id(), b.id());
        assert_eq!(a.clone().id(), a.id());
    }
}
