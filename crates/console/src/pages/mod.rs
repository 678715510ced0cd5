//! The pages: each reads what it shows from the API as the visitor, and each form posts back
//! here, where it becomes one API request.

mod approvals;
mod create;
mod group;
mod history;
mod lists;
mod operation;
mod resource;

pub(crate) use approvals::{approvals, decide};
pub(crate) use create::{create, create_page};
pub(crate) use group::{create as create_group, delete as delete_group, tags as group_tags};
pub(crate) use lists::{group, home, open, subscription};
pub(crate) use operation::{cancel, operation, output};
pub(crate) use resource::{action, delete, events, resource};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::Value;
use slipway_domain::ids::ArmId;

use crate::Console;
use crate::api::{ArmProblem, Refusal, uri};
use crate::render::Crumb;
use crate::session::Visit;

/// A refusal as the visitor should meet it: sign in again when the credential was not
/// accepted, else the API's error with its status.
pub(crate) fn refused(console: &Console, visit: &Visit, refusal: Refusal) -> Response {
    if refusal.status == StatusCode::UNAUTHORIZED && console.authentication {
        return Redirect::to("/ui/sign-in").into_response();
    }
    console.error_page(visit, refusal.status, &refusal.problem)
}

/// A bad link or form (the console's words, not the API's).
pub(crate) fn bad_request(console: &Console, visit: &Visit, problem: ArmProblem) -> Response {
    console.error_page(visit, StatusCode::BAD_REQUEST, &problem)
}

/// What the visitor may do at a scope, as the API's permissions list says (nothing, if it
/// cannot be read): the console offers only these; the API still decides each request.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub(crate) struct Allowed {
    pub write: bool,
    pub delete: bool,
    pub cancel: bool,
}

pub(crate) async fn allowed(console: &Console, visit: &Visit, scope: &str) -> Allowed {
    let path = format!("{scope}/providers/Slipway.Authorization/permissions");
    let Ok(body) = console.api.get(&visit.visitor, &path, crate::PLATFORM_API_VERSION).await else {
        return Allowed::default();
    };
    let actions: Vec<&str> = body["value"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["actions"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    let has = |a: &str| actions.contains(&a);
    Allowed {
        write: has("*/write"),
        delete: has("*/delete"),
        cancel: has("*/locations/operationStatuses/cancel/action"),
    }
}

pub(crate) fn resource_href(id: &str) -> String {
    uri("/ui/resource", &[("id", id)])
}

pub(crate) fn operation_href(status_id: &str) -> String {
    uri("/ui/operation", &[("id", status_id)])
}

pub(crate) fn subscription_crumbs(subscription: &str) -> Vec<Crumb> {
    vec![
        Crumb { label: "Subscriptions".into(), href: "/ui/".into() },
        Crumb { label: subscription.into(), href: uri(&format!("/ui/subscriptions/{subscription}"), &[]) },
    ]
}

/// The crumbs down to a resource: its subscription, group, and each parent.
pub(crate) fn resource_crumbs(id: &ArmId) -> Vec<Crumb> {
    let mut crumbs = subscription_crumbs(&id.subscription);
    crumbs.push(Crumb {
        label: id.resource_group.clone(),
        href: uri(&format!("/ui/subscriptions/{}/resourceGroups/{}", id.subscription, id.resource_group), &[]),
    });
    let types: Vec<&str> = id.type_name.split('/').collect();
    let mut path =
        format!("/subscriptions/{}/resourceGroups/{}/providers/{}", id.subscription, id.resource_group, id.namespace);
    for (ty, name) in types.iter().zip(id.parent_names.iter().chain(std::iter::once(&id.name))) {
        path.push_str(&format!("/{ty}/{name}"));
        crumbs.push(Crumb { label: name.clone(), href: resource_href(&path) });
    }
    crumbs
}

pub(crate) fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}
