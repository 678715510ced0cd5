//! The what-if endpoint's operation (`POST {id}/whatIf`) and ARM's what-if shapes it answers
//! with (docs/arm-contract.md#what-if).

use serde_json::{Map, Value, json};
use slipway_types::ResourceType;

use super::operation::{Op, Setting, lro};
use super::responses::{async_headers, json_answer, plain, request_id};
use super::schemas::schema_ref;

/// `POST {id}/whatIf` of a type: `params` its path and api-version, `put_body` its PUT's body.
pub(super) fn operation(
    id: String,
    ty: &ResourceType,
    tag: &str,
    mut params: Vec<Value>,
    put_body: Value,
    setting: &Setting,
) -> Value {
    params.push(json!({"name": "operation", "in": "query", "required": false,
        "description": "The request asked about: `put` (the default; the body is the PUT's) or `delete` (no body).",
        "schema": {"enum": ["put", "delete"]}}));
    let [lro_flag, lro_options] = lro("azure-async-operation");
    let summary = format!(
        "What a PUT (or DELETE) of a {} would change, without changing it: the spec's delta and the tasks its job, \
         run in check mode, would change.",
        ty.kind
    );
    Op::new(id, summary, tag, params)
        .optional_body(put_body)
        .answer(
            200,
            json_answer(
                "The resource does not exist yet: the create, at once.",
                schema_ref("WhatIfOperationResult"),
                request_id(),
            ),
        )
        .answer(202, {
            let mut r =
                plain("Accepted; follow `Azure-AsyncOperation`. `Location` answers with the `WhatIfOperationResult`.");
            r["headers"] = async_headers(true);
            r
        })
        .errors(&[400, 403, 404, 408, 409, 413, 415, 500, 503])
        .with(lro_flag.0, json!(true))
        .with(lro_options.0, json!({"final-state-via": "location"}))
        .build(setting)
}

/// `WhatIfChange`, `WhatIfOperationResult`, and a resource's `Drift`.
pub(super) fn schemas(out: &mut Map<String, Value>) {
    let entries = [
        (
            "ChangedTask",
            json!({
                "type": "object",
                "description": "A task a check-mode job reported as changed, on its host.",
                "required": ["task", "host"],
                "properties": {"task": {"type": "string"}, "host": {"type": "string"}, "diff": {"description": "Ansible's diff, as the task reported it."}},
            }),
        ),
        (
            "Drift",
            json!({
                "type": "object",
                "readOnly": true,
                "description": "What the resource's last drift check found: its create job run in check mode under its own spec (a Slipway extension).",
                "required": ["state", "lastCheckedAt"],
                "properties": {
                    "state": {"enum": ["InSync", "Drifted", "Unknown"]},
                    "lastCheckedAt": {"type": "string", "format": "date-time"},
                    "changedTasks": {"type": "array", "items": schema_ref("ChangedTask")},
                    "message": {"type": "string", "description": "Unknown: why the check could not tell."},
                    "remediationOperationId": {"type": "string", "description": "The update operation started to put the drift right (`drift_remediation = \"auto\"`)."},
                },
            }),
        ),
        (
            "WhatIfChange",
            json!({
                "type": "object",
                "description": "ARM's `WhatIfChange` for the one resource, with Slipway's `automation`: what the type's job, run in check mode with diff, would change.",
                "required": ["resourceId", "changeType", "delta", "automation"],
                "properties": {
                    "resourceId": {"type": "string"},
                    "changeType": {"enum": ["Create", "Delete", "Modify", "NoChange"]},
                    "before": {"type": "object", "description": "`location`, `tags`, `properties` as they are (secrets left out)."},
                    "after": {"type": "object", "description": "As proposed (secrets left out)."},
                    "delta": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["path", "propertyChangeType"],
                            "properties": {
                                "path": {"type": "string"},
                                "propertyChangeType": {"enum": ["Create", "Delete", "Modify"]},
                                "before": {},
                                "after": {},
                            },
                        },
                    },
                    "automation": {
                        "type": "object",
                        "required": ["job"],
                        "properties": {
                            "job": {"enum": ["create", "delete"], "description": "The job run in check mode."},
                            "changedTasks": {"type": "array", "items": schema_ref("ChangedTask")},
                            "unsupportedReason": {"type": "string", "description": "Why no job ran (the resource does not exist yet)."},
                        },
                    },
                },
            }),
        ),
        (
            "WhatIfOperationResult",
            json!({
                "type": "object",
                "required": ["status", "properties"],
                "properties": {
                    "status": schema_ref("ProvisioningState"),
                    "properties": {
                        "type": "object",
                        "required": ["changes"],
                        "properties": {"changes": {"type": "array", "items": schema_ref("WhatIfChange")}},
                    },
                    "error": schema_ref("ErrorDetail"),
                },
            }),
        ),
    ];
    for (name, schema) in entries {
        out.insert(name.to_string(), schema);
    }
}
