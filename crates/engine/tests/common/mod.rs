//! What the engine's integration tests share: a SQLite store fit for paused time, creating
//! a resource as a client PUT would, and a node's engine on a shared store.
//!
//! The tests run on paused time (`start_paused`): the engine's timers, its leases and the
//! injected clock ([`slipway_test_support::TestClock`]) move together, with
//! `tokio::time::advance` or when every task waits on a timer. That is sound because
//! nothing the tests wait for happens off the runtime: the providers are in-test doubles,
//! SQLite reads run in `spawn_blocking`, and SQLite writes — on the store's writer thread —
//! go through [`Faulty::holding_time`].
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use slipway_domain::admission::{RequestContext, admit_put};
use slipway_domain::ids::OperationId;
use slipway_domain::resource::Spec;
use slipway_domain::time::Clock;
use slipway_domain::{ArmId, Initiator, TypePolicy};
use slipway_engine::{Engine, EngineError, EngineOptions, Providers};
use slipway_provider::Provider;
use slipway_store::conformance::{Call, Faulty, Method};
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_store::{ChangeRequest, Store, change_with};

/// How long a test waits for anything the engine should do by itself (wall-clock time).
pub const WAIT: Duration = Duration::from_secs(10);

/// The lease renewals `store` recorded, as (leases named, leases renewed).
pub fn renewals(store: &Faulty) -> Vec<(usize, u64)> {
    store
        .recorded()
        .into_iter()
        .filter_map(|c| match c {
            Call::Renew(named, renewed) => Some((named, renewed)),
            _ => None,
        })
        .collect()
}

/// A SQLite store in `dir`, every call of which holds paused time still while it runs.
pub fn sqlite(dir: &std::path::Path) -> Arc<dyn Store> {
    sqlite_recording(dir, &[])
}

/// [`sqlite`], recording calls of `methods` ([`Faulty::recording`]).
pub fn sqlite_recording(dir: &std::path::Path, methods: &[Method]) -> Arc<Faulty> {
    let inner: Arc<dyn Store> = Arc::new(SqliteStore::open(SqliteOptions::new(dir.join("db"))).unwrap());
    Arc::new(Faulty::new(inner).recording(methods).holding_time())
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
