//! Registry entries a change reads as its guardrails (`ChangeRequest::settings`): read as
//! committed, and never written while a change that read them is still deciding — so a lock
//! or a limit set at the same time as a write is either seen by it or set after it commits.

use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::{EntryKind, Expect, PutEntry};

fn limit_entry(partition: &str, id: &str, body: &str) -> PutEntry {
    PutEntry {
        kind: EntryKind::QuotaLimit,
        id: format!("{partition}|{id}"),
        partition: partition.into(),
        body: body.into(),
        expect: Expect::Any,
        now: T0,
        activity: None,
    }
}

/// What a change of a resource in `subscription` reads of its quota limits.
async fn read_settings(store: &dyn Store, subscription: &str) -> Vec<String> {
    let id = vnet(subscription, "rg", "reader");
    let req = ChangeRequest::new(id.key(), T0).with_settings(&subscription.into(), &[EntryKind::QuotaLimit]);
    noop(store, req).await.settings.iter().map(|s| format!("{} {}", s.id, s.body)).collect()
}

/// A change reads the entries of the kinds it names in its subscription's partition, and no
/// other partition's.
pub async fn case_a_change_reads_its_subscriptions_settings(store: &dyn Store) {
    for put in [limit_entry("sub-s1", "cores", "{\"admin\":4}"), limit_entry("sub-s2", "cores", "{\"admin\":9}")] {
        store.put_entry(put).await.expect("put");
    }
    assert_eq!(read_settings(store, "sub-s1").await, vec!["sub-s1|cores {\"admin\":4}".to_string()]);
    let id = vnet("sub-s1", "rg", "other");
    assert!(noop(store, ChangeRequest::new(id.key(), T0)).await.settings.is_empty(), "read only when asked");
}

/// A setting written through `writer` while a change through `reader` that read the
/// settings is still deciding waits for that change to commit; the next change sees it.
pub async fn check_a_setting_write_waits_for_the_change_that_read_it(reader: &Arc<dyn Store>, writer: &Arc<dyn Store>) {
    let subscription = "sub-settings-race";
    let (held_tx, held_rx) = mpsc::channel::<usize>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let id = vnet(subscription, "rg", "deciding");
    let req = ChangeRequest::new(id.key(), T0).with_settings(&subscription.into(), &[EntryKind::QuotaLimit]);
    let store = Arc::clone(reader);
    let deciding = tokio::spawn(async move {
        apply(&*store, req, move |s| {
            held_tx.send(s.settings.len()).expect("the test listens");
            go_rx.recv().expect("the test lets the change go on");
            Ok(())
        })
        .await
    });
    let seen = tokio::task::spawn_blocking(move || held_rx.recv().expect("the change runs")).await.expect("joined");
    assert_eq!(seen, 0, "nothing set yet");
    let store = Arc::clone(writer);
    let mut writing =
        tokio::spawn(async move { store.put_entry(limit_entry(subscription, "cores", "{\"admin\":1}")).await });
    let early = tokio::time::timeout(Duration::from_millis(300), &mut writing).await;
    assert!(early.is_err(), "the setting was written while a change that read the settings was deciding: {early:?}");
    go_tx.send(()).expect("the change waits");
    deciding.await.expect("joined").expect("the change commits");
    writing.await.expect("joined").expect("the write goes through after it");
    assert_eq!(read_settings(&**reader, subscription).await.len(), 1);
}
