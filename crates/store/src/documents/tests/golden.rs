//! Records and operations to the frozen bodies and back.

use super::*;

#[test]
fn full_record_encodes_to_the_frozen_body_and_back() {
    let doc = ResourceDocument::from(&full_record());
    assert_eq!(serde_json::to_string_pretty(&doc).unwrap(), FULL_RESOURCE_V1);
    let body = encode_resource(&full_record()).unwrap();
    assert_eq!(value(&body), value(FULL_RESOURCE_V1));
    assert_eq!(decode_resource(FULL_RESOURCE_V1), Ok(as_stored(full_record())), "lease and schedule are not in it");
    assert_eq!(decode_resource(&body), Ok(as_stored(full_record())));
}

#[test]
fn full_operation_encodes_to_the_frozen_body_and_back() {
    let doc = OperationDocument::from(&full_operation());
    assert_eq!(serde_json::to_string_pretty(&doc).unwrap(), FULL_OPERATION_V1);
    let body = encode_operation(&full_operation()).unwrap();
    assert_eq!(value(&body), value(FULL_OPERATION_V1));
    assert_eq!(decode_operation(FULL_OPERATION_V1), Ok(full_operation()));
    assert_eq!(decode_operation(&body), Ok(full_operation()));
}

/// The row as a whole gives back the record exactly: the body without lease and schedule,
/// the columns with them and the generation.
#[test]
fn a_resource_row_restores_lease_schedule_and_generation_from_its_columns() {
    use crate::columns::{ResourceColumns, ResourceRow};
    let rec = full_record();
    let c = ResourceColumns::of(&rec, &rec.key()).unwrap();
    assert_eq!(value(&c.body), value(FULL_RESOURCE_V1));
    let row = ResourceRow {
        key: rec.key().as_str().to_string(),
        next_due: c.next_due,
        intent: c.intent,
        lease_owner: c.lease_owner,
        lease_until: c.lease_until,
        lease_epoch: c.lease_epoch.unwrap(),
        generation: c.generation + 1,
        body: c.body,
        drift_due: c.drift_due,
    };
    let back = row.into_record().unwrap();
    assert_eq!(back, ResourceRecord { generation: 8, ..rec }, "the column's generation wins");
}

#[test]
fn minimal_old_documents_decode_with_their_defaults() {
    assert_eq!(decode_resource(MINIMAL_RESOURCE_V1), Ok(minimal_record()));
    assert_eq!(decode_resource(MINIMAL_RESOURCE_WITH_JOB_V1), Ok(minimal_record_with_job()));
    assert_eq!(decode_operation(MINIMAL_OPERATION_V1), Ok(minimal_operation()));
    // Written back, the defaults that are always written appear; the others stay absent.
    assert_eq!(
        value(&encode_resource(&minimal_record()).unwrap()),
        json!({
            "id": {"subscription": "s", "resourceGroup": "rg", "namespace": "ns", "typeName": "t", "name": "n"},
            "kind": "Thing",
            "spec": {"tags": {}, "properties": null},
            "systemData": {"createdAt": 5, "lastModifiedAt": 6},
            "provisioningState": "Accepted",
            "desiredConfigVersion": "",
            "jobs": [],
            "lastOperationId": "00000000-0000-4000-8000-000000000001",
            "jobSeq": 0,
            "schedule": {"nextDue": null, "intent": false},
            "generation": 0
        })
    );
    assert_eq!(
        value(&encode_resource(&minimal_record_with_job()).unwrap())["jobs"],
        json!([{"jobID": "", "type": "provision", "state": "Launching", "timestamp": 7}])
    );
    assert_eq!(
        value(&encode_operation(&minimal_operation()).unwrap()),
        json!({
            "id": "00000000-0000-4000-8000-000000000001",
            "subscription": "s",
            "resourceKey": "/subscriptions/s/resourcegroups/rg/providers/ns/t/n",
            "resourceId": "/subscriptions/s/resourceGroups/rg/providers/ns/t/n",
            "request": "Create",
            "status": "Accepted",
            "startTime": 1,
            "lastTransitionTime": 2,
            "initiator": {},
            "apiVersion": "2025-01-01"
        })
    );
}

/// A job's stop is stored as the two fields it always was (`cancelRequestedAt`,
/// `killRequested`): each of its states reads back as itself.
#[test]
fn every_stop_state_reads_back_as_itself() {
    let asked = Timestamp(1_764_449_700_000);
    for stop in [
        None,
        Some(Stop::Cancel { asked_at: asked }),
        Some(Stop::Kill { asked_at: None }),
        Some(Stop::Kill { asked_at: Some(asked) }),
    ] {
        let mut rec = minimal_record_with_job();
        rec.jobs[0].stop = stop;
        let body = encode_resource(&rec).unwrap();
        assert_eq!(decode_resource(&body).map(|r| r.jobs[0].stop), Ok(stop), "{body}");
    }
}
