//! The frozen version 1 bodies: what Slipway wrote before the store had document types, and
//! older rows with the defaulted fields absent.

/// Today's body of [`full_record`], frozen: printed once by the domain's own serde (before the
/// store had document types), checked by eye, pasted. Pretty-printed so the field order is
/// pinned too: compact and pretty output come from the same `Serialize` and differ only in
/// whitespace.
pub(super) const FULL_RESOURCE_V1: &str = r#"{
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
      "killRequested": true,
      "rerun": "retry",
      "tasksStarted": 5,
      "currentTask": "Record the resource",
      "expectedTasks": 7
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
      "killRequested": true,
      "rerun": "retry",
      "tasksStarted": 5,
      "currentTask": "Record the resource",
      "expectedTasks": 7
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
pub(super) const FULL_OPERATION_V1: &str = r#"{
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
  "currentTask": "Record the resource",
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
  "rerun": "retry",
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
pub(super) const MINIMAL_RESOURCE_V1: &str = r#"{
  "id": {"subscription": "s", "resourceGroup": "rg", "namespace": "ns", "typeName": "t", "name": "n"},
  "kind": "Thing",
  "spec": {},
  "systemData": {"createdAt": 5, "lastModifiedAt": 6},
  "provisioningState": "Accepted",
  "desiredConfigVersion": "",
  "lastOperationId": "00000000-0000-4000-8000-000000000001"
}"#;

pub(super) const MINIMAL_RESOURCE_WITH_JOB_V1: &str = r#"{
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
pub(super) const MINIMAL_OPERATION_V1: &str = r#"{
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
