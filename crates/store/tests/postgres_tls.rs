//! TLS to PostgreSQL against a throwaway cluster this test starts (initdb into a temporary
//! directory, `ssl = on` with a certificate for `localhost` made here, a free loopback port,
//! trust authentication, and a pg_hba.conf that accepts TLS connections only): `require`
//! encrypts, `verify-full` checks the chain and the host name, `disable` is turned away, and
//! the URL's `sslmode` / `sslrootcert` work like the options.
//!
//! Needs PostgreSQL's server binaries (`initdb`, `pg_ctl`: /usr/lib/postgresql/*/bin or the
//! PATH); without them every test here prints why it is skipped and passes. As root the
//! cluster runs as the `postgres` user.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, Weak};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use slipway_store::StoreError;
use slipway_store::postgres::{PostgresOptions, PostgresStore, SslMode};

/// The password in every URL here (trust authentication never asks for it): it must not
/// appear in any error.
const PASSWORD: &str = "hunter2";

/// A running cluster; stopped and removed when the last test using it drops it.
struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// The user the server runs as, when this process is root.
    user: Option<(u32, u32)>,
}

/// Why the cluster cannot be had on this machine (the tests are skipped), as opposed to a
/// cluster that failed to start (the tests fail).
struct Unavailable(String);

impl Cluster {
    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn wrong_ca(&self) -> PathBuf {
        self.dir.path().join("wrong-ca.pem")
    }

    fn url(&self, host: &str) -> String {
        format!("postgres://postgres:{PASSWORD}@{host}:{}/postgres", self.port)
    }

    fn command(&self, program: &str) -> Command {
        command(&self.bin, program, self.user)
    }

    fn start() -> Result<Cluster, Unavailable> {
        let bin = server_binaries()?;
        let user = if id(&[])? == 0 {
            let uid = id(&["postgres"]).map_err(|_| {
                Unavailable("running as root and there is no 'postgres' user to run a cluster as".into())
            })?;
            Some((uid, id(&["-g", "postgres"])?))
        } else {
            None
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let cluster = Cluster { dir, bin, port, user };
        let d = cluster.dir.path();
        cluster.give(d);
        // The server's certificate names `localhost` only (not 127.0.0.1): verify-full by IP fails.
        let (ca, server) = issue_server_certificate("test database CA");
        std::fs::write(cluster.ca(), ca.as_ref().pem()).unwrap();
        std::fs::write(cluster.wrong_ca(), issue_server_certificate("some other CA").0.as_ref().pem()).unwrap();
        std::fs::write(d.join("server.crt"), server.0).unwrap();
        std::fs::write(d.join("server.key"), server.1).unwrap();
        std::fs::set_permissions(d.join("server.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
        cluster.give(&d.join("server.key"));
        cluster.give(&d.join("server.crt"));

        let data = d.join("data");
        let log = d.join("initdb.log");
        let ok = cluster
            .command("initdb")
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(d.join("initdb.err")).unwrap())
            .status()
            .expect("run initdb")
            .success();
        assert!(ok, "initdb failed: {}", std::fs::read_to_string(d.join("initdb.err")).unwrap_or_default());
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{dir}'\nssl = on\n\
             ssl_cert_file = '{dir}/server.crt'\nssl_key_file = '{dir}/server.key'\nfsync = off\nmax_connections = 40\n",
            dir = d.display()
        );
        append(&data.join("postgresql.conf"), &conf);
        // TLS or nothing over TCP.
        std::fs::write(data.join("pg_hba.conf"), "local all all trust\nhostssl all all 127.0.0.1/32 trust\n").unwrap();
        let ok = cluster
            .command("pg_ctl")
            .args(["-w", "-t", "60", "-D"])
            .arg(&data)
            .arg("-l")
            .arg(d.join("server.log"))
            .arg("start")
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run pg_ctl")
            .success();
        assert!(ok, "the cluster did not start: {}", std::fs::read_to_string(d.join("server.log")).unwrap_or_default());
        Ok(cluster)
    }

    /// Makes `path` the server user's (a no-op unless root).
    fn give(&self, path: &Path) {
        if let Some((uid, gid)) = self.user {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-w", "-m", "immediate", "-D"])
            .arg(self.dir.path().join("data"))
            .arg("stop")
            .stdout(std::process::Stdio::null())
            .status();
    }
}

fn command(bin: &Path, program: &str, user: Option<(u32, u32)>) -> Command {
    let mut c = Command::new(bin.join(program));
    if let Some((uid, gid)) = user {
        c.uid(uid).gid(gid);
    }
    c
}

fn append(path: &Path, text: &str) {
    let mut conf = std::fs::read_to_string(path).unwrap();
    conf.push_str(text);
    std::fs::write(path, conf).unwrap();
}

/// `id -u [user]` (or `id -g user` with `-g`).
fn id(args: &[&str]) -> Result<u32, Unavailable> {
    let args: Vec<&str> = if args.first() == Some(&"-g") { args.to_vec() } else { [&["-u"], args].concat() };
    let out = Command::new("id").args(&args).output().map_err(|e| Unavailable(format!("cannot run id: {e}")))?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|_| Unavailable(format!("id {} failed", args.join(" "))))
}

/// The newest /usr/lib/postgresql/<version>/bin with initdb, else initdb's directory on the PATH.
fn server_binaries() -> Result<PathBuf, Unavailable> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin): &(u32, PathBuf)| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()).ok_or_else(
        || {
            Unavailable(
                "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: not in /usr/lib/postgresql/*/bin \
                 nor on the PATH (apt-get install -y postgresql)"
                    .into(),
            )
        },
    )
}

/// A CA named `ca_name` and a server certificate for `localhost` it signed (certificate PEM, key PEM).
fn issue_server_certificate(ca_name: &str) -> (CertifiedIssuer<'static, KeyPair>, (String, String)) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, ca_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()]).unwrap().signed_by(&key, &ca).unwrap();
    (ca, (cert.pem(), key.serialize_pem()))
}

static CLUSTER: Mutex<Weak<Cluster>> = Mutex::new(Weak::new());

/// The cluster the tests running now share, started by the first; `None` (with the reason
/// printed) when this machine cannot run one.
fn cluster(test: &str) -> Option<Arc<Cluster>> {
    let mut shared = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = shared.upgrade() {
        return Some(c);
    }
    match Cluster::start() {
        Ok(c) => {
            let c = Arc::new(c);
            *shared = Arc::downgrade(&c);
            Some(c)
        }
        Err(Unavailable(why)) => {
            eprintln!("postgres_tls::{test}: SKIPPED: {why}");
            None
        }
    }
}

fn options(url: String, mode: Option<SslMode>, root: Option<PathBuf>) -> PostgresOptions {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    PostgresOptions { ssl_mode: mode, ssl_root_cert: root, ..PostgresOptions::new(url).with_schema(schema) }
}

async fn refused(options: PostgresOptions) -> String {
    match PostgresStore::connect(options).await {
        Err(StoreError::Unavailable(m)) => {
            assert!(!m.contains(PASSWORD), "the password is in the error: {m}");
            m
        }
        Err(other) => panic!("expected Unavailable, got {other:?}"),
        Ok(_) => panic!("connected"),
    }
}

#[tokio::test]
async fn require_and_prefer_encrypt_every_connection() {
    let Some(c) = cluster("require_and_prefer_encrypt_every_connection") else { return };
    for mode in [SslMode::Require, SslMode::Prefer] {
        let store = PostgresStore::connect(options(c.url("127.0.0.1"), Some(mode), None)).await.expect("connects");
        assert!(store.session_uses_tls().await.expect("pg_stat_ssl"), "{mode}: the server sees an unencrypted session");
    }
}

#[tokio::test]
async fn verify_full_checks_the_chain_and_the_host_name() {
    let Some(c) = cluster("verify_full_checks_the_chain_and_the_host_name") else { return };
    let verified = options(c.url("localhost"), Some(SslMode::VerifyFull), Some(c.ca()));
    let store = PostgresStore::connect(verified).await.expect("the right CA and host name");
    assert!(store.session_uses_tls().await.unwrap());

    let m = refused(options(c.url("localhost"), Some(SslMode::VerifyFull), Some(c.wrong_ca()))).await;
    assert!(m.contains("invalid peer certificate") && m.contains("UnknownIssuer"), "{m}");
    assert!(m.contains("sslmode verify-full, root certificates from") && m.contains("wrong-ca.pem"), "{m}");
    println!("wrong CA: {m}");

    let m = refused(options(c.url("127.0.0.1"), Some(SslMode::VerifyFull), Some(c.ca()))).await;
    assert!(m.contains("not valid for name"), "a certificate for localhost, reached as 127.0.0.1: {m}");

    let m = refused(options(c.url("localhost"), Some(SslMode::VerifyFull), None)).await;
    assert!(m.contains("UnknownIssuer") && m.contains("webpki root certificates"), "{m}");
}

#[tokio::test]
async fn disable_is_turned_away_by_a_server_that_accepts_only_tls() {
    let Some(c) = cluster("disable_is_turned_away_by_a_server_that_accepts_only_tls") else { return };
    let m = refused(options(c.url("127.0.0.1"), Some(SslMode::Disable), None)).await;
    assert!(m.contains("no pg_hba.conf entry") && m.contains("no encryption") && m.contains("sslmode disable"), "{m}");
    println!("disable: {m}");
}

#[tokio::test]
async fn sslmode_and_sslrootcert_in_the_url_work_like_the_options() {
    let Some(c) = cluster("sslmode_and_sslrootcert_in_the_url_work_like_the_options") else { return };
    let root = c.ca().display().to_string().replace('/', "%2F");
    let url = format!("{}?sslmode=verify-full&sslrootcert={root}&application_name=tls-test", c.url("localhost"));
    let store = PostgresStore::connect(options(url, None, None)).await.expect("verify-full from the URL");
    assert!(store.session_uses_tls().await.unwrap());

    let url = format!("{}?sslmode=disable", c.url("127.0.0.1"));
    let m = refused(options(url, None, None)).await;
    assert!(m.contains("no encryption"), "{m}");
}
