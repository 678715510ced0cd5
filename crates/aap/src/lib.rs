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
//! * **Check mode** (`LaunchRequest::check_mode`, a what-if): the launch adds
//!   `"job_type": "check"` (and `"diff_mode": true` when the template prompts for it). AAP
//!   would silently run a job template that does not prompt for its job type as `run`, so
//!   the template must be a job template with `ask_job_type_on_launch` (read with its
//!   resolution), not sliced: otherwise the launch is refused unsent,
//!   [`ProviderError::Unsupported`] naming the template and the setting (workflow job
//!   templates have no job type). An answer saying `job_type` was ignored all the same means
//!   a `run` job started: it is cancelled, logged as an error, and the launch fails
//!   permanently. A check job's handle carries `"check": true` ([`is_check`]; `find` and
//!   `jobs_since` set it from the job's own `job_type`), and its status, once it ended,
//!   carries its changed tasks (`JobStatus::changes`, from its `runner_on_ok` events with
//!   `changed`), read once AAP has saved the job's events (until then it is reported
//!   `Running`).
//! * **Status** is batched: one `GET …/jobs/?id__in=…&page_size=200` (and `workflow_jobs/`)
//!   per 200 handles, following `next` links. A job that turns `failed`/`error` gets its
//!   detail fetched once (the list view has no `result_traceback`). A job missing from the
//!   list is `Transient` for `purge_grace`, then `NotFound` (the engine fails it). A
//!   playbook job that has run `progress_every` reports its progress (the count of its
//!   `playbook_on_task_start` events and the newest one's task) at most once per interval,
//!   within a provider-wide `progress_reads_per_second`.
//! * **Cancel** POSTs `…/{id}/cancel/`: 202 = requested (keep polling), 405 = already over.
//! * **Find** lists the template's jobs newest first and matches the
//!   `slipway_idempotency_key` extra var; `Ok(None)` only after the whole list (or the
//!   configured window) was read without error.
//! * **Listing** (`jobs_since`) reads `jobs/` and `workflow_jobs/` (`created__gte` the
//!   bound) and keeps the rows whose extra vars carry a key and name a resource, in either
//!   envelope; a slice or workflow node stands for its workflow job, as in `find`.
//!
//! Idempotent requests (GETs, cancel) are retried on 429/502/503/504 and transport errors
//! with exponential backoff, never sooner than `Retry-After`; the launch POST never is.
//! A `Retry-After` on a `429` (or a `503`) holds *every* request of the provider instance
//! until the advertised time (a throttle gate, see `http`): requests wait for it up to
//! `max_retry_wait` in all, or fail `RateLimited` with the remaining time without being sent;
//! the launch POST never waits, it is refused while the gate is closed. Every request carries
//! `User-Agent: slipway/<version> (<client_id>)`, so AAP (and the simulator) can tell Slipway
//! nodes apart. Credentials never appear in logs, errors or status ([`Secret`]).
//!
//! Time: waits (the throttle gate, retry backoff, the purge grace) run on tokio's clock, so a
//! test with paused time controls them; wall-clock readings (an HTTP-date `Retry-After`,
//! `find`'s `created__gt`) come from [`AapOptions::clock`].
//!
//! Modules: `options` (options, errors, construction), `template` (names, resolution, the
//! cache), `launch`, `status`, `changes` (a check job's changed tasks), `progress` (a running job's
//! task count), `find`, `listing`,
//! `job` (kinds, status words, handles, cancel), `http` (requests, retries, the throttle
//! gate), `envelope` (the extra vars), `naming`, `secret`.

mod changes;
mod envelope;
mod find;
mod http;
mod job;
mod launch;
mod listing;
mod naming;
mod notification;
mod options;
mod progress;
mod secret;
mod status;
mod template;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use slipway_domain::time::Clock;
use slipway_provider::{
    CancelOutcome, JobAction, JobHandle, JobStatus, LaunchRequest, Launched, ListedJob, Provider, ProviderError,
};
use tokio::time::Instant;

use http::Http;
use status::Bounded;
use template::Template;

pub use envelope::{Envelope, KEY_VAR, OSAC_API_VERSION, extra_vars, key_of};
pub use job::{JobKind, is_check, map_status, parse_handle};
pub use naming::{TemplateNaming, kebab};
pub use options::{AapAuth, AapError, AapOptions};
pub use secret::{Secret, SecretError};
pub use status::{MAX_DETAILS, PAGE_SIZE};

/// Locks one of the provider's maps.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks is plain maps, consistent across a panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The provider; built by [`AapProvider::new`], used through [`Provider`]. Its parts live in
/// the modules named in the crate doc.
pub struct AapProvider {
    name: String,
    /// Where the controller's web interface shows jobs (`…/#/jobs/`, `…/execution/jobs/`).
    ui: String,
    http: Http,
    /// Wall-clock time (`find`'s window); waits use tokio's clock.
    clock: Arc<dyn Clock>,
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
    /// The changed tasks of ended check-mode jobs.
    changes: Mutex<Bounded<(JobKind, u64), Vec<slipway_provider::TaskChange>>>,
    /// When a job was first seen missing from AAP's list.
    missing: Mutex<Bounded<(JobKind, u64), Instant>>,
    /// How often a running job's progress is read, and from what age.
    progress_every: Duration,
    /// Running playbook jobs whose progress is read, by id.
    followed: Mutex<Bounded<u64, progress::Followed>>,
    /// Progress reads left to this provider, and how fast they come back.
    progress_budget: Mutex<slipway_domain::rate::TokenBucket>,
    progress_rate: slipway_domain::rate::Rate,
}

impl AapProvider {
    /// How long this provider still holds every request for AAP's `Retry-After`; `None`
    /// while it sends. Observable, so a caller can tell a refused launch from a slow one.
    pub fn throttled_for(&self) -> Option<Duration> {
        self.http.throttled_for()
    }
}

/// Appends context to an error's message.
fn append(e: &mut ProviderError, text: &str) {
    match e {
        ProviderError::RateLimited { message, .. }
        | ProviderError::NotFound(message)
        | ProviderError::Transient(message)
        | ProviderError::Indeterminate(message)
        | ProviderError::Permanent(message)
        | ProviderError::Unsupported(message) => message.push_str(text),
    }
}

#[async_trait]
impl Provider for AapProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, ProviderError> {
        self.launch_once(request).await
    }

    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        self.statuses(handles).await
    }

    async fn cancel(&self, handle: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        let (kind, id) = parse_handle(handle)?;
        let outcome = self.cancel_job(kind, id).await;
        tracing::info!(provider = %self.name, job = id, kind = kind.as_str(), outcome = ?outcome, "AAP cancel");
        outcome
    }

    /// The template the job would run, looked up at the controller as a launch would.
    async fn check_job(&self, kind: &str, action: &JobAction) -> Option<Result<String, ProviderError>> {
        let name = match self.naming.template_name(kind, action) {
            Ok(name) => name,
            Err(e) => return Some(Err(ProviderError::Permanent(e))),
        };
        Some(
            self.launchable_template(&name).await.map(|t| format!("{} {name:?} (id {})", t.kind.template_noun(), t.id)),
        )
    }

    /// The job's output page in the controller's web interface.
    fn job_link(&self, handle: &JobHandle) -> Option<String> {
        let (kind, id) = parse_handle(handle).ok()?;
        let section = match kind {
            JobKind::Job => "playbook",
            JobKind::WorkflowJob => "workflow",
        };
        Some(format!("{}{section}/{id}/output", self.ui))
    }

    async fn output(&self, handle: &JobHandle, offset: u64) -> Result<slipway_provider::JobOutput, ProviderError> {
        let (kind, id) = parse_handle(handle)?;
        self.job_output(kind, id, offset).await
    }

    /// `GET v2/me/`: the controller answers, and it accepts the credentials.
    async fn check(&self) -> Result<(), ProviderError> {
        let url = self.http.url("v2/me/");
        match self.http.get_json::<serde_json::Value>(&url).await {
            Ok(_) => Ok(()),
            Err(http::HttpError::Status { status: 401 | 403, .. }) => Err(ProviderError::Permanent(format!(
                "the controller refused this provider's credentials (GET {})",
                url.path()
            ))),
            Err(e) => Err(e.into_provider()),
        }
    }

    async fn find(&self, request: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        self.find_by_key(request).await
    }

    async fn jobs_since(&self, since: Option<slipway_domain::Timestamp>) -> Result<Vec<ListedJob>, ProviderError> {
        self.list_keyed_jobs(since).await
    }

    fn job_from_notification(&self, body: &[u8]) -> Result<Option<String>, String> {
        notification::job_from_notification(body)
    }
}
