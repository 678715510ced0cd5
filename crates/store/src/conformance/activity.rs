//! The activity log (`crate::activity`): a change's entry is written in the change's own
//! transaction — present exactly when the change committed, settled by what it did — as is a
//! registry entry write's; refusals are recorded on their own; reads filter and page newest
//! first; retention prunes.

use slipway_domain::activity::{ActivityCaller, ActivityEntry, ActivityFilter, ActivityStatus, RequestInfo};

use super::*;
use crate::{ActivityQuery, ActivityScope, EntryKind, Expect, PutEntry};

fn entry(subscription: Option<&str>, target: &str, method: &str, at_ms: i64) -> ActivityEntry {
    ActivityEntry {
        time: at(at_ms),
        subscription: subscription.map(SubscriptionId::new),
        target: target.into(),
        operation_name: "Slipway.Example/virtualNetworks/write".into(),
        caller: ActivityCaller { name: "Alice@Example.com".into(), issuer: "tenant-1".into(), kind: "User".into() },
        request: RequestInfo {
            method: method.into(),
            uri: target.into(),
            user_agent: "slipway-cli/1".into(),
            client_address: "127.0.0.1".into(),
            correlation_id: format!("CORR-{at_ms}"),
            request_id: format!("req-{at_ms}"),
            client_request_id: String::new(),
        },
        status: 0,
        error: None,
        operation_id: None,
        changes: Vec::new(),
        changes_truncated: false,
    }
}

fn query(subscription: Option<&str>, filter: ActivityFilter) -> ActivityQuery {
    let scope = match subscription {
        Some(s) => ActivityScope::Subscription(SubscriptionId::new(s)),
        None => ActivityScope::Platform,
    };
    ActivityQuery { scope, filter, before: None, limit: 100 }
}

async fn read(store: &dyn Store, subscription: Option<&str>, filter: ActivityFilter) -> Vec<ActivityEntry> {
    store.activity(&query(subscription, filter)).await.expect("read").items.into_iter().map(|(_, e)| e).collect()
}

/// A change's entry exists exactly when the change committed, settled in its transaction:
/// the status answered, the operation started (or already serving the request), the spec's
/// changed paths. A refused change leaves none; one that altered nothing still records who
/// asked.
pub async fn case_a_change_writes_its_activity_exactly_when_it_commits(store: &dyn Store) {
    let id = vnet("sub-a1", "rg", "v1");
    let draft = entry(Some("sub-a1"), &id.to_string(), "PUT", 0);
    let (target, c) = (id.clone(), ctx(1, T0));
    let req = ChangeRequest::new(id.key(), T0).with_activity(draft.clone());
    change_with(store, req, move |s| admission::admit_put(s, &target, KIND, spec(1), &c)).await.expect("created");
    let refused = ChangeRequest::new(id.key(), T0).with_activity(entry(Some("sub-a1"), &id.to_string(), "PUT", 1));
    let err = store.change(refused, Box::new(|_| Err(Rejection::NotFound))).await.expect_err("refused");
    assert!(matches!(err, StoreError::Rejected(_)));
    noop(store, ChangeRequest::new(id.key(), T0).with_activity(entry(Some("sub-a1"), &id.to_string(), "PUT", 2))).await;

    let log = read(store, Some("sub-a1"), ActivityFilter::default()).await;
    let times: Vec<i64> = log.iter().map(|e| e.time.as_millis() - T0.as_millis()).collect();
    assert_eq!(times, [2, 0], "newest first; the refused change left no entry");
    let created = &log[1];
    assert_eq!((created.status, created.outcome()), (201, ActivityStatus::Accepted));
    assert_eq!(created.operation_id, Some(op_id(1)));
    assert!(created.changes.iter().any(|c| c.path == "properties.addressSpace"), "{:?}", created.changes);
    assert_eq!(
        (created.caller.name.as_str(), created.request.user_agent.as_str()),
        ("Alice@Example.com", "slipway-cli/1")
    );
    // The same PUT again while the create runs is answered with that create: 201, nothing changed.
    let again = &log[0];
    assert_eq!((again.status, again.outcome(), again.changes.len()), (201, ActivityStatus::Accepted, 0));
    assert_eq!(again.operation_id, Some(op_id(1)));
}

/// A registry entry's write records its entry in the same transaction: `201` when it created
/// the entry, `200` when it replaced or removed one, `204` for a delete of nothing; a write
/// whose expectation fails records nothing.
pub async fn case_an_entry_write_records_its_activity(store: &dyn Store) {
    let lock = "/subscriptions/sub-a2/providers/Microsoft.Authorization/locks/l1";
    let put = |n: i64, expect| PutEntry {
        kind: EntryKind::Lock,
        id: lock.into(),
        partition: "sub-a2".into(),
        body: "{}".into(),
        expect,
        now: at(n),
        activity: Some(Box::new(entry(Some("sub-a2"), lock, "PUT", n))),
    };
    store.put_entry(put(0, Expect::Absent)).await.expect("created");
    store.put_entry(put(1, Expect::Any)).await.expect("replaced");
    let stale = store.put_entry(put(2, Expect::Absent)).await.expect_err("exists");
    assert!(matches!(stale, StoreError::Precondition(_)));
    let gone = |n| Some(entry(Some("sub-a2"), lock, "DELETE", n));
    assert!(store.delete_entry(EntryKind::Lock, lock, Expect::Any, gone(3)).await.expect("deleted"));
    assert!(!store.delete_entry(EntryKind::Lock, lock, Expect::Any, gone(4)).await.expect("nothing"));
    let statuses: Vec<(i64, u16)> = read(store, Some("sub-a2"), ActivityFilter::default())
        .await
        .iter()
        .map(|e| (e.time.as_millis() - T0.as_millis(), e.status))
        .collect();
    assert_eq!(statuses, [(4, 204), (3, 200), (1, 200), (0, 201)]);
}

/// Recorded entries are read by subscription (the platform's apart), filtered by every field
/// the Activity Log filters on, and paged newest first.
pub async fn case_activity_is_filtered_and_paged(store: &dyn Store) {
    let group = "/subscriptions/sub-a3/resourceGroups/RG1";
    let net = format!("{group}/providers/Slipway.Example/virtualNetworks/n1");
    let mut entries = Vec::new();
    for n in 0..6 {
        let target = match n % 3 {
            0 => net.clone(),
            1 => format!("{net}/subnets/s{n}"),
            _ => format!("/subscriptions/sub-a3/resourceGroups/other/providers/Slipway.Example/virtualNetworks/x{n}"),
        };
        let mut e = entry(Some("sub-a3"), &target, "PUT", n * 1_000);
        e.status = if n == 5 { 409 } else { 200 };
        if n == 4 {
            e.caller.name = "bob".into();
        }
        entries.push(e);
    }
    entries.push(entry(None, "/providers/Slipway.Platform/apiTokens/t1", "PUT", 9_000));
    entries.push(entry(Some("sub-other"), &net, "PUT", 9_000));
    store.record_activity(entries).await.expect("recorded");

    let times = |log: Vec<ActivityEntry>| -> Vec<i64> {
        log.iter().map(|e| (e.time.as_millis() - T0.as_millis()) / 1_000).collect()
    };
    let all = ActivityFilter::default();
    assert_eq!(times(read(store, Some("sub-a3"), all.clone()).await), [5, 4, 3, 2, 1, 0]);
    assert_eq!(times(read(store, None, all.clone()).await), [9], "the platform's own entries apart");
    let everything = ActivityQuery { scope: ActivityScope::Everything, ..query(None, all.clone()) };
    let exported = store.activity(&everything).await.expect("export").items;
    assert!(exported.len() >= 8, "every subscription's and the platform's: {}", exported.len());
    let f = |text: &str| ActivityFilter::parse(text).expect("filter");
    let group_filter = f("resourceGroupName eq 'rg1'");
    assert_eq!(times(read(store, Some("sub-a3"), group_filter).await), [4, 3, 1, 0]);
    let resource = f(&format!("resourceUri eq '{}'", net.to_uppercase()));
    assert_eq!(times(read(store, Some("sub-a3"), resource).await), [4, 3, 1, 0], "the resource and what is under it");
    assert_eq!(times(read(store, Some("sub-a3"), f("correlationId eq 'corr-2000'")).await), [2]);
    assert_eq!(times(read(store, Some("sub-a3"), f("caller eq 'ALICE@example.com'")).await), [5, 3, 2, 1, 0]);
    assert_eq!(times(read(store, Some("sub-a3"), f("status eq 'Failed'")).await), [5]);
    let range = ActivityFilter { since: Some(at(1_000)), until: Some(at(3_000)), ..ActivityFilter::default() };
    assert_eq!(times(read(store, Some("sub-a3"), range).await), [3, 2, 1]);

    let mut q = ActivityQuery { limit: 4, ..query(Some("sub-a3"), all) };
    let first = store.activity(&q).await.expect("page 1");
    assert_eq!(first.items.len(), 4);
    q.before = first.next;
    let second = store.activity(&q).await.expect("page 2");
    let rest: Vec<i64> = second.items.iter().map(|(_, e)| (e.time.as_millis() - T0.as_millis()) / 1_000).collect();
    assert_eq!((rest, second.next), (vec![1, 0], None));
}

/// Entries past their retention (90 days by default) are pruned, younger ones kept.
pub async fn case_activity_past_its_retention_is_pruned(store: &dyn Store) {
    let old = entry(Some("sub-a4"), "/subscriptions/sub-a4/resourceGroups/rg", "PUT", 0);
    let young = entry(Some("sub-a4"), "/subscriptions/sub-a4/resourceGroups/rg", "PUT", 2 * 86_400_000);
    store.record_activity(vec![old, young]).await.expect("recorded");
    let ninety_days_later = at(crate::DEFAULT_ACTIVITY_RETENTION.as_millis() as i64 + 1_000);
    assert_eq!(store.sweep_activity(ninety_days_later).await.expect("swept"), 1);
    assert_eq!(read(store, Some("sub-a4"), ActivityFilter::default()).await.len(), 1);
}
