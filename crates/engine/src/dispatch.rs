//! Claiming due work: takes due resources from the store's lanes, as many as there is room
//! for, and hands each to its worker — a new one, or the one already driving it, which then
//! goes on under the newer claim.

use std::sync::{Arc, Mutex};

use slipway_store::ClaimRequest;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::{EngineError, Shared, Slot, worker};

pub(super) async fn claim_and_dispatch(
    shared: &Arc<Shared>,
    workers: &mut JoinSet<()>,
    stop: &watch::Receiver<bool>,
) -> Result<(), EngineError> {
    let opts = &shared.options;
    loop {
        let in_flight = shared.running.lock().expect("running map").len();
        let room = opts.max_concurrent.saturating_sub(in_flight).min(opts.claim_batch);
        if room == 0 {
            return Ok(());
        }
        let claimed = shared
            .store
            .claim(&ClaimRequest {
                owner: opts.owner.clone(),
                now: shared.clock.now(),
                lease_for: opts.lease_for,
                intent_limit: room.div_ceil(2),
                followup_limit: room / 2,
                // No type checks drift on a schedule: no drift lane to read (on PostgreSQL a
                // round trip per claim).
                drift_limit: if shared.drift_types.is_empty() { 0 } else { shared.drift_permits.available_permits() },
            })
            .await?;
        let full = claimed.len() >= room;
        shared.metrics.claimed.inc_by(claimed.len() as u64);
        if !claimed.is_empty() {
            tracing::debug!(claimed = claimed.len(), in_flight, "claimed due resources");
        }
        for record in claimed {
            let key = record.key();
            let Some(lease) = record.lease.clone() else { continue };
            let fence = slipway_store::Fence { owner: lease.owner.clone(), epoch: lease.epoch };
            let mut running = shared.running.lock().expect("running map");
            if let Some(slot) = running.get(&key) {
                *slot.pending.lock().expect("slot") = Some((fence, lease.until, worker::Context::of(&record)));
                slot.poke.notify_one();
                continue;
            }
            let slot = Arc::new(Slot { poke: Notify::new(), pending: Mutex::new(None) });
            running.insert(key.clone(), slot.clone());
            shared.metrics.workers.set(running.len() as i64);
            drop(running);
            let job = worker::Worker::new(shared.clone(), &record, &lease, slot, stop.clone());
            // Every line the worker logs names its resource (a span field).
            let span = tracing::info_span!("worker", resource = %record.id);
            let drift_permit = ClaimRequest::drift_lane(&record)
                .then(|| shared.drift_permits.clone().try_acquire_owned().ok())
                .flatten();
            workers.spawn(tracing::Instrument::instrument(
                async move {
                    job.run().await;
                    drop(drift_permit);
                },
                span,
            ));
        }
        let cap = opts.drift_cap();
        shared.metrics.drift_workers.set((cap - shared.drift_permits.available_permits().min(cap)) as i64);
        if !full {
            return Ok(());
        }
    }
}
