//! The pure parts of a worker step: what a change reads besides the resource (`Context`),
//! what one transaction decides (`advance` → `Step`), and when the worker goes on (the poll
//! grid, the wait before retrying a store write). No I/O here.

use std::time::Duration;

use slipway_domain::reconcile::{Effect, Outcome, apply, decide};
use slipway_domain::resource::Snapshot;
use slipway_domain::{ResourceKey, ResourceRecord, RetryPolicy, Timestamp, TypePolicy};

/// Pause before retrying a step the store could not take (e.g. the database is down): 500 ms
/// doubling to 2 s, each wait stretched by up to half, drawn from the resource's key hash, so
/// the workers of a replica do not all retry in step when the database comes back.
pub(super) fn store_retry_wait(key_hash: u64, failures: u32) -> Duration {
    let policy = RetryPolicy::exponential(Duration::from_millis(500), Duration::from_secs(2)).with_jitter(0.5);
    policy.jittered(policy.delay(failures), key_hash.rotate_left(failures))
}

/// What a change of a resource reads besides the resource: a child's parent, the referenced
/// resources and their ancestors (its decisions wait for them), and while it is being deleted,
/// who references it (its delete job waits for them to go).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Context {
    pub(super) related: Vec<ResourceKey>,
    pub(super) referrers: bool,
    /// Whether its children are read (for a type that has them): always for a parent, and
    /// for a resource group only while it is deleted — a group's every step would otherwise
    /// read everything in it, and the group is woken by each of its resources' deletes.
    pub(super) children: bool,
}

impl Context {
    pub(crate) fn of(res: &ResourceRecord) -> Self {
        Context {
            related: slipway_domain::reference::related_keys(&res.id, &res.references),
            referrers: res.is_deleting(),
            children: !res.id.is_group() || res.is_deleting(),
        }
    }
}

/// Moves a wake-up time to the nearest point of a poll grid (points `interval` apart,
/// shifted by `phase`), but after `now`: the polls of many resources fall due together and
/// reach the provider as one batch, while a job is still polled once per interval on
/// average. (Rounding up instead would make the poll after a poll that took a millisecond
/// wait two intervals.)
pub(super) fn on_grid(t: Timestamp, now: Timestamp, interval: Duration, phase: Duration) -> Timestamp {
    let step = interval.as_millis().max(1) as i64;
    let shift = phase.as_millis() as i64 % step;
    let nearest = (t.0 - shift + step / 2).div_euclid(step) * step + shift;
    Timestamp(if nearest > now.0 { nearest } else { nearest + step })
}

/// The pure body of one worker transaction (see [`Worker::advance`]).
pub(super) fn advance(
    snap: &mut Snapshot,
    policy: &TypePolicy,
    performed: Option<(Effect, Outcome)>,
    now: Timestamp,
) -> Step {
    if let Some((effect, outcome)) = performed
        && let Some(until) = apply(snap, &effect, outcome, policy, now)
        && until > now
    {
        return Step::Hold(until);
    }
    let Some(res) = snap.resource.as_mut() else { return Step::Gone };
    // We are looking at the freshest state now: the client's intent is seen.
    res.schedule.intent = false;
    match decide(snap, policy, now) {
        Effect::Sleep { until } => {
            if let Some(res) = snap.resource.as_mut() {
                res.lease = None;
                res.schedule.next_due = until.map(|t| t.max(now));
            }
            Step::Released
        }
        effect => Step::Perform(effect),
    }
}

/// What one worker transaction decided.
#[derive(Debug)]
pub(super) enum Step {
    Perform(Effect),
    /// Decide again at this time (an effect's outcome asked to wait, e.g. for the next poll).
    Hold(Timestamp),
    /// Nothing to do for now; the lease was given back in the same transaction.
    Released,
    /// The resource is gone.
    Gone,
    /// The change read the wrong dependencies (see `Worker::advance`): nothing was decided.
    Stale,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_land_on_the_nearest_grid_point_after_now() {
        let second = Duration::from_secs(1);
        // A poll at 3.001 s asks for 4.001 s: the next poll is at 4 s, not 5 s.
        let none = Duration::ZERO;
        assert_eq!(on_grid(Timestamp(4_001), Timestamp(3_001), second, none), Timestamp(4_000));
        assert_eq!(on_grid(Timestamp(3_600), Timestamp(2_600), second, none), Timestamp(4_000));
        assert_eq!(on_grid(Timestamp(3_300), Timestamp(2_300), second, none), Timestamp(3_000));
        // Never at or before now, whatever the interval.
        assert_eq!(on_grid(Timestamp(1_400), Timestamp(1_000), second, none), Timestamp(2_000));
        assert_eq!(on_grid(Timestamp(5_000), Timestamp(4_000), second, none), Timestamp(5_000));
        // A phase shifts the grid: points at .25 s past each second.
        let quarter = Duration::from_millis(250);
        assert_eq!(on_grid(Timestamp(4_001), Timestamp(3_001), second, quarter), Timestamp(4_250));
        assert_eq!(on_grid(Timestamp(3_300), Timestamp(2_300), second, quarter), Timestamp(3_250));
        assert_eq!(on_grid(Timestamp(3_200), Timestamp(3_260), second, quarter), Timestamp(4_250));
    }

    #[test]
    fn store_retries_back_off_and_spread_by_resource() {
        let ms = |d: Duration| d.as_millis();
        for hash in [0, 1, u64::MAX / 3, u64::MAX] {
            let waits: Vec<u128> = (1..=5).map(|n| ms(store_retry_wait(hash, n))).collect();
            assert!((500..=750).contains(&waits[0]) && (1_000..=1_500).contains(&waits[1]), "{waits:?}");
            assert!(waits[2..].iter().all(|w| *w == 2_000), "capped at 2 s: {waits:?}");
        }
        let first: std::collections::BTreeSet<u128> =
            (0..64u64).map(|i| ms(store_retry_wait(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), 1))).collect();
        assert!(first.len() > 16, "resources do not all retry at once: {first:?}");
    }
}
