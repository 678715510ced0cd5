//! Claims, leases and fencing.

use super::*;

pub async fn case_claim_intent_lane_first(store: &dyn Store) {
    let mut follow = Vec::new();
    let mut intent = Vec::new();
    for i in 0..3 {
        // Follow-ups due long before the intents: the lane wins over the due time.
        let due = Schedule { next_due: Some(at(-300 * SECOND + i)), intent: false, drift_due: None };
        follow.push(seed(store, &vnet("sub-lanes", "rg", &format!("f{i}")), 10 + i as u64, due).await);
        let now = Schedule { next_due: Some(at(i * 10)), intent: true, drift_due: None };
        intent.push(seed(store, &vnet("sub-lanes", "rg", &format!("i{i}")), 20 + i as u64, now).await);
    }
    let now = at(SECOND);
    let until = at(31 * SECOND);

    let a = store.claim(&claim_req("engine-a", now, 2, 1)).await.expect("claim");
    assert_eq!(keys(&a), vec![intent[0].clone(), intent[1].clone(), follow[0].clone()]);
    for rec in &a {
        assert_eq!(rec.lease, lease("engine-a", until, 1));
        assert!(!rec.schedule.intent, "claiming clears intent");
        assert_eq!(resource(store, &rec.key()).await, *rec);
    }
    assert_eq!(a[0].schedule.next_due, Some(at(0)), "the due time stays");

    let b = store.claim(&claim_req("engine-b", now, 2, 1)).await.expect("claim");
    assert_eq!(
        keys(&b),
        vec![intent[2].clone(), follow[1].clone(), follow[2].clone()],
        "the intent lane's unused room goes to follow-ups"
    );
    assert_eq!(store.claim(&claim_req("engine-c", now, 2, 1)).await, Ok(vec![]));
}

pub async fn case_claim_gives_unused_room_to_other_lane(store: &dyn Store) {
    let mut intent = Vec::new();
    for i in 0..4 {
        let sched = Schedule { next_due: Some(at(i)), intent: true, drift_due: None };
        intent.push(seed(store, &vnet("sub-room", "rg", &format!("i{i}")), 1 + i as u64, sched).await);
    }
    let got = store.claim(&claim_req("engine-a", at(SECOND), 1, 2)).await.expect("claim");
    assert_eq!(keys(&got), intent[..3].to_vec(), "no follow-ups: their room goes to intents");
    let got = store.claim(&claim_req("engine-b", at(SECOND), 1, 2)).await.expect("claim");
    assert_eq!(keys(&got), intent[3..].to_vec());

    let mut follow = Vec::new();
    for i in 0..3 {
        let sched = Schedule { next_due: Some(at(i)), intent: false, drift_due: None };
        follow.push(seed(store, &vnet("sub-room", "rg", &format!("f{i}")), 10 + i as u64, sched).await);
    }
    let got = store.claim(&claim_req("engine-c", at(SECOND), 2, 0)).await.expect("claim");
    assert_eq!(keys(&got), follow[..2].to_vec(), "no intents: their room goes to follow-ups");
    assert_eq!(store.claim(&claim_req("engine-d", at(SECOND), 0, 0)).await, Ok(vec![]));
}

/// The drift lane takes resources whose check is due and that have nothing else due, in
/// check order, up to its limit and only in the room the other lanes leave; the drift time
/// survives the claim.
pub async fn case_claim_drift_lane_last_and_only_idle_resources(store: &dyn Store) {
    let drift = |n: i64| Schedule { next_due: None, intent: false, drift_due: Some(at(n)) };
    let mut checks = Vec::new();
    for i in 0..4 {
        checks.push(seed(store, &vnet("sub-drift", "rg", &format!("d{i}")), 1 + i as u64, drift(i)).await);
    }
    seed(store, &vnet("sub-drift", "rg", "later"), 10, drift(10 * SECOND)).await;
    let busy = Schedule { next_due: Some(at(0)), intent: false, drift_due: Some(at(0)) };
    let follow = seed(store, &vnet("sub-drift", "rg", "busy"), 11, busy).await;
    let req = |owner: &str, limit, drift_limit| ClaimRequest { drift_limit, ..claim_req(owner, at(SECOND), limit, 0) };

    let got = store.claim(&req("engine-a", 2, 5)).await.expect("claim");
    assert_eq!(keys(&got), vec![follow.clone(), checks[0].clone()], "the other lanes first, drift in the room left");
    assert!(ClaimRequest::drift_lane(&got[1]) && !ClaimRequest::drift_lane(&got[0]));
    assert_eq!(got[1].schedule.drift_due, Some(at(0)), "the drift time stays");
    assert_eq!(got[1].lease, lease("engine-a", at(31 * SECOND), 1));
    let got = store.claim(&req("engine-b", 10, 2)).await.expect("claim");
    assert_eq!(keys(&got), checks[1..3].to_vec(), "at most the drift limit, earliest check first");
    let got = store.claim(&req("engine-b", 10, 0)).await.expect("claim");
    assert!(got.is_empty(), "no drift room: none");
    let got = store.claim(&req("engine-c", 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), checks[3..].to_vec(), "leased ones and ones not due yet stay");
}

/// Idle resources of the named types with no check scheduled get one; busy ones, ones already
/// scheduled and other types are left alone.
pub async fn case_schedule_drift_for_idle_resources(store: &dyn Store) {
    let idle = Schedule { next_due: None, intent: false, drift_due: None };
    let a = seed(store, &vnet("sub-sched", "rg", "idle"), 1, idle).await;
    let busy = seed(store, &vnet("sub-sched", "rg", "busy"), 2, Schedule { next_due: Some(at(0)), ..idle }).await;
    let set = seed(store, &vnet("sub-sched", "rg", "set"), 3, Schedule { drift_due: Some(at(9)), ..idle }).await;
    let vnets = TypeKey::parse(a.as_str().split("/providers/").nth(1).map(|p| p.rsplit_once('/').unwrap().0).unwrap());
    assert_eq!(store.schedule_drift(&[TypeKey::parse("other/things")], at(5)).await, Ok(0));
    assert_eq!(store.schedule_drift(std::slice::from_ref(&vnets), at(5)).await, Ok(1));
    assert_eq!(resource(store, &a).await.schedule.drift_due, Some(at(5)));
    assert_eq!(resource(store, &busy).await.schedule.drift_due, None);
    assert_eq!(resource(store, &set).await.schedule.drift_due, Some(at(9)));
    assert_eq!(store.schedule_drift(&[vnets], at(6)).await, Ok(0), "once scheduled, kept");
}

pub async fn case_claim_only_due_resources(store: &dyn Store) {
    let later = seed(
        store,
        &vnet("sub-due", "rg", "later"),
        1,
        Schedule { next_due: Some(at(5 * SECOND)), intent: false, drift_due: None },
    )
    .await;
    seed(store, &vnet("sub-due", "rg", "idle"), 2, Schedule { next_due: None, intent: false, drift_due: None }).await;
    let asked = seed(
        store,
        &vnet("sub-due", "rg", "asked"),
        3,
        Schedule { next_due: Some(at(5 * SECOND)), intent: true, drift_due: None },
    )
    .await;

    assert_eq!(store.claim(&claim_req("engine-a", at(5 * SECOND - 1), 10, 10)).await, Ok(vec![]));
    let got = store.claim(&claim_req("engine-a", at(5 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![asked.clone(), later.clone()]);
    // Long after every lease expired, the idle resource is still never due.
    let got = store.claim(&claim_req("engine-b", at(86_400 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![later, asked]);
}

pub async fn case_claim_skips_live_leases(store: &dyn Store) {
    let key = seed(store, &vnet("sub-live", "rg", "r1"), 1, Schedule::now(T0)).await;
    let got = store.claim(&claim_req("engine-a", T0, 10, 10)).await.expect("claim");
    assert_eq!(got[0].lease, lease("engine-a", at(30 * SECOND), 1));

    assert_eq!(store.claim(&claim_req("engine-b", at(10 * SECOND), 10, 10)).await, Ok(vec![]), "leased elsewhere");
    assert_eq!(store.claim(&claim_req("engine-a", at(10 * SECOND), 10, 10)).await, Ok(vec![]), "already held");

    // A client request (as admission records it) puts the resource back in the intent lane.
    apply(store, ChangeRequest::new(key.clone(), at(12 * SECOND)), |s| {
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.schedule = Schedule::now(at(12 * SECOND));
        res.generation += 1;
        Ok(())
    })
    .await
    .expect("intent");
    let rec = resource(store, &key).await;
    assert_eq!(rec.lease, lease("engine-a", at(30 * SECOND), 1), "a client write keeps the lease");
    assert!(rec.schedule.intent);

    assert_eq!(
        store.claim(&claim_req("engine-b", at(13 * SECOND), 10, 10)).await,
        Ok(vec![]),
        "intent is for the holder"
    );
    let got = store.claim(&claim_req("engine-a", at(13 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![key.clone()]);
    assert_eq!(got[0].lease, lease("engine-a", at(43 * SECOND), 1));
    assert!(!got[0].schedule.intent);

    // Once the lease has run out anyone may take it.
    let got = store.claim(&claim_req("engine-b", at(43 * SECOND + 1), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![key.clone()]);
    assert_eq!(got[0].lease, lease("engine-b", at(73 * SECOND + 1), 2));
    assert_eq!(resource(store, &key).await, got[0]);
}

pub async fn case_claim_epochs(store: &dyn Store) {
    let key = seed(store, &vnet("sub-epoch", "rg", "r1"), 1, Schedule::now(T0)).await;
    let epoch_after = |got: Vec<slipway_domain::ResourceRecord>| {
        assert_eq!(got.len(), 1, "claimed");
        got[0].lease.as_ref().expect("leased").epoch
    };
    assert_eq!(epoch_after(store.claim(&claim_req("a", T0, 1, 1)).await.expect("claim")), 1);
    // Its own lease expired: even the same owner starts a new epoch.
    assert_eq!(epoch_after(store.claim(&claim_req("a", at(31 * SECOND), 1, 1)).await.expect("claim")), 2);
    // Re-taking a live lease on new intent keeps the epoch.
    apply(store, ChangeRequest::new(key.clone(), at(32 * SECOND)), |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.schedule = Schedule::now(at(32 * SECOND));
        Ok(())
    })
    .await
    .expect("intent");
    assert_eq!(epoch_after(store.claim(&claim_req("a", at(33 * SECOND), 1, 1)).await.expect("claim")), 2);
    // A new owner always moves it on.
    assert_eq!(epoch_after(store.claim(&claim_req("b", at(64 * SECOND), 1, 1)).await.expect("claim")), 3);
}

pub async fn case_fencing(store: &dyn Store) {
    let key = seed(store, &vnet("sub-fence", "rg", "r1"), 1, Schedule::now(T0)).await;
    store.claim(&claim_req("engine-a", T0, 1, 1)).await.expect("claim");
    let a1 = Fence { owner: "engine-a".into(), epoch: 1 };

    apply(store, ChangeRequest::new(key.clone(), at(SECOND)).fenced(a1.clone()), |s| {
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.job_seq += 1;
        res.schedule = Schedule { next_due: Some(at(60 * SECOND)), intent: false, drift_due: None };
        Ok(())
    })
    .await
    .expect("the holder writes");
    assert_eq!(resource(store, &key).await.job_seq, 1);

    let got = store.claim(&claim_req("engine-b", at(61 * SECOND), 1, 1)).await.expect("claim");
    assert_eq!(got[0].lease, lease("engine-b", at(91 * SECOND), 2));
    let current = resource(store, &key).await;

    for stale in [a1, Fence { owner: "engine-b".into(), epoch: 1 }, Fence { owner: "engine-a".into(), epoch: 2 }] {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let err = apply(store, ChangeRequest::new(key.clone(), at(62 * SECOND)).fenced(stale.clone()), move |s| {
            flag.store(true, Ordering::SeqCst);
            s.resource = None;
            Ok(())
        })
        .await
        .expect_err("stale fence");
        assert_eq!(err, StoreError::LeaseLost, "{stale:?}");
        assert!(!ran.load(Ordering::SeqCst), "the change must not run under a lost lease");
        assert_eq!(resource(store, &key).await, current);
    }

    let b2 = Fence { owner: "engine-b".into(), epoch: 2 };
    apply(store, ChangeRequest::new(key.clone(), at(63 * SECOND)).fenced(b2.clone()), |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
        Ok(())
    })
    .await
    .expect("the new holder writes");
    assert_eq!(resource(store, &key).await.job_seq, 2);

    // No row, no lease: a fenced write cannot create.
    let missing = vnet("sub-fence", "rg", "missing");
    let target = missing.clone();
    let c = ctx(9, at(64 * SECOND));
    let err = apply(store, ChangeRequest::new(missing.key(), at(64 * SECOND)).fenced(b2.clone()), move |s| {
        admission::admit_put(s, &target, KIND, spec(1), &c).map(|_| ())
    })
    .await
    .expect_err("no row");
    assert_eq!(err, StoreError::LeaseLost);
    assert_eq!(store.get_resource(&missing.key()).await, Ok(None));

    // A released lease fences out its old holder too; clients are never fenced.
    store.release_leases(&"engine-b".into()).await.expect("release");
    let err = apply(store, ChangeRequest::new(key.clone(), at(65 * SECOND)).fenced(b2), |_| Ok(()))
        .await
        .expect_err("released");
    assert_eq!(err, StoreError::LeaseLost);
    noop(store, ChangeRequest::new(key, at(65 * SECOND))).await;
}

pub async fn case_renew_and_release_leases(store: &dyn Store) {
    let mut all = Vec::new();
    for i in 0..3 {
        all.push(seed(store, &vnet("sub-renew", "rg", &format!("r{i}")), 1 + i as u64, Schedule::now(at(i))).await);
    }
    let now = at(SECOND);
    assert_eq!(keys(&store.claim(&claim_req("engine-a", now, 2, 0)).await.expect("claim")), all[..2].to_vec());
    assert_eq!(keys(&store.claim(&claim_req("engine-b", now, 2, 0)).await.expect("claim")), all[2..].to_vec());

    assert_eq!(store.renew_leases(&"engine-a".into(), &all, at(90 * SECOND)).await, Ok(2));
    assert_eq!(resource(store, &all[0]).await.lease, lease("engine-a", at(90 * SECOND), 1));
    assert_eq!(resource(store, &all[2]).await.lease, lease("engine-b", at(31 * SECOND), 1), "others' leases untouched");
    assert_eq!(store.renew_leases(&"nobody".into(), &all, at(90 * SECOND)).await, Ok(0));
    // Only the named resources: a lease the owner does not know about is left to expire.
    assert_eq!(store.renew_leases(&"engine-a".into(), &all[..1], at(95 * SECOND)).await, Ok(1));
    assert_eq!(resource(store, &all[1]).await.lease, lease("engine-a", at(90 * SECOND), 1));
    assert_eq!(resource(store, &all[0]).await.lease, lease("engine-a", at(95 * SECOND), 1));

    assert_eq!(store.release_leases(&"engine-a".into()).await, Ok(2));
    assert_eq!(store.release_leases(&"engine-a".into()).await, Ok(0));
    assert_eq!(resource(store, &all[0]).await.lease, None);
    assert_eq!(resource(store, &all[2]).await.lease, lease("engine-b", at(31 * SECOND), 1));

    // Released work is claimable at once, and the epoch moves past the released one.
    let got = store.claim(&claim_req("engine-c", at(2 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), all[..2].to_vec());
    assert!(got.iter().all(|r| r.lease == lease("engine-c", at(32 * SECOND), 2)), "{got:?}");
}

/// A held resource's `next_due` stays at its admission time; what makes it claimable by
/// another owner is its lease ending, and takeovers go in the order leases ended.
pub async fn case_held_resources_are_taken_over_as_their_leases_end(store: &dyn Store) {
    let mut all = Vec::new();
    for i in 0..3 {
        all.push(seed(store, &vnet("sub-takeover", "rg", &format!("r{i}")), 1 + i as u64, Schedule::now(at(i))).await);
    }
    assert_eq!(keys(&store.claim(&claim_req("engine-a", at(SECOND), 3, 0)).await.expect("claim")), all);
    // r0 renewed far ahead, r1 a little; r2's lease ends first (31 s).
    assert_eq!(store.renew_leases(&"engine-a".into(), &all[..1], at(90 * SECOND)).await, Ok(1));
    assert_eq!(store.renew_leases(&"engine-a".into(), &all[1..2], at(40 * SECOND)).await, Ok(1));
    assert_eq!(resource(store, &all[2]).await.schedule.next_due, Some(at(2)), "due long ago");

    assert_eq!(store.claim(&claim_req("engine-b", at(30 * SECOND), 10, 10)).await, Ok(vec![]), "all still held");
    let got = store.claim(&claim_req("engine-b", at(41 * SECOND), 0, 1)).await.expect("claim");
    assert_eq!(keys(&got), vec![all[2].clone()], "the lease that ended first, not the earliest due");
    let got = store.claim(&claim_req("engine-b", at(41 * SECOND), 0, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![all[1].clone()], "r0 is still held until 90 s");
    assert_eq!(store.claim(&claim_req("engine-c", at(70 * SECOND), 0, 10)).await, Ok(vec![]), "all held again");
    // r1 and r2 (engine-b's) ended together at 71 s, in insertion order; r0 at 90 s.
    let got = store.claim(&claim_req("engine-c", at(91 * SECOND), 0, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![all[1].clone(), all[2].clone(), all[0].clone()]);
}
