//! A PostgreSQL server that is not there, too slow, ends the store's sessions, goes away or
//! stops answering: callers get `Unavailable` promptly, never `Internal` or a hang, and the
//! store recovers by itself once the server is back.

mod pg;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pg::{Schema, bump, claim_req, no_server, open, server_url, spy};
use slipway_store::conformance::{T0, at, ctx, put, spec, vnet};
use slipway_store::postgres::{PostgresOptions, PostgresStore};
use slipway_store::{ChangeRequest, Store, StoreError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    // A port nobody listens on: bound, then released.
    let port = TcpListener::bind("127.0.0.1:0").await.expect("bind").local_addr().expect("addr").port();
    let options = PostgresOptions {
        connect_timeout: Duration::from_secs(2),
        ..PostgresOptions::new(format!("postgres://slipway:secret@127.0.0.1:{port}/slipway"))
    };
    let err = PostgresStore::connect(options).await.err().expect("nothing to connect to");
    let StoreError::Unavailable(message) = &err else {
        panic!("expected Unavailable, got {err:?}");
    };
    assert!(message.contains(&format!("127.0.0.1:{port}/slipway")), "names the server: {message}");
    assert!(!message.contains("secret"), "{message}");
}

/// A statement that waits too long (here: for the key's lock, held elsewhere) is
/// `Unavailable`; other keys are not held up.
#[tokio::test]
async fn a_statement_timeout_is_unavailable() {
    let schema = Schema::fresh();
    let store =
        open(PostgresOptions { statement_timeout: Duration::from_millis(300), pool_size: 2, ..schema.options() }).await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    let spy = spy().await;
    let key = id.key();
    spy.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&key.as_str()]).await.expect("lock");

    let err = store.change(ChangeRequest::new(key.clone(), at(1)), Box::new(bump)).await;
    assert!(matches!(&err, Err(StoreError::Unavailable(m)) if m.contains("57014")), "{err:?}");
    put(&store, &vnet("sub", "rg", "r2"), spec(1), ctx(2, T0)).await;

    spy.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", &[&key.as_str()]).await.expect("unlock");
    let snap = store.change(ChangeRequest::new(key, at(2)), Box::new(bump)).await.expect("change");
    assert_eq!(snap.resource.expect("resource").job_seq, 1, "the timed-out change wrote nothing");
}

/// The server ends every session of the store (a restart, a failover, an operator): the
/// next calls reconnect by themselves, none fails.
#[tokio::test]
async fn terminated_connections_are_replaced() {
    let schema = Schema::fresh();
    let app = schema.name.clone();
    let url = server_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let store =
        open(PostgresOptions { url: format!("{url}{sep}application_name={app}"), pool_size: 4, ..schema.options() })
            .await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    // Several connections in the pool.
    let key = id.key();
    let (r1, r2, r3) = tokio::join!(store.get_resource(&key), store.ping(), store.get_resource(&key));
    r1.expect("read");
    r2.expect("ping");
    r3.expect("read");

    let spy = spy().await;
    let killed: Vec<i32> = spy
        .query(
            // In the select list: evaluated only for the rows the WHERE clause kept.
            "SELECT pid, pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .expect("terminate")
        .iter()
        .map(|r| {
            assert!(r.get::<_, bool>(1), "terminated");
            r.get(0)
        })
        .collect();
    assert!(!killed.is_empty(), "the store had connections");

    store.ping().await.expect("ping reconnects");
    let snap = store.change(ChangeRequest::new(id.key(), at(1)), Box::new(bump)).await.expect("change reconnects");
    assert_eq!(snap.resource.expect("resource").job_seq, 1);
    let claim = claim_req("engine", at(2));
    let (r1, r2, r3) = tokio::join!(
        store.get_resource(&key),
        store.claim(&claim),
        store.claim_notifications(at(2), 10, Duration::from_secs(1))
    );
    assert_eq!(r1.expect("read").expect("resource").job_seq, 1);
    assert_eq!(r2.expect("claim").len(), 1);
    r3.expect("notifications");

    let now: Vec<i32> = spy
        .query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", &[&app])
        .await
        .expect("activity")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!now.is_empty() && now.iter().all(|pid| !killed.contains(pid)), "new sessions: {killed:?} → {now:?}");
}

/// What a TCP proxy in front of the server lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Up,
    /// Every connection is cut and new ones are closed at once (the server is down).
    Down,
    /// Connections stay open but no byte gets through (a network partition).
    Stalled,
}

struct Proxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (mode, watching) = watch::channel(Mode::Up);
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                if *watching.borrow() == Mode::Down {
                    continue; // dropped: closed at once
                }
                tokio::spawn(forward(socket, upstream, watching.clone()));
            }
        });
        Proxy { addr, mode, accept }
    }

    fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.set(Mode::Down);
    }
}

async fn forward(client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let (up, down) = (mode.clone(), mode.clone());
    let cut = async {
        while *mode.borrow_and_update() != Mode::Down {
            if mode.changed().await.is_err() {
                return;
            }
        }
    };
    // Whichever ends first, both sockets close with the halves.
    tokio::select! {
        () = pump(client_read, server_write, up) => {}
        () = pump(server_read, client_write, down) => {}
        () = cut => {}
    }
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        loop {
            match *mode.borrow_and_update() {
                Mode::Up => break,
                Mode::Down => return,
                Mode::Stalled => {}
            }
            if mode.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The test server's address and a URL for the same database through `proxy`.
async fn through_proxy() -> (Proxy, String) {
    let url = server_url();
    let config: tokio_postgres::Config = url.parse().expect("test URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        other => panic!("the proxy tests need a TCP server address, not {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let upstream = tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()
        .and_then(|mut addrs| addrs.next())
        .unwrap_or_else(|| no_server(&url, &"cannot resolve its host"));
    let proxy = Proxy::start(upstream).await;
    let user = config.get_user().unwrap_or("postgres");
    let password = match config.get_password() {
        Some(p) => format!(":{}", String::from_utf8_lossy(p)),
        None => String::new(),
    };
    let db = config.get_dbname().unwrap_or(user);
    let proxied = format!("postgres://{user}{password}@{}/{db}", proxy.addr);
    (proxy, proxied)
}

/// Everything a replica does while its database is unreachable: `Unavailable`, never
/// `Internal`, never a hang; and back to normal once the database is.
#[tokio::test]
async fn a_server_going_away_is_unavailable_until_it_is_back() {
    let schema = Schema::fresh();
    let (proxy, url) = through_proxy().await;
    let options = PostgresOptions {
        url,
        pool_size: 3,
        connect_timeout: Duration::from_secs(2),
        statement_timeout: Duration::from_secs(2),
        ..schema.options()
    };
    let store = open(options.clone()).await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    store.ping().await.expect("ping");

    proxy.set(Mode::Down);
    let unavailable = |what: &str, err: Option<StoreError>| {
        assert!(matches!(err, Some(StoreError::Unavailable(_))), "{what}: {err:?}");
    };
    unavailable("ping", store.ping().await.err());
    unavailable("change", store.change(ChangeRequest::new(id.key(), at(1)), Box::new(bump)).await.err());
    unavailable("get", store.get_resource(&id.key()).await.err());
    unavailable("claim", store.claim(&claim_req("engine", at(1))).await.err());
    unavailable("notifications", store.claim_notifications(at(1), 10, Duration::from_secs(1)).await.err());
    unavailable("renew", store.renew_leases(&"engine".into(), &[], at(2)).await.err());
    let again = PostgresStore::connect(PostgresOptions { connect_timeout: Duration::from_secs(2), ..options }).await;
    unavailable("connect", again.err());

    proxy.set(Mode::Up);
    store.ping().await.expect("ping once the server is back");
    let snap = store.change(ChangeRequest::new(id.key(), at(3)), Box::new(bump)).await.expect("change");
    assert_eq!(snap.resource.expect("resource").job_seq, 1, "nothing was half-written meanwhile");
}

/// A server that stops answering without closing anything (a partition) must not hang its
/// callers: they get `Unavailable` within the client-side limits, and the hung connections
/// are not reused once it answers again.
#[tokio::test]
async fn a_silent_server_is_unavailable_within_the_limits() {
    let schema = Schema::fresh();
    let (proxy, url) = through_proxy().await;
    let limit = Duration::from_millis(400);
    let store = open(PostgresOptions {
        url,
        pool_size: 2,
        connect_timeout: limit,
        statement_timeout: limit,
        ..schema.options()
    })
    .await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;

    proxy.set(Mode::Stalled);
    let started = Instant::now();
    let err = store.ping().await;
    assert!(matches!(err, Err(StoreError::Unavailable(_))), "{err:?}");
    let err = store.change(ChangeRequest::new(id.key(), at(1)), Box::new(bump)).await;
    assert!(matches!(err, Err(StoreError::Unavailable(_))), "{err:?}");
    let err = store.get_resource(&id.key()).await;
    assert!(matches!(err, Err(StoreError::Unavailable(_))), "{err:?}");
    // Each call is bounded by about 2 × statement timeout + connect timeout.
    assert!(started.elapsed() < limit * 20, "took {:?}", started.elapsed());

    proxy.set(Mode::Up);
    store.ping().await.expect("ping once the server answers");
    let snap = store.change(ChangeRequest::new(id.key(), at(2)), Box::new(bump)).await.expect("change");
    assert_eq!(snap.resource.expect("resource").job_seq, 1);
}
