//! The requests that run a type's job in check mode. `POST {resourceId}/whatIf`: what a PUT
//! of the body (or, with `?operation=delete`, a DELETE) would do, without doing it
//! (docs/arm-contract.md#what-if). The proposal is read and checked exactly as the PUT would
//! be; an existing resource gets an operation of its own whose job runs in check mode, a
//! resource that does not exist yet the Slipway-level `Create` at once. `POST
//! {resourceId}/checkDrift`: a drift check now (docs/osac-lifecycle.md#drift-detection).

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use slipway_domain::access::Permission;
use slipway_domain::admission::Admitted;
use slipway_domain::echo::echo;
use slipway_domain::ids::ArmId;
use slipway_domain::locks::Verb;
use slipway_domain::whatif::WhatIf;
use slipway_domain::{admission, reference};
use slipway_types::ResourceType;

use crate::error::ArmError;
use crate::handlers::actions::{accept, accepted, may_act, may_change, no_parameters};
use crate::handlers::body::body_bytes;
use crate::handlers::guardrails::Guard;
use crate::handlers::resources::{Sealer, change_request, missing_as_not_found, read_proposal};
use crate::handlers::{Ctx, check_version, json_response, request_context, resource_type};
use crate::{ApiState, wire};

/// `400 WhatIfNotSupported` for a type whose jobs cannot run in check mode.
fn check_mode_offered(ty: &ResourceType) -> Result<(), ArmError> {
    if ty.what_if {
        return Ok(());
    }
    Err(ArmError::bad_request(
        slipway_domain::operation::codes::WHAT_IF_NOT_SUPPORTED,
        format!("The resource type '{}' does not run its jobs in check mode (what_if = false).", ty.display_name()),
    ))
}

/// Answers like an action: `202` and the async headers; `409` unless the resource is
/// `Succeeded` with no operation running. The body, if any, must be `{}`.
pub(crate) async fn post_check_drift(state: &ApiState, ctx: &Ctx, id: ArmId, body: Body) -> Result<Response, ArmError> {
    let ty = resource_type(state, &id.namespace, &id.type_name)?;
    check_version(ctx, &ty)?;
    check_mode_offered(&ty)?;
    let tenant = may_change(state, ctx, &id, &ty).await?;
    no_parameters(state, ctx, body, "A drift check").await?;
    accept(state, ctx, id, tenant, Verb::ReadOnlyAction, admission::admit_check_drift).await
}

/// `?operation=put|delete` (absent: put): which request the what-if is about.
fn asks_about_delete(ctx: &Ctx) -> Result<bool, ArmError> {
    match ctx.query.get("operation").map(|v| v.to_ascii_lowercase()).as_deref() {
        None | Some("put") => Ok(false),
        Some("delete") => Ok(true),
        Some(v) => Err(ArmError::bad_request(
            "InvalidParameter",
            format!("operation must be put or delete, not '{}'.", echo(v, 16)),
        )
        .with_target("operation")),
    }
}

/// Answers `202` with the async headers (the `Location` target answers with the what-if's
/// result once it ended), or `200` with the result for a resource that does not exist yet.
pub(crate) async fn post_what_if(state: &ApiState, ctx: &Ctx, id: ArmId, body: Body) -> Result<Response, ArmError> {
    let ty = resource_type(state, &id.namespace, &id.type_name)?;
    check_version(ctx, &ty)?;
    check_mode_offered(&ty)?;
    let delete = asks_about_delete(ctx)?;
    let permission = if delete { Permission::Delete } else { Permission::Write };
    let (grants, _) = may_act(state, ctx, &id, &ty, permission).await?;
    let proposal = if delete {
        if !body_bytes(state, ctx, body).await?.iter().all(u8::is_ascii_whitespace) {
            return Err(ArmError::invalid_content("A delete's what-if takes no body.", ""));
        }
        None
    } else {
        Some(read_proposal(state, ctx, &id, &ty, body, &grants).await?)
    };
    let rctx = request_context(state, ctx, ctx.api_version()?, None)?;
    let references = proposal.as_ref().map(|p| p.references.clone()).unwrap_or_default();
    let guard = Guard::new(state, &id);
    let mut req = guard.metered_request(change_request(&id, &references, rctx.now));
    if let Some(p) = &proposal {
        req = req.with_related(p.walked.clone());
    }
    let sealer = Sealer::of(state, &ty)?;
    let target = id.clone();
    let kind = ty.kind.clone();
    let (admitted, _) = ctx
        .change(state, req, move |snap| {
            let (spec, guardrails) = match proposal {
                Some(mut p) => {
                    reference::check_all(snap, &target, &p.references, &p.walked)?;
                    let guardrails = guard.what_if(snap, Some(&mut p.spec), &kind, &rctx);
                    if let Some(sealer) = &sealer {
                        p.spec.properties = sealer.seal(&p.spec.properties, snap.resource.as_ref())?;
                    }
                    (Some(p.spec), guardrails)
                }
                None => (None, guard.what_if(snap, None, &kind, &rctx)),
            };
            let absent = snap.resource.is_none().then(|| (spec.clone(), guardrails.clone()));
            Ok((admission::admit_what_if(snap, &target, spec, guardrails, &rctx)?, absent))
        })
        .await
        .map_err(|e| missing_as_not_found(e, &id))?;
    match admitted {
        (Admitted::Accepted { operation, .. }, _) => Ok(accepted(state, ctx, &operation)),
        (Admitted::Absent, Some((Some(after), guardrails))) => {
            let w = WhatIf { before: None, after: Some(after), predicted: None, guardrails };
            Ok(json_response(StatusCode::OK, wire::what_if_result(&id.to_string(), &w)))
        }
        _ => Err(ArmError::internal()),
    }
}
