//! A client's write reaches a running worker as a new claim of its own node. When that claim
//! lands between a step the worker decided (and committed) and performing it, the decided
//! effect is still performed — the decision may not come again: a cancel's request is
//! recorded with the decision to send it — and the worker then goes on under the new claim.
//!
//! On paused time (see `common`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use common::{Node, WAIT, create};
use slipway_domain::admission::admit_cancel;
use slipway_domain::resource::Schedule;
use slipway_domain::time::Clock;
use slipway_domain::{ArmId, JobState, ProvisioningState, TypePolicy};
use slipway_provider::{CancelOutcome, JobHandle, JobStatus, LaunchRequest, Launched, Provider, ProviderError};
use slipway_store::conformance::Method;
use slipway_store::{ChangeRequest, Store, change_with};
use slipway_test_support::{TestClock, eventually};

const CANCEL_RETRY: Duration = Duration::from_secs(60);

/// Jobs that run until they are canceled.
#[derive(Default)]
struct UntilCanceled {
    cancels: AtomicUsize,
}

#[async_trait]
impl Provider for UntilCanceled {
    fn name(&self) -> &str {
        "until-canceled"
    }
    async fn launch(&self, r: &LaunchRequest) -> Result<Launched, ProviderError> {
        Ok(Launched {
            handle: JobHandle { job_id: r.idempotency_key.as_str().into(), data: serde_json::Value::Null },
            state: JobState::Running,
            template: "t".into(),
        })
    }
    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        let state = if self.cancels.load(Ordering::SeqCst) > 0 { JobState::Canceled } else { JobState::Running };
        handles.iter().map(|_| Ok(JobStatus::new(state, String::new()))).collect()
    }
    async fn cancel(&self, _: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        self.cancels.fetch_add(1, Ordering::SeqCst);
        Ok(CancelOutcome::Requested)
    }
    async fn find(&self, r: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        self.launch(r).await.map(|l| vec![l])
    }
}

#[tokio::test(start_paused = true)]
async fn a_cancel_decided_just_before_another_client_write_is_still_sent() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite_recording(dir.path(), &[]);
    let client: Arc<dyn Store> = store.inner().clone();
    let provider = Arc::new(UntilCanceled::default());
    let clock = Arc::new(TestClock::new());
    let id = ArmId::new("sub", "rg", "Test.Ns", "things", "c1").unwrap();
    let policy = TypePolicy {
        provider: "until-canceled".into(),
        poll_interval: Duration::from_millis(50),
        cancel_retry: CANCEL_RETRY,
        ..TypePolicy::default()
    };
    let node = Node::start("a", store.clone(), provider.clone(), &id, policy, clock.clone(), Duration::from_secs(30));
    let key = id.key();
    let op = create(store.as_ref(), clock.as_ref(), id).await;
    eventually("the job runs", WAIT, async || {
        client.get_resource(&key).await.unwrap().is_some_and(|r| r.jobs.first().is_some_and(|j| j.job_id.is_some()))
    })
    .await;

    // The client cancels; the worker's next write decides to send the cancel, and commits …
    let gate = store.hold_next(Method::Change);
    let (cancel_op, now) = (op.clone(), clock.now());
    change_with(client.as_ref(), ChangeRequest::new(key.clone(), now), move |s| admit_cancel(s, &cancel_op, now))
        .await
        .unwrap();
    gate.reached().await;
    // … and before it hears so, another client write makes the node claim the resource anew.
    let now = clock.now();
    change_with(client.as_ref(), ChangeRequest::new(key.clone(), now), move |s| {
        let res = s.resource.as_mut().expect("the resource");
        res.schedule = Schedule::now(now);
        res.generation += 1;
        Ok(())
    })
    .await
    .unwrap();
    // Claimed by the node that holds it, the lease keeps its epoch; the intent is taken.
    eventually("the node claimed the touched resource", WAIT, async || {
        client.get_resource(&key).await.unwrap().is_some_and(|r| !r.schedule.intent)
    })
    .await;
    let opened = tokio::time::Instant::now();
    gate.open();

    // Sent now, not once the cancel is due to be sent again (the domain's retry of a cancel
    // the provider may not have heard).
    eventually("the cancel reached the provider", WAIT, async || provider.cancels.load(Ordering::SeqCst) > 0).await;
    let took = opened.elapsed();
    assert!(took < CANCEL_RETRY / 2, "the cancel was sent {took:?} after it was decided");
    eventually("the operation was canceled", WAIT, async || {
        let got = client.get_operation(&"sub".into(), &op, clock.now()).await.unwrap().expect("operation");
        got.status == ProvisioningState::Canceled
    })
    .await;
    assert_eq!(provider.cancels.load(Ordering::SeqCst), 1, "the cancel reached the provider once");
    node.stop().await;
}
