//! Drift checks in the engine's loop (docs/osac-lifecycle.md#drift-detection): when a check
//! of a converged resource is due, one is launched — the type's create job in check mode,
//! under the resource's own spec, as a job of no operation — and when a check's job ends its
//! verdict becomes the resource's `drift`, the next check is scheduled, and a type that puts
//! drift right starts an update operation of its own.

use super::{Effect, begin_launch, res, res_mut};
use crate::admission::{RequestContext, start_update};
use crate::drift::{Drift, DriftState, Remediation, derived_operation_id, judge, next_check};
use crate::job::{Job, JobState, JobType};
use crate::operation::{Initiator, Rerun};
use crate::policy::TypePolicy;
use crate::resource::Snapshot;
use crate::state::ProvisioningState;
use crate::time::Timestamp;
use crate::whatif::TaskChange;

/// What a converged, idle resource does next: drift put right (a type with `Auto`
/// remediation, once per drifted check), a check launched when due, else nothing — with the
/// next check's time kept in the drift lane.
pub(super) fn step(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) -> Effect {
    let Some(drift) = policy.drift.filter(|_| res(snap).provisioning_state == ProvisioningState::Succeeded) else {
        res_mut(snap).schedule.drift_due = None;
        return Effect::Sleep { until: None };
    };
    let desired = res(snap).desired_config_version.clone();
    let current = res(snap).drift.as_ref().filter(|d| d.config_version == desired).cloned();
    if drift.remediation == Remediation::Auto
        && let Some(found) = current.as_ref().filter(|d| d.state == DriftState::Drifted && d.remediation.is_none())
    {
        return remediate(snap, policy, found.clone(), now);
    }
    let due = match res(snap).schedule.drift_due {
        Some(due) => due,
        // Just put right: look again at once, to show whether it worked.
        None if current.as_ref().is_some_and(|d| d.remediation.is_some()) => now,
        None => {
            let from = current.map_or(now, |d| d.last_checked_at);
            let res = res_mut(snap);
            next_check(&res.key(), res.job_seq, from, drift.interval)
        }
    };
    if due > now {
        res_mut(snap).schedule.drift_due = Some(due);
        return Effect::Sleep { until: None };
    }
    res_mut(snap).schedule.drift_due = None;
    begin_launch(snap, policy, JobType::Check, None, now)
}

/// An update operation under the resource's own spec, its jobs marked as putting drift
/// right; the check that found the drift names it.
fn remediate(snap: &mut Snapshot, policy: &TypePolicy, found: Drift, now: Timestamp) -> Effect {
    let res = res(snap);
    let seed = res.jobs.iter().rev().find(|j| j.job_type == JobType::Check).map(|j| j.idempotency_key.to_string());
    let seed = seed.unwrap_or_else(|| format!("{}:{}", res.last_operation_id, res.job_seq));
    let ctx = RequestContext {
        operation_id: derived_operation_id(&seed, now),
        now,
        initiator: Initiator::default(),
        notification_uri: None,
        api_version: policy.api_version.clone(),
        actor: String::new(),
        actor_type: String::new(),
        job_context: res.job_context.clone(),
    };
    start_update(snap, Some(Rerun::Drift), &ctx);
    let res = res_mut(snap);
    res.drift = Some(Drift { remediation: Some(ctx.operation_id), ..found });
    res.schedule.drift_due = None;
    Effect::Sleep { until: Some(now) }
}

/// A check job that ended, if it was a drift check (of no operation, or of a
/// `POST {id}/checkDrift`): its verdict, and the next check's time.
pub(super) fn record(
    snap: &mut Snapshot,
    job: &Job,
    changes: Option<Vec<TaskChange>>,
    policy: &TypePolicy,
    now: Timestamp,
) {
    let checks_drift = match job.operation_id.as_ref() {
        None => true,
        Some(id) => snap.operation(id).is_some_and(|o| o.request == crate::OperationRequest::CheckDrift),
    };
    if job.job_type != JobType::Check || !checks_drift {
        return;
    }
    let Some(res) = snap.resource.as_mut() else { return };
    if job.state == JobState::Canceled {
        // Stopped for real work (or by a user): it found nothing; the next is scheduled once
        // the resource is idle again.
        return;
    }
    let succeeded = job.state == JobState::Succeeded;
    res.drift = Some(judge(succeeded, changes, &job.message_with_details(), job.config_version.clone(), now));
    res.schedule.drift_due = policy.drift.map(|d| next_check(&res.key(), res.job_seq, now, d.interval));
}
