//! The HTTP layer: one `reqwest` client per provider, a concurrency limit around every
//! request, a provider-wide throttle gate, retries with backoff for idempotent requests, and
//! error classification that keeps "certainly not sent" apart from "may have reached AAP".
//!
//! The gate: a `429` with `Retry-After` (or a `503` with one, a gateway in maintenance) is an
//! answer to the client, not to the one request: AAP's gateway rate-limits per client, and a
//! client that keeps sending other requests before the advertised time ignores it. So the
//! advertised time closes the gate of the whole provider instance, and no request of it is
//! sent before then: a request waits at the gate (at most `max_wait` in all), or, when it
//! cannot wait that long, fails as [`HttpError::Throttled`] (`RateLimited`) without being
//! sent. The launch POST never waits (see [`Http::send_now`]).
//!
//! Nothing here logs or formats a credential: the `Authorization` header is built once
//! (marked sensitive, so `reqwest` never prints it) and every text that goes into an error
//! is scrubbed of the configured secret values (defence against servers or proxies that
//! echo request headers).
//!
//! Parts: `error` (what a request's failure is, and how it is classified), `gate` (the
//! throttle gate and `Retry-After`), `pages` (walking AWX's paged lists).

mod error;
mod gate;
mod pages;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;
use slipway_domain::retry::{JitterSource, RetryPolicy, SplitMix64};
use slipway_domain::time::{Clock, SystemClock};
use tokio::time::Instant;

pub use error::HttpError;
use error::is_retryable_status;
use gate::{AtGate, closes_gate, parse_retry_after};

/// Longest piece of a response body quoted in an error.
pub const MAX_BODY_PREVIEW: usize = 500;
/// The wait reported for a 429 that carries no usable `Retry-After`.
pub const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(5);

/// A complete answer.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub retry_after: Option<Duration>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json<T: serde::de::DeserializeOwned>(&self, what: &str) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| HttpError::BadBody(format!("{what}: the response is not the JSON expected: {e}")))
    }
}

/// How requests are made; see [`Http::new`].
pub struct HttpSettings {
    pub client: reqwest::Client,
    /// `base_url` + `api_prefix`, ending in `/` (e.g. `https://aap/api/controller/`).
    pub root: Url,
    pub authorization: Option<HeaderValue>,
    /// Texts never to show in a message (token, password, the encoded Basic credentials).
    pub scrub: Vec<String>,
    pub max_concurrent: usize,
    pub retries: u32,
    /// The first retry's wait; it doubles per retry.
    pub backoff: Duration,
    /// The longest wait between two tries; a `Retry-After` beyond it is not waited for
    /// in-process but reported (as `RateLimited`) for the engine to schedule.
    pub max_wait: Duration,
    pub timeout: Duration,
    /// Seeds the retry jitter: the client id, so Slipway nodes sharing one AAP do not retry
    /// in step, and one node's delays repeat from run to run.
    pub jitter_seed: String,
}

pub struct Http {
    s: HttpSettings,
    permits: tokio::sync::Semaphore,
    /// Provider-wide "send nothing before": the latest time a `Retry-After` advertised (on
    /// tokio's clock, which tests can pause).
    gate: Mutex<Option<Instant>>,
    /// Wall-clock time, for HTTP-date `Retry-After`s ([`Http::with_clock`]).
    clock: Arc<dyn Clock>,
    /// Draws for the retry jitter ([`backoff`]): deterministic per instance, never a clock.
    jitter: Mutex<SplitMix64>,
    /// The provider's name (the metrics' `provider` label) and where requests are counted.
    provider: String,
    metrics: slipway_metrics::ProviderMetrics,
}

impl Http {
    pub fn new(settings: HttpSettings) -> Self {
        let permits = tokio::sync::Semaphore::new(settings.max_concurrent.max(1));
        let jitter = Mutex::new(SplitMix64::from_name(&settings.jitter_seed));
        Http {
            s: settings,
            permits,
            gate: Mutex::new(None),
            clock: Arc::new(SystemClock),
            jitter,
            provider: String::new(),
            metrics: Default::default(),
        }
    }

    /// Counts requests (latency by endpoint and status) and `Retry-After` waits into `metrics`
    /// under the provider's name.
    pub fn with_metrics(self, provider: &str, metrics: slipway_metrics::ProviderMetrics) -> Self {
        Http { provider: provider.to_string(), metrics, ..self }
    }

    /// The request's path under the API root with numeric ids as `{id}`: a label of bounded
    /// cardinality (`v2/job_templates/{id}/launch/`).
    fn endpoint(&self, url: &Url) -> String {
        let path = url.path().strip_prefix(self.s.root.path()).unwrap_or(url.path());
        let segments: Vec<&str> = path
            .split('/')
            .map(|s| if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) { "{id}" } else { s })
            .collect();
        segments.join("/")
    }

    fn count(&self, method: &Method, url: &Url, status: Option<u16>, started: Instant) {
        let labels = slipway_metrics::ProviderRequestLabels {
            provider: self.provider.clone(),
            endpoint: self.endpoint(url),
            method: method.to_string(),
            status: status.map_or_else(|| "error".to_string(), |s| s.to_string()),
        };
        self.metrics.requests.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
    }

    /// Reads wall-clock time (the `now` an HTTP-date `Retry-After` is relative to) from
    /// `clock` instead of the system clock.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Http { clock, ..self }
    }

    /// The wall-clock time now, as [`parse_retry_after`] takes it.
    fn wall_now(&self) -> SystemTime {
        let ms = self.clock.now().as_millis();
        UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    fn jitter_draw(&self) -> u64 {
        self.jitter.lock().unwrap_or_else(|e| e.into_inner()).draw()
    }

    /// An API URL from a path relative to the API root (`v2/jobs/`).
    pub fn url(&self, path: &str) -> Url {
        // The root is a valid base and `path` a relative reference built by this crate.
        self.s.root.join(path).unwrap_or_else(|_| self.s.root.clone())
    }

    /// The path (without query) shown in messages: stable across calls, no secrets.
    pub fn what(method: &Method, url: &Url) -> String {
        format!("AAP {method} {}", url.path())
    }

    /// Replaces every configured secret in `text` with `***`.
    pub fn scrub(&self, text: &str) -> String {
        scrub(text, &self.s.scrub)
    }

    /// One request, no retry, sent once the throttle gate is open (waiting at most `max_wait`
    /// for it). Any status is a `Reply`; only transport failures and the gate are errors.
    pub async fn send(&self, method: Method, url: &Url, body: Option<&Value>) -> Result<Reply, HttpError> {
        self.send_at_gate(method, url, body, AtGate::Wait).await
    }

    /// [`Http::send`] that never waits at the gate: while it is closed the request is refused
    /// (`Throttled`) without being sent. For the launch, which the engine makes right after
    /// checking its lease: waiting here would send it later than that check vouches for.
    pub async fn send_now(&self, method: Method, url: &Url, body: Option<&Value>) -> Result<Reply, HttpError> {
        self.send_at_gate(method, url, body, AtGate::Refuse).await
    }

    async fn send_at_gate(
        &self,
        method: Method,
        url: &Url,
        body: Option<&Value>,
        mode: AtGate,
    ) -> Result<Reply, HttpError> {
        let what = Self::what(&method, url);
        let _permit = self.pass_gate(&what, mode).await?;
        let started = Instant::now();
        let mut req = self.s.client.request(method.clone(), url.clone()).header(ACCEPT, "application/json");
        if let Some(auth) = &self.s.authorization {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let sent = req.send().await;
        self.count(&method, url, sent.as_ref().ok().map(|r| r.status().as_u16()), started);
        let resp = sent.map_err(|e| self.transport_error(&what, e))?;
        let status = resp.status();
        let retry_after = resp.headers().get(RETRY_AFTER).and_then(|v| parse_retry_after(v, self.wall_now()));
        if let Some(wait) = closes_gate(status.as_u16(), retry_after) {
            // Before reading the body: every request from now on sees the gate closed.
            self.close_gate(&what, status.as_u16(), wait);
        }
        let body = resp.bytes().await.map_err(|e| {
            HttpError::Unknown(format!("{what}: the answer ({status}) broke off: {}", self.scrub(&chain(&e))))
        })?;
        Ok(Reply { status, retry_after, body: body.to_vec() })
    }

    fn transport_error(&self, what: &str, e: reqwest::Error) -> HttpError {
        let detail = self.scrub(&chain(&e));
        if e.is_builder() {
            HttpError::Invalid(format!("{what}: invalid request: {detail}"))
        } else if e.is_connect() {
            // Connection refused, DNS and TLS handshake failures (and connect timeouts)
            // happen before a byte of the request is written.
            HttpError::NotSent(format!("{what}: cannot connect to AAP: {detail}"))
        } else if e.is_timeout() {
            HttpError::Unknown(format!("{what}: no answer within {:?}", self.s.timeout))
        } else {
            HttpError::Unknown(format!("{what}: {detail}"))
        }
    }

    /// The error for a non-success reply.
    pub fn status_error(&self, what: &str, reply: &Reply) -> HttpError {
        let text = self.scrub(&String::from_utf8_lossy(&reply.body));
        let preview = preview(&text);
        let status = reply.status;
        let message =
            if preview.is_empty() { format!("{what}: {status}") } else { format!("{what}: {status}: {preview}") };
        HttpError::Status { status: status.as_u16(), retry_after: reply.retry_after, message }
    }

    /// An idempotent request, retried on 429/502/503/504 and transport errors with
    /// exponential backoff, never sooner than a `Retry-After` asks (the gate holds every try).
    /// Answers any reply that is not retryable (success or not); the last retryable failure
    /// is an error.
    pub async fn send_idempotent(&self, method: Method, url: &Url, body: Option<&Value>) -> Result<Reply, HttpError> {
        let what = Self::what(&method, url);
        let mut attempt = 0u32;
        loop {
            let err = match self.send(method.clone(), url, body).await {
                Ok(reply) if !is_retryable_status(reply.status.as_u16()) => return Ok(reply),
                Ok(reply) => self.status_error(&what, &reply),
                Err(e) => e,
            };
            if !err.retryable() || attempt >= self.s.retries {
                return Err(err);
            }
            let advertised = err.retry_after().unwrap_or_default();
            if advertised > self.s.max_wait {
                return Err(err);
            }
            let wait = backoff(self.s.backoff, attempt, self.s.max_wait, self.jitter_draw()).max(advertised);
            tracing::debug!(request = %what, attempt, wait_ms = wait.as_millis() as u64, error = %err.message(), "retrying AAP request");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// `GET` a JSON document (with retries); a non-2xx reply is an error.
    pub async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &Url) -> Result<T, HttpError> {
        let what = Self::what(&Method::GET, url);
        let reply = self.send_idempotent(Method::GET, url, None).await?;
        if !reply.status.is_success() {
            return Err(self.status_error(&what, &reply));
        }
        reply.json(&what)
    }
}

/// Up to this fraction of a GET retry's wait is added as jitter.
const RETRY_JITTER: f64 = 0.25;

/// `base · 2^attempt` (the exponent at most 16, as always), capped, plus up to 25% jitter
/// read from `draw` (still capped): [`RetryPolicy::exponential`] with jitter.
fn backoff(base: Duration, attempt: u32, cap: Duration, draw: u64) -> Duration {
    let policy = RetryPolicy::exponential(base, cap).with_jitter(RETRY_JITTER);
    policy.jittered(policy.delay(attempt.min(16) + 1), draw)
}

/// An error and its sources, `: `-joined (reqwest's own text is "error sending request").
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| s.len() >= 3) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

/// A response body as one line of at most [`MAX_BODY_PREVIEW`] characters.
pub fn preview(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    bound(one_line, MAX_BODY_PREVIEW)
}

/// Truncates to `max` characters on a character boundary, marking the cut with `…`.
pub fn bound(s: String, max: usize) -> String {
    if s.chars().count() <= max {
        return s;
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
