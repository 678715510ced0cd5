//! `POST {id}/whatIf` (docs/arm-contract.md#what-if): a proposal's operation runs the type's
//! job in check mode — after its preflight, as the PUT would — and records what the job said
//! it would change, leaving the resource's spec, state and convergence alone.

mod common;

use common::*;
use serde_json::json;
use slipway_domain::admission::{self, Admitted, Rejection};
use slipway_domain::operation::codes;
use slipway_domain::reconcile::{Effect, FailureKind, Observation, Outcome};
use slipway_domain::whatif::{ChangeType, TaskChange};
use slipway_domain::{JobState, JobType, OperationRequest, ProvisioningState as PS};

fn what_if(w: &mut World, op: u32, proposed: Option<serde_json::Value>) -> Result<Admitted, Rejection> {
    let c = w.ctx(op);
    admission::admit_what_if(&mut w.snap, &arm_id(), proposed.map(spec), Vec::new(), &c)
}

fn checked(state: JobState, changes: Vec<TaskChange>) -> Outcome {
    Outcome::Observed(Observation {
        state,
        message: "done".into(),
        error_details: String::new(),
        stats: None,
        changes: Some(changes),
        progress: None,
    })
}

fn record_change() -> TaskChange {
    TaskChange {
        task: "Record the resource".into(),
        host: "localhost".into(),
        diff: json!({"before": "{\"a\": 1}\n", "after": "{\"a\": 2}\n"}),
    }
}

#[test]
fn what_if_admission_rules() {
    let mut absent = World::new();
    assert_eq!(what_if(&mut absent, 1, Some(v1())), Ok(Admitted::Absent), "a create's what-if runs nothing");
    assert_eq!(what_if(&mut absent, 1, None), Err(Rejection::NotFound), "nothing to delete");

    let mut creating = World::created();
    assert_eq!(
        what_if(&mut creating, 2, Some(v2())),
        Err(conflict("Cannot run a what-if on the resource while a create operation is in progress"))
    );

    let mut w = World::provisioned();
    let before = w.res().clone();
    let Ok(Admitted::Accepted { operation, created: false }) = what_if(&mut w, 2, Some(v2())) else {
        panic!("a what-if on a resource is accepted")
    };
    assert_eq!((operation.request, operation.status), (OperationRequest::WhatIf, PS::Accepted));
    let proposal = operation.what_if.as_ref().unwrap();
    assert_eq!(proposal.change_type(), ChangeType::Modify);
    assert_eq!(w.res().active_operation_id, Some(op_id(2)));
    assert_eq!(
        (&w.res().spec, &w.res().desired_config_version, w.res().provisioning_state, &w.res().job_context),
        (&before.spec, &before.desired_config_version, PS::Succeeded, &before.job_context),
        "nothing about the resource changes"
    );
    assert_eq!(
        w.put(3, v2()),
        Err(conflict("Cannot update the resource while a what-if is in progress")),
        "not even a PUT of the very spec the what-if asks about"
    );
    assert_eq!(
        what_if(&mut w, 4, None),
        Err(conflict("Cannot run a what-if on the resource while a what-if is in progress"))
    );
    w.delete(5).expect("a DELETE supersedes it");
    assert_eq!(w.op(2).status, PS::Canceled);
}

#[test]
fn a_what_if_runs_its_check_job_and_keeps_what_it_predicted() {
    let mut w = World::provisioned();
    what_if(&mut w, 2, Some(v2())).unwrap();
    let k = key(2, 2);
    w.launch(&k, "2001");
    let job = w.job(&k);
    assert_eq!((job.job_type, job.action.as_str()), (JobType::Check, "create"));
    assert_eq!(job.config_version, spec(v2()).config_version(), "the check job acts on the proposal");
    assert_eq!(w.op(2).status, PS::Updating);
    assert_eq!(w.res().provisioning_state, PS::Succeeded, "the resource's state is not the what-if's");

    assert_eq!(w.poll(&k, checked(JobState::Succeeded, vec![record_change()])), None);
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "convergence sees nothing to do");
    let op = w.op(2);
    assert_eq!(op.status, PS::Succeeded);
    assert_eq!(op.what_if.as_ref().unwrap().predicted, Some(vec![record_change()]));
    assert_eq!(w.res().active_operation_id, None);
    assert_eq!(w.res().spec, spec(v1()), "the spec is still the one provisioned");
    assert_eq!(w.res().provisioning_state, PS::Succeeded);
}

#[test]
fn a_delete_what_if_checks_the_delete_job_on_the_current_spec() {
    let mut w = World::provisioned();
    what_if(&mut w, 2, None).unwrap();
    assert_eq!(w.op(2).what_if.as_ref().unwrap().change_type(), ChangeType::Delete);
    let k = key(2, 2);
    w.launch(&k, "2001");
    let job = w.job(&k);
    assert_eq!((job.job_type, job.action.as_str()), (JobType::Check, "delete"));
    assert_eq!(job.config_version, w.res().desired_config_version);
    w.poll(&k, checked(JobState::Succeeded, vec![]));
    w.decide();
    assert_eq!(w.op(2).what_if.as_ref().unwrap().predicted, Some(vec![]), "nothing would change");
    assert!(!w.res().is_deleting());
}

#[test]
fn a_failed_check_job_fails_the_what_if_and_nothing_else() {
    let mut w = World::provisioned();
    what_if(&mut w, 2, Some(v2())).unwrap();
    let k = key(2, 2);
    w.launch(&k, "2001");
    w.poll(&k, observed(JobState::Failed, "failed", "Task 'x' failed"));
    w.decide();
    let op = w.op(2);
    assert_eq!((op.status, op.error.as_ref().map(|e| e.code.as_str())), (PS::Failed, Some(codes::WHAT_IF_FAILED)));
    assert_eq!(op.what_if.as_ref().unwrap().predicted, None);
    assert_eq!((w.res().provisioning_state, &w.res().last_error), (PS::Succeeded, &None));
    assert_eq!(w.res().convergence_stopped_for, None);
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "a failed check is not retried by convergence");
}

#[test]
fn a_backend_without_check_mode_ends_the_what_if_not_supported() {
    let mut w = World::provisioned();
    what_if(&mut w, 2, Some(v2())).unwrap();
    let k = key(2, 2);
    let effect = w.decide();
    assert_eq!(effect, Effect::Launch { key: k.clone() });
    let why = "the job template 'create-virtual-network' does not prompt for its job type on launch";
    assert_eq!(w.apply(&effect, failed(FailureKind::Unsupported, why)), None);
    let op = w.op(2);
    assert_eq!(op.status, PS::Failed);
    assert_eq!(op.error, Some(err(codes::WHAT_IF_NOT_SUPPORTED, why)));
    assert_eq!(w.job(&k).state, JobState::Failed);
    assert_eq!(w.decide(), Effect::Sleep { until: None });
}

#[test]
fn a_preflight_runs_first_and_its_failure_stops_only_the_what_if() {
    let mut w = World::provisioned();
    w.policy.preflight = true;
    what_if(&mut w, 2, Some(v2())).unwrap();
    let k = key(2, 2);
    w.launch(&k, "2001");
    assert_eq!(w.job(&k).job_type, JobType::Preflight);
    assert_eq!(w.job(&k).config_version, spec(v2()).config_version(), "the preflight checks the proposal");
    w.poll(&k, observed(JobState::Succeeded, "successful", ""));
    w.launch(&key(2, 3), "2002");
    assert_eq!(w.job(&key(2, 3)).job_type, JobType::Check);
    w.poll(&key(2, 3), checked(JobState::Succeeded, vec![]));
    w.decide();
    assert_eq!(w.op(2).status, PS::Succeeded);

    what_if(&mut w, 3, Some(v2())).unwrap();
    w.launch(&key(3, 4), "3001");
    w.poll(&key(3, 4), observed(JobState::Failed, "failed", "quota"));
    w.decide();
    assert_eq!(w.op(3).status, PS::Failed);
    assert_eq!(w.res().convergence_stopped_for, None, "the spec in force was not the one checked");
}
