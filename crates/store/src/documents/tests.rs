use std::collections::BTreeMap;

use serde_json::json;
use slipway_domain::config_version::ConfigVersion;
use slipway_domain::ids::{ArmId, OperationId, ResourceKey};
use slipway_domain::job::{Job, JobState, JobType};
use slipway_domain::operation::{CloudError, Initiator, Operation, OperationRequest};
use slipway_domain::resource::{Deletion, Lease, ResourceRecord, Schedule, Spec, SystemData};
use slipway_domain::state::ProvisioningState;
use slipway_domain::time::Timestamp;

use super::{
    OperationDocument, ResourceDocument, decode_operation, decode_resource, encode_operation, encode_resource,
};

fn op_id(n: u32) -> OperationId {
    OperationId::parse(&format!("00000000-0000-4000-8000-{n:012}")).expect("operation id")
}

/// A job with every field set.
fn full_job() -> Job {
    Job {
        job_id: "17".into(),
        job_type: JobType::Provision,
        state: JobState::Failed,
        message: "Job failed".into(),
        timestamp: Timestamp(1_764_449_625_123),
        config_version: ConfigVersion::new("27bc29625b17b04f"),
        block_deletion_on_failure: true,
        idempotency_key: "slipway-00000000-0000-4000-8000-000000000001-3".into(),
        provider: "aap".into(),
        template: "slipway-virtual-network-create".into(),
        operation_id: Some(op_id(1)),
        handle: json!({"kind": "workflow_job", "template": 12}),
        error_details: "TASK [create] fatal: \"boom\"".into(),
        cancel_requested_at: Some(Timestamp(1_764_449_700_000)),
        launch_attempts: 2,
        absent_confirmed: true,
        launch_sent_at: Some(Timestamp(1_764_449_626_000)),
        launch_sends: 3,
        unique_confirmed: true,
        action: "restart".into(),
        ended_at: Some(Timestamp(1_764_449_690_000)),
        kill_requested: true,
    }
}

/// A record with every optional field set (lease and schedule too: they are not in the body).
fn full_record() -> ResourceRecord {
    let mut launching = Job::new("", JobType::Deprovision, JobState::Launching, Timestamp(1_764_449_800_000));
    launching.idempotency_key = "slipway-00000000-0000-4000-8000-000000000002-4".into();
    let mut duplicate = full_job();
    duplicate.job_id = "18".into();
    duplicate.state = JobState::Canceled;
    ResourceRecord {
        id: ArmId {
            subscription: "Sub-1".into(),
            resource_group: "My.RG".into(),
            namespace: "Slipway.Example".into(),
            type_name: "virtualNetworks".into(),
            parent_names: Vec::new(),
            name: "VNet1".into(),
        },
        kind: "VirtualNetwork".into(),
        spec: Spec {
            location: Some("westeurope".into()),
            tags: BTreeMap::from([("env".into(), "prod".into()), ("team".into(), "net".into())]),
            properties: json!({"addressSpace": "10.0.0.0/16", "subnets": [{"name": "a", "prefix": "10.0.1.0/24"}]}),
        },
        system_data: SystemData {
            created_by: "alice@example.com".into(),
            created_by_type: "User".into(),
            created_at: Timestamp(1_764_449_000_000),
            last_modified_by: "app-1".into(),
            last_modified_by_type: "Application".into(),
            last_modified_at: Timestamp(1_764_449_500_000),
        },
        provisioning_state: ProvisioningState::Deleting,
        desired_config_version: ConfigVersion::new("27bc29625b17b04f"),
        jobs: vec![full_job(), launching],
        duplicate_jobs: vec![duplicate],
        active_operation_id: Some(op_id(2)),
        last_operation_id: op_id(1),
        job_seq: 4,
        deletion: Some(Deletion { requested_at: Timestamp(1_764_449_790_000), force: true }),
        convergence_stopped_for: Some(ConfigVersion::new("77bf11f97e9a9078")),
        job_context: None,
        references: vec![slipway_domain::reference::Reference {
            property: "routeTableId".into(),
            id: ArmId {
                subscription: "Sub-1".into(),
                resource_group: "My.RG".into(),
                namespace: "Slipway.Example".into(),
                type_name: "routeTables".into(),
                parent_names: Vec::new(),
                name: "RT1".into(),
            },
        }],
        outputs: json!({"ipAddress": "10.0.1.4", "disks": [{"lun": 0}]}).as_object().unwrap().clone(),
        last_error: Some(full_error()),
        schedule: Schedule { next_due: Some(Timestamp(1_764_449_900_000)), intent: true },
        lease: Some(Lease { owner: "node-a".into(), until: Timestamp(1_764_449_930_000), epoch: 9 }),
        generation: 7,
    }
}

fn full_error() -> CloudError {
    CloudError {
        code: "ProvisioningFailed".into(),
        message: "Job failed".into(),
        target: Some("properties.addressSpace".into()),
        details: vec![
            CloudError {
                code: "JobFailed".into(),
                message: "TASK [create] fatal".into(),
                target: Some("jobs/17".into()),
                details: vec![CloudError::new("Inner", "deepest")],
            },
            CloudError::new("Retry", "no retry left"),
        ],
    }
}

/// An operation with every optional field set.
fn full_operation() -> Operation {
    Operation {
        id: op_id(2),
        subscription: "sub-1".into(),
        resource_key: ResourceKey(
            "/subscriptions/sub-1/resourcegroups/my.rg/providers/slipway.example/virtualnetworks/vnet1".into(),
        ),
        resource_id: "/subscriptions/Sub-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1".into(),
        request: OperationRequest::Delete,
        status: ProvisioningState::Failed,
        error: Some(full_error()),
        start_time: Timestamp(1_764_449_790_000),
        last_transition_time: Timestamp(1_764_449_990_000),
        percent_complete: Some(40),
        waiting_on: Some(
            "/subscriptions/Sub-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1".into(),
        ),
        child_operations: vec![slipway_domain::operation::ChildOperation {
            resource_id:
                "/subscriptions/Sub-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1/subnets/S1"
                    .into(),
            operation_id: op_id(3),
        }],
        action: Some(slipway_domain::operation::ActionCall {
            name: "restart".into(),
            parameters: json!({"force": true}),
        }),
        note: Some("Force-deleted".into()),
        notification_uri: Some("https://callback.example/notify?x=1".into()),
        initiator: Initiator {
            tenant_id: "tenant-1".into(),
            client_id: "client-1".into(),
            client_request_id: "req-1".into(),
            correlation_request_id: "corr-1".into(),
        },
        api_version: "2025-01-01".into(),
    }
}

/// The record as its body holds it: no lease, an empty schedule.
fn as_stored(mut rec: ResourceRecord) -> ResourceRecord {
    rec.lease = None;
    rec.schedule = Schedule::default();
    rec
}

/// Today's body of [`full_record`], frozen: printed once by the domain's own serde (before the
/// store had document types), checked by eye, pasted. Pretty-printed so the field order is
/// pinned too: compact and pretty output come from the same `Serialize` and differ only in
/// whitespace.
const FULL_RESOURCE_V1: &str = r#"{
  "id": {
    "subscription": "Sub-1",
    "resourceGroup": "My.RG",
    "namespace": "Slipway.Example",
    "typeName": "virtualNetworks",
    "name": "VNet1"
  },
  "kind": "VirtualNetwork",
  "spec": {
    "location": "westeurope",
    "tags": {
      "env": "prod",
      "team": "net"
    },
    "properties": {
      "addressSpace": "10.0.0.0/16",
      "subnets": [
        {
          "name": "a",
          "prefix": "10.0.1.0/24"
        }
      ]
    }
  },
  "systemData": {
    "createdBy": "alice@example.com",
    "createdByType": "User",
    "createdAt": 1764449000000,
    "lastModifiedBy": "app-1",
    "lastModifiedByType": "Application",
    "lastModifiedAt": 1764449500000
  },
  "provisioningState": "Deleting",
  "desiredConfigVersion": "27bc29625b17b04f",
  "jobs": [
    {
      "jobID": "17",
      "type": "provision",
      "state": "Failed",
      "message": "Job failed",
      "timestamp": 1764449625123,
      "configVersion": "27bc29625b17b04f",
      "blockDeletionOnFailure": true,
      "idempotencyKey": "slipway-00000000-0000-4000-8000-000000000001-3",
      "provider": "aap",
      "template": "slipway-virtual-network-create",
      "operationId": "00000000-0000-4000-8000-000000000001",
      "handle": {
        "kind": "workflow_job",
        "template": 12
      },
      "errorDetails": "TASK [create] fatal: \"boom\"",
      "cancelRequestedAt": 1764449700000,
      "launchAttempts": 2,
      "absentConfirmed": true,
      "launchSentAt": 1764449626000,
      "launchSends": 3,
      "uniqueConfirmed": true,
      "action": "restart",
      "endedAt": 1764449690000,
      "killRequested": true
    },
    {
      "jobID": "",
      "type": "deprovision",
      "state": "Launching",
      "timestamp": 1764449800000,
      "idempotencyKey": "slipway-00000000-0000-4000-8000-000000000002-4"
    }
  ],
  "duplicateJobs": [
    {
      "jobID": "18",
      "type": "provision",
      "state": "Canceled",
      "message": "Job failed",
      "timestamp": 1764449625123,
      "configVersion": "27bc29625b17b04f",
      "blockDeletionOnFailure": true,
      "idempotencyKey": "slipway-00000000-0000-4000-8000-000000000001-3",
      "provider": "aap",
      "template": "slipway-virtual-network-create",
      "operationId": "00000000-0000-4000-8000-000000000001",
      "handle": {
        "kind": "workflow_job",
        "template": 12
      },
      "errorDetails": "TASK [create] fatal: \"boom\"",
      "cancelRequestedAt": 1764449700000,
      "launchAttempts": 2,
      "absentConfirmed": true,
      "launchSentAt": 1764449626000,
      "launchSends": 3,
      "uniqueConfirmed": true,
      "action": "restart",
      "endedAt": 1764449690000,
      "killRequested": true
    }
  ],
  "activeOperationId": "00000000-0000-4000-8000-000000000002",
  "lastOperationId": "00000000-0000-4000-8000-000000000001",
  "jobSeq": 4,
  "deletion": {
    "requestedAt": 1764449790000,
    "force": true
  },
  "convergenceStoppedFor": "77bf11f97e9a9078",
  "references": [
    {
      "property": "routeTableId",
      "id": {
        "subscription": "Sub-1",
        "resourceGroup": "My.RG",
        "namespace": "Slipway.Example",
        "typeName": "routeTables",
        "name": "RT1"
      }
    }
  ],
  "outputs": {
    "disks": [
      {
        "lun": 0
      }
    ],
    "ipAddress": "10.0.1.4"
  },
  "lastError": {
    "code": "ProvisioningFailed",
    "message": "Job failed",
    "target": "properties.addressSpace",
    "details": [
      {
        "code": "JobFailed",
        "message": "TASK [create] fatal",
        "target": "jobs/17",
        "details": [
          {
            "code": "Inner",
            "message": "deepest"
          }
        ]
      },
      {
        "code": "Retry",
        "message": "no retry left"
      }
    ]
  },
  "schedule": {
    "nextDue": null,
    "intent": false
  },
  "generation": 7
}"#;

/// Today's body of [`full_operation`], frozen the same way.
const FULL_OPERATION_V1: &str = r#"{
  "id": "00000000-0000-4000-8000-000000000002",
  "subscription": "sub-1",
  "resourceKey": "/subscriptions/sub-1/resourcegroups/my.rg/providers/slipway.example/virtualnetworks/vnet1",
  "resourceId": "/subscriptions/Sub-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1",
  "request": "Delete",
  "status": "Failed",
  "error": {
    "code": "ProvisioningFailed",
    "message": "Job failed",
    "target": "properties.addressSpace",
    "details": [
      {
        "code": "JobFailed",
        "message": "TASK [create] fatal",
        "target": "jobs/17",
        "details": [
          {
            "code": "Inner",
            "message": "deepest"
          }
        ]
      },
      {
        "code": "Retry",
        "message": "no retry left"
      }
    ]
  },
  "startTime": 1764449790000,
  "lastTransitionTime": 1764449990000,
  "percentComplete": 40,
  "waitingOn": "/subscriptions/Sub-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1",
  "childOperations": [
    {
      "resourceId": "/subscriptions/Sub-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1/subnets/S1",
      "operationId": "00000000-0000-4000-8000-000000000003"
    }
  ],
  "action": {
    "name": "restart",
    "parameters": {
      "force": true
    }
  },
  "note": "Force-deleted",
  "notificationUri": "https://callback.example/notify?x=1",
  "initiator": {
    "tenantId": "tenant-1",
    "clientId": "client-1",
    "clientRequestId": "req-1",
    "correlationRequestId": "corr-1"
  },
  "apiVersion": "2025-01-01"
}"#;

/// A resource body with every defaulted field absent, as older rows may be: no `jobs`,
/// `duplicateJobs`, `jobSeq`, `schedule` or `generation`, an empty spec, system data with only
/// its times, and a job with only its required fields (no `launchSentAt`, `launchSends`, …).
const MINIMAL_RESOURCE_V1: &str = r#"{
  "id": {"subscription": "s", "resourceGroup": "rg", "namespace": "ns", "typeName": "t", "name": "n"},
  "kind": "Thing",
  "spec": {},
  "systemData": {"createdAt": 5, "lastModifiedAt": 6},
  "provisioningState": "Accepted",
  "desiredConfigVersion": "",
  "lastOperationId": "00000000-0000-4000-8000-000000000001"
}"#;

const MINIMAL_RESOURCE_WITH_JOB_V1: &str = r#"{
  "id": {"subscription": "s", "resourceGroup": "rg", "namespace": "ns", "typeName": "t", "name": "n"},
  "kind": "Thing",
  "spec": {"properties": {"a": 1}},
  "systemData": {"createdAt": 5, "lastModifiedAt": 6},
  "provisioningState": "Provisioning",
  "desiredConfigVersion": "08f44b07b5901a25",
  "jobs": [{"jobID": "", "type": "provision", "state": "Launching", "timestamp": 7}],
  "lastOperationId": "00000000-0000-4000-8000-000000000001",
  "jobSeq": 1
}"#;

/// An operation body without `error`, `percentComplete`, `notificationUri` and `initiator`.
const MINIMAL_OPERATION_V1: &str = r#"{
  "id": "00000000-0000-4000-8000-000000000001",
  "subscription": "s",
  "resourceKey": "/subscriptions/s/resourcegroups/rg/providers/ns/t/n",
  "resourceId": "/subscriptions/s/resourceGroups/rg/providers/ns/t/n",
  "request": "Create",
  "status": "Accepted",
  "startTime": 1,
  "lastTransitionTime": 2,
  "apiVersion": "2025-01-01"
}"#;

fn minimal_record() -> ResourceRecord {
    ResourceRecord {
        id: ArmId {
            subscription: "s".into(),
            resource_group: "rg".into(),
            namespace: "ns".into(),
            type_name: "t".into(),
            parent_names: Vec::new(),
            name: "n".into(),
        },
        kind: "Thing".into(),
        spec: Spec { location: None, tags: BTreeMap::new(), properties: serde_json::Value::Null },
        system_data: SystemData {
            created_by: String::new(),
            created_by_type: String::new(),
            created_at: Timestamp(5),
            last_modified_by: String::new(),
            last_modified_by_type: String::new(),
            last_modified_at: Timestamp(6),
        },
        provisioning_state: ProvisioningState::Accepted,
        desired_config_version: ConfigVersion::legacy(),
        jobs: Vec::new(),
        duplicate_jobs: Vec::new(),
        active_operation_id: None,
        last_operation_id: op_id(1),
        job_seq: 0,
        deletion: None,
        convergence_stopped_for: None,
        job_context: None,
        references: Vec::new(),
        outputs: serde_json::Map::new(),
        last_error: None,
        schedule: Schedule::default(),
        lease: None,
        generation: 0,
    }
}

fn minimal_record_with_job() -> ResourceRecord {
    ResourceRecord {
        spec: Spec { properties: json!({"a": 1}), ..Spec::default() },
        provisioning_state: ProvisioningState::Provisioning,
        desired_config_version: ConfigVersion::new("08f44b07b5901a25"),
        jobs: vec![Job::new("", JobType::Provision, JobState::Launching, Timestamp(7))],
        job_seq: 1,
        ..minimal_record()
    }
}

fn minimal_operation() -> Operation {
    Operation {
        id: op_id(1),
        subscription: "s".into(),
        resource_key: ResourceKey("/subscriptions/s/resourcegroups/rg/providers/ns/t/n".into()),
        resource_id: "/subscriptions/s/resourceGroups/rg/providers/ns/t/n".into(),
        request: OperationRequest::Create,
        status: ProvisioningState::Accepted,
        error: None,
        start_time: Timestamp(1),
        last_transition_time: Timestamp(2),
        percent_complete: None,
        waiting_on: None,
        child_operations: Vec::new(),
        action: None,
        note: None,
        notification_uri: None,
        initiator: Initiator::default(),
        api_version: "2025-01-01".into(),
    }
}

fn value(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("JSON")
}

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

/// The documents agree with the domain's own serde, byte for byte on encode and value for
/// value on decode. This check may be dropped when the domain drops its serde derives; the
/// frozen bodies above stay the definition of the format.
#[test]
fn documents_agree_with_the_domain_serde() {
    for rec in [full_record(), minimal_record(), minimal_record_with_job()] {
        let stored = as_stored(rec.clone());
        assert_eq!(encode_resource(&rec).unwrap(), serde_json::to_string(&stored).unwrap());
    }
    for op in [full_operation(), minimal_operation()] {
        assert_eq!(encode_operation(&op).unwrap(), serde_json::to_string(&op).unwrap());
    }
    for body in [FULL_RESOURCE_V1, MINIMAL_RESOURCE_V1, MINIMAL_RESOURCE_WITH_JOB_V1] {
        let domain: ResourceRecord = serde_json::from_str(body).unwrap();
        assert_eq!(decode_resource(body), Ok(as_stored(domain)));
    }
    for body in [FULL_OPERATION_V1, MINIMAL_OPERATION_V1] {
        let domain: Operation = serde_json::from_str(body).unwrap();
        assert_eq!(decode_operation(body), Ok(domain));
    }
    for s in ProvisioningState::ALL {
        let doc = serde_json::to_value(super::operation::ProvisioningStateDocument::from(s)).unwrap();
        assert_eq!(doc, serde_json::to_value(s).unwrap());
    }
}

#[test]
fn enums_are_stored_as_these_strings() {
    use super::job::{JobStateDocument, JobTypeDocument};
    use super::operation::{OperationRequestDocument, ProvisioningStateDocument};
    fn text<T: serde::Serialize>(v: T) -> String {
        serde_json::to_value(v).unwrap().as_str().unwrap().to_string()
    }
    fn back<T: serde::de::DeserializeOwned>(s: &str) -> T {
        serde_json::from_value(json!(s)).unwrap()
    }
    use ProvisioningState as P;
    for (s, want) in [
        (P::Accepted, "Accepted"),
        (P::Provisioning, "Provisioning"),
        (P::Updating, "Updating"),
        (P::Deleting, "Deleting"),
        (P::Canceling, "Canceling"),
        (P::Succeeded, "Succeeded"),
        (P::Failed, "Failed"),
        (P::Canceled, "Canceled"),
    ] {
        assert_eq!(text(ProvisioningStateDocument::from(s)), want);
        assert_eq!(P::from(back::<ProvisioningStateDocument>(want)), s);
    }
    use JobState as J;
    for (s, want) in [
        (J::Launching, "Launching"),
        (J::Pending, "Pending"),
        (J::Waiting, "Waiting"),
        (J::Running, "Running"),
        (J::Unknown, "Unknown"),
        (J::Succeeded, "Succeeded"),
        (J::Failed, "Failed"),
        (J::Canceled, "Canceled"),
    ] {
        assert_eq!(text(JobStateDocument::from(s)), want);
        assert_eq!(J::from(back::<JobStateDocument>(want)), s);
    }
    for (t, want) in [
        (JobType::Provision, "provision"),
        (JobType::Deprovision, "deprovision"),
        (JobType::Action, "action"),
        (JobType::Preflight, "preflight"),
    ] {
        assert_eq!(text(JobTypeDocument::from(t)), want);
        assert_eq!(JobType::from(back::<JobTypeDocument>(want)), t);
    }
    use OperationRequest as R;
    for (r, want) in [(R::Create, "Create"), (R::Update, "Update"), (R::Delete, "Delete"), (R::Action, "Action")] {
        assert_eq!(text(OperationRequestDocument::from(r)), want);
        assert_eq!(R::from(back::<OperationRequestDocument>(want)), r);
    }
    // Spelled exactly: no case folding, no alternative spelling.
    assert!(serde_json::from_value::<ProvisioningStateDocument>(json!("succeeded")).is_err());
    assert!(serde_json::from_value::<ProvisioningStateDocument>(json!("Cancelled")).is_err());
}

/// `body` with a top-level field added.
fn with(body: &str, key: &str, v: serde_json::Value) -> String {
    let mut doc = value(body);
    doc[key] = v;
    doc.to_string()
}

#[test]
fn versions() {
    assert!(!encode_resource(&full_record()).unwrap().contains(r#""v":"#), "version 1 is written without a marker");
    assert!(!encode_operation(&full_operation()).unwrap().contains(r#""v":"#));
    assert_eq!(decode_resource(&with(MINIMAL_RESOURCE_V1, "v", json!(1))), Ok(minimal_record()));
    assert_eq!(decode_operation(&with(MINIMAL_OPERATION_V1, "v", json!(1))), Ok(minimal_operation()));
    for v in [0, 2] {
        let err = decode_resource(&with(MINIMAL_RESOURCE_V1, "v", json!(v))).unwrap_err().to_string();
        assert!(err.contains(&format!("document version {v} ")), "{err}");
        let err = decode_operation(&with(MINIMAL_OPERATION_V1, "v", json!(v))).unwrap_err().to_string();
        assert!(err.contains(&format!("document version {v} ")), "{err}");
    }
    // A newer document of another shape is reported by its version, not by the shape.
    let err = decode_resource(r#"{"v":2,"resource":{}}"#).unwrap_err().to_string();
    assert!(err.contains("document version 2 "), "{err}");
    let err = decode_operation(r#"{"v":2,"id":7}"#).unwrap_err().to_string();
    assert!(err.contains("document version 2 "), "{err}");
    // A broken version 1 document is reported by what is wrong with it.
    let err = decode_operation(r#"{"id":"00000000-0000-4000-8000-000000000001"}"#).unwrap_err().to_string();
    assert!(err.contains("missing field `subscription`"), "{err}");
}

#[test]
fn bodies_that_today_are_corrupt_stay_corrupt() {
    for body in ["{not json", "[]", "null", r#"{"kind":"Thing"}"#] {
        assert!(decode_resource(body).is_err(), "{body}");
        assert!(decode_operation(body).is_err(), "{body}");
    }
    // Lease and schedule in a body are read as strictly as before, then dropped.
    let lease = json!({"owner": "x", "until": 1, "epoch": 2});
    assert_eq!(decode_resource(&with(MINIMAL_RESOURCE_V1, "lease", lease)), Ok(minimal_record()));
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "lease", json!({"owner": "x"}))).is_err());
    let schedule = json!({"nextDue": 5, "intent": true});
    assert_eq!(decode_resource(&with(MINIMAL_RESOURCE_V1, "schedule", schedule)), Ok(minimal_record()));
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "schedule", json!({"nextDue": 5}))).is_err());
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "jobs", json!(null))).is_err());
    assert!(decode_operation(&with(MINIMAL_OPERATION_V1, "percentComplete", json!(256))).is_err());
}

#[test]
fn operation_ids_must_be_canonical() {
    let upper = with(MINIMAL_OPERATION_V1, "id", json!("00000000-0000-4000-8000-00000000000A"));
    let err = decode_operation(&upper).unwrap_err().to_string();
    assert!(err.contains("not an operation id"), "{err}");
    assert!(decode_operation(&with(MINIMAL_OPERATION_V1, "id", json!("op-1"))).is_err());
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "lastOperationId", json!("x"))).is_err());
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "activeOperationId", json!("x"))).is_err());
    let job = json!([{"jobID": "1", "type": "provision", "state": "Running", "timestamp": 7, "operationId": "x"}]);
    let err = decode_resource(&with(MINIMAL_RESOURCE_V1, "jobs", job)).unwrap_err().to_string();
    assert!(err.contains(r#"job "1": operationId"#), "{err}");
}
