//! ARM's tags at a scope, `{scope}/providers/Microsoft.Resources/tags/default` for a resource
//! or a resource group (docs/arm-contract.md#tags-at-a-scope): `GET`, `PUT` (replace),
//! `PATCH` with `operation` `Merge`, `Replace` or `Delete`, and `DELETE` (every tag), on the
//! platform api-versions. A tag change is not a spec change: it answers at once and runs no
//! job (`slipway_domain::tags`).

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use slipway_domain::access::{Permission, Scope};
use slipway_domain::admission::Rejection;
use slipway_domain::ids::{ArmId, SubscriptionId};
use slipway_domain::locks::Verb;
use slipway_domain::subscription::Intent;
use slipway_domain::tags::{Tags, TagsChange, admit_tags};
use slipway_store::{ChangeRequest, StoreError};

use crate::error::ArmError;
use crate::handlers::body::json_body;
use crate::handlers::groups::{adopt_legacy, first_resource};
use crate::handlers::guardrails::Guard;
use crate::handlers::{Ctx, json_response, method_not_allowed, platform_version, request_context, resource_type};
use crate::{ApiState, access, limits};

#[derive(Debug, Default, Deserialize)]
struct TagsProperties {
    #[serde(default)]
    tags: Option<Tags>,
}

/// A tags body: `{"properties": {"tags": {…}}}`, and for a `PATCH` its `operation`.
#[derive(Debug, Deserialize)]
struct TagsBody {
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    properties: Option<TagsProperties>,
}

/// `{scope}/providers/Microsoft.Resources/tags/default`, every method.
pub(crate) async fn tags(state: &ApiState, ctx: &Ctx, target: ArmId, body: Body) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    if !target.is_group() {
        resource_type(state, &target.namespace, &target.type_name)?;
    }
    let (permission, verb) = match ctx.method {
        Method::GET => (Permission::Read, "read"),
        Method::PUT | Method::PATCH => (Permission::Write, "write"),
        Method::DELETE => (Permission::Write, "delete"),
        _ => return Err(method_not_allowed(&ctx.method)),
    };
    let scope = if target.is_group() {
        Scope::resource_group(&target.subscription, &target.resource_group)
    } else {
        Scope::resource(&target)
    };
    let sub = SubscriptionId::new(&target.subscription);
    let grants = access::grants(state, &ctx.caller, Some(&sub)).await?;
    grants.require(&ctx.caller, permission, &scope, &format!("Microsoft.Resources/tags/{verb}"))?;
    if permission == Permission::Read {
        let record = state.store.get_resource(&target.key()).await?;
        let tags = match record {
            Some(r) => r.spec.tags,
            // A group made before groups were records has no tags.
            None if target.is_group() && first_resource(state, &sub, &target.resource_group).await?.is_some() => {
                Tags::new()
            }
            None => return Err(not_found(&target)),
        };
        return Ok(json_response(StatusCode::OK, tags_body(&target, &tags)));
    }
    access::check_subscription(state, &sub, Intent::Change).await?;
    let change = match ctx.method {
        Method::DELETE => TagsChange::Replace(Tags::new()),
        _ => {
            let input: TagsBody = json_body(state, ctx, body).await?;
            change_of(&ctx.method, input)?
        }
    };
    if target.is_group() {
        adopt_legacy(state, ctx, &target).await?;
    }
    let rctx = request_context(state, ctx, ctx.api_version()?, None)?;
    let guard = Guard::new(state, &target);
    let req = guard.request(ChangeRequest::new(target.key(), rctx.now));
    let check = |tags: &Tags| limits::check_tags(tags).map_err(|e| Rejection::Invalid(e.body));
    let (tags, _) = ctx
        .change(state, req, move |s| {
            if s.resource.is_some() {
                guard.check_locks(s, Verb::Write)?;
            }
            admit_tags(s, &change, check, &rctx)
        })
        .await
        .map_err(|e| match e {
            StoreError::Rejected(Rejection::NotFound) => not_found(&target),
            other => other.into(),
        })?;
    Ok(json_response(StatusCode::OK, tags_body(&target, &tags)))
}

/// The change a `PUT` or `PATCH` body asks for; `400` for an operation ARM does not name.
fn change_of(method: &Method, input: TagsBody) -> Result<TagsChange, ArmError> {
    let tags = input.properties.unwrap_or_default().tags.unwrap_or_default();
    if *method == Method::PUT {
        return Ok(TagsChange::Replace(tags));
    }
    match input.operation.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("merge") => Ok(TagsChange::Merge(tags)),
        Some("replace") => Ok(TagsChange::Replace(tags)),
        Some("delete") => Ok(TagsChange::Delete(tags)),
        _ => Err(ArmError::bad_request(
            "InvalidTagOperation",
            "A tags PATCH names its operation: 'Merge', 'Replace' or 'Delete'.",
        )
        .with_target("operation")),
    }
}

fn not_found(target: &ArmId) -> ArmError {
    if target.is_group() {
        Rejection::GroupNotFound { group: target.resource_group.clone() }.into()
    } else {
        ArmError::resource_not_found(&target.to_string())
    }
}

/// ARM's `TagsResource`.
fn tags_body(target: &ArmId, tags: &BTreeMap<String, String>) -> Value {
    json!({
        "id": format!("{target}/providers/Microsoft.Resources/tags/default"),
        "name": "default",
        "type": "Microsoft.Resources/tags",
        "properties": {"tags": tags},
    })
}
