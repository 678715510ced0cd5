//! Launch intents: how a job's launch is recorded before it is sent (a `Launching` entry
//! with its idempotency key and the time its request goes out), and how such an entry is
//! resolved — looked up with `Find` until the provider says no job exists, then launched,
//! or dropped when it is no longer wanted.

use crate::ids::OperationId;
use crate::job::{Job, JobState, JobType, append_job};
use crate::names::IdempotencyKey;
use crate::operation::OperationRequest;
use crate::policy::TypePolicy;
use crate::resource::Snapshot;
use crate::state::ProvisioningState;
use crate::time::Timestamp;

use super::{Effect, res, res_mut};

/// Records that a launch request for `job` is about to be sent.
fn mark_sent(job: &mut Job, now: Timestamp) {
    job.launch_sent_at = Some(now);
    job.launch_sends += 1;
}

/// A `Launching` entry is found unless the provider said it does not exist. One known not to
/// exist is launched, or dropped when no longer wanted (it never started: there is nothing to
/// cancel or remove).
pub(super) fn resolve_launching(snap: &mut Snapshot, now: Timestamp) -> Option<Effect> {
    loop {
        let i = res(snap).jobs.iter().position(|j| j.state == JobState::Launching)?;
        let job = &res(snap).jobs[i];
        let key = job.idempotency_key.clone();
        if !job.absent_confirmed {
            return Some(Effect::Find { key });
        }
        if !launch_still_wanted(snap, job) {
            res_mut(snap).jobs.remove(i);
            continue;
        }
        // This attempt's outcome is unknown until `apply` records it: a crash before then
        // must lead to a `Find`, never to a second launch of the key.
        let job = &mut res_mut(snap).jobs[i];
        job.absent_confirmed = false;
        mark_sent(job, now);
        return Some(Effect::Launch { key });
    }
}

/// A provision, preflight or action job is not launched for a resource being deleted, for an
/// operation being canceled, or for a spec that has since changed; an action's job not
/// after its operation ended.
fn launch_still_wanted(snap: &Snapshot, job: &Job) -> bool {
    let res = res(snap);
    if job.job_type == JobType::Deprovision {
        return !res.deletion.is_some_and(|d| d.force);
    }
    let op = job.operation_id.as_ref().and_then(|id| snap.operation(id));
    // An update's prediction is wanted only while its approver has not decided.
    if job.job_type == JobType::Check && op.is_some_and(|o| o.provisions() && !o.is_waiting_for_approval()) {
        return false;
    }
    let canceling = op.is_some_and(|o| o.status == ProvisioningState::Canceling);
    // The job of an operation that leaves the spec alone (an action, a what-if, a drift
    // check) acts for that operation alone, a what-if's on a spec of its own
    // (`whatif::WhatIf::job_version`).
    let for_its_operation = op.is_some_and(|o| !o.request.moves_resource()) || job.job_type == JobType::Action;
    let over = for_its_operation && op.is_none_or(|o| o.is_terminal());
    let spec_current = for_its_operation || job.config_version == res.desired_config_version;
    !res.is_deleting() && !canceling && !over && !job.kill_requested() && spec_current
}

/// Records a `Launching` entry (the intent) and names it.
pub(super) fn begin_launch(
    snap: &mut Snapshot,
    policy: &TypePolicy,
    job_type: JobType,
    op: Option<OperationId>,
    now: Timestamp,
) -> Effect {
    let res = res_mut(snap);
    res.job_seq += 1;
    let prefix = op.as_ref().unwrap_or(&res.last_operation_id);
    let key = IdempotencyKey::from(format!("{prefix}:{}", res.job_seq));
    record_intent(snap, policy, job_type, op, key.clone(), now);
    Effect::Launch { key }
}

/// The `Launching` entry of `key`, as one launch request for it may have reached the
/// provider: the operation moves on to Provisioning or Updating. Also how a restored store
/// takes up a job launched after its backup (`restore`): the entry is then resolved with
/// `find`, like any launch whose answer was lost.
pub(super) fn record_intent(
    snap: &mut Snapshot,
    policy: &TypePolicy,
    job_type: JobType,
    op: Option<OperationId>,
    key: IdempotencyKey,
    now: Timestamp,
) {
    let res = res_mut(snap);
    // Trigger times order the history (`latest_job_by_type`, ties to the older entry): keep
    // them strictly increasing when the clock stands still or lags another replica's.
    let after_last = res.jobs.iter().map(|j| Timestamp(j.timestamp.0.saturating_add(1))).max();
    let at = after_last.map_or(now, |t| t.max(now));
    let mut job = Job::new(job_type, JobState::Launching, at);
    job.idempotency_key = key;
    job.provider = policy.provider.clone();
    job.operation_id = op.clone();
    // Every job carries the version it acts on (a delete job: the one it removes; a
    // what-if's: the one proposed).
    job.config_version = res.desired_config_version.clone();
    if job_type == JobType::Deprovision {
        job.block_deletion_on_failure = policy.block_deletion_on_failure;
    }
    let operation = op.as_ref().and_then(|id| snap.operation(id));
    if job_type == JobType::Action {
        job.action = operation.and_then(|o| o.action.as_ref()).map(|c| c.name.clone()).unwrap_or_default();
    }
    if let Some(w) = operation.and_then(|o| o.what_if.as_ref()) {
        job.config_version = w.job_version(&job.config_version);
    }
    if job_type == JobType::Check {
        // A drift check runs the create job, as a what-if of the spec in force would.
        job.action = operation.and_then(|o| o.what_if.as_ref()).map_or("create", |w| w.job_word()).to_owned();
    }
    job.rerun = operation.and_then(|o| o.rerun);
    let res = res_mut(snap);
    mark_sent(&mut job, now);
    append_job(&mut res.jobs, job, policy.max_history);
    if let Some(op_id) = op {
        let running = match snap.operation(&op_id).map(|o| o.request) {
            Some(OperationRequest::Create) => Some(ProvisioningState::Provisioning),
            Some(OperationRequest::Delete) | None => None,
            Some(_) => Some(ProvisioningState::Updating),
        };
        // An update's prediction runs while it waits for approval, which it does not end.
        let waiting = snap.operation(&op_id).is_some_and(|o| o.is_waiting_for_approval());
        if let Some(status) = running.filter(|_| !waiting) {
            snap.set_operation_status(&op_id, status, None, now);
        }
        if let Some(o) = snap.operation_mut(&op_id) {
            o.waiting_on = None;
        }
    }
}
