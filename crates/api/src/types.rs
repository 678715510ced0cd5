//! The resource types the API serves: names, api-versions and the JSON Schema of each
//! type's `properties`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use slipway_domain::TypeKey;

use crate::error::ArmError;

pub struct ResourceType {
    /// Namespace as configured, e.g. `Slipway.Example`.
    pub namespace: String,
    /// Type as configured, e.g. `virtualNetworks`.
    pub type_name: String,
    /// Kind handed to automation, e.g. `VirtualNetwork`.
    pub kind: String,
    pub api_versions: Vec<String>,
    schema: Option<jsonschema::Validator>,
}

#[derive(Debug, thiserror::Error)]
pub enum TypeError {
    #[error("resource type {0}: invalid JSON Schema: {1}")]
    InvalidSchema(String, String),
    #[error("resource type {0}: at least one api-version is required")]
    NoApiVersion(String),
}

impl ResourceType {
    pub fn new(
        namespace: impl Into<String>,
        type_name: impl Into<String>,
        kind: impl Into<String>,
        api_versions: Vec<String>,
        schema: Option<&Value>,
    ) -> Result<Self, TypeError> {
        let namespace = namespace.into();
        let type_name = type_name.into();
        let name = format!("{namespace}/{type_name}");
        if api_versions.is_empty() {
            return Err(TypeError::NoApiVersion(name));
        }
        let schema = schema
            .map(|s| jsonschema::validator_for(s).map_err(|e| TypeError::InvalidSchema(name.clone(), e.to_string())))
            .transpose()?;
        Ok(ResourceType { namespace, type_name, kind: kind.into(), api_versions, schema })
    }

    pub fn key(&self) -> TypeKey {
        TypeKey::new(&self.namespace, &self.type_name)
    }

    /// `Namespace/type`, as ARM bodies show it.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.namespace, self.type_name)
    }

    pub fn supports(&self, api_version: &str) -> bool {
        self.api_versions.iter().any(|v| v.eq_ignore_ascii_case(api_version))
    }

    /// Checks `properties` against the type's schema; the error names the offending field.
    pub fn validate(&self, properties: &Value) -> Result<(), ArmError> {
        let Some(schema) = &self.schema else { return Ok(()) };
        let errors: Vec<ArmError> = schema
            .iter_errors(properties)
            .take(10)
            .map(|e| ArmError::invalid_content(e.to_string(), target(e.instance_path().as_str())))
            .collect();
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.into_iter().next().expect("one error")),
            n => {
                let mut all = ArmError::bad_request(
                    "MultipleErrorsOccurred",
                    format!("The request content has {n} validation errors."),
                );
                all.body.details = errors.into_iter().map(|e| e.body).collect();
                Err(all)
            }
        }
    }
}

/// A JSON pointer into `properties` as an ARM target: `/subnets/0/name` → `properties.subnets[0].name`.
fn target(pointer: &str) -> String {
    let mut out = String::from("properties");
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            out.push('.');
            out.push_str(&seg);
        }
    }
    out
}

#[derive(Clone, Default)]
pub struct TypeRegistry {
    types: HashMap<TypeKey, Arc<ResourceType>>,
}

impl TypeRegistry {
    pub fn new(types: impl IntoIterator<Item = ResourceType>) -> Self {
        TypeRegistry { types: types.into_iter().map(|t| (t.key(), Arc::new(t))).collect() }
    }

    pub fn get(&self, namespace: &str, type_name: &str) -> Option<Arc<ResourceType>> {
        self.types.get(&TypeKey::new(namespace, type_name)).cloned()
    }

    pub fn by_key(&self, key: &TypeKey) -> Option<Arc<ResourceType>> {
        self.types.get(key).cloned()
    }

    /// Api-versions of any type in a namespace (operation endpoints accept these).
    pub fn namespace_versions(&self, namespace: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .types
            .values()
            .filter(|t| t.namespace.eq_ignore_ascii_case(namespace))
            .flat_map(|t| t.api_versions.iter().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn targets_read_like_arm() {
        assert_eq!(target(""), "properties");
        assert_eq!(target("/subnets/0/name"), "properties.subnets[0].name");
        assert_eq!(target("/a~1b"), "properties.a/b");
    }

    #[test]
    fn validation_names_the_field() {
        let schema = json!({"type": "object", "properties": {"cidr": {"type": "string"}}, "required": ["cidr"], "additionalProperties": false});
        let t = ResourceType::new("Ns", "things", "Thing", vec!["2025-01-01".into()], Some(&schema)).unwrap();
        assert!(t.validate(&json!({"cidr": "10.0.0.0/16"})).is_ok());
        let e = t.validate(&json!({"cidr": 5})).unwrap_err();
        assert_eq!(e.body.code, "InvalidRequestContent");
        assert_eq!(e.body.target.as_deref(), Some("properties.cidr"));
        let e = t.validate(&json!({"cidr": 5, "extra": true})).unwrap_err();
        assert_eq!(e.body.code, "MultipleErrorsOccurred");
        assert_eq!(e.body.details.len(), 2);
        assert!(ResourceType::new("Ns", "t", "T", vec![], None).is_err());
        assert!(ResourceType::new("Ns", "t", "T", vec!["v".into()], Some(&json!({"type": 5}))).is_err());
    }
}
