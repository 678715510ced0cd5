//! The event feed: a change's events written in its transaction, numbered densely per
//! subscription, read by scope, pruned, and a position that cannot be continued from said
//! to be gone.

use super::*;
use crate::{EventQuery, EventRead, EventScope};
use slipway_domain::event::{Event, EventKind};

const DAY: i64 = 24 * 60 * 60 * 1000;

fn query(subscription: &str, scope: EventScope, after: u64) -> EventQuery {
    EventQuery { subscription: subscription.into(), scope, after, limit: 100 }
}

/// The page read after `after` (panicking when it is gone), and the feed's newest position.
async fn page(store: &dyn Store, q: EventQuery) -> (Vec<(u64, Event)>, u64) {
    match store.events(&q).await.expect("events") {
        EventRead::Page { items, last } => (items, last),
        gone => panic!("{q:?} is gone: {gone:?}"),
    }
}

fn kinds(items: &[(u64, Event)]) -> Vec<(u64, EventKind)> {
    items.iter().map(|(seq, e)| (*seq, e.kind)).collect()
}

pub async fn case_events_are_written_with_their_change(store: &dyn Store) {
    let id = vnet("sub-events", "rg", "Net1");
    put(store, &id, spec(1), ctx(1, T0)).await;
    let (items, last) = page(store, query("sub-events", EventScope::Subscription, 0)).await;
    assert_eq!(kinds(&items), [(1, EventKind::ResourceCreated)]);
    assert_eq!(last, 1);
    let created = &items[0].1;
    assert_eq!((created.resource_id.as_str(), created.time), (id.to_string().as_str(), T0), "the id's own casing");
    assert_eq!((created.state, created.generation), (Some(ProvisioningState::Accepted), Some(1)));
    let op = created.operation.as_ref().expect("the create operation, on the resource's event");
    assert_eq!((&op.id, op.request, op.status), (&op_id(1), OperationRequest::Create, ProvisioningState::Accepted));

    // The create ends: the resource's state and the operation's status, one change, one event.
    set_status(store, &id.key(), &op_id(1), ProvisioningState::Succeeded, None, at(SECOND)).await;
    let (items, last) = page(store, query("sub-events", EventScope::Subscription, 1)).await;
    assert_eq!(kinds(&items), [(2, EventKind::ResourceStateChanged)]);
    let ended = &items[0].1;
    assert_eq!(
        (ended.previous_state, ended.state),
        (Some(ProvisioningState::Accepted), Some(ProvisioningState::Succeeded))
    );
    assert_eq!(ended.operation.as_ref().unwrap().previous_status, Some(ProvisioningState::Accepted));
    assert_eq!((last, ended.time), (2, at(SECOND)));

    // A change that is refused, or that changes nothing a client sees, adds none.
    let refused = apply(store, ChangeRequest::new(id.key(), at(2 * SECOND)), |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
        Err(Rejection::NotFound)
    })
    .await;
    assert!(refused.is_err());
    apply(store, ChangeRequest::new(id.key(), at(2 * SECOND)), |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
        Ok(())
    })
    .await
    .expect("engine bookkeeping");
    assert_eq!(page(store, query("sub-events", EventScope::Subscription, 2)).await, (Vec::new(), 2));

    // Another subscription has a feed of its own; a page is as long as asked.
    put(store, &vnet("sub-other", "rg", "n"), spec(1), ctx(2, T0)).await;
    assert_eq!(page(store, query("sub-other", EventScope::Subscription, 0)).await.1, 1);
    let short = EventQuery { limit: 1, ..query("sub-events", EventScope::Subscription, 0) };
    assert_eq!(kinds(&page(store, short).await.0), [(1, EventKind::ResourceCreated)]);

    // Deleting, then deleted: the record's last event.
    delete(store, &id, ctx(3, at(3 * SECOND))).await;
    apply(store, ChangeRequest::new(id.key(), at(4 * SECOND)), |s| {
        s.resource = None;
        Ok(())
    })
    .await
    .expect("removed");
    let (items, _) = page(store, query("sub-events", EventScope::Subscription, 2)).await;
    assert_eq!(kinds(&items), [(3, EventKind::ResourceStateChanged), (4, EventKind::ResourceDeleted)]);
    assert_eq!(items[0].1.operation.as_ref().map(|o| o.request), Some(OperationRequest::Delete));
    assert_eq!((items[1].1.state, items[1].1.previous_state), (None, Some(ProvisioningState::Deleting)));
}

pub async fn case_events_are_read_by_scope(store: &dyn Store) {
    let parent = vnet("sub-scope", "rg1", "a");
    let child = ArmId {
        parent_names: vec!["a".into()],
        type_name: "virtualNetworks/subnets".into(),
        name: "s".into(),
        ..parent.clone()
    };
    let sibling = vnet("sub-scope", "rg1", "a-b");
    let elsewhere = vnet("sub-scope", "RG2", "c");
    for (n, id) in [&parent, &child, &sibling, &elsewhere].into_iter().enumerate() {
        let target = id.clone();
        let c = ctx(n as u64 + 1, T0);
        let mut req = ChangeRequest::new(id.key(), T0);
        if let Some(p) = id.parent() {
            req = req.with_related([p.key()]);
        }
        change_with(store, req, move |s| admission::admit_put(s, &target, KIND, spec(1), &c)).await.expect("put");
    }
    let names = |items: Vec<(u64, Event)>| {
        let mut ids: Vec<String> = items.into_iter().map(|(_, e)| e.resource_id).collect();
        ids.dedup();
        ids
    };
    let under_a = page(store, query("sub-scope", EventScope::Resource(parent.key()), 0)).await.0;
    assert_eq!(names(under_a), [parent.to_string(), child.to_string()], "a and what is nested under it, not a-b");
    let group = page(store, query("sub-scope", EventScope::ResourceGroup("rg2".into()), 0)).await.0;
    assert_eq!(names(group), [elsewhere.to_string()]);
    let (all, last) = page(store, query("sub-scope", EventScope::Subscription, 0)).await;
    assert_eq!((all.len(), last), (4, 4));
    // A scope with nothing new still tells the newest position.
    assert_eq!(page(store, query("sub-scope", EventScope::ResourceGroup("rg2".into()), 4)).await, (Vec::new(), 4));
}

pub async fn case_pruned_events_leave_a_gone_position(store: &dyn Store) {
    let id = vnet("sub-prune", "rg", "n");
    put(store, &id, spec(1), ctx(1, T0)).await;
    assert_eq!(store.sweep_events(at(DAY)).await.expect("sweep"), 0, "kept for the retention");
    assert_eq!(store.sweep_events(at(8 * DAY)).await.expect("sweep"), 1, "gone after it (7 days)");
    let read = |after| async move {
        store.events(&query("sub-prune", EventScope::Subscription, after)).await.expect("events")
    };
    assert_eq!(read(0).await, EventRead::Gone { oldest: 2, last: 1 }, "events after 0 were pruned");
    assert_eq!(read(1).await, EventRead::Page { items: Vec::new(), last: 1 }, "nothing after 1 was");
    // Numbering goes on where it was; a position past the newest is gone too.
    set_status(store, &id.key(), &op_id(1), ProvisioningState::Succeeded, None, at(9 * DAY)).await;
    let (items, last) = page(store, query("sub-prune", EventScope::Subscription, 1)).await;
    assert_eq!((kinds(&items), last), (vec![(2, EventKind::ResourceStateChanged)], 2));
    assert_eq!(read(0).await, EventRead::Gone { oldest: 2, last: 2 });
    assert_eq!(read(9).await, EventRead::Gone { oldest: 2, last: 2 });
    assert_eq!(
        store.events(&query("sub-never", EventScope::Subscription, 0)).await.expect("events"),
        EventRead::Page { items: Vec::new(), last: 0 },
        "a subscription with no events yet"
    );
}

pub async fn case_concurrent_changes_number_their_events_densely(h: &Harness) {
    let store = h.shared();
    check_concurrent_changes_number_their_events_densely(&store, &store).await;
}

/// Concurrent changes of many resources, through `a` and `b` in turn (two replicas, or one
/// store twice): every position given once, none skipped, and each resource's events in the
/// order of its changes.
pub async fn check_concurrent_changes_number_their_events_densely(a: &Arc<dyn Store>, b: &Arc<dyn Store>) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40_u64 {
        let store = Arc::clone(if i % 2 == 0 { a } else { b });
        tasks.spawn(async move {
            let id = vnet("sub-dense", "rg", &format!("n{i}"));
            put(&*store, &id, spec(1), ctx(i + 1, T0)).await;
            set_status(&*store, &id.key(), &op_id(i + 1), ProvisioningState::Succeeded, None, at(SECOND)).await;
        });
    }
    tasks.join_all().await;
    let (items, last) = page(&**a, EventQuery { limit: 1000, ..query("sub-dense", EventScope::Subscription, 0) }).await;
    let positions: Vec<u64> = items.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(positions, (1..=80).collect::<Vec<u64>>(), "dense and in order");
    assert_eq!(last, 80);
    for i in 0..40 {
        let name = format!("/n{i}");
        let own: Vec<EventKind> =
            items.iter().filter(|(_, e)| e.resource_id.ends_with(&name)).map(|(_, e)| e.kind).collect();
        assert_eq!(own, [EventKind::ResourceCreated, EventKind::ResourceStateChanged], "n{i}");
    }
}
