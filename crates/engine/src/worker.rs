//! Drives one resource: decide → effect → apply, until it has nothing to do for a while.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use slipway_domain::reconcile::{Effect, apply, decide};
use slipway_domain::resource::{Lease, Snapshot};
use slipway_domain::{ResourceKey, ResourceRecord, Timestamp, TypeKey, TypePolicy};
use slipway_store::{ChangeRequest, Fence, StoreError, change_with};
use tokio::sync::watch;

use crate::{Shared, Slot, effects};

/// Pause before retrying a step the store could not take (e.g. the database is down).
const STORE_RETRY: Duration = Duration::from_millis(500);

pub(crate) struct Worker {
    shared: Arc<Shared>,
    key: ResourceKey,
    type_key: TypeKey,
    fence: Fence,
    /// Lease expiry as claimed; renewals extend it (see `Shared::renewed_until`).
    claim_until: Timestamp,
    slot: Arc<Slot>,
    stop: watch::Receiver<bool>,
    /// Client-write generation of the state the last decision saw.
    seen_generation: u64,
    /// The (provider, job id) this worker follows, registered for push hints.
    watching: Option<(String, String)>,
}

/// Why a wait ended.
enum Woken {
    DueOrPoked,
    Stopping,
}

impl Worker {
    /// A worker for a resource just claimed with `lease`.
    pub fn new(
        shared: Arc<Shared>,
        claimed: &ResourceRecord,
        lease: &Lease,
        slot: Arc<Slot>,
        stop: watch::Receiver<bool>,
    ) -> Self {
        Worker {
            shared,
            key: claimed.key(),
            type_key: claimed.id.type_key(),
            fence: Fence { owner: lease.owner.clone(), epoch: lease.epoch },
            claim_until: lease.until,
            slot,
            stop,
            seen_generation: claimed.generation,
            watching: None,
        }
    }

    pub async fn run(mut self) {
        let Some(policy) = self.shared.policies.get(&self.type_key).cloned() else {
            tracing::warn!(resource = %self.key, r#type = %self.type_key, "no such resource type configured; leaving it alone");
            self.release(None).await;
            self.leave();
            return;
        };
        loop {
            if *self.stop.borrow() {
                // Due again right away: whoever runs next picks it up where we stopped.
                self.release(Some(self.shared.clock.now())).await;
                self.leave();
                return;
            }
            self.take_pending_fence();
            let next = self.step(&policy).await;
            let now = self.shared.clock.now();
            let release_at = match next {
                Next::Continue => continue,
                Next::Gone => {
                    // Our own claim may have handed the resource back to us meanwhile (our
                    // lease had expired, e.g. while the database was down): go on under that
                    // lease rather than leave it held by nobody until it expires.
                    if self.exit() {
                        return;
                    }
                    continue;
                }
                Next::Relinquish => {
                    // Fenced: a no-op if another node already owns it; otherwise it is due
                    // again at once and whoever claims it resolves the launch intent.
                    self.release(Some(now)).await;
                    self.leave();
                    return;
                }
                Next::Wait(until) if until.since(now) <= self.shared.options.hold_in_memory => {
                    self.wait(until.since(now)).await;
                    continue;
                }
                Next::Wait(until) => Some(until),
                Next::Idle(until) => until,
            };
            if self.release(release_at).await && self.exit() {
                return;
            }
        }
    }

    fn request(&self, now: Timestamp) -> ChangeRequest {
        ChangeRequest::new(self.key.clone(), now).fenced(self.fence.clone())
    }

    /// One decide (and, if it names one, one effect and its recording).
    async fn step(&mut self, policy: &TypePolicy) -> Next {
        let decided = self
            .retrying(|now| {
                let policy = policy.clone();
                move |snap: &mut Snapshot| {
                    if let Some(res) = snap.resource.as_mut() {
                        // We are looking at the freshest state now: the client's intent is seen.
                        res.schedule.intent = false;
                    }
                    Ok(decide(snap, &policy, now))
                }
            })
            .await;
        let Some((effect, snap)) = decided else { return Next::Gone };
        self.signal_outbox(&snap);
        let Some(res) = snap.resource.as_ref() else { return Next::Gone };
        self.seen_generation = res.generation;
        tracing::debug!(resource = %self.key, ?effect, "decided");
        if let Effect::Sleep { until } = effect {
            return Next::Idle(until);
        }
        let launching = matches!(effect, Effect::Launch { .. });
        if launching && !self.lease_surely_held() {
            tracing::warn!(resource = %self.key, "lease may have expired; leaving the launch to the next owner");
            return Next::Relinquish;
        }
        let performing = effects::perform(&self.shared.providers, &self.shared.batchers, res, &effect);
        let performed = if launching {
            // A launch is several requests (template lookup, prompt check, retries, then the
            // POST): a pause between them can outlast the lease as surely as one before them.
            match self.while_lease_surely_held(performing).await {
                Some(performed) => performed,
                None => {
                    tracing::warn!(resource = %self.key, "lease may have expired during the launch; leaving it to the next owner");
                    return Next::Relinquish;
                }
            }
        } else {
            performing.await
        };
        let Some(outcome) = performed else {
            return Next::Continue;
        };
        let recorded = self
            .retrying(|now| {
                let policy = policy.clone();
                let effect = effect.clone();
                let outcome = outcome.clone();
                move |snap: &mut Snapshot| Ok(apply(snap, &effect, outcome, &policy, now))
            })
            .await;
        let Some((hold, snap)) = recorded else { return Next::Gone };
        self.signal_outbox(&snap);
        let followed = snap.resource.as_ref().and_then(|r| {
            let key = effect_key(&effect)?;
            let job = r.jobs.iter().find(|j| j.idempotency_key == key)?;
            (!job.state.is_terminal() && !job.job_id.is_empty()).then(|| (job.provider.clone(), job.job_id.clone()))
        });
        self.watch(followed);
        match hold {
            Some(until) if until > self.shared.clock.now() => Next::Wait(on_grid(until, policy.poll_interval)),
            _ => Next::Continue,
        }
    }

    /// Runs a change until the store takes it. `None` when the lease is lost or the
    /// engine stops while the store is unavailable.
    async fn retrying<R, M, F>(&mut self, make: M) -> Option<(R, Snapshot)>
    where
        R: Send + 'static,
        M: Fn(Timestamp) -> F,
        F: FnOnce(&mut Snapshot) -> Result<R, slipway_domain::admission::Rejection> + Send + 'static,
    {
        loop {
            let now = self.shared.clock.now();
            match change_with(self.shared.store.as_ref(), self.request(now), make(now)).await {
                Ok(done) => return Some(done),
                Err(StoreError::LeaseLost) => {
                    tracing::info!(resource = %self.key, "lease lost; another owner continues");
                    return None;
                }
                Err(e) => {
                    tracing::warn!(resource = %self.key, error = %e, "store write failed; retrying");
                    if let Woken::Stopping = self.wait(STORE_RETRY).await {
                        return None;
                    }
                }
            }
        }
    }

    /// Gives the resource back with its next due time. Returns false when a client touched
    /// it since the last decision: then the worker keeps it and decides again.
    async fn release(&mut self, until: Option<Timestamp>) -> bool {
        let seen = self.seen_generation;
        let released = self
            .retrying(move |now| {
                move |snap: &mut Snapshot| {
                    let Some(res) = snap.resource.as_mut() else { return Ok(true) };
                    if res.schedule.intent || res.generation != seen {
                        return Ok(false);
                    }
                    res.lease = None;
                    res.schedule.next_due = until.map(|t| t.max(now));
                    Ok(true)
                }
            })
            .await;
        released.is_none_or(|(done, _)| done)
    }

    /// Leaves the running set whatever is pending (the lease is gone or we are stopping).
    fn leave(&mut self) {
        let mut running = self.shared.running.lock().expect("running map");
        self.remove_own_slot(&mut running);
    }

    /// Leaves the running set unless the scheduler handed over more work; true if gone.
    fn exit(&mut self) -> bool {
        let mut running = self.shared.running.lock().expect("running map");
        if let Some((fence, until)) = self.slot.pending.lock().expect("slot").take() {
            self.fence = fence;
            self.claim_until = until;
            return false;
        }
        self.remove_own_slot(&mut running);
        true
    }

    /// Registers the job this worker now follows (or none) in the push-hint index.
    fn watch(&mut self, job: Option<(String, String)>) {
        if self.watching == job {
            return;
        }
        let Ok(mut watched) = self.shared.watched.lock() else { return };
        if let Some(old) = self.watching.take()
            && watched.get(&old) == Some(&self.key)
        {
            watched.remove(&old);
        }
        if let Some(new) = job {
            watched.insert(new.clone(), self.key.clone());
            self.watching = Some(new);
        }
    }

    /// Removes this worker's slot — never a successor's that took the key after we left.
    fn remove_own_slot(&self, running: &mut HashMap<ResourceKey, Arc<Slot>>) {
        if running.get(&self.key).is_some_and(|s| Arc::ptr_eq(s, &self.slot)) {
            running.remove(&self.key);
        }
    }

    fn take_pending_fence(&mut self) {
        if let Some((fence, until)) = self.slot.pending.lock().expect("slot").take() {
            self.fence = fence;
            self.claim_until = until;
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

    async fn wait(&mut self, d: Duration) -> Woken {
        if *self.stop.borrow() {
            return Woken::Stopping;
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => Woken::DueOrPoked,
            _ = self.slot.poke.notified() => Woken::DueOrPoked,
            _ = self.stop.changed() => Woken::Stopping,
        }
    }

    fn signal_outbox(&self, snap: &Snapshot) {
        if !snap.notifications.is_empty() {
            self.shared.outbox.notify_one();
        }
    }
}

fn effect_key(effect: &Effect) -> Option<&str> {
    match effect {
        Effect::Launch { key } | Effect::Find { key } | Effect::Poll { key } | Effect::Cancel { key } => Some(key),
        Effect::Sleep { .. } => None,
    }
}

/// Rounds a wake-up time up to the type's poll grid, so the polls of many resources fall
/// due together and reach the provider as one batch.
fn on_grid(t: Timestamp, interval: Duration) -> Timestamp {
    let step = interval.as_millis().max(1) as i64;
    Timestamp(t.0.div_euclid(step) * step + if t.0.rem_euclid(step) == 0 { 0 } else { step })
}

impl Drop for Worker {
    /// A worker that panicked or was aborted must not leave its resource marked as running:
    /// the scheduler would only ever poke the dead slot.
    fn drop(&mut self) {
        self.watch(None);
        if let Ok(mut running) = self.shared.running.lock() {
            self.remove_own_slot(&mut running);
        }
    }
}

enum Next {
    /// Decide again now.
    Continue,
    /// Decide again at this time.
    Wait(Timestamp),
    /// Nothing to do until this time (or until a client asks for something).
    Idle(Option<Timestamp>),
    /// The resource is gone or no longer ours.
    Gone,
    /// Ours, but we cannot be sure for long enough to act: hand it back.
    Relinquish,
}
