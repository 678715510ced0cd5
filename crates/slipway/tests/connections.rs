//! Connection limits, black-box over TCP: the header-read, body-read and idle timeouts each
//! close their kind of slow connection, a capped server still serves a normal client while
//! more connections than the cap are held, graceful shutdown closes idle connections at
//! once, and the binary under a low open-file limit neither starves nor spins on accept.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::{API, TestServer, config_text, free_port, rid};
use serde_json::{Value, json};
use slipway_test_support::{eventually, ready_within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Upper bound on waiting for anything the server should do by itself.
const BOUND: Duration = Duration::from_secs(10);

fn vnet_path(name: &str) -> String {
    format!("{}?api-version={API}", rid("virtualNetworks", name))
}

async fn connect(base: &str) -> TcpStream {
    let addr = base.trim_start_matches("http://");
    tokio::time::timeout(BOUND, TcpStream::connect(addr)).await.expect("connected in time").expect("connect")
}

/// Reads until the server closes the connection (EOF or reset); returns what it sent.
async fn read_to_close(s: &mut TcpStream, bound: Duration) -> (Instant, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let done = tokio::time::timeout(bound, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(done.is_ok(), "connection still open after {bound:?}; got {:?}", String::from_utf8_lossy(&got));
    (Instant::now(), got)
}

/// One HTTP/1.1 response: status, head text, body (by Content-Length).
async fn read_response(s: &mut TcpStream) -> (u16, String, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = tokio::time::timeout(BOUND, s.read(&mut buf)).await.expect("response in time").expect("read");
        assert!(n > 0, "closed before a response: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_string();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("status code");
    let len: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0);
    let mut body = got[head_end..].to_vec();
    while body.len() < len {
        let n = tokio::time::timeout(BOUND, s.read(&mut buf)).await.expect("body in time").expect("read");
        assert!(n > 0, "closed inside a response body");
        body.extend_from_slice(&buf[..n]);
    }
    (status, head, body)
}

async fn get_healthz(s: &mut TcpStream) -> u16 {
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
    let (status, _, body) = read_response(s).await;
    assert_eq!(body, b"ok");
    status
}

/// A PUT head announcing a 100-byte JSON body, and the first 10 bytes of it.
fn partial_put(name: &str, expect_continue: bool) -> Vec<u8> {
    let expect = if expect_continue { "Expect: 100-continue\r\n" } else { "" };
    format!(
        "PUT {} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n{expect}\r\n{{\"location",
        vnet_path(name)
    )
    .into_bytes()
}

/// Sends a request head one byte every `every` (never finishing it) until the server closes
/// the connection; returns when the first byte went out and when it was closed.
async fn slowloris(mut s: TcpStream, every: Duration) -> (Instant, Instant) {
    let head =
        b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut tick = tokio::time::interval(every);
    let mut buf = [0u8; 64];
    let mut first = None;
    let mut sent = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let byte = head[sent % head.len()];
                if s.write_all(&[byte]).await.is_err() {
                    break;
                }
                first.get_or_insert_with(Instant::now);
                sent += 1;
            }
            r = s.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) { break },
        }
    }
    (first.expect("sent a byte"), Instant::now())
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// On paused time a close comes when the server's timer fires, to the millisecond (tokio's
/// timers round up to one), however loaded the machine is.
fn assert_about(what: &str, took: Duration, expected_secs: u64) {
    let lo = Duration::from_secs(expected_secs);
    let hi = lo + Duration::from_millis(5);
    assert!(took >= lo && took <= hi, "{what}: closed after {took:?}, expected {expected_secs} s");
}

/// On paused time: the server's timeouts and the clients' pauses are tokio timers in this
/// process, and loopback writes are ready at once, so the runtime moves the clock only when
/// every side waits for a timer.
#[tokio::test(start_paused = true)]
async fn each_slow_kind_is_closed_after_its_own_timeout() {
    // Distinct values, so each close shows which timeout fired.
    let mut s = TestServer::start_with_server(
        "header_read_timeout_seconds = 1\nbody_read_timeout_seconds = 2\nidle_timeout_seconds = 3",
    )
    .await;
    let t0 = Instant::now();
    let mut idle = connect(&s.base).await; // never sends anything
    let mut keep = connect(&s.base).await; // one request now, another later
    assert_eq!(get_healthz(&mut keep).await, 200);
    let loris = tokio::spawn(slowloris(connect(&s.base).await, Duration::from_millis(200)));
    let late_loris = connect(&s.base).await; // idles, then starts a head later
    let mut body = connect(&s.base).await; // a body shorter than its Content-Length
    body.write_all(&partial_put("slowbody", false)).await.unwrap();
    let body_sent = Instant::now();

    // Header-read timeout, from the head's first byte (the idle timeout is 3 s).
    let (first, closed) = tokio::time::timeout(BOUND, loris).await.expect("slowloris closed").unwrap();
    assert_about("slowloris", closed - first, 1);
    println!("slowloris (a header byte every 200 ms) closed {:.3} s after its first byte", secs(closed - first));

    // Within its idle timeout a kept-alive connection still serves.
    let reused = Instant::now();
    assert_eq!(get_healthz(&mut keep).await, 200, "kept-alive connection reused after {:?}", reused - t0);
    let keep_idle_from = Instant::now();

    // A connection that idled ~1 s first: its head timeout counts from its first byte.
    let late = tokio::spawn(slowloris(late_loris, Duration::from_millis(200)));

    // Body-read timeout: 408 in the ARM error shape, then the connection closes.
    let (at, got) = read_to_close(&mut body, BOUND).await;
    let text = String::from_utf8_lossy(&got).to_string();
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.to_ascii_lowercase().contains("connection: close"), "{text}");
    let json: Value = serde_json::from_str(&text[text.find("\r\n\r\n").unwrap() + 4..]).expect("JSON body");
    assert_eq!(json["error"]["code"], "RequestTimeout", "{json}");
    assert_about("short body", at - body_sent, 2);
    println!("body shorter than Content-Length: 408 RequestTimeout {:.3} s after its head", secs(at - body_sent));

    let (first, closed) = tokio::time::timeout(BOUND, late).await.expect("late slowloris closed").unwrap();
    assert_about("late slowloris (from its first byte)", closed - first, 1);
    assert!(closed - t0 >= Duration::from_millis(1900), "not timed from connect: {:?}", closed - t0);
    println!(
        "slowloris starting {:.3} s after connect closed {:.3} s after its first byte",
        secs(first - t0),
        secs(closed - first)
    );

    // Idle timeout, for the first request on a fresh connection and the next on a kept one.
    let (at, got) = read_to_close(&mut idle, BOUND).await;
    assert!(got.is_empty(), "nothing sent to an idle connection: {:?}", String::from_utf8_lossy(&got));
    assert_about("fresh idle connection", at - t0, 3);
    println!("fresh connection without a request closed after {:.3} s", secs(at - t0));
    let (at, _) = read_to_close(&mut keep, BOUND).await;
    assert_about("kept-alive connection", at - keep_idle_from, 3);
    println!("kept-alive connection closed {:.3} s after its last response", secs(at - keep_idle_from));
    s.stop().await;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Idle,
    Slowloris,
    ShortBody,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_normal_client_is_served_while_more_connections_than_the_cap_are_held() {
    const CAP: usize = 64;
    // Timeouts far longer than the test: whatever closes here is the cap's doing.
    let mut s = TestServer::start_with_server(&format!(
        "max_connections = {CAP}\nheader_read_timeout_seconds = 20\nbody_read_timeout_seconds = 20\nidle_timeout_seconds = 30"
    ))
    .await;
    let (closed_tx, mut closed_rx) = mpsc::unbounded_channel::<Kind>();
    let mut holders = tokio::task::JoinSet::new();
    let mut opened = Vec::new();
    for (kind, n) in [(Kind::Idle, 60), (Kind::Slowloris, 30), (Kind::ShortBody, 20)] {
        for i in 0..n {
            let mut c = connect(&s.base).await;
            let tx = closed_tx.clone();
            match kind {
                Kind::Idle => {
                    holders.spawn(async move {
                        read_to_close(&mut c, Duration::from_secs(60)).await;
                        let _ = tx.send(kind);
                    });
                }
                Kind::Slowloris => {
                    holders.spawn(async move {
                        slowloris(c, Duration::from_millis(300)).await;
                        let _ = tx.send(kind);
                    });
                }
                Kind::ShortBody => {
                    c.write_all(&partial_put(&format!("held{i}"), false)).await.unwrap();
                    holders.spawn(async move {
                        read_to_close(&mut c, Duration::from_secs(60)).await;
                        let _ = tx.send(kind);
                    });
                }
            }
            opened.push(kind);
        }
    }
    let held = opened.len();
    assert!(held > CAP);

    // The server keeps at most CAP: it closes the longest-idle ones, never a request in flight.
    let mut closed = Vec::new();
    let start = Instant::now();
    while closed.len() < held - CAP {
        let left = (start + Duration::from_secs(5)).saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, closed_rx.recv()).await {
            Ok(Some(kind)) => closed.push(kind),
            _ => panic!("{held} connections held, cap {CAP}: the server closed only {}", closed.len()),
        }
    }
    println!(
        "{held} connections opened against a cap of {CAP}: the server closed {} of them (all idle ones) within {:?} of the last connect",
        closed.len(),
        start.elapsed()
    );
    assert!(closed.iter().all(|k| *k == Kind::Idle), "only the longest-idle ones go: {closed:?}");

    // A normal client on a fresh connection: served at once.
    let t = Instant::now();
    let mut fresh = connect(&s.base).await;
    assert_eq!(get_healthz(&mut fresh).await, 200);
    let healthz = t.elapsed();
    let t = Instant::now();
    let http = reqwest::Client::new(); // a new pool: a new connection
    let r = http
        .put(s.url(&rid("virtualNetworks", "normal")))
        .json(&json!({"location": "local", "properties": {"addressSpace": "10.9.0.0/16"}}))
        .send()
        .await
        .expect("PUT");
    let put = t.elapsed();
    assert_eq!(r.status().as_u16(), 201, "{:?}", r.text().await);
    println!(
        "normal client while {held} connections are held (cap {CAP}): GET /healthz {:.1} ms, PUT {:.1} ms",
        healthz.as_secs_f64() * 1000.0,
        put.as_secs_f64() * 1000.0
    );
    assert!(healthz < Duration::from_secs(1) && put < Duration::from_secs(2), "{healthz:?} {put:?}");
    while let Ok(kind) = closed_rx.try_recv() {
        assert_ne!(kind, Kind::ShortBody, "a request in flight was never evicted");
    }

    holders.abort_all();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn graceful_shutdown_closes_idle_connections_at_once_and_finishes_requests() {
    let mut s = TestServer::start_with_server(
        "header_read_timeout_seconds = 30\nbody_read_timeout_seconds = 30\nidle_timeout_seconds = 60",
    )
    .await;
    let mut fresh = connect(&s.base).await;
    let mut kept = connect(&s.base).await;
    assert_eq!(get_healthz(&mut kept).await, 200);
    let mut half_head = connect(&s.base).await;
    half_head.write_all(b"GET /healthz HTTP/1.1\r\nHo").await.unwrap();
    // A request in flight: the server asked for its body (100 Continue), which is not all here.
    let mut in_flight = connect(&s.base).await;
    in_flight.write_all(&partial_put("inflight", true)).await.unwrap();
    let (status, _, _) = read_response(&mut in_flight).await;
    assert_eq!(status, 100);

    let app = s.app.take().unwrap();
    let t = Instant::now();
    let stopping = tokio::spawn(app.shutdown());
    for (what, c) in [("fresh", &mut fresh), ("kept-alive", &mut kept), ("half a head", &mut half_head)] {
        let (at, _) = read_to_close(c, Duration::from_secs(5)).await;
        println!("shutdown closed the {what} connection after {:.1} ms", (at - t).as_secs_f64() * 1000.0);
    }
    assert!(TcpStream::connect(s.base.trim_start_matches("http://")).await.is_err(), "no longer accepting");
    assert!(!stopping.is_finished(), "waits for the request in flight");

    // The request in flight completes (an invalid body: 400), then its connection closes.
    in_flight.write_all(&[b'x'; 90]).await.unwrap();
    let (status, head, _) = read_response(&mut in_flight).await;
    assert_eq!(status, 400, "{head}");
    read_to_close(&mut in_flight, Duration::from_secs(5)).await;
    tokio::time::timeout(BOUND, stopping).await.expect("shutdown finished").unwrap().expect("clean shutdown");
}

/// The `slipway` binary under `ulimit_args` (e.g. `-n 256`), logging to `dir/slipway.log`.
async fn spawn_limited(dir: &Path, ulimit_args: &str) -> (Running, String) {
    let port = free_port();
    let text = config_text(dir, "").replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""));
    let config = dir.join("slipway.toml");
    std::fs::write(&config, text).unwrap();
    let log = std::fs::File::create(dir.join("slipway.log")).unwrap();
    let child = Command::new("bash")
        .arg("-c")
        .arg(format!("ulimit {ulimit_args} && exec \"$0\" serve --config \"$1\""))
        .arg(env!("CARGO_BIN_EXE_slipway"))
        .arg(&config)
        .env("SLIPWAY_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn slipway");
    let child = Running(child);
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let ready = ready_within(&http, &base, Duration::from_secs(60)).await;
    ready.unwrap_or_else(|e| panic!("slipway did not become ready ({e}); see {}", dir.display()));
    (child, base)
}

/// (soft, hard) open-file limits of a running process.
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let mut f = line.split_whitespace().skip(3);
    (f.next().unwrap().to_string(), f.next().unwrap().to_string())
}

/// A child process, killed when dropped (also when a test fails).
struct Running(Child);

impl Running {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_a_low_open_file_limit_the_binary_serves_and_does_not_spin() {
    const LIMIT: usize = 256;
    const HELD: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = spawn_limited(dir.path(), &format!("-n {LIMIT}")).await;
    assert_eq!(open_file_limits(child.id()), (LIMIT.to_string(), LIMIT.to_string()));

    // More connections than the process has file descriptors.
    let (closed_tx, mut closed_rx) = mpsc::unbounded_channel::<()>();
    let mut holders = tokio::task::JoinSet::new();
    for _ in 0..HELD {
        let mut c = connect(&base).await;
        let tx = closed_tx.clone();
        holders.spawn(async move {
            read_to_close(&mut c, Duration::from_secs(120)).await;
            let _ = tx.send(());
        });
    }
    // The derived cap (limit minus reserve) holds: the server closed the longest-idle ones.
    let mut closed = 0;
    while closed < HELD - LIMIT {
        let got = tokio::time::timeout(Duration::from_secs(5), closed_rx.recv()).await;
        assert!(matches!(got, Ok(Some(()))), "{HELD} held, limit {LIMIT}: only {closed} closed");
        closed += 1;
    }

    let t = Instant::now();
    let mut fresh = connect(&base).await;
    assert_eq!(get_healthz(&mut fresh).await, 200);
    let healthz = t.elapsed();
    // A real PUT whose job (an ansible-runner child) must get its file descriptors.
    let http = reqwest::Client::new();
    let r = http
        .put(format!("{base}{}", vnet_path("limited")))
        .json(&json!({"location": "local", "properties": {"addressSpace": "10.8.0.0/16"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let status_url = r.headers()["azure-asyncoperation"].to_str().unwrap().to_string();
    let start = Instant::now();
    let done = eventually("the operation to end", Duration::from_secs(60), async || {
        let body: Value = http.get(&status_url).send().await.unwrap().json().await.unwrap();
        match body["status"].as_str() {
            Some("Succeeded" | "Failed" | "Canceled") => Ok(body),
            _ => Err(body.to_string()),
        }
    })
    .await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    while closed_rx.try_recv().is_ok() {
        closed += 1;
    }
    println!(
        "open-file limit {LIMIT}, {HELD} connections opened ({closed} closed by the cap): GET /healthz {:.1} ms; \
         PUT's job succeeded in {:.1} s",
        healthz.as_secs_f64() * 1000.0,
        start.elapsed().as_secs_f64()
    );
    holders.abort_all();
    drop(child);

    let log = std::fs::read_to_string(dir.path().join("slipway.log")).unwrap();
    let accept_errors = log.lines().filter(|l| l.contains("accept error")).count();
    let cap_lines = log.lines().filter(|l| l.contains("connection cap reached")).count();
    println!("log: {accept_errors} accept-error lines, {cap_lines} cap lines");
    assert_eq!(accept_errors, 0, "{log}");
    assert!(cap_lines <= 2, "cap log is rate-limited: {cap_lines} lines\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
    let dir = tempfile::tempdir().unwrap();
    let (child, _) = spawn_limited(dir.path(), "-Sn 256").await;
    let (soft, hard) = open_file_limits(child.id());
    drop(child);
    assert_eq!(soft, hard, "soft limit raised from 256");
}
