//! A client's async-notification callback for tests: a loopback HTTP endpoint that answers
//! every POST with a status the test sets and reports each arrival (its time, path and JSON
//! body).

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use serde_json::Value;
use slipway_domain::time::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// What a working callback received.
#[derive(Debug)]
pub struct Arrival {
    pub at: Timestamp,
    pub path: String,
    pub body: Value,
}

/// A callback answering `status` (changeable) to every POST, reporting each arrival.
pub struct Callback {
    base: String,
    /// The status every POST is answered with; a test changes it to make the callback fail.
    pub status: Arc<AtomicU16>,
    pub arrivals: mpsc::UnboundedReceiver<Arrival>,
}

impl Callback {
    pub async fn start() -> Callback {
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

    pub fn uri(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn next(&mut self, within: Duration) -> Arrival {
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
