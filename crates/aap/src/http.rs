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

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;
use slipway_domain::retry::{JitterSource, RetryPolicy, SplitMix64};
use slipway_domain::time::{Clock, SystemClock};
use slipway_provider::ProviderError;
use tokio::time::Instant;

/// Longest piece of a response body quoted in an error.
pub const MAX_BODY_PREVIEW: usize = 500;
/// The wait reported for a 429 that carries no usable `Retry-After`.
pub const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(5);
/// Longest a `Retry-After` closes the throttle gate (a guard against absurd values).
const MAX_GATE: Duration = Duration::from_secs(24 * 3600);
/// Pages followed in one listing at most (200 rows each): a guard against `next` loops.
const MAX_PAGES: usize = 10_000;

/// What went wrong with one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// AAP (or a proxy/gateway in front of it) answered with a non-success status.
    Status { status: u16, retry_after: Option<Duration>, message: String },
    /// The request was certainly not sent: connection refused, DNS or TLS handshake failure.
    NotSent(String),
    /// The request may have reached AAP but no complete answer came back (timeout, reset).
    Unknown(String),
    /// A success status with a body that is not what the API documents.
    BadBody(String),
    /// A request that cannot be made (bad URL, a `next` link to another host).
    Invalid(String),
    /// Certainly not sent: AAP asked this provider to wait (`Retry-After`) for `retry_after`
    /// more, longer than the request may wait.
    Throttled { retry_after: Duration, message: String },
}

impl HttpError {
    pub fn message(&self) -> &str {
        match self {
            HttpError::Status { message, .. }
            | HttpError::NotSent(message)
            | HttpError::Unknown(message)
            | HttpError::BadBody(message)
            | HttpError::Invalid(message)
            | HttpError::Throttled { message, .. } => message,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether an idempotent request may be repeated after this.
    fn retryable(&self) -> bool {
        match self {
            HttpError::Status { status, .. } => is_retryable_status(*status),
            HttpError::NotSent(_) | HttpError::Unknown(_) => true,
            // Already longer than any in-process wait.
            HttpError::BadBody(_) | HttpError::Invalid(_) | HttpError::Throttled { .. } => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            HttpError::Status { retry_after, .. } => *retry_after,
            HttpError::Throttled { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The provider error for a failed idempotent request (lookups, lists, cancel): a
    /// request that can simply be made again, so nothing is ever `Indeterminate`.
    pub fn into_provider(self) -> ProviderError {
        match self {
            HttpError::Status { status: 429, retry_after, message } => {
                ProviderError::RateLimited { retry_after: retry_after.unwrap_or(DEFAULT_RATE_LIMIT_WAIT), message }
            }
            HttpError::Status { status, message, .. } if status >= 500 || status == 408 => {
                ProviderError::Transient(message)
            }
            HttpError::Status { message, .. } => ProviderError::Permanent(message),
            HttpError::NotSent(m) | HttpError::Unknown(m) | HttpError::BadBody(m) => ProviderError::Transient(m),
            HttpError::Invalid(m) => ProviderError::Permanent(m),
            HttpError::Throttled { retry_after, message } => ProviderError::RateLimited { retry_after, message },
        }
    }
}

/// Whether an answer advertises a time before which this client must send nothing more:
/// a `429`, or a `503` with `Retry-After` (a gateway in maintenance), with a `Retry-After`.
pub fn closes_gate(status: u16, retry_after: Option<Duration>) -> Option<Duration> {
    retry_after.filter(|_| matches!(status, 429 | 503))
}

/// Statuses worth retrying an idempotent request on: rate limiting and the gateway errors
/// a proxy in front of AAP produces while it (re)starts.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

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

/// How a request treats a closed throttle gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AtGate {
    /// Waits for it to open, at most `max_wait` in all.
    Wait,
    /// Fails at once (`Throttled`).
    Refuse,
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

    /// How long the throttle gate stays closed from now; `None` when open.
    pub fn throttled_for(&self) -> Option<Duration> {
        let until = (*self.gate.lock().unwrap_or_else(|e| e.into_inner()))?;
        let left = until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// Closes the gate until `now + retry_after` (never shortens it; a day at most).
    fn close_gate(&self, what: &str, status: u16, retry_after: Duration) {
        let now = Instant::now();
        let until = now.checked_add(retry_after.min(MAX_GATE)).unwrap_or(now);
        let mut gate = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        if gate.is_none_or(|g| g < until) {
            let was_open = gate.is_none_or(|g| g <= Instant::now());
            *gate = Some(until);
            if was_open {
                tracing::info!(request = %what, status, wait_ms = retry_after.as_millis() as u64, "AAP asked to wait: holding every request of this provider");
            }
        }
    }

    /// Passes the throttle gate and takes a concurrency permit. The gate is checked again
    /// with the permit in hand, right before the request goes out: it may have closed while
    /// this request queued for a permit.
    async fn pass_gate(&self, what: &str, mode: AtGate) -> Result<tokio::sync::SemaphorePermit<'_>, HttpError> {
        let mut waited = Duration::ZERO;
        loop {
            if let Some(left) = self.throttled_for() {
                if mode == AtGate::Refuse || waited + left > self.s.max_wait {
                    return Err(HttpError::Throttled {
                        retry_after: left,
                        message: format!(
                            "{what}: not sent, AAP asked to wait {} ms more (Retry-After)",
                            left.as_millis()
                        ),
                    });
                }
                tracing::debug!(request = %what, wait_ms = left.as_millis() as u64, "waiting for AAP's Retry-After");
                tokio::time::sleep(left).await;
                waited += left;
                let provider = slipway_metrics::ProviderLabels { provider: self.provider.clone() };
                self.metrics.retry_after_waits.get_or_create(&provider).inc_by(left.as_secs_f64());
                continue;
            }
            let permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| HttpError::Invalid(format!("{what}: provider is shut down")))?;
            if self.throttled_for().is_none() {
                return Ok(permit);
            }
        }
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

    /// Walks a paged AWX list from `first`, following `next` links, calling `visit` on
    /// every row until it answers `true` (found) or the list ends. Answers whether `visit`
    /// stopped it. Rows are read as `T`: a type naming only the fields it needs skips the
    /// rest of AWX's large job documents instead of building them.
    pub async fn walk<T: serde::de::DeserializeOwned>(
        &self,
        first: Url,
        mut visit: impl FnMut(T) -> bool,
    ) -> Result<bool, HttpError> {
        let mut url = first;
        for _ in 0..MAX_PAGES {
            let what = Self::what(&Method::GET, &url);
            let page: ListPage<T> = self.get_json(&url).await.map_err(|e| match e {
                HttpError::BadBody(m) => HttpError::BadBody(format!("{m} (expected a list with a results array)")),
                other => other,
            })?;
            if page.results.into_iter().any(&mut visit) {
                return Ok(true);
            }
            match page.next {
                Some(next) if !next.is_empty() => {
                    let next_url = self.next_url(&what, &next)?;
                    if next_url == url {
                        return Err(HttpError::BadBody(format!("{what}: the next link points to the same page")));
                    }
                    url = next_url;
                }
                _ => return Ok(false),
            }
        }
        Err(HttpError::BadBody(format!("AAP list longer than {MAX_PAGES} pages")))
    }

    /// Resolves a `next` link (a path with query, or a full URL) against the API root; a
    /// link to another origin is refused (the credentials would go with it).
    fn next_url(&self, what: &str, next: &str) -> Result<Url, HttpError> {
        let url = self
            .s
            .root
            .join(next)
            .map_err(|e| HttpError::BadBody(format!("{what}: invalid next link {next:?}: {e}")))?;
        if url.origin() != self.s.root.origin() {
            return Err(HttpError::Invalid(format!("{what}: refusing a next link to another origin: {next}")));
        }
        Ok(url)
    }
}

/// One page of an AWX list.
#[derive(serde::Deserialize)]
struct ListPage<T> {
    results: Vec<T>,
    #[serde(default)]
    next: Option<String>,
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

/// `Retry-After` as delay-seconds or an HTTP-date (IMF-fixdate), relative to `now`.
pub fn parse_retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = parse_http_date(text)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    // `now` is truncated to whole seconds, so the wait is never shorter than asked.
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` → seconds since the Unix epoch.
fn parse_http_date(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u32 = day.parse().ok()?;
    let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        .iter()
        .position(|m| m == month)? as u32
        + 1;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<u64> = time.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else { return None };
    if !(1..=31).contains(&day) || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    let days = slipway_domain::time::days_from_civil(year, month, day);
    u64::try_from(days * 86_400 + (*h * 3600 + *m * 60 + *s) as i64).ok()
}

#[cfg(test)]
mod tests;
