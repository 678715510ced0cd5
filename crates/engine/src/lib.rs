//! The provisioning engine: claims due resources from the store under a lease, and drives
//! each with the domain's pure `decide` → provider effect → `apply` loop, one store
//! transaction per step (leases and lanes: docs/store.md; launches: docs/exactly-once.md).
//!
//! Shape: [`EngineOptions`] → [`Engine::new`] → [`Engine::run`] (the service, until its
//! shutdown future resolves) with a cheap [`EngineHandle`] for the API to wake it.
//!
//! Guarantees:
//! * One worker per resource at a time in this process; every write is fenced by the
//!   lease epoch it claimed with, so a worker that lost its lease changes nothing.
//! * A poll that observes no change writes nothing; a short wait keeps the lease and
//!   sleeps in memory, a long one releases the resource with its next due time.
//! * On shutdown, in-flight effects finish and are recorded; leases are released.
//!
//! Claims take from the intent lane (client requests) and the follow-up lane (timers,
//! recovery), then from the drift lane only up to the drift cap (`EngineOptions::drift_cap`),
//! a permit held by each drift worker. The engine also renews the leases it works on (in a
//! task beside its loop, `renew_batch` at a time so client writes interleave), sweeps expired
//! operations and events, and in another task asks each provider to sweep its leftovers and
//! whether it can take work (`readiness`), so a slow controller never holds up claims. A
//! provider that sees its jobs end says so (`Provider::on_job_end`), and the worker following
//! the job polls it at once.
//!
//! Modules: `options` (the engine's settings), `dispatch` (claiming due work and handing it
//! to workers), `renewal` (keeping this node's leases), `worker` (one per resource; its pure
//! parts in `worker::step`, what it keeps between steps in `worker::memory`, performing an
//! effect in `worker::perform`), `effects` (the only calls to providers), `batch` (status
//! reads batched per provider), `cascade`, `progress` (the operator's log lines) and
//! `readiness`.

mod batch;
mod cascade;
mod dispatch;
mod effects;
mod options;
mod progress;
mod readiness;
mod renewal;
mod worker;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slipway_domain::time::Clock;
use slipway_domain::{JobId, ProviderName, ResourceKey, TypeKey, TypePolicy};
use slipway_store::Store;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use dispatch::claim_and_dispatch;
pub use effects::Providers;
pub use options::EngineOptions;
pub use readiness::Readiness;
use renewal::renew_held;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("store: {0}")]
    Store(#[from] slipway_store::StoreError),
}

/// Wakes the engine after a client request was committed.
#[derive(Clone)]
pub struct EngineHandle {
    wake: Arc<Notify>,
    shared: Arc<Shared>,
}

impl EngineHandle {
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// A provider said a job changed (e.g. an AAP webhook): the worker following that job
    /// polls it now instead of at its next poll time. Only a hint — the status is still
    /// read from the provider. Returns whether a worker was following the job.
    pub fn job_changed(&self, provider: &str, job_id: &str) -> bool {
        self.shared.job_changed(ProviderName::from(provider), JobId::from(job_id))
    }

    /// Each provider's last readiness check, by name.
    pub fn provider_readiness(&self) -> Vec<(ProviderName, Readiness)> {
        self.shared.readiness.snapshot()
    }

    /// Notified whenever a committed change queued an async notification.
    pub fn outbox_signal(&self) -> Arc<Notify> {
        self.shared.outbox.clone()
    }
}

pub(crate) struct Shared {
    pub store: Arc<dyn Store>,
    pub providers: Providers,
    pub batchers: effects::Batchers,
    pub policies: HashMap<TypeKey, TypePolicy>,
    /// Opens sealed secret properties for the jobs.
    pub secrets: Option<Arc<slipway_secrets::Keyring>>,
    pub metrics: slipway_metrics::EngineMetrics,
    pub clock: Arc<dyn Clock>,
    pub options: EngineOptions,
    pub outbox: Arc<Notify>,
    /// Workers in flight by resource.
    pub running: Mutex<HashMap<ResourceKey, Arc<Slot>>>,
    /// Which resource's worker follows a (provider, job id), for push hints.
    pub watched: Mutex<HashMap<(ProviderName, JobId), ResourceKey>>,
    /// `until` of the last renewal that renewed every lease this node works on (ms). A lease
    /// can only have been taken over after renewals stopped, so no lease of ours is valid past
    /// this (or past its own claim's `until`, whichever is later).
    pub renewed_until: std::sync::atomic::AtomicI64,
    pub readiness: readiness::ProviderReadiness,
    /// One permit per drift check this node may run; a worker of a resource taken from the
    /// drift lane holds one until it lets the resource go.
    pub drift_permits: Arc<tokio::sync::Semaphore>,
    /// The types with scheduled drift checks (none: the drift lane is never read).
    pub drift_types: Vec<TypeKey>,
}

impl Shared {
    /// Resources of types with drift checks that have none scheduled (provisioned before
    /// their type had an interval, or before this version) go in the drift lane now; the cap
    /// spreads them out. A failure only delays their first check to their next change.
    async fn schedule_first_drift_checks(&self) {
        if self.drift_types.is_empty() {
            return;
        }
        match self.store.schedule_drift(&self.drift_types, self.clock.now()).await {
            Ok(n) if n > 0 => tracing::info!(resources = n, "scheduled a first drift check"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not schedule first drift checks"),
        }
    }

    /// Pokes the worker following `job`, if one is; whether one was.
    fn job_changed(&self, provider: ProviderName, job_id: JobId) -> bool {
        let key = self.watched.lock().expect("watch index").get(&(provider, job_id)).cloned();
        let Some(key) = key else { return false };
        match self.running.lock().expect("running map").get(&key) {
            Some(slot) => {
                slot.poke.notify_one();
                true
            }
            None => false,
        }
    }

    /// Has every provider that sees its jobs end tell the worker following the job. Weak:
    /// the providers are the engine's own, and must not keep it alive.
    fn hear_job_ends(self: &Arc<Self>) {
        for (name, provider) in &self.providers {
            let (engine, name) = (Arc::downgrade(self), name.clone());
            provider.on_job_end(Arc::new(move |job: &JobId| {
                if let Some(engine) = engine.upgrade() {
                    engine.job_changed(name.clone(), job.clone());
                }
            }));
        }
    }
}

fn skipping_interval(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    interval
}

/// How the scheduler reaches a running worker: a claim returned its resource again (a
/// client touched it, or it was released and re-leased), so the worker must decide again
/// with the fence of that claim. Read and written under the `running` map lock, which
/// makes "worker exits" and "scheduler hands it more work" mutually exclusive.
pub(crate) type PendingClaim = (slipway_store::Fence, slipway_domain::Timestamp, worker::Context);

pub(crate) struct Slot {
    pub poke: Notify,
    /// A newer claim of this node: its fence, lease expiry and what the record now depends on.
    pub pending: Mutex<Option<PendingClaim>>,
}

pub struct Engine {
    shared: Arc<Shared>,
    wake: Arc<Notify>,
}

impl Engine {
    pub fn new(
        store: Arc<dyn Store>,
        providers: Providers,
        policies: HashMap<TypeKey, TypePolicy>,
        clock: Arc<dyn Clock>,
        options: EngineOptions,
    ) -> Self {
        let batchers = providers
            .iter()
            .map(|(name, p)| {
                (name.clone(), batch::StatusBatcher::new(p.clone(), options.status_batch, options.status_window))
            })
            .collect();
        let readiness = readiness::ProviderReadiness::new(&providers);
        let drift_types = policies.iter().filter(|(_, p)| p.drift.is_some()).map(|(k, _)| k.clone()).collect();
        let shared = Shared {
            readiness,
            store,
            batchers,
            providers,
            policies,
            secrets: None,
            metrics: Default::default(),
            clock,
            options: options.clone(),
            outbox: Arc::new(Notify::new()),
            running: Mutex::new(HashMap::new()),
            watched: Mutex::new(HashMap::new()),
            renewed_until: std::sync::atomic::AtomicI64::new(0),
            drift_permits: Arc::new(tokio::sync::Semaphore::new(options.drift_cap())),
            drift_types,
        };
        Engine { shared: Arc::new(shared), wake: Arc::new(Notify::new()) }
    }

    /// Opens secret properties with `keyring` when launching jobs.
    pub fn with_secrets(mut self, keyring: Arc<slipway_secrets::Keyring>) -> Self {
        Arc::get_mut(&mut self.shared).expect("with_secrets before the engine is shared").secrets = Some(keyring);
        self
    }

    /// Counts into `metrics` (the application's, which `/metrics` exports).
    pub fn with_metrics(mut self, metrics: slipway_metrics::EngineMetrics) -> Self {
        Arc::get_mut(&mut self.shared).expect("with_metrics before the engine is shared").metrics = metrics;
        self
    }

    pub fn handle(&self) -> EngineHandle {
        EngineHandle { wake: self.wake.clone(), shared: self.shared.clone() }
    }

    /// Runs until `shutdown` resolves, then drains and releases leases.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), EngineError> {
        let shared = self.shared;
        shared.hear_job_ends();
        let opts = shared.options.clone();
        // A restarted node holds nothing: whatever its previous life leased is free again.
        shared.store.release_leases(&opts.owner).await?;
        shared.schedule_first_drift_checks().await;
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut workers = JoinSet::new();
        // After a stall (a paused process, a suspended VM) a missed tick runs once, not once
        // per period missed: a burst of renewals or sweeps would only repeat the same work.
        let mut renew = skipping_interval(opts.lease_for / 3);
        let mut renewal: Option<tokio::task::JoinHandle<()>> = None;
        let mut sweep = skipping_interval(opts.sweep_interval);
        // Provider upkeep runs beside the loop: a controller that does not answer, or a work
        // dir with many job directories to look through, must not hold up claims.
        let upkeep = shared.clone();
        let provider_upkeep = tokio::spawn(async move {
            let mut checks = skipping_interval(readiness::CHECK_INTERVAL);
            let mut sweeps = skipping_interval(upkeep.options.sweep_interval);
            loop {
                tokio::select! {
                    _ = checks.tick() => upkeep.readiness.check_all(&upkeep.providers, &upkeep.metrics).await,
                    _ = sweeps.tick() => {
                        for provider in upkeep.providers.values() {
                            provider.sweep().await;
                        }
                    }
                }
            }
        });
        // Intervals, not a sleep re-armed per loop: the other timers firing must never
        // starve the look for due work.
        let mut idle = tokio::time::interval(opts.idle_interval);
        idle.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = self.wake.notified() => {}
                _ = idle.tick() => {}
                _ = renew.tick() => {
                    // Beside the loop: a renewal of many leases is several store writes, and
                    // claims must not wait for them.
                    if renewal.as_ref().is_some_and(|r| !r.is_finished()) {
                        tracing::warn!("the last lease renewal is still under way; skipping this one");
                    } else {
                        renewal = Some(tokio::spawn(renew_held(shared.clone())));
                    }
                    continue;
                }
                _ = sweep.tick() => {
                    let now = shared.clock.now();
                    match shared.store.sweep_operations(now).await {
                        Ok(n) if n > 0 => tracing::info!(expired = n, "swept expired operations"),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "operation sweep failed"),
                    }
                    match shared.store.sweep_events(now).await {
                        Ok(n) if n > 0 => tracing::info!(pruned = n, "pruned events past their retention"),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "event pruning failed"),
                    }
                    match shared.store.sweep_activity(now).await {
                        Ok(n) if n > 0 => tracing::info!(pruned = n, "pruned activity past its retention"),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "activity pruning failed"),
                    }
                    continue;
                }
                Some(_) = workers.join_next(), if !workers.is_empty() => continue,
            }
            if let Err(e) = claim_and_dispatch(&shared, &mut workers, &stop_rx).await {
                tracing::warn!(error = %e, "claiming due work failed");
            }
        }
        // Awaited, not only aborted: it holds the store, which must be closed (and a SQLite
        // file unlocked) once the engine returns, so the same process can open it again.
        provider_upkeep.abort();
        let _ = provider_upkeep.await;
        tracing::info!(in_flight = workers.len(), "engine stopping");
        let _ = stop_tx.send(true);
        let drained =
            tokio::time::timeout(opts.shutdown_grace, async { while workers.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(left = workers.len(), "shutdown grace elapsed; abandoning workers");
            workers.abort_all();
            // Their cancellation is awaited too: each holds the store.
            while workers.join_next().await.is_some() {}
        }
        if let Some(renewal) = renewal {
            renewal.abort();
            let _ = renewal.await;
        }
        shared.store.release_leases(&opts.owner).await?;
        for provider in shared.providers.values() {
            provider.shutdown().await;
        }
        Ok(())
    }
}
