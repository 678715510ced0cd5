//! The activity log's rows, engine-independent (docs/store.md#the-activity-log): an entry as
//! its indexed columns and body, the read a filter makes, and pages newest first. Each
//! engine writes a change's entry in the change's own transaction (`ChangePlan::activity`),
//! a registry entry write's in the write's, and a refusal's on its own
//! (`Store::record_activity`).

use std::time::Duration;

use slipway_domain::Timestamp;
use slipway_domain::activity::{ActivityEntry, ActivityFilter};
use slipway_domain::ids::SubscriptionId;

use crate::{StoreError, documents};

/// How long an activity entry is kept, by default: 90 days, as Azure's Activity Log.
pub const DEFAULT_ACTIVITY_RETENTION: Duration = Duration::from_secs(90 * 24 * 60 * 60);

/// A read of the log: the entries of a scope the filter keeps, newest first, below a
/// position when continuing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivityQuery {
    pub scope: ActivityScope,
    pub filter: ActivityFilter,
    /// Only entries older than this position (a page's `next`).
    pub before: Option<i64>,
    pub limit: usize,
}

/// Whose entries a read returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActivityScope {
    Subscription(SubscriptionId),
    /// The platform's own (API tokens).
    Platform,
    /// Every subscription's and the platform's: an export.
    Everything,
}

/// Entries newest first, each with its position, and where the next page starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivityPage {
    pub items: Vec<(i64, ActivityEntry)>,
    pub next: Option<i64>,
}

/// A new `activity` row; its position is the engine's to give.
#[derive(Debug, Clone)]
pub(crate) struct ActivityRow {
    pub(crate) subscription: String,
    pub(crate) at: i64,
    pub(crate) target_key: String,
    pub(crate) resource_group: String,
    pub(crate) correlation_id: String,
    pub(crate) caller: String,
    pub(crate) status: &'static str,
    pub(crate) expires_at: i64,
    pub(crate) body: String,
}

impl ActivityRow {
    pub(crate) fn of(entry: &ActivityEntry, retention: Duration) -> Result<ActivityRow, StoreError> {
        let body = documents::encode_activity(entry)
            .map_err(|e| StoreError::Internal(format!("cannot encode an activity entry of {}: {e}", entry.target)))?;
        Ok(ActivityRow {
            subscription: subscription_column(entry.subscription.as_ref()),
            at: entry.time.as_millis(),
            target_key: entry.target_key(),
            resource_group: entry.resource_group().unwrap_or_default(),
            correlation_id: entry.request.correlation_id.to_ascii_lowercase(),
            caller: entry.caller.name.to_ascii_lowercase(),
            status: entry.outcome().as_str(),
            expires_at: entry.time.add(retention).as_millis(),
            body,
        })
    }
}

/// The `subscription` column: the platform's own entries have none.
pub(crate) fn subscription_column(subscription: Option<&SubscriptionId>) -> String {
    subscription.map(|s| s.as_str().to_string()).unwrap_or_default()
}

/// A query's parameters as both engines bind them, in this order: subscription, before,
/// since, until, group, resource (exact, after, before), correlation id, caller, status,
/// limit (one more than asked, to know whether a next page exists).
pub(crate) struct ActivityParams {
    /// `None`: every subscription.
    pub(crate) subscription: Option<String>,
    pub(crate) before: i64,
    pub(crate) since: Option<i64>,
    pub(crate) until: Option<i64>,
    pub(crate) group: Option<String>,
    pub(crate) resource: Option<(String, String, String)>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) caller: Option<String>,
    pub(crate) status: Option<&'static str>,
    pub(crate) limit: i64,
}

impl ActivityParams {
    /// The resource filter's bounds (`$6`–`$8`): the key, and what is strictly between
    /// `key/` and `key0` (everything under it).
    pub(crate) fn resource_bounds(&self) -> (Option<&str>, Option<&str>, Option<&str>) {
        match &self.resource {
            Some((exact, after, before)) => (Some(exact), Some(after), Some(before)),
            None => (None, None, None),
        }
    }
}

impl ActivityQuery {
    pub(crate) fn params(&self) -> ActivityParams {
        let f = &self.filter;
        ActivityParams {
            subscription: match &self.scope {
                ActivityScope::Subscription(s) => Some(subscription_column(Some(s))),
                ActivityScope::Platform => Some(subscription_column(None)),
                ActivityScope::Everything => None,
            },
            before: self.before.unwrap_or(i64::MAX),
            since: f.since.map(Timestamp::as_millis),
            until: f.until.map(Timestamp::as_millis),
            group: f.resource_group.clone(),
            resource: f.resource.as_ref().map(|k| (k.clone(), format!("{k}/"), format!("{k}0"))),
            correlation_id: f.correlation_id.clone(),
            caller: f.caller.clone(),
            status: f.status.map(|s| s.as_str()),
            limit: i64::try_from(self.limit.saturating_add(1)).unwrap_or(i64::MAX),
        }
    }

    /// The page of `rows` (as read, one more than the limit at most).
    pub(crate) fn page(&self, mut rows: Vec<(i64, ActivityEntry)>) -> ActivityPage {
        let more = rows.len() > self.limit;
        rows.truncate(self.limit);
        let next = if more { rows.last().map(|(id, _)| *id) } else { None };
        ActivityPage { items: rows, next }
    }
}

/// The statement both engines run for a query; `$n` are [`ActivityParams`] in order.
macro_rules! activity_select {
    ($cast_big:literal, $cast_text:literal) => {
        concat!(
            "SELECT id, body FROM activity WHERE ($1",
            $cast_text,
            " IS NULL OR subscription = $1) AND id < $2",
            " AND ($3",
            $cast_big,
            " IS NULL OR at >= $3) AND ($4",
            $cast_big,
            " IS NULL OR at <= $4)",
            " AND ($5",
            $cast_text,
            " IS NULL OR resource_group = $5)",
            " AND ($6",
            $cast_text,
            " IS NULL OR target_key = $6 OR (target_key > $7 AND target_key < $8))",
            " AND ($9",
            $cast_text,
            " IS NULL OR correlation_id = $9)",
            " AND ($10",
            $cast_text,
            " IS NULL OR caller = $10)",
            " AND ($11",
            $cast_text,
            " IS NULL OR status = $11)",
            " ORDER BY id DESC LIMIT $12"
        )
    };
}
pub(crate) use activity_select;
