//! The schemas that depend on a type: its own JSON Schema of `properties` and the resource,
//! `PUT`, patch and list bodies built around it, and the path parameters' rules. The shapes
//! every document has are in `common_schemas`.

use serde_json::{Map, Value, json};
use slipway_domain::ids::{
    ARM_NAME_MAX_LENGTH, ARM_NAME_PATTERN, DOT_SEGMENTS, GROUP_NAME_MAX_LENGTH, GROUP_NAME_PATTERN, GUID_PATTERN,
};
use slipway_types::ResourceType;

use crate::limits::{MAX_TAG_KEY_CHARS, MAX_TAG_VALUE_CHARS, MAX_TAGS};

/// `#/components/schemas/{name}`.
pub(super) fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// A tag name: none of `<>%&\?/`, no control characters (`limits::check_tags`).
const TAG_NAME_PATTERN: &str = r"^[^<>%&\\?/\u0000-\u001f\u007f-\u009f]+$";

pub(super) fn guid() -> Value {
    json!({"type": "string", "pattern": GUID_PATTERN})
}

pub(super) fn group_name() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": GROUP_NAME_MAX_LENGTH, "pattern": GROUP_NAME_PATTERN})
}

/// ARM's common rule for resource names (every method), or with the type's own rule on top
/// (`PUT`, where the type's rule is checked).
pub(super) fn resource_name(ty: Option<&ResourceType>) -> Value {
    let mut s = json!({
        "type": "string",
        "minLength": 1,
        "maxLength": ARM_NAME_MAX_LENGTH,
        "pattern": ARM_NAME_PATTERN,
        "not": {"enum": DOT_SEGMENTS},
    });
    if let Some(rule) = ty.map(ResourceType::name_rule) {
        s["maxLength"] = json!(rule.max_length());
        if let Some(p) = rule.pattern() {
            s["pattern"] = json!(format!("^(?:{p})$"));
            s["allOf"] = json!([{"pattern": ARM_NAME_PATTERN}]);
        }
        s["description"] = json!(format!("The type's name rule: {}.", rule.describe()));
    }
    s
}

/// A path segment that is not a dot segment (a client would remove it).
pub(super) fn segment() -> Value {
    json!({"type": "string", "minLength": 1, "not": {"enum": DOT_SEGMENTS}})
}

fn tags() -> Value {
    json!({
        "type": "object",
        "maxProperties": MAX_TAGS,
        "propertyNames": {"minLength": 1, "maxLength": MAX_TAG_KEY_CHARS, "pattern": TAG_NAME_PATTERN},
        "additionalProperties": {"type": "string", "maxLength": MAX_TAG_VALUE_CHARS},
        "description": "At most 50 tags; names 1-512 characters without <>%&\\?/ or control characters, values at most \
                        256 characters.",
    })
}

/// `$ref`s inside an embedded JSON Schema that point into its own document (`#…`) made to
/// point into its component (`#/components/schemas/{name}…`); the root's `$schema` and `$id`
/// dropped (the document's dialect applies).
fn embedded(schema: &Value, name: &str) -> Value {
    fn rebase(v: &mut Value, base: &str) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get_mut("$ref")
                    && let Some(rest) = r.strip_prefix('#')
                {
                    *r = format!("{base}{rest}");
                }
                m.values_mut().for_each(|v| rebase(v, base));
            }
            Value::Array(a) => a.iter_mut().for_each(|v| rebase(v, base)),
            _ => {}
        }
    }
    let mut s = schema.clone();
    if let Value::Object(m) = &mut s {
        m.remove("$schema");
        m.remove("$id");
    }
    rebase(&mut s, &format!("#/components/schemas/{name}"));
    s
}

/// Component names of a type's schemas.
pub(super) struct TypeNames {
    /// `Slipway.Example.virtualNetworks` (a child type `….virtualNetworks.subnets`): the
    /// resource body.
    pub resource: String,
    pub list: String,
    pub put: String,
    pub patch: String,
    pub properties: String,
    pub response_properties: String,
}

impl TypeNames {
    pub fn of(ty: &ResourceType) -> Self {
        let base = format!("{}.{}", ty.namespace, ty.type_name.replace('/', "."));
        TypeNames {
            resource: base.clone(),
            list: format!("{base}.List"),
            put: format!("{base}.Put"),
            patch: format!("{base}.Patch"),
            properties: format!("{base}.Properties"),
            response_properties: format!("{base}.ResponseProperties"),
        }
    }
}

/// The type's schemas: its `properties` as configured (request) and as answered (with
/// `provisioningState`), the `PUT` body, the resource and the list.
pub(super) fn type_schemas(ty: &ResourceType, out: &mut Map<String, Value>) {
    let n = TypeNames::of(ty);
    let provisioning_state = schema_ref("ProvisioningState");
    let (request, mut response) = match ty.schema() {
        Some(s) => (embedded(s, &n.properties), embedded(s, &n.response_properties)),
        None => (json!({"type": "object"}), json!({"type": "object"})),
    };
    // The answer's properties are the stored ones (valid when written) plus the state.
    match &mut response {
        Value::Object(m) => {
            let props = m.entry("properties").or_insert_with(|| json!({}));
            if let Value::Object(p) = props {
                p.insert("provisioningState".into(), provisioning_state.clone());
                p.insert("drift".into(), schema_ref("Drift"));
            }
            let required = m.entry("required").or_insert_with(|| json!([]));
            if let Value::Array(r) = required {
                r.push(json!("provisioningState"));
            }
        }
        other => {
            *other = json!({"type": "object", "properties": {"provisioningState": provisioning_state}, "required": ["provisioningState"]})
        }
    }
    let tracked = ty.resource_kind.has_location();
    let mut put_required = if tracked { vec![json!("location")] } else { vec![] };
    if ty.validate(&json!({})).is_err() {
        put_required.push(json!("properties"));
    }
    let ignored = if tracked {
        "`id`, `name`, `type` and `systemData` are"
    } else {
        "A proxy resource has no location: `location`, `id`, `name`, `type` and `systemData` are"
    };
    let mut put = json!({
        "type": "object",
        "description": format!("A {} to create or replace. {ignored} ignored; a `provisioningState` inside \
                                `properties` is dropped.", ty.kind),
        "required": put_required,
        "properties": {
            "tags": tags(),
            "properties": schema_ref(&n.properties),
        },
    });
    let mut resource_properties = json!({
        "id": {"type": "string"},
        "name": {"type": "string"},
        "type": {"const": ty.display_name()},
        "etag": {"type": "string", "description": "Changes with every write; send it as `If-Match`."},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
        "properties": schema_ref(&n.response_properties),
        "systemData": schema_ref("SystemData"),
    });
    if tracked {
        put["properties"]["location"] = json!({"type": "string", "minLength": 1, "pattern": r"\S"});
        resource_properties["location"] = json!({"type": "string"});
    }
    let resource = json!({
        "type": "object",
        "description": format!("A {} resource. It never has a top-level `status`.", ty.kind),
        "required": ["id", "name", "type", "tags", "properties", "systemData", "etag"],
        "properties": resource_properties,
        "not": {"required": ["status"]},
    });
    let list = json!({
        "type": "object",
        "required": ["value"],
        "properties": {
            "value": {"type": "array", "items": schema_ref(&n.resource)},
            "nextLink": {"type": "string", "description": "The next page (`$skipToken`), absent on the last."},
        },
    });
    // A merge patch: any of the properties, each also `null` (remove it); the merged
    // properties are checked against the whole schema.
    let patch_properties = match request.get("properties").and_then(Value::as_object) {
        Some(fields) => {
            let pointer = |k: &str| k.replace('~', "~0").replace('/', "~1");
            let fields: Map<String, Value> = fields
                .keys()
                .map(|k| {
                    let field =
                        json!({"$ref": format!("#/components/schemas/{}/properties/{}", n.properties, pointer(k))});
                    (k.clone(), json!({"anyOf": [field, {"type": "null"}]}))
                })
                .collect();
            let mut p = json!({"type": "object", "properties": fields});
            if let Some(extra) = request.get("additionalProperties") {
                p["additionalProperties"] = extra.clone();
            }
            p
        }
        None => json!({"type": "object"}),
    };
    let patch = json!({
        "type": "object",
        "description": "`tags` replace the resource's; `properties` is an RFC 7396 JSON merge patch, and the merged \
                        properties must keep to the type's schema.",
        "properties": {"tags": tags(), "properties": patch_properties},
    });
    out.insert(n.patch, patch);
    out.insert(n.properties, request);
    out.insert(n.response_properties, response);
    out.insert(n.put, put);
    out.insert(n.resource, resource);
    out.insert(n.list, list);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_schemas_point_into_their_component() {
        let s = json!({"$schema": "x", "$id": "y", "$defs": {"a": {"type": "string"}}, "properties": {"p": {"$ref": "#/$defs/a"}, "q": {"$ref": "#"}}});
        let e = embedded(&s, "Ns.t.Properties");
        assert_eq!(e["properties"]["p"]["$ref"], "#/components/schemas/Ns.t.Properties/$defs/a");
        assert_eq!(e["properties"]["q"]["$ref"], "#/components/schemas/Ns.t.Properties");
        assert!(e.get("$schema").is_none() && e.get("$id").is_none());
    }

    #[test]
    fn answers_allow_the_provisioning_state_whatever_the_schema_says() {
        let strict = json!({"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}}});
        let ty = ResourceType::new("Ns", "t", "T", vec!["v".into()], Some(&strict)).unwrap();
        let mut out = Map::new();
        type_schemas(&ty, &mut out);
        let answer = &out["Ns.t.ResponseProperties"];
        assert!(answer["properties"]["provisioningState"].is_object());
        assert_eq!(answer["required"], json!(["provisioningState"]));
        assert_eq!(out["Ns.t.Properties"], strict, "requests keep to the schema as configured");
        assert_eq!(out["Ns.t.Put"]["required"], json!(["location"]), "{{}} is valid properties");
    }
}
