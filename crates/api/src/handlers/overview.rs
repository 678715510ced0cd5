//! The lists ARM keeps beside each type's own collection: a subscription's or a group's
//! resources of every type, and — a Slipway extension — its operations, newest first
//! (resource groups are `groups`'). They take the platform api-version, page like every list, and show only
//! what the caller may read.

use axum::http::{Method, StatusCode};
use axum::response::Response;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use slipway_domain::access::{Permission, Scope};
use slipway_domain::echo::echo;
use slipway_domain::ids::{ArmId, OperationId, SubscriptionId};
use slipway_domain::{ProvisioningState, TypeKey};
use slipway_store::{ListQuery, OperationQuery};

use crate::error::ArmError;
use crate::handlers::operations::may_see_operation;
use crate::handlers::resources::{decode_token, encode_token};
use crate::handlers::{Ctx, filter, json_response, method_not_allowed, platform_version, resource_scope};
use crate::{ApiState, access, wire};

/// `GET /subscriptions/{s}/resources` and `GET …/resourceGroups/{g}/resources`: resources of
/// every configured type in key order, each as its own type's GET shows it. `$filter` takes
/// `resourceType`, `tagName` (with `tagValue`) and `provisioningState`; a page holds at most
/// `$top` and fewer when a filter leaves some out, with a `nextLink` while more may follow.
/// `referencedResourceId eq '{id}'` (a Slipway extension) lists what references that
/// resource: at most `$top`, in one page.
pub(crate) async fn list_resources(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    subscription: &str,
    group: Option<&str>,
) -> Result<Response, ArmError> {
    let sub = SubscriptionId::new(subscription);
    let scope = match group {
        Some(g) => Scope::resource_group(subscription, g),
        None => Scope::subscription_scope(&sub),
    };
    let (grants, whole) = readable(state, ctx, &sub, scope, "Microsoft.Resources/resources/read").await?;
    let [resource_type, tag_name, tag_value, provisioning_state, referenced] = filter::fields(
        ctx.query.get("$filter").map(String::as_str),
        ["resourceType", "tagName", "tagValue", "provisioningState", "referencedResourceId"],
    )?;
    if tag_value.is_some() && tag_name.is_none() {
        return Err(invalid_filter("A tagValue filter needs a tagName filter.".into()));
    }
    let type_key = match resource_type.as_deref() {
        Some(t) => Some(match t.split_once('/') {
            Some((namespace, type_name)) => TypeKey::new(namespace, type_name),
            None => {
                return Err(invalid_filter(format!("The resourceType '{}' is not 'Namespace/type'.", echo(t, 200))));
            }
        }),
        None => None,
    };
    let state_wanted = state_filter(provisioning_state.as_deref())?;
    let limit = page_limit(state, ctx)?;
    let after =
        ctx.query.get("$skipToken").map(|token| decode_token(token).ok_or_else(invalid_skip_token)).transpose()?;
    let query = ListQuery {
        subscription: sub,
        resource_group: group.map(str::to_ascii_lowercase),
        type_key,
        under: None,
        after,
        limit,
    };
    let page = match referenced {
        None => state.store.list_resources(&query).await?,
        Some(text) => {
            let target =
                ArmId::parse(&text).ok().filter(|id| id.subscription.eq_ignore_ascii_case(subscription)).ok_or_else(
                    || invalid_filter(format!("'{}' is not a resource id in this subscription.", echo(&text, 200))),
                )?;
            let in_scope = |r: &slipway_domain::ResourceRecord| {
                query.resource_group.as_deref().is_none_or(|g| r.id.resource_group.eq_ignore_ascii_case(g))
                    && query.type_key.as_ref().is_none_or(|t| r.id.type_key() == *t)
            };
            let items = state.store.list_referrers(&target.key(), limit).await?.into_iter().filter(in_scope).collect();
            slipway_store::Page { items, next: None }
        }
    };
    let tagged = |r: &slipway_domain::ResourceRecord| {
        filter::tags_match(&r.spec.tags, tag_name.as_deref(), tag_value.as_deref())
    };
    let value: Vec<Value> = page
        .items
        .iter()
        .filter(|r| whole || grants.allows(&ctx.caller, Permission::Read, &resource_scope(&r.id)))
        .filter(|r| tagged(r) && state_wanted.is_none_or(|s| r.provisioning_state == s))
        // A type no longer configured has no shape to show: its resources are left out.
        .filter_map(|r| state.types.get(&r.id.namespace, &r.id.type_name).map(|ty| wire::resource_body(r, &ty)))
        .collect();
    page_response(ctx, path, limit, value, page.next.as_ref().map(encode_token))
}

/// `GET /subscriptions/{s}/operationStatuses` (a Slipway extension): the subscription's
/// operations newest first, as each one's status reads; `$filter` takes `status`.
pub(crate) async fn list_operations(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    subscription: &str,
) -> Result<Response, ArmError> {
    let sub = SubscriptionId::new(subscription);
    let (grants, _) =
        readable(state, ctx, &sub, Scope::subscription_scope(&sub), "Microsoft.Resources/operationStatuses/read")
            .await?;
    let [status, approver] = filter::fields(ctx.query.get("$filter").map(String::as_str), ["status", "approver"])?;
    let status = state_filter(status.as_deref())?;
    // `approver eq 'me'`: only requests waiting for a decision the caller may make.
    let mine = match approver.as_deref() {
        None => false,
        Some(me) if me.eq_ignore_ascii_case("me") => true,
        Some(other) => return Err(invalid_filter(format!("approver is 'me', not '{}'.", echo(other, 40)))),
    };
    let status = if mine { Some(ProvisioningState::WaitingForApproval) } else { status };
    let limit = page_limit(state, ctx)?;
    let after = ctx
        .query
        .get("$skipToken")
        .map(|token| OperationId::parse(token).ok_or_else(invalid_skip_token))
        .transpose()?;
    let query = OperationQuery { subscription: sub, status, after, limit, now: state.clock.now() };
    let page = state.store.list_operations(&query).await?;
    let value: Vec<Value> = page
        .items
        .iter()
        .filter(|op| may_see_operation(state, ctx, &grants, op, Permission::Read))
        .filter(|op| !mine || super::approvals::may_decide(ctx, &grants, op, query.now))
        .map(|op| wire::operation_status_document(op, &state.options.location))
        .collect();
    page_response(ctx, path, limit, value, page.next.as_ref().map(|id| id.as_str().to_string()))
}

/// A `provisioningState` or `status` clause's state.
fn state_filter(value: Option<&str>) -> Result<Option<ProvisioningState>, ArmError> {
    value
        .map(|s| {
            ProvisioningState::parse(s)
                .ok_or_else(|| invalid_filter(format!("'{}' is not a provisioning state.", echo(s, 40))))
        })
        .transpose()
}

pub(crate) fn invalid_filter(message: String) -> ArmError {
    ArmError::bad_request("InvalidFilter", message).with_target("$filter")
}

/// The caller's grants, if they may read anything within `scope` (else `403` naming
/// `action`), and whether they may read all of it.
pub(crate) async fn readable(
    state: &ApiState,
    ctx: &Ctx,
    subscription: &SubscriptionId,
    scope: Scope,
    action: &str,
) -> Result<(access::Grants, bool), ArmError> {
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    platform_version::check(ctx)?;
    let grants = access::grants(state, &ctx.caller, Some(subscription)).await?;
    if !grants.may_read_within(&ctx.caller, &scope) {
        return Err(access::forbidden(&ctx.caller, action, &scope));
    }
    let whole = grants.allows(&ctx.caller, Permission::Read, &scope);
    Ok((grants, whole))
}

/// `$top` (1–1000; default `server.page_size`).
pub(crate) fn page_limit(state: &ApiState, ctx: &Ctx) -> Result<usize, ArmError> {
    match ctx.query.get("$top") {
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| ArmError::bad_request("InvalidParameter", "$top must be an integer from 1 to 1000.")),
        None => Ok(state.options.page_size),
    }
}

pub(crate) fn invalid_skip_token() -> ArmError {
    ArmError::bad_request("InvalidSkipToken", "The $skipToken is not valid.")
}

/// `{"value": …, "nextLink": …}`, the link repeating the request's `api-version`, `$top` and
/// `$filter`.
pub(crate) fn page_response(
    ctx: &Ctx,
    path: &str,
    limit: usize,
    value: Vec<Value>,
    next: Option<String>,
) -> Result<Response, ArmError> {
    let mut body = json!({ "value": value });
    if let Some(token) = next {
        let filter = match ctx.query.get("$filter") {
            Some(f) => format!("&$filter={}", utf8_percent_encode(f, NON_ALPHANUMERIC)),
            None => String::new(),
        };
        body["nextLink"] = json!(format!(
            "{}{path}?api-version={}&$top={limit}{filter}&$skipToken={token}",
            ctx.base,
            ctx.api_version()?
        ));
    }
    Ok(json_response(StatusCode::OK, body))
}
