//! The resource state the simulated playbooks keep, modelled on Slipway's example playbooks,
//! which record a resource as a JSON state file (`Record the resource`) and remove it on
//! delete (`Remove the recorded resource`). The simulator keeps the file's text per resource
//! id; a job that runs to success in `run` mode changes it, one in `check` mode only reports
//! what it would change ([`Record`]), with Ansible's diff. Test hooks read and overwrite it
//! "behind Slipway's back" (drift).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::config::ResourceEffect;

/// Where the simulated playbooks keep their state files: the diff headers name files here.
pub const STATE_DIR: &str = "/var/lib/aap-sim/state";

/// The recorded texts, by resource id. ARM ids are case-insensitive: keyed lowercased, shown
/// as first written.
#[derive(Debug, Default)]
pub struct Resources {
    map: BTreeMap<String, (String, String)>,
}

impl Resources {
    /// The text recorded for `id`, if any.
    pub fn get(&self, id: &str) -> Option<&str> {
        self.map.get(&id.to_lowercase()).map(|(_, text)| text.as_str())
    }

    /// Records `text` for `id`; an empty text removes the record (an absent file diffs as "").
    pub fn set(&mut self, id: &str, text: String) {
        if text.is_empty() {
            self.remove(id);
            return;
        }
        let entry = self.map.entry(id.to_lowercase()).or_insert_with(|| (id.to_owned(), String::new()));
        entry.1 = text;
    }

    /// Removes the record of `id`; answers whether there was one.
    pub fn remove(&mut self, id: &str) -> bool {
        self.map.remove(&id.to_lowercase()).is_some()
    }

    /// Every record: id (as first written) → text.
    pub fn all(&self) -> BTreeMap<String, String> {
        self.map.values().map(|(id, text)| (id.clone(), text.clone())).collect()
    }
}

/// What a job's record task found and did, fixed when the job ran to success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The task's name: `Record the resource` or `Remove the recorded resource`.
    pub task: &'static str,
    /// The state file's path (the diff's headers).
    pub path: String,
    /// The recorded text before the job ("" when there was none).
    pub before: String,
    /// The text the job writes ("" when it removes the file).
    pub after: String,
}

impl Record {
    pub fn changed(&self) -> bool {
        self.before != self.after
    }

    /// Ansible's diff of the task (`res.diff` in diff mode).
    pub fn diff(&self) -> Value {
        json!({"before": self.before, "after": self.after, "before_header": self.path, "after_header": self.path})
    }

    /// The diff as `ansible-playbook --diff` prints it, line by line (a whole-file diff).
    pub fn diff_text(&self) -> String {
        let mut out = format!("--- before: {}\n+++ after: {}\n", self.path, self.path);
        for line in self.before.lines() {
            out.push_str(&format!("-{line}\n"));
        }
        for line in self.after.lines() {
            out.push_str(&format!("+{line}\n"));
        }
        out
    }
}

/// The record task a job of `effect` runs for the resource its extra vars name: `None` for a
/// template that touches no state, or extra vars without `slipway.resource.id`.
pub struct Target {
    pub id: String,
    pub path: String,
    pub task: &'static str,
    /// The text the job would write; `None`: it removes the file.
    pub proposed: Option<String>,
}

pub fn target(effect: ResourceEffect, vars: &Value) -> Option<Target> {
    let task = match effect {
        ResourceEffect::Record => "Record the resource",
        ResourceEffect::Remove => "Remove the recorded resource",
        ResourceEffect::None | ResourceEffect::Auto => return None,
    };
    let slipway = match vars.get("slipway")? {
        Value::String(text) => serde_json::from_str(text).ok()?,
        other => other.clone(),
    };
    let res = slipway.get("resource")?;
    let id = res.get("id").and_then(Value::as_str).filter(|id| !id.is_empty())?.to_owned();
    let text = |k: &str| res.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let path = format!("{STATE_DIR}/{}/{}.json", text("type").to_lowercase().replace('/', "_"), text("name"));
    let proposed = (effect == ResourceEffect::Record).then(|| {
        let or_empty = |k: &str| res.get(k).filter(|v| !v.is_null()).cloned().unwrap_or_else(|| json!({}));
        state_text(&json!({
            "location": res.get("location").cloned().unwrap_or(Value::Null),
            "tags": or_empty("tags"),
            "properties": or_empty("properties"),
        }))
    });
    Some(Target { id, path, task, proposed })
}

/// A state as the playbooks write it: Ansible's `to_nice_json` (keys sorted, four-space
/// indent) and a final newline.
pub fn state_text(state: &Value) -> String {
    let mut buf = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut buf, serde_json::ser::PrettyFormatter::with_indent(b"    "));
    // Serializing a `Value` into memory cannot fail.
    serde::Serialize::serialize(&sorted(state), &mut ser).expect("serialize a JSON value");
    let mut text = String::from_utf8(buf).expect("serde_json writes UTF-8");
    text.push('\n');
    text
}

/// `v` with every object's keys in order (whatever order `serde_json`'s map keeps).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect::<Map<_, _>>())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "/subscriptions/s/resourceGroups/rg/providers/Slipway.Example/virtualNetworks/v1";

    fn vars(properties: Value) -> Value {
        json!({"slipway": {"resource": {"id": ID, "type": "Slipway.Example/virtualNetworks", "name": "v1",
            "location": "westeurope", "tags": {"env": "dev"}, "properties": properties}}})
    }

    #[test]
    fn targets_follow_the_effect_and_the_envelope() {
        let t = target(ResourceEffect::Record, &vars(json!({"b": 1, "a": [1, 2]}))).unwrap();
        assert_eq!(t.id, ID);
        assert_eq!(t.task, "Record the resource");
        assert_eq!(t.path, "/var/lib/aap-sim/state/slipway.example_virtualnetworks/v1.json");
        let want = "{\n    \"location\": \"westeurope\",\n    \"properties\": {\n        \"a\": [\n            1,\n            2\n        ],\n        \"b\": 1\n    },\n    \"tags\": {\n        \"env\": \"dev\"\n    }\n}\n";
        assert_eq!(t.proposed.as_deref(), Some(want));
        let removal = target(ResourceEffect::Remove, &vars(json!({}))).unwrap();
        assert_eq!((removal.task, removal.proposed), ("Remove the recorded resource", None));
        // The envelope as a JSON string, as a YAML-minded client may send it.
        let as_text = json!({"slipway": vars(json!({}))["slipway"].to_string()});
        assert_eq!(target(ResourceEffect::Record, &as_text).unwrap().id, ID);
        assert!(target(ResourceEffect::None, &vars(json!({}))).is_none());
        assert!(target(ResourceEffect::Record, &json!({"app": "web"})).is_none());
        assert!(target(ResourceEffect::Record, &json!({"slipway": {"resource": {"id": ""}}})).is_none());
    }

    #[test]
    fn records_are_keyed_case_insensitively() {
        let mut r = Resources::default();
        r.set(ID, "a\n".into());
        assert_eq!(r.get(&ID.to_uppercase()), Some("a\n"));
        r.set(&ID.to_lowercase(), "b\n".into());
        assert_eq!(r.all(), BTreeMap::from([(ID.to_owned(), "b\n".to_owned())]));
        r.set(ID, String::new());
        assert_eq!(r.get(ID), None);
        assert!(!r.remove(ID));
    }

    #[test]
    fn effects_by_name() {
        assert_eq!(ResourceEffect::Auto.of("slipway-create-subnet"), ResourceEffect::Record);
        assert_eq!(ResourceEffect::Auto.of("Delete VNet"), ResourceEffect::Remove);
        assert_eq!(ResourceEffect::Auto.of("slipway-validate-cluster"), ResourceEffect::None);
        assert_eq!(ResourceEffect::Auto.of("recreated"), ResourceEffect::None, "whole words only");
        assert_eq!(ResourceEffect::Remove.of("slipway-create-subnet"), ResourceEffect::Remove);
        let diff = Record { task: "t", path: "p".into(), before: "a\n".into(), after: "b\n".into() };
        assert_eq!(diff.diff_text(), "--- before: p\n+++ after: p\n-a\n+b\n");
        assert!(diff.changed());
    }
}
