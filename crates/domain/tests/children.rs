//! Child resources: the parent rules at admission (404 `ParentResourceNotFound`, 409 while
//! the parent is deleting), a child's job waiting until its parent is `Succeeded`, and the
//! parent waking its children when it gets there (docs/arm-contract.md#child-resources).

mod common;

use common::*;
use slipway_domain::admission::{self, Admitted, Rejection};
use slipway_domain::operation::codes;
use slipway_domain::reconcile::{self, Effect};
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{ArmId, JobState, ProvisioningState as PS, TypePolicy};

fn parent_id() -> ArmId {
    arm_id()
}

fn child_id() -> ArmId {
    ArmId::parse(&format!("{}/subnets/s1", parent_id())).expect("a child id")
}

/// The parent as created by operation 9, in `state` (and deleting when asked).
fn parent(state: PS, deleting: bool) -> ResourceRecord {
    let mut snap = Snapshot::default();
    admission::admit_put(&mut snap, &parent_id(), "VirtualNetwork", spec(v1()), &ctx(9, T0)).expect("parent");
    let mut p = snap.resource.expect("created");
    p.provisioning_state = state;
    if deleting {
        p.deletion = Some(slipway_domain::resource::Deletion { requested_at: T0, force: false });
    }
    p
}

fn put_child(related: Vec<ResourceRecord>) -> (Snapshot, Result<Admitted, Rejection>) {
    let mut snap = Snapshot { related, ..Snapshot::default() };
    let r = admission::admit_put(&mut snap, &child_id(), "Subnet", spec(v1()), &ctx(1, T0));
    (snap, r)
}

#[test]
fn parent_rules_at_admission() {
    let cases: Vec<(&str, Vec<ResourceRecord>, Result<(), Rejection>)> = vec![
        ("no parent", vec![], Err(Rejection::ParentNotFound { parent: parent_id().to_string() })),
        (
            "the parent is being deleted",
            vec![parent(PS::Deleting, true)],
            Err(Rejection::Conflict {
                message: format!("The parent resource '{}' is being deleted", parent_id()),
                target: child_id().to_string(),
            }),
        ),
        ("the parent is still provisioning", vec![parent(PS::Provisioning, false)], Ok(())),
        ("the parent succeeded", vec![parent(PS::Succeeded, false)], Ok(())),
        ("the parent failed", vec![parent(PS::Failed, false)], Ok(())),
    ];
    for (name, related, want) in cases {
        let (snap, got) = put_child(related);
        assert_eq!(got.map(|_| ()), want, "{name}");
        assert_eq!(snap.resource.is_some(), want.is_ok(), "{name}: nothing is created when refused");
    }
    // A top-level resource needs no parent.
    let mut snap = Snapshot::default();
    assert!(admission::admit_put(&mut snap, &parent_id(), "VirtualNetwork", spec(v1()), &ctx(1, T0)).is_ok());
}

#[test]
fn a_child_cannot_change_while_its_parent_is_deleting() {
    let (mut snap, _) = put_child(vec![parent(PS::Succeeded, false)]);
    snap.operations.clear();
    snap.resource.as_mut().unwrap().provisioning_state = PS::Succeeded;
    snap.resource.as_mut().unwrap().active_operation_id = None;
    snap.related = vec![parent(PS::Deleting, true)];
    let put = admission::admit_put(&mut snap.clone(), &child_id(), "Subnet", spec(v2()), &ctx(2, T0));
    assert!(matches!(put, Err(Rejection::Conflict { .. })), "{put:?}");
    let patch = admission::admit_patch(&mut snap.clone(), None, Some(&v2()), |_| Ok(()), &ctx(2, T0));
    assert!(matches!(patch, Err(Rejection::Conflict { .. })), "{patch:?}");
    // Deleting the child is what the parent's delete needs: allowed.
    assert!(matches!(admission::admit_delete(&mut snap, &ctx(3, T0)), Ok(Admitted::Accepted { .. })));
}

#[test]
fn a_childs_job_waits_for_its_parent_to_succeed() {
    let policy = TypePolicy::default();
    let (mut snap, _) = put_child(vec![parent(PS::Provisioning, false)]);
    let deadline = T0.add(policy.create_deadline);
    assert_eq!(reconcile::decide(&mut snap, &policy, at(1)), Effect::Sleep { until: Some(deadline) });
    let op = snap.operation(&op_id(1)).unwrap();
    assert_eq!(op.waiting_on.as_deref(), Some(parent_id().to_string().as_str()), "visible on the operation");
    assert_eq!(op.status, PS::Accepted);
    assert!(snap.resource.as_ref().unwrap().jobs.is_empty(), "no job yet");
    // Deciding again changes nothing (no busy loop): the same sleep, the same state.
    let settled = snap.clone();
    assert_eq!(reconcile::decide(&mut snap, &policy, at(2)), Effect::Sleep { until: Some(deadline) });
    assert_eq!(snap, settled);

    // The parent succeeded (the child was woken): the job launches, the wait is over.
    snap.related = vec![parent(PS::Succeeded, false)];
    assert_eq!(reconcile::decide(&mut snap, &policy, at(3)), Effect::Launch { key: key(1, 1) });
    let op = snap.operation(&op_id(1)).unwrap();
    assert_eq!((op.status, op.waiting_on.clone()), (PS::Provisioning, None));
}

#[test]
fn a_child_waiting_past_its_deadline_fails_and_stops_waiting() {
    let policy = TypePolicy::default();
    let (mut snap, _) = put_child(vec![parent(PS::Failed, false)]);
    reconcile::decide(&mut snap, &policy, at(1));
    let late = T0.add(policy.create_deadline);
    reconcile::decide(&mut snap, &policy, late);
    let op = snap.operation(&op_id(1)).unwrap();
    assert_eq!(op.status, PS::Failed);
    assert_eq!(op.error.as_ref().unwrap().code, codes::OPERATION_TIMED_OUT);
    assert_eq!(op.waiting_on, None);
    // Convergence retries wait for the parent too, without a deadline.
    assert_eq!(reconcile::decide(&mut snap, &policy, late.add(secs(3600))), Effect::Sleep { until: None });
    assert!(snap.resource.as_ref().unwrap().jobs.is_empty());
}

#[test]
fn a_parent_that_succeeds_wakes_its_children_once() {
    for (has_child_types, want) in [(true, true), (false, false)] {
        let policy = TypePolicy { has_child_types, ..TypePolicy::default() };
        let mut w = World::created();
        w.policy = policy;
        w.launch(&key(1, 1), "1001");
        assert!(!w.snap.wake_children, "launching wakes nobody");
        w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", ""));
        w.decide();
        assert_eq!(w.res().provisioning_state, PS::Succeeded);
        assert_eq!(w.snap.wake_children, want, "has_child_types = {has_child_types}");
        w.snap.wake_children = false;
        w.decide();
        assert!(!w.snap.wake_children, "already Succeeded: no second wake");
    }
}
