//! The AWX / AAP provider (docs/providers.md): runs job templates and workflow job templates
//! through the controller REST API v2.
//!
//! Shape: [`AapOptions`] → [`AapProvider::new`] → [`Provider`].
//!
//! * **Templates** are named per kind and action (explicit names, else
//!   `{prefix}-{create|delete}-{kebab(kind) | override}`), looked up by name among job
//!   templates, then workflow job templates (a job template wins when both exist), within
//!   the configured organization if any. A lookup result is cached by name and dropped when
//!   a launch answers 404 (or refuses the template). Lookup failures are never reported as
//!   "not found": only a 200 with `count: 0` in both lists is.
//! * **Launch** checks that the template prompts for variables (`ask_variables_on_launch`
//!   or a survey), then POSTs `…/{id}/launch/` with `{"extra_vars": <envelope>}` exactly
//!   once. A request that certainly was not sent (connect/DNS/TLS failure), a 404 or a 429
//!   are refusals; a timeout, a reset or a 5xx are `Indeterminate` (the engine then calls
//!   [`Provider::find`]). The answer's `type` (`job` / `workflow_job`; sliced job templates
//!   answer `workflow_job`) goes into the handle, so status and cancel use the right
//!   endpoint. If AAP reports it ignored the extra vars, the job it started cannot do its
//!   work and is not findable by key: it is cancelled and the launch fails permanently.
//! * **Status** is batched: one `GET …/jobs/?id__in=…&page_size=200` (and `workflow_jobs/`)
//!   per 200 handles, following `next` links. A job that turns `failed`/`error` gets its
//!   detail fetched once (the list view has no `result_traceback`). A job missing from the
//!   list is `Transient` for `purge_grace`, then `NotFound` (the engine fails it).
//! * **Cancel** POSTs `…/{id}/cancel/`: 202 = requested (keep polling), 405 = already over.
//! * **Find** lists the template's jobs newest first and matches the
//!   `slipway_idempotency_key` extra var; `Ok(None)` only after the whole list (or the
//!   configured window) was read without error.
//!
//! Idempotent requests (GETs, cancel) are retried on 429/502/503/504 and transport errors
//! with exponential backoff, never sooner than `Retry-After`; the launch POST never is.
//! A `Retry-After` on a `429` (or a `503`) holds *every* request of the provider instance
//! until the advertised time (a throttle gate, see `http`): requests wait for it up to
//! `max_retry_wait` in all, or fail `RateLimited` with the remaining time without being sent;
//! the launch POST never waits, it is refused while the gate is closed. Every request carries
//! `User-Agent: slipway/<version> (<client_id>)`, so AAP (and the simulator) can tell Slipway
//! nodes apart. Credentials never appear in logs, errors or status ([`Secret`]).

mod envelope;
mod http;
mod naming;
mod secret;

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use reqwest::header::HeaderValue;
use reqwest::{Method, Url};
use serde_json::{Value, json};
use slipway_domain::{JobState, Timestamp};
use slipway_provider::{CancelOutcome, JobHandle, JobStatus, LaunchRequest, Launched, Provider, ProviderError};

use http::{Http, HttpError, HttpSettings};

pub use envelope::{Envelope, KEY_VAR, OSAC_API_VERSION, extra_vars, key_of, resource_group};
pub use naming::{TemplateNaming, kebab};
pub use secret::{Secret, SecretError};

/// Rows per list page (AWX's `MAX_PAGE_SIZE`), and ids per batched status request.
pub const PAGE_SIZE: usize = 200;
/// Longest `error_details` taken from AAP (traceback or explanation).
pub const MAX_DETAILS: usize = 4000;
/// Terminal jobs whose failure details are remembered (so repeated polls do not refetch).
const DETAILS_CACHE: usize = 4096;
/// Jobs whose first "missing from AAP" instant is remembered.
const MISSING_CACHE: usize = 16_384;
/// How far AAP's clock may be behind Slipway's when `find` bounds its search by the intent
/// time: a job created in that margin before the intent is still listed.
const FIND_CLOCK_SKEW: Duration = Duration::from_secs(600);

/// How the provider authenticates.
#[derive(Clone, Debug)]
pub enum AapAuth {
    /// `Authorization: Bearer <token>` (AWX personal token, AAP gateway token).
    Token(Secret),
    /// `Authorization: Basic …` (needs AAP's `AUTH_BASIC_ENABLED`, the default).
    Basic { username: String, password: Secret },
    /// No credentials (tests, or a proxy that adds them).
    None,
}

#[derive(Clone, Debug)]
pub struct AapOptions {
    /// Provider instance name.
    pub name: String,
    /// Who this client is, sent in `User-Agent: slipway/<version> (<client_id>)`: the node
    /// name (and provider) in a multi-node deployment. Empty: the provider `name`.
    pub client_id: String,
    /// Scheme, host and optional path of AAP, e.g. `https://aap.example.com`.
    pub base_url: String,
    /// The controller API root under `base_url`: `/api/` (AWX, AAP ≤ 2.4) or
    /// `/api/controller/` (the AAP 2.5+ gateway).
    pub api_prefix: String,
    pub auth: AapAuth,
    /// Restricts template lookups to this organization (template names are unique per
    /// organization only).
    pub organization: Option<String>,
    /// `Some("osac")` → `osac-create-virtual-network`.
    pub template_prefix: Option<String>,
    /// Explicit template names per kind: `(create, delete)`; they win over the convention.
    pub templates: HashMap<String, (Option<String>, Option<String>)>,
    /// Per-kind name suffix replacing `kebab(kind)` (`ClusterOrder` → `hosted-cluster`).
    pub kind_overrides: HashMap<String, String>,
    pub envelope: Envelope,
    /// PEM bundle of extra trusted CA certificates.
    pub ca_bundle: Option<PathBuf>,
    /// Accept any server certificate. Only for test installations.
    pub insecure: bool,
    /// Whole-request timeout (connect, send, answer).
    pub request_timeout: Duration,
    /// Requests in flight to this AAP at most.
    pub max_concurrent_requests: usize,
    /// How long a job may be missing from AAP before it is reported `NotFound`.
    pub purge_grace: Duration,
    /// Retries of an idempotent request (GET, cancel) after the first try.
    pub get_retries: u32,
    /// Wait before the first retry; it doubles per retry.
    pub retry_backoff: Duration,
    /// Longest wait between tries, and longest a request waits for the throttle gate. A
    /// `Retry-After` longer than this is not waited for in-process: the request reports
    /// `RateLimited` and the engine schedules it.
    pub max_retry_wait: Duration,
    /// `find` only looks at jobs created within this window before now. `None`: the
    /// template's whole job list, so "no such job" is always certain.
    pub find_window: Option<Duration>,
    /// Rows per list page requested (1..=200, AWX's maximum). Status requests batch up to
    /// 200 ids each regardless and follow `next` links when pages are smaller.
    pub page_size: usize,
}

impl Default for AapOptions {
    fn default() -> Self {
        AapOptions {
            name: "aap".into(),
            client_id: String::new(),
            base_url: String::new(),
            api_prefix: "/api/".into(),
            auth: AapAuth::None,
            organization: None,
            template_prefix: None,
            templates: HashMap::new(),
            kind_overrides: HashMap::new(),
            envelope: Envelope::Slipway,
            ca_bundle: None,
            insecure: false,
            request_timeout: Duration::from_secs(30),
            max_concurrent_requests: 8,
            purge_grace: Duration::from_secs(300),
            get_retries: 3,
            retry_backoff: Duration::from_millis(500),
            max_retry_wait: Duration::from_secs(10),
            find_window: None,
            page_size: PAGE_SIZE,
        }
    }
}

/// Why the provider could not be built. Never contains a credential.
#[derive(Debug, thiserror::Error)]
pub enum AapError {
    #[error("invalid aap provider option: {0}")]
    InvalidOption(String),
    #[error("cannot use the CA bundle {path}: {reason}")]
    CaBundle { path: PathBuf, reason: String },
    #[error("cannot build the AAP HTTP client: {0}")]
    Client(String),
}

/// Which AAP object a job is, and so which endpoints serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobKind {
    Job,
    WorkflowJob,
}

impl JobKind {
    /// The `type` AAP gives the job, as stored in the handle's `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Job => "job",
            JobKind::WorkflowJob => "workflow_job",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "job" => Some(JobKind::Job),
            "workflow_job" => Some(JobKind::WorkflowJob),
            _ => None,
        }
    }

    fn jobs_path(self) -> &'static str {
        match self {
            JobKind::Job => "v2/jobs/",
            JobKind::WorkflowJob => "v2/workflow_jobs/",
        }
    }

    fn templates_path(self) -> &'static str {
        match self {
            JobKind::Job => "v2/job_templates/",
            JobKind::WorkflowJob => "v2/workflow_job_templates/",
        }
    }

    /// The jobs-list filter naming the template a job came from.
    fn template_filter(self) -> &'static str {
        match self {
            JobKind::Job => "job_template",
            JobKind::WorkflowJob => "workflow_job_template",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            JobKind::Job => "job",
            JobKind::WorkflowJob => "workflow job",
        }
    }

    fn template_noun(self) -> &'static str {
        match self {
            JobKind::Job => "job template",
            JobKind::WorkflowJob => "workflow job template",
        }
    }
}

/// A resolved template.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Template {
    id: u64,
    /// The kind of job it starts (workflow templates start workflow jobs).
    kind: JobKind,
    name: String,
    /// `ask_variables_on_launch || survey_enabled`: AAP passes our extra vars on.
    prompts_for_variables: bool,
}

/// AAP job `status` → job state (docs/providers.md#status): unknown words (and `new`) keep polling.
pub fn map_status(word: &str) -> JobState {
    match word {
        "successful" => JobState::Succeeded,
        "failed" | "error" => JobState::Failed,
        "canceled" => JobState::Canceled,
        "pending" => JobState::Pending,
        "waiting" => JobState::Waiting,
        "running" => JobState::Running,
        _ => JobState::Unknown,
    }
}

/// What a status poll reads of a listed job.
#[derive(Debug, serde::Deserialize)]
struct StatusRow {
    id: u64,
    #[serde(default, deserialize_with = "string_or_null")]
    status: String,
    #[serde(default, deserialize_with = "string_or_null")]
    job_explanation: String,
}

/// AWX sends `null` for some empty texts.
fn string_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(<Option<String> as serde::Deserialize>::deserialize(d)?.unwrap_or_default())
}

/// The job kind and numeric id a handle refers to.
pub fn parse_handle(h: &JobHandle) -> Result<(JobKind, u64), ProviderError> {
    let id = Some(h.job_id.as_str())
        .filter(|s| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|id| *id > 0)
        .ok_or_else(|| ProviderError::Permanent(format!("invalid AAP job id {:?}", h.job_id)))?;
    let kind = match h.data.get("kind") {
        Some(Value::String(k)) => JobKind::parse(k),
        _ => None,
    }
    .ok_or_else(|| {
        ProviderError::Permanent(format!(
            "AAP job {id} has an unknown kind {} (want job or workflow_job)",
            h.data["kind"]
        ))
    })?;
    Ok((kind, id))
}

fn handle(kind: JobKind, id: u64, template: &Template) -> JobHandle {
    JobHandle {
        job_id: id.to_string(),
        data: json!({ "kind": kind.as_str(), "template_id": template.id, "template": template.name }),
    }
}

/// The job a `find` adopts from a list row: `(kind, id, state)`.
///
/// A sliced job template's launch answers with a workflow job whose slices are jobs of the
/// template carrying the same extra vars; a slice (`launch_type: workflow`) stands for its
/// workflow job (`summary_fields.source_workflow_job`), which is what a launch would have
/// returned.
fn found_job(row: &Value, listed: JobKind) -> Option<(JobKind, u64, JobState)> {
    let word = |v: &Value| map_status(v.get("status").and_then(Value::as_str).unwrap_or(""));
    if listed == JobKind::Job && row.get("launch_type").and_then(Value::as_str) == Some("workflow") {
        let parent = row.pointer("/summary_fields/source_workflow_job");
        if let Some(id) = parent.and_then(|p| p.get("id")).and_then(Value::as_u64).filter(|id| *id > 0) {
            return Some((JobKind::WorkflowJob, id, parent.map(word).unwrap_or(JobState::Unknown)));
        }
    }
    let id = row.get("id").and_then(Value::as_u64).filter(|id| *id > 0)?;
    let kind = row.get("type").and_then(Value::as_str).and_then(JobKind::parse).unwrap_or(listed);
    Some((kind, id, word(row)))
}

/// How a launch that got no usable answer is reported.
fn launch_transport_error(e: HttpError) -> ProviderError {
    match e {
        // Not a byte was sent: certainly no job.
        HttpError::NotSent(m) => ProviderError::Transient(m),
        HttpError::Invalid(m) => ProviderError::Permanent(m),
        // Sent, answer lost or unreadable: a job may exist.
        HttpError::Unknown(m) | HttpError::BadBody(m) => ProviderError::Indeterminate(m),
        HttpError::Status { message, .. } => ProviderError::Indeterminate(message),
        // Held back by the throttle gate: not sent, a refusal.
        HttpError::Throttled { retry_after, message } => ProviderError::RateLimited { retry_after, message },
    }
}

/// How a launch answered with a non-success status is reported. `404` and refusals also
/// drop the cached template (see the caller).
fn launch_status_error(e: HttpError) -> ProviderError {
    let HttpError::Status { status, retry_after, message } = e else {
        return launch_transport_error(e);
    };
    match status {
        429 => {
            ProviderError::RateLimited { retry_after: retry_after.unwrap_or(http::DEFAULT_RATE_LIMIT_WAIT), message }
        }
        // The template is gone (deleted or recreated): look it up again next time.
        404 => ProviderError::Transient(format!("{message} (the template will be looked up again)")),
        // The server did not process the request.
        408 => ProviderError::Transient(message),
        // A 5xx may come after AAP created the job (or from a gateway that forwarded it).
        s if s >= 500 => ProviderError::Indeterminate(message),
        // 400 (prompts, survey, passwords), 401, 403, 405, other refusals, redirects.
        _ => ProviderError::Permanent(message),
    }
}

/// A map with a size bound; the oldest insertion goes first.
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: Clone + Eq + Hash, V> Bounded<K, V> {
    fn new(cap: usize) -> Self {
        Bounded { map: HashMap::new(), order: VecDeque::new(), cap }
    }

    fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
        }
        while self.map.len() > self.cap {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
    }

    fn remove(&mut self, k: &K) {
        if self.map.remove(k).is_some() {
            self.order.retain(|o| o != k);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks is plain maps, consistent across a panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct AapProvider {
    name: String,
    http: Http,
    naming: TemplateNaming,
    organization: Option<String>,
    envelope: Envelope,
    purge_grace: Duration,
    find_window: Option<Duration>,
    page_size: String,
    /// Template name → resolution.
    templates: Mutex<HashMap<String, Template>>,
    /// Serialises cache misses, so a burst of launches of one uncached template makes one
    /// lookup, not one per launch.
    resolving: tokio::sync::Mutex<()>,
    /// Failure details of terminal failed jobs.
    details: Mutex<Bounded<(JobKind, u64), String>>,
    /// When a job was first seen missing from AAP's list.
    missing: Mutex<Bounded<(JobKind, u64), Instant>>,
}

impl AapProvider {
    pub fn new(options: AapOptions) -> Result<Self, AapError> {
        let invalid = |m: String| AapError::InvalidOption(m);
        if options.name.trim().is_empty() {
            return Err(invalid("name must not be empty".into()));
        }
        if options.max_concurrent_requests == 0 {
            return Err(invalid("max_concurrent_requests must be at least 1".into()));
        }
        if !(1..=PAGE_SIZE).contains(&options.page_size) {
            return Err(invalid(format!("page_size must be between 1 and {PAGE_SIZE}")));
        }
        if options.request_timeout.is_zero() {
            return Err(invalid("request_timeout must be positive".into()));
        }
        let root = api_root(&options.base_url, &options.api_prefix).map_err(invalid)?;
        let (authorization, scrub) = authorization(&options.auth).map_err(invalid)?;
        let client_id = if options.client_id.trim().is_empty() { &options.name } else { &options.client_id };
        let user_agent = user_agent(client_id);
        if authorization.is_some() && root.scheme() == "http" {
            tracing::warn!(provider = %options.name, "AAP credentials are sent over plain http");
        }

        let mut builder = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .connect_timeout(options.request_timeout.min(Duration::from_secs(10)))
            // A redirect would turn the launch POST into a GET and could carry the
            // credentials elsewhere: answered as an error naming the target instead.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(user_agent);
        if let Some(path) = &options.ca_bundle {
            let ca_err = |reason: String| AapError::CaBundle { path: path.clone(), reason };
            let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca_err(e.to_string()))?;
            if certs.is_empty() {
                return Err(ca_err("no PEM certificate in the file".into()));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if options.insecure {
            tracing::warn!(provider = %options.name, "AAP server certificates are not verified (insecure = true)");
            builder = builder.danger_accept_invalid_certs(true);
        }
        let client = builder.build().map_err(|e| AapError::Client(e.to_string()))?;
        let http = Http::new(HttpSettings {
            client,
            root,
            authorization,
            scrub,
            max_concurrent: options.max_concurrent_requests,
            retries: options.get_retries,
            backoff: options.retry_backoff,
            max_wait: options.max_retry_wait,
            timeout: options.request_timeout,
        });
        Ok(AapProvider {
            name: options.name,
            http,
            naming: TemplateNaming {
                prefix: options.template_prefix,
                templates: options.templates,
                kind_overrides: options.kind_overrides,
            },
            organization: options.organization.filter(|o| !o.trim().is_empty()),
            envelope: options.envelope,
            purge_grace: options.purge_grace,
            find_window: options.find_window,
            page_size: options.page_size.to_string(),
            templates: Mutex::new(HashMap::new()),
            resolving: tokio::sync::Mutex::new(()),
            details: Mutex::new(Bounded::new(DETAILS_CACHE)),
            missing: Mutex::new(Bounded::new(MISSING_CACHE)),
        })
    }

    /// The template a request runs (name only; no lookup).
    pub fn template_name(&self, r: &LaunchRequest) -> Result<String, ProviderError> {
        self.naming.template_name(&r.kind, r.action).map_err(ProviderError::Permanent)
    }

    /// Drops every cached template resolution.
    pub fn clear_template_cache(&self) {
        lock(&self.templates).clear();
    }

    /// Seeds the template cache, e.g. with a resolution AAP no longer has (tests of the
    /// 404-at-launch invalidation).
    #[doc(hidden)]
    pub fn cache_template(&self, name: &str, id: u64, kind: JobKind) {
        let t = Template { id, kind, name: name.to_owned(), prompts_for_variables: true };
        lock(&self.templates).insert(name.to_owned(), t);
    }

    /// The cached resolution of `name`, if any: `(id, kind)`.
    pub fn cached_template(&self, name: &str) -> Option<(u64, JobKind)> {
        lock(&self.templates).get(name).map(|t| (t.id, t.kind))
    }

    fn forget_template(&self, name: &str) {
        lock(&self.templates).remove(name);
    }

    /// The template named `name`, from the cache or AAP.
    async fn template(&self, name: &str) -> Result<Template, ProviderError> {
        if let Some(t) = lock(&self.templates).get(name).cloned() {
            return Ok(t);
        }
        let _one_at_a_time = self.resolving.lock().await;
        if let Some(t) = lock(&self.templates).get(name).cloned() {
            return Ok(t);
        }
        self.resolve(name).await
    }

    /// Looks `name` up at AAP (job templates first) and caches the result.
    async fn resolve(&self, name: &str) -> Result<Template, ProviderError> {
        for kind in [JobKind::Job, JobKind::WorkflowJob] {
            if let Some(t) = self.lookup(kind, name).await? {
                lock(&self.templates).insert(name.to_owned(), t.clone());
                return Ok(t);
            }
        }
        let scope = match &self.organization {
            Some(org) => format!(" in organization {org:?}"),
            None => String::new(),
        };
        Err(ProviderError::Permanent(format!(
            "template {name:?} not found as a job template or workflow job template{scope}"
        )))
    }

    /// One lookup by name: `None` only for a successful answer with no match.
    async fn lookup(&self, kind: JobKind, name: &str) -> Result<Option<Template>, ProviderError> {
        let mut url = self.http.url(kind.templates_path());
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("name", name);
            if let Some(org) = &self.organization {
                q.append_pair("organization__name", org);
            }
            q.append_pair("page_size", &self.page_size);
        }
        let page: Value = self.http.get_json(&url).await.map_err(|e| {
            let hint = if e.status() == Some(404) { " (check base_url and api_prefix)" } else { "" };
            let mut err = e.into_provider();
            append(&mut err, &format!("{hint} while looking up template {name:?}"));
            err
        })?;
        let rows = page.get("results").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        // Names match exactly in AWX; compare anyway, in case a server treats `name` loosely.
        let matches: Vec<&Value> =
            rows.iter().filter(|r| r.get("name").and_then(Value::as_str) == Some(name)).collect();
        let count = page.get("count").and_then(Value::as_u64).unwrap_or(matches.len() as u64);
        let all_seen = rows.len() as u64 >= count;
        match matches.as_slice() {
            [] if all_seen => Ok(None),
            [row] if all_seen => {
                let id = row.get("id").and_then(Value::as_u64).filter(|id| *id > 0).ok_or_else(|| {
                    ProviderError::Transient(format!("AAP {} {name:?} has no numeric id", kind.template_noun()))
                })?;
                let flag = |f: &str| row.get(f).and_then(Value::as_bool).unwrap_or(false);
                Ok(Some(Template {
                    id,
                    kind,
                    name: name.to_owned(),
                    prompts_for_variables: flag("ask_variables_on_launch") || flag("survey_enabled"),
                }))
            }
            _ => {
                let mut orgs: Vec<String> = rows.iter().map(organization_of).collect();
                orgs.sort();
                orgs.dedup();
                let advice = match &self.organization {
                    Some(org) => format!("even within organization {org:?}"),
                    None => "set the provider's organization to choose one".to_owned(),
                };
                let count = count.max(matches.len() as u64);
                Err(ProviderError::Permanent(format!(
                    "template {name:?} is ambiguous: {count} {}s have this name (organizations: {}); {advice}",
                    kind.template_noun(),
                    orgs.join(", ")
                )))
            }
        }
    }

    /// A launch answer (2xx) → the job it started.
    fn launched(&self, t: &Template, body: &Value) -> Result<(JobKind, u64, JobState), ProviderError> {
        let id = body.get("id").and_then(Value::as_u64).filter(|id| *id > 0).ok_or_else(|| {
            ProviderError::Indeterminate(format!(
                "AAP accepted the launch of {:?} but its answer has no job id",
                t.name
            ))
        })?;
        // Key on `type`: a sliced job template answers with a workflow job.
        let kind = body.get("type").and_then(Value::as_str).and_then(JobKind::parse).unwrap_or(
            if body.get("workflow_job").is_some_and(|v| !v.is_null()) { JobKind::WorkflowJob } else { t.kind },
        );
        let state = body.get("status").and_then(Value::as_str).map(map_status).unwrap_or(JobState::Pending);
        Ok((kind, id, state))
    }

    /// AAP started a job but dropped the extra vars: the job runs without the resource and
    /// cannot be found by key. It is cancelled (best effort) and the launch fails.
    async fn reject_ignored(&self, t: &Template, kind: JobKind, id: u64, ignored: &Value) -> ProviderError {
        self.forget_template(&t.name);
        let fields: Vec<&str> = ignored.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        let cancelled = match self.cancel_job(kind, id).await {
            Ok(_) => "cancelled".to_owned(),
            Err(e) => format!("NOT cancelled ({e})"),
        };
        tracing::warn!(provider = %self.name, template = %t.name, job = id, ?fields, "AAP ignored launch fields");
        ProviderError::Permanent(format!(
            "{} {:?} ignored the launch fields [{}]: enable 'Prompt on launch' for variables; AAP {} {id} was {cancelled}",
            t.kind.template_noun(),
            t.name,
            fields.join(", "),
            kind.noun()
        ))
    }

    async fn cancel_job(&self, kind: JobKind, id: u64) -> Result<CancelOutcome, ProviderError> {
        let url = self.http.url(&format!("{}{id}/cancel/", kind.jobs_path()));
        let what = Http::what(&Method::POST, &url);
        // `{}` as the awx.awx collection sends: some proxies refuse a POST without a length.
        let reply =
            self.http.send_idempotent(Method::POST, &url, Some(&json!({}))).await.map_err(HttpError::into_provider)?;
        match reply.status.as_u16() {
            200..=299 => Ok(CancelOutcome::Requested),
            405 => Ok(CancelOutcome::AlreadyFinished),
            404 => Err(ProviderError::NotFound(format!("AAP {} {id} does not exist", kind.noun()))),
            _ => Err(self.http.status_error(&what, &reply).into_provider()),
        }
    }

    /// Status rows for `ids` (one kind), keyed by id; ids absent from AAP are absent.
    async fn list_jobs(&self, kind: JobKind, ids: &[u64]) -> Result<HashMap<u64, StatusRow>, ProviderError> {
        let mut url = self.http.url(kind.jobs_path());
        let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        url.query_pairs_mut()
            .append_pair("id__in", &list)
            .append_pair("order_by", "id")
            .append_pair("page_size", &self.page_size);
        let mut rows = HashMap::new();
        self.http
            .walk(url, |row: StatusRow| {
                rows.insert(row.id, row);
                false
            })
            .await
            .map_err(HttpError::into_provider)?;
        Ok(rows)
    }

    /// The status of a job AAP listed.
    async fn observe(&self, kind: JobKind, id: u64, row: &StatusRow) -> JobStatus {
        lock(&self.missing).remove(&(kind, id));
        let word = row.status.as_str();
        let state = map_status(word);
        let explanation = row.job_explanation.trim();
        let word_text = if word.is_empty() { "unknown" } else { word };
        let message = if explanation.is_empty() {
            word_text.to_owned()
        } else {
            format!("{word_text}: {}", first_line(explanation))
        };
        let error_details =
            if state == JobState::Failed { self.failure_details(kind, id, explanation).await } else { String::new() };
        JobStatus { state, message, error_details }
    }

    /// Why a job failed: its `result_traceback` (detail view), else its failed tasks (job
    /// events), else its `job_explanation`. Fetched once per job, bounded to [`MAX_DETAILS`].
    async fn failure_details(&self, kind: JobKind, id: u64, explanation: &str) -> String {
        if let Some(d) = lock(&self.details).get(&(kind, id)) {
            return d.clone();
        }
        let url = self.http.url(&format!("{}{id}/", kind.jobs_path()));
        match self.http.get_json::<Value>(&url).await {
            Ok(detail) => {
                let text = |f: &str| detail.get(f).and_then(Value::as_str).map(str::trim).unwrap_or("").to_owned();
                let traceback = text("result_traceback");
                let details = if !traceback.is_empty() {
                    traceback
                } else if let Some(tasks) = self.failed_tasks(kind, id).await.filter(|t| !t.is_empty()) {
                    tasks
                } else if !text("job_explanation").is_empty() {
                    text("job_explanation")
                } else {
                    explanation.to_owned()
                };
                let details = http::bound(details, MAX_DETAILS);
                lock(&self.details).insert((kind, id), details.clone());
                details
            }
            Err(e) => {
                // Not cached: a later poll may get them; the state is known regardless.
                tracing::debug!(provider = %self.name, job = id, error = %e.message(), "no AAP job detail");
                http::bound(explanation.to_owned(), MAX_DETAILS)
            }
        }
    }

    /// `Task 'x' failed on host: msg` lines of a playbook job's failure events (where AAP
    /// keeps why an ordinary playbook failed: `result_traceback` is only for crashes).
    /// `None` when they cannot be read.
    async fn failed_tasks(&self, kind: JobKind, id: u64) -> Option<String> {
        if kind != JobKind::Job {
            return None;
        }
        let mut url = self.http.url(&format!("{}{id}/job_events/", kind.jobs_path()));
        url.query_pairs_mut()
            .append_pair("event__in", "runner_on_failed,runner_on_unreachable")
            .append_pair("order_by", "counter")
            .append_pair("page_size", "20");
        let page: Value = self.http.get_json(&url).await.ok()?;
        let lines: Vec<String> = page.get("results")?.as_array()?.iter().filter_map(failed_task_line).collect();
        Some(lines.join("\n"))
    }

    /// A job AAP did not list: `Transient` during the grace period, then `NotFound`.
    fn missing(&self, kind: JobKind, id: u64) -> ProviderError {
        let now = Instant::now();
        let first = {
            let mut missing = lock(&self.missing);
            match missing.get(&(kind, id)) {
                Some(first) => *first,
                None => {
                    missing.insert((kind, id), now);
                    now
                }
            }
        };
        if now.duration_since(first) >= self.purge_grace {
            ProviderError::NotFound(format!("AAP {} {id} no longer exists (purged from AAP?)", kind.noun()))
        } else {
            ProviderError::Transient(format!(
                "AAP {} {id} not found at AAP; it is reported gone if still missing after {:?}",
                kind.noun(),
                self.purge_grace
            ))
        }
    }
}

/// The API root: `base_url` (its path kept) + `api_prefix`, ending in `/`.
fn api_root(base_url: &str, api_prefix: &str) -> Result<Url, String> {
    let base = Url::parse(base_url.trim()).map_err(|e| format!("base_url {base_url:?}: {e}"))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(format!("base_url {base_url:?} must be http or https"));
    }
    if !base.username().is_empty() || base.password().is_some() {
        // Not echoed: it holds credentials.
        return Err("base_url must not contain credentials; use the auth settings".into());
    }
    if base.query().is_some() || base.fragment().is_some() {
        return Err(format!("base_url {base_url:?} must not have a query or fragment"));
    }
    let prefix = api_prefix.trim();
    if !prefix.starts_with('/') || prefix.contains(['?', '#']) {
        return Err(format!("api_prefix {api_prefix:?} must be a path such as /api/ or /api/controller/"));
    }
    let mut path = format!("{}{}", base.path().trim_end_matches('/'), prefix);
    if !path.ends_with('/') {
        path.push('/');
    }
    let mut root = base;
    root.set_path(&path);
    Ok(root)
}

/// `slipway/<version> (<client_id>)`; characters a `User-Agent` comment cannot carry (not
/// printable ASCII, parentheses, backslashes) become `_`.
fn user_agent(client_id: &str) -> String {
    let id: String = client_id
        .trim()
        .chars()
        .map(|c| if (' '..='~').contains(&c) && !matches!(c, '(' | ')' | '\\') { c } else { '_' })
        .collect();
    format!("slipway/{} ({id})", env!("CARGO_PKG_VERSION"))
}

/// The `Authorization` header (sensitive) and the texts to scrub from messages.
fn authorization(auth: &AapAuth) -> Result<(Option<HeaderValue>, Vec<String>), String> {
    let (value, scrub) = match auth {
        AapAuth::None => return Ok((None, Vec::new())),
        AapAuth::Token(token) => (format!("Bearer {}", token.expose()), vec![token.expose().to_owned()]),
        AapAuth::Basic { username, password } => {
            let encoded = secret::base64(format!("{username}:{}", password.expose()).as_bytes());
            (format!("Basic {encoded}"), vec![password.expose().to_owned(), encoded])
        }
    };
    let mut header = HeaderValue::from_str(&value)
        .map_err(|_| "the AAP credentials contain characters not allowed in an HTTP header".to_owned())?;
    header.set_sensitive(true);
    Ok((Some(header), scrub))
}

fn organization_of(row: &Value) -> String {
    let summary = row.pointer("/summary_fields/organization/name").and_then(Value::as_str);
    match (summary, row.get("organization")) {
        (Some(name), _) => name.to_owned(),
        (None, Some(Value::Null) | None) => "none".to_owned(),
        (None, Some(id)) => format!("#{id}"),
    }
}

/// `Task 'x' failed on host: msg` for an AWX failure event (`runner_on_failed`,
/// `runner_on_unreachable`); `None` for other events and for ignored failures.
fn failed_task_line(ev: &Value) -> Option<String> {
    let what = match ev.get("event")?.as_str()? {
        "runner_on_failed" => "failed on",
        "runner_on_unreachable" => "could not reach",
        _ => return None,
    };
    let data = ev.get("event_data");
    if data.and_then(|d| d.get("ignore_errors")).and_then(Value::as_bool) == Some(true) {
        return None;
    }
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }
    let task = text(ev.get("task")).or_else(|| text(data.and_then(|d| d.get("task")))).unwrap_or("?");
    let host = text(ev.get("host_name")).or_else(|| text(data.and_then(|d| d.get("host")))).unwrap_or("?");
    let msg = slipway_provider::task_failure_message(data.and_then(|d| d.get("res")));
    Some(format!("Task '{task}' {what} {host}: {msg}"))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("").trim()
}

/// Appends context to an error's message.
fn append(e: &mut ProviderError, text: &str) {
    match e {
        ProviderError::RateLimited { message, .. }
        | ProviderError::NotFound(message)
        | ProviderError::Transient(message)
        | ProviderError::Indeterminate(message)
        | ProviderError::Permanent(message) => message.push_str(text),
    }
}

#[async_trait]
impl Provider for AapProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, ProviderError> {
        let name = self.template_name(request)?;
        let t = self.template(&name).await?;
        if !t.prompts_for_variables {
            // Not cached as usable: fixing the template in AAP takes effect next time.
            self.forget_template(&name);
            return Err(ProviderError::Permanent(format!(
                "{} {name:?} does not prompt for variables on launch (enable 'Prompt on launch' for variables)",
                t.kind.template_noun()
            )));
        }
        let url = self.http.url(&format!("{}{}/launch/", t.kind.templates_path(), t.id));
        let what = Http::what(&Method::POST, &url);
        let body = json!({ "extra_vars": extra_vars(self.envelope, request) });
        // Exactly one try: a repeated POST can start a second job. Never held at the throttle
        // gate either: refused (RateLimited) while it is closed.
        let reply = match self.http.send_now(Method::POST, &url, Some(&body)).await {
            Ok(reply) => reply,
            Err(e) => {
                let err = launch_transport_error(e);
                tracing::info!(provider = %self.name, template = %name, key = %request.idempotency_key, error = %err, "AAP launch failed");
                return Err(err);
            }
        };
        if !reply.status.is_success() {
            let status = reply.status.as_u16();
            if (400..500).contains(&status) && !matches!(status, 408 | 429) {
                self.forget_template(&name);
            }
            let err = launch_status_error(self.http.status_error(&what, &reply));
            tracing::info!(provider = %self.name, template = %name, key = %request.idempotency_key, error = %err, "AAP launch failed");
            return Err(err);
        }
        let answer = reply.json(&what).map_err(launch_transport_error)?;
        let (kind, id, state) = self.launched(&t, &answer)?;
        if let Some(ignored) = answer.get("ignored_fields").filter(|v| v.as_object().is_some_and(|m| !m.is_empty())) {
            return Err(self.reject_ignored(&t, kind, id, ignored).await);
        }
        tracing::info!(provider = %self.name, template = %name, job = id, kind = kind.as_str(), key = %request.idempotency_key, "launched AAP job");
        Ok(Launched { handle: handle(kind, id, &t), state, template: name })
    }

    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        let parsed: Vec<Result<(JobKind, u64), ProviderError>> = handles.iter().map(parse_handle).collect();
        let mut rows: HashMap<(JobKind, u64), Result<StatusRow, ProviderError>> = HashMap::new();
        for kind in [JobKind::Job, JobKind::WorkflowJob] {
            let mut ids: Vec<u64> =
                parsed.iter().filter_map(|p| p.as_ref().ok()).filter(|(k, _)| *k == kind).map(|(_, id)| *id).collect();
            ids.sort_unstable();
            ids.dedup();
            for chunk in ids.chunks(PAGE_SIZE) {
                match self.list_jobs(kind, chunk).await {
                    Ok(mut found) => {
                        for id in chunk {
                            if let Some(row) = found.remove(id) {
                                rows.insert((kind, *id), Ok(row));
                            }
                        }
                    }
                    Err(e) => {
                        for id in chunk {
                            rows.insert((kind, *id), Err(e.clone()));
                        }
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(handles.len());
        for p in parsed {
            let result = match p {
                Err(e) => Err(e),
                Ok((kind, id)) => match rows.get(&(kind, id)) {
                    Some(Ok(row)) => Ok(self.observe(kind, id, row).await),
                    Some(Err(e)) => Err(e.clone()),
                    None => Err(self.missing(kind, id)),
                },
            };
            out.push(result);
        }
        out
    }

    async fn cancel(&self, handle: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        let (kind, id) = parse_handle(handle)?;
        let outcome = self.cancel_job(kind, id).await;
        tracing::info!(provider = %self.name, job = id, kind = kind.as_str(), outcome = ?outcome, "AAP cancel");
        outcome
    }

    async fn find(&self, request: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        let name = self.template_name(request)?;
        // Always fresh: a cached id of a recreated template would list no jobs and wrongly
        // prove absence.
        self.forget_template(&name);
        let t = self.resolve(&name).await?;
        let mut url = self.http.url(t.kind.jobs_path());
        {
            let mut q = url.query_pairs_mut();
            q.append_pair(t.kind.template_filter(), &t.id.to_string());
            q.append_pair("order_by", "-id");
            q.append_pair("page_size", &self.page_size);
            // No job of the key is older than its intent (allowing for clock skew between
            // Slipway and AAP), nor than the configured window.
            let window = self.find_window.map(|w| Timestamp::from_system(SystemTime::now()).sub(w));
            let intent = request.intended_at.map(|t| t.sub(FIND_CLOCK_SKEW));
            if let Some(since) = window.into_iter().chain(intent).max() {
                q.append_pair("created__gt", &since.to_rfc3339());
            }
        }
        let key = request.idempotency_key.as_str();
        // The whole list: a launch request processed twice leaves two jobs with the key.
        let mut found = Vec::new();
        self.http
            .walk(url, |row: Value| {
                if row.get("extra_vars").and_then(key_of).is_some_and(|k| k == key) {
                    found.push(row);
                }
                false
            })
            .await
            .map_err(|e| {
                let mut err = e.into_provider();
                append(&mut err, &format!(" while looking for the job of key {key:?}"));
                err
            })?;
        if found.is_empty() {
            tracing::info!(provider = %self.name, template = %name, key, "no AAP job for the key");
        }
        let mut jobs: Vec<Launched> = Vec::with_capacity(found.len());
        // Listed newest first; answered oldest first. A job created while the list is read
        // shifts the pages, so a row can be listed twice: each job counts once.
        for row in found.iter().rev() {
            let (kind, id, state) = found_job(row, t.kind).ok_or_else(|| {
                ProviderError::Indeterminate(format!("AAP listed a job for key {key:?} without a numeric id"))
            })?;
            if jobs.iter().any(|j| parse_handle(&j.handle).is_ok_and(|listed| listed == (kind, id))) {
                continue;
            }
            tracing::info!(provider = %self.name, template = %name, job = id, key, "found an AAP job for the key");
            jobs.push(Launched { handle: handle(kind, id, &t), state, template: name.clone() });
        }
        Ok(jobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_mapping() {
        // The table in docs/providers.md#status.
        for (word, state) in [
            ("successful", JobState::Succeeded),
            ("failed", JobState::Failed),
            ("error", JobState::Failed),
            ("canceled", JobState::Canceled),
            ("pending", JobState::Pending),
            ("waiting", JobState::Waiting),
            ("running", JobState::Running),
            ("new", JobState::Unknown),
            ("unknown_status", JobState::Unknown),
            ("", JobState::Unknown),
            ("Successful", JobState::Unknown),
        ] {
            assert_eq!(map_status(word), state, "{word}");
        }
    }

    #[test]
    fn handles() {
        let h = |id: &str, data: Value| JobHandle { job_id: id.into(), data };
        assert_eq!(parse_handle(&h("42", json!({"kind": "job"}))).unwrap(), (JobKind::Job, 42));
        assert_eq!(parse_handle(&h("7", json!({"kind": "workflow_job"}))).unwrap(), (JobKind::WorkflowJob, 7));
        for (id, data) in [
            ("42", json!({"kind": "project_update"})),
            ("42", json!({})),
            ("42", json!(null)),
            ("42", json!({"kind": 1})),
            ("0", json!({"kind": "job"})),
            ("-1", json!({"kind": "job"})),
            ("+1", json!({"kind": "job"})),
            ("1 ", json!({"kind": "job"})),
            ("abc", json!({"kind": "job"})),
            ("", json!({"kind": "job"})),
            ("99999999999999999999999", json!({"kind": "job"})),
            ("../1", json!({"kind": "job"})),
        ] {
            assert!(matches!(parse_handle(&h(id, data.clone())), Err(ProviderError::Permanent(_))), "{id} {data}");
        }
        let t = Template { id: 9, kind: JobKind::WorkflowJob, name: "wf".into(), prompts_for_variables: true };
        let made = handle(JobKind::WorkflowJob, 5, &t);
        assert_eq!(made.job_id, "5");
        assert_eq!(made.data, json!({"kind": "workflow_job", "template_id": 9, "template": "wf"}));
        assert_eq!(parse_handle(&made).unwrap(), (JobKind::WorkflowJob, 5));
    }

    #[test]
    fn launch_error_classification() {
        let st = |status, ra: Option<u64>| HttpError::Status {
            status,
            retry_after: ra.map(Duration::from_secs),
            message: format!("s{status}"),
        };
        assert_eq!(
            launch_status_error(st(429, Some(9))),
            ProviderError::RateLimited { retry_after: Duration::from_secs(9), message: "s429".into() }
        );
        assert!(
            matches!(launch_status_error(st(404, None)), ProviderError::Transient(m) if m.contains("looked up again"))
        );
        assert!(matches!(launch_status_error(st(408, None)), ProviderError::Transient(_)));
        for s in [400, 401, 403, 405, 409, 302] {
            assert!(matches!(launch_status_error(st(s, None)), ProviderError::Permanent(_)), "{s}");
        }
        for s in [500, 502, 503, 504] {
            assert!(matches!(launch_status_error(st(s, None)), ProviderError::Indeterminate(_)), "{s}");
        }
        assert!(matches!(launch_transport_error(HttpError::NotSent("c".into())), ProviderError::Transient(_)));
        assert!(matches!(launch_transport_error(HttpError::Unknown("t".into())), ProviderError::Indeterminate(_)));
        assert!(matches!(launch_transport_error(HttpError::BadBody("b".into())), ProviderError::Indeterminate(_)));
        assert!(matches!(launch_transport_error(HttpError::Invalid("i".into())), ProviderError::Permanent(_)));
        // Held back at the throttle gate: certainly not sent, a refusal with the time left.
        let held = HttpError::Throttled { retry_after: Duration::from_millis(1500), message: "held".into() };
        assert_eq!(
            launch_transport_error(held),
            ProviderError::RateLimited { retry_after: Duration::from_millis(1500), message: "held".into() }
        );
    }

    #[test]
    fn user_agents_name_the_client() {
        let v = env!("CARGO_PKG_VERSION");
        assert_eq!(user_agent("replica-1/aap"), format!("slipway/{v} (replica-1/aap)"));
        assert_eq!(user_agent(" node a "), format!("slipway/{v} (node a)"));
        assert_eq!(user_agent("a(b)c\\d\né"), format!("slipway/{v} (a_b_c_d__)"));
        assert!(HeaderValue::from_str(&user_agent("x\u{7f}\r\n")).is_ok());
    }

    #[test]
    fn api_roots() {
        let r = |b: &str, p: &str| api_root(b, p).map(|u| u.to_string());
        assert_eq!(r("https://aap.example.com", "/api/").unwrap(), "https://aap.example.com/api/");
        assert_eq!(
            r("https://aap.example.com/", "/api/controller/").unwrap(),
            "https://aap.example.com/api/controller/"
        );
        assert_eq!(r("https://h:8443/aap/", "/api/controller").unwrap(), "https://h:8443/aap/api/controller/");
        assert!(r("ftp://h", "/api/").is_err());
        assert!(r("not a url", "/api/").is_err());
        assert!(r("https://h", "api/").is_err());
        assert!(r("https://h?x=1", "/api/").is_err());
        let e = r("https://admin:hunter2@h", "/api/").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn authorization_headers_are_sensitive_and_scrubbed() {
        let (h, scrub) = authorization(&AapAuth::Token(Secret::new("tok-1234"))).unwrap();
        let h = h.unwrap();
        assert!(h.is_sensitive());
        assert_eq!(h.to_str().unwrap(), "Bearer tok-1234");
        assert_eq!(scrub, vec!["tok-1234".to_owned()]);
        let (h, scrub) =
            authorization(&AapAuth::Basic { username: "admin".into(), password: Secret::new("p@ss") }).unwrap();
        assert_eq!(h.unwrap().to_str().unwrap(), "Basic YWRtaW46cEBzcw==");
        assert_eq!(scrub, vec!["p@ss".to_owned(), "YWRtaW46cEBzcw==".to_owned()]);
        assert!(authorization(&AapAuth::None).unwrap().0.is_none());
        let e = authorization(&AapAuth::Token(Secret::new("bad\ntoken-xyz"))).unwrap_err();
        assert!(!e.contains("token-xyz"), "{e}");
    }

    #[test]
    fn options_debug_never_shows_secrets() {
        let o = AapOptions {
            auth: AapAuth::Basic { username: "admin".into(), password: Secret::new("pw-very-secret") },
            ..Default::default()
        };
        let dbg = format!("{o:?}");
        assert!(!dbg.contains("pw-very-secret") && dbg.contains("***"), "{dbg}");
        let o = AapOptions { auth: AapAuth::Token(Secret::new("tok-very-secret")), ..Default::default() };
        assert!(!format!("{o:?}").contains("tok-very-secret"));
    }

    #[test]
    fn found_jobs() {
        let row = json!({"id": 40, "type": "job", "status": "running", "launch_type": "manual"});
        assert_eq!(found_job(&row, JobKind::Job), Some((JobKind::Job, 40, JobState::Running)));
        let wf = json!({"id": 41, "type": "workflow_job", "status": "pending"});
        assert_eq!(found_job(&wf, JobKind::WorkflowJob), Some((JobKind::WorkflowJob, 41, JobState::Pending)));
        // A slice of a sliced job template stands for its workflow job.
        let slice = json!({"id": 43, "type": "job", "status": "running", "launch_type": "workflow",
            "summary_fields": {"source_workflow_job": {"id": 42, "name": "jt", "status": "running"}}});
        assert_eq!(found_job(&slice, JobKind::Job), Some((JobKind::WorkflowJob, 42, JobState::Running)));
        // Without the parent reference the slice itself is all there is.
        let bare = json!({"id": 43, "type": "job", "status": "failed", "launch_type": "workflow"});
        assert_eq!(found_job(&bare, JobKind::Job), Some((JobKind::Job, 43, JobState::Failed)));
        assert_eq!(found_job(&json!({"status": "running"}), JobKind::Job), None);
    }

    #[test]
    fn failure_event_lines() {
        let ev = json!({"event": "runner_on_failed", "task": "create vnet", "host_name": "localhost",
            "event_data": {"task": "create vnet", "host": "localhost", "res": {"msg": "quota exceeded"}}});
        assert_eq!(failed_task_line(&ev).unwrap(), "Task 'create vnet' failed on localhost: quota exceeded");
        let ev = json!({"event": "runner_on_unreachable", "event_data": {"host": "h1", "task": "t", "res": {"msg": {"a": 1}}}});
        assert_eq!(failed_task_line(&ev).unwrap(), "Task 't' could not reach h1: {\"a\":1}");
        let ignored = json!({"event": "runner_on_failed", "event_data": {"ignore_errors": true, "res": {"msg": "x"}}});
        assert_eq!(failed_task_line(&ignored), None);
        assert_eq!(failed_task_line(&json!({"event": "runner_on_ok"})), None);
        assert_eq!(failed_task_line(&json!({"event": "runner_on_failed"})).unwrap(), "Task '?' failed on ?: ");
    }

    #[test]
    fn bounded_map_evicts_oldest() {
        let mut b = Bounded::new(2);
        b.insert(1, "a");
        b.insert(2, "b");
        b.insert(1, "a2");
        b.insert(3, "c");
        assert_eq!(b.get(&1), None);
        assert_eq!(b.get(&2), Some(&"b"));
        assert_eq!(b.get(&3), Some(&"c"));
        b.remove(&2);
        b.insert(4, "d");
        assert_eq!(b.get(&3), Some(&"c"));
        assert_eq!(b.get(&4), Some(&"d"));
    }

    #[test]
    fn launch_answers() {
        let p = AapProvider::new(AapOptions { base_url: "http://127.0.0.1:1".into(), ..Default::default() }).unwrap();
        let t = Template { id: 3, kind: JobKind::Job, name: "jt".into(), prompts_for_variables: true };
        assert_eq!(
            p.launched(&t, &json!({"id": 12, "type": "job", "job": 12, "status": "pending"})).unwrap(),
            (JobKind::Job, 12, JobState::Pending)
        );
        // A sliced job template answers with a workflow job.
        assert_eq!(
            p.launched(&t, &json!({"id": 13, "type": "workflow_job", "workflow_job": 13, "status": "new"})).unwrap(),
            (JobKind::WorkflowJob, 13, JobState::Unknown)
        );
        assert_eq!(
            p.launched(&t, &json!({"id": 14, "workflow_job": 14})).unwrap(),
            (JobKind::WorkflowJob, 14, JobState::Pending)
        );
        assert_eq!(p.launched(&t, &json!({"id": 15})).unwrap().0, JobKind::Job);
        assert!(matches!(p.launched(&t, &json!({"job": 12})), Err(ProviderError::Indeterminate(_))));
    }

    #[test]
    fn missing_jobs_become_not_found_after_the_grace() {
        let p = AapProvider::new(AapOptions {
            base_url: "http://127.0.0.1:1".into(),
            purge_grace: Duration::ZERO,
            ..Default::default()
        })
        .unwrap();
        assert!(matches!(p.missing(JobKind::Job, 1), ProviderError::NotFound(_)));
        let p = AapProvider::new(AapOptions {
            base_url: "http://127.0.0.1:1".into(),
            purge_grace: Duration::from_secs(3600),
            ..Default::default()
        })
        .unwrap();
        let first = p.missing(JobKind::WorkflowJob, 2);
        assert!(matches!(&first, ProviderError::Transient(m) if m.contains("workflow job 2")), "{first:?}");
        // Stable text: the engine writes a changed message only.
        assert_eq!(p.missing(JobKind::WorkflowJob, 2), first);
    }
}
