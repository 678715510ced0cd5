//! The platform's own resources: the subscription registry (ARM's RP subscription lifecycle
//! shape, `PUT /subscriptions/{id}`) and role assignments
//! (`{scope}/providers/Slipway.Authorization/roleAssignments/{id}`). Both are registry
//! entries in the store, so every replica agrees at once.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use slipway_domain::access::{Assignee, Permission, Role, RoleAssignment, Scope};
use slipway_domain::echo::echo;
use slipway_domain::subscription::{Subscription, SubscriptionState};
use slipway_domain::{SubscriptionId, TypeKey, admission};
use slipway_store::{ChangeRequest, ListQuery, StoreError, change_with, registry};

use crate::ApiState;
use crate::access::{self, Grants};
use crate::error::ArmError;
use crate::handlers::body::json_body;
use crate::handlers::{Ctx, json_response, method_not_allowed, platform_version, request_context};

pub(crate) const AUTHZ: &str = "Slipway.Authorization/roleAssignments";
pub(crate) const SUBSCRIPTIONS: &str = "Slipway.Admin/subscriptions";

/// ARM's subscription shape (`displayName`, `tenantId`, `state` at the top, as ARM's
/// subscriptions API answers), with the registration's own `properties` beside it, as ARM
/// hands a resource provider.
fn subscription_body(s: &Subscription) -> Value {
    json!({
        "id": format!("/subscriptions/{}", s.id),
        "subscriptionId": s.id.as_str(),
        "displayName": s.display_name,
        "tenantId": s.tenant_id,
        "authorizationSource": "RoleBased",
        "state": s.state.as_str(),
        "registrationDate": s.registered_at.to_rfc3339(),
        "properties": {
            "tenantId": s.tenant_id,
            "displayName": s.display_name,
            "attributes": s.attributes,
        },
    })
}

/// `GET /subscriptions`: every registered subscription for a platform admin; otherwise the
/// ones the caller holds any role in.
pub(crate) async fn list_subscriptions(state: &ApiState, ctx: &Ctx) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    let all = registry::list_subscriptions(state.store.as_ref()).await?;
    let platform = access::platform_grants(state, &ctx.caller).await?;
    let admin = platform.allows(&ctx.caller, Permission::ManagePlatform, &Scope::platform());
    let mut value = Vec::new();
    for s in &all {
        let scope = sub_scope(&s.id);
        let mut in_subscription = platform.clone();
        if !admin {
            in_subscription.add_subscription(state, &s.id).await?;
        }
        if admin || in_subscription.may_read_within(&ctx.caller, &scope) {
            value.push(subscription_body(s));
        }
    }
    Ok(json_response(StatusCode::OK, json!({ "value": value })))
}

fn sub_scope(id: &SubscriptionId) -> Scope {
    Scope::subscription_scope(id)
}

#[derive(Deserialize)]
struct SubscriptionPut {
    state: String,
    #[serde(default)]
    properties: SubscriptionProperties,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SubscriptionProperties {
    #[serde(default)]
    tenant_id: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    attributes: Map<String, Value>,
}

/// `GET|PUT /subscriptions/{id}` (the router has checked `id` is a GUID).
pub(crate) async fn subscription(state: &ApiState, ctx: &Ctx, id: &str, body: Body) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    let id = SubscriptionId::new(id);
    let scope = sub_scope(&id);
    let grants = access::grants(state, &ctx.caller, Some(&id)).await?;
    match ctx.method {
        Method::GET => {
            if !grants.may_read_within(&ctx.caller, &scope) {
                return Err(access::forbidden(&ctx.caller, &format!("{SUBSCRIPTIONS}/read"), &scope));
            }
            let s = registry::get_subscription(state.store.as_ref(), &id).await?.ok_or_else(|| {
                ArmError::not_found("SubscriptionNotFound", format!("The subscription '{id}' is not registered."))
            })?;
            Ok(json_response(StatusCode::OK, subscription_body(&s)))
        }
        Method::PUT => {
            grants.require(
                &ctx.caller,
                Permission::ManagePlatform,
                &Scope::platform(),
                &format!("{SUBSCRIPTIONS}/write"),
            )?;
            let input: SubscriptionPut = json_body(state, ctx, body).await?;
            let new_state = SubscriptionState::parse(&input.state).ok_or_else(|| {
                ArmError::invalid_content(
                    "state must be one of Registered, Warned, Suspended, Deleted, Unregistered.",
                    "state",
                )
            })?;
            let existing = registry::get_subscription(state.store.as_ref(), &id).await?;
            let now = state.clock.now();
            let props = input.properties;
            let tenant_id = Some(props.tenant_id)
                .filter(|t| !t.is_empty())
                .or_else(|| existing.as_ref().map(|s| s.tenant_id.clone()))
                .ok_or_else(|| ArmError::invalid_content("properties.tenantId is required.", "properties.tenantId"))?;
            let s = Subscription {
                id: id.clone(),
                tenant_id,
                display_name: props.display_name,
                state: new_state,
                attributes: props.attributes,
                registered_at: existing.as_ref().map_or(now, |s| s.registered_at),
                updated_at: now,
            };
            ctx.logged(|a| registry::put_subscription(state.store.as_ref(), &s, a)).await?;
            if new_state == SubscriptionState::Deleted {
                deprovision(state, ctx, &s).await?;
            }
            let status = if existing.is_some() { StatusCode::OK } else { StatusCode::CREATED };
            Ok(json_response(status, subscription_body(&s)))
        }
        _ => Err(method_not_allowed(&ctx.method)),
    }
}

/// A deleted subscription's resources each get a delete operation (idempotent: putting the
/// state `Deleted` again resumes after an interruption).
async fn deprovision(state: &ApiState, ctx: &Ctx, subscription: &Subscription) -> Result<(), ArmError> {
    let id = &subscription.id;
    let mut deleted = 0usize;
    for ty in state.types.all() {
        let mut after = None;
        loop {
            let page = state
                .store
                .list_resources(&ListQuery {
                    subscription: id.clone(),
                    resource_group: None,
                    type_key: Some(TypeKey::new(&ty.namespace, &ty.type_name)),
                    under: None,
                    after: after.clone(),
                    limit: 500,
                })
                .await?;
            for res in &page.items {
                let tenant = Some(access::tenant_context(subscription));
                let rctx = request_context(state, ctx, &ty.api_versions[0], tenant)?;
                let req = ChangeRequest::new(res.id.key(), rctx.now);
                match change_with(state.store.as_ref(), req, move |snap| admission::admit_delete(snap, &rctx)).await {
                    Ok(_) => deleted += 1,
                    // Its delete operation is running already (an earlier `Deleted`, or a client's
                    // DELETE): nothing to resume.
                    Err(StoreError::Rejected(admission::Rejection::Conflict { .. })) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    if deleted > 0 {
        (state.on_accept)();
    }
    tracing::info!(subscription = %id, resources = deleted, "deprovisioning a deleted subscription");
    Ok(())
}

#[derive(Deserialize)]
struct AssignmentPut {
    properties: AssignmentProperties,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AssignmentProperties {
    role_definition_id: String,
    principal_id: String,
    #[serde(default)]
    principal_type: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    /// ARM's echo of the path's scope; when sent, it must name that scope.
    #[serde(default)]
    scope: Option<String>,
}

fn assignment_id_path(a: &RoleAssignment) -> String {
    let scope = if a.scope.is_platform() { "" } else { a.scope.as_str() };
    format!("{scope}/providers/{AUTHZ}/{}", a.id)
}

fn assignment_body(a: &RoleAssignment) -> Value {
    let (principal, principal_type) = match &a.assignee {
        Assignee::Principal(p) => (p.as_str(), "User"),
        Assignee::Group(g) => (g.as_str(), "Group"),
    };
    let mut props = json!({
        "roleDefinitionId": a.role.definition_id(),
        "roleDefinitionName": a.role.name(),
        "principalId": principal,
        "principalType": principal_type,
        "scope": a.scope.as_str(),
    });
    if let Some(t) = &a.tenant {
        props["tenantId"] = json!(t);
    }
    json!({ "id": assignment_id_path(a), "name": a.id, "type": AUTHZ, "properties": props })
}

/// This replica's authorization sees its own change at once.
fn forget_partition(state: &ApiState, scope: &Scope) {
    state.assignment_cache.forget(scope.subscription().map(SubscriptionId::new).as_ref());
}

async fn scope_grants(state: &ApiState, ctx: &Ctx, scope: &Scope) -> Result<Grants, ArmError> {
    let sub = scope.subscription().map(SubscriptionId::new);
    access::grants(state, &ctx.caller, sub.as_ref()).await
}

/// `GET {scope}/providers/Slipway.Authorization/roleAssignments`: the assignments at, above
/// and below the scope.
pub(crate) async fn list_assignments(state: &ApiState, ctx: &Ctx, scope: &Scope) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    let grants = scope_grants(state, ctx, scope).await?;
    grants.require(&ctx.caller, Permission::ReadAccess, scope, &format!("{AUTHZ}/read"))?;
    let mut stored = registry::list_role_assignments(state.store.as_ref(), None).await?;
    if let Some(sub) = scope.subscription() {
        stored.extend(registry::list_role_assignments(state.store.as_ref(), Some(&SubscriptionId::new(sub))).await?);
    }
    let value: Vec<Value> =
        stored.iter().filter(|a| a.scope.contains(scope) || scope.contains(&a.scope)).map(assignment_body).collect();
    Ok(json_response(StatusCode::OK, json!({ "value": value })))
}

/// The ARM actions each permission grants, as ARM's permissions list spells them.
fn granted_actions(permission: Permission) -> &'static [&'static str] {
    match permission {
        Permission::Read => &["*/read"],
        Permission::Write => &["*/write", "*/action"],
        Permission::Delete => &["*/delete"],
        Permission::Cancel => &["*/locations/operationStatuses/cancel/action"],
        Permission::ReadAccess => &["Slipway.Authorization/roleAssignments/read"],
        Permission::ManageAccess => {
            &["Slipway.Authorization/roleAssignments/write", "Slipway.Authorization/roleAssignments/delete"]
        }
        Permission::ManagePlatform => &["Slipway.Admin/*", "Slipway.Authorization/apiTokens/*"],
    }
}

/// `GET {scope}/providers/Slipway.Authorization/permissions`: the actions the caller may take
/// at the scope (ARM's shape, one entry). Any authenticated caller may ask about itself; what
/// a client shows or offers (the console's buttons) follows from it, while every request is
/// still authorized on its own.
pub(crate) async fn permissions(state: &ApiState, ctx: &Ctx, scope: &Scope) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    let grants = scope_grants(state, ctx, scope).await?;
    let actions: Vec<&str> = Permission::ALL
        .into_iter()
        .filter(|p| grants.allows(&ctx.caller, *p, scope))
        .flat_map(|p| granted_actions(p).iter().copied())
        .collect();
    Ok(json_response(StatusCode::OK, json!({"value": [{"actions": actions, "notActions": []}]})))
}

/// `GET|PUT|DELETE {scope}/providers/Slipway.Authorization/roleAssignments/{id}`.
pub(crate) async fn assignment(
    state: &ApiState,
    ctx: &Ctx,
    scope: &Scope,
    id: &str,
    body: Body,
) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    if !slipway_domain::ids::is_guid(id) {
        return Err(ArmError::bad_request("InvalidRoleAssignmentId", "A role assignment's name must be a GUID."));
    }
    let id = id.to_ascii_lowercase();
    let grants = scope_grants(state, ctx, scope).await?;
    let existing = registry::get_role_assignment(state.store.as_ref(), &id).await?;
    let not_found =
        || ArmError::not_found("RoleAssignmentNotFound", format!("The role assignment '{id}' is not found."));
    match ctx.method {
        Method::GET => {
            grants.require(&ctx.caller, Permission::ReadAccess, scope, &format!("{AUTHZ}/read"))?;
            let a = existing.filter(|a| a.scope == *scope).ok_or_else(not_found)?;
            Ok(json_response(StatusCode::OK, assignment_body(&a)))
        }
        Method::PUT => {
            grants.require(&ctx.caller, Permission::ManageAccess, scope, &format!("{AUTHZ}/write"))?;
            let input: AssignmentPut = json_body(state, ctx, body).await?;
            let p = input.properties;
            if let Some(body_scope) = &p.scope
                && Scope::parse(body_scope).ok().as_ref() != Some(scope)
            {
                return Err(ArmError::bad_request(
                    "InvalidRoleAssignmentScope",
                    format!(
                        "properties.scope '{}' is not the scope the assignment is created under ('{}').",
                        echo(body_scope, 200),
                        scope.as_str()
                    ),
                ));
            }
            let role = Role::from_definition(&p.role_definition_id).ok_or_else(|| {
                ArmError::invalid_content(
                    "roleDefinitionId must name Reader, Contributor, Owner or Admin.",
                    "properties.roleDefinitionId",
                )
            })?;
            if role == Role::Admin {
                if !scope.is_platform() {
                    return Err(ArmError::invalid_content(
                        "The Admin role can only be assigned at the platform scope '/'.",
                        "properties.roleDefinitionId",
                    ));
                }
                grants.require(&ctx.caller, Permission::ManagePlatform, scope, &format!("{AUTHZ}/write"))?;
            }
            if p.principal_id.trim().is_empty() {
                return Err(ArmError::invalid_content("principalId is required.", "properties.principalId"));
            }
            let assignee = match p.principal_type.as_deref().unwrap_or("User") {
                t if t.eq_ignore_ascii_case("group") => Assignee::Group(p.principal_id),
                t if ["user", "serviceprincipal", "application"].iter().any(|k| t.eq_ignore_ascii_case(k)) => {
                    Assignee::Principal(p.principal_id)
                }
                _ => {
                    return Err(ArmError::invalid_content(
                        "principalType must be User, ServicePrincipal or Group.",
                        "properties.principalType",
                    ));
                }
            };
            if existing.as_ref().is_some_and(|a| a.scope != *scope) {
                return Err(ArmError::new(
                    StatusCode::CONFLICT,
                    "RoleAssignmentExists",
                    format!("The role assignment '{id}' already exists at another scope."),
                ));
            }
            let a = RoleAssignment {
                id: id.clone(),
                assignee,
                tenant: p.tenant_id.filter(|t| !t.is_empty()),
                role,
                scope: scope.clone(),
            };
            ctx.logged(|activity| registry::put_role_assignment(state.store.as_ref(), &a, state.clock.now(), activity))
                .await?;
            forget_partition(state, &a.scope);
            let status = if existing.is_some() { StatusCode::OK } else { StatusCode::CREATED };
            Ok(json_response(status, assignment_body(&a)))
        }
        Method::DELETE => {
            grants.require(&ctx.caller, Permission::ManageAccess, scope, &format!("{AUTHZ}/delete"))?;
            let Some(a) = existing.filter(|a| a.scope == *scope) else {
                return Ok(StatusCode::NO_CONTENT.into_response());
            };
            if a.role == Role::Admin {
                grants.require(&ctx.caller, Permission::ManagePlatform, scope, &format!("{AUTHZ}/delete"))?;
            }
            ctx.logged(|a| registry::delete_role_assignment(state.store.as_ref(), &id, a)).await?;
            forget_partition(state, &a.scope);
            Ok(json_response(StatusCode::OK, assignment_body(&a)))
        }
        _ => Err(method_not_allowed(&ctx.method)),
    }
}
