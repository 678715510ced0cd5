//! Limits on request bodies that ARM enforces before a resource provider sees them: how
//! deeply a JSON body may nest, and how many tags a resource may have and how long they are.
//! Each answers `400` with a precise code and target instead of whatever a later step would
//! make of the input.

use std::collections::BTreeMap;

use slipway_domain::echo::echo;

use crate::error::ArmError;

/// Deepest nesting of objects and arrays in a request body (the body's own object is 1).
pub const MAX_DEPTH: usize = 32;
/// ARM's limits on tags.
pub const MAX_TAGS: usize = 50;
pub const MAX_TAG_KEY_CHARS: usize = 512;
pub const MAX_TAG_VALUE_CHARS: usize = 256;
/// Characters ARM refuses in a tag name (control characters too).
const TAG_KEY_FORBIDDEN: [char; 7] = ['<', '>', '%', '&', '\\', '?', '/'];

/// `400 InvalidRequestContent` when `body` nests objects and arrays deeper than
/// [`MAX_DEPTH`]. Only brackets outside strings count; the JSON itself is checked later.
pub fn check_depth(body: &[u8]) -> Result<(), ArmError> {
    let mut depth = 0usize;
    let (mut in_string, mut escaped) = (false, false);
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(ArmError::bad_request(
                        "InvalidRequestContent",
                        format!(
                            "The request content was invalid: it is nested too deeply (more than {MAX_DEPTH} levels of \
                             objects and arrays)."
                        ),
                    ));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// ARM's tag rules, on `PUT` and `PATCH`: at most [`MAX_TAGS`] tags; a name of 1 to
/// [`MAX_TAG_KEY_CHARS`] characters with none of `<>%&\?/` and no control characters; a
/// value of at most [`MAX_TAG_VALUE_CHARS`] characters. `400 InvalidTag`, target `tags` or
/// `tags.<name>` (a long name shortened).
pub fn check_tags(tags: &BTreeMap<String, String>) -> Result<(), ArmError> {
    let invalid = |target: String, message: String| ArmError::bad_request("InvalidTag", message).with_target(target);
    if tags.len() > MAX_TAGS {
        return Err(invalid(
            "tags".into(),
            format!("A resource can have at most {MAX_TAGS} tags; the request has {}.", tags.len()),
        ));
    }
    for (key, value) in tags {
        let shown = echo(key, 64);
        let target = format!("tags.{shown}");
        let key_chars = key.chars().count();
        if key_chars == 0 {
            return Err(invalid("tags".into(), "A tag name must not be empty.".into()));
        }
        if key_chars > MAX_TAG_KEY_CHARS {
            return Err(invalid(
                target,
                format!("The tag name '{shown}' has {key_chars} characters; at most {MAX_TAG_KEY_CHARS} are allowed."),
            ));
        }
        if key.chars().any(|c| c.is_control() || TAG_KEY_FORBIDDEN.contains(&c)) {
            return Err(invalid(
                target,
                format!(
                    "The tag name '{shown}' is not valid: it must not contain '<', '>', '%', '&', '\\', '?', '/' or \
                     control characters."
                ),
            ));
        }
        let value_chars = value.chars().count();
        if value_chars > MAX_TAG_VALUE_CHARS {
            return Err(invalid(
                target,
                format!(
                    "The value of the tag '{shown}' has {value_chars} characters; at most {MAX_TAG_VALUE_CHARS} are \
                     allowed."
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        // An object holding `levels - 1` arrays: `levels` levels in all.
        format!("{{\"a\": {}1{}}}", "[".repeat(levels - 1), "]".repeat(levels - 1))
    }

    #[test]
    fn depth_counts_objects_and_arrays_outside_strings() {
        assert!(check_depth(nested(MAX_DEPTH).as_bytes()).is_ok());
        let e = check_depth(nested(MAX_DEPTH + 1).as_bytes()).unwrap_err();
        assert_eq!((e.status.as_u16(), e.body.code.as_str()), (400, "InvalidRequestContent"));
        assert!(e.body.message.contains("nested too deeply"), "{}", e.body.message);
        // Brackets inside strings, escaped quotes included, are text.
        let text = format!("{{\"a\": \"\\\"{}\"}}", "[{".repeat(100));
        assert!(check_depth(text.as_bytes()).is_ok());
        // Siblings do not add up.
        let wide = format!("[{}]", vec!["[[]]"; 1000].join(","));
        assert!(check_depth(wide.as_bytes()).is_ok());
        // serde_json's own limit is far deeper: this is refused here first.
        assert!(check_depth(nested(120).as_bytes()).is_err());
    }

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn refusal(t: &BTreeMap<String, String>) -> (String, String, String) {
        let e = check_tags(t).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        (e.body.code, e.body.target.unwrap_or_default(), e.body.message)
    }

    #[test]
    fn tags_keep_to_arms_limits() {
        let key = "k".repeat(MAX_TAG_KEY_CHARS);
        let value = "v".repeat(MAX_TAG_VALUE_CHARS);
        assert!(check_tags(&tags(&[("env", "test"), (&key, &value), ("é-ü", "ünïcode"), ("a b:c*d+e", "")])).is_ok());
        let fifty: BTreeMap<String, String> = (0..MAX_TAGS).map(|i| (format!("t{i}"), String::new())).collect();
        assert!(check_tags(&fifty).is_ok());

        let mut many = fifty.clone();
        many.insert("one-more".into(), String::new());
        let (code, target, message) = refusal(&many);
        assert_eq!((code.as_str(), target.as_str()), ("InvalidTag", "tags"));
        assert!(message.contains("at most 50 tags"), "{message}");

        let long_key = "k".repeat(MAX_TAG_KEY_CHARS + 1);
        let (code, target, message) = refusal(&tags(&[(&long_key, "v")]));
        assert_eq!(code, "InvalidTag");
        assert!(target.starts_with("tags.kkkk") && target.ends_with('…') && target.len() < 80, "{target}");
        assert!(message.contains("513 characters"), "{message}");

        let long_value = "v".repeat(MAX_TAG_VALUE_CHARS + 1);
        let (_, target, message) = refusal(&tags(&[("env", &long_value)]));
        assert_eq!(target, "tags.env");
        assert!(message.contains("257 characters"), "{message}");

        for bad in ["a<b", "a>b", "50%", "a&b", "a\\b", "a?b", "a/b", "line\nbreak"] {
            let (code, target, message) = refusal(&tags(&[(bad, "v")]));
            assert_eq!(code, "InvalidTag", "{bad}");
            assert!(target.starts_with("tags.a") || target.starts_with("tags.50") || target.starts_with("tags.line"));
            assert!(message.contains("must not contain"), "{message}");
        }
        assert_eq!(refusal(&tags(&[("", "v")])).1, "tags");
    }
}
