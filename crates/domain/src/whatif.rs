//! What-if (docs/arm-contract.md#what-if): what a proposed change would do, at two levels —
//! Slipway's (the spec before and after, ARM's `changeType` and property `delta`) and the
//! automation's (the type's job run in Ansible's check mode with diff: each task that would
//! change something, with its host and diff). Nothing here decides; it compares and bounds.

use serde_json::{Map, Value};

use crate::config_version::ConfigVersion;
use crate::resource::Spec;

/// ARM's `changeType` of a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeType {
    Create,
    Delete,
    Modify,
    NoChange,
}

impl ChangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Create => "Create",
            ChangeType::Delete => "Delete",
            ChangeType::Modify => "Modify",
            ChangeType::NoChange => "NoChange",
        }
    }
}

/// ARM's `propertyChangeType` of one property path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropertyChangeType {
    Create,
    Delete,
    Modify,
}

impl PropertyChangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            PropertyChangeType::Create => "Create",
            PropertyChangeType::Delete => "Delete",
            PropertyChangeType::Modify => "Modify",
        }
    }
}

/// One changed property: its dotted path (`properties.addressPrefix`, `tags.env`) and its
/// values before and after (absent on the side where it does not exist).
#[derive(Clone, Debug, PartialEq)]
pub struct PropertyChange {
    pub path: String,
    pub change_type: PropertyChangeType,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// What a what-if operation was asked and, once its check job ended, what the automation
/// predicted. Stored on the operation; the resource itself is never touched by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhatIf {
    /// The spec as it was when the what-if was asked (`None`: the resource did not exist).
    pub before: Option<Spec>,
    /// The proposed spec, secrets sealed (`None`: a delete's what-if).
    pub after: Option<Spec>,
    /// What the check-mode job said it would change; `None` until it ended successfully.
    pub predicted: Option<Vec<TaskChange>>,
    /// What the guardrails would do to the request: a lock or a quota that would refuse it,
    /// the policies that would deny, change or audit it.
    pub guardrails: Vec<Guardrail>,
}

/// One guardrail's verdict on a what-if's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guardrail {
    pub kind: GuardrailKind,
    /// What it would do: a policy's effect (`deny`, `modify`, `append`, `audit`,
    /// `denyAction`), `refuse` for a lock or a quota.
    pub effect: String,
    /// Whether it would be enforced (a policy assignment in `DoNotEnforce` mode is not).
    pub enforced: bool,
    /// The lock's id, the policy assignment's id, or the meter's name.
    pub id: String,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardrailKind {
    Lock,
    Policy,
    Quota,
}

impl GuardrailKind {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardrailKind::Lock => "lock",
            GuardrailKind::Policy => "policy",
            GuardrailKind::Quota => "quota",
        }
    }

    pub fn parse(text: &str) -> Option<GuardrailKind> {
        [GuardrailKind::Lock, GuardrailKind::Policy, GuardrailKind::Quota].into_iter().find(|k| k.as_str() == text)
    }
}

impl WhatIf {
    pub fn change_type(&self) -> ChangeType {
        match (&self.before, &self.after) {
            (None, _) => ChangeType::Create,
            (Some(_), None) => ChangeType::Delete,
            (Some(b), Some(a)) if b.config_version() == a.config_version() => ChangeType::NoChange,
            (Some(_), Some(_)) => ChangeType::Modify,
        }
    }

    /// The job word whose playbook or template runs in check mode: `create` (which also
    /// updates) or `delete`.
    pub fn job_word(&self) -> &'static str {
        if self.after.is_none() { "delete" } else { "create" }
    }

    /// The config version the what-if's jobs carry: the proposed spec's, or for a delete
    /// the version it would remove (`current`).
    pub fn job_version(&self, current: &ConfigVersion) -> ConfigVersion {
        self.after.as_ref().map_or_else(|| current.clone(), Spec::config_version)
    }

    /// Every property path that differs between `before` and `after`, in path order.
    pub fn delta(&self) -> Vec<PropertyChange> {
        let mut out = Vec::new();
        let (before, after) = (self.before.as_ref().map(spec_value), self.after.as_ref().map(spec_value));
        diff_values("", before.as_ref(), after.as_ref(), &mut out);
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

/// A spec as ARM shows a resource's changeable part: `location`, `tags`, `properties`.
pub fn spec_value(spec: &Spec) -> Value {
    let mut m = Map::new();
    if let Some(l) = &spec.location {
        m.insert("location".into(), Value::String(l.clone()));
    }
    m.insert(
        "tags".into(),
        Value::Object(spec.tags.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect()),
    );
    m.insert("properties".into(), spec.properties.clone());
    Value::Object(m)
}

/// Objects are compared key by key; anything else (lists included) as a whole value.
fn diff_values(path: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<PropertyChange>) {
    let join = |k: &str| if path.is_empty() { k.to_owned() } else { format!("{path}.{k}") };
    match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                diff_values(&join(k), b.get(k), a.get(k), out);
            }
        }
        (Some(Value::Object(b)), None) if !path.is_empty() => leaves(path, b, out, PropertyChangeType::Delete),
        (None, Some(Value::Object(a))) if !path.is_empty() => leaves(path, a, out, PropertyChangeType::Create),
        (Some(Value::Object(b)), None) => leaves("", b, out, PropertyChangeType::Delete),
        (None, Some(Value::Object(a))) => leaves("", a, out, PropertyChangeType::Create),
        (Some(b), Some(a)) if b == a => {}
        (b, a) => {
            let change_type = match (b, a) {
                (None, _) => PropertyChangeType::Create,
                (_, None) => PropertyChangeType::Delete,
                _ => PropertyChangeType::Modify,
            };
            out.push(PropertyChange { path: path.to_owned(), change_type, before: b.cloned(), after: a.cloned() });
        }
    }
}

/// Every leaf under an object that exists on one side only.
fn leaves(path: &str, m: &Map<String, Value>, out: &mut Vec<PropertyChange>, change_type: PropertyChangeType) {
    for (k, v) in m {
        let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
        match v {
            Value::Object(inner) if inner.is_empty() => {}
            Value::Object(inner) => leaves(&p, inner, out, change_type),
            _ => {
                let (before, after) = match change_type {
                    PropertyChangeType::Delete => (Some(v.clone()), None),
                    _ => (None, Some(v.clone())),
                };
                out.push(PropertyChange { path: p, change_type, before, after });
            }
        }
    }
}

/// One task a check-mode job reported as changed (`changed: true`): which task, on which
/// host, and the diff Ansible's diff mode gave (a `{before, after, before_header,
/// after_header}` mapping, a list of them, or `{"prepared": text}`; `null` when the module
/// reports none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskChange {
    pub task: String,
    pub host: String,
    pub diff: Value,
}

/// The most changed tasks kept from one job; the rest are counted, not kept.
pub const MAX_TASK_CHANGES: usize = 100;
/// The most bytes of one task's diff kept (as JSON); a longer one is replaced by a note.
pub const MAX_DIFF_BYTES: usize = 16 * 1024;

impl TaskChange {
    /// The change an Ansible task result event reports, if it reports one: a
    /// `runner_on_ok` event (ansible-runner's artifacts and AWX's job events name them
    /// alike) whose `event_data.res.changed` is true. Its diff is bounded.
    pub fn from_event(event: &str, event_data: &Value) -> Option<TaskChange> {
        if event != "runner_on_ok" {
            return None;
        }
        let res = event_data.get("res")?;
        if res.get("changed").and_then(Value::as_bool) != Some(true) {
            return None;
        }
        let text = |k: &str| event_data.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let diff = res.get("diff").cloned().unwrap_or(Value::Null);
        let size = diff.to_string().len();
        let diff = if size > MAX_DIFF_BYTES {
            serde_json::json!({ "truncated": format!("a diff of {size} bytes, over the {MAX_DIFF_BYTES} kept") })
        } else {
            diff
        };
        Some(TaskChange { task: text("task"), host: text("host"), diff })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(props: Value, tags: &[(&str, &str)]) -> Spec {
        Spec {
            location: Some("westeurope".into()),
            tags: tags.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            properties: props,
        }
    }

    #[test]
    fn change_types() {
        let a = spec(json!({"x": 1}), &[]);
        let b = spec(json!({"x": 2}), &[]);
        let w = |before: Option<&Spec>, after: Option<&Spec>| WhatIf {
            before: before.cloned(),
            after: after.cloned(),
            predicted: None,
            guardrails: Vec::new(),
        };
        assert_eq!(w(None, Some(&a)).change_type(), ChangeType::Create);
        assert_eq!(w(Some(&a), None).change_type(), ChangeType::Delete);
        assert_eq!(w(Some(&a), Some(&a)).change_type(), ChangeType::NoChange);
        assert_eq!(w(Some(&a), Some(&b)).change_type(), ChangeType::Modify);
        assert_eq!(w(Some(&a), None).job_word(), "delete");
        assert_eq!(w(Some(&a), Some(&b)).job_word(), "create");
    }

    #[test]
    fn delta_lists_leaf_paths() {
        let before = spec(
            json!({"prefix": "10.0.0.0/16", "dns": {"a": 1, "b": 2}, "list": [1, 2], "gone": true}),
            &[("env", "dev")],
        );
        let after = spec(
            json!({"prefix": "10.1.0.0/16", "dns": {"a": 1, "c": 3}, "list": [1, 2, 3], "new": {"deep": "x"}}),
            &[("env", "prod")],
        );
        let w = WhatIf { before: Some(before), after: Some(after), predicted: None, guardrails: Vec::new() };
        let got: Vec<(String, &str, Option<Value>, Option<Value>)> =
            w.delta().into_iter().map(|c| (c.path, c.change_type.as_str(), c.before, c.after)).collect();
        let want = vec![
            ("properties.dns.b".to_owned(), "Delete", Some(json!(2)), None),
            ("properties.dns.c".to_owned(), "Create", None, Some(json!(3))),
            ("properties.gone".to_owned(), "Delete", Some(json!(true)), None),
            ("properties.list".to_owned(), "Modify", Some(json!([1, 2])), Some(json!([1, 2, 3]))),
            ("properties.new.deep".to_owned(), "Create", None, Some(json!("x"))),
            ("properties.prefix".to_owned(), "Modify", Some(json!("10.0.0.0/16")), Some(json!("10.1.0.0/16"))),
            ("tags.env".to_owned(), "Modify", Some(json!("dev")), Some(json!("prod"))),
        ];
        assert_eq!(got, want);
        let unchanged =
            WhatIf { before: w.before.clone(), after: w.before.clone(), predicted: None, guardrails: Vec::new() };
        assert!(unchanged.delta().is_empty());
        let create =
            WhatIf { before: None, after: Some(spec(json!({"x": 1}), &[])), predicted: None, guardrails: Vec::new() };
        let paths: Vec<String> = create.delta().into_iter().map(|c| c.path).collect();
        assert_eq!(paths, ["location", "properties.x"], "an empty tags object has no leaf");
    }

    #[test]
    fn task_changes_from_events() {
        let data = |changed: bool, diff: Value| json!({"task": "Record the resource", "host": "localhost", "res": {"changed": changed, "diff": diff}});
        let diff = json!({"before": "a\n", "after": "b\n", "before_header": "f", "after_header": "f"});
        let got = TaskChange::from_event("runner_on_ok", &data(true, diff.clone())).unwrap();
        assert_eq!(got, TaskChange { task: "Record the resource".into(), host: "localhost".into(), diff });
        assert!(TaskChange::from_event("runner_on_ok", &data(false, json!({}))).is_none());
        assert!(TaskChange::from_event("runner_on_failed", &data(true, json!({}))).is_none());
        assert!(TaskChange::from_event("runner_on_ok", &json!({"task": "t"})).is_none());
        let big =
            TaskChange::from_event("runner_on_ok", &data(true, json!({"after": "x".repeat(MAX_DIFF_BYTES)}))).unwrap();
        assert!(big.diff["truncated"].as_str().unwrap().contains("over the"), "{}", big.diff);
    }
}
