//! Role assignments as authorization reads them: one store read per partition (the platform's
//! or a subscription's) at most every `ttl`, not one per request. A change made through this
//! replica forgets its partition at once; another replica's change is seen within `ttl` (the
//! bounded staleness). Time comes from the API's clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slipway_domain::access::RoleAssignment;
use slipway_domain::{SubscriptionId, Timestamp};

/// Past this many partitions, the stale ones are dropped before adding another.
const SWEEP_AT: usize = 10_000;

/// One partition's assignments and when they were read.
type Read = (Timestamp, Arc<Vec<RoleAssignment>>);

#[derive(Default)]
pub struct AssignmentCache {
    partitions: Mutex<HashMap<String, Read>>,
}

fn key(partition: Option<&SubscriptionId>) -> &str {
    partition.map(SubscriptionId::as_str).unwrap_or_default()
}

impl AssignmentCache {
    /// The partition's assignments if read less than `ttl` before `now`.
    pub(crate) fn get(
        &self,
        partition: Option<&SubscriptionId>,
        now: Timestamp,
        ttl: Duration,
    ) -> Option<Arc<Vec<RoleAssignment>>> {
        let partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        let (read_at, assignments) = partitions.get(key(partition))?;
        fresh(*read_at, now, ttl).then(|| assignments.clone())
    }

    pub(crate) fn put(
        &self,
        partition: Option<&SubscriptionId>,
        now: Timestamp,
        assignments: Arc<Vec<RoleAssignment>>,
    ) {
        let mut partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        if partitions.len() >= SWEEP_AT {
            partitions.retain(|_, (read_at, _)| now.millis_after(*read_at) < 60_000);
        }
        partitions.insert(key(partition).to_string(), (now, assignments));
    }

    /// Drops a partition after this replica changed one of its assignments.
    pub(crate) fn forget(&self, partition: Option<&SubscriptionId>) {
        self.partitions.lock().unwrap_or_else(|e| e.into_inner()).remove(key(partition));
    }
}

/// Read at `read_at`, still good at `now`: younger than `ttl`, and not from the future (a clock
/// that stepped back does not keep an entry alive).
fn fresh(read_at: Timestamp, now: Timestamp, ttl: Duration) -> bool {
    let age = now.millis_after(read_at);
    age >= 0 && (age as u128) < ttl.as_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_live_for_the_ttl_and_are_forgotten_on_a_local_change() {
        let cache = AssignmentCache::default();
        let sub = SubscriptionId::new("s");
        let at = |ms| Timestamp::from_millis(ms);
        let ttl = Duration::from_secs(2);
        assert!(cache.get(Some(&sub), at(0), ttl).is_none());
        cache.put(Some(&sub), at(1000), Arc::new(Vec::new()));
        assert!(cache.get(Some(&sub), at(2999), ttl).is_some());
        assert!(cache.get(Some(&sub), at(3000), ttl).is_none(), "stale after the ttl");
        assert!(cache.get(Some(&sub), at(999), ttl).is_none(), "a clock that stepped back re-reads");
        assert!(cache.get(None, at(1000), ttl).is_none(), "the platform's partition is its own");
        cache.forget(Some(&sub));
        assert!(cache.get(Some(&sub), at(1000), ttl).is_none());
        assert!(cache.get(Some(&sub), at(1000), Duration::ZERO).is_none(), "a zero ttl caches nothing");
    }
}
