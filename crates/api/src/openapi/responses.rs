//! The answers operations share: the error responses and headers under `#/components`, and
//! the response objects (JSON, plain, accepted-with-async-headers) the path modules build
//! theirs from.

use serde_json::{Map, Value, json};

use super::operation::Setting;
use super::schemas::schema_ref;

/// The shared error responses (`#/components/responses/{name}`).
pub(super) const ERRORS: [(u16, &str, &str); 13] = [
    (400, "BadRequest", "The request is not valid (the error code says why)."),
    (401, "Unauthorized", "No credential, or one that does not verify."),
    (403, "Forbidden", "The caller's roles do not grant the action at the scope (`AuthorizationFailed`)."),
    (404, "NotFound", "No such resource, operation, type or path."),
    (408, "RequestTimeout", "The request body stopped arriving; the connection closes."),
    (409, "Conflict", "The request conflicts with the resource's or the subscription's state."),
    (412, "PreconditionFailed", "`If-Match` or `If-None-Match` does not hold for the resource's current `etag`."),
    (413, "PayloadTooLarge", "The body is larger than `server.max_body_bytes`."),
    (415, "UnsupportedMediaType", "The body is not `application/json` (utf-8)."),
    (429, "TooManyRequests", "The caller's rate limit is spent; retry after `Retry-After` seconds."),
    (431, "RequestHeaderFieldsTooLarge", "The request head is larger than the listener reads; the connection closes."),
    (500, "InternalServerError", "An internal error, or (operation results) the failed operation's own error."),
    (503, "ServiceUnavailable", "The store or an issuer's keys cannot be reached; retry after `Retry-After`."),
];

pub(super) fn error_responses(setting: &Setting) -> Map<String, Value> {
    let mut out = Map::new();
    for (status, name, description) in ERRORS {
        if !setting.answers(status) {
            continue;
        }
        if status == 431 {
            // The HTTP layer's own answer, before any route: no body, no Slipway headers.
            out.insert(name.into(), json!({"description": description}));
            continue;
        }
        let mut headers = json!({
            "x-ms-request-id": header_ref("RequestId"),
            "x-ms-error-code": header_ref("ErrorCode"),
        });
        if matches!(status, 429 | 503) {
            headers["Retry-After"] = header_ref("RetryAfter");
        }
        if status == 401 {
            headers["WWW-Authenticate"] = header_ref("WwwAuthenticate");
        }
        out.insert(
            name.into(),
            json!({
                "description": description,
                "headers": headers,
                "content": {"application/json": {"schema": schema_ref("ErrorResponse")}},
            }),
        );
    }
    out
}

pub(super) fn headers() -> Value {
    let uri = |description: &str| json!({"description": description, "schema": {"type": "string", "format": "uri"}});
    json!({
        "RequestId": {"description": "A fresh id per response.", "required": true, "schema": {"type": "string", "format": "uuid"}},
        "ErrorCode": {"description": "The error's code.", "required": true, "schema": {"type": "string"}},
        "RetryAfter": {"description": "Seconds to wait.", "required": true, "schema": {"type": "integer", "minimum": 0}},
        "WwwAuthenticate": {"description": "`Bearer realm=\"slipway\"` (RFC 6750), with `error` and `error_description` for a token that does not verify.", "required": true, "schema": {"type": "string", "pattern": "^Bearer "}},
        "AzureAsyncOperation": uri("The operation's status URL."),
        "Location": uri("The operation's result URL."),
        "AzureAsyncNotification": {"description": "`Enabled` when the operation will notify `Azure-AsyncNotificationUri`.", "schema": {"enum": ["Enabled"]}},
    })
}

pub(super) fn header_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/headers/{name}") })
}

/// The async headers of an accepted operation; `required` when every answer of the status has them.
pub(super) fn async_headers(required: bool) -> Value {
    let mut h = json!({
        "x-ms-request-id": header_ref("RequestId"),
        "Azure-AsyncNotification": header_ref("AzureAsyncNotification"),
    });
    for (name, component) in
        [("Azure-AsyncOperation", "AzureAsyncOperation"), ("Location", "Location"), ("Retry-After", "RetryAfter")]
    {
        h[name] = if required {
            header_ref(component)
        } else {
            let mut optional = headers()[component].clone();
            optional.as_object_mut().map(|m| m.remove("required"));
            optional
        };
    }
    h
}

pub(super) fn json_answer(description: &str, schema: Value, headers: Value) -> Value {
    json!({"description": description, "headers": headers, "content": {"application/json": {"schema": schema}}})
}

pub(super) fn plain(description: &str) -> Value {
    json!({"description": description, "headers": request_id()})
}

/// One Server-Sent Event of a stream (what a client's parser yields, and what schemathesis
/// checks each event against).
pub(super) fn sse_event() -> Value {
    json!({"type": "object", "properties": {
        "event": {"type": "string"}, "data": {"type": "string"}, "id": {"type": "string"}, "retry": {"type": "integer"},
    }})
}

pub(super) fn request_id() -> Value {
    json!({"x-ms-request-id": header_ref("RequestId")})
}
