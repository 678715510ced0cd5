//! The event feed (a Slipway extension, docs/arm-contract.md#event-feed): a subscription's
//! resource and operation changes in commit order, at subscription, resource-group or
//! resource scope, each read from a cursor; only the events of resources the caller may read.

use slipway_domain::event::Event;
use slipway_store::{EventQuery, EventRead, EventScope};

use super::*;

/// The header a `410` names the cursor to follow from after a resync in.
pub const CURSOR_HEADER: &str = "x-slipway-event-cursor";

/// `GET /subscriptions/{s}[/resourceGroups/{g}]/providers/Slipway.Resources/events` (the
/// platform api-version).
pub(crate) async fn list_events(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    subscription: &str,
    group: Option<&str>,
) -> Result<Response, ArmError> {
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    admin::check_version(ctx)?;
    let sub = SubscriptionId::new(subscription);
    let (scope, events_scope) = match group {
        Some(g) => (Scope::resource_group(subscription, g), EventScope::ResourceGroup(g.to_string())),
        None => (Scope::subscription_scope(&sub), EventScope::Subscription),
    };
    let grants = access::grants(state, &ctx.caller, Some(&sub)).await?;
    if !grants.may_read_within(&ctx.caller, &scope) {
        return Err(access::forbidden(&ctx.caller, "Slipway.Resources/events/read", &scope));
    }
    access::check_subscription(state, &sub, Intent::Read).await?;
    let whole = grants.allows(&ctx.caller, Permission::Read, &scope);
    let visible = |e: &Event| {
        whole
            || ArmId::read_stored(&e.resource_id)
                .is_some_and(|id| grants.allows(&ctx.caller, Permission::Read, &resource_scope(&id)))
    };
    read_page(state, ctx, path, sub, events_scope, &visible).await
}

/// `GET {resourceId}/events` (the type's api-version): the resource's and its children's,
/// also once it is gone.
pub(crate) async fn resource_events(state: &ApiState, ctx: &Ctx, path: &str, id: ArmId) -> Result<Response, ArmError> {
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    let ty = resource_type(state, &id.namespace, &id.type_name)?;
    check_version(ctx, &ty)?;
    let subscription = SubscriptionId::new(&id.subscription);
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    let action = access::resource_action(&ty.namespace, &ty.type_name, Permission::Read);
    grants.require(&ctx.caller, Permission::Read, &resource_scope(&id), &action)?;
    access::check_subscription(state, &subscription, Intent::Read).await?;
    read_page(state, ctx, path, subscription, EventScope::Resource(id.key()), &|_| true).await
}

/// One page from `since` (or `Last-Event-ID`; absent: the oldest kept; `latest`: none, only
/// the cursor), `$top` at most: `{"value", "cursor", "nextLink"?}`.
async fn read_page(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    subscription: SubscriptionId,
    scope: EventScope,
    visible: &(dyn Fn(&Event) -> bool + Sync),
) -> Result<Response, ArmError> {
    let limit = overview::page_limit(state, ctx)?;
    let since = match since(ctx)? {
        Since::Latest => {
            let query = EventQuery { subscription, scope, after: 0, limit: 1 };
            let last = match state.store.events(&query).await? {
                EventRead::Page { last, .. } | EventRead::Gone { last, .. } => last,
            };
            return Ok(json_response(StatusCode::OK, json!({"value": [], "cursor": last.to_string()})));
        }
        Since::After(after) => after,
    };
    let query = EventQuery { subscription, scope, after: since, limit };
    let (items, last) = match state.store.events(&query).await? {
        EventRead::Page { items, last } => (items, last),
        EventRead::Gone { last, .. } => return Ok(gone(since, last, state.options.event_retention_secs)),
    };
    // A full page may have more after it; a short one read everything up to `last`.
    let full = items.len() >= limit;
    let cursor = if full { items.last().map_or(last, |(seq, _)| *seq) } else { last };
    let value: Vec<Value> = items
        .iter()
        .filter(|(_, e)| visible(e))
        .map(|(seq, e)| wire::event_body(*seq, e, &state.options.location))
        .collect();
    let mut body = json!({"value": value, "cursor": cursor.to_string()});
    if full {
        body["nextLink"] =
            json!(format!("{}{path}?api-version={}&$top={limit}&since={cursor}", ctx.base, ctx.api_version()?));
    }
    Ok(json_response(StatusCode::OK, body))
}

enum Since {
    After(u64),
    Latest,
}

/// `since`, else the `Last-Event-ID` header (what an `EventSource` sends when it reconnects).
fn since(ctx: &Ctx) -> Result<Since, ArmError> {
    let (text, target) = match ctx.query.get("since") {
        Some(s) => (s.as_str(), "since"),
        None => match ctx.header("last-event-id") {
            "" => return Ok(Since::After(0)),
            s => (s, "Last-Event-ID"),
        },
    };
    if text.eq_ignore_ascii_case("latest") {
        return Ok(Since::Latest);
    }
    text.parse::<u64>().map(Since::After).map_err(|_| {
        ArmError::bad_request(
            "InvalidParameter",
            format!("'{}' is not an event cursor: use a cursor the feed gave, or latest.", echo(text, 40)),
        )
        .with_target(target)
    })
}

/// `410 Gone`: events after `since` are no longer kept, or `since` is not this feed's. The
/// cursor to follow from after reading the current state is in the message and a header.
fn gone(since: u64, last: u64, retention_secs: u64) -> Response {
    let message = format!(
        "Events after cursor {since} are no longer kept (the feed keeps {retention_secs} s) or the cursor is not \
         this feed's: read the resources as they are now, then follow the feed from cursor {last}."
    );
    let mut resp = ArmError::new(StatusCode::GONE, "EventCursorExpired", message).with_target("since").into_response();
    resp.headers_mut().insert(CURSOR_HEADER, HeaderValue::from(last));
    resp
}
