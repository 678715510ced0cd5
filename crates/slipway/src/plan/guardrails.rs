//! The guardrails' part of the plan. `[quota]`: each meter checked against the type it
//! counts — the type is served, the property is one its schema declares, and a table prices
//! every value the schema allows — so a meter never silently counts nothing. `[policy]`: the
//! served types' property aliases, and each platform definition read and its rule checked
//! against them.

use serde_json::Value;
use slipway_domain::TypeKey;
use slipway_domain::quota::{Limits, Measure, Meter, MeterDefinition, MeterName, OwnerLimits, QuotaBook};
use slipway_types::TypeRegistry;

use std::sync::Arc;

use slipway_api::{PlatformDefinition, PolicyCatalog};
use slipway_domain::policy_admission::Definition;
use slipway_domain::policy_rule::Aliases;

use super::Found;
use crate::config::{Config, MeterConfig, OwnerLimitsConfig};

pub(super) fn quotas(config: &Config, types: &TypeRegistry, found: &mut Found) -> QuotaBook {
    let mut meters: Vec<MeterDefinition> = Vec::new();
    for (i, m) in config.quota.meters.iter().enumerate() {
        let here = format!("quota.meters[{i}] ({})", m.name);
        if let Some(meter) = found.within(&here, |found| meter(m, types, found)) {
            if meters.iter().any(|d| d.meter.name == meter.name) {
                found.add(format!("{here}: the meter name is used twice"));
                continue;
            }
            meters.push(MeterDefinition { meter, defaults: Limits { subscription: m.limit, group: m.group_limit } });
        }
    }
    let owner_limits = match config.quota.owner_limits {
        OwnerLimitsConfig::AdminOnly => OwnerLimits::AdminOnly,
        OwnerLimitsConfig::BelowCeiling => OwnerLimits::BelowCeiling,
    };
    QuotaBook { meters, owner_limits }
}

fn meter(m: &MeterConfig, types: &TypeRegistry, found: &mut Found) -> Option<Meter> {
    let name = found.ok(MeterName::parse(&m.name));
    let Some((namespace, type_name)) = m.type_name.split_once('/') else {
        found.add(format!("type = '{}': write Namespace/type", m.type_name));
        return None;
    };
    let Some(ty) = types.get(namespace, type_name) else {
        found.add(format!("type = '{}' is not a configured type", m.type_name));
        return None;
    };
    let measure = match (&m.property, &m.table) {
        (None, None) => Measure::Count,
        (None, Some(_)) => {
            found.add("a table needs the property whose values it prices");
            return None;
        }
        (Some(property), table) => {
            let path = property_path(property, found)?;
            let declared = declared(ty.schema(), &path);
            if ty.schema().is_some() && declared.is_none() {
                found.add(format!("property = '{property}': the type's schema declares no such property"));
            }
            match table {
                None => Measure::Sum { path },
                Some(values) => {
                    let allowed = declared.and_then(|d| d.get("enum")).and_then(Value::as_array);
                    for value in allowed.into_iter().flatten().filter_map(Value::as_str) {
                        if !values.contains_key(value) {
                            found.add(format!(
                                "table: the schema allows {property} = '{value}', which it does not price"
                            ));
                        }
                    }
                    Measure::Table { path, values: values.clone() }
                }
            }
        }
    };
    Some(Meter { name: name?, type_key: TypeKey::parse(&m.type_name), measure, unit: m.unit.clone() })
}

/// `properties.a.b` as the path `[a, b]` under a spec's properties.
fn property_path(property: &str, found: &mut Found) -> Option<Vec<String>> {
    let path: Vec<String> = match property.strip_prefix("properties.") {
        Some(rest) => rest.split('.').map(str::to_string).collect(),
        None => {
            found.add(format!("property = '{property}': write properties.<name> (a dotted path under properties)"));
            return None;
        }
    };
    if path.iter().any(String::is_empty) {
        found.add(format!("property = '{property}' has an empty segment"));
        return None;
    }
    Some(path)
}

/// The schema of the property at `path`, if the type's schema declares one.
fn declared<'a>(schema: Option<&'a Value>, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(schema?, |schema, segment| schema.get("properties")?.get(segment))
}

/// The served types' aliases and the platform's policy definitions.
pub(super) fn policies(config: &Config, types: &TypeRegistry, found: &mut Found) -> PolicyCatalog {
    let mut aliases = Aliases::default();
    for t in types.all() {
        aliases.add_type(&format!("{}/{}", t.namespace, t.type_name), t.schema());
    }
    let mut platform: Vec<PlatformDefinition> = Vec::new();
    for (i, d) in config.policy.definitions.iter().enumerate() {
        let here = format!("policy.definitions[{i}] ({})", d.name);
        let read = found.within(&here, |found| {
            if d.name.is_empty()
                || d.name.len() > 128
                || d.name.contains(['/', '\\', '?', '#', '%', '&', ':', '<', '>', '*', '+'])
            {
                found.add("name: 1 to 128 characters, none of <>*%&:\\?/+#");
                return None;
            }
            let path = config.resolve(&d.file);
            let text = found.ok(std::fs::read_to_string(&path).map_err(|e| format!("file {}: {e}", path.display())))?;
            let body: Value =
                found.ok(serde_json::from_str(&text).map_err(|e| format!("file {}: {e}", path.display())))?;
            let properties = body.get("properties").cloned().unwrap_or(body);
            let id = format!("/providers/Microsoft.Authorization/policyDefinitions/{}", d.name);
            let definition =
                found
                    .ok(Definition::parse(&id, &properties, &aliases)
                        .map_err(|e| format!("file {}: {e}", path.display())))?;
            Some(PlatformDefinition { name: d.name.clone(), definition: Arc::new(definition), properties })
        });
        if let Some(p) = read {
            if platform.iter().any(|other| other.name.eq_ignore_ascii_case(&p.name)) {
                found.add(format!("{here}: the name is used twice"));
                continue;
            }
            platform.push(p);
        }
    }
    PolicyCatalog::new(aliases, platform)
}
