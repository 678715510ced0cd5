//! Engine-core scenarios of the exactly-once launch (docs/exactly-once.md): `decide` and
//! `apply` driven step by step through crashes, lost answers and retried launches.

mod common;

use std::time::Duration;

use common::*;
use slipway_domain::admission::Admitted;
use slipway_domain::reconcile::{Effect, FailureKind, Outcome};
use slipway_domain::{JobState, ProvisioningState as PS};

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
    assert_eq!(job.job_id_text(), "1001");
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
        assert_eq!(job.job_id, None);
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
