//! What a worker costs while it waits: its task is the future `Worker::run` returns (with the
//! span it is spawned in), sized by the largest state it can be suspended in. Steps are
//! boxed, so only the worker's own fields and its wait stay inside it (the wait itself is
//! not: boxed, its ~350 bytes would sit on the heap beside a task no smaller); what it
//! remembers of the resource (`memory`) lives on the heap beside it. The test here fails when
//! the task outgrows `TASK_BUDGET`.

use std::collections::HashMap;
use std::sync::Arc;

use slipway_domain::admission::{RequestContext, admit_put};
use slipway_domain::resource::{Lease, Snapshot, Spec};
use slipway_domain::time::{Clock, SystemClock};
use slipway_domain::{ArmId, Initiator, OperationId};
use slipway_store::Store;
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use tokio::sync::{Notify, watch};

use super::Worker;
use crate::{Engine, EngineOptions, Slot};

/// The budget: 1,200 bytes measured on 2026-12-02 (rustc 1.95), plus room for a field.
const TASK_BUDGET: usize = 1280;

#[tokio::test]
async fn a_waiting_worker_stays_within_its_task_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(SqliteOptions::new(dir.path().join("db"))).expect("open"));
    let engine = Engine::new(store, HashMap::new(), HashMap::new(), Arc::new(SystemClock), EngineOptions::default());
    let id = ArmId::new("sub", "rg", "Test.Ns", "things", "r1").expect("id");
    let ctx = RequestContext {
        operation_id: OperationId::parse("00000000-0000-0000-0000-000000000001").expect("uuid"),
        now: SystemClock.now(),
        initiator: Initiator::default(),
        notification_uri: None,
        api_version: "v1".into(),
        actor: "test".into(),
        actor_type: "User".into(),
        job_context: None,
    };
    let mut snap = Snapshot::default();
    let spec = Spec { location: None, tags: Default::default(), properties: serde_json::json!({}) };
    admit_put(&mut snap, &id, "Thing", spec, &ctx).expect("admitted");
    let record = snap.resource.expect("a record");
    let lease = Lease { owner: "node".into(), until: ctx.now, epoch: 1 };
    let slot = Arc::new(Slot { poke: Notify::new(), pending: Default::default() });
    let (_stop_tx, stop) = watch::channel(false);
    let worker = Worker::new(engine.shared.clone(), &record, &lease, slot, stop);
    let task = tracing::Instrument::instrument(worker.run(), tracing::info_span!("worker"));
    let bytes = std::mem::size_of_val(&task);
    assert!(bytes <= TASK_BUDGET, "a worker's task is {bytes} bytes, over its budget of {TASK_BUDGET}");
}
