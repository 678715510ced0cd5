//! The listener over TLS, black-box: HTTPS with the URLs it hands out on `https`, a plain
//! request to the TLS port failing without harm, the handshake inside the connection limits
//! (header-read timeout, cap and eviction), certificate rotation without a restart (new
//! connections get the new certificate, open ones keep theirs, a bad replacement keeps the
//! old one), and client certificates. Certificates are made here with rcgen.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{API, TestServer, config_text, rid};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use serde_json::json;
use slipway_test_support::{TestClock, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

/// Upper bound on waiting for anything the server should do by itself.
const BOUND: Duration = Duration::from_secs(15);

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, PEM, and the certificate's DER.
struct Leaf {
    cert: String,
    key: String,
    der: Vec<u8>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Ca { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    fn pem(&self) -> String {
        self.issuer.as_ref().pem()
    }

    fn der(&self) -> Vec<u8> {
        self.issuer.as_ref().der().to_vec()
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    fn server(&self) -> Leaf {
        self.issue(vec!["localhost".into(), "127.0.0.1".into()], ExtendedKeyUsagePurpose::ServerAuth)
    }

    fn client(&self, name: &str) -> Leaf {
        self.issue(vec![name.into()], ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn issue(&self, names: Vec<String>, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let mut params = CertificateParams::new(names).unwrap();
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf { cert: cert.pem(), key: key.serialize_pem(), der: cert.der().to_vec() }
    }
}

/// Replaces `name` in `dir` at once (write aside, rename), as a certificate manager does.
fn replace(dir: &Path, name: &str, contents: &str) {
    let aside = dir.join(format!(".{name}.new"));
    std::fs::write(&aside, contents).unwrap();
    std::fs::rename(aside, dir.join(name)).unwrap();
}

fn install(dir: &Path, leaf: &Leaf) {
    replace(dir, "key.pem", &leaf.key);
    replace(dir, "cert.pem", &leaf.cert);
}

/// Slipway on TLS with `leaf` (relative paths: they resolve against the config's
/// directory), a client CA if given, the files checked every second, and `server_settings`;
/// `s.http` trusts `ca` only, `s.base` is `https://127.0.0.1:<port>`.
async fn start(ca: &Ca, leaf: &Leaf, client_ca: Option<&Ca>, server_settings: &str) -> TestServer {
    let mut settings =
        "tls_cert_file = \"cert.pem\"\ntls_key_file = \"key.pem\"\ntls_reload_interval_seconds = 1\n".to_string();
    if client_ca.is_some() {
        settings.push_str("tls_client_ca_file = \"clients.pem\"\n");
    }
    settings.push_str(server_settings);
    let clients = client_ca.map(Ca::pem);
    let mut s = TestServer::start_full(&settings, "", "", |dir| {
        install(dir, leaf);
        if let Some(pem) = &clients {
            std::fs::write(dir.join("clients.pem"), pem).unwrap();
        }
    })
    .await;
    s.base = s.base.replacen("http://", "https://", 1);
    s.http = https_client(ca, None);
    s
}

fn https_client(ca: &Ca, identity: Option<&Leaf>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .timeout(BOUND);
    if let Some(leaf) = identity {
        b = b.identity(reqwest::Identity::from_pem(format!("{}{}", leaf.cert, leaf.key).as_bytes()).unwrap());
    }
    b.build().unwrap()
}

fn port(s: &TestServer) -> u16 {
    s.base.rsplit(':').next().unwrap().parse().unwrap()
}

/// A TLS connection to `s` trusting `trusted` only.
async fn handshake(s: &TestServer, trusted: &[&Ca]) -> std::io::Result<TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in trusted {
        roots.add(ca.der().into()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(("127.0.0.1", port(s))).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(BOUND, tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp))
        .await
        .expect("handshake in time")
}

/// The certificate the server presented on `conn`.
fn served(conn: &TlsStream<TcpStream>) -> Vec<u8> {
    conn.get_ref().1.peer_certificates().expect("a server certificate")[0].to_vec()
}

/// `GET /healthz` on an open connection (kept alive); its status.
async fn healthz(conn: &mut TlsStream<TcpStream>) -> u16 {
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"\r\n\r\nok") {
        let n = tokio::time::timeout(BOUND, conn.read(&mut buf)).await.expect("response in time").expect("read");
        assert!(n > 0, "closed before a response: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status")
}

/// Waits (polling new connections) until one is served `leaf`; how long that took.
async fn wait_served(s: &TestServer, trusted: &[&Ca], leaf: &Leaf) -> Duration {
    let start = Instant::now();
    eventually("the new certificate served", BOUND, async || {
        handshake(s, trusted).await.is_ok_and(|conn| served(&conn) == leaf.der)
    })
    .await;
    start.elapsed()
}

/// What is logged on this thread from now until the guard is dropped: on the current-thread
/// runtime, everything an in-process server logs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn start() -> (Captured, tracing::subscriber::DefaultGuard) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }

    fn contains(&self, text: &str) -> bool {
        String::from_utf8_lossy(&self.0.lock().unwrap()).contains(text)
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads until the server closes the connection; what it sent and when it closed.
async fn read_to_close(s: &mut TcpStream) -> (Instant, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let done = tokio::time::timeout(BOUND, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(done.is_ok(), "connection still open after {BOUND:?}");
    (Instant::now(), got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_serves_the_api_and_hands_out_https_urls() {
    let ca = Ca::new("server CA");
    let mut s = start(&ca, &ca.server(), None, "").await;
    let r = s.http.get(format!("{}/healthz", s.base)).send().await.expect("HTTPS request");
    assert_eq!(r.status(), 200);

    let id = rid("virtualNetworks", "tls-vnet");
    let r = s.put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    assert_eq!(r.status(), 201, "{:?}", r.text().await);
    let async_op = common::header(&r, "azure-asyncoperation").expect("Azure-AsyncOperation");
    let location = common::header(&r, "location").expect("Location");
    let base = format!("https://127.0.0.1:{}/", port(&s));
    assert!(async_op.starts_with(&base) && location.starts_with(&base), "{async_op} / {location}");
    let done = s.wait_terminal(&async_op, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    let (code, body) = s.get_json(&format!("{id}?api-version={API}")).await;
    assert_eq!((code, body["properties"]["provisioningState"].as_str()), (200, Some("Succeeded")), "{body}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_the_tls_port_fails_cleanly_and_the_server_keeps_serving() {
    let ca = Ca::new("server CA");
    let mut s = start(&ca, &ca.server(), None, "").await;
    let plain = format!("http://127.0.0.1:{}/healthz", port(&s));
    let r = reqwest::Client::new().get(&plain).timeout(BOUND).send().await;
    assert!(r.is_err(), "a plain request got an HTTP answer: {:?}", r.map(|r| r.status()));

    let mut tcp = TcpStream::connect(("127.0.0.1", port(&s))).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    let (_, got) = read_to_close(&mut tcp).await;
    assert!(!got.starts_with(b"HTTP/"), "{:?}", String::from_utf8_lossy(&got));

    let r = s.http.get(format!("{}/healthz", s.base)).send().await.expect("HTTPS still served");
    assert_eq!(r.status(), 200);
    s.stop().await;
}

/// On paused time (as in `connections`): the timeout fires at its second, however loaded the
/// machine.
#[tokio::test(start_paused = true)]
async fn a_handshake_that_never_finishes_is_closed_by_the_header_timeout() {
    let ca = Ca::new("server CA");
    // The idle timeout is far longer: whatever closes within seconds is the header timeout.
    let mut s = start(&ca, &ca.server(), None, "header_read_timeout_seconds = 1\nidle_timeout_seconds = 60\n").await;
    let t0 = Instant::now();
    let mut silent = TcpStream::connect(("127.0.0.1", port(&s))).await.unwrap();
    let mut partial = TcpStream::connect(("127.0.0.1", port(&s))).await.unwrap();
    // A TLS record header announcing a 512-byte ClientHello, and nothing more.
    partial.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).await.unwrap();
    for (what, conn) in [("silent", &mut silent), ("partial ClientHello", &mut partial)] {
        let (at, got) = read_to_close(conn).await;
        let took = at - t0;
        assert!(got.is_empty() || got[0] == 0x15, "{what}: only a TLS alert, if anything: {got:?}");
        let (lo, hi) = (Duration::from_secs(1), Duration::from_millis(1_005));
        assert!(took >= lo && took <= hi, "{what}: closed after {took:?}, not at the 1 s header timeout");
        println!("{what}: unfinished TLS handshake closed after {:.3} s", took.as_secs_f64());
    }
    let r = s.http.get(format!("{}/healthz", s.base)).send().await.expect("HTTPS still served");
    assert_eq!(r.status(), 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_count_against_the_cap_and_are_evicted() {
    let ca = Ca::new("server CA");
    let mut s = start(&ca, &ca.server(), None, "max_connections = 2\nheader_read_timeout_seconds = 30\n").await;
    let mut stalled = Vec::new();
    for _ in 0..2 {
        stalled.push(TcpStream::connect(("127.0.0.1", port(&s))).await.unwrap());
    }
    // Both slots held by handshakes that will not finish for 30 s; a real client still gets in.
    let t0 = Instant::now();
    let r = s.http.get(format!("{}/healthz", s.base)).send().await.expect("served at the cap");
    assert_eq!(r.status(), 200);
    let (at, _) = read_to_close(&mut stalled[0]).await;
    assert!(at - t0 < Duration::from_secs(5), "the oldest stalled handshake was evicted, not timed out");
    println!("at the cap, a stalled handshake was evicted {:.3} s after a client arrived", (at - t0).as_secs_f64());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_reaches_new_connections_and_open_ones_keep_theirs() {
    let (old_ca, new_ca) = (Ca::new("old CA"), Ca::new("new CA"));
    let (old, new) = (old_ca.server(), new_ca.server());
    let mut s = start(&old_ca, &old, None, "").await;
    let mut open = handshake(&s, &[&old_ca]).await.expect("handshake");
    assert_eq!(served(&open), old.der);
    assert_eq!(healthz(&mut open).await, 200);

    install(s.dir.path(), &new);
    let took = wait_served(&s, &[&old_ca, &new_ca], &new).await;
    println!("rotated certificate served to new connections {:.3} s after the files changed", took.as_secs_f64());

    assert_eq!(healthz(&mut open).await, 200, "an open connection goes on");
    assert_eq!(served(&open), old.der, "with the certificate it started with");
    assert!(handshake(&s, &[&old_ca]).await.is_err(), "new connections no longer get the old certificate");
    let r = https_client(&new_ca, None).get(format!("{}/healthz", s.base)).send().await.expect("new CA trusted");
    assert_eq!(r.status(), 200);
    s.stop().await;
}

// The current-thread runtime: the server's certificate watcher logs on this thread.
#[tokio::test]
async fn a_bad_replacement_keeps_the_current_certificate() {
    let (log, _capturing) = Captured::start();
    let ca = Ca::new("server CA");
    let (first, second) = (ca.server(), ca.server());
    let mut s = start(&ca, &first, None, "").await;
    replace(s.dir.path(), "cert.pem", "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n");
    // Until the watcher has looked at the bad file and turned it down, and after: each new
    // connection gets the certificate that loaded.
    let mut checked = 0;
    eventually("the watcher turning the bad file down", BOUND, async || {
        let conn = handshake(&s, &[&ca]).await.expect("still served");
        assert_eq!(served(&conn), first.der);
        checked += 1;
        log.contains("the TLS files changed but do not load")
    })
    .await;
    let conn = handshake(&s, &[&ca]).await.expect("still served after the bad file was turned down");
    assert_eq!(served(&conn), first.der);
    checked += 1;
    // A good pair afterwards is picked up: the watcher went on after the bad file.
    install(s.dir.path(), &second);
    let took = wait_served(&s, &[&ca], &second).await;
    println!("{checked} connections kept the old certificate over a bad file; a good one served {took:?} later");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_when_a_client_ca_is_configured() {
    let (ca, clients, stranger) = (Ca::new("server CA"), Ca::new("client CA"), Ca::new("other CA"));
    let mut s = start(&ca, &ca.server(), Some(&clients), "").await;
    let url = format!("{}/healthz", s.base);

    let without = s.http.get(&url).send().await;
    assert!(without.is_err(), "served without a client certificate: {:?}", without.map(|r| r.status()));
    let foreign = https_client(&ca, Some(&stranger.client("mallory"))).get(&url).send().await;
    assert!(foreign.is_err(), "served with a certificate of another CA: {:?}", foreign.map(|r| r.status()));

    let ok = https_client(&ca, Some(&clients.client("deployer"))).get(&url).send().await.expect("with a client cert");
    assert_eq!(ok.status(), 200);
    s.stop().await;
}

#[tokio::test]
async fn startup_refuses_tls_files_that_do_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("server CA");
    let leaf = ca.server();
    std::fs::write(dir.path().join("cert.pem"), &leaf.cert).unwrap();
    let path = dir.path().join("slipway.toml");
    let text = common::with_server_settings(
        &config_text(dir.path(), ""),
        "tls_cert_file = \"cert.pem\"\ntls_key_file = \"missing-key.pem\"",
    );
    std::fs::write(&path, text).unwrap();
    let config = slipway::config::Config::load(Some(&path), []).expect("config");
    let clock = Arc::new(TestClock::new());
    let Err(e) = slipway::app::App::start(config, clock).await else { panic!("started without its key") };
    let m = e.to_string();
    assert!(m.starts_with("server TLS: tls_key_file ") && m.ends_with("missing-key.pem: no such file"), "{m}");
}
