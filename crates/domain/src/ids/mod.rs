//! Resource and operation identities. ARM ids are matched case-insensitively (by a lowercased
//! key) and echoed in the casing they were created with. [`ArmId::parse`] checks an id from
//! outside by the whole grammar (`grammar`); [`ArmId::read_stored`] reads a stored one back
//! unchecked. [`SubscriptionId`] is a subscription lowercased once, so every lookup agrees on
//! its casing. Operation ids and status paths are [`operation`]'s.

use std::fmt;

use serde::{Deserialize, Serialize};

mod grammar;
mod operation;
pub use grammar::*;
pub use operation::{OperationId, OperationPath};

/// `/subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}/{name}`, or for a child
/// resource `…/{ns}/{parentType}/{parentName}/{type}/{name}` (any depth).
///
/// `type_name` is the full type, ARM-style: `virtualNetworks` or `virtualNetworks/subnets`;
/// `parent_names` holds one name per type segment but the last (empty for a top-level
/// resource), `name` the resource's own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArmId {
    pub subscription: String,
    pub resource_group: String,
    pub namespace: String,
    pub type_name: String,
    pub parent_names: Vec<String>,
    pub name: String,
}

impl ArmId {
    /// A top-level resource's id, as code builds one: the group and the name keep to the
    /// grammar; the subscription and the namespace are the caller's (the router and
    /// [`ArmId::parse`] check them where ids come from outside).
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
        check_group(&id.resource_group)?;
        if !arm_name_ok(&id.name) {
            return Err(IdError::BadName(id.name));
        }
        if id.subscription.is_empty() || id.namespace.is_empty() || !id.type_name.split('/').all(type_segment_ok) {
            return Err(IdError::NotAResourceId);
        }
        Ok(id)
    }

    /// An id from its decoded parts, checked by the whole grammar: a GUID subscription, the
    /// group rule, a namespace, and `{type}/{name}` pairs (child ids nest them).
    pub fn from_segments(subscription: &str, group: &str, namespace: &str, pairs: &[&str]) -> Result<Self, IdError> {
        check_subscription(subscription)?;
        check_group(group)?;
        check_pairs(pairs)?;
        check_namespace(namespace)?;
        let id = Self::of_pairs(subscription, group, namespace, pairs);
        // `…/providers/Microsoft.Resources/resourceGroups/{name}` would read as a group's own
        // id: no resource may have that shape.
        if id.is_group() {
            return Err(IdError::NotAResourceId);
        }
        Ok(id)
    }

    /// A resource group's id, `/subscriptions/{sub}/resourceGroups/{group}`: ARM's
    /// `Microsoft.Resources/resourceGroups` resource, whose key prefixes the key of every
    /// resource in the group. The group name keeps to the grammar.
    pub fn group(subscription: impl Into<String>, group: impl Into<String>) -> Result<Self, IdError> {
        let group = group.into();
        check_group(&group)?;
        Ok(ArmId {
            subscription: subscription.into(),
            resource_group: group.clone(),
            namespace: GROUP_NAMESPACE.to_string(),
            type_name: GROUP_TYPE_NAME.to_string(),
            parent_names: Vec::new(),
            name: group,
        })
    }

    /// Whether this is a resource group's own id (see [`ArmId::group`]).
    pub fn is_group(&self) -> bool {
        self.parent_names.is_empty()
            && self.namespace.eq_ignore_ascii_case(GROUP_NAMESPACE)
            && self.type_name.eq_ignore_ascii_case(GROUP_TYPE_NAME)
    }

    /// The id of the resource this one lives in: its parent, or for a top-level resource its
    /// group (`None` for a group). A parent's or a group's delete waits for what it contains.
    pub fn container(&self) -> Option<ArmId> {
        if self.is_group() {
            return None;
        }
        self.parent().or_else(|| Some(self.group_id()))
    }

    /// The id of the group this resource is in (a group's is its own).
    pub fn group_id(&self) -> ArmId {
        ArmId {
            subscription: self.subscription.clone(),
            resource_group: self.resource_group.clone(),
            namespace: GROUP_NAMESPACE.to_string(),
            type_name: GROUP_TYPE_NAME.to_string(),
            parent_names: Vec::new(),
            name: self.resource_group.clone(),
        }
    }

    /// Parses an id path (segment keywords matched case-insensitively) by the whole grammar;
    /// what clients write in a spec's references. Segments are taken as they are (no
    /// percent-decoding: the router decodes a request's path before [`ArmId::from_segments`]).
    pub fn parse(path: &str) -> Result<Self, IdError> {
        match id_segments(path) {
            Some((sub, rg, ns, pairs)) => Self::from_segments(sub, rg, ns, &pairs),
            None => Err(IdError::NotAResourceId),
        }
    }

    /// A stored id (an operation's `resource_id`) read back, unchecked: it was checked when
    /// it was accepted, and ids stored before the grammar tightened (subscriptions that are
    /// not GUIDs) still read.
    pub fn read_stored(id: &str) -> Option<Self> {
        if let Some((sub, rg)) = group_segments(id) {
            return Some(ArmId::of_pairs(sub, rg, GROUP_NAMESPACE, &[GROUP_TYPE_NAME, rg]));
        }
        let (sub, rg, ns, pairs) = id_segments(id)?;
        let shaped = !pairs.is_empty() && pairs.len().is_multiple_of(2) && !pairs.iter().any(|s| s.is_empty());
        (shaped && ![sub, rg, ns].contains(&"")).then(|| Self::of_pairs(sub, rg, ns, &pairs))
    }

    /// The id `pairs` (`type, name, type, name, …`) spell, unchecked.
    fn of_pairs(sub: &str, rg: &str, ns: &str, pairs: &[&str]) -> Self {
        let types: Vec<&str> = pairs.iter().step_by(2).copied().collect();
        let mut names: Vec<String> = pairs.iter().skip(1).step_by(2).map(|n| n.to_string()).collect();
        let name = names.pop().unwrap_or_default();
        ArmId {
            subscription: sub.to_string(),
            resource_group: rg.to_string(),
            namespace: ns.to_string(),
            type_name: types.join("/"),
            parent_names: names,
            name,
        }
    }

    pub fn key(&self) -> ResourceKey {
        ResourceKey::new(self.to_string())
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

/// `/subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{pairs…}` split into its parts,
/// the keywords matched case-insensitively; `None` for any other shape.
fn id_segments(path: &str) -> Option<(&str, &str, &str, Vec<&str>)> {
    let segs: Vec<&str> = path.strip_prefix('/')?.trim_end_matches('/').split('/').collect();
    match segs.as_slice() {
        [s, sub, r, rg, p, ns, pairs @ ..]
            if s.eq_ignore_ascii_case("subscriptions")
                && r.eq_ignore_ascii_case("resourceGroups")
                && p.eq_ignore_ascii_case("providers") =>
        {
            Some((sub, rg, ns, pairs.to_vec()))
        }
        _ => None,
    }
}

/// `/subscriptions/{sub}/resourceGroups/{rg}` split into its parts; `None` for any other
/// shape.
fn group_segments(path: &str) -> Option<(&str, &str)> {
    let segs: Vec<&str> = path.strip_prefix('/')?.trim_end_matches('/').split('/').collect();
    match segs.as_slice() {
        [s, sub, r, rg]
            if s.eq_ignore_ascii_case("subscriptions")
                && r.eq_ignore_ascii_case("resourceGroups")
                && !sub.is_empty()
                && !rg.is_empty() =>
        {
            Some((sub, rg))
        }
        _ => None,
    }
}

/// The namespace and type of a resource group (ARM's `Microsoft.Resources/resourceGroups`).
pub const GROUP_NAMESPACE: &str = "Microsoft.Resources";
pub const GROUP_TYPE_NAME: &str = "resourceGroups";

impl fmt::Display for ArmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_group() {
            return write!(f, "/subscriptions/{}/resourceGroups/{}", self.subscription, self.resource_group);
        }
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

/// The lowercased id: the storage key of a resource. Lowercased once, by its constructors,
/// so no reader lowercases it again.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey(String);

impl ResourceKey {
    /// The key of a resource id in any casing (a stored key reads back unchanged).
    pub fn new(id: impl Into<String>) -> ResourceKey {
        let mut key = id.into();
        key.make_ascii_lowercase();
        ResourceKey(key)
    }

    /// The key of a resource group, `/subscriptions/{sub}/resourcegroups/{group}`: the key of
    /// every resource in the group starts with it and a `/`.
    pub fn group(subscription: &SubscriptionId, group: &str) -> ResourceKey {
        ResourceKey::new(format!("/subscriptions/{}/resourcegroups/{group}", subscription.as_str()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `namespace/type`, lowercased, e.g. `slipway.example/virtualnetworks`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeKey(String);

impl TypeKey {
    pub fn new(namespace: &str, type_name: &str) -> Self {
        TypeKey::parse(format!("{namespace}/{type_name}"))
    }

    /// A type key written whole (`Namespace/type`, as stored or configured), lowercased.
    pub fn parse(text: impl Into<String>) -> Self {
        let mut key = text.into();
        key.make_ascii_lowercase();
        TypeKey(key)
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

#[cfg(test)]
mod tests {
    use super::*;

    const SUB: &str = "6F9619FF-8B86-D011-B42D-00C04FC964FF";

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
    fn a_group_id_prefixes_its_resources_keys() {
        let group = ArmId::group(SUB, "My.RG").unwrap();
        assert!(group.is_group());
        assert_eq!(group.to_string(), format!("/subscriptions/{SUB}/resourceGroups/My.RG"));
        assert_eq!(group.key(), ResourceKey::group(&SubscriptionId::new(SUB), "my.rg"));
        assert_eq!(group.type_key().as_str(), "microsoft.resources/resourcegroups");
        assert_eq!(group.container(), None);
        assert_eq!(ArmId::read_stored(&group.to_string()), Some(group.clone()));
        let vnet = ArmId::new(SUB, "My.RG", "Slipway.Example", "virtualNetworks", "v").unwrap();
        assert_eq!(vnet.container(), Some(group.clone()));
        assert!(vnet.key().is_under(&group.key()));
        assert_eq!(vnet.group_id(), group);
        let subnet = ArmId::parse(&format!("{vnet}/subnets/s")).unwrap();
        assert_eq!(subnet.container(), Some(vnet));
        let posing = format!("/subscriptions/{SUB}/resourceGroups/g/providers/Microsoft.Resources/resourceGroups/x");
        assert_eq!(ArmId::parse(&posing), Err(IdError::NotAResourceId), "no resource poses as a group");
        assert!(ArmId::group(SUB, "bad/name").is_err());
    }

    #[test]
    fn parses_and_echoes_casing() {
        let id = ArmId::parse(&format!(
            "/subscriptions/{SUB}/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1"
        ))
        .unwrap();
        assert_eq!(id.subscription, SUB);
        assert_eq!(id.resource_group, "My.RG");
        assert_eq!(id.type_name, "virtualNetworks");
        assert_eq!(
            id.to_string(),
            format!("/subscriptions/{SUB}/resourceGroups/My.RG/providers/Slipway.Example/virtualNetworks/VNet1")
        );
        let other = ArmId::parse(&format!(
            "/SUBSCRIPTIONS/{}/RESOURCEGROUPS/my.rg/PROVIDERS/slipway.example/VIRTUALNETWORKS/vnet1",
            SUB.to_ascii_lowercase()
        ))
        .unwrap();
        assert_eq!(id.key(), other.key());
        assert_eq!(id.type_key(), TypeKey("slipway.example/virtualnetworks".into()));
    }

    #[test]
    fn child_ids_nest_type_and_name_pairs() {
        let path =
            format!("/subscriptions/{SUB}/resourceGroups/RG/providers/Slipway.Example/virtualNetworks/V1/subnets/S1");
        let path = path.as_str();
        let id = ArmId::parse(path).unwrap();
        assert_eq!(id.type_name, "virtualNetworks/subnets");
        assert_eq!(id.parent_names, vec!["V1".to_string()]);
        assert_eq!(id.name, "S1");
        assert_eq!(id.to_string(), path);
        assert_eq!(id.type_key(), TypeKey("slipway.example/virtualnetworks/subnets".into()));
        let parent = id.parent().unwrap();
        assert_eq!(
            parent.to_string(),
            format!("/subscriptions/{SUB}/resourceGroups/RG/providers/Slipway.Example/virtualNetworks/V1")
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
        let base = format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Ns.A");
        assert_eq!(ArmId::parse(&format!("/subscriptions/{SUB}/resourceGroups/rg")), Err(IdError::NotAResourceId));
        assert_eq!(ArmId::parse(&format!("{base}/t")), Err(IdError::NotAResourceId), "a collection");
        assert_eq!(ArmId::parse(&format!("{base}/t/n")).map(|id| id.name), Ok("n".into()));
        assert_eq!(
            ArmId::parse("/subscriptions/sub-1/resourceGroups/rg/providers/Ns.A/t/n"),
            Err(IdError::BadSubscription("sub-1".into()))
        );
        assert_eq!(
            ArmId::parse(&format!("/subscriptions/{SUB}/resourceGroups/ends./providers/Ns.A/t/n")),
            Err(IdError::BadGroupName("ends.".into()))
        );
        assert_eq!(ArmId::parse(&base.replace("Ns.A", "Ns")), Err(IdError::NotAResourceId));
        assert_eq!(
            ArmId::parse(&format!("{}/t/n", base.replace("Ns.A", "Ns"))),
            Err(IdError::BadNamespace("Ns".into()))
        );
        assert_eq!(ArmId::parse(&format!("{base}/t/a?b")), Err(IdError::BadName("a?b".into())));
        let long = "a".repeat(91);
        assert_eq!(
            ArmId::parse(&format!("{base}/t/with space {long}")).map(|id| id.name),
            Ok(format!("with space {long}"))
        );
        assert_eq!(ArmId::new("s", "rg", "Ns", "t", &long).map(|id| id.name), Ok(long));
    }

    #[test]
    fn stored_ids_read_back_unchecked() {
        let old =
            ArmId::read_stored("/subscriptions/x/resourceGroups/rg/providers/ns/t/n").expect("stored before GUIDs");
        assert_eq!(old.subscription, "x");
        assert_eq!(ArmId::read_stored("/subscriptions/x/providers/ns/t"), None);
        assert_eq!(ArmId::read_stored("/subscriptions/x/resourceGroups/rg/providers/ns/t"), None);
        assert_eq!(ArmId::read_stored("/subscriptions/x/resourceGroups/rg/providers/ns/t//n"), None);
    }
}
