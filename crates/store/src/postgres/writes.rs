//! Everything that writes. Each function is one attempt of one call on one connection: it
//! returns [`Failure::Retry`] only when nothing it did was committed.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Object, Transaction};
use slipway_domain::Timestamp;
use slipway_domain::resource::ResourceRecord;
use tokio_postgres::types::ToSql;

use super::Failure;
use super::rows;
use crate::columns::resource_columns;
use crate::columns::{Lane, shares, sql_limit};
use crate::plan::claim_row;
use crate::{ClaimRequest, Notification, StoreError};

/// Due rows of one lane that `owner` may take, earliest first; rows another transaction
/// holds (a change, another replica's claim) are skipped, not waited for.
const CLAIMABLE: &str = concat!(
    "SELECT ",
    resource_columns!(),
    " FROM resources
     WHERE intent = $1 AND next_due IS NOT NULL AND claimable_at <= $2
       AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < $2
            OR (lease_owner = $3 AND intent))
     ORDER BY claimable_at, seq LIMIT $4
     FOR UPDATE SKIP LOCKED"
);

/// Rows of the drift lane, earliest check first: due, idle (nothing else due), unleased.
const DRIFT_DUE: &str = concat!(
    "SELECT ",
    resource_columns!(),
    " FROM resources
     WHERE drift_due IS NOT NULL AND drift_due <= $1 AND next_due IS NULL
       AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < $1)
     ORDER BY drift_due, seq LIMIT $2
     FOR UPDATE SKIP LOCKED"
);

const TAKE_LEASES: &str =
    "UPDATE resources r SET lease_owner = $1, lease_until = $2, lease_epoch = u.epoch, intent = FALSE
     FROM unnest($3::TEXT[], $4::BIGINT[]) AS u(key, epoch)
     WHERE r.key = u.key";

pub(super) async fn claim(client: &mut Object, req: Arc<ClaimRequest>) -> Result<Vec<ResourceRecord>, Failure> {
    let room = req.intent_limit.saturating_add(req.followup_limit);
    if room == 0 {
        return Ok(Vec::new());
    }
    let now = req.now.as_millis();
    let tx = client.transaction().await?;
    let (claimable, take) = tokio::join!(biased; tx.prepare_cached(CLAIMABLE), tx.prepare_cached(TAKE_LEASES));
    let (claimable, take) = (claimable?, take?);
    // Each lane may end up with the whole room when the other is empty; the follow-up lane
    // never gets more than the intent lane leaves, so fewer rows are locked for nothing.
    let intent =
        tx.query(&claimable, &[&Lane::Intent.is_intent(), &now, &req.owner.as_str(), &sql_limit(room)]).await?;
    let followup_room = room - intent.len().min(req.intent_limit);
    let followup = if followup_room == 0 {
        Vec::new()
    } else {
        tx.query(&claimable, &[&Lane::FollowUp.is_intent(), &now, &req.owner.as_str(), &sql_limit(followup_room)])
            .await?
    };
    let (from_intent, from_followup) = shares(req.intent_limit, req.followup_limit, intent.len(), followup.len());
    let drift_room = req.drift_limit.min(room - from_intent - from_followup);
    let drift = if drift_room == 0 {
        Vec::new()
    } else {
        let stmt = tx.prepare_cached(DRIFT_DUE).await?;
        tx.query(&stmt, &[&now, &sql_limit(drift_room)]).await?
    };
    let until = req.now.add(req.lease_for);
    let mut keys = Vec::with_capacity(from_intent + from_followup);
    let mut epochs = Vec::with_capacity(from_intent + from_followup);
    let mut claimed = Vec::with_capacity(from_intent + from_followup);
    for row in intent.iter().take(from_intent).chain(followup.iter().take(from_followup)).chain(&drift) {
        let taken = claim_row(rows::read_resource_row(row)?, &req)?;
        keys.push(taken.key);
        epochs.push(taken.epoch);
        claimed.push(taken.record);
    }
    if claimed.is_empty() {
        // Nothing written: dropping the transaction rolls it back.
        return Ok(claimed);
    }
    tx.execute(&take, &[&req.owner.as_str(), &until.as_millis(), &keys, &epochs]).await?;
    commit(tx).await?;
    Ok(claimed)
}

// Single statements run in their own implicit transaction. A retry after a lost connection
// may repeat one that did commit; each is harmless to repeat (renewing, releasing, sweeping,
// finishing, abandoning are idempotent; a repeated reschedule counts one attempt too many).

async fn execute(client: &mut Object, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, Failure> {
    let stmt = client.prepare_cached(sql).await?;
    Ok(client.execute(&stmt, params).await?)
}

/// Renewals and releases lock their rows in key order, as changes and wake-ups do, so a
/// renewal waiting on a batch's row never holds one that batch waits for.
pub(super) async fn renew_leases(
    client: &mut Object,
    owner: String,
    keys: Vec<String>,
    until: Timestamp,
) -> Result<u64, Failure> {
    execute(
        client,
        "WITH held AS (SELECT key FROM resources WHERE lease_owner = $1 AND key = ANY($3) ORDER BY key FOR UPDATE)
         UPDATE resources r SET lease_until = $2 FROM held WHERE r.key = held.key AND r.lease_owner = $1",
        &[&owner, &until.as_millis(), &keys],
    )
    .await
}

/// The epoch stays: the next claim, by anyone, increments it past the released fences.
pub(super) async fn release_leases(client: &mut Object, owner: String) -> Result<u64, Failure> {
    execute(
        client,
        "WITH held AS (SELECT key FROM resources WHERE lease_owner = $1 ORDER BY key FOR UPDATE)
         UPDATE resources r SET lease_owner = NULL, lease_until = NULL FROM held
         WHERE r.key = held.key AND r.lease_owner = $1",
        &[&owner],
    )
    .await
}

pub(super) async fn sweep_operations(client: &mut Object, now: Timestamp) -> Result<u64, Failure> {
    execute(client, "DELETE FROM operations WHERE terminal AND expires_at <= $1", &[&now.as_millis()]).await
}

/// Rows locked in key order first, as every other multi-row write of resources does.
pub(super) async fn schedule_drift(client: &mut Object, type_keys: Vec<String>, at: Timestamp) -> Result<u64, Failure> {
    execute(
        client,
        "WITH idle AS (SELECT key FROM resources
                       WHERE type_key = ANY($1) AND drift_due IS NULL AND next_due IS NULL
                       ORDER BY key FOR UPDATE SKIP LOCKED)
         UPDATE resources r SET drift_due = $2 FROM idle
         WHERE r.key = idle.key AND r.drift_due IS NULL AND r.next_due IS NULL",
        &[&type_keys, &at.as_millis()],
    )
    .await
}

pub(super) async fn sweep_events(client: &mut Object, now: Timestamp) -> Result<u64, Failure> {
    execute(client, "DELETE FROM events WHERE expires_at <= $1", &[&now.as_millis()]).await
}

pub(super) async fn sweep_activity(client: &mut Object, now: Timestamp) -> Result<u64, Failure> {
    execute(client, "DELETE FROM activity WHERE expires_at <= $1", &[&now.as_millis()]).await
}

/// Due rows, each hidden for `hold` by the statement that picks it; rows another notifier
/// holds at the same moment are skipped.
const CLAIM_NOTIFICATIONS: &str = "WITH due AS (
         SELECT id, subscription, operation_id, uri, attempts, next_attempt_at, created_at FROM outbox
         WHERE state = 'pending' AND next_attempt_at <= $1
         ORDER BY next_attempt_at, id LIMIT $2
         FOR UPDATE SKIP LOCKED)
     UPDATE outbox o SET next_attempt_at = $3 FROM due WHERE o.id = due.id
     RETURNING due.id, due.subscription, due.operation_id, due.uri, due.attempts, due.next_attempt_at, due.created_at";

pub(super) async fn claim_notifications(
    client: &mut Object,
    now: Timestamp,
    limit: usize,
    hold: Duration,
) -> Result<Vec<Notification>, Failure> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    // A transaction of its own so that a row that cannot be decoded hides nothing.
    let tx = client.transaction().await?;
    let stmt = tx.prepare_cached(CLAIM_NOTIFICATIONS).await?;
    let rows = tx.query(&stmt, &[&now.as_millis(), &sql_limit(limit), &now.add(hold).as_millis()]).await?;
    let mut due = rows.iter().map(rows::read_notification).collect::<Result<Vec<_>, _>>()?;
    if !due.is_empty() {
        commit(tx).await?;
    }
    // RETURNING has no order of its own.
    due.sort_by_key(|n| (n.next_attempt_at, n.id));
    Ok(due)
}

// The notification updates are idempotent: an unknown or already finished id is no error,
// since a notifier retrying after a lost answer must not fail.

pub(super) async fn finish_notification(client: &mut Object, id: i64) -> Result<u64, Failure> {
    execute(client, "DELETE FROM outbox WHERE id = $1", &[&id]).await
}

pub(super) async fn reschedule_notification(
    client: &mut Object,
    id: i64,
    next_attempt_at: Timestamp,
    last_error: String,
) -> Result<u64, Failure> {
    execute(
        client,
        "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3
         WHERE id = $1 AND state = 'pending'",
        &[&id, &next_attempt_at.as_millis(), &last_error],
    )
    .await
}

pub(super) async fn abandon_notification(client: &mut Object, id: i64, last_error: String) -> Result<u64, Failure> {
    execute(client, "UPDATE outbox SET state = 'dead', last_error = $2 WHERE id = $1", &[&id, &last_error]).await
}

pub(super) async fn defer_notifications(client: &mut Object, ids: Vec<i64>, at: Vec<i64>) -> Result<u64, Failure> {
    execute(
        client,
        "UPDATE outbox o SET next_attempt_at = d.at
         FROM unnest($1::BIGINT[], $2::BIGINT[]) AS d(id, at)
         WHERE o.id = d.id AND o.state = 'pending'",
        &[&ids, &at],
    )
    .await
}

/// A broken connection during COMMIT leaves the outcome unknown: never retried.
pub(super) async fn commit(tx: Transaction<'_>) -> Result<(), Failure> {
    tx.commit().await.map_err(|e| match Failure::from(e) {
        Failure::Retry { error, broken: true } => Failure::Fail(StoreError::Unavailable(format!(
            "the connection failed during COMMIT, so whether it happened is unknown ({})",
            message(&error)
        ))),
        other => other,
    })
}

fn message(e: &StoreError) -> String {
    match e {
        StoreError::Unavailable(m) | StoreError::Internal(m) => m.clone(),
        other => other.to_string(),
    }
}
