//! `GET {resourceId}/jobs`: the resource's job history and why it is where it is (a Slipway
//! extension, docs/arm-contract.md#job-history).

use axum::http::{Method, StatusCode};
use axum::response::Response;
use slipway_domain::access::Permission;
use slipway_domain::ids::{ArmId, SubscriptionId};
use slipway_domain::subscription::Intent;

use crate::error::ArmError;
use crate::handlers::{Ctx, check_version, json_response, method_not_allowed, resource_scope, resource_type};
use crate::{ApiState, access, wire};

pub(crate) async fn job_history(state: &ApiState, ctx: &Ctx, id: ArmId) -> Result<Response, ArmError> {
    may_read_resource(state, ctx, &id).await?;
    let res =
        state.store.get_resource(&id.key()).await?.ok_or_else(|| ArmError::resource_not_found(&id.to_string()))?;
    let link = |job: &slipway_domain::Job| crate::JobRef::of(job).and_then(|r| state.jobs.link(&r));
    Ok(json_response(StatusCode::OK, wire::job_history_body(&res, &link)))
}

/// A `GET` of what a resource has beside itself (its job history, its event feed): the
/// type's api-version, `read` on the resource, a subscription that may be read.
pub(crate) async fn may_read_resource(state: &ApiState, ctx: &Ctx, id: &ArmId) -> Result<(), ArmError> {
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    let ty = resource_type(state, &id.namespace, &id.type_name)?;
    check_version(ctx, &ty)?;
    let subscription = SubscriptionId::new(&id.subscription);
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    let action = access::resource_action(&ty.namespace, &ty.type_name, Permission::Read);
    grants.require(&ctx.caller, Permission::Read, &resource_scope(id), &action)?;
    access::check_subscription(state, &subscription, Intent::Read).await?;
    Ok(())
}
