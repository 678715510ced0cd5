//! `POST {resourceId}/{action}`: a type's declared action, run as an operation of its own
//! (docs/arm-contract.md#actions).

use slipway_domain::operation::ActionCall;

use super::*;

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
    let subscription = SubscriptionId::new(&id.subscription);
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    let permission = access::resource_action(&ty.namespace, &ty.type_name, Permission::Write);
    grants.require(&ctx.caller, Permission::Write, &resource_scope(&id), &permission)?;
    let tenant =
        access::check_subscription(state, &subscription, Intent::Change).await?.as_ref().map(access::tenant_context);
    let parameters = action_body(state, ctx, body).await?;
    action.validate(&parameters)?;
    let call = ActionCall { name: action.name.clone(), parameters };
    let rctx = request_context(state, ctx, ctx.api_version()?, tenant)?;
    let req = change_request(&id, &[], rctx.now);
    let (admitted, _) = change_with(state.store.as_ref(), req, move |snap| admission::admit_action(snap, call, &rctx))
        .await
        .map_err(|e| missing_as_not_found(e, &id))?;
    let Admitted::Accepted { operation, .. } = admitted else { return Err(ArmError::internal()) };
    (state.on_accept)();
    let mut resp = StatusCode::ACCEPTED.into_response();
    add_async_headers(state, ctx, &operation, resp.headers_mut());
    Ok(resp)
}

/// The action's body: a JSON object, or `{}` when none was sent.
async fn action_body(state: &ApiState, ctx: &Ctx, body: Body) -> Result<Value, ArmError> {
    let declared_empty = ctx.header("content-length") == "0";
    let value: Value = if declared_empty {
        json!({})
    } else {
        let bytes = body_bytes(state, ctx, body).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) { json!({}) } else { wire::parse_body(&bytes)? }
    };
    if !value.is_object() {
        return Err(ArmError::invalid_content("The action's body must be a JSON object.", ""));
    }
    Ok(value)
}
