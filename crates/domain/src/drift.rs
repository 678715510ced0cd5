//! Drift detection (docs/osac-lifecycle.md#drift-detection): a `Succeeded` resource of a
//! type with a drift interval has its create job run again, in check mode, on a jittered
//! schedule; what the job would change is drift — something changed the resource behind
//! Slipway's back. The result is kept on the resource; a type may have Slipway put it right
//! at once, as an update operation under the resource's own spec.

use std::time::Duration;

use crate::config_version::{ConfigVersion, fnv1a64};
use crate::ids::{OperationId, ResourceKey};
use crate::time::Timestamp;
use crate::whatif::TaskChange;

/// What the last drift check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriftState {
    /// The automation would change nothing.
    InSync,
    /// The automation would change something: `Drift::changes` says what.
    Drifted,
    /// The check could not tell (its job failed): `Drift::message` says why.
    Unknown,
}

impl DriftState {
    pub fn as_str(self) -> &'static str {
        match self {
            DriftState::InSync => "InSync",
            DriftState::Drifted => "Drifted",
            DriftState::Unknown => "Unknown",
        }
    }
}

/// The resource's last drift check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    pub state: DriftState,
    pub last_checked_at: Timestamp,
    /// The spec version the check ran on.
    pub config_version: ConfigVersion,
    /// `Drifted`: the tasks that would change, with their diffs.
    pub changes: Vec<TaskChange>,
    /// `Unknown`: why the check could not tell.
    pub message: String,
    /// The update operation started to put this drift right (`Remediation::Auto`).
    pub remediation: Option<OperationId>,
}

/// What Slipway does about drift it found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Remediation {
    /// Show it on the resource, in the event feed and in the metrics; change nothing.
    #[default]
    Report,
    /// Also run the resource's own spec again at once, as an update operation.
    Auto,
}

/// A type's drift checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriftPolicy {
    pub interval: Duration,
    pub remediation: Remediation,
}

/// The share of the interval a check's time varies by, either way, so checks of resources
/// created together spread out instead of arriving together every interval.
const JITTER: f64 = 0.1;

/// When the check after one at `from` is due: `interval`, give or take [`JITTER`], varied by
/// the resource and `salt` (its job sequence), so the same inputs give the same time.
pub fn next_check(key: &ResourceKey, salt: u64, from: Timestamp, interval: Duration) -> Timestamp {
    let mut seed = key.as_str().as_bytes().to_vec();
    seed.extend_from_slice(&salt.to_le_bytes());
    let unit = (fnv1a64(&seed) % 10_001) as f64 / 10_000.0; // 0..=1
    let factor = 1.0 - JITTER + 2.0 * JITTER * unit;
    from.add(interval.mul_f64(factor))
}

/// The result of a drift check whose job ended: a successful one is `InSync` when it would
/// change nothing, else `Drifted`; anything else is `Unknown`.
pub fn judge(
    succeeded: bool,
    changes: Option<Vec<TaskChange>>,
    message: &str,
    version: ConfigVersion,
    now: Timestamp,
) -> Drift {
    let changes = changes.unwrap_or_default();
    let state = match (succeeded, changes.is_empty()) {
        (false, _) => DriftState::Unknown,
        (true, true) => DriftState::InSync,
        (true, false) => DriftState::Drifted,
    };
    Drift {
        state,
        last_checked_at: now,
        config_version: version,
        changes: if state == DriftState::Drifted { changes } else { Vec::new() },
        message: if state == DriftState::Unknown { message.to_owned() } else { String::new() },
        remediation: None,
    }
}

/// An operation id for an operation the engine starts itself (a remediation), at `now`: a
/// UUID of version 7 like the API's — its leading bits `now`'s milliseconds, so the
/// subscription's operations still list newest first by id — whose other bits come from
/// `seed` (the drift check's idempotency key, unique per resource and check) instead of a
/// random source, which the domain has none of.
pub fn derived_operation_id(seed: &str, now: Timestamp) -> OperationId {
    let millis = u64::try_from(now.as_millis()).unwrap_or_default();
    let hi = fnv1a64(seed.as_bytes());
    let lo = fnv1a64(format!("{seed}\u{1}").as_bytes());
    OperationId::version7(millis, (hi >> 48) as u16, lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_checks_spread_within_the_jitter_and_repeat() {
        let interval = Duration::from_secs(600);
        let mut seen = Vec::new();
        for n in 0..200 {
            let key = ResourceKey::new(format!("/subscriptions/s/resourcegroups/g/providers/ns/t/r{n}"));
            let at = next_check(&key, 1, Timestamp(0), interval);
            assert_eq!(at, next_check(&key, 1, Timestamp(0), interval), "deterministic");
            assert!((540_000..=660_000).contains(&at.0), "{at:?} within ±10%");
            seen.push(at.0);
        }
        seen.sort_unstable();
        seen.dedup();
        assert!(seen.len() > 150, "spread out: {} distinct times of 200", seen.len());
        let key = ResourceKey::new("k");
        assert_ne!(next_check(&key, 1, Timestamp(0), interval), next_check(&key, 2, Timestamp(0), interval));
    }

    #[test]
    fn judged_by_the_job_and_its_changes() {
        let v = ConfigVersion::new("v1");
        let change = TaskChange { task: "t".into(), host: "h".into(), diff: serde_json::Value::Null };
        assert_eq!(judge(true, Some(vec![]), "", v.clone(), Timestamp(5)).state, DriftState::InSync);
        let drifted = judge(true, Some(vec![change.clone()]), "", v.clone(), Timestamp(5));
        assert_eq!((drifted.state, drifted.changes), (DriftState::Drifted, vec![change.clone()]));
        let unknown = judge(false, Some(vec![change]), "Task 'x' failed", v, Timestamp(5));
        assert_eq!((unknown.state, unknown.message.as_str()), (DriftState::Unknown, "Task 'x' failed"));
        assert!(unknown.changes.is_empty());
    }

    #[test]
    fn derived_operation_ids_order_by_time_and_differ_by_seed() {
        let a = derived_operation_id("op1:7", Timestamp(1_764_000_000_000));
        assert_eq!(a, derived_operation_id("op1:7", Timestamp(1_764_000_000_000)));
        assert_ne!(a, derived_operation_id("op1:8", Timestamp(1_764_000_000_000)));
        assert!(a.as_str() < derived_operation_id("op0:1", Timestamp(1_764_000_000_001)).as_str(), "newer sorts later");
        assert_eq!(&a.as_str()[14..15], "7", "version 7");
        assert_eq!(&a.as_str()[..13], "019ab697-e800", "the time's milliseconds lead");
    }
}
