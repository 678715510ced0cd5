//! Everything the writer thread runs. Each function is one request: it runs inside its own
//! savepoint of the current batch, so returning `Err` undoes exactly what it did.

use std::time::Duration;

use rusqlite::{Connection, params};
use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{Operation, Timestamp};

use super::db_error;
use super::rows;
use crate::activity::ActivityRow;
use crate::columns::{Lane, ResourceRow, decode_operation, resource_columns, shares, sql_limit};
use crate::plan::{ChangePlan, EventRow, ResourceWrite, Retention, claim_row};
use crate::{ChangeFn, ChangeRequest, ClaimRequest, StoreError};

pub(super) fn change(
    conn: &Connection,
    req: &ChangeRequest,
    change: ChangeFn,
    retention: Retention,
) -> Result<Snapshot, StoreError> {
    let key = req.key.clone();
    let mut before = load_snapshot(conn, &key, req)?;
    req.check_fence(&before)?;
    // One writer: nothing can change the related resources before this commits. The
    // settings are only read (the plan never looks at them): moved, not copied.
    let settings = std::mem::take(&mut before.settings);
    let mut after = before.clone();
    after.settings = settings;
    crate::run_change(change, &mut after)?;
    let mut plan = ChangePlan::of(&key, &before, &after, req.now, retention)?;
    plan.activity.extend(req.activity_row(&before, &after, retention.activity)?);
    crate::usage::check_growth(&plan.usage, req.meters_read())?;
    execute(conn, &key, &plan)?;
    Ok(after)
}

fn load_snapshot(conn: &Connection, key: &ResourceKey, req: &ChangeRequest) -> Result<Snapshot, StoreError> {
    let resource = rows::get_resource(conn, key)?;
    let mut stmt = conn
        .prepare_cached("SELECT id, body FROM operations WHERE resource_key = ?1 AND terminal = 0 ORDER BY rowid")
        .map_err(db_error)?;
    let raw: Vec<(String, String)> = stmt
        .query_map([key.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))
        .and_then(Iterator::collect)
        .map_err(db_error)?;
    let mut operations =
        raw.iter().map(|(id, body)| decode_operation(id, body)).collect::<Result<Vec<Operation>, _>>()?;
    if let Some((subscription, id)) = &req.operation {
        let loaded = operations.iter().any(|op| &op.id == id && op.subscription == *subscription);
        if !loaded {
            operations.extend(rows::get_operation(conn, subscription.as_str(), id, req.now)?);
        }
    }
    let mut related = Vec::new();
    for k in &req.related {
        related.extend(rows::get_resource(conn, k)?);
    }
    let children =
        if req.children { crate::direct_children(key, rows::resources_under(conn, key)?) } else { Vec::new() };
    let referrers = if req.referrers { rows::referrers_of_subtree(conn, key)? } else { Vec::new() };
    let usage = match &req.usage {
        Some(read) => rows::usage_of(conn, read)?,
        None => Default::default(),
    };
    let settings = match &req.settings {
        Some(read) => rows::settings_of(conn, read)?.into(),
        None => Default::default(),
    };
    Ok(Snapshot { resource, operations, related, children, referrers, usage, settings, ..Snapshot::default() })
}

/// Runs a plan's rows one statement each.
fn execute(conn: &Connection, key: &ResourceKey, plan: &ChangePlan) -> Result<(), StoreError> {
    if plan.is_empty() {
        return Ok(());
    }
    let resource = match &plan.resource {
        None => None,
        Some(ResourceWrite::Delete) => {
            let mut delete = conn.prepare_cached("DELETE FROM resources WHERE key = ?1").map_err(db_error)?;
            delete.execute([key.as_str()]).map_err(db_error)?;
            None
        }
        Some(ResourceWrite::Insert(c)) => Some((
            "INSERT INTO resources (key, subscription, resource_group, type_key, next_due, intent,
                                    lease_owner, lease_until, lease_epoch, generation, body, drift_due)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, COALESCE(?9, 0), ?10, ?11, ?12)",
            c,
        )),
        Some(ResourceWrite::Update(c)) => Some((
            "UPDATE resources SET subscription = ?2, resource_group = ?3, type_key = ?4, next_due = ?5,
                 intent = ?6, lease_owner = ?7, lease_until = ?8,
                 lease_epoch = MAX(lease_epoch, COALESCE(?9, 0)), generation = ?10, body = ?11, drift_due = ?12
             WHERE key = ?1",
            c,
        )),
    };
    if let Some((sql, c)) = resource {
        let mut stmt = conn.prepare_cached(sql).map_err(db_error)?;
        stmt.execute(params![
            key.as_str(),
            c.subscription,
            c.resource_group,
            c.type_key,
            c.next_due,
            c.intent,
            c.lease_owner,
            c.lease_until,
            c.lease_epoch,
            c.generation,
            c.body,
            c.drift_due,
        ])
        .map_err(db_error)?;
    }
    for op in &plan.operations {
        let sql = if op.insert {
            "INSERT INTO operations (subscription, id, resource_key, status, terminal, expires_at, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        } else {
            "UPDATE operations SET resource_key = ?3, status = ?4, terminal = ?5, expires_at = ?6, body = ?7
             WHERE subscription = ?1 AND id = ?2"
        };
        let mut stmt = conn.prepare_cached(sql).map_err(db_error)?;
        stmt.execute(params![op.subscription, op.id, op.resource_key, op.status, op.terminal, op.expires_at, op.body])
            .map_err(db_error)?;
    }
    if !plan.notifications.is_empty() {
        let mut insert = conn
            .prepare_cached(
                "INSERT INTO outbox (subscription, operation_id, uri, attempts, next_attempt_at, created_at, state)
                 VALUES (?1, ?2, ?3, 0, ?4, ?4, 'pending')",
            )
            .map_err(db_error)?;
        for n in &plan.notifications {
            insert.execute(params![n.subscription, n.operation_id, n.uri, n.due_at]).map_err(db_error)?;
        }
    }
    if let Some(w) = &plan.wake {
        let mut wake = conn
            .prepare_cached(
                "UPDATE resources SET next_due = MIN(COALESCE(next_due, ?3), ?3), intent = 1
                 WHERE key > ?1 AND key < ?2",
            )
            .map_err(db_error)?;
        wake.execute(params![w.after, w.before, w.now]).map_err(db_error)?;
    }
    if let Some(keys) = &plan.references {
        let mut clear = conn.prepare_cached("DELETE FROM resource_references WHERE from_key = ?1").map_err(db_error)?;
        clear.execute([key.as_str()]).map_err(db_error)?;
        let mut add = conn
            .prepare_cached("INSERT OR IGNORE INTO resource_references (to_key, from_key) VALUES (?1, ?2)")
            .map_err(db_error)?;
        for to in keys {
            add.execute(params![to, key.as_str()]).map_err(db_error)?;
        }
    }
    if let Some(now) = plan.wake_referrers {
        let mut wake = conn
            .prepare_cached(
                "UPDATE resources SET next_due = MIN(COALESCE(next_due, ?2), ?2), intent = 1
                 WHERE key IN (SELECT from_key FROM resource_references WHERE to_key = ?1)",
            )
            .map_err(db_error)?;
        wake.execute(params![key.as_str(), now]).map_err(db_error)?;
    }
    for (k, now) in &plan.wake_keys {
        let mut wake = conn
            .prepare_cached(
                "UPDATE resources SET next_due = MIN(COALESCE(next_due, ?2), ?2), intent = 1 WHERE key = ?1",
            )
            .map_err(db_error)?;
        wake.execute(params![k, now]).map_err(db_error)?;
    }
    if !plan.usage.is_empty() {
        let mut add = conn
            .prepare_cached(
                "INSERT INTO usage (subscription, meter, resource_group, value) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (subscription, meter, resource_group) DO UPDATE SET value = value + excluded.value",
            )
            .map_err(db_error)?;
        for d in &plan.usage {
            add.execute(params![d.subscription, d.meter, d.group, d.delta]).map_err(db_error)?;
        }
    }
    append_events(conn, &plan.events)?;
    insert_activity(conn, &plan.activity)
}

/// Writes activity rows, each given the next position.
pub(super) fn insert_activity(conn: &Connection, rows: &[ActivityRow]) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO activity (subscription, at, target_key, resource_group, correlation_id, caller, status,
                                   expires_at, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(db_error)?;
    for r in rows {
        insert
            .execute(params![
                r.subscription,
                r.at,
                r.target_key,
                r.resource_group,
                r.correlation_id,
                r.caller,
                r.status,
                r.expires_at,
                r.body
            ])
            .map_err(db_error)?;
    }
    Ok(())
}

pub(super) fn sweep_activity(conn: &Connection, now: Timestamp) -> Result<u64, StoreError> {
    let mut stmt = conn.prepare_cached("DELETE FROM activity WHERE expires_at <= ?1").map_err(db_error)?;
    stmt.execute([now.as_millis()]).map(|n| n as u64).map_err(db_error)
}

/// Numbers `events` in their subscriptions' feeds, in order, and writes them. One writer
/// commits in the order it numbers, so a subscription's positions follow commit order.
fn append_events(conn: &Connection, events: &[EventRow]) -> Result<(), StoreError> {
    let mut start = 0;
    while start < events.len() {
        let subscription = events[start].subscription.as_str();
        let run = events[start..].iter().take_while(|e| e.subscription == subscription).count();
        let mut bump = conn
            .prepare_cached(
                "INSERT INTO event_cursors (subscription, last_seq) VALUES (?1, ?2)
                 ON CONFLICT (subscription) DO UPDATE SET last_seq = last_seq + excluded.last_seq
                 RETURNING last_seq",
            )
            .map_err(db_error)?;
        let last: i64 = bump.query_row(params![subscription, run as i64], |row| row.get(0)).map_err(db_error)?;
        let mut insert = conn
            .prepare_cached(
                "INSERT INTO events (subscription, seq, resource_key, kind, at, expires_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(db_error)?;
        for (e, seq) in events[start..start + run].iter().zip(last - run as i64 + 1..) {
            insert
                .execute(params![e.subscription, seq, e.resource_key, e.kind, e.at, e.expires_at, e.body])
                .map_err(db_error)?;
        }
        start += run;
    }
    Ok(())
}

pub(super) fn claim(conn: &Connection, req: &ClaimRequest) -> Result<Vec<ResourceRecord>, StoreError> {
    let room = req.intent_limit.saturating_add(req.followup_limit);
    if room == 0 {
        return Ok(Vec::new());
    }
    // Each lane may end up with the whole room when the other is empty.
    let intent = claimable(conn, Lane::Intent, req, room)?;
    let followup = claimable(conn, Lane::FollowUp, req, room)?;
    let (from_intent, from_followup) = shares(req.intent_limit, req.followup_limit, intent.len(), followup.len());
    let drift_room = req.drift_limit.min(room - from_intent - from_followup);
    let drift = if drift_room == 0 { Vec::new() } else { drift_due(conn, req, drift_room)? };
    let mut update = conn
        .prepare_cached(
            "UPDATE resources SET lease_owner = ?2, lease_until = ?3, lease_epoch = ?4, intent = 0 WHERE key = ?1",
        )
        .map_err(db_error)?;
    let mut claimed = Vec::with_capacity(from_intent + from_followup);
    let until = req.now.add(req.lease_for).as_millis();
    for row in intent.into_iter().take(from_intent).chain(followup.into_iter().take(from_followup)).chain(drift) {
        let taken = claim_row(row, req)?;
        update.execute(params![taken.key, req.owner.as_str(), until, taken.epoch]).map_err(db_error)?;
        claimed.push(taken.record);
    }
    Ok(claimed)
}

const CLAIMABLE: &str = concat!(
    "SELECT ",
    resource_columns!(),
    " FROM resources
     WHERE intent = ?1 AND next_due IS NOT NULL AND claimable_at <= ?2
       AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < ?2
            OR (lease_owner = ?3 AND intent = 1))
     ORDER BY claimable_at, rowid LIMIT ?4"
);

/// Rows of the drift lane, earliest check first: due, idle (nothing else due), unleased.
fn drift_due(conn: &Connection, req: &ClaimRequest, room: usize) -> Result<Vec<ResourceRow>, StoreError> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT ",
            resource_columns!(),
            " FROM resources
             WHERE drift_due IS NOT NULL AND drift_due <= ?1 AND next_due IS NULL
               AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < ?1)
             ORDER BY drift_due, rowid LIMIT ?2"
        ))
        .map_err(db_error)?;
    stmt.query_map(params![req.now.as_millis(), sql_limit(room)], rows::read_resource_row)
        .and_then(Iterator::collect)
        .map_err(db_error)
}

/// Due rows of one lane that `req.owner` may take, earliest first (by `claimable_at`: see
/// migration 4).
fn claimable(conn: &Connection, lane: Lane, req: &ClaimRequest, room: usize) -> Result<Vec<ResourceRow>, StoreError> {
    let mut stmt = conn.prepare_cached(CLAIMABLE).map_err(db_error)?;
    stmt.query_map(
        params![lane.is_intent(), req.now.as_millis(), req.owner.as_str(), sql_limit(room)],
        rows::read_resource_row,
    )
    .and_then(Iterator::collect)
    .map_err(db_error)
}

pub(super) fn renew_leases(
    conn: &Connection,
    owner: &str,
    keys: &[ResourceKey],
    until: Timestamp,
) -> Result<u64, StoreError> {
    let mut stmt = conn
        .prepare_cached("UPDATE resources SET lease_until = ?3 WHERE key = ?2 AND lease_owner = ?1")
        .map_err(db_error)?;
    let mut n = 0;
    for key in keys {
        n += stmt.execute(params![owner, key.as_str(), until.as_millis()]).map_err(db_error)?;
    }
    Ok(n as u64)
}

/// The epoch stays: the next claim, by anyone, increments it past the released fences.
pub(super) fn release_leases(conn: &Connection, owner: &str) -> Result<u64, StoreError> {
    let mut stmt = conn
        .prepare_cached("UPDATE resources SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?1")
        .map_err(db_error)?;
    let n = stmt.execute([owner]).map_err(db_error)?;
    Ok(n as u64)
}

pub(super) fn sweep_operations(conn: &Connection, now: Timestamp) -> Result<u64, StoreError> {
    let mut stmt =
        conn.prepare_cached("DELETE FROM operations WHERE terminal = 1 AND expires_at <= ?1").map_err(db_error)?;
    let n = stmt.execute([now.as_millis()]).map_err(db_error)?;
    Ok(n as u64)
}

pub(super) fn schedule_drift(conn: &Connection, type_keys: &[String], at: Timestamp) -> Result<u64, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "UPDATE resources SET drift_due = ?2
             WHERE type_key = ?1 AND drift_due IS NULL AND next_due IS NULL",
        )
        .map_err(db_error)?;
    let mut n = 0;
    for type_key in type_keys {
        n += stmt.execute(params![type_key, at.as_millis()]).map_err(db_error)?;
    }
    Ok(n as u64)
}

pub(super) fn sweep_events(conn: &Connection, now: Timestamp) -> Result<u64, StoreError> {
    let mut stmt = conn.prepare_cached("DELETE FROM events WHERE expires_at <= ?1").map_err(db_error)?;
    Ok(stmt.execute([now.as_millis()]).map_err(db_error)? as u64)
}

// The notification updates are idempotent: an unknown or already finished id is no error,
// since a notifier retrying after a lost answer must not fail.

/// Due rows, each hidden for `hold` in the same transaction that reads it.
pub(super) fn claim_notifications(
    conn: &Connection,
    now: Timestamp,
    limit: usize,
    hold: Duration,
) -> Result<Vec<crate::Notification>, StoreError> {
    let due = rows::due_notifications(conn, now, limit)?;
    let mut hide = conn.prepare_cached("UPDATE outbox SET next_attempt_at = ?2 WHERE id = ?1").map_err(db_error)?;
    for n in &due {
        hide.execute(params![n.id.0, now.add(hold).as_millis()]).map_err(db_error)?;
    }
    Ok(due)
}

pub(super) fn finish_notification(conn: &Connection, id: i64) -> Result<(), StoreError> {
    let mut stmt = conn.prepare_cached("DELETE FROM outbox WHERE id = ?1").map_err(db_error)?;
    stmt.execute([id]).map_err(db_error)?;
    Ok(())
}

pub(super) fn reschedule_notification(
    conn: &Connection,
    id: i64,
    next_attempt_at: Timestamp,
    last_error: &str,
) -> Result<(), StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?2, last_error = ?3
             WHERE id = ?1 AND state = 'pending'",
        )
        .map_err(db_error)?;
    stmt.execute(params![id, next_attempt_at.as_millis(), last_error]).map_err(db_error)?;
    Ok(())
}

pub(super) fn abandon_notification(conn: &Connection, id: i64, last_error: &str) -> Result<(), StoreError> {
    let mut stmt =
        conn.prepare_cached("UPDATE outbox SET state = 'dead', last_error = ?2 WHERE id = ?1").map_err(db_error)?;
    stmt.execute(params![id, last_error]).map_err(db_error)?;
    Ok(())
}

pub(super) fn defer_notifications(conn: &Connection, rows: &[(i64, Timestamp)]) -> Result<(), StoreError> {
    let mut stmt = conn
        .prepare_cached("UPDATE outbox SET next_attempt_at = ?2 WHERE id = ?1 AND state = 'pending'")
        .map_err(db_error)?;
    for (id, at) in rows {
        stmt.execute(params![id, at.as_millis()]).map_err(db_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claim reads the lane's index up to `now` and needs no sort: held resources are
    /// never visited, however many there are.
    #[test]
    fn a_claim_walks_the_claimable_index_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = super::super::schema::open_writer(&dir.path().join("s.db"), super::super::Synchronous::Normal)
            .expect("open");
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {CLAIMABLE}"))
            .expect("explain")
            .query_map(params![true, 0, "a", 10], |row| row.get::<_, String>(3))
            .and_then(Iterator::collect)
            .expect("plan");
        let plan = plan.join("\n");
        assert!(plan.contains("USING INDEX resources_claimable (intent=? AND claimable_at<?)"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "no sort: {plan}");
    }
}
