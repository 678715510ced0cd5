//! What both engines share about rows: the indexed columns derived from a record, claim
//! lane shares (the drift lane, `drift_due`, is served last), and small conversions. SQL
//! dialects differ; these rules must not. Bodies are the store's own documents
//! ([`crate::documents`]), encoded and decoded only here and in `plan`.

use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::{Lease, ResourceRecord, Schedule};
use slipway_domain::{Operation, Timestamp};

use crate::{StoreError, documents};

/// The indexed columns of a record. The record is authoritative: its lease and schedule go
/// to the columns and are left out of the body, so no stale copy can exist.
#[derive(Debug)]
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
    /// The drift lane's time (`Schedule::drift_due`).
    pub(crate) drift_due: Option<i64>,
}

impl ResourceColumns {
    pub(crate) fn of(rec: &ResourceRecord, key: &ResourceKey) -> Result<ResourceColumns, StoreError> {
        if &rec.key() != key {
            return Err(StoreError::Internal(format!("a change of {key} produced the resource {}", rec.id)));
        }
        let body = documents::encode_resource(rec)
            .map_err(|e| StoreError::Internal(format!("cannot encode resource {key}: {e}")))?;
        let lease = rec.lease.as_ref();
        Ok(ResourceColumns {
            subscription: rec.id.subscription_key().as_str().to_string(),
            resource_group: rec.id.resource_group_key(),
            type_key: rec.id.type_key().as_str().to_string(),
            next_due: rec.schedule.next_due.map(Timestamp::as_millis),
            intent: rec.schedule.intent,
            lease_owner: lease.map(|l| l.owner.to_string()),
            lease_until: lease.map(|l| l.until.as_millis()),
            lease_epoch: lease.map(|l| to_i64(l.epoch, "lease epoch")).transpose()?,
            generation: to_i64(rec.generation, "generation")?,
            body,
            drift_due: rec.schedule.drift_due.map(Timestamp::as_millis),
        })
    }
}

/// The two claim lanes: resources a client's write (or a wake-up) made due, and the engine's
/// own follow-ups (polls, retries). The `intent` column says which a due row is in. A third,
/// the drift lane (`drift_due`), is served after both, with whatever room they leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    Intent,
    FollowUp,
}

impl Lane {
    /// The `intent` column's value for rows of this lane.
    pub(crate) fn is_intent(self) -> bool {
        self == Lane::Intent
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

/// The `resources` columns every engine reads a row by, as a literal for `concat!`.
macro_rules! resource_columns {
    () => {
        "key, next_due, intent, lease_owner, lease_until, lease_epoch, generation, body, drift_due"
    };
}
pub(crate) use resource_columns;

/// How many columns [`resource_columns!`] names: a query that selects more reads them after.
pub(crate) const RESOURCE_COLUMN_COUNT: usize = 9;

/// A `resources` row as stored, before its body is trusted.
pub(crate) struct ResourceRow {
    pub(crate) key: String,
    pub(crate) next_due: Option<i64>,
    pub(crate) intent: bool,
    pub(crate) lease_owner: Option<String>,
    pub(crate) lease_until: Option<i64>,
    pub(crate) lease_epoch: i64,
    pub(crate) generation: i64,
    pub(crate) body: String,
    pub(crate) drift_due: Option<i64>,
}

impl ResourceRow {
    /// The record with lease, schedule and generation taken from the columns, which are what
    /// claims and queries act on.
    pub(crate) fn into_record(self) -> Result<ResourceRecord, StoreError> {
        let mut rec =
            documents::decode_resource(&self.body).map_err(|e| corrupt("resource", &self.key, &e.to_string()))?;
        if rec.key().as_str() != self.key {
            return Err(corrupt("resource", &self.key, &format!("body is for {}", rec.id)));
        }
        rec.schedule = Schedule {
            next_due: self.next_due.map(Timestamp),
            intent: self.intent,
            drift_due: self.drift_due.map(Timestamp),
        };
        rec.lease = match (self.lease_owner, self.lease_until) {
            (Some(owner), Some(until)) => Some(Lease {
                owner: owner.into(),
                until: Timestamp(until),
                epoch: from_i64(self.lease_epoch, "lease epoch")?,
            }),
            _ => None,
        };
        rec.generation = from_i64(self.generation, "generation")?;
        Ok(rec)
    }
}

/// An `operations` row's body, checked to be the operation its `id` column names.
pub(crate) fn decode_operation(id: &str, body: &str) -> Result<Operation, StoreError> {
    let op = documents::decode_operation(body).map_err(|e| corrupt("operation", id, &e.to_string()))?;
    if op.id.as_str() != id {
        return Err(corrupt("operation", id, &format!("body is for {}", op.id)));
    }
    Ok(op)
}

/// An `events` row as both engines read it: subscription, position, resource key, kind,
/// time, body.
pub(crate) type EventRowRead = (String, i64, String, String, i64, String);

/// The event an `events` row holds, with its position.
pub(crate) fn decode_event(row: EventRowRead) -> Result<(u64, slipway_domain::event::Event), StoreError> {
    let (subscription, seq, resource_key, kind, at, body) = row;
    let at_seq = || format!("{subscription}#{seq}");
    let columns = documents::EventColumns { subscription: &subscription, resource_key: &resource_key, kind: &kind, at };
    let event = documents::decode_event(&body, columns).map_err(|e| corrupt("event", &at_seq(), &e.to_string()))?;
    Ok((from_i64(seq, "event position")?, event))
}

pub(crate) fn corrupt(what: &str, key: &str, why: &str) -> StoreError {
    StoreError::Internal(format!("corrupt {what} row {key}: {why}"))
}

pub(crate) fn from_i64(v: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Internal(format!("negative {what} {v} in the database")))
}

#[cfg(test)]
mod tests {
    use super::shares;

    #[test]
    fn lanes_share_unused_room() {
        assert_eq!(shares(2, 1, 5, 5), (2, 1), "both lanes full: each gets its own limit");
        assert_eq!(shares(2, 2, 1, 5), (1, 3), "intent leaves room to follow-up");
        assert_eq!(shares(1, 2, 5, 0), (3, 0), "follow-up leaves room to intent");
        assert_eq!(shares(2, 2, 1, 1), (1, 1));
        assert_eq!(shares(0, 0, 3, 3), (0, 0));
        assert_eq!(shares(usize::MAX, 1, 2, 2), (2, 2));
    }

    /// Capping the follow-up query at what the intent lane leaves never changes the outcome.
    #[test]
    fn capping_the_followup_query_changes_nothing() {
        for il in 0..5 {
            for fl in 0..5 {
                let room = il + fl;
                for ir in 0..=room {
                    for fr in 0..8 {
                        let capped = fr.min(room - ir.min(il));
                        assert_eq!(shares(il, fl, ir, capped), shares(il, fl, ir, fr), "{il} {fl} {ir} {fr}");
                    }
                }
            }
        }
    }
}
