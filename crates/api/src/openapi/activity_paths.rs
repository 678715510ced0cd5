//! The activity log (`handlers::activity_log`): a subscription's, and the platform's own, in
//! the shape of Azure's Activity Log, and their schemas (`EventData`, as `activity::event_data`
//! writes it).

use serde_json::{Map, Value, json};

use super::operation::{Op, Setting, subscription_id};
use super::responses::{json_answer, request_id};
use super::schemas::schema_ref;

const TAG: &str = "Microsoft.Insights/eventtypes";

fn params() -> Vec<Value> {
    vec![
        json!({
            "name": "api-version", "in": "query", "required": true,
            "description": "Any ARM api-version (Azure's Activity Log clients send `2015-04-01`).",
            "schema": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$"},
        }),
        json!({
            "name": "$filter", "in": "query", "required": false,
            "description": "Clauses joined by `and`: `eventTimestamp ge|gt|le|lt '<RFC 3339>'`, `resourceGroupName eq '…'`, `resourceUri eq '<id>'` (the resource and what is under it), `correlationId eq '…'`, `caller eq '…'`, `status eq 'Accepted|Succeeded|Failed'`; `eventChannels` is ignored. Anything else: `400 InvalidFilter`.",
            "schema": {"type": "string", "maxLength": 4096},
        }),
        json!({"name": "$top", "in": "query", "required": false, "description": "Page size, 1 to 1000 (default 200).", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}),
        json!({"name": "$skipToken", "in": "query", "required": false, "description": "Where the next page starts (from `nextLink`).", "schema": {"type": "string", "maxLength": 20}}),
    ]
}

pub(super) fn activity_paths(setting: &Setting, out: &mut Map<String, Value>) {
    let page = || {
        json_answer(
            "Entries, newest first; follow `nextLink` while there is one.",
            schema_ref("EventDataCollection"),
            request_id(),
        )
    };
    let mut at_subscription = vec![subscription_id()];
    at_subscription.extend(params());
    let subscription = Op::new(
        "ActivityLogs_List".into(),
        "The subscription's activity log: every request that changed something or was refused, read by whoever may read the scope the filter narrows it to.",
        TAG,
        at_subscription,
    )
    .answer(200, page())
    .errors(&[400, 403, 404, 500, 503])
    .with("x-ms-pageable", json!({"nextLinkName": "nextLink"}))
    .build(setting);
    out.insert(
        "/subscriptions/{subscriptionId}/providers/Microsoft.Insights/eventtypes/management/values".into(),
        json!({"get": subscription}),
    );
    let platform = Op::new(
        "PlatformActivityLogs_List".into(),
        "The platform's own activity (API tokens): the Admin's.",
        TAG,
        params(),
    )
    .answer(200, page())
    .errors(&[400, 403, 500, 503])
    .with("x-ms-pageable", json!({"nextLinkName": "nextLink"}))
    .build(setting);
    out.insert("/providers/Microsoft.Insights/eventtypes/management/values".into(), json!({"get": platform}));
}

pub(super) fn activity_schemas(out: &mut Map<String, Value>) {
    let localized = || schema_ref("LocalizableString");
    out.insert(
        "LocalizableString".into(),
        json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "string"}, "localizedValue": {"type": "string"}}}),
    );
    out.insert(
        "EventData".into(),
        json!({
            "type": "object",
            "description": "One request, as Azure's Activity Log `EventData`, with the spec's changed properties (`propertyChanges`, Resource Graph's change history).",
            "required": ["eventDataId", "eventTimestamp", "operationName", "status", "caller", "resourceId"],
            "properties": {
                "authorization": {"type": "object", "properties": {"action": {"type": "string"}, "scope": {"type": "string"}}},
                "caller": {"type": "string", "description": "The verified principal."},
                "channels": {"type": "string"},
                "claims": {"type": "object", "additionalProperties": {"type": "string"}},
                "correlationId": {"type": "string"},
                "description": {"type": "string"},
                "eventDataId": {"type": "string", "description": "The entry's position: unique, newer entries higher."},
                "eventName": localized(),
                "category": localized(),
                "eventTimestamp": {"type": "string", "format": "date-time"},
                "id": {"type": "string"},
                "level": {"enum": ["Informational", "Error"]},
                "operationId": {"type": "string", "description": "The operation the request started (or, for a cancel, named); empty when none."},
                "operationName": localized(),
                "resourceGroupName": {"type": "string"},
                "resourceProviderName": localized(),
                "resourceType": localized(),
                "resourceId": {"type": "string", "description": "What the request named."},
                "status": {"type": "object", "properties": {"value": {"enum": ["Accepted", "Succeeded", "Failed"]}, "localizedValue": {"type": "string"}}},
                "subStatus": localized(),
                "submissionTimestamp": {"type": "string", "format": "date-time"},
                "subscriptionId": {"type": "string"},
                "tenantId": {"type": "string", "description": "The caller's issuer (tenant)."},
                "properties": {"type": "object", "additionalProperties": {"type": "string"}, "description": "`statusCode`, `serviceRequestId` (`x-ms-request-id`), `userAgent`, `principalType`, and for a refusal `statusMessage` (the error as JSON text)."},
                "httpRequest": {"type": "object", "properties": {
                    "clientRequestId": {"type": "string"}, "clientIpAddress": {"type": "string"},
                    "method": {"type": "string"}, "uri": {"type": "string"},
                }},
                "propertyChanges": {"type": "array", "items": schema_ref("PropertyChange")},
                "propertyChangesTruncated": {"type": "boolean"},
            },
        }),
    );
    out.insert(
        "PropertyChange".into(),
        json!({
            "type": "object",
            "required": ["propertyName", "propertyChangeType"],
            "properties": {
                "propertyName": {"type": "string", "description": "A JSON path: `properties.addressSpace`, `tags.env`, `properties.list[0]`."},
                "propertyChangeType": {"enum": ["Insert", "Update", "Remove"]},
                "beforeValue": {"description": "Absent for a secret."},
                "afterValue": {"description": "Absent for a secret."},
                "secret": {"type": "boolean", "description": "A secret property: shown by its path alone."},
            },
        }),
    );
    out.insert(
        "EventDataCollection".into(),
        json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "array", "items": schema_ref("EventData")}, "nextLink": {"type": "string"}}}),
    );
}
