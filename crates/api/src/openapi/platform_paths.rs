//! The paths that are not a resource type's own: each namespace's operation endpoints and
//! discovery, and the platform's (subscriptions, health, the document itself).

use serde_json::{Map, Value, json};
use slipway_types::ResourceType;

use super::operation::{Op, Setting, api_version, group_name, path_param, platform_api_version, subscription_id};
use super::paths::role_assignment_paths;
use super::responses::{async_headers, header_ref, json_answer, plain, request_id, sse_event};
use super::schemas::{self, TypeNames, schema_ref};

/// A namespace's operation endpoints and discovery.
pub(super) fn namespace_paths(
    namespace: &str,
    types: &[&ResourceType],
    versions: &[String],
    setting: &Setting,
    out: &mut Map<String, Value>,
) {
    let ns = namespace.replace(['.', '-'], "");
    let version = api_version(versions);
    let base = format!("/subscriptions/{{subscriptionId}}/providers/{namespace}/locations/{{location}}");
    let params = vec![
        subscription_id(),
        path_param("location", schemas::segment(), "Any location (Slipway builds URLs with `server.location`)."),
        path_param(
            "operationId",
            {
                let mut s = schemas::guid();
                s["format"] = json!("uuid");
                s
            },
            "The operation's id; an unknown one is `404`.",
        ),
        version.clone(),
    ];
    let tag = format!("{namespace} operations");
    let status = Op::new(
        format!("{ns}_OperationStatuses_Get"),
        "Reads an operation's status (200 whatever it is).",
        &tag,
        params.clone(),
    )
    .answer(200, json_answer("The operation.", schema_ref("OperationStatus"), request_id()))
    .errors(&[400, 404, 500, 503]);
    let resources: Vec<Value> = types.iter().map(|t| schema_ref(&TypeNames::of(t).resource)).collect();
    let result = Op::new(format!("{ns}_OperationResults_Get"), "Reads an operation's result.", &tag, params.clone())
        .answer(
            200,
            json_answer(
                "A create or update succeeded: the resource as it is now.",
                json!({"oneOf": resources}),
                request_id(),
            ),
        )
        .answer(202, {
            let mut r = plain("Still running.");
            r["headers"]["Location"] = header_ref("Location");
            r["headers"]["Retry-After"] = header_ref("RetryAfter");
            r
        })
        .answer(204, plain("A delete succeeded."))
        .errors(&[400, 404, 409, 500, 503]);
    let mut logs_params = params.clone();
    logs_params.extend([
        json!({"name": "tail", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": 10000},
               "description": "Only the last N lines."}),
        json!({"name": "follow", "in": "query", "required": false, "schema": {"type": "boolean"},
               "description": "Stream the output as Server-Sent Events while the job runs: a `data` event per line, then an `end` event with the job's state."}),
        json!({"name": "job", "in": "query", "required": false, "schema": {"type": "string", "maxLength": 200},
               "description": "Which of the operation's jobs (an id from `{resourceId}/jobs`); default: its latest."}),
    ]);
    let mut output = json!({"description": "What the job printed so far (empty before it started).", "headers": request_id(),
        "content": {"text/plain": {"schema": {"type": "string"}}, "text/event-stream": {"schema": sse_event()}}});
    output["headers"]["x-slipway-job-id"] =
        json!({"description": "The job whose output this is.", "schema": {"type": "string"}});
    let logs = Op::new(format!("{ns}_OperationStatuses_Logs"), "Reads the output of an operation's job (a Slipway extension of ARM).", &tag, logs_params)
        .answer(200, output)
        .errors(&[400, 404, 500, 503])
        .with("x-slipway-extension", json!("Not part of ARM's contract."))
        .with("description", json!("A Slipway extension: a local job's runner output, an AAP job's stdout. `404 JobOutputNotFound` once the output is no longer kept (the job's retention passed, or the resource is gone)."));
    out.insert(format!("{base}/operationStatuses/{{operationId}}/logs"), json!({"get": logs.build(setting)}));
    let decide = |verb: &str, id: &str, summary: &str, answer: &str| {
        let body = json!({"required": false, "content": {"application/json": {"schema": {
            "type": "object", "additionalProperties": false,
            "properties": {"comment": {"type": "string", "maxLength": 2000, "description": "Why: shown on the operation and in the activity log."}}}}}});
        let op = Op::new(format!("{ns}_OperationStatuses_{id}"), summary, &tag, params.clone())
            .answer(202, json_answer(answer, schema_ref("OperationStatus"), async_headers(true)))
            .errors(&[400, 403, 404, 409, 500, 503])
            .with("requestBody", body)
            .with("x-slipway-extension", json!("Not part of ARM's contract: a request held by a `requireApproval` policy."))
            .with("description", json!("The caller needs the policy's approver role (`approval.approverRole`) at the resource and may not be the requester unless the policy allows it (`403 ApproverIsRequester`). `409` once the request was decided, timed out or canceled."));
        (format!("{base}/operationStatuses/{{operationId}}/{verb}"), json!({"post": op.build(setting)}))
    };
    for (path, item) in [
        decide(
            "approve",
            "Approve",
            "Approves a request waiting for approval: its job runs now.",
            "Approved: the operation is `Accepted` and runs.",
        ),
        decide(
            "deny",
            "Deny",
            "Denies a request waiting for approval: nothing runs, nothing of it is left.",
            "Denied: the operation `Failed` with `ApprovalDenied`.",
        ),
    ] {
        out.insert(path, item);
    }
    let mut cancel_params = params;
    cancel_params.push(json!({
        "name": "force", "in": "query", "required": false, "schema": {"type": "boolean"},
        "description": "Platform Admin only: end the operation now and stop its job at once, without waiting.",
    }));
    let cancel = Op::new(format!("{ns}_OperationStatuses_Cancel"), "Cancels an operation (a Slipway extension of ARM).", &tag, cancel_params)
        .answer(202, json_answer("Canceling or canceled; follow `Azure-AsyncOperation`.", schema_ref("OperationStatus"), async_headers(true)))
        .errors(&[400, 403, 404, 409, 500, 503])
        .with("x-slipway-extension", json!("Not part of ARM's contract: ARM has no cancel for operations."))
        .with("description", json!("A Slipway extension: ARM's contract has no way to cancel an operation. `409` once the operation ended, or for a delete."));
    out.insert(format!("{base}/operationStatuses/{{operationId}}"), json!({"get": status.build(setting)}));
    out.insert(format!("{base}/operationResults/{{operationId}}"), json!({"get": result.build(setting)}));
    out.insert(format!("{base}/operationStatuses/{{operationId}}/cancel"), json!({"post": cancel.build(setting)}));

    let discovery = format!("{namespace} discovery");
    let provider = |id: &str, params: Vec<Value>| {
        Op::new(
            format!("{ns}_{id}"),
            "The resource provider's registration (any authenticated caller).",
            &discovery,
            params,
        )
        .answer(200, json_answer("The provider.", schema_ref("Provider"), request_id()))
        .errors(if setting.auth { &[400, 503] } else { &[400] })
        .build(setting)
    };
    out.insert(format!("/providers/{namespace}"), json!({"get": provider("Providers_Get", vec![version.clone()])}));
    out.insert(
        format!("/subscriptions/{{subscriptionId}}/providers/{namespace}"),
        json!({"get": provider("Providers_GetAtSubscription", vec![subscription_id(), version.clone()])}),
    );
    let registration = |id: &str, summary: &str, answer: u16, errors: &'static [u16]| {
        let op = Op::new(format!("{ns}_{id}"), summary, &discovery, vec![subscription_id(), platform_api_version()]);
        let op = if answer == 200 {
            op.answer(200, json_answer("The provider.", schema_ref("Provider"), request_id()))
        } else {
            op
        };
        op.errors(errors).build(setting)
    };
    out.insert(
        format!("/subscriptions/{{subscriptionId}}/providers/{namespace}/register"),
        json!({"post": registration("Providers_Register", "Registers the provider: it is always registered, so this answers it (write on the subscription).", 200, &[400, 403, 404, 500, 503])}),
    );
    out.insert(
        format!("/subscriptions/{{subscriptionId}}/providers/{namespace}/unregister"),
        json!({"post": registration("Providers_Unregister", "Always `409 ProviderUnregistrationNotSupported`: the configuration decides what is served (write on the subscription).", 409, &[400, 403, 404, 409, 500, 503])}),
    );
    let operations = Op::new(
        format!("{ns}_Operations_List"),
        "Every action a role can grant (any authenticated caller).",
        &discovery,
        vec![version],
    )
    .answer(200, json_answer("The operations.", schema_ref("OperationList"), request_id()))
    .errors(if setting.auth { &[400, 503] } else { &[400] });
    out.insert(format!("/providers/{namespace}/operations"), json!({"get": operations.build(setting)}));
}

/// The platform: subscriptions, role assignments at `/`, a subscription and a resource group,
/// and the unauthenticated probes.
pub(super) fn platform_paths(setting: &Setting, out: &mut Map<String, Value>) {
    let tag = "Slipway.Admin/subscriptions";
    let version = platform_api_version();
    let list = Op::new(
        "Subscriptions_List".into(),
        "The registered subscriptions the caller holds a role in (all for an Admin).",
        tag,
        vec![version.clone()],
    )
    .answer(200, json_answer("The subscriptions.", schema_ref("SubscriptionList"), request_id()))
    .errors(&[400, 500, 503]);
    out.insert("/subscriptions".into(), json!({"get": list.build(setting)}));
    let params = vec![subscription_id(), version.clone()];
    let subscription = schema_ref("Subscription");
    let get = Op::new("Subscriptions_Get".into(), "Reads a subscription's registration.", tag, params.clone())
        .answer(200, json_answer("The registration.", subscription.clone(), request_id()))
        .errors(&[400, 403, 404, 500, 503]);
    let put = Op::new(
        "Subscriptions_CreateOrUpdate".into(),
        "Registers a subscription or changes its state (Admin).",
        tag,
        params,
    )
    .body(schema_ref("SubscriptionPut"))
    .answer(200, json_answer("Changed.", subscription.clone(), request_id()))
    .answer(201, json_answer("Registered.", subscription, request_id()))
    .errors(&[400, 403, 408, 413, 415, 500, 503]);
    out.insert("/subscriptions/{subscriptionId}".into(), json!({"get": get.build(setting), "put": put.build(setting)}));

    let providers = |id: &str, params: Vec<Value>| {
        Op::new(id.into(), "Every namespace served, each as its provider registration.", "Providers", params)
            .answer(200, json_answer("The providers.", schema_ref("ProviderList"), request_id()))
            .errors(&[400, 500, 503])
            .build(setting)
    };
    out.insert("/providers".into(), json!({"get": providers("Providers_ListAtTenantScope", vec![version.clone()])}));
    out.insert(
        "/subscriptions/{subscriptionId}/providers".into(),
        json!({"get": providers("Providers_List", vec![subscription_id(), version])}),
    );

    api_token_paths(setting, out);
    role_assignment_paths("", "Platform_RoleAssignments", Vec::new(), setting, out);
    role_assignment_paths(
        "/subscriptions/{subscriptionId}",
        "Subscription_RoleAssignments",
        vec![subscription_id()],
        setting,
        out,
    );
    role_assignment_paths(
        "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}",
        "ResourceGroup_RoleAssignments",
        vec![subscription_id(), group_name()],
        setting,
        out,
    );

    let text = |description: &str| json!({"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}, "headers": request_id()});
    let probe =
        |id: &str, summary: &str| json!({"operationId": id, "summary": summary, "tags": ["Probes"], "security": []});
    let mut healthz = probe("Healthz", "The process is up (no authentication).");
    let too_large = json!({"$ref": "#/components/responses/RequestHeaderFieldsTooLarge"});
    healthz["responses"] = json!({"200": text("`ok`."), "431": too_large});
    let mut readyz = probe("Readyz", "The store answers (no authentication).");
    readyz["responses"] = json!({
        "200": text("`ready`."),
        "431": too_large,
        "503": {"$ref": "#/components/responses/ServiceUnavailable"},
    });
    let mut openapi = probe("OpenApi", "This document, generated from the running configuration (no authentication).");
    openapi["responses"] = json!({
        "200": {
            "description": "OpenAPI 3.1.",
            "headers": request_id(),
            "content": {"application/json": {"schema": {"type": "object", "required": ["openapi", "paths"]}}},
        },
        "431": too_large,
    });
    out.insert("/healthz".into(), json!({"get": healthz}));
    out.insert("/readyz".into(), json!({"get": readyz}));
    out.insert("/openapi.json".into(), json!({"get": openapi}));
}

/// `/providers/Slipway.Authorization/apiTokens[/{tokenId}]`.
fn api_token_paths(setting: &Setting, out: &mut Map<String, Value>) {
    let tag = "Slipway.Authorization/apiTokens";
    let version = platform_api_version();
    let extension = |op: Op| {
        op.with("x-slipway-extension", json!("Not part of ARM's contract.")).with(
            "description",
            json!(
                "The platform Admin manages every token; a subscription's Owner, the tokens confined to \
                   subscriptions they own (a confined token acts only inside them)."
            ),
        )
    };
    let list = Op::new(
        "ApiTokens_List".into(),
        "The API tokens the caller manages (never a secret).",
        tag,
        vec![version.clone()],
    )
    .answer(200, json_answer("The tokens, oldest first.", schema_ref("ApiTokenList"), request_id()))
    .errors(&[400, 403, 500, 503]);
    let create = Op::new(
        "ApiTokens_Create".into(),
        "Makes a token; its text is in this answer only.",
        tag,
        vec![version.clone()],
    )
    .body(schema_ref("ApiTokenPost"))
    .answer(
        201,
        json_answer("Made; `properties.token` is the secret, shown once.", schema_ref("ApiToken"), request_id()),
    )
    .errors(&[400, 403, 408, 413, 415, 500, 503]);
    out.insert(
        "/providers/Slipway.Authorization/apiTokens".into(),
        json!({"get": extension(list).build(setting), "post": extension(create).build(setting)}),
    );
    let id = path_param("tokenId", json!({"type": "string", "maxLength": 64}), "The token's public id.");
    let get = Op::new("ApiTokens_Get".into(), "One token (never its secret).", tag, vec![id.clone(), version.clone()])
        .answer(200, json_answer("The token.", schema_ref("ApiToken"), request_id()))
        .errors(&[400, 403, 404, 500, 503]);
    let revoke =
        Op::new("ApiTokens_Revoke".into(), "Revokes a token at once, on every replica.", tag, vec![id, version])
            .answer(200, plain("Revoked."))
            .errors(&[400, 403, 404, 500, 503]);
    out.insert(
        "/providers/Slipway.Authorization/apiTokens/{tokenId}".into(),
        json!({"get": extension(get).build(setting), "delete": extension(revoke).build(setting)}),
    );
}

/// The API token schemas.
pub(super) fn api_token_schemas(out: &mut Map<String, Value>) {
    let time = || json!({"type": ["string", "null"], "format": "date-time"});
    let names =
        || json!({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 256}, "maxItems": 64});
    out.insert(
        "ApiToken".into(),
        json!({
            "type": "object",
            "required": ["id", "name", "type", "properties"],
            "properties": {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "type": {"const": "Slipway.Authorization/apiTokens"},
                "properties": {
                    "type": "object",
                    "required": ["principal", "createdAt"],
                    "properties": {
                        "principal": {"type": "string"},
                        "tenant": {"type": ["string", "null"]},
                        "groups": {"type": "array", "items": {"type": "string"}},
                        "description": {"type": "string"},
                        "subscriptions": {"type": "array", "items": {"type": "string"}},
                        "createdAt": {"type": "string", "format": "date-time"},
                        "expiresAt": time(),
                        "lastUsedAt": time(),
                        "token": {"type": "string", "description": "The secret: only in the answer that made the token."},
                    },
                },
            },
        }),
    );
    out.insert("ApiTokenList".into(), json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "array", "items": schema_ref("ApiToken")}}}));
    out.insert(
        "ApiTokenPost".into(),
        json!({
            "type": "object",
            "required": ["properties"],
            "additionalProperties": false,
            "properties": {
                "properties": {
                    "type": "object",
                    "required": ["principal"],
                    "additionalProperties": false,
                    "properties": {
                        "principal": {"type": "string", "minLength": 1, "maxLength": 256, "pattern": r"\S"},
                        "tenant": {"type": "string", "maxLength": 256},
                        "groups": names(),
                        "description": {"type": "string", "maxLength": 256},
                        "expiresInDays": {"type": "integer", "minimum": 0, "maximum": 36500},
                        "subscriptions": {
                            "type": "array",
                            "maxItems": 64,
                            "items": {"type": "string", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
                            "description": "Confine the token to these subscriptions (required unless the caller is the platform Admin).",
                        },
                    },
                },
            },
        }),
    );
}
