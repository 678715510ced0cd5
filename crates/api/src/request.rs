//! The ARM wire format in: `PUT` and `PATCH` bodies parsed and checked, with ARM's errors
//! for what is missing or malformed.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};
use slipway_types::ResourceType;

use crate::error::ArmError;

/// PUT body. Read-only fields (`id`, `name`, `type`, `systemData`) are ignored.
#[derive(Debug, Deserialize)]
pub struct PutBody {
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub properties: Option<Value>,
}

/// PATCH body: tags replace, properties merge-patch.
#[derive(Debug, Deserialize)]
pub struct PatchBody {
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub properties: Option<Value>,
}

pub fn parse_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ArmError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ArmError::invalid_content("The request body is empty; a JSON object is required.", ""));
    }
    // Before serde: its own limit (128) is deeper and its error vague.
    crate::limits::check_depth(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| {
        ArmError::bad_request(
            "InvalidRequestContent",
            format!("The request content was invalid and could not be deserialized: {e}"),
        )
    })
}

/// A tracked resource's `location`, which ARM requires on every `PUT`: absent, `null` or
/// blank is `400 LocationRequired`.
pub fn required_location(location: Option<String>) -> Result<String, ArmError> {
    match location {
        Some(l) if !l.trim().is_empty() => Ok(l),
        _ => Err(ArmError::bad_request("LocationRequired", "The 'location' property is required for this resource.")
            .with_target("location")),
    }
}

/// Server-owned fields a client may echo back inside `properties`; they are not spec.
const SERVER_PROPERTIES: &[&str] = &["provisioningState", "drift"];

/// `properties` must be an object (or absent: `{}`); server-owned fields — the
/// provisioning state and the type's read-only outputs — are dropped.
pub fn spec_properties(properties: Option<Value>, ty: &ResourceType) -> Result<Value, ArmError> {
    match properties {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        other => Ok(patch_properties(other, ty)?.unwrap_or_default()),
    }
}

/// A merge patch for `properties`: an object, with server-owned fields dropped.
pub fn patch_properties(properties: Option<Value>, ty: &ResourceType) -> Result<Option<Value>, ArmError> {
    match properties {
        None => Ok(None),
        Some(Value::Object(mut m)) => {
            for f in SERVER_PROPERTIES {
                m.remove(*f);
            }
            ty.drop_read_only(&mut m);
            Ok(Some(Value::Object(m)))
        }
        Some(_) => Err(ArmError::invalid_content("'properties' must be a JSON object.", "properties")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn location_is_required() {
        assert_eq!(required_location(Some("westus".into())).unwrap(), "westus");
        for missing in [None, Some(String::new()), Some("  ".into())] {
            let e = required_location(missing).unwrap_err();
            assert_eq!((e.status.as_u16(), e.body.code.as_str()), (400, "LocationRequired"));
            assert_eq!(e.body.target.as_deref(), Some("location"));
        }
        // `null` reads as absent.
        let body: PutBody = parse_body(br#"{"location": null}"#).unwrap();
        assert!(required_location(body.location).is_err());
    }

    #[test]
    fn bodies_nested_too_deeply_are_refused_before_deserializing() {
        let deep = format!("{{\"properties\": {}1{}}}", "[".repeat(40), "]".repeat(40));
        let e = parse_body::<PutBody>(deep.as_bytes()).unwrap_err();
        assert_eq!(e.body.code, "InvalidRequestContent");
        assert!(e.body.message.contains("nested too deeply"), "{}", e.body.message);
        let fine = format!("{{\"properties\": {{\"a\": {}1{}}}}}", "[".repeat(29), "]".repeat(29));
        assert!(parse_body::<PutBody>(fine.as_bytes()).is_ok());
    }

    #[test]
    fn properties_must_be_objects_and_drop_server_fields() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "integer"},
            "ipAddress": {"type": "string", "readOnly": true},
        }});
        let ty = ResourceType::new("Ns", "things", "Thing", vec!["1".into()], Some(&schema)).unwrap();
        assert_eq!(spec_properties(None, &ty).unwrap(), json!({}));
        let echoed = json!({"a": 1, "provisioningState": "Succeeded", "ipAddress": "10.0.0.9"});
        assert_eq!(spec_properties(Some(echoed.clone()), &ty).unwrap(), json!({"a": 1}));
        assert_eq!(patch_properties(Some(echoed), &ty).unwrap(), Some(json!({"a": 1})));
        assert!(spec_properties(Some(json!([1])), &ty).is_err());
        assert!(patch_properties(Some(json!("x")), &ty).is_err());
    }
}
