//! What the engine's integration tests share: a SQLite store fit for paused time, creating
//! a resource as a client PUT would, and a node's engine on a shared store.
//!
//! The tests run on paused time (`start_paused`): the engine's timers, its leases and the
//! injected clock ([`slipway_test_support::TestClock`]) move together, with
//! `tokio::time::advance` or when every task waits on a timer. That is sound because
//! nothing the tests wait for happens off the runtime: the providers are in-test doubles,
//! SQLite reads run in `spawn_blocking`, and SQLite writes — on the store's writer thread —
//! go through [`HeldStore`].
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use slipway_domain::admission::{RequestContext, admit_put};
use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId};
use slipway_domain::resource::{ResourceRecord, Snapshot, Spec};
use slipway_domain::time::Clock;
use slipway_domain::{ArmId, Initiator, Operation, Timestamp, TypePolicy};
use slipway_engine::{Engine, EngineError, EngineOptions, Providers};
use slipway_provider::Provider;
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_store::{
    ChangeFn, ChangeRequest, ClaimRequest, Entry, EntryKind, Expect, ListQuery, Notification, Page, Store, StoreError,
    StoreReading, StoreStats, change_with,
};
use slipway_test_support::holding_time;

/// How long a test waits for anything the engine should do by itself (wall-clock time).
pub const WAIT: Duration = Duration::from_secs(10);

/// A SQLite store in `dir`, every call of which holds paused time still while it runs.
pub fn sqlite(dir: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(HeldStore(Arc::new(SqliteStore::open(SqliteOptions::new(dir.join("db"))).unwrap())))
}

/// A store whose every call runs under [`holding_time`]: while a write waits for SQLite's
/// writer thread, the runtime is idle, and paused time would leap to the next timer — a
/// lease renewal, a deadline — in the middle of a transaction.
pub struct HeldStore(pub Arc<dyn Store>);

#[async_trait]
impl Store for HeldStore {
    async fn change(&self, req: ChangeRequest, change: ChangeFn) -> Result<Snapshot, StoreError> {
        holding_time(self.0.change(req, change)).await
    }
    async fn get_resource(&self, key: &ResourceKey) -> Result<Option<ResourceRecord>, StoreError> {
        holding_time(self.0.get_resource(key)).await
    }
    async fn list_resources(&self, query: &ListQuery) -> Result<Page, StoreError> {
        holding_time(self.0.list_resources(query)).await
    }
    async fn get_operation(
        &self,
        subscription: &SubscriptionId,
        id: &OperationId,
        now: Timestamp,
    ) -> Result<Option<Operation>, StoreError> {
        holding_time(self.0.get_operation(subscription, id, now)).await
    }
    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ResourceRecord>, StoreError> {
        holding_time(self.0.claim(req)).await
    }
    async fn renew_leases(&self, owner: &str, keys: &[ResourceKey], until: Timestamp) -> Result<u64, StoreError> {
        holding_time(self.0.renew_leases(owner, keys, until)).await
    }
    async fn release_leases(&self, owner: &str) -> Result<u64, StoreError> {
        holding_time(self.0.release_leases(owner)).await
    }
    async fn sweep_operations(&self, now: Timestamp) -> Result<u64, StoreError> {
        holding_time(self.0.sweep_operations(now)).await
    }
    async fn claim_notifications(
        &self,
        now: Timestamp,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<Notification>, StoreError> {
        holding_time(self.0.claim_notifications(now, limit, hold)).await
    }
    async fn finish_notification(&self, id: i64) -> Result<(), StoreError> {
        holding_time(self.0.finish_notification(id)).await
    }
    async fn reschedule_notification(
        &self,
        id: i64,
        next_attempt_at: Timestamp,
        last_error: &str,
    ) -> Result<(), StoreError> {
        holding_time(self.0.reschedule_notification(id, next_attempt_at, last_error)).await
    }
    async fn abandon_notification(&self, id: i64, last_error: &str) -> Result<(), StoreError> {
        holding_time(self.0.abandon_notification(id, last_error)).await
    }
    async fn defer_notifications(&self, rows: &[(i64, Timestamp)]) -> Result<(), StoreError> {
        holding_time(self.0.defer_notifications(rows)).await
    }
    async fn get_entry(&self, kind: EntryKind, id: &str) -> Result<Option<Entry>, StoreError> {
        holding_time(self.0.get_entry(kind, id)).await
    }
    async fn list_entries(&self, kind: EntryKind, partition: Option<&str>) -> Result<Vec<Entry>, StoreError> {
        holding_time(self.0.list_entries(kind, partition)).await
    }
    async fn put_entry(
        &self,
        kind: EntryKind,
        id: &str,
        partition: &str,
        body: &str,
        expect: Expect,
        now: Timestamp,
    ) -> Result<Entry, StoreError> {
        holding_time(self.0.put_entry(kind, id, partition, body, expect, now)).await
    }
    async fn delete_entry(&self, kind: EntryKind, id: &str, expect: Expect) -> Result<bool, StoreError> {
        holding_time(self.0.delete_entry(kind, id, expect)).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        holding_time(self.0.ping()).await
    }
    fn stats(&self) -> StoreStats {
        self.0.stats()
    }
    fn metrics(&self) -> slipway_metrics::StoreMetrics {
        self.0.metrics()
    }
    async fn reading(&self, now: Timestamp) -> Result<StoreReading, StoreError> {
        holding_time(self.0.reading(now)).await
    }
}

/// Creates the resource `id` (operation `…0001`), as a client PUT would.
pub async fn create(store: &dyn Store, clock: &dyn Clock, id: ArmId) -> OperationId {
    let now = clock.now();
    let ctx = RequestContext {
        operation_id: OperationId::parse("00000000-0000-0000-0000-000000000001").unwrap(),
        now,
        initiator: Initiator::default(),
        notification_uri: None,
        api_version: "v1".into(),
        actor: "test".into(),
        actor_type: "User".into(),
        job_context: None,
    };
    let op = ctx.operation_id.clone();
    let spec = Spec { location: None, tags: Default::default(), properties: serde_json::json!({}) };
    change_with(store, ChangeRequest::new(id.key(), now), move |s| admit_put(s, &id, "Thing", spec, &ctx))
        .await
        .unwrap();
    op
}

/// A running node.
pub struct Node {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    run: tokio::task::JoinHandle<Result<(), EngineError>>,
}

impl Node {
    /// Node `owner`'s engine for `id`'s type, running `provider` (named as `policy` names it)
    /// with leases of `lease_for`.
    pub fn start(
        owner: &str,
        store: Arc<dyn Store>,
        provider: Arc<dyn Provider>,
        id: &ArmId,
        policy: TypePolicy,
        clock: Arc<dyn Clock>,
        lease_for: Duration,
    ) -> Node {
        let providers: Providers = HashMap::from([(policy.provider.clone(), provider)]);
        let options = EngineOptions {
            owner: owner.into(),
            lease_for,
            idle_interval: Duration::from_millis(50),
            ..EngineOptions::default()
        };
        let engine = Engine::new(store, providers, HashMap::from([(id.type_key(), policy)]), clock, options);
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(engine.run(async move {
            let _ = stop_rx.await;
        }));
        Node { stop: Some(stop), run }
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.run.await.unwrap().unwrap();
    }
}
