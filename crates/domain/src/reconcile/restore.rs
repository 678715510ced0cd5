//! A resource of a store restored from a backup, told what its provider ran since: jobs
//! whose keys its history does not have.
//!
//! A backup is older than the provider's state. Without this, the engine would take up the
//! restored resource where the backup left it and launch the next key of its job sequence
//! again — a key the provider already ran after the backup (on AAP, a second job). So before
//! the restored store is served ([`reconcile_restored`]):
//!
//! * the job sequence moves past every key found, so no later launch reuses one;
//! * the operation in flight takes up the newest job found for it, as a `Launching` entry of
//!   that key: the engine resolves it with `find` and adopts the job, as after a lost
//!   launch answer (docs/exactly-once.md);
//! * jobs of operations the backup does not know (or knew as ended) are reported: the
//!   resource was changed — or deleted — after the backup, and its record does not say so.

use crate::job::JobType;
use crate::names::{IdempotencyKey, JobId};
use crate::policy::TypePolicy;
use crate::resource::Snapshot;
use crate::time::Timestamp;

/// A job the provider holds for the resource, as it lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedJob {
    pub key: IdempotencyKey,
    /// The job's word: `create`, `delete`, `validate` or an action's name.
    pub action: String,
    pub job_id: JobId,
    pub state: crate::job::JobState,
}

/// What a restored resource learned from one job its history lacked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The operation in flight had launched it after the backup: it is taken up, never
    /// launched again.
    Adopted { key: IdempotencyKey, job_id: JobId },
    /// An earlier job of the operation in flight, run after the backup; the newer one found
    /// is taken up instead.
    Superseded { key: IdempotencyKey, job_id: JobId },
    /// A delete the backup does not know: the resource may be gone although the store
    /// shows it.
    DeletedAfterBackup { key: IdempotencyKey, job_id: JobId, state: crate::job::JobState },
    /// A create, update or action the backup does not know: the resource may differ from
    /// what the store shows.
    ChangedAfterBackup { key: IdempotencyKey, job_id: JobId, action: String, state: crate::job::JobState },
}

/// Folds `jobs` — every job listed for this resource since the backup — into the restored
/// snapshot (see the module doc) and says what each unknown one meant. Jobs the history
/// already holds are the engine's to follow and are passed over. Makes the resource due
/// when it changed it.
pub fn reconcile_restored(
    snap: &mut Snapshot,
    policy: &TypePolicy,
    jobs: &[ListedJob],
    now: Timestamp,
) -> Vec<Finding> {
    let Some(res) = snap.resource.as_mut() else { return Vec::new() };
    let known = |key: &IdempotencyKey| res.jobs.iter().chain(&res.duplicate_jobs).any(|j| &j.idempotency_key == key);
    let mut unknown: Vec<(&ListedJob, Option<(&str, u64)>)> =
        jobs.iter().filter(|j| !known(&j.key)).map(|j| (j, split_key(&j.key))).collect();
    if unknown.is_empty() {
        return Vec::new();
    }
    unknown.sort_by_key(|(_, parts)| parts.map(|(_, n)| n));
    let highest = unknown.iter().filter_map(|(_, parts)| parts.map(|(_, n)| n)).max().unwrap_or(0);
    res.job_seq = res.job_seq.max(highest);

    let in_flight = res.active_operation_id.clone().filter(|id| snap.operation(id).is_some_and(|o| !o.is_terminal()));
    let of_in_flight = |parts: &Option<(&str, u64)>| {
        in_flight.as_ref().is_some_and(|op| parts.is_some_and(|(prefix, _)| prefix.eq_ignore_ascii_case(op.as_str())))
    };
    let newest = unknown.iter().rposition(|(_, parts)| of_in_flight(parts));
    let mut findings = Vec::with_capacity(unknown.len());
    for (i, (job, parts)) in unknown.iter().enumerate() {
        let (key, job_id) = (job.key.clone(), job.job_id.clone());
        findings.push(if Some(i) == newest {
            Finding::Adopted { key, job_id }
        } else if of_in_flight(parts) {
            Finding::Superseded { key, job_id }
        } else if job.action == "delete" {
            Finding::DeletedAfterBackup { key, job_id, state: job.state }
        } else {
            Finding::ChangedAfterBackup { key, job_id, action: job.action.clone(), state: job.state }
        });
    }
    if let (Some(i), Some(op)) = (newest, in_flight) {
        let job = unknown[i].0;
        super::record_intent(snap, policy, job_type_of(&job.action), Some(op), job.key.clone(), now);
    }
    if let Some(res) = snap.resource.as_mut() {
        res.schedule = crate::resource::Schedule::now(now);
    }
    findings
}

/// `{operation id}:{n}`, the shape of every key Slipway makes.
fn split_key(key: &IdempotencyKey) -> Option<(&str, u64)> {
    let (prefix, n) = key.as_str().rsplit_once(':')?;
    Some((prefix, n.parse().ok()?))
}

fn job_type_of(action: &str) -> JobType {
    match action {
        "create" => JobType::Provision,
        "delete" => JobType::Deprovision,
        "validate" => JobType::Preflight,
        _ => JobType::Action,
    }
}
