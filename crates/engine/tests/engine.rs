//! The engine against a real SQLite store and an in-test provider double: lanes, batching
//! of status reads, push hints and shutdown. On paused time (see `common`): the jobs' run
//! times and the poll grid are tokio time, which passes only when every task waits on it.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use common::WAIT;
use slipway_domain::admission::{RequestContext, admit_put};
use slipway_domain::resource::Spec;
use slipway_domain::time::Clock;
use slipway_domain::{ArmId, Initiator, JobId, JobState, OperationId, ProvisioningState, TypePolicy};
use slipway_engine::{Engine, EngineOptions, Providers};
use slipway_provider::{
    CancelOutcome, JobEndHint, JobHandle, JobStatus, LaunchRequest, Launched, Provider, ProviderError,
};
use slipway_store::conformance::{Call, Method};
use slipway_store::{ChangeRequest, Store, change_with};
use slipway_test_support::{TestClock, eventually};
use tokio::time::Instant;

/// Jobs that finish `run_for` after launch; records every status call's size, and keeps
/// the engine's hint for jobs that end.
struct Double {
    run_for: Duration,
    started: Mutex<HashMap<String, Instant>>,
    status_calls: Mutex<Vec<usize>>,
    ends: OnceLock<JobEndHint>,
}

#[async_trait]
impl Provider for Double {
    fn name(&self) -> &str {
        "double"
    }
    fn on_job_end(&self, hint: JobEndHint) {
        let _ = self.ends.set(hint);
    }
    async fn launch(&self, r: &LaunchRequest) -> Result<Launched, ProviderError> {
        self.started.lock().unwrap().entry(r.idempotency_key.to_string()).or_insert_with(Instant::now);
        Ok(Launched {
            handle: JobHandle { job_id: r.idempotency_key.as_str().into(), data: serde_json::Value::Null },
            state: JobState::Running,
            template: "t".into(),
        })
    }
    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        self.status_calls.lock().unwrap().push(handles.len());
        let started = self.started.lock().unwrap();
        handles
            .iter()
            .map(|h| {
                let t = started.get(h.job_id.as_str()).ok_or_else(|| ProviderError::NotFound(h.job_id.to_string()))?;
                let state = if t.elapsed() >= self.run_for { JobState::Succeeded } else { JobState::Running };
                Ok(JobStatus::new(state, format!("{state:?}")))
            })
            .collect()
    }
    async fn cancel(&self, _: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        Ok(CancelOutcome::AlreadyFinished)
    }
    async fn find(&self, r: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        if self.started.lock().unwrap().contains_key(r.idempotency_key.as_str()) {
            self.launch(r).await.map(|l| vec![l])
        } else {
            Ok(Vec::new())
        }
    }
}

/// An engine running on its own task until [`Running::stop`].
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    run: tokio::task::JoinHandle<Result<(), slipway_engine::EngineError>>,
}

impl Running {
    fn start(engine: Engine) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(engine.run(async move {
            let _ = stopped.await;
        }));
        Running { stop, run }
    }

    /// Stops the engine and waits for its drain.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.run.await.unwrap().unwrap();
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    clock: Arc<TestClock>,
    double: Arc<Double>,
    engine: Option<Engine>,
}

fn setup(run_for: Duration, poll: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite(dir.path());
    let clock = Arc::new(TestClock::new());
    let options =
        EngineOptions { owner: "test".into(), idle_interval: Duration::from_millis(50), ..EngineOptions::default() };
    let (engine, double) = engine_of(store.clone(), clock.clone(), run_for, poll, options);
    Setup { _dir: dir, store, clock, double, engine: Some(engine) }
}

/// An engine on `store` whose jobs, on a double of their own, run for `run_for`.
fn engine_of(
    store: Arc<dyn Store>,
    clock: Arc<TestClock>,
    run_for: Duration,
    poll: Duration,
    options: EngineOptions,
) -> (Engine, Arc<Double>) {
    let policy = TypePolicy { provider: "double".into(), poll_interval: poll, ..TypePolicy::default() };
    engine_with(store, clock, run_for, policy, options)
}

/// [`engine_of`] with the type's whole policy.
fn engine_with(
    store: Arc<dyn Store>,
    clock: Arc<TestClock>,
    run_for: Duration,
    policy: TypePolicy,
    options: EngineOptions,
) -> (Engine, Arc<Double>) {
    let double =
        Arc::new(Double { run_for, started: Mutex::default(), status_calls: Mutex::default(), ends: OnceLock::new() });
    let mut providers: Providers = HashMap::new();
    providers.insert("double".into(), double.clone());
    let policies = HashMap::from([(id(0).type_key(), policy)]);
    (Engine::new(store, providers, policies, clock, options), double)
}

fn id(i: usize) -> ArmId {
    ArmId::new("sub", "rg", "Test.Ns", "things", format!("r{i}")).unwrap()
}

async fn create(store: &dyn Store, clock: &dyn Clock, i: usize) -> OperationId {
    let now = clock.now();
    let ctx = RequestContext {
        operation_id: OperationId::parse(&format!("00000000-0000-0000-0000-{i:012}")).unwrap(),
        now,
        initiator: Initiator::default(),
        notification_uri: None,
        api_version: "v1".into(),
        actor: "test".into(),
        actor_type: "User".into(),
        job_context: None,
    };
    let spec = Spec { location: None, tags: Default::default(), properties: serde_json::json!({"i": i}) };
    let op = ctx.operation_id.clone();
    change_with(store, ChangeRequest::new(id(i).key(), now), move |s| admit_put(s, &id(i), "Thing", spec, &ctx))
        .await
        .unwrap();
    op
}

async fn wait_succeeded(store: &dyn Store, clock: &dyn Clock, ops: &[OperationId], timeout: Duration) {
    eventually("every operation succeeded", timeout, async || {
        for op in ops {
            let got = store.get_operation(&"sub".into(), op, clock.now()).await.unwrap().unwrap();
            if got.status != ProvisioningState::Succeeded {
                assert!(!got.is_terminal(), "{got:?}");
                return Err(format!("not done: {got:?}"));
            }
        }
        Ok(())
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn concurrent_polls_reach_the_provider_in_batches() {
    let mut s = setup(Duration::from_millis(600), Duration::from_millis(200));
    let engine = s.engine.take().unwrap();
    let running = Running::start(engine);
    let mut ops = Vec::new();
    for i in 0..60 {
        ops.push(create(s.store.as_ref(), s.clock.as_ref(), i).await);
    }
    wait_succeeded(s.store.as_ref(), s.clock.as_ref(), &ops, Duration::from_secs(30)).await;
    running.stop().await;
    let calls = s.double.status_calls.lock().unwrap().clone();
    let polls: usize = calls.iter().sum();
    // Each job is polled at least 3 times (600 ms at a 200 ms grid); unbatched that is one
    // call per poll.
    assert!(polls >= 60 * 2, "{polls} polls");
    assert!(calls.len() * 4 <= polls, "{} status calls for {polls} polls: {calls:?}", calls.len());
    assert_eq!(s.double.started.lock().unwrap().len(), 60, "one launch per operation");
}

#[tokio::test(start_paused = true)]
async fn a_job_end_the_provider_tells_is_read_before_the_next_poll() {
    // Jobs done at once, polled every 30 s: the first poll falls on the poll grid 15–45 s
    // after the launch, a wait the worker spends in memory (under `hold_in_memory`, 60 s),
    // following the job. Only the told end can finish the operation in under 15 s.
    let poll = Duration::from_secs(30);
    let mut s = setup(Duration::ZERO, poll);
    let engine = s.engine.take().unwrap();
    let running = Running::start(engine);
    let began = Instant::now();
    let op = create(s.store.as_ref(), s.clock.as_ref(), 1).await;
    eventually("the told end to finish the operation", WAIT, async || {
        // Told again until heard: an end told before the worker follows the job is not kept.
        let job = s.double.started.lock().unwrap().keys().next().map(|k| JobId::from(k.as_str()));
        if let (Some(job), Some(tell)) = (job, s.double.ends.get()) {
            tell(&job);
        }
        let got = s.store.get_operation(&"sub".into(), &op, s.clock.now()).await.unwrap().unwrap();
        got.status == ProvisioningState::Succeeded
    })
    .await;
    assert!(began.elapsed() < poll / 2, "finished after {:?}, by a poll", began.elapsed());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn polls_that_see_nothing_new_skip_the_store_until_the_deadline_fails_the_operation() {
    // The job runs for an hour, polled every 200 ms: each poll sees it as recorded, which the
    // worker judges from the job it kept, without a store write; the create's 5 s deadline
    // must still end the operation.
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite_recording(dir.path(), &[Method::Change]);
    let clock = Arc::new(TestClock::new());
    let policy = TypePolicy {
        provider: "double".into(),
        poll_interval: Duration::from_millis(200),
        create_deadline: Duration::from_secs(5),
        ..TypePolicy::default()
    };
    let options =
        EngineOptions { owner: "test".into(), idle_interval: Duration::from_millis(50), ..EngineOptions::default() };
    let (engine, double) = engine_with(store.clone(), clock.clone(), Duration::from_secs(3600), policy, options);
    let running = Running::start(engine);
    let changes = || store.recorded().into_iter().filter(|c| matches!(c, Call::Other(Method::Change))).count();
    let polls = || double.status_calls.lock().unwrap().iter().sum::<usize>();
    let op = create(store.as_ref(), clock.as_ref(), 1).await;
    eventually("the job to be polled", WAIT, async || polls() >= 1).await;
    let (changes_then, polls_then) = (changes(), polls());
    eventually("ten more polls", WAIT, async || polls() >= polls_then + 10).await;
    assert_eq!(changes(), changes_then, "polls that saw the job as recorded wrote to the store");

    eventually("the create to time out", WAIT, async || {
        let got = store.get_operation(&"sub".into(), &op, clock.now()).await.unwrap().unwrap();
        got.status == ProvisioningState::Failed
    })
    .await;
    let got = store.get_operation(&"sub".into(), &op, clock.now()).await.unwrap().unwrap();
    assert_eq!(got.error.map(|e| e.code), Some("OperationTimedOut".to_string()), "timed out by its deadline");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_releases_work_that_a_restart_finishes() {
    let mut s = setup(Duration::from_millis(300), Duration::from_millis(100));
    let engine = s.engine.take().unwrap();
    let running = Running::start(engine);
    let op = create(s.store.as_ref(), s.clock.as_ref(), 1).await;
    // Stop as soon as the job has launched.
    eventually("the job launched", WAIT, async || !s.double.started.lock().unwrap().is_empty()).await;
    running.stop().await;
    let res = s.store.get_resource(&id(1).key()).await.unwrap().unwrap();
    assert!(res.lease.is_none(), "leases are released on shutdown");
    assert!(res.schedule.next_due.is_some(), "and the resource stays due");

    // A new engine on the same store picks it up and finishes without relaunching.
    let mut providers: Providers = HashMap::new();
    providers.insert("double".into(), s.double.clone());
    let policy =
        TypePolicy { provider: "double".into(), poll_interval: Duration::from_millis(100), ..TypePolicy::default() };
    let engine = Engine::new(
        s.store.clone(),
        providers,
        HashMap::from([(id(0).type_key(), policy)]),
        s.clock.clone(),
        EngineOptions { owner: "test".into(), idle_interval: Duration::from_millis(50), ..EngineOptions::default() },
    );
    let running = Running::start(engine);
    wait_succeeded(s.store.as_ref(), s.clock.as_ref(), &[op], Duration::from_secs(10)).await;
    running.stop().await;
    assert_eq!(s.double.started.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn due_work_is_found_without_a_wake_while_leases_renew_often() {
    // Renewals every 100 ms, the idle look for work every 500 ms: renewals must not starve it.
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite(dir.path());
    let clock = Arc::new(TestClock::new());
    let options = EngineOptions {
        owner: "test".into(),
        lease_for: Duration::from_millis(300),
        idle_interval: Duration::from_millis(500),
        ..EngineOptions::default()
    };
    let fast = Duration::from_millis(50);
    let (engine, _) = engine_of(store.clone(), clock.clone(), fast, fast, options);
    let running = Running::start(engine);
    // Written straight to the store: nobody wakes the engine.
    let op = create(store.as_ref(), clock.as_ref(), 7).await;
    wait_succeeded(store.as_ref(), clock.as_ref(), &[op], Duration::from_secs(10)).await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn leases_are_renewed_a_part_at_a_time() {
    // Five jobs that outlive the test, renewals two leases per store write.
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite_recording(dir.path(), &[Method::RenewLeases]);
    let clock = Arc::new(TestClock::new());
    let options = EngineOptions {
        owner: "test".into(),
        lease_for: Duration::from_secs(3),
        renew_batch: 2,
        idle_interval: Duration::from_millis(50),
        ..EngineOptions::default()
    };
    let (engine, double) =
        engine_of(store.clone(), clock.clone(), Duration::from_secs(3600), Duration::from_secs(1), options);
    let running = Running::start(engine);
    for i in 0..5 {
        create(store.as_ref(), clock.as_ref(), i).await;
    }
    eventually("every job launched", WAIT, async || double.started.lock().unwrap().len() == 5).await;
    let renewals = || common::renewals(&store);
    // Two renewals after every job runs; the first may have been under way already.
    let before = renewals().len();
    eventually("two renewals of every lease", WAIT, async || renewals().len() >= before + 6).await;
    let parts = renewals();
    assert!(
        parts[before..].windows(3).any(|w| w == [(2, 2), (2, 2), (1, 1)]),
        "five leases renewed in parts of two: {parts:?}"
    );
    running.stop().await;
}
