//! What a store counts for the metrics, the same for both engines: the operations a
//! committed change accepted and ended ([`tally`]), and what a scrape reads
//! ([`StoreReading`], summarised from the engine's rows by [`summarize`]).

use std::sync::{Arc, Mutex};

use slipway_domain::resource::Snapshot;
use slipway_domain::{ArmId, Operation, OperationRequest, ProvisioningState, Timestamp};
use slipway_metrics::{OperationEndLabels, OperationLabels, StoreMetrics};

use crate::ChangeFn;

/// The store's contents a metrics scrape shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoreReading {
    /// Non-terminal operations by resource type (lowercased) and status.
    pub active: Vec<ActiveOperations>,
    /// Resources due now that no live lease holds, by lane: waiting for a worker.
    pub due_intent: u64,
    pub due_followup: u64,
    pub outbox_pending: u64,
    /// Notifications given up on after their last attempt.
    pub outbox_dead: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveOperations {
    pub type_key: String,
    pub status: ProvisioningState,
    pub count: u64,
    pub oldest_start: Timestamp,
}

/// Groups non-terminal operations by type and status.
pub(crate) fn summarize(operations: impl IntoIterator<Item = Operation>) -> Vec<ActiveOperations> {
    let mut out: Vec<ActiveOperations> = Vec::new();
    for op in operations {
        let type_key = type_of(&op);
        match out.iter_mut().find(|a| a.type_key == type_key && a.status == op.status) {
            Some(a) => {
                a.count += 1;
                a.oldest_start = a.oldest_start.min(op.start_time);
            }
            None => out.push(ActiveOperations { type_key, status: op.status, count: 1, oldest_start: op.start_time }),
        }
    }
    out.sort_by(|a, b| (&a.type_key, a.status.as_str()).cmp(&(&b.type_key, b.status.as_str())));
    out
}

fn type_of(op: &Operation) -> String {
    ArmId::read_stored(&op.resource_id).map(|id| id.type_key().to_string()).unwrap_or_default()
}

/// What one change did to operations, known once its closure ran; counted only after the
/// change committed.
#[derive(Clone, Default)]
pub(crate) struct Tally(Arc<Mutex<Vec<Counted>>>);

enum Counted {
    Accepted(OperationLabels),
    Ended(OperationEndLabels),
}

/// `change`, noting the operations it creates and the ones it ends.
pub(crate) fn tally(change: ChangeFn) -> (ChangeFn, Tally) {
    let tally = Tally::default();
    let noted = tally.clone();
    let wrapped: ChangeFn = Box::new(move |snap: &mut Snapshot| {
        let before: Vec<(slipway_domain::OperationId, bool)> =
            snap.operations.iter().map(|o| (o.id.clone(), o.is_terminal())).collect();
        change(snap)?;
        let mut counted = Vec::new();
        for op in &snap.operations {
            let was = before.iter().find(|(id, _)| *id == op.id).map(|(_, terminal)| *terminal);
            let (r#type, request) = (type_of(op), OperationRequest::as_str(op.request).to_string());
            if was.is_none() {
                counted.push(Counted::Accepted(OperationLabels { r#type: r#type.clone(), request: request.clone() }));
            }
            if op.is_terminal() && was != Some(true) {
                counted.push(Counted::Ended(OperationEndLabels { r#type, request, status: op.status.to_string() }));
            }
        }
        *noted.0.lock().unwrap_or_else(|e| e.into_inner()) = counted;
        Ok(())
    });
    (wrapped, tally)
}

impl Tally {
    pub(crate) fn record(&self, metrics: &StoreMetrics) {
        for counted in self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            match counted {
                Counted::Accepted(labels) => metrics.operations_accepted.get_or_create(&labels).inc(),
                Counted::Ended(labels) => metrics.operations_ended.get_or_create(&labels).inc(),
            };
        }
    }
}
