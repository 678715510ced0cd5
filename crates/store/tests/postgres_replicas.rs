//! Several replicas on one PostgreSQL database: stores with pools of their own on one
//! schema, starting, claiming, creating and changing together.

mod pg;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pg::{SECOND, Schema, bump, claim_req, open, replicas, spy};
use slipway_domain::admission::{Admitted, Rejection};
use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::Schedule;
use slipway_store::conformance::{self, T0, at, ctx, seed, spec, vnet};
use slipway_store::postgres::{PostgresOptions, PostgresStore};
use slipway_store::{ChangeRequest, ClaimRequest, Store, StoreError, change_with};
use slipway_test_support::eventually;
use tokio::task::JoinSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_migrate_once() {
    let schema = Schema::fresh();
    let mut starting = JoinSet::new();
    for _ in 0..6 {
        let options = PostgresOptions { pool_size: 2, ..schema.options() };
        starting.spawn(async move { PostgresStore::connect(options).await });
    }
    let stores: Vec<PostgresStore> =
        starting.join_all().await.into_iter().map(|r| r.expect("every replica starts")).collect();
    let spy = spy().await;
    let row = spy
        .query_one(&format!("SELECT COUNT(*), MAX(version) FROM {}", schema.table("schema_migrations")), &[])
        .await
        .expect("migrations");
    let latest = conformance::SCHEMA_VERSION;
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (latest, latest), "one row per version");
    for store in &stores {
        store.ping().await.expect("ping");
    }
}

/// Seeds `n` due resources, every third in the intent lane, due times spread over a second.
async fn seed_due(store: &Arc<dyn Store>, n: u64) -> BTreeSet<ResourceKey> {
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let store = Arc::clone(store);
        tasks.spawn(async move {
            let schedule = Schedule { next_due: Some(at((i * 7 % 1000) as i64)), intent: i % 3 == 0, drift_due: None };
            seed(&*store, &vnet("sub-replicas", "rg", &format!("r{i:03}")), 1 + i, schedule).await
        });
    }
    tasks.join_all().await.into_iter().collect()
}

type Claimed = Arc<Mutex<Vec<(ResourceKey, String, u64)>>>;

/// Claims from `store` as `owner` until `total` resources were claimed by everyone together.
async fn claim_until(store: Arc<dyn Store>, owner: String, now: slipway_domain::Timestamp, total: usize, log: Claimed) {
    for _ in 0..100_000 {
        if log.lock().expect("log").len() >= total {
            return;
        }
        let req = ClaimRequest {
            owner: owner.clone().into(),
            now,
            lease_for: Duration::from_secs(30),
            intent_limit: 3,
            followup_limit: 4,
            drift_limit: 0,
        };
        let got = store.claim(&req).await.expect("claim");
        assert!(got.len() <= 7, "at most the room asked for");
        assert!(got.iter().all(|r| !r.schedule.intent), "claiming clears intent");
        if got.is_empty() {
            tokio::task::yield_now().await;
            continue;
        }
        let mut log = log.lock().expect("log");
        for rec in got {
            let lease = rec.lease.clone().expect("leased");
            assert_eq!(lease.owner, owner);
            log.push((rec.key(), lease.owner.into(), lease.epoch));
        }
    }
    panic!("{owner}: the claims never finished");
}

async fn claim_everything(
    a: &Arc<dyn Store>,
    b: &Arc<dyn Store>,
    now: slipway_domain::Timestamp,
    total: usize,
) -> Vec<(ResourceKey, String, u64)> {
    let log: Claimed = Arc::default();
    let mut claimers = JoinSet::new();
    for i in 0..3 {
        for (name, store) in [("a", a), ("b", b)] {
            let owner = format!("{name}{i}-{}", now.as_millis());
            claimers.spawn(claim_until(Arc::clone(store), owner, now, total, Arc::clone(&log)));
        }
    }
    claimers.join_all().await;
    log.lock().expect("log").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_claim_the_same_resource() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    let all = seed_due(&a, 200).await;
    let spy = spy().await;
    let leases = format!("SELECT key, lease_owner, lease_epoch FROM {}", schema.table("resources"));

    // Everything is due; six claimers in two replicas take it all, each resource once.
    // Then every lease runs out and they take it all over again, at the next epoch.
    for (round, now) in [(1, at(1_000)), (2, at(40_000))] {
        let log = claim_everything(&a, &b, now, all.len()).await;
        assert_eq!(log.len(), all.len(), "round {round}: nothing claimed twice");
        let claimed: BTreeMap<ResourceKey, (String, u64)> =
            log.into_iter().map(|(key, owner, epoch)| (key, (owner, epoch))).collect();
        assert_eq!(claimed.keys().cloned().collect::<BTreeSet<_>>(), all, "round {round}: everything claimed");
        assert!(claimed.values().all(|(_, epoch)| *epoch == round), "round {round}: epochs move on together");
        let owners: BTreeSet<&str> = claimed.values().map(|(owner, _)| owner.as_str()).collect();
        assert!(owners.len() > 1, "round {round}: work was shared ({owners:?})");
        for row in spy.query(&leases, &[]).await.expect("leases") {
            let key = ResourceKey::new(row.get::<_, String>(0));
            let stored: (String, u64) = (row.get(1), row.get::<_, i64>(2) as u64);
            assert_eq!(Some(&stored), claimed.get(&key), "round {round}: the row records its claimer");
        }
    }
}

/// A child created through one replica while another removes its parent: one loses, cleanly
/// (the child's change holds its parent's advisory lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_leave_a_child_under_no_parent() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_children_never_outlive_a_removed_parent(&a, &b).await;
}

/// Resources created through one replica while another deletes their group: none escapes
/// the delete (the creates hold the group's advisory lock shared, the delete exclusively).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_create_a_resource_a_group_delete_misses() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_no_resource_escapes_a_group_delete(&a, &b).await;
}

/// Forty creates spread over three replicas against a count limit of 10, then forty of mixed
/// sizes against a sum limit of 25, twenty times over: every run accepts exactly ten, and
/// sizes that never pass 25 (each create holds its meter's advisory lock from its usage read
/// to its commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_pass_a_quota_together() {
    const RUNS: usize = 20;
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    let c: Arc<dyn slipway_store::Store> = Arc::new(open(PostgresOptions { pool_size: 4, ..schema.options() }).await);
    let stores = [a, b, c];
    let mut totals = Vec::with_capacity(RUNS);
    for run in 0..RUNS {
        let subscription = format!("sub-quota-{run}");
        let (accepted, total) =
            slipway_store::conformance::check_concurrent_creates_never_pass_a_limit(&stores, &subscription).await;
        assert_eq!(accepted, 10);
        totals.push(total);
    }
    eprintln!(
        "{RUNS} runs: 10 of 40 accepted against a count limit of 10 every time; sizes accepted against 25: {totals:?}"
    );
}

/// A guardrail setting written through one replica while a change through another that
/// read the settings is deciding: the write waits for the change's commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_write_a_setting_under_a_deciding_change() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_a_setting_write_waits_for_the_change_that_read_it(&a, &b).await;
}

/// A reference written through one replica while another deletes its target: one loses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_reference_a_resource_being_deleted() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_a_reference_and_its_targets_delete_never_both_win(&a, &b).await;
}

/// Two replicas each close one end of a reference cycle at the same time: one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_close_a_reference_cycle_from_both_ends() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_a_reference_cycle_is_never_closed_from_both_ends(&a, &b).await;
}

/// Changes through two replicas at once: one subscription's event positions stay dense and
/// in commit order (each change holds its subscription's cursor row until it commits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_number_one_subscriptions_events_densely() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_concurrent_changes_number_their_events_densely(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_claim_the_same_notification() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    let total = 300_i64;
    spy()
        .await
        .execute(
            &format!(
                "INSERT INTO {} (subscription, operation_id, uri, next_attempt_at, created_at)
                 SELECT 'sub', '00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'), 'https://cb.example/' || g, g, g
                 FROM generate_series(1, $1::BIGINT) g",
                schema.table("outbox")
            ),
            &[&total],
        )
        .await
        .expect("seed the outbox");
    let hold = Duration::from_secs(60);
    let now = at(0);
    let log: Arc<Mutex<Vec<i64>>> = Arc::default();
    let mut notifiers = JoinSet::new();
    for store in [&a, &b, &a, &b] {
        let store = Arc::clone(store);
        let log = Arc::clone(&log);
        notifiers.spawn(async move {
            for _ in 0..100_000 {
                if log.lock().expect("log").len() >= total as usize {
                    return;
                }
                let got = store.claim_notifications(now, 7, hold).await.expect("claim");
                assert!(got.windows(2).all(|w| (w[0].next_attempt_at, w[0].id) < (w[1].next_attempt_at, w[1].id)));
                if got.is_empty() {
                    tokio::task::yield_now().await;
                }
                log.lock().expect("log").extend(got.iter().map(|n| n.id.0));
            }
            panic!("the notification claims never finished");
        });
    }
    notifiers.join_all().await;
    let log = log.lock().expect("log").clone();
    let distinct: BTreeSet<i64> = log.iter().copied().collect();
    assert_eq!(log.len(), distinct.len(), "no notification handed out twice");
    assert_eq!(distinct.len(), total as usize, "every notification handed out");
    assert_eq!(a.claim_notifications(now.add(hold).sub(Duration::from_millis(1)), 1000, hold).await, Ok(vec![]));
    assert_eq!(b.claim_notifications(now.add(hold), 1000, hold).await.expect("claim").len(), total as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_creating_one_absent_resource_create_it_once() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    let id = vnet("sub-race", "rg", "contested");
    let mut tasks = JoinSet::new();
    for i in 0..24u64 {
        let store = Arc::clone(if i % 2 == 0 { &a } else { &b });
        let target = id.clone();
        tasks.spawn(async move {
            let c = ctx(100 + i, T0);
            change_with(&*store, ChangeRequest::new(target.key(), T0), move |s| {
                slipway_domain::admission::admit_put(s, &target, conformance::KIND, spec(1), &c)
            })
            .await
            .expect("put")
        });
    }
    let outcomes = tasks.join_all().await;
    let created: Vec<_> = outcomes
        .iter()
        .filter_map(|(admitted, _)| match admitted {
            Admitted::Accepted { operation, created: true } => Some(operation.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(created.len(), 1, "exactly one create: {outcomes:?}");
    for (admitted, _) in &outcomes {
        match admitted {
            Admitted::Accepted { created: true, .. } => {}
            Admitted::InProgress { operation } => assert_eq!(operation, &created[0], "the others see the create"),
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    let rows = spy()
        .await
        .query_one(&format!("SELECT COUNT(*) FROM {}", schema.table("operations")), &[])
        .await
        .expect("count")
        .get::<_, i64>(0);
    assert_eq!(rows, 1, "one operation was recorded");

    // And concurrent updates from both replicas lose nothing.
    let mut tasks = JoinSet::new();
    for i in 0..40 {
        let store = Arc::clone(if i % 2 == 0 { &a } else { &b });
        let key = id.key();
        tasks.spawn(async move {
            let snap = store.change(ChangeRequest::new(key, at(i)), Box::new(bump)).await.expect("change");
            snap.resource.expect("resource").job_seq
        });
    }
    let mut seen = tasks.join_all().await;
    seen.sort_unstable();
    assert_eq!(seen, (1..=40).collect::<Vec<u64>>(), "every change saw the one before it");
}

/// A change holding a resource keeps claims off it without making them wait, and a lease
/// taken over by another replica fences the first one out.
#[tokio::test]
async fn claims_skip_what_a_transaction_holds_and_takeovers_fence() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 2).await;
    let busy = seed(&*a, &vnet("sub", "rg", "busy"), 1, Schedule::now(T0)).await;
    let free = seed(&*a, &vnet("sub", "rg", "free"), 2, Schedule::now(at(1))).await;

    let mut spy = spy().await;
    let tx = spy.transaction().await.expect("begin");
    tx.execute(&format!("SELECT 1 FROM {} WHERE key = $1 FOR UPDATE", schema.table("resources")), &[&busy.as_str()])
        .await
        .expect("lock the row");
    let got = b.claim(&claim_req("engine-b", at(SECOND))).await.expect("claim");
    assert_eq!(got.iter().map(|r| r.key()).collect::<Vec<_>>(), vec![free.clone()], "the held row is skipped");
    tx.commit().await.expect("release the row");
    let got = a.claim(&claim_req("engine-a", at(SECOND))).await.expect("claim");
    assert_eq!(got.iter().map(|r| r.key()).collect::<Vec<_>>(), vec![busy.clone()]);

    // engine-a's lease runs out; engine-b takes over and engine-a is fenced out.
    let taken = b.claim(&claim_req("engine-b", at(32 * SECOND))).await.expect("takeover");
    let keys: BTreeSet<_> = taken.iter().map(|r| r.key()).collect();
    assert_eq!(keys, BTreeSet::from([busy.clone(), free.clone()]));
    assert!(taken.iter().all(|r| r.lease.as_ref().is_some_and(|l| l.epoch == 2 && l.owner == "engine-b")));
    let stale = slipway_store::Fence { owner: "engine-a".into(), epoch: 1 };
    let err = a.change(ChangeRequest::new(busy.clone(), at(33 * SECOND)).fenced(stale), Box::new(bump)).await;
    assert_eq!(err, Err(StoreError::LeaseLost));
    let fresh = slipway_store::Fence { owner: "engine-b".into(), epoch: 2 };
    b.change(ChangeRequest::new(busy, at(33 * SECOND)).fenced(fresh), Box::new(bump)).await.expect("holder writes");
}

/// While a change is between its read and its write, another replica's claim skips the
/// resource (without waiting) and a lease renewal waits: neither is lost when the change
/// writes the resource back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_progress_keeps_claims_and_renewals_from_interleaving() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 2).await;
    let key = seed(&*a, &vnet("sub", "rg", "r1"), 1, Schedule::now(T0)).await;

    // A client write (engine-b holds no lease yet), stopped inside its transaction.
    let paused = |key: ResourceKey, now| {
        let (inside, entered) = tokio::sync::oneshot::channel::<()>();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let store = Arc::clone(&a);
        let change = tokio::spawn(async move {
            store
                .change(
                    ChangeRequest::new(key, now),
                    Box::new(move |s| {
                        let _ = inside.send(());
                        wait.recv().expect("go");
                        s.resource.as_mut().ok_or(Rejection::NotFound)?.generation += 1;
                        Ok(())
                    }),
                )
                .await
        });
        (entered, go, change)
    };
    let (entered, go, change) = paused(key.clone(), at(SECOND));
    entered.await.expect("the change is inside its transaction");
    assert_eq!(b.claim(&claim_req("engine-b", at(SECOND))).await, Ok(vec![]), "skipped while held");
    go.send(()).expect("go");
    change.await.expect("task").expect("change");
    let got = b.claim(&claim_req("engine-b", at(SECOND))).await.expect("claim");
    assert_eq!(got.len(), 1);
    assert_eq!(a.get_resource(&key).await.expect("get").as_ref(), got.first(), "the claim stands");

    // Now a renewal arrives while a change of the leased resource is in progress.
    let (entered, go, change) = paused(key.clone(), at(2 * SECOND));
    entered.await.expect("the change is inside its transaction");
    let renewer = Arc::clone(&b);
    let renewed = key.clone();
    let renew = tokio::spawn(async move {
        renewer.renew_leases(&"engine-b".into(), std::slice::from_ref(&renewed), at(90 * SECOND)).await
    });
    // The renewal reached the server and waits for the change's row lock: had it gone
    // through now, the change would write the old lease back over it.
    let spy = spy().await;
    eventually("the renewal waiting for the change's row lock", Duration::from_secs(10), async || {
        let waiting: i64 = spy
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE state = 'active' AND wait_event_type = 'Lock' AND query LIKE '%SET lease_until%'",
                &[],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        assert!(!renew.is_finished(), "the renewal went through while the change held the resource");
        waiting > 0
    })
    .await;
    assert!(!renew.is_finished(), "the renewal waits");
    go.send(()).expect("go");
    change.await.expect("task").expect("change");
    assert_eq!(renew.await.expect("task"), Ok(1));
    let lease = a.get_resource(&key).await.expect("get").expect("resource").lease.expect("leased");
    assert_eq!((lease.owner.as_str(), lease.until, lease.epoch), ("engine-b", at(90 * SECOND), 1), "renewal kept");
}
