//! The stored resource and the transactional snapshot that domain functions change.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::config_version::ConfigVersion;
use crate::ids::{ArmId, OperationId, ResourceKey, SubscriptionId};
use crate::job::Job;
use crate::names::LeaseOwner;
use crate::operation::{CloudError, Operation};
use crate::quota::{MeterName, Usage};
use crate::state::ProvisioningState;
use crate::time::Timestamp;

/// What a client declares: the part of a resource whose change means "run the automation".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    pub location: Option<String>,
    pub tags: BTreeMap<String, String>,
    pub properties: Value,
}

impl Spec {
    /// Location, tags and properties all feed the version: playbooks receive all three.
    pub fn config_version(&self) -> ConfigVersion {
        let tags: serde_json::Map<String, Value> =
            self.tags.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        ConfigVersion::of(&serde_json::json!({
            "location": self.location,
            "tags": tags,
            "properties": self.properties,
        }))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SystemData {
    pub created_by: String,
    pub created_by_type: String,
    pub created_at: Timestamp,
    pub last_modified_by: String,
    pub last_modified_by_type: String,
    pub last_modified_at: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub requested_at: Timestamp,
    /// A privileged `DELETE ?force=true`: running jobs are asked to cancel, no delete job
    /// runs (or is retried), and the record goes at once.
    pub force: bool,
}

/// When the engine should look at the resource next. `intent` marks a client request the
/// engine has not picked up yet: it puts the resource in the intent lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    pub next_due: Option<Timestamp>,
    pub intent: bool,
    /// When the resource's next drift check is due: the drift lane, which the engine serves
    /// last and only while nothing else is due for the resource (`next_due` is `None`).
    pub drift_due: Option<Timestamp>,
}

impl Schedule {
    /// Due now, in the intent lane; a drift check's time is kept.
    pub fn now(now: Timestamp) -> Self {
        Schedule { next_due: Some(now), intent: true, drift_due: None }
    }
}

/// An engine's claim on a resource. `epoch` grows on every change of owner; engine writes
/// carry the epoch they claimed with, so a stale owner cannot overwrite newer state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub owner: LeaseOwner,
    pub until: Timestamp,
    pub epoch: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRecord {
    pub id: ArmId,
    /// The type's kind (e.g. `VirtualNetwork`), used for playbook and template names.
    pub kind: String,
    pub spec: Spec,
    pub system_data: SystemData,
    pub provisioning_state: ProvisioningState,
    pub desired_config_version: ConfigVersion,
    pub jobs: Vec<Job>,
    /// Jobs the provider started for a key that already had one (a launch request that was
    /// processed after it had been given up on). Each is canceled and followed until it ends;
    /// kept as history, never adopted.
    pub duplicate_jobs: Vec<Job>,
    pub active_operation_id: Option<OperationId>,
    /// The operation that last set the spec (names convergence retries' idempotency keys).
    pub last_operation_id: OperationId,
    /// Launches so far; makes every idempotency key unique.
    pub job_seq: u64,
    pub deletion: Option<Deletion>,
    /// A user canceled the operation for this version: convergence must not relaunch it.
    pub convergence_stopped_for: Option<ConfigVersion>,
    /// Who asked for the current intent and for which tenant; handed to every job.
    pub job_context: Option<crate::identity::JobContext>,
    /// Other resources this one's properties reference (indexed by the store).
    pub references: Vec<crate::reference::Reference>,
    /// What the last successful job that reported outputs reported: read-only properties,
    /// shown next to the spec's and handed to later jobs. Not part of the config version.
    pub outputs: serde_json::Map<String, Value>,
    /// What the last drift check found (a type with drift checks, or `POST {id}/checkDrift`).
    pub drift: Option<crate::drift::Drift>,
    /// The last operation's failure, shown on the resource while it is Failed.
    pub last_error: Option<CloudError>,
    pub schedule: Schedule,
    pub lease: Option<Lease>,
    /// Bumped by every client write; lets readers detect change cheaply.
    pub generation: u64,
    /// What the resource consumes of each quota meter, set from its spec whenever the spec
    /// is written (`quota::charge`); a meter it consumes nothing of is absent.
    pub usage: BTreeMap<MeterName, u64>,
    /// What admission policies found at its last write that is not compliant: audits, and
    /// what an assignment not enforced would have done (`policy_admission`).
    pub findings: Vec<crate::policy_admission::Finding>,
}

impl ResourceRecord {
    pub fn key(&self) -> ResourceKey {
        self.id.key()
    }

    pub fn is_deleting(&self) -> bool {
        self.deletion.is_some()
    }

    /// Its create waits for approval (nothing of it ran yet): a denial would remove it, so
    /// nothing new may be put under it or made to reference it meanwhile.
    pub fn waits_to_be_created(&self) -> bool {
        self.provisioning_state == ProvisioningState::WaitingForApproval && self.jobs.is_empty()
    }
}

/// A notification to deliver once the transaction commits (ARM async callback).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewNotification {
    pub subscription: SubscriptionId,
    pub operation_id: OperationId,
    pub uri: String,
}

/// What one transaction reads and may change: the resource, its non-terminal operations
/// (plus any operation the caller asked for), and notifications to enqueue. The store writes
/// back exactly what differs from what it read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub resource: Option<ResourceRecord>,
    pub operations: Vec<Operation>,
    pub notifications: Vec<NewNotification>,
    /// Read-only context the change asked for (its parent), as committed; a resource that
    /// does not exist is absent. Never written back. The store serialises the change with
    /// every change of these resources, so what it decides from them stays true until it
    /// commits.
    pub related: Vec<ResourceRecord>,
    /// Set by a change: every resource nested under this one should be looked at now (a
    /// child waiting for its parent). Written as a wake-up, not as data.
    pub wake_children: bool,
    /// Read-only, when the change asked for them: the resource's direct children (a parent's
    /// cascading delete waits for them).
    pub children: Vec<ResourceRecord>,
    /// Set by a change: resources to look at now (a child's parent, when the child's delete
    /// progressed). Written as wake-ups, not as data.
    pub wake: Vec<ResourceKey>,
    /// Read-only, when the change asked for them (a delete): resources outside this one's
    /// subtree that reference it or something under it.
    pub referrers: Vec<ResourceRecord>,
    /// Set by a change: every resource referencing this one should be looked at now (a
    /// referrer waiting for it).
    pub wake_referrers: bool,
    /// Read-only, for the meters the change asked for: what the subscription and the
    /// resource's group consume, counted in this transaction (`quota`).
    pub usage: BTreeMap<MeterName, Usage>,
    /// Read-only, when the change asked for them: the subscription's guardrail settings
    /// (locks, policy assignments, quota limits) as committed; none is written while the
    /// change runs. Shared, as read: a group commit hands one read to every change that asked
    /// for it, and copying a snapshot copies none of it.
    pub settings: std::sync::Arc<[Setting]>,
}

/// A platform setting a change read (a registry entry: a lock, a policy assignment, a quota
/// limit), as stored: its kind's tag, its id and its JSON body. Whoever asked decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub kind: String,
    pub id: String,
    pub body: String,
}

impl Snapshot {
    /// The related resource with this id, if it exists.
    pub fn related(&self, id: &ArmId) -> Option<&ResourceRecord> {
        let key = id.key();
        self.related.iter().find(|r| r.key() == key)
    }

    pub fn operation(&self, id: &OperationId) -> Option<&Operation> {
        self.operations.iter().find(|o| &o.id == id)
    }

    pub fn operation_mut(&mut self, id: &OperationId) -> Option<&mut Operation> {
        self.operations.iter_mut().find(|o| &o.id == id)
    }

    /// The resource's active operation while it is non-terminal.
    pub fn active_operation(&self) -> Option<&Operation> {
        let res = self.resource.as_ref()?;
        let id = res.active_operation_id.as_ref()?;
        self.operation(id).filter(|o| !o.is_terminal())
    }

    /// Ends an operation and keeps the resource consistent in the same change (ARO
    /// `UpdateOperationStatus` rules): the resource follows only while this operation is
    /// its active one; a terminal status clears the active operation; a callback is queued
    /// when the client asked for one.
    pub fn set_operation_status(
        &mut self,
        op_id: &OperationId,
        status: ProvisioningState,
        error: Option<CloudError>,
        now: Timestamp,
    ) -> bool {
        let Some(op) = self.operations.iter_mut().find(|o| &o.id == op_id) else {
            return false;
        };
        if !op.transition(status, error.clone(), now) {
            return false;
        }
        if status.is_terminal()
            && let Some(uri) = &op.notification_uri
        {
            self.notifications.push(NewNotification {
                subscription: op.subscription.clone(),
                operation_id: op.id.clone(),
                uri: uri.clone(),
            });
        }
        // An action's or a what-if's operation leaves the resource's state alone (see
        // `admit_action`).
        let follows = op.request.moves_resource();
        if let Some(res) = self.resource.as_mut()
            && res.active_operation_id.as_ref() == Some(op_id)
        {
            if follows {
                res.provisioning_state = status;
            }
            if status.is_terminal() {
                res.active_operation_id = None;
                if follows {
                    res.last_error = error;
                }
            }
        }
        true
    }
}
