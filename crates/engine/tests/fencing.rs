//! Leases that lapse under a worker's feet:
//!
//! * a node whose lease passed to another node while one of its launches was in flight (it
//!   was paused, or cut off from the database) must not let that launch reach the provider
//!   when it carries on — even after a lease renewal, which cannot renew a lease it no longer
//!   holds;
//! * a worker fenced out by its own node's newer claim (its lease lapsed while the database
//!   was down, and its node claimed the resource again first) carries on under that claim
//!   instead of leaving the resource leased by nobody until the lease runs out — also when
//!   the claim came while a launch was in flight, which the worker then abandons.
//!
//! On paused time (see `common`): time passes when the test advances tokio's clock, or when
//! every task waits on a timer, and the node's clock and its timers move together.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{Node, WAIT, create, renewals};
use slipway_domain::time::Clock;
use slipway_domain::{ArmId, JobState, ProvisioningState, TypePolicy};
use slipway_provider::{CancelOutcome, JobHandle, JobStatus, LaunchRequest, Launched, Provider, ProviderError};
use slipway_store::conformance::{Faulty, Method};
use slipway_store::{ClaimRequest, Store};
use slipway_test_support::{TestClock, eventually};
use tokio::sync::Semaphore;

/// A launch that waits at a gate before it "sends" anything; records launches that got past
/// it and launches dropped before.
struct Gated {
    /// Closed: no permits until the test adds one.
    gate: Semaphore,
    attempts: AtomicUsize,
    abandoned: Arc<AtomicUsize>,
    launched: Mutex<Vec<String>>,
    finds: AtomicUsize,
}

/// Counts a drop that happens before `defuse`.
struct DropCounter(Option<Arc<AtomicUsize>>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        if let Some(n) = self.0.take() {
            n.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl Provider for Gated {
    fn name(&self) -> &str {
        "gated"
    }
    async fn launch(&self, r: &LaunchRequest) -> Result<Launched, ProviderError> {
        let mut dropped = DropCounter(Some(self.abandoned.clone()));
        self.attempts.fetch_add(1, Ordering::SeqCst);
        self.gate.acquire().await.expect("gate").forget();
        dropped.0 = None;
        self.launched.lock().unwrap().push(r.idempotency_key.to_string());
        Ok(Launched {
            handle: JobHandle { job_id: r.idempotency_key.as_str().into(), data: serde_json::Value::Null },
            state: JobState::Running,
            template: "t".into(),
        })
    }
    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        handles.iter().map(|_| Ok(JobStatus::new(JobState::Running, String::new()))).collect()
    }
    async fn cancel(&self, _: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        Ok(CancelOutcome::AlreadyFinished)
    }
    async fn find(&self, _: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        self.finds.fetch_add(1, Ordering::SeqCst);
        Ok(Vec::new())
    }
}

/// Node a running the resource `name` on a [`Gated`] provider whose gate is closed.
fn gated_node(store: &Arc<Faulty>, name: &str, lease: Duration) -> (Arc<Gated>, Arc<TestClock>, ArmId, Node) {
    let gated = Arc::new(Gated {
        gate: Semaphore::new(0),
        attempts: AtomicUsize::new(0),
        abandoned: Arc::default(),
        launched: Mutex::default(),
        finds: AtomicUsize::new(0),
    });
    let clock = Arc::new(TestClock::new());
    let id = ArmId::new("sub", "rg", "Test.Ns", "things", name).unwrap();
    let policy = TypePolicy { provider: "gated".into(), ..TypePolicy::default() };
    let node = Node::start("a", store.clone(), gated.clone(), &id, policy, clock.clone(), lease);
    (gated, clock, id, node)
}

#[tokio::test(start_paused = true)]
async fn a_launch_in_flight_when_the_lease_passed_on_never_reaches_the_provider() {
    const LEASE: Duration = Duration::from_secs(3);
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite_recording(dir.path(), &[Method::RenewLeases]);
    let (gated, clock, id, node) = gated_node(&store, "r1", LEASE);

    let key = id.key();
    create(store.as_ref(), clock.as_ref(), id).await;

    // Node a launches: its intent is committed and the launch waits at the gate.
    eventually("the launch started", WAIT, async || gated.attempts.load(Ordering::SeqCst) == 1).await;
    // a renews every third of a lease while it waits; each renewal of all its leases keeps
    // it sure of them for two thirds of a lease. Right after one, the next is a third of a
    // lease away: none is under way while b takes over.
    let waiting = renewals(&store).len();
    eventually("a renewal while the launch waits", WAIT, async || renewals(&store).len() > waiting).await;
    // Then the lease passes on, as it does while a is paused: node b, whose clock reads the
    // time after such a pause, takes the resource over.
    let claimed = store
        .claim(&ClaimRequest {
            owner: "b".into(),
            now: clock.now().add(LEASE * 4).add(LEASE),
            lease_for: LEASE,
            intent_limit: 1,
            followup_limit: 1,
            drift_limit: 0,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "b takes the expired lease over");
    let renewals_before = renewals(&store).len();
    // a renews at its next tick, still sure of the lease from its last renewal …
    tokio::time::advance(LEASE / 3).await;
    eventually("a renewal after the takeover", WAIT, async || renewals(&store).len() > renewals_before).await;
    assert_eq!(renewals(&store)[renewals_before], (1, 0), "b's lease is not a's to renew");
    // … and that renewal must not vouch for it: once the last one that renewed everything no
    // longer does, the launch is dropped — before or when it could go on.
    tokio::time::advance(LEASE / 3).await;
    gated.gate.add_permits(1);
    eventually("the launch ended", WAIT, async || {
        gated.abandoned.load(Ordering::SeqCst) + gated.launched.lock().unwrap().len() == 1
    })
    .await;
    assert_eq!(*gated.launched.lock().unwrap(), Vec::<String>::new(), "a launched after losing its lease");
    assert_eq!(gated.abandoned.load(Ordering::SeqCst), 1, "the launch was abandoned");

    // a changed nothing: b holds the lease, the intent stays for b to resolve by Find.
    let stored = store.get_resource(&key).await.unwrap().unwrap();
    assert_eq!(stored.lease.as_ref().map(|l| l.owner.as_str()), Some("b"));
    assert_eq!(stored.jobs.len(), 1);
    assert_eq!(stored.jobs[0].state, JobState::Launching);
    assert!(!stored.jobs[0].absent_confirmed, "the next owner looks for the job before launching it");
    node.stop().await;
}

/// Jobs that run until the test says they are done.
struct Switched {
    done: AtomicBool,
}

#[async_trait]
impl Provider for Switched {
    fn name(&self) -> &str {
        "switched"
    }
    async fn launch(&self, r: &LaunchRequest) -> Result<Launched, ProviderError> {
        Ok(Launched {
            handle: JobHandle { job_id: r.idempotency_key.as_str().into(), data: serde_json::Value::Null },
            state: JobState::Running,
            template: "t".into(),
        })
    }
    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        let state = if self.done.load(Ordering::SeqCst) { JobState::Succeeded } else { JobState::Running };
        handles.iter().map(|_| Ok(JobStatus::new(state, String::new()))).collect()
    }
    async fn cancel(&self, _: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        Ok(CancelOutcome::AlreadyFinished)
    }
    async fn find(&self, r: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        self.launch(r).await.map(|l| vec![l])
    }
}

#[tokio::test(start_paused = true)]
async fn a_worker_fenced_out_by_its_own_nodes_newer_claim_carries_on() {
    // Long enough that waiting for it to run out fails the test.
    const LEASE: Duration = Duration::from_secs(30);
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite_recording(dir.path(), &[Method::RenewLeases]);
    let provider = Arc::new(Switched { done: AtomicBool::new(false) });
    let clock = Arc::new(TestClock::new());
    let id = ArmId::new("sub", "rg", "Test.Ns", "things", "r2").unwrap();
    let policy =
        TypePolicy { provider: "switched".into(), poll_interval: Duration::from_millis(50), ..TypePolicy::default() };
    let node = Node::start("a", store.clone(), provider.clone(), &id, policy, clock.clone(), LEASE);
    let key = id.key();
    let op = create(store.as_ref(), clock.as_ref(), id).await;
    let epoch = async || store.get_resource(&key).await.unwrap().and_then(|r| r.lease).map(|l| l.epoch);
    eventually("the job launched", WAIT, async || {
        store.get_resource(&key).await.unwrap().is_some_and(|r| r.jobs.first().is_some_and(|j| j.job_id.is_some()))
    })
    .await;
    let first = epoch().await.expect("leased while the job runs");

    // The database goes away for longer than the lease; when claims work again, the node
    // claims the resource anew (a new epoch) while its worker still retries its write.
    store.fail(&[Method::Change, Method::RenewLeases]);
    eventually("the worker wrote while the database was down", WAIT, async || store.refused(Method::Change) > 0).await;
    tokio::time::advance(LEASE * 2).await;
    eventually("the node claimed the lapsed lease again", WAIT, async || epoch().await != Some(first)).await;
    provider.done.store(true, Ordering::SeqCst);
    store.heal();

    // The worker is fenced out by that claim, goes on under it and finishes well before the
    // lease could run out (measured on the clock the lease runs on).
    let back = tokio::time::Instant::now();
    eventually("the operation succeeded after the database came back", WAIT, async || {
        let got = store.get_operation(&"sub".into(), &op, clock.now()).await.unwrap().expect("operation");
        got.status == ProvisioningState::Succeeded
    })
    .await;
    let took = back.elapsed();
    assert!(took < Duration::from_secs(10), "not finished {took:?} after the database came back");
    node.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_launch_abandoned_for_its_own_nodes_newer_claim_is_resolved_under_that_claim() {
    // Long enough that waiting for it to run out fails the test.
    const LEASE: Duration = Duration::from_secs(30);
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite_recording(dir.path(), &[Method::RenewLeases]);
    let (gated, clock, id, node) = gated_node(&store, "r3", LEASE);
    let key = id.key();
    create(store.as_ref(), clock.as_ref(), id).await;
    let epoch = async || store.get_resource(&key).await.unwrap().and_then(|r| r.lease).map(|l| l.epoch);
    eventually("the launch started", WAIT, async || gated.attempts.load(Ordering::SeqCst) == 1).await;
    let first = epoch().await.expect("leased while it launches");

    // Renewals fail for longer than the lease (the database was away, the process paused):
    // the node's own claim loop takes the lapsed lease anew while the launch still waits.
    store.fail(&[Method::RenewLeases]);
    tokio::time::advance(LEASE * 2).await;
    eventually("the node claimed the lapsed lease again", WAIT, async || epoch().await != Some(first)).await;
    store.heal();
    let claimed_again = tokio::time::Instant::now();
    // The launch in flight is abandoned; the worker goes on under the new claim — it looks
    // for the job the intent may have started — well before that lease could run out.
    gated.gate.add_permits(1);
    eventually("the intent was looked for", WAIT, async || gated.finds.load(Ordering::SeqCst) > 0).await;
    let took = claimed_again.elapsed();
    assert!(took < LEASE / 3, "looked for the job only {took:?} after the new claim");
    assert_eq!(gated.abandoned.load(Ordering::SeqCst), 1, "the first launch never got past the gate");
    assert_eq!(*gated.launched.lock().unwrap(), Vec::<String>::new());
    // Found absent once a late launch could no longer land, the job is launched once more.
    eventually("the second launch went through", WAIT, async || gated.launched.lock().unwrap().len() == 1).await;
    node.stop().await;
}
