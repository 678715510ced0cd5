//! Async notification delivery under trouble: a black-holed callback (accepts connections,
//! never answers) must not delay anyone else's callback nor hold up shutdown; a failing
//! destination is backed off as a whole; attempts are bounded and end in a dead letter.
//!
//! The first tests drive the whole Slipway (real API over the AWX-API simulator, the binary
//! for the SIGTERM case); the last ones run the notifier alone on a SQLite store, with time
//! moved by the test instead of waited for: a `jump` of tokio's clock, which the notifier's
//! injected clock reads, on the current-thread runtime that `jump` needs. They stay on real
//! time otherwise: the notifier sends over loopback HTTP, which paused time does not wait for.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use aap_sim::{Sim, SimConfig};
use common::{API, free_port, header, rid, spawn_slipway};
use serde_json::{Value, json};
use slipway::app::App;
use slipway::config::Config;
use slipway_api::notify::{CallbackNetworks, CallbackPolicy, CallbackSchemes, Notifier, NotifierOptions};
use slipway_domain::admission::{Rejection, RequestContext};
use slipway_domain::resource::Snapshot;
use slipway_domain::time::Clock;
use slipway_domain::{ProvisioningState, Timestamp};
use slipway_store::conformance::{Call, Faulty, Method, ctx, put, spec, vnet};
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_store::{ChangeRequest, Store};
use slipway_test_support::{TestClock, eventually, jump, ready_within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, watch};

/// Upper bound for conditions that involve running playbooks.
const T: Duration = Duration::from_secs(60);
/// Upper bound for conditions the notifier alone brings about.
const QUICK: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// Callback endpoints

#[derive(Clone, Copy, Debug, Default)]
struct HoleStats {
    accepted: usize,
    open: usize,
    max_open: usize,
}

/// A callback that accepts connections, reads what it is sent, and never answers. Sockets
/// stay open until the client gives up.
struct BlackHole {
    uri: String,
    stats: watch::Receiver<HoleStats>,
}

impl BlackHole {
    async fn start() -> BlackHole {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}/hole", listener.local_addr().unwrap());
        let (tx, stats) = watch::channel(HoleStats::default());
        let tx = Arc::new(tx);
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else { return };
                tx.send_modify(|s| {
                    s.accepted += 1;
                    s.open += 1;
                    s.max_open = s.max_open.max(s.open);
                });
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while sock.read(&mut buf).await.is_ok_and(|n| n > 0) {}
                    tx.send_modify(|s| s.open -= 1);
                });
            }
        });
        BlackHole { uri, stats }
    }

    fn now(&self) -> HoleStats {
        *self.stats.borrow()
    }

    async fn wait(&self, what: &str, within: Duration, f: impl Fn(&HoleStats) -> bool) -> HoleStats {
        let mut rx = self.stats.clone();
        match tokio::time::timeout(within, rx.wait_for(|s| f(s))).await {
            Ok(Ok(s)) => *s,
            _ => panic!("black hole: {what} not seen within {within:?}: {:?}", self.now()),
        }
    }
}

/// What a working callback received.
#[derive(Debug)]
struct Arrival {
    at: Timestamp,
    path: String,
    body: Value,
}

/// A callback answering `status` (changeable) to every POST, reporting each arrival.
struct Callback {
    base: String,
    status: Arc<AtomicU16>,
    arrivals: mpsc::UnboundedReceiver<Arrival>,
}

impl Callback {
    async fn start() -> Callback {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let status = Arc::new(AtomicU16::new(200));
        let (tx, arrivals) = mpsc::unbounded_channel();
        let answer = status.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else { return };
                let (tx, answer) = (tx.clone(), answer.clone());
                tokio::spawn(async move {
                    let Some((path, body)) = read_request(&mut sock).await else { return };
                    let at = Timestamp::from_system(std::time::SystemTime::now());
                    let code = answer.load(Ordering::SeqCst);
                    let head = format!("HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    let _ = sock.write_all(head.as_bytes()).await;
                    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
                    let _ = tx.send(Arrival { at, path, body });
                });
            }
        });
        Callback { base, status, arrivals }
    }

    fn uri(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn next(&mut self, within: Duration) -> Arrival {
        match tokio::time::timeout(within, self.arrivals.recv()).await {
            Ok(Some(a)) => a,
            _ => panic!("no callback arrived at {} within {within:?}", self.base),
        }
    }
}

/// Reads one HTTP/1.1 request: its path and body.
async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<(String, String)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        let Some(end) = text.find("\r\n\r\n") else { continue };
        let len: usize = text[..end]
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
            .unwrap_or(0);
        if got.len() >= end + 4 + len {
            let path = text.split_whitespace().nth(1).unwrap_or_default().to_string();
            return Some((path, text[end + 4..].to_string()));
        }
    }
}

// ---------------------------------------------------------------------------------------
// A whole Slipway

/// The AWX-API simulator with jobs that succeed quickly: operations end within a second,
/// without the cost of real playbooks.
async fn simulator() -> Sim {
    let mut config = SimConfig { tick_ms: 20, ..SimConfig::default() };
    for t in &mut config.job_templates {
        t.duration_seconds = 0.1;
    }
    Sim::start("127.0.0.1:0", config).await.expect("start aap-sim")
}

/// Slipway on `listen` over the simulator, with `shutdown_grace_seconds = grace` and a
/// `[notifications]` table (the callbacks here listen on loopback, over http: the callback
/// policy allows both).
fn config_text(dir: &Path, listen: &str, sim: &Sim, grace: u64, notifications: &str) -> String {
    format!(
        r#"
[server]
listen = "{listen}"
retry_after_seconds = 0
[store]
url = "sqlite:{db}"
[engine]
node_name = "notify-test"
shutdown_grace_seconds = {grace}
[notifications]
callback_allow_http = true
callback_allow_private_networks = true
{notifications}
[[providers]]
name = "aap"
type = "aap"
url = "{url}"
template_prefix = "slipway"
request_timeout_seconds = 5
[[types]]
namespace = "Slipway.Example"
type = "virtualNetworks"
kind = "VirtualNetwork"
api_versions = ["{API}"]
provider = "aap"
poll_interval_seconds = 0.1
"#,
        db = dir.join("slipway.db").display(),
        url = sim.base_url(),
    )
}

struct Slipway {
    _dir: tempfile::TempDir,
    _sim: Sim,
    base: String,
    app: Option<App>,
    http: reqwest::Client,
}

impl Slipway {
    async fn start(grace: u64, notifications: &str) -> Slipway {
        common::init_logging();
        let sim = simulator().await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slipway.toml");
        std::fs::write(&path, config_text(dir.path(), "127.0.0.1:0", &sim, grace, notifications)).unwrap();
        let config = Config::load(Some(&path), []).expect("config");
        let app = App::start(config, Arc::new(TestClock::new())).await.expect("start slipway");
        let base = format!("http://{}", app.addr);
        Slipway { _dir: dir, _sim: sim, base, app: Some(app), http: reqwest::Client::new() }
    }
}

fn url(base: &str, path: &str) -> String {
    format!("{base}{path}?api-version={API}")
}

/// PUTs a virtual network whose operation notifies `callback`; returns its status URL.
async fn put_notified(http: &reqwest::Client, base: &str, name: &str, callback: &str) -> String {
    let r = http
        .put(url(base, &rid("virtualNetworks", name)))
        .header("azure-asyncnotificationuri", callback)
        .json(&json!({"location": "local", "properties": {"addressSpace": "10.1.0.0/16"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "PUT {name}");
    assert_eq!(header(&r, "azure-asyncnotification").as_deref(), Some("Enabled"));
    header(&r, "azure-asyncoperation").unwrap()
}

async fn wait_terminal(http: &reqwest::Client, status_url: &str) -> Value {
    eventually("the operation to end", T, async || {
        let body: Value = http.get(status_url).send().await.unwrap().json().await.unwrap();
        match body["status"].as_str() {
            Some("Succeeded" | "Failed" | "Canceled") => Ok(body),
            _ => Err(body.to_string()),
        }
    })
    .await
}

/// `2026-01-01T00:00:00.123Z` (what `Timestamp` writes) back to a `Timestamp`.
fn parse_time(s: &str) -> Timestamp {
    let n = |a: usize, b: usize| s[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    Timestamp(secs * 1000 + n(20, 23))
}

#[test]
fn parse_time_reads_what_timestamp_writes() {
    for ms in [0, 951_782_400_000, 1_764_449_625_123, 1_767_225_600_999] {
        assert_eq!(parse_time(&Timestamp(ms).to_rfc3339()), Timestamp(ms));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_callback_delays_no_one_elses() {
    let hole = BlackHole::start().await;
    let mut callback = Callback::start().await;
    let mut s = Slipway::start(
        2,
        "request_timeout_seconds = 5\nconnect_timeout_seconds = 2\nmax_concurrent = 32\nmax_per_destination = 4",
    )
    .await;
    let mut ops = Vec::new();
    for i in 0..12 {
        ops.push(put_notified(&s.http, &s.base, &format!("held{i}"), &hole.uri).await);
    }
    for op in &ops {
        assert_eq!(wait_terminal(&s.http, op).await["status"], "Succeeded");
    }
    // Twelve notifications are due at the black hole, which is holding requests.
    hole.wait("a request held", T, |h| h.open >= 1).await;

    let op = put_notified(&s.http, &s.base, "prompt", &callback.uri("/prompt")).await;
    let ended = wait_terminal(&s.http, &op).await;
    let arrival = callback.next(QUICK).await;
    let held = hole.now();
    assert_eq!(arrival.path, "/prompt");
    assert_eq!(arrival.body["status"], "Succeeded");
    assert_eq!(arrival.body["endTime"], ended["endTime"]);
    let delay = arrival.at.millis_after(parse_time(ended["endTime"].as_str().unwrap()));
    println!(
        "working callback arrived {delay} ms after its operation ended, behind 12 black-holed notifications \
         (black hole: {} connections so far, {} open at that moment, at most {} at once)",
        held.accepted, held.open, held.max_open
    );
    assert!(delay < 2_000, "the working callback waited {delay} ms behind the black hole");
    assert!(held.max_open <= 4, "at most max_per_destination requests to one destination: {held:?}");

    let start = Instant::now();
    s.app.take().unwrap().shutdown().await.expect("clean shutdown");
    println!("shutdown with black-holed deliveries in flight took {:?} (grace 2 s)", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_black_holed_deliveries_in_flight_keeps_the_grace_period() {
    let hole = BlackHole::start().await;
    let grace = Duration::from_secs(2);
    let mut s = Slipway::start(grace.as_secs(), "request_timeout_seconds = 30").await;
    let ops = [
        put_notified(&s.http, &s.base, "stuck1", &hole.uri).await,
        put_notified(&s.http, &s.base, "stuck2", &hole.uri).await,
    ];
    for op in &ops {
        wait_terminal(&s.http, op).await;
    }
    let held = hole.wait("a request held", T, |h| h.open >= 1).await;

    let app = s.app.take().unwrap();
    let start = Instant::now();
    let stopped = tokio::time::timeout(grace * 3, app.shutdown()).await;
    let took = start.elapsed();
    println!("App::shutdown with {} black-holed deliveries in flight took {took:?} (grace {grace:?})", held.open);
    assert!(stopped.is_ok(), "App::shutdown did not return within {:?}", grace * 3);
    stopped.unwrap().expect("clean shutdown");
    assert!(took < grace, "shutdown took {took:?}, longer than the grace period {grace:?}");
    hole.wait("the abandoned requests closed", QUICK, |h| h.open == 0).await;
}

fn spawn(dir: &Path, config: &Path, run: usize) -> Child {
    spawn_slipway(config, &dir.join(format!("slipway-{run}.log")), "info")
}

async fn wait_ready(http: &reqwest::Client, base: &str, dir: &Path) {
    let ready = ready_within(http, base, T).await;
    ready.unwrap_or_else(|e| panic!("slipway did not become ready ({e}); see {}", dir.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_black_holed_delivery_exits_within_grace_and_the_notification_survives() {
    let hole = BlackHole::start().await;
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let grace = Duration::from_secs(3);
    let text =
        config_text(dir.path(), &format!("127.0.0.1:{port}"), &sim, grace.as_secs(), "request_timeout_seconds = 30");
    let config: PathBuf = dir.path().join("slipway.toml");
    std::fs::write(&config, text).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    let mut child = spawn(dir.path(), &config, 1);
    wait_ready(&http, &base, dir.path()).await;
    let op = put_notified(&http, &base, "interrupted", &hole.uri).await;
    wait_terminal(&http, &op).await;
    hole.wait("the request held", T, |h| h.open == 1).await;

    let start = Instant::now();
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let exit = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + grace * 3;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Ok(status);
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                return Err(child.wait().unwrap());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    })
    .await
    .unwrap();
    let took = start.elapsed();
    println!("SIGTERM to exit with a black-holed delivery in flight: {took:?} (grace {grace:?})");
    let status =
        exit.unwrap_or_else(|_| panic!("still running {:?} after SIGTERM; see {}", grace * 3, dir.path().display()));
    assert!(status.success(), "graceful shutdown exits 0: {status:?}");
    assert!(took < grace, "exited after {took:?}, past the grace period {grace:?}");
    hole.wait("the interrupted request closed", QUICK, |h| h.open == 0).await;
    assert_eq!(hole.now().accepted, 1, "one delivery before the restart");

    // The interrupted notification was given back, not lost: the next process sends it again
    // at once (not after the claim hold).
    let restarted = Instant::now();
    let mut child = spawn(dir.path(), &config, 2);
    let again = tokio::time::timeout(QUICK, async {
        let mut rx = hole.stats.clone();
        rx.wait_for(|h| h.accepted >= 2).await.map(|h| *h)
    })
    .await;
    println!("after the restart the interrupted notification was sent again in {:?}", restarted.elapsed());
    child.kill().unwrap();
    child.wait().unwrap();
    let again = again.unwrap_or_else(|_| panic!("not sent again within {QUICK:?}; see {}", dir.path().display()));
    assert_eq!(again.unwrap().accepted, 2);
}

// ---------------------------------------------------------------------------------------
// The notifier alone, on a store the test watches

/// A notifier running on its own over a recording SQLite store.
struct Bench {
    _dir: tempfile::TempDir,
    store: Arc<Faulty<SqliteStore>>,
    clock: Arc<TestClock>,
    signal: Arc<Notify>,
    calls: watch::Receiver<Vec<Call>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    running: Option<tokio::task::JoinHandle<()>>,
    ops: u64,
}

/// Retries come minutes apart: the test moves the clock, real time barely matters.
fn bench_options() -> NotifierOptions {
    NotifierOptions {
        request_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        max_attempts: 10,
        first_backoff: Duration::from_secs(60),
        max_backoff: Duration::from_secs(600),
        idle_interval: Duration::from_millis(20),
        callbacks: CallbackPolicy::allow_all(),
        ..NotifierOptions::default()
    }
}

impl Bench {
    fn start(options: NotifierOptions) -> Bench {
        common::init_logging();
        let dir = tempfile::tempdir().unwrap();
        let inner = SqliteStore::open(SqliteOptions::new(dir.path().join("outbox.db"))).unwrap();
        // The notifier's bookkeeping, and each pass's claim: the time it claimed at and how
        // many rows it got.
        let recorded = [
            Method::ClaimNotifications,
            Method::FinishNotification,
            Method::RescheduleNotification,
            Method::AbandonNotification,
            Method::DeferNotifications,
        ];
        let store = Arc::new(Faulty::new(Arc::new(inner)).recording(&recorded));
        let calls = store.calls();
        let clock = Arc::new(TestClock::new());
        let signal = Arc::new(Notify::new());
        let notifier = Notifier::new(store.clone(), clock.clone(), signal.clone(), options).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(notifier.run(async move {
            let _ = stopped.await;
        }));
        Bench { _dir: dir, store, clock, signal, calls, stop: Some(stop), running: Some(running), ops: 0 }
    }

    /// An operation that ended now and notifies `uri`, as the engine queues it.
    async fn ended_operation(&mut self, uri: &str) {
        self.ops += 1;
        let now = self.clock.now();
        let id = vnet("sub-notify", "rg", &format!("vnet{}", self.ops));
        let context = RequestContext { notification_uri: Some(uri.to_string()), ..ctx(self.ops, now) };
        let (admitted, _) = put(self.store.as_ref(), &id, spec(1), context).await;
        let slipway_domain::admission::Admitted::Accepted { operation, .. } = admitted else { panic!("{admitted:?}") };
        let op = operation.id;
        self.store
            .change(
                ChangeRequest::new(id.key(), now),
                Box::new(move |s: &mut Snapshot| {
                    if s.set_operation_status(&op, ProvisioningState::Succeeded, None, now) {
                        Ok(())
                    } else {
                        Err(Rejection::OperationNotFound)
                    }
                }),
            )
            .await
            .expect("operation ends");
        self.signal.notify_one();
    }

    /// Waits until the recorded bookkeeping calls satisfy `f`; returns them.
    async fn wait(&self, what: &str, f: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        let mut rx = self.calls.clone();
        match tokio::time::timeout(QUICK, rx.wait_for(|c| f(&bookkeeping(c)))).await {
            Ok(Ok(c)) => bookkeeping(&c),
            _ => panic!("{what}: not seen within {QUICK:?}; calls: {:#?}", *self.calls.borrow()),
        }
    }

    /// Waits for a pass of the notifier that claimed at `at` or later; the rows it claimed
    /// (all that pass can send).
    async fn pass_at(&self, at: Timestamp) -> usize {
        let claimed = |calls: &[Call]| {
            calls.iter().find_map(|c| match c {
                Call::ClaimNotifications(t, n) if *t >= at => Some(*n),
                _ => None,
            })
        };
        let mut rx = self.calls.clone();
        match tokio::time::timeout(QUICK, rx.wait_for(|c| claimed(c).is_some())).await {
            Ok(Ok(c)) => claimed(&c).unwrap_or_default(),
            _ => panic!("no pass of the notifier at {at} within {QUICK:?}; calls: {:?}", *self.calls.borrow()),
        }
    }

    /// Moves time on by `d` (see the module's doc) and wakes the notifier.
    async fn advance(&self, d: Duration) {
        jump(d).await;
        self.signal.notify_one();
    }

    async fn stop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(QUICK, self.running.take().unwrap()).await.expect("notifier stops").unwrap();
    }
}

/// The notifier's bookkeeping: every recorded call but its claims.
fn bookkeeping(calls: &[Call]) -> Vec<Call> {
    calls.iter().filter(|c| !matches!(c, Call::ClaimNotifications(..))).cloned().collect()
}

fn reschedules(calls: &[Call], id: i64) -> Vec<(Timestamp, String)> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Reschedule(i, at, e) if *i == id => Some((*at, e.clone())),
            _ => None,
        })
        .collect()
}

fn finished(calls: &[Call]) -> usize {
    calls.iter().filter(|c| matches!(c, Call::Finish(_))).count()
}

fn deferred_ids(calls: &[Call]) -> Vec<i64> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Defer(rows) => Some(rows.iter().map(|(id, _)| *id)),
            _ => None,
        })
        .flatten()
        .collect()
}

async fn collect(callback: &mut Callback, into: &mut Vec<Arrival>) {
    while let Ok(a) = callback.arrivals.try_recv() {
        into.push(a);
    }
}

#[tokio::test]
async fn attempts_run_out_and_the_notification_is_kept_as_dead() {
    let mut callback = Callback::start().await;
    callback.status.store(503, Ordering::SeqCst);
    let mut b = Bench::start(NotifierOptions { max_attempts: 3, ..bench_options() });
    b.ended_operation(&callback.uri("/failing")).await;

    // Attempt 1, then 2 after the first back-off (60 s), then 3 after the second (120 s).
    for (attempt, backoff) in [(1, 60), (2, 120)] {
        let a = callback.next(QUICK).await;
        assert_eq!((a.path.as_str(), &a.body["status"]), ("/failing", &json!("Succeeded")));
        let calls = b
            .wait(&format!("attempt {attempt} rescheduled"), |c| {
                c.iter().filter(|c| matches!(c, Call::Reschedule(..))).count() == attempt
            })
            .await;
        let Some(Call::Reschedule(_, at, error)) = calls.last() else { panic!("{calls:?}") };
        assert_eq!(error, "callback answered 503 Service Unavailable");
        let wait = at.millis_after(b.clock.now());
        assert!((backoff - 5) * 1000 < wait && wait <= backoff * 1000, "attempt {attempt}: next in {wait} ms");
        b.advance(Duration::from_secs(backoff as u64 + 1)).await;
    }
    let a = callback.next(QUICK).await;
    assert_eq!(a.path, "/failing");
    let calls = b.wait("abandoned", |c| c.iter().any(|c| matches!(c, Call::Abandon(..)))).await;
    let Some(Call::Abandon(id, error)) = calls.last() else { panic!("{calls:?}") };
    assert_eq!(error, "gave up after 3 attempts: callback answered 503 Service Unavailable");
    b.stop().await;

    // Dead, not pending: it never comes due again, however late.
    let later = b.clock.now().add(Duration::from_secs(30 * 24 * 3600));
    let pending = b.store.claim_notifications(later, 10, Duration::from_secs(60)).await.unwrap();
    assert!(pending.is_empty(), "row {id} still pending: {pending:?}");
    assert!(callback.arrivals.try_recv().is_err(), "no fourth attempt");
}

#[tokio::test]
async fn a_failing_destination_is_backed_off_as_a_whole() {
    let mut bad = Callback::start().await;
    let mut good = Callback::start().await;
    bad.status.store(500, Ordering::SeqCst);
    let mut b = Bench::start(bench_options());
    let mut seen = Vec::new();

    // The first notification to `bad` fails: the destination is backed off for 60 s.
    b.ended_operation(&bad.uri("/one")).await;
    seen.push(bad.next(QUICK).await);
    let calls = b.wait("first failure", |c| !c.is_empty()).await;
    let Call::Reschedule(first, _, ref error) = calls[0] else { panic!("{calls:?}") };
    assert_eq!(error, "callback answered 500 Internal Server Error");

    // Two more for `bad` are not sent while it is backed off (each turn counts, with the
    // destination's error); one for `good` goes straight through.
    b.ended_operation(&bad.uri("/two")).await;
    b.ended_operation(&bad.uri("/three")).await;
    b.ended_operation(&good.uri("/other")).await;
    let calls = b
        .wait("held back and delivered", |c| {
            finished(c) == 1 && (2..=3).all(|id| reschedules(c, first + id - 1).len() == 1)
        })
        .await;
    assert_eq!(good.next(QUICK).await.path, "/other");
    collect(&mut bad, &mut seen).await;
    assert_eq!(seen.len(), 1, "nothing more reached the backed-off destination: {seen:?}");
    let retry_at = reschedules(&calls, first)[0].0;
    for id in [first + 1, first + 2] {
        let (at, error) = reschedules(&calls, id).remove(0);
        assert!(at >= retry_at, "not before the destination's next try");
        assert!(error.starts_with("not sent: 127.0.0.1:"), "{error}");
        assert!(
            error.ends_with(
                "is backed off after 1 failed deliveries (last: callback answered 500 Internal Server Error)"
            ),
            "{error}"
        );
    }

    // The destination recovers. Past its back-off one probe goes; the other two wait for it.
    bad.status.store(200, Ordering::SeqCst);
    b.advance(Duration::from_secs(61)).await;
    let probe = bad.next(QUICK).await;
    let calls = b.wait("probe delivered, the rest held", |c| finished(c) == 2 && deferred_ids(c).len() == 2).await;
    collect(&mut bad, &mut seen).await;
    assert_eq!(seen.len(), 1, "exactly one probe: {seen:?} then {probe:?}");
    let held = deferred_ids(&calls);
    assert_eq!(held.len(), 2, "the other two held back for the probe's verdict: {calls:#?}");

    // Healthy again: the rest go as soon as they are due.
    b.advance(Duration::from_secs(5)).await;
    b.wait("all delivered", |c| finished(c) == 4).await;
    seen.push(probe);
    for _ in 0..2 {
        seen.push(bad.next(QUICK).await);
    }
    let mut paths: Vec<_> = seen.iter().map(|a| a.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["/one", "/one", "/three", "/two"]);
    assert!(b.calls.borrow().iter().all(|c| !matches!(c, Call::Abandon(..))));
    b.stop().await;
}

#[tokio::test]
async fn a_callback_the_policy_refuses_at_send_time_is_given_up_at_once() {
    // Rows written while the policy allowed loopback (or before there was one), sent by a
    // notifier whose policy does not: not one connection, no retries, a dead letter saying why.
    let mut callback = Callback::start().await;
    let http_only = CallbackPolicy::new(&[], CallbackSchemes::HttpAndHttps, CallbackNetworks::PublicOnly).unwrap();
    let mut b = Bench::start(NotifierOptions { callbacks: http_only, ..bench_options() });
    b.ended_operation(&callback.uri("/refused")).await;
    b.ended_operation("http://localhost:9/refused").await;
    let calls = b.wait("both given up", |c| c.iter().filter(|c| matches!(c, Call::Abandon(..))).count() == 2).await;
    let mut errors: Vec<&str> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Abandon(_, e) => Some(e.as_str()),
            _ => None,
        })
        .collect();
    errors.sort();
    assert_eq!(errors, ["refused by the callback policy: the host is a loopback address"; 2]);
    assert!(calls.iter().all(|c| matches!(c, Call::Abandon(..))), "no attempt rescheduled: {calls:?}");
    // An hour later the notifier's next pass finds nothing to send: what was given up never
    // comes due again, and nothing reaches the callback.
    let later = b.clock.now().add(Duration::from_secs(3600));
    b.advance(Duration::from_secs(3600)).await;
    assert_eq!(b.pass_at(later).await, 0, "a notification given up came due again");
    assert!(callback.arrivals.try_recv().is_err(), "the callback was never called");
    b.stop().await;
}
