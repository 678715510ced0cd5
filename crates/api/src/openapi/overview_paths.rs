//! The overview lists (`handlers::overview`) and resource groups (`handlers::groups`): a
//! subscription's groups and each group's own paths, its or a group's resources of every
//! type, and its operations; their paths and schemas.

use serde_json::{Map, Value, json};
use slipway_types::ResourceType;

use super::operation::{Op, Setting, existence_check, group_name, lro, platform_api_version, subscription_id};
use super::responses::{async_headers, json_answer, plain, request_id};
use super::schemas::{TypeNames, schema_ref};

const TAG: &str = "Overview";
const GROUPS: &str = "ResourceGroups";

pub(super) fn overview_paths(setting: &Setting, out: &mut Map<String, Value>) {
    let version = platform_api_version();
    let paging = |filter: Option<&str>| {
        let mut params = vec![
            json!({"name": "$top", "in": "query", "required": false, "description": "Page size (default `server.page_size`).", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}),
            json!({"name": "$skipToken", "in": "query", "required": false, "description": "From a `nextLink`; anything else is `400 InvalidSkipToken`.", "schema": {"type": "string"}}),
        ];
        if let Some(description) = filter {
            params.push(json!({"name": "$filter", "in": "query", "required": false, "description": description, "schema": {"type": "string", "maxLength": 2000}}));
        }
        params
    };
    let list = |id: &str, summary: &str, mut params: Vec<Value>, filter: Option<&str>, schema: &str| {
        params.push(version.clone());
        params.extend(paging(filter));
        Op::new(id.into(), summary, TAG, params)
            .answer(200, json_answer("A page; follow `nextLink` while there is one.", schema_ref(schema), request_id()))
            .errors(&[400, 403, 500, 503])
            .with("x-ms-pageable", json!({"nextLinkName": "nextLink"}))
            .build(setting)
    };
    let sub = || vec![subscription_id()];
    let in_group = || vec![subscription_id(), group_name()];
    let group_filter = "Clauses `field eq 'value'` joined by `and`: `tagName` (with an optional `tagValue`). \
                        Anything else is `400 InvalidFilter`. A filtered page may hold fewer than `$top`.";
    out.insert(
        "/subscriptions/{subscriptionId}/resourceGroups".into(),
        json!({"get": list("ResourceGroups_List", "The groups the caller may read within, by name.", sub(), Some(group_filter), "ResourceGroupList")}),
    );
    let group_params = || {
        let mut p = in_group();
        p.push(version.clone());
        p
    };
    let get_group = Op::new(
        "ResourceGroups_Get".into(),
        "A resource group; `404 ResourceGroupNotFound` unless it exists (`403` to a caller who may read nothing in it).",
        GROUPS,
        group_params(),
    )
    .answer(200, json_answer("The group.", schema_ref("ResourceGroup"), request_id()))
    .errors(&[400, 403, 404, 500, 503]);
    let head_group =
        existence_check("ResourceGroups_CheckExistence".into(), "resource group", GROUPS, group_params(), setting);
    let put_group = Op::new(
        "ResourceGroups_CreateOrUpdate".into(),
        "Creates a resource group, or replaces its tags and `managedBy` (its location is fixed: \
         `409 InvalidResourceGroupLocation`). Answers at once.",
        GROUPS,
        group_params(),
    )
    .body(schema_ref("ResourceGroupPut"))
    .answer(200, json_answer("Replaced.", schema_ref("ResourceGroup"), request_id()))
    .answer(201, json_answer("Created.", schema_ref("ResourceGroup"), request_id()))
    .errors(&[400, 403, 408, 409, 413, 415, 500, 503]);
    let patch_group = Op::new(
        "ResourceGroups_Update".into(),
        "Replaces a group's tags (when given) and `managedBy`. Answers at once.",
        GROUPS,
        group_params(),
    )
    .body(schema_ref("ResourceGroupPatch"))
    .answer(200, json_answer("Updated.", schema_ref("ResourceGroup"), request_id()))
    .errors(&[400, 403, 404, 408, 409, 413, 415, 500, 503]);
    let (lro_flag, lro_options) = {
        let [flag, options] = lro("location");
        (flag, options)
    };
    let delete_group = Op::new(
        "ResourceGroups_Delete".into(),
        "Deletes a group and everything in it: each resource through its own delete (children before \
         parents, referrers before what they reference), then the group. The operation ends `Failed`, \
         naming what could not be deleted, and the group stays; `409 ResourceInUse` while something \
         outside the group references something in it.",
        GROUPS,
        group_params(),
    )
    .answer(202, {
        let mut r = plain("Accepted; follow `Azure-AsyncOperation`.");
        r["headers"] = async_headers(true);
        r
    })
    .errors(&[400, 403, 404, 409, 500, 503])
    .with(lro_flag.0, lro_flag.1)
    .with(lro_options.0, lro_options.1);
    out.insert(
        "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}".into(),
        json!({
            "get": get_group.build(setting),
            "head": head_group,
            "put": put_group.build(setting),
            "patch": patch_group.build(setting),
            "delete": delete_group.build(setting),
        }),
    );
    super::tags_paths::tags_paths(
        "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}",
        "ResourceGroups",
        in_group(),
        setting,
        out,
    );
    let resources_filter = "Clauses `field eq 'value'` joined by `and`: `resourceType` (`Namespace/type`), \
                            `tagName` (with an optional `tagValue`), `provisioningState`, and \
                            `referencedResourceId` (what references that resource: at most `$top`, one \
                            page). Anything else is `400 InvalidFilter`. A filtered page may hold fewer \
                            than `$top`.";
    out.insert(
        "/subscriptions/{subscriptionId}/resources".into(),
        json!({"get": list("Resources_List", "The subscription's resources of every type, in key order.", sub(), Some(resources_filter), "GenericResourceList")}),
    );
    out.insert(
        "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/resources".into(),
        json!({"get": list("Resources_ListByResourceGroup", "The group's resources of every type, in key order.", in_group(), Some(resources_filter), "GenericResourceList")}),
    );
    let mut operations = list(
        "OperationStatuses_List",
        "The subscription's operations, newest first (a Slipway extension of ARM).",
        sub(),
        Some(
            "`status eq 'Failed'` (a provisioning state) and `approver eq 'me'` (only requests waiting for a decision the caller may make), joined by `and`; anything else is `400 InvalidFilter`.",
        ),
        "OperationStatusList",
    );
    operations["x-slipway-extension"] = json!("Not part of ARM's contract: ARM lists no operations.");
    out.insert("/subscriptions/{subscriptionId}/operationStatuses".into(), json!({"get": operations}));
}

pub(super) fn overview_schemas(types: &[&ResourceType], out: &mut Map<String, Value>) {
    let list = |item: Value| {
        json!({
            "type": "object",
            "required": ["value"],
            "properties": {
                "value": {"type": "array", "items": item},
                "nextLink": {"type": "string", "description": "The next page (`$skipToken`), absent on the last."},
            },
        })
    };
    let tags = json!({"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 50});
    out.insert(
        "ResourceGroup".into(),
        json!({
            "type": "object",
            "required": ["id", "name", "type", "location", "properties"],
            "properties": {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "type": {"const": "Microsoft.Resources/resourceGroups"},
                "location": {"type": "string"},
                "managedBy": {"type": "string"},
                "tags": tags,
                "properties": {"type": "object", "properties": {"provisioningState": {"enum": ["Succeeded", "Deleting"]}}},
            },
        }),
    );
    out.insert(
        "ResourceGroupPut".into(),
        json!({
            "type": "object",
            "required": ["location"],
            "properties": {"location": {"type": "string", "minLength": 1}, "tags": tags, "managedBy": {"type": "string"}},
        }),
    );
    out.insert(
        "ResourceGroupPatch".into(),
        json!({"type": "object", "properties": {"tags": tags, "managedBy": {"type": "string"}}}),
    );
    out.insert("ResourceGroupList".into(), list(schema_ref("ResourceGroup")));
    super::tags_paths::tags_schemas(out);
    let mut names: Vec<String> = types.iter().map(|t| TypeNames::of(t).resource).collect();
    // The document's ETag must not depend on a map's order.
    names.sort();
    let resources: Vec<Value> = names.iter().map(|n| schema_ref(n)).collect();
    let item = if resources.is_empty() { json!({"type": "object"}) } else { json!({"anyOf": resources}) };
    out.insert("GenericResourceList".into(), list(item));
    out.insert("OperationStatusList".into(), list(schema_ref("OperationStatus")));
}
