//! An operation: its status, error with every detail, child operations, and the job's output
//! live while it runs (the API's Server-Sent Events, passed through); and the cancel form.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use slipway_domain::ids::OperationPath;

use super::{allowed, bad_request, operation_href, refused, resource_href, subscription_crumbs};
use crate::Console;
use crate::api::{ArmProblem, uri};
use crate::render::{Crumb, Page};
use crate::session::{Visit, forged, form_is_ours};

#[derive(Deserialize)]
pub(crate) struct OperationQuery {
    #[serde(default)]
    id: String,
}

/// An operation status path's subscription and id, and an api-version of its namespace; or
/// why it is not one.
pub(crate) fn checked(console: &Console, path: &str) -> Result<(OperationPath, String), ArmProblem> {
    let bad = || ArmProblem::new("InvalidOperationId", format!("'{path}' is not an operation status path."));
    let parsed = OperationPath::parse(path).map_err(|_| bad())?;
    // A resource group's delete is ARM's own namespace's, on the platform api-version.
    if parsed.namespace.eq_ignore_ascii_case(slipway_domain::ids::GROUP_NAMESPACE) {
        return Ok((parsed, crate::PLATFORM_API_VERSION.to_string()));
    }
    let version = console.types.namespace_versions(&parsed.namespace).into_iter().max().ok_or_else(bad)?;
    Ok((parsed, version))
}

fn terminal(status: &Value) -> bool {
    matches!(status.as_str(), Some("Succeeded" | "Failed" | "Canceled"))
}

pub(crate) async fn operation(
    State(console): State<Arc<Console>>,
    visit: Visit,
    Query(q): Query<OperationQuery>,
) -> Response {
    let (OperationPath { subscription: sub, id: name, .. }, version) = match checked(&console, &q.id) {
        Ok(parts) => parts,
        Err(problem) => return bad_request(&console, &visit, problem),
    };
    let op = match console.api.get(&visit.visitor, &q.id, &version).await {
        Ok(body) => body,
        Err(refusal) => return refused(&console, &visit, refusal),
    };
    let children: Vec<Value> = op["properties"]["childOperations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let id = c["resourceId"].as_str().unwrap_or_default();
            json!({"resource": id, "resourceHref": resource_href(id), "href": operation_href(c["id"].as_str().unwrap_or_default())})
        })
        .collect();
    let error = op.get("error").map(ArmProblem::from_error);
    let may = allowed(&console, &visit, &format!("/subscriptions/{sub}")).await;
    let mut crumbs = subscription_crumbs(&sub);
    crumbs.push(Crumb { label: format!("operation {name}"), href: operation_href(&q.id) });
    let data = json!({
        "id": q.id,
        "name": name.as_str(),
        "status": op["status"],
        "action": op["properties"]["action"],
        "waitingOn": op["properties"]["waitingOn"],
        "message": op["properties"]["message"],
        "percent": op["percentComplete"],
        "currentTask": op["properties"]["currentTask"],
        "startTime": op["startTime"],
        "endTime": op["endTime"],
        "error": error,
        "children": children,
        "live": !terminal(&op["status"]),
        "output": uri("/ui/operation/output", &[("id", &q.id)]),
        "allowed": may,
        "approval": super::approvals::approval_view(&op),
    });
    console.render(&visit, Page::new("operation.html", format!("Operation {name}")).crumbs(crumbs), data)
}

/// One `unavailable` event saying why there is no output to follow: a browser's
/// `EventSource` treats any other status as a failed load.
pub(crate) fn unavailable(message: &str) -> Response {
    let data: String = message.lines().map(|l| format!("data: {l}\n")).collect();
    let mut resp = format!("event: unavailable\n{data}\n").into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp
}

/// The job's output as the API streams it (`text/event-stream`), for the page's script.
pub(crate) async fn output(
    State(console): State<Arc<Console>>,
    visit: Visit,
    Query(q): Query<OperationQuery>,
) -> Response {
    let version = match checked(&console, &q.id) {
        Ok((_, version)) => version,
        Err(_) => return unavailable("This is not an operation."),
    };
    let path = format!("{}/logs", q.id);
    let query = [("api-version", version.as_str()), ("follow", "true")];
    let mut resp = console.api.send(&visit.visitor, Method::GET, &path, &query, None).await;
    if !resp.status().is_success() {
        let answer = crate::api::Answer::read(resp).await;
        let message = answer.ok().err().map(|r| r.problem.message).unwrap_or_default();
        return unavailable(&message);
    }
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[derive(Deserialize)]
pub(crate) struct CancelForm {
    #[serde(default)]
    id: String,
    #[serde(default)]
    csrf: String,
}

pub(crate) async fn cancel(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<CancelForm>,
) -> Response {
    if !form_is_ours(&visit, &headers, &form.csrf) {
        return forged(&console, &visit);
    }
    let version = match checked(&console, &form.id) {
        Ok((_, version)) => version,
        Err(problem) => return bad_request(&console, &visit, problem),
    };
    let path = format!("{}/cancel", form.id);
    let answer = console.api.call(&visit.visitor, Method::POST, &path, &[("api-version", &version)], None).await;
    match answer.ok() {
        Ok(_) => Redirect::to(&operation_href(&form.id)).into_response(),
        Err(refusal) => refused(&console, &visit, refusal),
    }
}
