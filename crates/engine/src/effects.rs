//! Performs one effect against the provider that owns the job. This is the only place the
//! engine talks to automation backends.

use std::collections::HashMap;
use std::sync::Arc;

use slipway_domain::reconcile::{Effect, Failure, FailureKind, JobStart, Observation, Outcome};
use slipway_domain::resource::Snapshot;
use slipway_domain::{Job, JobType, ProviderName, ResourceRecord, Spec, TypeKey, TypePolicy};
use slipway_provider::{
    CancelOutcome, JobAction, JobHandle, LaunchRequest, Launched, Provider, RelatedResource, RunMode,
};
use slipway_secrets::Keyring;

use crate::batch::StatusBatcher;

/// Provider instances by configured name.
pub type Providers = HashMap<ProviderName, Arc<dyn Provider>>;

/// Status batchers by provider name.
pub(crate) type Batchers = HashMap<ProviderName, StatusBatcher>;

/// What performing an effect needs besides the snapshot.
pub(crate) struct Backends<'a> {
    pub providers: &'a Providers,
    pub batchers: &'a Batchers,
    pub secrets: Option<&'a Keyring>,
    /// The configured types: what a job is told a resource's type is.
    pub types: &'a HashMap<TypeKey, TypePolicy>,
    pub metrics: &'a slipway_metrics::EngineMetrics,
}

impl Backends<'_> {
    /// `Namespace/type` as configured, whatever casing the resource's id was written in.
    fn declared_type(&self, id: &slipway_domain::ArmId) -> String {
        let key = id.type_key();
        self.types.get(&key).map(|p| p.type_name.clone()).filter(|t| !t.is_empty()).unwrap_or_else(|| key.to_string())
    }
}

/// What the provider is asked to run. Sealed secret properties stay sealed here; see
/// [`open_secrets`]. The spec is the resource's, or for a what-if's jobs the one proposed.
fn launch_request(snap: &Snapshot, res: &ResourceRecord, job: &Job) -> LaunchRequest {
    let spec = job_spec(snap, res, job);
    LaunchRequest {
        idempotency_key: job.idempotency_key.clone(),
        action: match job.job_type {
            JobType::Provision => JobAction::Create,
            JobType::Deprovision => JobAction::Delete,
            JobType::Check if job.action == "delete" => JobAction::Delete,
            JobType::Check => JobAction::Create,
            JobType::Preflight => JobAction::Validate,
            JobType::Action => JobAction::Run(job.action.clone()),
        },
        kind: res.kind.clone(),
        resource_type: res.id.type_key().to_string(),
        resource_id: res.id.clone(),
        location: spec.location.clone(),
        tags: spec.tags.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect(),
        properties: spec.properties.clone(),
        outputs: res.outputs.clone(),
        operation_id: job.operation_id.clone(),
        config_version: job.config_version.clone(),
        intended_at: Some(job.timestamp),
        context: res.job_context.clone(),
        secrets: serde_json::Map::new(),
        parent: None,
        references: Default::default(),
        parameters: serde_json::Value::Null,
        mode: if job.job_type == JobType::Check { RunMode::Check } else { RunMode::Run },
    }
}

/// The spec a job acts on: a what-if's proposal for its jobs (its delete's: the spec it
/// would remove), the resource's for every other job.
fn job_spec<'a>(snap: &'a Snapshot, res: &'a ResourceRecord, job: &Job) -> &'a Spec {
    job.operation_id
        .as_ref()
        .and_then(|id| snap.operation(id))
        .and_then(|o| o.what_if.as_ref())
        .and_then(|w| w.after.as_ref())
        .unwrap_or(&res.spec)
}

/// The launch request with its sealed secret properties opened and moved out of
/// `properties` into `secrets`, for the job itself (so a playbook that records its
/// properties does not record secrets).
fn open_secrets(mut req: LaunchRequest, secrets: Option<&Keyring>) -> Result<LaunchRequest, Failure> {
    let Some(props) = req.properties.as_object_mut() else { return Ok(req) };
    let sealed: Vec<String> =
        props.iter().filter(|(_, v)| slipway_secrets::sealed_text(v).is_some()).map(|(k, _)| k.clone()).collect();
    if sealed.is_empty() {
        return Ok(req);
    }
    let keyring = secrets.ok_or_else(|| Failure {
        kind: FailureKind::Permanent,
        message: "the resource has secret properties but no secret key is configured ([secrets] key_files)".into(),
    })?;
    let mut only_sealed = serde_json::Map::new();
    for name in sealed {
        if let Some(v) = props.remove(&name) {
            only_sealed.insert(name, v);
        }
    }
    let opened = keyring
        .open_properties(&serde_json::Value::Object(only_sealed))
        .map_err(|e| Failure { kind: FailureKind::Permanent, message: e.to_string() })?;
    req.secrets = opened.as_object().cloned().unwrap_or_default();
    Ok(req)
}

fn started(l: Launched) -> JobStart {
    JobStart { job_id: l.handle.job_id, handle: l.handle.data, state: l.state, template: l.template }
}

/// The provider's handle of a job it confirmed; none before it has an id.
fn handle(job: &Job) -> Option<JobHandle> {
    Some(JobHandle { job_id: job.job_id.clone()?, data: job.handle.clone() })
}

/// What a provider answers for a job it does not know: a job without an id is one.
fn no_job_yet(job: &Job) -> Outcome {
    Outcome::Failed(Failure {
        kind: FailureKind::NotFound,
        message: format!("job {} has no provider job id yet", job.idempotency_key),
    })
}

#[derive(Clone, Copy)]
enum Io {
    Launch,
    Find,
    Poll,
    Cancel,
    Kill,
}

impl Io {
    fn as_str(self) -> &'static str {
        match self {
            Io::Launch => "launch",
            Io::Find => "find",
            Io::Poll => "poll",
            Io::Cancel => "cancel",
            Io::Kill => "kill",
        }
    }
}

/// `ok`, or the class of the failure (as the domain folds it in).
fn outcome_word(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Failed(f) => match f.kind {
            FailureKind::RateLimited { .. } => "rate_limited",
            FailureKind::NotFound => "not_found",
            FailureKind::Transient => "transient",
            FailureKind::Indeterminate => "indeterminate",
            FailureKind::Permanent => "permanent",
            FailureKind::Unsupported => "unsupported",
        },
        _ => "ok",
    }
}

/// Runs `effect` for `res` and reports what happened; `None` for `Sleep`, which needs no
/// I/O. Provider errors are outcomes the domain knows how to fold in.
pub(crate) async fn perform(backends: &Backends<'_>, snap: &Snapshot, effect: &Effect) -> Option<Outcome> {
    let res = snap.resource.as_ref()?;
    let (key, io, duplicate) = match effect {
        Effect::Launch { key } => (key, Io::Launch, None),
        Effect::Find { key } => (key, Io::Find, None),
        Effect::Poll { key } => (key, Io::Poll, None),
        Effect::Cancel { key } => (key, Io::Cancel, None),
        Effect::Kill { key } => (key, Io::Kill, None),
        Effect::PollDuplicate { key, job_id } => (key, Io::Poll, Some(job_id)),
        Effect::CancelDuplicate { key, job_id } => (key, Io::Cancel, Some(job_id)),
        // Not the provider's: the worker runs a cascade itself.
        Effect::Sleep { .. } | Effect::DeleteChildren { .. } => return None,
    };
    let job = match duplicate {
        None => res.jobs.iter().find(|j| &j.idempotency_key == key),
        Some(id) => res.duplicate_jobs.iter().find(|j| j.job_id.as_ref() == Some(id)),
    };
    let Some(job) = job else {
        return Some(Outcome::Failed(Failure {
            kind: FailureKind::NotFound,
            message: format!("job {key} is not in the history"),
        }));
    };
    if duplicate.is_some() && matches!(io, Io::Cancel) {
        tracing::error!(resource = %res.id, key = %key, job = %job.job_id_text(), provider = %job.provider,
            "canceling a second job the provider started for one idempotency key");
    }
    let outcome = perform_io(backends, snap, res, job, io).await;
    count(backends, job, io, &outcome);
    Some(outcome)
}

/// Polls `job` at its provider: [`perform`]'s `Poll` for a worker that kept only the job.
pub(crate) async fn poll(backends: &Backends<'_>, job: &Job) -> Outcome {
    let outcome = match backends.providers.get(&job.provider) {
        Some(provider) => poll_io(backends, provider.as_ref(), job).await,
        None => not_configured(job),
    };
    count(backends, job, Io::Poll, &outcome);
    outcome
}

fn count(backends: &Backends<'_>, job: &Job, io: Io, outcome: &Outcome) {
    let labels = slipway_metrics::JobRequestLabels {
        provider: job.provider.to_string(),
        request: io.as_str().into(),
        outcome: outcome_word(outcome).into(),
    };
    backends.metrics.job_requests.get_or_create(&labels).inc();
}

fn not_configured(job: &Job) -> Outcome {
    Outcome::Failed(Failure {
        kind: FailureKind::Permanent,
        message: format!("provider '{}' is not configured", job.provider),
    })
}

/// A resource a job depends on, as the job may see it: secret properties (sealed) left out.
fn related_view(rec: &ResourceRecord, backends: &Backends<'_>) -> RelatedResource {
    let properties = match &rec.spec.properties {
        serde_json::Value::Object(m) => serde_json::Value::Object(slipway_secrets::without_secrets(m)),
        other => other.clone(),
    };
    RelatedResource {
        id: rec.id.to_string(),
        resource_type: backends.declared_type(&rec.id),
        name: rec.id.name.clone(),
        properties,
        outputs: rec.outputs.clone(),
    }
}

fn parent_of(snap: &Snapshot, res: &ResourceRecord, backends: &Backends<'_>) -> Option<RelatedResource> {
    snap.related(&res.id.parent()?).map(|p| related_view(p, backends))
}

/// The referenced resources by property; `ids[2]` entries gather into a list `ids`.
fn references_of(
    snap: &Snapshot,
    res: &ResourceRecord,
    backends: &Backends<'_>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for r in &res.references {
        let Some(rec) = snap.related(&r.id) else { continue };
        let view = related_view(rec, backends).extra_vars();
        match r.property.split_once('[') {
            Some((list, _)) => {
                if let serde_json::Value::Array(items) =
                    out.entry(list.to_string()).or_insert_with(|| serde_json::json!([]))
                {
                    items.push(view);
                }
            }
            None => {
                out.insert(r.property.clone(), view);
            }
        }
    }
    out
}

async fn perform_io(backends: &Backends<'_>, snap: &Snapshot, res: &ResourceRecord, job: &Job, io: Io) -> Outcome {
    let Some(provider) = backends.providers.get(&job.provider) else { return not_configured(job) };
    match io {
        Io::Launch => {
            let parameters =
                job.operation_id.as_ref().and_then(|id| snap.operation(id)).and_then(|o| o.action.as_ref());
            let req = LaunchRequest {
                resource_type: backends.declared_type(&res.id),
                parent: parent_of(snap, res, backends),
                references: references_of(snap, res, backends),
                parameters: parameters.map(|a| a.parameters.clone()).unwrap_or_default(),
                ..launch_request(snap, res, job)
            };
            let req = match open_secrets(req, backends.secrets) {
                Ok(req) => req,
                Err(f) => return Outcome::Failed(f),
            };
            match provider.launch(&req).await {
                Ok(l) => Outcome::Launched(started(l)),
                Err(e) => Outcome::Failed(e.into()),
            }
        }
        Io::Find => match provider.find(&launch_request(snap, res, job)).await {
            Ok(found) => {
                if found.len() > 1 {
                    let ids: Vec<&str> = found.iter().map(|l| l.handle.job_id.as_str()).collect();
                    tracing::error!(resource = %res.id, key = %job.idempotency_key, provider = %job.provider, jobs = ?ids,
                        "the provider holds more than one job for one idempotency key: a launch request was \
                         processed after its ambiguity window; keeping the first, canceling the others");
                }
                Outcome::Found(found.into_iter().map(started).collect())
            }
            Err(e) => Outcome::Failed(e.into()),
        },
        Io::Poll => poll_io(backends, provider.as_ref(), job).await,
        Io::Cancel | Io::Kill => {
            let Some(handle) = handle(job) else { return no_job_yet(job) };
            let asked = match io {
                Io::Kill => provider.kill(&handle).await,
                _ => provider.cancel(&handle).await,
            };
            match asked {
                Ok(CancelOutcome::Requested) => Outcome::CancelRequested,
                Ok(CancelOutcome::AlreadyFinished) => Outcome::CancelNotNeeded,
                Err(e) => Outcome::Failed(e.into()),
            }
        }
    }
}

/// One job's status, through the provider's status batcher when it has one.
async fn poll_io(backends: &Backends<'_>, provider: &dyn Provider, job: &Job) -> Outcome {
    let Some(handle) = handle(job) else { return no_job_yet(job) };
    let status =
        match backends.batchers.get(&job.provider) {
            Some(batcher) => batcher.status(handle).await,
            None => provider.status(&[handle]).await.pop().unwrap_or_else(|| {
                Err(slipway_provider::ProviderError::Transient("provider returned no status".into()))
            }),
        };
    match status {
        Ok(s) => Outcome::Observed(Observation {
            state: s.state,
            message: s.message,
            error_details: s.error_details,
            stats: s.stats,
            changes: s.changes,
            progress: s.progress,
        }),
        Err(e) => Outcome::Failed(e.into()),
    }
}
