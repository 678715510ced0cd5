//! How an engine is tuned: its lease, how much it claims and drives at once, its timers, and
//! the cap on drift checks. Plain settings with defaults, fixed when the engine is made.

use std::time::Duration;

use slipway_domain::LeaseOwner;

#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// This node's lease owner name; stable across restarts of the same node.
    pub owner: LeaseOwner,
    pub lease_for: Duration,
    /// Resources claimed per store round trip (split between the two lanes).
    pub claim_batch: usize,
    /// Resources driven at once.
    pub max_concurrent: usize,
    /// How often to look for due work when nothing woke the engine.
    pub idle_interval: Duration,
    /// Waits up to this long keep the lease and sleep in memory; longer ones release.
    pub hold_in_memory: Duration,
    pub sweep_interval: Duration,
    /// How long shutdown waits for in-flight effects.
    pub shutdown_grace: Duration,
    /// Most jobs in one provider status call.
    pub status_batch: usize,
    /// How long a status batch waits for more requests after its first.
    pub status_window: Duration,
    /// Most leases renewed by one store write. A renewal is split, each part waiting for the
    /// last: renewing ten thousand leases in one write held SQLite's writer — and every
    /// client write queued behind it — for 150-320 ms, the whole of the accept p99.
    pub renew_batch: usize,
    /// Most resources this node takes from the drift lane at once (drift checks in flight)…
    pub max_drift_checks: usize,
    /// …and at most this share of `max_concurrent`, so real work always has the rest.
    pub drift_share: f64,
}

impl EngineOptions {
    /// Drift checks this node runs at once: the smaller of the two caps, at least one.
    pub fn drift_cap(&self) -> usize {
        let share = (self.max_concurrent as f64 * self.drift_share).floor() as usize;
        self.max_drift_checks.min(share.max(1))
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            owner: "local".into(),
            lease_for: Duration::from_secs(30),
            claim_batch: 128,
            max_concurrent: 4096,
            idle_interval: Duration::from_secs(1),
            hold_in_memory: Duration::from_secs(60),
            sweep_interval: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(20),
            status_batch: 200,
            status_window: Duration::from_millis(10),
            renew_batch: 500,
            max_drift_checks: 16,
            drift_share: 0.1,
        }
    }
}
