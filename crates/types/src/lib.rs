//! The resource types Slipway serves: names, api-versions, the rule for resource names, the
//! JSON Schema of each type's `properties` and actions, and the references it declares. Read
//! by the API (to check requests), the console (to draw forms) and the plan (to load the
//! configuration); it knows no HTTP, and what it refuses is an [`InvalidRequest`] carrying
//! ARM's error body.

mod name_rule;
mod schema;
mod segments;

pub use name_rule::NameRule;
pub use schema::ReferenceProperty;
use schema::{check, compile, read_only_properties, reference_properties};
pub use segments::{CHECK_DRIFT_SEGMENT, EVENTS_SEGMENT, JOBS_SEGMENT, RETRY_SEGMENT, WHAT_IF_SEGMENT};

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use slipway_domain::echo::echo;
use slipway_domain::ids::ArmId;
use slipway_domain::reference::Reference;
use slipway_domain::{CloudError, TypeKey};

/// A request a type's rules refuse: the client's to fix (a `400`), with ARM's error body.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.message)]
pub struct InvalidRequest(pub CloudError);

impl InvalidRequest {
    fn new(code: &str, message: impl Into<String>) -> Self {
        InvalidRequest(CloudError::new(code, message))
    }

    fn with_target(self, target: impl Into<String>) -> Self {
        InvalidRequest(self.0.with_target(target))
    }
}

pub struct ResourceType {
    /// Namespace as configured, e.g. `Slipway.Example`.
    pub namespace: String,
    /// Type as configured, e.g. `virtualNetworks`.
    pub type_name: String,
    /// Kind handed to automation, e.g. `VirtualNetwork`.
    pub kind: String,
    pub api_versions: Vec<String>,
    schema: Option<jsonschema::Validator>,
    /// The JSON Schema as configured (what `/openapi.json` publishes).
    raw_schema: Option<Value>,
    /// Top-level properties the schema marks `readOnly`: the outputs jobs report.
    outputs: Vec<String>,
    /// Top-level properties that reference other resources (`x-slipway-reference`).
    references: Vec<ReferenceProperty>,
    names: NameRule,
    /// POST actions by lowercased name.
    actions: HashMap<String, ActionType>,
    pub resource_kind: ResourceKind,
    /// Whether `POST {id}/whatIf` is offered (a type's `what_if`, default on).
    pub what_if: bool,
}

/// A POST action a type declares (`POST {resourceId}/{name}`), with the JSON Schema of its
/// body if it has one.
pub struct ActionType {
    /// As configured (`restart`).
    pub name: String,
    schema: Option<jsonschema::Validator>,
    raw_schema: Option<Value>,
    /// The action changes nothing a `ReadOnly` lock protects (a restart, reading keys), so
    /// such a lock does not refuse it.
    pub read_only: bool,
}

impl ActionType {
    pub fn new(type_name: &str, name: impl Into<String>, schema: Option<&Value>) -> Result<Self, TypeError> {
        let name = name.into();
        let validator = schema.map(|s| compile(s, &format!("{type_name} action {name}"))).transpose()?;
        Ok(ActionType { name, schema: validator, raw_schema: schema.cloned(), read_only: false })
    }

    /// Declared read-only (see [`ActionType::read_only`]).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The JSON Schema of the body as configured; `None`: any object.
    pub fn schema(&self) -> Option<&Value> {
        self.raw_schema.as_ref()
    }

    /// Checks an action's body against its schema; the error names the offending field.
    pub fn validate(&self, body: &Value) -> Result<(), InvalidRequest> {
        check(self.schema.as_ref(), self.raw_schema.as_ref(), body, "")
    }
}

/// ARM's two kinds of resource. A *tracked* resource lives in a location (required on every
/// `PUT`); a *proxy* resource — most child types, like a network's subnets — has none: a
/// `location` sent for one is ignored like the other server-owned fields, and none is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    Tracked,
    Proxy,
}

impl ResourceKind {
    /// Tracked for a top-level type, proxy for a child type (`virtualNetworks/subnets`).
    pub fn default_for(type_name: &str) -> Self {
        if type_name.contains('/') { ResourceKind::Proxy } else { ResourceKind::Tracked }
    }

    pub fn has_location(self) -> bool {
        self == ResourceKind::Tracked
    }
}

/// The schema keyword that declares a reference.
pub const REFERENCE_KEYWORD: &str = "x-slipway-reference";

#[derive(Debug, thiserror::Error)]
pub enum TypeError {
    #[error("resource type {0}: invalid JSON Schema: {1}")]
    InvalidSchema(String, String),
    #[error("resource type {0}: at least one api-version is required")]
    NoApiVersion(String),
    #[error("resource type {0}: {1}")]
    InvalidNameRule(String, String),
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
        let validator = schema.map(|s| compile(s, &name)).transpose()?;
        let resource_kind = ResourceKind::default_for(&type_name);
        Ok(ResourceType {
            namespace,
            type_name,
            kind: kind.into(),
            api_versions,
            schema: validator,
            raw_schema: schema.cloned(),
            outputs: schema.map(read_only_properties).unwrap_or_default(),
            references: schema.map(reference_properties).unwrap_or_default(),
            names: NameRule::default(),
            actions: HashMap::new(),
            resource_kind,
            what_if: true,
        })
    }

    /// The type's POST actions.
    pub fn with_actions(mut self, actions: impl IntoIterator<Item = ActionType>) -> Self {
        self.actions = actions.into_iter().map(|a| (a.name.to_ascii_lowercase(), a)).collect();
        self
    }

    /// The action called `name` (case-insensitively), if the type declares it.
    pub fn action(&self, name: &str) -> Option<&ActionType> {
        self.actions.get(&name.to_ascii_lowercase())
    }

    /// Every action, by name.
    pub fn actions(&self) -> impl Iterator<Item = &ActionType> {
        let mut all: Vec<&ActionType> = self.actions.values().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all.into_iter()
    }

    /// The JSON Schema of `properties` as configured; `None`: any object.
    pub fn schema(&self) -> Option<&Value> {
        self.raw_schema.as_ref()
    }

    /// Whether a job's output `name` is shown in `properties`: a top-level property the
    /// schema marks `readOnly`, or any name when the type has no schema.
    pub fn shows_output(&self, name: &str) -> bool {
        self.raw_schema.is_none() || self.outputs.iter().any(|o| o == name)
    }

    /// Whether any property references other resources (else a PATCH needs no read first).
    pub fn has_references(&self) -> bool {
        !self.references.is_empty()
    }

    /// The types this type's properties reference (`TypeKey`s).
    pub fn reference_targets(&self) -> impl Iterator<Item = TypeKey> + '_ {
        self.references.iter().filter_map(|r| r.target.split_once('/').map(|(ns, ty)| TypeKey::new(ns, ty)))
    }

    /// The references in `properties` (already valid by the schema): each must be the id of
    /// a resource of the declared type in `subscription`; `400 InvalidResourceReference`
    /// naming the property otherwise.
    pub fn references_in(&self, properties: &Value, subscription: &str) -> Result<Vec<Reference>, InvalidRequest> {
        let mut out = Vec::new();
        for r in &self.references {
            let values: Vec<(String, &Value)> = match properties.get(&r.name) {
                None | Some(Value::Null) => continue,
                Some(Value::Array(items)) if r.list => {
                    items.iter().enumerate().map(|(i, v)| (format!("{}[{i}]", r.name), v)).collect()
                }
                Some(v) => vec![(r.name.clone(), v)],
            };
            for (property, value) in values {
                let bad = |why: String| {
                    InvalidRequest::new(slipway_domain::reference::INVALID_REFERENCE, why)
                        .with_target(format!("properties.{property}"))
                };
                let text = value.as_str().ok_or_else(|| bad(format!("'{property}' must be a resource id.")))?;
                let id = ArmId::parse(text).map_err(|e| {
                    bad(format!("'{}' is not a resource id: {}.", echo(text, 200), echo(&e.to_string(), 300)))
                })?;
                if !id.subscription.eq_ignore_ascii_case(subscription) {
                    return Err(bad(format!("'{id}' is in another subscription; references stay within one.")));
                }
                let (ns, ty) = r.target.split_once('/').unwrap_or_default();
                if id.type_key() != TypeKey::new(ns, ty) {
                    return Err(bad(format!("'{id}' is not a {}.", r.target)));
                }
                out.push(Reference { property, id });
            }
        }
        Ok(out)
    }

    /// Read-only properties a client sent, dropped as ARM does: the server owns them.
    pub fn drop_read_only(&self, properties: &mut serde_json::Map<String, Value>) {
        for name in &self.outputs {
            properties.remove(name);
        }
    }

    /// Whether the type offers what-if (its jobs can run in check mode).
    pub fn with_what_if(mut self, offered: bool) -> Self {
        self.what_if = offered;
        self
    }

    /// Tracked or proxy, when not the default for the type's shape.
    pub fn with_resource_kind(mut self, kind: ResourceKind) -> Self {
        self.resource_kind = kind;
        self
    }

    /// The type's own rule for resource names (default: ARM's common rule).
    pub fn with_name_rule(mut self, names: NameRule) -> Self {
        self.names = names;
        self
    }

    pub fn name_rule(&self) -> &NameRule {
        &self.names
    }

    /// `400 InvalidResourceName` naming the rule when `name` breaks it.
    pub fn check_name(&self, name: &str) -> Result<(), InvalidRequest> {
        if self.names.allows(name) {
            return Ok(());
        }
        Err(InvalidRequest::new(
            "InvalidResourceName",
            format!(
                "The resource name '{}' is not valid for the type '{}': {}.",
                echo(name, 64),
                self.display_name(),
                self.names.describe()
            ),
        ))
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
    pub fn validate(&self, properties: &Value) -> Result<(), InvalidRequest> {
        check(self.schema.as_ref(), self.raw_schema.as_ref(), properties, "properties")
    }
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

    /// Every type, in no particular order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.values()
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
    use serde_json::json;
    use slipway_domain::ids::{ARM_NAME_PATTERN, arm_name_ok};

    use super::*;

    #[test]
    fn validation_names_the_field() {
        let schema = json!({"type": "object", "properties": {"cidr": {"type": "string"}}, "required": ["cidr"], "additionalProperties": false});
        let t = ResourceType::new("Ns", "things", "Thing", vec!["2025-01-01".into()], Some(&schema)).unwrap();
        assert!(t.validate(&json!({"cidr": "10.0.0.0/16"})).is_ok());
        let e = t.validate(&json!({"cidr": 5})).unwrap_err();
        assert_eq!(e.0.code, "InvalidRequestContent");
        assert_eq!(e.0.target.as_deref(), Some("properties.cidr"));
        let e = t.validate(&json!({"cidr": 5, "extra": true})).unwrap_err();
        assert_eq!(e.0.code, "MultipleErrorsOccurred");
        assert_eq!(e.0.details.len(), 2);
        let formats = json!({"type": "object", "properties": {"dns": {"type": "array", "items": {"type": "string", "format": "ipv4"}}}});
        let t = ResourceType::new("Ns", "t", "T", vec!["v".into()], Some(&formats)).unwrap();
        assert!(t.validate(&json!({"dns": ["10.0.0.1"]})).is_ok());
        let e = t.validate(&json!({"dns": ["", "10.0.0.1"]})).unwrap_err();
        assert_eq!(e.0.target.as_deref(), Some("properties.dns[0]"), "formats are asserted");
        assert_eq!(t.schema(), Some(&formats), "the schema as configured is kept");
        assert!(ResourceType::new("Ns", "t", "T", vec![], None).is_err());
        assert!(ResourceType::new("Ns", "t", "T", vec!["v".into()], Some(&json!({"type": 5}))).is_err());
    }

    #[test]
    fn names_follow_arm_unless_the_type_says_more() {
        let t = ResourceType::new("Ns", "things", "Thing", vec!["v".into()], None).unwrap();
        for ok in ["a", "vnet-1", "My.Name(2)", "with space", "x+y=z!", "ends.", &"n".repeat(260)] {
            assert!(t.check_name(ok).is_ok(), "{ok}");
        }
        for bad in
            ["", ".", "..", "a<b", "a>b", "100%", "a&b", "a:b", "a\\b", "a?b", "a/b", "tab\there", &"n".repeat(261)]
        {
            let e = t.check_name(bad).unwrap_err();
            assert_eq!(e.0.code, "InvalidResourceName", "{bad}");
            assert!(e.0.message.contains("1-260 characters"), "{}", e.0.message);
        }
        assert!(t.check_name("...").is_ok() && t.check_name(".a").is_ok(), "only the dot segments themselves");
        let pattern = regex::Regex::new(ARM_NAME_PATTERN).unwrap();
        for c in ['<', '>', '%', '&', ':', '\\', '?', '/', '\u{0}', '\u{1f}', '\u{7f}', '\u{9f}'] {
            assert!(!pattern.is_match(&format!("a{c}b")) && !arm_name_ok(&format!("a{c}b")), "{c:?}");
        }
        assert!(pattern.is_match("x(1) é+=!") && arm_name_ok("x(1) é+=!"));
        let long = t.check_name(&format!("{}:", "n".repeat(20_000))).unwrap_err().0.message;
        assert!(long.len() < 400, "the name is not echoed whole: {long}");

        let rule = NameRule::new("Ns/things", 24, Some("[a-z][a-z0-9-]*")).unwrap();
        assert_eq!(rule.pattern(), Some("[a-z][a-z0-9-]*"));
        let t = t.with_name_rule(rule);
        assert!(t.check_name("vnet-1").is_ok());
        for bad in ["Vnet", "1vnet", "vnet_1", "x:y", &"v".repeat(25)] {
            let e = t.check_name(bad).unwrap_err();
            assert!(e.0.message.contains("1-24 characters matching the pattern [a-z][a-z0-9-]*"), "{}", e.0.message);
        }
        assert!(t.check_name(&"v".repeat(24)).is_ok());
        assert!(t.check_name("abc\nxyz").is_err(), "the pattern matches the whole name, not a line");

        let short = NameRule::new("Ns/t", 10, None).unwrap();
        assert!(short.allows("0123456789") && !short.allows("0123456789a") && !short.allows("a/b"));
        assert!(short.describe().starts_with("use 1-10 characters"));
        for (max, pattern) in [(0, None), (261, None), (10, Some("(")), (10, Some("a{99999}{99999}"))] {
            let e = NameRule::new("Ns/t", max, pattern).unwrap_err().to_string();
            assert!(e.starts_with("resource type Ns/t: name_"), "{e}");
        }
    }
}
