//! [`apply`]: folding an effect's outcome into the snapshot — launches, finds (adoption,
//! the launch-ambiguity window, duplicates), polls and cancels; a successful provisioning or
//! action job's outputs included.

use std::time::Duration;

use serde_json::Value;

use super::{Effect, Failure, FailureKind, JobStart, Observation, Outcome, job_mut};
use crate::job::{Job, JobState, JobType, OUTPUTS_STAT};
use crate::names::{IdempotencyKey, JobId};
use crate::operation::{CloudError, codes};
use crate::policy::TypePolicy;
use crate::resource::Snapshot;
use crate::retry::launch_retry;
use crate::time::Timestamp;
use crate::whatif::TaskChange;

/// Folds an effect's outcome into `snap`. Returns the earliest time the engine should
/// decide again (`None`: right away).
pub fn apply(
    snap: &mut Snapshot,
    effect: &Effect,
    outcome: Outcome,
    policy: &TypePolicy,
    now: Timestamp,
) -> Option<Timestamp> {
    let (key, io) = match effect {
        Effect::Sleep { .. } => return None,
        Effect::DeleteChildren { .. } => {
            let Outcome::ChildDeletes(started) = outcome else { return None };
            // None admitted (the store was unreachable): ask again after a pause, not at once.
            let pause = started.is_empty().then(|| now.add(policy.poll_interval));
            super::cascade::record_child_operations(snap, started);
            return pause;
        }
        Effect::Launch { key } => {
            if let Outcome::Failed(Failure { kind: FailureKind::Unsupported, message }) = &outcome {
                refuse_what_if(snap, key, message, now);
            }
            (key, JobIo::Launch)
        }
        Effect::Find { key } => {
            return match outcome {
                Outcome::Found(found) => record_found(snap, key, found, policy, now),
                other => record_on(job_mut(snap, key)?, JobIo::Find, other, policy, now),
            };
        }
        Effect::Poll { key } => return record_poll(snap, key, outcome, policy, now),
        Effect::Cancel { key } | Effect::Kill { key } => (key, JobIo::Cancel),
        Effect::PollDuplicate { job_id, .. } | Effect::CancelDuplicate { job_id, .. } => {
            let io = if matches!(effect, Effect::PollDuplicate { .. }) { JobIo::Poll } else { JobIo::Cancel };
            let dup = snap.resource.as_mut()?.duplicate_jobs.iter_mut().find(|d| d.job_id.as_ref() == Some(job_id))?;
            return record_on(dup, io, outcome, policy, now);
        }
    };
    // The job left the history (trimmed, or the resource is gone): nothing to record.
    record_on(job_mut(snap, key)?, io, outcome, policy, now)
}

/// A poll's outcome. Outputs a successful provisioning job reported replace the resource's,
/// an action's are merged into them (checked first: outputs that are not an object or
/// exceed the type's limit fail the job). A preflight job's end is judged here, with what
/// it reported: a failed check fails its operation.
fn record_poll(
    snap: &mut Snapshot,
    key: &IdempotencyKey,
    mut outcome: Outcome,
    policy: &TypePolicy,
    now: Timestamp,
) -> Option<Timestamp> {
    let job_type = job_mut(snap, key)?.job_type;
    let reports_outputs = matches!(job_type, JobType::Provision | JobType::Action);
    let (outputs, stats) = match &mut outcome {
        Outcome::Observed(obs) if reports_outputs && obs.state == JobState::Succeeded => {
            (accept_outputs(obs, policy.max_output_bytes), None)
        }
        Outcome::Observed(obs) => (None, obs.stats.take()),
        _ => (None, None),
    };
    let changes = match &mut outcome {
        Outcome::Observed(obs) => obs.changes.take(),
        _ => None,
    };
    // A long job's next poll may be far off (`TypePolicy::poll_interval_at`): not past the
    // deadline that would end its operation.
    let deadline = super::operation_deadline(snap, policy).filter(|d| *d > now);
    let job = job_mut(snap, key)?;
    let was_terminal = job.state.is_terminal();
    let next = record_on(job, JobIo::Poll, outcome, policy, now).map(|t| deadline.map_or(t, |d| t.min(d)));
    let (ended, succeeded) = (!was_terminal && job.state.is_terminal(), job.state == JobState::Succeeded);
    let job = job.clone();
    if ended
        && job.job_type == JobType::Deprovision
        && let Some(parent) = snap.resource.as_ref().and_then(|r| r.id.container())
    {
        // A parent's (or a group's) cascade shows its children's delete failures while it
        // waits.
        snap.wake.push(parent.key());
    }
    // A prediction's tasks are not its operation's progress.
    let prediction = job.job_type == JobType::Check
        && job.operation_id.as_ref().and_then(|id| snap.operation(id)).is_some_and(|o| o.provisions());
    if !prediction {
        crate::progress::show(snap, &job);
    }
    if ended && job.job_type == JobType::Preflight {
        judge_preflight(snap, &job, stats.as_ref(), now);
    }
    if ended && job.job_type == JobType::Check {
        super::drift::record(snap, &job, changes.clone(), policy, now);
        if succeeded {
            record_prediction(snap, &job, changes);
        }
    }
    if let Some(outputs) = outputs.filter(|_| succeeded) {
        let res = snap.resource.as_mut()?;
        match job.job_type {
            JobType::Action => res.outputs.extend(outputs),
            _ => res.outputs = outputs,
        }
    }
    next
}

/// Fails the preflight job's operation when the job or one of its checks failed (a pass
/// lets `decide` launch the provisioning job), and stops convergence for that spec. A
/// canceled operation ends as canceled instead.
fn judge_preflight(snap: &mut Snapshot, job: &Job, stats: Option<&Value>, now: Timestamp) {
    let Some(op) = job.operation_id.as_ref().and_then(|id| snap.operation(id)) else { return };
    if op.status == crate::state::ProvisioningState::Canceling {
        return;
    }
    if let Some(error) = super::preflight::failure(job, stats) {
        let (id, provisions) = (op.id.clone(), op.provisions());
        snap.set_operation_status(&id, crate::state::ProvisioningState::Failed, Some(error), now);
        // The spec failed its checks: convergence must not provision it (a new spec may). A
        // what-if's proposal was never the resource's spec.
        if let Some(res) = snap.resource.as_mut().filter(|_| provisions) {
            res.convergence_stopped_for = Some(res.desired_config_version.clone());
        }
    }
}

/// A check job that succeeded: what it would have changed is the what-if's prediction.
fn record_prediction(snap: &mut Snapshot, job: &Job, changes: Option<Vec<TaskChange>>) {
    let Some(op) = job.operation_id.as_ref().and_then(|id| snap.operation_mut(id)) else { return };
    // A what-if's, or the prediction an update's approver is shown.
    let approval = op.approval.as_mut().map(|a| &mut a.what_if);
    if let Some(w) = op.what_if.as_mut().or(approval) {
        w.predicted = Some(changes.unwrap_or_default());
    }
}

/// The backend cannot run the check job at all: the what-if ends `WhatIfNotSupported`, saying
/// what the backend would need.
fn refuse_what_if(snap: &mut Snapshot, key: &IdempotencyKey, message: &str, now: Timestamp) {
    let Some(op_id) = job_mut(snap, key).filter(|j| j.job_type == JobType::Check).and_then(|j| j.operation_id.clone())
    else {
        return;
    };
    // An update's prediction for its approver: the approver sees none, the update goes on.
    if snap.operation(&op_id).is_some_and(|o| o.what_if.is_none()) {
        return;
    }
    let error = CloudError::new(codes::WHAT_IF_NOT_SUPPORTED, message);
    snap.set_operation_status(&op_id, crate::state::ProvisioningState::Failed, Some(error), now);
}

/// The outputs of a successful job, if they can be kept; otherwise the observation becomes
/// the job's failure, saying why.
fn accept_outputs(obs: &mut Observation, limit: usize) -> Option<serde_json::Map<String, Value>> {
    let refusal = match obs.stats.take()?.get(OUTPUTS_STAT)?.clone() {
        Value::Object(map) => {
            let size = Value::Object(map.clone()).to_string().len();
            if size <= limit {
                return Some(map);
            }
            format!(
                "the job reported {size} bytes of outputs, more than this type's limit of {limit} (max_output_bytes)"
            )
        }
        other => format!("{} must be a mapping of output names to values, not {}", OUTPUTS_STAT, json_kind(&other)),
    };
    obs.state = JobState::Failed;
    obs.message = "The job succeeded, but its outputs were refused".into();
    obs.error_details = refusal;
    None
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum JobIo {
    Launch,
    Find,
    Poll,
    Cancel,
}

/// What a `Find` listed. For a `Launching` entry: the job to adopt (the earliest), or — only
/// once the last request's ambiguity window has passed — proof that a launch is safe. For a
/// job already tracked: the check for a second job of its key. Any job beyond the one kept
/// is a duplicate.
fn record_found(
    snap: &mut Snapshot,
    key: &IdempotencyKey,
    mut found: Vec<JobStart>,
    policy: &TypePolicy,
    now: Timestamp,
) -> Option<Timestamp> {
    let res = snap.resource.as_mut()?;
    let i = res.jobs.iter().position(|j| j.idempotency_key == *key)?;
    let job = &mut res.jobs[i];
    let launching = job.state == JobState::Launching;
    let kept = if launching {
        (!found.is_empty()).then(|| found.remove(0))
    } else {
        job.unique_confirmed = true;
        found.iter().position(|f| Some(&f.job_id) == job.job_id.as_ref()).map(|k| found.remove(k))
    };
    let mut hold = None;
    if launching {
        hold = match kept {
            Some(start) => {
                let finished = start.state.is_terminal();
                adopt(job, start, "Job found after an interrupted launch".into());
                if finished {
                    // Polled once more, so what it reported (outputs, checks) is read too.
                    job.state = JobState::Unknown;
                    None
                } else {
                    Some(now.add(policy.poll_interval))
                }
            }
            None => wait_out_ambiguity(job, policy, now),
        };
    }
    let (original, kept_id) = (res.jobs[i].clone(), res.jobs[i].job_id.clone());
    for start in found {
        if res.duplicate_jobs.iter().any(|d| d.job_id.as_ref() == Some(&start.job_id))
            || kept_id.as_ref() == Some(&start.job_id)
        {
            continue;
        }
        let mut dup = Job::new(original.job_type, start.state, now).with_job_id(start.job_id);
        dup.idempotency_key = original.idempotency_key.clone();
        dup.provider = original.provider.clone();
        dup.template = start.template;
        dup.handle = start.handle;
        dup.operation_id = original.operation_id.clone();
        dup.config_version = original.config_version.clone();
        let tracked = kept_id.as_ref().map_or("", JobId::as_str);
        dup.message = format!("A second job for idempotency key {key} (the tracked one is {tracked:?}); canceling it");
        res.duplicate_jobs.push(dup);
        hold = None;
    }
    trim_finished(&mut res.duplicate_jobs, policy.max_history);
    hold
}

/// "No job for the key" proves absence only once the last request can no longer be
/// processed; until then the entry stays `Launching` and is looked up again.
fn wait_out_ambiguity(job: &mut Job, policy: &TypePolicy, now: Timestamp) -> Option<Timestamp> {
    let until = job.launch_sent_at.map(|sent| sent.add(policy.launch_ambiguity));
    match until {
        Some(until) if now < until => {
            job.message = format!(
                "No job for the key yet; its launch request may still be processed until {}: looking again before \
                 any relaunch",
                until.to_rfc3339()
            );
            Some(now.add(policy.poll_interval.max(MIN_AMBIGUITY_RECHECK)).min(until))
        }
        _ => {
            job.absent_confirmed = true;
            None
        }
    }
}

/// Looking for a job that may still appear costs provider requests: not more often than this.
const MIN_AMBIGUITY_RECHECK: Duration = Duration::from_secs(2);

/// Keeps at most `max` entries by dropping the oldest finished ones; a running duplicate is
/// never dropped (it would run untracked).
fn trim_finished(jobs: &mut Vec<Job>, max: usize) {
    while jobs.len() > max.max(1) {
        match jobs.iter().position(|j| j.state.is_terminal()) {
            Some(i) => {
                jobs.remove(i);
            }
            None => break,
        }
    }
}

fn adopt(job: &mut Job, start: JobStart, message: String) {
    job.job_id = Some(start.job_id);
    job.handle = start.handle;
    job.state = start.state;
    if !start.template.is_empty() {
        job.template = start.template;
    }
    job.message = message;
}

/// A poll's outcome folded into the job alone (what [`apply`] does to the polled job).
pub(super) fn record_poll_on(
    job: &mut Job,
    outcome: Outcome,
    policy: &TypePolicy,
    now: Timestamp,
) -> Option<Timestamp> {
    record_on(job, JobIo::Poll, outcome, policy, now)
}

/// Folds the outcome of a launch, failed find, poll or cancel into `job`, and stamps when
/// the job was seen to end.
fn record_on(job: &mut Job, io: JobIo, outcome: Outcome, policy: &TypePolicy, now: Timestamp) -> Option<Timestamp> {
    let was_terminal = job.state.is_terminal();
    let next = fold_outcome(job, io, outcome, policy, now);
    if !was_terminal && job.state.is_terminal() {
        job.ended_at = Some(now);
    }
    next
}

fn fold_outcome(job: &mut Job, io: JobIo, outcome: Outcome, policy: &TypePolicy, now: Timestamp) -> Option<Timestamp> {
    let poll_later = Some(now.add(policy.poll_interval));
    match (io, outcome) {
        (JobIo::Launch, Outcome::Launched(start)) => {
            let message = match job.job_type {
                JobType::Provision => "Provisioning job triggered",
                JobType::Deprovision => "Deprovision job triggered",
                JobType::Action => "Action job triggered",
                JobType::Preflight => "Preflight job triggered",
                JobType::Check => "Check-mode job triggered",
            };
            adopt(job, start, message.into());
            poll_later
        }
        (JobIo::Find, Outcome::Failed(f)) if job.state != JobState::Launching => {
            // The look for a second job of a finished job's key. The job's own message stays:
            // its operation's outcome is read from it. A provider that cannot list the key's
            // jobs at all (template gone, access refused) is not asked again.
            let give_up = matches!(f.kind, FailureKind::Permanent | FailureKind::Unsupported | FailureKind::NotFound);
            job.unique_confirmed = give_up;
            match f.kind {
                FailureKind::RateLimited { retry_after } => Some(now.add(retry_after)),
                _ if give_up => None,
                _ => poll_later,
            }
        }
        (JobIo::Launch | JobIo::Find, Outcome::Failed(f)) => {
            let launch = io == JobIo::Launch;
            let refused = launch
                && matches!(
                    f.kind,
                    FailureKind::Permanent
                        | FailureKind::Unsupported
                        | FailureKind::NotFound
                        | FailureKind::RateLimited { .. }
                        | FailureKind::Transient
                );
            if refused {
                // The request was refused or never sent: it can create no job.
                job.launch_sends = job.launch_sends.saturating_sub(1);
            }
            match f.kind {
                // Only a launch the provider refused is known not to have started; a failed
                // `Find` proves nothing either way, so its entry stays `Launching` (below).
                FailureKind::Permanent | FailureKind::Unsupported | FailureKind::NotFound if launch => {
                    job.state = JobState::Failed;
                    job.message = format!("Launch failed: {}", f.message);
                    None
                }
                FailureKind::RateLimited { retry_after } => {
                    // A refusal: certainly not launched.
                    job.absent_confirmed = launch || job.absent_confirmed;
                    job.message = format!("Launch delayed: {}", f.message);
                    Some(now.add(retry_after))
                }
                FailureKind::Transient
                | FailureKind::Indeterminate
                | FailureKind::Permanent
                | FailureKind::Unsupported
                | FailureKind::NotFound => {
                    job.launch_attempts += 1;
                    // Only a launch that surely did not happen may skip the next Find.
                    job.absent_confirmed = f.kind == FailureKind::Transient && launch;
                    job.message = format!("Launch attempt {} failed: {}", job.launch_attempts, f.message);
                    Some(now.add(launch_retry(policy.poll_interval).delay(job.launch_attempts)))
                }
            }
        }
        (JobIo::Poll, Outcome::Observed(obs)) => {
            let changed =
                job.state != obs.state || job.message != obs.message || job.error_details != obs.error_details;
            if changed {
                job.state = obs.state;
                job.message = obs.message;
                job.error_details = obs.error_details;
            }
            if let Some(progress) = &obs.progress {
                progress.fold_into(job);
            }
            if job.state.is_terminal() {
                job.current_task.clear();
            }
            if obs.state.is_terminal() {
                None
            } else if job.stop.is_some() {
                // Its end is expected soon, whatever its age.
                poll_later
            } else {
                Some(now.add(policy.poll_interval_at(now.since(job.timestamp))))
            }
        }
        (JobIo::Poll | JobIo::Cancel, Outcome::Failed(Failure { kind: FailureKind::NotFound, message })) => {
            job.state = if io == JobIo::Cancel { JobState::Canceled } else { JobState::Failed };
            job.message = format!("The job no longer exists at the provider: {message}");
            None
        }
        (JobIo::Poll, Outcome::Failed(f)) => {
            let message = format!("Failed to get job status: {}", f.message);
            if job.message != message {
                job.message = message;
            }
            match f.kind {
                FailureKind::RateLimited { retry_after } => Some(now.add(retry_after.max(policy.poll_interval))),
                _ => poll_later,
            }
        }
        (JobIo::Cancel, Outcome::CancelRequested) => poll_later,
        (JobIo::Cancel, Outcome::CancelNotNeeded) => None,
        (JobIo::Cancel, Outcome::Failed(f)) => {
            job.message = format!("Failed to cancel job: {}", f.message);
            match f.kind {
                FailureKind::RateLimited { retry_after } => Some(now.add(retry_after)),
                _ => poll_later,
            }
        }
        // An outcome that does not belong to the effect: record nothing.
        _ => None,
    }
}
