//! Rows ⇄ domain records, and the read queries.
//!
//! Decoding never trusts the database: a body that does not parse, names another key than
//! its row, or a column of an unexpected type is reported as [`StoreError::Internal`] naming
//! the row.

use crate::NotificationId;
use deadpool_postgres::{GenericClient, Object};
use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId};
use slipway_domain::quota::MeterName;
use slipway_domain::resource::ResourceRecord;
use slipway_domain::{Operation, ProvisioningState, Timestamp};
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

use super::Failure;
use super::attempt::Attempt;
use crate::columns::{ResourceRow, corrupt, decode_event, decode_operation, from_i64, resource_columns, sql_limit};
use crate::{
    EventQuery, EventRead, GroupUsage, ListQuery, Notification, OperationPage, OperationQuery, Page, StoreError,
};

/// Reads a `resources` row in [`resource_columns!`] order.
pub(super) fn read_resource_row(row: &Row) -> Result<ResourceRow, StoreError> {
    let key: String = column(row, 0, "resource", "?")?;
    let get = |i| (row, i, "resource", key.as_str());
    Ok(ResourceRow {
        next_due: at(get(1))?,
        intent: at(get(2))?,
        lease_owner: at(get(3))?,
        lease_until: at(get(4))?,
        lease_epoch: at(get(5))?,
        generation: at(get(6))?,
        body: at(get(7))?,
        drift_due: at(get(8))?,
        key,
    })
}

/// Column `i` of a row of `table` named `name`, or why it is unreadable.
pub(super) fn column<'a, T: FromSql<'a>>(row: &'a Row, i: usize, table: &str, name: &str) -> Result<T, StoreError> {
    row.try_get(i).map_err(|e| corrupt(table, name, &format!("column {i}: {}", super::describe(&e))))
}

fn at<'a, T: FromSql<'a>>((row, i, table, name): (&'a Row, usize, &str, &str)) -> Result<T, StoreError> {
    column(row, i, table, name)
}

pub(super) const GET_RESOURCE: &str = concat!("SELECT ", resource_columns!(), " FROM resources WHERE key = $1");

/// An operation of a subscription, unless it ended and expired (expiry is checked here, not
/// only by the sweeper, so a TTL is exact whenever it runs).
pub(super) const GET_OPERATION: &str =
    "SELECT id, body FROM operations WHERE subscription = $1 AND id = $2 AND (NOT terminal OR expires_at > $3)";

pub(super) fn ping(client: &mut Object) -> Attempt<'_, ()> {
    Box::pin(async move {
        client.simple_query("SELECT 1").await?;
        Ok(())
    })
}

pub(super) async fn get_resource(client: &mut Object, key: ResourceKey) -> Result<Option<ResourceRecord>, Failure> {
    let stmt = client.prepare_cached(GET_RESOURCE).await?;
    let row = client.query_opt(&stmt, &[&key.as_str()]).await?;
    Ok(row.map(|row| read_resource_row(&row)?.into_record()).transpose()?)
}

pub(super) async fn list_resources(client: &mut Object, query: ListQuery) -> Result<Page, Failure> {
    // A zero limit could never make progress; treat it as the smallest page.
    let limit = query.limit.max(1);
    // One row more than asked tells whether another page follows.
    let fetch = sql_limit(limit.saturating_add(1));
    let subscription = query.subscription.as_str();
    let (after, before) = query.key_range();
    let rows = match (&query.type_key, &query.resource_group) {
        (Some(type_key), Some(group)) => {
            let stmt = client
                .prepare_cached(concat!(
                    "SELECT ",
                    resource_columns!(),
                    " FROM resources
                     WHERE type_key = $1 AND subscription = $2 AND resource_group = $3 AND key > $4 AND key < $6
                     ORDER BY key LIMIT $5"
                ))
                .await?;
            let (type_key, group) = (type_key.as_str(), group.to_ascii_lowercase());
            client.query(&stmt, &[&type_key, &subscription, &group, &after, &fetch, &before]).await?
        }
        (Some(type_key), None) => {
            let stmt = client
                .prepare_cached(concat!(
                    "SELECT ",
                    resource_columns!(),
                    " FROM resources
                     WHERE type_key = $1 AND subscription = $2 AND key > $3 AND key < $5
                     ORDER BY key LIMIT $4"
                ))
                .await?;
            let type_key = type_key.as_str();
            client.query(&stmt, &[&type_key, &subscription, &after, &fetch, &before]).await?
        }
        // Every type: the primary key's range is the subscription's or the group's.
        (None, _) => {
            let stmt = client
                .prepare_cached(concat!(
                    "SELECT ",
                    resource_columns!(),
                    " FROM resources WHERE key > $1 AND key < $3 AND type_key <> $4 ORDER BY key LIMIT $2"
                ))
                .await?;
            let groups = crate::listing::group_type_key();
            client.query(&stmt, &[&after, &fetch, &before, &groups.as_str()]).await?
        }
    };
    let more = rows.len() > limit;
    let items = rows
        .iter()
        .take(limit)
        .map(|row| read_resource_row(row)?.into_record())
        .collect::<Result<Vec<_>, StoreError>>()?;
    let next = if more { items.last().map(ResourceRecord::key) } else { None };
    Ok(Page { items, next })
}

/// An `(id, body)` row of `operations`.
pub(super) fn read_operation(row: &Row) -> Result<Operation, StoreError> {
    let id: String = column(row, 0, "operation", "?")?;
    let body: String = column(row, 1, "operation", &id)?;
    decode_operation(&id, &body)
}

/// Resources that reference `key` itself, in key order, at most `limit`.
pub(super) async fn referrers_of(
    client: &mut Object,
    key: ResourceKey,
    limit: usize,
) -> Result<Vec<ResourceRecord>, Failure> {
    let stmt = client
        .prepare_cached(concat!(
            "SELECT ",
            resource_columns!(),
            " FROM resources WHERE key IN (SELECT from_key FROM resource_references WHERE to_key = $1)
             ORDER BY key LIMIT $2"
        ))
        .await?;
    let rows = client.query(&stmt, &[&key.as_str(), &sql_limit(limit.max(1))]).await?;
    Ok(rows.iter().map(|row| read_resource_row(row)?.into_record()).collect::<Result<Vec<_>, StoreError>>()?)
}

/// A subscription's usage rows, by meter and group, leaving out those at zero.
pub(super) async fn usage_rows(client: &mut Object, subscription: SubscriptionId) -> Result<Vec<GroupUsage>, Failure> {
    let stmt = client
        .prepare_cached(
            "SELECT resource_group, meter, value FROM usage WHERE subscription = $1 AND value <> 0
             ORDER BY meter, resource_group",
        )
        .await?;
    let rows = client.query(&stmt, &[&subscription.as_str()]).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let value: i64 = column(row, 2, "usage", "value")?;
        out.push(GroupUsage {
            group: column(row, 0, "usage", "resource_group")?,
            meter: MeterName::read_stored(column::<String>(row, 1, "usage", "meter")?),
            value: u64::try_from(value).unwrap_or(0),
        });
    }
    Ok(out)
}

pub(super) async fn list_operations(client: &mut Object, query: OperationQuery) -> Result<OperationPage, Failure> {
    let limit = query.limit.max(1);
    let fetch = sql_limit(limit.saturating_add(1));
    let stmt = client
        .prepare_cached(
            "SELECT id, body FROM operations
             WHERE subscription = $1 AND id < $2 AND ($3::TEXT IS NULL OR status = $3)
               AND (NOT terminal OR expires_at > $4)
             ORDER BY id DESC LIMIT $5",
        )
        .await?;
    let status = query.status.map(ProvisioningState::as_str);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&query.subscription.as_str(), &query.below(), &status, &query.now.as_millis(), &fetch];
    let rows = client.query(&stmt, &params).await?;
    let more = rows.len() > limit;
    let items = rows.iter().take(limit).map(read_operation).collect::<Result<Vec<_>, StoreError>>()?;
    let next = if more { items.last().map(|op| op.id.clone()) } else { None };
    Ok(OperationPage { items, next })
}

pub(super) async fn get_operation(
    client: &mut Object,
    subscription: String,
    id: OperationId,
    now: Timestamp,
) -> Result<Option<Operation>, Failure> {
    let stmt = client.prepare_cached(GET_OPERATION).await?;
    let row = client.query_opt(&stmt, &[&subscription, &id.as_str(), &now.as_millis()]).await?;
    Ok(row.as_ref().map(read_operation).transpose()?)
}

/// `id, subscription, operation_id, uri, attempts, next_attempt_at, created_at` of `outbox`.
pub(super) fn read_notification(row: &Row) -> Result<Notification, StoreError> {
    let id: i64 = column(row, 0, "outbox", "?")?;
    let name = format!("#{id}");
    let get = |i| (row, i, "outbox", name.as_str());
    let operation_id: String = at(get(2))?;
    let attempts: i64 = at(get(4))?;
    Ok(Notification {
        id: NotificationId(id),
        subscription: slipway_domain::SubscriptionId::new(&at::<String>(get(1))?),
        operation_id: OperationId::parse(&operation_id).ok_or_else(|| corrupt("outbox", &name, "bad operation id"))?,
        uri: at(get(3))?,
        attempts: u32::try_from(attempts).map_err(|_| corrupt("outbox", &name, "bad attempts"))?,
        next_attempt_at: Timestamp(at(get(5))?),
        created_at: Timestamp(at(get(6))?),
    })
}

/// What a metrics scrape shows (`Store::reading`). Reads every non-terminal operation: the
/// cost grows with the operations in flight, not with history.
pub(super) fn reading(client: &mut Object, now: Timestamp) -> Attempt<'_, crate::StoreReading> {
    Box::pin(async move {
        let stmt = client.prepare_cached("SELECT id, body FROM operations WHERE NOT terminal").await?;
        let operations: Vec<Operation> =
            client.query(&stmt, &[]).await?.iter().map(read_operation).collect::<Result<_, _>>()?;
        let mut reading = crate::StoreReading { active: crate::metered::summarize(operations), ..Default::default() };
        let stmt = client
            .prepare_cached(
                "SELECT intent, count(*) FROM resources
                 WHERE next_due IS NOT NULL AND claimable_at <= $1 AND (lease_until IS NULL OR lease_until < $1)
                 GROUP BY intent",
            )
            .await?;
        for row in client.query(&stmt, &[&now.as_millis()]).await? {
            let (intent, n): (bool, i64) = (column(&row, 0, "resources", "due")?, column(&row, 1, "resources", "due")?);
            *(if intent { &mut reading.due_intent } else { &mut reading.due_followup }) = n as u64;
        }
        let stmt = client.prepare_cached("SELECT state, count(*) FROM outbox GROUP BY state").await?;
        for row in client.query(&stmt, &[]).await? {
            let (state, n): (String, i64) = (column(&row, 0, "outbox", "state")?, column(&row, 1, "outbox", "state")?);
            *(if state == "dead" { &mut reading.outbox_dead } else { &mut reading.outbox_pending }) = n as u64;
        }
        Ok(reading)
    })
}

/// A page of the feed and the positions it is judged by, in one snapshot (as SQLite's).
pub(super) async fn events(client: &mut Object, query: EventQuery) -> Result<EventRead, Failure> {
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let subscription = query.subscription.as_str();
    let bounds = tx
        .prepare_cached(
            "SELECT (SELECT MIN(seq) FROM events WHERE subscription = $1),
                    (SELECT last_seq FROM event_cursors WHERE subscription = $1)",
        )
        .await?;
    let row = tx.query_one(&bounds, &[&subscription]).await?;
    let oldest = row.get::<_, Option<i64>>(0).map(|o| from_i64(o, "event position")).transpose()?;
    let last = from_i64(row.get::<_, Option<i64>>(1).unwrap_or(0), "event position")?;
    if let Some(gone) = query.gone(oldest, last) {
        return Ok(gone);
    }
    let (exact, after, before) = query.key_bounds();
    let page = tx
        .prepare_cached(
            "SELECT subscription, seq, resource_key, kind, at, body FROM events
             WHERE subscription = $1 AND seq > $2
               AND (resource_key = $3 OR (resource_key > $4 AND resource_key < $5))
             ORDER BY seq LIMIT $6",
        )
        .await?;
    let after_seq = i64::try_from(query.after).unwrap_or(i64::MAX);
    let limit = sql_limit(query.limit.max(1));
    let rows = tx.query(&page, &[&subscription, &after_seq, &exact, &after, &before, &limit]).await?;
    tx.commit().await?;
    let items = rows
        .iter()
        .map(|r| decode_event((r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5))))
        .collect::<Result<_, _>>()?;
    Ok(EventRead::Page { items, last })
}
