//! The running simulator: the HTTP server, the lifecycle ticker, and the handle tests use.
//!
//! Dropped connections: hyper offers no "close without answering" from a handler, so every
//! accepted TCP stream is wrapped in [`KillableStream`] and its kill switch is handed to the
//! handler as connection info. A handler that wants the client to see a dropped connection
//! flips the switch; hyper's next read or write on the stream then fails, so it closes the
//! socket without a single response byte.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

use axum::Router;
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::api;
use crate::awx::Status;
use crate::config::{Faults, SimConfig};
use crate::lifecycle::SimJob;
use crate::shared::{ConnCtl, Shared};
use crate::state::State;
use crate::throttle::{FaultCounts, Violation};
use crate::webhook::Notifier;

/// See [`SimHandle::job_times`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobTimes {
    pub id: u64,
    pub resource_name: Option<String>,
    pub created_micros: i64,
    pub finished_micros: Option<i64>,
}

pub(crate) struct KillableStream {
    inner: TcpStream,
    ctl: ConnCtl,
}

fn aborted() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "aap-sim: connection dropped by fault injection")
}

impl AsyncRead for KillableStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.ctl.killed() {
            return Poll::Ready(Err(aborted()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.ctl.killed() {
            return Poll::Ready(Err(aborted()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.ctl.killed() {
            return Poll::Ready(Err(aborted()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

pub(crate) struct SimListener {
    inner: TcpListener,
}

impl axum::serve::Listener for SimListener {
    type Io = KillableStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    return (KillableStream { inner: stream, ctl: ConnCtl::default() }, addr);
                }
                // Per-connection errors (reset before accept) are routine; resource exhaustion
                // (EMFILE) needs a pause or the loop spins. Either way: keep accepting.
                Err(e) => {
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl Connected<IncomingStream<'_, SimListener>> for ConnCtl {
    fn connect_info(stream: IncomingStream<'_, SimListener>) -> Self {
        stream.io().ctl.clone()
    }
}

/// A running simulator. Dropping it without [`Sim::shutdown`] leaves the server running until
/// the runtime stops.
pub struct Sim {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<io::Result<()>>,
    ticker: JoinHandle<()>,
}

/// A cheap, cloneable view of a running (or stopped) simulator's state.
#[derive(Clone)]
pub struct SimHandle {
    shared: Arc<Shared>,
}

impl Sim {
    /// Binds `listen` (e.g. `127.0.0.1:0`) and starts serving on the current tokio runtime.
    pub async fn start(listen: &str, config: SimConfig) -> io::Result<Sim> {
        let config = config.validated().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let tick = Duration::from_millis(config.tick_ms);
        let notifier = Notifier::start(&config.notifications);
        let shared = Arc::new(Shared { state: Mutex::new(State::new(config, format!("http://{addr}"))), notifier });

        let ticker = {
            let shared = shared.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(tick);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    interval.tick().await;
                    let notices = shared.lock().tick(Instant::now());
                    shared.notifier.send(notices);
                }
            })
        };

        let app = Router::new().fallback(api::dispatch).with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            axum::serve(SimListener { inner: listener }, app.into_make_service_with_connect_info::<ConnCtl>())
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        tracing::info!(%addr, "aap-sim listening");
        Ok(Sim { addr, shared, stop: Some(stop), server, ticker })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT`, without the API prefix.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn handle(&self) -> SimHandle {
        SimHandle { shared: self.shared.clone() }
    }

    /// Stops accepting, lets in-flight requests finish (at most 5 s), stops the lifecycle and
    /// the webhook senders. Handles keep answering from the final state.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let abort = self.server.abort_handle();
        if tokio::time::timeout(Duration::from_secs(5), &mut self.server).await.is_err() {
            abort.abort();
        }
        self.ticker.abort();
        self.shared.notifier.shutdown();
    }
}

impl SimHandle {
    /// Replaces the fault settings; restarts the rate-limit count, the burst schedule and the
    /// seeded generator.
    pub fn set_faults(&self, f: Faults) {
        self.shared.lock().set_faults(f);
    }

    pub fn faults(&self) -> Faults {
        self.shared.lock().faults.clone()
    }

    /// Requests seen per `"METHOD /normalised/path/"` (ids as `{id}`), including requests a
    /// fault answered; admin endpoints are not counted.
    pub fn requests(&self) -> BTreeMap<String, u64> {
        self.shared.lock().requests.clone()
    }

    /// Clears the request counters ([`SimHandle::requests`], [`SimHandle::requests_by_client`])
    /// and the injected-fault counts; Retry-After blocks and violations stay.
    pub fn reset_requests(&self) {
        self.shared.lock().reset_counters();
    }

    /// API requests seen per client (`User-Agent`; empty when none was sent).
    pub fn requests_by_client(&self) -> BTreeMap<String, u64> {
        self.shared.lock().clients.requests()
    }

    /// Faults injected since the start (or the last [`SimHandle::reset_requests`]), by kind.
    pub fn injected(&self) -> FaultCounts {
        self.shared.lock().injected
    }

    /// Every request that arrived before the time a `429` (or a `503` with `Retry-After`) told
    /// its client to wait for, beyond the grace for requests already in flight
    /// ([`SimConfig::retry_after_grace_ms`]); the first 10 000.
    pub fn retry_after_violations(&self) -> Vec<Violation> {
        self.shared.lock().violations.clone()
    }

    /// Until when `client` was told to wait, if that is still in the future.
    pub fn blocked_until(&self, client: &str) -> Option<Instant> {
        self.shared.lock().clients.blocked_until(client, Instant::now())
    }

    /// Until when a request of `client` is still taken as one that was in flight when the
    /// latest `Retry-After` went out to it (that answer's time plus
    /// [`SimConfig::retry_after_grace_ms`]), while that wait lasts: a request arriving after
    /// this and before [`SimHandle::blocked_until`] is a violation.
    pub fn in_flight_until(&self, client: &str) -> Option<Instant> {
        let state = self.shared.lock();
        let grace = Duration::from_millis(state.config.retry_after_grace_ms);
        state.clients.in_flight_until(client, grace, Instant::now())
    }

    /// Every job and workflow job created and not purged, by id.
    pub fn jobs(&self) -> Vec<SimJob> {
        let state = self.shared.lock();
        state.jobs.values().map(|j| j.sim_job()).collect()
    }

    /// How many jobs exist (cheap; for benchmarks waiting for launches).
    pub fn job_count(&self) -> usize {
        self.shared.lock().jobs.len()
    }

    /// Every job's id, the `slipway.resource.name` it was launched for, and when it was created
    /// and finished (wall-clock microseconds): what benchmarks time launches and endings by.
    pub fn job_times(&self) -> Vec<JobTimes> {
        let state = self.shared.lock();
        state
            .jobs
            .values()
            .map(|j| JobTimes {
                id: j.id,
                resource_name: j
                    .extra_vars
                    .pointer("/slipway/resource/name")
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
                created_micros: j.created,
                finished_micros: j.finished,
            })
            .collect()
    }

    /// When each of `ids` finished (wall-clock microseconds), if it has.
    pub fn finished_micros(&self, ids: &[u64]) -> Vec<Option<i64>> {
        let state = self.shared.lock();
        ids.iter().map(|id| state.jobs.get(id).and_then(|j| j.finished)).collect()
    }

    pub fn job(&self, id: u64) -> Option<SimJob> {
        let state = self.shared.lock();
        state.jobs.get(&id).map(|j| j.sim_job())
    }

    /// Deletes a job: the API answers 404 for it from now on.
    pub fn purge_job(&self, id: u64) {
        self.shared.lock().jobs.remove(&id);
    }

    /// The resource state the simulated playbooks recorded for the resource `id` (compared
    /// case-insensitively): the JSON text a successful `run`-mode create job wrote.
    pub fn resource_state(&self, id: &str) -> Option<String> {
        self.shared.lock().resources.get(id).map(str::to_owned)
    }

    /// Every recorded resource state, by resource id.
    pub fn resource_states(&self) -> BTreeMap<String, String> {
        self.shared.lock().resources.all()
    }

    /// Overwrites (`Some`) or removes (`None`, or an empty text) the recorded state of the
    /// resource `id`, behind the back of whoever launched the jobs (drift). [`crate::state_text`]
    /// writes a state as the playbooks do.
    pub fn set_resource_state(&self, id: &str, text: Option<String>) {
        let mut state = self.shared.lock();
        match text {
            Some(text) => state.resources.set(id, text),
            None => {
                state.resources.remove(id);
            }
        }
    }

    /// Forces a status (any AWX job status). The lifecycle stops driving the job (a pending
    /// cancel still applies); entering `running` or a terminal status sends the notifications
    /// AWX would. An unknown status or job is ignored (and logged).
    pub fn set_job_status(&self, id: u64, status: &str) {
        let Some(status) = Status::parse(status) else {
            tracing::warn!(status, "set_job_status: unknown status ignored");
            return;
        };
        let notices = self.shared.lock().force_status(id, status);
        self.shared.notifier.send(notices);
    }
}
