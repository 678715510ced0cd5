//! A resource type's paths: the resource, its collections, its job history and event feed,
//! its actions, retry, drift check and what-if, and the role assignments at its scope (which
//! the platform's paths reuse). Each operation lists every status it can answer, in the order
//! the handlers check (`handlers::dispatch`).

use serde_json::{Map, Value, json};
use slipway_types::{CHECK_DRIFT_SEGMENT, EVENTS_SEGMENT, RETRY_SEGMENT, ResourceType, WHAT_IF_SEGMENT};

use super::operation::{
    Op, Setting, api_version, existence_check, group_name, lro, notification_uri, op_prefix, path_param,
    platform_api_version, preconditions, resource_name, subscription_id,
};
use super::responses::{async_headers, json_answer, plain, request_id};
use super::schemas::{self, TypeNames, schema_ref};

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
    let head = existence_check(format!("{prefix}_CheckExistence"), "resource", &tag, base(false), setting);
    out.insert(
        resource_path.clone(),
        json!({
            "get": get.build(setting),
            "head": head,
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
    super::tags_paths::tags_paths(&resource_path, &prefix, scope.clone(), setting, out);
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
