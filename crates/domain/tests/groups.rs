//! Resource groups as resources (docs/arm-contract.md#resource-groups): their admission
//! (`PUT`, `PATCH`, `DELETE`), the group a resource's create needs, and a group's delete —
//! its resources first, each through its own delete, then `Succeeded` once it is empty or
//! `Failed` naming what could not go, the group staying.

mod common;

use std::collections::BTreeMap;

use common::*;
use slipway_domain::admission::{self, Admitted, Rejection};
use slipway_domain::group::{self, GroupSpec, GroupWrite};
use slipway_domain::job::{Job, JobState, JobType};
use slipway_domain::operation::codes;
use slipway_domain::reconcile::Effect;
use slipway_domain::resource::{Deletion, ResourceRecord, Snapshot};
use slipway_domain::{ArmId, ProvisioningState as PS, TypePolicy};

fn group_id() -> ArmId {
    arm_id().group_id()
}

fn spec_in(location: &str) -> GroupSpec {
    GroupSpec { location: location.into(), tags: BTreeMap::from([("env".into(), "dev".into())]), managed_by: None }
}

/// A group created by operation 9.
fn group() -> Snapshot {
    let mut snap = Snapshot::default();
    assert_eq!(
        group::admit_group_put(&mut snap, &group_id(), spec_in("West Europe"), &ctx(9, T0)),
        Ok(GroupWrite::Created)
    );
    snap
}

/// A top-level resource in the group (made by operation `op`), finished.
fn member(name: &str, op: u32) -> ResourceRecord {
    let id = ArmId::new(&arm_id().subscription, &arm_id().resource_group, "Slipway.Example", "virtualNetworks", name)
        .expect("an id");
    let mut snap = Snapshot { related: vec![group().resource.unwrap()], ..Snapshot::default() };
    group::check_group(&snap, &id).expect("the group exists");
    admission::admit_put(&mut snap, &id, "VirtualNetwork", spec(v1()), &ctx(op, T0)).expect("created");
    let mut r = snap.resource.unwrap();
    r.provisioning_state = PS::Succeeded;
    r.active_operation_id = None;
    r
}

/// As its cascade delete left it, its last delete job `state`.
fn deleting(mut r: ResourceRecord, job: Option<JobState>) -> ResourceRecord {
    r.deletion = Some(Deletion { requested_at: T0, force: false });
    r.provisioning_state = PS::Deleting;
    if let Some(state) = job {
        let mut j = Job::new(JobType::Deprovision, state, at(5)).with_job_id("77");
        j.message = "delete failed: in use".into();
        r.jobs.push(j);
    }
    r
}

#[test]
fn a_group_is_created_replaced_and_patched_at_once_with_its_location_fixed() {
    let mut snap = group();
    let g = snap.resource.clone().unwrap();
    assert_eq!((g.provisioning_state, g.active_operation_id.clone(), g.schedule.next_due), (PS::Succeeded, None, None));
    assert!(snap.operations.is_empty(), "a group's write is no operation");
    assert_eq!(GroupSpec::of(&g), spec_in("West Europe"));
    let tagged = GroupSpec { managed_by: Some("/subscriptions/x/y".into()), ..spec_in("westeurope") };
    assert_eq!(group::admit_group_put(&mut snap, &group_id(), tagged, &ctx(10, at(1))), Ok(GroupWrite::Replaced));
    let g = snap.resource.clone().unwrap();
    assert_eq!(GroupSpec::of(&g).location, "West Europe", "the first casing stays");
    assert_eq!(GroupSpec::of(&g).managed_by.as_deref(), Some("/subscriptions/x/y"));
    assert_eq!(g.generation, 2);
    let moved = group::admit_group_put(&mut snap, &group_id(), spec_in("eastus"), &ctx(11, at(2)));
    assert_eq!(moved, Err(Rejection::GroupLocationFixed { group: "My-RG".into(), location: "West Europe".into() }));
    group::admit_group_patch(&mut snap, Some(BTreeMap::new()), None, &ctx(12, at(3))).unwrap();
    let g = snap.resource.clone().unwrap();
    assert!(g.spec.tags.is_empty());
    assert_eq!(GroupSpec::of(&g).managed_by.as_deref(), Some("/subscriptions/x/y"), "PATCH keeps what it omits");
    assert_eq!(group::admit_group_patch(&mut Snapshot::default(), None, None, &ctx(13, T0)), Err(Rejection::NotFound));
}

#[test]
fn a_resource_needs_its_group_and_not_one_being_deleted() {
    let vnet = arm_id();
    let alone = Snapshot::default();
    assert_eq!(group::check_group(&alone, &vnet), Err(Rejection::GroupNotFound { group: "My-RG".into() }));
    let mut going = group();
    group::admit_group_delete(&mut going, &group_id(), &ctx(20, T0)).unwrap();
    let related = Snapshot { related: vec![going.resource.unwrap()], ..Snapshot::default() };
    assert_eq!(group::check_group(&related, &vnet), Err(Rejection::GroupBeingDeleted { group: "My-RG".into() }));
    let child = ArmId::parse(&format!("{vnet}/subnets/s")).unwrap();
    assert_eq!(group::check_group(&alone, &child), Ok(()), "a child answers to its parent");
}

#[test]
fn a_group_delete_deletes_its_resources_then_goes() {
    let mut w = World { snap: group(), policy: TypePolicy::resource_group(mins(60)), ..World::new() };
    w.snap.children = vec![member("a", 11), member("b", 12)];
    let Ok(Admitted::Accepted { operation, .. }) = group::admit_group_delete(&mut w.snap, &group_id(), &ctx(2, T0))
    else {
        panic!("admitted")
    };
    assert_eq!((operation.status, operation.resource_id.clone()), (PS::Deleting, group_id().to_string()));
    let again = group::admit_group_delete(&mut w.snap, &group_id(), &ctx(3, T0));
    assert_eq!(again, Ok(Admitted::InProgress { operation: operation.clone() }), "a repeated DELETE follows it");
    let ids: Vec<ArmId> = w.snap.children.iter().map(|c| c.id.clone()).collect();
    assert_eq!(w.decide(), Effect::DeleteChildren { children: ids });
    w.snap.children = w.snap.children.drain(..).map(|c| deleting(c, None)).collect();
    assert!(matches!(w.decide(), Effect::Sleep { .. }), "waits while they go");
    assert!(w.snap.resource.is_some());
    w.snap.children.clear();
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    assert!(w.snap.resource.is_none(), "empty: the group goes");
    assert_eq!(w.snap.operation(&operation.id).unwrap().status, PS::Succeeded);
}

#[test]
fn a_group_delete_that_cannot_empty_the_group_fails_naming_what_is_left() {
    let mut w = World { snap: group(), policy: TypePolicy::resource_group(mins(60)), ..World::new() };
    let (a, b) = (member("a", 11), member("b", 12));
    w.snap.children = vec![a.clone(), b.clone()];
    group::admit_group_delete(&mut w.snap, &group_id(), &ctx(2, T0)).unwrap();
    // `b` is still being deleted: the group waits for it.
    w.snap.children = vec![deleting(a.clone(), Some(JobState::Failed)), deleting(b, Some(JobState::Running))];
    assert!(matches!(w.decide(), Effect::Sleep { until: Some(_) }));
    assert!(w.res().is_deleting());
    // `b` went; `a` cannot.
    w.snap.children = vec![deleting(a.clone(), Some(JobState::Failed))];
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    let g = w.res().clone();
    assert_eq!((g.provisioning_state, g.is_deleting(), g.active_operation_id.clone()), (PS::Succeeded, false, None));
    let op = w.snap.operation(&op_id(2)).unwrap();
    assert_eq!(op.status, PS::Failed);
    let error = op.error.clone().unwrap();
    assert_eq!(error.code, codes::DEPROVISIONING_FAILED);
    assert!(error.message.contains(&a.id.to_string()), "{}", error.message);
    assert_eq!(error.details.len(), 1, "the failed delete job, as the cascade gathered it");
    assert_eq!(error.details[0].target.as_deref(), Some(a.id.to_string().as_str()));
}

#[test]
fn a_group_delete_ended_by_its_deadline_leaves_the_group() {
    let mut w = World { snap: group(), policy: TypePolicy::resource_group(mins(1)), ..World::new() };
    w.snap.children = vec![member("a", 11)];
    group::admit_group_delete(&mut w.snap, &group_id(), &ctx(2, T0)).unwrap();
    w.snap.children = vec![deleting(member("a", 11), Some(JobState::Running))];
    w.set_now(at(61));
    assert_eq!(w.decide(), Effect::Sleep { until: None });
    assert_eq!(w.snap.operation(&op_id(2)).unwrap().error.as_ref().unwrap().code, codes::OPERATION_TIMED_OUT);
    assert_eq!((w.res().provisioning_state, w.res().is_deleting()), (PS::Succeeded, false));
}

#[test]
fn a_group_made_before_groups_were_records_is_adopted_by_its_delete() {
    let mut snap = Snapshot { children: vec![member("a", 11)], ..Snapshot::default() };
    let lower = ArmId::group(&arm_id().subscription, "my-rg").unwrap();
    assert!(matches!(group::admit_group_delete(&mut snap, &lower, &ctx(2, T0)), Ok(Admitted::Accepted { .. })));
    let g = snap.resource.unwrap();
    let located = (g.id.resource_group.as_str(), g.spec.location.as_deref());
    assert_eq!(located, ("My-RG", Some("westeurope")), "named and located as its first resource");
    let mut empty = Snapshot::default();
    assert_eq!(
        group::admit_group_delete(&mut empty, &group_id(), &ctx(2, T0)),
        Err(Rejection::GroupNotFound { group: "My-RG".into() })
    );
}

#[test]
fn a_group_referenced_from_outside_is_not_deleted() {
    let mut snap = group();
    snap.referrers = vec![member("outside", 30)];
    let refused = group::admit_group_delete(&mut snap, &group_id(), &ctx(2, T0));
    assert!(matches!(refused, Err(Rejection::InUse { .. })), "{refused:?}");
    assert!(!snap.resource.unwrap().is_deleting());
}
