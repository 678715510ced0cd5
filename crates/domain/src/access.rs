//! Who may do what where (ARM-style role-based access): role assignments bind a principal or
//! a group to a built-in role at a scope, and a scope contains everything below it. One pure
//! function decides; the API edge only gathers the assignments and names the action.

use crate::identity::{Principal, PrincipalKind};

/// An ARM scope: `/` (the platform), `/subscriptions/{s}`, `…/resourceGroups/{rg}`, or a
/// resource id. Kept lowercased (ARM scopes are case-insensitive) and without a trailing `/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope(String);

impl Scope {
    pub fn platform() -> Self {
        Scope("/".into())
    }

    /// A scope from a path; `None` unless it is `/` or starts with `/subscriptions/{s}`.
    pub fn parse(path: &str) -> Option<Self> {
        let lower = path.trim_end_matches('/').to_ascii_lowercase();
        if lower.is_empty() {
            return Some(Self::platform());
        }
        let mut segs = lower.split('/').skip(1);
        let ok = segs.next() == Some("subscriptions")
            && segs.next().is_some_and(|s| !s.is_empty())
            && lower.split('/').skip(1).all(|s| !s.is_empty());
        ok.then_some(Scope(lower))
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

/// The built-in roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
/// scope could contain `target`. The local user (authentication off) may do anything.
pub fn is_allowed(who: &Principal, assignments: &[RoleAssignment], permission: Permission, target: &Scope) -> bool {
    who.kind == PrincipalKind::Local
        || assignments.iter().any(|a| a.names(who) && a.role.allows(permission) && a.scope.contains(target))
}

/// Whether `who` may read something somewhere below `scope` (not necessarily all of it):
/// the test for showing a subscription-wide list filtered item by item.
pub fn may_read_within(who: &Principal, assignments: &[RoleAssignment], scope: &Scope) -> bool {
    who.kind == PrincipalKind::Local
        || assignments.iter().any(|a| {
            a.names(who) && a.role.allows(Permission::Read) && (a.scope.contains(scope) || scope.contains(&a.scope))
        })
}
