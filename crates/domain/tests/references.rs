//! References: what admission checks (the target exists, is not going away, closes no
//! cycle), what a delete checks (nobody references it), and the referrer's job waiting for
//! its targets (docs/arm-contract.md#references).

mod common;

use common::*;
use slipway_domain::admission::Rejection;
use slipway_domain::cycle::{self, CycleWalk, WalkStep};
use slipway_domain::reconcile::{self, Effect};
use slipway_domain::reference::{self, INVALID_REFERENCE, Reference};
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{ArmId, JobState, ProvisioningState as PS, ResourceKey, TypePolicy};

fn id(path: &str) -> ArmId {
    ArmId::parse(&format!(
        "/subscriptions/AB000000-0000-0000-0000-000000000001/resourceGroups/My-RG/providers/Slipway.Example/{path}"
    ))
    .unwrap()
}

fn vm() -> ArmId {
    id("computeInstances/vm1")
}

fn subnet() -> ArmId {
    id("virtualNetworks/v1/subnets/s1")
}

fn vnet() -> ArmId {
    id("virtualNetworks/v1")
}

/// A record at `at` in `state` (created as a top-level resource, then moved to `at`: these
/// tests are about references, not parents).
fn record(at: &ArmId, state: PS) -> ResourceRecord {
    let mut snap = Snapshot::default();
    slipway_domain::admission::admit_put(
        &mut snap,
        &ArmId { parent_names: vec![], ..at.clone() },
        "X",
        spec(v1()),
        &ctx(50, T0),
    )
    .unwrap();
    let mut r = snap.resource.unwrap();
    r.id = at.clone();
    r.provisioning_state = state;
    r
}

fn deleting(mut r: ResourceRecord) -> ResourceRecord {
    r.deletion = Some(slipway_domain::resource::Deletion { requested_at: T0, force: false });
    r
}

/// The keys the API's walk would read, over the records in `snap.related` (as if stored).
fn walked(snap: &Snapshot, id: &ArmId, references: &[Reference]) -> Vec<ResourceKey> {
    let mut walk = CycleWalk::new(id, references);
    while let WalkStep::Read(at) = walk.step() {
        walk.visit(snap.related(&at));
    }
    walk.into_keys()
}

fn to_subnet() -> Vec<Reference> {
    vec![Reference { property: "subnetId".into(), id: subnet() }]
}

#[test]
fn a_reference_reads_its_target_and_the_targets_ancestors() {
    assert_eq!(reference::related_keys(&vm(), &to_subnet()), {
        let mut k = vec![subnet().key(), vnet().key()];
        k.sort();
        k
    });
    let child = id("virtualNetworks/v2/subnets/s9");
    assert_eq!(reference::related_keys(&child, &[]), vec![id("virtualNetworks/v2").key()], "a child reads its parent");
}

#[test]
fn admission_checks_each_reference() {
    let invalid = |message: String| {
        Err(Rejection::Invalid(
            slipway_domain::CloudError::new(INVALID_REFERENCE, message).with_target("properties.subnetId"),
        ))
    };
    let mut cyclic = record(&subnet(), PS::Succeeded);
    cyclic.references = vec![Reference { property: "owner".into(), id: vm() }];
    let cases: Vec<(&str, Vec<ResourceRecord>, Result<(), Rejection>)> = vec![
        ("the target exists", vec![record(&subnet(), PS::Succeeded), record(&vnet(), PS::Succeeded)], Ok(())),
        (
            "a target still provisioning is fine",
            vec![record(&subnet(), PS::Provisioning), record(&vnet(), PS::Succeeded)],
            Ok(()),
        ),
        (
            "no target",
            vec![record(&vnet(), PS::Succeeded)],
            invalid(format!("The referenced resource '{}' does not exist.", subnet())),
        ),
        (
            "the target is being deleted",
            vec![deleting(record(&subnet(), PS::Deleting)), record(&vnet(), PS::Succeeded)],
            Err(Rejection::Conflict {
                message: format!("The referenced resource '{}' is being deleted", subnet()),
                target: "properties.subnetId".into(),
            }),
        ),
        (
            "the target's parent is being deleted",
            vec![record(&subnet(), PS::Succeeded), deleting(record(&vnet(), PS::Deleting))],
            Err(Rejection::Conflict {
                message: format!("The referenced resource '{}' is being deleted", vnet()),
                target: "properties.subnetId".into(),
            }),
        ),
        (
            "the target references this resource",
            vec![cyclic, record(&vnet(), PS::Succeeded)],
            invalid(format!("Referencing '{}' would create a cycle: it references this resource.", subnet())),
        ),
    ];
    for (name, related, want) in cases {
        let mut snap = Snapshot { related, ..Snapshot::default() };
        let read = walked(&snap, &vm(), &to_subnet());
        let got =
            reference::admit_put(&mut snap, &vm(), "ComputeInstance", spec(v1()), to_subnet(), &read, &ctx(1, T0));
        assert_eq!(got.as_ref().map(|_| ()).map_err(Clone::clone), want, "{name}");
        if want.is_ok() {
            assert_eq!(snap.resource.unwrap().references, to_subnet(), "{name}: recorded");
        }
    }
    let mut snap = Snapshot { related: vec![record(&vm(), PS::Succeeded)], ..Snapshot::default() };
    let own = vec![Reference { property: "subnetId".into(), id: vm() }];
    assert!(matches!(
        reference::admit_put(&mut snap, &vm(), "ComputeInstance", spec(v1()), own, &[], &ctx(1, T0)),
        Err(Rejection::Invalid(_))
    ));
}

#[test]
fn a_referenced_resource_cannot_be_deleted() {
    let mut snap = Snapshot { resource: Some(record(&subnet(), PS::Succeeded)), ..Snapshot::default() };
    assert_eq!(reference::check_not_in_use(&snap), Ok(()));
    snap.referrers = vec![record(&vm(), PS::Succeeded), record(&id("computeInstances/vm0"), PS::Failed)];
    assert_eq!(
        reference::check_not_in_use(&snap),
        Err(Rejection::InUse {
            target: subnet().to_string(),
            referrers: vec![id("computeInstances/vm0").to_string(), vm().to_string()],
        })
    );
}

#[test]
fn a_referrers_job_waits_for_its_targets_and_they_wake_it() {
    let policy = TypePolicy::default();
    let mut snap = Snapshot {
        related: vec![record(&subnet(), PS::Provisioning), record(&vnet(), PS::Succeeded)],
        ..Snapshot::default()
    };
    let read = walked(&snap, &vm(), &to_subnet());
    reference::admit_put(&mut snap, &vm(), "ComputeInstance", spec(v1()), to_subnet(), &read, &ctx(1, T0)).unwrap();
    let deadline = T0.add(policy.create_deadline);
    assert_eq!(reconcile::decide(&mut snap, &policy, at(1)), Effect::Sleep { until: Some(deadline) });
    assert_eq!(snap.operation(&op_id(1)).unwrap().waiting_on, Some(subnet().to_string()));
    snap.related[0].provisioning_state = PS::Succeeded;
    assert_eq!(reconcile::decide(&mut snap, &policy, at(2)), Effect::Launch { key: key(1, 1) });

    // A referenced type's resource wakes its referrers when it becomes Succeeded.
    let mut w = World::created();
    w.policy.is_referenced = true;
    w.launch(&key(1, 1), "1001");
    w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", ""));
    w.decide();
    assert!(w.snap.wake_referrers && !w.snap.wake_children);
}

#[test]
fn a_resource_cannot_reference_what_it_contains() {
    let own_child = Reference { property: "subnetId".into(), id: subnet() };
    let mut snap = Snapshot { related: vec![record(&subnet(), PS::Succeeded)], ..Snapshot::default() };
    let got = reference::admit_put(&mut snap, &vnet(), "VirtualNetwork", spec(v1()), vec![own_child], &[], &ctx(1, T0));
    assert!(
        matches!(got, Err(Rejection::Invalid(e)) if e.message.contains("what it contains")),
        "its child waits for it"
    );
}

/// A deleted subscription deletes referenced resources too: each waits for its referrers to
/// go before its delete job runs, and a referrer that goes wakes what it referenced (and
/// their ancestors).
#[test]
fn a_referenced_resource_being_deleted_waits_for_its_referrers_and_they_wake_it() {
    let mut w = World::provisioned();
    w.delete(2).expect("delete admitted");
    let mut referrer = deleting(record(&vm(), PS::Deleting));
    referrer.references = to_subnet();
    w.snap.referrers = vec![referrer];
    let deadline = w.op(2).start_time.add(w.policy.delete_deadline);
    assert_eq!(w.decide(), Effect::Sleep { until: Some(deadline) }, "no delete job while referenced");
    assert!(w.res().jobs.iter().all(|j| j.job_type != slipway_domain::JobType::Deprovision));
    w.snap.referrers.clear();
    assert!(matches!(w.decide(), Effect::Launch { .. }), "the referrer is gone: the delete job runs");

    // The referrer's own delete, as it ends, wakes the subnet it referenced and its network,
    // and its group (whose delete may wait for it).
    let mut snap = Snapshot { resource: Some(deleting(record(&vm(), PS::Deleting))), ..Snapshot::default() };
    snap.resource.as_mut().unwrap().references = to_subnet();
    assert_eq!(reconcile::decide(&mut snap, &TypePolicy::default(), at(1)), Effect::Sleep { until: None });
    assert!(snap.resource.is_none(), "never provisioned: gone at once");
    let mut woken = snap.wake.clone();
    woken.sort();
    let mut want = vec![subnet().key(), vnet().key(), vm().group_id().key()];
    want.sort();
    assert_eq!(woken, want);
}

/// The walk inside the change goes over the records it read under their locks: a longer
/// cycle is found there, and a step off them (a resource on the path changed its references
/// since the API's walk) is a `409` to send again.
#[test]
fn the_cycle_walk_inside_the_change_sees_what_changed_since_the_first() {
    let (a, b, c) = (id("computeInstances/a"), id("computeInstances/b"), id("computeInstances/c"));
    let refs = |to: &ArmId| vec![Reference { property: "x".into(), id: to.clone() }];
    let with_refs = |at: &ArmId, to: Option<&ArmId>| {
        let mut r = record(at, PS::Succeeded);
        r.references = to.map(refs).unwrap_or_default();
        r
    };
    // a → b, where b → c: the API's walk read b and c.
    let before = Snapshot { related: vec![with_refs(&b, Some(&c)), with_refs(&c, None)], ..Snapshot::default() };
    let read = walked(&before, &a, &refs(&b));
    assert_eq!(read, {
        let mut k = vec![b.key(), c.key()];
        k.sort();
        k
    });
    assert_eq!(cycle::check_within(&before, &a, &refs(&b), &read), Ok(()));
    // Meanwhile c → a was written: under the locks, the walk closes the cycle.
    let closed = Snapshot { related: vec![with_refs(&b, Some(&c)), with_refs(&c, Some(&a))], ..Snapshot::default() };
    assert!(
        matches!(cycle::check_within(&closed, &a, &refs(&b), &read), Err(Rejection::Invalid(e)) if e.message.contains("cycle"))
    );
    // Or c → d: the walk steps off what it read, and the request is to be sent again.
    let d = id("computeInstances/d");
    let moved = Snapshot { related: vec![with_refs(&b, Some(&c)), with_refs(&c, Some(&d))], ..Snapshot::default() };
    assert!(matches!(cycle::check_within(&moved, &a, &refs(&b), &read), Err(Rejection::Conflict { .. })));
}
