//! Who is asking: the principal a verified credential names. The API edge builds it (from a
//! JWT, an API token, or the loopback-only local mode); authorization and the jobs' extra vars
//! read it. A credential may be confined to subscriptions ([`Principal::reaches`]): it then
//! acts only inside them, whatever its roles elsewhere. Nothing here verifies anything.

/// How the principal proved who it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrincipalKind {
    /// A person, from an identity provider's token.
    User,
    /// Automation: an API token, or an identity provider's token for a client application.
    Application,
    /// Authentication is off (loopback only): the machine's own user, trusted with everything.
    Local,
}

impl PrincipalKind {
    /// ARM's `createdByType` vocabulary.
    pub fn as_arm_type(self) -> &'static str {
        match self {
            PrincipalKind::User | PrincipalKind::Local => "User",
            PrincipalKind::Application => "Application",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// Stable identifier: the subject (or object id) claim, or the API token's principal name.
    pub name: String,
    /// The identity provider's tenant of the principal, when it has one.
    pub tenant: Option<String>,
    /// Groups (or roles) the credential lists.
    pub groups: Vec<String>,
    pub kind: PrincipalKind,
    /// The subscriptions the credential is confined to — an API token a subscription's Owner
    /// made — whatever its roles grant elsewhere; empty: wherever its roles reach.
    pub confined_to: Vec<crate::ids::SubscriptionId>,
}

impl Principal {
    /// The principal of a request when authentication is off.
    pub fn local() -> Self {
        Principal {
            name: "local".into(),
            tenant: None,
            groups: Vec::new(),
            kind: PrincipalKind::Local,
            confined_to: Vec::new(),
        }
    }

    pub fn tenant_or_empty(&self) -> &str {
        self.tenant.as_deref().unwrap_or_default()
    }

    /// Whether the credential may act at `target` at all: anywhere, or within one of the
    /// subscriptions it is confined to (never at the platform scope, then).
    pub fn reaches(&self, target: &crate::access::Scope) -> bool {
        self.confined_to.is_empty()
            || self.confined_to.iter().any(|s| crate::access::Scope::subscription_scope(s).contains(target))
    }
}

/// What a job is told about who asked and for which tenant, captured when the request that
/// set the resource's current intent (its PUT, PATCH or DELETE) was admitted — as the seed's
/// tenant-resolved values come from the request's context, not from a later lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobContext {
    pub requested_by: RequestedBy,
    /// The subscription's registration; `None` when it is not registered (the local mode).
    pub tenant: Option<TenantContext>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestedBy {
    pub name: String,
    pub tenant: Option<String>,
    pub groups: Vec<String>,
}

impl From<&Principal> for RequestedBy {
    fn from(p: &Principal) -> Self {
        RequestedBy { name: p.name.clone(), tenant: p.tenant.clone(), groups: p.groups.clone() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantContext {
    pub tenant_id: String,
    pub display_name: String,
    /// The registry's free-form tenant attributes (storage classes, quotas, …).
    pub attributes: serde_json::Map<String, serde_json::Value>,
}
