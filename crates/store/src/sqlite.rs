//! The embedded SQLite engine: one database file in WAL mode, one writer thread doing group
//! commit, and a small pool of read-only connections.
//!
//! SQLite admits one writer at a time anyway. Funnelling every write through one thread lets
//! many concurrent requests share one transaction and so one fsync: that is where the
//! throughput comes from with `synchronous=FULL`, not from weaker durability (docs/store.md#sqlite).
//!
//! Layout: [`schema`] (connections, pragmas, migrations), [`writer`] (the group-commit
//! thread), [`readers`] (the read pool), [`rows`] (row ⇄ record mapping and the read
//! queries), [`writes`] (everything the writer runs), [`entries`] (registry entries' reads
//! and writes), [`checkpointer`] (WAL checkpoints off the write path), [`backup`] (an online
//! copy of the file, and putting one back).

pub mod backup;
mod checkpointer;
mod entries;
mod readers;
mod rows;
mod schema;
mod writer;
mod writes;

use crate::GroupUsage;
use crate::NotificationId;
use crate::activity::ActivityRow;
use crate::entries::PutEntry;
use crate::{ActivityPage, ActivityQuery};
use slipway_domain::LeaseOwner;
use slipway_domain::activity::ActivityEntry;
use slipway_domain::ids::TypeKey;
use std::ffi::OsString;
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode};
use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId};
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{Operation, Timestamp};
use tokio::sync::{mpsc, oneshot};

use crate::plan::Retention;
use crate::{
    ChangeFn, ChangeRequest, ClaimRequest, Entry, EntryKind, EventQuery, EventRead, Expect, ListQuery, Notification,
    OperationPage, OperationQuery, Page, StatsCounters, Store, StoreError, StoreReading, StoreStats,
};

use checkpointer::Checkpointer;
use readers::Readers;
use writer::{Job, Lane, Queues, Request};

/// SQLite's `synchronous` pragma, as far as Slipway offers it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync on every commit: an accepted operation survives power loss.
    #[default]
    Full,
    /// fsync at checkpoints only: a power loss may drop the last commits (never corrupts).
    Normal,
}

impl Synchronous {
    pub fn as_str(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

impl FromStr for Synchronous {
    type Err = String;

    /// Case-insensitive `full` or `normal`, as configuration spells it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("full") {
            Ok(Synchronous::Full)
        } else if s.eq_ignore_ascii_case("normal") {
            Ok(Synchronous::Normal)
        } else {
            Err(format!("synchronous must be FULL or NORMAL, not {s:?}"))
        }
    }
}

impl fmt::Display for Synchronous {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    /// The database file; `<path>.lock`, `<path>-wal` and `<path>-shm` live beside it.
    pub path: PathBuf,
    pub synchronous: Synchronous,
    /// How long an operation stays readable after its last write.
    pub operation_ttl: Duration,
    /// How long an event stays in the feed.
    pub event_retention: Duration,
    /// How long an activity-log entry is kept.
    pub activity_retention: Duration,
    /// Read-only connections (and so concurrent reads).
    pub readers: usize,
    /// Most write requests committed in one transaction.
    pub max_batch: usize,
}

impl SqliteOptions {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteOptions {
            path: path.into(),
            synchronous: Synchronous::Full,
            operation_ttl: crate::DEFAULT_OPERATION_TTL,
            event_retention: crate::DEFAULT_EVENT_RETENTION,
            activity_retention: crate::DEFAULT_ACTIVITY_RETENTION,
            readers: 4,
            max_batch: 256,
        }
    }
}

/// The writer's queues, one per [`Lane`].
struct Lanes {
    client: mpsc::Sender<Box<dyn Job>>,
    background: mpsc::Sender<Box<dyn Job>>,
}

/// The SQLite [`Store`]. One per database file and process: a second open of the same file
/// fails with [`StoreError::Unavailable`] while this one lives.
pub struct SqliteStore {
    // `None` only while dropping: closing the channels is what stops the writer.
    jobs: Option<Lanes>,
    writer: Option<JoinHandle<()>>,
    readers: Arc<Readers>,
    synchronous: Synchronous,
    retention: Retention,
    stats: Arc<StatsCounters>,
    _checkpointer: Checkpointer,
    // Held (locked) for the store's lifetime; declared last so it is released last.
    _lock: File,
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database, then starts the writer thread.
    /// Does blocking file I/O: call it at startup or from `spawn_blocking`.
    pub fn open(options: SqliteOptions) -> Result<SqliteStore, StoreError> {
        let path = options.path.as_path();
        let lock = lock_exclusive(path)?;
        let conn = schema::open_writer(path, options.synchronous)?;
        let readers = Readers::open(path, options.readers.max(1))?;
        let checkpointer = Checkpointer::start(path)?;
        let max_batch = options.max_batch.max(1);
        // Bounded queues push back on callers instead of growing without limit when the disk
        // cannot keep up.
        let (client, client_rx) = mpsc::channel(max_batch.saturating_mul(2));
        let (background, background_rx) = mpsc::channel(max_batch.saturating_mul(2));
        let queues = Queues { client: client_rx, background: background_rx };
        let stats = Arc::new(StatsCounters::default());
        let counters = stats.clone();
        let writer = std::thread::Builder::new()
            .name("slipway-sqlite-writer".into())
            .spawn(move || writer::run(conn, queues, max_batch, &counters))
            .map_err(|e| StoreError::Internal(format!("cannot start the SQLite writer thread: {e}")))?;
        tracing::info!(path = %path.display(), synchronous = %options.synchronous, "SQLite store open");
        Ok(SqliteStore {
            jobs: Some(Lanes { client, background }),
            writer: Some(writer),
            readers,
            synchronous: options.synchronous,
            retention: Retention {
                operations: options.operation_ttl,
                events: options.event_retention,
                activity: options.activity_retention,
            },
            stats,
            _checkpointer: checkpointer,
            _lock: lock,
        })
    }

    pub fn synchronous(&self) -> Synchronous {
        self.synchronous
    }

    pub fn operation_ttl(&self) -> Duration {
        self.retention.operations
    }

    /// Runs `work` in one of the writer's next batches (see [`Lane`]), inside its own
    /// savepoint, and answers once that batch committed. If the caller goes away first the
    /// write still happens.
    async fn write<T, F>(&self, lane: Lane, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let lanes = self.jobs.as_ref().ok_or_else(writer_stopped)?;
        let queue = match lane {
            Lane::Client => &lanes.client,
            Lane::Background => &lanes.background,
        };
        let (reply, answer) = oneshot::channel();
        queue.send(Box::new(Request::new(work, reply))).await.map_err(|_| writer_stopped())?;
        answer.await.map_err(|_| writer_stopped())?
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.jobs = None;
        // Waiting for the last batch means the file is closed and unlocked when drop returns,
        // so the same process can reopen it at once.
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!("the SQLite writer thread panicked");
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn change(&self, req: ChangeRequest, change: ChangeFn) -> Result<Snapshot, StoreError> {
        let retention = self.retention;
        let (change, tally) = crate::metered::tally(change);
        // Engine writes carry their lease; a change without one is a client's.
        let lane = if req.fence.is_some() { Lane::Background } else { Lane::Client };
        let changed = self.write(lane, move |conn| writes::change(conn, &req, change, retention)).await;
        if changed.is_ok() {
            tally.record(&self.stats.metrics);
        }
        changed
    }

    async fn get_resource(&self, key: &ResourceKey) -> Result<Option<ResourceRecord>, StoreError> {
        let key = key.clone();
        self.readers.run(move |conn| rows::get_resource(conn, &key)).await
    }

    async fn list_resources(&self, query: &ListQuery) -> Result<Page, StoreError> {
        let query = query.clone();
        self.readers.run(move |conn| rows::list_resources(conn, &query)).await
    }

    async fn list_referrers(&self, key: &ResourceKey, limit: usize) -> Result<Vec<ResourceRecord>, StoreError> {
        let key = key.clone();
        self.readers.run(move |conn| rows::referrers_of(conn, &key, limit)).await
    }

    async fn usage(&self, subscription: &SubscriptionId) -> Result<Vec<GroupUsage>, StoreError> {
        let subscription = subscription.clone();
        self.readers.run(move |conn| rows::usage_rows(conn, &subscription)).await
    }

    async fn list_operations(&self, query: &OperationQuery) -> Result<OperationPage, StoreError> {
        let query = query.clone();
        self.readers.run(move |conn| rows::list_operations(conn, &query)).await
    }

    async fn get_operation(
        &self,
        subscription: &SubscriptionId,
        id: &OperationId,
        now: Timestamp,
    ) -> Result<Option<Operation>, StoreError> {
        let subscription = subscription.clone();
        let id = id.clone();
        self.readers.run(move |conn| rows::get_operation(conn, subscription.as_str(), &id, now)).await
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ResourceRecord>, StoreError> {
        let req = req.clone();
        self.write(Lane::Background, move |conn| writes::claim(conn, &req)).await
    }

    async fn renew_leases(
        &self,
        owner: &LeaseOwner,
        keys: &[ResourceKey],
        until: Timestamp,
    ) -> Result<u64, StoreError> {
        let owner = owner.to_string();
        let keys = keys.to_vec();
        self.write(Lane::Background, move |conn| writes::renew_leases(conn, &owner, &keys, until)).await
    }

    async fn release_leases(&self, owner: &LeaseOwner) -> Result<u64, StoreError> {
        let owner = owner.to_string();
        self.write(Lane::Background, move |conn| writes::release_leases(conn, &owner)).await
    }

    async fn sweep_operations(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.write(Lane::Background, move |conn| writes::sweep_operations(conn, now)).await
    }

    async fn events(&self, query: &EventQuery) -> Result<EventRead, StoreError> {
        let query = query.clone();
        self.readers.run(move |conn| rows::events(conn, &query)).await
    }

    async fn schedule_drift(&self, type_keys: &[TypeKey], at: Timestamp) -> Result<u64, StoreError> {
        let type_keys: Vec<String> = type_keys.iter().map(|k| k.as_str().to_string()).collect();
        self.write(Lane::Background, move |conn| writes::schedule_drift(conn, &type_keys, at)).await
    }

    async fn sweep_events(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.write(Lane::Background, move |conn| writes::sweep_events(conn, now)).await
    }

    async fn record_activity(&self, entries: Vec<ActivityEntry>) -> Result<(), StoreError> {
        let retention = self.retention.activity;
        let rows = entries.iter().map(|e| ActivityRow::of(e, retention)).collect::<Result<Vec<_>, _>>()?;
        self.write(Lane::Background, move |conn| writes::insert_activity(conn, &rows)).await
    }

    async fn activity(&self, query: &ActivityQuery) -> Result<ActivityPage, StoreError> {
        let query = query.clone();
        self.readers.run(move |conn| rows::activity(conn, &query)).await
    }

    async fn sweep_activity(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.write(Lane::Background, move |conn| writes::sweep_activity(conn, now)).await
    }

    async fn claim_notifications(
        &self,
        now: Timestamp,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<Notification>, StoreError> {
        self.write(Lane::Background, move |conn| writes::claim_notifications(conn, now, limit, hold)).await
    }

    async fn finish_notification(&self, id: NotificationId) -> Result<(), StoreError> {
        self.write(Lane::Background, move |conn| writes::finish_notification(conn, id.0)).await
    }

    async fn reschedule_notification(
        &self,
        id: NotificationId,
        next_attempt_at: Timestamp,
        last_error: &str,
    ) -> Result<(), StoreError> {
        let last_error = last_error.to_string();
        self.write(Lane::Background, move |conn| {
            writes::reschedule_notification(conn, id.0, next_attempt_at, &last_error)
        })
        .await
    }

    async fn abandon_notification(&self, id: NotificationId, last_error: &str) -> Result<(), StoreError> {
        let last_error = last_error.to_string();
        self.write(Lane::Background, move |conn| writes::abandon_notification(conn, id.0, &last_error)).await
    }

    async fn defer_notifications(&self, rows: &[(NotificationId, Timestamp)]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let rows: Vec<(i64, Timestamp)> = rows.iter().map(|(id, at)| (id.0, *at)).collect();
        self.write(Lane::Background, move |conn| writes::defer_notifications(conn, &rows)).await
    }

    async fn get_entry(&self, kind: EntryKind, id: &str) -> Result<Option<Entry>, StoreError> {
        let id = id.to_string();
        self.readers.run(move |conn| entries::get(conn, kind, &id)).await
    }

    async fn list_entries(&self, kind: EntryKind, partition: Option<&str>) -> Result<Vec<Entry>, StoreError> {
        let partition = partition.map(str::to_string);
        self.readers.run(move |conn| entries::list(conn, kind, partition.as_deref())).await
    }

    async fn put_entry(&self, put: PutEntry) -> Result<Entry, StoreError> {
        let retention = self.retention.activity;
        self.write(Lane::Client, move |conn| entries::put(conn, &put, retention)).await
    }

    async fn delete_entry(
        &self,
        kind: EntryKind,
        id: &str,
        expect: Expect,
        activity: Option<ActivityEntry>,
    ) -> Result<bool, StoreError> {
        let (id, retention) = (id.to_string(), self.retention.activity);
        self.write(Lane::Client, move |conn| entries::delete(conn, kind, &id, expect, activity, retention)).await
    }

    fn stats(&self) -> StoreStats {
        self.stats.snapshot()
    }

    fn metrics(&self) -> slipway_metrics::StoreMetrics {
        self.stats.metrics.clone()
    }

    async fn reading(&self, now: Timestamp) -> Result<StoreReading, StoreError> {
        self.readers.run(move |conn| rows::reading(conn, now)).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        // A store whose writer is gone cannot accept work, however readable the file is.
        if self.jobs.as_ref().is_none_or(|lanes| lanes.client.is_closed() || lanes.background.is_closed()) {
            return Err(writer_stopped());
        }
        self.readers.run(|conn| conn.query_row("SELECT 1", [], |_| Ok(())).map_err(db_error)).await
    }
}

fn writer_stopped() -> StoreError {
    StoreError::Unavailable("the SQLite writer has stopped".into())
}

/// Busy and locked mean "someone else holds the database": retryable. Everything else is a
/// bug, corruption or a broken disk.
pub(crate) fn db_error(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Internal(e.to_string()),
    }
}

/// SQLite's own locking would let a second process share the file; two engines claiming from
/// one database would then break the single-process lease model, so we refuse it outright.
/// `File::try_lock` is `flock(LOCK_EX | LOCK_NB)` on Unix and needs no `unsafe`.
fn lock_exclusive(db: &Path) -> Result<File, StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = OsString::from(db.as_os_str());
    name.push(".lock");
    let path = PathBuf::from(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| StoreError::Unavailable(format!("cannot open lock file {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => {
            Err(StoreError::Unavailable(format!("database {} is in use by another Slipway process", db.display())))
        }
        Err(TryLockError::Error(e)) => Err(StoreError::Unavailable(format!("cannot lock {}: {e}", path.display()))),
    }
}
