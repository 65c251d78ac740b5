//! TLS for the PostgreSQL client, as libpq reads `sslmode` and `sslrootcert`
//! from a URL, with rustls (ring provider; no OpenSSL).
//!
//! The modes mean what they mean in libpq: `disable` never asks for TLS;
//! `prefer` (the default) asks and goes on in the clear if the server says
//! no or the handshake fails (on a new connection); `require` insists on TLS and, like libpq, does not check the
//! certificate (it guards against eavesdropping, not impersonation);
//! `verify-ca` also checks that the certificate chains to a trusted root;
//! `verify-full` also checks that it names the host the URL names. The roots
//! are `sslrootcert=FILE` (PEM), else `~/.postgresql/root.crt` when it exists
//! (libpq's default), else the system's store read by `rustls-native-certs`
//! (what libpq calls `sslrootcert=system`, also accepted by that name).
//! `allow`, client certificates and direct TLS negotiation are not spoken:
//! they are refused by name, never ignored. A Unix-domain socket never uses
//! TLS (libpq does the same). This module does no I/O beyond reading the
//! root certificates; the handshake is driven by `pgwire`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{DbError, ErrorKind};

/// libpq's `sslmode`, less `allow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it; no certificate check.
    Prefer,
    /// TLS or nothing; no certificate check.
    Require,
    /// TLS with a certificate that chains to a trusted root.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host.
    VerifyFull,
}

impl SslMode {
    /// The name as written in a URL.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// True when a server that refuses TLS must be refused in turn.
    pub(crate) fn required(self) -> bool {
        !matches!(self, SslMode::Disable | SslMode::Prefer)
    }
}

/// Where trusted roots come from for `verify-ca` / `verify-full`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Roots {
    /// `sslrootcert` not given: `~/.postgresql/root.crt` if present, else the system's.
    Default,
    /// `sslrootcert=system`.
    System,
    /// `sslrootcert=FILE`.
    File(PathBuf),
}

/// The TLS settings of one URL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TlsParams {
    pub(crate) mode: SslMode,
    pub(crate) roots: Roots,
}

fn bad(msg: String) -> DbError {
    DbError::new(ErrorKind::Connect, format!("postgres: {msg}"))
}

/// A setting in the URL that cannot be used as given (bad input).
fn bad_url(msg: String) -> DbError {
    DbError::new(ErrorKind::BadUrl, format!("postgres: {msg}"))
}

/// Takes the TLS parameters out of a `postgres://` URL's query string and
/// returns the URL without them (for `tokio_postgres::Config`, which knows
/// neither `verify-*` nor `sslrootcert`) and the settings. A bad value is
/// named with what is allowed.
pub(crate) fn split_url(raw: &str) -> Result<(String, TlsParams), DbError> {
    let mut params = TlsParams { mode: SslMode::Prefer, roots: Roots::Default };
    let Some((base, query)) = raw.split_once('?') else {
        return Ok((raw.to_string(), params));
    };
    let mut kept = Vec::new();
    let mut rootcert = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let value = || percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned();
        match k {
            "sslmode" => {
                params.mode = match value().as_str() {
                    "disable" => SslMode::Disable,
                    "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(bad_url(format!(
                            "sslmode={other} is not supported: use disable, prefer, require, verify-ca or verify-full"
                        )))
                    }
                }
            }
            "sslrootcert" => rootcert = Some(value()),
            "sslcert" | "sslkey" | "sslpassword" | "sslcrl" | "sslcrldir" => {
                return Err(bad_url(format!("{k} is not supported: storbench does not send client certificates")))
            }
            "sslnegotiation" if value() != "postgres" => {
                return Err(bad_url(format!(
                    "sslnegotiation={} is not supported: storbench negotiates TLS by SSLRequest (postgres)",
                    value()
                )))
            }
            "sslnegotiation" => {}
            _ => kept.push(pair),
        }
    }
    if let Some(r) = rootcert {
        params.roots = if r == "system" { Roots::System } else { Roots::File(PathBuf::from(r)) };
    }
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((url, params))
}

fn provider() -> Arc<CryptoProvider> {
    static P: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    P.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

fn load_roots(roots: &Roots) -> Result<(RootCertStore, String), DbError> {
    let mut store = RootCertStore::empty();
    let home_root = std::env::var_os("HOME").map(|h| Path::new(&h).join(".postgresql/root.crt"));
    let file = match roots {
        Roots::File(p) => Some(p.clone()),
        Roots::Default => home_root.filter(|p| p.exists()),
        Roots::System => None,
    };
    if let Some(path) = file {
        let certs = CertificateDer::pem_file_iter(&path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| bad_url(format!("sslrootcert {}: cannot read certificates: {e}", path.display())))?;
        let (added, _) = store.add_parsable_certificates(certs);
        if added == 0 {
            return Err(bad_url(format!("sslrootcert {}: no certificate in it", path.display())));
        }
        return Ok((store, format!("sslrootcert {}", path.display())));
    }
    let found = rustls_native_certs::load_native_certs();
    store.add_parsable_certificates(found.certs);
    if store.is_empty() {
        return Err(bad(
            "the system has no trusted root certificates for verify-ca/verify-full: give sslrootcert=FILE"
                .into(),
        ));
    }
    Ok((store, "the system's trusted roots".into()))
}

/// `require` and `prefer`: any certificate, but the handshake's signatures
/// are still checked against it (so the session keys are the server's).
#[derive(Debug)]
struct AnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain to a trusted root, not the name.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(m, c, d, &self.provider.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(m, c, d, &self.provider.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The client configuration for `params`, built once per process and
/// settings: reading the system's roots takes milliseconds, and a shared
/// configuration shares its session cache, so reconnects resume sessions.
/// The roots' source is returned for error messages.
pub(crate) fn client_config(params: &TlsParams) -> Result<(Arc<ClientConfig>, Arc<str>), DbError> {
    type Cache = Mutex<Vec<(TlsParams, Arc<ClientConfig>, Arc<str>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some((_, c, s)) = cache.lock().expect("tls cache").iter().find(|(p, _, _)| p == params) {
        return Ok((c.clone(), s.clone()));
    }
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(format!("TLS setup: {e}")))?;
    let (config, source): (ClientConfig, Arc<str>) = match params.mode {
        SslMode::VerifyFull => {
            let (roots, source) = load_roots(&params.roots)?;
            let v = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| bad(format!("TLS setup: {e}")))?;
            (builder.with_webpki_verifier(v).with_no_client_auth(), source.into())
        }
        SslMode::VerifyCa => {
            let (roots, source) = load_roots(&params.roots)?;
            let v = ChainOnly { roots: Arc::new(roots), provider };
            (
                builder.dangerous().with_custom_certificate_verifier(Arc::new(v)).with_no_client_auth(),
                source.into(),
            )
        }
        _ => (
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
                .with_no_client_auth(),
            "no roots (not checked)".into(),
        ),
    };
    let config = Arc::new(config);
    cache.lock().expect("tls cache").push((params.clone(), config.clone(), source.clone()));
    Ok((config, source))
}

/// The name the certificate is checked against (and sent as SNI when it is
/// a DNS name): the URL's host.
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, DbError> {
    ServerName::try_from(host.to_string())
        .map_err(|e| bad(format!("'{host}' cannot be checked against a certificate: {e}")))
}

/// One line for a failed handshake, naming the mode and, for a certificate
/// the roots do not vouch for, where the roots came from.
pub(crate) fn handshake_error(mode: SslMode, roots: &str, e: &std::io::Error) -> DbError {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    let why = match inner {
        Some(rustls::Error::InvalidCertificate(c)) => match c {
            rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature => {
                format!("the server's certificate is not signed by a root in {roots}")
            }
            rustls::CertificateError::NotValidForNameContext { expected, presented } => {
                // `presented` holds names as Debug text: DnsName("localhost").
                let names: Vec<&str> =
                    presented.iter().map(|p| p.split('"').nth(1).unwrap_or(p.as_str())).collect();
                format!(
                    "the server's certificate is for {}, not {} (connect by that name, or use sslmode=verify-ca)",
                    if names.is_empty() { "no name".to_string() } else { names.join(", ") },
                    expected.to_str()
                )
            }
            rustls::CertificateError::NotValidForName => {
                "the server's certificate does not name the host (connect by its name, or use sslmode=verify-ca)".into()
            }
            other => format!("the server's certificate is refused: {other:?}"),
        },
        Some(other) => other.to_string(),
        None => e.to_string(),
    };
    DbError::new(ErrorKind::Connect, format!("postgres: TLS (sslmode={}): {why}", mode.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssl_parameters_leave_the_url_and_others_stay() {
        let (u, p) = split_url(
            "postgres://u:pw@h:5/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fr.pem",
        )
        .unwrap();
        assert_eq!(u, "postgres://u:pw@h:5/db?application_name=x");
        assert_eq!(p.mode, SslMode::VerifyFull);
        assert_eq!(p.roots, Roots::File("/tmp/r.pem".into()));
        let (u, p) = split_url("postgres://h/db").unwrap();
        assert_eq!((u.as_str(), p.mode, p.roots), ("postgres://h/db", SslMode::Prefer, Roots::Default));
        let (u, p) = split_url("postgres://h/db?sslmode=disable").unwrap();
        assert_eq!((u.as_str(), p.mode), ("postgres://h/db", SslMode::Disable));
        assert_eq!(split_url("postgres://h/db?sslrootcert=system").unwrap().1.roots, Roots::System);
    }

    #[test]
    fn unsupported_ssl_values_are_named() {
        let e = split_url("postgres://h/db?sslmode=allow").unwrap_err().to_string();
        assert!(e.contains("sslmode=allow") && e.contains("verify-full"), "{e}");
        let e = split_url("postgres://h/db?sslcert=/c.pem").unwrap_err().to_string();
        assert!(e.contains("sslcert is not supported"), "{e}");
        let e = split_url("postgres://h/db?sslnegotiation=direct").unwrap_err().to_string();
        assert!(e.contains("sslnegotiation=direct"), "{e}");
    }
}
