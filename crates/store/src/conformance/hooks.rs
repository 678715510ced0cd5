//! Cases that reach behind the store, through [`EngineHooks`]: what is on disk, restarts,
//! migrations, rows corrupted by hand. Each engine's test file implements the hooks with SQL
//! of its own; the cases and their assertions are the same for every engine.

use crate::entries::PutEntry;
use async_trait::async_trait;

use super::*;
use crate::{EntryKind, Expect};

/// The schema version both engines migrate to (their migration lists mirror each other).
pub const SCHEMA_VERSION: i64 = 8;

/// A store opened by [`EngineHooks::open`], with the operation TTL it reports (the engine's own
/// accessor, which the [`Store`] trait does not have).
pub struct Opened {
    pub store: Arc<dyn Store>,
    pub operation_ttl: Duration,
}

/// A resource row as stored: its derived columns and its JSON body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawResourceRow {
    pub subscription: String,
    pub resource_group: String,
    pub type_key: String,
    pub next_due: Option<i64>,
    pub intent: bool,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub lease_epoch: i64,
    pub generation: i64,
    pub body: String,
}

/// What an engine's test file lets the hook cases do behind the store's back, on the
/// harness's database, through a connection of its own that sees only what the store
/// committed. Hooks are test code: they panic when their SQL fails.
#[async_trait]
pub trait EngineHooks: Send + Sync {
    /// Opens another store on the same database, as a restarted Slipway does.
    async fn open(&self, operation_ttl: Duration) -> Result<Opened, StoreError>;

    /// Something that changes whenever a write reaches the database, and only then (SQLite:
    /// `PRAGMA data_version` on one connection of the hooks'; PostgreSQL: every row's `xmin`).
    async fn write_mark(&self) -> Vec<String>;

    /// The versions recorded in `schema_migrations`, ascending.
    async fn migrations(&self) -> Vec<i64>;

    /// Takes the database back to schema version 1, as a Slipway from before registry
    /// entries and references left it: their tables dropped, the later versions unrecorded.
    async fn back_to_version_1(&self);

    /// Records `version` in `schema_migrations`, as a newer Slipway would.
    async fn record_migration(&self, version: i64);

    /// The row of resource `key` (lowercase) as stored.
    async fn resource_row(&self, key: &ResourceKey) -> RawResourceRow;

    /// Overwrites the body of resource `key`.
    async fn set_resource_body(&self, key: &ResourceKey, body: &str);

    /// Overwrites the body of operation `id` (whatever its subscription).
    async fn set_operation_body(&self, id: &OperationId, body: &str);

    /// Overwrites the lease columns of resource `key`.
    async fn set_lease(&self, key: &ResourceKey, owner: Option<&str>, until: Option<i64>, epoch: i64);

    /// Inserts a pending outbox row whose operation id is `operation_id`, taken as is: of
    /// subscription `s`, to URI `u`, due and created at 0.
    async fn insert_notification(&self, operation_id: &str);
}

fn bump(s: &mut Snapshot) -> Result<(), Rejection> {
    s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
    Ok(())
}

fn generation(s: &mut Snapshot) -> Result<(), Rejection> {
    s.resource.as_mut().ok_or(Rejection::NotFound)?.generation += 1;
    Ok(())
}

/// No-op changes, idempotent replays and refused changes reach nothing on disk (the suite's
/// `case_noop_change_writes_nothing` shows it through the store; this looks at the database).
pub async fn case_a_change_that_alters_nothing_does_not_write(h: &mut Harness) {
    let store: &dyn Store = &**h;
    let id = vnet("sub", "rg", "r1");
    put(store, &id, spec(1), ctx(1, T0)).await;
    let before = h.hooks().write_mark().await;

    noop(store, ChangeRequest::new(id.key(), at(1))).await;
    put(store, &id, spec(1), ctx(2, at(2))).await; // an idempotent replay
    let err = apply(store, ChangeRequest::new(id.key(), at(3)), |s| {
        bump(s)?;
        Err(Rejection::NotFound)
    })
    .await;
    assert_eq!(err, Err(StoreError::Rejected(Rejection::NotFound)));
    assert_eq!(h.hooks().write_mark().await, before, "nothing reached the database");

    apply(store, ChangeRequest::new(id.key(), at(4)), bump).await.expect("change");
    assert_ne!(h.hooks().write_mark().await, before, "the mark does notice a real write");
}

pub async fn case_reopening_keeps_data_and_migrates_once(h: &mut Harness) {
    let id = vnet("sub", "rg", "r1");
    let created = put(&**h, &id, spec(1), ctx(1, T0)).await.1.resource.expect("created");
    h.reopen().await.expect("reopen");
    assert_eq!(h.get_resource(&id.key()).await, Ok(Some(created)));
    let versions = h.hooks().migrations().await;
    assert_eq!((versions.len() as i64, versions.last().copied()), (SCHEMA_VERSION, Some(SCHEMA_VERSION)));
}

/// A database written by a Slipway that predates registry entries and references (schema
/// version 1) gets their tables when it is opened, and keeps what it had.
pub async fn case_a_version_1_database_gets_the_entries_table(h: &mut Harness) {
    let id = vnet("sub", "rg", "r1");
    let created = put(&**h, &id, spec(1), ctx(1, T0)).await.1.resource.expect("created");
    h.close();
    h.hooks().back_to_version_1().await;
    assert_eq!(h.hooks().migrations().await, vec![1], "back at version 1");
    h.open(h.operation_ttl).await.expect("open a version 1 database");
    assert_eq!(h.get_resource(&id.key()).await, Ok(Some(created)));
    let entry = h
        .put_entry(PutEntry {
            kind: EntryKind::ApiToken,
            id: "t1".into(),
            partition: String::new(),
            body: "{}".into(),
            expect: Expect::Absent,
            now: T0,
            activity: None,
        })
        .await
        .expect("put");
    assert_eq!(h.get_entry(EntryKind::ApiToken, "t1").await, Ok(Some(entry)));
    assert_eq!(h.hooks().migrations().await.last(), Some(&SCHEMA_VERSION));
}

pub async fn case_a_newer_schema_is_refused(h: &mut Harness) {
    h.close();
    h.hooks().record_migration(99).await;
    let err = h.open(h.operation_ttl).await.expect_err("refused");
    assert!(matches!(&err, StoreError::Internal(m) if m.contains("newer")), "{err:?}");
}

/// Rows corrupted behind the store's back (bodies that do not parse or belong to another
/// row, a negative lease epoch, a notification of no operation id) fail what reads them as
/// `Internal`, never with a panic or a wrong answer, and leave the rest working.
pub async fn case_corrupt_rows_are_internal_errors_not_panics(h: &mut Harness) {
    let store: &dyn Store = &**h;
    let hooks = h.hooks();
    let id = vnet("sub", "rg", "r1");
    let other = vnet("sub", "rg", "r2");
    put(store, &id, spec(1), ctx(1, T0)).await;
    put(store, &other, spec(1), ctx(2, T0)).await;
    hooks.set_resource_body(&id.key(), "{not json").await;
    hooks.set_operation_body(&op_id(2), "[]").await;
    for key in [id.key(), other.key()] {
        hooks.set_lease(&key, Some("x"), Some(0), -1).await;
    }

    check_corrupt_rows_are_internal(store, &id, &other).await;
    let internal = |r: &StoreError| matches!(r, StoreError::Internal(_));
    assert!(internal(&store.get_resource(&other.key()).await.expect_err("negative epoch")));

    // A body that parses but belongs to another row is corrupt too.
    for key in [id.key(), other.key()] {
        hooks.set_lease(&key, None, None, 0).await;
    }
    let foreign = hooks.resource_row(&other.key()).await.body;
    hooks.set_resource_body(&id.key(), &foreign).await;
    assert!(internal(&store.get_resource(&id.key()).await.expect_err("foreign body")));
    assert!(store.get_resource(&other.key()).await.expect("healthy row").is_some());

    hooks.insert_notification("nope").await;
    assert!(internal(&store.claim_notifications(at(1), 10, Duration::from_secs(1)).await.expect_err("bad id")));
    store.ping().await.expect("the store survives");
}

/// The indexed columns are derived from the record, lowercased; the lease lives in columns
/// only, and its epoch survives client writes and releases.
pub async fn case_columns_follow_the_record(h: &mut Harness) {
    let store: &dyn Store = &**h;
    let hooks = h.hooks();
    let id = vnet("Sub-Cols", "RG-Cols", "R1");
    let key = seed(store, &id, 1, Schedule { next_due: Some(at(5)), intent: true, drift_due: None }).await;
    let c = hooks.resource_row(&key).await;
    assert_eq!(
        (c.subscription.as_str(), c.resource_group.as_str(), c.type_key.as_str()),
        ("sub-cols", "rg-cols", "slipway.example/virtualnetworks")
    );
    assert_eq!(
        (c.next_due, c.intent, c.lease_owner, c.lease_until, c.lease_epoch, c.generation),
        (Some(at(5).as_millis()), true, None, None, 0, 1)
    );

    store.claim(&claim_req("engine-a", at(10), 10, 10)).await.expect("claim");
    let c = hooks.resource_row(&key).await;
    assert_eq!(
        (c.next_due, c.intent, c.lease_owner.as_deref(), c.lease_until, c.lease_epoch),
        (Some(at(5).as_millis()), false, Some("engine-a"), Some(at(30_010).as_millis()), 1)
    );
    let body: serde_json::Value = serde_json::from_str(&c.body).expect("json body");
    assert!(body.get("lease").is_none(), "the lease lives in columns only: {body}");

    // A client write that keeps the lease, then a release: the epoch survives both.
    apply(store, ChangeRequest::new(key.clone(), at(20)), generation).await.expect("change");
    let c = hooks.resource_row(&key).await;
    assert_eq!((c.lease_owner.as_deref(), c.lease_epoch, c.generation), (Some("engine-a"), 1, 2));
    store.release_leases(&"engine-a".into()).await.expect("release");
    apply(store, ChangeRequest::new(key.clone(), at(30)), generation).await.expect("change");
    let c = hooks.resource_row(&key).await;
    assert_eq!((c.lease_owner, c.lease_until, c.lease_epoch, c.generation), (None, None, 1, 3));
}

/// A store opened with another operation TTL reports it and keeps operations for it.
pub async fn case_operation_ttl_is_configurable(h: &mut Harness) {
    let ttl = Duration::from_secs(3600);
    h.close();
    assert_eq!(h.open(ttl).await, Ok(ttl));
    case_operation_ttl(h).await;
    case_operation_expiry_follows_last_write(h).await;
}
