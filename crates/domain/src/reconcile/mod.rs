//! The engine's pure core. [`decide`] looks at a snapshot, makes the changes that need no
//! I/O (deadlines, completions, launch intents) and names the one effect to perform next.
//! [`apply`] folds the effect's outcome back into a snapshot. The engine runs each inside a
//! store transaction on the freshest snapshot, so a concurrent client write is never lost.
//!
//! Guarantees:
//! * A launch is always preceded by a committed `Launching` job entry carrying a unique
//!   idempotency key and the time its request is sent; a `Launching` entry found later is
//!   resolved with `Find`, and launched again only after the provider reports it absent
//!   once the last request's ambiguity window (`TypePolicy::launch_ambiguity`) has passed:
//!   before then the request may still be processed and create the job.
//! * A second job for one key (a request processed later than the window allowed for) is
//!   never adopted and never left running: it is recorded in `duplicate_jobs`, canceled and
//!   followed until it ends. A key sent more than once is looked up again when its job ends.
//! * At most one job runs per resource: a new job (provisioning, preflight, action or
//!   delete) is only started once every earlier one is terminal.
//! * Every non-terminal operation ends: by its job's outcome, by supersession, by
//!   cancellation, or by its deadline.

pub mod cascade;
mod delete;
mod drift;
mod group;
mod launch;
pub mod preflight;
mod record;
pub mod restore;
mod waiting;

use std::time::Duration;

use serde_json::Value;

use crate::admission::canceled_by_user;
use crate::backoff::retry_at;
use crate::evaluate::{Action, evaluate_action};
use crate::ids::OperationId;
use crate::job::{Job, JobState, JobType};
use crate::names::{IdempotencyKey, JobId};
use crate::operation::{CloudError, Operation, OperationRequest, codes};
use crate::policy::TypePolicy;
use crate::resource::{ResourceRecord, Snapshot};
use crate::state::ProvisioningState;
use crate::time::Timestamp;

use self::launch::{begin_launch, record_intent, resolve_launching};

/// The next thing the engine must do for a resource. Jobs are named by idempotency key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing to do until `until` (`None`: until a client asks for something).
    Sleep {
        until: Option<Timestamp>,
    },
    Launch {
        key: IdempotencyKey,
    },
    /// Resolve a `Launching` entry left by a crash or an indeterminate launch.
    Find {
        key: IdempotencyKey,
    },
    Poll {
        key: IdempotencyKey,
    },
    Cancel {
        key: IdempotencyKey,
    },
    /// Stop a job at once (a forced cancel), without the provider's grace.
    Kill {
        key: IdempotencyKey,
    },
    /// Cancel a second job the provider started for `key` (see `duplicate_jobs`).
    CancelDuplicate {
        key: IdempotencyKey,
        job_id: JobId,
    },
    PollDuplicate {
        key: IdempotencyKey,
        job_id: JobId,
    },
    /// Admit a delete for each of these children (a parent's cascading delete).
    DeleteChildren {
        children: Vec<crate::ids::ArmId>,
    },
}

/// What performing an effect produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Launched(JobStart),
    /// Every job the provider has for the key, oldest first.
    Found(Vec<JobStart>),
    Observed(Observation),
    CancelRequested,
    /// The job had already finished; poll it for its final state.
    CancelNotNeeded,
    /// The children's delete operations (`DeleteChildren`); a child that was gone has none.
    ChildDeletes(Vec<(crate::ids::ArmId, OperationId)>),
    Failed(Failure),
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobStart {
    pub job_id: JobId,
    pub handle: Value,
    pub state: JobState,
    pub template: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub state: JobState,
    /// The provider's status word or short explanation.
    pub message: String,
    /// Failure details (failed task message, traceback).
    pub error_details: String,
    /// What the job reported with `set_stats` (its `slipway_outputs`, a preflight job's
    /// `slipway_checks`); `None`: nothing.
    pub stats: Option<Value>,
    /// A check-mode job that ended: the tasks it would have changed.
    pub changes: Option<Vec<crate::whatif::TaskChange>>,
    /// How far the job has got, when the provider read it.
    pub progress: Option<crate::progress::JobProgress>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The provider refused for now; nothing happened.
    RateLimited { retry_after: Duration },
    /// The job (or template) does not exist.
    NotFound,
    /// Nothing happened; trying again may work.
    Transient,
    /// The request may or may not have taken effect (e.g. a launch whose answer was lost).
    Indeterminate,
    /// Nothing happened and trying again will not help.
    Permanent,
    /// Nothing happened: the backend cannot run the job as asked (check mode).
    Unsupported,
}

/// Decides the next effect, applying I/O-free changes to `snap`. A resource that becomes
/// `Succeeded` here wakes its children (they may be waiting for it).
pub fn decide(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) -> Effect {
    let was = snap.resource.as_ref().map(|r| r.provisioning_state);
    let effect = decide_next(snap, policy, now);
    let is = snap.resource.as_ref().map(|r| r.provisioning_state);
    // A group waits for nothing, and nothing in it waits for the group.
    let group = snap.resource.as_ref().is_some_and(|r| r.id.is_group());
    if is == Some(ProvisioningState::Succeeded) && was != is && !group {
        snap.wake_children = policy.has_child_types;
        snap.wake_referrers = policy.is_referenced;
    }
    effect
}

fn decide_next(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) -> Effect {
    if snap.resource.is_none() {
        return Effect::Sleep { until: None };
    }
    enforce_deadline(snap, policy, now);
    if res(snap).id.is_group() {
        return group::decide(snap, policy, now);
    }
    if let Some(effect) = follow_duplicates(snap, policy, now) {
        return effect;
    }
    // A forced cancel's job is killed (again every `cancel_retry` while it runs); a
    // `Launching` one is found first.
    let kill_due = |j: &Job| {
        j.kill_requested()
            && !j.state.is_terminal()
            && j.state != JobState::Launching
            && j.stop_due(now, policy.cancel_retry)
    };
    if let Some(job) = res_mut(snap).jobs.iter_mut().find(|j| kill_due(j)) {
        job.ask_to_stop(now);
        return Effect::Kill { key: job.idempotency_key.clone() };
    }
    if let Some(effect) = resolve_launching(snap, now) {
        return effect;
    }
    if let Some(key) = res(snap).jobs.iter().find(|j| j.state.is_terminal() && j.needs_duplicate_check()) {
        // Before its operation ends on it: a late first request may have started another.
        return Effect::Find { key: key.idempotency_key.clone() };
    }
    // A request waiting for approval ends when its time is up (a job still running, a
    // convergence retry or its prediction, is then followed to its end like any other).
    if crate::approval::wait(snap, now) == Some(None) && snap.resource.is_none() {
        return Effect::Sleep { until: None };
    }
    if res(snap).is_deleting() { delete::decide_delete(snap, policy, now) } else { decide_provision(snap, policy, now) }
}

fn res(snap: &Snapshot) -> &ResourceRecord {
    snap.resource.as_ref().expect("decide checked the resource exists")
}

fn res_mut(snap: &mut Snapshot) -> &mut ResourceRecord {
    snap.resource.as_mut().expect("decide checked the resource exists")
}

fn job_mut<'a>(snap: &'a mut Snapshot, key: &IdempotencyKey) -> Option<&'a mut Job> {
    snap.resource.as_mut()?.jobs.iter_mut().find(|j| j.idempotency_key == *key)
}

/// When the active operation runs out of time, if one is active.
pub(crate) fn operation_deadline(snap: &Snapshot, policy: &TypePolicy) -> Option<Timestamp> {
    snap.active_operation().map(|op| op.running_since().add(policy.deadline(op.request)))
}

fn enforce_deadline(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) {
    let Some(op) = snap.active_operation().filter(|o| !o.is_waiting_for_approval()).cloned() else { return };
    let limit = policy.deadline(op.request);
    if now < op.running_since().add(limit) {
        return;
    }
    let what = op.request.as_str();
    let id = op.id.clone();
    let last_job =
        res(snap).jobs.last().map(|j| format!("; last job: {} {}", j.state.as_str(), j.message_with_details()));
    let message =
        format!("The {what} operation did not complete within {}s{}", limit.as_secs(), last_job.unwrap_or_default());
    let mut error = CloudError::new(codes::OPERATION_TIMED_OUT, message);
    // What held it up (a cascade's failing children) stays in the details.
    error.details = op.error.map(|e| if e.details.is_empty() { vec![e] } else { e.details }).unwrap_or_default();
    snap.set_operation_status(&id, ProvisioningState::Failed, Some(error), now);
}

/// Duplicates are canceled (again every `cancel_retry`) and polled until they end, before
/// anything else happens to the resource.
fn follow_duplicates(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) -> Option<Effect> {
    let dup = res_mut(snap).duplicate_jobs.iter_mut().find(|d| !d.state.is_terminal())?;
    // A duplicate is recorded from the job a find listed, so it always has an id.
    let (key, job_id) = (dup.idempotency_key.clone(), dup.job_id.clone()?);
    if dup.stop_due(now, policy.cancel_retry) {
        dup.ask_to_stop(now);
        Some(Effect::CancelDuplicate { key, job_id })
    } else {
        Some(Effect::PollDuplicate { key, job_id })
    }
}

/// Asks a running job to cancel once per `cancel_retry`; polls it in between.
fn cancel_or_poll(snap: &mut Snapshot, key: IdempotencyKey, policy: &TypePolicy, now: Timestamp) -> Effect {
    let job = job_mut(snap, &key).expect("key names an existing job");
    if job.stop_due(now, policy.cancel_retry) {
        job.ask_to_stop(now);
        Effect::Cancel { key }
    } else {
        Effect::Poll { key }
    }
}

fn latest_for_op<'a>(jobs: &'a [Job], op: &OperationId) -> Option<&'a Job> {
    let mut latest: Option<&Job> = None;
    for j in jobs.iter().filter(|j| j.operation_id.as_ref() == Some(op)) {
        if latest.is_none_or(|l| j.timestamp > l.timestamp) {
            latest = Some(j);
        }
    }
    latest
}

fn job_error(code: &str, job: &Job, fallback: &str) -> CloudError {
    let text = job.message_with_details();
    CloudError::new(code, if text.is_empty() { fallback.to_string() } else { text })
}

/// Ends an operation according to its (terminal) job.
fn finish_from_job(snap: &mut Snapshot, op: &Operation, job: &Job, user_canceled: bool, now: Timestamp) {
    let failed = || match job.job_type {
        JobType::Action => job_error(codes::ACTION_FAILED, job, "The action job failed"),
        JobType::Check => job_error(codes::WHAT_IF_FAILED, job, "The check-mode job failed"),
        JobType::Preflight => preflight::failure(job, None)
            .unwrap_or_else(|| CloudError::new(codes::PREFLIGHT_FAILED, "The preflight job failed")),
        _ => job_error(codes::PROVISIONING_FAILED, job, "The provisioning job failed"),
    };
    let (status, error) = match job.state {
        JobState::Succeeded if job.job_type != JobType::Preflight => (ProvisioningState::Succeeded, None),
        // A passed preflight ends its operation only when the user canceled it meanwhile.
        JobState::Succeeded | JobState::Canceled if user_canceled => {
            (ProvisioningState::Canceled, Some(canceled_by_user()))
        }
        JobState::Canceled => (
            ProvisioningState::Canceled,
            Some(CloudError::new(codes::CANCELED, "The job was canceled outside Slipway")),
        ),
        _ => (ProvisioningState::Failed, Some(failed())),
    };
    let op_id = &op.id;
    if !op.provisions() {
        // An action or a what-if changes nothing convergence keeps.
        snap.set_operation_status(op_id, status, error, now);
        return;
    }
    if status == ProvisioningState::Succeeded {
        res_mut(snap).convergence_stopped_for = None;
    }
    let refused = job.job_type == JobType::Preflight && status == ProvisioningState::Failed;
    if refused || (user_canceled && status != ProvisioningState::Succeeded) {
        // The spec failed its checks, or the user asked to stop (a job that failed anyway
        // must not be retried either): convergence leaves this spec alone.
        let res = res_mut(snap);
        res.convergence_stopped_for = Some(res.desired_config_version.clone());
    }
    snap.set_operation_status(op_id, status, error, now);
}

fn decide_provision(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) -> Effect {
    if let Some(op) = snap.active_operation().cloned()
        && let Some(effect) = follow_operation(snap, policy, &op, now)
    {
        return effect;
    }
    // A job outliving its operation (its deadline passed) finishes before anything else runs.
    if let Some(j) = running_job(&res(snap).jobs) {
        return Effect::Poll { key: j.idempotency_key.clone() };
    }
    converge(snap, policy, now)
}

/// The next step of the active operation; `None` once it ended here (convergence decides).
/// A create or update waits for its parent and references, runs the type's preflight job if
/// it has one, then its provisioning job; an action runs its action's job.
fn follow_operation(snap: &mut Snapshot, policy: &TypePolicy, op: &Operation, now: Timestamp) -> Option<Effect> {
    // A create's or an update's check job predicted it for its approver: not one of its steps.
    let prediction = |j: &&Job| op.provisions() && j.job_type == JobType::Check;
    let op_job = latest_for_op(&res(snap).jobs, &op.id).filter(|j| !prediction(j)).cloned();
    if op.status == ProvisioningState::Canceling {
        match op_job {
            Some(j) if !j.state.is_terminal() => return Some(cancel_or_poll(snap, j.idempotency_key, policy, now)),
            Some(j) => finish_from_job(snap, op, &j, true, now),
            None => {
                let res = res_mut(snap);
                if op.provisions() {
                    res.convergence_stopped_for = Some(res.desired_config_version.clone());
                }
                snap.set_operation_status(&op.id, ProvisioningState::Canceled, Some(canceled_by_user()), now);
            }
        }
        return None;
    }
    if let Some(approval) = op.approval.as_ref().filter(|_| op.is_waiting_for_approval()) {
        // Nothing of its own runs but, for an update, its prediction: the create job in check
        // mode on the proposed spec, once, for the approver to see.
        if let Some(j) = running_job(&res(snap).jobs) {
            return Some(Effect::Poll { key: j.idempotency_key.clone() });
        }
        let predicted =
            res(snap).jobs.iter().any(|j| j.job_type == JobType::Check && j.operation_id.as_ref() == Some(&op.id));
        if op.request == OperationRequest::Update && approval.what_if.predicted.is_none() && !predicted {
            return Some(begin_launch(snap, policy, JobType::Check, Some(op.id.clone()), now));
        }
        return Some(Effect::Sleep { until: Some(approval.deadline) });
    }
    if let Some(j) = running_job(&res(snap).jobs) {
        // A scheduled drift check gives way to real work; the operation's own job, or an
        // earlier one, must finish first.
        let key = j.idempotency_key.clone();
        // So does an approved request's prediction.
        let yields = j.operation_id.is_none() || (op.provisions() && j.operation_id.as_ref() == Some(&op.id));
        if j.job_type == JobType::Check && yields && j.state != JobState::Launching {
            return Some(cancel_or_poll(snap, key, policy, now));
        }
        return Some(Effect::Poll { key });
    }
    // What a what-if runs once its preflight passed, or at once: the job it asks about, in
    // check mode.
    let main_job = if op.what_if.is_some() { JobType::Check } else { JobType::Provision };
    match op_job {
        // Passed (a failed verdict ended the operation when the job's end was recorded).
        Some(j) if j.job_type == JobType::Preflight && j.state == JobState::Succeeded => {
            Some(begin_launch(snap, policy, main_job, Some(op.id.clone()), now))
        }
        Some(j) => {
            finish_from_job(snap, op, &j, false, now);
            None
        }
        // A proposed spec is checked as its PUT would be; a delete has no preflight, nor has
        // a drift check (its spec passed when it was put).
        None if op.request == OperationRequest::WhatIf
            && op.what_if.as_ref().is_some_and(|w| w.after.is_some())
            && policy.preflight =>
        {
            Some(begin_launch(snap, policy, JobType::Preflight, Some(op.id.clone()), now))
        }
        None if op.what_if.is_some() => Some(begin_launch(snap, policy, JobType::Check, Some(op.id.clone()), now)),
        None if !op.provisions() => Some(begin_launch(snap, policy, JobType::Action, Some(op.id.clone()), now)),
        None => {
            if let Some(blocker) = waiting_on(snap) {
                // Woken by the blocker's change; at the latest, the operation's deadline ends it.
                if let Some(o) = snap.operation_mut(&op.id) {
                    o.waiting_on = Some(blocker);
                }
                return Some(Effect::Sleep { until: Some(op.running_since().add(policy.deadline(op.request))) });
            }
            let first = if policy.preflight { JobType::Preflight } else { JobType::Provision };
            Some(begin_launch(snap, policy, first, Some(op.id.clone()), now))
        }
    }
}

/// The latest job still running, of any type but a delete's (at most one runs at a time).
fn running_job(jobs: &[Job]) -> Option<&Job> {
    jobs.iter().filter(|j| !j.state.is_terminal() && j.job_type != JobType::Deprovision).max_by_key(|j| j.timestamp)
}

/// What a provisioning job waits for: a child's parent, then every referenced resource,
/// must be `Succeeded` (their records are in `snap.related`) before it starts.
fn waiting_on(snap: &Snapshot) -> Option<String> {
    let res = res(snap);
    if let Some(parent) = res.id.parent() {
        match snap.related(&parent) {
            Some(p) if p.provisioning_state == ProvisioningState::Succeeded => {}
            _ => return Some(parent.to_string()),
        }
    }
    crate::reference::unready(snap, res)
}

/// No operation in progress: keep the resource at its desired config (OSAC lifecycle).
fn converge(snap: &mut Snapshot, policy: &TypePolicy, now: Timestamp) -> Effect {
    let res = res(snap);
    let desired = res.desired_config_version.clone();
    let stopped = res.convergence_stopped_for.as_ref() == Some(&desired);
    let mut action = evaluate_action(&res.jobs, &desired, || false).cloned();
    // A launch that failed before any job existed has no job id, which the OSAC table reads
    // as "no job" (row 3 of docs/osac-lifecycle.md: Trigger). It is a failed attempt at this
    // version: back off, or the engine relaunches in a tight loop.
    if let Action::Trigger(Some(l)) = &action
        && l.config_version == desired
        && l.state.is_terminal()
        && l.state != JobState::Succeeded
    {
        action = Action::Backoff(l.clone());
    }
    match action {
        Action::Skip(latest) => {
            let res = res_mut(snap);
            let recovered = matches!(res.provisioning_state, ProvisioningState::Failed | ProvisioningState::Canceled)
                && latest.state == JobState::Succeeded
                && latest.config_version == desired;
            if recovered {
                res.provisioning_state = ProvisioningState::Succeeded;
                res.last_error = None;
            }
            drift::step(snap, policy, now)
        }
        Action::Poll(latest) => Effect::Poll { key: latest.idempotency_key },
        Action::Requeue => Effect::Sleep { until: Some(now.add(policy.poll_interval)) },
        Action::Trigger(_) | Action::Backoff(_) if stopped || policy.backoff.is_none() => Effect::Sleep { until: None },
        // A convergence retry of a child waits for its parent too (woken by it).
        Action::Trigger(_) | Action::Backoff(_) if waiting_on(snap).is_some() => Effect::Sleep { until: None },
        Action::Trigger(_) => begin_launch(snap, policy, JobType::Provision, None, now),
        Action::Backoff(latest) => {
            let wait = policy.backoff.expect("checked above").provision(&res_mut(snap).jobs, &desired);
            match retry_at(&latest, wait, now) {
                Some(at) => Effect::Sleep { until: Some(at) },
                None => begin_launch(snap, policy, JobType::Provision, None, now),
            }
        }
    }
}

pub use delete::FORCED_DELETE_NOTE;
pub use record::apply;
pub use waiting::PollWait;
