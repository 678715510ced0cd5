//! The document's paths: for each configured type its resource, collections and role
//! assignments at its scope; for each namespace its operation endpoints and discovery; the
//! platform's subscriptions and role assignments; the unauthenticated probes. Each operation
//! lists every status it can answer, in the order the handlers check (`handlers::dispatch`).

use serde_json::{Map, Value, json};
use slipway_types::{CHECK_DRIFT_SEGMENT, EVENTS_SEGMENT, RETRY_SEGMENT, ResourceType, WHAT_IF_SEGMENT};

use super::schemas::{self, TypeNames, schema_ref};
use crate::handlers::discovery::PLATFORM_API_VERSIONS;

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
    fn answers(&self, status: u16) -> bool {
        match status {
            401 | 403 => self.auth,
            429 => self.limited,
            _ => true,
        }
    }
}

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

/// The `api-version` parameter of the platform's own paths (subscriptions, role
/// assignments, API tokens, the overview lists).
pub(super) fn platform_api_version() -> Value {
    api_version(&PLATFORM_API_VERSIONS.iter().map(|v| v.to_string()).collect::<Vec<_>>())
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

/// `Slipway.Example` + `virtualNetworks` → `SlipwayExample_VirtualNetworks`; a child type
/// `virtualNetworks/subnets` → `SlipwayExample_VirtualNetworksSubnets`.
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

/// A resource type's paths: the resource, its two collections, role assignments at its scope.
pub(super) fn type_paths(ty: &ResourceType, setting: &Setting, out: &mut Map<String, Value>) {
    let n = TypeNames::of(ty);
    let prefix = op_prefix(&ty.namespace, &ty.type_name);
    let tag = ty.display_name();
    let version = api_version(&ty.api_versions);
    // A child type's path names each parent: `…/virtualNetworks/{virtualNetworksName}/subnets`.
    let (parents, leaf) = match ty.type_name.rsplit_once('/') {
        Some((parents, leaf)) => (parents.split('/').collect::<Vec<_>>(), leaf),
        None => (Vec::new(), ty.type_name.as_str()),
    };
    let mut group_path =
        format!("/subscriptions/{{subscriptionId}}/resourceGroups/{{resourceGroupName}}/providers/{}", ty.namespace);
    let mut parent_params = Vec::new();
    for p in &parents {
        group_path.push_str(&format!("/{p}/{{{p}Name}}"));
        parent_params.push(path_param(
            &format!("{p}Name"),
            schemas::resource_name(None),
            "The parent resource's name.",
        ));
    }
    group_path.push_str(&format!("/{leaf}"));
    let resource_path = format!("{group_path}/{{resourceName}}");
    let scope_params = [vec![subscription_id(), group_name()], parent_params.clone()].concat();
    let base = |own_rule: bool| [scope_params.clone(), vec![resource_name(ty, own_rule), version.clone()]].concat();
    let resource = schema_ref(&n.resource);
    let [lro_flag, lro_options] = lro("azure-async-operation");

    // What a client does next with the resource it put (OpenAPI links: tools that follow them,
    // schemathesis's stateful phase among them, reach the resource's other operations).
    let mut link_params = Map::new();
    let names = ["subscriptionId".to_string(), "resourceGroupName".to_string()]
        .into_iter()
        .chain(parents.iter().map(|p| format!("{p}Name")))
        .chain(["resourceName".to_string()]);
    for name in names {
        link_params.insert(format!("path.{name}"), json!(format!("$request.path.{name}")));
    }
    link_params.insert("query.api-version".into(), json!("$request.query.api-version"));
    let with_links = |mut answer: Value| {
        let ops = ["Get", "Update", "Delete", "Retry", "ListJobs"];
        answer["links"] = ops
            .iter()
            .map(|op| (op.to_string(), json!({"operationId": format!("{prefix}_{op}"), "parameters": link_params})))
            .collect::<Map<_, _>>()
            .into();
        answer
    };
    let get = Op::new(format!("{prefix}_Get"), format!("Reads a {}.", ty.kind), &tag, base(false))
        .answer(200, json_answer("The resource.", resource.clone(), request_id()))
        .errors(&[400, 403, 404, 500, 503]);
    let mut put_params = base(true);
    put_params.push(notification_uri(setting));
    put_params.extend(preconditions());
    let put =
        Op::new(format!("{prefix}_CreateOrUpdate"), format!("Creates or replaces a {}.", ty.kind), &tag, put_params)
            .body(schema_ref(&n.put))
            .answer(
                200,
                with_links(json_answer(
                    "Replaced (async headers), or the same spec on a Succeeded resource (none).",
                    resource.clone(),
                    async_headers(false),
                )),
            )
            .answer(
                201,
                with_links(json_answer(
                    "Created; follow `Azure-AsyncOperation`.",
                    resource.clone(),
                    async_headers(true),
                )),
            )
            .errors(if parents.is_empty() {
                &[400, 403, 408, 409, 412, 413, 415, 500, 503]
            } else {
                &[400, 403, 404, 408, 409, 412, 413, 415, 500, 503]
            })
            .with(lro_flag.0, lro_flag.1.clone())
            .with(lro_options.0, lro_options.1.clone());
    let mut patch_params = base(false);
    patch_params.push(notification_uri(setting));
    patch_params.extend(preconditions());
    let patch = Op::new(
        format!("{prefix}_Update"),
        format!("Updates a {}'s tags and properties.", ty.kind),
        &tag,
        patch_params,
    )
    .body(schema_ref(&n.patch))
    .answer(200, json_answer("Nothing changed.", resource.clone(), request_id()))
    .answer(202, json_answer("Accepted; follow `Azure-AsyncOperation`.", resource.clone(), async_headers(true)))
    .errors(&[400, 403, 404, 408, 409, 412, 413, 415, 500, 503])
    .with(lro_flag.0, lro_flag.1.clone())
    .with(lro_options.0, lro_options.1.clone());
    let mut delete_params = base(false);
    delete_params.push(notification_uri(setting));
    delete_params.extend(preconditions());
    delete_params.push(json!({
        "name": "force", "in": "query", "required": false, "schema": {"type": "boolean"},
        "description": "Platform Admin only: remove the record without a completed delete job (running jobs are \
                        asked to cancel); the operation says the infrastructure may be orphaned.",
    }));
    let delete = Op::new(format!("{prefix}_Delete"), format!("Deletes a {}.", ty.kind), &tag, delete_params)
        .answer(202, {
            let mut r = plain("Accepted; follow `Azure-AsyncOperation`.");
            r["headers"] = async_headers(true);
            r
        })
        .answer(204, plain("There was no such resource."))
        .errors(&[400, 403, 409, 412, 500, 503])
        .with(lro_flag.0, lro_flag.1)
        .with(lro_options.0, json!({"final-state-via": "location"}));
    out.insert(
        resource_path.clone(),
        json!({
            "get": get.build(setting),
            "put": put.build(setting),
            "patch": patch.build(setting),
            "delete": delete.build(setting),
        }),
    );
    let history = Op::new(
        format!("{prefix}_ListJobs"),
        format!("Lists a {}'s job history (a Slipway extension).", ty.kind),
        &tag,
        base(false),
    )
    .answer(200, json_answer("The jobs, newest first.", schema_ref("JobHistory"), request_id()))
    .errors(&[400, 403, 404, 500, 503]);
    out.insert(format!("{resource_path}/jobs"), json!({"get": history.build(setting)}));
    let events = super::event_paths::events_op(
        format!("{prefix}_ListEvents"),
        &format!(
            "The event feed of a {} and what is nested under it, also once it is gone (a Slipway extension).",
            ty.kind
        ),
        &tag,
        [scope_params.clone(), vec![resource_name(ty, false)]].concat(),
        version.clone(),
        setting,
    );
    out.insert(format!("{resource_path}/{EVENTS_SEGMENT}"), json!({"get": events}));
    // An action, and retry now: `202` with the operation's URLs, `Location` answering with the
    // resource.
    let post_on_resource = |id: String, summary: String, body: Value| {
        let mut params = base(false);
        params.push(notification_uri(setting));
        Op::new(id, summary, &tag, params)
            .optional_body(body)
            .answer(202, {
                let mut r = plain("Accepted; follow `Azure-AsyncOperation`. `Location` answers with the resource.");
                r["headers"] = async_headers(true);
                r
            })
            .errors(&[400, 403, 404, 408, 409, 413, 415, 500, 503])
            .with(lro_flag.0, json!(true))
            .with(lro_options.0, json!({"final-state-via": "location"}))
            .build(setting)
    };
    for action in ty.actions() {
        let id = format!("{prefix}_{}", op_prefix("", &action.name).trim_start_matches('_'));
        let summary = format!("Runs the {} action of a {}.", action.name, ty.kind);
        let body = action.schema().cloned().unwrap_or_else(|| json!({"type": "object"}));
        out.insert(format!("{resource_path}/{}", action.name), json!({"post": post_on_resource(id, summary, body)}));
    }
    let retry = post_on_resource(
        format!("{prefix}_Retry"),
        format!(
            "Runs a Failed or Canceled {}'s spec again now, starting the backoff over (a Slipway extension); \
             `409` while an operation runs or when the resource is neither.",
            ty.kind
        ),
        json!({"type": "object", "maxProperties": 0}),
    );
    out.insert(format!("{resource_path}/{RETRY_SEGMENT}"), json!({"post": retry}));
    if ty.what_if {
        let check = post_on_resource(
            format!("{prefix}_CheckDrift"),
            format!(
                "Checks a Succeeded {} for drift now: its create job in check mode under its own spec; the result \
                 is the operation's `properties.changes` and the resource's `properties.drift`, which `Location` \
                 answers with (a Slipway extension).",
                ty.kind
            ),
            json!({"type": "object", "maxProperties": 0}),
        );
        out.insert(format!("{resource_path}/{CHECK_DRIFT_SEGMENT}"), json!({"post": check}));
        let op =
            super::whatif::operation(format!("{prefix}_WhatIf"), ty, &tag, base(true), schema_ref(&n.put), setting);
        out.insert(format!("{resource_path}/{WHAT_IF_SEGMENT}"), json!({"post": op}));
    }

    let paging = [
        json!({"name": "$top", "in": "query", "required": false, "description": "Page size (default `server.page_size`).", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}),
        json!({"name": "$skipToken", "in": "query", "required": false, "description": "From a `nextLink`; anything else is `400 InvalidSkipToken`.", "schema": {"type": "string"}}),
    ];
    let list = |id: &str, summary: String, mut params: Vec<Value>, errors: &'static [u16]| {
        params.extend([version.clone()]);
        params.extend(paging.iter().cloned());
        Op::new(format!("{prefix}_{id}"), summary, &tag, params)
            .answer(200, json_answer("A page, in key order.", schema_ref(&n.list), request_id()))
            .errors(errors)
            .with("x-ms-pageable", json!({"nextLinkName": "nextLink"}))
            .build(setting)
    };
    if parents.is_empty() {
        out.insert(
            group_path,
            json!({"get": list("ListByResourceGroup", format!("Lists the {} of a resource group.", ty.type_name), scope_params.clone(), &[400, 403, 500, 503])}),
        );
        out.insert(
            format!("/subscriptions/{{subscriptionId}}/providers/{}/{}", ty.namespace, ty.type_name),
            json!({"get": list("ListBySubscription", format!("Lists the {} of a subscription.", ty.type_name), vec![subscription_id()], &[400, 403, 500, 503])}),
        );
    } else {
        let summary = format!("Lists the {leaf} of one {}.", parents.join("/"));
        let op = list("ListByParent", summary, scope_params.clone(), &[400, 403, 404, 500, 503]);
        out.insert(group_path, json!({"get": op}));
    }
    let mut scope = scope_params;
    scope.push(resource_name(ty, false));
    role_assignment_paths(&resource_path, &format!("{prefix}_RoleAssignments"), scope, setting, out);
}

/// `{scope}/providers/Slipway.Authorization/roleAssignments[/{roleAssignmentName}]`.
pub(super) fn role_assignment_paths(
    scope_path: &str,
    prefix: &str,
    scope_params: Vec<Value>,
    setting: &Setting,
    out: &mut Map<String, Value>,
) {
    let tag = "Slipway.Authorization/roleAssignments";
    let version = platform_api_version();
    let mut params = scope_params.clone();
    params.push(version.clone());
    let list = Op::new(
        format!("{prefix}_List"),
        "Lists the role assignments at, above and below the scope.",
        tag,
        params.clone(),
    )
    .answer(200, json_answer("The assignments.", schema_ref("RoleAssignmentList"), request_id()))
    .errors(&[400, 403, 500, 503]);
    let collection = format!("{scope_path}/providers/Slipway.Authorization/roleAssignments");
    out.insert(collection.clone(), json!({"get": list.build(setting)}));
    let permissions = Op::new(
        format!("{prefix}_ListPermissions"),
        "Lists the actions the caller may take at the scope (any authenticated caller, about itself).",
        "Slipway.Authorization/permissions",
        params,
    )
    .answer(200, json_answer("The caller's actions.", schema_ref("PermissionList"), request_id()))
    .errors(&[400, 500, 503]);
    out.insert(
        format!("{scope_path}/providers/Slipway.Authorization/permissions"),
        json!({"get": permissions.build(setting)}),
    );

    let mut params = scope_params;
    params.push(path_param(
        "roleAssignmentName",
        schemas::guid(),
        "A GUID; anything else is `400 InvalidRoleAssignmentId`.",
    ));
    params.push(version);
    let assignment = schema_ref("RoleAssignment");
    let get = Op::new(format!("{prefix}_Get"), "Reads a role assignment.", tag, params.clone())
        .answer(200, json_answer("The assignment.", assignment.clone(), request_id()))
        .errors(&[400, 403, 404, 500, 503]);
    let put = Op::new(
        format!("{prefix}_Create"),
        "Creates or replaces a role assignment (Owner; Admin for Admin).",
        tag,
        params.clone(),
    )
    .body(schema_ref(if scope_path.is_empty() { "RoleAssignmentPut" } else { "RoleAssignmentPutScoped" }))
    .answer(200, json_answer("Replaced.", assignment.clone(), request_id()))
    .answer(201, json_answer("Created.", assignment.clone(), request_id()))
    .errors(&[400, 403, 408, 409, 413, 415, 500, 503]);
    let delete = Op::new(format!("{prefix}_Delete"), "Deletes a role assignment.", tag, params)
        .answer(200, json_answer("Deleted; the assignment as it was.", assignment, request_id()))
        .answer(204, plain("There was no such assignment at this scope."))
        .errors(&[400, 403, 500, 503]);
    out.insert(
        format!("{collection}/{{roleAssignmentName}}"),
        json!({"get": get.build(setting), "put": put.build(setting), "delete": delete.build(setting)}),
    );
}
