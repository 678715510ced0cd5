//! The schemas every document has, whatever types are configured: the ARM shapes Slipway
//! answers with (`wire` builds them), from the error body and system data to jobs, operation
//! statuses, subscriptions, role assignments and the provider and operations lists.

use serde_json::{Map, Value, json};
use slipway_domain::ProvisioningState;
use slipway_domain::access::{ROLE_DEFINITIONS, Role};
use slipway_domain::subscription::SubscriptionState;

use super::schemas::{guid, schema_ref};

/// A role's definition id or bare name, for the roles `which` keeps.
fn role_definition_pattern(which: impl Fn(Role) -> bool) -> String {
    let names: Vec<&str> = Role::ALL.into_iter().filter(|r| which(*r)).map(Role::name).collect();
    format!("^({})?({})$", regex::escape(ROLE_DEFINITIONS), names.join("|"))
}

/// A role assignment below the platform scope: any role but Admin.
fn scoped_assignment() -> Value {
    json!({
        "type": "object",
        "required": ["properties"],
        "properties": {
            "properties": {
                "type": "object",
                "required": ["roleDefinitionId", "principalId"],
                "properties": {
                    "roleDefinitionId": {
                        "type": "string",
                        "description": "A role name or `/providers/Slipway.Authorization/roleDefinitions/{role}`; \
                                        Admin only at the platform scope `/`.",
                        "pattern": role_definition_pattern(|r| r != Role::Admin),
                    },
                    "principalId": {"type": "string", "minLength": 1, "pattern": r"\S"},
                    "principalType": {"enum": ["User", "ServicePrincipal", "Application", "Group"]},
                    "tenantId": {"type": "string"},
                },
            },
        },
    })
}

/// Schemas every document has.
pub(super) fn common(out: &mut Map<String, Value>) {
    let date_time = json!({"type": "string", "format": "date-time"});
    let states: Vec<&str> = ProvisioningState::ALL.iter().map(|s| s.as_str()).collect();
    let subscription_states: Vec<&str> = SubscriptionState::ALL.iter().map(|s| s.as_str()).collect();
    let job_types: Vec<&str> = slipway_domain::JobType::ALL.iter().map(|t| t.as_str()).collect();
    let reruns: Vec<&str> = slipway_domain::operation::Rerun::ALL.iter().map(|r| r.as_str()).collect();
    let entries = [
        (
            "ErrorDetail",
            json!({
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "minLength": 1},
                    "message": {"type": "string"},
                    "target": {"type": "string"},
                    "details": {"type": "array", "items": schema_ref("ErrorDetail")},
                    "additionalInfo": {
                        "type": "array",
                        "description": "Which guardrail refused, as data: `QuotaExceeded`, `ScopeLocked` or `PolicyViolation`.",
                        "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}, "info": {"type": "object"}}},
                    },
                },
            }),
        ),
        (
            "ErrorResponse",
            json!({
                "type": "object",
                "description": "ARM's error body; `x-ms-error-code` repeats the code.",
                "required": ["error"],
                "properties": {"error": schema_ref("ErrorDetail")},
            }),
        ),
        ("ProvisioningState", json!({"type": "string", "enum": states})),
        (
            "SystemData",
            json!({
                "type": "object",
                "required": ["createdBy", "createdByType", "createdAt", "lastModifiedBy", "lastModifiedByType",
                             "lastModifiedAt"],
                "properties": {
                    "createdBy": {"type": "string"},
                    "createdByType": {"type": "string"},
                    "createdAt": date_time,
                    "lastModifiedBy": {"type": "string"},
                    "lastModifiedByType": {"type": "string"},
                    "lastModifiedAt": date_time,
                },
            }),
        ),
        (
            "Job",
            json!({
                "type": "object",
                "description": "One job of a resource's history.",
                "required": ["type", "state", "jobId", "provider", "template", "idempotencyKey", "startTime"],
                "properties": {
                    "type": {"enum": job_types},
                    "state": {"enum": ["Launching", "Pending", "Waiting", "Running", "Unknown", "Succeeded", "Failed", "Canceled"]},
                    "jobId": {"type": "string", "description": "The provider's job id (empty while launching)."},
                    "provider": {"type": "string"},
                    "template": {"type": "string", "description": "The playbook or template that ran."},
                    "idempotencyKey": {"type": "string"},
                    "action": {"type": "string"},
                    "rerun": {"enum": reruns, "description": "Why the job ran the unchanged spec again: `retry`, asked for with `POST {id}/retry`; `drift`, putting drift right."},
                    "operationId": {"type": "string"},
                    "configVersion": {"type": "string"},
                    "message": {"type": "string"},
                    "errorDetails": {"type": "string"},
                    "startTime": date_time,
                    "endTime": date_time,
                    "launchAttempts": {"type": "integer"},
                    "tasksStarted": {"type": "integer", "description": "Tasks the job started, as last read; kept once it ended, so the next job of its kind knows how many to expect."},
                    "currentTask": {"type": "string", "description": "While it runs: the task it started last."},
                },
            }),
        ),
        (
            "JobHistory",
            json!({
                "type": "object",
                "required": ["value", "provisioningState"],
                "properties": {
                    "value": {"type": "array", "items": schema_ref("Job"), "description": "Newest first."},
                    "duplicateJobs": {"type": "array", "items": schema_ref("Job")},
                    "provisioningState": schema_ref("ProvisioningState"),
                    "failedAttempts": {"type": "integer", "description": "A Failed resource: its spec's failed attempts in a row."},
                    "nextRetryTime": date_time,
                },
            }),
        ),
        (
            "OperationStatus",
            json!({
                "type": "object",
                "description": "An asynchronous operation (also the async-notification body).",
                "required": ["id", "name", "status", "startTime"],
                "properties": {
                    "id": {"type": "string"},
                    "name": {"type": "string", "format": "uuid"},
                    "status": schema_ref("ProvisioningState"),
                    "startTime": date_time,
                    "endTime": date_time,
                    "percentComplete": {"type": "number", "minimum": 0, "maximum": 100, "description": "While the job runs: the share of its tasks done, never lower than before and at most 99; 100 once succeeded. Absent when no total is known."},
                    "error": schema_ref("ErrorDetail"),
                    "properties": {
                        "type": "object",
                        "description": "Slipway extensions.",
                        "properties": {
                            "waitingOn": {"type": "string", "description": "The resource (a parent) the operation's job waits for."},
                            "action": {"type": "string", "description": "A POST action's name."},
                            "currentTask": {"type": "string", "description": "While the job runs: the name of the task it started last."},
                            "rerun": {"enum": reruns, "description": "An update that runs the unchanged spec again, and why (`retry`: `POST {id}/retry`; `drift`: drift put right)."},
                            "message": {"type": "string", "description": "How the operation ended, when a client should know (a forced delete)."},
                            "changes": {"type": "array", "items": schema_ref("WhatIfChange"), "description": "A what-if that succeeded: what would change."},
                            "approval": schema_ref("Approval"),
                            "childOperations": {
                                "type": "array",
                                "description": "A cascading delete's children and their own delete operations.",
                                "items": {
                                    "type": "object",
                                    "required": ["resourceId", "id"],
                                    "properties": {"resourceId": {"type": "string"}, "id": {"type": "string"}},
                                },
                            },
                        },
                    },
                },
            }),
        ),
        (
            "Approval",
            json!({
                "type": "object",
                "description": "A request a `requireApproval` policy held (a Slipway extension): where it stands, who decides, and what it would change.",
                "required": ["state", "resourceId", "request", "policyAssignmentId", "approverRole", "requestedBy", "expiresAt", "whatIf"],
                "properties": {
                    "state": {"enum": ["Pending", "Approved", "Denied", "TimedOut", "Canceled"]},
                    "resourceId": {"type": "string"},
                    "request": {"enum": ["Create", "Update"]},
                    "policyAssignmentId": {"type": "string"},
                    "policyDefinitionId": {"type": "string"},
                    "reason": {"type": "string", "description": "The policy's tests that held, in words."},
                    "approverRole": {"enum": ["Reader", "Contributor", "Owner", "Admin"], "description": "The least role at the resource that may decide."},
                    "allowSelfApproval": {"type": "boolean"},
                    "onTimeout": {"enum": ["Canceled", "Failed"]},
                    "requestedBy": {"type": "string"},
                    "expiresAt": date_time,
                    "decision": {
                        "type": "object",
                        "required": ["verdict", "by", "at"],
                        "properties": {
                            "verdict": {"enum": ["Approved", "Denied"]},
                            "by": {"type": "string"},
                            "byRule": {"type": "boolean", "description": "Approved at once by the policy's `autoApproveRole`."},
                            "at": date_time,
                            "comment": {"type": "string"},
                        },
                    },
                    "whatIf": {
                        "type": "object",
                        "description": "What the request changes, as a what-if's result shows it, with the guardrails' verdicts (and the quota it takes).",
                        "properties": {"changes": {"type": "array", "items": schema_ref("WhatIfChange")}, "guardrails": {"type": "array", "items": {"type": "object"}}},
                    },
                },
            }),
        ),
        (
            "Subscription",
            json!({
                "type": "object",
                "description": "ARM's subscription shape (`displayName`, `tenantId`, `state`), with the registration's `properties` as ARM hands them to a resource provider.",
                "required": ["id", "subscriptionId", "displayName", "tenantId", "authorizationSource", "state", "registrationDate", "properties"],
                "properties": {
                    "id": {"type": "string"},
                    "subscriptionId": guid(),
                    "displayName": {"type": "string"},
                    "tenantId": {"type": "string"},
                    "authorizationSource": {"const": "RoleBased"},
                    "state": {"enum": subscription_states},
                    "registrationDate": date_time,
                    "properties": {
                        "type": "object",
                        "required": ["tenantId", "displayName", "attributes"],
                        "properties": {
                            "tenantId": {"type": "string"},
                            "displayName": {"type": "string"},
                            "attributes": {"type": "object"},
                        },
                    },
                },
            }),
        ),
        (
            "SubscriptionPut",
            json!({
                "type": "object",
                "description": "ARM's subscription lifecycle notification. `Deleted` deprovisions every resource of \
                                the subscription. A change of state may leave out `tenantId` (the registered one \
                                stays); a new subscription needs it.",
                "required": ["state", "properties"],
                "properties": {
                    "state": {"enum": subscription_states},
                    "properties": {
                        "type": "object",
                        "required": ["tenantId"],
                        "properties": {
                            "tenantId": {"type": "string", "minLength": 1},
                            "displayName": {"type": "string"},
                            "attributes": {"type": "object"},
                        },
                    },
                },
            }),
        ),
        (
            "SubscriptionList",
            json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "array", "items": schema_ref("Subscription")}}}),
        ),
        (
            "RoleAssignment",
            json!({
                "type": "object",
                "required": ["id", "name", "type", "properties"],
                "properties": {
                    "id": {"type": "string"},
                    "name": {"type": "string"},
                    "type": {"const": "Slipway.Authorization/roleAssignments"},
                    "properties": {
                        "type": "object",
                        "required": ["roleDefinitionId", "roleDefinitionName", "principalId", "principalType", "scope"],
                        "properties": {
                            "roleDefinitionId": {"type": "string"},
                            "roleDefinitionName": {"enum": Role::ALL.map(Role::name)},
                            "principalId": {"type": "string"},
                            "principalType": {"enum": ["User", "Group"]},
                            "scope": {"type": "string"},
                            "tenantId": {"type": "string"},
                        },
                    },
                },
            }),
        ),
        (
            "RoleAssignmentPut",
            json!({
                "type": "object",
                "required": ["properties"],
                "properties": {
                    "properties": {
                        "type": "object",
                        "required": ["roleDefinitionId", "principalId"],
                        "properties": {
                            "roleDefinitionId": {
                                "type": "string",
                                "description": "A role name or `/providers/Slipway.Authorization/roleDefinitions/{role}`; \
                                                Admin only at the platform scope `/`.",
                                "pattern": role_definition_pattern(|_| true),
                            },
                            "principalId": {"type": "string", "minLength": 1, "pattern": r"\S"},
                            "principalType": {"enum": ["User", "ServicePrincipal", "Application", "Group"]},
                            "tenantId": {"type": "string"},
                        },
                    },
                },
            }),
        ),
        ("RoleAssignmentPutScoped", scoped_assignment()),
        (
            "RoleAssignmentList",
            json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "array", "items": schema_ref("RoleAssignment")}}}),
        ),
        (
            "PermissionList",
            json!({
                "type": "object",
                "description": "ARM's permissions list: the actions the caller may take at the scope.",
                "required": ["value"],
                "properties": {"value": {"type": "array", "items": {
                    "type": "object",
                    "required": ["actions", "notActions"],
                    "properties": {
                        "actions": {"type": "array", "items": {"type": "string"}},
                        "notActions": {"type": "array", "items": {"type": "string"}},
                    },
                }}},
            }),
        ),
        (
            "Provider",
            json!({
                "type": "object",
                "description": "ARM's resource provider registration.",
                "required": ["id", "namespace", "registrationState", "resourceTypes"],
                "properties": {
                    "id": {"type": "string"},
                    "namespace": {"type": "string"},
                    "registrationState": {"const": "Registered"},
                    "resourceTypes": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["resourceType", "locations", "apiVersions"],
                            "properties": {
                                "resourceType": {"type": "string"},
                                "locations": {"type": "array", "items": {"type": "string"}},
                                "apiVersions": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                    },
                },
            }),
        ),
        (
            "ProviderList",
            json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "array", "items": schema_ref("Provider")}}}),
        ),
        (
            "OperationList",
            json!({
                "type": "object",
                "description": "ARM's operations list: every action a role can grant.",
                "required": ["value"],
                "properties": {
                    "value": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name", "display", "isDataAction"],
                            "properties": {
                                "name": {"type": "string"},
                                "isDataAction": {"type": "boolean"},
                                "display": {
                                    "type": "object",
                                    "required": ["provider", "resource", "operation", "description"],
                                    "properties": {
                                        "provider": {"type": "string"},
                                        "resource": {"type": "string"},
                                        "operation": {"type": "string"},
                                        "description": {"type": "string"},
                                    },
                                },
                            },
                        },
                    },
                },
            }),
        ),
    ];
    for (name, schema) in entries {
        out.insert(name.into(), schema);
    }
}
