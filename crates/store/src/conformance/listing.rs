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
            type_key: vnet_type(),
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
        type_key: id.type_key(),
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
    };
    assert!(internal(&store.claim(&claim).await.expect_err("corrupt")));
}

pub async fn case_ping(store: &dyn Store) {
    assert_eq!(store.ping().await, Ok(()));
}
