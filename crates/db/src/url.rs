//! Database URLs: `sqlite:PATH`, `postgres://user[:pass]@host[:port]/db`,
//! `mysql://...` (or `mariadb://`), `managed:NAME`. Displaying a URL always
//! redacts its password, and [`redact_text`] scrubs passwords from any text
//! (error messages from drivers may echo the URL).

use std::fmt;

/// The engine a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Embedded SQLite file.
    Sqlite,
    /// PostgreSQL server.
    Postgres,
    /// MySQL or MariaDB server.
    Mysql,
    /// A managed instance by name, to be resolved to a server URL.
    Managed,
}

/// A parsed database URL. `Display` shows it redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct DbUrl {
    raw: String,
    engine: Engine,
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbUrl({})", self.redacted())
    }
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl DbUrl {
    /// Parses a URL; the error names the (redacted) value and what is allowed.
    pub fn parse(s: &str) -> Result<DbUrl, String> {
        let engine = if s.starts_with("sqlite:") {
            Engine::Sqlite
        } else if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Engine::Postgres
        } else if s.starts_with("mysql://") || s.starts_with("mariadb://") {
            Engine::Mysql
        } else if s.starts_with("managed:") {
            Engine::Managed
        } else {
            return Err(format!(
                "'{}' is not a database URL: use sqlite:PATH, postgres://user@host:port/db, mysql://user@host:port/db or managed:NAME",
                redact_text(s)
            ));
        };
        let url = DbUrl { raw: s.to_string(), engine };
        if matches!(engine, Engine::Sqlite | Engine::Managed) && url.rest().is_empty() {
            return Err(format!(
                "'{s}' names no {}",
                if engine == Engine::Sqlite { "file" } else { "instance" }
            ));
        }
        Ok(url)
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The URL with its password (if any) replaced by `***`.
    pub fn redacted(&self) -> String {
        redact_text(&self.raw)
    }

    /// The URL as given, password included: pass it only to a driver.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// For `sqlite:PATH` the path, for `managed:NAME` the name; else the part
    /// after the scheme.
    pub fn rest(&self) -> &str {
        match self.engine {
            Engine::Sqlite => self.raw["sqlite:".len()..].trim_start_matches("//"),
            Engine::Managed => &self.raw["managed:".len()..],
            _ => self.raw.split_once("://").map(|(_, r)| r).unwrap_or(""),
        }
    }

    /// The URL without its password, and the password (percent-decoded),
    /// for whoever must ship the URL where a password may not go (a
    /// Kubernetes ConfigMap) and the password apart (a Secret, read back as
    /// `PGPASSWORD`/`MYSQL_PWD`). Both the `user:password@` form and a
    /// `password=` query pair are taken out; a URL with neither comes back
    /// as it is, with `None`.
    pub fn split_password(&self) -> (String, Option<String>) {
        if !matches!(self.engine, Engine::Postgres | Engine::Mysql) {
            return (self.raw.clone(), None);
        }
        let decode = |p: &str| percent_encoding::percent_decode_str(p).decode_utf8_lossy().into_owned();
        let (scheme, rest) = self.raw.split_once("://").unwrap_or(("", &self.raw));
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let mut password = None;
        let authority = match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, pw)) => {
                    password = Some(decode(pw));
                    format!("{user}@{host}")
                }
                None => authority.to_string(),
            },
            None => authority.to_string(),
        };
        let tail = match tail.split_once('?') {
            Some((path, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&') {
                    match pair.strip_prefix("password=") {
                        Some(pw) => password = Some(decode(pw)),
                        None => kept.push(pair),
                    }
                }
                if kept.iter().all(|p| p.is_empty()) {
                    path.to_string()
                } else {
                    format!("{path}?{}", kept.join("&"))
                }
            }
            None => tail.to_string(),
        };
        (format!("{scheme}://{authority}{tail}"), password)
    }

    /// The database name of a server URL (path segment before any `?`).
    pub fn database(&self) -> Option<&str> {
        if !matches!(self.engine, Engine::Postgres | Engine::Mysql) {
            return None;
        }
        let rest = self.rest();
        let after_host = rest.split_once('/')?.1;
        let db = after_host.split('?').next().unwrap_or("");
        (!db.is_empty()).then_some(db)
    }
}

/// Replaces the password in every `scheme://user:password@` of `text` with
/// `***`, and `password=...` key-value pairs too.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // userinfo ends at the first '@' before any '/', whitespace or quote.
        let end =
            tail.find(|c: char| c == '/' || c.is_whitespace() || c == '\'' || c == '"').unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => {
                let userinfo = &tail[..at];
                match userinfo.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                rest = &tail[at..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    // key=value forms (libpq conninfo, some driver messages)
    let mut result = String::with_capacity(out.len());
    let mut s = out.as_str();
    while let Some(i) = s.find("password=") {
        let (head, tail) = s.split_at(i + "password=".len());
        result.push_str(head);
        let end = tail.find(|c: char| c.is_whitespace() || c == '&' || c == ';').unwrap_or(tail.len());
        result.push_str("***");
        s = &tail[end..];
    }
    result.push_str(s);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_engine() {
        assert_eq!(DbUrl::parse("sqlite:./x.db").unwrap().engine(), Engine::Sqlite);
        assert_eq!(DbUrl::parse("sqlite:./x.db").unwrap().rest(), "./x.db");
        let pg = DbUrl::parse("postgres://u@127.0.0.1:5432/test").unwrap();
        assert_eq!(pg.engine(), Engine::Postgres);
        assert_eq!(pg.database(), Some("test"));
        assert_eq!(DbUrl::parse("mariadb://root@h/test").unwrap().engine(), Engine::Mysql);
        assert_eq!(DbUrl::parse("managed:pg1").unwrap().rest(), "pg1");
    }

    #[test]
    fn rejects_unknown_schemes_naming_them_redacted() {
        let e = DbUrl::parse("oracle://scott:tiger@h/db").unwrap_err();
        assert!(e.contains("oracle://scott:***@h/db"), "{e}");
        assert!(!e.contains("tiger"));
        assert!(e.contains("sqlite:PATH"));
        assert!(DbUrl::parse("sqlite:").is_err());
    }

    #[test]
    fn split_password_takes_the_password_out_decoded() {
        let split = |s: &str| DbUrl::parse(s).unwrap().split_password();
        assert_eq!(
            split("postgres://bob:s3%40cret@db:5432/x?sslmode=require"),
            ("postgres://bob@db:5432/x?sslmode=require".into(), Some("s3@cret".into()))
        );
        assert_eq!(
            split("mysql://root:pw@h/test?password=other&a=1"),
            ("mysql://root@h/test?a=1".into(), Some("other".into()))
        );
        assert_eq!(split("postgres://h/x?password=p"), ("postgres://h/x".into(), Some("p".into())));
        assert_eq!(split("postgres://bob@h/x"), ("postgres://bob@h/x".into(), None));
        assert_eq!(split("sqlite:{target}/b.db"), ("sqlite:{target}/b.db".into(), None));
    }

    #[test]
    fn redacts_passwords_everywhere() {
        let u = DbUrl::parse("postgres://bob:s3cret@db:5432/x").unwrap();
        assert_eq!(u.to_string(), "postgres://bob:***@db:5432/x");
        assert_eq!(format!("{u:?}"), "DbUrl(postgres://bob:***@db:5432/x)");
        assert_eq!(u.expose(), "postgres://bob:s3cret@db:5432/x");
        let t = redact_text("failed to connect to mysql://root:pw@h:3306/test: refused; password=hunter2 x");
        assert!(!t.contains("pw@") && !t.contains("hunter2"), "{t}");
        assert_eq!(redact_text("postgres://bob@h/x"), "postgres://bob@h/x");
        assert_eq!(redact_text("no urls here"), "no urls here");
        // '@' in the password itself
        assert_eq!(redact_text("postgres://u:p@ss@h/db"), "postgres://u:***@h/db");
    }
}
