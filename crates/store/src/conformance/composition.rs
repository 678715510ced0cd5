//! Resources that compose: a change reads related resources (a child's parent) as context,
//! wakes the resources nested under it, and a child type's collection lists one parent's
//! children.

use super::*;

/// `/…/virtualNetworks/{vnet}/subnets/{name}`.
pub fn subnet(vnet_id: &ArmId, name: &str) -> ArmId {
    let mut id = vnet_id.clone();
    id.type_name = format!("{}/subnets", vnet_id.type_name);
    id.parent_names.push(vnet_id.name.clone());
    id.name = name.to_string();
    id
}

/// Creates `id` (any type) as a PUT does, due at `due` (`None`: not due).
async fn seed_due(store: &dyn Store, id: &ArmId, op: u64, due: Option<Timestamp>) {
    let target = id.clone();
    let c = ctx(op, T0);
    let req = ChangeRequest::new(id.key(), T0).with_related(id.parent().map(|p| p.key()));
    apply(store, req, move |s| {
        admission::admit_put(s, &target, KIND, spec(1), &c)?;
        s.resource.as_mut().ok_or(Rejection::NotFound)?.schedule =
            Schedule { next_due: due, intent: false, drift_due: None };
        Ok(())
    })
    .await
    .expect("seed");
}

pub async fn case_a_change_reads_its_related_resources_as_committed(store: &dyn Store) {
    let parent = vnet("Sub-Related", "rg", "v1");
    let child = subnet(&parent, "s1");
    seed_due(store, &parent, 1, None).await;
    let missing = vnet("Sub-Related", "rg", "gone");
    let req = ChangeRequest::new(child.key(), at(SECOND)).with_related([parent.key(), missing.key()]);
    let seen = apply(store, req, move |s| {
        // A change of a related record is never written back.
        if let Some(p) = s.related.first_mut() {
            p.spec.properties = json!({"tampered": true});
        }
        Ok(())
    })
    .await
    .expect("change");
    assert_eq!(seen.related.len(), 1, "an absent related resource is left out");
    assert_eq!(seen.related[0].id, parent);
    assert_eq!(resource(store, &parent.key()).await.spec, spec(1), "related records are read-only");
    // The snapshot finds a related record by id, in any casing.
    let shouty = ArmId::read_stored(&parent.to_string().to_ascii_uppercase()).expect("an id");
    let wanted = parent.clone();
    let again = apply(store, ChangeRequest::new(child.key(), at(2 * SECOND)).with_related([shouty.key()]), move |s| {
        assert!(s.related(&wanted).is_some(), "found by id");
        Ok(())
    })
    .await
    .expect("change");
    assert_eq!(again.related.len(), 1);
}

pub async fn case_waking_children_makes_the_subtree_due(store: &dyn Store) {
    let parent = vnet("Sub-Wake", "rg", "v1");
    let (a, b) = (subnet(&parent, "a"), subnet(&parent, "b"));
    let grandchild = {
        let mut id = subnet(&a, "p1");
        id.type_name = "virtualNetworks/subnets/ports".into();
        id
    };
    // A resource whose name extends the parent's is not under it.
    let lookalike_parent = vnet("Sub-Wake", "rg", "v10");
    let lookalike = subnet(&lookalike_parent, "c");
    seed_due(store, &parent, 1, None).await;
    seed_due(store, &a, 2, None).await;
    seed_due(store, &b, 3, Some(at(SECOND))).await;
    seed_due(store, &grandchild, 4, Some(at(3600 * SECOND))).await;
    seed_due(store, &lookalike_parent, 5, None).await;
    seed_due(store, &lookalike, 6, None).await;
    let now = at(10 * SECOND);
    apply(store, ChangeRequest::new(parent.key(), now), |s| {
        s.wake_children = true;
        Ok(())
    })
    .await
    .expect("wake");
    let due = |id: &ArmId| {
        let key = id.key();
        async move { resource(store, &key).await.schedule.next_due }
    };
    assert_eq!(due(&a).await, Some(now), "a sleeping child is due now");
    assert_eq!(due(&b).await, Some(at(SECOND)), "one due sooner keeps its time");
    assert_eq!(due(&grandchild).await, Some(now), "the whole subtree is woken");
    assert_eq!(due(&lookalike).await, None, "a sibling with a longer name is not under it");
    assert_eq!(due(&parent).await, None, "the parent itself is not woken");
    assert!(resource(store, &a.key()).await.schedule.intent, "woken like a client's write wakes it");
    // The woken children are claimable now.
    let claimed = store.claim(&claim_req("node-a", now, 10, 10)).await.expect("claim");
    let mut claimed = keys(&claimed);
    claimed.sort();
    let mut want = vec![a.key(), b.key(), grandchild.key()];
    want.sort();
    assert_eq!(claimed, want);
}

pub async fn case_a_child_collection_lists_one_parents_children(store: &dyn Store) {
    let (v1, v10) = (vnet("Sub-Children", "rg", "v1"), vnet("Sub-Children", "rg", "v10"));
    for (i, id) in [v1.clone(), v10.clone(), subnet(&v1, "b"), subnet(&v1, "a"), subnet(&v10, "x")].iter().enumerate() {
        seed_due(store, id, i as u64 + 1, None).await;
    }
    let query = |after: Option<ResourceKey>, limit: usize| ListQuery {
        subscription: "sub-children".into(),
        resource_group: Some("rg".into()),
        type_key: Some(subnet(&v1, "a").type_key()),
        under: Some(v1.key()),
        after,
        limit,
    };
    let page = store.list_resources(&query(None, 1)).await.expect("list");
    assert_eq!(keys(&page.items), vec![subnet(&v1, "a").key()]);
    let rest = store.list_resources(&query(page.next, 10)).await.expect("list");
    assert_eq!(keys(&rest.items), vec![subnet(&v1, "b").key()], "v10's subnet is not v1's");
    assert_eq!(rest.next, None);
    // The type's collection without a parent lists every subnet of the group.
    let all = ListQuery { under: None, ..query(None, 10) };
    assert_eq!(store.list_resources(&all).await.expect("list").items.len(), 3);
}

pub async fn case_a_change_reads_its_direct_children(store: &dyn Store) {
    let parent = vnet("Sub-Kids", "rg", "v1");
    let (a, b) = (subnet(&parent, "a"), subnet(&parent, "b"));
    let grandchild = {
        let mut id = subnet(&a, "p1");
        id.type_name = "virtualNetworks/subnets/ports".into();
        id
    };
    let lookalike_parent = vnet("Sub-Kids", "rg", "v10");
    let lookalike = subnet(&lookalike_parent, "c");
    for (i, id) in [&parent, &a, &b, &grandchild, &lookalike_parent, &lookalike].into_iter().enumerate() {
        seed_due(store, id, i as u64 + 1, None).await;
    }
    let seen =
        apply(store, ChangeRequest::new(parent.key(), at(SECOND)).with_children(true), |_| Ok(())).await.expect("read");
    let mut ids: Vec<ArmId> = seen.children.iter().map(|c| c.id.clone()).collect();
    ids.sort_by_key(ArmId::key);
    assert_eq!(ids, vec![a.clone(), b.clone()], "direct children only");
    let plain = apply(store, ChangeRequest::new(parent.key(), at(SECOND)), |_| Ok(())).await.expect("read");
    assert!(plain.children.is_empty(), "only when asked");
    // A child's change wakes its parent by key.
    apply(store, ChangeRequest::new(a.key(), at(5 * SECOND)), move |s| {
        s.wake.push(vnet("Sub-Kids", "rg", "V1").key());
        Ok(())
    })
    .await
    .expect("wake");
    let woken = resource(store, &parent.key()).await;
    assert_eq!((woken.schedule.next_due, woken.schedule.intent), (Some(at(5 * SECOND)), true));
    assert_eq!(resource(store, &lookalike_parent.key()).await.schedule.next_due, None);
}

/// Children created while their parent is removed: one side loses, cleanly. A child's
/// change reads its parent under the parent's lock, so it either sees the parent (and the
/// removal, after it, sees the child among the children and is refused) or sees it gone and
/// is refused itself — never a child left under no parent.
pub async fn case_a_child_never_outlives_a_parent_removed_concurrently(h: &Harness) {
    check_children_never_outlive_a_removed_parent(&h.shared(), &h.shared()).await;
}

/// The case above with the children created through `creators` and the parent removed
/// through `remover` (two replicas, on PostgreSQL: two transactions really in flight at once).
pub async fn check_children_never_outlive_a_removed_parent(creators: &Arc<dyn Store>, remover: &Arc<dyn Store>) {
    const ROUNDS: u64 = 30;
    const CHILDREN: u64 = 6;
    let store = Arc::clone(creators);
    let mut orphans = Vec::new();
    let (mut created, mut refused) = (0, 0);
    for round in 0..ROUNDS {
        let parent = vnet("Sub-Orphan", "rg", &format!("v{round}"));
        let op_base = 1000 + round * (CHILDREN + 1);
        seed_due(&*store, &parent, op_base, None).await;
        let mut tasks = tokio::task::JoinSet::new();
        for n in 0..CHILDREN {
            let (store, child) = (Arc::clone(&store), subnet(&parent, &format!("s{n}")));
            tasks.spawn(async move {
                let ctx = ctx(op_base + 1 + n, at(SECOND));
                let req = ChangeRequest::new(child.key(), at(SECOND)).with_related(child.parent().map(|p| p.key()));
                let target = child.clone();
                let made =
                    apply(&*store, req, move |s| admission::admit_put(s, &target, KIND, spec(1), &ctx).map(|_| ()))
                        .await;
                match made {
                    Ok(_) => Some(child),
                    Err(StoreError::Rejected(Rejection::ParentNotFound { .. })) => None,
                    Err(e) => panic!("a child's create failed otherwise: {e}"),
                }
            });
        }
        let (s1, p) = (Arc::clone(remover), parent.clone());
        // The removal a finished delete makes, refused while a child exists.
        let removed = apply(&*s1, ChangeRequest::new(p.key(), at(SECOND)).with_children(true), |s| {
            if s.children.is_empty() {
                s.resource = None;
                Ok(())
            } else {
                Err(Rejection::Conflict { message: "children left".into(), target: String::new() })
            }
        })
        .await;
        let made: Vec<Option<ArmId>> = tasks.join_all().await;
        created += made.iter().flatten().count();
        refused += made.iter().filter(|m| m.is_none()).count();
        let parent_left = store.get_resource(&parent.key()).await.expect("read").is_some();
        assert_eq!(parent_left, removed.is_err(), "round {round}");
        for child in made.into_iter().flatten() {
            if store.get_resource(&child.key()).await.expect("read").is_some() && !parent_left {
                orphans.push(child.to_string());
            }
        }
    }
    assert!(
        orphans.is_empty(),
        "{} children outlived their parent, e.g. {:?}",
        orphans.len(),
        &orphans[..orphans.len().min(3)]
    );
    assert_eq!(created + refused, (ROUNDS * CHILDREN) as usize);
}

fn references_to(targets: &[ArmId]) -> Vec<slipway_domain::reference::Reference> {
    let to =
        |(i, t): (usize, &ArmId)| slipway_domain::reference::Reference { property: format!("ref{i}"), id: t.clone() };
    targets.iter().enumerate().map(to).collect()
}

/// Creates `id` referencing `targets` as the API does: the cycle walk over the stored
/// records first, then one change reading the targets, their ancestors and whatever the walk
/// read as related, the references recorded.
async fn seed_referrer(store: &dyn Store, id: &ArmId, op: u64, targets: &[ArmId]) -> Result<Snapshot, StoreError> {
    let walked = crate::reference_walk(store, id, &references_to(targets)).await?;
    write_referrer(store, id, op, targets, walked).await
}

/// The change half of [`seed_referrer`], after a walk that read `walked`.
async fn write_referrer(
    store: &dyn Store,
    id: &ArmId,
    op: u64,
    targets: &[ArmId],
    walked: Vec<slipway_domain::ids::ResourceKey>,
) -> Result<Snapshot, StoreError> {
    let references = references_to(targets);
    let req = ChangeRequest::new(id.key(), T0)
        .with_related(slipway_domain::reference::related_keys(id, &references))
        .with_related(walked.clone());
    let (target, c) = (id.clone(), ctx(op, T0));
    apply(store, req, move |s| {
        slipway_domain::reference::admit_put(s, &target, KIND, spec(1), references, &walked, &c)?;
        // Settled, so a wake-up shows.
        s.resource.as_mut().ok_or(Rejection::NotFound)?.schedule = Schedule::default();
        Ok(())
    })
    .await
}

async fn referrers(store: &dyn Store, id: &ArmId) -> Vec<ArmId> {
    let seen =
        apply(store, ChangeRequest::new(id.key(), at(SECOND)).with_referrers(true), |_| Ok(())).await.expect("read");
    let mut ids: Vec<ArmId> = seen.referrers.into_iter().map(|r| r.id).collect();
    ids.sort_by_key(ArmId::key);
    ids
}

pub async fn case_references_are_indexed_for_deletes_and_wake_ups(store: &dyn Store) {
    let vnet_id = vnet("Sub-Refs", "rg", "v1");
    let subnet_id = subnet(&vnet_id, "s1");
    let group = vnet("Sub-Refs", "rg", "nsg");
    for (i, id) in [&vnet_id, &subnet_id, &group].into_iter().enumerate() {
        seed_due(store, id, i as u64 + 1, None).await;
    }
    let (vm1, vm2) = (vnet("Sub-Refs", "rg", "vm1"), vnet("Sub-Refs", "rg", "vm2"));
    seed_referrer(store, &vm1, 10, &[subnet_id.clone(), group.clone()]).await.expect("vm1");
    seed_referrer(store, &vm2, 11, std::slice::from_ref(&subnet_id)).await.expect("vm2");
    assert_eq!(referrers(store, &subnet_id).await, vec![vm1.clone(), vm2.clone()]);
    assert_eq!(referrers(store, &group).await, vec![vm1.clone()]);
    assert_eq!(referrers(store, &vnet_id).await, vec![vm1.clone(), vm2.clone()], "a subtree's referrers count");
    assert_eq!(referrers(store, &vm1).await, Vec::<ArmId>::new());
    // The read clients use: direct referrers only, in key order, at most the limit.
    let listed = |records: Vec<slipway_domain::ResourceRecord>| records.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(listed(store.list_referrers(&subnet_id.key(), 10).await.unwrap()), vec![vm1.clone(), vm2.clone()]);
    assert_eq!(listed(store.list_referrers(&subnet_id.key(), 1).await.unwrap()), vec![vm1.clone()]);
    assert!(store.list_referrers(&vnet_id.key(), 10).await.unwrap().is_empty(), "a child's referrers are its own");
    // A reference from inside the subtree does not hold it.
    let inner = subnet(&vnet_id, "s2");
    seed_referrer(store, &inner, 12, std::slice::from_ref(&subnet_id)).await.expect("inner");
    assert_eq!(referrers(store, &vnet_id).await, vec![vm1.clone(), vm2.clone()]);

    // The target becoming ready wakes its referrers (and only them).
    apply(store, ChangeRequest::new(subnet_id.key(), at(7 * SECOND)), |s| {
        s.wake_referrers = true;
        Ok(())
    })
    .await
    .expect("wake");
    for (id, woken) in [(&vm1, true), (&vm2, true), (&inner, true), (&group, false)] {
        let r = resource(store, &id.key()).await;
        assert_eq!(r.schedule.next_due == Some(at(7 * SECOND)) && r.schedule.intent, woken, "{id}");
    }

    // Changed references replace the rows; a removed referrer leaves none behind.
    let references = vec![slipway_domain::reference::Reference { property: "ref0".into(), id: group.clone() }];
    apply(store, ChangeRequest::new(vm2.key(), at(8 * SECOND)), move |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.references = references;
        Ok(())
    })
    .await
    .expect("re-point vm2");
    assert_eq!(referrers(store, &subnet_id).await, vec![inner.clone(), vm1.clone()], "vm2 no longer");
    apply(store, ChangeRequest::new(vm1.key(), at(9 * SECOND)), |s| {
        s.resource = None;
        Ok(())
    })
    .await
    .expect("remove vm1");
    assert_eq!(referrers(store, &group).await, vec![vm2.clone()]);
    assert_eq!(referrers(store, &subnet_id).await, vec![inner.clone()]);
}

pub async fn case_a_reference_cycle_is_never_closed_from_both_ends(h: &Harness) {
    check_a_reference_cycle_is_never_closed_from_both_ends(&h.shared(), &h.shared()).await;
}

/// `a → b → c` and `c → d → a` each close the cycle `a → b → c → d → a` with the other. Two
/// writers each add one edge: first with both walks done before either change (the walks
/// saw no cycle; the second change must find the first's edge under its locks), then at the
/// same time through `one` and `other`. Never do both edges stand.
pub async fn check_a_reference_cycle_is_never_closed_from_both_ends(one: &Arc<dyn Store>, other: &Arc<dyn Store>) {
    const ROUNDS: u64 = 20;
    for round in 0..=ROUNDS {
        let node = |n: &str| vnet("Sub-Cycle", "rg", &format!("{n}{round}"));
        let (a, b, c, d) = (node("a"), node("b"), node("c"), node("d"));
        for (i, id) in [&a, &c].into_iter().enumerate() {
            seed_due(&**one, id, 7000 + 10 * round + i as u64, None).await;
        }
        seed_referrer(&**one, &b, 7002 + 10 * round, std::slice::from_ref(&c)).await.expect("b → c");
        seed_referrer(&**one, &d, 7003 + 10 * round, std::slice::from_ref(&a)).await.expect("d → a");
        let (first, second) = if round == 0 {
            // Both walks, then both changes: the interleaving a walk outside the transaction misses.
            let walk_a =
                crate::reference_walk(&**one, &a, &references_to(std::slice::from_ref(&b))).await.expect("walk a");
            let walk_c =
                crate::reference_walk(&**other, &c, &references_to(std::slice::from_ref(&d))).await.expect("walk c");
            let first = write_referrer(&**one, &a, 7004, std::slice::from_ref(&b), walk_a).await;
            (first, write_referrer(&**other, &c, 7005, std::slice::from_ref(&d), walk_c).await)
        } else {
            let (s1, s2) = (Arc::clone(one), Arc::clone(other));
            let (a1, b1, c2, d2) = (a.clone(), b.clone(), c.clone(), d.clone());
            let x = tokio::spawn(async move { seed_referrer(&*s1, &a1, 7004 + 10 * round, &[b1]).await });
            let y = tokio::spawn(async move { seed_referrer(&*s2, &c2, 7005 + 10 * round, &[d2]).await });
            (x.await.expect("task"), y.await.expect("task"))
        };
        let refused = |r: &Result<Snapshot, StoreError>| {
            matches!(r, Err(StoreError::Rejected(Rejection::Invalid(_) | Rejection::Conflict { .. })))
        };
        let settled = |r: &Result<Snapshot, StoreError>| r.is_ok() || refused(r);
        let one_refused = refused(&first) || refused(&second);
        assert!(
            settled(&first) && settled(&second) && one_refused,
            "round {round}: both edges of a cycle were written, or an unexpected answer: {first:?} / {second:?}"
        );
    }
}

pub async fn case_a_reference_and_its_targets_delete_never_both_win(h: &Harness) {
    check_a_reference_and_its_targets_delete_never_both_win(&h.shared(), &h.shared()).await;
}

/// A reference to a resource written through `referrers` while `deleters` deletes it: one
/// of them loses, cleanly (the delete sees the reference and is refused in use, or the
/// reference sees the target deleting and is refused) — never a reference to a resource on
/// its way out.
pub async fn check_a_reference_and_its_targets_delete_never_both_win(
    referrers: &Arc<dyn Store>,
    deleters: &Arc<dyn Store>,
) {
    const ROUNDS: u64 = 30;
    let mut both = Vec::new();
    for round in 0..ROUNDS {
        let target = vnet("Sub-RefRace", "rg", &format!("t{round}"));
        seed_due(&**deleters, &target, 5000 + 3 * round, None).await;
        let referrer = vnet("Sub-RefRace", "rg", &format!("r{round}"));
        let (store, r, t) = (Arc::clone(referrers), referrer.clone(), target.clone());
        let reference = tokio::spawn(async move { seed_referrer(&*store, &r, 5001 + 3 * round, &[t]).await });
        let (store, t) = (Arc::clone(deleters), target.clone());
        let delete = tokio::spawn(async move {
            let c = ctx(5002 + 3 * round, at(SECOND));
            apply(&*store, ChangeRequest::new(t.key(), at(SECOND)).with_referrers(true), move |s| {
                slipway_domain::reference::check_not_in_use(s)?;
                admission::admit_delete(s, &c).map(|_| ())
            })
            .await
        });
        let (referenced, deleted) = (reference.await.expect("task"), delete.await.expect("task"));
        match (&referenced, &deleted) {
            (Ok(_), Ok(_)) => both.push(target.to_string()),
            (Ok(_), Err(StoreError::Rejected(Rejection::InUse { .. }))) => {}
            (Err(StoreError::Rejected(Rejection::Conflict { .. })), Ok(_)) => {}
            other => panic!("round {round}: unexpected {other:?}"),
        }
    }
    assert!(
        both.is_empty(),
        "{} targets were referenced while being deleted, e.g. {:?}",
        both.len(),
        &both[..both.len().min(3)]
    );
}
