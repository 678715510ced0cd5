//! Per-resource-type engine policy.

use std::time::Duration;

use crate::backoff::BackoffPolicy;
use crate::names::ProviderName;
use crate::operation::OperationRequest;

/// The launch-ambiguity window of a remote provider with the default 30 s request timeout:
/// that timeout plus a minute of margin.
pub const DEFAULT_LAUNCH_AMBIGUITY: Duration = Duration::from_secs(90);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypePolicy {
    /// `Namespace/type` as configured (`Slipway.Example/virtualNetworks`): what jobs are told
    /// the type is, whatever casing a request used.
    pub type_name: String,
    /// Provider instance that runs this type's jobs.
    pub provider: ProviderName,
    /// Delay between status polls of a running job.
    pub poll_interval: Duration,
    /// Convergence retries after a failure; `None` switches them off.
    pub backoff: Option<BackoffPolicy>,
    pub create_deadline: Duration,
    pub update_deadline: Duration,
    pub delete_deadline: Duration,
    /// Entries kept in a resource's job history (at least 1).
    pub max_history: usize,
    /// A failed deprovision blocks deletion and is retried with backoff.
    pub block_deletion_on_failure: bool,
    /// How long to wait after asking a job to cancel before asking again.
    pub cancel_retry: Duration,
    /// The longest a launch request, once sent, may still be processed by the provider and
    /// create a job — even after the sender gave up on it or died (a controller finishes a
    /// request it has received). Until it has passed since the last send, a `Find` that sees
    /// no job does not allow a relaunch. Must cover the provider's request timeout, its
    /// worst processing time and the clock skew between replicas.
    pub launch_ambiguity: Duration,
    /// The most a job may report as outputs (their JSON text, in bytes); a job that reports
    /// more fails.
    pub max_output_bytes: usize,
    /// The type has child types: when a resource of it becomes `Succeeded`, the resources
    /// nested under it (children waiting for it) are woken, and its engine steps read its
    /// children (a delete deletes them first).
    pub has_child_types: bool,
    /// Some type's schema references this type: when a resource of it becomes `Succeeded`,
    /// the resources referencing it (waiting for it) are woken.
    pub is_referenced: bool,
    /// The type declares a validation job: every create and update runs it first, and only
    /// a pass lets the provisioning job launch.
    pub preflight: bool,
}

/// Outputs are shown on every GET of the resource and stored with it: 64 KiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 * 1024;

impl Default for TypePolicy {
    fn default() -> Self {
        TypePolicy {
            type_name: String::new(),
            provider: "ansible".into(),
            poll_interval: Duration::from_secs(2),
            backoff: Some(BackoffPolicy::default()),
            create_deadline: Duration::from_secs(3600),
            update_deadline: Duration::from_secs(3600),
            delete_deadline: Duration::from_secs(12 * 3600),
            max_history: 10,
            block_deletion_on_failure: true,
            cancel_retry: Duration::from_secs(60),
            launch_ambiguity: DEFAULT_LAUNCH_AMBIGUITY,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            has_child_types: false,
            is_referenced: false,
            preflight: false,
        }
    }
}

impl TypePolicy {
    pub fn deadline(&self, request: OperationRequest) -> Duration {
        match request {
            OperationRequest::Create => self.create_deadline,
            OperationRequest::Update | OperationRequest::Action => self.update_deadline,
            OperationRequest::Delete => self.delete_deadline,
        }
    }

    /// Backoff used for deprovision retries even when convergence retries are off.
    pub fn deprovision_backoff(&self) -> BackoffPolicy {
        self.backoff.unwrap_or_default()
    }
}
