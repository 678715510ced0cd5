//! Changes: snapshots, rejections, supersession, status updates.

use super::*;

pub async fn case_create_and_read_back(store: &dyn Store) {
    let id = vnet("Sub-Create", "RG-One", "VNet1");
    let (admitted, snap) = put(store, &id, spec(1), ctx(1, T0)).await;
    let Admitted::Accepted { operation, created: true } = admitted else {
        panic!("expected a created resource, got {admitted:?}");
    };
    let rec = snap.resource.clone().expect("created");
    assert_eq!(rec.id, id);
    assert_eq!(rec.schedule, Schedule::now(T0));
    assert_eq!(rec.lease, None);
    assert_eq!(rec.generation, 1);
    assert_eq!(snap.operations, vec![operation.clone()]);
    assert!(snap.notifications.is_empty());

    // Keys are case-insensitive; the id keeps the casing it was created with.
    let shouty = ArmId::read_stored(&id.to_string().to_ascii_uppercase()).expect("an id");
    let read = resource(store, &shouty.key()).await;
    assert_eq!(read, rec);
    assert_eq!(
        read.id.to_string(),
        "/subscriptions/Sub-Create/resourceGroups/RG-One/providers/Slipway.Example/virtualNetworks/VNet1"
    );

    // Operations are visible under their (case-insensitive) subscription only.
    assert_eq!(operation_of(store, "sub-create", &operation.id).await, Some(operation.clone()));
    assert_eq!(operation_of(store, "SUB-CREATE", &operation.id).await, Some(operation.clone()));
    assert_eq!(operation_of(store, "sub-other", &operation.id).await, None);
    assert_eq!(operation_of(store, "sub-create", &op_id(99)).await, None);
    assert_eq!(store.get_resource(&vnet("Sub-Create", "RG-One", "VNet2").key()).await, Ok(None));

    // The next transaction sees what this one committed, the open operation included.
    let again = noop(store, ChangeRequest::new(shouty.key(), at(SECOND))).await;
    assert_eq!(again, Snapshot { resource: Some(rec), operations: vec![operation], ..Snapshot::default() });
}

async fn operation_of(store: &dyn Store, subscription: &str, id: &OperationId) -> Option<Operation> {
    store.get_operation(&subscription.into(), id, T0).await.expect("get_operation")
}

pub async fn case_noop_change_writes_nothing(h: &Harness) {
    let store: &dyn Store = &**h;
    let id = vnet("sub-noop", "rg", "quiet");
    let before_create = store.stats();
    let (_, created) = put(store, &id, spec(1), ctx(1, T0)).await;
    let op = created.operations[0].clone();
    let created_stats = store.stats();
    assert_eq!(created_stats.write_calls, before_create.write_calls + 1, "the create is one write call");
    assert_eq!(created_stats.commits, before_create.commits + 1, "the create is one commit");

    let first = noop(store, ChangeRequest::new(id.key(), at(SECOND))).await;
    let after_noop = store.stats();
    assert_eq!(after_noop.write_calls, created_stats.write_calls + 1);
    assert_eq!(after_noop.commits, created_stats.commits, "a change that alters nothing commits nothing");
    // Other writes that change no row are write calls, not commits, on every engine.
    let nothing_due = claim_req("nobody", T0.sub(Duration::from_secs(3600)), 1, 1);
    assert_eq!(store.claim(&nothing_due).await.expect("claim"), Vec::new());
    assert_eq!(store.renew_leases(&"nobody".into(), &[id.key()], at(SECOND)).await, Ok(0));
    assert_eq!(store.release_leases(&"nobody".into()).await, Ok(0));
    let idle = store.stats();
    assert_eq!(idle.write_calls, after_noop.write_calls + 3);
    assert_eq!(idle.commits, after_noop.commits, "writes that changed no row are no commits");
    assert_eq!(first.resource, created.resource);
    assert_eq!(first.operations, vec![op.clone()]);
    let second = noop(store, ChangeRequest::new(id.key(), at(2 * SECOND))).await;
    assert_eq!(second, first, "an identical change reports the same snapshot");

    // Replaying the same PUT answers from the open operation and changes nothing either.
    let (admitted, replay) = put(store, &id, spec(1), ctx(2, at(3 * SECOND))).await;
    assert_eq!(admitted, Admitted::InProgress { operation: op.clone() });
    assert_eq!(replay, first);

    // A change that edits and then restores is no change.
    apply(store, ChangeRequest::new(id.key(), at(4 * SECOND)), |s| {
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        let saved = res.clone();
        res.generation += 7;
        res.schedule = Schedule::default();
        *res = saved;
        Ok(())
    })
    .await
    .expect("change");

    assert_eq!(store.get_resource(&id.key()).await, Ok(created.resource.clone()));
    // (`case_a_change_that_alters_nothing_does_not_write` looks at the database itself.)
    assert_eq!(store.get_operation(&"sub-noop".into(), &op.id, at(5 * SECOND)).await, Ok(Some(op.clone())));
}

/// A change function cannot re-home a resource under another key: the write is refused and
/// neither key changes.
pub async fn case_a_change_cannot_move_a_resource_to_another_key(store: &dyn Store) {
    let id = vnet("sub-move", "rg", "r1");
    put(store, &id, spec(1), ctx(1, T0)).await;
    let elsewhere = vnet("sub-move", "rg", "r2");
    let target = elsewhere.clone();
    let err = store
        .change(
            ChangeRequest::new(id.key(), at(1)),
            Box::new(move |s| {
                s.resource.as_mut().ok_or(Rejection::NotFound)?.id = target;
                Ok(())
            }),
        )
        .await
        .expect_err("refused");
    assert!(matches!(err, StoreError::Internal(_)), "{err:?}");
    assert_eq!(store.get_resource(&elsewhere.key()).await, Ok(None));
    assert!(store.get_resource(&id.key()).await.expect("get").is_some());
}

pub async fn case_rejection_writes_nothing(store: &dyn Store) {
    let id = vnet("sub-reject", "rg", "r1");
    let (_, created) = put(store, &id, spec(1), ctx(1, T0)).await;
    let rec = created.resource.clone().expect("created");
    let op1 = created.operations[0].clone();

    // A different spec while the first operation runs: the ARM conflict.
    let target = id.clone();
    let c2 = ctx(2, at(SECOND));
    let err = change_with(store, ChangeRequest::new(id.key(), at(SECOND)), move |s| {
        admission::admit_put(s, &target, KIND, spec(2), &c2)
    })
    .await
    .expect_err("conflict");
    assert!(matches!(err, StoreError::Rejected(Rejection::Conflict { .. })), "{err:?}");

    // A change that did plenty before refusing leaves no trace of it.
    let err = apply(store, ChangeRequest::new(id.key(), at(2 * SECOND)), |s| {
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.generation += 10;
        res.spec.tags.insert("touched".into(), "yes".into());
        res.schedule = Schedule::default();
        let mut extra = s.operations[0].clone();
        extra.id = op_id(3);
        s.operations[0].status = ProvisioningState::Failed;
        s.operations.push(extra);
        s.notifications.push(NewNotification {
            subscription: "sub-reject".into(),
            operation_id: op_id(1),
            uri: "https://callbacks.example/x".into(),
        });
        Err(Rejection::NotFound)
    })
    .await
    .expect_err("rejected");
    assert_eq!(err, StoreError::Rejected(Rejection::NotFound));
    assert_eq!(resource(store, &id.key()).await, rec);
    assert_eq!(operation_of(store, "sub-reject", &op1.id).await, Some(op1));
    assert_eq!(operation_of(store, "sub-reject", &op_id(3)).await, None);
    assert_eq!(store.claim_notifications(at(1_000 * SECOND), 10, HOLD).await, Ok(vec![]));

    // A refused create creates nothing.
    let other = vnet("sub-reject", "rg", "r2");
    let target = other.clone();
    let c4 = ctx(4, at(3 * SECOND));
    let err = apply(store, ChangeRequest::new(other.key(), at(3 * SECOND)), move |s| {
        admission::admit_put(s, &target, KIND, spec(1), &c4)?;
        Err(Rejection::Invalid(CloudError::new("InvalidProperty", "no")))
    })
    .await
    .expect_err("rejected");
    assert!(matches!(err, StoreError::Rejected(Rejection::Invalid(_))));
    assert_eq!(store.get_resource(&other.key()).await, Ok(None));
    assert_eq!(operation_of(store, "sub-reject", &op_id(4)).await, None);
}

pub async fn case_delete_supersedes_running_operation(store: &dyn Store) {
    let id = vnet("Sub-Supersede", "rg", "r1");
    put(store, &id, spec(1), ctx_notify(1, T0, "https://callbacks.example/op1")).await;
    let now = at(5 * SECOND);
    let (admitted, snap) = delete(store, &id, ctx(2, now)).await;
    let Admitted::Accepted { operation: del, created: false } = admitted else {
        panic!("expected an accepted delete, got {admitted:?}");
    };
    assert_eq!(del.request, OperationRequest::Delete);
    assert_eq!(del.status, ProvisioningState::Deleting);
    let superseded = snap.operation(&op_id(1)).cloned().expect("superseded op in snapshot");
    assert_eq!(superseded.status, ProvisioningState::Canceled);
    assert_eq!(superseded.error.as_ref().map(|e| e.code.as_str()), Some(codes::CANCELED));

    // Both operations, the resource and the callback were committed together.
    assert_eq!(operation(store, "sub-supersede", &op_id(1), now).await, superseded);
    assert_eq!(operation(store, "sub-supersede", &op_id(2), now).await, del);
    let rec = resource(store, &id.key()).await;
    assert_eq!(Some(&rec), snap.resource.as_ref());
    assert_eq!(rec.provisioning_state, ProvisioningState::Deleting);
    assert_eq!(rec.active_operation_id, Some(op_id(2)));
    assert_eq!(rec.deletion.as_ref().map(|d| d.requested_at), Some(now));
    assert_eq!(rec.generation, 2);
    assert_eq!(rec.schedule, Schedule::now(now));
    let due = store.claim_notifications(now, 10, HOLD).await.expect("claim");
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].subscription, "sub-supersede");
    assert_eq!(due[0].operation_id, op_id(1));
    assert_eq!(due[0].uri, "https://callbacks.example/op1");
    assert_eq!((due[0].attempts, due[0].next_attempt_at, due[0].created_at), (0, now, now));

    // The canceled operation is terminal now: only the delete is loaded.
    let snap = noop(store, ChangeRequest::new(id.key(), at(6 * SECOND))).await;
    assert_eq!(op_ids(&snap), vec![op_id(2)]);

    // A second DELETE while deleting is a conflict and changes nothing.
    let c3 = ctx(3, at(7 * SECOND));
    let err = change_with(store, ChangeRequest::new(id.key(), c3.now), move |s| admission::admit_delete(s, &c3))
        .await
        .expect_err("conflict");
    assert!(matches!(err, StoreError::Rejected(Rejection::Conflict { .. })), "{err:?}");
    assert_eq!(resource(store, &id.key()).await, rec);
}

pub async fn case_status_update_moves_operation_and_resource(store: &dyn Store) {
    let id = vnet("sub-status", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;

    let snap = set_status(store, &key, &op_id(1), ProvisioningState::Provisioning, None, at(SECOND)).await;
    assert_eq!(operation(store, "sub-status", &op_id(1), at(SECOND)).await, snap.operations[0]);
    assert_eq!(snap.operations[0].status, ProvisioningState::Provisioning);
    assert_eq!(resource(store, &key).await.provisioning_state, ProvisioningState::Provisioning);

    // Job history, schedule, resource status and operation status: one change, one commit.
    let failure = CloudError::new(codes::PROVISIONING_FAILED, "the playbook failed");
    let err = failure.clone();
    let snap = apply(store, ChangeRequest::new(key.clone(), at(2 * SECOND)), move |s| {
        assert!(s.set_operation_status(&op_id(1), ProvisioningState::Failed, Some(err), at(2 * SECOND)));
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.job_seq = 1;
        res.schedule = Schedule { next_due: Some(at(122 * SECOND)), intent: false, drift_due: None };
        Ok(())
    })
    .await
    .expect("change");
    let op = operation(store, "sub-status", &op_id(1), at(2 * SECOND)).await;
    assert_eq!(op, snap.operations[0]);
    assert_eq!(op.status, ProvisioningState::Failed);
    assert_eq!(op.error, Some(failure.clone()));
    assert_eq!(op.end_time(), Some(at(2 * SECOND)));
    let rec = resource(store, &key).await;
    assert_eq!(Some(&rec), snap.resource.as_ref());
    assert_eq!(rec.provisioning_state, ProvisioningState::Failed);
    assert_eq!(rec.active_operation_id, None);
    assert_eq!(rec.last_error, Some(failure));
    assert_eq!(rec.job_seq, 1);
    assert_eq!(rec.schedule, Schedule { next_due: Some(at(122 * SECOND)), intent: false, drift_due: None });
}

pub async fn case_status_update_skips_resource_of_another_operation(store: &dyn Store) {
    let id = vnet("sub-skip", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    // Another operation became the active one while op 1 is still open.
    apply(store, ChangeRequest::new(key.clone(), at(SECOND)), |s| {
        let mut second = s.operations[0].clone();
        second.id = op_id(2);
        second.request = OperationRequest::Update;
        s.operations.push(second);
        let res = s.resource.as_mut().ok_or(Rejection::NotFound)?;
        res.active_operation_id = Some(op_id(2));
        res.generation += 1;
        Ok(())
    })
    .await
    .expect("change");
    let before = resource(store, &key).await;

    let error = CloudError::new(codes::OPERATION_TIMED_OUT, "too slow");
    let snap = set_status(store, &key, &op_id(1), ProvisioningState::Failed, Some(error), at(2 * SECOND)).await;
    assert_eq!(snap.resource.as_ref(), Some(&before));
    assert_eq!(resource(store, &key).await, before, "the resource follows only its active operation");
    assert_eq!(operation(store, "sub-skip", &op_id(1), at(2 * SECOND)).await.status, ProvisioningState::Failed);
    assert_eq!(operation(store, "sub-skip", &op_id(2), at(2 * SECOND)).await.status, ProvisioningState::Accepted);
}

pub async fn case_status_update_without_resource(store: &dyn Store) {
    let id = vnet("sub-gone", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    // The resource vanished (a forced delete) while its operation is still open.
    apply(store, ChangeRequest::new(key.clone(), at(SECOND)), |s| {
        s.resource = None;
        Ok(())
    })
    .await
    .expect("change");
    assert_eq!(store.get_resource(&key).await, Ok(None));

    let snap = noop(store, ChangeRequest::new(key.clone(), at(2 * SECOND))).await;
    assert_eq!(snap.resource, None);
    assert_eq!(op_ids(&snap), vec![op_id(1)], "open operations are loaded without their resource");

    let error = CloudError::new(codes::PROVISIONING_FAILED, "resource removed");
    let snap = set_status(store, &key, &op_id(1), ProvisioningState::Failed, Some(error), at(3 * SECOND)).await;
    assert_eq!(snap.resource, None);
    assert_eq!(operation(store, "sub-gone", &op_id(1), at(3 * SECOND)).await.status, ProvisioningState::Failed);
    assert_eq!(store.get_resource(&key).await, Ok(None));
}

pub async fn case_delete_completion_removes_resource_keeps_operation(store: &dyn Store) {
    let id = vnet("sub-done", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    delete(store, &id, ctx(2, at(SECOND))).await;

    // The engine's completion: fenced, operation Succeeded and resource gone in one change.
    let claimed = store.claim(&claim_req("engine-a", at(2 * SECOND), 10, 10)).await.expect("claim");
    assert_eq!(keys(&claimed), vec![key.clone()]);
    let epoch = claimed[0].lease.as_ref().expect("leased").epoch;
    let fence = Fence { owner: "engine-a".into(), epoch };
    let snap = apply(store, ChangeRequest::new(key.clone(), at(3 * SECOND)).fenced(fence), |s| {
        assert!(s.set_operation_status(&op_id(2), ProvisioningState::Succeeded, None, at(3 * SECOND)));
        s.resource = None;
        Ok(())
    })
    .await
    .expect("completion");
    assert_eq!(snap.resource, None);
    assert_eq!(store.get_resource(&key).await, Ok(None));
    let done = operation(store, "sub-done", &op_id(2), at(3 * SECOND)).await;
    assert_eq!(done.status, ProvisioningState::Succeeded);
    assert_eq!(done.end_time(), Some(at(3 * SECOND)));
    let page = store
        .list_resources(&ListQuery {
            subscription: "sub-done".into(),
            resource_group: None,
            type_key: Some(vnet_type()),
            under: None,
            after: None,
            limit: 10,
        })
        .await
        .expect("list");
    assert!(page.items.is_empty());
    assert_eq!(noop(store, ChangeRequest::new(key.clone(), at(4 * SECOND))).await, Snapshot::default());

    // The name is free again.
    let (admitted, snap) = put(store, &id, spec(2), ctx(3, at(5 * SECOND))).await;
    assert!(matches!(admitted, Admitted::Accepted { created: true, .. }), "{admitted:?}");
    assert_eq!(resource(store, &key).await, snap.resource.expect("recreated"));
}

pub async fn case_terminal_operations_load_only_on_request(store: &dyn Store) {
    let id = vnet("Sub-Terminal", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    set_status(store, &key, &op_id(1), ProvisioningState::Succeeded, None, at(SECOND)).await;

    assert!(noop(store, ChangeRequest::new(key.clone(), at(2 * SECOND))).await.operations.is_empty());
    let named =
        noop(store, ChangeRequest::new(key.clone(), at(2 * SECOND)).with_operation("Sub-Terminal", op_id(1))).await;
    assert_eq!(op_ids(&named), vec![op_id(1)]);
    assert_eq!(named.operations[0].status, ProvisioningState::Succeeded);

    // Naming an open operation does not load it twice; another subscription's is not found.
    put(store, &id, spec(2), ctx(2, at(3 * SECOND))).await;
    let snap =
        noop(store, ChangeRequest::new(key.clone(), at(4 * SECOND)).with_operation("sub-terminal", op_id(2))).await;
    assert_eq!(op_ids(&snap), vec![op_id(2)]);
    let snap = noop(store, ChangeRequest::new(key.clone(), at(4 * SECOND)).with_operation("sub-other", op_id(1))).await;
    assert_eq!(op_ids(&snap), vec![op_id(2)]);
}

pub async fn case_cancel_operation(store: &dyn Store) {
    let id = vnet("sub-cancel", "rg", "r1");
    let key = id.key();
    put(store, &id, spec(1), ctx(1, T0)).await;
    set_status(store, &key, &op_id(1), ProvisioningState::Succeeded, None, at(SECOND)).await;
    put(store, &id, spec(2), ctx(2, at(2 * SECOND))).await;
    let before = resource(store, &key).await;

    let now = at(3 * SECOND);
    let req = ChangeRequest::new(key.clone(), now).with_operation("sub-cancel", op_id(2));
    let (canceled, snap) =
        change_with(store, req, move |s| admission::admit_cancel(s, &op_id(2), now)).await.expect("cancel");
    assert_eq!(canceled.status, ProvisioningState::Canceled);
    assert_eq!(canceled.error, Some(admission::canceled_by_user()));
    assert_eq!(operation(store, "sub-cancel", &op_id(2), now).await, canceled);
    let rec = resource(store, &key).await;
    assert_eq!(Some(&rec), snap.resource.as_ref());
    assert_eq!(rec.provisioning_state, ProvisioningState::Canceled);
    assert_eq!(rec.active_operation_id, None);
    assert_eq!(rec.convergence_stopped_for, Some(before.desired_config_version.clone()));
    assert_eq!(rec.generation, before.generation + 1);

    // A finished operation is loaded because the request names it, and refused.
    let later = at(4 * SECOND);
    let req = ChangeRequest::new(key.clone(), later).with_operation("sub-cancel", op_id(1));
    let err =
        change_with(store, req, move |s| admission::admit_cancel(s, &op_id(1), later)).await.expect_err("already done");
    assert!(matches!(err, StoreError::Rejected(Rejection::Conflict { .. })), "{err:?}");
    let req = ChangeRequest::new(key.clone(), later).with_operation("sub-cancel", op_id(9));
    let err =
        change_with(store, req, move |s| admission::admit_cancel(s, &op_id(9), later)).await.expect_err("unknown");
    assert_eq!(err, StoreError::Rejected(Rejection::OperationNotFound));
    assert_eq!(resource(store, &key).await, rec);
}

/// Outputs a job reported are part of the resource: written by the change that records
/// them, read back exactly (nested values included), replaced whole by a later change, and
/// kept by changes that do not touch them (a client's update).
pub async fn case_outputs_are_written_replaced_and_kept(store: &dyn Store) {
    let id = vnet("Sub-Outputs", "RG", "VNet1");
    put(store, &id, spec(1), ctx(1, T0)).await;
    let outputs = json!({"ipAddress": "10.0.0.4", "disks": [{"lun": 0, "sizeGb": 64}], "ready": true});
    let set = |v: serde_json::Value| {
        move |s: &mut Snapshot| {
            s.resource.as_mut().ok_or(Rejection::NotFound)?.outputs = v.as_object().cloned().unwrap_or_default();
            Ok(())
        }
    };
    apply(store, ChangeRequest::new(id.key(), at(SECOND)), set(outputs.clone())).await.expect("record outputs");
    let active = resource(store, &id.key()).await.active_operation_id.expect("the create runs");
    set_status(store, &id.key(), &active, ProvisioningState::Succeeded, None, at(SECOND)).await;
    assert_eq!(serde_json::Value::Object(resource(store, &id.key()).await.outputs), outputs);

    // A client's update leaves them alone.
    put(store, &id, spec(2), ctx(2, at(2 * SECOND))).await;
    assert_eq!(serde_json::Value::Object(resource(store, &id.key()).await.outputs), outputs);

    let next = json!({"hostName": "vm1"});
    apply(store, ChangeRequest::new(id.key(), at(3 * SECOND)), set(next.clone())).await.expect("replace outputs");
    assert_eq!(serde_json::Value::Object(resource(store, &id.key()).await.outputs), next);
}

/// A POST action's operation is written with the resource's active-operation pointer in one
/// change, read back with its name and body, and its end clears the pointer without moving
/// the resource's state.
pub async fn case_an_action_operation_is_written_with_its_call(store: &dyn Store) {
    let id = vnet("Sub-Action", "RG", "VNet1");
    put(store, &id, spec(1), ctx(1, T0)).await;
    let create = resource(store, &id.key()).await.active_operation_id.expect("the create runs");
    set_status(store, &id.key(), &create, ProvisioningState::Succeeded, None, at(SECOND)).await;
    let call = slipway_domain::operation::ActionCall { name: "restart".into(), parameters: json!({"force": true}) };
    let c = ctx(2, at(2 * SECOND));
    apply(store, ChangeRequest::new(id.key(), at(2 * SECOND)), move |s| {
        admission::admit_action(s, call, &c).map(|_| ())
    })
    .await
    .expect("admit the action");
    let stored = resource(store, &id.key()).await;
    assert_eq!(stored.active_operation_id.as_ref(), Some(&op_id(2)));
    let operation = self::operation(store, "Sub-Action", &op_id(2), at(3 * SECOND)).await;
    assert_eq!(stored.provisioning_state, ProvisioningState::Succeeded);
    assert_eq!(operation.request, slipway_domain::OperationRequest::Action);
    assert_eq!(
        operation.action.as_ref().map(|a| (a.name.as_str(), &a.parameters)),
        Some(("restart", &json!({"force": true})))
    );
    set_status(store, &id.key(), &operation.id, ProvisioningState::Failed, None, at(4 * SECOND)).await;
    let after = resource(store, &id.key()).await;
    assert_eq!(after.active_operation_id, None);
    assert_eq!(after.provisioning_state, ProvisioningState::Succeeded, "an action's end leaves the state alone");
}
