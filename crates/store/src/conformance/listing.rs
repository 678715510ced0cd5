//! Listing, liveness, and rows other code corrupted.

use super::*;

/// Resources of several groups, types and subscriptions; returns the keys of the
/// `Sub-List` virtual networks of group `RG-A` and `RG-B`, each sorted.
async fn seed_listing(store: &dyn Store) -> (Vec<ResourceKey>, Vec<ResourceKey>) {
    let mut group_a = Vec::new();
    let mut group_b = Vec::new();
    for (n, name) in ["v3", "V1", "v4", "v2"].into_iter().enumerate() {
        let id = vnet("Sub-List", "RG-A", name);
        put(store, &id, spec(1), ctx(1 + n as u64, T0)).await;
        group_a.push(id.key());
    }
    for (n, name) in ["w2", "w1"].into_iter().enumerate() {
        let id = vnet("Sub-List", "rg-b", name);
        put(store, &id, spec(1), ctx(10 + n as u64, T0)).await;
        group_b.push(id.key());
    }
    let subnet = ArmId::new("Sub-List", "RG-A", "Slipway.Example", "subnets", "s1").expect("valid id");
    put(store, &subnet, spec(1), ctx(20, T0)).await;
    put(store, &vnet("Sub-Other", "RG-A", "v1"), spec(1), ctx(21, T0)).await;
    group_a.sort();
    group_b.sort();
    (group_a, group_b)
}

async fn list(store: &dyn Store, group: Option<&str>, after: Option<ResourceKey>, limit: usize) -> crate::Page {
    store
        .list_resources(&ListQuery {
            subscription: "sub-list".into(),
            resource_group: group.map(str::to_string),
            type_key: Some(vnet_type()),
            under: None,
            after,
            limit,
        })
        .await
        .expect("list")
}

pub async fn case_list_by_resource_group(store: &dyn Store) {
    let (group_a, _) = seed_listing(store).await;

    let first = list(store, Some("rg-a"), None, 3).await;
    assert_eq!(keys(&first.items), group_a[..3].to_vec());
    assert_eq!(first.next, Some(group_a[2].clone()));
    let second = list(store, Some("rg-a"), first.next, 3).await;
    assert_eq!(keys(&second.items), group_a[3..].to_vec());
    assert_eq!(second.next, None);

    // A page that ends exactly at the last item says so.
    let first = list(store, Some("rg-a"), None, 2).await;
    assert_eq!(keys(&first.items), group_a[..2].to_vec());
    let second = list(store, Some("rg-a"), first.next.clone(), 2).await;
    assert_eq!(keys(&second.items), group_a[2..].to_vec());
    assert_eq!(second.next, None);

    let whole = list(store, Some("rg-a"), None, 100).await;
    assert_eq!(keys(&whole.items), group_a);
    assert_eq!(whole.next, None);
    for rec in &whole.items {
        assert_eq!(resource(store, &rec.key()).await, *rec);
        assert_eq!(rec.id.resource_group, "RG-A", "listed in the casing it was created with");
    }
    assert!(list(store, Some("rg-none"), None, 10).await.items.is_empty());
}

pub async fn case_list_by_subscription(store: &dyn Store) {
    let (group_a, group_b) = seed_listing(store).await;
    let all: Vec<ResourceKey> = group_a.into_iter().chain(group_b).collect();

    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = list(store, None, after, 4).await;
        pages += 1;
        seen.extend(keys(&page.items));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, all, "every virtual network of the subscription, in key order, once");
    assert_eq!(pages, 2);
    let page = list(store, None, Some(all[4].clone()), 4).await;
    assert_eq!(keys(&page.items), all[5..].to_vec());
}

/// Every page of `query`, followed to the end.
async fn every_page(store: &dyn Store, mut query: ListQuery) -> Vec<ResourceKey> {
    let mut seen = Vec::new();
    loop {
        let page = store.list_resources(&query).await.expect("list");
        assert!(page.items.len() <= query.limit);
        seen.extend(keys(&page.items));
        match page.next {
            Some(next) => query.after = Some(next),
            None => return seen,
        }
    }
}

pub async fn case_list_every_type(store: &dyn Store) {
    let (group_a, group_b) = seed_listing(store).await;
    let subnet = ArmId::new("Sub-List", "RG-A", "Slipway.Example", "subnets", "s1").expect("valid id");
    // Neighbours whose subscription or group name extends the listed one's stay out.
    put(store, &vnet("Sub-List2", "RG-A", "v1"), spec(1), ctx(30, T0)).await;
    let neighbour_group = vnet("Sub-List", "RG-A2", "v1");
    put(store, &neighbour_group, spec(1), ctx(31, T0)).await;
    let untyped = |group: Option<&str>| ListQuery {
        subscription: "sub-list".into(),
        resource_group: group.map(str::to_string),
        type_key: None,
        under: None,
        after: None,
        limit: 2,
    };

    let mut in_a: Vec<ResourceKey> = group_a.iter().cloned().chain([subnet.key()]).collect();
    in_a.sort();
    assert_eq!(every_page(store, untyped(Some("rg-a"))).await, in_a, "both types of the group, in key order");
    let mut whole: Vec<ResourceKey> = in_a.into_iter().chain(group_b).chain([neighbour_group.key()]).collect();
    whole.sort();
    assert_eq!(every_page(store, untyped(None)).await, whole, "every group and type of the subscription");
    assert!(every_page(store, untyped(Some("rg-none"))).await.is_empty());
}

/// `resource_groups` reads each group that holds a resource once, in key order, in its first
/// resource's casing — also groups whose names extend one another's.
pub async fn case_resource_groups_are_the_groups_that_hold_resources(store: &dyn Store) {
    seed_listing(store).await;
    put(store, &vnet("Sub-List", "RG-A2", "v1"), spec(1), ctx(40, T0)).await;
    put(store, &vnet("Sub-List", "Rg", "v1"), spec(1), ctx(41, T0)).await;
    put(store, &vnet("Sub-List2", "rg-c", "v1"), spec(1), ctx(42, T0)).await;
    let sub: SubscriptionId = "sub-list".into();
    // `-` sorts before `/` and `/` before `2`: `rg-a/…` < `rg-a2/…` < `rg-b/…` < `rg/…`.
    let expected = ["RG-A", "RG-A2", "rg-b", "Rg"];
    for limit in [1, 2, 3, 4, 10] {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = crate::resource_groups(store, &sub, after.as_deref(), limit).await.expect("groups");
            assert!(page.items.len() <= limit);
            seen.extend(page.items);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, expected, "pages of {limit}");
    }
    let empty = crate::resource_groups(store, &"sub-none".into(), None, 10).await.expect("groups");
    assert_eq!(empty, crate::GroupPage { items: Vec::new(), found: Vec::new(), next: None });
}

/// A subscription's operations come newest (highest id) first, in pages, of one status when
/// asked, and without those expired — as `get_operation` would not find them either.
pub async fn case_list_operations_newest_first(h: &Harness) {
    let store: &dyn Store = &**h;
    let r = |n: u64| vnet("Sub-Ops", "rg", &format!("r{n}"));
    for n in 1..=5 {
        put(store, &r(n), spec(1), ctx(n, T0)).await;
    }
    put(store, &vnet("Sub-Other", "rg", "r9"), spec(1), ctx(9, T0)).await;
    set_status(store, &r(2).key(), &op_id(2), ProvisioningState::Succeeded, None, T0).await;
    let failure = CloudError::new(codes::PROVISIONING_FAILED, "the playbook failed");
    set_status(store, &r(4).key(), &op_id(4), ProvisioningState::Failed, Some(failure), T0).await;
    let accepted = operation(store, "sub-ops", &op_id(1), T0).await.status;

    let list = |status: Option<ProvisioningState>, after: Option<OperationId>, now: Timestamp| {
        let query = OperationQuery { subscription: "Sub-Ops".into(), status, after, limit: 2, now };
        async move { store.list_operations(&query).await.expect("list operations") }
    };
    let ids = |page: &OperationPage| page.items.iter().map(|op| op.id.clone()).collect::<Vec<_>>();
    let first = list(None, None, T0).await;
    assert_eq!((ids(&first), first.next.clone()), (vec![op_id(5), op_id(4)], Some(op_id(4))));
    let second = list(None, first.next, T0).await;
    assert_eq!((ids(&second), second.next.clone()), (vec![op_id(3), op_id(2)], Some(op_id(2))));
    let last = list(None, second.next, T0).await;
    assert_eq!((ids(&last), last.next), (vec![op_id(1)], None));
    assert_eq!(last.items[0], operation(store, "sub-ops", &op_id(1), T0).await, "the operation as stored");

    let failed = list(Some(ProvisioningState::Failed), None, T0).await;
    assert_eq!((ids(&failed), failed.next), (vec![op_id(4)], None));
    let waiting = list(Some(accepted), Some(op_id(5)), T0).await;
    assert_eq!(ids(&waiting), vec![op_id(3), op_id(1)], "after a cursor, of one status");

    let expired = T0.add(h.operation_ttl);
    let mut left = Vec::new();
    let mut after = None;
    loop {
        let page = list(None, after, expired).await;
        left.extend(ids(&page));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(left, vec![op_id(5), op_id(3), op_id(1)], "the ended operations expired; running ones never do");
}

/// After a test corrupted them with SQL of its engine (the body of resource `id` unreadable,
/// operation 2 of subscription `sub`, which belongs to `other`, not an operation): every read
/// and write that meets them fails as `Internal`, never with a panic or a wrong answer.
pub async fn check_corrupt_rows_are_internal(store: &dyn Store, id: &ArmId, other: &ArmId) {
    let internal = |r: &StoreError| matches!(r, StoreError::Internal(_));
    assert!(internal(&store.get_resource(&id.key()).await.expect_err("corrupt")));
    let noop = || -> ChangeFn { Box::new(|_| Ok(())) };
    assert!(internal(&store.change(ChangeRequest::new(id.key(), at(1)), noop()).await.expect_err("corrupt")));
    assert!(internal(&store.change(ChangeRequest::new(other.key(), at(1)), noop()).await.expect_err("corrupt op")));
    assert!(internal(&store.get_operation(&"sub".into(), &op_id(2), T0).await.expect_err("corrupt op")));
    let query = ListQuery {
        subscription: "sub".into(),
        resource_group: None,
        type_key: Some(id.type_key()),
        under: None,
        after: None,
        limit: 10,
    };
    assert!(internal(&store.list_resources(&query).await.expect_err("corrupt")));
    let claim = ClaimRequest {
        owner: "a".into(),
        now: at(1),
        lease_for: Duration::from_secs(30),
        intent_limit: 10,
        followup_limit: 10,
        drift_limit: 0,
    };
    assert!(internal(&store.claim(&claim).await.expect_err("corrupt")));
}

pub async fn case_ping(store: &dyn Store) {
    assert_eq!(store.ping().await, Ok(()));
}
