//! The activity log in PostgreSQL (`crate::activity`): rows inserted many at once with
//! `unnest`, in a change batch's transaction, an entry write's, or on their own; pages read
//! newest first. Positions come from an identity column: they order entries, and no reader
//! follows them as a feed (a follower reads by time, docs/store.md#the-activity-log).

use deadpool_postgres::{GenericClient, Object};
use tokio_postgres::types::ToSql;

use super::Failure;
use super::rows::column;
use crate::activity::{ActivityRow, activity_select};
use crate::{ActivityPage, ActivityQuery, StoreError};

pub(super) const INSERT: &str =
    "INSERT INTO activity (subscription, at, target_key, resource_group, correlation_id, caller,
                                            status, expires_at, body)
     SELECT * FROM unnest($1::TEXT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[],
                          $8::BIGINT[], $9::TEXT[])";

/// Activity rows as the parallel arrays `unnest` takes.
#[derive(Default)]
pub(super) struct ActivityRows {
    subscription: Vec<String>,
    at: Vec<i64>,
    target_key: Vec<String>,
    resource_group: Vec<String>,
    correlation_id: Vec<String>,
    caller: Vec<String>,
    status: Vec<&'static str>,
    expires_at: Vec<i64>,
    body: Vec<String>,
}

impl ActivityRows {
    pub(super) fn push(&mut self, r: ActivityRow) {
        self.subscription.push(r.subscription);
        self.at.push(r.at);
        self.target_key.push(r.target_key);
        self.resource_group.push(r.resource_group);
        self.correlation_id.push(r.correlation_id);
        self.caller.push(r.caller);
        self.status.push(r.status);
        self.expires_at.push(r.expires_at);
        self.body.push(r.body);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    pub(super) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.subscription,
            &self.at,
            &self.target_key,
            &self.resource_group,
            &self.correlation_id,
            &self.caller,
            &self.status,
            &self.expires_at,
            &self.body,
        ]
    }
}

impl FromIterator<ActivityRow> for ActivityRows {
    fn from_iter<I: IntoIterator<Item = ActivityRow>>(iter: I) -> Self {
        let mut rows = ActivityRows::default();
        iter.into_iter().for_each(|r| rows.push(r));
        rows
    }
}

/// Inserts `rows` with `client` (a transaction, or a connection on its own).
pub(super) async fn insert<C: GenericClient>(client: &C, rows: &ActivityRows) -> Result<u64, Failure> {
    if rows.is_empty() {
        return Ok(0);
    }
    let stmt = client.prepare_cached(INSERT).await?;
    Ok(client.execute(&stmt, &rows.params()).await?)
}

pub(super) async fn page(client: &mut Object, query: ActivityQuery) -> Result<ActivityPage, Failure> {
    let p = query.params();
    let (exact, after, before) = p.resource_bounds();
    let stmt = client.prepare_cached(activity_select!("::BIGINT", "::TEXT")).await?;
    let rows = client
        .query(
            &stmt,
            &[
                &p.subscription,
                &p.before,
                &p.since,
                &p.until,
                &p.group,
                &exact,
                &after,
                &before,
                &p.correlation_id,
                &p.caller,
                &p.status,
                &p.limit,
            ],
        )
        .await?;
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: i64 = column(row, 0, "activity", "?")?;
        let body: String = column(row, 1, "activity", &id.to_string())?;
        let entry = crate::documents::decode_activity(&body)
            .map_err(|e| StoreError::Internal(format!("activity row {id} is corrupt: {e}")))?;
        items.push((id, entry));
    }
    Ok(query.page(items))
}
