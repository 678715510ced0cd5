//! Status reads are batched per provider: workers ask for one job's status, and whatever
//! requests arrive together (or while the previous batch is in flight) go to the provider
//! as one `status` call — for AAP one list request for many jobs. Workers poll on a shared
//! time grid (see `worker`), so due polls arrive together.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use slipway_provider::{JobHandle, JobStatus, Provider, ProviderError};
use tokio::sync::{mpsc, oneshot};

type Reply = oneshot::Sender<Result<JobStatus, ProviderError>>;

pub(crate) struct StatusBatcher {
    provider: Arc<dyn Provider>,
    max_batch: usize,
    /// How long to wait for more requests after the first of a batch.
    window: Duration,
    queue: OnceLock<mpsc::UnboundedSender<(JobHandle, Reply)>>,
}

impl StatusBatcher {
    pub fn new(provider: Arc<dyn Provider>, max_batch: usize, window: Duration) -> Self {
        StatusBatcher { provider, max_batch: max_batch.max(1), window, queue: OnceLock::new() }
    }

    pub async fn status(&self, handle: JobHandle) -> Result<JobStatus, ProviderError> {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(self.provider.clone(), rx, self.max_batch, self.window));
            tx
        });
        let (reply, answer) = oneshot::channel();
        if queue.send((handle, reply)).is_err() {
            return Err(ProviderError::Transient("status batcher stopped".into()));
        }
        answer.await.unwrap_or_else(|_| Err(ProviderError::Transient("status batch was dropped".into())))
    }
}

async fn run(
    provider: Arc<dyn Provider>,
    mut rx: mpsc::UnboundedReceiver<(JobHandle, Reply)>,
    max_batch: usize,
    window: Duration,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + window;
        while batch.len() < max_batch {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(req)) => batch.push(req),
                _ => break,
            }
        }
        let handles: Vec<JobHandle> = batch.iter().map(|(h, _)| h.clone()).collect();
        let mut results = provider.status(&handles).await.into_iter();
        for (_, reply) in batch {
            let result = results
                .next()
                .unwrap_or_else(|| Err(ProviderError::Transient("provider returned too few statuses".into())));
            let _ = reply.send(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use slipway_domain::JobState;
    use slipway_provider::{CancelOutcome, LaunchRequest, Launched};
    use std::sync::Mutex;

    /// Records the size of every status call.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<usize>>,
    }

    #[async_trait]
    impl Provider for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
        async fn launch(&self, _: &LaunchRequest) -> Result<Launched, ProviderError> {
            Err(ProviderError::Permanent("unused".into()))
        }
        async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
            self.calls.lock().unwrap().push(handles.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
            handles.iter().map(|h| Ok(JobStatus::new(JobState::Running, h.job_id.clone()))).collect()
        }
        async fn cancel(&self, _: &JobHandle) -> Result<CancelOutcome, ProviderError> {
            Err(ProviderError::Permanent("unused".into()))
        }
        async fn find(&self, _: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
            Ok(Vec::new())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_requests_share_one_provider_call_and_get_their_own_answer() {
        let recorder = Arc::new(Recorder::default());
        let batcher = Arc::new(StatusBatcher::new(recorder.clone(), 200, Duration::from_millis(10)));
        let mut tasks = Vec::new();
        for i in 0..450 {
            let b = batcher.clone();
            tasks.push(tokio::spawn(async move {
                b.status(JobHandle { job_id: i.to_string().into(), data: serde_json::Value::Null }).await
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            let status = t.await.unwrap().unwrap();
            assert_eq!(status.message, i.to_string(), "each caller gets its own job's status");
        }
        assert_eq!(*recorder.calls.lock().unwrap(), vec![200, 200, 50], "batches capped at max_batch");
    }
}
