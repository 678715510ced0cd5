//! A request body from `--file` (or stdin) and `--set`/`--tag`/`--location`, so a small
//! change needs no JSON file and a large one needs no flags.

use std::io::Read;

use clap::Args;
use serde_json::{Map, Value};

use crate::error::CliError;

#[derive(Args, Clone, Debug, Default)]
pub struct BodyArgs {
    /// A JSON body to start from; `-` reads standard input.
    #[arg(long, short = 'f', value_name = "FILE")]
    pub file: Option<String>,
    /// `key=value` under `properties` (an action's: the body's own keys; a dotted key
    /// nests); the value is JSON when it parses as JSON, else a string. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A tag `name=value`. Repeatable.
    #[arg(long = "tag", value_name = "NAME=VALUE")]
    pub tags: Vec<String>,
    /// The resource's location (default: the first one its type is served in).
    #[arg(long)]
    pub location: Option<String>,
}

impl BodyArgs {
    pub fn is_empty(&self) -> bool {
        self.file.is_none() && self.set.is_empty() && self.tags.is_empty() && self.location.is_none()
    }

    /// A resource's body: the file's (or `{}`), then each flag on top.
    pub fn build(&self) -> Result<Value, CliError> {
        self.build_at(Some("properties"))
    }

    /// An action's body: its parameters are the body itself.
    pub fn build_action(&self) -> Result<Value, CliError> {
        self.build_at(None)
    }

    fn build_at(&self, properties_key: Option<&str>) -> Result<Value, CliError> {
        let mut body = match &self.file {
            Some(f) => read_json(f)?,
            None => Value::Object(Map::new()),
        };
        if !body.is_object() {
            return Err(CliError::Usage("the body must be a JSON object".into()));
        }
        for assignment in &self.set {
            let (path, value) = split_pair(assignment, "--set")?;
            let full = match properties_key {
                Some(key) => format!("{key}.{path}"),
                None => path.to_string(),
            };
            set_dotted(&mut body, &full, parse_value(value))
                .map_err(|at| CliError::Usage(format!("--set {assignment}: '{at}' is not an object")))?;
        }
        for tag in &self.tags {
            let (name, value) = split_pair(tag, "--tag")?;
            if body.get("tags").is_none() {
                body["tags"] = Value::Object(Map::new());
            }
            let Some(tags) = body["tags"].as_object_mut() else {
                return Err(CliError::Usage("the body's tags are not an object".into()));
            };
            tags.insert(name.to_string(), Value::String(value.to_string()));
        }
        if let Some(location) = &self.location {
            body["location"] = Value::String(location.clone());
        }
        Ok(body)
    }
}

fn read_json(file: &str) -> Result<Value, CliError> {
    let text = if file == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| CliError::Usage(format!("reading stdin: {e}")))?;
        text
    } else {
        std::fs::read_to_string(file).map_err(|e| CliError::Usage(format!("reading {file}: {e}")))?
    };
    serde_json::from_str(&text).map_err(|e| CliError::Usage(format!("{file}: not JSON: {e}")))
}

fn split_pair<'a>(text: &'a str, flag: &str) -> Result<(&'a str, &'a str), CliError> {
    text.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| CliError::Usage(format!("{flag} '{text}': expected key=value")))
}

/// JSON when it parses (`3`, `true`, `["a"]`, `{"a":1}`), else the text itself.
pub fn parse_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Sets `a.b.c` inside `target`, creating objects on the way; `Err` names a step that is
/// something else.
fn set_dotted(target: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let mut here = target;
    let steps: Vec<&str> = path.split('.').collect();
    for (i, step) in steps.iter().enumerate() {
        let object = here.as_object_mut().ok_or_else(|| steps[..i].join("."))?;
        if i + 1 == steps.len() {
            object.insert(step.to_string(), value);
            return Ok(());
        }
        here = object.entry(step.to_string()).or_insert_with(|| Value::Object(Map::new()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sets_nest_under_properties_and_values_parse_as_json_when_they_can() {
        let args = BodyArgs {
            set: vec!["addressSpace=10.0.0.0/16".into(), "a.b=3".into(), "a.c=true".into(), "l=[1]".into()],
            tags: vec!["env=prod".into()],
            location: Some("local".into()),
            ..Default::default()
        };
        assert_eq!(
            args.build().unwrap(),
            json!({"properties": {"addressSpace": "10.0.0.0/16", "a": {"b": 3, "c": true}, "l": [1]},
                   "tags": {"env": "prod"}, "location": "local"})
        );
    }

    #[test]
    fn a_set_through_a_scalar_or_without_a_key_is_a_usage_error() {
        let args = BodyArgs { set: vec!["a=1".into(), "a.b=2".into()], ..Default::default() };
        assert!(matches!(args.build(), Err(CliError::Usage(m)) if m.contains("'properties.a'")));
        let args = BodyArgs { set: vec!["=1".into()], ..Default::default() };
        assert!(matches!(args.build(), Err(CliError::Usage(_))));
    }

    #[test]
    fn an_actions_sets_are_the_body_itself() {
        let args = BodyArgs { set: vec!["force=true".into()], ..Default::default() };
        assert_eq!(args.build_action().unwrap(), json!({"force": true}));
    }
}
