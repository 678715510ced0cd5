//! ARM's resource groups (`Microsoft.Resources/resourceGroups`, docs/arm-contract.md#resource-groups):
//! `PUT`, `GET`, `PATCH` and `DELETE` on `/subscriptions/{s}/resourceGroups/{g}` (`HEAD` is
//! a `GET` without its body, `handlers::existence`), and the subscription's list with
//! `$filter` by tag and `$top`. They take the platform api-versions. A group's `PUT` and
//! `PATCH` answer at once; its `DELETE` is a long-running operation whose engine deletes what
//! the group holds (`slipway_domain::group`).
//!
//! A group made before groups were records — it exists because resources were put in it —
//! is read from its first resource (its name's casing, that resource's location, no tags)
//! and becomes a record on its first write. A resource created in a group with no record
//! gets one first when `server.resource_groups = "implicit"` (the default), or when the
//! group already holds resources; otherwise it is ARM's `404 ResourceGroupNotFound`.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use slipway_domain::ResourceRecord;
use slipway_domain::access::{Permission, Scope};
use slipway_domain::admission::{Admitted, Rejection};
use slipway_domain::group::{self, GroupSpec, GroupWrite};
use slipway_domain::ids::{ArmId, SubscriptionId};
use slipway_domain::locks::Verb;
use slipway_domain::subscription::Intent;
use slipway_store::{ChangeRequest, ListQuery, StoreError, change_with};

use crate::error::ArmError;
use crate::handlers::body::json_body;
use crate::handlers::guardrails::Guard;
use crate::handlers::operations::add_async_headers;
use crate::handlers::overview::{invalid_filter, page_limit, page_response, readable};
use crate::handlers::resources::{decode_text, encode_text};
use crate::handlers::{Ctx, filter, json_response, method_not_allowed, platform_version, request_context};
use crate::{ApiState, GroupCreation, access, limits, request};

/// ARM's action on a group, e.g. `Microsoft.Resources/subscriptions/resourceGroups/write`.
fn group_action(verb: &str) -> String {
    format!("Microsoft.Resources/subscriptions/resourceGroups/{verb}")
}

/// A group `PUT` body: `location` (required), `tags`, `managedBy`; the rest ARM owns.
#[derive(Debug, Deserialize)]
struct GroupPut {
    #[serde(default)]
    location: Option<String>,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "managedBy")]
    managed_by: Option<String>,
}

/// A group `PATCH` body: `tags` (replaced whole), `managedBy`.
#[derive(Debug, Deserialize)]
struct GroupPatch {
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "managedBy")]
    managed_by: Option<String>,
}

/// `/subscriptions/{s}/resourceGroups/{g}`, every method.
pub(crate) async fn group(
    state: &ApiState,
    ctx: &Ctx,
    subscription: &str,
    name: &str,
    body: Body,
) -> Result<Response, ArmError> {
    if ctx.method == Method::GET {
        return get_group(state, ctx, subscription, name).await;
    }
    let (permission, intent, verb) = match ctx.method {
        Method::PUT | Method::PATCH => (Permission::Write, Intent::Change, "write"),
        Method::DELETE => (Permission::Delete, Intent::Delete, "delete"),
        _ => return Err(method_not_allowed(&ctx.method)),
    };
    platform_version::check(ctx)?;
    let id = ArmId::group(subscription, name).map_err(|_| ArmError::internal())?;
    let sub = SubscriptionId::new(subscription);
    let grants = access::grants(state, &ctx.caller, Some(&sub)).await?;
    grants.require(&ctx.caller, permission, &Scope::resource_group(subscription, name), &group_action(verb))?;
    let tenant = access::check_subscription(state, &sub, intent).await?.as_ref().map(access::tenant_context);
    let rctx = request_context(state, ctx, ctx.api_version()?, tenant)?;
    let guard = Guard::new(state, &id);
    let req = guard.request(ChangeRequest::new(id.key(), rctx.now));
    match ctx.method {
        Method::PUT => {
            let input: GroupPut = json_body(state, ctx, body).await?;
            let location = request::required_location(input.location)?;
            let tags = input.tags.unwrap_or_default();
            limits::check_tags(&tags)?;
            let spec = GroupSpec { location, tags, managed_by: input.managed_by };
            let target = id.clone();
            let (written, snap) = ctx
                .change(state, req, move |s| {
                    guard.check_locks(s, Verb::Write)?;
                    group::admit_group_put(s, &target, spec, &rctx)
                })
                .await?;
            let status = if written == GroupWrite::Created { StatusCode::CREATED } else { StatusCode::OK };
            Ok(json_response(status, group_body(snap.resource.as_ref().ok_or_else(ArmError::internal)?)))
        }
        Method::PATCH => {
            let input: GroupPatch = json_body(state, ctx, body).await?;
            if let Some(tags) = &input.tags {
                limits::check_tags(tags)?;
            }
            adopt_legacy(state, ctx, &id).await?;
            let (_, snap) = ctx
                .change(state, req, move |s| {
                    if s.resource.is_some() {
                        guard.check_locks(s, Verb::Write)?;
                    }
                    group::admit_group_patch(s, input.tags, input.managed_by, &rctx)
                })
                .await
                .map_err(|e| not_found_as_group(e, name))?;
            Ok(json_response(StatusCode::OK, group_body(snap.resource.as_ref().ok_or_else(ArmError::internal)?)))
        }
        _ => {
            let target = id.clone();
            let req = req.with_children(true).with_referrers(true);
            let (admitted, _) = ctx
                .change(state, req, move |s| {
                    if s.resource.is_some() {
                        guard.check_delete(s, &rctx)?;
                    }
                    group::admit_group_delete(s, &target, &rctx)
                })
                .await?;
            match admitted {
                Admitted::Accepted { operation, .. } | Admitted::InProgress { operation } => {
                    (state.on_accept)();
                    let mut resp = StatusCode::ACCEPTED.into_response();
                    add_async_headers(state, ctx, &operation, resp.headers_mut());
                    Ok(resp)
                }
                Admitted::Unchanged | Admitted::Absent => Err(ArmError::internal()),
            }
        }
    }
}

/// `GET /subscriptions/{s}/resourceGroups/{g}`: `404 ResourceGroupNotFound` unless it exists
/// and the caller may read within it — the list's rule for each group.
async fn get_group(state: &ApiState, ctx: &Ctx, subscription: &str, name: &str) -> Result<Response, ArmError> {
    let sub = SubscriptionId::new(subscription);
    let scope = Scope::resource_group(subscription, name);
    readable(state, ctx, &sub, scope, &group_action("read")).await?;
    match find(state, &sub, name).await? {
        Some(g) => Ok(json_response(StatusCode::OK, g)),
        None => Err(Rejection::GroupNotFound { group: name.to_string() }.into()),
    }
}

/// The group's body: its record's, or one made before groups were records, read from its
/// first resource; `None` when neither exists.
async fn find(state: &ApiState, sub: &SubscriptionId, name: &str) -> Result<Option<Value>, ArmError> {
    let key = slipway_domain::ids::ResourceKey::group(sub, &name.to_ascii_lowercase());
    if let Some(record) = state.store.get_resource(&key).await? {
        return Ok(Some(group_body(&record)));
    }
    Ok(first_resource(state, sub, name).await?.map(|r| legacy_body(state, &r)))
}

/// The first resource in the group, if any.
pub(crate) async fn first_resource(
    state: &ApiState,
    sub: &SubscriptionId,
    name: &str,
) -> Result<Option<ResourceRecord>, ArmError> {
    let query = ListQuery {
        subscription: sub.clone(),
        resource_group: Some(name.to_ascii_lowercase()),
        type_key: None,
        under: None,
        after: None,
        limit: 1,
    };
    Ok(state.store.list_resources(&query).await?.items.into_iter().next())
}

/// Makes a record for a group made before groups were records (it holds resources but has
/// none), so a write can change it; nothing when it has one or holds nothing.
pub(crate) async fn adopt_legacy(state: &ApiState, ctx: &Ctx, id: &ArmId) -> Result<(), ArmError> {
    let sub = id.subscription_key();
    if state.store.get_resource(&id.key()).await?.is_some() {
        return Ok(());
    }
    let Some(first) = first_resource(state, &sub, &id.resource_group).await? else { return Ok(()) };
    let location = first.spec.location.clone().unwrap_or_else(|| state.options.location.clone());
    ensure_group(state, ctx, &first.id.group_id(), location).await
}

/// Creates the group with `location` unless it exists (a resource's create in a group with
/// no record, or a legacy group's first write).
async fn ensure_group(state: &ApiState, ctx: &Ctx, id: &ArmId, location: String) -> Result<(), ArmError> {
    let rctx = request_context(state, ctx, ctx.api_version()?, None)?;
    let target = id.clone();
    let spec = GroupSpec { location, ..GroupSpec::default() };
    let req = ChangeRequest::new(id.key(), rctx.now);
    change_with(state.store.as_ref(), req, move |s| match s.resource {
        Some(_) => Ok(()),
        None => group::admit_group_put(s, &target, spec, &rctx).map(|_| ()),
    })
    .await?;
    Ok(())
}

/// Before a resource's create is tried again: when its group has no record, makes one if
/// this deployment creates groups implicitly or the group already holds resources (made
/// before groups were records). `false`: ARM's rule stands (`404 ResourceGroupNotFound`).
pub(crate) async fn create_missing_group(
    state: &ApiState,
    ctx: &Ctx,
    resource: &ArmId,
    location: Option<&str>,
) -> Result<bool, ArmError> {
    let group = resource.group_id();
    let legacy = first_resource(state, &group.subscription_key(), &group.resource_group).await?;
    let location = match (&legacy, state.options.resource_groups) {
        (Some(first), _) => first.spec.location.clone(),
        (None, GroupCreation::Implicit) => location.map(str::to_string),
        (None, GroupCreation::Explicit) => return Ok(false),
    };
    let location = location.unwrap_or_else(|| state.options.location.clone());
    let named = legacy.map_or(group, |first| first.id.group_id());
    ensure_group(state, ctx, &named, location).await?;
    Ok(true)
}

fn not_found_as_group(e: StoreError, name: &str) -> ArmError {
    match e {
        StoreError::Rejected(Rejection::NotFound) => Rejection::GroupNotFound { group: name.to_string() }.into(),
        other => other.into(),
    }
}

/// `GET /subscriptions/{s}/resourceGroups`: the groups the caller may read within, in name
/// order; `$filter` takes `tagName` (with `tagValue`), `$top` bounds a page.
pub(crate) async fn list_groups(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    subscription: &str,
) -> Result<Response, ArmError> {
    let sub = SubscriptionId::new(subscription);
    let (grants, whole) = readable(state, ctx, &sub, Scope::subscription_scope(&sub), &group_action("read")).await?;
    let [tag_name, tag_value] = filter::fields(ctx.query.get("$filter").map(String::as_str), ["tagName", "tagValue"])?;
    if tag_value.is_some() && tag_name.is_none() {
        return Err(invalid_filter("A tagValue filter needs a tagName filter.".into()));
    }
    let limit = page_limit(state, ctx)?;
    let after = ctx
        .query
        .get("$skipToken")
        .map(|token| decode_text(token).ok_or_else(crate::handlers::overview::invalid_skip_token))
        .transpose()?;
    let page = slipway_store::resource_groups(state.store.as_ref(), &sub, after.as_deref(), limit).await?;
    let none = BTreeMap::new();
    let value: Vec<Value> = page
        .found
        .iter()
        .filter(|r| {
            whole || grants.may_read_within(&ctx.caller, &Scope::resource_group(subscription, &r.id.resource_group))
        })
        // A group without a record (found by its first resource) has no tags.
        .filter(|r| {
            filter::tags_match(
                if r.id.is_group() { &r.spec.tags } else { &none },
                tag_name.as_deref(),
                tag_value.as_deref(),
            )
        })
        .map(|r| if r.id.is_group() { group_body(r) } else { legacy_body(state, r) })
        .collect();
    page_response(ctx, path, limit, value, page.next.as_deref().map(encode_text))
}

/// A group's record as ARM shows it.
fn group_body(g: &ResourceRecord) -> Value {
    let spec = GroupSpec::of(g);
    let mut body = json!({
        "id": g.id.to_string(),
        "name": g.id.resource_group,
        "type": format!("{}/{}", slipway_domain::ids::GROUP_NAMESPACE, slipway_domain::ids::GROUP_TYPE_NAME),
        "location": spec.location,
        "tags": spec.tags,
        "properties": {"provisioningState": g.provisioning_state.as_str()},
    });
    if let Some(m) = spec.managed_by {
        body["managedBy"] = json!(m);
    }
    body
}

/// A group with no record, as its first resource shows it.
fn legacy_body(state: &ApiState, first: &ResourceRecord) -> Value {
    let id = first.id.group_id();
    json!({
        "id": id.to_string(),
        "name": id.resource_group,
        "type": format!("{}/{}", slipway_domain::ids::GROUP_NAMESPACE, slipway_domain::ids::GROUP_TYPE_NAME),
        "location": first.spec.location.clone().unwrap_or_else(|| state.options.location.clone()),
        "tags": {},
        "properties": {"provisioningState": "Succeeded"},
    })
}
