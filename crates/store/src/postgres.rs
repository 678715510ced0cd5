//! The PostgreSQL engine: any number of Slipway replicas share one database.
//!
//! Where SQLite gets its isolation from having one writer, this engine gets it from locks the
//! server holds for the length of one transaction:
//!
//! * [`Store::change`] takes `pg_advisory_xact_lock(hashtextextended(key, 0))` first, so every
//!   change of one key — including concurrent creates of a key that has no row yet — runs one
//!   after the other, then reads the resource row `FOR UPDATE`, which serialises it with claims
//!   (they skip the locked row) and lease renewals (they wait for it). A change that alters
//!   nothing rolls back instead of committing: no WAL flush for a poll that saw nothing new.
//! * [`Store::claim`] and [`Store::claim_notifications`] pick rows with
//!   `FOR UPDATE SKIP LOCKED` and take them in the same transaction: two replicas never get
//!   the same row, and neither waits for the other.
//! * Engine writes are fenced by the lease epoch read under the row lock.
//!
//! Every call runs on its own tokio task, so a caller that goes away (a dropped HTTP request)
//! never leaves a transaction half done: the write finishes or rolls back on its own. Calls
//! that failed without committing — a deadlock, a pooled connection the server had closed —
//! are retried on a fresh connection; a change is retried only when its snapshot reads back
//! unchanged, since the change function runs once. A server that stops answering without
//! closing anything (a partition) cannot hang a caller: each attempt is bounded client-side
//! (twice the statement timeout plus the connect timeout) and its connection is then dropped.
//!
//! Pooled connections get their settings in the startup packet — `statement_timeout`,
//! `idle_in_transaction_session_timeout` (twice the former) and, with a schema, `search_path`
//! — so reconnects have them too; behind a session-mode pooler that refuses them
//! ([`Pooler::Session`]) they are `SET` right after connecting instead. Migrations run under a
//! session-level advisory lock, so replicas starting together migrate once.
//!
//! Errors: the database being unreachable, restarting, overloaded, timing out a statement or
//! the pool being exhausted are [`StoreError::Unavailable`] (the API answers 503 with
//! `Retry-After`); everything else is [`StoreError::Internal`].
//!
//! TCP connections use TLS by `sslmode` ([`tls`]: `disable`, `prefer` — the default —,
//! `require`, `verify-full`); Unix sockets never do.
//!
//! Layout: [`options`], [`schema`] (URL and session settings, migrations), [`tls`] (sslmode
//! and the rustls connector), [`attempt`] (one call's bounded, retried attempts), [`rows`]
//! (row ⇄ record and the read queries), [`changes`] (`change` with group commit, executing
//! the shared `crate::plan`), [`writes`] (claims, leases, outbox), [`entries`] (registry
//! entries).

mod activity;
mod attempt;
mod change_rows;
mod changes;
mod entries;
mod failure;
mod options;
mod rows;
mod schema;
mod tls;
mod writes;
use crate::GroupUsage;

pub(crate) use failure::{Failure, describe, pg_error};
pub use options::{Pooler, PostgresOptions};
pub use schema::redact;
pub use tls::SslMode;

use attempt::{Attempt, RowsWritten};

use crate::NotificationId;
use crate::activity::ActivityRow;
use crate::entries::PutEntry;
use crate::{ActivityPage, ActivityQuery};
use slipway_domain::LeaseOwner;
use slipway_domain::activity::ActivityEntry;
use slipway_domain::ids::TypeKey;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{
    ClientWrapper, Hook, HookError, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Timeouts,
};
use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId};
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{Operation, Timestamp};

use crate::plan::Retention;
use crate::{
    ChangeFn, ChangeRequest, ClaimRequest, Entry, EntryKind, EventQuery, EventRead, Expect, ListQuery, Notification,
    OperationPage, OperationQuery, Page, StatsCounters, Store, StoreError, StoreReading, StoreStats,
};

/// The PostgreSQL [`Store`]. Cheap to share behind an `Arc`; any number of them, in any
/// number of processes, may use one database (and schema) at once.
pub struct PostgresStore {
    inner: Arc<Inner>,
    /// Changes wait here for the next group commit (see [`changes`]).
    changes: tokio::sync::mpsc::Sender<changes::Queued>,
}

struct Inner {
    pool: Pool,
    retention: Retention,
    /// Client-side bound on one attempt: a server that stops answering (a partition) does not
    /// hang the caller; `None` when statement timeouts are disabled.
    attempt_limit: Option<Duration>,
    timeouts: Timeouts,
    ping_timeout: Duration,
    /// Dead pooled connections one call may run into before giving up.
    broken_budget: usize,
    /// `host:port/database` for messages (never the password).
    target: String,
    /// `sslmode …` for connection errors.
    transport: String,
    schema: Option<String>,
    stats: StatsCounters,
}

impl PostgresStore {
    /// Connects, creates the schema if asked to, applies pending migrations (once, however many
    /// replicas start together) and opens the connection pool.
    pub async fn connect(options: PostgresOptions) -> Result<PostgresStore, StoreError> {
        let settings = schema::Settings::new(&options)?;
        schema::migrate(&settings).await?;
        let manager = Manager::from_config(
            settings.pool_config.clone(),
            settings.transport.connector.clone(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool_size = options.pool_size.max(1);
        let wait = (!options.statement_timeout.is_zero()).then_some(options.statement_timeout);
        let timeouts = Timeouts { wait, create: Some(options.connect_timeout), recycle: Some(options.connect_timeout) };
        let mut pool = Pool::builder(manager);
        if let Some(sql) = settings.session_sql.clone() {
            pool = pool.post_create(Hook::async_fn(move |client: &mut ClientWrapper, _| {
                let sql = sql.clone();
                Box::pin(async move { client.batch_execute(&sql).await.map_err(HookError::Backend) })
            }));
        }
        let pool = pool
            .max_size(pool_size)
            .timeouts(timeouts)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Internal(format!("cannot build the PostgreSQL pool: {e}")))?;
        let attempt_limit = wait.map(|t| t.saturating_mul(2).saturating_add(options.connect_timeout));
        tracing::info!(
            target = %settings.target,
            schema = options.schema.as_deref().unwrap_or("(search path)"),
            pool_size,
            tls = %settings.transport,
            "PostgreSQL store open"
        );
        let inner = Arc::new(Inner {
            pool,
            retention: Retention {
                operations: options.operation_ttl,
                events: options.event_retention,
                activity: options.activity_retention,
            },
            attempt_limit,
            timeouts,
            ping_timeout: options.connect_timeout,
            broken_budget: pool_size + 1,
            transport: settings.transport.to_string(),
            target: settings.target,
            schema: options.schema,
            stats: StatsCounters::default(),
        });
        let (changes, queue) = tokio::sync::mpsc::channel(changes::MAX_BATCH * 4);
        let queue = Arc::new(tokio::sync::Mutex::new(queue));
        // A few batches in flight at once, on their own connections, leaving the rest of the
        // pool to reads, claims and renewals. They stop when the store is dropped.
        for _ in 0..(pool_size / 4).clamp(1, 4) {
            tokio::spawn(changes::run_batches(Arc::clone(&inner), Arc::clone(&queue)));
        }
        Ok(PostgresStore { inner, changes })
    }

    pub fn operation_ttl(&self) -> Duration {
        self.inner.retention.operations
    }

    pub fn schema(&self) -> Option<&str> {
        self.inner.schema.as_deref()
    }

    /// Whether a pooled connection's session is encrypted, as the server sees it
    /// (`pg_stat_ssl`). For the TLS tests.
    #[cfg(feature = "conformance")]
    pub async fn session_uses_tls(&self) -> Result<bool, StoreError> {
        let client = self.inner.client(&self.inner.timeouts).await?;
        let row = client
            .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
            .await
            .map_err(|e| pg_error(&e))?;
        row.try_get(0).map_err(|e| pg_error(&e))
    }

    /// Runs a write that commits whenever it succeeds on its own task: once started it
    /// commits or rolls back even if the caller stops waiting. It counts as a commit when it
    /// wrote a row (`Store::stats`).
    async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: RowsWritten + Send + 'static,
        F: for<'c> FnMut(&'c mut Object) -> Attempt<'c, T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let started = std::time::Instant::now();
        let done = tokio::spawn(async move { inner.run(inner.attempt_limit, inner.timeouts, work).await })
            .await
            .map_err(|e| StoreError::Internal(format!("PostgreSQL write task failed: {e}")))
            .and_then(|r| r);
        self.inner.stats.record(1, done.as_ref().is_ok_and(|d| d.rows_written() > 0), started);
        done
    }

    async fn read<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        F: for<'c> FnMut(&'c mut Object) -> Attempt<'c, T>,
    {
        self.inner.run(self.inner.attempt_limit, self.inner.timeouts, work).await
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn change(&self, req: ChangeRequest, change: ChangeFn) -> Result<Snapshot, StoreError> {
        let (change, tally) = crate::metered::tally(change);
        let (queued, answer) = changes::Queued::new(req, change);
        let stopped = || StoreError::Unavailable("the PostgreSQL store is shutting down".into());
        self.changes.send(queued).await.map_err(|_| stopped())?;
        let changed = answer.await.map_err(|_| stopped())?;
        if changed.is_ok() {
            tally.record(&self.inner.stats.metrics);
        }
        changed
    }

    async fn get_resource(&self, key: &ResourceKey) -> Result<Option<ResourceRecord>, StoreError> {
        self.read(|c| Box::pin(rows::get_resource(c, key.clone()))).await
    }

    async fn list_resources(&self, query: &ListQuery) -> Result<Page, StoreError> {
        self.read(|c| Box::pin(rows::list_resources(c, query.clone()))).await
    }

    async fn list_referrers(&self, key: &ResourceKey, limit: usize) -> Result<Vec<ResourceRecord>, StoreError> {
        self.read(|c| Box::pin(rows::referrers_of(c, key.clone(), limit))).await
    }

    async fn usage(&self, subscription: &SubscriptionId) -> Result<Vec<GroupUsage>, StoreError> {
        self.read(|c| Box::pin(rows::usage_rows(c, subscription.clone()))).await
    }

    async fn list_operations(&self, query: &OperationQuery) -> Result<OperationPage, StoreError> {
        self.read(|c| Box::pin(rows::list_operations(c, query.clone()))).await
    }

    async fn get_operation(
        &self,
        subscription: &SubscriptionId,
        id: &OperationId,
        now: Timestamp,
    ) -> Result<Option<Operation>, StoreError> {
        self.read(|c| Box::pin(rows::get_operation(c, subscription.as_str().to_string(), id.clone(), now))).await
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ResourceRecord>, StoreError> {
        let req = Arc::new(req.clone());
        self.write(move |c| Box::pin(writes::claim(c, Arc::clone(&req)))).await
    }

    async fn renew_leases(
        &self,
        owner: &LeaseOwner,
        keys: &[ResourceKey],
        until: Timestamp,
    ) -> Result<u64, StoreError> {
        let owner = owner.to_string();
        let keys: Vec<String> = keys.iter().map(|k| k.as_str().to_string()).collect();
        self.write(move |c| Box::pin(writes::renew_leases(c, owner.clone(), keys.clone(), until))).await
    }

    async fn release_leases(&self, owner: &LeaseOwner) -> Result<u64, StoreError> {
        let owner = owner.to_string();
        self.write(move |c| Box::pin(writes::release_leases(c, owner.clone()))).await
    }

    async fn sweep_operations(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.write(move |c| Box::pin(writes::sweep_operations(c, now))).await
    }

    async fn events(&self, query: &EventQuery) -> Result<EventRead, StoreError> {
        self.read(|c| Box::pin(rows::events(c, query.clone()))).await
    }

    async fn schedule_drift(&self, type_keys: &[TypeKey], at: Timestamp) -> Result<u64, StoreError> {
        let type_keys: Vec<String> = type_keys.iter().map(|k| k.as_str().to_string()).collect();
        self.write(move |c| Box::pin(writes::schedule_drift(c, type_keys.clone(), at))).await
    }

    async fn sweep_events(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.write(move |c| Box::pin(writes::sweep_events(c, now))).await
    }

    async fn record_activity(&self, entries: Vec<ActivityEntry>) -> Result<(), StoreError> {
        let retention = self.inner.retention.activity;
        let rows: Arc<activity::ActivityRows> = Arc::new(
            entries.iter().map(|e| ActivityRow::of(e, retention)).collect::<Result<Vec<_>, _>>()?.into_iter().collect(),
        );
        self.write(move |c| {
            let rows = Arc::clone(&rows);
            Box::pin(async move { activity::insert(&*c, &rows).await })
        })
        .await
        .map(drop)
    }

    async fn activity(&self, query: &ActivityQuery) -> Result<ActivityPage, StoreError> {
        self.read(|c| Box::pin(activity::page(c, query.clone()))).await
    }

    async fn sweep_activity(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.write(move |c| Box::pin(writes::sweep_activity(c, now))).await
    }

    async fn claim_notifications(
        &self,
        now: Timestamp,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<Notification>, StoreError> {
        self.write(move |c| Box::pin(writes::claim_notifications(c, now, limit, hold))).await
    }

    async fn finish_notification(&self, id: NotificationId) -> Result<(), StoreError> {
        self.write(move |c| Box::pin(writes::finish_notification(c, id.0))).await.map(drop)
    }

    async fn reschedule_notification(
        &self,
        id: NotificationId,
        next_attempt_at: Timestamp,
        last_error: &str,
    ) -> Result<(), StoreError> {
        let last_error = last_error.to_string();
        self.write(move |c| Box::pin(writes::reschedule_notification(c, id.0, next_attempt_at, last_error.clone())))
            .await
            .map(drop)
    }

    async fn abandon_notification(&self, id: NotificationId, last_error: &str) -> Result<(), StoreError> {
        let last_error = last_error.to_string();
        self.write(move |c| Box::pin(writes::abandon_notification(c, id.0, last_error.clone()))).await.map(drop)
    }

    async fn defer_notifications(&self, rows: &[(NotificationId, Timestamp)]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = rows.iter().map(|(id, _)| id.0).collect();
        let at: Vec<i64> = rows.iter().map(|(_, t)| t.as_millis()).collect();
        self.write(move |c| Box::pin(writes::defer_notifications(c, ids.clone(), at.clone()))).await.map(drop)
    }

    async fn get_entry(&self, kind: EntryKind, id: &str) -> Result<Option<Entry>, StoreError> {
        self.read(|c| Box::pin(entries::get(c, kind, id.to_string()))).await
    }

    async fn list_entries(&self, kind: EntryKind, partition: Option<&str>) -> Result<Vec<Entry>, StoreError> {
        self.read(|c| Box::pin(entries::list(c, kind, partition.map(str::to_string)))).await
    }

    async fn put_entry(&self, put: PutEntry) -> Result<Entry, StoreError> {
        let (put, retention) = (Arc::new(put), self.inner.retention.activity);
        self.write(move |c| Box::pin(entries::put(c, Arc::clone(&put), retention))).await
    }

    async fn delete_entry(
        &self,
        kind: EntryKind,
        id: &str,
        expect: Expect,
        activity: Option<ActivityEntry>,
    ) -> Result<bool, StoreError> {
        let (id, activity, retention) = (id.to_string(), Arc::new(activity), self.inner.retention.activity);
        self.write(move |c| Box::pin(entries::delete(c, kind, id.clone(), expect, Arc::clone(&activity), retention)))
            .await
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats.snapshot()
    }

    fn metrics(&self) -> slipway_metrics::StoreMetrics {
        self.inner.stats.metrics.clone()
    }

    async fn reading(&self, now: Timestamp) -> Result<StoreReading, StoreError> {
        self.read(move |c| Box::pin(rows::reading(c, now))).await
    }

    /// `SELECT 1` on a pooled connection; getting (or making) the connection and the query
    /// are each bounded by the connect timeout: a replica that cannot reach its database
    /// reports not ready, promptly.
    async fn ping(&self) -> Result<(), StoreError> {
        let inner = &self.inner;
        let limit = inner.ping_timeout;
        let timeouts = Timeouts { wait: Some(limit), create: Some(limit), recycle: Some(limit) };
        inner.run(Some(limit), timeouts, rows::ping).await
    }
}
