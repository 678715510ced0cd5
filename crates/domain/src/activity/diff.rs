//! The properties a change altered in a resource's spec, as Resource Graph's change history
//! shows them: a JSON path (`properties.addressSpace.addressPrefixes[0]`, `tags.env`,
//! `location`), what kind of change, and the values before and after. A secret property is
//! stored sealed; its change is shown by path alone, never with a value (sealed or not).

use serde_json::Value;

use crate::resource::Spec;

/// The key a sealed secret's stored object carries (`slipway_secrets::SEALED`; a test in the
/// API crate keeps the two equal).
pub const SEALED_MARKER: &str = "$slipwaySecret";

/// The most changed paths an entry lists; a larger change says it was truncated.
pub const MAX_CHANGES: usize = 100;

/// Resource Graph's `propertyChangeType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Insert,
    Update,
    Remove,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Insert => "Insert",
            ChangeKind::Update => "Update",
            ChangeKind::Remove => "Remove",
        }
    }

    pub fn parse(s: &str) -> Option<ChangeKind> {
        [ChangeKind::Insert, ChangeKind::Update, ChangeKind::Remove].into_iter().find(|k| k.as_str() == s)
    }
}

/// One changed path. A secret's values are `None` whatever they were.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyChange {
    pub path: String,
    pub kind: ChangeKind,
    pub previous: Option<Value>,
    pub new: Option<Value>,
    pub secret: bool,
}

/// The paths at which `new` differs from `old` (either absent: a create, or a resource gone),
/// in document order, at most [`MAX_CHANGES`]; and whether there were more.
pub fn spec_changes(old: Option<&Spec>, new: Option<&Spec>) -> (Vec<PropertyChange>, bool) {
    let mut out = Changes { list: Vec::new(), truncated: false };
    let as_value = |s: &Spec| {
        let tags: serde_json::Map<String, Value> =
            s.tags.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        let mut doc = serde_json::Map::new();
        if let Some(l) = &s.location {
            doc.insert("location".into(), Value::String(l.clone()));
        }
        if !tags.is_empty() {
            doc.insert("tags".into(), Value::Object(tags));
        }
        if !s.properties.is_null() {
            doc.insert("properties".into(), s.properties.clone());
        }
        Value::Object(doc)
    };
    let (old, new) = (old.map(as_value), new.map(as_value));
    walk(&mut out, String::new(), old.as_ref(), new.as_ref());
    (out.list, out.truncated)
}

struct Changes {
    list: Vec<PropertyChange>,
    truncated: bool,
}

impl Changes {
    fn push(&mut self, path: String, old: Option<&Value>, new: Option<&Value>) {
        if self.list.len() == MAX_CHANGES {
            self.truncated = true;
            return;
        }
        let kind = match (old, new) {
            (None, _) => ChangeKind::Insert,
            (_, None) => ChangeKind::Remove,
            _ => ChangeKind::Update,
        };
        let secret = old.is_some_and(is_sealed) || new.is_some_and(is_sealed);
        let shown = |v: Option<&Value>| if secret { None } else { v.cloned() };
        self.list.push(PropertyChange { path, kind, previous: shown(old), new: shown(new), secret });
    }
}

fn is_sealed(v: &Value) -> bool {
    v.as_object().is_some_and(|o| o.contains_key(SEALED_MARKER))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn walk(out: &mut Changes, path: String, old: Option<&Value>, new: Option<&Value>) {
    match (old, new) {
        (Some(a), Some(b)) if a == b => {}
        // Both sealed: a secret re-sealed (its nonce is new) may or may not have changed; a
        // sealed value never shows whether it did, so it counts as changed.
        (Some(a), Some(b)) if is_sealed(a) || is_sealed(b) => out.push(path, old, new),
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            for (k, va) in a {
                walk(out, join(&path, k), Some(va), b.get(k));
            }
            for (k, vb) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                walk(out, join(&path, k), None, Some(vb));
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                walk(out, format!("{path}[{i}]"), a.get(i), b.get(i));
            }
        }
        // A whole object appearing or going is listed leaf by leaf, so a secret inside it is
        // still seen as one.
        (None, Some(Value::Object(b))) if !is_sealed(new.unwrap_or(&Value::Null)) && !b.is_empty() => {
            for (k, v) in b {
                walk(out, join(&path, k), None, Some(v));
            }
        }
        (Some(Value::Object(a)), None) if !is_sealed(old.unwrap_or(&Value::Null)) && !a.is_empty() => {
            for (k, v) in a {
                walk(out, join(&path, k), Some(v), None);
            }
        }
        (None, None) => {}
        _ => out.push(path, old, new),
    }
}
