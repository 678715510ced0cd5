//! Who may do what where (ARM-style role-based access): role assignments bind a principal or
//! a group to a built-in role at a scope, and a scope contains everything below it. One pure
//! function decides; the API edge only gathers the assignments and names the action.

use crate::identity::{Principal, PrincipalKind};
use crate::ids::{self, ArmId, DOT_SEGMENTS, IdError, ResourceKey, SubscriptionId};

/// An ARM scope: `/` (the platform), `/subscriptions/{s}`, `…/resourceGroups/{rg}`, or a
/// resource id. Kept lowercased (ARM scopes are case-insensitive) and without a trailing `/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope(String);

/// Why a path is not a canonical scope.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScopeError(String);

impl From<IdError> for ScopeError {
    fn from(e: IdError) -> Self {
        match e {
            IdError::NotAResourceId => ScopeError("below providers/{namespace} come {type}/{name} pairs".into()),
            other => ScopeError(other.to_string()),
        }
    }
}

impl Scope {
    pub fn platform() -> Self {
        Scope("/".into())
    }

    /// A canonical scope from a path whose segments are decoded: `/`,
    /// `/subscriptions/{guid}`, `…/resourceGroups/{group}`, or a resource id
    /// (`…/providers/{namespace}/{type}/{name}`, nested pairs for children), by the
    /// resource-id grammar of [`crate::ids`]. No empty, `.` or `..` segment, no separator or
    /// `%` inside one: a scope has one spelling, so two spellings never name two places.
    pub fn parse(path: &str) -> Result<Self, ScopeError> {
        let trimmed = trim_slash(path);
        if trimmed == "/" {
            return Ok(Self::platform());
        }
        let Some(rest) = trimmed.strip_prefix('/') else { return Err(ScopeError("a scope starts with '/'".into())) };
        let segs: Vec<&str> = rest.split('/').collect();
        if let Some(s) = segs.iter().find(|s| s.is_empty() || DOT_SEGMENTS.contains(s)) {
            return Err(ScopeError(format!("the segment '{s}' is empty or a dot segment")));
        }
        let word = |s: &str, w: &str| s.eq_ignore_ascii_case(w);
        match segs.as_slice() {
            [s, sub] if word(s, "subscriptions") => ids::check_subscription(sub)?,
            [s, sub, r, rg] if word(s, "subscriptions") && word(r, "resourceGroups") => {
                ids::check_subscription(sub)?;
                ids::check_group(rg)?;
            }
            [s, sub, r, rg, p, ns, pairs @ ..]
                if word(s, "subscriptions") && word(r, "resourceGroups") && word(p, "providers") =>
            {
                ArmId::from_segments(sub, rg, ns, pairs)?;
            }
            _ => {
                return Err(ScopeError(
                    "a scope is '/', /subscriptions/{id}, …/resourceGroups/{name} or a resource id".into(),
                ));
            }
        }
        Ok(Scope(trimmed.to_ascii_lowercase()))
    }

    /// A scope as the store kept it, taken as it is (lowercased): stored data is checked
    /// with [`Scope::is_canonical`], not refused, so an assignment written before scopes were
    /// canonical can still be listed and deleted.
    pub fn stored(text: &str) -> Self {
        Scope(trim_slash(text).to_ascii_lowercase())
    }

    /// A subscription's scope.
    pub fn subscription_scope(subscription: &SubscriptionId) -> Self {
        Scope(format!("/subscriptions/{}", subscription.as_str()))
    }

    /// A resource group's scope (the parts were checked by the router).
    pub fn resource_group(subscription: &str, group: &str) -> Self {
        Scope(ResourceKey::group(&SubscriptionId::new(subscription), group).into_string())
    }

    /// A resource's scope: its id, lowercased (the id was checked when it was made).
    pub fn resource(id: &ArmId) -> Self {
        Scope(id.key().as_str().to_string())
    }

    /// Whether the scope has the one spelling [`Scope::parse`] gives it.
    pub fn is_canonical(&self) -> bool {
        Scope::parse(&self.0).is_ok_and(|s| s == *self)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_platform(&self) -> bool {
        self.0 == "/"
    }

    /// The subscription the scope lies in; `None` for the platform scope.
    pub fn subscription(&self) -> Option<&str> {
        self.0.strip_prefix("/subscriptions/").map(|rest| rest.split('/').next().unwrap_or(rest))
    }

    /// `self` is `other` or one of its ancestors (segment-wise, so `/subscriptions/a` does
    /// not contain `/subscriptions/ab`).
    pub fn contains(&self, other: &Scope) -> bool {
        self.is_platform()
            || other.0 == self.0
            || other.0.strip_prefix(&self.0).is_some_and(|rest| rest.starts_with('/'))
    }
}

/// Without one trailing `/` (but `/` stays itself).
fn trim_slash(path: &str) -> &str {
    path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path)
}

/// Where the built-in roles' definitions live.
pub const ROLE_DEFINITIONS: &str = "/providers/Slipway.Authorization/roleDefinitions/";

/// The built-in roles, each granting all the one before it does: their order is `Ord`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Read resources, operations and role assignments.
    Reader,
    /// Reader, plus create, change, delete and cancel.
    Contributor,
    /// Contributor, plus manage role assignments.
    Owner,
    /// The platform operator: everything, including subscriptions and API tokens.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Reader, Role::Contributor, Role::Owner, Role::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Role::Reader => "Reader",
            Role::Contributor => "Contributor",
            Role::Owner => "Owner",
            Role::Admin => "Admin",
        }
    }

    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name().eq_ignore_ascii_case(name))
    }

    /// `/providers/Slipway.Authorization/roleDefinitions/{name}`: how a role assignment names
    /// its role.
    pub fn definition_id(self) -> String {
        format!("{ROLE_DEFINITIONS}{}", self.name())
    }

    /// A role from its definition id or its bare name (both any case).
    pub fn from_definition(text: &str) -> Option<Role> {
        let name = match text.get(..ROLE_DEFINITIONS.len()) {
            Some(prefix) if prefix.eq_ignore_ascii_case(ROLE_DEFINITIONS) => &text[ROLE_DEFINITIONS.len()..],
            _ => text,
        };
        Role::from_name(name)
    }

    pub fn allows(self, permission: Permission) -> bool {
        use Permission::*;
        match self {
            Role::Reader => matches!(permission, Read | ReadAccess),
            Role::Contributor => matches!(permission, Read | ReadAccess | Write | Delete | Cancel),
            Role::Owner => !matches!(permission, ManagePlatform),
            Role::Admin => true,
        }
    }
}

/// What a request needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permission {
    /// GET resources, lists, operation status and results.
    Read,
    /// PUT and PATCH (and POST actions).
    Write,
    Delete,
    /// Cancel an operation.
    Cancel,
    /// Read role assignments.
    ReadAccess,
    /// Create and delete role assignments.
    ManageAccess,
    /// The subscription registry and API tokens.
    ManagePlatform,
}

impl Permission {
    pub const ALL: [Permission; 7] = [
        Permission::Read,
        Permission::Write,
        Permission::Delete,
        Permission::Cancel,
        Permission::ReadAccess,
        Permission::ManageAccess,
        Permission::ManagePlatform,
    ];
}

/// Who an assignment names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assignee {
    /// A principal by name (the subject claim or an API token's principal).
    Principal(String),
    /// Everyone whose credential lists this group.
    Group(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleAssignment {
    pub id: String,
    pub assignee: Assignee,
    /// When set, only principals of this identity-provider tenant match (names are unique
    /// per issuer tenant, not across them).
    pub tenant: Option<String>,
    pub role: Role,
    pub scope: Scope,
}

impl RoleAssignment {
    fn names(&self, who: &Principal) -> bool {
        let tenant_ok =
            self.tenant.as_deref().is_none_or(|t| who.tenant.as_deref().is_some_and(|w| w.eq_ignore_ascii_case(t)));
        tenant_ok
            && match &self.assignee {
                Assignee::Principal(name) => *name == who.name,
                Assignee::Group(group) => who.groups.iter().any(|g| g == group),
            }
    }
}

/// Whether `who` may do what `permission` covers at `target`, given every assignment whose
/// scope could contain `target`. The local user (authentication off) may do anything; a
/// credential confined to subscriptions, nothing outside them.
pub fn is_allowed(who: &Principal, assignments: &[RoleAssignment], permission: Permission, target: &Scope) -> bool {
    who.kind == PrincipalKind::Local
        || (who.reaches(target)
            && assignments.iter().any(|a| a.names(who) && a.role.allows(permission) && a.scope.contains(target)))
}

/// Whether `who` holds `least` or a greater role at `target` (an approver's test). The local
/// user holds every role.
pub fn holds_role(who: &Principal, assignments: &[RoleAssignment], least: Role, target: &Scope) -> bool {
    who.kind == PrincipalKind::Local
        || (who.reaches(target)
            && assignments.iter().any(|a| a.names(who) && a.role >= least && a.scope.contains(target)))
}

/// Whether `who` may read something somewhere below `scope` (not necessarily all of it):
/// the test for showing a subscription-wide list filtered item by item.
pub fn may_read_within(who: &Principal, assignments: &[RoleAssignment], scope: &Scope) -> bool {
    who.kind == PrincipalKind::Local
        || assignments.iter().any(|a| {
            let reach = if a.scope.contains(scope) { scope } else { &a.scope };
            a.names(who)
                && a.role.allows(Permission::Read)
                && (a.scope.contains(scope) || scope.contains(&a.scope))
                && who.reaches(reach)
        })
}
