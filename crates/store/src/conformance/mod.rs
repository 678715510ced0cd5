//! The store conformance suite: every engine runs these cases unchanged.
//!
//! An engine's test file runs the whole suite with one line:
//!
//! ```text
//! slipway_store::conformance_suite!(make_store());
//! ```
//!
//! `make_store()` is any async expression that evaluates to a [`Harness`]: a fresh, empty
//! store as an `Arc<dyn Store>`, the engine's [`EngineHooks`] (how the cases in `hooks` reach
//! behind the store: reopen it, read and corrupt its rows, rewrite its migrations) handed to
//! [`Harness::with_hooks`], plus whatever must outlive it (a temp dir, a throwaway database)
//! handed to [`Harness::keep`]. The macro expands to one `#[tokio::test]` per case, so the
//! calling crate needs tokio with `macros` and `rt`.
//!
//! Cases build their data with the domain's own functions (`admit_put`, `admit_delete`,
//! `admit_cancel`, `Snapshot::set_operation_status`) so they exercise the shapes the API and
//! engine really write. Time is always passed in: nothing sleeps.
//!
//! [`Faulty`] wraps any store for tests beyond the suite (the engine's, the binary's) that
//! need a store to fail on cue or to be watched.

mod activity;
mod changes;
mod claims;
mod composition;
mod concurrency;
mod entries;
mod events;
mod faulty;
mod groups;
mod hooks;
mod listing;
mod metrics;
mod outbox;
mod quota;
mod settings;

pub use activity::*;
pub use changes::*;
pub use claims::*;
pub use composition::*;
pub use concurrency::*;
pub use entries::*;
pub use events::*;
pub use faulty::{Call, Faulty, Gate, Method};
pub use groups::*;
pub use hooks::*;
pub use listing::*;
pub use metrics::*;
pub use outbox::*;
pub use quota::*;
pub use settings::*;

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

use crate::{
    ChangeFn, ChangeRequest, ClaimRequest, Fence, ListQuery, NotificationId, OperationPage, OperationQuery, Store,
    StoreError, change_with,
};

/// A store under test, its engine's hooks, and what must live as long as it.
pub struct Harness {
    // Fields drop in declaration order: the store closes before what it lives in goes away
    // (a temp dir removed under an open database), and before the hooks' own connection.
    /// `None` while a case has it closed.
    store: Option<Arc<dyn Store>>,
    /// The operation TTL the store was opened with.
    pub operation_ttl: Duration,
    hooks: Option<Box<dyn EngineHooks>>,
    keep: Vec<Box<dyn Any + Send>>,
}

impl Harness {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Harness { store: Some(store), operation_ttl: crate::DEFAULT_OPERATION_TTL, hooks: None, keep: Vec::new() }
    }

    /// The engine's hooks, which the cases in `hooks` need.
    pub fn with_hooks(mut self, hooks: impl EngineHooks + 'static) -> Self {
        self.hooks = Some(Box::new(hooks));
        self
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
        Arc::clone(self.store.as_ref().expect("the harness's store is open"))
    }

    pub fn hooks(&self) -> &dyn EngineHooks {
        self.hooks.as_deref().expect("this harness has no engine hooks (Harness::with_hooks)")
    }

    /// Closes the store, as a stopping Slipway does. Nothing else may hold it then.
    pub fn close(&mut self) {
        if let Some(store) = self.store.take() {
            assert_eq!(Arc::strong_count(&store), 1, "the store is closed while something else holds it");
        }
    }

    /// Opens the engine's store on the same database again (it must be closed), with
    /// `operation_ttl`; returns the TTL the store reports it was opened with.
    pub async fn open(&mut self, operation_ttl: Duration) -> Result<Duration, StoreError> {
        assert!(self.store.is_none(), "the harness's store is still open");
        let opened = self.hooks().open(operation_ttl).await?;
        self.store = Some(opened.store);
        self.operation_ttl = operation_ttl;
        Ok(opened.operation_ttl)
    }

    /// Closes the store and opens it again, as a restarted Slipway does.
    pub async fn reopen(&mut self) -> Result<(), StoreError> {
        self.close();
        self.open(self.operation_ttl).await.map(drop)
    }
}

impl Deref for Harness {
    type Target = dyn Store;

    fn deref(&self) -> &Self::Target {
        self.store.as_deref().expect("the harness's store is open")
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
            case_outputs_are_written_replaced_and_kept,
            case_an_action_operation_is_written_with_its_call,
            case_a_change_reads_its_related_resources_as_committed,
            case_waking_children_makes_the_subtree_due,
            case_a_child_collection_lists_one_parents_children,
            case_a_change_reads_its_direct_children,
            case_references_are_indexed_for_deletes_and_wake_ups,
            case_notifications_lifecycle,
            case_notifications_deferred,
            case_claim_intent_lane_first,
            case_claim_gives_unused_room_to_other_lane,
            case_claim_only_due_resources,
            case_claim_drift_lane_last_and_only_idle_resources,
            case_schedule_drift_for_idle_resources,
            case_claim_skips_live_leases,
            case_claim_epochs,
            case_fencing,
            case_renew_and_release_leases,
            case_held_resources_are_taken_over_as_their_leases_end,
            case_list_by_resource_group,
            case_list_by_subscription,
            case_list_every_type,
            case_resource_groups_are_the_groups_that_hold_resources,
            case_group_records_list_as_groups,
            case_usage_is_counted_with_every_change,
            case_growth_past_a_limit_is_refused,
            case_a_change_reads_its_subscriptions_settings,
            case_ping,
            case_entries_insert_get_list,
            case_entries_replace_bumps_version,
            case_entries_expect_absent_on_existing,
            case_entries_stale_version_writes_nothing,
            case_entries_delete,
            case_metrics_count_committed_operations_and_read_what_is_in_flight,
            case_metrics_count_every_accepted_name_under_its_type,
            case_events_are_written_with_their_change,
            case_events_are_read_by_scope,
            case_pruned_events_leave_a_gone_position,
            case_a_change_writes_its_activity_exactly_when_it_commits,
            case_an_entry_write_records_its_activity,
            case_activity_is_filtered_and_paged,
            case_activity_past_its_retention_is_pruned,
        );
        $crate::conformance_suite!(@harness $make;
            case_noop_change_writes_nothing,
            case_operation_ttl,
            case_list_operations_newest_first,
            case_running_operations_never_expire,
            case_operation_expiry_follows_last_write,
            case_concurrent_changes_lose_no_update,
            case_grouped_changes_keep_their_own_times,
            case_a_failing_change_undoes_only_its_own_writes,
            case_entries_concurrent_puts,
            case_a_child_never_outlives_a_parent_removed_concurrently,
            case_a_resource_is_never_created_in_a_group_being_deleted,
            case_a_reference_and_its_targets_delete_never_both_win,
            case_a_reference_cycle_is_never_closed_from_both_ends,
            case_concurrent_changes_number_their_events_densely,
            case_concurrent_creates_never_pass_a_limit,
        );
        $crate::conformance_suite!(@hooks $make;
            case_a_change_that_alters_nothing_does_not_write,
            case_reopening_keeps_data_and_migrates_once,
            case_a_version_1_database_gets_the_entries_table,
            case_a_newer_schema_is_refused,
            case_corrupt_rows_are_internal_errors_not_panics,
            case_columns_follow_the_record,
            case_operation_ttl_is_configurable,
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
    (@hooks $make:expr; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let mut harness: $crate::conformance::Harness = $make.await;
                $crate::conformance::$case(&mut harness).await;
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
        job_context: Some(slipway_domain::JobContext {
            requested_by: slipway_domain::RequestedBy {
                name: "someone@example.com".into(),
                tenant: Some("tenant-1".into()),
                groups: vec!["ops".into()],
            },
            tenant: Some(slipway_domain::TenantContext {
                tenant_id: "tenant-1".into(),
                display_name: "Tenant one".into(),
                attributes: serde_json::json!({"storageClasses": ["gold"]}).as_object().cloned().unwrap_or_default(),
            }),
        }),
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
    ClaimRequest {
        owner: owner.into(),
        now,
        lease_for: Duration::from_secs(30),
        intent_limit,
        followup_limit,
        drift_limit: 0,
    }
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
