//! An activity entry settled in the transaction of the change it describes: the status the
//! API answers, the operation started, the spec's changed paths.

mod common;

use common::*;
use slipway_domain::activity::{ActivityCaller, ActivityEntry, ActivityStatus, ChangeKind, RequestInfo};
use slipway_domain::resource::Snapshot;

fn draft(method: &str) -> ActivityEntry {
    ActivityEntry {
        time: T0,
        subscription: Some("s".into()),
        target: arm_id().to_string(),
        operation_name: "Slipway.Example/virtualNetworks/write".into(),
        caller: ActivityCaller { name: "alice".into(), issuer: "T1".into(), kind: "User".into() },
        request: RequestInfo { method: method.into(), ..RequestInfo::default() },
        status: 0,
        error: None,
        operation_id: None,
        changes: Vec::new(),
        changes_truncated: false,
    }
}

#[test]
fn a_create_answers_201_and_names_its_operation_and_properties() {
    let mut w = World::new();
    let before = w.snap.clone();
    w.put(1, v1()).expect("admitted");
    let entry = draft("PUT").settle(&before, &w.snap, None);
    assert_eq!(entry.status, 201);
    assert_eq!(entry.operation_id, Some(op_id(1)));
    assert_eq!(entry.outcome(), ActivityStatus::Accepted);
    assert!(entry.changes.iter().any(|c| c.path == "properties.addressSpace" && c.kind == ChangeKind::Insert));
}

#[test]
fn an_update_answers_200_with_its_diff_and_an_unchanged_put_starts_nothing() {
    let mut w = World::created();
    w.snap.operations.clear();
    let before = w.snap.clone();
    w.put(2, v2()).expect("admitted");
    let entry = draft("PUT").settle(&before, &w.snap, None);
    assert_eq!((entry.status, entry.operation_id.clone()), (200, Some(op_id(2))));
    let change = &entry.changes[0];
    assert_eq!(change.path, "properties.addressSpace");
    assert_eq!(change.previous, Some(v1()["addressSpace"].clone()));
    // Once that update ended, the same PUT again starts nothing.
    let mut idle = w.snap.clone();
    idle.operations.clear();
    idle.resource.as_mut().unwrap().active_operation_id = None;
    let same = draft("PUT").settle(&idle, &idle, None);
    assert_eq!((same.status, same.operation_id.clone(), same.changes.len()), (200, None, 0));
    assert_eq!(same.outcome(), ActivityStatus::Succeeded);
}

#[test]
fn a_delete_answers_202_or_204_when_nothing_was_there() {
    let mut w = World::created();
    w.snap.operations.clear();
    let before = w.snap.clone();
    w.delete(3).expect("admitted");
    let entry = draft("DELETE").settle(&before, &w.snap, None);
    assert_eq!((entry.status, entry.operation_id), (202, Some(op_id(3))));
    assert!(entry.changes.is_empty(), "a delete request changes no property");
    let nothing = draft("DELETE").settle(&Snapshot::default(), &Snapshot::default(), None);
    assert_eq!(nothing.status, 204);
}

#[test]
fn a_cancel_names_the_operation_it_changed() {
    let w = World::created();
    let entry = draft("POST").settle(&w.snap, &w.snap, Some(&op_id(1)));
    assert_eq!((entry.status, entry.operation_id), (202, Some(op_id(1))));
}

#[test]
fn the_same_request_while_its_operation_runs_is_answered_with_it() {
    let w = World::created();
    let again = draft("PUT").settle(&w.snap, &w.snap, None);
    assert_eq!((again.status, again.operation_id), (201, Some(op_id(1))), "the create still running");
    let patched = draft("PATCH").settle(&w.snap, &w.snap, None);
    assert_eq!((patched.status, patched.operation_id), (200, None), "a PATCH is not the create");
}
