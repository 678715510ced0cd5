//! `POST {id}/retry` (docs/arm-contract.md#retry-now): a Failed or Canceled resource's spec
//! run again at once, as an update operation of its own whose jobs say they are a retry, with
//! the backoff started over and convergence a user stopped resumed.

mod common;

use common::*;
use slipway_domain::admission::{self, Admitted, Rejection};
use slipway_domain::operation::Rerun;
use slipway_domain::reconcile::Effect;
use slipway_domain::{JobState, OperationRequest, ProvisioningState as PS};

fn retry(w: &mut World, op: u32) -> Result<Admitted, Rejection> {
    let c = w.ctx(op);
    admission::admit_retry(&mut w.snap, &c)
}

/// A world whose update to `v2` (operation 2, job `op2:2`) failed at `T0`.
fn failed_update() -> World {
    let mut w = World::provisioned();
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 2), "2001");
    w.poll(&key(2, 2), observed(JobState::Failed, "failed", "boom"));
    w.decide();
    assert_eq!((w.op(2).status, w.res().provisioning_state), (PS::Failed, PS::Failed));
    w
}

#[test]
fn retry_admission_rules() {
    let mut absent = World::new();
    assert_eq!(retry(&mut absent, 2), Err(Rejection::NotFound));

    let mut creating = World::created();
    assert_eq!(
        retry(&mut creating, 2),
        Err(conflict("Cannot retry the resource while a create operation is in progress"))
    );

    let mut fine = World::provisioned();
    assert_eq!(
        retry(&mut fine, 2),
        Err(conflict("The resource is Succeeded: only a Failed or Canceled resource can be retried"))
    );

    let mut deleting = failed_update();
    deleting.delete(3).unwrap();
    assert_eq!(
        retry(&mut deleting, 4),
        Err(conflict("Cannot retry the resource while it is being deleted: its delete retries on its own"))
    );

    let mut w = failed_update();
    let (spec, version, modified) =
        (w.res().spec.clone(), w.res().desired_config_version.clone(), w.res().system_data.clone());
    let Ok(Admitted::Accepted { operation, created: false }) = retry(&mut w, 3) else {
        panic!("a failed spec retries")
    };
    assert_eq!(
        (operation.request, operation.rerun, operation.status),
        (OperationRequest::Update, Some(Rerun::Retry), PS::Accepted)
    );
    assert_eq!(w.res().provisioning_state, PS::Accepted);
    assert_eq!(w.res().active_operation_id, Some(op_id(3)));
    assert_eq!(w.res().last_error, None);
    assert_eq!((&w.res().spec, &w.res().desired_config_version), (&spec, &version), "the spec stays");
    assert_eq!(w.res().system_data, modified, "nobody modified the resource");
    assert_eq!(retry(&mut w, 4), Err(conflict("Cannot retry the resource while an update operation is in progress")));
}

#[test]
fn a_retry_launches_at_once_and_starts_the_backoff_over() {
    let mut w = failed_update();
    // Convergence waits the base backoff, then its retry fails too: the next wait doubles the gap.
    let base = w.policy.backoff.unwrap().base;
    let due = w.job(&key(2, 2)).timestamp.add(base);
    assert_eq!(w.decide(), sleep_until(due));
    w.set_now(due);
    w.launch(&key(2, 3), "2002");
    w.poll(&key(2, 3), observed(JobState::Failed, "failed", "boom"));
    let doubled = w.job(&key(2, 3)).timestamp.add(base * 2);
    assert_eq!(w.decide(), sleep_until(doubled));

    // Asked to retry now, well into that wait: the job launches at once, for the retry's own
    // operation.
    w.advance(secs(100));
    retry(&mut w, 3).unwrap();
    w.launch(&key(3, 4), "3001");
    let job = w.job(&key(3, 4)).clone();
    assert_eq!((job.operation_id, job.rerun), (Some(op_id(3)), Some(Rerun::Retry)));
    assert_eq!((w.op(3).status, w.res().provisioning_state), (PS::Updating, PS::Updating));

    // It fails as well: the operation fails, and convergence waits the base again (not twice
    // the gap since the failure before the retry).
    w.poll(&key(3, 4), observed(JobState::Failed, "failed", "boom"));
    assert_eq!(w.decide(), sleep_until(job.timestamp.add(base)));
    assert_eq!((w.op(3).status, w.res().provisioning_state), (PS::Failed, PS::Failed));
}

#[test]
fn a_retry_resumes_convergence_a_cancel_stopped_and_can_succeed() {
    let mut w = World::provisioned();
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 2), "2001");
    w.cancel(2).unwrap();
    w.cancel_job(&key(2, 2), slipway_domain::reconcile::Outcome::CancelRequested);
    w.poll(&key(2, 2), observed(JobState::Canceled, "canceled", ""));
    assert_eq!(w.decide(), SLEEP, "a canceled spec is left alone");
    assert_eq!(w.res().provisioning_state, PS::Canceled);

    retry(&mut w, 3).unwrap();
    assert_eq!(w.res().convergence_stopped_for, None);
    w.launch(&key(3, 3), "3001");
    w.poll(&key(3, 3), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    assert_eq!((w.op(3).status, w.res().provisioning_state), (PS::Succeeded, PS::Succeeded));
    assert_eq!(w.res().desired_config_version, w.job(&key(3, 3)).config_version, "the spec it ran is the resource's");
}
