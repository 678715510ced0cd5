//! Launch requests that land late. A controller like AWX finishes a request it has received
//! even after the client gave up on it or died: "no job for this key" then proves only that
//! none exists *yet*. Two nodes share one store; node `a` sends a launch that the controller
//! holds, `a`'s lease passes to node `b`, and the held request is processed later:
//!
//! * while the request's ambiguity window lasts, `b` keeps looking and adopts the job when
//!   it appears — one job for the key, never a second launch;
//! * when the window was configured too short and `b` launched the key again, the late job
//!   is found when `b`'s job ends, canceled at once and kept in the resource's
//!   `duplicate_jobs` — it never runs untracked.
//!
//! On paused time (see `common`): the engines' own waits (polls of 50 ms, looks every 2 s)
//! take no real time. `a`'s pause is `b`'s clock, which reads the time after it: for `b`,
//! `a`'s lease has run out, while `a` goes on unaware until its next write is fenced.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{Node, WAIT, create};
use slipway_domain::time::Clock;
use slipway_domain::{ArmId, IdempotencyKey, JobId, JobState, ProvisioningState, TypePolicy};
use slipway_provider::{CancelOutcome, JobHandle, JobStatus, LaunchRequest, Launched, Provider, ProviderError};
use slipway_store::Store;
use slipway_test_support::{TestClock, eventually};
use tokio::sync::{oneshot, watch};

const LEASE: Duration = Duration::from_secs(3);

#[derive(Clone, Debug)]
struct ControllerJob {
    id: JobId,
    key: IdempotencyKey,
    state: JobState,
}

impl ControllerJob {
    fn launched(&self) -> Launched {
        Launched {
            handle: JobHandle { job_id: self.id.clone(), data: serde_json::Value::Null },
            state: self.state,
            template: "t".into(),
        }
    }
}

/// An AWX-like controller: the first `held` launch requests are received at once but
/// processed only when the test releases them; a caller waits at most `answer_within` and
/// then reports the outcome unknown. Processing never depends on the caller still waiting.
#[derive(Clone)]
struct Controller {
    held: Arc<AtomicUsize>,
    release: Arc<watch::Sender<bool>>,
    answer_within: Duration,
    received: Arc<AtomicUsize>,
    jobs: Arc<Mutex<Vec<ControllerJob>>>,
    /// Jobs still running report `Succeeded` once this is set.
    finish: Arc<AtomicBool>,
}

impl Controller {
    fn new(held: usize, answer_within: Duration) -> Controller {
        Controller {
            held: Arc::new(AtomicUsize::new(held)),
            release: Arc::new(watch::channel(false).0),
            answer_within,
            received: Arc::default(),
            jobs: Arc::default(),
            finish: Arc::default(),
        }
    }

    fn jobs_of(&self, key: &IdempotencyKey) -> Vec<ControllerJob> {
        self.jobs.lock().unwrap().iter().filter(|j| j.key == *key).cloned().collect()
    }

    fn all_jobs(&self) -> Vec<ControllerJob> {
        self.jobs.lock().unwrap().clone()
    }

    /// Processes the held requests.
    fn release_held(&self) {
        self.release.send_replace(true);
    }
}

#[async_trait]
impl Provider for Controller {
    fn name(&self) -> &str {
        "controller"
    }

    async fn launch(&self, r: &LaunchRequest) -> Result<Launched, ProviderError> {
        self.received.fetch_add(1, Ordering::SeqCst);
        let held = self.held.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        let mut released = self.release.subscribe();
        let (answer, answered) = oneshot::channel();
        let (jobs, key) = (self.jobs.clone(), r.idempotency_key.clone());
        // The controller's own work, detached from the caller.
        tokio::spawn(async move {
            if held {
                let _ = released.wait_for(|r| *r).await;
            }
            let job = {
                let mut jobs = jobs.lock().unwrap();
                let job = ControllerJob { id: format!("j{}", jobs.len() + 1).into(), key, state: JobState::Running };
                jobs.push(job.clone());
                job
            };
            let _ = answer.send(job);
        });
        match tokio::time::timeout(self.answer_within, answered).await {
            Ok(Ok(job)) => Ok(job.launched()),
            _ => Err(ProviderError::Indeterminate(format!("no answer within {:?}", self.answer_within))),
        }
    }

    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        let finish = self.finish.load(Ordering::SeqCst);
        let jobs = self.jobs.lock().unwrap();
        handles
            .iter()
            .map(|h| {
                let job = jobs
                    .iter()
                    .find(|j| j.id == h.job_id)
                    .ok_or_else(|| ProviderError::NotFound(h.job_id.to_string()))?;
                let state = match job.state {
                    JobState::Running if finish => JobState::Succeeded,
                    s => s,
                };
                Ok(JobStatus::new(state, format!("{state:?}")))
            })
            .collect()
    }

    async fn cancel(&self, h: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        let mut jobs = self.jobs.lock().unwrap();
        let job =
            jobs.iter_mut().find(|j| j.id == h.job_id).ok_or_else(|| ProviderError::NotFound(h.job_id.to_string()))?;
        if job.state.is_terminal() || self.finish.load(Ordering::SeqCst) {
            return Ok(CancelOutcome::AlreadyFinished);
        }
        job.state = JobState::Canceled;
        Ok(CancelOutcome::Requested)
    }

    async fn find(&self, r: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        Ok(self.jobs_of(&r.idempotency_key).iter().map(ControllerJob::launched).collect())
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    clock: Arc<TestClock>,
    controller: Controller,
    id: ArmId,
    policy: TypePolicy,
}

fn setup(held: usize, launch_ambiguity: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite(dir.path());
    let policy = TypePolicy {
        provider: "controller".into(),
        poll_interval: Duration::from_millis(50),
        launch_ambiguity,
        ..TypePolicy::default()
    };
    Setup {
        _dir: dir,
        store,
        clock: Arc::new(TestClock::new()),
        controller: Controller::new(held, Duration::from_millis(200)),
        id: ArmId::new("sub", "rg", "Test.Ns", "things", "r1").unwrap(),
        policy,
    }
}

impl Setup {
    /// Node `owner`, reading `clock`.
    fn node(&self, owner: &str, clock: Arc<TestClock>) -> Node {
        let provider = Arc::new(self.controller.clone());
        Node::start(owner, self.store.clone(), provider, &self.id, self.policy.clone(), clock, LEASE)
    }

    /// `a` sends the launch, which the controller holds; `a` gives up waiting for the answer
    /// and its lease lapses, as for a process paused past it; `b`, whose clock reads the
    /// time after that pause, takes over.
    async fn launch_held_then_lease_passes_to_b(&self) -> (Node, Node) {
        let a = self.node("a", self.clock.clone());
        create(self.store.as_ref(), self.clock.as_ref(), self.id.clone()).await;
        eventually("a sent the launch", WAIT, async || self.controller.received.load(Ordering::SeqCst) == 1).await;
        let epoch = self.resource().await.lease.expect("a holds the lease").epoch;
        let b = self.node("b", Arc::new(TestClock::starting_at(self.clock.now().add(LEASE * 4))));
        eventually("b takes the expired lease over", WAIT, async || {
            self.resource().await.lease.is_some_and(|l| l.owner == "b" && l.epoch > epoch)
        })
        .await;
        (a, b)
    }

    async fn resource(&self) -> slipway_domain::ResourceRecord {
        self.store.get_resource(&self.id.key()).await.unwrap().expect("resource")
    }

    async fn wait_succeeded(&self) {
        let op = slipway_domain::OperationId::parse("00000000-0000-0000-0000-000000000001").unwrap();
        eventually("the operation succeeded", WAIT, async || {
            let got = self.store.get_operation(&"sub".into(), &op, self.clock.now()).await.unwrap().expect("operation");
            assert!(!got.is_terminal() || got.status == ProvisioningState::Succeeded, "{got:?}");
            got.status == ProvisioningState::Succeeded
        })
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_launch_landing_late_inside_its_window_is_adopted_never_launched_twice() {
    let s = setup(usize::MAX, Duration::from_secs(600));
    let (a, b) = s.launch_held_then_lease_passes_to_b().await;
    let key = s.resource().await.jobs[0].idempotency_key.clone();

    // b looks for the job, finds none yet and, inside the window, does not launch.
    eventually("b looked and found nothing yet", WAIT, async || {
        s.controller.received.load(Ordering::SeqCst) > 1
            || s.resource().await.jobs[0].message.contains("may still be processed until")
    })
    .await;
    assert_eq!(s.controller.received.load(Ordering::SeqCst), 1, "b launched the key again inside the window");

    // The held request is processed: its job appears and b adopts it.
    s.controller.release_held();
    eventually("b adopted the late job", WAIT, async || s.resource().await.jobs[0].job_id.is_some()).await;
    s.controller.finish.store(true, Ordering::SeqCst);
    s.wait_succeeded().await;

    let res = s.resource().await;
    assert_eq!(s.controller.jobs_of(&key).len(), 1, "one job for the key: {:?}", s.controller.all_jobs());
    assert_eq!(s.controller.received.load(Ordering::SeqCst), 1, "launched once");
    assert_eq!(res.jobs.len(), 1);
    assert_eq!(res.jobs[0].job_id_text(), "j1");
    assert!(res.duplicate_jobs.is_empty());
    a.stop().await;
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_launch_landing_after_a_too_short_window_is_canceled_and_recorded() {
    // The first request is held; b's relaunch (the window has passed) is answered at once.
    let s = setup(1, Duration::from_secs(1));
    let (a, b) = s.launch_held_then_lease_passes_to_b().await;
    eventually("b relaunched the key", WAIT, async || s.resource().await.jobs[0].job_id.is_some()).await;
    assert_eq!(s.controller.received.load(Ordering::SeqCst), 2);
    let key = s.resource().await.jobs[0].idempotency_key.clone();
    let tracked = s.resource().await.jobs[0].job_id.clone().expect("the job was launched");

    // Then the first request is processed after all: a second job for the key runs.
    s.controller.release_held();
    eventually("the late job exists", WAIT, async || s.controller.jobs_of(&key).len() == 2).await;
    let late = s.controller.jobs_of(&key).into_iter().find(|j| j.id != tracked).unwrap();
    // b's job ends; before its operation ends on it, b looks at the key again.
    s.controller.finish.store(false, Ordering::SeqCst);
    {
        let mut jobs = s.controller.jobs.lock().unwrap();
        jobs.iter_mut().find(|j| j.id == tracked).unwrap().state = JobState::Succeeded;
    }
    s.wait_succeeded().await;

    let res = s.resource().await;
    let at_controller = s.controller.jobs_of(&key);
    assert_eq!(
        at_controller.iter().find(|j| j.id == late.id).map(|j| j.state),
        Some(JobState::Canceled),
        "the duplicate was canceled: {at_controller:?}"
    );
    assert_eq!(res.jobs[0].job_id, Some(tracked), "the tracked job stays the resource's job");
    assert_eq!(res.duplicate_jobs.len(), 1, "{:?}", res.duplicate_jobs);
    let dup = &res.duplicate_jobs[0];
    assert_eq!((dup.job_id_text(), dup.idempotency_key.as_str()), (late.id.as_str(), key.as_str()));
    assert_eq!(dup.state, JobState::Canceled, "followed until it ended");
    a.stop().await;
    b.stop().await;
}
