//! POST actions and preflight checks (docs/arm-contract.md#actions,
//! docs/arm-contract.md#preflight-checks): an action is an operation of its own that runs its
//! job without touching the spec or the resource's state; a type's preflight job runs before
//! every create and update job, and its failed checks fail the operation, each kept.

mod common;

use common::*;
use serde_json::{Value, json};
use slipway_domain::admission::{self, Admitted, Rejection};
use slipway_domain::operation::{ActionCall, codes};
use slipway_domain::reconcile::{Effect, Observation, Outcome};
use slipway_domain::{JobState, JobType, OperationRequest, ProvisioningState as PS};

fn call(name: &str) -> ActionCall {
    ActionCall { name: name.into(), parameters: json!({"force": true}) }
}

/// Admits `POST …/{name}` as operation `op`.
fn act(w: &mut World, op: u32, name: &str) -> Result<Admitted, Rejection> {
    let c = w.ctx(op);
    admission::admit_action(&mut w.snap, call(name), &c)
}

fn with_stats(state: JobState, stats: Value) -> Outcome {
    Outcome::Observed(Observation {
        state,
        message: state.as_str().to_lowercase(),
        error_details: String::new(),
        stats: Some(stats),
        changes: None,
        progress: None,
    })
}

#[test]
fn action_admission_rules() {
    let mut absent = World::new();
    assert_eq!(act(&mut absent, 2, "restart"), Err(Rejection::NotFound));

    let mut busy = World::created();
    let Err(Rejection::Conflict { message, .. }) = act(&mut busy, 2, "restart") else { panic!("a create runs") };
    assert_eq!(message, "Cannot restart the resource while a create operation is in progress");

    let mut w = World::provisioned();
    let Ok(Admitted::Accepted { operation, created: false }) = act(&mut w, 2, "restart") else { panic!() };
    assert_eq!((operation.request, operation.status), (OperationRequest::Action, PS::Accepted));
    assert_eq!(operation.action, Some(call("restart")));
    let Err(Rejection::Conflict { message, .. }) = act(&mut w, 3, "stop") else { panic!("one operation at a time") };
    assert_eq!(message, "Cannot stop the resource while the action 'restart' is in progress");
    let Err(Rejection::Conflict { .. }) = w.put(3, v2()) else { panic!("a PUT waits for the action") };
    assert_eq!(w.res().provisioning_state, PS::Succeeded, "an action leaves the resource's state alone");

    let mut deleting = World::provisioned();
    deleting.delete(2).unwrap();
    let Err(Rejection::Conflict { message, .. }) = act(&mut deleting, 3, "restart") else { panic!() };
    assert_eq!(message, "Cannot restart the resource while it is being deleted");
}

#[test]
fn an_action_runs_its_own_job_and_leaves_spec_and_state_alone() {
    let mut w = World::provisioned();
    w.res_mut().outputs = json!({"ipAddress": "10.0.0.4", "powerState": "Running"}).as_object().unwrap().clone();
    let (version, spec) = (w.res().desired_config_version.clone(), w.res().spec.clone());
    act(&mut w, 2, "stop").unwrap();
    w.launch(&key(2, 2), "2001");
    let job = w.job(&key(2, 2)).clone();
    assert_eq!((job.job_type, job.action.as_str()), (JobType::Action, "stop"));
    assert_eq!(w.op(2).status, PS::Updating);
    assert_eq!(w.res().provisioning_state, PS::Succeeded);
    let ended =
        w.poll(&key(2, 2), with_stats(JobState::Succeeded, json!({"slipway_outputs": {"powerState": "Stopped"}})));
    assert_eq!(ended, None);
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    assert_eq!(w.op(2).status, PS::Succeeded);
    assert_eq!(w.res().active_operation_id, None);
    assert_eq!(w.res().desired_config_version, version, "the config version is untouched");
    assert_eq!(w.res().spec, spec);
    assert_eq!(
        Value::Object(w.res().outputs.clone()),
        json!({"ipAddress": "10.0.0.4", "powerState": "Stopped"}),
        "an action's outputs merge into the resource's"
    );
    assert!(w.res().jobs.iter().filter(|j| j.job_type == JobType::Provision).count() == 1, "no provisioning job ran");
}

#[test]
fn a_failed_action_fails_its_operation_only() {
    let mut w = World::provisioned();
    act(&mut w, 2, "restart").unwrap();
    w.launch(&key(2, 2), "2001");
    w.poll(&key(2, 2), observed(JobState::Failed, "failed", "host unreachable"));
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "no convergence retry for an action");
    let op = w.op(2);
    assert_eq!(op.status, PS::Failed);
    assert_eq!(
        op.error.as_ref().map(|e| (e.code.as_str(), e.message.as_str())),
        Some((codes::ACTION_FAILED, "failed: host unreachable"))
    );
    assert_eq!(w.res().provisioning_state, PS::Succeeded);
    assert_eq!(w.res().last_error, None, "the resource shows no failure of its own");
    assert_eq!(w.res().convergence_stopped_for, None);
}

#[test]
fn an_action_is_canceled_deadlined_or_superseded_like_any_operation() {
    // Canceled before its job launched: ends at once, convergence untouched.
    let mut w = World::provisioned();
    act(&mut w, 2, "restart").unwrap();
    assert_eq!(w.cancel(2).unwrap().status, PS::Canceled);
    assert_eq!(w.res().convergence_stopped_for, None);
    // Canceled while running: the job is canceled and the operation ends Canceled.
    act(&mut w, 3, "restart").unwrap();
    w.launch(&key(3, 2), "3001");
    assert_eq!(w.cancel(3).unwrap().status, PS::Canceling);
    w.cancel_job(&key(3, 2), Outcome::CancelRequested);
    w.poll(&key(3, 2), observed(JobState::Canceled, "canceled", ""));
    w.decide();
    assert_eq!(w.op(3).status, PS::Canceled);
    assert_eq!(w.res().provisioning_state, PS::Succeeded);
    // Past its deadline: the operation fails, the job still finishes before anything else.
    act(&mut w, 4, "restart").unwrap();
    w.launch(&key(4, 3), "4001");
    w.advance(w.policy.update_deadline);
    assert_eq!(w.decide(), Effect::Poll { key: key(4, 3) });
    assert_eq!(w.op(4).status, PS::Failed);
    assert_eq!(w.op(4).error.as_ref().unwrap().code, codes::OPERATION_TIMED_OUT);
    // The next action waits for that job; a delete supersedes it and cancels its job first.
    act(&mut w, 5, "stop").unwrap();
    w.poll(&key(4, 3), observed(JobState::Succeeded, "successful", ""));
    w.launch(&key(5, 4), "5001");
    w.delete(6).unwrap();
    assert_eq!(w.op(5).status, PS::Canceled);
    assert_eq!(w.decide(), Effect::Cancel { key: key(5, 4) });
}

#[test]
fn an_action_job_whose_operation_ended_before_it_launched_is_dropped() {
    let mut w = World::provisioned();
    act(&mut w, 2, "restart").unwrap();
    let effect = w.decide();
    assert_eq!(effect, Effect::Launch { key: key(2, 2) });
    // The launch's answer is lost; meanwhile the operation runs out of time.
    w.apply(&effect, failed(slipway_domain::reconcile::FailureKind::Indeterminate, "timeout"));
    w.advance(w.policy.update_deadline);
    assert_eq!(w.decide(), Effect::Find { key: key(2, 2) });
    w.apply(&Effect::Find { key: key(2, 2) }, Outcome::Found(vec![]));
    w.advance(w.policy.launch_ambiguity);
    w.apply(&Effect::Find { key: key(2, 2) }, Outcome::Found(vec![]));
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "not launched for an operation that ended");
    assert!(w.res().jobs.iter().all(|j| j.job_type != JobType::Action));
}

fn preflight_world() -> World {
    let mut w = World::created();
    w.policy.preflight = true;
    w
}

#[test]
fn preflight_runs_before_the_provisioning_job_and_a_pass_lets_it_launch() {
    let mut w = preflight_world();
    w.launch(&key(1, 1), "1001");
    assert_eq!(w.job(&key(1, 1)).job_type, JobType::Preflight);
    assert_eq!(w.op(1).status, PS::Provisioning);
    let checks = json!({"slipway_checks": [{"name": "quota", "passed": true}]});
    assert_eq!(w.poll(&key(1, 1), with_stats(JobState::Succeeded, checks)), None);
    w.launch(&key(1, 2), "1002");
    assert_eq!(w.job(&key(1, 2)).job_type, JobType::Provision);
    w.poll(&key(1, 2), observed(JobState::Succeeded, "successful", ""));
    w.decide();
    assert_eq!(w.op(1).status, PS::Succeeded);
    // Convergence retries do not run it again; the next update does.
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 3), "2001");
    assert_eq!(w.job(&key(2, 3)).job_type, JobType::Preflight);
}

#[test]
fn failed_checks_fail_the_operation_each_in_its_details() {
    let mut w = preflight_world();
    w.launch(&key(1, 1), "1001");
    let checks = json!({"slipway_checks": [
        {"name": "quota", "passed": false, "message": "8 cores requested, 2 left"},
        {"name": "dns", "passed": true},
        {"name": "image", "passed": false, "message": "image rhel-10 not found"},
    ]});
    w.poll(&key(1, 1), with_stats(JobState::Failed, checks));
    let op = w.op(1).clone();
    assert_eq!(op.status, PS::Failed, "judged as the job's end is recorded");
    let error = op.error.unwrap();
    assert_eq!(error.code, codes::PREFLIGHT_FAILED);
    assert_eq!(error.message, "[quota] 8 cores requested, 2 left; [image] image rhel-10 not found");
    let details: Vec<_> = error.details.iter().map(|d| (d.code.as_str(), d.target.as_deref().unwrap())).collect();
    assert_eq!(details, [(codes::PREFLIGHT_CHECK_FAILED, "quota"), (codes::PREFLIGHT_CHECK_FAILED, "image")]);
    assert_eq!(w.res().provisioning_state, PS::Failed);
    assert_eq!(w.res().last_error.as_ref().map(|e| e.details.len()), Some(2));
    assert!(w.res().jobs.iter().all(|j| j.job_type != JobType::Provision), "no provisioning job launched");
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "convergence does not provision a refused spec");
    w.advance(mins(60));
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    // A new spec is checked again.
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 2), "2001");
    assert_eq!(w.job(&key(2, 2)).job_type, JobType::Preflight);
}

#[test]
fn a_preflight_canceled_while_it_runs_ends_canceled_even_if_it_passed() {
    let mut w = preflight_world();
    w.launch(&key(1, 1), "1001");
    assert_eq!(w.cancel(1).unwrap().status, PS::Canceling);
    w.cancel_job(&key(1, 1), Outcome::CancelRequested);
    let passed = json!({"slipway_checks": [{"name": "quota", "passed": true}]});
    w.poll(&key(1, 1), with_stats(JobState::Succeeded, passed));
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    assert_eq!(w.op(1).status, PS::Canceled);
    assert!(w.res().jobs.iter().all(|j| j.job_type != JobType::Provision), "the create job never launched");
}

#[test]
fn a_preflight_job_lost_at_the_provider_fails_the_operation_with_its_reason() {
    let mut w = preflight_world();
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), failed(slipway_domain::reconcile::FailureKind::NotFound, "job 1001"));
    w.decide();
    let error = w.op(1).error.clone().unwrap();
    assert_eq!(error.code, codes::PREFLIGHT_FAILED);
    assert_eq!(error.message, "[preflight] The job no longer exists at the provider: job 1001");
}
