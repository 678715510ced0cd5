//! Engine-core scenarios: `decide` and `apply` driven step by step with an advancing clock
//! (docs/osac-lifecycle.md, docs/exactly-once.md, docs/arm-contract.md#how-operations-end).

mod common;

use std::time::Duration;

use common::*;
use slipway_domain::admission::{Admitted, canceled_by_user};
use slipway_domain::reconcile::{Effect, FailureKind, Outcome};
use slipway_domain::{
    CloudError, ConfigVersion, IdempotencyKey, Job, JobState, JobType, ProvisioningState as PS, Timestamp,
};

const POLL: Duration = Duration::from_secs(2);

fn sleep_until(t: Timestamp) -> Effect {
    Effect::Sleep { until: Some(t) }
}

const SLEEP: Effect = Effect::Sleep { until: None };

fn provisioning_failed(message: &str) -> Option<CloudError> {
    Some(err("ProvisioningFailed", message))
}

/// The intent entry `begin_launch` records.
fn intent(key: &IdempotencyKey, job_type: JobType, op: Option<u32>, version: ConfigVersion, now: Timestamp) -> Job {
    let mut j = Job::new("", job_type, JobState::Launching, now);
    j.idempotency_key = key.clone();
    j.provider = "ansible".into();
    j.operation_id = op.map(op_id);
    j.config_version = version;
    j
}

fn desired(w: &World) -> ConfigVersion {
    w.res().desired_config_version.clone()
}

/// `intent` as `decide` leaves it when it hands the launch request to the engine.
fn sent(mut j: Job) -> Job {
    j.launch_sent_at = Some(j.timestamp);
    j.launch_sends = 1;
    j
}

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
    assert_eq!(job.job_id, "1001");
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
// Exactly-once launch (docs/exactly-once.md)
// ---------------------------------------------------------------------------------------

#[test]
fn launching_entry_found_after_a_crash_is_resolved_with_find() {
    let mut w = World::created();
    assert_eq!(w.decide(), Effect::Launch { key: key(1, 1) });
    // crash: the launch outcome is never recorded
    w.advance(w.policy.launch_ambiguity);
    let find = w.decide();
    assert_eq!(find, Effect::Find { key: key(1, 1) });
    assert_eq!(w.op(1).status, PS::Provisioning);
    assert_eq!(w.apply(&find, Outcome::Found(vec![])), None, "the request can no longer land");
    assert!(w.job(&key(1, 1)).absent_confirmed);
    assert_eq!(w.job(&key(1, 1)).state, JobState::Launching);
    assert_eq!(w.decide(), Effect::Launch { key: key(1, 1) }, "the same key, never a new one");
    assert_eq!(w.res().job_seq, 1);
    assert_eq!(w.res().jobs.len(), 1);
}

#[test]
fn found_job_is_adopted() {
    let mut w = World::created();
    w.decide();
    w.advance(secs(30));
    let find = w.decide();
    assert_eq!(find, Effect::Find { key: key(1, 1) });
    let hold = w.apply(&find, Outcome::Found(vec![started("1001", JobState::Running)]));
    assert_eq!(hold, Some(at(32)));
    let job = w.job(&key(1, 1));
    assert_eq!(job.job_id, "1001");
    assert_eq!(job.state, JobState::Running);
    assert_eq!(job.message, "Job found after an interrupted launch");
    assert_eq!(job.template, "osac-create-virtual-network");
    assert_eq!(job.timestamp, T0);
    assert_eq!(w.decide(), Effect::Poll { key: key(1, 1) });
}

#[test]
fn crash_after_a_retried_launch_is_resolved_with_find() {
    // A transient failure proves the first attempt did nothing; the second attempt's
    // outcome is lost, so it may have started a job: find it, never launch blindly.
    let mut w = World::created();
    let launch = w.decide();
    w.apply(&launch, failed(FailureKind::Transient, "connection refused"));
    w.advance(secs(2));
    assert_eq!(w.decide(), launch, "certainly not launched: launch again");
    // crash: outcome lost
    w.advance(secs(30));
    assert_eq!(w.decide(), Effect::Find { key: key(1, 1) });
}

#[test]
fn transient_launch_failures_retry_the_same_key_with_growing_delays() {
    let mut w = World::created();
    let launch = Effect::Launch { key: key(1, 1) };
    let mut delays = Vec::new();
    for attempt in 1..=7u32 {
        assert_eq!(w.decide(), launch, "attempt {attempt}");
        let hold = w.apply(&launch, failed(FailureKind::Transient, "connection reset"));
        let hold = hold.expect("held");
        delays.push(hold.millis_after(w.now) / 1000);
        let job = w.job(&key(1, 1));
        assert_eq!(job.state, JobState::Launching);
        assert_eq!(job.launch_attempts, attempt);
        assert_eq!(job.message, format!("Launch attempt {attempt} failed: connection reset"));
        w.set_now(hold);
    }
    assert_eq!(delays, [2, 4, 8, 16, 32, 60, 60], "doubling, capped at 30 poll intervals");
    assert_eq!(w.res().jobs.len(), 1);
    assert_eq!(w.op(1).status, PS::Provisioning);
}

#[test]
fn launch_retry_delays_by_poll_interval() {
    // attempt n → the hold `apply` returns (crates/domain/src/retry.rs `launch_retry`).
    let cases: [(Duration, [i64; 8]); 4] = [
        (POLL, [2, 4, 8, 16, 32, 60, 60, 60]),
        (secs(1), [2, 4, 8, 16, 30, 30, 30, 30]),
        (Duration::from_millis(200), [2, 4, 8, 16, 30, 30, 30, 30]),
        (secs(10), [2, 4, 8, 16, 32, 64, 64, 64]),
    ];
    for (poll, want) in cases {
        let mut w = World::created();
        w.policy.poll_interval = poll;
        let launch = Effect::Launch { key: key(1, 1) };
        let mut delays = Vec::new();
        for attempt in 1..=8u32 {
            assert_eq!(w.decide(), launch, "poll {poll:?}, attempt {attempt}");
            let hold = w.apply(&launch, failed(FailureKind::Transient, "connection reset")).expect("held");
            delays.push(hold.millis_after(w.now) / 1000);
            w.set_now(hold);
        }
        assert_eq!(delays, want, "poll interval {poll:?}");
    }
}

#[test]
fn indeterminate_launch_is_found_before_any_relaunch() {
    let mut w = World::created();
    let launch = w.decide();
    let hold = w.apply(&launch, failed(FailureKind::Indeterminate, "timeout reading response"));
    assert_eq!(hold, Some(at(2)));
    let job = w.job(&key(1, 1));
    assert_eq!(job.state, JobState::Launching);
    assert!(!job.absent_confirmed);
    assert_eq!(job.message, "Launch attempt 1 failed: timeout reading response");
    w.set_now(at(2));
    assert_eq!(w.decide(), Effect::Find { key: key(1, 1) });
}

#[test]
fn rate_limited_launch_waits_for_retry_after() {
    let mut w = World::created();
    let launch = w.decide();
    let hold = w.apply(&launch, failed(FailureKind::RateLimited { retry_after: secs(45) }, "slow down"));
    assert_eq!(hold, Some(at(45)));
    let job = w.job(&key(1, 1));
    assert_eq!(job.state, JobState::Launching);
    assert_eq!(job.message, "Launch delayed: slow down");
    w.set_now(at(45));
    assert_eq!(w.decide(), launch, "a refusal launched nothing");
}

#[test]
fn permanent_launch_failure_fails_the_operation_and_backs_off() {
    for kind in [FailureKind::Permanent, FailureKind::NotFound] {
        let mut w = World::created();
        let launch = w.decide();
        assert_eq!(w.apply(&launch, failed(kind, "template not found")), None, "{kind:?}");
        let job = w.job(&key(1, 1));
        assert_eq!(job.state, JobState::Failed);
        assert_eq!(job.message, "Launch failed: template not found");
        assert_eq!(job.job_id, "");
        // Not a hot loop of launches: the failed launch counts as a failed attempt.
        assert_eq!(w.decide(), sleep_until(at(120)), "{kind:?}");
        assert_eq!(w.op(1).status, PS::Failed);
        assert_eq!(w.op(1).error, provisioning_failed("Launch failed: template not found"));
        assert_eq!(w.res().provisioning_state, PS::Failed);
        assert_eq!(w.res().jobs.len(), 1);
        w.set_now(at(120));
        assert_eq!(w.decide(), Effect::Launch { key: key(1, 2) });
        w.apply(&Effect::Launch { key: key(1, 2) }, failed(kind, "template not found"));
        assert_eq!(w.decide(), sleep_until(at(120 + 240)), "{kind:?}: doubling gap");
    }
}

#[test]
fn find_failures_keep_the_intent_until_the_provider_answers() {
    for kind in [FailureKind::Transient, FailureKind::Indeterminate, FailureKind::Permanent, FailureKind::NotFound] {
        let mut w = World::created();
        w.decide(); // Launch, then crash
        let find = w.decide();
        assert_eq!(find, Effect::Find { key: key(1, 1) });
        let hold = w.apply(&find, failed(kind, "unauthorized"));
        assert!(hold.is_some_and(|h| h > w.now), "{kind:?}: held, got {hold:?}");
        let job = w.job(&key(1, 1));
        assert_eq!(job.state, JobState::Launching, "{kind:?}: a failed find proves nothing");
        assert!(!job.absent_confirmed, "{kind:?}");
        w.set_now(hold.unwrap());
        assert_eq!(w.decide(), find, "{kind:?}");
    }
    let mut w = World::created();
    w.decide();
    let find = w.decide();
    let hold = w.apply(&find, failed(FailureKind::RateLimited { retry_after: secs(9) }, "429"));
    assert_eq!(hold, Some(at(9)));
    assert_eq!(w.decide(), find);
}

#[test]
fn same_millisecond_relaunch_follows_the_new_job() {
    // Frozen clocks (tests) and ms resolution: a job launched in the same millisecond as
    // the previous one must still be the latest.
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Failed, "failed", ""));
    assert_eq!(w.decide(), sleep_until(at(120)));
    assert!(matches!(w.put(2, v2()), Ok(Admitted::Accepted { .. })));
    w.launch(&key(2, 2), "1002");
    assert_eq!(w.decide(), Effect::Poll { key: key(2, 2) });
    assert_eq!(w.op(2).status, PS::Updating, "not failed by the older job");
    let non_terminal = w.res().jobs.iter().filter(|j| !j.state.is_terminal()).count();
    assert_eq!(non_terminal, 1);
    w.poll(&key(2, 2), observed(JobState::Succeeded, "ok", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(2).status, PS::Succeeded);
    assert_eq!(w.res().jobs.len(), 2);
}

#[test]
fn clock_skew_between_replicas_does_not_hide_the_new_job() {
    let mut w = World::created();
    w.set_now(at(100)); // replica A, clock ahead
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Failed, "failed", ""));
    w.decide();
    w.set_now(at(50)); // replica B, clock behind
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 2), "1002");
    assert!(w.job(&key(2, 2)).timestamp > w.job(&key(1, 1)).timestamp);
    assert_eq!(w.decide(), Effect::Poll { key: key(2, 2) });
    assert_eq!(w.op(2).status, PS::Updating);
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

// ---------------------------------------------------------------------------------------
// Cancellation
// ---------------------------------------------------------------------------------------

#[test]
fn user_cancel_cancels_the_job_and_stops_convergence() {
    let mut w = World::new();
    w.notify = true;
    w.put(1, v1()).unwrap();
    let k = key(1, 1);
    w.launch(&k, "1001");
    w.advance(POLL);
    w.poll(&k, observed(JobState::Running, "running", ""));
    w.set_now(at(10));
    w.cancel(1).unwrap();
    assert_eq!(w.cancel_job(&k, Outcome::CancelRequested), Some(at(12)));
    assert_eq!(w.job(&k).cancel_requested_at, Some(at(10)));
    w.set_now(at(12));
    assert_eq!(w.poll(&k, observed(JobState::Running, "running", "")), Some(at(14)));
    w.set_now(at(69));
    assert_eq!(w.poll(&k, observed(JobState::Running, "running", "")), Some(at(71)));
    w.set_now(at(70));
    assert_eq!(w.cancel_job(&k, Outcome::CancelRequested), Some(at(72)), "asked again after cancel_retry");
    assert_eq!(w.job(&k).cancel_requested_at, Some(at(70)));
    w.set_now(at(72));
    assert_eq!(w.poll(&k, observed(JobState::Canceled, "canceled", "")), None);
    assert_eq!(w.op(1).status, PS::Canceling);

    assert_eq!(w.decide(), SLEEP);
    let op = w.op(1);
    assert_eq!(op.status, PS::Canceled);
    assert_eq!(op.error, Some(canceled_by_user()));
    assert_eq!(op.end_time(), Some(at(72)));
    let res = w.res();
    assert_eq!(res.provisioning_state, PS::Canceled);
    assert_eq!(res.last_error, Some(canceled_by_user()));
    assert_eq!(res.active_operation_id, None);
    assert_eq!(res.convergence_stopped_for, Some(res.desired_config_version.clone()));
    assert_eq!(w.snap.notifications, vec![notification(1)]);

    w.advance(secs(86_400));
    assert_eq!(w.decide(), SLEEP, "the backoff loop must not undo a user's cancel");
    assert_eq!(w.res().jobs.len(), 1);
    // The next PUT of the same spec is a retry and resumes convergence.
    w.put(2, v1()).unwrap();
    assert_eq!(w.decide(), Effect::Launch { key: key(2, 2) });
}

#[test]
fn cancel_that_arrives_after_the_job_succeeded_succeeds() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", ""));
    w.cancel(1).unwrap();
    assert_eq!(w.op(1).status, PS::Canceling);
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(1).status, PS::Succeeded);
    assert_eq!(w.op(1).error, None);
    assert_eq!(w.res().provisioning_state, PS::Succeeded);
    assert_eq!(w.res().convergence_stopped_for, None);
}

#[test]
fn cancel_whose_job_fails_anyway_still_stops_convergence() {
    let mut w = World::created();
    let k = key(1, 1);
    w.launch(&k, "1001");
    w.cancel(1).unwrap();
    w.cancel_job(&k, Outcome::CancelRequested);
    w.advance(POLL);
    w.poll(&k, observed(JobState::Failed, "failed", "task X"));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(1).status, PS::Failed);
    assert_eq!(w.op(1).error, provisioning_failed("failed: task X"));
    assert_eq!(w.res().convergence_stopped_for, Some(desired(&w)));
    w.advance(secs(3600));
    assert_eq!(w.decide(), SLEEP);
}

#[test]
fn cancel_of_an_unconfirmed_launch_never_launches() {
    let mut w = World::created();
    let launch = w.decide();
    w.apply(&launch, failed(FailureKind::Transient, "connection refused"));
    let op = w.cancel(1).unwrap();
    assert_eq!(op.status, PS::Canceling, "a job entry exists");
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(1).status, PS::Canceled);
    assert_eq!(w.op(1).error, Some(canceled_by_user()));
    assert_eq!(w.res().provisioning_state, PS::Canceled);
    assert!(w.res().jobs.is_empty(), "the intent that never launched is dropped");
    assert_eq!(w.res().convergence_stopped_for, Some(desired(&w)));
}

#[test]
fn stale_convergence_intent_gives_way_to_the_new_spec() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Failed, "failed", ""));
    w.decide();
    w.set_now(at(120));
    let launch = w.decide();
    assert_eq!(launch, Effect::Launch { key: key(1, 2) });
    w.apply(&launch, failed(FailureKind::Transient, "connection refused"));
    w.put(2, v2()).unwrap();
    assert_eq!(w.decide(), Effect::Launch { key: key(2, 3) });
    assert_eq!(w.job(&key(2, 3)).config_version, spec(v2()).config_version());
    assert!(w.res().jobs.iter().all(|j| j.idempotency_key != key(1, 2)));
}

// ---------------------------------------------------------------------------------------
// Deletion (docs/osac-lifecycle.md#deprovisioning, docs/arm-contract.md#supersession-by-delete)
// ---------------------------------------------------------------------------------------

#[test]
fn delete_cancels_the_running_provision_job_then_deprovisions() {
    let mut w = World::new();
    w.notify = true;
    w.put(1, v1()).unwrap();
    let p = key(1, 1);
    w.launch(&p, "1001");
    w.advance(POLL);
    w.poll(&p, observed(JobState::Running, "running", ""));
    w.set_now(at(20));
    w.delete(2).unwrap();
    assert_eq!(w.op(1).status, PS::Canceled);

    assert_eq!(w.cancel_job(&p, Outcome::CancelRequested), Some(at(22)));
    assert_eq!(w.job(&p).cancel_requested_at, Some(at(20)));
    w.set_now(at(22));
    assert_eq!(w.poll(&p, observed(JobState::Canceled, "canceled", "")), None);

    let d = key(2, 2);
    assert_eq!(w.decide(), Effect::Launch { key: d.clone() });
    // The delete job belongs to the delete operation, and carries the version it removes.
    let mut want = sent(intent(&d, JobType::Deprovision, Some(2), spec(v1()).config_version(), at(22)));
    want.block_deletion_on_failure = true;
    assert_eq!(w.job(&d), &want);
    assert_eq!(w.op(2).status, PS::Deleting);
    assert_eq!(w.res().provisioning_state, PS::Deleting);
    w.apply(&Effect::Launch { key: d.clone() }, launched("1002"));
    assert_eq!(w.job(&d).message, "Deprovision job triggered");
    w.set_now(at(30));
    assert_eq!(w.poll(&d, observed(JobState::Running, "running", "")), Some(at(32)));
    w.set_now(at(40));
    assert_eq!(w.poll(&d, observed(JobState::Succeeded, "successful", "")), None);

    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.snap.resource, None);
    let op = w.op(2);
    assert_eq!(op.status, PS::Succeeded);
    assert_eq!(op.error, None);
    assert_eq!(op.end_time(), Some(at(40)));
    assert_eq!(w.snap.notifications, vec![notification(1), notification(2)]);
    assert_eq!(w.decide(), SLEEP, "nothing left to do");
}

#[test]
fn delete_of_a_never_provisioned_resource_completes_at_once() {
    let mut w = World::created();
    w.set_now(at(3));
    w.delete(2).unwrap();
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.snap.resource, None);
    assert_eq!(w.op(2).status, PS::Succeeded);
    assert_eq!(w.op(2).end_time(), Some(at(3)));
    assert_eq!(w.op(1).status, PS::Canceled);
}

#[test]
fn delete_after_an_unconfirmed_launch_never_launches_it() {
    let mut w = World::created();
    let launch = w.decide();
    w.apply(&launch, failed(FailureKind::Transient, "connection refused"));
    w.delete(2).unwrap();
    assert_eq!(w.decide(), SLEEP, "nothing was ever launched: nothing to remove");
    assert_eq!(w.snap.resource, None);
    assert_eq!(w.op(2).status, PS::Succeeded);
}

#[test]
fn delete_after_an_indeterminate_launch_finds_the_job_first() {
    for found in [true, false] {
        let mut w = World::created();
        let launch = w.decide();
        w.apply(&launch, failed(FailureKind::Indeterminate, "timeout"));
        w.delete(2).unwrap();
        let find = w.decide();
        assert_eq!(find, Effect::Find { key: key(1, 1) }, "it may exist");
        if found {
            w.apply(&find, Outcome::Found(vec![started("1001", JobState::Running)]));
            assert_eq!(w.decide(), Effect::Cancel { key: key(1, 1) });
        } else {
            w.set_now(w.job(&key(1, 1)).launch_sent_at.unwrap().add(w.policy.launch_ambiguity));
            w.apply(&find, Outcome::Found(vec![]));
            assert_eq!(w.decide(), SLEEP);
            assert_eq!(w.snap.resource, None);
        }
    }
}

#[test]
fn delete_proceeds_when_the_job_to_cancel_is_gone_or_finished() {
    // Cancel → NotFound: the job is gone, treat it as canceled.
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.delete(2).unwrap();
    assert_eq!(w.cancel_job(&key(1, 1), failed(FailureKind::NotFound, "gone")), None);
    assert_eq!(w.job(&key(1, 1)).state, JobState::Canceled);
    assert_eq!(w.job(&key(1, 1)).message, "The job no longer exists at the provider: gone");
    assert_eq!(w.decide(), Effect::Launch { key: key(2, 2) });

    // Cancel → already finished: poll for the final state, then deprovision.
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.delete(2).unwrap();
    assert_eq!(w.cancel_job(&key(1, 1), Outcome::CancelNotNeeded), None);
    assert_eq!(w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", "")), None);
    assert_eq!(w.decide(), Effect::Launch { key: key(2, 2) });

    // Cancel → transient error: poll meanwhile, ask again after cancel_retry.
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.delete(2).unwrap();
    let hold = w.cancel_job(&key(1, 1), failed(FailureKind::Transient, "timeout"));
    assert_eq!(hold, Some(at(2)));
    assert_eq!(w.job(&key(1, 1)).message, "Failed to cancel job: timeout");
    w.set_now(at(2));
    w.poll(&key(1, 1), observed(JobState::Running, "running", ""));
    w.set_now(at(60));
    assert_eq!(w.cancel_job(&key(1, 1), Outcome::CancelRequested), Some(at(62)));
}

#[test]
fn failed_deprovision_with_block_retries_with_doubling_backoff() {
    // docs/osac-lifecycle.md#backoff, minutes from the delete: D1@0 fails at 1 → retry at 2;
    // D2@2 fails at 3 → gap 2 → 4 → retry at 6; D3@6 → gap 4 → 8 → retry at 14; …
    let mut w = World::provisioned();
    let base = 1000; // seconds after T0
    w.set_now(at(base));
    w.delete(2).unwrap();
    let mut launches = Vec::new();
    let mut retry_at = Vec::new();
    let mut t = base;
    for seq in 2..=6u64 {
        w.set_now(at(t));
        let d = key(2, seq);
        w.launch(&d, &format!("d{seq}"));
        assert!(w.job(&d).block_deletion_on_failure);
        launches.push((t - base) / 60);
        w.set_now(at(t + 60));
        assert_eq!(w.poll(&d, observed(JobState::Failed, "failed", "")), None);
        let Effect::Sleep { until: Some(until) } = w.decide() else {
            panic!("backoff expected");
        };
        assert_eq!(w.op(2).status, PS::Deleting);
        assert_eq!(w.res().provisioning_state, PS::Deleting);
        assert!(w.snap.resource.is_some(), "GET never 404s while deleting");
        t = until.millis_after(T0) / 1000;
        retry_at.push((t - base) / 60);
    }
    assert_eq!(launches, [0, 2, 6, 14, 30]);
    assert_eq!(retry_at, [2, 6, 14, 30, 60]);
}

#[test]
fn failed_deprovision_without_block_completes_the_delete() {
    let mut w = World::provisioned();
    w.policy.block_deletion_on_failure = false;
    w.delete(2).unwrap();
    w.launch(&key(2, 2), "d1");
    assert!(!w.job(&key(2, 2)).block_deletion_on_failure);
    w.poll(&key(2, 2), observed(JobState::Failed, "failed", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.snap.resource, None);
    assert_eq!(w.op(2).status, PS::Succeeded);
}

#[test]
fn delete_deadline_fails_the_operation_but_deletion_goes_on() {
    let mut w = World::provisioned();
    w.set_now(at(100));
    w.delete(2).unwrap();
    w.launch(&key(2, 2), "d1");
    w.poll(&key(2, 2), observed(JobState::Failed, "failed", "host unreachable"));
    assert_eq!(w.decide(), sleep_until(at(220)));
    let retrying = w.op(2);
    assert_eq!(retrying.status, PS::Deleting);
    assert_eq!(retrying.error, Some(err("DeprovisioningFailed", "failed: host unreachable")), "why it is not done");
    w.set_now(at(100 + 12 * 3600));
    let effect = w.decide();
    assert_eq!(effect, Effect::Launch { key: key(2, 3) }, "deletion is still retried");
    let mut timeout = err(
        "OperationTimedOut",
        "The delete operation did not complete within 43200s; last job: Failed failed: host unreachable",
    );
    // What held it up, shown on the operation while it was retried, stays in the details.
    timeout.details = vec![err("DeprovisioningFailed", "failed: host unreachable")];
    let timeout = Some(timeout);
    assert_eq!(w.op(2).status, PS::Failed);
    assert_eq!(w.op(2).error, timeout);
    let res = w.res();
    assert_eq!(res.provisioning_state, PS::Failed);
    assert_eq!(res.last_error, timeout);
    assert_eq!(res.active_operation_id, None);
    assert!(res.is_deleting());
    // A new DELETE is accepted and the running deprovision completes it.
    w.apply(&effect, launched("d2"));
    w.delete(3).unwrap();
    w.poll(&key(2, 3), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.snap.resource, None);
    assert_eq!(w.op(3).status, PS::Succeeded);
    assert_eq!(w.op(2).status, PS::Failed);
}

#[test]
fn delete_completes_after_its_deadline_without_reopening_the_operation() {
    let mut w = World::provisioned();
    w.delete(2).unwrap();
    w.launch(&key(2, 2), "d1");
    w.set_now(T0.add(secs(12 * 3600)));
    assert_eq!(w.decide(), Effect::Poll { key: key(2, 2) });
    assert_eq!(w.op(2).status, PS::Failed);
    w.poll(&key(2, 2), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.snap.resource, None);
    assert_eq!(w.op(2).status, PS::Failed);
}
