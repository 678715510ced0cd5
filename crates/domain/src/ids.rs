//! Resource and operation identities. ARM ids are matched case-insensitively (by a lowercased
//! key) and echoed in the casing they were created with.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `/subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}/{name}`, or for a child
/// resource `…/{ns}/{parentType}/{parentName}/{type}/{name}` (any depth).
///
/// `type_name` is the full type, ARM-style: `virtualNetworks` or `virtualNetworks/subnets`;
/// `parent_names` holds one name per type segment but the last (empty for a top-level
/// resource), `name` the resource's own.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmId {
    pub subscription: String,
    pub resource_group: String,
    pub namespace: String,
    pub type_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_names: Vec<String>,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("'{0}' is not a valid resource name: use 1-90 letters, digits, '-', '_', '.' or '()', not ending in '.'")]
    InvalidName(String),
    #[error("the path is not a resource id")]
    NotAResourceId,
}

/// ARM-style resource name rule (also used for resource groups).
pub fn validate_name(name: &str) -> Result<(), IdError> {
    let ok = !name.is_empty()
        && name.len() <= 90
        && !name.ends_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '(' | ')'));
    if ok { Ok(()) } else { Err(IdError::InvalidName(name.to_string())) }
}

/// ARM's longest resource name (the resource-provider contract).
pub const ARM_NAME_MAX_LENGTH: usize = 260;
/// Characters ARM never allows in a resource name (besides control characters).
const ARM_NAME_FORBIDDEN: [char; 8] = ['<', '>', '%', '&', ':', '\\', '?', '/'];

/// Names that are URL dot segments.
pub const DOT_SEGMENTS: [&str; 2] = [".", ".."];

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

impl ArmId {
    /// A top-level resource's id.
    pub fn new(
        subscription: impl Into<String>,
        resource_group: impl Into<String>,
        namespace: impl Into<String>,
        type_name: impl Into<String>,
        name: impl Into<String>,
    ) -> Result<Self, IdError> {
        let id = ArmId {
            subscription: subscription.into(),
            resource_group: resource_group.into(),
            namespace: namespace.into(),
            type_name: type_name.into(),
            parent_names: Vec::new(),
            name: name.into(),
        };
        validate_name(&id.resource_group)?;
        validate_name(&id.name)?;
        if id.subscription.is_empty() || id.namespace.is_empty() || id.type_name.is_empty() {
            return Err(IdError::NotAResourceId);
        }
        Ok(id)
    }

    /// Parses an id path (segment keywords matched case-insensitively); child ids nest
    /// `{type}/{name}` pairs after the namespace.
    pub fn parse(path: &str) -> Result<Self, IdError> {
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        match segs.as_slice() {
            [s, sub, r, rg, p, ns, pairs @ ..]
                if s.eq_ignore_ascii_case("subscriptions")
                    && r.eq_ignore_ascii_case("resourcegroups")
                    && p.eq_ignore_ascii_case("providers")
                    && !pairs.is_empty()
                    && pairs.len() % 2 == 0 =>
            {
                let types: Vec<&str> = pairs.iter().step_by(2).copied().collect();
                let names: Vec<&str> = pairs.iter().skip(1).step_by(2).copied().collect();
                let (name, parents) = names.split_last().expect("at least one pair");
                for n in parents {
                    validate_name(n)?;
                }
                let mut id = ArmId::new(*sub, *rg, *ns, types.join("/"), *name)?;
                id.parent_names = parents.iter().map(|n| n.to_string()).collect();
                if types.iter().any(|t| t.is_empty()) {
                    return Err(IdError::NotAResourceId);
                }
                Ok(id)
            }
            _ => Err(IdError::NotAResourceId),
        }
    }

    pub fn key(&self) -> ResourceKey {
        ResourceKey(self.to_string().to_ascii_lowercase())
    }

    pub fn type_key(&self) -> TypeKey {
        TypeKey::new(&self.namespace, &self.type_name)
    }

    pub fn subscription_key(&self) -> SubscriptionId {
        SubscriptionId::new(&self.subscription)
    }

    pub fn resource_group_key(&self) -> String {
        self.resource_group.to_ascii_lowercase()
    }

    /// The id of the resource this one is a child of; `None` for a top-level resource.
    pub fn parent(&self) -> Option<ArmId> {
        let (own, parents) = self.parent_names.split_last()?;
        let (parent_type, _) = self.type_name.rsplit_once('/')?;
        Some(ArmId {
            subscription: self.subscription.clone(),
            resource_group: self.resource_group.clone(),
            namespace: self.namespace.clone(),
            type_name: parent_type.to_string(),
            parent_names: parents.to_vec(),
            name: own.clone(),
        })
    }
}

impl fmt::Display for ArmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "/subscriptions/{}/resourceGroups/{}/providers/{}",
            self.subscription, self.resource_group, self.namespace
        )?;
        let mut names = self.parent_names.iter().chain(std::iter::once(&self.name));
        for ty in self.type_name.split('/') {
            write!(f, "/{ty}/{}", names.next().map(String::as_str).unwrap_or_default())?;
        }
        Ok(())
    }
}

impl ResourceKey {
    /// Whether `self` is the key of a resource nested (at any depth) under `parent`.
    pub fn is_under(&self, parent: &ResourceKey) -> bool {
        self.0.len() > parent.0.len() + 1 && self.0.starts_with(&parent.0) && self.0.as_bytes()[parent.0.len()] == b'/'
    }
}

/// The lowercased id: the storage key of a resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceKey(pub String);

impl ResourceKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `namespace/type`, lowercased, e.g. `slipway.example/virtualnetworks`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TypeKey(pub String);

impl TypeKey {
    pub fn new(namespace: &str, type_name: &str) -> Self {
        TypeKey(format!("{namespace}/{type_name}").to_ascii_lowercase())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TypeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A subscription id as a key: lowercased once, here, so every comparison and lookup of a
/// subscription (operations, notifications, lists) agrees on the casing. The id in a
/// resource's path keeps the client's casing (`ArmId::subscription`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SubscriptionId(String);

impl SubscriptionId {
    pub fn new(id: &str) -> Self {
        SubscriptionId(id.to_ascii_lowercase())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SubscriptionId {
    fn from(id: &str) -> Self {
        SubscriptionId::new(id)
    }
}

impl From<&String> for SubscriptionId {
    fn from(id: &String) -> Self {
        SubscriptionId::new(id)
    }
}

impl From<&SubscriptionId> for SubscriptionId {
    fn from(id: &SubscriptionId) -> Self {
        id.clone()
    }
}

impl fmt::Display for SubscriptionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for SubscriptionId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for SubscriptionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// An operation id: a lowercase UUID chosen by the API when it accepts a request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OperationId(String);

impl OperationId {
    /// Accepts a UUID in any case (8-4-4-4-12 hex digits); stores it lowercased.
    pub fn parse(s: &str) -> Option<Self> {
        let groups: Vec<&str> = s.split('-').collect();
        let lens = [8, 4, 4, 4, 12];
        let ok = groups.len() == 5
            && groups.iter().zip(lens).all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()));
        ok.then(|| OperationId(s.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_ids_are_normalised_once() {
        let a = SubscriptionId::new("Sub-ABC");
        assert_eq!(a.as_str(), "sub-abc");
        assert_eq!(a, SubscriptionId::from("SUB-abc"));
        assert_eq!(a, "sub-abc");
        assert_eq!(serde_json::to_string(&a).unwrap(), r#""sub-abc""#, "stored as a plain string");
        let id = ArmId::new("Sub-ABC", "rg", "Ns", "things", "n").unwrap();
        assert_eq!(id.subscription_key(), a);
        assert_eq!(id.subscription, "Sub-ABC", "the path keeps the client's casing");
    }

    #[test]
    fn parses_and_echoes_casing() {
        let id =
            ArmId::parse("/subscriptions/SUB-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1")
                .unwrap();
        assert_eq!(id.subscription, "SUB-1");
        assert_eq!(id.resource_group, "My.RG");
        assert_eq!(id.type_name, "virtualNetworks");
        assert_eq!(
            id.to_string(),
            "/subscriptions/SUB-1/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1"
        );
        let other =
            ArmId::parse("/SUBSCRIPTIONS/sub-1/RESOURCEGROUPS/my.rg/PROVIDERS/slipway.example/VIRTUALNETWORKS/vnet1")
                .unwrap();
        assert_eq!(id.key(), other.key());
        assert_eq!(id.type_key(), TypeKey("slipway.example/virtualnetworks".into()));
    }

    #[test]
    fn child_ids_nest_type_and_name_pairs() {
        let path = "/subscriptions/S/resourceGroups/RG/providers/Slipway.Example/virtualNetworks/V1/subnets/S1";
        let id = ArmId::parse(path).unwrap();
        assert_eq!(id.type_name, "virtualNetworks/subnets");
        assert_eq!(id.parent_names, vec!["V1".to_string()]);
        assert_eq!(id.name, "S1");
        assert_eq!(id.to_string(), path);
        assert_eq!(id.type_key(), TypeKey("slipway.example/virtualnetworks/subnets".into()));
        let parent = id.parent().unwrap();
        assert_eq!(
            parent.to_string(),
            "/subscriptions/S/resourceGroups/RG/providers/Slipway.Example/virtualNetworks/V1"
        );
        assert_eq!(parent.parent(), None);
        assert!(id.key().is_under(&parent.key()));
        assert!(!parent.key().is_under(&id.key()));
        let sibling = ArmId::parse(&path.replace("/V1/", "/V10/")).unwrap();
        assert!(!sibling.key().is_under(&parent.key()), "a name with the parent's as prefix is not under it");
        let deep = ArmId::parse(&format!("{path}/ports/p1")).unwrap();
        assert_eq!(deep.parent().unwrap(), id);
        assert_eq!(deep.to_string(), format!("{path}/ports/p1"));
        assert_eq!(ArmId::parse(&format!("{path}/ports")), Err(IdError::NotAResourceId), "a collection");
    }

    #[test]
    fn rejects_bad_ids_and_names() {
        assert_eq!(ArmId::parse("/subscriptions/s/resourceGroups/rg"), Err(IdError::NotAResourceId));
        assert_eq!(ArmId::parse("/subscriptions/s/resourceGroups/rg/providers/ns/t"), Err(IdError::NotAResourceId));
        assert!(matches!(
            ArmId::parse("/subscriptions/s/resourceGroups/rg/providers/ns/t/bad name"),
            Err(IdError::InvalidName(_))
        ));
        assert!(validate_name("ends.").is_err());
        assert!(validate_name(&"a".repeat(91)).is_err());
        assert!(validate_name("ok-name_1.(x)").is_ok());
    }

    #[test]
    fn operation_ids_are_uuids() {
        let id = OperationId::parse("6F9619FF-8B86-D011-B42D-00C04FC964FF").unwrap();
        assert_eq!(id.as_str(), "6f9619ff-8b86-d011-b42d-00c04fc964ff");
        assert!(OperationId::parse("not-a-uuid").is_none());
        assert!(OperationId::parse("6f9619ff-8b86-d011-b42d-00c04fc964f").is_none());
    }
}
