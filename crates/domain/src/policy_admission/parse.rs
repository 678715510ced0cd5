//! Reading ARM's policy bodies — a definition's, an assignment's, an exemption's
//! `properties` — into what `policy_admission` decides with; each refusal says what to fix.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Assignment, Definition, Effect, Enforcement, Exemption, Mode, Parameter};
use crate::access::Scope;
use crate::policy_rule::{Aliases, Expr, PolicyRule, RuleError};
use crate::time::Timestamp;

impl Definition {
    /// `{displayName?, mode?, parameters?, policyRule}`.
    pub fn parse(id: &str, properties: &Value, aliases: &Aliases) -> Result<Definition, RuleError> {
        let rule = properties.get("policyRule").ok_or_else(|| RuleError("properties.policyRule is required".into()))?;
        let mode = match properties.get("mode").and_then(Value::as_str).unwrap_or("All") {
            m if m.eq_ignore_ascii_case("all") => Mode::All,
            m if m.eq_ignore_ascii_case("indexed") => Mode::Indexed,
            other => return Err(RuleError(format!("the mode '{other}' is not All or Indexed"))),
        };
        let mut parameters = BTreeMap::new();
        if let Some(ps) = properties.get("parameters") {
            let ps = ps.as_object().ok_or_else(|| RuleError("properties.parameters is an object".into()))?;
            for (name, p) in ps {
                let allowed = p.get("allowedValues").map(|a| {
                    a.as_array()
                        .cloned()
                        .ok_or_else(|| RuleError(format!("the parameter '{name}''s allowedValues is a list")))
                });
                parameters.insert(
                    name.clone(),
                    Parameter { default: p.get("defaultValue").cloned(), allowed: allowed.transpose()? },
                );
            }
        }
        let rule = PolicyRule::parse(rule, aliases)?;
        if let Expr::Literal(Value::String(effect)) = &rule.then.effect {
            match Effect::parse(effect) {
                None => {
                    return Err(RuleError(format!(
                        "the effect '{effect}' is not supported: deny, audit, append, modify, denyAction, \
                         requireApproval or disabled"
                    )));
                }
                Some(Effect::RequireApproval) => {
                    crate::approval::ApprovalRule::parse(rule.then.details.as_ref())?;
                }
                Some(_) => {}
            }
        }
        let display_name = properties.get("displayName").and_then(Value::as_str).map(str::to_string);
        Ok(Definition { id: id.to_string(), display_name, mode, parameters, rule })
    }
}

impl Assignment {
    /// `{policyDefinitionId, parameters?: {name: {value}}, notScopes?, enforcementMode?}`.
    pub fn parse(id: &str, scope: Scope, properties: &Value) -> Result<Assignment, RuleError> {
        let definition_id = properties
            .get("policyDefinitionId")
            .and_then(Value::as_str)
            .ok_or_else(|| RuleError("properties.policyDefinitionId is required".into()))?
            .to_string();
        let mut parameters = Map::new();
        if let Some(ps) = properties.get("parameters") {
            let ps = ps.as_object().ok_or_else(|| RuleError("properties.parameters is an object".into()))?;
            for (name, p) in ps {
                let value = p
                    .get("value")
                    .ok_or_else(|| RuleError(format!("the parameter '{name}' is given as {{\"value\": …}}")))?;
                parameters.insert(name.clone(), value.clone());
            }
        }
        let not_scopes = match properties.get("notScopes") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => v
                .as_array()
                .ok_or_else(|| RuleError("properties.notScopes is a list of scopes".into()))?
                .iter()
                .map(|s| {
                    let s = s.as_str().ok_or_else(|| RuleError("a notScope is a scope's path".into()))?;
                    Scope::parse(s).map_err(|e| RuleError(format!("the notScope '{s}': {e}")))
                })
                .collect::<Result<_, _>>()?,
        };
        let enforcement = match properties.get("enforcementMode").and_then(Value::as_str).unwrap_or("Default") {
            m if m.eq_ignore_ascii_case("default") => Enforcement::Default,
            m if m.eq_ignore_ascii_case("donotenforce") => Enforcement::DoNotEnforce,
            other => return Err(RuleError(format!("the enforcementMode '{other}' is not Default or DoNotEnforce"))),
        };
        Ok(Assignment { id: id.to_string(), scope, definition_id, parameters, not_scopes, enforcement })
    }
}

impl Exemption {
    /// `{policyAssignmentId, exemptionCategory (Waiver or Mitigated), expiresOn?}`.
    pub fn parse(id: &str, scope: Scope, properties: &Value) -> Result<Exemption, RuleError> {
        let assignment_id = properties
            .get("policyAssignmentId")
            .and_then(Value::as_str)
            .ok_or_else(|| RuleError("properties.policyAssignmentId is required".into()))?
            .to_string();
        match properties.get("exemptionCategory").and_then(Value::as_str) {
            Some(c) if c.eq_ignore_ascii_case("waiver") || c.eq_ignore_ascii_case("mitigated") => {}
            _ => return Err(RuleError("properties.exemptionCategory is Waiver or Mitigated".into())),
        }
        let expires_on =
            match properties.get("expiresOn") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_str().and_then(Timestamp::parse_rfc3339).ok_or_else(|| {
                    RuleError(format!("properties.expiresOn is a time (2026-12-31T00:00:00Z), not {v}"))
                })?),
            };
        Ok(Exemption { id: id.to_string(), scope, assignment_id, expires_on })
    }
}
