//! TLS on the listener (rustls, ring provider, HTTP/1.1 only). The whole server
//! configuration — certificate chain, key and the optional client-certificate CA — is built
//! from PEM files and swapped for a new one when a poll of the files (every few seconds)
//! sees them change: a connection takes the configuration current when it is accepted and keeps it, so
//! a rotation reaches new connections only. A replacement that does not load (unreadable,
//! not PEM, a key that does not match the certificate) keeps the current configuration and
//! is logged once. Messages name files and what is wrong with them, never their contents.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

/// Where the listener's certificate, key and client CA are, and how often to look for new ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM: the server certificate first, then any intermediates.
    pub cert_file: PathBuf,
    /// PEM: the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM bundle: clients must present a certificate chaining to one of these.
    pub client_ca_file: Option<PathBuf>,
    /// How often the files are read to see whether they changed.
    pub reload_interval: Duration,
}

impl TlsOptions {
    pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(5);

    pub fn new(cert_file: impl Into<PathBuf>, key_file: impl Into<PathBuf>) -> TlsOptions {
        TlsOptions {
            cert_file: cert_file.into(),
            key_file: key_file.into(),
            client_ca_file: None,
            reload_interval: Self::DEFAULT_RELOAD_INTERVAL,
        }
    }

    fn files(&self) -> impl Iterator<Item = &Path> {
        [Some(self.cert_file.as_path()), Some(self.key_file.as_path()), self.client_ca_file.as_deref()]
            .into_iter()
            .flatten()
    }
}

/// Why a TLS configuration could not be built; names the file, never its contents.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(String);

/// The listener's TLS configuration as it is now. Cheap to clone (clones share it).
#[derive(Clone)]
pub struct ServerTls {
    options: TlsOptions,
    current: Arc<RwLock<Arc<ServerConfig>>>,
    /// What the files looked like when `current` was built from them.
    loaded_from: Fingerprint,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls").field("options", &self.options).finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads the files; an error says which one is missing, unreadable or wrong.
    pub fn load(options: TlsOptions) -> Result<ServerTls, TlsError> {
        let loaded_from = fingerprint(&options);
        let config = build(&options)?;
        Ok(ServerTls { options, current: Arc::new(RwLock::new(Arc::new(config))), loaded_from })
    }

    pub fn options(&self) -> &TlsOptions {
        &self.options
    }

    /// An acceptor with the configuration current now.
    pub(super) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.read().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// Polls the files every `reload_interval` until `stop` is set.
    pub(super) async fn watch(self, mut stop: watch::Receiver<bool>) {
        let mut reloader = Reloader { seen: self.loaded_from.clone(), rejected: None };
        let interval = self.options.reload_interval.max(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(interval) => {}
            }
            reloader.poll(&self);
        }
    }
}

/// What one poll did.
#[derive(Debug, PartialEq, Eq)]
enum Polled {
    Unchanged,
    Reloaded,
    /// The files changed but do not load; the current configuration stays.
    Rejected,
}

struct Reloader {
    seen: Fingerprint,
    /// The last state of the files that did not load (so it is logged once, not every poll).
    rejected: Option<Fingerprint>,
}

impl Reloader {
    fn poll(&mut self, tls: &ServerTls) -> Polled {
        // Taken before reading: a change while reading is seen by the next poll.
        let now = fingerprint(&tls.options);
        if now == self.seen || self.rejected.as_ref() == Some(&now) {
            return Polled::Unchanged;
        }
        match build(&tls.options) {
            Ok(config) => {
                *tls.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
                self.seen = now;
                self.rejected = None;
                tracing::info!(cert = %tls.options.cert_file.display(), "TLS certificate reloaded: new connections use it");
                Polled::Reloaded
            }
            Err(e) => {
                tracing::warn!(error = %e, "the TLS files changed but do not load: keeping the current certificate");
                self.rejected = Some(now);
                Polled::Rejected
            }
        }
    }
}

/// Per file, a hash of its contents (`None`: cannot be read right now). Contents, not
/// modification times: a file rewritten twice within one timestamp tick, or replaced by a
/// rename or a Kubernetes secret's symlink swap, is seen as changed; touching it is not.
type Fingerprint = Vec<Option<u64>>;

fn fingerprint(options: &TlsOptions) -> Fingerprint {
    use std::hash::{DefaultHasher, Hash, Hasher};
    options
        .files()
        .map(|p| {
            std::fs::read(p).ok().map(|bytes| {
                let mut h = DefaultHasher::new();
                bytes.hash(&mut h);
                h.finish()
            })
        })
        .collect()
}

fn build(options: &TlsOptions) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates(&options.cert_file, "tls_cert_file")?;
    let key = private_key(&options.key_file)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("TLS protocol versions: {e}")))?;
    let builder = match &options.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(path, "tls_client_ca_file")? {
                roots.add(cert).map_err(|e| TlsError(format!("tls_client_ca_file {}: {e}", path.display())))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError(format!("tls_client_ca_file {}: {e}", path.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => TlsError(format!(
            "tls_key_file {} is not the private key of the certificate in tls_cert_file {}",
            options.key_file.display(),
            options.cert_file.display()
        )),
        other => TlsError(format!(
            "tls_cert_file {} with tls_key_file {}: {other}",
            options.cert_file.display(),
            options.key_file.display()
        )),
    })?;
    // HTTP/1.1 only, as over plain TCP.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn read(path: &Path, key: &str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| {
        let why = match e.kind() {
            io::ErrorKind::NotFound => "no such file".to_string(),
            io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        TlsError(format!("{key} {}: {why}", path.display()))
    })
}

fn certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path, key)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError(format!("{key} {}: not valid PEM ({e})", path.display())))?;
    if certs.is_empty() {
        return Err(TlsError(format!("{key} {}: no CERTIFICATE in it", path.display())));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path, "tls_key_file")?;
    // The PEM parser's own errors could quote a line of the file: not repeated here.
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => "no PRIVATE KEY in it (PKCS#8, PKCS#1 or SEC1)",
            _ => "not valid PEM",
        };
        TlsError(format!("tls_key_file {}: {why}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pair {
        cert: String,
        key: String,
        der: Vec<u8>,
    }

    fn self_signed(name: &str) -> Pair {
        let c = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        Pair { cert: c.cert.pem(), key: c.signing_key.serialize_pem(), der: c.cert.der().to_vec() }
    }

    fn write(dir: &Path, p: &Pair) {
        std::fs::write(dir.join("cert.pem"), &p.cert).unwrap();
        std::fs::write(dir.join("key.pem"), &p.key).unwrap();
    }

    fn options(dir: &Path) -> TlsOptions {
        TlsOptions::new(dir.join("cert.pem"), dir.join("key.pem"))
    }

    /// The leaf certificate a handshake with `config` is served (in memory; the client trusts
    /// every test certificate, all named `localhost`).
    fn leaf(config: &Arc<ServerConfig>, trusted: &[&Pair]) -> Vec<u8> {
        let mut roots = RootCertStore::empty();
        for p in trusted {
            roots.add(CertificateDer::from(p.der.clone())).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client), name).unwrap();
        let mut server = rustls::ServerConnection::new(config.clone()).unwrap();
        while client.is_handshaking() || server.is_handshaking() {
            let mut wire = Vec::new();
            client.write_tls(&mut wire).unwrap();
            server.read_tls(&mut wire.as_slice()).unwrap();
            server.process_new_packets().unwrap();
            wire.clear();
            server.write_tls(&mut wire).unwrap();
            client.read_tls(&mut wire.as_slice()).unwrap();
            client.process_new_packets().unwrap();
        }
        client.peer_certificates().unwrap()[0].to_vec()
    }

    fn served(tls: &ServerTls, trusted: &[&Pair]) -> Vec<u8> {
        leaf(tls.acceptor().config(), trusted)
    }

    #[test]
    fn bad_files_are_refused_by_name_without_their_contents() {
        let dir = tempfile::tempdir().unwrap();
        let missing = ServerTls::load(options(dir.path())).unwrap_err().to_string();
        assert!(missing.starts_with("tls_cert_file ") && missing.ends_with("cert.pem: no such file"), "{missing}");

        let a = self_signed("a.example");
        let b = self_signed("b.example");
        std::fs::write(dir.path().join("cert.pem"), &a.cert).unwrap();
        std::fs::write(dir.path().join("key.pem"), "-----BEGIN PRIVATE KEY-----\nc2VjcmV0IQ==\n").unwrap();
        let e = ServerTls::load(options(dir.path())).unwrap_err().to_string();
        assert!(e.contains("tls_key_file") && e.contains("not valid PEM") && !e.contains("c2VjcmV0"), "{e}");

        std::fs::write(dir.path().join("key.pem"), &a.cert).unwrap();
        let e = ServerTls::load(options(dir.path())).unwrap_err().to_string();
        assert!(e.contains("no PRIVATE KEY in it"), "{e}");

        std::fs::write(dir.path().join("key.pem"), &b.key).unwrap();
        let e = ServerTls::load(options(dir.path())).unwrap_err().to_string();
        assert!(e.contains("is not the private key of the certificate"), "{e}");
        assert!(!e.contains("PRIVATE KEY") && !e.contains(b.key.lines().nth(1).unwrap()), "{e}");

        write(dir.path(), &a);
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "not pem").unwrap();
        let with_ca = TlsOptions { client_ca_file: Some(ca.clone()), ..options(dir.path()) };
        let e = ServerTls::load(with_ca.clone()).unwrap_err().to_string();
        assert!(e.starts_with("tls_client_ca_file ") && e.contains("no CERTIFICATE"), "{e}");
        std::fs::write(&ca, &b.cert).unwrap();
        ServerTls::load(with_ca).expect("a CA bundle of one");
    }

    #[test]
    fn a_changed_pair_is_served_next_and_a_bad_one_keeps_the_current() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (self_signed("localhost"), self_signed("localhost"), self_signed("localhost"));
        write(dir.path(), &a);
        let tls = ServerTls::load(options(dir.path())).unwrap();
        let mut r = Reloader { seen: tls.loaded_from.clone(), rejected: None };
        let all = [&a, &b, &c];
        assert_eq!(r.poll(&tls), Polled::Unchanged);
        let before = tls.acceptor(); // an accepted connection's configuration

        write(dir.path(), &b);
        assert_eq!(r.poll(&tls), Polled::Reloaded);
        assert_eq!(served(&tls, &all), b.der);
        assert_eq!(r.poll(&tls), Polled::Unchanged);
        assert_eq!(leaf(before.config(), &all), a.der, "what was taken before keeps its certificate");

        // Half a rotation (a new certificate, the old key), then garbage: both rejected once.
        std::fs::write(dir.path().join("cert.pem"), &c.cert).unwrap();
        assert_eq!(r.poll(&tls), Polled::Rejected);
        assert_eq!(r.poll(&tls), Polled::Unchanged, "the same bad files are not retried or logged again");
        std::fs::write(dir.path().join("cert.pem"), "garbage").unwrap();
        assert_eq!(r.poll(&tls), Polled::Rejected);
        std::fs::remove_file(dir.path().join("key.pem")).unwrap();
        assert_eq!(r.poll(&tls), Polled::Rejected);
        assert_eq!(served(&tls, &all), b.der, "still the last good pair");

        write(dir.path(), &c);
        assert_eq!(r.poll(&tls), Polled::Reloaded);
        assert_eq!(served(&tls, &all), c.der);
    }
}
