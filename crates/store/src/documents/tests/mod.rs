//! The document golden tests, by seam: the records and operations they encode (here), their
//! frozen version 1 bodies (`frozen`), encoding and decoding them (`golden`), and the format's
//! rules — enum spellings, versions, what stays corrupt (`rules`).

mod frozen;
mod golden;
mod rules;

use std::collections::BTreeMap;

use serde_json::json;
use slipway_domain::config_version::ConfigVersion;
use slipway_domain::ids::{ArmId, OperationId, ResourceKey};
use slipway_domain::job::{Job, JobState, JobType, Stop};
use slipway_domain::operation::{CloudError, Initiator, Operation, OperationRequest, Rerun};
use slipway_domain::resource::{Deletion, Lease, ResourceRecord, Schedule, Spec, SystemData};
use slipway_domain::state::ProvisioningState;
use slipway_domain::time::Timestamp;

use super::{
    OperationDocument, ResourceDocument, decode_operation, decode_resource, encode_operation, encode_resource,
};
use frozen::*;

fn op_id(n: u32) -> OperationId {
    OperationId::parse(&format!("00000000-0000-4000-8000-{n:012}")).expect("operation id")
}

/// A job with every field set.
fn full_job() -> Job {
    Job {
        job_id: Some("17".into()),
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
        stop: Some(Stop::Kill { asked_at: Some(Timestamp(1_764_449_700_000)) }),
        launch_attempts: 2,
        absent_confirmed: true,
        launch_sent_at: Some(Timestamp(1_764_449_626_000)),
        launch_sends: 3,
        unique_confirmed: true,
        action: "restart".into(),
        ended_at: Some(Timestamp(1_764_449_690_000)),
        rerun: Some(Rerun::Retry),
        tasks_started: 5,
        current_task: "Record the resource".into(),
        expected_tasks: Some(7),
    }
}

/// A record with every optional field set (lease and schedule too: they are not in the body).
fn full_record() -> ResourceRecord {
    let mut launching = Job::new(JobType::Deprovision, JobState::Launching, Timestamp(1_764_449_800_000));
    launching.idempotency_key = "slipway-00000000-0000-4000-8000-000000000002-4".into();
    let mut duplicate = full_job();
    duplicate.job_id = Some("18".into());
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
        drift: None,
        last_error: Some(full_error()),
        schedule: Schedule { next_due: Some(Timestamp(1_764_449_900_000)), intent: true, drift_due: None },
        lease: Some(Lease { owner: "node-a".into(), until: Timestamp(1_764_449_930_000), epoch: 9 }),
        generation: 7,
        usage: Default::default(),
        findings: Vec::new(),
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
        resource_key: ResourceKey::new(
            "/subscriptions/sub-1/resourcegroups/my.rg/providers/slipway.example/virtualnetworks/vnet1",
        ),
        resource_id: "/subscriptions/Sub-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1".into(),
        request: OperationRequest::Delete,
        status: ProvisioningState::Failed,
        error: Some(full_error()),
        start_time: Timestamp(1_764_449_790_000),
        last_transition_time: Timestamp(1_764_449_990_000),
        percent_complete: Some(40),
        current_task: Some("Record the resource".into()),
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
        rerun: Some(Rerun::Retry),
        what_if: None,
        approval: None,
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
        drift: None,
        last_error: None,
        schedule: Schedule::default(),
        lease: None,
        generation: 0,
        usage: Default::default(),
        findings: Vec::new(),
    }
}

fn minimal_record_with_job() -> ResourceRecord {
    ResourceRecord {
        spec: Spec { properties: json!({"a": 1}), ..Spec::default() },
        provisioning_state: ProvisioningState::Provisioning,
        desired_config_version: ConfigVersion::new("08f44b07b5901a25"),
        jobs: vec![Job::new(JobType::Provision, JobState::Launching, Timestamp(7))],
        job_seq: 1,
        ..minimal_record()
    }
}

fn minimal_operation() -> Operation {
    Operation {
        id: op_id(1),
        subscription: "s".into(),
        resource_key: ResourceKey::new("/subscriptions/s/resourcegroups/rg/providers/ns/t/n"),
        resource_id: "/subscriptions/s/resourceGroups/rg/providers/ns/t/n".into(),
        request: OperationRequest::Create,
        status: ProvisioningState::Accepted,
        error: None,
        start_time: Timestamp(1),
        last_transition_time: Timestamp(2),
        percent_complete: None,
        current_task: None,
        waiting_on: None,
        child_operations: Vec::new(),
        action: None,
        rerun: None,
        what_if: None,
        approval: None,
        note: None,
        notification_uri: None,
        initiator: Initiator::default(),
        api_version: "2025-01-01".into(),
    }
}

fn value(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("JSON")
}

/// `body` with a top-level field added.
fn with(body: &str, key: &str, v: serde_json::Value) -> String {
    let mut doc = value(body);
    doc[key] = v;
    doc.to_string()
}
