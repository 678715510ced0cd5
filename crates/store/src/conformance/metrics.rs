//! What a store counts and reads for the metrics.

use slipway_metrics::{OperationEndLabels, OperationLabels};

use super::*;
use crate::{ActiveOperations, StoreReading};

pub async fn case_metrics_count_committed_operations_and_read_what_is_in_flight(store: &dyn Store) {
    let metrics = store.metrics();
    let (a, b) = (vnet("sub-metrics", "rg", "a"), vnet("sub-metrics", "rg", "b"));
    let r#type = a.type_key().to_string();
    let (_, first) = put(store, &a, spec(1), ctx_notify(1, T0, "https://callbacks.example/op1")).await;
    let (_, second) = put(store, &b, spec(1), ctx(2, at(SECOND))).await;
    let (_, deleting) = delete(store, &a, ctx(3, at(5 * SECOND))).await;
    // A rejected change commits nothing, so counts nothing.
    let c4 = ctx(4, at(6 * SECOND));
    change_with(store, ChangeRequest::new(a.key(), c4.now), move |s| admission::admit_delete(s, &c4))
        .await
        .expect_err("a second delete conflicts");

    let count = |request: &str| {
        metrics
            .operations_accepted
            .get_or_create(&OperationLabels { r#type: r#type.clone(), request: request.into() })
            .get()
    };
    assert_eq!((count("create"), count("delete")), (2, 1));
    let ended = |request: &str, status: &str| {
        let labels = OperationEndLabels { r#type: r#type.clone(), request: request.into(), status: status.into() };
        metrics.operations_ended.get_or_create(&labels).get()
    };
    assert_eq!(ended("create", "Canceled"), 1, "the superseded create ended in the delete's transaction");
    assert_eq!(ended("delete", "Succeeded"), 0);

    let created = second.operations[0].status;
    let del = deleting.operation(&op_id(3)).expect("the delete").status;
    assert_eq!(first.operations[0].status, created);
    let reading = store.reading(at(10 * SECOND)).await.expect("reading");
    let mut expected = vec![
        ActiveOperations { type_key: r#type.clone(), status: created, count: 1, oldest_start: at(SECOND) },
        ActiveOperations { type_key: r#type.clone(), status: del, count: 1, oldest_start: at(5 * SECOND) },
    ];
    expected.sort_by_key(|a| a.status.as_str());
    assert_eq!(
        reading,
        StoreReading { active: expected, due_intent: 2, due_followup: 0, outbox_pending: 1, outbox_dead: 0 }
    );

    // A claimed resource is no longer waiting for a worker.
    let claimed = store.claim(&claim_req("node-1", at(10 * SECOND), 1, 0)).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    let reading = store.reading(at(10 * SECOND)).await.expect("reading");
    assert_eq!((reading.due_intent, reading.due_followup), (1, 0));
}

/// Every name the API accepts (ARM's common rule: spaces, up to 260 characters) is counted
/// under its resource's type, never under an empty one.
pub async fn case_metrics_count_every_accepted_name_under_its_type(store: &dyn Store) {
    let metrics = store.metrics();
    let id = vnet("sub-metrics-names", "rg", &format!("with space {}", "n".repeat(91)));
    let r#type = id.type_key().to_string();
    put(store, &id, spec(1), ctx(1, T0)).await;
    let accepted = OperationLabels { r#type: r#type.clone(), request: "create".into() };
    assert_eq!(metrics.operations_accepted.get_or_create(&accepted).get(), 1);
    let reading = store.reading(at(SECOND)).await.expect("reading");
    let types: Vec<&str> = reading.active.iter().map(|a| a.type_key.as_str()).collect();
    assert_eq!(types, [r#type.as_str()], "{reading:?}");
}
