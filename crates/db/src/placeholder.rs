//! Placeholder translation: statements are written with `$1, $2, ...`
//! (PostgreSQL's form); SQLite takes `?1, ?2`, MySQL only positional `?`,
//! so for MySQL the parameters are also reordered (and repeated) to match.
//! Quoted strings, quoted identifiers and comments are left alone.

/// Rewrites `$n` as produced by `emit(n)`; returns the SQL and the order in
/// which the original parameters (0-based) appear.
fn rewrite(sql: &str, emit: impl Fn(usize) -> String) -> (String, Vec<usize>) {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut order = Vec::new();
    let mut i = 0;
    let mut last = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'$' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let start = i;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let n: usize = sql[start + 1..i].parse().unwrap_or(0);
                if n > 0 {
                    out.push_str(&sql[last..start]);
                    out.push_str(&emit(n));
                    order.push(n - 1);
                    last = i;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[last.min(sql.len())..]);
    (out, order)
}

/// `$n` → `?n` for SQLite.
pub(crate) fn to_sqlite(sql: &str) -> String {
    rewrite(sql, |n| format!("?{n}")).0
}

/// `$n` → `?` for MySQL, with the parameter order to bind.
pub(crate) fn to_mysql(sql: &str) -> (String, Vec<usize>) {
    rewrite(sql, |_| "?".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_numbers_placeholders() {
        assert_eq!(
            to_sqlite("SELECT a FROM t WHERE x = $1 AND y = $2"),
            "SELECT a FROM t WHERE x = ?1 AND y = ?2"
        );
    }

    #[test]
    fn mysql_reorders_and_repeats() {
        let (sql, order) = to_mysql("UPDATE t SET a = a + $2 WHERE id = $1 OR id2 = $1");
        assert_eq!(sql, "UPDATE t SET a = a + ? WHERE id = ? OR id2 = ?");
        assert_eq!(order, vec![1, 0, 0]);
    }

    #[test]
    fn leaves_quotes_and_comments_alone() {
        let (sql, order) = to_mysql("SELECT '$1', \"$2\" -- $3\n, $1");
        assert_eq!(sql, "SELECT '$1', \"$2\" -- $3\n, ?");
        assert_eq!(order, vec![0]);
        assert_eq!(to_sqlite("SELECT $$ x $$"), "SELECT $$ x $$");
    }
}
