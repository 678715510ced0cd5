//! Config version: FNV-1a 64 over the canonical compact JSON of a spec (object keys sorted),
//! rendered as 16 lowercase hex characters. The encoder reproduces Go `encoding/json` for
//! JSON values (HTML-safe escaping included), so versions match the OSAC operator's.

use std::fmt;

use serde_json::Value;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A spec hash. The empty version stands for "legacy: recorded before versions existed".
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigVersion(String);

impl ConfigVersion {
    pub fn of(spec: &Value) -> Self {
        ConfigVersion::of_bytes(canonical_json(spec).as_bytes())
    }

    pub fn of_bytes(bytes: &[u8]) -> Self {
        ConfigVersion(format!("{:016x}", fnv1a64(bytes)))
    }

    pub fn legacy() -> Self {
        ConfigVersion(String::new())
    }

    pub fn new(s: impl Into<String>) -> Self {
        ConfigVersion(s.into())
    }

    pub fn is_legacy(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConfigVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// Compact JSON with object keys sorted by their UTF-8 bytes, as Go marshals a map.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reference_vectors() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"key":"value"}"#, "90f31220e6080755"),
            (br#"{"key":"a"}"#, "c855a4bcffcb8447"),
            (br#"{"key":"b"}"#, "bfac7fbcfae417be"),
            (b"{}", "08f44b07b5901a25"),
            (b"null", "5b9bc4ba528108e4"),
            (br#"{"region":"us-east-1","networkClass":"default","implementationStrategy":"cudn"}"#, "27bc29625b17b04f"),
            (
                br#"{"Spec":{"virtualNetwork":"vnet-1","ipv4Cidr":"10.0.0.0/24"},"ImplementationStrategy":"cudn"}"#,
                "77bf11f97e9a9078",
            ),
            (b"", "cbf29ce484222325"),
            (b"a", "af63dc4c8601ec8c"),
            (b"foobar", "85944171f73967e8"),
        ];
        for (bytes, want) in cases {
            assert_eq!(ConfigVersion::of_bytes(bytes).as_str(), *want, "{}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn values_hash_through_canonical_json() {
        assert_eq!(ConfigVersion::of(&json!({"key": "value"})).as_str(), "90f31220e6080755");
        assert_eq!(ConfigVersion::of(&json!({})).as_str(), "08f44b07b5901a25");
        assert_eq!(ConfigVersion::of(&Value::Null).as_str(), "5b9bc4ba528108e4");
        let v = ConfigVersion::of(&json!({"key": "a"}));
        assert_eq!(v, ConfigVersion::of(&json!({"key": "a"})), "stable");
        assert_ne!(v, ConfigVersion::of(&json!({"key": "b"})));
        assert_eq!(v.as_str().len(), 16);
        assert!(v.as_str().chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn canonical_form_sorts_keys_and_escapes_like_go() {
        let v = json!({"b": [1, 2.5, true, null], "a": {"z": "<&>", "y": "q\"\\\n\u{1}\u{2028}"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"y":"q\"\\\n\u0001\u2028","z":"\u003c\u0026\u003e"},"b":[1,2.5,true,null]}"#
        );
    }

    #[test]
    fn key_order_does_not_matter() {
        let a: Value = serde_json::from_str(r#"{"x":1,"y":{"b":2,"a":1}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"y":{"a":1,"b":2},"x":1}"#).unwrap();
        assert_eq!(ConfigVersion::of(&a), ConfigVersion::of(&b));
    }
}
