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
//! `tokio_postgres::Config`, so both accept the same URLs; TLS (rustls, per
//! `sslmode`) is set up in `pgtls` and wraps the same blocking socket.
//!
//! The conversation stays in step or ends: every answer is read to
//! ReadyForQuery, whatever the caller made of it, and a stream that cannot
//! be parsed shuts the socket and refuses further use. The backend key is
//! kept so that another thread can cancel a running statement (`PgCancel`).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::{DataRowBody, ErrorFields, ErrorResponseBody, Message};
use postgres_protocol::message::frontend;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use tokio_postgres::config::Host;
use tokio_postgres::types::{IsNull, ToSql, Type};
use tokio_postgres::Config;

use crate::error::{DbError, ErrorKind};
use crate::notice::{self, Notice};
use crate::pgtls::{self, SslMode, TlsParams};
use crate::value::{Row, Value};

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// TLS over TCP; boxed because a rustls connection is large.
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.sock.set_read_timeout(t),
        }
    }

    /// Ends the socket in both directions, so that a connection given up
    /// on mid-conversation can never be read from or written to again.
    fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(s) => s.sock.shutdown(Shutdown::Both),
        };
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            // rustls holds encrypted records until flushed.
            Stream::Tls(s) => s.flush(),
            _ => Ok(()),
        }
    }
}

/// Where a connection went, for the cancel request's own connection.
#[derive(Clone, Debug)]
enum Endpoint {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// What a connection needs to open another one like it for a cancel
/// request: the same address, and TLS when the connection had it.
#[derive(Clone)]
struct Reach {
    endpoint: Endpoint,
    tls: Option<TlsSetup>,
    timeout: Duration,
}

/// A TLS client set up for one host.
#[derive(Clone)]
struct TlsSetup {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    mode: SslMode,
    roots: Arc<str>,
}

/// What TLS a connection negotiated, for the run's record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TlsInfo {
    /// `sslmode` the URL asked for (`prefer` when it said nothing).
    pub sslmode: String,
    /// TLS version, e.g. `TLSv1_3`.
    pub version: String,
    /// Cipher suite, e.g. `TLS13_AES_256_GCM_SHA384`.
    pub cipher: String,
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
    /// BackendKeyData: the backend's process id and cancel secret.
    key: Option<(i32, i32)>,
    reach: Reach,
    tls: Option<TlsInfo>,
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

fn open(host: &Host, port: u16, timeout: Duration) -> io::Result<(Stream, Endpoint)> {
    match host {
        Host::Tcp(name) => {
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{name} resolves to no address"));
            for addr in (name.as_str(), port).to_socket_addrs()? {
                match tcp(addr, timeout) {
                    Ok(s) => return Ok((Stream::Tcp(s), Endpoint::Tcp(addr))),
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
        Host::Unix(dir) => {
            let path = dir.join(format!(".s.PGSQL.{port}"));
            Ok((Stream::Unix(UnixStream::connect(&path)?), Endpoint::Unix(path)))
        }
    }
}

fn tcp(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_nodelay(true)?;
    let sock = socket2::SockRef::from(&s);
    let ka =
        socket2::TcpKeepalive::new().with_time(Duration::from_secs(10)).with_interval(Duration::from_secs(5));
    sock.set_tcp_keepalive(&ka)?;
    Ok(s)
}

/// What the server answered to SSLRequest.
enum Offer {
    /// TLS: the handshake comes next on this socket.
    Accepted(TcpStream),
    /// No TLS, and the mode allows going on in the clear on this socket.
    Declined(TcpStream),
}

/// Asks a freshly opened TCP connection for TLS (SSLRequest). A server
/// that declines is an error when the mode requires TLS.
fn request_tls(mut sock: TcpStream, setup: &TlsSetup) -> Result<Offer, DbError> {
    let mut req = BytesMut::with_capacity(8);
    frontend::ssl_request(&mut req);
    sock.write_all(&req).map_err(io_error)?;
    let mut answer = [0u8; 1];
    sock.read_exact(&mut answer).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            DbError::new(ErrorKind::Connect, "postgres: the server did not answer the TLS request in time")
        }
        _ => io_error(e),
    })?;
    match answer[0] {
        b'S' => Ok(Offer::Accepted(sock)),
        b'N' if !setup.mode.required() => Ok(Offer::Declined(sock)),
        b'N' => Err(DbError::new(
            ErrorKind::Connect,
            format!("postgres: sslmode={} and the server does not accept TLS", setup.mode.name()),
        )),
        other => Err(DbError::new(
            ErrorKind::Connect,
            format!("postgres: protocol error: unexpected answer {other:#04x} to the TLS request"),
        )),
    }
}

/// The TLS handshake on a socket the server accepted TLS on.
fn handshake(mut sock: TcpStream, setup: &TlsSetup) -> Result<Stream, DbError> {
    let mut conn = ClientConnection::new(setup.config.clone(), setup.name.clone())
        .map_err(|e| DbError::new(ErrorKind::Connect, format!("postgres: TLS: {e}")))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => DbError::new(
                ErrorKind::Connect,
                "postgres: the server did not finish the TLS handshake in time",
            ),
            _ => pgtls::handshake_error(setup.mode, &setup.roots, &e),
        })?;
    }
    Ok(Stream::Tls(Box::new(StreamOwned::new(conn, sock))))
}

/// TLS on a fresh TCP connection to `addr` as `setup` says. Under
/// `prefer`, a handshake that fails is retried in the clear on a new
/// connection, as libpq does; the other modes fail with it.
fn secure(sock: TcpStream, addr: SocketAddr, setup: &TlsSetup, timeout: Duration) -> Result<Stream, DbError> {
    match request_tls(sock, setup)? {
        Offer::Declined(sock) => Ok(Stream::Tcp(sock)),
        Offer::Accepted(sock) => match handshake(sock, setup) {
            Err(_) if setup.mode == SslMode::Prefer => {
                let sock = tcp(addr, timeout).map_err(io_error)?;
                sock.set_read_timeout(Some(timeout)).map_err(io_error)?;
                Ok(Stream::Tcp(sock))
            }
            r => r,
        },
    }
}

impl Wire {
    /// Connects and authenticates; errors carry no URL (the caller adds the
    /// redacted one). TLS per `tls` on TCP; a Unix socket is always plain.
    pub(crate) fn connect(config: &Config, tls: &TlsParams) -> Result<Wire, DbError> {
        let timeout = config.get_connect_timeout().copied().unwrap_or(Duration::from_secs(10));
        // SCRAM here never binds to the TLS channel: a URL that demands it
        // is refused, not given a login without it.
        if config.get_channel_binding() == tokio_postgres::config::ChannelBinding::Require {
            return Err(DbError::new(
                ErrorKind::Connect,
                "postgres: channel_binding=require is not supported: storbench's SCRAM login does not bind \
                 to the TLS channel (use channel_binding=prefer or disable)",
            ));
        }
        let hosts = config.get_hosts();
        if hosts.is_empty() {
            return Err(DbError::new(ErrorKind::BadUrl, "postgres: the URL names no host"));
        }
        let tls_config = match tls.mode {
            SslMode::Disable => None,
            _ => Some(pgtls::client_config(tls)?),
        };
        let ports = config.get_ports();
        let mut last = None;
        for (i, host) in hosts.iter().enumerate() {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match open(host, port, timeout) {
                Ok((stream, endpoint)) => {
                    // A server that accepts but never answers must not hang
                    // the login: the connect timeout bounds it too.
                    stream.set_read_timeout(Some(timeout)).map_err(io_error)?;
                    let setup = match (&tls_config, host, &endpoint) {
                        (Some((config, roots)), Host::Tcp(name), Endpoint::Tcp(addr)) => Some(TlsSetup {
                            config: config.clone(),
                            // Only verify-full checks the name: a host name
                            // that cannot be one (my_db) needs it nowhere else.
                            name: match pgtls::server_name(name) {
                                Err(e) if tls.mode == SslMode::VerifyFull => return Err(e),
                                Err(_) => ServerName::IpAddress(addr.ip().into()),
                                Ok(n) => n,
                            },
                            mode: tls.mode,
                            roots: roots.clone(),
                        }),
                        _ => None,
                    };
                    let stream = match (stream, &setup, &endpoint) {
                        (Stream::Tcp(sock), Some(setup), Endpoint::Tcp(addr)) => {
                            secure(sock, *addr, setup, timeout)?
                        }
                        (stream, _, _) => stream,
                    };
                    let tls_info = match &stream {
                        Stream::Tls(s) => Some(TlsInfo {
                            sslmode: tls.mode.name().to_string(),
                            version: s.conn.protocol_version().map(|v| format!("{v:?}")).unwrap_or_default(),
                            cipher: s
                                .conn
                                .negotiated_cipher_suite()
                                .map(|c| format!("{:?}", c.suite()))
                                .unwrap_or_default(),
                        }),
                        _ => None,
                    };
                    let mut w = Wire {
                        reach: Reach { endpoint, tls: setup.filter(|_| tls_info.is_some()), timeout },
                        tls: tls_info,
                        stream,
                        rbuf: BytesMut::with_capacity(64 * 1024),
                        scratch: vec![0; 32 * 1024].into_boxed_slice(),
                        wbuf: BytesMut::with_capacity(4 * 1024),
                        closed: false,
                        server_params: BTreeMap::new(),
                        key: None,
                    };
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

    /// The TLS this connection negotiated; `None` when it runs in the clear.
    pub(crate) fn tls(&self) -> Option<&TlsInfo> {
        self.tls.as_ref()
    }

    /// A handle that cancels what this connection runs, from any thread;
    /// `None` before the server sent its key (never after a login).
    pub(crate) fn canceller(&self) -> Option<PgCancel> {
        let (pid, secret) = self.key?;
        Some(PgCancel { reach: self.reach.clone(), pid, secret })
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
        // A URL without a password takes libpq's PGPASSWORD, as a pod reads
        // it from a Kubernetes Secret (`k8s render` keeps passwords out of
        // the plan it ships).
        let env_password = std::env::var("PGPASSWORD").ok().filter(|p| !p.is_empty());
        let password = config.get_password().or(env_password.as_deref().map(str::as_bytes));
        let need_password = || {
            DbError::new(
                ErrorKind::Auth,
                "postgres: the server asks for a password and neither the URL nor PGPASSWORD has one",
            )
        };
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
                Message::BackendKeyData(k) => self.key = Some((k.process_id(), k.secret_key())),
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

    /// Writes the write buffer out. Refused once the connection is closed:
    /// a connection given up on mid-conversation is never written to again.
    fn send(&mut self) -> Result<(), DbError> {
        if self.closed {
            self.wbuf.clear();
            return Err(DbError::new(ErrorKind::Closed, "postgres: the connection is closed"));
        }
        let r = self.stream.write_all(&self.wbuf).and_then(|()| self.stream.flush());
        self.wbuf.clear();
        r.map_err(|e| {
            self.closed = true;
            io_error(e)
        })
    }

    /// Gives the connection up: the server said something that leaves the
    /// conversation's position unknown, so it must never be reused. The
    /// socket is shut down (the backend ends) and `what` comes back as a
    /// `Closed` error, which tells a worker to reconnect.
    fn broken(&mut self, what: impl std::fmt::Display) -> DbError {
        self.closed = true;
        self.stream.shutdown();
        DbError::new(ErrorKind::Closed, format!("postgres: protocol error: {what}; connection closed"))
    }

    /// The next message that matters (notices and parameter changes are
    /// absorbed here).
    fn recv(&mut self) -> Result<Message, DbError> {
        loop {
            match Message::parse(&mut self.rbuf) {
                Ok(Some(Message::NoticeResponse(body))) => {
                    notice::emit(&notice_of(body.fields()));
                    continue;
                }
                Ok(Some(Message::NotificationResponse(_))) => continue,
                Ok(Some(Message::ParameterStatus(p))) => {
                    if let (Ok(k), Ok(v)) = (p.name(), p.value()) {
                        self.server_params.insert(k.to_string(), v.to_string());
                    }
                    continue;
                }
                Ok(Some(m)) => return Ok(m),
                Ok(None) => {}
                Err(e) => return Err(self.broken(format_args!("bad message from server: {e}"))),
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
    /// first error is returned after ReadyForQuery, so the connection stays
    /// in step and usable. `each` fails on a message it does not expect or
    /// cannot decode: that error is kept, and the rest of the answer is
    /// read past without `each`. A COPY FROM STDIN the caller did not ask
    /// for is refused here, whatever sent it; a COPY TO STDOUT's data is
    /// read and dropped. A message that cannot be parsed at all (CopyBoth,
    /// an unknown tag) closes the connection in `recv`.
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
                Message::CopyOutResponse(_) | Message::CopyData(_) | Message::CopyDone => {}
                Message::ReadyForQuery(_) => break,
                m if err.is_none() => {
                    if let Err(e) = each(m) {
                        err = Some(e);
                    }
                }
                _ => {}
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
            // Not a COPY FROM STDIN after all: read the answer out so the
            // connection stays in step, and say so.
            Message::ReadyForQuery(_) => return Err(protocol_error("end of answer to COPY")),
            m => {
                let name = message_name(&m);
                self.read_to_ready(|_| Ok(()))?;
                return Err(protocol_error(&format!("{name} in answer to COPY FROM STDIN")));
            }
        }
        // CopyData messages of at most 1 MiB, written straight from `data`.
        for chunk in data.chunks(1 << 20) {
            self.wbuf.put_u8(b'd');
            self.wbuf.put_i32(chunk.len() as i32 + 4);
            self.send()?;
            self.stream.write_all(chunk).and_then(|()| self.stream.flush()).map_err(|e| {
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

/// The message's name, for an error that reports it.
fn message_name(m: &Message) -> &'static str {
    match m {
        Message::BindComplete => "BindComplete",
        Message::CommandComplete(_) => "CommandComplete",
        Message::CopyData(_) => "CopyData",
        Message::CopyDone => "CopyDone",
        Message::CopyOutResponse(_) => "CopyOutResponse",
        Message::CopyInResponse(_) => "CopyInResponse",
        Message::DataRow(_) => "DataRow",
        Message::EmptyQueryResponse => "EmptyQueryResponse",
        Message::NoData => "NoData",
        Message::ParseComplete => "ParseComplete",
        Message::RowDescription(_) => "RowDescription",
        _ => "message",
    }
}

/// A NoticeResponse's fields as a [`Notice`]. `V` (the severity never
/// translated, servers 9.6+) is preferred to `S` (localised).
fn notice_of(mut fields: ErrorFields<'_>) -> Notice {
    let mut n =
        Notice { engine: "postgres", severity: String::new(), code: String::new(), message: String::new() };
    let mut localized = String::new();
    while let Ok(Some(f)) = fields.next() {
        let v = || String::from_utf8_lossy(f.value_bytes()).into_owned();
        match f.type_() {
            b'V' => n.severity = v(),
            b'S' => localized = v(),
            b'C' => n.code = v(),
            b'M' => n.message = v(),
            _ => {}
        }
    }
    if n.severity.is_empty() {
        n.severity = localized;
    }
    n
}

/// Sends a CancelRequest for one backend over a connection of its own, as
/// the protocol asks (the busy connection cannot carry it).
pub(crate) struct PgCancel {
    reach: Reach,
    pid: i32,
    secret: i32,
}

impl PgCancel {
    /// Opens a connection to where the cancelled one went (TLS when it had
    /// TLS), sends the request and waits for the server to close, which
    /// it does once it has signalled the backend.
    pub(crate) fn send(&self) -> Result<(), DbError> {
        let t = self.reach.timeout;
        let fail = |e: io::Error| {
            DbError::new(ErrorKind::Connect, format!("postgres: cannot send a cancel request: {e}"))
        };
        let mut stream = match &self.reach.endpoint {
            Endpoint::Tcp(addr) => {
                let s = tcp(*addr, t).map_err(fail)?;
                s.set_read_timeout(Some(t)).map_err(fail)?;
                match &self.reach.tls {
                    Some(setup) => secure(s, *addr, setup, t)?,
                    None => Stream::Tcp(s),
                }
            }
            Endpoint::Unix(path) => {
                let s = UnixStream::connect(path).map_err(fail)?;
                s.set_read_timeout(Some(t)).map_err(fail)?;
                Stream::Unix(s)
            }
        };
        let mut buf = BytesMut::with_capacity(16);
        frontend::cancel_request(self.pid, self.secret, &mut buf);
        stream.write_all(&buf).and_then(|()| stream.flush()).map_err(fail)?;
        let mut sink = [0u8; 64];
        loop {
            match stream.read(&mut sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A TLS peer that closes without close_notify, or the
                // timeout: the request went out either way.
                Err(_) => break,
            }
        }
        Ok(())
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        if !self.closed {
            frontend::terminate(&mut self.wbuf);
            let _ = self.stream.write_all(&self.wbuf).and_then(|()| self.stream.flush());
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
    // Special values (numeric.c): NaN, and ±Infinity since PostgreSQL 14.
    match sign {
        0xC000 => return Some(f64::NAN),
        0xD000 => return Some(f64::INFINITY),
        0xF000 => return Some(f64::NEG_INFINITY),
        0x0000 | 0x4000 => {}
        _ => return None,
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
    // NaN and ±Infinity as numeric.c writes them (±Infinity needs a
    // PostgreSQL 14 server; an older one refuses it).
    let special = if v.is_nan() {
        0xC000
    } else if v == f64::INFINITY {
        0xD000
    } else if v == f64::NEG_INFINITY {
        0xF000
    } else {
        0
    };
    if special != 0 {
        out.put_i16(0);
        out.put_i16(0);
        out.put_u16(special);
        out.put_u16(0);
        return Ok(IsNull::No);
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
