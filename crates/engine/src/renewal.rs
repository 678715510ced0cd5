//! Lease renewal: every resource this node works on keeps its lease for another `lease_for`,
//! renewed in parts so client writes interleave. Only a renewal of every lease vouches for
//! them all, which is what a worker checks before it launches.

use std::sync::Arc;

use slipway_domain::{ResourceKey, Timestamp};
use slipway_store::StoreError;

use crate::Shared;

/// Renews the leases of every resource this node works on, for another `lease_for`.
pub(super) async fn renew_held(shared: Arc<Shared>) {
    let until = shared.clock.now().add(shared.options.lease_for);
    let held: Vec<ResourceKey> = shared.running.lock().expect("running map").keys().cloned().collect();
    let renewed = renew_leases(&shared, &held, until).await;
    let outcome = match &renewed {
        Ok(n) if *n as usize == held.len() => "all",
        Ok(_) => "partial",
        Err(_) => "error",
    };
    shared.metrics.renewals.get_or_create(&slipway_metrics::OutcomeLabels { outcome: outcome.into() }).inc();
    match renewed {
        // Only a renewal of every lease we work on vouches for all of them: one that renewed
        // fewer missed a lease another node took over meanwhile (we were paused or cut off),
        // whose worker must not take this renewal for its own (it may be about to launch).
        Ok(n) if n as usize == held.len() => {
            shared.renewed_until.store(until.as_millis(), std::sync::atomic::Ordering::SeqCst)
        }
        Ok(n) => tracing::debug!(renewed = n, held = held.len(), "some leases were not renewed"),
        Err(e) => tracing::warn!(error = %e, "lease renewal failed"),
    }
}

/// Renews the leases on `held` until `until`, `renew_batch` at a time, so that client writes
/// get their turn between the parts; how many were renewed in all.
async fn renew_leases(shared: &Shared, held: &[ResourceKey], until: Timestamp) -> Result<u64, StoreError> {
    let mut renewed = 0;
    for part in held.chunks(shared.options.renew_batch.max(1)) {
        renewed += shared.store.renew_leases(&shared.options.owner, part, until).await?;
    }
    Ok(renewed)
}
