//! The automation backend contract. A provider launches, observes, cancels and finds jobs;
//! it never touches the store. Implementations: `slipway-ansible` (local playbooks) and the
//! AAP provider.
//!
//! Guarantees a provider must give:
//! * `launch` starts at most one job per idempotency key, and reports
//!   [`ProviderError::Indeterminate`] when it cannot tell whether a job started.
//! * `find` answers `Ok(None)` only when it is sure no job exists for the key.
//! * `cancel` is idempotent; `Ok(CancelOutcome::Requested)` does not mean the job has ended.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use slipway_domain::JobState;
use slipway_domain::reconcile::{Failure, FailureKind};

/// Everything a job needs to know about the resource it acts on.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRequest {
    pub idempotency_key: String,
    pub action: JobAction,
    /// Resource type kind, e.g. `VirtualNetwork` (names playbooks and templates).
    pub kind: String,
    /// Lowercased `namespace/type`.
    pub resource_type: String,
    pub resource_id: String,
    pub resource_name: String,
    pub location: Option<String>,
    pub tags: serde_json::Map<String, Value>,
    pub properties: Value,
    pub operation_id: Option<String>,
    pub config_version: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobAction {
    Create,
    Delete,
}

impl JobAction {
    pub fn as_str(self) -> &'static str {
        match self {
            JobAction::Create => "create",
            JobAction::Delete => "delete",
        }
    }
}

/// A provider's reference to a job it started.
#[derive(Clone, Debug, PartialEq)]
pub struct JobHandle {
    pub job_id: String,
    /// Provider-specific data kept with the job (e.g. which AAP endpoint it lives under).
    pub data: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Launched {
    pub handle: JobHandle,
    pub state: JobState,
    /// The playbook or template that runs.
    pub template: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobStatus {
    pub state: JobState,
    /// The provider's status word or a short explanation.
    pub message: String,
    /// Failure details: the failed task's message, a traceback.
    pub error_details: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Cancellation requested; keep polling until the job is terminal.
    Requested,
    /// The job had already finished.
    AlreadyFinished,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("rate limited, retry after {retry_after:?}: {message}")]
    RateLimited { retry_after: Duration, message: String },
    #[error("not found: {0}")]
    NotFound(String),
    #[error("{0}")]
    Transient(String),
    /// The request may have taken effect; the caller must `find` before relaunching.
    #[error("outcome unknown: {0}")]
    Indeterminate(String),
    #[error("{0}")]
    Permanent(String),
}

impl From<ProviderError> for Failure {
    fn from(e: ProviderError) -> Self {
        let message = match &e {
            ProviderError::RateLimited { message, .. } => message.clone(),
            ProviderError::NotFound(m)
            | ProviderError::Transient(m)
            | ProviderError::Indeterminate(m)
            | ProviderError::Permanent(m) => m.clone(),
        };
        let kind = match e {
            ProviderError::RateLimited { retry_after, .. } => FailureKind::RateLimited { retry_after },
            ProviderError::NotFound(_) => FailureKind::NotFound,
            ProviderError::Transient(_) => FailureKind::Transient,
            ProviderError::Indeterminate(_) => FailureKind::Indeterminate,
            ProviderError::Permanent(_) => FailureKind::Permanent,
        };
        Failure { kind, message }
    }
}

#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The configured instance name (e.g. `ansible`, `aap-prod`).
    fn name(&self) -> &str;

    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, ProviderError>;

    /// Status of many jobs at once; one result per handle, in order.
    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>>;

    async fn cancel(&self, handle: &JobHandle) -> Result<CancelOutcome, ProviderError>;

    /// The job launched with this idempotency key, if one exists.
    async fn find(&self, request: &LaunchRequest) -> Result<Option<Launched>, ProviderError>;

    /// Stops background work (e.g. lets cancellations finish) before the process exits.
    async fn shutdown(&self) {}
}
