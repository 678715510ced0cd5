//! The notification outbox and operation expiry.

use super::*;

pub async fn case_notifications_lifecycle(store: &dyn Store) {
    let mut expected = Vec::new();
    for (n, name, done) in [(1, "a", 10), (2, "b", 20), (3, "c", 30)] {
        let id = vnet("Sub-Notify", "rg", name);
        let uri = format!("https://callbacks.example/{name}");
        put(store, &id, spec(1), ctx_notify(n, T0, &uri)).await;
        let snap = set_status(store, &id.key(), &op_id(n), ProvisioningState::Succeeded, None, at(done * SECOND)).await;
        assert_eq!(snap.notifications.len(), 1, "queued with the terminal status");
        expected.push((op_id(n), uri, at(done * SECOND)));
    }
    assert_eq!(store.claim_notifications(at(10 * SECOND - 1), 10, HOLD).await, Ok(vec![]));
    let first = store.claim_notifications(at(30 * SECOND), 2, HOLD).await.expect("claim");
    let seen: Vec<_> = first.iter().map(|n| (n.operation_id.clone(), n.uri.clone(), n.next_attempt_at)).collect();
    assert_eq!(seen, expected[..2].to_vec(), "earliest first, at most the limit");
    for n in &first {
        assert_eq!(n.subscription, "sub-notify");
        assert_eq!(n.attempts, 0);
        assert_eq!(n.created_at, n.next_attempt_at);
    }
    // Claimed rows are hidden from a concurrent notifier (another replica) ...
    let ids = |v: Vec<crate::Notification>| v.into_iter().map(|n| n.id).collect::<Vec<_>>();
    let rest = store.claim_notifications(at(30 * SECOND), 10, HOLD).await.expect("claim");
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].operation_id, expected[2].0);
    let (a, b, c) = (first[0].clone(), first[1].clone(), rest[0].clone());
    assert_eq!(
        store.claim_notifications(at(30 * SECOND).add(HOLD).sub(Duration::from_millis(1)), 10, HOLD).await,
        Ok(vec![])
    );
    // ... until the hold passes (the notifier that took them died without bookkeeping).
    let again = store.claim_notifications(at(30 * SECOND).add(HOLD), 10, HOLD).await.expect("claim");
    assert_eq!(ids(again), vec![a.id, b.id, c.id]);

    store.reschedule_notification(a.id, at(200 * SECOND), "HTTP 503").await.expect("reschedule");
    store.finish_notification(b.id).await.expect("finish");
    store.finish_notification(b.id).await.expect("finishing twice is harmless");
    store.abandon_notification(c.id, "operation expired").await.expect("abandon");
    store.reschedule_notification(c.id, at(300 * SECOND), "late").await.expect("reschedule dead");
    assert_eq!(store.claim_notifications(at(200 * SECOND - 1), 10, HOLD).await, Ok(vec![]));
    let retried = store.claim_notifications(at(200 * SECOND), 10, HOLD).await.expect("claim");
    assert_eq!(ids(retried.clone()), vec![a.id], "finished and dead rows never come back");
    assert_eq!(
        (retried[0].attempts, retried[0].next_attempt_at, retried[0].created_at),
        (1, at(200 * SECOND), a.created_at)
    );
    store.finish_notification(a.id).await.expect("finish");
    assert_eq!(store.claim_notifications(at(1_000 * SECOND), 10, HOLD).await, Ok(vec![]));
}

pub async fn case_notifications_deferred(store: &dyn Store) {
    for (n, name) in [(1, "a"), (2, "b"), (3, "c")] {
        let id = vnet("Sub-Defer", "rg", name);
        put(store, &id, spec(1), ctx_notify(n, T0, &format!("https://callbacks.example/{name}"))).await;
        set_status(store, &id.key(), &op_id(n), ProvisioningState::Succeeded, None, at(10 * SECOND)).await;
    }
    let claimed = store.claim_notifications(at(10 * SECOND), 10, HOLD).await.expect("claim");
    let [a, b, c] = <[crate::Notification; 3]>::try_from(claimed).expect("three rows");
    store.reschedule_notification(b.id, at(20 * SECOND), "HTTP 503").await.expect("reschedule");
    store.abandon_notification(c.id, "gave up").await.expect("abandon");
    // A held-back row and a claim given back: due again at the time given (even earlier
    // than the hold), no attempt counted, the last error kept; a dead row stays dead.
    store
        .defer_notifications(&[
            (a.id, at(15 * SECOND)),
            (b.id, at(12 * SECOND)),
            (c.id, at(11 * SECOND)),
            (NotificationId(-1), T0),
        ])
        .await
        .expect("defer");
    store.defer_notifications(&[]).await.expect("deferring nothing");
    assert_eq!(store.claim_notifications(at(12 * SECOND - 1), 10, HOLD).await, Ok(vec![]));
    let due = store.claim_notifications(at(15 * SECOND), 10, HOLD).await.expect("claim");
    let seen: Vec<_> = due.iter().map(|n| (n.id, n.attempts, n.next_attempt_at)).collect();
    assert_eq!(seen, vec![(b.id, 1, at(12 * SECOND)), (a.id, 0, at(15 * SECOND))], "earliest first, dead row absent");
    store.finish_notification(a.id).await.expect("finish");
    store.defer_notifications(&[(a.id, at(16 * SECOND))]).await.expect("deferring a finished row is harmless");
    assert_eq!(store.claim_notifications(at(1_000 * SECOND), 10, HOLD).await.map(|v| v.len()), Ok(1));
}

pub async fn case_operation_ttl(h: &Harness) {
    let store: &dyn Store = &**h;
    let ttl = h.operation_ttl;
    assert!(ttl >= Duration::from_millis(2));
    let id = vnet("sub-ttl", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    set_status(store, &key, &op_id(1), ProvisioningState::Succeeded, None, T0).await;
    let expiry = T0.add(ttl);
    let just_before = expiry.sub(Duration::from_millis(1));

    // Expiry is exact even before any sweep.
    assert!(store.get_operation(&"sub-ttl".into(), &op_id(1), just_before).await.expect("get").is_some());
    assert_eq!(store.get_operation(&"sub-ttl".into(), &op_id(1), expiry).await, Ok(None));
    let named = |now| ChangeRequest::new(key.clone(), now).with_operation("sub-ttl", op_id(1));
    assert_eq!(op_ids(&noop(store, named(just_before)).await), vec![op_id(1)]);
    assert!(noop(store, named(expiry)).await.operations.is_empty(), "an expired operation is not loaded");

    assert_eq!(store.sweep_operations(just_before).await, Ok(0));
    assert_eq!(store.sweep_operations(expiry).await, Ok(1));
    assert_eq!(store.sweep_operations(expiry).await, Ok(0));
    assert_eq!(store.get_operation(&"sub-ttl".into(), &op_id(1), T0).await, Ok(None), "swept for good");
    assert!(store.get_resource(&key).await.expect("get").is_some(), "the resource is not swept");
}

pub async fn case_operation_expiry_follows_last_write(h: &Harness) {
    let store: &dyn Store = &**h;
    let ttl = h.operation_ttl;
    let id = vnet("sub-expiry", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    let t1 = T0.add(ttl / 2);
    set_status(store, &key, &op_id(1), ProvisioningState::Succeeded, None, t1).await;

    let first_expiry = T0.add(ttl);
    let expiry = t1.add(ttl);
    assert!(store.get_operation(&"sub-expiry".into(), &op_id(1), first_expiry).await.expect("get").is_some());
    assert!(
        store
            .get_operation(&"sub-expiry".into(), &op_id(1), expiry.sub(Duration::from_millis(1)))
            .await
            .expect("get")
            .is_some()
    );
    assert_eq!(store.get_operation(&"sub-expiry".into(), &op_id(1), expiry).await, Ok(None));
    assert_eq!(store.sweep_operations(first_expiry).await, Ok(0));

    // Writing the resource alone does not touch its unchanged operation's expiry.
    let other = vnet("sub-expiry", "rg", "r2");
    put(store, &other, spec(1), ctx(2, T0)).await;
    set_status(store, &other.key(), &op_id(2), ProvisioningState::Succeeded, None, T0).await;
    apply(store, ChangeRequest::new(other.key(), t1), |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
        Ok(())
    })
    .await
    .expect("change");
    assert_eq!(store.get_operation(&"sub-expiry".into(), &op_id(2), first_expiry).await, Ok(None));

    assert_eq!(store.sweep_operations(first_expiry).await, Ok(1), "only the unrewritten one");
    assert_eq!(store.sweep_operations(expiry).await, Ok(1));
}

pub async fn case_running_operations_never_expire(h: &Harness) {
    let store: &dyn Store = &**h;
    let id = vnet("sub-running", "rg", "r1");
    put(store, &id, spec(1), ctx(1, T0)).await;
    let long_after = T0.add(h.operation_ttl * 3);
    assert!(store.get_operation(&"sub-running".into(), &op_id(1), long_after).await.expect("get").is_some());
    assert_eq!(store.sweep_operations(long_after).await, Ok(0), "an operation still running is kept");
    set_status(store, &id.key(), &op_id(1), ProvisioningState::Failed, None, long_after).await;
    assert_eq!(store.sweep_operations(long_after.add(h.operation_ttl)).await, Ok(1), "once ended it expires");
}
