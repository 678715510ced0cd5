//! Drives one resource: decide → effect → apply, until it has nothing to do for a while.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use slipway_domain::reconcile::{Effect, Outcome, apply};
use slipway_domain::resource::{Lease, Snapshot};
use slipway_domain::{
    IdempotencyKey, JobId, ProviderName, ResourceKey, ResourceRecord, Timestamp, TypeKey, TypePolicy,
};
use slipway_store::{ChangeRequest, Fence, StoreError, change_with};
use tokio::sync::watch;

use crate::{PendingClaim, Shared, Slot};

mod memory;
mod perform;
mod step;

use memory::{LocalStep, Memory};
use perform::Relinquish;
pub(crate) use step::Context;
use step::{Step, advance, on_grid, store_retry_wait};

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
    watching: Option<(ProviderName, JobId)>,
    /// What the worker last committed or read of the resource; nothing once a client may
    /// have changed it.
    memory: Memory,
    /// Picks the resource's phase of the poll grid.
    key_hash: u64,
    /// What every change reads besides the resource. Kept in step with the record.
    context: Context,
    /// The type has child types: its children are read with every change (a delete
    /// cascades to them).
    has_children: bool,
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
        let has_children = shared.policies.get(&claimed.id.type_key()).is_some_and(|p| p.has_child_types);
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
            memory: Memory::Nothing,
            context: Context::of(claimed),
            has_children,
            key_hash: {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                claimed.key().hash(&mut h);
                h.finish()
            },
        }
    }

    pub async fn run(mut self) {
        let shared = self.shared.clone();
        let Some(policy) = shared.policies.get(&self.type_key) else {
            tracing::warn!(resource = %self.key, r#type = %self.type_key, "no such resource type configured; leaving it alone");
            Box::pin(self.release(None)).await;
            self.leave();
            return;
        };
        // The effect the last step decided on (on what `self.memory` holds): performed next,
        // without another look.
        let mut decided: Option<Effect> = None;
        loop {
            // Only between a recorded outcome and the next decision: an effect that was
            // decided (a launch intent committed) is performed before stopping.
            if decided.is_none() && *self.stop.borrow() {
                // Due again right away: whoever runs next picks it up where we stopped.
                Box::pin(self.release(Some(self.shared.clock.now()))).await;
                self.leave();
                return;
            }
            let performed = match decided.take() {
                // Boxed, like `advance` below: a worker spends most of its life waiting, and
                // its task should then be only as large as the wait, not as its largest step.
                Some(effect) => match Box::pin(self.perform(effect)).await {
                    Ok(performed) => performed,
                    Err(Relinquish) => {
                        // Fenced: a no-op if another node already owns it; otherwise it is due
                        // again at once and whoever claims it resolves the launch intent —
                        // this node too: a claim of ours that came meanwhile is gone on with
                        // here, or nobody would drive the resource until that lease lapsed.
                        Box::pin(self.release(Some(self.shared.clock.now()))).await;
                        if self.exit() {
                            return;
                        }
                        continue;
                    }
                },
                None => None,
            };
            // A newer claim of ours (a client touched the resource) is gone on with only
            // now: a decided effect is performed on the state it was decided on first — it
            // may never be decided again (a cancel is recorded as sent when decided).
            self.take_pending_fence();
            let now = self.shared.clock.now();
            let release_at = match Box::pin(self.advance(policy, performed)).await {
                Advanced::Perform(effect) => {
                    decided = Some(effect);
                    continue;
                }
                Advanced::Released | Advanced::Gone => {
                    // Our own claim may have handed the resource back to us meanwhile (a client
                    // touched it, or our lease had expired while the database was down): go on
                    // under that lease rather than leave it held by nobody until it expires.
                    if self.exit() {
                        return;
                    }
                    continue;
                }
                Advanced::Hold(until) if until.since(now) <= self.shared.options.hold_in_memory => {
                    self.memory.lighten(policy, self.shared.clock.now());
                    // Not boxed: a waiting worker would then hold the box (the wait's ~350
                    // bytes) beside a task no smaller (measured in `size`).
                    self.wait(until.since(now)).await;
                    continue;
                }
                Advanced::Hold(until) => until,
            };
            if Box::pin(self.release(Some(release_at))).await && self.exit() {
                return;
            }
        }
    }

    fn request(&self, now: Timestamp) -> ChangeRequest {
        ChangeRequest::new(self.key.clone(), now)
            .fenced(self.fence.clone())
            .with_related(self.context.related.clone())
            .with_children(self.has_children && self.context.children)
            .with_referrers(self.context.referrers)
    }

    /// One transaction: records what the last effect produced, then — unless that outcome
    /// asks to wait — decides the next effect on the state as just written; with nothing to
    /// do, the resource is released in the same transaction. One commit per step instead
    /// of three (record, decide, release).
    async fn advance(&mut self, policy: &TypePolicy, performed: Option<(Effect, Outcome)>) -> Advanced {
        match self.memory.local_step(policy, &performed, self.shared.clock.now()) {
            Some(LocalStep::Hold(until)) => return Advanced::Hold(self.poll_time(until, policy.poll_interval)),
            Some(LocalStep::Perform(effect)) => return Advanced::Perform(effect),
            None => {}
        }
        let followed_key = performed.as_ref().and_then(|(effect, _)| effect_key(effect).cloned());
        let context = self.context.clone();
        let advanced = self
            .retrying(|now| {
                let policy = policy.clone();
                let performed = performed.clone();
                let read = context.clone();
                move |snap: &mut Snapshot| {
                    let before = crate::progress::Before::of(snap);
                    if snap.resource.as_ref().is_some_and(|r| Context::of(r) != read) {
                        // A client changed what the resource depends on since this request
                        // was made: record the outcome, but decide nothing (not even a wait,
                        // which would drop the client's intent) on context read for the old
                        // dependencies; the worker asks again with the new ones.
                        if let Some((effect, outcome)) = performed {
                            apply(snap, &effect, outcome, &policy, now);
                        }
                        return Ok((Step::Stale, before));
                    }
                    Ok((advance(snap, &policy, performed, now), before))
                }
            })
            .await;
        let Some(((step, before), mut snap)) = advanced else {
            self.memory = Memory::Nothing;
            return Advanced::Gone;
        };
        if let Step::Stale = step {
            self.context = snap.resource.as_ref().map(Context::of).unwrap_or_default();
            self.memory = Memory::Nothing;
            return Advanced::Hold(self.shared.clock.now());
        }
        before.log_changes(self.key.as_str(), &snap, &self.shared.metrics);
        self.signal_outbox(&snap);
        if let Some(res) = snap.resource.as_ref() {
            self.seen_generation = res.generation;
        }
        if let Some(key) = followed_key {
            let followed = snap.resource.as_ref().and_then(|r| {
                let job = r.jobs.iter().find(|j| j.idempotency_key == key)?;
                let id = job.job_id.clone().filter(|_| !job.state.is_terminal())?;
                Some((job.provider.clone(), id))
            });
            self.watch(followed);
        }
        tracing::debug!(resource = %self.key, ?step, "advanced");
        // Queued notifications are written; what stays is the state as it now stands.
        snap.notifications.clear();
        let gone = snap.resource.is_none();
        self.memory = Memory::Settled(Box::new(snap));
        match step {
            Step::Perform(_) | Step::Gone if gone => Advanced::Gone,
            Step::Perform(effect) => Advanced::Perform(effect),
            Step::Gone => Advanced::Gone,
            Step::Hold(until) => Advanced::Hold(self.poll_time(until, policy.poll_interval)),
            Step::Released => Advanced::Released,
            Step::Stale => Advanced::Hold(self.shared.clock.now()),
        }
    }

    /// When to poll for a wait until `until`: on this resource's phase of the type's poll
    /// grid. Polls falling due on one grid point reach the provider as one batch, and one
    /// point per status batch is all batching needs; so with many jobs in flight the grid is
    /// split into phases (by resource), each batch stays full, and the work is spread over
    /// the interval instead of arriving as one burst that stalls the API.
    fn poll_time(&self, until: Timestamp, interval: Duration) -> Timestamp {
        let opts = &self.shared.options;
        let in_flight = self.shared.running.lock().expect("running map").len();
        let most = (interval.as_millis() / (2 * opts.status_window.as_millis()).max(1)).max(1) as u64;
        let phases = (in_flight.div_ceil(opts.status_batch.max(1)) as u64).clamp(1, most);
        let phase = interval.mul_f64((self.key_hash % phases) as f64 / phases as f64);
        on_grid(until, self.shared.clock.now(), interval, phase)
    }

    /// Runs a change until the store takes it. `None` when the lease is lost or the
    /// engine stops while the store is unavailable.
    async fn retrying<R, M, F>(&mut self, make: M) -> Option<(R, Snapshot)>
    where
        R: Send + 'static,
        M: Fn(Timestamp) -> F,
        F: FnOnce(&mut Snapshot) -> Result<R, slipway_domain::admission::Rejection> + Send + 'static,
    {
        let mut failures = 0u32;
        loop {
            let now = self.shared.clock.now();
            match change_with(self.shared.store.as_ref(), self.request(now), make(now)).await {
                Ok(done) => return Some(done),
                Err(StoreError::LeaseLost) => {
                    self.shared.metrics.fenced_writes.inc();
                    tracing::info!(resource = %self.key, "lease lost; another owner continues");
                    return None;
                }
                Err(e) => {
                    tracing::warn!(resource = %self.key, error = %e, "store write failed; retrying");
                    failures = failures.saturating_add(1);
                    if let Woken::Stopping = self.wait(store_retry_wait(self.key_hash, failures)).await {
                        return None;
                    }
                }
            }
        }
    }

    /// Gives the resource back with its next due time. Returns false when a client touched
    /// it since the last decision: then the worker keeps it and decides again.
    async fn release(&mut self, until: Option<Timestamp>) -> bool {
        self.memory = Memory::Nothing;
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
        let shared = self.shared.clone();
        let mut running = shared.running.lock().expect("running map");
        let pending = self.slot.pending.lock().expect("slot").take();
        if let Some(claim) = pending {
            self.adopt_claim(claim);
            return false;
        }
        self.remove_own_slot(&mut running);
        true
    }

    /// Registers the job this worker now follows (or none) in the push-hint index.
    fn watch(&mut self, job: Option<(ProviderName, JobId)>) {
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
            self.shared.metrics.workers.set(running.len() as i64);
        }
    }

    fn take_pending_fence(&mut self) {
        let pending = self.slot.pending.lock().expect("slot").take();
        if let Some(claim) = pending {
            self.adopt_claim(claim);
        }
    }

    /// Goes on under a newer claim of this node: the resource was handed back because a
    /// client touched it (or our lease had lapsed), so what we last saw of it may be stale.
    fn adopt_claim(&mut self, (fence, until, context): PendingClaim) {
        self.fence = fence;
        self.claim_until = until;
        self.context = context;
        self.memory = Memory::Nothing;
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

fn effect_key(effect: &Effect) -> Option<&IdempotencyKey> {
    match effect {
        Effect::Launch { key }
        | Effect::Find { key }
        | Effect::Poll { key }
        | Effect::Cancel { key }
        | Effect::Kill { key }
        | Effect::PollDuplicate { key, .. }
        | Effect::CancelDuplicate { key, .. } => Some(key),
        Effect::Sleep { .. } | Effect::DeleteChildren { .. } => None,
    }
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

/// [`Step`] after the commit, with what the worker needs to go on.
enum Advanced {
    Perform(Effect),
    Hold(Timestamp),
    Released,
    /// The resource is gone or no longer ours.
    Gone,
}

#[cfg(test)]
mod size;
