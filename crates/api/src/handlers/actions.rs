//! `POST {resourceId}/{action}`: a type's declared action, run as an operation of its own
//! (docs/arm-contract.md#actions); and `POST {resourceId}/retry`, a failed spec run again now
//! (docs/arm-contract.md#retry-now).

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use slipway_domain::access::Permission;
use slipway_domain::admission::{Admitted, RequestContext};
use slipway_domain::echo::echo;
use slipway_domain::ids::{ArmId, SubscriptionId};
use slipway_domain::locks::Verb;
use slipway_domain::operation::ActionCall;
use slipway_domain::resource::Snapshot;
use slipway_domain::subscription::Intent;
use slipway_domain::{Operation, TenantContext, admission};

use crate::handlers::guardrails::Guard;
use slipway_types::ResourceType;

use crate::error::ArmError;
use crate::handlers::body::body_bytes;
use crate::handlers::operations::add_async_headers;
use crate::handlers::resources::{change_request, missing_as_not_found};
use crate::handlers::{Ctx, check_version, request_context, resource_scope, resource_type};
use crate::{ApiState, access, request};

/// Answers `202` with `Azure-AsyncOperation` and `Location` (no body); the `Location` target
/// answers with the resource once the action succeeded. The body is optional (`{}` when
/// absent) and checked against the action's schema.
pub(crate) async fn post_action(
    state: &ApiState,
    ctx: &Ctx,
    id: ArmId,
    name: &str,
    body: Body,
) -> Result<Response, ArmError> {
    let ty = resource_type(state, &id.namespace, &id.type_name)?;
    check_version(ctx, &ty)?;
    let action = ty.action(name).ok_or_else(|| {
        let declared: Vec<&str> = ty.actions().map(|a| a.name.as_str()).collect();
        let declared = if declared.is_empty() { "none".to_string() } else { declared.join(", ") };
        ArmError::not_found(
            "ActionNotFound",
            format!(
                "The resource type '{}' has no action '{}'; its actions: {declared}.",
                ty.display_name(),
                echo(name, 64)
            ),
        )
        .with_target(echo(name, 64))
    })?;
    let tenant = may_change(state, ctx, &id, &ty).await?;
    let parameters = action_body(state, ctx, body).await?;
    action.validate(&parameters)?;
    let call = ActionCall { name: action.name.clone(), parameters };
    let verb = if action.read_only { Verb::ReadOnlyAction } else { Verb::Write };
    accept(state, ctx, id, tenant, verb, move |snap, rctx| admission::admit_action(snap, call, rctx)).await
}

/// Answers like an action: `202` and the async headers, `409` unless the resource is
/// `Failed` or `Canceled` with no operation running. The body, if any, must be `{}`.
pub(crate) async fn post_retry(state: &ApiState, ctx: &Ctx, id: ArmId, body: Body) -> Result<Response, ArmError> {
    let ty = resource_type(state, &id.namespace, &id.type_name)?;
    check_version(ctx, &ty)?;
    let tenant = may_change(state, ctx, &id, &ty).await?;
    no_parameters(state, ctx, body, "A retry").await?;
    accept(state, ctx, id, tenant, Verb::Write, admission::admit_retry).await
}

/// `write` on the resource, in a subscription that takes changes; the tenant its jobs run for.
pub(crate) async fn may_change(
    state: &ApiState,
    ctx: &Ctx,
    id: &ArmId,
    ty: &ResourceType,
) -> Result<Option<TenantContext>, ArmError> {
    Ok(may_act(state, ctx, id, ty, Permission::Write).await?.1)
}

/// `permission` on the resource, in a subscription that takes changes: the caller's grants,
/// and the tenant its jobs run for.
pub(crate) async fn may_act(
    state: &ApiState,
    ctx: &Ctx,
    id: &ArmId,
    ty: &ResourceType,
    permission: Permission,
) -> Result<(access::Grants, Option<TenantContext>), ArmError> {
    let subscription = SubscriptionId::new(&id.subscription);
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    let action = access::resource_action(&ty.namespace, &ty.type_name, permission);
    grants.require(&ctx.caller, permission, &resource_scope(id), &action)?;
    let tenant = access::check_subscription(state, &subscription, Intent::Change).await?;
    Ok((grants, tenant.as_ref().map(access::tenant_context)))
}

/// A request that takes no parameters (`what` names it): no body, or `{}`.
pub(crate) async fn no_parameters(state: &ApiState, ctx: &Ctx, body: Body, what: &str) -> Result<(), ArmError> {
    if action_body(state, ctx, body).await?.as_object().is_some_and(|o| !o.is_empty()) {
        return Err(ArmError::invalid_content(format!("{what} takes no parameters: send no body, or {{}}."), ""));
    }
    Ok(())
}

/// Runs `admit` in the resource's change, unless a lock forbids `verb` on it, and answers
/// `202` with the new operation's URLs.
pub(crate) async fn accept(
    state: &ApiState,
    ctx: &Ctx,
    id: ArmId,
    tenant: Option<TenantContext>,
    verb: Verb,
    admit: impl FnOnce(&mut Snapshot, &RequestContext) -> Result<Admitted, admission::Rejection> + Send + 'static,
) -> Result<Response, ArmError> {
    let rctx = request_context(state, ctx, ctx.api_version()?, tenant)?;
    let guard = Guard::new(state, &id);
    let req = guard.request(change_request(&id, &[], rctx.now));
    let (admitted, _) = ctx
        .change(state, req, move |snap| {
            if snap.resource.is_some() {
                guard.check_locks(snap, verb)?;
            }
            admit(snap, &rctx)
        })
        .await
        .map_err(|e| missing_as_not_found(e, &id))?;
    let Admitted::Accepted { operation, .. } = admitted else { return Err(ArmError::internal()) };
    Ok(accepted(state, ctx, &operation))
}

/// `202` with the new operation's URLs, the engine told there is work.
pub(crate) fn accepted(state: &ApiState, ctx: &Ctx, operation: &Operation) -> Response {
    (state.on_accept)();
    let mut resp = StatusCode::ACCEPTED.into_response();
    add_async_headers(state, ctx, operation, resp.headers_mut());
    resp
}

/// The action's body: a JSON object, or `{}` when none was sent.
pub(crate) async fn action_body(state: &ApiState, ctx: &Ctx, body: Body) -> Result<Value, ArmError> {
    let declared_empty = ctx.header("content-length") == "0";
    let value: Value = if declared_empty {
        json!({})
    } else {
        let bytes = body_bytes(state, ctx, body).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) { json!({}) } else { request::parse_body(&bytes)? }
    };
    if !value.is_object() {
        return Err(ArmError::invalid_content("The action's body must be a JSON object.", ""));
    }
    Ok(value)
}
