//! The event feed (`handlers::events`): its paths at subscription, group and resource scope,
//! and its schemas.

use serde_json::{Map, Value, json};
use slipway_types::EVENTS_SEGMENT;

use super::operation::{Op, Setting, group_name, platform_api_version, subscription_id};
use super::responses::{header_ref, json_answer, request_id, sse_event};
use super::schemas::schema_ref;
use crate::route::RESOURCES_NAMESPACE;

const TAG: &str = "Events";

/// The feed's GET at a scope; `params` name the scope, `version` is its api-version.
pub(super) fn events_op(
    id: String,
    summary: &str,
    tag: &str,
    mut params: Vec<Value>,
    version: Value,
    setting: &Setting,
) -> Value {
    params.push(version);
    params.extend([
        json!({"name": "since", "in": "query", "required": false, "description": "Events after this cursor (a `cursor` or event `id` the feed gave); `latest` answers no events and the newest cursor. Absent: from the oldest kept, or the `Last-Event-ID` header.", "schema": {"type": "string", "maxLength": 40}}),
        json!({"name": "$top", "in": "query", "required": false, "description": "Page size (default `server.page_size`).", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}),
        json!({"name": "follow", "in": "query", "required": false, "description": "`true`: every event from the starting point on, as Server-Sent Events (`id` the cursor, `event` the type, `data` the event); `gone` and `end` messages close it.", "schema": {"type": "boolean"}}),
    ]);
    let gone = json!({
        "description": "The cursor's events are no longer kept, or the cursor is not this feed's (`EventCursorExpired`): read the current state, then follow from the cursor in `x-slipway-event-cursor`.",
        "headers": {
            "x-ms-request-id": header_ref("RequestId"),
            "x-ms-error-code": header_ref("ErrorCode"),
            "x-slipway-event-cursor": {"description": "The cursor to follow from after a resync.", "schema": {"type": "string"}},
        },
        "content": {"application/json": {"schema": schema_ref("ErrorResponse")}},
    });
    let mut page = json_answer(
        "A page, oldest first; follow `nextLink` while there is one, then poll from `cursor`. With \
         `follow=true`, the stream.",
        schema_ref("EventList"),
        request_id(),
    );
    page["content"]["text/event-stream"] = json!({"schema": sse_event()});
    let mut op = Op::new(id, summary, tag, params)
        .answer(200, page)
        .answer(410, gone)
        .errors(&[400, 403, 404, 500, 503])
        .with("x-ms-pageable", json!({"nextLinkName": "nextLink"}))
        .build(setting);
    op["x-slipway-extension"] = json!("Not part of ARM's contract.");
    op
}

pub(super) fn event_paths(setting: &Setting, out: &mut Map<String, Value>) {
    let feed = format!("providers/{RESOURCES_NAMESPACE}/{EVENTS_SEGMENT}");
    let subscription = events_op(
        "Events_List".into(),
        "The subscription's event feed: every resource and operation change, in commit order (a Slipway extension).",
        TAG,
        vec![subscription_id()],
        platform_api_version(),
        setting,
    );
    out.insert(format!("/subscriptions/{{subscriptionId}}/{feed}"), json!({"get": subscription}));
    let group = events_op(
        "Events_ListByResourceGroup".into(),
        "The group's event feed (a Slipway extension).",
        TAG,
        vec![subscription_id(), group_name()],
        platform_api_version(),
        setting,
    );
    out.insert(
        format!("/subscriptions/{{subscriptionId}}/resourceGroups/{{resourceGroupName}}/{feed}"),
        json!({"get": group}),
    );
}

pub(super) fn event_schemas(out: &mut Map<String, Value>) {
    let state = || schema_ref("ProvisioningState");
    let kinds: Vec<&str> = slipway_domain::event::EventKind::ALL.iter().map(|k| k.as_str()).collect();
    let requests: Vec<&str> = slipway_domain::OperationRequest::ALL.iter().map(|r| r.wire_name()).collect();
    out.insert(
        "Event".into(),
        json!({
            "type": "object",
            "description": "One change: to a resource (created, its state, its outputs, deleted) or to one of its operations.",
            "required": ["id", "type", "time", "resourceId"],
            "properties": {
                "id": {"type": "string", "description": "The event's cursor: opaque, increasing within the subscription."},
                "type": {"enum": kinds},
                "time": {"type": "string", "format": "date-time"},
                "resourceId": {"type": "string"},
                "provisioningState": state(),
                "previousProvisioningState": state(),
                "generation": {"type": "integer", "description": "The resource's generation after the change."},
                "operation": {
                    "type": "object",
                    "required": ["id", "name", "request", "status"],
                    "properties": {
                        "id": {"type": "string", "description": "The operation's status path."},
                        "name": {"type": "string", "format": "uuid"},
                        "request": {"enum": requests},
                        "action": {"type": "string"},
                        "status": state(),
                        "previousStatus": state(),
                        "errorCode": {"type": "string"},
                    },
                },
            },
        }),
    );
    out.insert(
        "EventList".into(),
        json!({
            "type": "object",
            "required": ["value", "cursor"],
            "properties": {
                "value": {"type": "array", "items": schema_ref("Event")},
                "cursor": {"type": "string", "description": "Where to go on from: the last event read, or the feed's newest when the page read to its end."},
                "nextLink": {"type": "string", "description": "The next page, while the page was full."},
            },
        }),
    );
}
