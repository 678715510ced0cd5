//! Drift checks (docs/osac-lifecycle.md#drift-detection): a converged resource's create job
//! runs in check mode when its check is due; what it would change is drift, kept on the
//! resource; a type may have it put right; real work never waits behind a check.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use slipway_domain::admission::{self, Admitted};
use slipway_domain::drift::{DriftPolicy, DriftState, Remediation};
use slipway_domain::event::{EventKind, derive};
use slipway_domain::operation::Rerun;
use slipway_domain::reconcile::{Effect, Observation, Outcome};
use slipway_domain::whatif::TaskChange;
use slipway_domain::{JobState, JobType, OperationRequest, ProvisioningState as PS};

const INTERVAL: Duration = Duration::from_secs(600);

fn drifting(remediation: Remediation) -> World {
    let mut w = World::provisioned();
    w.policy.drift = Some(DriftPolicy { interval: INTERVAL, remediation });
    w.policy.api_version = "2025-06-01".into();
    w
}

fn checked(state: JobState, changes: Vec<TaskChange>) -> Outcome {
    Outcome::Observed(Observation {
        state,
        message: if state == JobState::Succeeded { "successful".into() } else { "failed".into() },
        error_details: String::new(),
        stats: None,
        changes: Some(changes),
        progress: None,
    })
}

fn edited() -> TaskChange {
    TaskChange {
        task: "Record the resource".into(),
        host: "localhost".into(),
        diff: json!({"before": "x", "after": "y"}),
    }
}

/// Moves to the resource's next drift check and expects it to launch as `key`.
fn check_due(w: &mut World, key: &slipway_domain::IdempotencyKey) {
    let due = w.res().schedule.drift_due.expect("a check is scheduled");
    w.set_now(due);
    w.launch(key, "check");
}

#[test]
fn a_converged_resource_is_checked_on_a_jittered_schedule() {
    let mut w = drifting(Remediation::Report);
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "nothing to do until the drift lane calls");
    let due = w.res().schedule.drift_due.expect("scheduled");
    let (low, high) = (T0.add(INTERVAL.mul_f64(0.9)), T0.add(INTERVAL.mul_f64(1.1)));
    assert!(due >= low && due <= high, "{due:?} within ±10% of the interval");
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "not yet due: the same time stays");
    assert_eq!(w.res().schedule.drift_due, Some(due));

    check_due(&mut w, &key(1, 2));
    let job = w.job(&key(1, 2));
    assert_eq!((job.job_type, job.action.as_str(), job.operation_id.as_ref()), (JobType::Check, "create", None));
    assert_eq!(job.config_version, w.res().desired_config_version);
    assert_eq!(w.res().schedule.drift_due, None, "none while one runs");

    let before = w.snap.clone();
    assert_eq!(w.poll(&key(1, 2), checked(JobState::Succeeded, vec![edited()])), None);
    let drift = w.res().drift.clone().expect("a verdict");
    assert_eq!((drift.state, drift.changes, drift.last_checked_at), (DriftState::Drifted, vec![edited()], w.now));
    let events: Vec<EventKind> = derive(&before, &w.snap, w.now).into_iter().map(|e| e.kind).collect();
    assert_eq!(events, [EventKind::DriftDetected]);
    assert_eq!(w.res().provisioning_state, PS::Succeeded, "drift is reported, not a state");
    assert!(w.res().schedule.drift_due.is_some_and(|d| d > w.now), "the next check is scheduled");
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "report only: nothing runs");

    // The next check finds the same drift: no new event. Then it is put right by hand.
    check_due(&mut w, &key(1, 3));
    let before = w.snap.clone();
    w.poll(&key(1, 3), checked(JobState::Succeeded, vec![edited()]));
    assert!(derive(&before, &w.snap, w.now).is_empty(), "the same drift again is no news");
    check_due(&mut w, &key(1, 4));
    w.poll(&key(1, 4), checked(JobState::Succeeded, vec![]));
    assert_eq!(w.res().drift.as_ref().map(|d| d.state), Some(DriftState::InSync));

    // A check whose job fails cannot tell.
    check_due(&mut w, &key(1, 5));
    w.poll(&key(1, 5), observed(JobState::Failed, "failed", "Task 'x' failed"));
    let drift = w.res().drift.clone().unwrap();
    assert_eq!(drift.state, DriftState::Unknown);
    assert!(drift.message.contains("Task 'x' failed"), "{}", drift.message);
}

#[test]
fn real_work_cancels_a_running_check_and_never_waits_for_it() {
    let mut w = drifting(Remediation::Report);
    w.decide();
    check_due(&mut w, &key(1, 2));
    w.put(2, v2()).expect("a PUT is accepted while a check runs");
    assert_eq!(w.cancel_job(&key(1, 2), Outcome::CancelRequested), Some(w.now.add(w.policy.poll_interval)));
    w.advance(w.policy.poll_interval);
    w.poll(&key(1, 2), checked(JobState::Canceled, vec![]));
    assert_eq!(w.res().drift, None, "a canceled check found nothing");
    w.launch(&key(2, 3), "2001");
    assert_eq!(w.job(&key(2, 3)).job_type, JobType::Provision);
}

#[test]
fn auto_remediation_runs_the_spec_again_and_checks_once_more() {
    let mut w = drifting(Remediation::Auto);
    w.decide();
    check_due(&mut w, &key(1, 2));
    w.poll(&key(1, 2), checked(JobState::Succeeded, vec![edited()]));
    assert_eq!(w.decide(), Effect::Sleep { until: Some(w.now) }, "an update operation starts");
    let drift = w.res().drift.clone().unwrap();
    let op_id = drift.remediation.clone().expect("the check names its remediation");
    let op = w.snap.operation(&op_id).expect("the operation exists").clone();
    assert_eq!((op.request, op.rerun, op.status), (OperationRequest::Update, Some(Rerun::Drift), PS::Accepted));
    assert_eq!(w.res().provisioning_state, PS::Accepted);
    assert_eq!(w.res().desired_config_version, spec(v1()).config_version(), "the resource's own spec");

    let of_op = |n: u64| slipway_domain::IdempotencyKey::from(format!("{op_id}:{n}"));
    w.launch(&of_op(3), "1002");
    assert_eq!(w.job(&of_op(3)).rerun, Some(Rerun::Drift), "the history says why it ran");
    w.poll(&of_op(3), observed(JobState::Succeeded, "successful", ""));
    // Put right: looked at again at once, which shows it in sync.
    w.launch(&of_op(4), "check");
    assert_eq!(w.job(&of_op(4)).job_type, JobType::Check);
    assert_eq!(w.snap.operation(&op_id).unwrap().status, PS::Succeeded);
    w.poll(&of_op(4), checked(JobState::Succeeded, vec![]));
    assert_eq!(w.res().drift.as_ref().map(|d| (d.state, d.remediation.is_none())), Some((DriftState::InSync, true)));
    assert_eq!(w.decide(), Effect::Sleep { until: None });
}

#[test]
fn a_check_on_request_is_an_operation_whose_result_is_the_resources_drift() {
    let mut w = World::provisioned();
    let c = w.ctx(2);
    let Ok(Admitted::Accepted { operation, .. }) = admission::admit_check_drift(&mut w.snap, &c) else {
        panic!("accepted")
    };
    assert_eq!(operation.request, OperationRequest::CheckDrift);
    w.launch(&key(2, 2), "check");
    assert_eq!((w.job(&key(2, 2)).job_type, w.job(&key(2, 2)).action.as_str()), (JobType::Check, "create"));
    w.poll(&key(2, 2), checked(JobState::Succeeded, vec![edited()]));
    w.decide();
    assert_eq!(w.op(2).status, PS::Succeeded);
    assert_eq!(w.op(2).what_if.as_ref().unwrap().predicted, Some(vec![edited()]));
    assert_eq!(w.res().drift.as_ref().map(|d| d.state), Some(DriftState::Drifted));
    assert_eq!(w.res().schedule.drift_due, None, "the type schedules no checks of its own");

    let c = w.ctx(3);
    w.put(4, v2()).unwrap();
    assert_eq!(
        admission::admit_check_drift(&mut w.snap, &c),
        Err(conflict("Cannot check the resource while an update operation is in progress"))
    );
}
