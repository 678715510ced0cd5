//! Cascading delete: a parent's delete deletes its children first (docs/arm-contract.md#cascading-delete).
//!
//! The parent's engine step sees its direct children (`Snapshot::children`, read-only). While
//! any is not yet deleting, it names them in `Effect::DeleteChildren` (a bounded number per
//! step; one another child references waits for that child to go); the engine admits a
//! delete for each in the child's own transaction, with an
//! operation id derived from the parent's delete and the child, so a cascade resumed after a
//! crash asks for the same operations again and admits none twice. Once every child is
//! deleting, the parent sleeps until a child wakes it (each child wakes its parent when its
//! delete job ends and when its record goes); its delete job runs only when no child is left.
//! Children whose delete failed — kept because of `block_deletion_on_failure` — keep the
//! parent `Deleting`; its operation shows their errors meanwhile.

use crate::admission::{Admitted, RequestContext, admit_delete};
use crate::composite::{self, Source};
use crate::config_version::fnv1a64;
use crate::ids::{ArmId, OperationId};
use crate::job::{JobState, JobType, latest_job_by_type};
use crate::operation::{ChildOperation, CloudError, Operation, codes};
use crate::resource::{ResourceRecord, Snapshot};
use crate::time::Timestamp;

/// Children asked to delete per engine step: the engine admits them concurrently, and each
/// child's own delete runs on its own worker, so this bounds one step's transactions only.
pub const CHILD_DELETES_PER_STEP: usize = 16;

/// The operation id of the delete a parent's delete `parent_op` makes for `child`: stable, so
/// a cascade repeated after a crash names the same operation.
///
/// Laid out as a version-7, variant-1 UUID whose 48 time bits are the parent operation's (its
/// start, when the parent's id is a version 7 like every id the API makes): the children's
/// deletes list beside their parent's in a subscription's newest-first operations.
pub fn child_operation_id(parent_op: &OperationId, child: &ArmId) -> OperationId {
    let seed = format!("{}|{}", parent_op.as_str(), child.key().as_str());
    let (a, b) = (fnv1a64(seed.as_bytes()), fnv1a64(format!("{seed}|2").as_bytes()));
    OperationId::version7(parent_op.leading_millis(), a as u16, b)
}

/// The request a parent's delete makes of one child: the parent's requester, api-version and
/// job context, the derived operation id, no callback (the client follows the parent's). A
/// parent whose delete operation already ended (its deadline passed) goes on deleting: the
/// ids then derive from its last operation, and nobody in particular asked.
pub fn child_delete_context(
    parent_op: Option<&Operation>,
    parent: &ResourceRecord,
    child: &ArmId,
    now: Timestamp,
) -> RequestContext {
    let seed = parent_op.map_or(&parent.last_operation_id, |o| &o.id);
    RequestContext {
        operation_id: child_operation_id(seed, child),
        now,
        initiator: parent_op.map(|o| o.initiator.clone()).unwrap_or_default(),
        notification_uri: None,
        api_version: parent_op.map(|o| o.api_version.clone()).unwrap_or_default(),
        actor: parent.system_data.last_modified_by.clone(),
        actor_type: parent.system_data.last_modified_by_type.clone(),
        job_context: parent.job_context.clone(),
    }
}

/// Admits the cascade's delete of a child in the child's own snapshot; the child's delete
/// operation. A child already deleting (a cascade resumed after a crash, or a client's own
/// delete) keeps its operation; a child that is gone has none.
pub fn admit_child_delete(snap: &mut Snapshot, ctx: &RequestContext) -> Option<OperationId> {
    let res = snap.resource.as_ref()?;
    if res.is_deleting() {
        return snap.active_operation().map(|o| o.id.clone());
    }
    match admit_delete(snap, ctx) {
        Ok(Admitted::Accepted { operation, .. }) => Some(operation.id),
        _ => None,
    }
}

/// Records the children's delete operations on the parent's delete, so its status document
/// can name them.
pub(super) fn record_child_operations(snap: &mut Snapshot, started: Vec<(ArmId, OperationId)>) {
    let Some(op_id) = snap.active_operation().map(|o| o.id.clone()) else { return };
    let Some(op) = snap.operation_mut(&op_id) else { return };
    for (child, child_op) in started {
        let entry = ChildOperation { resource_id: child.to_string(), operation_id: child_op };
        if !op.child_operations.contains(&entry) {
            op.child_operations.push(entry);
        }
    }
}

/// The cascade's next step for a parent being deleted, or `None` when it has no children
/// left (its own delete job may run).
pub(super) fn step(snap: &mut Snapshot, delete_deadline: std::time::Duration, now: Timestamp) -> Option<super::Effect> {
    if snap.children.is_empty() {
        return None;
    }
    // A child another child references goes after its referrer (references never form a
    // cycle, so some child is always free to go).
    let referenced = |c: &ResourceRecord| {
        snap.children.iter().any(|other| {
            other.id != c.id && other.references.iter().any(|r| r.id.key() == c.key() || r.id.key().is_under(&c.key()))
        })
    };
    let pending: Vec<ArmId> = snap
        .children
        .iter()
        .filter(|c| !c.is_deleting() && !referenced(c))
        .take(CHILD_DELETES_PER_STEP)
        .map(|c| c.id.clone())
        .collect();
    if !pending.is_empty() {
        return Some(super::Effect::DeleteChildren { children: pending });
    }
    let failures = child_failures(&snap.children);
    let op = snap.active_operation().cloned();
    if let Some(op) = &op
        && let Some(o) = snap.operation_mut(&op.id)
    {
        let error = merged_error(failures);
        if o.error != error {
            o.error = error;
            o.last_transition_time = now;
        }
    }
    // Woken by the children; the deadline ends the operation if they never finish.
    Some(super::Effect::Sleep { until: op.map(|o| o.start_time.add(delete_deadline)) })
}

/// One source per child whose latest delete job failed (it stays while it is retried).
fn child_failures(children: &[ResourceRecord]) -> Vec<Source> {
    children
        .iter()
        .filter_map(|c| {
            let job = latest_job_by_type(&c.jobs, JobType::Deprovision)?;
            let failed = job.state.is_terminal() && job.state != JobState::Succeeded;
            failed.then(|| {
                let text = job.message_with_details();
                let error = CloudError::new(
                    codes::DEPROVISIONING_FAILED,
                    if text.is_empty() { "The delete job failed".into() } else { text },
                )
                .with_target(c.id.to_string());
                Source::failed(c.id.to_string(), error)
            })
        })
        .collect()
}

/// `[child] message; …` over every failed child, one `details` entry each (the composite
/// merge of `crate::composite`).
fn merged_error(failures: Vec<Source>) -> Option<CloudError> {
    composite::merge(failures, codes::DEPROVISIONING_FAILED).and_then(|(_, error)| error)
}
