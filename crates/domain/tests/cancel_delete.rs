//! Engine-core scenarios of cancellation and deletion (docs/osac-lifecycle.md#deprovisioning,
//! docs/arm-contract.md#supersession-by-delete): `decide` and `apply` driven step by step.

mod common;

use common::*;
use slipway_domain::admission::canceled_by_user;
use slipway_domain::reconcile::{Effect, FailureKind, Outcome};
use slipway_domain::{JobState, JobType, ProvisioningState as PS, Stop};

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
    assert_eq!(w.job(&k).stop, Some(Stop::Cancel { asked_at: at(10) }));
    w.set_now(at(12));
    assert_eq!(w.poll(&k, observed(JobState::Running, "running", "")), Some(at(14)));
    w.set_now(at(69));
    assert_eq!(w.poll(&k, observed(JobState::Running, "running", "")), Some(at(71)));
    w.set_now(at(70));
    assert_eq!(w.cancel_job(&k, Outcome::CancelRequested), Some(at(72)), "asked again after cancel_retry");
    assert_eq!(w.job(&k).stop, Some(Stop::Cancel { asked_at: at(70) }));
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
    assert_eq!(w.job(&p).stop, Some(Stop::Cancel { asked_at: at(20) }));
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
