//! The event feed's entries (docs/arm-contract.md#event-feed): what one change did to a
//! resource and its operations, read off the snapshot before and after it. The store writes
//! them in the change's own transaction, so an event exists exactly when its change
//! committed; the API serves them in order per subscription.
//!
//! Derived, never decided: no admission or reconcile function names an event, so no change
//! can forget one. What the engine keeps for itself (leases, schedules, a job's bookkeeping)
//! makes none.

use crate::ids::{OperationId, ResourceKey, SubscriptionId};
use crate::operation::{Operation, OperationRequest};
use crate::resource::{ResourceRecord, Snapshot};
use crate::state::ProvisioningState;
use crate::time::Timestamp;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    ResourceCreated,
    /// Its `provisioningState` moved.
    ResourceStateChanged,
    /// What its jobs reported (`outputs`) changed.
    ResourceOutputsChanged,
    ResourceDeleted,
    /// A drift check found the resource changed behind Slipway's back (or changed otherwise
    /// than the last one found).
    DriftDetected,
    /// An operation was accepted.
    OperationCreated,
    OperationStatusChanged,
}

impl EventKind {
    pub const ALL: [EventKind; 7] = [
        EventKind::ResourceCreated,
        EventKind::ResourceStateChanged,
        EventKind::ResourceOutputsChanged,
        EventKind::ResourceDeleted,
        EventKind::DriftDetected,
        EventKind::OperationCreated,
        EventKind::OperationStatusChanged,
    ];

    /// The name clients and the store see.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ResourceCreated => "resourceCreated",
            EventKind::ResourceStateChanged => "resourceStateChanged",
            EventKind::ResourceOutputsChanged => "resourceOutputsChanged",
            EventKind::ResourceDeleted => "resourceDeleted",
            EventKind::DriftDetected => "driftDetected",
            EventKind::OperationCreated => "operationCreated",
            EventKind::OperationStatusChanged => "operationStatusChanged",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One entry of a subscription's feed. Its position (the cursor) is the store's to give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub subscription: SubscriptionId,
    /// The resource's key (lowercased): what scopes and permissions are matched against.
    pub resource_key: ResourceKey,
    /// The resource id in its original casing.
    pub resource_id: String,
    pub time: Timestamp,
    /// The resource's state after the change (absent once deleted), and before it.
    pub state: Option<ProvisioningState>,
    pub previous_state: Option<ProvisioningState>,
    /// The resource's generation after the change: a client that reads the resource knows
    /// whether it is at least this new.
    pub generation: Option<u64>,
    /// An operation's event, or a resource's state event that operation caused: which, what
    /// it does, its status after the change and before.
    pub operation: Option<OperationEvent>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationEvent {
    pub id: OperationId,
    pub request: OperationRequest,
    /// A POST action's name.
    pub action: Option<String>,
    pub status: ProvisioningState,
    pub previous_status: Option<ProvisioningState>,
    /// The error code of an operation that ended without success.
    pub error_code: Option<String>,
}

/// The events of the change that turned `before` into `after` at `now`: the resource's own
/// first (created, state, outputs, deleted), then each operation's in the snapshot's order —
/// but the operation that moved the resource's state is told on that event, not apart.
pub fn derive(before: &Snapshot, after: &Snapshot, now: Timestamp) -> Vec<Event> {
    let mut events = Vec::new();
    let resource = |kind, rec: &ResourceRecord| Event {
        kind,
        subscription: rec.id.subscription_key(),
        resource_key: rec.key(),
        resource_id: rec.id.to_string(),
        time: now,
        state: Some(rec.provisioning_state),
        previous_state: None,
        generation: Some(rec.generation),
        operation: None,
    };
    match (before.resource.as_ref(), after.resource.as_ref()) {
        (None, Some(new)) => events.push(resource(EventKind::ResourceCreated, new)),
        (Some(old), None) => events.push(Event {
            state: None,
            previous_state: Some(old.provisioning_state),
            ..resource(EventKind::ResourceDeleted, old)
        }),
        (Some(old), Some(new)) => {
            if old.provisioning_state != new.provisioning_state {
                events.push(Event {
                    previous_state: Some(old.provisioning_state),
                    ..resource(EventKind::ResourceStateChanged, new)
                });
            }
            if old.outputs != new.outputs {
                events.push(resource(EventKind::ResourceOutputsChanged, new));
            }
            if let Some(changes) = drifted(new)
                && drifted(old) != Some(changes)
            {
                events.push(resource(EventKind::DriftDetected, new));
            }
        }
        (None, None) => {}
    }
    // The operation that moved the resource rides on the resource's own event: its active
    // one, or the one that just ended. Others (one a DELETE superseded) get events of their own.
    let active = |s: &Snapshot| s.resource.as_ref().and_then(|r| r.active_operation_id.clone());
    let leading = active(after).or_else(|| active(before));
    let mut host = events.iter().position(|e| {
        matches!(e.kind, EventKind::ResourceCreated | EventKind::ResourceStateChanged | EventKind::ResourceDeleted)
    });
    for op in &after.operations {
        let old = before.operations.iter().find(|o| o.id == op.id && o.subscription == op.subscription);
        let kind = match old {
            None => EventKind::OperationCreated,
            Some(old) if old.status != op.status => EventKind::OperationStatusChanged,
            Some(_) => continue,
        };
        let change = operation_change(op, old.map(|o| o.status));
        match host {
            Some(at) if leading.as_ref() == Some(&op.id) => {
                events[at].operation = Some(change);
                host = None;
            }
            _ => events.push(Event {
                kind,
                subscription: op.subscription.clone(),
                resource_key: op.resource_key.clone(),
                resource_id: op.resource_id.clone(),
                time: now,
                state: None,
                previous_state: None,
                generation: None,
                operation: Some(change),
            }),
        }
    }
    events
}

/// The changes a resource's last drift check found, if it found drift.
fn drifted(r: &ResourceRecord) -> Option<&Vec<crate::whatif::TaskChange>> {
    r.drift.as_ref().filter(|d| d.state == crate::drift::DriftState::Drifted).map(|d| &d.changes)
}

fn operation_change(op: &Operation, previous: Option<ProvisioningState>) -> OperationEvent {
    OperationEvent {
        id: op.id.clone(),
        request: op.request,
        action: op.action.as_ref().map(|a| a.name.clone()),
        status: op.status,
        previous_status: previous,
        error_code: op.error.as_ref().filter(|_| op.status != ProvisioningState::Succeeded).map(|e| e.code.clone()),
    }
}
