//! A resource being deleted (docs/osac-lifecycle.md#deprovisioning): its running job is
//! canceled, its children go first (`cascade`), and so does whatever references it (only a
//! deleted subscription deletes a referenced resource: a client's DELETE of one is refused),
//! then its delete job runs — retried with
//! backoff under `block_deletion_on_failure`, its failure shown on the operation — and the
//! record goes. A forced delete skips the delete job (docs/arm-contract.md#forced-delete).

use super::begin_launch;
use super::{Effect, cancel_or_poll, cascade, job_error, res, res_mut, running_job};
use crate::backoff::retry_at;
use crate::ids::OperationId;
use crate::job::{Job, JobState, JobType, latest_job_by_type};
use crate::operation::{OperationRequest, codes};
use crate::policy::TypePolicy;
use crate::resource::Snapshot;
use crate::state::ProvisioningState;
use crate::time::Timestamp;

pub(super) fn decide_delete(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) -> Effect {
    if res(snap).deletion.is_some_and(|d| d.force) {
        return force_delete(snap, now);
    }
    if let Some(running) = running_job(&res(snap).jobs) {
        return cancel_or_poll(snap, running.idempotency_key.clone(), policy, now);
    }
    let provision = latest_job_by_type(&res(snap).jobs, JobType::Provision).cloned();
    if let Some(effect) = cascade::step(snap, policy.delete_deadline, now) {
        return effect;
    }
    if !snap.referrers.is_empty() {
        // Woken as each referrer goes; the deadline ends the operation if one never does.
        let deadline = snap.active_operation().map(|o| o.start_time.add(policy.delete_deadline));
        return Effect::Sleep { until: deadline };
    }
    let jobs = &res(snap).jobs;
    match latest_job_by_type(jobs, JobType::Deprovision).cloned() {
        None if provision.is_none() => complete_delete(snap, now),
        None => {
            let op = delete_operation(snap);
            begin_launch(snap, policy, JobType::Deprovision, op, now)
        }
        Some(d) if !d.state.is_terminal() => Effect::Poll { key: d.idempotency_key },
        Some(d) if d.state == JobState::Succeeded || !d.block_deletion_on_failure => complete_delete(snap, now),
        Some(d) => {
            show_retried_failure(snap, &d, now);
            let wait = policy.deprovision_backoff().deprovision(&res(snap).jobs);
            match retry_at(&d, wait, now) {
                Some(at) => Effect::Sleep { until: Some(at) },
                None => {
                    let op = delete_operation(snap);
                    begin_launch(snap, policy, JobType::Deprovision, op, now)
                }
            }
        }
    }
}

/// The delete operation a delete job belongs to (it names the job's key): the active one,
/// else — the operation ended by its deadline and deletion goes on — the last delete job's.
fn delete_operation(snap: &Snapshot) -> Option<OperationId> {
    let active = snap.active_operation().filter(|o| o.request == OperationRequest::Delete);
    active
        .map(|o| o.id.clone())
        .or_else(|| latest_job_by_type(&res(snap).jobs, JobType::Deprovision).and_then(|j| j.operation_id.clone()))
}

/// While a failed delete job is retried (`block_deletion_on_failure`), the delete operation
/// carries its failure, so a client polling it sees why it is not finishing.
fn show_retried_failure(snap: &mut Snapshot, failed: &Job, now: Timestamp) {
    let Some(op_id) = snap.active_operation().map(|o| o.id.clone()) else { return };
    let error = job_error(codes::DEPROVISIONING_FAILED, failed, "The delete job failed");
    if let Some(op) = snap.operation_mut(&op_id)
        && op.error.as_ref() != Some(&error)
    {
        op.error = Some(error);
        op.last_transition_time = now;
    }
}

/// What a forced delete's operation says when it ends.
pub const FORCED_DELETE_NOTE: &str = "Force-deleted: the record was removed without a completed delete job; the \
                                      infrastructure it managed may remain (orphaned).";

/// A forced delete: each running job not yet asked to stop is asked to cancel once (not
/// waited for; a forced cancel's job was killed first, `decide_next`), then the record goes
/// without a delete job.
fn force_delete(snap: &mut Snapshot, now: Timestamp) -> Effect {
    let running = res_mut(snap)
        .jobs
        .iter_mut()
        .find(|j| !j.state.is_terminal() && j.state != JobState::Launching && j.stop_asked_at().is_none());
    if let Some(job) = running {
        job.ask_to_stop(now);
        return Effect::Cancel { key: job.idempotency_key.clone() };
    }
    if let Some(op) = snap.active_operation().map(|o| o.id.clone())
        && let Some(o) = snap.operation_mut(&op)
    {
        o.note = Some(FORCED_DELETE_NOTE.into());
    }
    complete_delete(snap, now)
}

pub(super) fn complete_delete(snap: &mut Snapshot, now: Timestamp) -> Effect {
    if let Some(op) = snap.active_operation().map(|o| o.id.clone()) {
        // A failed attempt shown while it was retried is not how it ended.
        if let Some(o) = snap.operation_mut(&op) {
            o.error = None;
        }
        snap.set_operation_status(&op, ProvisioningState::Succeeded, None, now);
    }
    // A parent deleting its children, and whatever this one referenced (and their
    // ancestors) being deleted after it, wait for it to go.
    let res = res(snap);
    let mut waiting = crate::reference::related_keys(&res.id, &res.references);
    // A top-level resource's group, whose delete may be waiting for it too.
    waiting.extend(res.id.container().filter(|_| res.id.parent().is_none()).map(|g| g.key()));
    snap.wake.extend(waiting);
    snap.resource = None;
    Effect::Sleep { until: None }
}
