//! The ARM HTTP front end (axum handlers) and its OpenAPI document. It never drives a
//! provider: it records intent in the store (one transaction per request), wakes the engine,
//! and answers; what it reads through a provider about a job (its output, its link) goes
//! through [`JobReader`]. The listener it is served on (`slipway-listener`), the notifier that
//! sends its status documents (`slipway-notify`) and the type registry (`slipway-types`) are
//! crates of their own.
//!
//! Modules: `route` (ARM paths), `edge` (who is calling, which headers to believe), `access`
//! (authorization), `ratelimit`, `handlers`, `request` and `wire` (bodies in and out), `error`,
//! `preconditions` (etags), `limits`, `hooks` (provider webhooks), `metrics` and `openapi`.
//! The middleware here writes one access-log line per request on `slipway::access` and counts
//! it under its route template (`route::metric_template`: configured types only, never ids,
//! so a client cannot invent label values).

mod access;
mod activity;
mod edge;
mod error;
mod handlers;
mod hooks;
mod limits;
mod metrics;
mod openapi;
mod preconditions;
mod ratelimit;
mod request;
mod route;
mod wire;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, Request, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use slipway_domain::readiness::Readiness;
use slipway_domain::time::Clock;
use slipway_domain::{JobId, ProviderName};
use slipway_listener::PeerAddr;
use slipway_notify::CallbackPolicy;
use slipway_store::Store;
use slipway_types::TypeRegistry;

pub use access::{AccessOptions, AssignmentCache, report_noncanonical_assignments};
pub use activity::{ActivityRecorder, event_data as activity_event_data};
pub use edge::EdgeOptions;
pub use error::ArmError;
pub use handlers::policy::{PlatformDefinition, PolicyCatalog};
pub use metrics::MetricsAccess;
pub use openapi::OpenApiCache;
pub use ratelimit::{RateLimiter, RateLimits};
pub use slipway_auth::Authenticator;
pub use wire::operation_status_document;

#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// The RP location used in operation URLs.
    pub location: String,
    /// `Retry-After` on accepted long-running operations, in seconds.
    pub retry_after_secs: u64,
    pub max_body_bytes: usize,
    /// Default page size of collection GETs.
    pub page_size: usize,
    /// How long the store keeps events (said when a cursor is too old).
    pub event_retention_secs: u64,
    /// Which `Azure-AsyncNotificationUri` callbacks a request may name (the notifier sends
    /// by the same policy).
    pub callbacks: CallbackPolicy,
    /// Who may scrape `/metrics`.
    pub metrics_access: MetricsAccess,
    /// Whether a resource's create makes its group when it has none.
    pub resource_groups: GroupCreation,
}

/// What a resource's create does when its group does not exist.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GroupCreation {
    /// Makes the group, in the resource's location: the walkthrough's `PUT` needs no
    /// group `PUT` first.
    #[default]
    Implicit,
    /// ARM's rule: `404 ResourceGroupNotFound`; groups are made by their own `PUT`.
    Explicit,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            location: "local".into(),
            retry_after_secs: 1,
            max_body_bytes: 1024 * 1024,
            page_size: 100,
            event_retention_secs: slipway_store::DEFAULT_EVENT_RETENTION.as_secs(),
            callbacks: CallbackPolicy::default(),
            metrics_access: MetricsAccess::default(),
            resource_groups: GroupCreation::default(),
        }
    }
}

/// A job as its provider knows it: what reading its output needs.
#[derive(Clone, Debug)]
pub struct JobRef {
    pub provider: ProviderName,
    pub job_id: JobId,
    /// The provider's handle data, as stored with the job.
    pub handle: serde_json::Value,
}

impl JobRef {
    /// The job's reference at its provider; none before the provider confirmed a job.
    pub fn of(job: &slipway_domain::Job) -> Option<JobRef> {
        Some(JobRef { provider: job.provider.clone(), job_id: job.job_id.clone()?, handle: job.handle.clone() })
    }
}

/// A piece of a job's output, from the offset asked for to `next_offset`.
#[derive(Clone, Debug, Default)]
pub struct OutputChunk {
    pub text: String,
    pub next_offset: u64,
}

#[derive(Clone, Debug)]
pub enum OutputError {
    /// The provider no longer has it (retention, a purged controller job).
    Gone,
    /// Not readable now; the provider's words, for the server's log only.
    Unavailable(String),
}

/// What the API may ask the providers about a job — its output (`GET …/logs`) and where the
/// backend shows it (the job history's `link`) — and nothing else: the one way the API
/// reaches a provider. Implemented over the providers by the binary.
#[async_trait::async_trait]
pub trait JobReader: Send + Sync {
    /// The job's output from byte `offset` on.
    async fn output(&self, job: &JobRef, offset: u64) -> Result<OutputChunk, OutputError>;

    /// The job's page in its backend's own interface (an AAP controller's job output), if it
    /// has one.
    fn link(&self, job: &JobRef) -> Option<String>;
}

/// `(provider, webhook body) -> whether a worker follows the job it names`, or why the body
/// is not a notification of that provider. Only the provider knows its notifications' shape.
pub type JobNotified = Arc<dyn Fn(&str, &[u8]) -> Result<bool, String> + Send + Sync>;

pub struct ApiState {
    pub store: Arc<dyn Store>,
    pub types: TypeRegistry,
    /// The quota meters every write of their types is charged against.
    pub quotas: Arc<slipway_domain::quota::QuotaBook>,
    /// The admission policies' aliases and platform definitions.
    pub policies: Arc<PolicyCatalog>,
    pub clock: Arc<dyn Clock>,
    pub options: ApiOptions,
    /// Called after a request's change committed (wakes the engine).
    pub on_accept: Arc<dyn Fn() + Send + Sync>,
    /// Push-hint webhooks by provider name: the shared token a caller must present.
    pub hooks: std::collections::HashMap<String, String>,
    /// Called with (provider, body) for an authenticated webhook POST.
    pub on_job_notification: JobNotified,
    /// `None`: authentication is off (the server then listens on loopback only).
    pub auth: Option<Arc<Authenticator>>,
    pub edge: EdgeOptions,
    pub access: AccessOptions,
    /// The role assignments authorization read last, per partition.
    pub assignment_cache: AssignmentCache,
    /// `None`: no limits (the local mode).
    pub rate_limits: Option<RateLimiter>,
    /// Seals secret properties (`None`: no `[secrets]` configured, and no type has any).
    pub secrets: Option<Arc<slipway_secrets::Keyring>>,
    /// What `/metrics` exports; the API counts its requests into `metrics.http`.
    pub metrics: slipway_metrics::Metrics,
    /// Reads a job's output and link from its provider.
    pub jobs: Arc<dyn JobReader>,
    /// Each provider's last readiness check, by name.
    pub provider_readiness: Arc<dyn Fn() -> Vec<(ProviderName, Readiness)> + Send + Sync>,
    /// `/openapi.json`, built once.
    pub openapi: OpenApiCache,
    /// Writes the activity-log entries of requests whose change did not (refusals).
    pub activity: ActivityRecorder,
    /// Turns true when the server stops: answers that stream (following a job's output)
    /// end then, so shutdown does not wait for a job to finish.
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

pub fn router(state: Arc<ApiState>) -> Router {
    // Health probes are never limited: a load balancer probing from one address must not be
    // starved by a client behind the same address, and they cost at most a store ping.
    let unauthenticated = Router::new()
        .route("/openapi.json", get(openapi::serve))
        .route("/metrics", get(metrics::serve))
        .route("/hooks/{provider}", axum::routing::post(hooks::job_notification))
        .route_layer(middleware::from_fn_with_state(state.clone(), per_address));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(unauthenticated)
        .fallback(|State(state): State<Arc<ApiState>>, req: Request<Body>| handlers::handle(state, req))
        .layer(middleware::from_fn_with_state(state.clone(), correlation))
        .with_state(state)
}

/// `503` when the store cannot take work; otherwise `200`, with each provider's last
/// readiness check in the body. A provider that is not ready does not make the replica
/// unready: every replica shares it, and taking them all out of service would stop reads
/// and status polls too (alert on `slipway_provider_ready` instead). Why a provider is not
/// ready is in the server's log, not in this unauthenticated answer.
async fn readyz(State(state): State<Arc<ApiState>>) -> Response {
    if let Err(e) = state.store.ping().await {
        return ArmError::unavailable(format!("store: {e}")).into_response();
    }
    let mut body = String::from("ready\n");
    for (name, ready) in (state.provider_readiness)() {
        let word = match ready {
            Readiness::Unknown => "not checked yet",
            Readiness::Ready => "ready",
            Readiness::NotReady(_) => "not ready (see the server log)",
        };
        body.push_str(&format!("provider {name}: {word}\n"));
    }
    (StatusCode::OK, body).into_response()
}

/// The per-address limit on the endpoints that need no credential: an address out of tokens
/// gets `429`; each request takes one, except a webhook the controller authenticated (a busy
/// controller sends many, and they carry their own token).
async fn per_address(State(state): State<Arc<ApiState>>, req: Request<Body>, next: Next) -> Response {
    let Some(limiter) = &state.rate_limits else { return next.run(req).await };
    let peer = req.extensions().get::<PeerAddr>().map(|p| p.0.ip());
    let client = edge::client_addr(&state.edge, req.headers(), peer);
    if let Err(e) = limiter.check_address(client, state.clock.now(), false) {
        return e.into_response();
    }
    let always = !req.uri().path().starts_with("/hooks/");
    let resp = next.run(req).await;
    if always || resp.status() == StatusCode::UNAUTHORIZED {
        let _ = limiter.check_address(client, state.clock.now(), true);
    }
    resp
}

/// This request's `x-ms-request-id`, for the handlers' audit events.
#[derive(Clone, Debug)]
pub(crate) struct RequestId(pub String);

/// Who a request was authenticated as, for the access log (set by the handlers).
#[derive(Clone, Debug)]
pub(crate) struct AccessPrincipal(pub String);

/// ARM's correlation header: the client's, or one made up for it.
const CORRELATION_HEADER: &str = "x-ms-correlation-request-id";

/// `x-ms-request-id` on every response; the correlation id (the client's, else a new one)
/// and the client request id echoed; one access-log line per request (`slipway::access`:
/// method, route template, status, duration, request id, correlation id, principal), and the
/// request counted in the metrics.
async fn correlation(State(state): State<Arc<ApiState>>, mut req: Request<Body>, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = req.method().clone();
    let route = route::template(req.uri().path());
    let metric_route = route::metric_template(req.uri().path(), &state.types);
    let request_id = uuid::Uuid::new_v4().to_string();
    // A request without a correlation id gets one, as ARM gives it: the operation it starts
    // records it (`Initiator`) and the access log and the answer carry it.
    if !req.headers().contains_key(CORRELATION_HEADER) {
        let generated = uuid::Uuid::new_v4().to_string();
        req.headers_mut()
            .insert(CORRELATION_HEADER, HeaderValue::from_str(&generated).expect("a UUID is a header value"));
    }
    let echo: Vec<(&'static str, HeaderValue)> = [CORRELATION_HEADER, "x-ms-client-request-id"]
        .into_iter()
        .filter_map(|h| req.headers().get(h).map(|v| (h, v.clone())))
        .collect();
    let correlation_id = echo.first().and_then(|(_, v)| v.to_str().ok()).unwrap_or_default().to_string();
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let mut resp = next.run(req).await;
    let headers = resp.headers_mut();
    if let Ok(id) = HeaderValue::from_str(&request_id) {
        headers.insert("x-ms-request-id", id);
    }
    for (name, value) in echo {
        headers.insert(name, value);
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Only the methods ARM uses become label values: a client cannot invent new ones.
    let known = ["GET", "PUT", "PATCH", "DELETE", "POST", "HEAD", "OPTIONS"].contains(&method.as_str());
    let metric_method = if known { method.as_str() } else { "other" };
    state.metrics.http.observe(&metric_route, metric_method, resp.status().as_u16(), elapsed);
    let principal = resp.extensions().get::<AccessPrincipal>().map(|p| p.0.as_str()).unwrap_or("-");
    tracing::info!(target: "slipway::access", method = %method, route = %route, status = resp.status().as_u16(),
        duration_ms = elapsed * 1000.0, request_id = %request_id, correlation_id = %correlation_id,
        principal = %principal, "request");
    resp
}
