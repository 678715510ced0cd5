//! The builder every path's operations are made with (`Op`), the parameters they share and
//! the `Setting` that decides which statuses they list, so each path module states only what is
//! its own.

use serde_json::{Map, Value, json};
use slipway_types::ResourceType;

use super::responses::{ERRORS, plain};
use super::schemas;
use crate::handlers::platform_version::{PLATFORM_API_VERSIONS, PLATFORM_VERSION_RULE, RECENT_ARM_VERSIONS};

/// What the running configuration changes in every operation.
pub(super) struct Setting {
    /// Authentication is on: `401` everywhere, `403` where a role is needed.
    pub auth: bool,
    /// Rate limits are on: `429` everywhere.
    pub limited: bool,
    /// Which `Azure-AsyncNotificationUri` callbacks this server calls, in words.
    pub callbacks: String,
}

impl Setting {
    /// Whether this configuration can answer `status` at all.
    pub(super) fn answers(&self, status: u16) -> bool {
        match status {
            401 | 403 => self.auth,
            429 => self.limited,
            _ => true,
        }
    }
}

/// One operation of the document.
pub(super) struct Op {
    id: String,
    summary: String,
    tag: String,
    params: Vec<Value>,
    /// The request body's schema, and whether it must be sent.
    body: Option<(Value, bool)>,
    answers: Vec<(u16, Value)>,
    errors: &'static [u16],
    extra: Vec<(&'static str, Value)>,
}

impl Op {
    pub(super) fn new(id: String, summary: impl Into<String>, tag: &str, params: Vec<Value>) -> Self {
        Op {
            id,
            summary: summary.into(),
            tag: tag.into(),
            params,
            body: None,
            answers: Vec::new(),
            errors: &[],
            extra: Vec::new(),
        }
    }

    pub(super) fn answer(mut self, status: u16, response: Value) -> Self {
        self.answers.push((status, response));
        self
    }

    pub(super) fn errors(mut self, errors: &'static [u16]) -> Self {
        self.errors = errors;
        self
    }

    pub(super) fn body(mut self, schema: Value) -> Self {
        self.body = Some((schema, true));
        self
    }

    /// A body that may be left out.
    pub(super) fn optional_body(mut self, schema: Value) -> Self {
        self.body = Some((schema, false));
        self
    }

    pub(super) fn with(mut self, key: &'static str, value: Value) -> Self {
        self.extra.push((key, value));
        self
    }

    pub(super) fn build(self, setting: &Setting) -> Value {
        let mut responses = Map::new();
        for (status, response) in self.answers {
            responses.insert(status.to_string(), response);
        }
        for (status, name, _) in ERRORS {
            // Every ARM route authenticates first and is rate limited.
            let applies = self.errors.contains(&status) || matches!(status, 401 | 429 | 431);
            if setting.answers(status) && applies {
                responses.insert(status.to_string(), json!({"$ref": format!("#/components/responses/{name}")}));
            }
        }
        let mut op = json!({
            "operationId": self.id,
            "summary": self.summary,
            "tags": [self.tag],
            "parameters": self.params,
            "responses": responses,
        });
        if let Some((schema, required)) = self.body {
            op["requestBody"] = json!({"required": required, "content": {"application/json": {"schema": schema}}});
        }
        for (k, v) in self.extra {
            op[k] = v;
        }
        op
    }
}

/// ARM's existence check on a path whose `GET` reads one thing: `HEAD` answers that `GET`'s
/// status without a body — `204` for `200`, `404` where it finds nothing or may not be read.
pub(super) fn existence_check(id: String, what: &str, tag: &str, params: Vec<Value>, setting: &Setting) -> Value {
    let mut responses = Map::new();
    let statuses = [
        (204, format!("The {what} exists and the caller may read it.")),
        (400, "A bad api-version or path; no body.".to_string()),
        (401, "Not authenticated; no body.".to_string()),
        (404, format!("No such {what}, or the caller may not read it; no body.")),
        (429, "Rate limited; no body.".to_string()),
    ];
    for (status, description) in statuses {
        if setting.answers(status) {
            responses.insert(status.to_string(), plain(&description));
        }
    }
    json!({
        "operationId": id,
        "summary": format!("Whether the {what} exists (ARM's existence check): the `GET`'s status, no body."),
        "tags": [tag],
        "parameters": params,
        "responses": responses,
    })
}

pub(super) fn path_param(name: &str, schema: Value, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": schema})
}

pub(super) fn api_version(versions: &[String]) -> Value {
    json!({
        "name": "api-version",
        "in": "query",
        "required": true,
        "description": "Missing: `400 MissingApiVersionParameter`; another value: `400 InvalidApiVersionParameter`.",
        "schema": {"type": "string", "enum": versions},
    })
}

/// The `api-version` parameter of the paths ARM owns (subscriptions, providers, role
/// assignments, API tokens, the overview lists): Slipway's versions and recent
/// `Microsoft.Resources` ones listed, the whole rule described.
pub(super) fn platform_api_version() -> Value {
    let listed: Vec<String> = PLATFORM_API_VERSIONS.iter().chain(RECENT_ARM_VERSIONS).map(|v| v.to_string()).collect();
    let mut param = api_version(&listed);
    param["description"] = json!(format!(
        "Accepted: {PLATFORM_VERSION_RULE}; the answer is the same for each. Missing: `400 \
         MissingApiVersionParameter`; another value: `400 InvalidApiVersionParameter`."
    ));
    param
}

pub(super) fn subscription_id() -> Value {
    path_param("subscriptionId", schemas::guid(), "A GUID; anything else is `400 InvalidSubscriptionId`.")
}

pub(super) fn group_name() -> Value {
    path_param("resourceGroupName", schemas::group_name(), "ARM's resource-group rule.")
}

pub(super) fn resource_name(ty: &ResourceType, own_rule: bool) -> Value {
    path_param(
        "resourceName",
        schemas::resource_name(own_rule.then_some(ty)),
        "ARM's common rule for names (on PUT also the type's own rule).",
    )
}

pub(super) fn notification_uri(setting: &Setting) -> Value {
    json!({
        "name": "Azure-AsyncNotificationUri",
        "in": "header",
        "required": false,
        "description": format!(
            "Where to POST the operation-status document when the operation ends. This server calls {}; \
             another URI is `400 InvalidAsyncNotificationUri`.",
            setting.callbacks
        ),
        "schema": {"type": "string", "format": "uri"},
    })
}

/// `If-Match` and `If-None-Match` (optimistic concurrency on the resource's `etag`).
pub(super) fn preconditions() -> [Value; 2] {
    let header = |name: &str, description: &str| json!({"name": name, "in": "header", "required": false, "description": description, "schema": {"type": "string"}});
    [
        header("If-Match", "Only if the resource's current `etag` is one of these (`*`: if it exists); else `412`."),
        header(
            "If-None-Match",
            "Only if the resource's `etag` is none of these (`*`: only if it does not exist); else `412`.",
        ),
    ]
}

/// `Slipway.Example` + `virtualNetworks` → `SlipwayExample_VirtualNetworks`; a child type
/// `virtualNetworks/subnets` → `SlipwayExample_VirtualNetworksSubnets`.
pub(super) fn op_prefix(namespace: &str, type_name: &str) -> String {
    let ty: String = type_name
        .split('/')
        .map(|seg| {
            let mut seg = seg.to_string();
            if let Some(first) = seg.get_mut(0..1) {
                first.make_ascii_uppercase();
            }
            seg
        })
        .collect();
    format!("{}_{ty}", namespace.replace(['.', '-'], ""))
}

pub(super) fn lro(final_state: &str) -> [(&'static str, Value); 2] {
    [
        ("x-ms-long-running-operation", json!(true)),
        ("x-ms-long-running-operation-options", json!({"final-state-via": final_state})),
    ]
}
