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
//! Both engines share what is engine-independent — `change` (a change's request, fence and
//! function), `plan` (the rows a change writes), `columns`, `documents` (the on-disk bodies,
//! converted by hand from and to the domain's types), [`entries`], `activity`, `feed`, `groups`,
//! `listing`, `walk`, `metered`, `stats` — so each engine adds only its SQL.

use std::time::Duration;

use async_trait::async_trait;
use slipway_domain::activity::ActivityEntry;
use slipway_domain::admission::Rejection;
use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId, TypeKey};
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{LeaseOwner, Operation, Timestamp};

mod activity;
mod change;
mod columns;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod documents;
pub mod entries;
mod feed;
mod groups;
mod listing;
mod metered;
mod plan;
pub mod postgres;
pub mod registry;
pub mod sqlite;
mod stats;
mod usage;
mod walk;

pub use activity::{ActivityPage, ActivityQuery, ActivityScope, DEFAULT_ACTIVITY_RETENTION};
pub(crate) use change::settings_lock_key;
pub use change::{ChangeFn, ChangeRequest, Fence, SettingsRead, UsageRead, change_with};
pub(crate) use change::{direct_children, panic_text, run_change};
pub use entries::{Entry, EntryKind, Expect, PutEntry};
pub use feed::{EventQuery, EventRead, EventScope};
pub use groups::{GroupPage, resource_groups};
pub use listing::{ListQuery, OperationPage, OperationQuery, Page};
pub use metered::{ActiveOperations, StoreReading};
pub use plan::{DEFAULT_EVENT_RETENTION, DEFAULT_OPERATION_TTL};
pub(crate) use stats::StatsCounters;
pub use stats::StoreStats;
pub use usage::GroupUsage;
pub use walk::reference_walk;

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

    /// What a subscription's resources consume, per meter and resource group (rows at zero
    /// left out), as the changes that wrote them committed it.
    async fn usage(&self, subscription: &SubscriptionId) -> Result<Vec<GroupUsage>, StoreError>;

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

    /// Writes settled activity-log entries on their own: what was refused, and what changed
    /// nothing the store keeps. An accepted change's entry is written in its own transaction
    /// instead (`ChangeRequest::with_activity`, `PutEntry::activity`).
    async fn record_activity(&self, entries: Vec<ActivityEntry>) -> Result<(), StoreError>;

    /// A page of the activity log, newest first (see [`ActivityQuery`]).
    async fn activity(&self, query: &ActivityQuery) -> Result<ActivityPage, StoreError>;

    /// Deletes activity entries whose retention has passed; returns how many.
    async fn sweep_activity(&self, now: Timestamp) -> Result<u64, StoreError>;

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
    /// is [`StoreError::Precondition`], and nothing is written. `activity`, when given, is
    /// written in the same transaction unless the expectation failed — settled `200` when an
    /// entry was removed, `204` when there was none.
    async fn delete_entry(
        &self,
        kind: EntryKind,
        id: &str,
        expect: Expect,
        activity: Option<ActivityEntry>,
    ) -> Result<bool, StoreError>;

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
