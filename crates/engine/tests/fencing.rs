//! Leases that lapse under a worker's feet:
//!
//! * a node whose lease passed to another node while one of its launches was in flight (it
//!   was paused, or cut off from the database) must not let that launch reach the provider
//!   when it carries on — even after a lease renewal, which cannot renew a lease it no longer
//!   holds;
//! * a worker fenced out by its own node's newer claim (its lease lapsed while the database
//!   was down, and its node claimed the resource again first) carries on under that claim
//!   instead of leaving the resource leased by nobody until the lease runs out.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::{Node, create, until};
use slipway_domain::time::{Clock, ShiftedClock};
use slipway_domain::{ArmId, JobState, ProvisioningState, TypePolicy};
use slipway_provider::{CancelOutcome, JobHandle, JobStatus, LaunchRequest, Launched, Provider, ProviderError};
use slipway_store::conformance::{Call, Faulty, Method};
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_store::{ClaimRequest, Store};
use tokio::sync::Semaphore;

/// A launch that waits at a gate before it "sends" anything; records launches that got past
/// it and launches dropped before.
struct Gated {
    /// Closed: no permits until the test adds one.
    gate: Semaphore,
    attempts: AtomicUsize,
    abandoned: Arc<AtomicUsize>,
    launched: Mutex<Vec<String>>,
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
        Ok(Vec::new())
    }
}

/// The lease renewals the store recorded, as (leases named, leases renewed).
fn renewals(store: &Faulty) -> Vec<(usize, u64)> {
    store
        .recorded()
        .into_iter()
        .filter_map(|c| match c {
            Call::Renew(named, renewed) => Some((named, renewed)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_in_flight_when_the_lease_passed_on_never_reaches_the_provider() {
    const LEASE: Duration = Duration::from_secs(3);
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(SqliteOptions::new(dir.path().join("db"))).unwrap());
    let store = Arc::new(Faulty::new(sqlite).recording(&[Method::RenewLeases]));
    let gated = Arc::new(Gated {
        gate: Semaphore::new(0),
        attempts: AtomicUsize::new(0),
        abandoned: Arc::default(),
        launched: Mutex::default(),
    });
    let clock = Arc::new(ShiftedClock::default());
    let id = ArmId::new("sub", "rg", "Test.Ns", "things", "r1").unwrap();
    let policy = TypePolicy { provider: "gated".into(), ..TypePolicy::default() };
    let node = Node::start("a", store.clone(), gated.clone(), &id, policy, clock.clone(), LEASE);

    let key = id.key();
    create(store.as_ref(), clock.as_ref(), id).await;

    // Node a launches: its intent is committed and the launch waits at the gate.
    until("the launch started", || gated.attempts.load(Ordering::SeqCst) == 1).await;
    // Then time passes for a as for a process paused past its lease, and node b takes the
    // resource over (b's clock a little ahead, so that a renewal racing this cannot matter).
    clock.advance(LEASE * 4);
    let claimed = store
        .claim(&ClaimRequest {
            owner: "b".into(),
            now: clock.now().add(LEASE),
            lease_for: LEASE,
            intent_limit: 1,
            followup_limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "b takes the expired lease over");
    let renewals_before = renewals(&store).len();
    // a renews (what a resumed node does first): the lease it lost is not renewed …
    until("a renewal after the takeover", || renewals(&store).len() > renewals_before).await;
    assert_eq!(renewals(&store)[renewals_before], (1, 0), "b's lease is not a's to renew");
    // … and that renewal must not vouch for it: when the launch could go on, it is dropped.
    gated.gate.add_permits(1);
    until("the launch ended", || gated.abandoned.load(Ordering::SeqCst) + gated.launched.lock().unwrap().len() == 1)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_fenced_out_by_its_own_nodes_newer_claim_carries_on() {
    // Long enough that waiting for it to run out fails the test.
    const LEASE: Duration = Duration::from_secs(30);
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(SqliteOptions::new(dir.path().join("db"))).unwrap());
    let store = Arc::new(Faulty::new(sqlite).recording(&[Method::RenewLeases]));
    let provider = Arc::new(Switched { done: AtomicBool::new(false) });
    let clock = Arc::new(ShiftedClock::default());
    let id = ArmId::new("sub", "rg", "Test.Ns", "things", "r2").unwrap();
    let policy =
        TypePolicy { provider: "switched".into(), poll_interval: Duration::from_millis(50), ..TypePolicy::default() };
    let node = Node::start("a", store.clone(), provider.clone(), &id, policy, clock.clone(), LEASE);
    let key = id.key();
    let op = create(store.as_ref(), clock.as_ref(), id).await;
    let epoch = || async { store.get_resource(&key).await.unwrap().and_then(|r| r.lease).map(|l| l.epoch) };
    let launched = || async {
        store.get_resource(&key).await.unwrap().is_some_and(|r| r.jobs.first().is_some_and(|j| !j.job_id.is_empty()))
    };
    let start = Instant::now();
    while !launched().await {
        assert!(start.elapsed() < Duration::from_secs(10), "the job never launched");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first = epoch().await.expect("leased while the job runs");

    // The database goes away for longer than the lease; when claims work again, the node
    // claims the resource anew (a new epoch) while its worker still retries its write.
    store.fail(&[Method::Change, Method::RenewLeases]);
    let start = Instant::now();
    while store.refused(Method::Change) == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the worker never wrote while the database was down");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    clock.advance(LEASE * 2);
    let start = Instant::now();
    while epoch().await == Some(first) {
        assert!(start.elapsed() < Duration::from_secs(10), "the node never claimed the lapsed lease again");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    provider.done.store(true, Ordering::SeqCst);
    store.heal();

    // The worker is fenced out by that claim, goes on under it and finishes well before the
    // lease could run out.
    let back = Instant::now();
    loop {
        let got = store.get_operation(&"sub".into(), &op, clock.now()).await.unwrap().expect("operation");
        if got.status == ProvisioningState::Succeeded {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "not finished {:?} after the database came back",
            back.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.stop().await;
}
