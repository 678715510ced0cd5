//! A store restored from a backup, told what the provider ran since
//! (`reconcile::restore`, docs/operations.md#backup-and-restore): jobs launched after the
//! backup are adopted, never launched again; jobs of operations the backup does not know
//! are reported.

mod common;

use common::*;
use slipway_domain::reconcile::restore::{Finding, ListedJob, reconcile_restored};
use slipway_domain::reconcile::{Effect, Outcome};
use slipway_domain::{IdempotencyKey, JobState, ProvisioningState as PS};

fn listed(key: IdempotencyKey, action: &str, job_id: &str, state: JobState) -> ListedJob {
    ListedJob { key, action: action.into(), job_id: job_id.into(), state }
}

/// The world as the backup has it: operation 1's job `1001` (key `op1:1`) running.
fn backed_up() -> World {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.advance(POLL);
    w
}

#[test]
fn the_newest_job_of_the_operation_in_flight_is_adopted_not_launched_again() {
    let mut w = backed_up();
    // After the backup 1001 failed and the retry ran as job 1002 (key op1:2); the store was
    // then restored from the backup.
    let jobs =
        [listed(key(1, 1), "create", "1001", JobState::Failed), listed(key(1, 2), "create", "1002", JobState::Running)];
    let findings = reconcile_restored(&mut w.snap, &w.policy, &jobs, w.now);
    assert_eq!(findings, vec![Finding::Adopted { key: key(1, 2), job_id: "1002".into() }]);
    assert_eq!(w.res().job_seq, 2, "no later launch reuses a key the provider ran");
    assert_eq!(w.res().schedule.next_due, Some(w.now), "looked at once");
    assert_eq!(w.job(&key(1, 2)).state, JobState::Launching);

    // The engine resolves it as a launch whose answer was lost: found, adopted, followed.
    let find = w.decide();
    assert_eq!(find, Effect::Find { key: key(1, 2) });
    w.apply(&find, Outcome::Found(vec![started("1002", JobState::Running)]));
    assert_eq!(w.job(&key(1, 2)).job_id_text(), "1002");
    assert_eq!(w.poll(&key(1, 2), observed(JobState::Succeeded, "successful", "")), None);
    // The job the backup knew as running is followed to its end too; it ends nothing.
    assert_eq!(w.poll(&key(1, 1), observed(JobState::Failed, "failed", "")), None);
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(1).status, PS::Succeeded);
    assert_eq!(w.res().job_seq, 2, "nothing else was launched");
}

#[test]
fn earlier_jobs_of_the_operation_are_superseded_by_the_newest() {
    let mut w = backed_up();
    let jobs =
        [listed(key(1, 3), "create", "1003", JobState::Running), listed(key(1, 2), "create", "1002", JobState::Failed)];
    let findings = reconcile_restored(&mut w.snap, &w.policy, &jobs, w.now);
    assert_eq!(
        findings,
        vec![
            Finding::Superseded { key: key(1, 2), job_id: "1002".into() },
            Finding::Adopted { key: key(1, 3), job_id: "1003".into() },
        ]
    );
    assert_eq!(w.res().job_seq, 3);
    assert_eq!(w.decide(), Effect::Find { key: key(1, 3) });
}

#[test]
fn jobs_of_operations_the_backup_does_not_know_are_reported() {
    let mut w = World::provisioned();
    let before = w.res().clone();
    // After the backup operation 2 deleted the resource and operation 3 (a create of the same
    // name) ran an action on it: none is in the restored store.
    let jobs = [
        listed(key(2, 2), "delete", "2002", JobState::Succeeded),
        listed(key(3, 3), "restart", "3003", JobState::Failed),
    ];
    let findings = reconcile_restored(&mut w.snap, &w.policy, &jobs, w.now);
    assert_eq!(
        findings,
        vec![
            Finding::DeletedAfterBackup { key: key(2, 2), job_id: "2002".into(), state: JobState::Succeeded },
            Finding::ChangedAfterBackup {
                key: key(3, 3),
                job_id: "3003".into(),
                action: "restart".into(),
                state: JobState::Failed
            },
        ]
    );
    assert_eq!(w.res().jobs, before.jobs, "nothing to take up: no operation in flight");
    assert_eq!(w.res().job_seq, 3);
    assert_eq!(w.op(1).status, PS::Succeeded);
    assert_eq!(w.decide(), SLEEP, "a settled resource stays settled: reported, not recreated");
}

#[test]
fn jobs_the_history_holds_change_nothing() {
    let mut w = backed_up();
    let before = w.snap.clone();
    let jobs = [listed(key(1, 1), "create", "1001", JobState::Succeeded)];
    assert_eq!(reconcile_restored(&mut w.snap, &w.policy, &jobs, w.now), vec![]);
    assert_eq!(w.snap, before, "the engine follows a known job itself");
}
