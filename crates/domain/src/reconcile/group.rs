//! A resource group's engine steps (docs/arm-contract.md#resource-groups). A group runs no
//! job: the engine looks at one only while it is being deleted. Its delete is a cascade over
//! the resources it holds (`cascade::step`: each through its own delete, a referenced one
//! after its referrers); once none is left the record goes and the operation succeeds.
//!
//! Unlike a parent resource, whose delete waits while a child's failed delete job is
//! retried, a group's delete ends `Failed` as soon as nothing left in it can go — each
//! remaining resource's last delete job failed, or it waits for one that did — naming them,
//! and the group stays, `Succeeded` again, as ARM's does. Its deadline ends it the same way.

use super::{Effect, cascade, delete::complete_delete, res, res_mut};
use crate::job::{JobState, JobType, latest_job_by_type};
use crate::operation::{CloudError, codes};
use crate::policy::TypePolicy;
use crate::resource::{ResourceRecord, Snapshot};
use crate::state::ProvisioningState;
use crate::time::Timestamp;

pub(super) fn decide(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) -> Effect {
    if !res(snap).is_deleting() {
        return Effect::Sleep { until: None };
    }
    let Some(op) = snap.active_operation().map(|o| o.id.clone()) else {
        // Its deadline ended the operation: the group stays.
        stop_deleting(snap);
        return Effect::Sleep { until: None };
    };
    match cascade::step(snap, policy.delete_deadline, now) {
        None => complete_delete(snap, now),
        Some(Effect::Sleep { .. }) if snap.children.iter().all(stuck) => {
            let error = could_not_empty(snap);
            snap.set_operation_status(&op, ProvisioningState::Failed, Some(error), now);
            stop_deleting(snap);
            Effect::Sleep { until: None }
        }
        Some(effect) => effect,
    }
}

/// A resource the group's delete cannot remove now: its last delete job failed, or it is not
/// deleting (it waits for a referrer in the group that cannot go).
fn stuck(res: &ResourceRecord) -> bool {
    let failed = latest_job_by_type(&res.jobs, JobType::Deprovision)
        .is_some_and(|j| j.state.is_terminal() && j.state != JobState::Succeeded);
    failed || !res.is_deleting()
}

/// The group's error: every resource left, with the failures the cascade gathered.
fn could_not_empty(snap: &Snapshot) -> CloudError {
    let left: Vec<String> = snap.children.iter().map(|c| format!("'{}'", c.id)).collect();
    let group = &res(snap).id;
    let mut error = CloudError::new(
        codes::DEPROVISIONING_FAILED,
        format!(
            "Resource group '{}' could not be deleted: {} resource(s) in it could not be deleted: {}",
            group.resource_group,
            left.len(),
            left.join(", ")
        ),
    )
    .with_target(group.to_string());
    let failures = snap.active_operation().and_then(|o| o.error.clone());
    error.details = failures.map(|e| if e.details.is_empty() { vec![e] } else { e.details }).unwrap_or_default();
    error
}

/// The group stays, as it was before its delete.
fn stop_deleting(snap: &mut Snapshot) {
    let group = res_mut(snap);
    group.deletion = None;
    group.provisioning_state = ProvisioningState::Succeeded;
    group.last_error = None;
    group.active_operation_id = None;
}
