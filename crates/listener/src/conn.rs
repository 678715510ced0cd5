//! One HTTP/1 connection: hyper serves it; a watchdog in the same task closes it when it
//! idles too long, takes too long to send a request head, or was evicted by the cap; the
//! request body is wrapped so a body that stops arriving answers 408 and closes. With TLS the
//! handshake comes first and counts as a request head: it has the header-read timeout to
//! finish, and a connection still in it may be evicted.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use axum::response::IntoResponse;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::registry::{Lease, Phase};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The largest request head (request line and headers) read; a bigger one gets `431`.
/// ARM's own front end allows about as much; hyper's default (~400 KB) invites abuse.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

#[derive(Clone, Copy, Debug)]
pub(super) struct Timeouts {
    pub header: Duration,
    pub body: Duration,
    pub idle: Duration,
}

/// What one connection shares between its socket, its service and its watchdog.
struct Shared {
    lease: Lease,
    /// A request head was parsed on this connection (hyper then treats it as keep-alive
    /// idle between requests, and closes it itself on a graceful shutdown).
    served: AtomicBool,
    /// The current request's body did not arrive in time.
    body_timed_out: AtomicBool,
}

/// Serves `stream` (over TLS when `tls` is given) until it closes, a timeout or an eviction
/// closes it, or `stop` is set (then: closed at once unless a request is in flight, which
/// finishes first).
pub(super) async fn run(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    lease: Lease,
    router: Router,
    timeouts: Timeouts,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok();
    let shared = Arc::new(Shared { lease, served: AtomicBool::new(false), body_timed_out: AtomicBool::new(false) });
    let Some(acceptor) = tls else {
        return serve(stream, shared, router, timeouts, peer, stop).await;
    };
    let stream = tokio::select! {
        done = acceptor.accept(stream) => match done {
            Ok(stream) => stream,
            Err(e) => {
                // A scanner, a plain-HTTP client, a client certificate that does not verify.
                tracing::debug!(error = %e, ?peer, "TLS handshake failed");
                return;
            }
        },
        why = watchdog(&shared, &timeouts) => {
            tracing::debug!(reason = why, ?peer, "closing connection during the TLS handshake");
            return;
        }
        _ = stop.wait_for(|s| *s) => return,
    };
    shared.lease.enter(Phase::Idle, &[Phase::Head]);
    serve(stream, shared, router, timeouts, peer, stop).await;
}

async fn serve<I>(
    io: I,
    shared: Arc<Shared>,
    router: Router,
    timeouts: Timeouts,
    peer: Option<std::net::SocketAddr>,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(Watched { io, shared: shared.clone() });
    let service = Service { router, shared: shared.clone(), body_timeout: timeouts.body, peer };
    let conn = hyper::server::conn::http1::Builder::new().max_header_size(MAX_HEAD_BYTES).serve_connection(io, service);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            why = watchdog(&shared, &timeouts) => {
                tracing::debug!(reason = why, "closing connection");
                return;
            }
            _ = stop.wait_for(|s| *s), if !draining => {
                let phase = shared.lease.snapshot().phase;
                if phase != Phase::Busy && !shared.served.load(Ordering::Acquire) {
                    return; // never got a request: hyper would wait for one
                }
                conn.as_mut().graceful_shutdown();
                draining = true;
            }
        }
    }
}

/// Resolves with the reason when the connection must be closed now.
async fn watchdog(shared: &Shared, t: &Timeouts) -> &'static str {
    loop {
        let changed = shared.lease.changed();
        let s = shared.lease.snapshot();
        if s.evicted {
            return "evicted to admit a new connection at the cap";
        }
        let (limit, reason) = match s.phase {
            Phase::Idle => (t.idle, "idle timeout"),
            Phase::Head => (t.header, "request head timeout"),
            Phase::Busy => {
                changed.await;
                continue;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep_until(s.since + limit) => {
                if shared.lease.unchanged(&s) {
                    return reason;
                }
            }
            _ = changed => {}
        }
    }
}

/// The socket (or the TLS stream over it), noting the first byte of each request head.
struct Watched<I> {
    io: I,
    shared: Arc<Shared>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            this.shared.lease.enter(Phase::Head, &[Phase::Idle]);
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The router behind hyper: marks the request in flight, times its body, and turns a body
/// timeout into a 408 that closes the connection.
#[derive(Clone)]
struct Service {
    router: Router,
    shared: Arc<Shared>,
    body_timeout: Duration,
    peer: Option<std::net::SocketAddr>,
}

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let shared = self.shared.clone();
        shared.lease.enter(Phase::Busy, &[Phase::Idle, Phase::Head]);
        shared.served.store(true, Ordering::Release);
        shared.body_timed_out.store(false, Ordering::Release);
        let deadline = Instant::now() + self.body_timeout;
        let mut req =
            req.map(|inner| axum::body::Body::new(Timed { inner, deadline, sleep: None, shared: shared.clone() }));
        if let Some(addr) = self.peer {
            req.extensions_mut().insert(crate::PeerAddr(addr));
        }
        let router = self.router.clone();
        let secs = self.body_timeout.as_secs_f64();
        Box::pin(async move {
            let Ok(mut resp) = router.oneshot(req).await;
            if shared.body_timed_out.load(Ordering::Acquire) {
                resp = body_timeout_response(secs);
            }
            Ok(resp.map(|inner| Tracked { inner, shared }))
        })
    }
}

/// `408 RequestTimeout` with ARM's error body (the listener knows no more of ARM than this
/// shape); `Connection: close` makes hyper close after it.
fn body_timeout_response(secs: f64) -> axum::response::Response {
    let message = format!("The request body was not received within {secs} seconds.");
    let body = serde_json::json!({ "error": { "code": "RequestTimeout", "message": message } });
    let mut resp = (StatusCode::REQUEST_TIMEOUT, axum::Json(body)).into_response();
    let headers = resp.headers_mut();
    headers.insert("x-ms-error-code", HeaderValue::from_static("RequestTimeout"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// A request body that fails once its deadline passes without it having arrived.
struct Timed {
    inner: Incoming,
    deadline: Instant,
    /// Created on the first wait, so bodies read at once (or never) cost no timer.
    sleep: Option<Pin<Box<Sleep>>>,
    shared: Arc<Shared>,
}

#[derive(Debug, thiserror::Error)]
#[error("request body timeout")]
struct BodyTimeout;

impl Body for Timed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(BoxError::from)));
        }
        let deadline = this.deadline;
        let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        ready!(sleep.as_mut().poll(cx));
        this.shared.body_timed_out.store(true, Ordering::Release);
        Poll::Ready(Some(Err(BodyTimeout.into())))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body; when hyper is done with it the request is over and the connection
/// idles (so the idle timeout also bounds a client that stops reading its response).
struct Tracked {
    inner: axum::body::Body,
    shared: Arc<Shared>,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.shared.lease.enter(Phase::Idle, &[Phase::Busy]);
    }
}
