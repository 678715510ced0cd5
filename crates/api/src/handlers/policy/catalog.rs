//! The policies a write is judged by, from what its change read: the platform's definitions
//! (from the configuration) and the subscription's definitions, assignments and exemptions
//! (registry entries, `Snapshot::settings`). Parsing a definition checks its whole rule, so
//! parsed definitions and assignments are kept by id and body: a write parses only what
//! changed since the last.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use slipway_domain::access::Scope;
use slipway_domain::policy_admission::{Assignment, Definition, Exemption, Policies};
use slipway_domain::policy_rule::{Aliases, RuleError};
use slipway_domain::resource::Setting;
use slipway_store::EntryKind;

/// A platform definition: parsed, and its `properties` as configured (for `GET`).
#[derive(Clone, Debug)]
pub struct PlatformDefinition {
    pub name: String,
    pub definition: Arc<Definition>,
    pub properties: Value,
}

/// What policies are judged with: the served types' aliases, the platform's definitions,
/// and what was parsed of the registry's.
#[derive(Debug, Default)]
pub struct PolicyCatalog {
    pub aliases: Aliases,
    pub platform: Vec<PlatformDefinition>,
    definitions: Parsed<Definition>,
    assignments: Parsed<Assignment>,
}

/// Parsed values by id, each with the body it was parsed from.
#[derive(Debug)]
struct Parsed<T>(Mutex<HashMap<String, (String, Arc<T>)>>);

impl<T> Default for Parsed<T> {
    fn default() -> Self {
        Parsed(Mutex::new(HashMap::new()))
    }
}

impl<T> Parsed<T> {
    fn get(&self, id: &str, body: &str, parse: impl FnOnce() -> Option<T>) -> Option<Arc<T>> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, parsed)) = map.get(id)
            && seen == body
        {
            return Some(Arc::clone(parsed));
        }
        let parsed = Arc::new(parse()?);
        map.insert(id.to_string(), (body.to_string(), Arc::clone(&parsed)));
        Some(parsed)
    }
}

/// A registry entry of a policy kind: `{"id", "scope"?, "properties"}`.
pub(crate) struct Stored {
    pub id: String,
    pub scope: Option<String>,
    pub properties: Value,
}

impl Stored {
    pub(crate) fn decode(body: &str) -> Option<Stored> {
        let v: Value = serde_json::from_str(body).ok()?;
        Some(Stored {
            id: v["id"].as_str()?.to_string(),
            scope: v["scope"].as_str().map(str::to_string),
            properties: v.get("properties").cloned().unwrap_or(Value::Null),
        })
    }

    pub(crate) fn encode(id: &str, scope: Option<&str>, properties: &Value) -> String {
        let mut v = serde_json::json!({"id": id, "properties": properties});
        if let Some(scope) = scope {
            v["scope"] = serde_json::json!(scope);
        }
        v.to_string()
    }
}

impl PolicyCatalog {
    pub fn new(aliases: Aliases, platform: Vec<PlatformDefinition>) -> PolicyCatalog {
        PolicyCatalog { aliases, platform, ..PolicyCatalog::default() }
    }

    /// A definition's rule checked against the served types: what a `PUT` refuses.
    pub(crate) fn parse_definition(&self, id: &str, properties: &Value) -> Result<Definition, RuleError> {
        Definition::parse(id, properties, &self.aliases)
    }

    /// The policies among a change's settings, over the platform's definitions. An entry
    /// that no longer parses (its type's schema changed since) is left out, and logged.
    pub(crate) fn policies(&self, settings: &[Setting]) -> Policies {
        let mut policies = Policies {
            definitions: self.platform.iter().map(|p| Arc::clone(&p.definition)).collect(),
            ..Policies::default()
        };
        for s in settings {
            let kind = EntryKind::from_tag(&s.kind);
            let unreadable = |what: &str, e: &dyn std::fmt::Display| {
                tracing::warn!(entry = %s.id, error = %e, "a stored policy {what} cannot be used; it is ignored");
            };
            match kind {
                Some(EntryKind::PolicyDefinition) => {
                    let parsed = self.definitions.get(&s.id, &s.body, || {
                        let stored = Stored::decode(&s.body)?;
                        self.parse_definition(&stored.id, &stored.properties)
                            .inspect_err(|e| unreadable("definition", e))
                            .ok()
                    });
                    policies.definitions.extend(parsed);
                }
                Some(EntryKind::PolicyAssignment) => {
                    let parsed = self.assignments.get(&s.id, &s.body, || {
                        let stored = Stored::decode(&s.body)?;
                        let scope = Scope::stored(stored.scope.as_deref()?);
                        Assignment::parse(&stored.id, scope, &stored.properties)
                            .inspect_err(|e| unreadable("assignment", e))
                            .ok()
                    });
                    policies.assignments.extend(parsed);
                }
                Some(EntryKind::PolicyExemption) => {
                    let parsed = Stored::decode(&s.body).and_then(|stored| {
                        let scope = Scope::stored(stored.scope.as_deref()?);
                        Exemption::parse(&stored.id, scope, &stored.properties)
                            .inspect_err(|e| unreadable("exemption", e))
                            .ok()
                    });
                    policies.exemptions.extend(parsed);
                }
                _ => {}
            }
        }
        policies
    }
}
