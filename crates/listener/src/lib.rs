//! The HTTP(S) listener the API is served on, knowing nothing of ARM but the shape of one
//! error body. The accept loop admits connections up to a cap (evicting the longest-idle one
//! to make room), backs off on accept errors instead of spinning, raises the open-file limit,
//! and shuts down gracefully. Per-connection timeouts are in [`conn`], the table behind the
//! cap in [`registry`], TLS (and its reload) in [`tls`]. Each request carries its TCP peer as
//! a [`PeerAddr`] extension.

mod conn;
mod registry;
mod tls;

pub use tls::{ServerTls, TlsError, TlsOptions};

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;

use conn::Timeouts;
use registry::{Phase, Registry};

/// The TCP peer of a request, set by the listener as a request extension.
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub SocketAddr);

/// Connection limits of the HTTP listener.
#[derive(Clone, Debug)]
pub struct ListenerOptions {
    /// From the first byte of a request head to its end.
    pub header_read_timeout: Duration,
    /// From the end of a request head to the end of its body.
    pub body_read_timeout: Duration,
    /// Waiting for a request: the first on a new connection, the next on a kept-alive one.
    pub idle_timeout: Duration,
    /// Most connections held at once; 0 = the open-file limit minus `fd_reserve`
    /// (at most [`DERIVED_CAP_MAX`]).
    pub max_connections: usize,
    /// File descriptors kept for everything but client connections (store, providers,
    /// notifications, logs) when the cap is derived.
    pub fd_reserve: usize,
    /// Serve HTTPS with this (loaded) configuration, reloaded when its files change;
    /// `None`: plain HTTP.
    pub tls: Option<ServerTls>,
}

/// The largest derived cap: a bound on memory (each connection holds buffers and a task),
/// not on file descriptors.
pub const DERIVED_CAP_MAX: usize = 65_536;
/// The smallest derived cap, however low the open-file limit.
const DERIVED_CAP_MIN: usize = 16;

impl Default for ListenerOptions {
    fn default() -> Self {
        ListenerOptions {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 0,
            fd_reserve: 256,
            tls: None,
        }
    }
}

impl ListenerOptions {
    /// The cap given the process's open-file limit (`None`: unlimited).
    pub fn cap(&self, fd_limit: Option<u64>) -> usize {
        if self.max_connections > 0 {
            return self.max_connections;
        }
        let Some(limit) = fd_limit else { return DERIVED_CAP_MAX };
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        limit.saturating_sub(self.fd_reserve).clamp(DERIVED_CAP_MIN, DERIVED_CAP_MAX)
    }
}

/// Raises the soft open-file limit to the hard one; returns the limit now in force
/// (`None`: unlimited).
pub fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current?;
    // An unlimited hard limit (macOS) does not accept an unlimited soft one: try a large
    // finite value, then the classic OPEN_MAX.
    let targets = match limit.maximum {
        Some(hard) => vec![hard],
        None => vec![1 << 20, 10_240],
    };
    for target in targets.into_iter().filter(|t| *t > soft) {
        if setrlimit(Resource::Nofile, Rlimit { current: Some(target), maximum: limit.maximum }).is_ok() {
            tracing::info!(from = soft, to = target, "raised the open-file limit");
            return Some(target);
        }
    }
    Some(soft)
}

/// Accept-error backoff: 10 ms doubling to 1 s (`RetryPolicy`), reset by a successful accept.
#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    fn fail(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        slipway_domain::RetryPolicy::exponential(Self::FIRST, Self::MAX).delay(self.failures)
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// At most one log line per `every`; says how many were suppressed in between.
#[derive(Debug)]
struct Throttle {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    fn new(every: Duration) -> Self {
        Throttle { every, last: None, suppressed: 0 }
    }

    /// `Some(suppressed since the last line)` if a line may be logged now.
    fn allow(&mut self, now: Instant) -> Option<u64> {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) < self.every) {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// Errors of one connection that went away before it was accepted: retry at once.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted)
}

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting, closes
/// connections without a request in flight at once, and waits for the others to finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ListenerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let fd_limit = raise_open_file_limit();
    let cap = options.cap(fd_limit);
    if let Some(limit) = fd_limit
        && options.max_connections > 0
        && cap.saturating_add(options.fd_reserve) as u64 > limit
    {
        tracing::warn!(
            cap,
            limit,
            reserve = options.fd_reserve,
            "max_connections leaves fewer spare file descriptors than the reserve"
        );
    }
    tracing::info!(cap, fd_limit, "connection limits");
    let registry = Registry::new(cap);
    let timeouts =
        Timeouts { header: options.header_read_timeout, body: options.body_read_timeout, idle: options.idle_timeout };
    let (stop_tx, stop_rx) = watch::channel(false);
    let reload = options.tls.clone().map(|tls| {
        let o = tls.options();
        tracing::info!(
            cert = %o.cert_file.display(),
            client_certificates = o.client_ca_file.is_some(),
            reload_every = ?o.reload_interval,
            "serving HTTPS"
        );
        tokio::spawn(tls.watch(stop_rx.clone()))
    });
    let mut backoff = Backoff::default();
    let mut accept_log = Throttle::new(Duration::from_secs(10));
    let mut cap_log = Throttle::new(Duration::from_secs(10));
    let mut refuse_log = Throttle::new(Duration::from_secs(10));
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            r = listener.accept() => r,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff.reset();
                stream
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                let delay = backoff.fail();
                if let Some(suppressed) = accept_log.allow(Instant::now()) {
                    tracing::error!(error = %e, suppressed, retry_in = ?delay, "accept error");
                }
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(delay) => continue,
                }
            }
        };
        // A TLS handshake counts as a request head: it has the head's timeout to finish.
        let first = if options.tls.is_some() { Phase::Head } else { Phase::Idle };
        let Some(lease) = admit(&registry, first, &mut cap_log).await else {
            if let Some(suppressed) = refuse_log.allow(Instant::now()) {
                tracing::warn!(cap, suppressed, "connection cap reached and every connection is busy: refusing");
            }
            continue; // dropping `stream` closes it
        };
        let tls = options.tls.as_ref().map(ServerTls::acceptor);
        tasks.spawn(conn::run(stream, tls, lease, router.clone(), timeouts, stop_rx.clone()));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    if let Some(reload) = reload {
        let _ = reload.await;
    }
    Ok(())
}

/// A slot for a new connection: a free one, or one an evicted connection gives up.
async fn admit(registry: &Arc<Registry>, first: Phase, cap_log: &mut Throttle) -> Option<registry::Lease> {
    let mut evicted = false;
    loop {
        let freed = registry.freed();
        if let Some(lease) = registry.register(first) {
            return Some(lease);
        }
        if !evicted {
            if !registry.evict_one() {
                return None;
            }
            evicted = true;
            if let Some(suppressed) = cap_log.allow(Instant::now()) {
                tracing::info!(
                    cap = registry.cap(),
                    active = registry.active(),
                    suppressed,
                    "connection cap reached: closing the longest-idle connection to admit a new one"
                );
            }
        }
        // The evicted connection closes as soon as its task runs.
        if tokio::time::timeout(Duration::from_millis(500), freed).await.is_err() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_10ms_to_1s_and_resets() {
        let mut b = Backoff::default();
        let ms: Vec<u128> = (0..9).map(|_| b.fail().as_millis()).collect();
        assert_eq!(ms, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.fail(), Duration::from_millis(10));
    }

    #[test]
    fn throttle_logs_once_per_interval_and_counts_the_rest() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Duration::from_secs(10));
        assert_eq!(t.allow(t0), Some(0));
        for s in 1..10 {
            assert_eq!(t.allow(t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(t.allow(t0 + Duration::from_secs(10)), Some(9));
        assert_eq!(t.allow(t0 + Duration::from_secs(11)), None);
    }

    #[test]
    fn the_derived_cap_is_the_limit_minus_the_reserve_within_bounds() {
        let o = ListenerOptions { fd_reserve: 300, ..ListenerOptions::default() };
        assert_eq!(o.cap(Some(20_000)), 19_700);
        assert_eq!(o.cap(Some(256)), DERIVED_CAP_MIN, "a tiny limit still admits a few");
        assert_eq!(o.cap(Some(1 << 20)), DERIVED_CAP_MAX);
        assert_eq!(o.cap(None), DERIVED_CAP_MAX);
        let explicit = ListenerOptions { max_connections: 64, ..o };
        assert_eq!(explicit.cap(Some(20_000)), 64);
    }

    #[test]
    fn raising_the_open_file_limit_reaches_the_hard_limit() {
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        let now = raise_open_file_limit();
        assert_eq!(rustix::process::getrlimit(rustix::process::Resource::Nofile).current, now);
        if let Some(hard) = hard {
            assert_eq!(now, Some(hard));
        }
    }
}
