//! Admission scenarios: what the API does to a snapshot (docs/arm-contract.md: mutating
//! requests, supersession, cancel, how operations end).

mod common;

use std::collections::BTreeMap;

use common::*;
use serde_json::{Value, json};
use slipway_domain::admission::{Admitted, Rejection, admit_patch, canceled_by_user, merge_patch};
use slipway_domain::resource::{Deletion, Schedule};
use slipway_domain::{CloudError, OperationRequest, ProvisioningState as PS, Snapshot, Spec, Timestamp};

fn accepted(result: Result<Admitted, Rejection>) -> (slipway_domain::Operation, bool) {
    match result {
        Ok(Admitted::Accepted { operation, created }) => (operation, created),
        other => panic!("expected Accepted, got {other:?}"),
    }
}

/// Moves the resource and its active operation to a terminal `status`, as the engine would.
fn finish_active(w: &mut World, status: PS, error: Option<CloudError>) {
    let id = w.res().active_operation_id.clone().expect("active operation");
    let now = w.now;
    assert!(w.snap.set_operation_status(&id, status, error, now));
}

fn canceled_superseded() -> CloudError {
    err("Canceled", "This operation was superseded by another")
}

// ---------------------------------------------------------------------------------------
// PUT
// ---------------------------------------------------------------------------------------

#[test]
fn put_create_records_resource_and_accepted_operation() {
    let mut w = World::new();
    w.notify = true;
    w.set_now(at(5));
    let (op, created) = accepted(w.put(1, v1()));
    assert!(created, "a new resource answers 201");
    assert_eq!(op.id, op_id(1));
    assert_eq!(op.request, OperationRequest::Create);
    assert_eq!(op.status, PS::Accepted);
    assert_eq!(op.subscription, "ab000000-0000-0000-0000-000000000001", "lowercased subscription");
    assert_eq!(op.resource_key.as_str(), RESOURCE_ID.to_ascii_lowercase());
    assert_eq!(op.resource_id, RESOURCE_ID, "original casing");
    assert_eq!(op.start_time, at(5));
    assert_eq!(op.last_transition_time, at(5));
    assert_eq!(op.end_time(), None);
    assert_eq!(op.error, None);
    assert_eq!(op.notification_uri.as_deref(), Some(CALLBACK));
    assert_eq!(op.initiator.tenant_id, "T1");
    assert_eq!(op.initiator.client_id, "O1");
    assert_eq!(op.api_version, "2025-01-01");
    assert_eq!(w.snap.operations, vec![op.clone()]);
    assert!(w.snap.notifications.is_empty());

    let res = w.res();
    assert_eq!(res.id, arm_id());
    assert_eq!(res.kind, "VirtualNetwork");
    assert_eq!(res.spec, spec(v1()));
    assert_eq!(res.provisioning_state, PS::Accepted);
    assert_eq!(res.desired_config_version, spec(v1()).config_version());
    assert_eq!(res.active_operation_id, Some(op_id(1)));
    assert_eq!(res.last_operation_id, op_id(1));
    assert_eq!(res.schedule, Schedule { next_due: Some(at(5)), intent: true, drift_due: None });
    assert_eq!(res.generation, 1);
    assert_eq!(res.job_seq, 0);
    assert!(res.jobs.is_empty());
    assert_eq!(res.deletion, None);
    assert_eq!(res.convergence_stopped_for, None);
    assert_eq!(res.last_error, None);
    assert_eq!(res.system_data.created_by, "alice@example.com");
    assert_eq!(res.system_data.created_by_type, "User");
    assert_eq!(res.system_data.created_at, at(5));
    assert_eq!(res.system_data.last_modified_at, at(5));
    assert_eq!(w.snap.active_operation(), Some(&op));
}

#[test]
fn put_same_spec_while_in_progress_answers_with_the_same_operation() {
    for state in [PS::Accepted, PS::Provisioning] {
        let mut w = World::created();
        if state != PS::Accepted {
            let now = w.now;
            w.snap.set_operation_status(&op_id(1), state, None, now);
        }
        let before = w.snap.clone();
        w.advance(secs(3));
        let result = w.put(2, v1());
        assert_eq!(result, Ok(Admitted::InProgress { operation: before.operations[0].clone() }), "{state:?}");
        assert_eq!(w.snap, before, "{state:?}: an idempotent replay changes nothing");
    }
}

#[test]
fn put_or_patch_with_a_different_spec_while_in_progress_conflicts() {
    // (state the active operation has moved the resource to, expected lowercased word)
    let rows = [
        (PS::Accepted, "accepted"),
        (PS::Provisioning, "provisioning"),
        (PS::Updating, "updating"),
        (PS::Canceling, "canceling"),
    ];
    for (state, word) in rows {
        let mut w = World::created();
        if state != PS::Accepted {
            let now = w.now;
            w.snap.set_operation_status(&op_id(1), state, None, now);
        }
        let before = w.snap.clone();
        let want = conflict(&format!("Cannot update resource while resource is \"{word}\""));
        assert_eq!(w.put(2, v2()), Err(want.clone()), "PUT in {state:?}");
        let c = w.ctx(3);
        let patch = admit_patch(&mut w.snap, None, Some(&json!({"x": 1})), |_| Ok(()), &c);
        assert_eq!(patch, Err(want.clone()), "PATCH in {state:?}");
        let tags = admit_patch(&mut w.snap, Some(BTreeMap::new()), None, |_| Ok(()), &c);
        assert_eq!(tags, Err(want), "tags-only PATCH in {state:?}");
        assert_eq!(w.snap, before, "{state:?}: a rejected request writes nothing");
    }
    // The message and target as the ARM wire shows them.
    let Err(Rejection::Conflict { message, target }) = World::created().put(2, v2()) else {
        panic!("conflict expected");
    };
    assert_eq!(message, r#"Cannot update resource while resource is "accepted""#);
    assert_eq!(target, RESOURCE_ID);
}

#[test]
fn put_same_spec_when_succeeded_is_unchanged() {
    let mut w = World::created();
    finish_active(&mut w, PS::Succeeded, None);
    let before = w.snap.clone();
    w.advance(secs(60));
    assert_eq!(w.put(2, v1()), Ok(Admitted::Unchanged));
    assert_eq!(w.snap, before);
}

#[test]
fn put_after_a_terminal_state_starts_an_update() {
    // (terminal state of the previous operation, spec of the new PUT)
    let rows = [
        ("retry after failure", PS::Failed, v1()),
        ("retry after cancel", PS::Canceled, v1()),
        ("new spec after success", PS::Succeeded, v2()),
        ("new spec after failure", PS::Failed, v2()),
    ];
    for (name, state, props) in rows {
        let mut w = World::created();
        let error = (state != PS::Succeeded).then(|| err("X", "boom"));
        finish_active(&mut w, state, error.clone());
        if state == PS::Canceled {
            let desired = w.res().desired_config_version.clone();
            w.res_mut().convergence_stopped_for = Some(desired);
        }
        assert_eq!(w.res().last_error, error, "{name}");
        w.advance(secs(90));
        let (op, created) = accepted(w.put(2, props.clone()));
        assert!(!created, "{name}: replace answers 200");
        assert_eq!(op.id, op_id(2), "{name}");
        assert_eq!(op.request, OperationRequest::Update, "{name}");
        assert_eq!(op.status, PS::Accepted, "{name}");
        assert_eq!(op.start_time, at(90), "{name}");
        let res = w.res();
        assert_eq!(res.spec, spec(props.clone()), "{name}");
        assert_eq!(res.desired_config_version, spec(props).config_version(), "{name}");
        assert_eq!(res.provisioning_state, PS::Accepted, "{name}");
        assert_eq!(res.active_operation_id, Some(op_id(2)), "{name}");
        assert_eq!(res.last_operation_id, op_id(2), "{name}");
        assert_eq!(res.last_error, None, "{name}");
        assert_eq!(res.convergence_stopped_for, None, "{name}: a new request resumes convergence");
        assert_eq!(res.generation, 2, "{name}");
        assert_eq!(res.schedule, Schedule::now(at(90)), "{name}");
        assert_eq!(res.system_data.created_at, T0, "{name}");
        assert_eq!(res.system_data.last_modified_at, at(90), "{name}");
        assert_eq!(w.snap.operations.len(), 2, "{name}");
        assert_eq!(w.op(1).status, state, "{name}: the old operation is untouched");
    }
}

#[test]
fn put_and_patch_on_a_deleting_resource_conflict() {
    let mut w = World::created();
    finish_active(&mut w, PS::Succeeded, None);
    accepted(w.delete(2));
    let want = conflict(r#"Cannot update resource while resource is "deleting""#);
    let before = w.snap.clone();
    assert_eq!(w.put(3, v1()), Err(want.clone()));
    assert_eq!(w.put(3, v2()), Err(want.clone()));
    let c = w.ctx(4);
    let tags = [("a".to_string(), "b".to_string())].into();
    assert_eq!(admit_patch(&mut w.snap, Some(tags), None, |_| Ok(()), &c), Err(want.clone()));
    // Still deleting after the delete operation timed out (the deletion mark stays).
    finish_active(&mut w, PS::Failed, Some(err("OperationTimedOut", "late")));
    assert_eq!(w.res().provisioning_state, PS::Failed);
    assert_eq!(w.put(3, v1()), Err(want));
    assert_eq!(w.snap.operations.len(), before.operations.len());
}

// ---------------------------------------------------------------------------------------
// PATCH
// ---------------------------------------------------------------------------------------

#[test]
fn patch_on_a_missing_resource_is_not_found() {
    let mut w = World::new();
    let c = w.ctx(1);
    let mut validated = false;
    let result = admit_patch(
        &mut w.snap,
        Some(BTreeMap::new()),
        Some(&json!({"a": 1})),
        |_| {
            validated = true;
            Ok(())
        },
        &c,
    );
    assert_eq!(result, Err(Rejection::NotFound));
    assert!(!validated);
    assert_eq!(w.snap, Snapshot::default(), "no operation document");
}

#[test]
fn patch_replaces_tags_and_merge_patches_properties() {
    let mut w = World::created();
    w.res_mut().spec.properties = json!({
        "addressSpace": "10.0.0.0/16",
        "dns": {"servers": ["1.1.1.1"], "search": "corp"},
        "legacy": true
    });
    w.res_mut().desired_config_version = w.res().spec.config_version();
    finish_active(&mut w, PS::Succeeded, None);
    w.advance(secs(10));
    let tags: BTreeMap<String, String> = [("team".to_string(), "net".to_string())].into();
    let patch = json!({"dns": {"search": null, "servers": ["9.9.9.9"]}, "legacy": null, "mtu": 1400});
    let want = json!({"addressSpace": "10.0.0.0/16", "dns": {"servers": ["9.9.9.9"]}, "mtu": 1400});
    let mut seen = Vec::new();
    let c = w.ctx(2);
    let (op, created) = accepted(admit_patch(
        &mut w.snap,
        Some(tags.clone()),
        Some(&patch),
        |merged| {
            seen.push(merged.clone());
            Ok(())
        },
        &c,
    ));
    assert_eq!(seen, vec![want.clone()], "validation sees the merged properties, once");
    assert!(!created);
    assert_eq!(op.request, OperationRequest::Update);
    let expected = Spec { location: Some("westeurope".into()), tags, properties: want };
    assert_eq!(w.res().spec, expected, "tags replaced (env=test is gone), location kept");
    assert_eq!(w.res().desired_config_version, expected.config_version());
    assert_eq!(w.res().active_operation_id, Some(op_id(2)));
    assert_eq!(w.res().generation, 2);
}

#[test]
fn patch_without_changes_on_a_succeeded_resource_is_unchanged() {
    let mut w = World::created();
    finish_active(&mut w, PS::Succeeded, None);
    let before = w.snap.clone();
    let c = w.ctx(2);
    let same_tags = w.res().spec.tags.clone();
    assert_eq!(admit_patch(&mut w.snap, Some(same_tags), Some(&json!({})), |_| Ok(()), &c), Ok(Admitted::Unchanged));
    assert_eq!(admit_patch(&mut w.snap, None, None, |_| Ok(()), &c), Ok(Admitted::Unchanged));
    assert_eq!(w.snap, before);
}

#[test]
fn patch_propagates_the_validation_rejection_and_writes_nothing() {
    let mut w = World::created();
    finish_active(&mut w, PS::Succeeded, None);
    let before = w.snap.clone();
    let c = w.ctx(2);
    let invalid =
        CloudError::new("InvalidRequestContent", "properties.mtu must be <= 9000").with_target("properties.mtu");
    let result = admit_patch(
        &mut w.snap,
        None,
        Some(&json!({"mtu": 10000})),
        |merged| {
            assert_eq!(merged, &json!({"addressSpace": "10.0.0.0/16", "mtu": 10000}));
            Err(Rejection::Invalid(invalid.clone()))
        },
        &c,
    );
    assert_eq!(result, Err(Rejection::Invalid(invalid)));
    assert_eq!(w.snap, before);
}

#[test]
fn merge_patch_follows_rfc_7396() {
    // RFC 7396 Appendix A, every example, plus nested creation.
    let rows: Vec<(Value, Value, Value)> = vec![
        (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
        (json!({"a":"b"}), json!({"a":null}), json!({})),
        (json!({"a":"b","b":"c"}), json!({"a":null}), json!({"b":"c"})),
        (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
        (json!({"a":{"b":"c"}}), json!({"a":{"b":"d","c":null}}), json!({"a":{"b":"d"}})),
        (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a":"b"}), json!(["c"]), json!(["c"])),
        (json!({"a":"foo"}), json!(null), json!(null)),
        (json!({"a":"foo"}), json!("bar"), json!("bar")),
        (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
        (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
        (json!({}), json!({"a":{"bb":{"ccc":null}}}), json!({"a":{"bb":{}}})),
        // Slipway cases: absent properties, deep merge keeps siblings.
        (json!(null), json!({"a":{"b":1}}), json!({"a":{"b":1}})),
        (
            json!({"a":{"b":1,"c":{"d":2,"e":3}}}),
            json!({"a":{"c":{"e":null,"f":4}}}),
            json!({"a":{"b":1,"c":{"d":2,"f":4}}}),
        ),
        (json!({"a":1}), json!({}), json!({"a":1})),
    ];
    for (i, (target, patch, want)) in rows.into_iter().enumerate() {
        let mut got = target.clone();
        merge_patch(&mut got, &patch);
        assert_eq!(got, want, "row {i}: {target} + {patch}");
    }
}

// ---------------------------------------------------------------------------------------
// DELETE
// ---------------------------------------------------------------------------------------

#[test]
fn delete_of_an_absent_resource_is_absent() {
    let mut w = World::new();
    assert_eq!(w.delete(1), Ok(Admitted::Absent));
    assert_eq!(w.snap, Snapshot::default());
}

#[test]
fn delete_supersedes_the_active_create_operation() {
    for notify in [true, false] {
        let mut w = World::new();
        w.notify = notify;
        accepted(w.put(1, v1()));
        let now = w.now;
        w.snap.set_operation_status(&op_id(1), PS::Provisioning, None, now);
        w.set_now(at(42));
        let (op, created) = accepted(w.delete(2));
        assert!(!created);

        let old = w.op(1);
        assert_eq!(old.status, PS::Canceled);
        assert_eq!(old.error, Some(canceled_superseded()));
        assert_eq!(old.last_transition_time, at(42));
        assert_eq!(old.end_time(), Some(at(42)));
        let want_notes = if notify { vec![notification(1)] } else { vec![] };
        assert_eq!(w.snap.notifications, want_notes, "notify={notify}");

        assert_eq!(op.id, op_id(2));
        assert_eq!(op.request, OperationRequest::Delete);
        assert_eq!(op.status, PS::Deleting);
        assert_eq!(op.start_time, at(42));
        assert_eq!(w.snap.operation(&op_id(2)), Some(&op));

        let res = w.res();
        assert_eq!(res.provisioning_state, PS::Deleting);
        assert_eq!(res.deletion, Some(Deletion { requested_at: at(42), force: false }));
        assert_eq!(res.active_operation_id, Some(op_id(2)));
        assert_eq!(res.last_operation_id, op_id(1), "the spec's operation still names it");
        assert_eq!(res.last_error, None, "the superseded error is not the resource's error");
        assert_eq!(res.schedule, Schedule::now(at(42)));
        assert_eq!(res.generation, 2);
        assert!(res.is_deleting());
    }
}

#[test]
fn delete_of_a_settled_resource_cancels_nothing() {
    let mut w = World::created();
    w.notify = true;
    finish_active(&mut w, PS::Succeeded, None);
    let notes = w.snap.notifications.clone();
    let (op, _) = accepted(w.delete(2));
    assert_eq!(op.status, PS::Deleting);
    assert_eq!(w.op(1).status, PS::Succeeded);
    assert_eq!(w.op(1).error, None);
    assert_eq!(w.snap.notifications, notes, "nothing new to notify");
}

#[test]
fn second_delete_while_deleting_conflicts() {
    let mut w = World::created();
    accepted(w.delete(2));
    let before = w.snap.clone();
    w.advance(secs(1));
    assert_eq!(w.delete(3), Err(conflict("Resource is already deleting")));
    assert_eq!(w.snap, before);
}

#[test]
fn delete_is_accepted_again_after_the_delete_operation_failed() {
    let mut w = World::created();
    accepted(w.delete(2));
    w.advance(secs(12 * 3600));
    let timeout = err("OperationTimedOut", "The delete operation did not complete within 43200s");
    finish_active(&mut w, PS::Failed, Some(timeout.clone()));
    assert_eq!(w.res().provisioning_state, PS::Failed);
    assert_eq!(w.res().last_error, Some(timeout));
    assert_eq!(w.res().active_operation_id, None);
    w.advance(secs(5));
    let (op, _) = accepted(w.delete(3));
    assert_eq!(op.request, OperationRequest::Delete);
    assert_eq!(w.op(2).status, PS::Failed, "the failed delete stays failed");
    let res = w.res();
    assert_eq!(res.provisioning_state, PS::Deleting);
    assert_eq!(res.active_operation_id, Some(op_id(3)));
    assert_eq!(res.last_error, None);
    assert_eq!(res.deletion, Some(Deletion { requested_at: T0, force: false }), "the first request time is kept");
}

// ---------------------------------------------------------------------------------------
// Cancel
// ---------------------------------------------------------------------------------------

#[test]
fn cancel_rejections() {
    let mut w = World::created();
    assert_eq!(w.cancel(9), Err(Rejection::OperationNotFound));

    finish_active(&mut w, PS::Succeeded, None);
    let before = w.snap.clone();
    assert_eq!(w.cancel(1), Err(conflict("The operation has already completed with status Succeeded")));
    assert_eq!(w.snap, before);

    accepted(w.delete(2));
    let before = w.snap.clone();
    assert_eq!(
        w.cancel(2),
        Err(conflict("A delete operation cannot be canceled; a forced delete (DELETE ?force=true) ends it"))
    );
    assert_eq!(w.snap, before);
}

#[test]
fn cancel_before_any_job_ends_the_operation_at_once() {
    let mut w = World::new();
    w.notify = true;
    accepted(w.put(1, v1()));
    w.set_now(at(7));
    let op = w.cancel(1).expect("cancel admitted");
    assert_eq!(op.status, PS::Canceled);
    assert_eq!(op.error, Some(canceled_by_user()));
    assert_eq!(canceled_by_user(), err("Canceled", "The operation was canceled by the user"));
    assert_eq!(op.last_transition_time, at(7));
    assert_eq!(w.snap.operation(&op_id(1)), Some(&op));
    let res = w.res();
    assert_eq!(res.provisioning_state, PS::Canceled);
    assert_eq!(res.active_operation_id, None);
    assert_eq!(res.last_error, Some(canceled_by_user()));
    assert_eq!(res.convergence_stopped_for, Some(res.desired_config_version.clone()));
    assert_eq!(res.generation, 2);
    assert_eq!(w.snap.notifications, vec![notification(1)]);
    // A canceled resource accepts the same spec again (a retry).
    let (retry, _) = accepted(w.put(2, v1()));
    assert_eq!(retry.request, OperationRequest::Update);
    assert_eq!(w.res().convergence_stopped_for, None);
}

#[test]
fn cancel_with_a_job_moves_to_canceling_and_is_idempotent() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    w.set_now(at(30));
    let op = w.cancel(1).expect("cancel admitted");
    assert_eq!(op.status, PS::Canceling);
    assert_eq!(op.error, None);
    assert_eq!(op.last_transition_time, at(30));
    let res = w.res();
    assert_eq!(res.provisioning_state, PS::Canceling);
    assert_eq!(res.active_operation_id, Some(op_id(1)));
    assert_eq!(res.convergence_stopped_for, None, "decided when the job ends");
    assert_eq!(res.schedule, Schedule::now(at(30)));
    assert_eq!(res.generation, 2);

    let before = w.snap.clone();
    w.advance(secs(5));
    assert_eq!(w.cancel(1), Ok(op));
    assert_eq!(w.snap, before, "a second cancel changes nothing");
}

#[test]
fn canceled_operation_cannot_be_canceled_again() {
    let mut w = World::created();
    w.cancel(1).expect("first cancel");
    assert_eq!(w.cancel(1), Err(conflict("The operation has already completed with status Canceled")));
}

#[test]
fn cancel_of_a_superseded_operation_conflicts() {
    let mut w = World::created();
    accepted(w.delete(2));
    assert_eq!(w.cancel(1), Err(conflict("The operation has already completed with status Canceled")));
}

#[test]
fn timestamps_are_the_request_time() {
    // The domain never reads a clock: every recorded instant is the context's `now`.
    let mut w = World::new();
    w.set_now(Timestamp(123_456));
    let (op, _) = accepted(w.put(1, v1()));
    assert_eq!(op.start_time, Timestamp(123_456));
    assert_eq!(w.res().system_data.created_at, Timestamp(123_456));
}

#[test]
fn each_accepted_request_records_who_asked_for_which_tenant() {
    let mut w = World::new();
    accepted(w.put(1, v1()));
    assert_eq!(w.res().job_context, Some(job_context("alice@example.com")), "the create's requester");
    finish_active(&mut w, PS::Succeeded, None);
    // The same spec again changes nothing, not even who is on record.
    let mut bob = w.ctx(2);
    bob.job_context = Some(job_context("bob@example.com"));
    assert_eq!(
        slipway_domain::admission::admit_put(&mut w.snap, &arm_id(), "VirtualNetwork", spec(v1()), &bob),
        Ok(Admitted::Unchanged)
    );
    assert_eq!(w.res().job_context.as_ref().unwrap().requested_by.name, "alice@example.com");
    // A change by Bob, then a delete by Carol: each job is told who asked for it.
    accepted(slipway_domain::admission::admit_put(&mut w.snap, &arm_id(), "VirtualNetwork", spec(v2()), &bob));
    assert_eq!(w.res().job_context.as_ref().unwrap().requested_by.name, "bob@example.com");
    finish_active(&mut w, PS::Succeeded, None);
    let mut carol = w.ctx(3);
    carol.job_context = Some(job_context("carol@example.com"));
    accepted(slipway_domain::admission::admit_delete(&mut w.snap, &carol));
    assert_eq!(w.res().job_context, Some(job_context("carol@example.com")));
}
