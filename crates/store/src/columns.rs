//! What both engines share about rows: the indexed columns derived from a record, claim
//! lane shares, and small conversions. SQL dialects differ; these rules must not.

use slipway_domain::Timestamp;
use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::{ResourceRecord, Schedule};

use crate::StoreError;

/// The indexed columns of a record. The record is authoritative: its lease and schedule go
/// to the columns and are left out of the body, so no stale copy can exist.
pub(crate) struct ResourceColumns {
    pub(crate) subscription: String,
    pub(crate) resource_group: String,
    pub(crate) type_key: String,
    pub(crate) next_due: Option<i64>,
    pub(crate) intent: bool,
    pub(crate) lease_owner: Option<String>,
    pub(crate) lease_until: Option<i64>,
    pub(crate) lease_epoch: Option<i64>,
    pub(crate) generation: i64,
    pub(crate) body: String,
}

impl ResourceColumns {
    pub(crate) fn of(rec: &ResourceRecord, key: &ResourceKey) -> Result<ResourceColumns, StoreError> {
        if &rec.key() != key {
            return Err(StoreError::Internal(format!("a change of {key} produced the resource {}", rec.id)));
        }
        let mut stored = rec.clone();
        stored.lease = None;
        stored.schedule = Schedule::default();
        let body = serde_json::to_string(&stored)
            .map_err(|e| StoreError::Internal(format!("cannot encode resource {key}: {e}")))?;
        let lease = rec.lease.as_ref();
        Ok(ResourceColumns {
            subscription: rec.id.subscription_key(),
            resource_group: rec.id.resource_group_key(),
            type_key: rec.id.type_key().as_str().to_string(),
            next_due: rec.schedule.next_due.map(Timestamp::as_millis),
            intent: rec.schedule.intent,
            lease_owner: lease.map(|l| l.owner.clone()),
            lease_until: lease.map(|l| l.until.as_millis()),
            lease_epoch: lease.map(|l| to_i64(l.epoch, "lease epoch")).transpose()?,
            generation: to_i64(rec.generation, "generation")?,
            body,
        })
    }
}

/// How many to take from each lane: each lane's own limit first, then whatever room one lane
/// leaves unused goes to the other.
pub(crate) fn shares(
    intent_limit: usize,
    followup_limit: usize,
    intent_ready: usize,
    followup_ready: usize,
) -> (usize, usize) {
    let mut intent = intent_ready.min(intent_limit);
    let mut followup = followup_ready.min(followup_limit);
    let mut spare = intent_limit.saturating_add(followup_limit) - intent - followup;
    let extra = (intent_ready - intent).min(spare);
    intent += extra;
    spare -= extra;
    followup += (followup_ready - followup).min(spare);
    (intent, followup)
}

pub(crate) fn to_i64(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Internal(format!("{what} {v} does not fit the database")))
}

/// LIMIT takes a 64-bit integer; anything larger means "no limit" anyway.
pub(crate) fn sql_limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Keys are stored lowercased; lowercasing again makes a hand-built key match too.
pub(crate) fn normalize_key(key: &ResourceKey) -> ResourceKey {
    ResourceKey(key.as_str().to_ascii_lowercase())
}
