//! Registry entries: reads, the version rule, expectations, concurrent writers.

use super::*;
use crate::entries::PutEntry;
use crate::entries::{Entry, EntryKind, Expect};

const TOKEN: EntryKind = EntryKind::ApiToken;

async fn put_entry(store: &dyn Store, kind: EntryKind, id: &str, partition: &str, body: &str, expect: Expect) -> Entry {
    store
        .put_entry(PutEntry {
            kind,
            id: id.to_string(),
            partition: partition.to_string(),
            body: body.to_string(),
            expect,
            now: T0,
            activity: None,
        })
        .await
        .unwrap_or_else(|e| panic!("put {kind} {id}: {e}"))
}

async fn get_entry(store: &dyn Store, kind: EntryKind, id: &str) -> Option<Entry> {
    store.get_entry(kind, id).await.expect("get_entry")
}

async fn ids(store: &dyn Store, kind: EntryKind, partition: Option<&str>) -> Vec<String> {
    let listed = store.list_entries(kind, partition).await.expect("list_entries");
    listed.into_iter().map(|e| e.id).collect()
}

fn is_precondition<T: std::fmt::Debug>(result: &Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Precondition(_)))
}

/// Inserted entries read back as written, at version 1; ids are exact (no case folding) and
/// listed in byte order, of one kind only, of one partition when asked.
pub async fn case_entries_insert_get_list(store: &dyn Store) {
    let body = r#"{"scopes":["read"],"note":"ünïcode"}"#;
    let written = store
        .put_entry(PutEntry {
            kind: TOKEN,
            id: "tok-b".into(),
            partition: "sub-1".into(),
            body: body.to_string(),
            expect: Expect::Absent,
            now: at(5),
            activity: None,
        })
        .await
        .expect("put");
    let expected = Entry {
        kind: TOKEN,
        id: "tok-b".into(),
        partition: "sub-1".into(),
        body: body.into(),
        version: 1,
        updated_at: at(5),
    };
    assert_eq!(written, expected);
    assert_eq!(get_entry(store, TOKEN, "tok-b").await, Some(expected.clone()), "reads back as written");
    put_entry(store, TOKEN, "Tok-C", "sub-2", "{}", Expect::Any).await;
    put_entry(store, TOKEN, "tok-a", "sub-1", "{}", Expect::Absent).await;
    put_entry(store, TOKEN, "platform", "", "{}", Expect::Absent).await;
    // Another kind with the same id is another entry.
    put_entry(store, EntryKind::RoleAssignment, "tok-b", "sub-1", r#"{"role":"reader"}"#, Expect::Absent).await;
    put_entry(store, EntryKind::RoleAssignment, "ra-1", "sub-2", "{}", Expect::Absent).await;

    assert_eq!(get_entry(store, TOKEN, "tok-b").await, Some(expected), "untouched by the other kind's entry");
    assert_eq!(get_entry(store, TOKEN, "TOK-B").await, None, "ids are compared exactly");
    assert_eq!(get_entry(store, TOKEN, "tok-c").await, None, "ids are compared exactly");
    assert_eq!(get_entry(store, EntryKind::Subscription, "tok-b").await, None);
    let role = get_entry(store, EntryKind::RoleAssignment, "tok-b").await.expect("role assignment");
    assert_eq!((role.kind, role.body.as_str(), role.version), (EntryKind::RoleAssignment, r#"{"role":"reader"}"#, 1));

    assert_eq!(ids(store, TOKEN, None).await, ["Tok-C", "platform", "tok-a", "tok-b"], "byte order");
    assert_eq!(ids(store, TOKEN, Some("sub-1")).await, ["tok-a", "tok-b"]);
    assert_eq!(ids(store, TOKEN, Some("sub-2")).await, ["Tok-C"]);
    assert_eq!(ids(store, TOKEN, Some("")).await, ["platform"], "platform-wide entries are a partition too");
    assert_eq!(ids(store, TOKEN, Some("SUB-1")).await, Vec::<String>::new(), "partitions are compared exactly");
    assert_eq!(ids(store, EntryKind::RoleAssignment, None).await, ["ra-1", "tok-b"]);
    assert_eq!(ids(store, EntryKind::RoleAssignment, Some("sub-2")).await, ["ra-1"]);
    assert_eq!(ids(store, EntryKind::Subscription, None).await, Vec::<String>::new());
    let listed = store.list_entries(TOKEN, Some("sub-1")).await.expect("list");
    assert_eq!(listed[1], get_entry(store, TOKEN, "tok-b").await.expect("tok-b"), "lists whole entries");
}

/// A replace bumps the version by one and takes the new body and time, whether it expected
/// the version it replaced or anything. Every write that wrote is a commit.
pub async fn case_entries_replace_bumps_version(store: &dyn Store) {
    let before = store.stats();
    put_entry(store, EntryKind::Subscription, "sub-1", "sub-1", r#"{"state":"Registered"}"#, Expect::Absent).await;
    let second = store
        .put_entry(PutEntry {
            kind: EntryKind::Subscription,
            id: "sub-1".into(),
            partition: "sub-1".into(),
            body: r#"{"state":"Warned"}"#.into(),
            expect: Expect::Version(1),
            now: at(10),
            activity: None,
        })
        .await
        .expect("replace at version 1");
    assert_eq!((second.version, second.body.as_str(), second.updated_at), (2, r#"{"state":"Warned"}"#, at(10)));
    let third = store
        .put_entry(PutEntry {
            kind: EntryKind::Subscription,
            id: "sub-1".into(),
            partition: "sub-1".into(),
            body: r#"{"state":"Warned"}"#.into(),
            expect: Expect::Any,
            now: at(20),
            activity: None,
        })
        .await
        .expect("replace whatever is there");
    assert_eq!((third.version, third.updated_at), (3, at(20)), "an identical body is still a new version");
    assert_eq!(get_entry(store, EntryKind::Subscription, "sub-1").await, Some(third));
    let after = store.stats();
    assert_eq!((after.write_calls - before.write_calls, after.commits - before.commits), (3, 3));

    // The partition is the entry's for life: a put in another one writes nothing.
    let moved = store
        .put_entry(PutEntry {
            kind: EntryKind::Subscription,
            id: "sub-1".into(),
            partition: "sub-2".into(),
            body: "{}".into(),
            expect: Expect::Any,
            now: at(30),
            activity: None,
        })
        .await;
    assert!(is_precondition(&moved), "{moved:?}");
    let stored = get_entry(store, EntryKind::Subscription, "sub-1").await.expect("stored");
    assert_eq!((stored.partition.as_str(), stored.version), ("sub-1", 3));
}

/// `Expect::Absent` on an existing entry, and `Expect::Version` of a missing one, fail and
/// write nothing.
pub async fn case_entries_expect_absent_on_existing(store: &dyn Store) {
    let first = put_entry(store, TOKEN, "t1", "sub-1", r#"{"v":1}"#, Expect::Absent).await;
    let before = store.stats();
    let again = store
        .put_entry(PutEntry {
            kind: TOKEN,
            id: "t1".into(),
            partition: "sub-1".into(),
            body: r#"{"v":2}"#.into(),
            expect: Expect::Absent,
            now: at(10),
            activity: None,
        })
        .await;
    assert!(is_precondition(&again), "{again:?}");
    assert_eq!(get_entry(store, TOKEN, "t1").await, Some(first), "the row is unchanged");
    let missing = store
        .put_entry(PutEntry {
            kind: TOKEN,
            id: "t2".into(),
            partition: "sub-1".into(),
            body: "{}".into(),
            expect: Expect::Version(1),
            now: at(10),
            activity: None,
        })
        .await;
    assert!(is_precondition(&missing), "{missing:?}");
    assert_eq!(get_entry(store, TOKEN, "t2").await, None, "nothing was inserted");
    let after = store.stats();
    assert_eq!((after.write_calls - before.write_calls, after.commits - before.commits), (2, 0), "no commits");
}

/// A put expecting a version other than the stored one fails and leaves the row as it was.
pub async fn case_entries_stale_version_writes_nothing(store: &dyn Store) {
    put_entry(store, TOKEN, "t1", "sub-1", r#"{"v":1}"#, Expect::Absent).await;
    let current = put_entry(store, TOKEN, "t1", "sub-1", r#"{"v":2}"#, Expect::Version(1)).await;
    assert_eq!(current.version, 2);
    for stale in [1, 3, 0] {
        let result = store
            .put_entry(PutEntry {
                kind: TOKEN,
                id: "t1".into(),
                partition: "sub-1".into(),
                body: r#"{"v":"stale"}"#.into(),
                expect: Expect::Version(stale),
                now: at(10),
                activity: None,
            })
            .await;
        assert!(is_precondition(&result), "version {stale}: {result:?}");
        assert_eq!(get_entry(store, TOKEN, "t1").await.as_ref(), Some(&current), "version {stale}: unchanged");
    }
    let deleted = store.delete_entry(TOKEN, "t1", Expect::Version(1), None).await;
    assert!(is_precondition(&deleted), "a stale delete: {deleted:?}");
    assert_eq!(get_entry(store, TOKEN, "t1").await, Some(current), "a stale delete removes nothing");
}

/// Deletes with and without an expectation; deleting what is absent is `false`, unless a
/// version was expected.
pub async fn case_entries_delete(store: &dyn Store) {
    put_entry(store, TOKEN, "t1", "sub-1", "{}", Expect::Absent).await;
    put_entry(store, TOKEN, "t2", "sub-1", "{}", Expect::Absent).await;
    put_entry(store, TOKEN, "t2", "sub-1", "{}", Expect::Version(1)).await;
    put_entry(store, EntryKind::RoleAssignment, "t1", "sub-1", "{}", Expect::Absent).await;

    let before = store.stats();
    assert_eq!(store.delete_entry(TOKEN, "t1", Expect::Any, None).await, Ok(true));
    assert_eq!(get_entry(store, TOKEN, "t1").await, None);
    assert!(get_entry(store, EntryKind::RoleAssignment, "t1").await.is_some(), "other kinds keep theirs");
    let present = store.delete_entry(TOKEN, "t2", Expect::Absent, None).await;
    assert!(is_precondition(&present), "{present:?}");
    assert_eq!(store.delete_entry(TOKEN, "t2", Expect::Version(2), None).await, Ok(true));
    assert_eq!(ids(store, TOKEN, None).await, Vec::<String>::new());
    let after = store.stats();
    assert_eq!((after.write_calls - before.write_calls, after.commits - before.commits), (3, 2));

    assert_eq!(store.delete_entry(TOKEN, "t1", Expect::Any, None).await, Ok(false), "already gone");
    assert_eq!(store.delete_entry(TOKEN, "never", Expect::Any, None).await, Ok(false));
    assert_eq!(store.delete_entry(TOKEN, "never", Expect::Absent, None).await, Ok(false));
    let missing = store.delete_entry(TOKEN, "never", Expect::Version(1), None).await;
    assert!(is_precondition(&missing), "{missing:?}");
    let idle = store.stats();
    assert_eq!((idle.write_calls - after.write_calls, idle.commits - after.commits), (4, 0), "deleting nothing");

    // A deleted entry starts again at version 1.
    let again = put_entry(store, TOKEN, "t2", "sub-2", "{}", Expect::Absent).await;
    assert_eq!((again.version, again.partition.as_str()), (1, "sub-2"));
}

/// Writers racing on one entry: of `N` puts expecting the current version, exactly one wins
/// and the others fail their expectation (round after round); of `N` inserts expecting
/// nothing, exactly one wins; puts expecting anything each get a version of their own.
pub async fn case_entries_concurrent_puts(h: &Harness) {
    const N: u64 = 16;
    let store = h.shared();
    let race = |id: &'static str, expect: Expect| {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..N {
            let store = Arc::clone(&store);
            tasks.spawn(async move {
                let body = format!(r#"{{"writer":{i}}}"#);
                store
                    .put_entry(PutEntry {
                        kind: TOKEN,
                        id: id.to_string(),
                        partition: "sub-1".into(),
                        body: body.to_string(),
                        expect,
                        now: at(i as i64),
                        activity: None,
                    })
                    .await
            });
        }
        tasks.join_all()
    };
    // First, so that an engine with a connection pool has its connections open when the
    // races below start: a race whose writers queue for a connection is no race.
    let outcomes = race("any", Expect::Any).await;
    let mut versions: Vec<u64> = outcomes.iter().map(|r| r.as_ref().expect("put any").version).collect();
    versions.sort_unstable();
    assert_eq!(versions, (1..=N).collect::<Vec<_>>(), "every put saw the one before it");
    assert_eq!(get_entry(&*store, TOKEN, "any").await.map(|e| e.version), Some(N));

    put_entry(&*store, TOKEN, "hot", "sub-1", r#"{"writer":"seed"}"#, Expect::Absent).await;
    for version in 1..=3 {
        let outcomes = race("hot", Expect::Version(version)).await;
        let winners: Vec<&Entry> = outcomes.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "exactly one put expecting version {version} succeeds: {outcomes:?}");
        assert!(outcomes.iter().all(|r| r.is_ok() || is_precondition(r)), "the others fail: {outcomes:?}");
        let stored = get_entry(&*store, TOKEN, "hot").await.expect("stored");
        assert_eq!(stored.version, version + 1);
        assert_eq!(&stored, winners[0], "the winner's write is the one stored");
    }

    let outcomes = race("fresh", Expect::Absent).await;
    let winners: Vec<&Entry> = outcomes.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one insert expecting nothing succeeds: {outcomes:?}");
    assert!(outcomes.iter().all(|r| r.is_ok() || is_precondition(r)), "{outcomes:?}");
    assert_eq!(get_entry(&*store, TOKEN, "fresh").await.as_ref(), Some(winners[0]));
}
