//! `GET [/subscriptions/{s}]/providers/Microsoft.Insights/eventtypes/management/values`: the
//! activity log in the shape of Azure's Activity Log (`EventData`), newest first, filtered
//! by `$filter` (`activity::filter`), paged by `$top` and `$skipToken`. A subscription's log
//! is read by whoever may read the scope the filter narrows it to (the subscription, a group,
//! a resource); the platform's own (API tokens) by the Admin. Each event also carries the
//! spec's changed properties as Resource Graph's change history names them
//! (`propertyChanges`), secrets by path alone (`activity::event_data`).

use axum::http::Method;
use axum::response::Response;
use slipway_domain::access::{Permission, Scope};
use slipway_domain::activity::ActivityFilter;
use slipway_domain::ids::SubscriptionId;
use slipway_store::{ActivityQuery, ActivityScope};

use super::overview::{invalid_skip_token, page_response};
use super::{Ctx, method_not_allowed, require_admin};
use crate::activity::event_data;
use crate::error::ArmError;
use crate::{ApiState, access};

/// The action a read of the log is authorized as.
const READ_ACTION: &str = "Microsoft.Insights/eventtypes/values/read";
const DEFAULT_TOP: usize = 200;
const MAX_TOP: usize = 1_000;

pub(crate) async fn activity(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    subscription: Option<&str>,
) -> Result<Response, ArmError> {
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    ctx.api_version()?;
    let filter =
        ActivityFilter::parse(ctx.query.get("$filter").map(String::as_str).unwrap_or_default()).map_err(|e| {
            ArmError::bad_request("InvalidFilter", format!("The $filter is not valid: {e}.")).with_target("$filter")
        })?;
    let limit = top(ctx)?;
    let before = ctx.query.get("$skipToken").map(|t| t.parse::<i64>().map_err(|_| invalid_skip_token())).transpose()?;
    let subscription = subscription.map(SubscriptionId::new);
    let grants = access::grants(state, &ctx.caller, subscription.as_ref()).await?;
    match &subscription {
        Some(sub) => {
            let scope = match (&filter.resource, &filter.resource_group) {
                (Some(resource), _) => Scope::stored(resource),
                (None, Some(group)) => Scope::resource_group(sub.as_str(), group),
                (None, None) => Scope::subscription_scope(sub),
            };
            if !scope.as_str().starts_with(Scope::subscription_scope(sub).as_str()) {
                return Err(ArmError::bad_request(
                    "InvalidFilter",
                    "The $filter's resourceUri is not in this subscription.",
                )
                .with_target("$filter"));
            }
            grants.require(&ctx.caller, Permission::Read, &scope, READ_ACTION)?;
        }
        None => require_admin(ctx, &grants, READ_ACTION)?,
    }
    let scope = match subscription {
        Some(s) => ActivityScope::Subscription(s),
        None => ActivityScope::Platform,
    };
    let query = ActivityQuery { scope, filter, before, limit };
    let page = state.store.activity(&query).await?;
    let value = page.items.iter().map(|(position, entry)| event_data(*position, entry)).collect();
    page_response(ctx, path, limit, value, page.next.map(|n| n.to_string()))
}

fn top(ctx: &Ctx) -> Result<usize, ArmError> {
    let Some(text) = ctx.query.get("$top") else { return Ok(DEFAULT_TOP) };
    text.parse::<usize>().ok().filter(|n| (1..=MAX_TOP).contains(n)).ok_or_else(|| {
        ArmError::bad_request("InvalidParameter", format!("$top must be a number from 1 to {MAX_TOP}."))
            .with_target("$top")
    })
}
