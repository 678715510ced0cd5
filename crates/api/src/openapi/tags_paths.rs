//! `{scope}/providers/Microsoft.Resources/tags/default` (`handlers::tags`) for a resource
//! group and for every type's resources: ARM's tags at a scope, and their schemas.

use serde_json::{Map, Value, json};

use super::operation::{Op, Setting, platform_api_version};
use super::responses::{json_answer, request_id};
use super::schemas::schema_ref;

const TAG: &str = "Microsoft.Resources/tags";

/// The tags paths under `scope_path`, whose parameters are `scope_params`.
pub(super) fn tags_paths(
    scope_path: &str,
    prefix: &str,
    mut params: Vec<Value>,
    setting: &Setting,
    out: &mut Map<String, Value>,
) {
    params.push(platform_api_version());
    let answer = || json_answer("The tags.", schema_ref("TagsResource"), request_id());
    let op = |verb: &str, summary: &str| Op::new(format!("{prefix}_{verb}"), summary, TAG, params.clone());
    let get = op("GetTags", "The tags at this scope.").answer(200, answer()).errors(&[400, 403, 404, 500, 503]);
    let put = op("PutTags", "Replaces the tags at this scope, at once: no spec change, no job.")
        .body(schema_ref("TagsPut"))
        .answer(200, answer())
        .errors(&[400, 403, 404, 408, 409, 413, 415, 500, 503]);
    let patch = op(
        "PatchTags",
        "`Merge` sets the tags given, `Replace` makes them the only ones, `Delete` removes them (by name, or by \
         name and value); at once, no job.",
    )
    .body(schema_ref("TagsPatch"))
    .answer(200, answer())
    .errors(&[400, 403, 404, 408, 409, 413, 415, 500, 503]);
    let delete = op("DeleteTags", "Removes every tag at this scope.")
        .answer(200, answer())
        .errors(&[400, 403, 404, 409, 500, 503]);
    out.insert(
        format!("{scope_path}/providers/Microsoft.Resources/tags/default"),
        json!({"get": get.build(setting), "put": put.build(setting), "patch": patch.build(setting), "delete": delete.build(setting)}),
    );
}

pub(super) fn tags_schemas(out: &mut Map<String, Value>) {
    let tags = json!({"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 50});
    let properties = json!({"type": "object", "properties": {"tags": tags}});
    out.insert(
        "TagsResource".into(),
        json!({
            "type": "object",
            "required": ["id", "name", "type", "properties"],
            "properties": {
                "id": {"type": "string"},
                "name": {"const": "default"},
                "type": {"const": "Microsoft.Resources/tags"},
                "properties": properties,
            },
        }),
    );
    out.insert("TagsPut".into(), json!({"type": "object", "properties": {"properties": properties}}));
    out.insert(
        "TagsPatch".into(),
        json!({
            "type": "object",
            "required": ["operation"],
            "properties": {"operation": {"enum": ["Merge", "Replace", "Delete"]}, "properties": properties},
        }),
    );
}
