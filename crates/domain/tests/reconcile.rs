//! Engine-core scenarios: `decide` and `apply` driven step by step with an advancing clock —
//! provisioning, polling failures and deadlines (docs/osac-lifecycle.md,
//! docs/arm-contract.md#how-operations-end). Launches are in `exactly_once.rs`, cancellation
//! and deletion in `cancel_delete.rs`.

mod common;

use std::time::Duration;

use common::*;
use slipway_domain::reconcile::{Effect, FailureKind};
use slipway_domain::{JobState, JobType, ProvisioningState as PS};

// ---------------------------------------------------------------------------------------
// Provisioning
// ---------------------------------------------------------------------------------------

#[test]
fn create_records_a_launch_intent_before_launching() {
    let mut w = World::created();
    w.set_now(at(1));
    assert_eq!(w.decide(), Effect::Launch { key: key(1, 1) });
    let want = sent(intent(&key(1, 1), JobType::Provision, Some(1), spec(v1()).config_version(), at(1)));
    assert_eq!(w.res().jobs, vec![want]);
    assert_eq!(w.res().job_seq, 1);
    assert_eq!(w.op(1).status, PS::Provisioning);
    assert_eq!(w.op(1).last_transition_time, at(1));
    assert_eq!(w.res().provisioning_state, PS::Provisioning);
    assert_eq!(w.res().active_operation_id, Some(op_id(1)));
}

#[test]
fn launched_job_is_polled_until_it_succeeds() {
    let mut w = World::new();
    w.notify = true;
    w.put(1, v1()).unwrap();
    let k = key(1, 1);
    let effect = w.decide();
    assert_eq!(effect, Effect::Launch { key: k.clone() });
    assert_eq!(w.apply(&effect, launched("1001")), Some(T0.add(POLL)));
    let job = w.job(&k);
    assert_eq!(job.job_id_text(), "1001");
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.handle, serde_json::json!({"kind": "job", "id": "1001"}));
    assert_eq!(job.template, "osac-create-virtual-network");
    assert_eq!(job.message, "Provisioning job triggered");
    assert_eq!(job.timestamp, T0, "trigger time is the intent time");

    w.advance(POLL);
    let hold = w.poll(&k, observed(JobState::Running, "running", ""));
    assert_eq!(hold, Some(at(4)));
    assert_eq!(w.job(&k).state, JobState::Running);
    assert_eq!(w.job(&k).message, "running");
    assert_eq!(w.job(&k).timestamp, T0, "polling never moves the trigger time");
    w.advance(POLL);
    assert_eq!(w.poll(&k, observed(JobState::Running, "running", "")), Some(at(6)));
    assert_eq!(w.op(1).status, PS::Provisioning);

    w.advance(POLL);
    assert_eq!(w.poll(&k, observed(JobState::Succeeded, "successful", "")), None, "terminal: decide at once");
    assert_eq!(w.op(1).status, PS::Provisioning, "apply records the job only");
    assert!(w.snap.notifications.is_empty());

    assert_eq!(w.decide(), SLEEP);
    let op = w.op(1);
    assert_eq!(op.status, PS::Succeeded);
    assert_eq!(op.error, None);
    assert_eq!(op.end_time(), Some(at(6)));
    let res = w.res();
    assert_eq!(res.provisioning_state, PS::Succeeded);
    assert_eq!(res.active_operation_id, None);
    assert_eq!(res.last_error, None);
    assert_eq!(w.snap.notifications, vec![notification(1)]);

    let settled = w.snap.clone();
    w.advance(secs(3600));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.snap, settled, "a settled resource is left alone");
}

#[test]
fn a_long_running_job_is_polled_less_often_as_it_ages() {
    let mut w = World::created();
    w.policy.max_poll_interval = secs(30);
    let k = key(1, 1);
    w.launch(&k, "1001");
    let running = || observed(JobState::Running, "running", "");
    // Every 2 s while young; the delay doubles as it fits eight times into the job's age.
    for (age, next) in [(2, 4), (31, 33), (32, 36), (64, 72), (130, 146), (239, 255), (240, 270), (5_000, 5_030)] {
        w.set_now(at(age));
        assert_eq!(w.poll(&k, running()), Some(at(next)), "polled at age {age} s");
    }
    w.set_now(at(5_030));
    assert_eq!(w.poll(&k, observed(JobState::Succeeded, "successful", "")), None);
}

#[test]
fn no_poll_is_put_off_past_the_operations_deadline() {
    let mut w = World::created();
    w.policy.create_deadline = secs(250);
    let k = key(1, 1);
    w.launch(&k, "1001");
    w.set_now(at(240));
    assert_eq!(w.poll(&k, observed(JobState::Running, "running", "")), Some(at(250)), "not at 270 s");
    w.set_now(at(250));
    assert_eq!(w.decide(), Effect::Poll { key: k.clone() });
    assert_eq!(w.op(1).status, PS::Failed, "the deadline ended the operation on time");
    // With no operation left to end, the job is polled as its age says.
    assert_eq!(w.poll(&k, observed(JobState::Running, "running", "")), Some(at(280)));
}

#[test]
fn update_operation_runs_its_own_job() {
    let mut w = World::provisioned();
    w.set_now(at(100));
    w.put(2, v2()).unwrap();
    assert_eq!(w.decide(), Effect::Launch { key: key(2, 2) });
    let want = sent(intent(&key(2, 2), JobType::Provision, Some(2), spec(v2()).config_version(), at(100)));
    assert_eq!(w.job(&key(2, 2)), &want);
    assert_eq!(w.op(2).status, PS::Updating);
    assert_eq!(w.res().provisioning_state, PS::Updating);
    w.apply(&Effect::Launch { key: key(2, 2) }, launched("1002"));
    w.advance(secs(30));
    assert_eq!(w.poll(&key(2, 2), observed(JobState::Succeeded, "successful", "")), None);
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(2).status, PS::Succeeded);
    assert_eq!(w.res().provisioning_state, PS::Succeeded);
    assert_eq!(w.res().jobs.len(), 2);
}

#[test]
fn update_waits_for_an_earlier_job_to_finish() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Failed, "failed", ""));
    assert_eq!(w.decide(), sleep_until(at(120)));
    w.set_now(at(120));
    w.launch(&key(1, 2), "1002"); // convergence retry of v1
    w.set_now(at(150));
    w.put(2, v2()).unwrap();
    assert_eq!(w.decide(), Effect::Poll { key: key(1, 2) }, "one job at a time");
    assert_eq!(w.op(2).status, PS::Accepted);
    assert_eq!(w.poll(&key(1, 2), observed(JobState::Succeeded, "successful", "")), None);
    assert_eq!(w.decide(), Effect::Launch { key: key(2, 3) });
    assert_eq!(w.job(&key(2, 3)).config_version, spec(v2()).config_version());
    assert_eq!(w.op(2).status, PS::Updating);
}

#[test]
fn failed_job_fails_the_operation_then_convergence_retries_with_backoff() {
    let mut w = World::new();
    w.notify = true;
    w.put(1, v1()).unwrap();
    w.launch(&key(1, 1), "1001");
    w.set_now(at(90));
    let hold = w.poll(&key(1, 1), observed(JobState::Failed, "Job failed", "Playbook execution failed"));
    assert_eq!(hold, None);
    assert_eq!(w.job(&key(1, 1)).error_details, "Playbook execution failed");

    // Backoff is measured from the job's trigger time (T0): one failure → 2 minutes.
    assert_eq!(w.decide(), sleep_until(at(120)));
    let error = provisioning_failed("Job failed: Playbook execution failed");
    let op = w.op(1);
    assert_eq!(op.status, PS::Failed);
    assert_eq!(op.error, error);
    assert_eq!(op.end_time(), Some(at(90)));
    assert_eq!(w.res().provisioning_state, PS::Failed);
    assert_eq!(w.res().last_error, error);
    assert_eq!(w.res().active_operation_id, None);

    w.set_now(at(119));
    assert_eq!(w.decide(), sleep_until(at(120)));
    w.set_now(at(120));
    let desired = desired(&w);
    assert_eq!(w.decide(), Effect::Launch { key: key(1, 2) }, "named by the last operation");
    assert_eq!(
        w.job(&key(1, 2)),
        &sent(intent(&key(1, 2), JobType::Provision, None, desired, at(120))),
        "a convergence job belongs to no operation"
    );
    assert_eq!(w.res().provisioning_state, PS::Failed, "convergence does not move the state");
    w.apply(&Effect::Launch { key: key(1, 2) }, launched("1002"));
    w.set_now(at(150));
    w.poll(&key(1, 2), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.res().provisioning_state, PS::Succeeded);
    assert_eq!(w.res().last_error, None);
    let op = w.op(1);
    assert_eq!(op.status, PS::Failed, "the operation is not reopened");
    assert_eq!(op.error, error);
    assert_eq!(op.last_transition_time, at(90));
    assert_eq!(w.snap.notifications, vec![notification(1)], "one callback, on failure");
}

#[test]
fn backoff_switched_off_stops_after_a_failure() {
    let mut w = World::created();
    w.policy.backoff = None;
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Failed, "failed", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(1).status, PS::Failed);
    w.advance(secs(86_400));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.res().jobs.len(), 1);
}

#[test]
fn osac_backoff_integration_doubles_the_gap() {
    // The gap doubles (docs/osac-lifecycle.md#backoff): triggers at 0, 5, 15, 35, 65, 95 min.
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Failed, "failed", ""));
    assert_eq!(w.decide(), sleep_until(at(120)), "first failure: 2m");
    assert_eq!(w.res().jobs.len(), 1, "still exactly one provision job");
    // Come back after 5 minutes; later failures are observed at once.
    let mut expected_waits = Vec::new();
    let mut t = 300;
    for (seq, job_id) in [(2, "1002"), (3, "1003"), (4, "1004"), (5, "1005")] {
        w.set_now(at(t));
        w.launch(&key(1, seq), job_id);
        w.poll(&key(1, seq), observed(JobState::Failed, "failed", ""));
        let Effect::Sleep { until: Some(until) } = w.decide() else {
            panic!("backoff expected");
        };
        expected_waits.push(until.millis_after(w.now) / 60_000);
        t = until.millis_after(T0) / 1000;
    }
    // gaps 5 → 10m, 10 → 20m, 20 → 40 → capped 30m, 30 → 60 → 30m
    assert_eq!(expected_waits, [10, 20, 30, 30]);
    assert_eq!(w.res().jobs.len(), 5);
    assert!(w.res().jobs.iter().all(|j| j.state == JobState::Failed));
}

#[test]
fn short_history_keeps_the_backoff_at_its_base() {
    // docs/osac-lifecycle.md#backoff: with maxHistory 1 there are never two failed jobs.
    let mut w = World::created();
    w.policy.max_history = 1;
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Failed, "failed", ""));
    assert_eq!(w.decide(), sleep_until(at(120)));
    for (seq, t) in [(2, 120), (3, 240), (4, 360)] {
        w.set_now(at(t));
        w.launch(&key(1, seq), "x");
        w.poll(&key(1, seq), observed(JobState::Failed, "failed", ""));
        assert_eq!(w.decide(), sleep_until(at(t + 120)));
        assert_eq!(w.res().jobs.len(), 1);
    }
}

#[test]
fn externally_canceled_job_is_retried_and_a_success_recovers_the_resource() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.set_now(at(30));
    w.poll(&key(1, 1), observed(JobState::Canceled, "canceled", ""));
    // Row 7 (docs/osac-lifecycle.md): Canceled with the desired version backs off like a failure.
    assert_eq!(w.decide(), sleep_until(at(120)));
    let outside = Some(err("Canceled", "The job was canceled outside Slipway"));
    assert_eq!(w.op(1).status, PS::Canceled);
    assert_eq!(w.op(1).error, outside);
    assert_eq!(w.res().provisioning_state, PS::Canceled);
    assert_eq!(w.res().convergence_stopped_for, None, "nobody asked Slipway to stop");
    w.set_now(at(120));
    w.launch(&key(1, 2), "1002");
    w.poll(&key(1, 2), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.res().provisioning_state, PS::Succeeded, "the desired config is applied");
    assert_eq!(w.res().last_error, None);
    assert_eq!(w.op(1).status, PS::Canceled);
}

// ---------------------------------------------------------------------------------------
// Polling failures
// ---------------------------------------------------------------------------------------

#[test]
fn poll_not_found_fails_the_job() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.advance(POLL);
    let hold = w.poll(&key(1, 1), failed(FailureKind::NotFound, "job 1001 not found"));
    assert_eq!(hold, None);
    let job = w.job(&key(1, 1));
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.message, "The job no longer exists at the provider: job 1001 not found");
    w.decide();
    assert_eq!(w.op(1).status, PS::Failed);
    assert_eq!(w.op(1).error, provisioning_failed("The job no longer exists at the provider: job 1001 not found"));
}

#[test]
fn poll_errors_keep_the_state_and_retry() {
    // (failure, expected hold after now)
    let rows = [
        (FailureKind::Transient, POLL),
        (FailureKind::Indeterminate, POLL),
        (FailureKind::Permanent, POLL),
        (FailureKind::RateLimited { retry_after: secs(10) }, secs(10)),
        (FailureKind::RateLimited { retry_after: Duration::from_millis(500) }, POLL),
    ];
    for (kind, wait) in rows {
        let mut w = World::created();
        w.launch(&key(1, 1), "1001");
        w.advance(POLL);
        w.poll(&key(1, 1), observed(JobState::Running, "running", ""));
        w.advance(POLL);
        let hold = w.poll(&key(1, 1), failed(kind, "API unavailable"));
        assert_eq!(hold, Some(w.now.add(wait)), "{kind:?}");
        let job = w.job(&key(1, 1));
        assert_eq!(job.state, JobState::Running, "{kind:?}");
        assert_eq!(job.message, "Failed to get job status: API unavailable", "{kind:?}");
        assert_eq!(w.decide(), Effect::Poll { key: key(1, 1) }, "{kind:?}");
        assert_eq!(w.op(1).status, PS::Provisioning);
    }
}

#[test]
fn unrelated_outcomes_and_sleeps_record_nothing() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    let before = w.snap.clone();
    assert_eq!(w.apply(&SLEEP, launched("x")), None);
    assert_eq!(w.apply(&Effect::Poll { key: key(1, 1) }, launched("x")), None);
    assert_eq!(w.apply(&Effect::Poll { key: "nope:1".into() }, observed(JobState::Failed, "", "")), None);
    assert_eq!(w.snap, before);
}

// ---------------------------------------------------------------------------------------
// Deadlines (docs/arm-contract.md#how-operations-end)
// ---------------------------------------------------------------------------------------

#[test]
fn create_deadline_fails_the_operation_and_the_job_is_still_followed() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.advance(POLL);
    w.poll(&key(1, 1), observed(JobState::Running, "running", ""));
    w.set_now(T0.add(secs(3600)).sub(Duration::from_millis(1)));
    assert_eq!(w.decide(), Effect::Poll { key: key(1, 1) });
    assert_eq!(w.op(1).status, PS::Provisioning);
    w.set_now(T0.add(secs(3600)));
    assert_eq!(w.decide(), Effect::Poll { key: key(1, 1) }, "the job is still polled");
    let timeout =
        Some(err("OperationTimedOut", "The create operation did not complete within 3600s; last job: Running running"));
    assert_eq!(w.op(1).status, PS::Failed);
    assert_eq!(w.op(1).error, timeout);
    assert_eq!(w.op(1).end_time(), Some(at(3600)));
    assert_eq!(w.res().provisioning_state, PS::Failed);
    assert_eq!(w.res().last_error, timeout);
    assert_eq!(w.res().active_operation_id, None);
    w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.res().provisioning_state, PS::Succeeded, "the resource kept converging");
    assert_eq!(w.op(1).status, PS::Failed);
}

#[test]
fn update_deadline_is_per_type() {
    let mut w = World::provisioned();
    w.policy.update_deadline = secs(600);
    w.set_now(at(1000));
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 2), "1002");
    w.set_now(at(1600));
    assert_eq!(w.decide(), Effect::Poll { key: key(2, 2) });
    assert_eq!(
        w.op(2).error,
        Some(err(
            "OperationTimedOut",
            "The update operation did not complete within 600s; last job: Pending Provisioning job triggered"
        ))
    );
}

#[test]
fn deadline_also_ends_an_operation_stuck_before_its_launch() {
    let mut w = World::created();
    let launch = w.decide();
    w.apply(&launch, failed(FailureKind::Indeterminate, "?"));
    w.set_now(at(3600));
    assert_eq!(w.decide(), Effect::Find { key: key(1, 1) });
    assert_eq!(w.op(1).status, PS::Failed);
    assert_eq!(w.op(1).error.as_ref().map(|e| e.code.as_str()), Some("OperationTimedOut"));
}
