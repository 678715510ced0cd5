//! The store conformance suite: every engine runs these cases unchanged.
//!
//! An engine's test file runs the whole suite with one line:
//!
//! ```text
//! slipway_store::conformance_suite!(make_store());
//! ```
//!
//! `make_store()` is any async expression that evaluates to a [`Harness`]: a fresh, empty
//! store as an `Arc<dyn Store>`, plus whatever must outlive it (a temp dir, a throwaway
//! database) handed to [`Harness::keep`]. The macro expands to one `#[tokio::test]` per case,
//! so the calling crate needs tokio with `macros` and `rt`.
//!
//! Cases build their data with the domain's own functions (`admit_put`, `admit_delete`,
//! `admit_cancel`, `Snapshot::set_operation_status`) so they exercise the shapes the API and
//! engine really write. Time is always passed in: nothing sleeps.

use std::any::Any;
use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use slipway_domain::admission::{self, Admitted, Rejection, RequestContext};
use slipway_domain::ids::{ArmId, OperationId, ResourceKey, SubscriptionId, TypeKey};
use slipway_domain::operation::codes;
use slipway_domain::resource::{Lease, NewNotification, Schedule, Snapshot, Spec};
use slipway_domain::{CloudError, Initiator, Operation, OperationRequest, ProvisioningState, Timestamp};

use crate::{ChangeFn, ChangeRequest, ClaimRequest, Fence, ListQuery, Store, StoreError, change_with};

/// A store under test and what must live as long as it.
pub struct Harness {
    // Fields drop in declaration order: the store closes before what it lives in goes away
    // (a temp dir removed under an open database).
    store: Arc<dyn Store>,
    /// The operation TTL the store was opened with.
    pub operation_ttl: Duration,
    keep: Vec<Box<dyn Any + Send>>,
}

impl Harness {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Harness { store, operation_ttl: crate::DEFAULT_OPERATION_TTL, keep: Vec::new() }
    }

    pub fn with_operation_ttl(mut self, ttl: Duration) -> Self {
        self.operation_ttl = ttl;
        self
    }

    /// Keeps `guard` alive until after the store is dropped.
    pub fn keep(mut self, guard: impl Any + Send) -> Self {
        self.keep.push(Box::new(guard));
        self
    }

    pub fn shared(&self) -> Arc<dyn Store> {
        Arc::clone(&self.store)
    }
}

impl Deref for Harness {
    type Target = dyn Store;

    fn deref(&self) -> &Self::Target {
        &*self.store
    }
}

/// Expands to one `#[tokio::test]` per conformance case; `$make` is an async expression
/// evaluating to a fresh [`Harness`] (see the module docs).
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@store $make;
            case_create_and_read_back,
            case_rejection_writes_nothing,
            case_a_change_cannot_move_a_resource_to_another_key,
            case_delete_supersedes_running_operation,
            case_status_update_moves_operation_and_resource,
            case_status_update_skips_resource_of_another_operation,
            case_status_update_without_resource,
            case_delete_completion_removes_resource_keeps_operation,
            case_terminal_operations_load_only_on_request,
            case_cancel_operation,
            case_notifications_lifecycle,
            case_notifications_deferred,
            case_claim_intent_lane_first,
            case_claim_gives_unused_room_to_other_lane,
            case_claim_only_due_resources,
            case_claim_skips_live_leases,
            case_claim_epochs,
            case_fencing,
            case_renew_and_release_leases,
            case_list_by_resource_group,
            case_list_by_subscription,
            case_ping,
        );
        $crate::conformance_suite!(@harness $make;
            case_noop_change_writes_nothing,
            case_operation_ttl,
            case_running_operations_never_expire,
            case_operation_expiry_follows_last_write,
            case_concurrent_changes_lose_no_update,
            case_grouped_changes_keep_their_own_times,
            case_a_failing_change_undoes_only_its_own_writes,
        );
    };
    (@store $make:expr; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let harness: $crate::conformance::Harness = $make.await;
                $crate::conformance::$case(&*harness).await;
            }
        )+
    };
    (@harness $make:expr; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let harness: $crate::conformance::Harness = $make.await;
                $crate::conformance::$case(&harness).await;
            }
        )+
    };
}

// ---------------------------------------------------------------------------------------
// Fixtures

/// 2026-01-01T00:00:00Z: every case's "now" is an offset from it.
pub const T0: Timestamp = Timestamp(1_767_225_600_000);

pub const KIND: &str = "VirtualNetwork";
const SECOND: i64 = 1_000;
/// How long a claimed notification stays hidden.
const HOLD: Duration = Duration::from_secs(60);

/// `T0` plus `ms` milliseconds.
pub fn at(ms: i64) -> Timestamp {
    Timestamp(T0.as_millis() + ms)
}

pub fn vnet(subscription: &str, group: &str, name: &str) -> ArmId {
    ArmId::new(subscription, group, "Slipway.Example", "virtualNetworks", name).expect("valid id")
}

fn vnet_type() -> TypeKey {
    TypeKey::new("Slipway.Example", "virtualNetworks")
}

pub fn op_id(n: u64) -> OperationId {
    OperationId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).expect("valid uuid")
}

pub fn ctx(op: u64, now: Timestamp) -> RequestContext {
    RequestContext {
        operation_id: op_id(op),
        now,
        initiator: Initiator { tenant_id: "tenant-1".into(), client_id: "client-1".into(), ..Initiator::default() },
        notification_uri: None,
        api_version: "2025-01-01".into(),
        actor: "someone@example.com".into(),
        actor_type: "User".into(),
    }
}

fn ctx_notify(op: u64, now: Timestamp, uri: &str) -> RequestContext {
    RequestContext { notification_uri: Some(uri.into()), ..ctx(op, now) }
}

pub fn spec(v: i64) -> Spec {
    Spec {
        location: Some("westeurope".into()),
        tags: BTreeMap::from([("env".to_string(), "test".to_string())]),
        properties: json!({ "addressSpace": format!("10.{v}.0.0/16") }),
    }
}

fn lease(owner: &str, until: Timestamp, epoch: u64) -> Option<Lease> {
    Some(Lease { owner: owner.into(), until, epoch })
}

fn claim_req(owner: &str, now: Timestamp, intent_limit: usize, followup_limit: usize) -> ClaimRequest {
    ClaimRequest { owner: owner.into(), now, lease_for: Duration::from_secs(30), intent_limit, followup_limit }
}

fn keys(records: &[slipway_domain::ResourceRecord]) -> Vec<ResourceKey> {
    records.iter().map(|r| r.key()).collect()
}

fn op_ids(snap: &Snapshot) -> Vec<OperationId> {
    snap.operations.iter().map(|o| o.id.clone()).collect()
}

async fn apply(
    store: &dyn Store,
    req: ChangeRequest,
    f: impl FnOnce(&mut Snapshot) -> Result<(), Rejection> + Send + 'static,
) -> Result<Snapshot, StoreError> {
    store.change(req, Box::new(f)).await
}

async fn noop(store: &dyn Store, req: ChangeRequest) -> Snapshot {
    apply(store, req, |_| Ok(())).await.expect("no-op change")
}

pub async fn put(store: &dyn Store, id: &ArmId, spec: Spec, ctx: RequestContext) -> (Admitted, Snapshot) {
    let target = id.clone();
    change_with(store, ChangeRequest::new(id.key(), ctx.now), move |s| {
        admission::admit_put(s, &target, KIND, spec, &ctx)
    })
    .await
    .expect("put")
}

/// Creates a resource (as a PUT does) whose schedule is then set to `schedule`.
pub async fn seed(store: &dyn Store, id: &ArmId, op: u64, schedule: Schedule) -> ResourceKey {
    let target = id.clone();
    let ctx = ctx(op, T0);
    apply(store, ChangeRequest::new(id.key(), T0), move |s| {
        admission::admit_put(s, &target, KIND, spec(1), &ctx)?;
        s.resource.as_mut().ok_or(Rejection::NotFound)?.schedule = schedule;
        Ok(())
    })
    .await
    .expect("seed");
    id.key()
}

async fn delete(store: &dyn Store, id: &ArmId, ctx: RequestContext) -> (Admitted, Snapshot) {
    change_with(store, ChangeRequest::new(id.key(), ctx.now), move |s| admission::admit_delete(s, &ctx))
        .await
        .expect("delete")
}

async fn set_status(
    store: &dyn Store,
    key: &ResourceKey,
    op: &OperationId,
    status: ProvisioningState,
    error: Option<CloudError>,
    now: Timestamp,
) -> Snapshot {
    let op = op.clone();
    apply(store, ChangeRequest::new(key.clone(), now), move |s| {
        assert!(s.set_operation_status(&op, status, error, now), "operation {op} moved to {status}");
        Ok(())
    })
    .await
    .expect("status update")
}

async fn resource(store: &dyn Store, key: &ResourceKey) -> slipway_domain::ResourceRecord {
    store.get_resource(key).await.expect("get_resource").expect("resource exists")
}

async fn operation(store: &dyn Store, subscription: &str, id: &OperationId, now: Timestamp) -> Operation {
    store.get_operation(&subscription.into(), id, now).await.expect("get_operation").expect("operation exists")
}

// ---------------------------------------------------------------------------------------
// Changes

pub async fn case_create_and_read_back(store: &dyn Store) {
    let id = vnet("Sub-Create", "RG-One", "VNet1");
    let (admitted, snap) = put(store, &id, spec(1), ctx(1, T0)).await;
    let Admitted::Accepted { operation, created: true } = admitted else {
        panic!("expected a created resource, got {admitted:?}");
    };
    let rec = snap.resource.clone().expect("created");
    assert_eq!(rec.id, id);
    assert_eq!(rec.schedule, Schedule::now(T0));
    assert_eq!(rec.lease, None);
    assert_eq!(rec.generation, 1);
    assert_eq!(snap.operations, vec![operation.clone()]);
    assert!(snap.notifications.is_empty());

    // Keys are case-insensitive; the id keeps the casing it was created with.
    let shouty = ArmId::parse(&id.to_string().to_ascii_uppercase()).expect("valid id");
    let read = resource(store, &shouty.key()).await;
    assert_eq!(read, rec);
    assert_eq!(
        read.id.to_string(),
        "/subscriptions/Sub-Create/resourceGroups/RG-One/providers/Slipway.Example/virtualNetworks/VNet1"
    );

    // Operations are visible under their (case-insensitive) subscription only.
    assert_eq!(operation_of(store, "sub-create", &operation.id).await, Some(operation.clone()));
    assert_eq!(operation_of(store, "SUB-CREATE", &operation.id).await, Some(operation.clone()));
    assert_eq!(operation_of(store, "sub-other", &operation.id).await, None);
    assert_eq!(operation_of(store, "sub-create", &op_id(99)).await, None);
    assert_eq!(store.get_resource(&vnet("Sub-Create", "RG-One", "VNet2").key()).await, Ok(None));

    // The next transaction sees what this one committed, the open operation included.
    let again = noop(store, ChangeRequest::new(shouty.key(), at(SECOND))).await;
    assert_eq!(again, Snapshot { resource: Some(rec), operations: vec![operation], notifications: vec![] });
}

async fn operation_of(store: &dyn Store, subscription: &str, id: &OperationId) -> Option<Operation> {
    store.get_operation(&subscription.into(), id, T0).await.expect("get_operation")
}

pub async fn case_noop_change_writes_nothing(h: &Harness) {
    let store: &dyn Store = &**h;
    let id = vnet("sub-noop", "rg", "quiet");
    let before_create = store.stats();
    let (_, created) = put(store, &id, spec(1), ctx(1, T0)).await;
    let op = created.operations[0].clone();
    let created_stats = store.stats();
    assert_eq!(created_stats.write_calls, before_create.write_calls + 1, "the create is one write call");
    assert_eq!(created_stats.commits, before_create.commits + 1, "the create is one commit");

    let first = noop(store, ChangeRequest::new(id.key(), at(SECOND))).await;
    let after_noop = store.stats();
    assert_eq!(after_noop.write_calls, created_stats.write_calls + 1);
    assert_eq!(after_noop.commits, created_stats.commits, "a change that alters nothing commits nothing");
    // Other writes that change no row are write calls, not commits, on every engine.
    let nothing_due = claim_req("nobody", T0.sub(Duration::from_secs(3600)), 1, 1);
    assert_eq!(store.claim(&nothing_due).await.expect("claim"), Vec::new());
    assert_eq!(store.renew_leases("nobody", &[id.key()], at(SECOND)).await, Ok(0));
    assert_eq!(store.release_leases("nobody").await, Ok(0));
    let idle = store.stats();
    assert_eq!(idle.write_calls, after_noop.write_calls + 3);
    assert_eq!(idle.commits, after_noop.commits, "writes that changed no row are no commits");
    assert_eq!(first.resource, created.resource);
    assert_eq!(first.operations, vec![op.clone()]);
    let second = noop(store, ChangeRequest::new(id.key(), at(2 * SECOND))).await;
    assert_eq!(second, first, "an identical change reports the same snapshot");

    // Replaying the same PUT answers from the open operation and changes nothing either.
    let (admitted, replay) = put(store, &id, spec(1), ctx(2, at(3 * SECOND))).await;
    assert_eq!(admitted, Admitted::InProgress { operation: op.clone() });
    assert_eq!(replay, first);

    // A change that edits and then restores is no change.
    apply(store, ChangeRequest::new(id.key(), at(4 * SECOND)), |s| {
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        let saved = res.clone();
        res.generation += 7;
        res.schedule = Schedule::default();
        *res = saved;
        Ok(())
    })
    .await
    .expect("change");

    assert_eq!(store.get_resource(&id.key()).await, Ok(created.resource.clone()));
    // (Engines also prove no row was touched in their own tests, e.g. SQLite's data_version.)
    assert_eq!(store.get_operation(&"sub-noop".into(), &op.id, at(5 * SECOND)).await, Ok(Some(op.clone())));
}

/// A change function cannot re-home a resource under another key: the write is refused and
/// neither key changes.
pub async fn case_a_change_cannot_move_a_resource_to_another_key(store: &dyn Store) {
    let id = vnet("sub-move", "rg", "r1");
    put(store, &id, spec(1), ctx(1, T0)).await;
    let elsewhere = vnet("sub-move", "rg", "r2");
    let target = elsewhere.clone();
    let err = store
        .change(
            ChangeRequest::new(id.key(), at(1)),
            Box::new(move |s| {
                s.resource.as_mut().ok_or(Rejection::NotFound)?.id = target;
                Ok(())
            }),
        )
        .await
        .expect_err("refused");
    assert!(matches!(err, StoreError::Internal(_)), "{err:?}");
    assert_eq!(store.get_resource(&elsewhere.key()).await, Ok(None));
    assert!(store.get_resource(&id.key()).await.expect("get").is_some());
}

pub async fn case_rejection_writes_nothing(store: &dyn Store) {
    let id = vnet("sub-reject", "rg", "r1");
    let (_, created) = put(store, &id, spec(1), ctx(1, T0)).await;
    let rec = created.resource.clone().expect("created");
    let op1 = created.operations[0].clone();

    // A different spec while the first operation runs: the ARM conflict.
    let target = id.clone();
    let c2 = ctx(2, at(SECOND));
    let err = change_with(store, ChangeRequest::new(id.key(), at(SECOND)), move |s| {
        admission::admit_put(s, &target, KIND, spec(2), &c2)
    })
    .await
    .expect_err("conflict");
    assert!(matches!(err, StoreError::Rejected(Rejection::Conflict { .. })), "{err:?}");

    // A change that did plenty before refusing leaves no trace of it.
    let err = apply(store, ChangeRequest::new(id.key(), at(2 * SECOND)), |s| {
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.generation += 10;
        res.spec.tags.insert("touched".into(), "yes".into());
        res.schedule = Schedule::default();
        let mut extra = s.operations[0].clone();
        extra.id = op_id(3);
        s.operations[0].status = ProvisioningState::Failed;
        s.operations.push(extra);
        s.notifications.push(NewNotification {
            subscription: "sub-reject".into(),
            operation_id: op_id(1),
            uri: "https://callbacks.example/x".into(),
        });
        Err(Rejection::NotFound)
    })
    .await
    .expect_err("rejected");
    assert_eq!(err, StoreError::Rejected(Rejection::NotFound));
    assert_eq!(resource(store, &id.key()).await, rec);
    assert_eq!(operation_of(store, "sub-reject", &op1.id).await, Some(op1));
    assert_eq!(operation_of(store, "sub-reject", &op_id(3)).await, None);
    assert_eq!(store.claim_notifications(at(1_000 * SECOND), 10, HOLD).await, Ok(vec![]));

    // A refused create creates nothing.
    let other = vnet("sub-reject", "rg", "r2");
    let target = other.clone();
    let c4 = ctx(4, at(3 * SECOND));
    let err = apply(store, ChangeRequest::new(other.key(), at(3 * SECOND)), move |s| {
        admission::admit_put(s, &target, KIND, spec(1), &c4)?;
        Err(Rejection::Invalid(CloudError::new("InvalidProperty", "no")))
    })
    .await
    .expect_err("rejected");
    assert!(matches!(err, StoreError::Rejected(Rejection::Invalid(_))));
    assert_eq!(store.get_resource(&other.key()).await, Ok(None));
    assert_eq!(operation_of(store, "sub-reject", &op_id(4)).await, None);
}

pub async fn case_delete_supersedes_running_operation(store: &dyn Store) {
    let id = vnet("Sub-Supersede", "rg", "r1");
    put(store, &id, spec(1), ctx_notify(1, T0, "https://callbacks.example/op1")).await;
    let now = at(5 * SECOND);
    let (admitted, snap) = delete(store, &id, ctx(2, now)).await;
    let Admitted::Accepted { operation: del, created: false } = admitted else {
        panic!("expected an accepted delete, got {admitted:?}");
    };
    assert_eq!(del.request, OperationRequest::Delete);
    assert_eq!(del.status, ProvisioningState::Deleting);
    let superseded = snap.operation(&op_id(1)).cloned().expect("superseded op in snapshot");
    assert_eq!(superseded.status, ProvisioningState::Canceled);
    assert_eq!(superseded.error.as_ref().map(|e| e.code.as_str()), Some(codes::CANCELED));

    // Both operations, the resource and the callback were committed together.
    assert_eq!(operation(store, "sub-supersede", &op_id(1), now).await, superseded);
    assert_eq!(operation(store, "sub-supersede", &op_id(2), now).await, del);
    let rec = resource(store, &id.key()).await;
    assert_eq!(Some(&rec), snap.resource.as_ref());
    assert_eq!(rec.provisioning_state, ProvisioningState::Deleting);
    assert_eq!(rec.active_operation_id, Some(op_id(2)));
    assert_eq!(rec.deletion.as_ref().map(|d| d.requested_at), Some(now));
    assert_eq!(rec.generation, 2);
    assert_eq!(rec.schedule, Schedule::now(now));
    let due = store.claim_notifications(now, 10, HOLD).await.expect("claim");
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].subscription, "sub-supersede");
    assert_eq!(due[0].operation_id, op_id(1));
    assert_eq!(due[0].uri, "https://callbacks.example/op1");
    assert_eq!((due[0].attempts, due[0].next_attempt_at, due[0].created_at), (0, now, now));

    // The canceled operation is terminal now: only the delete is loaded.
    let snap = noop(store, ChangeRequest::new(id.key(), at(6 * SECOND))).await;
    assert_eq!(op_ids(&snap), vec![op_id(2)]);

    // A second DELETE while deleting is a conflict and changes nothing.
    let c3 = ctx(3, at(7 * SECOND));
    let err = change_with(store, ChangeRequest::new(id.key(), c3.now), move |s| admission::admit_delete(s, &c3))
        .await
        .expect_err("conflict");
    assert!(matches!(err, StoreError::Rejected(Rejection::Conflict { .. })), "{err:?}");
    assert_eq!(resource(store, &id.key()).await, rec);
}

pub async fn case_status_update_moves_operation_and_resource(store: &dyn Store) {
    let id = vnet("sub-status", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;

    let snap = set_status(store, &key, &op_id(1), ProvisioningState::Provisioning, None, at(SECOND)).await;
    assert_eq!(operation(store, "sub-status", &op_id(1), at(SECOND)).await, snap.operations[0]);
    assert_eq!(snap.operations[0].status, ProvisioningState::Provisioning);
    assert_eq!(resource(store, &key).await.provisioning_state, ProvisioningState::Provisioning);

    // Job history, schedule, resource status and operation status: one change, one commit.
    let failure = CloudError::new(codes::PROVISIONING_FAILED, "the playbook failed");
    let err = failure.clone();
    let snap = apply(store, ChangeRequest::new(key.clone(), at(2 * SECOND)), move |s| {
        assert!(s.set_operation_status(&op_id(1), ProvisioningState::Failed, Some(err), at(2 * SECOND)));
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.job_seq = 1;
        res.schedule = Schedule { next_due: Some(at(122 * SECOND)), intent: false };
        Ok(())
    })
    .await
    .expect("change");
    let op = operation(store, "sub-status", &op_id(1), at(2 * SECOND)).await;
    assert_eq!(op, snap.operations[0]);
    assert_eq!(op.status, ProvisioningState::Failed);
    assert_eq!(op.error, Some(failure.clone()));
    assert_eq!(op.end_time(), Some(at(2 * SECOND)));
    let rec = resource(store, &key).await;
    assert_eq!(Some(&rec), snap.resource.as_ref());
    assert_eq!(rec.provisioning_state, ProvisioningState::Failed);
    assert_eq!(rec.active_operation_id, None);
    assert_eq!(rec.last_error, Some(failure));
    assert_eq!(rec.job_seq, 1);
    assert_eq!(rec.schedule, Schedule { next_due: Some(at(122 * SECOND)), intent: false });
}

pub async fn case_status_update_skips_resource_of_another_operation(store: &dyn Store) {
    let id = vnet("sub-skip", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    // Another operation became the active one while op 1 is still open.
    apply(store, ChangeRequest::new(key.clone(), at(SECOND)), |s| {
        let mut second = s.operations[0].clone();
        second.id = op_id(2);
        second.request = OperationRequest::Update;
        s.operations.push(second);
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.active_operation_id = Some(op_id(2));
        res.generation += 1;
        Ok(())
    })
    .await
    .expect("change");
    let before = resource(store, &key).await;

    let error = CloudError::new(codes::OPERATION_TIMED_OUT, "too slow");
    let snap = set_status(store, &key, &op_id(1), ProvisioningState::Failed, Some(error), at(2 * SECOND)).await;
    assert_eq!(snap.resource.as_ref(), Some(&before));
    assert_eq!(resource(store, &key).await, before, "the resource follows only its active operation");
    assert_eq!(operation(store, "sub-skip", &op_id(1), at(2 * SECOND)).await.status, ProvisioningState::Failed);
    assert_eq!(operation(store, "sub-skip", &op_id(2), at(2 * SECOND)).await.status, ProvisioningState::Accepted);
}

pub async fn case_status_update_without_resource(store: &dyn Store) {
    let id = vnet("sub-gone", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    // The resource vanished (a forced delete) while its operation is still open.
    apply(store, ChangeRequest::new(key.clone(), at(SECOND)), |s| {
        s.resource = None;
        Ok(())
    })
    .await
    .expect("change");
    assert_eq!(store.get_resource(&key).await, Ok(None));

    let snap = noop(store, ChangeRequest::new(key.clone(), at(2 * SECOND))).await;
    assert_eq!(snap.resource, None);
    assert_eq!(op_ids(&snap), vec![op_id(1)], "open operations are loaded without their resource");

    let error = CloudError::new(codes::PROVISIONING_FAILED, "resource removed");
    let snap = set_status(store, &key, &op_id(1), ProvisioningState::Failed, Some(error), at(3 * SECOND)).await;
    assert_eq!(snap.resource, None);
    assert_eq!(operation(store, "sub-gone", &op_id(1), at(3 * SECOND)).await.status, ProvisioningState::Failed);
    assert_eq!(store.get_resource(&key).await, Ok(None));
}

pub async fn case_delete_completion_removes_resource_keeps_operation(store: &dyn Store) {
    let id = vnet("sub-done", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    delete(store, &id, ctx(2, at(SECOND))).await;

    // The engine's completion: fenced, operation Succeeded and resource gone in one change.
    let claimed = store.claim(&claim_req("engine-a", at(2 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&claimed), vec![key.clone()]);
    let epoch = claimed[0].lease.as_ref().expect("leased").epoch;
    let fence = Fence { owner: "engine-a".into(), epoch };
    let snap = apply(store, ChangeRequest::new(key.clone(), at(3 * SECOND)).fenced(fence), |s| {
        assert!(s.set_operation_status(&op_id(2), ProvisioningState::Succeeded, None, at(3 * SECOND)));
        s.resource = None;
        Ok(())
    })
    .await
    .expect("completion");
    assert_eq!(snap.resource, None);
    assert_eq!(store.get_resource(&key).await, Ok(None));
    let done = operation(store, "sub-done", &op_id(2), at(3 * SECOND)).await;
    assert_eq!(done.status, ProvisioningState::Succeeded);
    assert_eq!(done.end_time(), Some(at(3 * SECOND)));
    let page = store
        .list_resources(&ListQuery {
            subscription: "sub-done".into(),
            resource_group: None,
            type_key: vnet_type(),
            after: None,
            limit: 10,
        })
        .await
        .expect("list");
    assert!(page.items.is_empty());
    assert_eq!(noop(store, ChangeRequest::new(key.clone(), at(4 * SECOND))).await, Snapshot::default());

    // The name is free again.
    let (admitted, snap) = put(store, &id, spec(2), ctx(3, at(5 * SECOND))).await;
    assert!(matches!(admitted, Admitted::Accepted { created: true, .. }), "{admitted:?}");
    assert_eq!(resource(store, &key).await, snap.resource.expect("recreated"));
}

pub async fn case_terminal_operations_load_only_on_request(store: &dyn Store) {
    let id = vnet("Sub-Terminal", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    set_status(store, &key, &op_id(1), ProvisioningState::Succeeded, None, at(SECOND)).await;

    assert!(noop(store, ChangeRequest::new(key.clone(), at(2 * SECOND))).await.operations.is_empty());
    let named =
        noop(store, ChangeRequest::new(key.clone(), at(2 * SECOND)).with_operation("Sub-Terminal", op_id(1))).await;
    assert_eq!(op_ids(&named), vec![op_id(1)]);
    assert_eq!(named.operations[0].status, ProvisioningState::Succeeded);

    // Naming an open operation does not load it twice; another subscription's is not found.
    put(store, &id, spec(2), ctx(2, at(3 * SECOND))).await;
    let snap =
        noop(store, ChangeRequest::new(key.clone(), at(4 * SECOND)).with_operation("sub-terminal", op_id(2))).await;
    assert_eq!(op_ids(&snap), vec![op_id(2)]);
    let snap = noop(store, ChangeRequest::new(key.clone(), at(4 * SECOND)).with_operation("sub-other", op_id(1))).await;
    assert_eq!(op_ids(&snap), vec![op_id(2)]);
}

pub async fn case_cancel_operation(store: &dyn Store) {
    let id = vnet("sub-cancel", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    set_status(store, &key, &op_id(1), ProvisioningState::Succeeded, None, at(SECOND)).await;
    put(store, &id, spec(2), ctx(2, at(2 * SECOND))).await;
    let before = resource(store, &key).await;

    let now = at(3 * SECOND);
    let req = ChangeRequest::new(key.clone(), now).with_operation("sub-cancel", op_id(2));
    let (canceled, snap) =
        change_with(store, req, move |s| admission::admit_cancel(s, &op_id(2), now)).await.expect("cancel");
    assert_eq!(canceled.status, ProvisioningState::Canceled);
    assert_eq!(canceled.error, Some(admission::canceled_by_user()));
    assert_eq!(operation(store, "sub-cancel", &op_id(2), now).await, canceled);
    let rec = resource(store, &key).await;
    assert_eq!(Some(&rec), snap.resource.as_ref());
    assert_eq!(rec.provisioning_state, ProvisioningState::Canceled);
    assert_eq!(rec.active_operation_id, None);
    assert_eq!(rec.convergence_stopped_for, Some(before.desired_config_version.clone()));
    assert_eq!(rec.generation, before.generation + 1);

    // A finished operation is loaded because the request names it, and refused.
    let later = at(4 * SECOND);
    let req = ChangeRequest::new(key.clone(), later).with_operation("sub-cancel", op_id(1));
    let err =
        change_with(store, req, move |s| admission::admit_cancel(s, &op_id(1), later)).await.expect_err("already done");
    assert!(matches!(err, StoreError::Rejected(Rejection::Conflict { .. })), "{err:?}");
    let req = ChangeRequest::new(key.clone(), later).with_operation("sub-cancel", op_id(9));
    let err =
        change_with(store, req, move |s| admission::admit_cancel(s, &op_id(9), later)).await.expect_err("unknown");
    assert_eq!(err, StoreError::Rejected(Rejection::OperationNotFound));
    assert_eq!(resource(store, &key).await, rec);
}

// ---------------------------------------------------------------------------------------
// Notifications and operation expiry

pub async fn case_notifications_lifecycle(store: &dyn Store) {
    let mut expected = Vec::new();
    for (n, name, done) in [(1, "a", 10), (2, "b", 20), (3, "c", 30)] {
        let id = vnet("Sub-Notify", "rg", name);
        let uri = format!("https://callbacks.example/{name}");
        put(store, &id, spec(1), ctx_notify(n, T0, &uri)).await;
        let snap = set_status(store, &id.key(), &op_id(n), ProvisioningState::Succeeded, None, at(done * SECOND)).await;
        assert_eq!(snap.notifications.len(), 1, "queued with the terminal status");
        expected.push((op_id(n), uri, at(done * SECOND)));
    }
    assert_eq!(store.claim_notifications(at(10 * SECOND - 1), 10, HOLD).await, Ok(vec![]));
    let first = store.claim_notifications(at(30 * SECOND), 2, HOLD).await.expect("claim");
    let seen: Vec<_> = first.iter().map(|n| (n.operation_id.clone(), n.uri.clone(), n.next_attempt_at)).collect();
    assert_eq!(seen, expected[..2].to_vec(), "earliest first, at most the limit");
    for n in &first {
        assert_eq!(n.subscription, "sub-notify");
        assert_eq!(n.attempts, 0);
        assert_eq!(n.created_at, n.next_attempt_at);
    }
    // Claimed rows are hidden from a concurrent notifier (another replica) ...
    let ids = |v: Vec<crate::Notification>| v.into_iter().map(|n| n.id).collect::<Vec<_>>();
    let rest = store.claim_notifications(at(30 * SECOND), 10, HOLD).await.expect("claim");
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].operation_id, expected[2].0);
    let (a, b, c) = (first[0].clone(), first[1].clone(), rest[0].clone());
    assert_eq!(
        store.claim_notifications(at(30 * SECOND).add(HOLD).sub(Duration::from_millis(1)), 10, HOLD).await,
        Ok(vec![])
    );
    // ... until the hold passes (the notifier that took them died without bookkeeping).
    let again = store.claim_notifications(at(30 * SECOND).add(HOLD), 10, HOLD).await.expect("claim");
    assert_eq!(ids(again), vec![a.id, b.id, c.id]);

    store.reschedule_notification(a.id, at(200 * SECOND), "HTTP 503").await.expect("reschedule");
    store.finish_notification(b.id).await.expect("finish");
    store.finish_notification(b.id).await.expect("finishing twice is harmless");
    store.abandon_notification(c.id, "operation expired").await.expect("abandon");
    store.reschedule_notification(c.id, at(300 * SECOND), "late").await.expect("reschedule dead");
    assert_eq!(store.claim_notifications(at(200 * SECOND - 1), 10, HOLD).await, Ok(vec![]));
    let retried = store.claim_notifications(at(200 * SECOND), 10, HOLD).await.expect("claim");
    assert_eq!(ids(retried.clone()), vec![a.id], "finished and dead rows never come back");
    assert_eq!(
        (retried[0].attempts, retried[0].next_attempt_at, retried[0].created_at),
        (1, at(200 * SECOND), a.created_at)
    );
    store.finish_notification(a.id).await.expect("finish");
    assert_eq!(store.claim_notifications(at(1_000 * SECOND), 10, HOLD).await, Ok(vec![]));
}

pub async fn case_notifications_deferred(store: &dyn Store) {
    for (n, name) in [(1, "a"), (2, "b"), (3, "c")] {
        let id = vnet("Sub-Defer", "rg", name);
        put(store, &id, spec(1), ctx_notify(n, T0, &format!("https://callbacks.example/{name}"))).await;
        set_status(store, &id.key(), &op_id(n), ProvisioningState::Succeeded, None, at(10 * SECOND)).await;
    }
    let claimed = store.claim_notifications(at(10 * SECOND), 10, HOLD).await.expect("claim");
    let [a, b, c] = <[crate::Notification; 3]>::try_from(claimed).expect("three rows");
    store.reschedule_notification(b.id, at(20 * SECOND), "HTTP 503").await.expect("reschedule");
    store.abandon_notification(c.id, "gave up").await.expect("abandon");
    // A held-back row and a claim given back: due again at the time given (even earlier
    // than the hold), no attempt counted, the last error kept; a dead row stays dead.
    store
        .defer_notifications(&[(a.id, at(15 * SECOND)), (b.id, at(12 * SECOND)), (c.id, at(11 * SECOND)), (-1, T0)])
        .await
        .expect("defer");
    store.defer_notifications(&[]).await.expect("deferring nothing");
    assert_eq!(store.claim_notifications(at(12 * SECOND - 1), 10, HOLD).await, Ok(vec![]));
    let due = store.claim_notifications(at(15 * SECOND), 10, HOLD).await.expect("claim");
    let seen: Vec<_> = due.iter().map(|n| (n.id, n.attempts, n.next_attempt_at)).collect();
    assert_eq!(seen, vec![(b.id, 1, at(12 * SECOND)), (a.id, 0, at(15 * SECOND))], "earliest first, dead row absent");
    store.finish_notification(a.id).await.expect("finish");
    store.defer_notifications(&[(a.id, at(16 * SECOND))]).await.expect("deferring a finished row is harmless");
    assert_eq!(store.claim_notifications(at(1_000 * SECOND), 10, HOLD).await.map(|v| v.len()), Ok(1));
}

pub async fn case_operation_ttl(h: &Harness) {
    let store: &dyn Store = &**h;
    let ttl = h.operation_ttl;
    assert!(ttl >= Duration::from_millis(2));
    let id = vnet("sub-ttl", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    set_status(store, &key, &op_id(1), ProvisioningState::Succeeded, None, T0).await;
    let expiry = T0.add(ttl);
    let just_before = expiry.sub(Duration::from_millis(1));

    // Expiry is exact even before any sweep.
    assert!(store.get_operation(&"sub-ttl".into(), &op_id(1), just_before).await.expect("get").is_some());
    assert_eq!(store.get_operation(&"sub-ttl".into(), &op_id(1), expiry).await, Ok(None));
    let named = |now| ChangeRequest::new(key.clone(), now).with_operation("sub-ttl", op_id(1));
    assert_eq!(op_ids(&noop(store, named(just_before)).await), vec![op_id(1)]);
    assert!(noop(store, named(expiry)).await.operations.is_empty(), "an expired operation is not loaded");

    assert_eq!(store.sweep_operations(just_before).await, Ok(0));
    assert_eq!(store.sweep_operations(expiry).await, Ok(1));
    assert_eq!(store.sweep_operations(expiry).await, Ok(0));
    assert_eq!(store.get_operation(&"sub-ttl".into(), &op_id(1), T0).await, Ok(None), "swept for good");
    assert!(store.get_resource(&key).await.expect("get").is_some(), "the resource is not swept");
}

pub async fn case_operation_expiry_follows_last_write(h: &Harness) {
    let store: &dyn Store = &**h;
    let ttl = h.operation_ttl;
    let id = vnet("sub-expiry", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    let t1 = T0.add(ttl / 2);
    set_status(store, &key, &op_id(1), ProvisioningState::Succeeded, None, t1).await;

    let first_expiry = T0.add(ttl);
    let expiry = t1.add(ttl);
    assert!(store.get_operation(&"sub-expiry".into(), &op_id(1), first_expiry).await.expect("get").is_some());
    assert!(
        store
            .get_operation(&"sub-expiry".into(), &op_id(1), expiry.sub(Duration::from_millis(1)))
            .await
            .expect("get")
            .is_some()
    );
    assert_eq!(store.get_operation(&"sub-expiry".into(), &op_id(1), expiry).await, Ok(None));
    assert_eq!(store.sweep_operations(first_expiry).await, Ok(0));

    // Writing the resource alone does not touch its unchanged operation's expiry.
    let other = vnet("sub-expiry", "rg", "r2");
    put(store, &other, spec(1), ctx(2, T0)).await;
    set_status(store, &other.key(), &op_id(2), ProvisioningState::Succeeded, None, T0).await;
    apply(store, ChangeRequest::new(other.key(), t1), |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
        Ok(())
    })
    .await
    .expect("change");
    assert_eq!(store.get_operation(&"sub-expiry".into(), &op_id(2), first_expiry).await, Ok(None));

    assert_eq!(store.sweep_operations(first_expiry).await, Ok(1), "only the unrewritten one");
    assert_eq!(store.sweep_operations(expiry).await, Ok(1));
}

pub async fn case_running_operations_never_expire(h: &Harness) {
    let store: &dyn Store = &**h;
    let id = vnet("sub-running", "rg", "r1");
    put(store, &id, spec(1), ctx(1, T0)).await;
    let long_after = T0.add(h.operation_ttl * 3);
    assert!(store.get_operation(&"sub-running".into(), &op_id(1), long_after).await.expect("get").is_some());
    assert_eq!(store.sweep_operations(long_after).await, Ok(0), "an operation still running is kept");
    set_status(store, &id.key(), &op_id(1), ProvisioningState::Failed, None, long_after).await;
    assert_eq!(store.sweep_operations(long_after.add(h.operation_ttl)).await, Ok(1), "once ended it expires");
}

// ---------------------------------------------------------------------------------------
// Claims, leases and fencing

pub async fn case_claim_intent_lane_first(store: &dyn Store) {
    let mut follow = Vec::new();
    let mut intent = Vec::new();
    for i in 0..3 {
        // Follow-ups due long before the intents: the lane wins over the due time.
        let due = Schedule { next_due: Some(at(-300 * SECOND + i)), intent: false };
        follow.push(seed(store, &vnet("sub-lanes", "rg", &format!("f{i}")), 10 + i as u64, due).await);
        let now = Schedule { next_due: Some(at(i * 10)), intent: true };
        intent.push(seed(store, &vnet("sub-lanes", "rg", &format!("i{i}")), 20 + i as u64, now).await);
    }
    let now = at(SECOND);
    let until = at(31 * SECOND);

    let a = store.claim(&claim_req("engine-a", now, 2, 1)).await.expect("claim");
    assert_eq!(keys(&a), vec![intent[0].clone(), intent[1].clone(), follow[0].clone()]);
    for rec in &a {
        assert_eq!(rec.lease, lease("engine-a", until, 1));
        assert!(!rec.schedule.intent, "claiming clears intent");
        assert_eq!(resource(store, &rec.key()).await, *rec);
    }
    assert_eq!(a[0].schedule.next_due, Some(at(0)), "the due time stays");

    let b = store.claim(&claim_req("engine-b", now, 2, 1)).await.expect("claim");
    assert_eq!(
        keys(&b),
        vec![intent[2].clone(), follow[1].clone(), follow[2].clone()],
        "the intent lane's unused room goes to follow-ups"
    );
    assert_eq!(store.claim(&claim_req("engine-c", now, 2, 1)).await, Ok(vec![]));
}

pub async fn case_claim_gives_unused_room_to_other_lane(store: &dyn Store) {
    let mut intent = Vec::new();
    for i in 0..4 {
        let sched = Schedule { next_due: Some(at(i)), intent: true };
        intent.push(seed(store, &vnet("sub-room", "rg", &format!("i{i}")), 1 + i as u64, sched).await);
    }
    let got = store.claim(&claim_req("engine-a", at(SECOND), 1, 2)).await.expect("claim");
    assert_eq!(keys(&got), intent[..3].to_vec(), "no follow-ups: their room goes to intents");
    let got = store.claim(&claim_req("engine-b", at(SECOND), 1, 2)).await.expect("claim");
    assert_eq!(keys(&got), intent[3..].to_vec());

    let mut follow = Vec::new();
    for i in 0..3 {
        let sched = Schedule { next_due: Some(at(i)), intent: false };
        follow.push(seed(store, &vnet("sub-room", "rg", &format!("f{i}")), 10 + i as u64, sched).await);
    }
    let got = store.claim(&claim_req("engine-c", at(SECOND), 2, 0)).await.expect("claim");
    assert_eq!(keys(&got), follow[..2].to_vec(), "no intents: their room goes to follow-ups");
    assert_eq!(store.claim(&claim_req("engine-d", at(SECOND), 0, 0)).await, Ok(vec![]));
}

pub async fn case_claim_only_due_resources(store: &dyn Store) {
    let later =
        seed(store, &vnet("sub-due", "rg", "later"), 1, Schedule { next_due: Some(at(5 * SECOND)), intent: false })
            .await;
    seed(store, &vnet("sub-due", "rg", "idle"), 2, Schedule { next_due: None, intent: false }).await;
    let asked =
        seed(store, &vnet("sub-due", "rg", "asked"), 3, Schedule { next_due: Some(at(5 * SECOND)), intent: true })
            .await;

    assert_eq!(store.claim(&claim_req("engine-a", at(5 * SECOND - 1), 10, 10)).await, Ok(vec![]));
    let got = store.claim(&claim_req("engine-a", at(5 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![asked.clone(), later.clone()]);
    // Long after every lease expired, the idle resource is still never due.
    let got = store.claim(&claim_req("engine-b", at(86_400 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![later, asked]);
}

pub async fn case_claim_skips_live_leases(store: &dyn Store) {
    let key = seed(store, &vnet("sub-live", "rg", "r1"), 1, Schedule::now(T0)).await;
    let got = store.claim(&claim_req("engine-a", T0, 10, 10)).await.expect("claim");
    assert_eq!(got[0].lease, lease("engine-a", at(30 * SECOND), 1));

    assert_eq!(store.claim(&claim_req("engine-b", at(10 * SECOND), 10, 10)).await, Ok(vec![]), "leased elsewhere");
    assert_eq!(store.claim(&claim_req("engine-a", at(10 * SECOND), 10, 10)).await, Ok(vec![]), "already held");

    // A client request (as admission records it) puts the resource back in the intent lane.
    apply(store, ChangeRequest::new(key.clone(), at(12 * SECOND)), |s| {
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.schedule = Schedule::now(at(12 * SECOND));
        res.generation += 1;
        Ok(())
    })
    .await
    .expect("intent");
    let rec = resource(store, &key).await;
    assert_eq!(rec.lease, lease("engine-a", at(30 * SECOND), 1), "a client write keeps the lease");
    assert!(rec.schedule.intent);

    assert_eq!(
        store.claim(&claim_req("engine-b", at(13 * SECOND), 10, 10)).await,
        Ok(vec![]),
        "intent is for the holder"
    );
    let got = store.claim(&claim_req("engine-a", at(13 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![key.clone()]);
    assert_eq!(got[0].lease, lease("engine-a", at(43 * SECOND), 1));
    assert!(!got[0].schedule.intent);

    // Once the lease has run out anyone may take it.
    let got = store.claim(&claim_req("engine-b", at(43 * SECOND + 1), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), vec![key.clone()]);
    assert_eq!(got[0].lease, lease("engine-b", at(73 * SECOND + 1), 2));
    assert_eq!(resource(store, &key).await, got[0]);
}

pub async fn case_claim_epochs(store: &dyn Store) {
    let key = seed(store, &vnet("sub-epoch", "rg", "r1"), 1, Schedule::now(T0)).await;
    let epoch_after = |got: Vec<slipway_domain::ResourceRecord>| {
        assert_eq!(got.len(), 1, "claimed");
        got[0].lease.as_ref().expect("leased").epoch
    };
    assert_eq!(epoch_after(store.claim(&claim_req("a", T0, 1, 1)).await.expect("claim")), 1);
    // Its own lease expired: even the same owner starts a new epoch.
    assert_eq!(epoch_after(store.claim(&claim_req("a", at(31 * SECOND), 1, 1)).await.expect("claim")), 2);
    // Re-taking a live lease on new intent keeps the epoch.
    apply(store, ChangeRequest::new(key.clone(), at(32 * SECOND)), |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.schedule = Schedule::now(at(32 * SECOND));
        Ok(())
    })
    .await
    .expect("intent");
    assert_eq!(epoch_after(store.claim(&claim_req("a", at(33 * SECOND), 1, 1)).await.expect("claim")), 2);
    // A new owner always moves it on.
    assert_eq!(epoch_after(store.claim(&claim_req("b", at(64 * SECOND), 1, 1)).await.expect("claim")), 3);
}

pub async fn case_fencing(store: &dyn Store) {
    let key = seed(store, &vnet("sub-fence", "rg", "r1"), 1, Schedule::now(T0)).await;
    store.claim(&claim_req("engine-a", T0, 1, 1)).await.expect("claim");
    let a1 = Fence { owner: "engine-a".into(), epoch: 1 };

    apply(store, ChangeRequest::new(key.clone(), at(SECOND)).fenced(a1.clone()), |s| {
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.job_seq += 1;
        res.schedule = Schedule { next_due: Some(at(60 * SECOND)), intent: false };
        Ok(())
    })
    .await
    .expect("the holder writes");
    assert_eq!(resource(store, &key).await.job_seq, 1);

    let got = store.claim(&claim_req("engine-b", at(61 * SECOND), 1, 1)).await.expect("claim");
    assert_eq!(got[0].lease, lease("engine-b", at(91 * SECOND), 2));
    let current = resource(store, &key).await;

    for stale in [a1, Fence { owner: "engine-b".into(), epoch: 1 }, Fence { owner: "engine-a".into(), epoch: 2 }] {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let err = apply(store, ChangeRequest::new(key.clone(), at(62 * SECOND)).fenced(stale.clone()), move |s| {
            flag.store(true, Ordering::SeqCst);
            s.resource = None;
            Ok(())
        })
        .await
        .expect_err("stale fence");
        assert_eq!(err, StoreError::LeaseLost, "{stale:?}");
        assert!(!ran.load(Ordering::SeqCst), "the change must not run under a lost lease");
        assert_eq!(resource(store, &key).await, current);
    }

    let b2 = Fence { owner: "engine-b".into(), epoch: 2 };
    apply(store, ChangeRequest::new(key.clone(), at(63 * SECOND)).fenced(b2.clone()), |s| {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
        Ok(())
    })
    .await
    .expect("the new holder writes");
    assert_eq!(resource(store, &key).await.job_seq, 2);

    // No row, no lease: a fenced write cannot create.
    let missing = vnet("sub-fence", "rg", "missing");
    let target = missing.clone();
    let c = ctx(9, at(64 * SECOND));
    let err = apply(store, ChangeRequest::new(missing.key(), at(64 * SECOND)).fenced(b2.clone()), move |s| {
        admission::admit_put(s, &target, KIND, spec(1), &c).map(|_| ())
    })
    .await
    .expect_err("no row");
    assert_eq!(err, StoreError::LeaseLost);
    assert_eq!(store.get_resource(&missing.key()).await, Ok(None));

    // A released lease fences out its old holder too; clients are never fenced.
    store.release_leases("engine-b").await.expect("release");
    let err = apply(store, ChangeRequest::new(key.clone(), at(65 * SECOND)).fenced(b2), |_| Ok(()))
        .await
        .expect_err("released");
    assert_eq!(err, StoreError::LeaseLost);
    noop(store, ChangeRequest::new(key, at(65 * SECOND))).await;
}

pub async fn case_renew_and_release_leases(store: &dyn Store) {
    let mut all = Vec::new();
    for i in 0..3 {
        all.push(seed(store, &vnet("sub-renew", "rg", &format!("r{i}")), 1 + i as u64, Schedule::now(at(i))).await);
    }
    let now = at(SECOND);
    assert_eq!(keys(&store.claim(&claim_req("engine-a", now, 2, 0)).await.expect("claim")), all[..2].to_vec());
    assert_eq!(keys(&store.claim(&claim_req("engine-b", now, 2, 0)).await.expect("claim")), all[2..].to_vec());

    assert_eq!(store.renew_leases("engine-a", &all, at(90 * SECOND)).await, Ok(2));
    assert_eq!(resource(store, &all[0]).await.lease, lease("engine-a", at(90 * SECOND), 1));
    assert_eq!(resource(store, &all[2]).await.lease, lease("engine-b", at(31 * SECOND), 1), "others' leases untouched");
    assert_eq!(store.renew_leases("nobody", &all, at(90 * SECOND)).await, Ok(0));
    // Only the named resources: a lease the owner does not know about is left to expire.
    assert_eq!(store.renew_leases("engine-a", &all[..1], at(95 * SECOND)).await, Ok(1));
    assert_eq!(resource(store, &all[1]).await.lease, lease("engine-a", at(90 * SECOND), 1));
    assert_eq!(resource(store, &all[0]).await.lease, lease("engine-a", at(95 * SECOND), 1));

    assert_eq!(store.release_leases("engine-a").await, Ok(2));
    assert_eq!(store.release_leases("engine-a").await, Ok(0));
    assert_eq!(resource(store, &all[0]).await.lease, None);
    assert_eq!(resource(store, &all[2]).await.lease, lease("engine-b", at(31 * SECOND), 1));

    // Released work is claimable at once, and the epoch moves past the released one.
    let got = store.claim(&claim_req("engine-c", at(2 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&got), all[..2].to_vec());
    assert!(got.iter().all(|r| r.lease == lease("engine-c", at(32 * SECOND), 2)), "{got:?}");
}

// ---------------------------------------------------------------------------------------
// Listing and liveness

/// Resources of several groups, types and subscriptions; returns the keys of the
/// `Sub-List` virtual networks of group `RG-A` and `RG-B`, each sorted.
async fn seed_listing(store: &dyn Store) -> (Vec<ResourceKey>, Vec<ResourceKey>) {
    let mut group_a = Vec::new();
    let mut group_b = Vec::new();
    for (n, name) in ["v3", "V1", "v4", "v2"].into_iter().enumerate() {
        let id = vnet("Sub-List", "RG-A", name);
        put(store, &id, spec(1), ctx(1 + n as u64, T0)).await;
        group_a.push(id.key());
    }
    for (n, name) in ["w2", "w1"].into_iter().enumerate() {
        let id = vnet("Sub-List", "rg-b", name);
        put(store, &id, spec(1), ctx(10 + n as u64, T0)).await;
        group_b.push(id.key());
    }
    let subnet = ArmId::new("Sub-List", "RG-A", "Slipway.Example", "subnets", "s1").expect("valid id");
    put(store, &subnet, spec(1), ctx(20, T0)).await;
    put(store, &vnet("Sub-Other", "RG-A", "v1"), spec(1), ctx(21, T0)).await;
    group_a.sort();
    group_b.sort();
    (group_a, group_b)
}

async fn list(store: &dyn Store, group: Option<&str>, after: Option<ResourceKey>, limit: usize) -> crate::Page {
    store
        .list_resources(&ListQuery {
            subscription: "sub-list".into(),
            resource_group: group.map(str::to_string),
            type_key: vnet_type(),
            after,
            limit,
        })
        .await
        .expect("list")
}

pub async fn case_list_by_resource_group(store: &dyn Store) {
    let (group_a, _) = seed_listing(store).await;

    let first = list(store, Some("rg-a"), None, 3).await;
    assert_eq!(keys(&first.items), group_a[..3].to_vec());
    assert_eq!(first.next, Some(group_a[2].clone()));
    let second = list(store, Some("rg-a"), first.next, 3).await;
    assert_eq!(keys(&second.items), group_a[3..].to_vec());
    assert_eq!(second.next, None);

    // A page that ends exactly at the last item says so.
    let first = list(store, Some("rg-a"), None, 2).await;
    assert_eq!(keys(&first.items), group_a[..2].to_vec());
    let second = list(store, Some("rg-a"), first.next.clone(), 2).await;
    assert_eq!(keys(&second.items), group_a[2..].to_vec());
    assert_eq!(second.next, None);

    let whole = list(store, Some("rg-a"), None, 100).await;
    assert_eq!(keys(&whole.items), group_a);
    assert_eq!(whole.next, None);
    for rec in &whole.items {
        assert_eq!(resource(store, &rec.key()).await, *rec);
        assert_eq!(rec.id.resource_group, "RG-A", "listed in the casing it was created with");
    }
    assert!(list(store, Some("rg-none"), None, 10).await.items.is_empty());
}

pub async fn case_list_by_subscription(store: &dyn Store) {
    let (group_a, group_b) = seed_listing(store).await;
    let all: Vec<ResourceKey> = group_a.into_iter().chain(group_b).collect();

    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = list(store, None, after, 4).await;
        pages += 1;
        seen.extend(keys(&page.items));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, all, "every virtual network of the subscription, in key order, once");
    assert_eq!(pages, 2);
    let page = list(store, None, Some(all[4].clone()), 4).await;
    assert_eq!(keys(&page.items), all[5..].to_vec());
}

/// After a test corrupted them with SQL of its engine (the body of resource `id` unreadable,
/// operation 2 of subscription `sub`, which belongs to `other`, not an operation): every read
/// and write that meets them fails as `Internal`, never with a panic or a wrong answer.
pub async fn check_corrupt_rows_are_internal(store: &dyn Store, id: &ArmId, other: &ArmId) {
    let internal = |r: &StoreError| matches!(r, StoreError::Internal(_));
    assert!(internal(&store.get_resource(&id.key()).await.expect_err("corrupt")));
    let noop = || -> ChangeFn { Box::new(|_| Ok(())) };
    assert!(internal(&store.change(ChangeRequest::new(id.key(), at(1)), noop()).await.expect_err("corrupt")));
    assert!(internal(&store.change(ChangeRequest::new(other.key(), at(1)), noop()).await.expect_err("corrupt op")));
    assert!(internal(&store.get_operation(&"sub".into(), &op_id(2), T0).await.expect_err("corrupt op")));
    let query =
        ListQuery { subscription: "sub".into(), resource_group: None, type_key: id.type_key(), after: None, limit: 10 };
    assert!(internal(&store.list_resources(&query).await.expect_err("corrupt")));
    let claim = ClaimRequest {
        owner: "a".into(),
        now: at(1),
        lease_for: Duration::from_secs(30),
        intent_limit: 10,
        followup_limit: 10,
    };
    assert!(internal(&store.claim(&claim).await.expect_err("corrupt")));
}

pub async fn case_ping(store: &dyn Store) {
    assert_eq!(store.ping().await, Ok(()));
}

// ---------------------------------------------------------------------------------------
// Concurrency

/// Concurrent changes end up in shared transactions (group commit). A change that fails
/// after it has already written (a duplicate operation id on insert), a refusal, or a panic
/// in one change function fails that change only and leaves nothing of it behind.
pub async fn case_a_failing_change_undoes_only_its_own_writes(h: &Harness) {
    let store = h.shared();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40u64 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let id = vnet("sub-isolated", "rg", &format!("r{i}"));
            let target = id.clone();
            let c = ctx(1 + i, T0);
            let result = apply(&*store, ChangeRequest::new(id.key(), T0), move |s| {
                admission::admit_put(s, &target, KIND, spec(1), &c)?;
                match i % 4 {
                    0 => Ok(()),
                    1 => Err(Rejection::NotFound),
                    2 => panic!("change function bug"),
                    _ => {
                        let twin = s.operations[0].clone();
                        s.operations.push(twin);
                        Ok(())
                    }
                }
            })
            .await;
            (i, id, result)
        });
    }
    for (i, id, result) in tasks.join_all().await {
        let stored = store.get_resource(&id.key()).await.expect("get");
        let op = store.get_operation(&"sub-isolated".into(), &op_id(1 + i), T0).await.expect("get op");
        match i % 4 {
            0 => {
                let snap = result.expect("committed");
                assert_eq!(stored, snap.resource, "{i}");
                assert_eq!(op.as_ref(), snap.operations.first(), "{i}");
                continue;
            }
            1 => assert_eq!(result.err(), Some(StoreError::Rejected(Rejection::NotFound))),
            _ => assert!(matches!(result, Err(StoreError::Internal(_))), "{i}: {result:?}"),
        }
        assert_eq!((stored, op), (None, None), "{i}: a failed change leaves nothing");
    }
    store.ping().await.expect("the store survives panics");
}

/// Changes committed together (a group commit) keep their own times: each operation
/// expires a TTL after its own write, and each notification is due at its own change's time
/// — not at the time of whichever change shared the transaction.
pub async fn case_grouped_changes_keep_their_own_times(h: &Harness) {
    const N: i64 = 40;
    let store = h.shared();
    let ttl = h.operation_ttl;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..N {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let now = at(i * SECOND);
            let id = vnet("sub-times", "rg", &format!("r{i}"));
            let c = ctx_notify(100 + i as u64, now, "https://callback.example/done");
            // Created and ended in one change, so the operation can expire and is notified.
            apply(&*store, ChangeRequest::new(id.key(), now), move |s| {
                admission::admit_put(s, &id, KIND, spec(1), &c)?;
                let op = s.operations[0].id.clone();
                s.set_operation_status(&op, ProvisioningState::Succeeded, None, now);
                Ok(())
            })
            .await
            .expect("change");
        });
    }
    tasks.join_all().await;
    let subscription = SubscriptionId::new("sub-times");
    for i in 0..N {
        let expiry = at(i * SECOND).add(ttl);
        let op = op_id(100 + i as u64);
        let visible = |t| store.get_operation(&subscription, &op, t);
        assert!(visible(expiry.sub(Duration::from_millis(1))).await.expect("get").is_some(), "op {i} expired early");
        assert_eq!(visible(expiry).await, Ok(None), "op {i} expires a TTL after its own change");
    }
    for i in 0..N {
        let due =
            store.claim_notifications(at(i * SECOND), N as usize, Duration::from_secs(3600)).await.expect("claim");
        let times: Vec<Timestamp> = due.iter().map(|n| n.next_attempt_at).collect();
        assert_eq!(times, vec![at(i * SECOND)], "notification {i} is due at its own change's time");
    }
}

pub async fn case_concurrent_changes_lose_no_update(h: &Harness) {
    let store = h.shared();
    let id = vnet("sub-race", "rg", "hot");
    put(&*store, &id, spec(1), ctx(1, T0)).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..50 {
        let store = Arc::clone(&store);
        let key = id.key();
        tasks.spawn(async move {
            let snap = apply(&*store, ChangeRequest::new(key, at(i)), |s| {
                s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
                Ok(())
            })
            .await
            .expect("change");
            snap.resource.expect("resource").job_seq
        });
    }
    let mut seen = tasks.join_all().await;
    seen.sort_unstable();
    assert_eq!(seen, (1..=50).collect::<Vec<u64>>(), "every change saw the one before it");
    assert_eq!(resource(&*store, &id.key()).await.job_seq, 50);
}
