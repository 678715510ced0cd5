//! A type's JSON Schema as a form, and the form back as `properties`: a field per top-level
//! property a client sets (outputs, `readOnly`, are the server's), typed by the schema;
//! anything nested is edited as JSON. The API validates the result as for any client, so a
//! mistake comes back as its precise error.

use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Clone, Debug, Serialize, PartialEq)]
pub(crate) enum Kind {
    Text,
    Secret,
    Integer,
    Number,
    Checkbox,
    Choice,
    Json,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Field {
    pub name: String,
    pub kind: Kind,
    pub required: bool,
    pub description: Option<String>,
    pub choices: Vec<String>,
    /// What the field shows: the schema's default, or what the visitor sent last.
    pub value: String,
}

/// `#/…` references into the schema itself, followed (once per step; nothing else is fetched).
fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> &'a Value {
    for _ in 0..8 {
        let Some(target) = node.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) else {
            return node;
        };
        match root.pointer(target) {
            Some(next) => node = next,
            None => return node,
        }
    }
    node
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The form fields of a type's `properties` schema (`None`: any object, one JSON field).
pub(crate) fn fields(schema: Option<&Value>) -> Vec<Field> {
    let Some(root) = schema else { return Vec::new() };
    let required: Vec<&str> =
        root.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let Some(props) = root.get("properties").and_then(Value::as_object) else { return Vec::new() };
    let mut out = Vec::new();
    for (name, raw) in props {
        let prop = resolve(root, raw);
        if prop.get("readOnly").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let secret = prop.get("writeOnly").and_then(Value::as_bool) == Some(true)
            || prop.get("x-slipway-secret").and_then(Value::as_bool) == Some(true);
        let choices: Vec<String> =
            prop.get("enum").and_then(Value::as_array).into_iter().flatten().map(shown).collect();
        let kind = match prop.get("type").and_then(Value::as_str) {
            _ if !choices.is_empty() => Kind::Choice,
            Some("string") if secret => Kind::Secret,
            Some("string") => Kind::Text,
            Some("integer") => Kind::Integer,
            Some("number") => Kind::Number,
            Some("boolean") => Kind::Checkbox,
            _ => Kind::Json,
        };
        let value = match (&kind, prop.get("default")) {
            (Kind::Json, Some(d)) => serde_json::to_string_pretty(d).unwrap_or_default(),
            (_, Some(d)) => shown(d),
            (_, None) => String::new(),
        };
        out.push(Field {
            name: name.clone(),
            required: required.contains(&name.as_str()),
            description: prop.get("description").and_then(Value::as_str).map(str::to_string),
            choices,
            kind,
            value,
        });
    }
    out.sort_by_key(|f| (!f.required, f.name.to_ascii_lowercase()));
    out
}

/// The form field of property `name`.
pub(crate) fn input_name(name: &str) -> String {
    format!("p.{name}")
}

/// `properties` from the posted form: empty fields are left out (the API says what is
/// missing); a field that cannot be its type is the error, naming it.
pub(crate) fn properties(fields: &mut [Field], form: &[(String, String)]) -> Result<Map<String, Value>, String> {
    let posted = |name: &str| form.iter().find(|(k, _)| *k == input_name(name)).map(|(_, v)| v.as_str());
    let mut out = Map::new();
    for f in fields.iter_mut() {
        let text = posted(&f.name).unwrap_or_default().trim().to_string();
        f.value = text.clone();
        if f.kind == Kind::Checkbox {
            if posted(&f.name).is_some() {
                out.insert(f.name.clone(), Value::Bool(true));
            }
            continue;
        }
        if text.is_empty() {
            continue;
        }
        let value = match f.kind {
            Kind::Integer => {
                text.parse::<i64>().map(Value::from).map_err(|_| format!("{} must be a whole number.", f.name))?
            }
            Kind::Number => text
                .parse::<f64>()
                .ok()
                .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
                .ok_or_else(|| format!("{} must be a number.", f.name))?,
            Kind::Json => serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}.", f.name))?,
            Kind::Text | Kind::Secret | Kind::Choice | Kind::Checkbox => Value::String(text),
        };
        out.insert(f.name.clone(), value);
    }
    Ok(out)
}

/// Tags from `name=value` lines.
pub(crate) fn tags(text: &str) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (k, v) = line.split_once('=').ok_or_else(|| format!("Tag line '{line}' is not name=value."))?;
        out.insert(k.trim().to_string(), Value::String(v.trim().to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "string", "enum": ["small", "large"]},
                "count": {"type": "integer", "default": 2},
                "ratio": {"type": "number"},
                "fast": {"type": "boolean"},
                "password": {"type": "string", "writeOnly": true},
                "rules": {"$ref": "#/$defs/rules"},
                "ipAddress": {"type": "string", "readOnly": true},
            },
            "$defs": {"rules": {"type": "array", "items": {"type": "string"}}},
        })
    }

    #[test]
    fn fields_follow_the_schema_and_leave_outputs_out() {
        let s = schema();
        let f = fields(Some(&s));
        let kinds: Vec<(&str, &Kind)> = f.iter().map(|f| (f.name.as_str(), &f.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("size", &Kind::Choice),
                ("count", &Kind::Integer),
                ("fast", &Kind::Checkbox),
                ("password", &Kind::Secret),
                ("ratio", &Kind::Number),
                ("rules", &Kind::Json),
            ]
        );
        assert!(f[0].required && !f[1].required);
        assert_eq!(f[1].value, "2");
    }

    #[test]
    fn a_form_becomes_typed_properties_or_names_the_bad_field() {
        let s = schema();
        let mut f = fields(Some(&s));
        let form: Vec<(String, String)> =
            [("p.size", "small"), ("p.count", "3"), ("p.fast", "on"), ("p.rules", "[\"a\"]"), ("p.ratio", "")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let props = properties(&mut f, &form).unwrap();
        assert_eq!(Value::Object(props), json!({"size": "small", "count": 3, "fast": true, "rules": ["a"]}));
        let bad = vec![("p.count".to_string(), "three".to_string())];
        assert_eq!(properties(&mut f, &bad).unwrap_err(), "count must be a whole number.");
        assert_eq!(f.iter().find(|f| f.name == "count").unwrap().value, "three");
    }

    #[test]
    fn tags_are_name_value_lines() {
        assert_eq!(Value::Object(tags("team=net\n\n env = dev ").unwrap()), json!({"team": "net", "env": "dev"}));
        assert!(tags("oops").is_err());
    }
}
