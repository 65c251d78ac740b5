//! A blocking PostgreSQL frontend: the wire protocol spoken straight over a
//! TCP or Unix-domain socket on the caller's thread.
//!
//! Why not tokio-postgres here: a virtual user is one OS thread that sends a
//! call and waits for its answer. Through an async client every call paid for
//! a runtime turn, a channel hop to the connection task and an epoll wait;
//! the profile of a one-user TPC-C run put more of the driver's CPU there
//! than in storbench itself. Blocking I/O costs one `write` and, usually, one
//! `read` per call. Message encoding, parsing and authentication (MD5,
//! SCRAM-SHA-256) come from `postgres-protocol`; URL parsing from
//! `tokio_postgres::Config`, so both accept the same URLs.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::{DataRowBody, ErrorResponseBody, Message};
use postgres_protocol::message::frontend;
use tokio_postgres::config::Host;
use tokio_postgres::types::{IsNull, ToSql, Type};
use tokio_postgres::Config;

use crate::error::{DbError, ErrorKind};
use crate::value::{Row, Value};

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A prepared statement: its server-side name and the types the server
/// inferred for its parameters and result columns.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    name: String,
    params: Vec<Type>,
    columns: Vec<Type>,
}

impl Prepared {
    /// Decodes a binary-format result row of this statement.
    pub(crate) fn row(&self, row: &DataRowBody) -> Result<Row, DbError> {
        let buf = row.buffer();
        let mut out = Vec::with_capacity(self.columns.len());
        let mut ranges = row.ranges();
        while let Some(r) = ranges.next().map_err(decode_error)? {
            let i = out.len();
            let ty = self.columns.get(i).unwrap_or(&Type::UNKNOWN);
            out.push(decode(ty, r.map(|r| &buf[r]), i)?);
        }
        Ok(Row(out))
    }
}

/// One connection to a PostgreSQL server.
pub(crate) struct Wire {
    stream: Stream,
    rbuf: BytesMut,
    scratch: Box<[u8]>,
    wbuf: BytesMut,
    closed: bool,
    /// The server's ParameterStatus values (server_version, ...).
    pub(crate) server_params: BTreeMap<String, String>,
}

/// SQLSTATE → error kind, for the codes a workload reacts to.
fn kind_of(code: &str) -> ErrorKind {
    match code {
        "40001" | "40P01" => ErrorKind::Retryable,
        "28P01" | "28000" => ErrorKind::Auth,
        "42501" => ErrorKind::Permission,
        "42P01" | "42883" | "3D000" | "42703" => ErrorKind::MissingObject,
        "57P01" | "57P02" | "57P03" => ErrorKind::Closed,
        _ => ErrorKind::Other,
    }
}

fn io_error(e: io::Error) -> DbError {
    DbError::new(ErrorKind::Closed, format!("postgres: connection lost: {e}"))
}

fn decode_error(e: io::Error) -> DbError {
    DbError::new(ErrorKind::Decode, format!("postgres: bad message from server: {e}"))
}

fn protocol_error(what: &str) -> DbError {
    DbError::new(ErrorKind::Other, format!("postgres: protocol error: unexpected {what}"))
}

fn user_of(config: &Config) -> String {
    config
        .get_user()
        .map(str::to_string)
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "postgres".to_string())
}

fn open(host: &Host, port: u16, timeout: Duration) -> io::Result<Stream> {
    match host {
        Host::Tcp(name) => {
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{name} resolves to no address"));
            for addr in (name.as_str(), port).to_socket_addrs()? {
                match TcpStream::connect_timeout(&addr, timeout) {
                    Ok(s) => {
                        s.set_nodelay(true)?;
                        let sock = socket2::SockRef::from(&s);
                        let ka = socket2::TcpKeepalive::new()
                            .with_time(Duration::from_secs(10))
                            .with_interval(Duration::from_secs(5));
                        sock.set_tcp_keepalive(&ka)?;
                        return Ok(Stream::Tcp(s));
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
        Host::Unix(dir) => Ok(Stream::Unix(UnixStream::connect(dir.join(format!(".s.PGSQL.{port}")))?)),
    }
}

impl Wire {
    /// Connects and authenticates; errors carry no URL (the caller adds the
    /// redacted one).
    pub(crate) fn connect(config: &Config) -> Result<Wire, DbError> {
        let timeout = config.get_connect_timeout().copied().unwrap_or(Duration::from_secs(10));
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(DbError::new(
                ErrorKind::Connect,
                "postgres: sslmode=require, and storbench speaks PostgreSQL without TLS (use sslmode=disable or prefer)",
            ));
        }
        let hosts = config.get_hosts();
        if hosts.is_empty() {
            return Err(DbError::new(ErrorKind::Connect, "postgres: the URL names no host"));
        }
        let ports = config.get_ports();
        let mut last = None;
        for (i, host) in hosts.iter().enumerate() {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match open(host, port, timeout) {
                Ok(stream) => {
                    let mut w = Wire {
                        stream,
                        rbuf: BytesMut::with_capacity(64 * 1024),
                        scratch: vec![0; 32 * 1024].into_boxed_slice(),
                        wbuf: BytesMut::with_capacity(4 * 1024),
                        closed: false,
                        server_params: BTreeMap::new(),
                    };
                    // A server that accepts but never answers must not hang
                    // the login: the connect timeout bounds it too.
                    w.stream.set_read_timeout(Some(timeout)).map_err(io_error)?;
                    w.startup(config)?;
                    w.stream.set_read_timeout(None).map_err(io_error)?;
                    return Ok(w);
                }
                Err(e) => last = Some(e),
            }
        }
        let e = last.expect("at least one host was tried");
        Err(DbError::new(ErrorKind::Connect, format!("postgres: {e}")))
    }

    fn startup(&mut self, config: &Config) -> Result<(), DbError> {
        let user = user_of(config);
        let mut params = vec![("user", user.as_str()), ("client_encoding", "UTF8")];
        if let Some(db) = config.get_dbname() {
            params.push(("database", db));
        }
        params.push(("application_name", config.get_application_name().unwrap_or("storbench")));
        if let Some(o) = config.get_options() {
            params.push(("options", o));
        }
        self.encode(|b| frontend::startup_message(params.iter().copied(), b))?;
        self.send()?;
        let password = config.get_password();
        let need_password =
            || DbError::new(ErrorKind::Auth, "postgres: the server asks for a password and the URL has none");
        let mut scram: Option<sasl::ScramSha256> = None;
        loop {
            match self.recv()? {
                Message::AuthenticationOk => {}
                Message::AuthenticationCleartextPassword => {
                    let pw = password.ok_or_else(need_password)?;
                    self.encode(|b| frontend::password_message(pw, b))?;
                    self.send()?;
                }
                Message::AuthenticationMd5Password(body) => {
                    let pw = password.ok_or_else(need_password)?;
                    let hash = md5_hash(user.as_bytes(), pw, body.salt());
                    self.encode(|b| frontend::password_message(hash.as_bytes(), b))?;
                    self.send()?;
                }
                Message::AuthenticationSasl(body) => {
                    let pw = password.ok_or_else(need_password)?;
                    let mut mechs = body.mechanisms();
                    let mut ok = false;
                    while let Some(m) = mechs.next().map_err(decode_error)? {
                        ok |= m == sasl::SCRAM_SHA_256;
                    }
                    if !ok {
                        return Err(DbError::new(
                            ErrorKind::Auth,
                            "postgres: the server offers no SASL mechanism storbench speaks (SCRAM-SHA-256)",
                        ));
                    }
                    let s = sasl::ScramSha256::new(pw, sasl::ChannelBinding::unsupported());
                    self.encode(|b| frontend::sasl_initial_response(sasl::SCRAM_SHA_256, s.message(), b))?;
                    self.send()?;
                    scram = Some(s);
                }
                Message::AuthenticationSaslContinue(body) => {
                    let s = scram.as_mut().ok_or_else(|| protocol_error("SASL continue"))?;
                    s.update(body.data())
                        .map_err(|e| DbError::new(ErrorKind::Auth, format!("postgres: {e}")))?;
                    self.encode(|b| frontend::sasl_response(s.message(), b))?;
                    self.send()?;
                }
                Message::AuthenticationSaslFinal(body) => {
                    let s = scram.as_mut().ok_or_else(|| protocol_error("SASL final"))?;
                    s.finish(body.data())
                        .map_err(|e| DbError::new(ErrorKind::Auth, format!("postgres: {e}")))?;
                }
                Message::AuthenticationKerberosV5
                | Message::AuthenticationScmCredential
                | Message::AuthenticationGss
                | Message::AuthenticationSspi
                | Message::AuthenticationGssContinue(_) => {
                    return Err(DbError::new(
                        ErrorKind::Auth,
                        "postgres: the server asks for an authentication method storbench does not speak \
                         (trust, password, md5 and scram-sha-256 are supported)",
                    ))
                }
                Message::BackendKeyData(_) => {}
                Message::ReadyForQuery(_) => return Ok(()),
                Message::ErrorResponse(body) => {
                    let e = self.server_error(&body);
                    self.closed = true;
                    return Err(e);
                }
                _ => return Err(protocol_error("message during startup")),
            }
        }
    }

    /// The error a server's ErrorResponse reports; a FATAL or PANIC one
    /// also ends the session (the server closes the socket next).
    fn server_error(&mut self, body: &ErrorResponseBody) -> DbError {
        let mut code = String::new();
        let mut message = String::new();
        let mut fields = body.fields();
        while let Ok(Some(f)) = fields.next() {
            match f.type_() {
                b'C' => code = String::from_utf8_lossy(f.value_bytes()).into_owned(),
                b'M' => message = String::from_utf8_lossy(f.value_bytes()).into_owned(),
                b'S' if matches!(f.value_bytes(), b"FATAL" | b"PANIC") => self.closed = true,
                _ => {}
            }
        }
        DbError::new(kind_of(&code), format!("postgres: {message}")).with_code(&code)
    }

    /// True once the socket failed or the server ended the session.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// The result of encoding a message into the write buffer; on failure
    /// (a NUL byte in a string, say) the half-written message is dropped so
    /// that it never reaches the server.
    fn encode(&mut self, f: impl FnOnce(&mut BytesMut) -> io::Result<()>) -> Result<(), DbError> {
        f(&mut self.wbuf).map_err(|e| {
            self.wbuf.clear();
            DbError::new(ErrorKind::Other, format!("postgres: cannot send: {e}"))
        })
    }

    fn send(&mut self) -> Result<(), DbError> {
        let r = self.stream.write_all(&self.wbuf);
        self.wbuf.clear();
        r.map_err(|e| {
            self.closed = true;
            io_error(e)
        })
    }

    /// The next message that matters (notices and parameter changes are
    /// absorbed here).
    fn recv(&mut self) -> Result<Message, DbError> {
        loop {
            match Message::parse(&mut self.rbuf) {
                Ok(Some(Message::NoticeResponse(_))) | Ok(Some(Message::NotificationResponse(_))) => continue,
                Ok(Some(Message::ParameterStatus(p))) => {
                    if let (Ok(k), Ok(v)) = (p.name(), p.value()) {
                        self.server_params.insert(k.to_string(), v.to_string());
                    }
                    continue;
                }
                Ok(Some(m)) => return Ok(m),
                Ok(None) => {}
                Err(e) => {
                    self.closed = true;
                    return Err(DbError::new(
                        ErrorKind::Other,
                        format!("postgres: bad message from server: {e}"),
                    ));
                }
            }
            // Read into a scratch buffer zeroed once, and copy what came:
            // a typical answer is a few hundred bytes, and zeroing a window
            // of the receive buffer before every read cost more than that.
            match self.stream.read(&mut self.scratch[..]) {
                Ok(0) => {
                    self.closed = true;
                    return Err(DbError::new(
                        ErrorKind::Closed,
                        "postgres: the server closed the connection",
                    ));
                }
                Ok(n) => self.rbuf.extend_from_slice(&self.scratch[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    // Only the login has a read timeout.
                    self.closed = true;
                    return Err(DbError::new(
                        ErrorKind::Connect,
                        "postgres: the server did not answer the login in time",
                    ));
                }
                Err(e) => {
                    self.closed = true;
                    return Err(io_error(e));
                }
            }
        }
    }

    /// Reads to ReadyForQuery, handing every other message to `each`; the
    /// first server error is returned after ReadyForQuery (the connection
    /// stays usable). `each` fails only on a message it does not expect. A
    /// COPY FROM STDIN the caller did not ask for is refused here, whatever
    /// sent it.
    fn read_to_ready(&mut self, mut each: impl FnMut(Message) -> Result<(), DbError>) -> Result<(), DbError> {
        let mut err = None;
        loop {
            match self.recv()? {
                Message::ErrorResponse(body) => {
                    let e = self.server_error(&body);
                    err.get_or_insert(e);
                    if self.closed {
                        break;
                    }
                }
                Message::CopyInResponse(_) => {
                    self.encode(|b| frontend::copy_fail("storbench sends COPY data only through load", b))?;
                    self.send()?;
                }
                Message::ReadyForQuery(_) => break,
                m => each(m)?,
            }
        }
        err.map_or(Ok(()), Err)
    }

    /// Prepares `sql` under `name`.
    pub(crate) fn prepare(&mut self, name: &str, sql: &str) -> Result<Prepared, DbError> {
        self.encode(|b| frontend::parse(name, sql, std::iter::empty(), b))?;
        self.encode(|b| frontend::describe(b'S', name, b))?;
        frontend::sync(&mut self.wbuf);
        self.send()?;
        let mut params = Vec::new();
        let mut columns = Vec::new();
        self.read_to_ready(|m| {
            match m {
                Message::ParseComplete | Message::NoData => {}
                Message::ParameterDescription(body) => {
                    let mut it = body.parameters();
                    while let Some(oid) = it.next().map_err(decode_error)? {
                        params.push(Type::from_oid(oid).unwrap_or(Type::UNKNOWN));
                    }
                }
                Message::RowDescription(body) => {
                    let mut it = body.fields();
                    while let Some(f) = it.next().map_err(decode_error)? {
                        columns.push(Type::from_oid(f.type_oid()).unwrap_or(Type::UNKNOWN));
                    }
                }
                _ => return Err(protocol_error("message after Parse")),
            }
            Ok(())
        })?;
        Ok(Prepared { name: name.to_string(), params, columns })
    }

    /// Runs a prepared statement; each result row goes to `on_row`. Returns
    /// the rows affected (or returned).
    pub(crate) fn run(
        &mut self,
        stmt: &Prepared,
        values: &[Value],
        mut on_row: impl FnMut(&Prepared, &DataRowBody) -> Result<(), DbError>,
    ) -> Result<u64, DbError> {
        if values.len() != stmt.params.len() {
            return Err(DbError::new(
                ErrorKind::Other,
                format!("postgres: statement takes {} parameters, got {}", stmt.params.len(), values.len()),
            ));
        }
        self.encode(|b| {
            frontend::bind(
                "",
                &stmt.name,
                std::iter::once(1i16),
                values.iter().zip(&stmt.params),
                |(v, ty), buf| {
                    v.to_sql(ty, buf).map(|n| match n {
                        IsNull::Yes => postgres_protocol::IsNull::Yes,
                        IsNull::No => postgres_protocol::IsNull::No,
                    })
                },
                std::iter::once(1i16),
                b,
            )
            .map_err(|e| match e {
                frontend::BindError::Conversion(e) => io::Error::other(e),
                frontend::BindError::Serialization(e) => e,
            })
        })?;
        self.encode(|b| frontend::execute("", 0, b))?;
        frontend::sync(&mut self.wbuf);
        self.send()?;
        let mut count = 0;
        let mut row_err = None;
        self.read_to_ready(|m| {
            match m {
                Message::BindComplete | Message::EmptyQueryResponse => {}
                Message::DataRow(row) => {
                    if row_err.is_none() {
                        row_err = on_row(stmt, &row).err();
                    }
                }
                Message::CommandComplete(body) => {
                    let tag = body.tag().unwrap_or("");
                    count = tag.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
                }
                _ => return Err(protocol_error("message after Execute")),
            }
            Ok(())
        })?;
        row_err.map_or(Ok(count), Err)
    }

    /// Runs `sql` by the simple-query protocol (several statements allowed);
    /// rows come back as text.
    pub(crate) fn simple(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, DbError> {
        self.encode(|b| frontend::query(sql, b))?;
        self.send()?;
        let mut rows = Vec::new();
        self.read_to_ready(|m| {
            match m {
                Message::RowDescription(_) | Message::CommandComplete(_) | Message::EmptyQueryResponse => {}
                Message::DataRow(row) => {
                    let buf = row.buffer();
                    let mut out = Vec::new();
                    let mut ranges = row.ranges();
                    while let Some(r) = ranges.next().map_err(decode_error)? {
                        out.push(r.map(|r| String::from_utf8_lossy(&buf[r]).into_owned()));
                    }
                    rows.push(out);
                }
                _ => return Err(protocol_error("message after Query")),
            }
            Ok(())
        })?;
        Ok(rows)
    }

    /// `COPY … FROM STDIN` with `data` (already in COPY text format).
    pub(crate) fn copy_in(&mut self, sql: &str, data: &[u8]) -> Result<(), DbError> {
        self.encode(|b| frontend::query(sql, b))?;
        self.send()?;
        match self.recv()? {
            Message::CopyInResponse(_) => {}
            Message::ErrorResponse(body) => {
                let e = self.server_error(&body);
                if !self.closed {
                    self.read_to_ready(|_| Ok(()))?;
                }
                return Err(e);
            }
            _ => return Err(protocol_error("answer to COPY")),
        }
        // CopyData messages of at most 1 MiB, written straight from `data`.
        for chunk in data.chunks(1 << 20) {
            self.wbuf.put_u8(b'd');
            self.wbuf.put_i32(chunk.len() as i32 + 4);
            self.send()?;
            self.stream.write_all(chunk).map_err(|e| {
                self.closed = true;
                io_error(e)
            })?;
        }
        frontend::copy_done(&mut self.wbuf);
        self.send()?;
        self.read_to_ready(|m| match m {
            Message::CommandComplete(_) => Ok(()),
            _ => Err(protocol_error("message after CopyDone")),
        })
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        if !self.closed {
            frontend::terminate(&mut self.wbuf);
            let _ = self.stream.write_all(&self.wbuf);
        }
    }
}

/// Decodes column `i` of a binary-format row.
fn decode(ty: &Type, raw: Option<&[u8]>, i: usize) -> Result<Value, DbError> {
    let Some(raw) = raw else { return Ok(Value::Null) };
    let short =
        || DbError::new(ErrorKind::Decode, format!("postgres column {i}: {} bytes for {ty}", raw.len()));
    let be = |n: usize| -> Result<&[u8], DbError> {
        if raw.len() == n {
            Ok(raw)
        } else {
            Err(short())
        }
    };
    Ok(match *ty {
        Type::INT2 => Value::Int(i16::from_be_bytes(be(2)?.try_into().expect("2 bytes")) as i64),
        Type::INT4 => Value::Int(i32::from_be_bytes(be(4)?.try_into().expect("4 bytes")) as i64),
        Type::INT8 => Value::Int(i64::from_be_bytes(be(8)?.try_into().expect("8 bytes"))),
        Type::OID => Value::Int(u32::from_be_bytes(be(4)?.try_into().expect("4 bytes")) as i64),
        Type::FLOAT4 => Value::Float(f32::from_be_bytes(be(4)?.try_into().expect("4 bytes")) as f64),
        Type::FLOAT8 => Value::Float(f64::from_be_bytes(be(8)?.try_into().expect("8 bytes"))),
        Type::BOOL => Value::Int((be(1)?[0] != 0) as i64),
        Type::NUMERIC => Value::Float(numeric_f64(raw).ok_or_else(short)?),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            Value::Text(String::from_utf8_lossy(raw).into_owned())
        }
        ref other => {
            return Err(DbError::new(
                ErrorKind::Decode,
                format!("postgres column {i} has type {other}: cast it to text or a number in the query"),
            ))
        }
    })
}

/// NUMERIC's binary form (base-10000 digits) as f64.
pub(crate) fn numeric_f64(raw: &[u8]) -> Option<f64> {
    if raw.len() < 8 {
        return None;
    }
    let rd = |i: usize| i16::from_be_bytes([raw[i], raw[i + 1]]);
    let ndigits = rd(0) as usize;
    let weight = rd(2) as i32;
    let sign = u16::from_be_bytes([raw[4], raw[5]]);
    if sign == 0xC000 {
        return Some(f64::NAN);
    }
    if raw.len() < 8 + 2 * ndigits {
        return None;
    }
    let mut v = 0f64;
    for k in 0..ndigits {
        v += rd(8 + 2 * k) as f64 * 10_000f64.powi(weight - k as i32);
    }
    Some(if sign == 0x4000 { -v } else { v })
}

/// Writes `v` in NUMERIC's binary form, keeping 6 decimal places — enough
/// for TPC money and rates.
pub(crate) fn write_numeric(
    v: f64,
    out: &mut BytesMut,
) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
    if !v.is_finite() {
        return Err(format!("cannot send {v} as numeric").into());
    }
    let neg = v < 0.0;
    let scaled = (v.abs() * 1e6).round() as u128; // fixed point, 6 decimals
    let int = scaled / 1_000_000;
    // 6 fraction digits -> two base-10000 groups (4 + 2 padded).
    let frac = (scaled % 1_000_000) as u64;
    // Base-10000 groups, most significant first, on the stack (this runs for
    // every money parameter of every call): at most 9 integer groups
    // (u128 / 10^6) and 2 fraction groups.
    let mut groups = [0i16; 12];
    let mut n_int = 0;
    let mut n = int;
    while n > 0 {
        groups[n_int] = (n % 10_000) as i16;
        n /= 10_000;
        n_int += 1;
    }
    groups[..n_int].reverse();
    groups[n_int] = (frac / 100) as i16;
    groups[n_int + 1] = ((frac % 100) * 100) as i16;
    let mut digits = &groups[..n_int + 2];
    let mut weight = n_int as i16 - 1;
    while digits.len() > 1 && digits[0] == 0 {
        digits = &digits[1..];
        weight -= 1;
    }
    while let [rest @ .., 0] = digits {
        digits = rest;
    }
    out.put_i16(digits.len() as i16);
    out.put_i16(if digits.is_empty() { 0 } else { weight });
    out.put_u16(if neg && !digits.is_empty() { 0x4000 } else { 0 });
    out.put_u16(6);
    for d in digits {
        out.put_i16(*d);
    }
    Ok(IsNull::No)
}
