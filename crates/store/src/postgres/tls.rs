//! TLS to PostgreSQL (rustls, ring provider), by `sslmode` as libpq names it:
//!
//! * `disable`: plain TCP.
//! * `prefer` (the default, as in libpq): TLS when the server offers it, else plain TCP; the
//!   certificate is not checked.
//! * `require`: TLS or no connection; the certificate is not checked, so this protects
//!   against passive eavesdropping only, not against someone who can intercept the
//!   connection and present a certificate of their own.
//! * `verify-full`: TLS, the certificate must chain to the root certificates in
//!   `ssl_root_cert` (the webpki roots, Mozilla's, when none are given) and name the host
//!   connected to.
//!
//! The mode and root certificates come from [`PostgresOptions`] or from the URL's `sslmode`
//! and `sslrootcert` parameters (tokio-postgres parses neither `verify-full` nor
//! `sslrootcert`, so they are taken out of the URL before it sees it); given both ways they
//! must agree.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::PostgresOptions;
use crate::StoreError;

/// How the connection to PostgreSQL is protected (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    #[default]
    Prefer,
    Require,
    VerifyFull,
}

impl SslMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What tokio-postgres does on the wire; which certificates are accepted is ours.
    pub(super) fn wire(self) -> tokio_postgres::config::SslMode {
        match self {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyFull => tokio_postgres::config::SslMode::Require,
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SslMode {
    type Err = String;

    fn from_str(s: &str) -> Result<SslMode, String> {
        match s {
            "disable" => Ok(SslMode::Disable),
            "prefer" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-full" => Ok(SslMode::VerifyFull),
            "allow" | "verify-ca" => {
                Err(format!("sslmode '{s}' is not supported: use disable, prefer, require or verify-full"))
            }
            _ => Err(format!("sslmode '{s}': use disable, prefer, require or verify-full")),
        }
    }
}

/// The mode and root certificates in force, and the connector that applies them.
#[derive(Clone)]
pub(super) struct Transport {
    pub(super) mode: SslMode,
    root_cert: Option<PathBuf>,
    pub(super) connector: MakeRustlsConnect,
}

impl Transport {
    /// The URL for tokio-postgres (without `sslmode` / `sslrootcert`) and the transport the
    /// options and the URL ask for. Reads the root certificates now: a missing or empty file
    /// is an error before anything connects.
    pub(super) fn new(options: &PostgresOptions) -> Result<(String, Transport), StoreError> {
        let (url, params) = take_params(&options.url);
        let invalid = |m: String| StoreError::Internal(format!("PostgreSQL TLS settings: {m}"));
        let url_mode = params.mode.as_deref().map(SslMode::from_str).transpose().map_err(invalid)?;
        let mode = match (options.ssl_mode, url_mode) {
            (Some(a), Some(b)) if a != b => {
                return Err(invalid(format!("sslmode is {a} in the options but {b} in the URL")));
            }
            (a, b) => a.or(b).unwrap_or_default(),
        };
        let url_root = params.root_cert.map(PathBuf::from);
        let root_cert = match (&options.ssl_root_cert, url_root) {
            (Some(a), Some(b)) if *a != b => {
                return Err(invalid(format!(
                    "the root certificates are {} in the options but {} in the URL (sslrootcert)",
                    a.display(),
                    b.display()
                )));
            }
            (a, b) => a.clone().or(b),
        };
        if let Some(path) = &root_cert
            && mode != SslMode::VerifyFull
        {
            return Err(invalid(format!(
                "root certificates ({}) are only used with sslmode verify-full, not {mode}",
                path.display()
            )));
        }
        let connector = MakeRustlsConnect::new(client_config(mode, root_cert.as_deref())?);
        Ok((url, Transport { mode, root_cert, connector }))
    }
}

/// For messages: `sslmode verify-full, root certificates from /etc/slipway/db-ca.pem`.
impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.mode, &self.root_cert) {
            (SslMode::VerifyFull, Some(path)) => {
                write!(f, "sslmode verify-full, root certificates from {}", path.display())
            }
            (SslMode::VerifyFull, None) => f.write_str("sslmode verify-full, webpki root certificates"),
            (mode, _) => write!(f, "sslmode {mode}"),
        }
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn client_config(mode: SslMode, root_cert: Option<&Path>) -> Result<ClientConfig, StoreError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Internal(format!("PostgreSQL TLS: {e}")))?;
    let config = if mode == SslMode::VerifyFull {
        let roots = match root_cert {
            Some(path) => root_certificates(path)?,
            None => RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() },
        };
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(Unchecked(provider))).with_no_client_auth()
    };
    Ok(config)
}

fn root_certificates(path: &Path) -> Result<RootCertStore, StoreError> {
    let fail = |why: String| StoreError::Internal(format!("PostgreSQL root certificates {}: {why}", path.display()));
    let pem = std::fs::read(path).map_err(|e| {
        fail(match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            _ => e.to_string(),
        })
    })?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| fail(format!("not valid PEM ({e})")))?;
        roots.add(cert).map_err(|e| fail(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(fail("no CERTIFICATE in it".into()));
    }
    Ok(roots)
}

/// `prefer` and `require`: any certificate, but the handshake's signatures are still checked
/// against it (the session is encrypted to whoever holds its key).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Params {
    mode: Option<String>,
    root_cert: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of a URL's query (or a key=value string); the last
/// of each counts, as in libpq.
fn take_params(url: &str) -> (String, Params) {
    let mut params = Params::default();
    let mut take = |key: &str, value: String| match key {
        "sslmode" => {
            params.mode = Some(value);
            true
        }
        "sslrootcert" => {
            params.root_cert = Some(value);
            true
        }
        _ => false,
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else { return (url.to_string(), params) };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                !take(key, percent_decode(value))
            })
            .collect();
        let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        return (url, params);
    }
    let kept: Vec<&str> = url
        .split_whitespace()
        .filter(|word| word.split_once('=').is_none_or(|(key, value)| !take(key, value.to_string())))
        .collect();
    (kept.join(" "), params)
}

/// `%2F` → `/`; anything that is not a valid escape stays as it is.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (bytes.get(i + 1).and_then(|b| hex(*b)), bytes.get(i + 2).and_then(|b| hex(*b)))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_by_their_libpq_names() {
        for m in [SslMode::Disable, SslMode::Prefer, SslMode::Require, SslMode::VerifyFull] {
            assert_eq!(m.as_str().parse::<SslMode>(), Ok(m));
        }
        assert_eq!(SslMode::default(), SslMode::Prefer, "libpq's default");
        let e = "verify-ca".parse::<SslMode>().unwrap_err();
        assert!(e.contains("not supported") && e.contains("verify-full"), "{e}");
        assert!("REQUIRE".parse::<SslMode>().is_err());
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_the_url() {
        let (url, p) =
            take_params("postgres://u:pw@db/x?sslmode=verify-full&application_name=a&sslrootcert=%2Fetc%2Fca.pem");
        assert_eq!(url, "postgres://u:pw@db/x?application_name=a");
        assert_eq!(p, Params { mode: Some("verify-full".into()), root_cert: Some("/etc/ca.pem".into()) });
        let (url, p) = take_params("postgresql://db/x?sslmode=require");
        assert_eq!((url.as_str(), p.mode.as_deref()), ("postgresql://db/x", Some("require")));
        let (url, p) = take_params("postgres://db/x");
        assert_eq!((url.as_str(), p), ("postgres://db/x", Params::default()));
        let (url, p) = take_params("host=db user=u sslmode=verify-full sslrootcert=ca.pem dbname=x");
        assert_eq!(url, "host=db user=u dbname=x");
        assert_eq!(p, Params { mode: Some("verify-full".into()), root_cert: Some("ca.pem".into()) });
        assert_eq!(percent_decode("a%2fb%zz%"), "a/b%zz%");
    }

    #[test]
    fn options_and_url_must_agree_and_root_certificates_must_load() {
        let dir = tempfile::tempdir().unwrap();
        let with = |url: &str, mode: Option<SslMode>, root: Option<&str>| PostgresOptions {
            ssl_mode: mode,
            ssl_root_cert: root.map(|r| dir.path().join(r)),
            ..PostgresOptions::new(url)
        };
        let err = |o: PostgresOptions| match Transport::new(&o) {
            Err(StoreError::Internal(m)) => m,
            other => panic!("accepted: {:?}", other.map(|(u, t)| (u, t.to_string()))),
        };
        let (url, t) = Transport::new(&with("postgres://u:pw@db/x", None, None)).unwrap();
        assert_eq!((url.as_str(), t.mode), ("postgres://u:pw@db/x", SslMode::Prefer));
        let (_, t) = Transport::new(&with("postgres://db/x?sslmode=disable", Some(SslMode::Disable), None)).unwrap();
        assert_eq!(t.to_string(), "sslmode disable");

        let m = err(with("postgres://u:pw@db/x?sslmode=disable", Some(SslMode::Require), None));
        assert!(m.contains("sslmode is require in the options but disable in the URL") && !m.contains("pw"), "{m}");
        let m = err(with("postgres://db/x?sslmode=verify-ca", None, None));
        assert!(m.contains("'verify-ca' is not supported"), "{m}");
        let m = err(with("postgres://db/x", Some(SslMode::Require), Some("ca.pem")));
        assert!(m.contains("only used with sslmode verify-full, not require"), "{m}");
        let m = err(with("postgres://db/x", Some(SslMode::VerifyFull), Some("ca.pem")));
        assert!(m.starts_with("PostgreSQL root certificates ") && m.ends_with("ca.pem: no such file"), "{m}");
        std::fs::write(dir.path().join("ca.pem"), "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
            .unwrap();
        let m = err(with("postgres://db/x", Some(SslMode::VerifyFull), Some("ca.pem")));
        assert!(m.ends_with("no CERTIFICATE in it") && !m.contains("AAAA"), "{m}");
        let m = err(with("postgres://db/x?sslrootcert=/other.pem", Some(SslMode::VerifyFull), Some("ca.pem")));
        assert!(m.contains("in the URL (sslrootcert)"), "{m}");

        let (_, t) = Transport::new(&with("postgres://db/x?sslmode=verify-full", None, None)).unwrap();
        assert_eq!(t.to_string(), "sslmode verify-full, webpki root certificates");
    }
}
