//! `Snapshot::set_operation_status`: the ARO `UpdateOperationStatus` rules
//! (docs/arm-contract.md#operations) that admission and reconcile both rely on.

mod common;

use common::*;
use slipway_domain::{CloudError, ProvisioningState as PS, Snapshot};

/// Operation 1 (create) active on the resource, moved to `status`; notifications on.
fn world(status: PS) -> World {
    let mut w = World::new();
    w.notify = true;
    w.put(1, v1()).unwrap();
    if status != PS::Accepted {
        let now = w.now;
        assert!(w.snap.set_operation_status(&op_id(1), status, None, now));
    }
    w
}

#[test]
fn resource_follows_its_active_operation() {
    // (from, to, error, terminal: active operation cleared, notified)
    let boom = || Some(CloudError::new("ProvisioningFailed", "boom"));
    let rows: Vec<(PS, PS, Option<CloudError>, bool, bool)> = vec![
        (PS::Accepted, PS::Provisioning, None, false, false),
        (PS::Accepted, PS::Updating, None, false, false),
        (PS::Provisioning, PS::Canceling, None, false, false),
        (PS::Provisioning, PS::Succeeded, None, true, true),
        (PS::Provisioning, PS::Failed, boom(), true, true),
        (PS::Canceling, PS::Canceled, Some(err("Canceled", "c")), true, true),
    ];
    for (from, to, error, terminal, notified) in rows {
        let mut w = world(from);
        w.set_now(at(9));
        assert!(w.snap.set_operation_status(&op_id(1), to, error.clone(), at(9)), "{from:?}→{to:?}");
        let op = w.op(1);
        assert_eq!(op.status, to);
        assert_eq!(op.error, error);
        assert_eq!(op.last_transition_time, at(9));
        let res = w.res();
        assert_eq!(res.provisioning_state, to, "{from:?}→{to:?}");
        assert_eq!(res.active_operation_id.is_none(), terminal, "{from:?}→{to:?}");
        if terminal {
            assert_eq!(res.last_error, error, "{from:?}→{to:?}");
        }
        let want = if notified { vec![notification(1)] } else { vec![] };
        assert_eq!(w.snap.notifications, want, "{from:?}→{to:?}: callbacks only when terminal");
    }
}

#[test]
fn resource_is_skipped_when_another_operation_owns_it_or_it_is_gone() {
    // The resource's active operation is another one: the resource is left alone.
    let mut w = world(PS::Provisioning);
    w.res_mut().active_operation_id = Some(op_id(2));
    let res_before = w.res().clone();
    assert!(w.snap.set_operation_status(&op_id(1), PS::Succeeded, None, at(5)));
    assert_eq!(w.op(1).status, PS::Succeeded);
    assert_eq!(w.res(), &res_before, "resource untouched");
    assert_eq!(w.snap.notifications, vec![notification(1)]);

    // The resource document is gone: the operation still ends.
    let mut w = world(PS::Deleting);
    w.snap.resource = None;
    assert!(w.snap.set_operation_status(&op_id(1), PS::Succeeded, None, at(5)));
    assert_eq!(w.op(1).status, PS::Succeeded);
}

#[test]
fn no_change_writes_nothing_and_terminal_operations_never_move() {
    let mut w = world(PS::Provisioning);
    let before = w.snap.clone();
    assert!(!w.snap.set_operation_status(&op_id(1), PS::Provisioning, None, at(5)));
    assert_eq!(w.snap, before, "same status, no error: no write (NeedToPatchOperation)");

    assert!(w.snap.set_operation_status(&op_id(1), PS::Failed, Some(err("X", "a")), at(6)));
    let failed = w.snap.clone();
    assert!(!w.snap.set_operation_status(&op_id(1), PS::Succeeded, None, at(7)));
    assert!(!w.snap.set_operation_status(&op_id(1), PS::Failed, Some(err("X", "b")), at(7)));
    assert_eq!(w.snap, failed, "end time and callback are final");

    let mut empty = Snapshot::default();
    assert!(!empty.set_operation_status(&op_id(1), PS::Succeeded, None, at(1)));
    assert_eq!(empty, Snapshot::default());
}

#[test]
fn an_error_on_a_non_terminal_status_is_kept_and_not_cleared_later() {
    let mut w = world(PS::Provisioning);
    let warn = err("Warning", "slow");
    assert!(w.snap.set_operation_status(&op_id(1), PS::Provisioning, Some(warn.clone()), at(3)));
    assert_eq!(w.op(1).error, Some(warn.clone()));
    assert_eq!(w.op(1).last_transition_time, at(3));
    assert!(w.snap.set_operation_status(&op_id(1), PS::Succeeded, None, at(4)));
    assert_eq!(w.op(1).error, Some(warn), "a None never clears a stored error");
    assert_eq!(w.res().last_error, None, "the resource shows the terminal write's error");
}
