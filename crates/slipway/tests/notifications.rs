//! Async notification delivery under trouble: a black-holed callback (accepts connections,
//! never answers) must not delay anyone else's callback nor hold up shutdown; a failing
//! destination is backed off as a whole; attempts are bounded and end in a dead letter.
//!
//! These drive the whole Slipway (real API over the AWX-API simulator, the binary for the
//! SIGTERM case); the notifier alone, with time moved by the test, is tested in its own
//! crate (`crates/notify/tests/delivery.rs`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{API, free_port, header, rid, spawn_slipway};
use aap_sim::{Sim, SimConfig};
use serde_json::{Value, json};
use slipway::app::App;
use slipway::config::Config;
use slipway_domain::Timestamp;
use slipway_test_support::callback::Callback;
use slipway_test_support::{TestClock, eventually, ready_within};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

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
    // Waits for the exit itself (its time is what the test measures); a process still there
    // after three graces is killed so that the test does not leave it behind.
    let exited = tokio::time::timeout(grace * 3, tokio::task::spawn_blocking(move || child.wait().unwrap())).await;
    let took = start.elapsed();
    println!("SIGTERM to exit with a black-holed delivery in flight: {took:?} (grace {grace:?})");
    let status = exited.unwrap_or_else(|_| {
        Command::new("kill").args(["-KILL", &pid]).status().ok();
        panic!("still running {:?} after SIGTERM; see {}", grace * 3, dir.path().display())
    });
    let status = status.unwrap();
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
