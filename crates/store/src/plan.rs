//! What one change writes, decided once for both engines: the difference between a key's
//! snapshot as read and as the change left it, as rows. SQLite executes a plan row by row;
//! PostgreSQL gathers the plans of a group commit into one multi-row statement per kind of
//! row. Every row carries the times of its own change (`now`), so expiry and notification
//! times never depend on which changes happened to share a transaction.
//!
//! A new kind of row is added here, plus one migration and one statement per engine.

use std::time::Duration;

use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::{Lease, ResourceRecord, Snapshot};
use slipway_domain::{Operation, Timestamp};

use crate::activity::ActivityRow;
use crate::columns::{ResourceColumns, ResourceRow};
use crate::usage::UsageDelta;
use crate::{ClaimRequest, StoreError, documents};

/// How long an operation document is kept after its last write, by default.
pub const DEFAULT_OPERATION_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// How long an event stays in the feed, by default: as long as an operation is kept.
pub const DEFAULT_EVENT_RETENTION: Duration = DEFAULT_OPERATION_TTL;

/// How long what a change writes is kept: a terminal operation after its last write, an
/// event after its change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Retention {
    pub(crate) operations: Duration,
    pub(crate) events: Duration,
    pub(crate) activity: Duration,
}

/// Every row one change writes.
#[derive(Debug, Default)]
pub(crate) struct ChangePlan {
    pub(crate) resource: Option<ResourceWrite>,
    pub(crate) operations: Vec<OperationRow>,
    pub(crate) notifications: Vec<NotificationRow>,
    /// Resources whose engine should look again now: those nested under the changed one.
    pub(crate) wake: Option<WakeRange>,
    /// And these (normalised keys), at `now`: a child's parent.
    pub(crate) wake_keys: Vec<(String, i64)>,
    /// And every resource referencing this one, at this time.
    pub(crate) wake_referrers: Option<i64>,
    /// The resource's reference rows, replaced by these referenced keys (`None`: unchanged).
    pub(crate) references: Option<Vec<String>>,
    /// The change's events, in order; each engine numbers them in its subscription's feed.
    pub(crate) events: Vec<EventRow>,
    /// What it adds to the quota usage rows (`usage`).
    pub(crate) usage: Vec<UsageDelta>,
    /// The request's activity-log entries (`crate::activity`): set by the engine from the
    /// change request, as the plan is made from snapshots alone.
    pub(crate) activity: Vec<ActivityRow>,
}

/// Every resource whose key lies strictly between `after` and `before` becomes due at `now`
/// (unless it is due sooner) with its intent flag set, as a client's write leaves it: a
/// worker holding it then decides again instead of releasing it with a stale due time. A
/// key's subtree is `(key/, key0)`, `0` following `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WakeRange {
    pub(crate) after: String,
    pub(crate) before: String,
    pub(crate) now: i64,
}

impl WakeRange {
    fn under(key: &ResourceKey, now: Timestamp) -> Self {
        WakeRange { after: format!("{}/", key.as_str()), before: format!("{}0", key.as_str()), now: now.as_millis() }
    }
}

#[derive(Debug)]
pub(crate) enum ResourceWrite {
    Insert(ResourceColumns),
    /// The lease epoch is written as the larger of the row's and this one: epochs only grow,
    /// so a record that dropped its lease keeps the row's epoch and a later claim still moves
    /// past every fence ever handed out.
    Update(ResourceColumns),
    Delete,
}

/// An operation document, new (`insert`) or changed.
#[derive(Debug)]
pub(crate) struct OperationRow {
    pub(crate) insert: bool,
    pub(crate) subscription: String,
    pub(crate) id: String,
    pub(crate) resource_key: String,
    pub(crate) status: &'static str,
    pub(crate) terminal: bool,
    /// Only terminal operations are swept once this passes: a running one never expires.
    pub(crate) expires_at: i64,
    pub(crate) body: String,
}

/// A new `events` row; its position is the engine's to give.
#[derive(Debug)]
pub(crate) struct EventRow {
    pub(crate) subscription: String,
    pub(crate) resource_key: String,
    pub(crate) kind: &'static str,
    pub(crate) at: i64,
    pub(crate) expires_at: i64,
    pub(crate) body: String,
}

/// A new outbox row, due at once.
#[derive(Debug)]
pub(crate) struct NotificationRow {
    pub(crate) subscription: String,
    pub(crate) operation_id: String,
    pub(crate) uri: String,
    /// Also its creation time.
    pub(crate) due_at: i64,
}

impl ChangePlan {
    /// The rows that turn `before` into `after` for `key` (normalised), at `now`.
    pub(crate) fn of(
        key: &ResourceKey,
        before: &Snapshot,
        after: &Snapshot,
        now: Timestamp,
        retention: Retention,
    ) -> Result<ChangePlan, StoreError> {
        let resource = match (before.resource.as_ref(), after.resource.as_ref()) {
            (Some(_), None) => Some(ResourceWrite::Delete),
            (None, Some(rec)) => Some(ResourceWrite::Insert(ResourceColumns::of(rec, key)?)),
            (Some(old), Some(rec)) if old != rec => Some(ResourceWrite::Update(ResourceColumns::of(rec, key)?)),
            _ => None,
        };
        let expires_at = now.add(retention.operations).as_millis();
        let mut operations = Vec::new();
        for op in &after.operations {
            let old = before.operations.iter().find(|old| old.id == op.id && old.subscription == op.subscription);
            match old {
                Some(old) if old == op => {}
                old => operations.push(OperationRow::of(op, old.is_none(), expires_at)?),
            }
        }
        let notifications = after
            .notifications
            .iter()
            .map(|n| NotificationRow {
                subscription: n.subscription.as_str().to_string(),
                operation_id: n.operation_id.as_str().to_string(),
                uri: n.uri.clone(),
                due_at: now.as_millis(),
            })
            .collect();
        let wake = after.wake_children.then(|| WakeRange::under(key, now));
        let wake_keys = after.wake.iter().map(|k| (k.as_str().to_string(), now.as_millis())).collect();
        let wake_referrers = after.wake_referrers.then(|| now.as_millis());
        let refs = |s: &Snapshot| s.resource.as_ref().map(|r| r.references.clone()).unwrap_or_default();
        let (old, new) = (refs(before), refs(after));
        let references = (old != new).then(|| {
            let mut keys: Vec<String> = new.iter().map(|r| r.id.key().as_str().to_string()).collect();
            keys.sort();
            keys.dedup();
            keys
        });
        let event_expiry = now.add(retention.events).as_millis();
        let events = slipway_domain::event::derive(before, after, now)
            .iter()
            .map(|e| EventRow::of(e, event_expiry))
            .collect::<Result<_, _>>()?;
        let usage = crate::usage::deltas(before, after)?;
        Ok(ChangePlan {
            resource,
            operations,
            notifications,
            wake,
            wake_keys,
            wake_referrers,
            references,
            events,
            usage,
            activity: Vec::new(),
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.resource.is_none()
            && self.operations.is_empty()
            && self.notifications.is_empty()
            && self.wake.is_none()
            && self.wake_keys.is_empty()
            && self.wake_referrers.is_none()
            && self.references.is_none()
            && self.events.is_empty()
            && self.usage.is_empty()
            && self.activity.is_empty()
    }

    /// This plan followed by `next`, a later change of the same key in one transaction: one
    /// write per row, with the net effect on the resource, each operation's latest content
    /// and time, and every notification — so a multi-row statement never meets a row twice.
    pub(crate) fn then(mut self, next: ChangePlan) -> ChangePlan {
        use ResourceWrite::{Delete, Insert, Update};
        self.resource = match (self.resource, next.resource) {
            (earlier, None) => earlier,
            (None, later) => later,
            (Some(Insert(_)), Some(Update(c))) => Some(Insert(c)),
            (Some(Insert(_)), Some(Delete)) => None,
            // The row existed before the transaction: it is updated, keeping its epochs.
            (Some(Delete | Update(_)), Some(Insert(c) | Update(c))) => Some(Update(c)),
            (Some(Update(_) | Delete), Some(Delete)) => Some(Delete),
            (Some(Insert(_)), Some(Insert(c))) => Some(Insert(c)),
        };
        for op in next.operations {
            match self.operations.iter_mut().find(|o| o.id == op.id && o.subscription == op.subscription) {
                Some(earlier) => *earlier = OperationRow { insert: earlier.insert, ..op },
                None => self.operations.push(op),
            }
        }
        self.notifications.extend(next.notifications);
        self.events.extend(next.events);
        self.activity.extend(next.activity);
        self.usage = crate::usage::merged(self.usage.into_iter().chain(next.usage));
        self.wake = next.wake.or(self.wake);
        self.wake_referrers = next.wake_referrers.or(self.wake_referrers);
        self.references = next.references.or(self.references);
        for k in next.wake_keys {
            if !self.wake_keys.iter().any(|(have, _)| *have == k.0) {
                self.wake_keys.push(k);
            }
        }
        self
    }
}

impl OperationRow {
    fn of(op: &Operation, insert: bool, expires_at: i64) -> Result<OperationRow, StoreError> {
        let body = documents::encode_operation(op)
            .map_err(|e| StoreError::Internal(format!("cannot encode operation {}: {e}", op.id)))?;
        Ok(OperationRow {
            insert,
            subscription: op.subscription.as_str().to_string(),
            id: op.id.as_str().to_string(),
            resource_key: op.resource_key.as_str().to_string(),
            status: op.status.as_str(),
            terminal: op.is_terminal(),
            expires_at,
            body,
        })
    }
}

impl EventRow {
    fn of(event: &slipway_domain::event::Event, expires_at: i64) -> Result<EventRow, StoreError> {
        let body = documents::encode_event(event)
            .map_err(|e| StoreError::Internal(format!("cannot encode an event of {}: {e}", event.resource_id)))?;
        Ok(EventRow {
            subscription: event.subscription.as_str().to_string(),
            resource_key: event.resource_key.as_str().to_string(),
            kind: event.kind.as_str(),
            at: event.time.as_millis(),
            expires_at,
            body,
        })
    }
}

/// A row a claim takes: the record as the claim hands it out, and the epoch to write.
pub(crate) struct Claimed {
    pub(crate) key: String,
    pub(crate) epoch: i64,
    pub(crate) record: ResourceRecord,
}

/// Takes `row` for `req`: the owner keeps its epoch when it still holds a live lease (a client
/// touched a resource it works on); anyone else moves the epoch past every fence handed out
/// before. The claim clears the intent flag.
pub(crate) fn claim_row(row: ResourceRow, req: &ClaimRequest) -> Result<Claimed, StoreError> {
    let (lease, epoch) = claimed_lease(row.lease_owner.as_deref(), row.lease_until, row.lease_epoch, req)?;
    let key = row.key.clone();
    let mut record = row.into_record().inspect_err(|e| {
        tracing::error!(%key, error = %e, "cannot claim a corrupt resource row");
    })?;
    record.lease = Some(lease);
    record.schedule.intent = false;
    Ok(Claimed { key, epoch, record })
}

fn claimed_lease(
    row_owner: Option<&str>,
    row_until: Option<i64>,
    row_epoch: i64,
    req: &ClaimRequest,
) -> Result<(Lease, i64), StoreError> {
    let held = row_owner == Some(req.owner.as_str()) && row_until.is_some_and(|until| until >= req.now.as_millis());
    let epoch = if held { row_epoch } else { row_epoch.saturating_add(1) };
    let until = req.now.add(req.lease_for);
    Ok((Lease { owner: req.owner.clone(), until, epoch: crate::columns::from_i64(epoch, "lease epoch")? }, epoch))
}

#[cfg(test)]
mod tests {
    use slipway_domain::ProvisioningState;
    use slipway_domain::admission::admit_put;
    use slipway_domain::resource::NewNotification;

    use super::*;
    use crate::conformance::{ctx, op_id, spec, vnet};

    const NOW: Timestamp = Timestamp(1_700_000_000_000);
    const TTL: Retention = Retention {
        operations: Duration::from_secs(60),
        events: Duration::from_secs(90),
        activity: Duration::from_secs(120),
    };

    /// A resource just created by operation 1 in subscription `SUB-Upper`.
    fn created() -> (ResourceKey, Snapshot) {
        let id = vnet("SUB-Upper", "rg", "v1");
        let mut snap = Snapshot::default();
        admit_put(&mut snap, &id, "VirtualNetwork", spec(1), &ctx(1, NOW)).expect("admitted");
        (id.key().clone(), snap)
    }

    #[test]
    fn an_unchanged_snapshot_writes_nothing() {
        let (key, snap) = created();
        assert!(ChangePlan::of(&key, &snap, &snap.clone(), NOW, TTL).unwrap().is_empty());
    }

    #[test]
    fn resources_are_inserted_updated_or_deleted() {
        let (key, with) = created();
        let empty = Snapshot::default();
        let mut changed = with.clone();
        changed.resource.as_mut().unwrap().generation += 1;
        let write =
            |before: &Snapshot, after: &Snapshot| ChangePlan::of(&key, before, after, NOW, TTL).unwrap().resource;
        assert!(matches!(write(&empty, &with), Some(ResourceWrite::Insert(_))));
        let generation = changed.resource.as_ref().unwrap().generation as i64;
        assert!(matches!(write(&with, &changed), Some(ResourceWrite::Update(c)) if c.generation == generation));
        assert!(matches!(write(&with, &empty), Some(ResourceWrite::Delete)));
        assert!(write(&empty, &empty).is_none());
    }

    #[test]
    fn operations_and_notifications_carry_their_own_change_time() {
        let (key, before) = created();
        let mut after = before.clone();
        after.operations[0].status = ProvisioningState::Succeeded;
        let mut second = after.operations[0].clone();
        second.id = op_id(2);
        second.status = ProvisioningState::Accepted;
        after.operations.push(second);
        after.notifications.push(NewNotification {
            subscription: "SUB-Upper".into(),
            operation_id: op_id(1),
            uri: "https://callback.example".into(),
        });
        let plan = ChangePlan::of(&key, &before, &after, NOW, TTL).unwrap();
        let ops: Vec<(bool, &str, bool, i64)> =
            plan.operations.iter().map(|o| (o.insert, o.subscription.as_str(), o.terminal, o.expires_at)).collect();
        let expires = NOW.add(TTL.operations).as_millis();
        assert_eq!(ops, [(false, "sub-upper", true, expires), (true, "sub-upper", false, expires)]);
        let n = &plan.notifications[..];
        assert_eq!(n.len(), 1);
        assert_eq!((n[0].subscription.as_str(), n[0].due_at), ("sub-upper", NOW.as_millis()));
    }

    #[test]
    fn later_changes_of_a_key_merge_into_one_write_per_row() {
        let (key, created) = created();
        let plan = |before: &Snapshot, after: &Snapshot, t: i64| {
            ChangePlan::of(&key, before, after, Timestamp(NOW.0 + t), TTL).unwrap()
        };
        let mut done = created.clone();
        done.operations[0].status = ProvisioningState::Succeeded;
        done.resource.as_mut().unwrap().generation += 1;
        let empty = Snapshot::default();

        // Created, then finished: one insert of each row, with the later content and time.
        let merged = plan(&empty, &created, 0).then(plan(&created, &done, 5));
        assert!(matches!(&merged.resource, Some(ResourceWrite::Insert(c)) if c.generation == 2));
        let ops: Vec<(bool, bool, i64)> =
            merged.operations.iter().map(|o| (o.insert, o.terminal, o.expires_at)).collect();
        assert_eq!(ops, [(true, true, NOW.add(TTL.operations).as_millis() + 5)]);
        // Created, then deleted: the resource row is never written; its operation is.
        let merged = plan(&empty, &created, 0).then(plan(&created, &empty, 5));
        assert!(merged.resource.is_none());
        // Deleted, then created again: the existing row is updated.
        let merged = plan(&created, &empty, 0).then(plan(&empty, &done, 5));
        assert!(matches!(merged.resource, Some(ResourceWrite::Update(_))));
        // Updated, then deleted; nothing, then updated.
        assert!(matches!(plan(&created, &done, 0).then(plan(&done, &empty, 5)).resource, Some(ResourceWrite::Delete)));
        assert!(matches!(
            plan(&done, &done, 0).then(plan(&created, &done, 5)).resource,
            Some(ResourceWrite::Update(_))
        ));
        // Every notification of every change is kept.
        let mut notified = done.clone();
        notified.notifications.push(NewNotification {
            subscription: "s".into(),
            operation_id: op_id(1),
            uri: "https://callback.example".into(),
        });
        let merged = plan(&created, &notified, 0).then(plan(&created, &notified, 5));
        let due: Vec<i64> = merged.notifications.iter().map(|n| n.due_at).collect();
        assert_eq!(due, [NOW.as_millis(), NOW.as_millis() + 5]);
    }

    #[test]
    fn a_claim_keeps_the_epoch_of_its_own_live_lease_and_moves_past_any_other() {
        let lease_for = Duration::from_secs(60);
        let req =
            ClaimRequest { owner: "a".into(), now: NOW, lease_for, intent_limit: 1, followup_limit: 1, drift_limit: 0 };
        let lease = |owner: Option<&str>, until: Option<i64>| {
            claimed_lease(owner, until, 7, &req).map(|(l, e)| (l.owner, l.until, e)).unwrap()
        };
        let until = NOW.add(lease_for);
        let live = Some(NOW.as_millis());
        assert_eq!(lease(Some("a"), live), ("a".into(), until, 7), "its own live lease");
        assert_eq!(lease(Some("a"), Some(NOW.as_millis() - 1)), ("a".into(), until, 8), "its own lapsed lease");
        assert_eq!(lease(Some("b"), live), ("a".into(), until, 8), "another's");
        assert_eq!(lease(None, None), ("a".into(), until, 8), "none");
    }
}
