//! The automation backend contract. A provider launches, observes, cancels and finds jobs;
//! it never touches the store. Implementations: `slipway-ansible` (local playbooks) and the
//! AAP provider.
//!
//! Guarantees a provider must give:
//! * `launch` starts at most one job per idempotency key, and reports
//!   [`ProviderError::Indeterminate`] when it cannot tell whether a job started.
//! * `find` lists every job the provider has for the key, oldest first, and answers an
//!   empty list only when it is sure none exists *now*. A launch request still being
//!   processed may create one later: the engine does not relaunch before the type's
//!   launch-ambiguity window has passed since the last request (see `docs/exactly-once.md`).
//! * `cancel` is idempotent; `Ok(CancelOutcome::Requested)` does not mean the job has ended.
//!
//! What every provider shares is here too: the `slipway` extra-vars envelope
//! ([`slipway_extra_vars`]) and the naming rule — [`explicit_name`] (a blank one counts as
//! none), else [`conventional_name`] over [`kebab`] of the kind, by the job's word in
//! [`JobAction`] (`create`, `delete`, `validate`, an action's name).

mod extra_vars;
mod naming;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use slipway_domain::reconcile::{Failure, FailureKind};
use slipway_domain::{ArmId, ConfigVersion, IdempotencyKey, JobId, JobState, OperationId};

pub use extra_vars::{KEY_VAR, requested_by, slipway_extra_vars, tenant};
pub use naming::{ExplicitNames, conventional_name, explicit_name, kebab};

/// Everything a job needs to know about the resource it acts on.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRequest {
    pub idempotency_key: IdempotencyKey,
    pub action: JobAction,
    /// Resource type kind, e.g. `VirtualNetwork` (names playbooks and templates).
    pub kind: String,
    /// `Namespace/type` as configured (`Slipway.Example/virtualNetworks`): the casing the
    /// platform team declared, which a stored id may not share.
    pub resource_type: String,
    /// The resource's id; its last name is the resource's name.
    pub resource_id: ArmId,
    pub location: Option<String>,
    pub tags: serde_json::Map<String, Value>,
    pub properties: Value,
    /// What earlier jobs reported (`set_stats` `slipway_outputs`), e.g. an instance id the
    /// delete job needs.
    pub outputs: serde_json::Map<String, Value>,
    /// The operation the job serves (none for a drift check the engine started).
    pub operation_id: Option<OperationId>,
    pub config_version: ConfigVersion,
    /// When the launch intent was recorded: no job of this key is older (give or take the
    /// clocks' skew), so a provider may bound its `find` by it.
    pub intended_at: Option<slipway_domain::Timestamp>,
    /// Who asked for this and for which tenant (absent for resources stored before Slipway
    /// recorded it).
    pub context: Option<slipway_domain::JobContext>,
    /// Secret properties, opened: passed as `slipway.secrets`, never inside `properties`.
    pub secrets: serde_json::Map<String, Value>,
    /// A child resource's parent, as the job may read it (`slipway.parent`).
    pub parent: Option<RelatedResource>,
    /// The resources its properties reference, by property (`slipway.references`): one
    /// [`RelatedResource::extra_vars`] per reference, a list for a list property.
    pub references: serde_json::Map<String, Value>,
    /// A POST action's request body (`slipway.parameters`; `null` for other jobs).
    pub parameters: Value,
    /// Run the job's playbook or template in Ansible's check mode with diff (`--check
    /// --diff`; AWX's `job_type: check` with `diff_mode`): it reports what it would change
    /// and changes nothing. Its handle says so, so that [`Provider::status`] reads the
    /// changed tasks ([`JobStatus::changes`]) once it ends. A provider that cannot run one
    /// answers [`ProviderError::Unsupported`] naming what is missing.
    pub mode: RunMode,
}

/// Whether a job changes anything: Ansible's normal run, or its check mode with diff (AWX
/// calls the two `job_type` `run` and `check`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RunMode {
    #[default]
    Run,
    /// Report what would change and change nothing (`--check --diff`).
    Check,
}

impl LaunchRequest {
    /// The resource's name: the last segment of its id.
    pub fn resource_name(&self) -> &str {
        &self.resource_id.name
    }

    pub fn is_check(&self) -> bool {
        self.mode == RunMode::Check
    }
}

/// A resource a job depends on (a child's parent): its id, type, properties (secrets left
/// out) and outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct RelatedResource {
    pub id: String,
    /// `Namespace/type` as configured (`Slipway.Example/virtualNetworks`).
    pub resource_type: String,
    pub name: String,
    pub properties: Value,
    pub outputs: serde_json::Map<String, Value>,
}

impl RelatedResource {
    /// `{"id", "type", "name", "properties", "outputs"}`, as jobs receive it.
    pub fn extra_vars(&self) -> Value {
        json!({
            "id": self.id,
            "type": self.resource_type,
            "name": self.name,
            "properties": self.properties,
            "outputs": self.outputs,
        })
    }
}

/// What a job does; its word names the job's playbook or template
/// (`{word}-{kind}`: `create-virtual-network`, `restart-compute-instance`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobAction {
    Create,
    Delete,
    /// The type's preflight checks.
    Validate,
    /// A POST action, by name (`restart`).
    Run(String),
}

impl JobAction {
    pub fn as_str(&self) -> &str {
        match self {
            JobAction::Create => "create",
            JobAction::Delete => "delete",
            JobAction::Validate => "validate",
            JobAction::Run(name) => name,
        }
    }
}

/// A provider's reference to a job it started.
#[derive(Clone, Debug, PartialEq)]
pub struct JobHandle {
    pub job_id: JobId,
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

/// A job a provider lists ([`Provider::jobs_since`]), with what its extra vars say it was for.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedJob {
    pub key: IdempotencyKey,
    /// The ARM id of the resource the job was launched for.
    pub resource_id: String,
    /// Its [`JobAction`] word: `create`, `delete`, `validate` or an action's name.
    pub action: String,
    pub job: Launched,
    /// When the backend says the job was created, if it says.
    pub launched_at: Option<slipway_domain::Timestamp>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobStatus {
    pub state: JobState,
    /// The provider's status word or a short explanation.
    pub message: String,
    /// Failure details: the failed task's message, a traceback.
    pub error_details: String,
    /// What the job reported with `set_stats` (the runner's `artifact_data`, AWX's
    /// `artifacts`): [`OUTPUTS_STAT`], a preflight job's [`CHECKS_STAT`]. `None`: nothing.
    pub stats: Option<Value>,
    /// A check-mode job that ended: every task that reported a change, in the order they
    /// ran, at most [`MAX_TASK_CHANGES`] ([`TaskChange::from_event`] reads each from a
    /// `runner_on_ok` event). `None` for any other job, and while one runs.
    pub changes: Option<Vec<TaskChange>>,
    /// How far the job has got: the tasks it started, the one it runs, and how many its
    /// playbook has where the provider can count them. `None`: not read this time.
    pub progress: Option<JobProgress>,
}

impl JobStatus {
    /// A status without failure details or outputs.
    pub fn new(state: JobState, message: impl Into<String>) -> Self {
        JobStatus {
            state,
            message: message.into(),
            error_details: String::new(),
            stats: None,
            changes: None,
            progress: None,
        }
    }
}

pub use slipway_domain::progress::JobProgress;
pub use slipway_domain::whatif::{MAX_TASK_CHANGES, TaskChange};

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
    /// The backend cannot run what was asked in the way it was asked (a check-mode launch
    /// of a template that does not prompt for its job type); nothing happened.
    #[error("{0}")]
    Unsupported(String),
}

impl From<ProviderError> for Failure {
    fn from(e: ProviderError) -> Self {
        let message = match &e {
            ProviderError::RateLimited { message, .. } => message.clone(),
            ProviderError::NotFound(m)
            | ProviderError::Transient(m)
            | ProviderError::Indeterminate(m)
            | ProviderError::Permanent(m)
            | ProviderError::Unsupported(m) => m.clone(),
        };
        let kind = match e {
            ProviderError::RateLimited { retry_after, .. } => FailureKind::RateLimited { retry_after },
            ProviderError::NotFound(_) => FailureKind::NotFound,
            ProviderError::Transient(_) => FailureKind::Transient,
            ProviderError::Indeterminate(_) => FailureKind::Indeterminate,
            ProviderError::Permanent(_) => FailureKind::Permanent,
            ProviderError::Unsupported(_) => FailureKind::Unsupported,
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

    /// A forced cancel: stop the job now, without the grace a `cancel` gives it (the local
    /// provider kills its processes at once). By default a `cancel` — for a backend whose
    /// cancel is already a request that is not waited for (AAP).
    async fn kill(&self, handle: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        self.cancel(handle).await
    }

    /// Every job launched with this idempotency key, oldest first (more than one means a
    /// launch request was processed twice; the engine keeps the first and cancels the rest).
    async fn find(&self, request: &LaunchRequest) -> Result<Vec<Launched>, ProviderError>;

    /// Every job this provider still holds that carries a Slipway idempotency key, launched
    /// at or after `since` (by the backend's clock; `None`: all of them), oldest first.
    /// Used after a store was restored from a backup (`slipway restore`): what ran after the
    /// backup is found here, by key, and adopted or reported — never launched again.
    async fn jobs_since(&self, since: Option<slipway_domain::Timestamp>) -> Result<Vec<ListedJob>, ProviderError> {
        let _ = since;
        Err(ProviderError::Permanent(format!("provider '{}' cannot list its jobs", self.name())))
    }

    /// Whether the backend can take work now: reachable, and its credentials accepted.
    /// Checked at startup and by `/readyz`; `Err` says why not.
    async fn check(&self) -> Result<(), ProviderError> {
        Ok(())
    }

    /// Stops background work (e.g. lets cancellations finish) before the process exits.
    async fn shutdown(&self) {}

    /// What the job has printed from byte `offset` of its output on, for `GET …/logs`: at
    /// most [`OUTPUT_CHUNK_BYTES`], cut after a line end when cut at all. `NotFound` when
    /// the output is gone (its retention passed, or the controller purged the job).
    async fn output(&self, handle: &JobHandle, offset: u64) -> Result<JobOutput, ProviderError> {
        let _ = (handle, offset);
        Err(ProviderError::Permanent(format!("provider '{}' keeps no job output", self.name())))
    }

    /// Asks the backend whether a job of `kind` doing `action` could start
    /// (`check-config --online`): the template or playbook it would run, or why not. `None`:
    /// nothing to ask beyond what the configuration already shows.
    async fn check_job(&self, kind: &str, action: &JobAction) -> Option<Result<String, ProviderError>> {
        let _ = (kind, action);
        None
    }

    /// The job's page in the backend's own interface (an AAP controller's job output), if it
    /// has one. No I/O: built from the handle and the configuration.
    fn job_link(&self, handle: &JobHandle) -> Option<String> {
        let _ = handle;
        None
    }

    /// Removes what finished jobs left behind once the provider's retention has passed
    /// since they ended (the local provider's job directories, and their output with them);
    /// returns how many jobs' leftovers went. Called on the engine's sweep interval.
    async fn sweep(&self) -> usize {
        0
    }

    /// What a push notification from this backend (the body its webhook POSTs) says:
    /// `Ok(Some(job id))` when a job ended and should be polled now, `Ok(None)` when it
    /// changes nothing a client waits for (the job merely started). `Err` says why the body
    /// is not a notification this provider sends. A hint only changes timing: a job's state
    /// is always read with `status`.
    fn job_from_notification(&self, body: &[u8]) -> Result<Option<String>, String> {
        let _ = body;
        Err(format!("provider '{}' sends no job notifications", self.name()))
    }

    /// Where to say that one of this provider's jobs ended, for a provider that learns it
    /// without being asked (the local provider waits on its runner processes): the engine
    /// then polls the job at once instead of at its next poll time. A hint only changes
    /// timing, like a webhook's: the job's state is still read with `status`.
    fn on_job_end(&self, hint: JobEndHint) {
        let _ = hint;
    }
}

/// Told a job's id when [`Provider::on_job_end`]'s provider saw the job end.
pub type JobEndHint = std::sync::Arc<dyn Fn(&JobId) + Send + Sync>;

/// The most output one [`Provider::output`] call returns.
pub const OUTPUT_CHUNK_BYTES: usize = 256 * 1024;

/// A piece of a job's output ([`Provider::output`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobOutput {
    /// The bytes from the requested offset on, as text (invalid UTF-8 replaced).
    pub text: String,
    /// Where the next read continues: the requested offset plus the bytes read.
    pub next_offset: u64,
}

impl JobOutput {
    /// `bytes` read at `offset`, of which `more` says whether the output goes on past them:
    /// then they are cut after their last line end, so no line (or character) is split.
    pub fn of(bytes: &[u8], offset: u64, more: bool) -> JobOutput {
        let keep = match (more, bytes.iter().rposition(|b| *b == b'\n')) {
            (true, Some(end)) => end + 1,
            _ => bytes.len(),
        };
        JobOutput { text: String::from_utf8_lossy(&bytes[..keep]).into_owned(), next_offset: offset + keep as u64 }
    }
}

pub use slipway_domain::job::{CHECKS_STAT, OUTPUTS_STAT};

/// A job's `set_stats` data, if it reported any (an empty mapping is nothing).
pub fn stats_in(artifacts: Option<&Value>) -> Option<Value> {
    artifacts.filter(|a| a.as_object().is_some_and(|m| !m.is_empty())).cloned()
}

/// The message of a failed Ansible task result (`res` of a `runner_on_failed` event, the
/// same in ansible-runner artifacts and AWX job events): `msg`, else `stderr`, else
/// `module_stderr`.
pub fn task_failure_message(res: Option<&Value>) -> String {
    ["msg", "stderr", "module_stderr"]
        .iter()
        .find_map(|k| match res?.get(*k)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Value::String(_) | Value::Null => None,
            other => Some(other.to_string()),
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_messages_prefer_msg() {
        assert_eq!(task_failure_message(Some(&json!({"msg": " boom ", "stderr": "x"}))), "boom");
        assert_eq!(task_failure_message(Some(&json!({"msg": "", "stderr": "err"}))), "err");
        assert_eq!(task_failure_message(Some(&json!({"module_stderr": {"a": 1}}))), r#"{"a":1}"#);
        assert_eq!(task_failure_message(None), "");
    }
}
