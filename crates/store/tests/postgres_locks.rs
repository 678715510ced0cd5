//! Lock order on PostgreSQL: a batch's wake-ups lock the rows they touch in key order, like
//! everything else, so two batches waking the same rows never deadlock. The interleaving is
//! made, not hoped for: the test's own connection holds the middle row while two wake-ups
//! that meet the rows in opposite orders queue behind it, and only then lets go.

mod pg;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pg::{Schema, open, spy};
use slipway_domain::ArmId;
use slipway_domain::admission::{self, Rejection};
use slipway_domain::reference::Reference;
use slipway_store::conformance::{KIND, T0, at, ctx, spec, subnet, vnet};
use slipway_store::{ChangeRequest, Store};

const CHILDREN: usize = 10;

/// Creates `id`, not due.
async fn seed(store: &dyn Store, id: &ArmId, op: u64) {
    let (target, c) = (id.clone(), ctx(op, T0));
    let req = ChangeRequest::new(id.key(), T0).with_related(id.parent().map(|p| p.key()));
    let change = move |s: &mut slipway_domain::resource::Snapshot| {
        admission::admit_put(s, &target, KIND, spec(1), &c)?;
        s.resource.as_mut().ok_or(Rejection::NotFound)?.schedule = Default::default();
        Ok(())
    };
    store.change(req, Box::new(change)).await.expect("seed");
}

/// Sessions of this database waiting for a lock, as PostgreSQL reports them.
async fn waiting_for_locks(spy: &tokio_postgres::Client) -> i64 {
    let row = spy
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            &[],
        )
        .await
        .expect("pg_stat_activity");
    row.get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wake_ups_of_the_same_rows_in_two_orders_never_deadlock() {
    let schema = Schema::fresh();
    let stores: Vec<Arc<dyn Store>> =
        vec![Arc::new(open(schema.options()).await), Arc::new(open(schema.options()).await)];
    let (one, other) = (stores[0].clone(), stores[1].clone());
    let parent = vnet("Sub-LockOrder", "rg", "p");
    seed(&*one, &parent, 1).await;
    let children: Vec<ArmId> = (0..CHILDREN).map(|i| subnet(&parent, &format!("c{i:02}"))).collect();
    for (i, c) in children.iter().enumerate() {
        seed(&*one, c, 10 + i as u64).await;
    }
    // Every child references `target`, the references written last child first: the
    // subtree's rows lie in the table in key order, their reference rows the other way round,
    // so a statement walking either meets the same children in opposite orders.
    let target = vnet("Sub-LockOrder", "rg", "t");
    seed(&*one, &target, 2).await;
    for c in children.iter().rev() {
        let to = vec![Reference { property: "ref".into(), id: target.clone() }];
        let point = move |s: &mut slipway_domain::resource::Snapshot| {
            s.resource.as_mut().ok_or(Rejection::NotFound)?.references = to;
            Ok(())
        };
        one.change(ChangeRequest::new(c.key(), T0), Box::new(point)).await.expect("reference");
    }

    // The test's own connection locks the middle child's row and keeps it until told.
    let holder = spy().await;
    holder.batch_execute("BEGIN").await.expect("begin");
    let lock = format!("SELECT 1 FROM {} WHERE key = $1 FOR UPDATE", schema.table("resources"));
    holder.execute(&lock, &[&children[CHILDREN / 2].key().as_str()]).await.expect("lock the middle row");
    let spy = spy().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    // One change wakes the parent's subtree, another the target's referrers: the same rows.
    let now = at(2_000);
    let wake = |store: Arc<dyn Store>, at: &ArmId, referrers: bool| {
        let req = ChangeRequest::new(at.key(), now);
        tokio::spawn(async move {
            let change = move |s: &mut slipway_domain::resource::Snapshot| {
                s.wake_children = !referrers;
                s.wake_referrers = referrers;
                Ok(())
            };
            store.change(req, Box::new(change)).await
        })
    };
    let subtree = wake(one.clone(), &parent, false);
    let referrers = wake(other.clone(), &target, true);
    while waiting_for_locks(&spy).await < 2 {
        assert!(Instant::now() < deadline, "the two wake-ups never queued behind the held row");
        tokio::task::yield_now().await;
    }
    holder.batch_execute("COMMIT").await.expect("let go");
    subtree.await.expect("task").expect("the subtree woken");
    referrers.await.expect("task").expect("the referrers woken");

    for c in &children {
        let schedule = stores[0].get_resource(&c.key()).await.expect("read").expect("exists").schedule;
        assert!(schedule.intent && schedule.next_due == Some(now), "{c} woken");
    }
    let conflicts: u64 = stores.iter().map(|s| s.stats().conflicts).sum();
    assert_eq!(conflicts, 0, "transactions rolled back for a deadlock");
}
