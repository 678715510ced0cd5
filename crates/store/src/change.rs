//! The request a [`Store::change`] serves and the running of its change function: which
//! resource and context it reads, the lease fence an engine write carries, and a typed result
//! carried out of the transaction. Shared by both engines, so they check and run it alike.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slipway_domain::activity::ActivityEntry;
use slipway_domain::admission::Rejection;
use slipway_domain::ids::{ArmId, OperationId, ResourceKey, SubscriptionId};
use slipway_domain::quota::MeterName;
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{LeaseOwner, Timestamp};

use crate::activity::ActivityRow;
use crate::{EntryKind, Store, StoreError};

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
    /// Read these meters' usage in the transaction (`Snapshot::usage`), under their locks:
    /// every change that may grow what the resource consumes.
    pub usage: Option<UsageRead>,
    /// Read these kinds of registry entry of the subscription (`Snapshot::settings`), with
    /// no write of them in between: the guardrails a change is judged by.
    pub settings: Option<SettingsRead>,
    /// The request's activity-log entry, unsettled: the change settles it
    /// (`ActivityEntry::settle`) and writes it in its transaction.
    pub activity: Option<Box<ActivityEntry>>,
    /// Stamps operation expiry (last write + TTL).
    pub now: Timestamp,
}

/// The registry entries a change reads: those of `kinds` in `subscription`'s partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingsRead {
    pub subscription: SubscriptionId,
    pub kinds: Vec<EntryKind>,
}

/// The advisory lock (PostgreSQL) a change reading entries of `kind` in `partition` holds
/// shared, and a write of one such entry exclusively.
pub(crate) fn settings_lock_key(kind: EntryKind, partition: &str) -> String {
    format!("entries|{}|{partition}", kind.tag())
}

/// The usage a change reads: `meters`, summed over the subscription and over the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRead {
    pub subscription: SubscriptionId,
    /// The resource group's name, lowercased.
    pub group: String,
    pub meters: Vec<MeterName>,
}

impl ChangeRequest {
    pub fn new(key: ResourceKey, now: Timestamp) -> Self {
        ChangeRequest {
            key,
            operation: None,
            fence: None,
            related: Vec::new(),
            children: false,
            referrers: false,
            usage: None,
            settings: None,
            activity: None,
            now,
        }
    }

    /// Records `entry` in the activity log in this change's transaction, settled by what the
    /// change did: the log holds it exactly when the change commits.
    pub fn with_activity(mut self, entry: ActivityEntry) -> Self {
        self.activity = Some(Box::new(entry));
        self
    }

    /// The activity row this change writes, having turned `before` into `after`.
    pub(crate) fn activity_row(
        &self,
        before: &Snapshot,
        after: &Snapshot,
        retention: Duration,
    ) -> Result<Option<ActivityRow>, StoreError> {
        let Some(entry) = &self.activity else { return Ok(None) };
        let named = self.operation.as_ref().map(|(_, id)| id);
        let settled = ActivityEntry::clone(entry).settle(before, after, named);
        ActivityRow::of(&settled, retention).map(Some)
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

    /// Reads the usage of `meters` for the resource `id` (see [`Snapshot::usage`]); nothing
    /// when there are none.
    pub fn with_usage(mut self, id: &ArmId, meters: Vec<MeterName>) -> Self {
        self.usage = (!meters.is_empty()).then(|| UsageRead {
            subscription: id.subscription_key(),
            group: id.resource_group_key(),
            meters,
        });
        self
    }

    /// Reads the registry entries of `kinds` in `subscription` (see [`Snapshot::settings`]).
    pub fn with_settings(mut self, subscription: &SubscriptionId, kinds: &[EntryKind]) -> Self {
        self.settings =
            (!kinds.is_empty()).then(|| SettingsRead { subscription: subscription.clone(), kinds: kinds.to_vec() });
        self
    }

    /// The meters this change read.
    pub(crate) fn meters_read(&self) -> &[MeterName] {
        self.usage.as_ref().map(|u| u.meters.as_slice()).unwrap_or_default()
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

/// Of `records` (resources under `parent`'s key), those directly under it: a parent's
/// children, or a group's top-level resources.
pub(crate) fn direct_children(parent: &ResourceKey, records: Vec<ResourceRecord>) -> Vec<ResourceRecord> {
    records.into_iter().filter(|r| r.id.container().is_some_and(|p| p.key() == *parent)).collect()
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
