//! ARM's resource-id grammar, written once: what a subscription id, a resource group name, a
//! namespace, a type segment and a resource name may be. The router, role-assignment scopes,
//! references in a spec, the store's metrics and the OpenAPI document's patterns all use it.

/// Why a path or one of its parts is not a resource id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("the path is not a resource id")]
    NotAResourceId,
    #[error("the path is not an operation status path")]
    NotAnOperationPath,
    #[error("the subscription '{0}' is not a GUID")]
    BadSubscription(String),
    #[error("the resource group name '{0}' is not valid: {rule}", rule = GROUP_NAME_RULE)]
    BadGroupName(String),
    #[error("'{0}' is not a resource provider namespace (letters and digits in dot-separated parts)")]
    BadNamespace(String),
    #[error("'{0}' is not a resource type (letters and digits)")]
    BadTypeSegment(String),
    #[error("the resource name '{0}' is not valid: {rule}", rule = ARM_NAME_RULE)]
    BadName(String),
}

/// ARM's longest resource name (the resource-provider contract).
pub const ARM_NAME_MAX_LENGTH: usize = 260;
/// Characters ARM never allows in a resource name (besides control characters).
const ARM_NAME_FORBIDDEN: [char; 8] = ['<', '>', '%', '&', ':', '\\', '?', '/'];

/// ARM's common rule, as error messages state it.
pub const ARM_NAME_RULE: &str =
    "use 1-260 characters, none of '<', '>', '%', '&', ':', '\\', '?', '/', no control characters, not '.' or '..'";

/// ARM's common rule as a JSON Schema (ECMA-262) pattern, with the length and the dot
/// segments left to `maxLength` and `not`.
pub const ARM_NAME_PATTERN: &str = r"^[^<>%&:\\?/\u0000-\u001f\u007f-\u009f]+$";

/// Names that are URL dot segments.
pub const DOT_SEGMENTS: [&str; 2] = [".", ".."];

/// ARM's longest resource group name.
pub const GROUP_NAME_MAX_LENGTH: usize = 90;

/// ARM's resource-group rule, as error messages state it.
pub const GROUP_NAME_RULE: &str = "use 1-90 letters, digits, '-', '_', '.' or '()', not ending in '.'";

/// ARM's resource-group rule as a JSON Schema pattern (the length left to `maxLength`).
pub const GROUP_NAME_PATTERN: &str = r"^[A-Za-z0-9_.()\-]*[A-Za-z0-9_()\-]$";

/// A GUID, any case, as a JSON Schema pattern.
pub const GUID_PATTERN: &str = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// ARM's common rule for resource names: 1-260 characters, none of `<>%&:\?/`, no control
/// characters, and not `.` or `..` (URL dot segments: every HTTP client removes them, so no
/// such resource could be addressed). Every name of every type keeps to it (it is also what a
/// resource id can carry); a type's own rule comes on top.
pub fn arm_name_ok(name: &str) -> bool {
    let len = name.chars().count();
    (1..=ARM_NAME_MAX_LENGTH).contains(&len)
        && !DOT_SEGMENTS.contains(&name)
        && !name.chars().any(|c| c.is_control() || ARM_NAME_FORBIDDEN.contains(&c))
}

/// ARM's resource-group rule: 1-90 letters, digits, `-_.()`, not ending in `.`.
pub fn group_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= GROUP_NAME_MAX_LENGTH
        && !name.ends_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '(' | ')'))
}

/// A GUID: 8-4-4-4-12 hex digits, any case, no braces (what a subscription id is).
pub fn is_guid(s: &str) -> bool {
    s.len() == 36
        && s.bytes()
            .enumerate()
            .all(|(i, b)| if matches!(i, 8 | 13 | 18 | 23) { b == b'-' } else { b.is_ascii_hexdigit() })
}

/// A resource provider namespace: two or more dot-separated parts, each a letter then
/// letters and digits (`Contoso.Dns`).
pub fn namespace_ok(ns: &str) -> bool {
    let parts: Vec<&str> = ns.split('.').collect();
    parts.len() >= 2
        && parts.iter().all(|p| {
            p.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && p.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// A type name segment: letters and digits (`virtualNetworks`, `subnets`).
pub fn type_segment_ok(seg: &str) -> bool {
    !seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphanumeric())
}

pub fn check_subscription(sub: &str) -> Result<(), IdError> {
    if is_guid(sub) { Ok(()) } else { Err(IdError::BadSubscription(sub.to_string())) }
}

pub fn check_group(group: &str) -> Result<(), IdError> {
    if group_name_ok(group) { Ok(()) } else { Err(IdError::BadGroupName(group.to_string())) }
}

pub fn check_namespace(ns: &str) -> Result<(), IdError> {
    if namespace_ok(ns) { Ok(()) } else { Err(IdError::BadNamespace(ns.to_string())) }
}

/// `{type}/{name}[/{type}/{name}…]`: at least one pair, each type a type segment and each
/// name by ARM's common rule.
pub fn check_pairs(pairs: &[&str]) -> Result<(), IdError> {
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(IdError::NotAResourceId);
    }
    for pair in pairs.chunks(2) {
        if !type_segment_ok(pair[0]) {
            return Err(IdError::BadTypeSegment(pair[0].to_string()));
        }
        if !arm_name_ok(pair[1]) {
            return Err(IdError::BadName(pair[1].to_string()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_to_arm_rules() {
        assert!(arm_name_ok(&"a".repeat(ARM_NAME_MAX_LENGTH)));
        assert!(!arm_name_ok(&"a".repeat(ARM_NAME_MAX_LENGTH + 1)));
        assert!(arm_name_ok("with space") && arm_name_ok("ends."), "ARM's common rule allows both");
        assert!(!arm_name_ok("a/b") && !arm_name_ok("..") && !arm_name_ok("a\u{7}"));
        assert!(group_name_ok("ok-name_1.(x)"));
        assert!(!group_name_ok("ends.") && !group_name_ok(&"a".repeat(91)) && !group_name_ok("with space"));
        assert!(namespace_ok("Contoso.Dns") && !namespace_ok("Contoso") && !namespace_ok("Contoso.1x"));
        assert!(is_guid("6F9619FF-8B86-D011-B42D-00C04FC964FF") && !is_guid("sub-1"));
    }

    #[test]
    fn pairs_name_their_first_bad_part() {
        assert_eq!(check_pairs(&["things", "a b"]), Ok(()));
        assert_eq!(check_pairs(&["things"]), Err(IdError::NotAResourceId));
        assert_eq!(check_pairs(&[]), Err(IdError::NotAResourceId));
        assert_eq!(check_pairs(&["th-ings", "a"]), Err(IdError::BadTypeSegment("th-ings".into())));
        assert_eq!(check_pairs(&["things", "a", "subs", "x?"]), Err(IdError::BadName("x?".into())));
    }
}
