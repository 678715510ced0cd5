//! Cascading delete: a parent's delete deletes its children first, each with a delete
//! operation of its own, waits for them (showing their failures), then runs its own delete
//! job (docs/arm-contract.md#cascading-delete).

mod common;

use common::*;
use slipway_domain::admission::{self, Admitted};
use slipway_domain::job::{Job, JobState, JobType};
use slipway_domain::operation::codes;
use slipway_domain::reconcile::cascade::{self, CHILD_DELETES_PER_STEP};
use slipway_domain::reconcile::{Effect, Outcome};
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{ArmId, IdempotencyKey, OperationId, ProvisioningState as PS};

fn child_id(name: &str) -> ArmId {
    ArmId::parse(&format!("{RESOURCE_ID}/subnets/{name}")).expect("a child id")
}

/// A child as created under the parent (by operation `op`), finished.
fn child(name: &str, op: u32) -> ResourceRecord {
    let mut snap = Snapshot { related: vec![World::created().res().clone()], ..Snapshot::default() };
    admission::admit_put(&mut snap, &child_id(name), "Subnet", spec(v1()), &ctx(op, T0)).expect("child");
    let mut c = snap.resource.expect("created");
    c.provisioning_state = PS::Succeeded;
    c.active_operation_id = None;
    c
}

/// The child as its cascade delete leaves it: deleting, its delete job in `state`.
fn deleting(mut c: ResourceRecord, job: Option<JobState>) -> ResourceRecord {
    c.deletion = Some(slipway_domain::resource::Deletion { requested_at: T0, force: false });
    c.provisioning_state = PS::Deleting;
    if let Some(state) = job {
        let mut j = Job::new(JobType::Deprovision, state, at(5)).with_job_id("77");
        j.message = "delete failed: the subnet is in use".into();
        j.block_deletion_on_failure = true;
        c.jobs.push(j);
    }
    c
}

/// A provisioned parent whose delete (operation 2) was admitted, with `children`.
fn deleting_parent(children: Vec<ResourceRecord>) -> World {
    let mut w = World::provisioned();
    w.policy.has_child_types = true;
    w.delete(2).expect("delete admitted");
    w.snap.children = children;
    w
}

#[test]
fn children_are_deleted_first_then_waited_for_then_the_parent_job_runs() {
    let mut w = deleting_parent(vec![child("a", 11), child("b", 12)]);
    let effect = w.decide();
    assert_eq!(effect, Effect::DeleteChildren { children: vec![child_id("a"), child_id("b")] });
    assert!(w.res().jobs.iter().all(|j| j.job_type == JobType::Provision), "no parent delete job yet");
    let (op_a, op_b) = (
        cascade::child_operation_id(&op_id(2), &child_id("a")),
        cascade::child_operation_id(&op_id(2), &child_id("b")),
    );
    assert_eq!(
        w.apply(&effect, Outcome::ChildDeletes(vec![(child_id("a"), op_a.clone()), (child_id("b"), op_b.clone())])),
        None
    );
    let recorded: Vec<(String, OperationId)> =
        w.op(2).child_operations.iter().map(|c| (c.resource_id.clone(), c.operation_id.clone())).collect();
    assert_eq!(recorded, vec![(child_id("a").to_string(), op_a), (child_id("b").to_string(), op_b)]);

    // Both deleting: the parent sleeps until its deadline (woken by the children).
    w.snap.children = vec![deleting(child("a", 11), Some(JobState::Running)), deleting(child("b", 12), None)];
    let deadline = w.op(2).start_time.add(w.policy.delete_deadline);
    assert_eq!(w.decide(), Effect::Sleep { until: Some(deadline) });
    assert_eq!(w.op(2).status, PS::Deleting);
    assert_eq!(w.op(2).error, None);

    // One child is gone, the other still deleting: still waiting.
    w.snap.children = vec![deleting(child("b", 12), Some(JobState::Running))];
    assert_eq!(w.decide(), Effect::Sleep { until: Some(deadline) });
    // All gone: the parent's own delete job launches.
    w.snap.children.clear();
    let Effect::Launch { key } = w.decide() else { panic!("the parent's delete job launches") };
    assert_eq!(w.job(&key).job_type, JobType::Deprovision);
}

#[test]
fn a_child_that_fails_to_delete_holds_the_parent_and_shows_its_error() {
    let mut w = deleting_parent(vec![
        deleting(child("a", 11), Some(JobState::Failed)),
        deleting(child("b", 12), Some(JobState::Running)),
    ]);
    let deadline = w.op(2).start_time.add(w.policy.delete_deadline);
    assert_eq!(w.decide(), Effect::Sleep { until: Some(deadline) });
    let op = w.op(2);
    assert_eq!(op.status, PS::Deleting, "the parent stays Deleting");
    let error = op.error.clone().expect("the child's failure is shown");
    assert_eq!(error.code, codes::DEPROVISIONING_FAILED);
    assert_eq!(error.details.len(), 1);
    assert_eq!(error.details[0].target.as_deref(), Some(child_id("a").to_string().as_str()));
    assert_eq!(error.message, format!("[{}] delete failed: the subnet is in use", child_id("a")), "[source] message");

    // The deadline ends the operation, keeping the child's error among the details.
    w.set_now(deadline);
    w.decide();
    let op = w.op(2);
    assert_eq!(op.status, PS::Failed);
    let error = op.error.clone().unwrap();
    assert_eq!(error.code, codes::OPERATION_TIMED_OUT);
    assert_eq!(error.details[0].target.as_deref(), Some(child_id("a").to_string().as_str()));
    // The record stays: deletion goes on after the operation ends, children first.
    assert!(w.snap.resource.is_some());
}

#[test]
fn a_large_family_is_asked_in_bounded_steps() {
    let children: Vec<ResourceRecord> =
        (0..CHILD_DELETES_PER_STEP + 3).map(|i| child(&format!("c{i:02}"), 100 + i as u32)).collect();
    let mut w = deleting_parent(children.clone());
    let Effect::DeleteChildren { children: first } = w.decide() else { panic!() };
    assert_eq!(first.len(), CHILD_DELETES_PER_STEP);
    w.snap.children = children.into_iter().map(|c| if first.contains(&c.id) { deleting(c, None) } else { c }).collect();
    let Effect::DeleteChildren { children: rest } = w.decide() else { panic!() };
    assert_eq!(rest.len(), 3);
}

#[test]
fn a_childs_delete_is_admitted_once_with_a_stable_operation() {
    let parent = deleting_parent(vec![]);
    let parent_op = parent.op(2).clone();
    let ctx = cascade::child_delete_context(Some(&parent_op), parent.res(), &child_id("a"), at(9));
    assert_eq!(ctx.operation_id, cascade::child_operation_id(&op_id(2), &child_id("a")), "derived, stable");
    assert_ne!(ctx.operation_id, cascade::child_operation_id(&op_id(2), &child_id("b")));
    assert_ne!(ctx.operation_id, cascade::child_operation_id(&op_id(3), &child_id("a")));
    assert_eq!(ctx.initiator, parent_op.initiator, "the parent's requester may read it");
    assert_eq!(ctx.notification_uri, None);

    let mut snap = Snapshot { resource: Some(child("a", 11)), ..Snapshot::default() };
    assert_eq!(cascade::admit_child_delete(&mut snap, &ctx), Some(ctx.operation_id.clone()));
    let op = snap.operation(&ctx.operation_id).unwrap();
    assert_eq!((op.status, op.request), (PS::Deleting, slipway_domain::OperationRequest::Delete));
    // Asked again (a cascade resumed after a crash): the same operation, nothing new.
    let before = snap.clone();
    assert_eq!(cascade::admit_child_delete(&mut snap, &ctx), Some(ctx.operation_id.clone()));
    assert_eq!(snap, before);
    // A child a client deleted itself keeps its own operation.
    let mut own = Snapshot { resource: Some(child("b", 12)), ..Snapshot::default() };
    let Ok(Admitted::Accepted { operation, .. }) = admission::admit_delete(&mut own, &ctx_for(13)) else { panic!() };
    assert_eq!(cascade::admit_child_delete(&mut own, &ctx), Some(operation.id));
    // A child that is gone has none.
    assert_eq!(cascade::admit_child_delete(&mut Snapshot::default(), &ctx), None);
}

fn ctx_for(op: u32) -> admission::RequestContext {
    ctx(op, at(1))
}

/// A provisioned child (operation 1), its delete (operation 2) launched as job 2001.
fn child_deleting(block_deletion_on_failure: bool) -> (World, IdempotencyKey) {
    let mut w = World::new();
    w.policy.block_deletion_on_failure = block_deletion_on_failure;
    let mut snap = Snapshot { related: vec![World::provisioned().res().clone()], ..Snapshot::default() };
    admission::admit_put(&mut snap, &child_id("a"), "Subnet", spec(v1()), &ctx(1, T0)).unwrap();
    w.snap = snap;
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", ""));
    w.decide();
    assert!(w.snap.wake.is_empty(), "provisioning wakes no parent");
    w.delete(2).unwrap();
    let Effect::Launch { key: delete_key } = w.decide() else { panic!() };
    w.apply(&Effect::Launch { key: delete_key.clone() }, launched("2001"));
    (w, delete_key)
}

#[test]
fn a_child_wakes_its_parent_as_its_delete_progresses() {
    // Its delete job fails and is retried: the parent is woken to show the failure.
    let (mut w, delete_key) = child_deleting(true);
    w.poll(&delete_key, observed(JobState::Failed, "failed", "in use"));
    assert_eq!(w.snap.wake, vec![arm_id().key()], "the parent is woken");
    w.snap.wake.clear();
    w.decide();
    assert!(w.snap.resource.is_some() && w.snap.wake.is_empty(), "backing off wakes nobody");

    // Its record goes: the parent is woken.
    let (mut w, delete_key) = child_deleting(false);
    w.poll(&delete_key, observed(JobState::Succeeded, "successful", ""));
    w.snap.wake.clear();
    w.decide();
    assert!(w.snap.resource.is_none());
    assert_eq!(w.snap.wake, vec![arm_id().key()]);
}

#[test]
fn a_child_another_child_references_goes_after_it() {
    let mut referrer = child("b", 12);
    referrer.references = vec![slipway_domain::reference::Reference { property: "peer".into(), id: child_id("a") }];
    let mut w = deleting_parent(vec![child("a", 11), referrer.clone()]);
    assert_eq!(w.decide(), Effect::DeleteChildren { children: vec![child_id("b")] }, "a waits for its referrer");
    w.snap.children = vec![child("a", 11), deleting(referrer, Some(JobState::Running))];
    assert!(matches!(w.decide(), Effect::Sleep { .. }), "still referenced by a child on its way out");
    w.snap.children = vec![child("a", 11)];
    assert_eq!(w.decide(), Effect::DeleteChildren { children: vec![child_id("a")] });
}

#[test]
fn a_cascade_goes_on_after_its_operation_ended_and_pauses_when_nothing_was_admitted() {
    let mut w = deleting_parent(vec![child("a", 11)]);
    let effect = w.decide();
    // Nothing admitted (the store was unreachable): a pause, not a hot loop.
    assert_eq!(w.apply(&effect, Outcome::ChildDeletes(vec![])), Some(w.now.add(w.policy.poll_interval)));
    // The operation's deadline passes: the cascade goes on without it.
    w.set_now(w.op(2).start_time.add(w.policy.delete_deadline));
    assert_eq!(w.decide(), Effect::DeleteChildren { children: vec![child_id("a")] });
    assert_eq!(w.op(2).status, PS::Failed);
    let ctx = cascade::child_delete_context(None, w.res(), &child_id("a"), w.now);
    assert_eq!(ctx.operation_id, cascade::child_operation_id(&w.res().last_operation_id, &child_id("a")));
}
