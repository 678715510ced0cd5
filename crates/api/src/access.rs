//! Authorization at the edge: gathers the role assignments that could cover a request's scope
//! (the platform's, the configured bootstrap admins, the subscription's), asks the domain's
//! pure decision, and turns a refusal into ARM's `403 AuthorizationFailed`. Also the
//! subscription registry's gate for writes.

mod cache;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use slipway_domain::access::{
    Assignee, Permission, Role, RoleAssignment, Scope, holds_role, is_allowed, may_read_within,
};
use slipway_domain::subscription::{self, Intent, Subscription};
use slipway_domain::{Principal, PrincipalKind, SubscriptionId, TenantContext};
use slipway_store::registry;

use crate::ApiState;
use crate::edge::Caller;
use crate::error::ArmError;

pub use cache::AssignmentCache;

/// How access is decided, from the configuration.
#[derive(Clone, Debug, Default)]
pub struct AccessOptions {
    /// Principals and groups that are platform admins whatever the store says (the first admin
    /// has to come from somewhere).
    pub admins: Vec<Assignee>,
    /// Writes need a registered subscription (on whenever authentication is on).
    pub registration_required: bool,
    /// Operations are readable only by the identity that started them (ARO's rule), on top of
    /// the role check. Always on without authentication (the identity then comes from ARM's
    /// headers).
    pub initiator_only: bool,
    /// How long a replica may decide on role assignments it read before (zero: read them
    /// for every request). A change through this replica is in force at once.
    pub assignment_cache: Duration,
}

impl AccessOptions {
    /// The default bound on how stale another replica's view of a role change may be.
    pub const DEFAULT_ASSIGNMENT_CACHE: Duration = Duration::from_secs(2);
}

impl AccessOptions {
    fn bootstrap(&self) -> impl Iterator<Item = RoleAssignment> + '_ {
        self.admins.iter().map(|a| RoleAssignment {
            id: "bootstrap".into(),
            assignee: a.clone(),
            tenant: None,
            role: Role::Admin,
            scope: Scope::platform(),
        })
    }
}

/// Logs every stored assignment whose scope is not canonical (written before scopes were
/// checked): such an assignment grants only at its literal scope, which no request names, and
/// should be deleted and made again. Returns how many there are.
pub async fn report_noncanonical_assignments(store: &dyn slipway_store::Store) -> Result<usize, ArmError> {
    let odd: Vec<RoleAssignment> =
        registry::all_role_assignments(store).await?.into_iter().filter(|a| !a.scope.is_canonical()).collect();
    for a in &odd {
        tracing::warn!(
            assignment = %a.id,
            scope = %slipway_domain::echo::echo(a.scope.as_str(), 200),
            "a stored role assignment's scope is not canonical: it grants nothing; delete it and assign again"
        );
    }
    Ok(odd.len())
}

/// The assignments that may matter for one request, in the parts they were read in.
#[derive(Clone)]
pub(crate) struct Grants {
    parts: Vec<Arc<Vec<RoleAssignment>>>,
    local: bool,
}

/// A partition's assignments, from the cache when it is fresh.
async fn assignments(
    state: &ApiState,
    partition: Option<&SubscriptionId>,
) -> Result<Arc<Vec<RoleAssignment>>, ArmError> {
    let ttl = state.access.assignment_cache;
    let now = state.clock.now();
    if let Some(hit) = state.assignment_cache.get(partition, now, ttl) {
        return Ok(hit);
    }
    let read = Arc::new(registry::list_role_assignments(state.store.as_ref(), partition).await?);
    if !ttl.is_zero() {
        state.assignment_cache.put(partition, now, read.clone());
    }
    Ok(read)
}

/// Loads the platform-wide assignments and, for a subscription, its own.
pub(crate) async fn grants(
    state: &ApiState,
    caller: &Caller,
    subscription: Option<&SubscriptionId>,
) -> Result<Grants, ArmError> {
    let mut grants = platform_grants(state, caller).await?;
    if let Some(sub) = subscription {
        grants.add_subscription(state, sub).await?;
    }
    Ok(grants)
}

/// The bootstrap admins and the platform-scope assignments (nothing to read for the local
/// user, who may do anything).
pub(crate) async fn platform_grants(state: &ApiState, caller: &Caller) -> Result<Grants, ArmError> {
    let local = caller.principal.kind == PrincipalKind::Local;
    if local {
        return Ok(Grants { parts: Vec::new(), local });
    }
    let bootstrap = Arc::new(state.access.bootstrap().collect());
    Ok(Grants { parts: vec![bootstrap, assignments(state, None).await?], local })
}

impl Grants {
    /// Adds one subscription's assignments.
    pub async fn add_subscription(&mut self, state: &ApiState, sub: &SubscriptionId) -> Result<(), ArmError> {
        if !self.local {
            self.parts.push(assignments(state, Some(sub)).await?);
        }
        Ok(())
    }

    // Both decisions ask whether any assignment grants, so they can be asked part by part.
    pub fn allows(&self, caller: &Caller, permission: Permission, scope: &Scope) -> bool {
        self.local || self.parts.iter().any(|part| is_allowed(&caller.principal, part, permission, scope))
    }

    /// Whether `who` holds `least` or a greater role at `scope` (an approver's test).
    pub fn holds_role(&self, who: &Principal, least: Role, scope: &Scope) -> bool {
        self.local || self.parts.iter().any(|part| holds_role(who, part, least, scope))
    }

    pub fn may_read_within(&self, caller: &Caller, scope: &Scope) -> bool {
        self.local || self.parts.iter().any(|part| may_read_within(&caller.principal, part, scope))
    }

    /// `Ok` or ARM's `403 AuthorizationFailed` naming the action and scope.
    pub fn require(
        &self,
        caller: &Caller,
        permission: Permission,
        scope: &Scope,
        action: &str,
    ) -> Result<(), ArmError> {
        if self.allows(caller, permission, scope) { Ok(()) } else { Err(forbidden(caller, action, scope)) }
    }
}

pub(crate) fn forbidden(caller: &Caller, action: &str, scope: &Scope) -> ArmError {
    let who = &caller.principal.name;
    ArmError::new(
        StatusCode::FORBIDDEN,
        "AuthorizationFailed",
        format!(
            "The client '{who}' does not have authorization to perform action '{action}' over scope '{}' or the \
             scope is invalid. If access was recently granted, refresh your credentials.",
            scope.as_str()
        ),
    )
}

/// The ARM action name of a permission on a resource type (`Ns/type/read`).
pub(crate) fn resource_action(namespace: &str, type_name: &str, permission: Permission) -> String {
    let verb = match permission {
        Permission::Read => "read",
        Permission::Write => "write",
        Permission::Delete => "delete",
        Permission::Cancel => "cancel/action",
        Permission::ReadAccess | Permission::ManageAccess | Permission::ManagePlatform => "action",
    };
    format!("{namespace}/{type_name}/{verb}")
}

/// The registry's gate: `409` with the state's code when `intent` may not go ahead;
/// otherwise the subscription's registration, if it has one.
pub(crate) async fn check_subscription(
    state: &ApiState,
    id: &SubscriptionId,
    intent: Intent,
) -> Result<Option<Subscription>, ArmError> {
    if intent == Intent::Read {
        return Ok(None);
    }
    let registered = registry::get_subscription(state.store.as_ref(), id).await?;
    subscription::admits(registered.as_ref(), intent, state.access.registration_required)
        .map_err(|refusal| ArmError::new(StatusCode::CONFLICT, refusal.code(), refusal.message(id.as_str())))?;
    Ok(registered)
}

/// What jobs are told about a registered subscription.
pub(crate) fn tenant_context(s: &Subscription) -> TenantContext {
    TenantContext {
        tenant_id: s.tenant_id.clone(),
        display_name: s.display_name.clone(),
        attributes: s.attributes.clone(),
    }
}
