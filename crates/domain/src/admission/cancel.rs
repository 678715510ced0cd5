//! Cancellation (`POST …/operationStatuses/{id}/cancel[?force=true]`): which operations a
//! cancel may touch, and what a cancel and a forced cancel do to the resource's jobs and
//! convergence.

use crate::ids::OperationId;
use crate::job::Stop;
use crate::operation::{CloudError, Operation, OperationRequest, codes};
use crate::resource::{Schedule, Snapshot};
use crate::state::ProvisioningState;
use crate::time::Timestamp;

use super::Rejection;

/// The operation, if a cancel may touch it: it is still running and not a delete's.
fn cancelable(snap: &Snapshot, op_id: &OperationId) -> Result<Operation, Rejection> {
    let op = snap.operation(op_id).cloned().ok_or(Rejection::OperationNotFound)?;
    let target = op.resource_id.clone();
    if op.is_terminal() {
        return Err(Rejection::Conflict {
            message: format!("The operation has already completed with status {}", op.status),
            target,
        });
    }
    if op.request == OperationRequest::Delete {
        return Err(Rejection::Conflict {
            message: "A delete operation cannot be canceled; a forced delete (DELETE ?force=true) ends it".into(),
            target,
        });
    }
    Ok(op)
}

/// `POST …/operationStatuses/{id}/cancel`. An operation with no job yet ends `Canceled` at
/// once; one with a job moves to `Canceling` and the engine cancels the job. Delete
/// operations cannot be canceled: a half-removed resource has no sane state to return to.
pub fn admit_cancel(snap: &mut Snapshot, op_id: &OperationId, now: Timestamp) -> Result<Operation, Rejection> {
    let op = cancelable(snap, op_id)?;
    if op.status == ProvisioningState::Canceling {
        return Ok(op);
    }
    if op.is_waiting_for_approval() {
        return Ok(withdraw(snap, op_id, now));
    }
    let res = snap.resource.as_mut().ok_or(Rejection::NotFound)?;
    let has_job = res.jobs.iter().any(|j| j.operation_id.as_ref() == Some(op_id));
    if has_job {
        res.schedule = Schedule::now(now);
        res.generation += 1;
        snap.set_operation_status(op_id, ProvisioningState::Canceling, None, now);
    } else {
        if op.provisions() {
            res.convergence_stopped_for = Some(res.desired_config_version.clone());
        }
        res.generation += 1;
        snap.set_operation_status(op_id, ProvisioningState::Canceled, Some(canceled_by_user()), now);
    }
    Ok(snap.operation(op_id).cloned().expect("present"))
}

/// `POST …/operationStatuses/{id}/cancel?force=true` (privileged): the operation ends
/// `Canceled` at once, and its running job is stopped without the provider's grace
/// (`Effect::Kill`) and without waiting for it to confirm. Delete operations are refused, as
/// for any cancel: a forced delete is the way out of those.
pub fn admit_force_cancel(snap: &mut Snapshot, op_id: &OperationId, now: Timestamp) -> Result<Operation, Rejection> {
    let op = cancelable(snap, op_id)?;
    if op.is_waiting_for_approval() {
        return Ok(withdraw(snap, op_id, now));
    }
    let res = snap.resource.as_mut().ok_or(Rejection::NotFound)?;
    for job in res.jobs.iter_mut().filter(|j| j.operation_id.as_ref() == Some(op_id) && !j.state.is_terminal()) {
        job.stop = Some(Stop::Kill { asked_at: None });
    }
    if op.provisions() {
        res.convergence_stopped_for = Some(res.desired_config_version.clone());
    }
    res.schedule = Schedule::now(now);
    res.generation += 1;
    let error = CloudError::new(
        codes::CANCELED,
        "The operation was canceled by the user (forced: its job was stopped at once)",
    );
    snap.set_operation_status(op_id, ProvisioningState::Canceled, Some(error), now);
    Ok(snap.operation(op_id).cloned().expect("present"))
}

/// A request canceled while it waited for approval: nothing of it is left.
fn withdraw(snap: &mut Snapshot, op_id: &OperationId, now: Timestamp) -> Operation {
    use crate::approval::{Unapproved, end_unapproved};
    end_unapproved(snap, op_id, Unapproved::Canceled, ProvisioningState::Canceled, canceled_by_user(), now);
    snap.operation(op_id).cloned().expect("present")
}

pub fn canceled_by_user() -> CloudError {
    CloudError::new(codes::CANCELED, "The operation was canceled by the user")
}
