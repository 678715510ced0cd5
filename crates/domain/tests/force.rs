//! Forced deletes (docs/arm-contract.md#forced-delete): a privileged way out of a delete
//! that cannot finish. Running jobs are asked to cancel once, no delete job runs or is
//! retried, and the record goes at once with a note on the operation.

mod common;

use common::*;
use slipway_domain::admission::{self, Admitted, Rejection};
use slipway_domain::reconcile::{Effect, FORCED_DELETE_NOTE, Outcome};
use slipway_domain::{JobState, JobType, ProvisioningState as PS};

fn force(w: &mut World, op: u32) -> Result<Admitted, Rejection> {
    let c = w.ctx(op);
    admission::admit_force_delete(&mut w.snap, &c)
}

#[test]
fn a_delete_that_keeps_failing_is_forced_in_place() {
    let mut w = World::provisioned();
    w.delete(2).unwrap();
    w.launch(&key(2, 2), "d1");
    w.poll(&key(2, 2), observed(JobState::Failed, "failed", "host unreachable"));
    assert!(matches!(w.decide(), Effect::Sleep { until: Some(_) }), "retried with backoff");
    let Ok(Admitted::InProgress { operation }) = force(&mut w, 3) else { panic!("the running delete is forced") };
    assert_eq!(operation.id, op_id(2));
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    assert_eq!(w.snap.resource, None, "removed without another delete job");
    let op = w.op(2);
    assert_eq!(op.status, PS::Succeeded);
    assert_eq!(op.note.as_deref(), Some(FORCED_DELETE_NOTE));
    assert_eq!(op.error, None, "the retried failure is not how it ended");
}

#[test]
fn a_delete_that_succeeds_after_failing_ends_without_the_error() {
    let mut w = World::provisioned();
    w.delete(2).unwrap();
    w.launch(&key(2, 2), "d1");
    w.poll(&key(2, 2), observed(JobState::Failed, "failed", "host unreachable"));
    let Effect::Sleep { until: Some(retry) } = w.decide() else { panic!("backoff") };
    assert!(w.op(2).error.is_some(), "shown while retried");
    w.set_now(retry);
    w.launch(&key(2, 3), "d2");
    w.poll(&key(2, 3), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    assert_eq!((w.op(2).status, w.op(2).error.clone()), (PS::Succeeded, None));
}

#[test]
fn a_forced_delete_asks_a_running_job_to_cancel_once_and_does_not_wait() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    let Ok(Admitted::Accepted { operation, .. }) = force(&mut w, 2) else { panic!("a new delete") };
    assert_eq!(w.op(1).status, PS::Canceled, "the create is superseded");
    assert_eq!(w.decide(), Effect::Cancel { key: key(1, 1) });
    w.apply(&Effect::Cancel { key: key(1, 1) }, Outcome::CancelRequested);
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "not waiting for the job to end");
    assert_eq!(w.snap.resource, None);
    assert_eq!(w.op(2).status, PS::Succeeded);
    assert_eq!(w.op(2).id, operation.id);
}

#[test]
fn a_forced_delete_launches_no_delete_job() {
    let mut w = World::provisioned();
    w.delete(2).unwrap();
    // The delete job's launch was refused for now (nothing happened): it would be retried.
    let launch = w.decide();
    assert_eq!(launch, Effect::Launch { key: key(2, 2) });
    w.apply(&launch, failed(slipway_domain::reconcile::FailureKind::Transient, "connection refused"));
    force(&mut w, 3).unwrap();
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    assert_eq!(w.snap.resource, None);
    assert!(w.op(2).note.is_some());
}

#[test]
fn force_delete_admission_rules() {
    let mut absent = World::new();
    assert_eq!(force(&mut absent, 1), Ok(Admitted::Absent));
    let mut parent = World::provisioned();
    let mut child = parent.res().clone();
    child.id.parent_names.push(child.id.name.clone());
    child.id.type_name = format!("{}/subnets", child.id.type_name);
    child.id.name = "s1".into();
    parent.snap.children.push(child);
    let Err(Rejection::Conflict { message, .. }) = force(&mut parent, 2) else { panic!("children first") };
    assert_eq!(message, "The resource has 1 child resource(s): force-delete them first");
    assert!(parent.res().jobs.iter().all(|j| j.job_type != JobType::Deprovision));
}

#[test]
fn a_forced_cancel_ends_the_operation_at_once_and_kills_its_job() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    let op = admission::admit_force_cancel(&mut w.snap, &op_id(1), w.now).unwrap();
    assert_eq!(op.status, PS::Canceled, "not waiting for the job");
    assert_eq!(w.res().provisioning_state, PS::Canceled);
    assert_eq!(w.decide(), Effect::Kill { key: key(1, 1) });
    w.apply(&Effect::Kill { key: key(1, 1) }, Outcome::CancelRequested);
    assert_eq!(w.decide(), Effect::Poll { key: key(1, 1) }, "followed until it ends");
    w.advance(w.policy.cancel_retry);
    assert_eq!(w.decide(), Effect::Kill { key: key(1, 1) }, "killed again while it still runs");
    w.apply(&Effect::Kill { key: key(1, 1) }, Outcome::CancelRequested);
    w.poll(&key(1, 1), observed(JobState::Canceled, "canceled", ""));
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "convergence leaves the spec alone");
}

#[test]
fn a_forced_cancel_finds_an_unconfirmed_launch_first_and_never_launches_it() {
    let mut w = World::created();
    let launch = w.decide();
    w.apply(&launch, failed(slipway_domain::reconcile::FailureKind::Indeterminate, "timeout"));
    admission::admit_force_cancel(&mut w.snap, &op_id(1), w.now).unwrap();
    let find = w.decide();
    assert_eq!(find, Effect::Find { key: key(1, 1) });
    w.apply(&find, Outcome::Found(vec![started("1001", JobState::Running)]));
    assert_eq!(w.decide(), Effect::Kill { key: key(1, 1) });

    let mut absent = World::created();
    let launch = absent.decide();
    absent.apply(&launch, failed(slipway_domain::reconcile::FailureKind::Transient, "refused"));
    admission::admit_force_cancel(&mut absent.snap, &op_id(1), absent.now).unwrap();
    assert_eq!(absent.decide(), Effect::Sleep { until: None }, "the refused launch is not sent again");
}

#[test]
fn a_delete_cannot_be_force_canceled() {
    let mut w = World::provisioned();
    w.delete(2).unwrap();
    let Err(Rejection::Conflict { message, .. }) = admission::admit_force_cancel(&mut w.snap, &op_id(2), w.now) else {
        panic!("refused")
    };
    assert!(message.contains("DELETE ?force=true"), "{message}");
}
