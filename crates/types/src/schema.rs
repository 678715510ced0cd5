//! A type's JSON Schemas: compiled with formats asserted, checked with ARM's error targets,
//! and read for the properties that reference other resources or are read-only outputs.

use serde_json::Value;
use slipway_domain::CloudError;

use crate::{InvalidRequest, REFERENCE_KEYWORD, TypeError};

/// Compiles a JSON Schema; formats (`ipv4`, `date-time`, …) are asserted, not only
/// annotations: the published schema (`/openapi.json`) says what is stored, and clients
/// validate answers by it.
pub(crate) fn compile(schema: &Value, name: &str) -> Result<jsonschema::Validator, TypeError> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| TypeError::InvalidSchema(name.to_string(), e.to_string()))
}

/// A property holding another resource's id (or, `list`, an array of them) of one type:
/// `"subnetId": {"type": "string", "x-slipway-reference": "Slipway.Example/virtualNetworks/subnets"}`.
#[derive(Clone, Debug)]
pub struct ReferenceProperty {
    pub name: String,
    /// `Namespace/type` as declared.
    pub target: String,
    pub list: bool,
}

/// `400` naming each offending field (up to ten), under `root` (`properties`, or the body).
/// An error in a secret property (`raw` marks it `writeOnly` or `x-slipway-secret`) never
/// shows the value it refused: the answer, the activity log and every reader of either
/// would see it.
pub(crate) fn check(
    schema: Option<&jsonschema::Validator>,
    raw: Option<&Value>,
    value: &Value,
    root: &str,
) -> Result<(), InvalidRequest> {
    let Some(schema) = schema else { return Ok(()) };
    let errors: Vec<InvalidRequest> = schema
        .iter_errors(value)
        .take(10)
        .map(|e| {
            let path = e.instance_path().as_str().to_string();
            let message =
                if in_secret(raw, &path) { e.masked_with("the secret value").to_string() } else { e.to_string() };
            InvalidRequest::new("InvalidRequestContent", message).with_target(target(root, &path))
        })
        .collect();
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.into_iter().next().expect("one error")),
        n => {
            let mut all =
                CloudError::new("MultipleErrorsOccurred", format!("The request content has {n} validation errors."));
            all.details = errors.into_iter().map(|e| e.0).collect();
            Err(InvalidRequest(all))
        }
    }
}

/// Top-level properties declared references (`x-slipway-reference`, on the property or on
/// an array's `items`).
pub(crate) fn reference_properties(schema: &Value) -> Vec<ReferenceProperty> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Vec::new() };
    props
        .iter()
        .filter_map(|(name, s)| {
            let target = |v: &Value| v.get(REFERENCE_KEYWORD).and_then(Value::as_str).map(str::to_string);
            match target(s) {
                Some(t) => Some(ReferenceProperty { name: name.clone(), target: t, list: false }),
                None => s.get("items").and_then(target).map(|t| ReferenceProperty {
                    name: name.clone(),
                    target: t,
                    list: true,
                }),
            }
        })
        .collect()
}

/// Top-level property names whose schema says `readOnly: true`.
pub(crate) fn read_only_properties(schema: &Value) -> Vec<String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Vec::new() };
    props
        .iter()
        .filter(|(_, s)| s.get("readOnly").and_then(Value::as_bool) == Some(true))
        .map(|(name, _)| name.clone())
        .collect()
}

/// A JSON pointer under `root` as an ARM target: `/subnets/0/name` → `properties.subnets[0].name`.
fn target(root: &str, pointer: &str) -> String {
    let mut out = String::from(root);
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

/// Whether `path` (a JSON pointer into the checked value) lies in a top-level property that
/// `raw` marks secret.
fn in_secret(raw: Option<&Value>, path: &str) -> bool {
    let Some(top) = path.strip_prefix('/').map(|p| p.split('/').next().unwrap_or(p)) else { return false };
    let Some(prop) =
        raw.and_then(|r| r.get("properties")).and_then(|p| p.get(top.replace("~1", "/").replace("~0", "~")))
    else {
        return false;
    };
    let flag = |name: &str| prop.get(name).and_then(Value::as_bool) == Some(true);
    flag("writeOnly") || flag("x-slipway-secret")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_like_arm() {
        assert_eq!(target("properties", ""), "properties");
        assert_eq!(target("", "/force"), "force");
        assert_eq!(target("properties", "/subnets/0/name"), "properties.subnets[0].name");
        assert_eq!(target("properties", "/a~1b"), "properties.a/b");
    }

    #[test]
    fn a_refused_secret_is_never_echoed() {
        let raw = serde_json::json!({"type": "object", "properties": {
            "password": {"type": "string", "minLength": 8, "writeOnly": true},
            "name": {"type": "string", "minLength": 8},
        }});
        let schema = jsonschema::validator_for(&raw).unwrap();
        let refused = |value| check(Some(&schema), Some(&raw), &value, "properties").unwrap_err().0;
        let secret = refused(serde_json::json!({"password": "hunter2"}));
        assert!(!secret.message.contains("hunter2"), "{}", secret.message);
        assert_eq!(secret.target.as_deref(), Some("properties.password"));
        let plain = refused(serde_json::json!({"name": "short"}));
        assert!(plain.message.contains("short"), "an ordinary value is named: {}", plain.message);
    }
}
