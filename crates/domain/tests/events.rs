//! The event feed's entries (docs/arm-contract.md#event-feed): what a change did, read off the
//! snapshot before and after it — and nothing for what only the engine keeps.

mod common;

use common::*;
use serde_json::json;
use slipway_domain::event::{EventKind, derive};
use slipway_domain::reconcile::{Observation, Outcome};
use slipway_domain::{JobState, OperationRequest, ProvisioningState as PS};

fn kinds(before: &slipway_domain::Snapshot, after: &slipway_domain::Snapshot) -> Vec<EventKind> {
    derive(before, after, T0).into_iter().map(|e| e.kind).collect()
}

#[test]
fn a_create_its_job_and_its_end_are_told_as_they_happen() {
    let empty = slipway_domain::Snapshot::default();
    let mut w = World::created();
    // The create operation rides on the resource's event.
    assert_eq!(kinds(&empty, &w.snap), [EventKind::ResourceCreated]);
    let created = derive(&empty, &w.snap, T0);
    assert_eq!((created[0].state, created[0].generation), (Some(PS::Accepted), Some(1)));
    assert_eq!(created[0].resource_id, arm_id().to_string());
    let op = created[0].operation.as_ref().unwrap();
    assert_eq!((op.request, op.status, op.previous_status), (OperationRequest::Create, PS::Accepted, None));

    // The launch moves both to Provisioning: one event tells both.
    let before = w.snap.clone();
    w.launch(&key(1, 1), "1001");
    let launched = derive(&before, &w.snap, T0);
    assert_eq!(launched.iter().map(|e| e.kind).collect::<Vec<_>>(), [EventKind::ResourceStateChanged]);
    assert_eq!((launched[0].previous_state, launched[0].state), (Some(PS::Accepted), Some(PS::Provisioning)));
    let op = launched[0].operation.as_ref().unwrap();
    assert_eq!((op.previous_status, op.status), (Some(PS::Accepted), PS::Provisioning));

    // A poll that saw the job still running changes nothing a client sees.
    let before = w.snap.clone();
    w.poll(&key(1, 1), observed(JobState::Running, "running", ""));
    assert!(kinds(&before, &w.snap).is_empty(), "{:?}", kinds(&before, &w.snap));

    // The job ends with outputs: state, outputs and the operation's status.
    let before = w.snap.clone();
    let outputs = Outcome::Observed(Observation {
        state: JobState::Succeeded,
        message: "successful".into(),
        error_details: String::new(),
        stats: Some(json!({"slipway_outputs": {"ipAddress": "10.0.0.4"}})),
        changes: None,
        progress: None,
    });
    w.poll(&key(1, 1), outputs);
    w.decide();
    assert_eq!(kinds(&before, &w.snap), [EventKind::ResourceStateChanged, EventKind::ResourceOutputsChanged]);
}

#[test]
fn an_operation_that_does_not_move_the_resource_has_events_of_its_own() {
    // A DELETE supersedes a running update: the delete rides on the state event, the
    // superseded update is told apart.
    let mut w = World::provisioned();
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 2), "2001");
    let before = w.snap.clone();
    w.delete(3).unwrap();
    let events = derive(&before, &w.snap, T0);
    assert_eq!(
        events.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::ResourceStateChanged, EventKind::OperationStatusChanged]
    );
    assert_eq!(
        events[0].operation.as_ref().map(|o| (o.request, o.status)),
        Some((OperationRequest::Delete, PS::Deleting))
    );
    assert_eq!(
        events[1].operation.as_ref().map(|o| (o.request, o.status)),
        Some((OperationRequest::Update, PS::Canceled))
    );
}

#[test]
fn a_failure_names_its_code_and_a_delete_ends_with_the_record() {
    let mut w = World::provisioned();
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 2), "2001");
    let before = w.snap.clone();
    w.poll(&key(2, 2), observed(JobState::Failed, "failed", "boom"));
    w.decide();
    let failed = derive(&before, &w.snap, T0);
    let op = failed.iter().find_map(|e| e.operation.as_ref()).expect("the operation's event");
    assert_eq!((op.status, op.error_code.as_deref()), (PS::Failed, Some("ProvisioningFailed")));

    let mut gone = w.snap.clone();
    gone.resource = None;
    gone.operations.clear();
    let deleted = derive(&w.snap, &gone, T0);
    assert_eq!(deleted.iter().map(|e| e.kind).collect::<Vec<_>>(), [EventKind::ResourceDeleted]);
    assert_eq!((deleted[0].state, deleted[0].previous_state), (None, Some(PS::Failed)));
}

#[test]
fn kinds_spell_as_the_feed_shows_them_and_read_back() {
    for kind in EventKind::ALL {
        assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
    }
    assert_eq!(EventKind::parse("ResourceCreated"), None, "spelled exactly");
}
