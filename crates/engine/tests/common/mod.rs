//! What the engine's integration tests share: creating a resource as a client PUT would, a
//! node's engine on a shared store, and waiting for a condition.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use slipway_domain::admission::{RequestContext, admit_put};
use slipway_domain::ids::OperationId;
use slipway_domain::resource::Spec;
use slipway_domain::time::{Clock, ShiftedClock};
use slipway_domain::{ArmId, Initiator, TypePolicy};
use slipway_engine::{Engine, EngineError, EngineOptions, Providers};
use slipway_provider::Provider;
use slipway_store::{ChangeRequest, Store, change_with};

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
        clock: Arc<ShiftedClock>,
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

/// Waits (at most 10 s) until `check` holds.
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits (at most 10 s) until the async `check` holds.
pub async fn until_async<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
