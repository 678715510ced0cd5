//! The single source of truth: resources, operations, the notification outbox, engine
//! leases and registry [`entries`], behind one [`Store`] trait. Every method is one
//! transaction. Engines: SQLite ([`sqlite`], the embedded default, one process) and
//! PostgreSQL ([`postgres`], any number of replicas). [`conformance`] is the one test suite
//! every engine must pass.
//!
//! The central primitive is [`Store::change`]: read a [`Snapshot`] of one resource, let a
//! pure domain function change it, and write back exactly what differs — all in one
//! transaction. Domain logic never sees SQL; SQL never makes decisions. With the resource it
//! reads, read-only and under their locks, the resources the change names (a child's parent,
//! referenced resources, and when asked its children or referrers), and it checks the lease
//! fence an engine write carries; every multi-document change goes through it.
//!
//! Both engines share what is engine-independent — `plan` (the rows a change writes),
//! `columns`, `documents` (the on-disk bodies, converted by hand from and to the domain's
//! types), [`entries`], `feed`, `groups`, `walk`, `metered` — so each engine adds only its SQL.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use slipway_domain::admission::Rejection;
use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId, TypeKey};
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{LeaseOwner, Operation, ProvisioningState, Timestamp};

mod columns;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod documents;
pub mod entries;
mod feed;
mod groups;
mod metered;
mod plan;
pub mod postgres;
pub mod registry;
pub mod sqlite;
mod walk;

pub use entries::{Entry, EntryKind, Expect, PutEntry};
pub use feed::{EventQuery, EventRead, EventScope};
pub use groups::{GroupPage, resource_groups};
pub use metered::{ActiveOperations, StoreReading};
pub use plan::{DEFAULT_EVENT_RETENTION, DEFAULT_OPERATION_TTL};
pub use walk::reference_walk;

/// A change to one resource's snapshot. Returning `Err` aborts: nothing is written.
pub type ChangeFn = Box<dyn FnOnce(&mut Snapshot) -> Result<(), Rejection> + Send>;

/// The lease an engine write must still hold (fencing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    pub owner: LeaseOwner,
    pub epoch: u64,
}

#[derive(Clone, Debug)]
pub struct ChangeRequest {
    pub key: ResourceKey,
    /// An operation to load even if it is terminal (e.g. the one a cancel names).
    pub operation: Option<(SubscriptionId, OperationId)>,
    /// Engine writes carry their lease; client writes carry none.
    pub fence: Option<Fence>,
    /// Resources the change reads as context (`Snapshot::related`): a child's parent.
    pub related: Vec<ResourceKey>,
    /// Also read the resource's direct children (`Snapshot::children`).
    pub children: bool,
    /// Also read who references the resource or anything under it (`Snapshot::referrers`).
    pub referrers: bool,
    /// Stamps operation expiry (last write + TTL).
    pub now: Timestamp,
}

impl ChangeRequest {
    pub fn new(key: ResourceKey, now: Timestamp) -> Self {
        ChangeRequest { key, operation: None, fence: None, related: Vec::new(), children: false, referrers: false, now }
    }

    pub fn fenced(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Reads `keys` as context too (see [`Snapshot::related`]).
    pub fn with_related(mut self, keys: impl IntoIterator<Item = ResourceKey>) -> Self {
        self.related.extend(keys);
        self.related.sort();
        self.related.dedup();
        self
    }

    /// Reads the resource's direct children too (see [`Snapshot::children`]).
    pub fn with_children(mut self, children: bool) -> Self {
        self.children = children;
        self
    }

    /// Reads who references the resource (see [`Snapshot::referrers`]): for deletes.
    pub fn with_referrers(mut self, referrers: bool) -> Self {
        self.referrers = referrers;
        self
    }

    pub fn with_operation(mut self, subscription: impl Into<SubscriptionId>, id: OperationId) -> Self {
        self.operation = Some((subscription.into(), id));
        self
    }

    /// `LeaseLost` unless the stored resource still holds this request's fence (if any).
    pub(crate) fn check_fence(&self, stored: &Snapshot) -> Result<(), StoreError> {
        let Some(fence) = &self.fence else { return Ok(()) };
        let held = stored
            .resource
            .as_ref()
            .and_then(|res| res.lease.as_ref())
            .is_some_and(|lease| lease.owner == fence.owner && lease.epoch == fence.epoch);
        if held { Ok(()) } else { Err(StoreError::LeaseLost) }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The change function refused; nothing was written.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The fence no longer matches the stored lease: another owner took over.
    #[error("lease lost")]
    LeaseLost,
    /// A registry entry write found something other than it expected (see [`Expect`]);
    /// nothing was written.
    #[error("precondition failed: {0}")]
    Precondition(String),
    /// The database cannot be reached or is overloaded; retry later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("store error: {0}")]
    Internal(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListQuery {
    pub subscription: SubscriptionId,
    /// Lowercased resource group; `None` lists the whole subscription.
    pub resource_group: Option<String>,
    /// Only resources of this type; `None` lists every type, in key order.
    pub type_key: Option<TypeKey>,
    /// Only resources nested under this one (a child type's collection under its parent).
    pub under: Option<ResourceKey>,
    /// Continue after this resource key (exclusive).
    pub after: Option<ResourceKey>,
    pub limit: usize,
}

/// Of `records` (resources under `parent`'s key), those directly under it.
pub(crate) fn direct_children(parent: &ResourceKey, records: Vec<ResourceRecord>) -> Vec<ResourceRecord> {
    records.into_iter().filter(|r| r.id.parent().is_some_and(|p| p.key() == *parent)).collect()
}

impl ListQuery {
    /// The key range the list reads, `(exclusive lower bound, exclusive upper bound)`: the
    /// keys under the narrowest of the subscription, the group and `under`
    /// (`/subscriptions/{s}[/resourcegroups/{g}]/…` or `{under}/…`), after `after`. A key is
    /// its id lowercased, and `0` follows `/`: `{p}0` bounds every key starting `{p}/`.
    pub(crate) fn key_range(&self) -> (String, String) {
        let prefix = match (&self.under, &self.resource_group) {
            (Some(parent), _) => parent.as_str().to_string(),
            (None, Some(group)) => ResourceKey::group(&self.subscription, group).into_string(),
            (None, None) => format!("/subscriptions/{}", self.subscription.as_str()),
        };
        let after = self.after.as_ref().map(|k| k.as_str().to_string()).unwrap_or_default();
        (after.max(format!("{prefix}/")), format!("{prefix}0"))
    }
}

/// A page of a subscription's operations ([`Store::list_operations`]), newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationQuery {
    pub subscription: SubscriptionId,
    /// Only operations in this state.
    pub status: Option<ProvisioningState>,
    /// Continue after this operation (exclusive), in the list's order.
    pub after: Option<OperationId>,
    pub limit: usize,
    /// Operations expired at `now` are left out, as [`Store::get_operation`] leaves them out.
    pub now: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationPage {
    pub items: Vec<Operation>,
    /// The last item's id when more may follow.
    pub next: Option<OperationId>,
}

impl OperationQuery {
    /// The id range the list reads downwards from, exclusive: below `after`, or below every
    /// id (ids are lowercase hex and dashes; `~` sorts after them all).
    pub(crate) fn below(&self) -> String {
        self.after.as_ref().map_or_else(|| "~".to_string(), |id| id.as_str().to_string())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub items: Vec<ResourceRecord>,
    /// Key of the last item when more may follow.
    pub next: Option<ResourceKey>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRequest {
    pub owner: LeaseOwner,
    pub now: Timestamp,
    pub lease_for: Duration,
    /// Most resources to take from the intent lane (new client requests).
    pub intent_limit: usize,
    /// Most resources to take from the follow-up lane (timers, recovery). Unused room in
    /// one lane is given to the other.
    pub followup_limit: usize,
    /// Most resources to take from the drift lane (`Schedule::drift_due` passed, nothing
    /// else due), and only within the room the other two lanes leave: drift checks never
    /// take a place real work could have.
    pub drift_limit: usize,
}

impl ClaimRequest {
    /// A resource this claim took from the drift lane: nothing else was due for it.
    pub fn drift_lane(record: &ResourceRecord) -> bool {
        record.schedule.next_due.is_none() && record.schedule.drift_due.is_some()
    }
}

/// What a store has done since it was opened; for benchmarks and operators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Commits: transactions that committed and wrote at least one row. A group commit
    /// counts once; a claim that found nothing, a renewal of no lease or a change that
    /// changed nothing is a write call but no commit. Both engines count the same way.
    pub commits: u64,
    /// Write calls answered (changes, claims, renewals, …), including those that changed
    /// nothing and so committed nothing.
    pub write_calls: u64,
    /// Transactions the database rolled back for a deadlock or a serialization failure,
    /// then run again (PostgreSQL; SQLite's one writer has none).
    pub conflicts: u64,
}

/// Counters an engine bumps as it commits, and the metrics it exports.
#[derive(Debug, Default)]
pub(crate) struct StatsCounters {
    commits: std::sync::atomic::AtomicU64,
    write_calls: std::sync::atomic::AtomicU64,
    conflicts: std::sync::atomic::AtomicU64,
    pub(crate) metrics: slipway_metrics::StoreMetrics,
}

impl StatsCounters {
    /// One write transaction of `calls` write calls, started at `started`.
    pub(crate) fn record(&self, calls: u64, committed: bool, started: std::time::Instant) {
        use std::sync::atomic::Ordering::Relaxed;
        self.write_calls.fetch_add(calls, Relaxed);
        if committed {
            self.commits.fetch_add(1, Relaxed);
        }
        self.metrics.transactions.observe(started.elapsed().as_secs_f64());
        self.metrics.batch_size.observe(calls as f64);
    }

    /// A transaction rolled back by a deadlock or serialization failure.
    pub(crate) fn conflict(&self) {
        self.conflicts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.metrics.conflicts.inc();
    }

    pub(crate) fn snapshot(&self) -> StoreStats {
        use std::sync::atomic::Ordering::Relaxed;
        StoreStats {
            commits: self.commits.load(Relaxed),
            write_calls: self.write_calls.load(Relaxed),
            conflicts: self.conflicts.load(Relaxed),
        }
    }
}

/// A row of the notification outbox, as the notifier names it back to the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NotificationId(pub i64);

impl std::fmt::Display for NotificationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A pending ARM async notification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    pub id: NotificationId,
    pub subscription: SubscriptionId,
    pub operation_id: OperationId,
    pub uri: String,
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
    pub created_at: Timestamp,
}

/// Every method is required, with no default: a wrapper (a test double, a decorator such as
/// [`conformance::Faulty`]) that forgot one would silently answer for the store it wraps.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// One transaction: load the snapshot of `req.key` (the resource, its non-terminal
    /// operations and `req.operation`), check the fence, run `change`, write the difference
    /// (resource upsert or delete, changed and new operations, new notifications with
    /// `next_attempt_at = now`), and return the snapshot as committed.
    ///
    /// Operations written get `expires_at = now + operation TTL`; only terminal operations
    /// ever expire (a running one must stay visible until it ends — deadlines end it). A
    /// change that alters nothing writes nothing.
    async fn change(&self, req: ChangeRequest, change: ChangeFn) -> Result<Snapshot, StoreError>;

    async fn get_resource(&self, key: &ResourceKey) -> Result<Option<ResourceRecord>, StoreError>;

    /// Resources of one type, or of every type, in key order.
    async fn list_resources(&self, query: &ListQuery) -> Result<Page, StoreError>;

    /// The resources that reference `key` itself (not its children), in key order, at most
    /// `limit`: "what uses this", for clients.
    async fn list_referrers(&self, key: &ResourceKey, limit: usize) -> Result<Vec<ResourceRecord>, StoreError>;

    /// A subscription's operations in descending id order — newest first, as operation ids
    /// are time-ordered (UUID version 7) — optionally of one status.
    async fn list_operations(&self, query: &OperationQuery) -> Result<OperationPage, StoreError>;

    /// An operation of the subscription (matched case-insensitively) that has not expired
    /// at `now`.
    async fn get_operation(
        &self,
        subscription: &SubscriptionId,
        id: &OperationId,
        now: Timestamp,
    ) -> Result<Option<Operation>, StoreError>;

    /// Leases due resources (`next_due <= now`) that are unleased, whose lease expired, or
    /// that the owner holds and a client touched since (`intent`). Intent lane first, then
    /// by when each became claimable (a lapsed lease's end, else `next_due`). Clears `intent`; keeps the epoch when the owner already held a live
    /// lease, else increments it. Returns the records with their new lease.
    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ResourceRecord>, StoreError>;

    /// Extends the leases `owner` holds on `keys` (the resources it is working on); returns
    /// how many. Only named keys are renewed, so a lease its owner forgot about — a claim
    /// whose answer was lost, a worker that died — simply expires and is taken over.
    async fn renew_leases(&self, owner: &LeaseOwner, keys: &[ResourceKey], until: Timestamp)
    -> Result<u64, StoreError>;

    /// Drops every lease `owner` holds (graceful shutdown; a restart of a single node).
    async fn release_leases(&self, owner: &LeaseOwner) -> Result<u64, StoreError>;

    /// Puts every idle resource (nothing due, no drift check scheduled) of the types
    /// `type_keys` in the drift lane at `at`; returns how many. The engine calls it at start,
    /// so that resources provisioned before their type had a drift interval — or before this
    /// version — are checked too: a resource's first check is otherwise scheduled only when the
    /// engine next looks at it.
    async fn schedule_drift(&self, type_keys: &[TypeKey], at: Timestamp) -> Result<u64, StoreError>;

    /// Deletes terminal operations whose expiry has passed; returns how many.
    async fn sweep_operations(&self, now: Timestamp) -> Result<u64, StoreError>;

    /// A subscription's events after a position, in order, of the resources in a scope; or
    /// that the position cannot be continued from ([`EventRead::Gone`]).
    async fn events(&self, query: &EventQuery) -> Result<EventRead, StoreError>;

    /// Deletes events whose retention has passed; returns how many.
    async fn sweep_events(&self, now: Timestamp) -> Result<u64, StoreError>;

    /// Hands out up to `limit` due pending notifications, earliest first, and hides each for
    /// `hold` (its due time moves to `now + hold`): concurrent notifiers — other replicas —
    /// never get the same row at once, and one that dies mid-delivery lets the row reappear
    /// after `hold`. Returned rows show the time they were due at.
    async fn claim_notifications(
        &self,
        now: Timestamp,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<Notification>, StoreError>;

    /// Delivered: the row is removed.
    async fn finish_notification(&self, id: NotificationId) -> Result<(), StoreError>;

    async fn reschedule_notification(
        &self,
        id: NotificationId,
        next_attempt_at: Timestamp,
        last_error: &str,
    ) -> Result<(), StoreError>;

    /// Gave up (the operation expired, or the attempts ran out): kept as dead with its last
    /// error, never retried.
    async fn abandon_notification(&self, id: NotificationId, last_error: &str) -> Result<(), StoreError>;

    /// Moves each pending row's due time to the time given with it, without counting an
    /// attempt or touching its last error: rows the notifier holds back unsent (their
    /// destination is busy) and claims it gives back (shutdown). Unknown, finished and dead
    /// rows are ignored.
    async fn defer_notifications(&self, rows: &[(NotificationId, Timestamp)]) -> Result<(), StoreError>;

    /// The entry of `kind` with exactly this `id`.
    ///
    /// Registry entries: API tokens, subscriptions, role assignments; see [`entries`].
    async fn get_entry(&self, kind: EntryKind, id: &str) -> Result<Option<Entry>, StoreError>;

    /// Entries of one kind, ordered by id (byte order); only those of `partition` when given.
    async fn list_entries(&self, kind: EntryKind, partition: Option<&str>) -> Result<Vec<Entry>, StoreError>;

    /// Inserts or replaces; the stored version becomes 1 on insert, previous+1 on replace.
    /// A mismatch with `expect` — or an entry that lives in another partition — is
    /// [`StoreError::Precondition`], and nothing is written.
    async fn put_entry(&self, put: PutEntry) -> Result<Entry, StoreError>;

    /// Removes; `Ok(false)` when absent (and `expect` allows that). A mismatch with `expect`
    /// is [`StoreError::Precondition`], and nothing is written.
    async fn delete_entry(&self, kind: EntryKind, id: &str, expect: Expect) -> Result<bool, StoreError>;

    /// Cheap liveness check for readiness probes.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Counters since the store was opened (see [`StoreStats`] for what counts).
    fn stats(&self) -> StoreStats;

    /// The metrics this store counts into.
    fn metrics(&self) -> slipway_metrics::StoreMetrics;

    /// What a metrics scrape shows of the store's contents now: operations in flight, due
    /// resources, the notification outbox.
    async fn reading(&self, now: Timestamp) -> Result<StoreReading, StoreError>;
}

/// Runs a change function on `snapshot`, for both engines. Change functions are caller code:
/// a refusal is [`StoreError::Rejected`], and a panic fails only this call as `Internal` —
/// never the writer thread or the batch it shares with other calls.
pub(crate) fn run_change(change: ChangeFn, snapshot: &mut Snapshot) -> Result<(), StoreError> {
    match catch_unwind(AssertUnwindSafe(|| change(snapshot))) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(rejection)) => Err(StoreError::Rejected(rejection)),
        Err(panic) => Err(StoreError::Internal(format!("change function panicked: {}", panic_text(&*panic)))),
    }
}

/// What a caught panic said.
pub(crate) fn panic_text(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}

/// [`Store::change`] with a typed result computed inside the transaction.
pub async fn change_with<R, F>(store: &dyn Store, req: ChangeRequest, f: F) -> Result<(R, Snapshot), StoreError>
where
    R: Send + 'static,
    F: FnOnce(&mut Snapshot) -> Result<R, Rejection> + Send + 'static,
{
    let slot: Arc<Mutex<Option<R>>> = Arc::new(Mutex::new(None));
    let out = slot.clone();
    let snap = store
        .change(
            req,
            Box::new(move |snap| {
                let r = f(snap)?;
                *out.lock().expect("result slot") = Some(r);
                Ok(())
            }),
        )
        .await?;
    let r = slot
        .lock()
        .expect("result slot")
        .take()
        .ok_or_else(|| StoreError::Internal("change function did not run".into()))?;
    Ok((r, snap))
}
