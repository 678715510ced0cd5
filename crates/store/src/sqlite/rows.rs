//! Rows ⇄ domain records, and the queries the read pool runs.
//!
//! Decoding never trusts the file: a body that does not parse, or that names another key
//! than its row, is reported as [`StoreError::Internal`] naming the row.

use crate::NotificationId;
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::collections::BTreeMap;

use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId};
use slipway_domain::quota::{MeterName, Usage};
use slipway_domain::resource::{ResourceRecord, Setting};
use slipway_domain::{Operation, ProvisioningState, Timestamp};

use super::db_error;
use crate::columns::{ResourceRow, corrupt, decode_event, decode_operation, from_i64, resource_columns, sql_limit};
use crate::{ActivityPage, ActivityQuery};
use crate::{
    EventQuery, EventRead, GroupUsage, ListQuery, Notification, OperationPage, OperationQuery, Page, SettingsRead,
    StoreError, UsageRead,
};

/// Reads a `resources` row in [`resource_columns!`] order.
pub(super) fn read_resource_row(row: &Row<'_>) -> rusqlite::Result<ResourceRow> {
    Ok(ResourceRow {
        key: row.get(0)?,
        next_due: row.get(1)?,
        intent: row.get(2)?,
        lease_owner: row.get(3)?,
        lease_until: row.get(4)?,
        lease_epoch: row.get(5)?,
        generation: row.get(6)?,
        body: row.get(7)?,
        drift_due: row.get(8)?,
    })
}

pub(super) fn get_resource(conn: &Connection, key: &ResourceKey) -> Result<Option<ResourceRecord>, StoreError> {
    let mut stmt = conn
        .prepare_cached(concat!("SELECT ", resource_columns!(), " FROM resources WHERE key = ?1"))
        .map_err(db_error)?;
    let row = stmt.query_row([key.as_str()], read_resource_row).optional().map_err(db_error)?;
    row.map(ResourceRow::into_record).transpose()
}

/// Every resource nested under `parent` (its key range `(parent/, parent0)`), in key order.
pub(super) fn resources_under(conn: &Connection, parent: &ResourceKey) -> Result<Vec<ResourceRecord>, StoreError> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT ",
            resource_columns!(),
            " FROM resources WHERE key > ?1 AND key < ?2 ORDER BY key"
        ))
        .map_err(db_error)?;
    let rows: Vec<ResourceRow> = stmt
        .query_map(params![format!("{}/", parent.as_str()), format!("{}0", parent.as_str())], read_resource_row)
        .and_then(Iterator::collect)
        .map_err(db_error)?;
    rows.into_iter().map(ResourceRow::into_record).collect()
}

/// Resources outside `key`'s subtree that reference it or anything under it (at most 20).
pub(super) fn referrers_of_subtree(conn: &Connection, key: &ResourceKey) -> Result<Vec<ResourceRecord>, StoreError> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT ",
            resource_columns!(),
            " FROM resources WHERE key IN (
                 SELECT from_key FROM resource_references
                 WHERE (to_key = ?1 OR (to_key > ?2 AND to_key < ?3))
                   AND NOT (from_key = ?1 OR (from_key > ?2 AND from_key < ?3)))
             ORDER BY key LIMIT 20"
        ))
        .map_err(db_error)?;
    let k = key.as_str();
    let rows: Vec<ResourceRow> = stmt
        .query_map(params![k, format!("{k}/"), format!("{k}0")], read_resource_row)
        .and_then(Iterator::collect)
        .map_err(db_error)?;
    rows.into_iter().map(ResourceRow::into_record).collect()
}

/// Resources that reference `key` itself, in key order, at most `limit`.
pub(super) fn referrers_of(
    conn: &Connection,
    key: &ResourceKey,
    limit: usize,
) -> Result<Vec<ResourceRecord>, StoreError> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT ",
            resource_columns!(),
            " FROM resources WHERE key IN (SELECT from_key FROM resource_references WHERE to_key = ?1)
             ORDER BY key LIMIT ?2"
        ))
        .map_err(db_error)?;
    let rows: Vec<ResourceRow> = stmt
        .query_map(params![key.as_str(), sql_limit(limit.max(1))], read_resource_row)
        .and_then(Iterator::collect)
        .map_err(db_error)?;
    rows.into_iter().map(ResourceRow::into_record).collect()
}

pub(super) fn list_resources(conn: &Connection, query: &ListQuery) -> Result<Page, StoreError> {
    // A zero limit could never make progress; treat it as the smallest page.
    let limit = query.limit.max(1);
    // One row more than asked tells whether another page follows.
    let fetch = sql_limit(limit.saturating_add(1));
    let subscription = query.subscription.as_str();
    let (after, before) = query.key_range();
    let collect = |stmt: &mut rusqlite::CachedStatement<'_>, params: &[&dyn rusqlite::ToSql]| {
        stmt.query_map(params, read_resource_row).and_then(Iterator::collect::<Result<Vec<_>, _>>).map_err(db_error)
    };
    let rows: Vec<ResourceRow> = match (&query.type_key, &query.resource_group) {
        (Some(type_key), Some(group)) => {
            let mut stmt = conn
                .prepare_cached(concat!(
                    "SELECT ",
                    resource_columns!(),
                    " FROM resources
                     WHERE type_key = ?1 AND subscription = ?2 AND resource_group = ?3 AND key > ?4 AND key < ?6
                     ORDER BY key LIMIT ?5"
                ))
                .map_err(db_error)?;
            let (type_key, group) = (type_key.as_str(), group.to_ascii_lowercase());
            collect(&mut stmt, params![type_key, subscription, group, after, fetch, before])?
        }
        (Some(type_key), None) => {
            let mut stmt = conn
                .prepare_cached(concat!(
                    "SELECT ",
                    resource_columns!(),
                    " FROM resources
                     WHERE type_key = ?1 AND subscription = ?2 AND key > ?3 AND key < ?5
                     ORDER BY key LIMIT ?4"
                ))
                .map_err(db_error)?;
            let type_key = type_key.as_str();
            collect(&mut stmt, params![type_key, subscription, after, fetch, before])?
        }
        // Every type: the primary key's range is the subscription's or the group's.
        (None, _) => {
            let mut stmt = conn
                .prepare_cached(concat!(
                    "SELECT ",
                    resource_columns!(),
                    " FROM resources WHERE key > ?1 AND key < ?3 AND type_key <> ?4 ORDER BY key LIMIT ?2"
                ))
                .map_err(db_error)?;
            let groups = crate::listing::group_type_key();
            collect(&mut stmt, params![after, fetch, before, groups.as_str()])?
        }
    };
    let more = rows.len() > limit;
    let items = rows.into_iter().take(limit).map(ResourceRow::into_record).collect::<Result<Vec<_>, _>>()?;
    let next = if more { items.last().map(ResourceRecord::key) } else { None };
    Ok(Page { items, next })
}

pub(super) fn list_operations(conn: &Connection, query: &OperationQuery) -> Result<OperationPage, StoreError> {
    let limit = query.limit.max(1);
    let fetch = sql_limit(limit.saturating_add(1));
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, body FROM operations
             WHERE subscription = ?1 AND id < ?2 AND (?3 IS NULL OR status = ?3) AND (terminal = 0 OR expires_at > ?4)
             ORDER BY id DESC LIMIT ?5",
        )
        .map_err(db_error)?;
    let status = query.status.map(ProvisioningState::as_str);
    let rows: Vec<(String, String)> = stmt
        .query_map(params![query.subscription.as_str(), query.below(), status, query.now.as_millis(), fetch], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .and_then(Iterator::collect)
        .map_err(db_error)?;
    let more = rows.len() > limit;
    let items = rows.iter().take(limit).map(|(id, body)| decode_operation(id, body)).collect::<Result<Vec<_>, _>>()?;
    let next = if more { items.last().map(|op| op.id.clone()) } else { None };
    Ok(OperationPage { items, next })
}

pub(super) fn get_operation(
    conn: &Connection,
    subscription: &str,
    id: &OperationId,
    now: Timestamp,
) -> Result<Option<Operation>, StoreError> {
    // Expiry is checked here, not only by the sweeper, so a TTL is exact whenever it runs.
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, body FROM operations WHERE subscription = ?1 AND id = ?2 AND (terminal = 0 OR expires_at > ?3)",
        )
        .map_err(db_error)?;
    let row: Option<(String, String)> = stmt
        .query_row(params![subscription, id.as_str(), now.as_millis()], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
        .map_err(db_error)?;
    row.map(|(id, body)| decode_operation(&id, &body)).transpose()
}

pub(super) fn due_notifications(
    conn: &Connection,
    now: Timestamp,
    limit: usize,
) -> Result<Vec<Notification>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, subscription, operation_id, uri, attempts, next_attempt_at, created_at
             FROM outbox WHERE state = 'pending' AND next_attempt_at <= ?1
             ORDER BY next_attempt_at, id LIMIT ?2",
        )
        .map_err(db_error)?;
    type Raw = (i64, String, String, String, i64, i64, i64);
    let raw: Vec<Raw> = stmt
        .query_map(params![now.as_millis(), sql_limit(limit)], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?))
        })
        .and_then(Iterator::collect)
        .map_err(db_error)?;
    raw.into_iter()
        .map(|(id, subscription, operation_id, uri, attempts, next_attempt_at, created_at)| {
            let row = || format!("#{id}");
            Ok(Notification {
                id: NotificationId(id),
                subscription: slipway_domain::SubscriptionId::new(&subscription),
                operation_id: OperationId::parse(&operation_id)
                    .ok_or_else(|| corrupt("outbox", &row(), "bad operation id"))?,
                uri,
                attempts: u32::try_from(attempts).map_err(|_| corrupt("outbox", &row(), "bad attempts"))?,
                next_attempt_at: Timestamp(next_attempt_at),
                created_at: Timestamp(created_at),
            })
        })
        .collect()
}

/// What a metrics scrape shows (`Store::reading`). Reads every non-terminal operation: the
/// cost grows with the operations in flight, not with history.
pub(super) fn reading(conn: &Connection, now: Timestamp) -> Result<crate::StoreReading, StoreError> {
    let mut active = conn.prepare_cached("SELECT id, body FROM operations WHERE terminal = 0").map_err(db_error)?;
    let operations: Vec<(String, String)> =
        active.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).and_then(Iterator::collect).map_err(db_error)?;
    let operations: Vec<Operation> =
        operations.iter().map(|(id, body)| decode_operation(id, body)).collect::<Result<_, _>>()?;
    let mut due = conn
        .prepare_cached(
            "SELECT intent, count(*) FROM resources
             WHERE next_due IS NOT NULL AND claimable_at <= ?1 AND (lease_until IS NULL OR lease_until < ?1)
             GROUP BY intent",
        )
        .map_err(db_error)?;
    let mut reading = crate::StoreReading { active: crate::metered::summarize(operations), ..Default::default() };
    for row in
        due.query_map([now.as_millis()], |row| Ok((row.get::<_, bool>(0)?, row.get::<_, i64>(1)?))).map_err(db_error)?
    {
        let (intent, n) = row.map_err(db_error)?;
        *(if intent { &mut reading.due_intent } else { &mut reading.due_followup }) = n as u64;
    }
    let mut outbox = conn.prepare_cached("SELECT state, count(*) FROM outbox GROUP BY state").map_err(db_error)?;
    for row in outbox.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))).map_err(db_error)? {
        let (state, n) = row.map_err(db_error)?;
        *(if state == "dead" { &mut reading.outbox_dead } else { &mut reading.outbox_pending }) = n as u64;
    }
    Ok(reading)
}

/// A page of the feed, with the positions it is judged by, read in one snapshot: the newest
/// position must not move past events the page did not see.
pub(super) fn events(conn: &Connection, query: &EventQuery) -> Result<EventRead, StoreError> {
    let tx = conn.unchecked_transaction().map_err(db_error)?;
    let subscription = query.subscription.as_str();
    let mut bounds = tx
        .prepare_cached(
            "SELECT (SELECT MIN(seq) FROM events WHERE subscription = ?1),
                    (SELECT last_seq FROM event_cursors WHERE subscription = ?1)",
        )
        .map_err(db_error)?;
    let (oldest, last): (Option<i64>, Option<i64>) =
        bounds.query_row([subscription], |row| Ok((row.get(0)?, row.get(1)?))).map_err(db_error)?;
    let oldest = oldest.map(|o| from_i64(o, "event position")).transpose()?;
    let last = from_i64(last.unwrap_or(0), "event position")?;
    if let Some(gone) = query.gone(oldest, last) {
        return Ok(gone);
    }
    let (exact, after, before) = query.key_bounds();
    let mut page = tx
        .prepare_cached(
            "SELECT subscription, seq, resource_key, kind, at, body FROM events
             WHERE subscription = ?1 AND seq > ?2
               AND (resource_key = ?3 OR (resource_key > ?4 AND resource_key < ?5))
             ORDER BY seq LIMIT ?6",
        )
        .map_err(db_error)?;
    let after_seq = i64::try_from(query.after).unwrap_or(i64::MAX);
    let rows: Vec<_> = page
        .query_map(params![subscription, after_seq, exact, after, before, sql_limit(query.limit.max(1))], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?))
        })
        .and_then(Iterator::collect)
        .map_err(db_error)?;
    let items = rows.into_iter().map(decode_event).collect::<Result<_, _>>()?;
    Ok(EventRead::Page { items, last })
}

/// A page of the activity log.
pub(super) fn activity(conn: &Connection, query: &ActivityQuery) -> Result<ActivityPage, StoreError> {
    let p = query.params();
    let (exact, after, before) = p.resource_bounds();
    let mut stmt = conn.prepare_cached(crate::activity::activity_select!("", "")).map_err(db_error)?;
    let rows: Vec<(i64, String)> = stmt
        .query_map(
            params![
                p.subscription,
                p.before,
                p.since,
                p.until,
                p.group,
                exact,
                after,
                before,
                p.correlation_id,
                p.caller,
                p.status,
                p.limit
            ],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .and_then(Iterator::collect)
        .map_err(db_error)?;
    let items = rows
        .into_iter()
        .map(|(id, body)| {
            crate::documents::decode_activity(&body)
                .map(|e| (id, e))
                .map_err(|e| StoreError::Internal(format!("activity row {id} is corrupt: {e}")))
        })
        .collect::<Result<_, _>>()?;
    Ok(query.page(items))
}

/// A change's usage read: each meter summed over the subscription and over the group, in one
/// statement (the writer runs it for every metered write).
pub(super) fn usage_of(conn: &Connection, read: &UsageRead) -> Result<BTreeMap<MeterName, Usage>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT meter, SUM(value), SUM(CASE WHEN resource_group = ?2 THEN value ELSE 0 END)
             FROM usage WHERE subscription = ?1 GROUP BY meter",
        )
        .map_err(db_error)?;
    let mut out: BTreeMap<MeterName, Usage> = read.meters.iter().map(|m| (m.clone(), Usage::default())).collect();
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let rows = stmt
        .query_map(params![read.subscription.as_str(), read.group], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        })
        .map_err(db_error)?;
    for row in rows {
        let (meter, subscription, group) = row.map_err(db_error)?;
        if let Some(usage) = out.get_mut(&MeterName::read_stored(meter)) {
            *usage = Usage { subscription: count(subscription), group: count(group) };
        }
    }
    Ok(out)
}

/// A subscription's usage rows, by meter and group, leaving out those at zero.
pub(super) fn usage_rows(conn: &Connection, subscription: &SubscriptionId) -> Result<Vec<GroupUsage>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT resource_group, meter, value FROM usage WHERE subscription = ?1 AND value <> 0
             ORDER BY meter, resource_group",
        )
        .map_err(db_error)?;
    stmt.query_map([subscription.as_str()], |row| {
        let value: i64 = row.get(2)?;
        Ok(GroupUsage {
            group: row.get(0)?,
            meter: MeterName::read_stored(row.get::<_, String>(1)?),
            value: u64::try_from(value).unwrap_or(0),
        })
    })
    .and_then(Iterator::collect)
    .map_err(db_error)
}

/// A change's settings read: the entries of the kinds it names in the subscription's
/// partition, in one statement.
pub(super) fn settings_of(conn: &Connection, read: &SettingsRead) -> Result<Vec<Setting>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT kind, id, body FROM entries WHERE partition = ?1 ORDER BY kind, id")
        .map_err(db_error)?;
    let wanted: Vec<&str> = read.kinds.iter().map(|k| k.tag()).collect();
    let rows = stmt
        .query_map(params![read.subscription.as_str()], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?))
        })
        .map_err(db_error)?;
    let mut out = Vec::new();
    for row in rows {
        let (kind, id, body) = row.map_err(db_error)?;
        if wanted.contains(&kind.as_str()) {
            out.push(Setting { kind, id, body });
        }
    }
    Ok(out)
}
