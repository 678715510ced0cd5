//! Performing a decided effect: a poll on what the worker remembers, a cascade to the
//! children, or a provider call. A launch goes ahead only while the worker's lease is surely
//! held, so a paused process cannot start a job another node is already resolving.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use slipway_domain::reconcile::{Effect, Outcome};
use slipway_domain::{IdempotencyKey, Job, Timestamp};

use super::memory::Memory;
use super::{Worker, effect_key};
use crate::{cascade, effects};

impl Worker {
    /// Performs a decided effect on the state it was decided on. A launch goes ahead only
    /// while our lease is surely held, checked before it and before every request of it.
    pub(super) async fn perform(&self, effect: Effect) -> Result<Option<(Effect, Outcome)>, Relinquish> {
        let snap = match &self.memory {
            Memory::Settled(snap) if snap.resource.is_some() => snap.as_ref(),
            // Only the poll it waits for is decided on this memory (`Memory::local_step`).
            Memory::Waiting(wait) => {
                let Effect::Poll { key } = &effect else { return Ok(None) };
                if key != wait.key() {
                    return Ok(None);
                }
                let backends = self.backends();
                let polling = effects::poll(&backends, wait.job());
                let outcome =
                    tracing::Instrument::instrument(polling, effect_span(key.as_str(), Some(wait.job()))).await;
                return Ok(Some((effect, outcome)));
            }
            _ => return Ok(None),
        };
        if let Effect::DeleteChildren { children } = &effect {
            let outcome =
                cascade::delete_children(&self.shared.store, self.shared.clock.as_ref(), snap, children).await;
            return Ok(Some((effect, outcome)));
        }
        let launching = matches!(effect, Effect::Launch { .. });
        if launching && !self.lease_surely_held() {
            tracing::warn!(resource = %self.key, "lease may have expired; leaving the launch to the next owner");
            return Err(Relinquish);
        }
        let backends = self.backends();
        let key = effect_key(&effect).map(IdempotencyKey::as_str).unwrap_or_default();
        let job = snap.resource.as_ref().and_then(|r| r.jobs.iter().find(|j| j.idempotency_key == key));
        let span = effect_span(key, job);
        let performing = tracing::Instrument::instrument(effects::perform(&backends, snap, &effect), span);
        let outcome = if launching {
            // A launch is several requests (template lookup, prompt check, retries, then the
            // POST): a pause between them can outlast the lease as surely as one before them.
            self.while_lease_surely_held(performing).await.ok_or_else(|| {
                tracing::warn!(resource = %self.key, "lease may have expired during the launch; leaving it to the next owner");
                Relinquish
            })?
        } else {
            performing.await
        };
        Ok(outcome.map(|outcome| (effect, outcome)))
    }

    fn backends(&self) -> effects::Backends<'_> {
        effects::Backends {
            providers: &self.shared.providers,
            batchers: &self.shared.batchers,
            secrets: self.shared.secrets.as_deref(),
            types: &self.shared.policies,
            metrics: &self.shared.metrics,
        }
    }

    /// Whether our lease surely still holds for a while. Checked right before a launch: a
    /// process that was paused (SIGSTOP, a long GC-like stall) after recording the launch
    /// intent may have lost the resource to another node, which will resolve the intent
    /// itself — launching now could start the same job twice.
    fn lease_surely_held(&self) -> bool {
        self.lease_sure_for().is_some()
    }

    /// How much longer [`Self::lease_surely_held`] holds; `None` if it does not.
    fn lease_sure_for(&self) -> Option<Duration> {
        let renewed = Timestamp(self.shared.renewed_until.load(std::sync::atomic::Ordering::SeqCst));
        let valid_until = renewed.max(self.claim_until);
        let margin = self.shared.options.lease_for / 3;
        let now = self.shared.clock.now();
        (now.add(margin) < valid_until).then(|| valid_until.sub(margin).since(now))
    }

    /// Drives `work` only while the lease is surely held: checked before every poll, so
    /// nothing `work` would start next (another request, a retry) starts once the lease may
    /// have passed to another node — a process paused mid-launch (SIGSTOP, a stall) checks
    /// before anything else when it resumes. `None` when `work` was abandoned; what it had
    /// already sent may have taken effect, which the next owner's `Find` resolves.
    async fn while_lease_surely_held<F: Future>(&self, work: F) -> Option<F::Output> {
        let mut work = std::pin::pin!(work);
        // Wakes the check when the lease stops being sure, should `work` not wake first.
        let mut expiry = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
        std::future::poll_fn(|cx| {
            let Some(sure_for) = self.lease_sure_for() else { return Poll::Ready(None) };
            if let Poll::Ready(done) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            expiry.as_mut().reset(tokio::time::Instant::now() + sure_for);
            if expiry.as_mut().poll(cx).is_ready() {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        })
        .await
    }
}

/// Every line a provider logs for an effect names its operation and job (the worker's span
/// already names the resource).
fn effect_span(key: &str, job: Option<&Job>) -> tracing::Span {
    let operation = job.and_then(|j| j.operation_id.as_ref()).map(|o| o.to_string()).unwrap_or_default();
    let job_id = job.map(Job::job_id_text).unwrap_or_default();
    tracing::info_span!("effect", operation = %operation, key = %key, job = %job_id)
}

/// Ours, but we cannot be sure for long enough to act: hand it back.
pub(super) struct Relinquish;
