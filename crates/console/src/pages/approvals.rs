//! Approvals: the requests in a subscription waiting for a decision the visitor may make
//! (and those waiting for someone else), and the decision forms the operation page shows
//! beside a request's approval and what it would change.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{bad_request, operation_href, refused, resource_href, subscription_crumbs};
use crate::api::{ArmProblem, uri};
use crate::render::{Crumb, Page};
use crate::session::{Visit, forged, form_is_ours};
use crate::{Console, PLATFORM_API_VERSION};

/// One waiting request as a row: the operation, the resource and what was asked, by whom,
/// until when, and why.
fn row(op: &Value) -> Value {
    let a = &op["properties"]["approval"];
    let resource = a["resourceId"].as_str().unwrap_or_default();
    json!({
        "href": operation_href(op["id"].as_str().unwrap_or_default()),
        "name": op["name"],
        "request": a["request"],
        "resource": resource,
        "resourceHref": resource_href(resource),
        "requestedBy": a["requestedBy"],
        "approverRole": a["approverRole"],
        "expiresAt": a["expiresAt"],
        "reason": a["reason"],
    })
}

pub(crate) async fn approvals(
    State(console): State<Arc<Console>>,
    visit: Visit,
    Path(subscription): Path<String>,
) -> Response {
    let path = format!("/subscriptions/{subscription}/operationStatuses");
    let list = async |filter: &str| {
        console.api.get_with(&visit.visitor, &path, &[("api-version", PLATFORM_API_VERSION), ("$filter", filter)]).await
    };
    let (mine, waiting) = match (list("approver eq 'me'").await, list("status eq 'WaitingForApproval'").await) {
        (Ok(mine), Ok(waiting)) => (mine, waiting),
        (Err(refusal), _) | (_, Err(refusal)) => return refused(&console, &visit, refusal),
    };
    let items = |body: &Value| body["value"].as_array().cloned().unwrap_or_default();
    let mine = items(&mine);
    let names: Vec<&Value> = mine.iter().map(|op| &op["name"]).collect();
    let others: Vec<Value> = items(&waiting).iter().filter(|op| !names.contains(&&op["name"])).map(row).collect();
    let mut crumbs = subscription_crumbs(&subscription);
    crumbs.push(Crumb {
        label: "Approvals".into(),
        href: uri(&format!("/ui/subscriptions/{subscription}/approvals"), &[]),
    });
    let data = json!({ "mine": mine.iter().map(row).collect::<Vec<_>>(), "others": others });
    console.render(&visit, Page::new("approvals.html", "Approvals").crumbs(crumbs), data)
}

/// An operation's approval as its page shows it: where it stands, who asked, who decides and
/// until when, the decision, and each changed property with the guardrails' verdicts.
pub(crate) fn approval_view(op: &Value) -> Option<Value> {
    let a = op["properties"].get("approval")?;
    let changes = a["whatIf"]["changes"].as_array().into_iter().flatten();
    let delta: Vec<Value> = changes
        .flat_map(|c| c["delta"].as_array().cloned().unwrap_or_default())
        .map(|d| {
            let shown = |v: &Value| if v.is_null() { String::new() } else { v.to_string() };
            json!({"change": d["propertyChangeType"], "path": d["path"], "before": shown(&d["before"]), "after": shown(&d["after"])})
        })
        .collect();
    let tasks: Vec<Value> = a["whatIf"]["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["automation"]["changedTasks"].as_array().cloned().unwrap_or_default())
        .map(|t| json!({"task": t["task"], "host": t["host"]}))
        .collect();
    let mut view = row(op);
    let more = json!({
        "tasks": tasks,
        "state": a["state"],
        "pending": a["state"] == "Pending",
        "assignment": a["policyAssignmentId"],
        "decision": a.get("decision"),
        "delta": delta,
        "guardrails": a["whatIf"]["guardrails"],
    });
    if let (Some(view), Value::Object(more)) = (view.as_object_mut(), more) {
        view.extend(more);
    }
    Some(view)
}

#[derive(Deserialize)]
pub(crate) struct DecideForm {
    #[serde(default)]
    id: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    verdict: String,
    #[serde(default)]
    comment: String,
}

/// The approve and deny forms: one API request, then back to the operation.
pub(crate) async fn decide(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<DecideForm>,
) -> Response {
    if !form_is_ours(&visit, &headers, &form.csrf) {
        return forged(&console, &visit);
    }
    let verb = match form.verdict.as_str() {
        "approve" | "deny" => form.verdict.as_str(),
        _ => return bad_request(&console, &visit, ArmProblem::new("InvalidVerdict", "A decision is approve or deny.")),
    };
    let version = match super::operation::checked(&console, &form.id) {
        Ok((_, version)) => version,
        Err(problem) => return bad_request(&console, &visit, problem),
    };
    let path = format!("{}/{verb}", form.id);
    let body = json!({"comment": form.comment});
    let query = [("api-version", version.as_str())];
    match console.api.call(&visit.visitor, Method::POST, &path, &query, Some(&body)).await.ok() {
        Ok(_) => Redirect::to(&operation_href(&form.id)).into_response(),
        Err(refusal) => refused(&console, &visit, refusal),
    }
}
