//! The store behind Debian's pgbouncer (`/usr/sbin/pgbouncer`, installed by
//! `scripts/setup-test-packages.sh`), in front of the test server: the whole conformance suite
//! through a pool in session mode with `pooler = session`, and a pool in transaction mode
//! refused with a message naming the mode Slipway needs.
//!
//! Each pgbouncer is a child of a shell that ends it when this test process goes away (its
//! standard input closes), so none outlives the run.

mod pg;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use pg::{Schema, server_url};
use slipway_store::StoreError;
use slipway_store::postgres::{PostgresOptions, PostgresStore};
use slipway_test_support::eventually_blocking;

slipway_store::conformance_suite!(pg::make_via_pooler(&SESSION.get_or_init(|| Bouncer::start("session")).url));

static SESSION: OnceLock<Bouncer> = OnceLock::new();
static TRANSACTION: OnceLock<Bouncer> = OnceLock::new();

/// Without `pooler = session` the store cannot even connect through pgbouncer (it refuses the
/// startup packet's settings); behind transaction pooling that is the answer, and it says
/// what Slipway needs instead.
#[tokio::test]
async fn transaction_pooling_is_refused_with_the_mode_slipway_needs() {
    let bouncer = TRANSACTION.get_or_init(|| Bouncer::start("transaction"));
    let schema = Schema::fresh();
    let options = PostgresOptions::new(&bouncer.url).with_schema(&schema.name);
    let err = PostgresStore::connect(options).await.err().expect("refused");
    let StoreError::Unavailable(message) = &err else { panic!("{err:?}") };
    for needed in ["pool_mode = session", "pooler = \"session\"", "transaction pooling is not supported"] {
        assert!(message.contains(needed), "{message}");
    }
}

/// A pgbouncer of this test process in `mode`, in front of the test server.
struct Bouncer {
    url: String,
    _dir: tempfile::TempDir,
    /// Holding its standard input keeps it running.
    _guard: Child,
}

impl Bouncer {
    fn start(mode: &str) -> Bouncer {
        let server: tokio_postgres::Config = server_url().parse().expect("SLIPWAY_TEST_POSTGRES_URL");
        let host = match server.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            other => panic!("the pgbouncer tests need a TCP server URL, not {other:?}"),
        };
        let port = server.get_ports().first().copied().unwrap_or(5432);
        let db = server.get_dbname().unwrap_or("test");
        let user = server.get_user().unwrap_or("postgres");
        let dir = tempfile::tempdir().expect("tempdir");
        let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let ini = dir.path().join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n{db} = host={host} port={port} dbname={db} user={user}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n\
                 auth_type = any\npool_mode = {mode}\ndefault_pool_size = 80\nmax_client_conn = 400\n\
                 logfile = {log}\n",
                log = dir.path().join("pgbouncer.log").display(),
            ),
        )
        .unwrap();
        let root =
            Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if root {
            // pgbouncer will not run as root: it drops to `postgres`, which must read its files.
            let ok =
                Command::new("chown").arg("-R").arg("postgres").arg(dir.path()).status().is_ok_and(|s| s.success());
            assert!(ok, "chown the pgbouncer directory");
        }
        let bin = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].into_iter().find(|p| std::path::Path::new(p).exists());
        let bin = bin.expect(
            "these tests need Debian's pgbouncer: apt-get install -y pgbouncer (scripts/setup-test-packages.sh)",
        );
        let user_flag = if root { "-u postgres" } else { "" };
        let script = format!("{bin} {user_flag} '{}' & pid=$!; cat >/dev/null; kill $pid; wait $pid", ini.display());
        let mut guard = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer");
        guard.stdin.as_mut().expect("stdin").flush().ok();
        eventually_blocking(&format!("pgbouncer listening on {listen}"), Duration::from_secs(20), || {
            match std::net::TcpStream::connect(("127.0.0.1", listen)) {
                Ok(_) => Ok(()),
                Err(_) => Err(std::fs::read_to_string(dir.path().join("pgbouncer.log")).unwrap_or_default()),
            }
        });
        Bouncer { url: format!("postgres://{user}@127.0.0.1:{listen}/{db}?sslmode=disable"), _dir: dir, _guard: guard }
    }
}
