//! Concurrent changes: group commit, isolation, their own times.

use super::*;

/// Concurrent changes end up in shared transactions (group commit). A change that fails
/// after it has already written (a duplicate operation id on insert), a refusal, or a panic
/// in one change function fails that change only and leaves nothing of it behind.
pub async fn case_a_failing_change_undoes_only_its_own_writes(h: &Harness) {
    let store = h.shared();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40u64 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let id = vnet("sub-isolated", "rg", &format!("r{i}"));
            let target = id.clone();
            let c = ctx(1 + i, T0);
            let result = apply(&*store, ChangeRequest::new(id.key(), T0), move |s| {
                admission::admit_put(s, &target, KIND, spec(1), &c)?;
                match i % 4 {
                    0 => Ok(()),
                    1 => Err(Rejection::NotFound),
                    2 => panic!("change function bug"),
                    _ => {
                        let twin = s.operations[0].clone();
                        s.operations.push(twin);
                        Ok(())
                    }
                }
            })
            .await;
            (i, id, result)
        });
    }
    for (i, id, result) in tasks.join_all().await {
        let stored = store.get_resource(&id.key()).await.expect("get");
        let op = store.get_operation(&"sub-isolated".into(), &op_id(1 + i), T0).await.expect("get op");
        match i % 4 {
            0 => {
                let snap = result.expect("committed");
                assert_eq!(stored, snap.resource, "{i}");
                assert_eq!(op.as_ref(), snap.operations.first(), "{i}");
                continue;
            }
            1 => assert_eq!(result.err(), Some(StoreError::Rejected(Rejection::NotFound))),
            2 => assert!(
                matches!(&result, Err(StoreError::Internal(m)) if m == "change function panicked: change function bug"),
                "{i}: {result:?}"
            ),
            _ => assert!(matches!(result, Err(StoreError::Internal(_))), "{i}: {result:?}"),
        }
        assert_eq!((stored, op), (None, None), "{i}: a failed change leaves nothing");
    }
    store.ping().await.expect("the store survives panics");
}

/// Changes committed together (a group commit) keep their own times: each operation
/// expires a TTL after its own write, and each notification is due at its own change's time
/// — not at the time of whichever change shared the transaction.
pub async fn case_grouped_changes_keep_their_own_times(h: &Harness) {
    const N: i64 = 40;
    let store = h.shared();
    let ttl = h.operation_ttl;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..N {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let now = at(i * SECOND);
            let id = vnet("sub-times", "rg", &format!("r{i}"));
            let c = ctx_notify(100 + i as u64, now, "https://callback.example/done");
            // Created and ended in one change, so the operation can expire and is notified.
            apply(&*store, ChangeRequest::new(id.key(), now), move |s| {
                admission::admit_put(s, &id, KIND, spec(1), &c)?;
                let op = s.operations[0].id.clone();
                s.set_operation_status(&op, ProvisioningState::Succeeded, None, now);
                Ok(())
            })
            .await
            .expect("change");
        });
    }
    tasks.join_all().await;
    let subscription = SubscriptionId::new("sub-times");
    for i in 0..N {
        let expiry = at(i * SECOND).add(ttl);
        let op = op_id(100 + i as u64);
        let visible = |t| store.get_operation(&subscription, &op, t);
        assert!(visible(expiry.sub(Duration::from_millis(1))).await.expect("get").is_some(), "op {i} expired early");
        assert_eq!(visible(expiry).await, Ok(None), "op {i} expires a TTL after its own change");
    }
    for i in 0..N {
        let due =
            store.claim_notifications(at(i * SECOND), N as usize, Duration::from_secs(3600)).await.expect("claim");
        let times: Vec<Timestamp> = due.iter().map(|n| n.next_attempt_at).collect();
        assert_eq!(times, vec![at(i * SECOND)], "notification {i} is due at its own change's time");
    }
}

pub async fn case_concurrent_changes_lose_no_update(h: &Harness) {
    let store = h.shared();
    let id = vnet("sub-race", "rg", "hot");
    put(&*store, &id, spec(1), ctx(1, T0)).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..50 {
        let store = Arc::clone(&store);
        let key = id.key();
        tasks.spawn(async move {
            let snap = apply(&*store, ChangeRequest::new(key, at(i)), |s| {
                s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
                Ok(())
            })
            .await
            .expect("change");
            snap.resource.expect("resource").job_seq
        });
    }
    let mut seen = tasks.join_all().await;
    seen.sort_unstable();
    assert_eq!(seen, (1..=50).collect::<Vec<u64>>(), "every change saw the one before it");
    assert_eq!(resource(&*store, &id.key()).await.job_seq, 50);
}
