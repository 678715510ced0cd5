//! Admission policy: Azure Policy definitions ([`Definition`], a rule in `policy_rule`'s
//! language with parameters), assigned at a scope ([`Assignment`], with parameter values,
//! `notScopes` and an enforcement mode) and waived by exemptions ([`Exemption`], until they
//! expire), decided inside a write's transaction with Azure's order of effects:
//! `disabled` first, then `append` and `modify` change the request, then `deny` judges the
//! request as changed, then `audit` records what is not compliant. `denyAction` refuses a
//! `DELETE`. An assignment in `DoNotEnforce` mode changes and refuses nothing: what it would
//! have done is recorded as an audit.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::access::Scope;
use crate::admission::Rejection;
use crate::approval::{ApprovalRule, RequestKind, Requirement};
use crate::operation::CloudError;
use crate::policy_rule::{Aliases, Evaluated, Field, PolicyRule, RuleError, Segment, Subject, describe};
use crate::resource::Spec;
use crate::time::Timestamp;

mod parse;

/// A definition's parameter: its default and the values it allows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parameter {
    pub default: Option<Value>,
    pub allowed: Option<Vec<Value>>,
}

/// Which resources a definition looks at: `All` (groups too), or `Indexed` (only resources
/// with a location and tags, so no group and no child type without a location).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    All,
    Indexed,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Definition {
    /// `/providers/Microsoft.Authorization/policyDefinitions/{name}` (the platform's) or
    /// `/subscriptions/{s}/providers/Microsoft.Authorization/policyDefinitions/{name}`.
    pub id: String,
    pub display_name: Option<String>,
    pub mode: Mode,
    pub parameters: BTreeMap<String, Parameter>,
    pub rule: PolicyRule,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    Default,
    DoNotEnforce,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub id: String,
    pub scope: Scope,
    pub definition_id: String,
    pub parameters: Map<String, Value>,
    pub not_scopes: Vec<Scope>,
    pub enforcement: Enforcement,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exemption {
    pub id: String,
    pub scope: Scope,
    pub assignment_id: String,
    pub expires_on: Option<Timestamp>,
}

impl Exemption {
    fn waives(&self, assignment: &Assignment, target: &Scope, now: Timestamp) -> bool {
        self.assignment_id.eq_ignore_ascii_case(&assignment.id)
            && self.scope.contains(target)
            && self.expires_on.is_none_or(|end| now < end)
    }
}

/// A policy's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Deny,
    Audit,
    Append,
    Modify,
    DenyAction,
    /// Slipway's own: the write is accepted but waits for someone to approve it
    /// (`approval`); `then.details` is its [`ApprovalRule`].
    RequireApproval,
    Disabled,
}

impl Effect {
    pub fn parse(name: &str) -> Option<Effect> {
        let all = [
            ("deny", Effect::Deny),
            ("audit", Effect::Audit),
            ("append", Effect::Append),
            ("modify", Effect::Modify),
            ("denyaction", Effect::DenyAction),
            ("requireapproval", Effect::RequireApproval),
            ("disabled", Effect::Disabled),
        ];
        all.into_iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, e)| e)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Deny => "deny",
            Effect::Audit => "audit",
            Effect::Append => "append",
            Effect::Modify => "modify",
            Effect::DenyAction => "denyAction",
            Effect::RequireApproval => "requireApproval",
            Effect::Disabled => "disabled",
        }
    }
}

/// What a policy did or would have done to a request: recorded on the resource (an audit, a
/// policy not enforced) and listed by a what-if.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub assignment_id: String,
    pub definition_id: String,
    pub effect: Effect,
    /// `false` for an assignment in `DoNotEnforce` mode: the effect was not applied.
    pub enforced: bool,
    /// The tests that held, in words.
    pub reason: String,
}

impl Finding {
    /// What the resource is left non-compliant by: an audit that held, or what an
    /// assignment not enforced would have done. An `append` or `modify` applied made it
    /// compliant.
    pub fn is_non_compliance(&self) -> bool {
        !(self.enforced && matches!(self.effect, Effect::Append | Effect::Modify))
    }
}

/// A request a policy refuses (ARM's `403 RequestDisallowedByPolicy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyDenied {
    pub target: String,
    pub assignment_id: String,
    pub definition_id: String,
    pub definition_name: Option<String>,
    pub effect: Effect,
    pub evaluated: Vec<Evaluated>,
}

impl std::fmt::Display for PolicyDenied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.definition_name.as_deref().unwrap_or(&self.definition_id);
        write!(
            f,
            "Resource '{}' was disallowed by policy. Policy: '{name}' (assignment '{}'); it {} because {}.",
            self.target,
            self.assignment_id,
            if self.effect == Effect::DenyAction { "denies this delete" } else { "denies this request" },
            describe(&self.evaluated)
        )
    }
}

/// The resource a request is about, apart from its spec.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub scope: Scope,
    pub id: &'a str,
    pub name: &'a str,
    pub full_name: &'a str,
    pub type_name: &'a str,
    pub kind: &'a str,
    /// A resource group, rather than a resource.
    pub is_group: bool,
    pub resource_group: Value,
    pub subscription: Value,
    pub request: Value,
    pub aliases: &'a Aliases,
}

/// Every definition, assignment and exemption that may apply in a subscription.
#[derive(Clone, Debug, Default)]
pub struct Policies {
    /// Shared: a server keeps definitions parsed between requests.
    pub definitions: Vec<Arc<Definition>>,
    pub assignments: Vec<Arc<Assignment>>,
    pub exemptions: Vec<Exemption>,
}

/// One applicable assignment, with its definition and parameter values.
struct Applied<'p> {
    assignment: &'p Assignment,
    definition: &'p Definition,
    parameters: Map<String, Value>,
}

impl Policies {
    pub fn is_empty(&self) -> bool {
        self.assignments.is_empty()
    }

    /// The assignments that apply to `target`: at or above its scope, not excluded by a
    /// `notScope`, not waived by an unexpired exemption, of a definition whose mode covers it.
    fn applicable(&self, target: &Target<'_>, spec: &Spec, now: Timestamp) -> Result<Vec<Applied<'_>>, Rejection> {
        let mut out = Vec::new();
        for assignment in &self.assignments {
            if !assignment.scope.contains(&target.scope)
                || assignment.not_scopes.iter().any(|s| s.contains(&target.scope))
                || self.exemptions.iter().any(|e| e.waives(assignment, &target.scope, now))
            {
                continue;
            }
            let Some(definition) =
                self.definitions.iter().find(|d| d.id.eq_ignore_ascii_case(&assignment.definition_id))
            else {
                continue;
            };
            if definition.mode == Mode::Indexed && (target.is_group || spec.location.is_none()) {
                continue;
            }
            let parameters = parameter_values(definition, assignment).map_err(|e| evaluation_failed(assignment, e))?;
            out.push(Applied { assignment, definition, parameters });
        }
        Ok(out)
    }

    /// A `PUT` or `PATCH`: `spec` as `append` and `modify` leave it, refused when a `deny`
    /// holds for it, and what was done or would have been done (`audit`, `DoNotEnforce`).
    pub fn admit_write(&self, target: &Target<'_>, spec: &mut Spec, now: Timestamp) -> Result<Vec<Finding>, Rejection> {
        match self.judge_write(target, spec, now)? {
            (_, Some(denied)) => Err(Rejection::PolicyDenied(denied)),
            (findings, None) => Ok(findings),
        }
    }

    /// [`Policies::admit_write`]'s whole judgement, refusing nothing: what every policy did
    /// or would do, and the first enforced `deny` that holds (a what-if lists both).
    pub fn judge_write(
        &self,
        target: &Target<'_>,
        spec: &mut Spec,
        now: Timestamp,
    ) -> Result<(Vec<Finding>, Option<Box<PolicyDenied>>), Rejection> {
        let applied = self.applicable(target, spec, now)?;
        let mut findings = Vec::new();
        let mut effects = Vec::with_capacity(applied.len());
        for a in &applied {
            let effect = a.effect(target, spec)?;
            effects.push(effect);
            if !matches!(effect, Effect::Append | Effect::Modify) {
                continue;
            }
            let (hit, log) = a.matches(target, spec)?;
            if !hit {
                continue;
            }
            if a.enforced() {
                a.change(target, spec, effect).map_err(|e| evaluation_failed(a.assignment, e))?;
            }
            findings.push(a.finding(effect, &log));
        }
        let mut denied = None;
        for (a, effect) in applied.iter().zip(&effects) {
            if *effect != Effect::Deny {
                continue;
            }
            let (hit, log) = a.matches(target, spec)?;
            if hit && a.enforced() {
                denied.get_or_insert_with(|| a.denied(target, Effect::Deny, log));
            } else if hit {
                findings.push(a.finding(Effect::Deny, &log));
            }
        }
        for (a, effect) in applied.iter().zip(&effects) {
            if *effect == Effect::Audit {
                let (hit, log) = a.matches(target, spec)?;
                if hit {
                    findings.push(a.finding(Effect::Audit, &log));
                }
            }
        }
        Ok((findings, denied))
    }

    /// The `requireApproval` policies that hold for a write of `kind` leaving `spec`, each with
    /// whether it is enforced (one in `DoNotEnforce` mode only says it would have held).
    pub fn approvals(
        &self,
        target: &Target<'_>,
        spec: &Spec,
        kind: RequestKind,
        now: Timestamp,
    ) -> Result<Vec<(Requirement, bool)>, Rejection> {
        let mut out = Vec::new();
        for a in self.applicable(target, spec, now)? {
            if a.effect(target, spec)? != Effect::RequireApproval {
                continue;
            }
            let rule = ApprovalRule::parse(a.definition.rule.then.details.as_ref()).map_err(|e| a.failed(e))?;
            if !rule.holds(kind) {
                continue;
            }
            let (hit, log) = a.matches(target, spec)?;
            if hit {
                let requirement = Requirement {
                    assignment_id: a.assignment.id.clone(),
                    definition_id: a.definition.id.clone(),
                    reason: describe(&log),
                    rule,
                };
                out.push((requirement, a.enforced()));
            }
        }
        Ok(out)
    }

    /// A `DELETE`: refused when a `denyAction` naming `delete` holds for the resource.
    pub fn admit_delete(&self, target: &Target<'_>, spec: &Spec, now: Timestamp) -> Result<(), Rejection> {
        for a in self.applicable(target, spec, now)? {
            if a.effect(target, spec)? != Effect::DenyAction || !a.denies_delete() {
                continue;
            }
            let (hit, log) = a.matches(target, spec)?;
            if hit && a.enforced() {
                return Err(Rejection::PolicyDenied(a.denied(target, Effect::DenyAction, log)));
            }
        }
        Ok(())
    }
}

impl Applied<'_> {
    fn subject<'s>(&'s self, target: &'s Target<'_>, spec: &'s Spec) -> Subject<'s> {
        Subject {
            id: target.id,
            name: target.name,
            full_name: target.full_name,
            type_name: target.type_name,
            kind: target.kind,
            location: spec.location.as_deref(),
            tags: &spec.tags,
            properties: &spec.properties,
            parameters: &self.parameters,
            resource_group: target.resource_group.clone(),
            subscription: target.subscription.clone(),
            request: target.request.clone(),
            aliases: target.aliases,
        }
    }

    fn enforced(&self) -> bool {
        self.assignment.enforcement == Enforcement::Default
    }

    fn effect(&self, target: &Target<'_>, spec: &Spec) -> Result<Effect, Rejection> {
        let name = self.definition.rule.effect(&self.subject(target, spec)).map_err(|e| self.failed(e))?;
        Effect::parse(&name).ok_or_else(|| self.failed(RuleError(format!("the effect '{name}' is not supported"))))
    }

    fn matches(&self, target: &Target<'_>, spec: &Spec) -> Result<(bool, Vec<Evaluated>), Rejection> {
        self.definition.rule.matches(&self.subject(target, spec)).map_err(|e| self.failed(e))
    }

    fn failed(&self, e: RuleError) -> Rejection {
        evaluation_failed(self.assignment, e)
    }

    fn denies_delete(&self) -> bool {
        let names = self.definition.rule.then.details.as_ref().and_then(|d| d.get("actionNames"));
        names
            .and_then(Value::as_array)
            .is_some_and(|n| n.iter().any(|a| a.as_str().is_some_and(|a| a.eq_ignore_ascii_case("delete"))))
    }

    fn finding(&self, effect: Effect, log: &[Evaluated]) -> Finding {
        Finding {
            assignment_id: self.assignment.id.clone(),
            definition_id: self.definition.id.clone(),
            effect,
            enforced: self.enforced(),
            reason: describe(log),
        }
    }

    fn denied(&self, target: &Target<'_>, effect: Effect, evaluated: Vec<Evaluated>) -> Box<PolicyDenied> {
        Box::new(PolicyDenied {
            target: target.id.to_string(),
            assignment_id: self.assignment.id.clone(),
            definition_id: self.definition.id.clone(),
            definition_name: self.definition.display_name.clone(),
            effect,
            evaluated,
        })
    }

    /// `append` (`[{field, value}]`: a missing field set, an array alias added to) or
    /// `modify` (`{operations: [{operation, field, value, condition}]}`).
    fn change(&self, target: &Target<'_>, spec: &mut Spec, effect: Effect) -> Result<(), RuleError> {
        let details = self.definition.rule.then.details.clone().unwrap_or(Value::Null);
        let steps: Vec<(String, String, Value, Option<Value>)> = match effect {
            Effect::Append => list(&details)?
                .iter()
                .map(|d| {
                    Ok(("append".to_string(), text(d, "field")?, d.get("value").cloned().unwrap_or(Value::Null), None))
                })
                .collect::<Result<_, RuleError>>()?,
            _ => list(details.get("operations").unwrap_or(&Value::Null))?
                .iter()
                .map(|o| {
                    let value = o.get("value").cloned().unwrap_or(Value::Null);
                    Ok((
                        text(o, "operation")?.to_ascii_lowercase(),
                        text(o, "field")?,
                        value,
                        o.get("condition").cloned(),
                    ))
                })
                .collect::<Result<_, RuleError>>()?,
        };
        for (operation, field, value, condition) in steps {
            if let Some(condition) = condition {
                let holds = self.definition.rule.value(&condition, &self.subject(target, spec))?;
                if holds != Value::Bool(true) && holds.as_str().is_none_or(|s| !s.eq_ignore_ascii_case("true")) {
                    continue;
                }
            }
            let value = self.definition.rule.value(&value, &self.subject(target, spec))?;
            let field = Field::parse(&field, target.aliases)?;
            apply(spec, &field, &operation, value)?;
        }
        Ok(())
    }
}

fn list(v: &Value) -> Result<&Vec<Value>, RuleError> {
    v.as_array().ok_or_else(|| RuleError(format!("the effect's details are a list: {v}")))
}

fn text(v: &Value, key: &str) -> Result<String, RuleError> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| RuleError(format!("'{key}' is missing in {v}")))
}

/// One `append`, `add`, `addOrReplace` or `remove` on a tag or a property alias.
fn apply(spec: &mut Spec, field: &Field, operation: &str, value: Value) -> Result<(), RuleError> {
    let as_text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match field {
        Field::Tag(name) => {
            let existing = spec.tags.keys().find(|k| k.eq_ignore_ascii_case(name)).cloned();
            match (operation, existing) {
                ("remove", Some(k)) => {
                    spec.tags.remove(&k);
                }
                ("addorreplace", Some(k)) => {
                    spec.tags.insert(k, as_text(&value));
                }
                ("add" | "append" | "addorreplace", None) if !value.is_null() => {
                    spec.tags.insert(name.clone(), as_text(&value));
                }
                _ => {}
            }
            Ok(())
        }
        Field::Alias { alias, .. } => {
            let (keys, every): (Vec<&str>, bool) = match alias.path.split_last() {
                Some((Segment::Every, rest)) => (keys_of(rest)?, true),
                _ => (keys_of(&alias.path)?, false),
            };
            if operation == "remove" {
                if let Some((last, parents)) = keys.split_last()
                    && let Some(parent) = parents.iter().try_fold(&mut spec.properties, |v, k| v.get_mut(*k))
                {
                    parent.as_object_mut().map(|o| o.remove(*last));
                }
                return Ok(());
            }
            let slot = slot(&mut spec.properties, &keys);
            match (operation, every) {
                (_, true) => {
                    let items = match value {
                        Value::Array(items) => items,
                        one => vec![one],
                    };
                    match slot {
                        Value::Array(existing) => existing.extend(items),
                        other => *other = Value::Array(items),
                    }
                }
                ("add" | "append", false) if slot.is_null() => *slot = value,
                ("addorreplace", false) => *slot = value,
                _ => {}
            }
            Ok(())
        }
        other => Err(RuleError(format!("append and modify change tags or property aliases, not {other:?}"))),
    }
}

fn keys_of(path: &[Segment]) -> Result<Vec<&str>, RuleError> {
    path.iter()
        .map(|s| match s {
            Segment::Key(k) => Ok(k.as_str()),
            Segment::Every => Err(RuleError("append and modify reach into no array but the last".into())),
        })
        .collect()
}

/// The value at `keys` under `root`, made (as objects) where missing.
fn slot<'v>(root: &'v mut Value, keys: &[&str]) -> &'v mut Value {
    keys.iter().fold(root, |v, k| {
        if !v.is_object() {
            *v = Value::Object(Map::new());
        }
        v.as_object_mut().expect("made an object").entry(k.to_string()).or_insert(Value::Null)
    })
}

/// The assignment's parameter values over the definition's defaults; every parameter needs
/// one, and one of the values it allows.
pub fn parameter_values(definition: &Definition, assignment: &Assignment) -> Result<Map<String, Value>, RuleError> {
    let mut out = Map::new();
    for (name, p) in &definition.parameters {
        let given = assignment.parameters.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let value = given
            .or_else(|| p.default.clone())
            .ok_or_else(|| RuleError(format!("the parameter '{name}' has no value and no default")))?;
        if let Some(allowed) = &p.allowed
            && !allowed.contains(&value)
        {
            return Err(RuleError(format!("the parameter '{name}' is {value}, not one of {}", json!(allowed))));
        }
        out.insert(name.clone(), value);
    }
    Ok(out)
}

fn evaluation_failed(assignment: &Assignment, e: RuleError) -> Rejection {
    Rejection::Invalid(CloudError::new(
        "PolicyEvaluationFailed",
        format!("The policy assignment '{}' could not be evaluated: {e}", assignment.id),
    ))
}
