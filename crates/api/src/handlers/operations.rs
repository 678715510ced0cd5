//! Operation status, result and cancel, and the async headers that point at them.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use slipway_domain::access::{Permission, Scope};
use slipway_domain::ids::{ArmId, OperationId, SubscriptionId};
use slipway_domain::operation::is_visible_to;
use slipway_domain::{Operation, OperationRequest, PrincipalKind, ProvisioningState, admission};
use slipway_store::ChangeRequest;

use crate::error::ArmError;
use crate::handlers::resources::get_resource;
use crate::handlers::{
    Ctx, force_flag, insert, json_response, method_not_allowed, require_admin, resource_type, unsupported_version,
};
use crate::{ApiState, access, wire};

pub(crate) fn operation_check(state: &ApiState, ctx: &Ctx, namespace: &str, method: Method) -> Result<(), ArmError> {
    if ctx.method != method {
        return Err(method_not_allowed(&ctx.method));
    }
    // A resource group's delete: ARM's own namespace, on the platform api-versions.
    if namespace.eq_ignore_ascii_case(slipway_domain::ids::GROUP_NAMESPACE) {
        return crate::handlers::platform_version::check(ctx);
    }
    let versions = state.types.namespace_versions(namespace);
    if versions.is_empty() {
        return Err(ArmError::not_found(
            "InvalidResourceType",
            format!("The namespace '{namespace}' is not served here."),
        ));
    }
    let v = ctx.api_version()?;
    if versions.iter().any(|s| s.eq_ignore_ascii_case(v)) { Ok(()) } else { Err(unsupported_version(v, &versions)) }
}

pub(crate) fn not_found_op(id: &str) -> ArmError {
    ArmError::not_found("ResourceNotFound", format!("The operation '{id}' was not found."))
}

/// The operation, if the caller may see it: it must be in this subscription, the caller must
/// hold `permission` on its resource, and where the initiator rule applies (authentication
/// off, or `initiator_only`), the caller must be the identity that started it. Anything
/// else is `404`, as if it did not exist: operation ids are not guessable, and a `403`
/// would confirm one.
pub(crate) async fn find_operation(
    state: &ApiState,
    ctx: &Ctx,
    subscription: &str,
    id: &str,
    permission: Permission,
) -> Result<Operation, ArmError> {
    let op_id = OperationId::parse(id).ok_or_else(|| not_found_op(id))?;
    let subscription = SubscriptionId::new(subscription);
    let op =
        state.store.get_operation(&subscription, &op_id, state.clock.now()).await?.ok_or_else(|| not_found_op(id))?;
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    if op.subscription != subscription || !may_see_operation(state, ctx, &grants, &op, permission) {
        return Err(not_found_op(id));
    }
    Ok(op)
}

/// Whether the caller holds `permission` on `op`'s resource and, where the initiator rule
/// applies (authentication off, or `initiator_only`), is the identity that started it.
pub(crate) fn may_see_operation(
    state: &ApiState,
    ctx: &Ctx,
    grants: &access::Grants,
    op: &Operation,
    permission: Permission,
) -> bool {
    let initiator_rule = state.access.initiator_only || ctx.caller.principal.kind == PrincipalKind::Local;
    let asking = ctx.initiator();
    if initiator_rule && !is_visible_to(op, &op.subscription, &asking.tenant_id, &asking.client_id) {
        return false;
    }
    grants.allows(&ctx.caller, permission, &Scope::stored(&op.resource_id))
}

pub(crate) fn status_path(state: &ApiState, op: &Operation) -> String {
    wire::status_path(op, &state.options.location)
}

pub(crate) fn result_path(state: &ApiState, op: &Operation) -> String {
    status_path(state, op).replace("/operationStatuses/", "/operationResults/")
}

/// `Azure-AsyncOperation`, `Location`, `Retry-After` (and the callback acknowledgement).
pub(crate) fn add_async_headers(state: &ApiState, ctx: &Ctx, op: &Operation, headers: &mut HeaderMap) {
    let q = format!("?api-version={}", op.api_version);
    insert(headers, "azure-asyncoperation", &format!("{}{}{q}", ctx.base, status_path(state, op)));
    insert(headers, "location", &format!("{}{}{q}", ctx.base, result_path(state, op)));
    headers.insert(header::RETRY_AFTER, HeaderValue::from(state.options.retry_after_secs));
    if op.notification_uri.is_some() {
        headers.insert("azure-asyncnotification", HeaderValue::from_static("Enabled"));
    }
}

pub(crate) fn status_response(state: &ApiState, op: &Operation) -> Response {
    json_response(StatusCode::OK, wire::operation_status_document(op, &state.options.location))
}

pub(crate) async fn cancel_operation(
    state: &ApiState,
    ctx: &Ctx,
    subscription: &str,
    id: &str,
) -> Result<Response, ArmError> {
    let op = find_operation(state, ctx, subscription, id, Permission::Cancel).await?;
    let force = forced_cancel(state, ctx, &op).await?;
    let now = state.clock.now();
    let req = ChangeRequest::new(op.resource_key.clone(), now).with_operation(&op.subscription, op.id.clone());
    let op_id = op.id.clone();
    let (canceled, _) = ctx
        .change(state, req, move |snap| match force {
            true => admission::admit_force_cancel(snap, &op_id, now),
            false => admission::admit_cancel(snap, &op_id, now),
        })
        .await?;
    (state.on_accept)();
    let mut resp = status_response(state, &canceled);
    *resp.status_mut() = StatusCode::ACCEPTED;
    add_async_headers(state, ctx, &canceled, resp.headers_mut());
    Ok(resp)
}

/// `?force=true`: end the operation now and stop its job without grace; the platform Admin
/// only (docs/arm-contract.md#cancel).
async fn forced_cancel(state: &ApiState, ctx: &Ctx, op: &Operation) -> Result<bool, ArmError> {
    if !force_flag(ctx)? {
        return Ok(false);
    }
    let grants = access::grants(state, &ctx.caller, Some(&op.subscription)).await?;
    let ty = ArmId::read_stored(&op.resource_id).map(|id| id.type_key().to_string()).unwrap_or_default();
    require_admin(ctx, &grants, &format!("{ty}/forceCancel/action"))?;
    Ok(true)
}

/// The `Location` target: 202 while running; the synchronous equivalent when done. A
/// failed or canceled operation answers `409` with its own error.
pub(crate) async fn operation_result(state: &ApiState, ctx: &Ctx, op: &Operation) -> Result<Response, ArmError> {
    if !op.is_terminal() {
        let mut resp = StatusCode::ACCEPTED.into_response();
        let q = format!("?api-version={}", op.api_version);
        insert(resp.headers_mut(), "location", &format!("{}{}{q}", ctx.base, result_path(state, op)));
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(state.options.retry_after_secs));
        return Ok(resp);
    }
    // A what-if's result is its prediction; a drift check's, like an action's, the resource
    // (its `properties.drift`).
    if op.status == ProvisioningState::Succeeded
        && op.request == OperationRequest::WhatIf
        && let Some(w) = &op.what_if
    {
        return Ok(json_response(StatusCode::OK, wire::what_if_result(&op.resource_id, w)));
    }
    match op.status {
        ProvisioningState::Succeeded if op.request == OperationRequest::Delete => {
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        ProvisioningState::Succeeded => {
            let id = ArmId::read_stored(&op.resource_id).ok_or_else(ArmError::internal)?;
            let ty = resource_type(state, &id.namespace, &id.type_name)?;
            get_resource(state, &id, &ty).await
        }
        status => {
            let body = op
                .error
                .clone()
                .unwrap_or_else(|| slipway_domain::CloudError::new("InternalServerError", "The operation failed."));
            debug_assert!(matches!(status, ProvisioningState::Failed | ProvisioningState::Canceled));
            // A 4xx, not a 500: Slipway did not fail, the operation did (its job, its
            // deadline, a cancel). A 5xx would put every tenant's failed playbook into the
            // server's error rate, and asking again changes nothing.
            Err(ArmError::with_body(StatusCode::CONFLICT, body))
        }
    }
}
