//! A parent's cascading delete, the engine's part: admitting a delete for each child the
//! domain named (`Effect::DeleteChildren`), each in the child's own transaction, together.
//! The domain decides everything else (`slipway_domain::reconcile::cascade`).

use std::sync::Arc;

use slipway_domain::ids::ArmId;
use slipway_domain::reconcile::Outcome;
use slipway_domain::reconcile::cascade::{admit_child_delete, child_delete_context};
use slipway_domain::resource::Snapshot;
use slipway_domain::{Clock, OperationId};
use slipway_store::{ChangeRequest, Store, change_with};
use tokio::task::JoinSet;

/// Admits the deletes and reports each child's delete operation. A child the store could not
/// reach is left out: still not deleting, the parent names it again in its next step.
pub(crate) async fn delete_children(
    store: &Arc<dyn Store>,
    clock: &dyn Clock,
    snap: &Snapshot,
    children: &[ArmId],
) -> Outcome {
    let Some(parent) = snap.resource.as_ref() else { return Outcome::ChildDeletes(Vec::new()) };
    let op = snap.active_operation();
    let now = clock.now();
    let mut admitting = JoinSet::new();
    for child in children {
        let ctx = child_delete_context(op, parent, child, now);
        let req = ChangeRequest::new(child.key(), now).with_related([parent.key()]);
        let (store, child) = (Arc::clone(store), child.clone());
        admitting.spawn(async move {
            let admitted = change_with(store.as_ref(), req, move |s| Ok(admit_child_delete(s, &ctx))).await;
            (child, admitted.map(|(op, _)| op))
        });
    }
    let mut started: Vec<(ArmId, OperationId)> = Vec::new();
    while let Some(joined) = admitting.join_next().await {
        match joined {
            Ok((child, Ok(Some(op)))) => started.push((child, op)),
            Ok((_, Ok(None))) => {}
            Ok((child, Err(e))) => {
                tracing::warn!(parent = %parent.id, child = %child, error = %e, "could not delete a child; trying again next step")
            }
            Err(e) => tracing::error!(parent = %parent.id, error = %e, "a child delete task failed"),
        }
    }
    tracing::info!(parent = %parent.id, children = started.len(), "cascading delete: children deleting");
    started.sort_by_key(|(child, _)| child.key());
    Outcome::ChildDeletes(started)
}
