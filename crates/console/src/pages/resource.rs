//! A resource: its spec and outputs, references and children, its job history and its
//! operations as a timeline; and the forms that delete it or run one of its actions.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use slipway_domain::ids::ArmId;
use slipway_types::{RETRY_SEGMENT, ResourceType};

use super::{allowed, bad_request, operation_href, pretty, refused, resource_crumbs, resource_href};
use crate::api::{Answer, ArmProblem, uri};
use crate::render::Page;
use crate::session::{Visit, forged, form_is_ours};
use crate::{Console, api_version};

/// How many of the latest operations the timeline shows.
const TIMELINE_OPERATIONS: usize = 8;

#[derive(Deserialize)]
pub(crate) struct IdQuery {
    #[serde(default)]
    id: String,
}

/// The id and its configured type, or which is wrong.
fn typed_id(console: &Console, text: &str) -> Result<(ArmId, Arc<ResourceType>), ArmProblem> {
    let id = ArmId::parse(text)
        .map_err(|e| ArmProblem::new("InvalidResourceId", format!("'{text}' is not a resource id: {e}.")))?;
    let ty = console.resource_type(&id.namespace, &id.type_name).ok_or_else(|| {
        ArmProblem::new("InvalidResourceType", format!("No type {}/{} is configured.", id.namespace, id.type_name))
    })?;
    Ok((id, ty))
}

/// The operation status path of an accepted change (`Azure-AsyncOperation`, without its
/// scheme, host and query).
pub(crate) fn accepted_operation(answer: &Answer) -> Option<String> {
    let url = answer.header("azure-asyncoperation")?;
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map(|i| &after_scheme[i..])?;
    Some(path.split('?').next().unwrap_or(path).to_string())
}

/// Property values that are resource ids, as links (references to other resources).
fn references(properties: &Map<String, Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for (name, value) in properties {
        let items: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for id in items.into_iter().filter_map(Value::as_str).filter(|s| ArmId::parse(s).is_ok()) {
            out.push(json!({"property": name, "id": id, "href": resource_href(id)}));
        }
    }
    out
}

fn job_row(j: &Value) -> Value {
    json!({
        "type": j["type"], "state": j["state"], "jobId": j["jobId"], "action": j["action"], "rerun": j["rerun"],
        "startTime": j["startTime"], "endTime": j["endTime"], "message": j["message"], "link": j["link"],
        "operation": j["operationId"],
    })
}

pub(crate) async fn resource(State(console): State<Arc<Console>>, visit: Visit, Query(q): Query<IdQuery>) -> Response {
    let (id, ty) = match typed_id(&console, &q.id) {
        Ok(found) => found,
        Err(problem) => return bad_request(&console, &visit, problem),
    };
    let version = api_version(&ty);
    let path = id.to_string();
    let res = match console.api.get(&visit.visitor, &path, &version).await {
        Ok(body) => body,
        Err(refusal) => return refused(&console, &visit, refusal),
    };
    let history = console.api.get(&visit.visitor, &format!("{path}/jobs"), &version).await.unwrap_or_default();
    let jobs: Vec<&Value> = history["value"].as_array().into_iter().flatten().collect();

    // The timeline: the latest operations that ran jobs, each with its jobs.
    let mut seen = HashSet::new();
    let mut timeline = Vec::new();
    for op_id in jobs.iter().filter_map(|j| j["operationId"].as_str()) {
        if !seen.insert(op_id) || timeline.len() == TIMELINE_OPERATIONS {
            continue;
        }
        let status_path = format!(
            "/subscriptions/{}/providers/{}/locations/{}/operationStatuses/{op_id}",
            id.subscription, ty.namespace, console.location
        );
        let Ok(op) = console.api.get(&visit.visitor, &status_path, &version).await else { continue };
        let op_jobs: Vec<Value> =
            jobs.iter().filter(|j| j["operationId"].as_str() == Some(op_id)).map(|j| job_row(j)).collect();
        timeline.push(json!({
            "href": operation_href(&status_path),
            "name": op_id, "status": op["status"], "action": op["properties"]["action"],
            "startTime": op["startTime"], "endTime": op["endTime"], "error": op["error"], "jobs": op_jobs,
        }));
    }

    let mut children = Vec::new();
    let prefix = format!("{}/", ty.type_name.to_ascii_lowercase());
    for child in console.sorted_types() {
        let lower = child.type_name.to_ascii_lowercase();
        let Some(leaf) = lower.strip_prefix(&prefix) else { continue };
        if !child.namespace.eq_ignore_ascii_case(&ty.namespace) || leaf.contains('/') {
            continue;
        }
        let leaf = child.type_name.rsplit('/').next().unwrap_or_default().to_string();
        let list =
            console.api.get(&visit.visitor, &format!("{path}/{leaf}"), &api_version(&child)).await.unwrap_or_default();
        let items: Vec<Value> = list["value"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| json!({"name": c["name"], "href": resource_href(c["id"].as_str().unwrap_or_default()), "state": c["properties"]["provisioningState"]}))
            .collect();
        let create =
            uri("/ui/create", &[("parent", &path), ("type", &format!("{}/{}", child.namespace, child.type_name))]);
        children.push(json!({"type": leaf, "items": items, "create": create}));
    }

    let filter = format!("referencedResourceId eq '{}'", path.replace('\'', "''"));
    let query = [("api-version", crate::PLATFORM_API_VERSION), ("$top", "100"), ("$filter", filter.as_str())];
    let referring = format!("/subscriptions/{}/resources", id.subscription);
    let referrers = console.api.get_with(&visit.visitor, &referring, &query).await.unwrap_or_default();
    let referenced_by: Vec<Value> = referrers["value"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| json!({"name": r["name"], "type": r["type"], "href": resource_href(r["id"].as_str().unwrap_or_default())}))
        .collect();
    let guardrails = guardrails(&console, &visit, &path).await;
    let activity = super::history::history(&console, &visit, &id.subscription, &path).await;
    let mut properties = res["properties"].as_object().cloned().unwrap_or_default();
    let state = properties.remove("provisioningState").unwrap_or(Value::Null);
    // What the last drift check found is the server's, not the spec's.
    let drift = properties.remove("drift").map(|d| {
        let tasks: Vec<Value> = d["changedTasks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| json!({"task": t["task"], "host": t["host"], "diff": t.get("diff").map(pretty)}))
            .collect();
        json!({"state": d["state"], "checked": d["lastCheckedAt"], "message": d["message"], "tasks": tasks})
    });
    let (outputs, spec): (Map<String, Value>, Map<String, Value>) =
        properties.clone().into_iter().partition(|(k, _)| ty.schema().is_some() && ty.shows_output(k));
    let may = allowed(&console, &visit, &path).await;
    let actions: Vec<Value> =
        ty.actions().map(|a| json!({"name": a.name, "takes_body": a.schema().is_some()})).collect();
    let data = json!({
        "id": path,
        "name": res["name"],
        "type": res["type"],
        "location": res["location"],
        "state": state,
        "tags": res["tags"],
        "spec": pretty(&Value::Object(spec)),
        "outputs": outputs.iter().map(|(k, v)| json!({"name": k, "value": if v.is_string() { v.as_str().unwrap_or_default().to_string() } else { v.to_string() }})).collect::<Vec<_>>(),
        "references": references(&properties),
        "drift": drift,
        "referencedBy": referenced_by,
        "children": children,
        "jobs": jobs.iter().map(|j| job_row(j)).collect::<Vec<_>>(),
        "failedAttempts": history["failedAttempts"],
        "nextRetryTime": history["nextRetryTime"],
        "timeline": timeline,
        "actions": actions,
        "retryable": matches!(state.as_str(), Some("Failed" | "Canceled")),
        "events": uri("/ui/resource/events", &[("id", &path)]),
        "allowed": may,
        "live": !matches!(state.as_str(), Some("Succeeded" | "Failed" | "Canceled")),
        "locks": guardrails.0,
        "findings": guardrails.1,
        "history": activity,
    });
    let page = Page::new("resource.html", format!("{} {}", ty.type_name, id.name)).crumbs(resource_crumbs(&id));
    console.render(&visit, page, data)
}

/// The locks that apply to the resource (at it or above it) and what the policies found
/// not compliant at its last write.
async fn guardrails(console: &Console, visit: &Visit, path: &str) -> (Vec<Value>, Vec<Value>) {
    let version = crate::QUOTA_API_VERSION;
    let locks = format!("{path}/providers/Microsoft.Authorization/locks");
    let locks = console.api.get(&visit.visitor, &locks, version).await;
    let states = format!("{path}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults");
    let states = console.api.get(&visit.visitor, &states, version).await;
    let path_lower = path.to_ascii_lowercase();
    let locks = locks.unwrap_or_default()["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| {
            let scope = l["id"].as_str().unwrap_or_default().split("/providers/Microsoft.Authorization/locks/").next().unwrap_or_default();
            path_lower.starts_with(&scope.to_ascii_lowercase())
        })
        .map(|l| json!({"name": l["name"], "level": l["properties"]["level"], "notes": l["properties"]["notes"], "id": l["id"]}))
        .collect();
    let findings = states.unwrap_or_default()["value"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let assignment = f["policyAssignmentId"].as_str().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_string();
            json!({"assignment": assignment, "effect": f["policyDefinitionAction"], "enforced": f["enforced"], "reason": f["reason"]})
        })
        .collect();
    (locks, findings)
}

/// The resource's event feed from now on, as the API streams it, for the page's script: each
/// change it tells of reads the page again.
pub(crate) async fn events(State(console): State<Arc<Console>>, visit: Visit, Query(q): Query<IdQuery>) -> Response {
    let (id, ty) = match typed_id(&console, &q.id) {
        Ok(found) => found,
        Err(problem) => return super::operation::unavailable(&problem.message),
    };
    let version = api_version(&ty);
    let query = [("api-version", version.as_str()), ("follow", "true"), ("since", "latest")];
    let mut resp = console.api.send(&visit.visitor, Method::GET, &format!("{id}/events"), &query, None).await;
    if !resp.status().is_success() {
        let message = Answer::read(resp).await.ok().err().map(|r| r.problem.message).unwrap_or_default();
        return super::operation::unavailable(&message);
    }
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[derive(Deserialize)]
pub(crate) struct ChangeForm {
    #[serde(default)]
    id: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    body: String,
}

/// Where an accepted change leads: its operation, or else back to the resource.
pub(super) fn after_change(console: &Console, visit: &Visit, answer: Answer, back: &str) -> Response {
    let operation = accepted_operation(&answer);
    match answer.ok() {
        Err(refusal) => refused(console, visit, refusal),
        Ok(_) => match operation {
            Some(op) => Redirect::to(&operation_href(&op)).into_response(),
            None => Redirect::to(back).into_response(),
        },
    }
}

pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<ChangeForm>,
) -> Response {
    if !form_is_ours(&visit, &headers, &form.csrf) {
        return forged(&console, &visit);
    }
    let (id, ty) = match typed_id(&console, &form.id) {
        Ok(found) => found,
        Err(problem) => return bad_request(&console, &visit, problem),
    };
    let version = api_version(&ty);
    let answer =
        console.api.call(&visit.visitor, Method::DELETE, &id.to_string(), &[("api-version", &version)], None).await;
    let group = uri(&format!("/ui/subscriptions/{}/resourceGroups/{}", id.subscription, id.resource_group), &[]);
    after_change(&console, &visit, answer, &group)
}

pub(crate) async fn action(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<ChangeForm>,
) -> Response {
    if !form_is_ours(&visit, &headers, &form.csrf) {
        return forged(&console, &visit);
    }
    let (id, ty) = match typed_id(&console, &form.id) {
        Ok(found) => found,
        Err(problem) => return bad_request(&console, &visit, problem),
    };
    let version = api_version(&ty);
    if form.action.eq_ignore_ascii_case(RETRY_SEGMENT) {
        let path = format!("{id}/{RETRY_SEGMENT}");
        let answer = console.api.call(&visit.visitor, Method::POST, &path, &[("api-version", &version)], None).await;
        return after_change(&console, &visit, answer, &resource_href(&id.to_string()));
    }
    let Some(action) = ty.action(&form.action) else {
        let why = format!("{} has no action '{}'.", ty.type_name, form.action);
        return bad_request(&console, &visit, ArmProblem::new("ActionNotFound", why));
    };
    let body = match form.body.trim() {
        "" => None,
        text => match serde_json::from_str::<Value>(text) {
            Ok(v) => Some(v),
            Err(e) => {
                let why = format!("The action's body is not JSON: {e}.");
                return bad_request(&console, &visit, ArmProblem::new("InvalidRequestContent", why));
            }
        },
    };
    let path = format!("{id}/{}", action.name);
    let answer =
        console.api.call(&visit.visitor, Method::POST, &path, &[("api-version", &version)], body.as_ref()).await;
    after_change(&console, &visit, answer, &resource_href(&id.to_string()))
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderValue, StatusCode};

    use super::*;

    #[test]
    fn an_accepted_change_leads_to_its_operation_path() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "azure-asyncoperation",
            HeaderValue::from_static(
                "http://h:8080/subscriptions/s/providers/N/locations/l/operationStatuses/o?api-version=1",
            ),
        );
        let answer = Answer { status: StatusCode::ACCEPTED, headers, body: Value::Null };
        assert_eq!(
            accepted_operation(&answer).as_deref(),
            Some("/subscriptions/s/providers/N/locations/l/operationStatuses/o")
        );
    }

    #[test]
    fn references_are_the_properties_that_hold_resource_ids() {
        let id = "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/rg/providers/N.S/things/a";
        let props = json!({"subnetId": id, "ids": [id, "x"], "size": "small"});
        let refs = references(props.as_object().unwrap());
        let names: Vec<&str> = refs.iter().map(|r| r["property"].as_str().unwrap()).collect();
        assert_eq!(names, ["ids", "subnetId"]);
    }
}
