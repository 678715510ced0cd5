//! The event feed (a Slipway extension, docs/arm-contract.md#event-feed): a subscription's
//! resource and operation changes in commit order, at subscription, resource-group or
//! resource scope, each read from a cursor, as pages or followed as Server-Sent Events; only
//! the events of resources the caller may read.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use slipway_domain::access::{Permission, Scope};
use slipway_domain::echo::echo;
use slipway_domain::event::Event;
use slipway_domain::ids::{ArmId, SubscriptionId};
use slipway_domain::subscription::Intent;
use slipway_store::{EventQuery, EventRead, EventScope, Store};

use crate::edge::Caller;
use crate::error::ArmError;
use crate::handlers::{Ctx, bool_param, jobs, json_response, overview, resource_scope};
use crate::{ApiState, access, wire};

/// How often a follower looks for new events while the feed is quiet.
const FOLLOW_POLL: Duration = Duration::from_millis(500);
/// Most events a follower reads at once.
const FOLLOW_BATCH: usize = 200;

/// Which events a reader sees: every one in its scope, or those of resources it may read.
#[derive(Clone)]
struct Visibility(Option<(access::Grants, Caller)>);

impl Visibility {
    fn sees(&self, e: &Event) -> bool {
        match &self.0 {
            None => true,
            Some((grants, caller)) => ArmId::read_stored(&e.resource_id)
                .is_some_and(|id| grants.allows(caller, Permission::Read, &resource_scope(&id))),
        }
    }
}

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
    let sub = SubscriptionId::new(subscription);
    let (scope, events_scope) = match group {
        Some(g) => (Scope::resource_group(subscription, g), EventScope::ResourceGroup(g.to_string())),
        None => (Scope::subscription_scope(&sub), EventScope::Subscription),
    };
    let action = format!("{}/{}/read", crate::route::RESOURCES_NAMESPACE, slipway_types::EVENTS_SEGMENT);
    let (grants, whole) = overview::readable(state, ctx, &sub, scope, &action).await?;
    access::check_subscription(state, &sub, Intent::Read).await?;
    let visibility = Visibility((!whole).then(|| (grants, ctx.caller.clone())));
    answer(state, ctx, path, sub, events_scope, visibility).await
}

/// `GET {resourceId}/events` (the type's api-version): the resource's and its children's,
/// also once it is gone.
pub(crate) async fn resource_events(state: &ApiState, ctx: &Ctx, path: &str, id: ArmId) -> Result<Response, ArmError> {
    jobs::may_read_resource(state, ctx, &id).await?;
    let subscription = SubscriptionId::new(&id.subscription);
    answer(state, ctx, path, subscription, EventScope::Resource(id.key()), Visibility(None)).await
}

/// From `since` (or `Last-Event-ID`; absent: the oldest kept; `latest`: the newest): one page,
/// `$top` at most — `{"value", "cursor", "nextLink"?}` —, or with `follow=true` every event
/// from there on as Server-Sent Events.
async fn answer(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    subscription: SubscriptionId,
    scope: EventScope,
    visibility: Visibility,
) -> Result<Response, ArmError> {
    let follow = bool_param(ctx, "follow")?;
    let limit = if follow { FOLLOW_BATCH } else { overview::page_limit(state, ctx)? };
    let mut query = EventQuery { subscription, scope, after: 0, limit };
    query.after = match since(ctx)? {
        Since::After(after) => after,
        Since::Latest => {
            let newest = match state.store.events(&EventQuery { limit: 1, ..query.clone() }).await? {
                EventRead::Page { last, .. } | EventRead::Gone { last, .. } => last,
            };
            if !follow {
                return Ok(json_response(StatusCode::OK, json!({"value": [], "cursor": newest.to_string()})));
            }
            newest
        }
    };
    let (items, last) = match state.store.events(&query).await? {
        EventRead::Page { items, last } => (items, last),
        EventRead::Gone { last, .. } => return Ok(gone(query.after, last, state.options.event_retention_secs)),
    };
    if follow {
        let mut follower = Follower {
            store: state.store.clone(),
            stopping: state.stopping.clone(),
            location: state.options.location.clone(),
            query,
            visibility,
            queue: VecDeque::new(),
            done: false,
        };
        follower.take(items, last);
        let stream = futures_util::stream::unfold(follower, |mut f| async move {
            let event = f.next().await?;
            Some((Ok::<sse::Event, Infallible>(event), f))
        });
        return Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response());
    }
    // A full page may have more after it; a short one read everything up to `last`.
    let full = items.len() >= limit;
    let cursor = if full { items.last().map_or(last, |(seq, _)| *seq) } else { last };
    let value: Vec<Value> = items
        .iter()
        .filter(|(_, e)| visibility.sees(e))
        .map(|(seq, e)| wire::event_body(*seq, e, &state.options.location))
        .collect();
    let mut body = json!({"value": value, "cursor": cursor.to_string()});
    if full {
        body["nextLink"] =
            json!(format!("{}{path}?api-version={}&$top={limit}&since={cursor}", ctx.base, ctx.api_version()?));
    }
    Ok(json_response(StatusCode::OK, body))
}

/// A `?follow=true` answer in progress: one `id`/`event`/`data` message per event the reader
/// sees (the `id` its cursor, so a reconnecting `EventSource` resumes after it), read as the
/// feed grows; `gone` (data: the cursor to go on from after a resync) if events it had not
/// read were pruned meanwhile, `end` when the server stops.
struct Follower {
    store: Arc<dyn Store>,
    stopping: tokio::sync::watch::Receiver<bool>,
    location: String,
    query: EventQuery,
    visibility: Visibility,
    queue: VecDeque<sse::Event>,
    done: bool,
}

impl Follower {
    async fn next(&mut self) -> Option<sse::Event> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            let more = match self.store.events(&self.query).await {
                Ok(EventRead::Page { items, last }) => self.take(items, last),
                Ok(EventRead::Gone { last, .. }) => {
                    self.queue.push_back(sse::Event::default().event("gone").data(last.to_string()));
                    self.done = true;
                    false
                }
                Err(e) => {
                    tracing::warn!(error = %e, "following the event feed: reading it failed");
                    false
                }
            };
            if self.queue.is_empty() && !self.done && !more {
                let mut stopping = self.stopping.clone();
                tokio::select! {
                    _ = tokio::time::sleep(FOLLOW_POLL) => {}
                    _ = stopping.wait_for(|s| *s) => {
                        self.queue.push_back(sse::Event::default().event("end").data("ServerShuttingDown"));
                        self.done = true;
                    }
                }
            }
        }
    }

    /// Queues what the reader sees of a page and moves the cursor past it; whether the page
    /// was full (more may follow at once).
    fn take(&mut self, items: Vec<(u64, Event)>, last: u64) -> bool {
        let full = items.len() >= self.query.limit;
        for (seq, e) in items {
            self.query.after = seq;
            if self.visibility.sees(&e) {
                let data = wire::event_body(seq, &e, &self.location).to_string();
                self.queue.push_back(sse::Event::default().id(seq.to_string()).event(e.kind.as_str()).data(data));
            }
        }
        if !full {
            self.query.after = self.query.after.max(last);
        }
        full
    }
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
