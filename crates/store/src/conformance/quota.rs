//! Quota usage (`crate::usage`): counted in the transaction of every change that alters
//! what a resource consumes, read by the changes that may grow it, and never passed by
//! concurrent creates.

use super::*;
use slipway_domain::quota::{self, Charge, Limits, Measure, Meter, MeterName};

const METER_TYPE: &str = "Slipway.Example/virtualNetworks";

fn meter(name: &str, measure: Measure) -> Meter {
    Meter {
        name: MeterName::parse(name).expect("meter name"),
        type_key: TypeKey::parse(METER_TYPE),
        measure,
        unit: "Count".into(),
    }
}

/// A count of resources and a sum of their `size` property.
fn charge(count_limit: Option<u64>, size_limit: Option<u64>, group_limit: Option<u64>) -> Charge {
    Charge {
        meters: vec![
            (meter("networks", Measure::Count), Limits { subscription: count_limit, group: group_limit }),
            (
                meter("size", Measure::Sum { path: vec!["size".into()] }),
                Limits { subscription: size_limit, group: None },
            ),
        ],
    }
}

fn sized(size: u64) -> Spec {
    Spec { properties: json!({ "size": size }), ..spec(1) }
}

/// Creates or replaces `id` with `spec` as a metered `PUT` does.
async fn metered_put(
    store: &dyn Store,
    id: &ArmId,
    spec: Spec,
    c: RequestContext,
    charge: Charge,
) -> Result<Snapshot, StoreError> {
    let target = id.clone();
    let req = ChangeRequest::new(id.key(), c.now).with_usage(id, charge.meter_names());
    apply(store, req, move |s| {
        admission::admit_put(s, &target, KIND, spec, &c)?;
        quota::charge(s, &charge)
    })
    .await
}

/// What `subscription` consumes of `meter`, summed over its groups.
async fn used(store: &dyn Store, subscription: &str, meter: &str) -> u64 {
    let rows = store.usage(&subscription.into()).await.expect("usage");
    rows.iter().filter(|r| r.meter.as_str() == meter).map(|r| r.value).sum()
}

/// Removes the resource's row as a delete that succeeded does.
async fn remove(store: &dyn Store, id: &ArmId, now: Timestamp) {
    apply(store, ChangeRequest::new(id.key(), now), |s| {
        s.resource = None;
        Ok(())
    })
    .await
    .expect("removed");
}

/// Usage follows every change of what resources consume: a create adds, a resize moves it
/// by the difference, a delete that has not succeeded keeps it, the row's removal releases
/// it; a change reads it as committed, per subscription and per group.
pub async fn case_usage_is_counted_with_every_change(store: &dyn Store) {
    let free = charge(None, None, None);
    let (a, b, other) = (vnet("sub-use", "rg-a", "a"), vnet("sub-use", "rg-b", "b"), vnet("sub-other", "rg-a", "c"));
    metered_put(store, &a, sized(4), ctx(1, T0), free.clone()).await.expect("a");
    metered_put(store, &b, sized(2), ctx(2, T0), free.clone()).await.expect("b");
    metered_put(store, &other, sized(7), ctx(3, T0), free.clone()).await.expect("other");
    assert_eq!((used(store, "sub-use", "networks").await, used(store, "sub-use", "size").await), (2, 6));
    let rows = store.usage(&"sub-use".into()).await.expect("usage");
    let by_group: Vec<(&str, &str, u64)> = rows.iter().map(|r| (r.meter.as_str(), r.group.as_str(), r.value)).collect();
    assert_eq!(
        by_group,
        vec![("networks", "rg-a", 1), ("networks", "rg-b", 1), ("size", "rg-a", 4), ("size", "rg-b", 2)]
    );

    // A change reads the sums in its transaction: the subscription's and its group's.
    let req = ChangeRequest::new(a.key(), at(SECOND)).with_usage(&a, free.meter_names());
    let seen = noop(store, req).await.usage;
    let size = seen.get(&MeterName::parse("size").unwrap()).copied().unwrap_or_default();
    assert_eq!((size.subscription, size.group), (6, 4));

    set_status(store, &a.key(), &op_id(1), ProvisioningState::Succeeded, None, at(SECOND)).await;
    metered_put(store, &a, sized(1), ctx(4, at(2 * SECOND)), free.clone()).await.expect("shrunk");
    set_status(store, &a.key(), &op_id(4), ProvisioningState::Succeeded, None, at(2 * SECOND)).await;
    assert_eq!(used(store, "sub-use", "size").await, 3, "a resize moves usage by its difference");
    delete(store, &a, ctx(5, at(3 * SECOND))).await;
    assert_eq!(used(store, "sub-use", "networks").await, 2, "a delete still running keeps what it consumes");
    remove(store, &a, at(4 * SECOND)).await;
    assert_eq!((used(store, "sub-use", "networks").await, used(store, "sub-use", "size").await), (1, 2));
    assert_eq!(used(store, "sub-other", "size").await, 7, "subscriptions are counted apart");
}

/// A change over a limit is refused and writes nothing; shrinking passes below a lowered
/// limit; growth a change did not read its meter for is refused as the store's error.
pub async fn case_growth_past_a_limit_is_refused(store: &dyn Store) {
    let (a, b) = (vnet("sub-lim", "rg", "a"), vnet("sub-lim", "rg", "b"));
    metered_put(store, &a, sized(6), ctx(1, T0), charge(Some(5), Some(8), None)).await.expect("a");
    let refused = metered_put(store, &b, sized(3), ctx(2, T0), charge(Some(5), Some(8), None)).await;
    match refused {
        Err(StoreError::Rejected(Rejection::QuotaExceeded(q))) => {
            assert_eq!((q.meter.as_str(), q.limit, q.current, q.requested), ("size", 8, 6, 3));
        }
        other => panic!("expected QuotaExceeded, got {other:?}"),
    }
    assert_eq!(store.get_resource(&b.key()).await, Ok(None), "a refused create writes nothing");
    assert_eq!(used(store, "sub-lim", "size").await, 6);

    // The limit lowered below usage: growth is refused, shrinking is not.
    set_status(store, &a.key(), &op_id(1), ProvisioningState::Succeeded, None, at(SECOND)).await;
    let lowered = charge(Some(5), Some(2), None);
    assert!(metered_put(store, &a, sized(7), ctx(3, at(SECOND)), lowered.clone()).await.is_err());
    metered_put(store, &a, sized(5), ctx(4, at(2 * SECOND)), lowered).await.expect("shrinking passes");
    assert_eq!(used(store, "sub-lim", "size").await, 5);

    // A group's own limit.
    let per_group = charge(None, None, Some(1));
    let refused = metered_put(store, &b, sized(1), ctx(5, at(3 * SECOND)), per_group.clone()).await;
    assert!(
        matches!(refused, Err(StoreError::Rejected(Rejection::QuotaExceeded(ref q))) if q.scope == quota::LimitScope::Group),
        "{refused:?}"
    );
    let elsewhere = vnet("sub-lim", "rg-2", "b");
    metered_put(store, &elsewhere, sized(1), ctx(6, at(3 * SECOND)), per_group).await.expect("another group has room");

    // Growth without reading the meter is the caller's bug, never silently counted.
    let (target, c, unread) = (vnet("sub-lim", "rg", "c"), ctx(7, at(4 * SECOND)), charge(None, None, None));
    let id = target.clone();
    let blind = apply(store, ChangeRequest::new(id.key(), at(4 * SECOND)), move |s| {
        admission::admit_put(s, &target, KIND, sized(1), &c)?;
        quota::charge(s, &unread)
    })
    .await;
    assert!(matches!(blind, Err(StoreError::Internal(_))), "{blind:?}");
    assert_eq!(store.get_resource(&id.key()).await, Ok(None));
}

/// Concurrent creates against a count limit and a sum limit: exactly as many as fit are
/// accepted, whatever the order the store runs them in.
pub async fn case_concurrent_creates_never_pass_a_limit(h: &Harness) {
    let stores = [h.shared(), h.shared()];
    check_concurrent_creates_never_pass_a_limit(&stores, "sub-race").await;
}

/// The case above with the creates spread over `stores` (replicas, on PostgreSQL), in
/// `subscription`: 40 creates against a count limit of 10, then 40 of sizes 1 to 4 against
/// a sum limit of 25. Returns how many of each were accepted.
pub async fn check_concurrent_creates_never_pass_a_limit(
    stores: &[Arc<dyn Store>],
    subscription: &str,
) -> (usize, u64) {
    const CREATES: u64 = 40;
    let count_limit = charge(Some(10), None, None);
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..CREATES {
        let store = Arc::clone(&stores[n as usize % stores.len()]);
        let (id, limits) = (vnet(subscription, "rg", &format!("count{n}")), count_limit.clone());
        tasks.spawn(async move { metered_put(&*store, &id, sized(0), ctx(100 + n, T0), limits).await });
    }
    let outcomes = tasks.join_all().await;
    let accepted = outcomes.iter().filter(|o| o.is_ok()).count();
    for refused in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert!(matches!(refused, StoreError::Rejected(Rejection::QuotaExceeded(_))), "{refused:?}");
    }
    assert_eq!(accepted, 10, "a count limit of 10 accepts exactly 10 of {CREATES} concurrent creates");
    assert_eq!(used(&*stores[0], subscription, "networks").await, 10);

    let size_limit = charge(None, Some(25), None);
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..CREATES {
        let store = Arc::clone(&stores[n as usize % stores.len()]);
        let (id, limits) = (vnet(subscription, "rg-sizes", &format!("size{n}")), size_limit.clone());
        let size = 1 + n % 4;
        tasks
            .spawn(async move { metered_put(&*store, &id, sized(size), ctx(200 + n, T0), limits).await.map(|_| size) });
    }
    let sizes: Vec<u64> = tasks.join_all().await.into_iter().filter_map(Result::ok).collect();
    let total: u64 = sizes.iter().sum();
    assert!(total <= 25, "accepted sizes {sizes:?} pass the limit of 25");
    assert!(total > 25 - 4, "a size that fit was refused: {sizes:?}");
    assert_eq!(used(&*stores[0], subscription, "size").await, total);
    (accepted, total)
}
