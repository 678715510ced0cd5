//! Slipway's domain core: resources, operations, jobs and every decision about them, as pure
//! functions over data. No I/O, no async, and no decision reads a clock: time is passed in
//! (`time::SystemClock` is only the clock the edges are handed), effects are returned.
//!
//! Map: [`activity`] (the activity log: who changed what, and what was refused), [`identity`] (who is asking), [`access`] (what they may do where), [`config_version`] (spec hashing), [`job`] (job history), [`names`] (idempotency keys, job ids, provider names), [`evaluate`] (OSAC
//! EvaluateAction), [`rate`] (token buckets), [`retry`] (every retry delay: exponential with jitter, and OSAC's
//! history-derived rule), [`backoff`] (the history scan behind the latter), [`state`] (ARM
//! provisioning states, worst-of merge), [`composite`] (an operation's several sources merged), [`operation`] (operation documents), [`resource`]
//! (stored resource, transaction snapshot), [`reference`] (references between resources), [`admission`] (what the API does), [`subscription`] (the registry's lifecycle rules), [`reconcile`]
//! (what the engine does), [`policy`], [`quota`] (meters, limits and the check a write makes), [`locks`] (management locks), [`policy_rule`] and [`policy_admission`] (Azure Policy's language, and what assignments do to a request), [`readiness`] (a provider's last readiness answer), [`whatif`] (a proposed change compared, and what a check-mode job predicted), [`drift`] (what a scheduled check found, and when the next is due).

pub mod access;
pub mod activity;
pub mod admission;
pub mod approval;
pub mod backoff;
pub mod composite;
pub mod config_version;
pub mod cycle;
pub mod drift;
pub mod echo;
pub mod evaluate;
pub mod event;
pub mod group;
pub mod identity;
pub mod ids;
pub mod job;
pub mod locks;
pub mod names;
pub mod operation;
pub mod policy;
pub mod policy_admission;
pub mod policy_rule;
pub mod progress;
pub mod quota;
pub mod rate;
pub mod readiness;
pub mod reconcile;
pub mod reference;
pub mod refusal;
pub mod resource;
pub mod retry;
pub mod state;
pub mod subscription;
pub mod tags;
pub mod time;
pub mod whatif;

pub use config_version::ConfigVersion;
pub use identity::{JobContext, Principal, PrincipalKind, RequestedBy, TenantContext};
pub use ids::{ArmId, OperationId, ResourceKey, SubscriptionId, TypeKey};
pub use job::{Job, JobState, JobType, Stop};
pub use names::{IdempotencyKey, JobId, LeaseOwner, ProviderName};
pub use operation::{CloudError, Initiator, Operation, OperationRequest};
pub use policy::TypePolicy;
pub use resource::{ResourceRecord, Snapshot, Spec};
pub use retry::RetryPolicy;
pub use state::ProvisioningState;
pub use time::{Clock, SystemClock, Timestamp};
