//! The ARM wire format out: resource, job-history, what-if, event, error and operation-status
//! bodies. Domain types are converted by hand here, never serialised as they are. Nothing
//! else in Slipway builds these bodies: the notifier is handed the operation-status document
//! made here, the listener writes only the error body of its `408`, and the console and the
//! CLI read them as any client does. Request bodies in are [`crate::request`]'s.

use serde::Serialize;
use serde_json::{Map, Value, json};
use slipway_domain::ids::{ArmId, OperationId, OperationPath, SubscriptionId};
use slipway_domain::whatif::WhatIf;
use slipway_domain::{CloudError, Operation, ProvisioningState, ResourceRecord};
use slipway_types::ResourceType;

pub fn resource_body(res: &ResourceRecord, ty: &ResourceType) -> Value {
    // Secret properties are write-only: never shown.
    let mut properties = match &res.spec.properties {
        Value::Object(m) => slipway_secrets::without_secrets(m),
        _ => Map::new(),
    };
    // Outputs fill in the read-only properties; a client's own property is never shadowed.
    for (name, value) in &res.outputs {
        if ty.shows_output(name) && !properties.contains_key(name) {
            properties.insert(name.clone(), value.clone());
        }
    }
    properties.insert("provisioningState".into(), json!(res.provisioning_state.as_str()));
    if let Some(drift) = &res.drift {
        properties.insert("drift".into(), drift_body(drift));
    }
    let sd = &res.system_data;
    let mut body = json!({
        "id": res.id.to_string(),
        "name": res.id.name,
        "type": ty.display_name(),
        "tags": res.spec.tags,
        "properties": properties,
        "systemData": {
            "createdBy": sd.created_by,
            "createdByType": sd.created_by_type,
            "createdAt": sd.created_at.to_rfc3339(),
            "lastModifiedBy": sd.last_modified_by,
            "lastModifiedByType": sd.last_modified_by_type,
            "lastModifiedAt": sd.last_modified_at.to_rfc3339(),
        },
    });
    // A proxy resource stored with a location before its type was one shows none.
    if let Some(loc) = res.spec.location.as_ref().filter(|_| ty.resource_kind.has_location()) {
        body["location"] = json!(loc);
    }
    body["etag"] = json!(etag_of(&body));
    body
}

/// A resource's `etag`: a strong validator of what a client reads, so it changes with every
/// write that changes the resource's representation (its state, spec, outputs, systemData).
/// Hashed from the body's JSON, whose keys serialise sorted.
fn etag_of(body: &Value) -> String {
    format!("\"{:016x}\"", slipway_domain::config_version::fnv1a64(body.to_string().as_bytes()))
}

/// The resource's current `etag` (as `resource_body` shows it).
pub fn resource_etag(res: &ResourceRecord, ty: &ResourceType) -> String {
    resource_body(res, ty)["etag"].as_str().unwrap_or_default().to_string()
}

/// `GET {id}/jobs`: every job in the history, newest first; for a `Failed` resource how many
/// attempts at its spec failed in a row and when convergence tries again, and for a
/// `Deleting` one the same of its delete jobs since the delete was asked for. `link` names a
/// job's page in its backend, if it has one.
pub fn job_history_body(res: &ResourceRecord, link: &dyn Fn(&slipway_domain::Job) -> Option<String>) -> Value {
    use slipway_domain::{JobState, JobType, ProvisioningState};
    let mut jobs: Vec<&slipway_domain::Job> = res.jobs.iter().collect();
    jobs.sort_by_key(|j| std::cmp::Reverse(j.timestamp));
    let mut body = json!({
        "value": jobs.iter().map(|j| job_body(j, link)).collect::<Vec<_>>(),
        "provisioningState": res.provisioning_state.as_str(),
    });
    if !res.duplicate_jobs.is_empty() {
        body["duplicateJobs"] = res.duplicate_jobs.iter().map(|j| job_body(j, link)).collect();
    }
    let desired = &res.desired_config_version;
    // The attempts in question, and whether a retry can come at all.
    let (attempts, retried): (Vec<_>, bool) = match (res.provisioning_state, &res.deletion) {
        (ProvisioningState::Failed, _) => (
            jobs.iter().filter(|j| j.job_type == JobType::Provision && j.config_version == *desired).collect(),
            res.convergence_stopped_for.as_ref() != Some(desired),
        ),
        // A delete retries only after a failed attempt; a forced one never runs a job.
        (ProvisioningState::Deleting, Some(deletion)) => {
            let attempts: Vec<_> = jobs
                .iter()
                .filter(|j| j.job_type == JobType::Deprovision && j.timestamp >= deletion.requested_at)
                .collect();
            let failed_last = attempts.first().is_some_and(|j| j.state.is_terminal() && j.state != JobState::Succeeded);
            (attempts, failed_last && !deletion.force)
        }
        _ => return body,
    };
    let failed = attempts.iter().take_while(|j| j.state.is_terminal() && j.state != JobState::Succeeded).count();
    body["failedAttempts"] = json!(failed);
    if let Some(next) = res.schedule.next_due.filter(|_| retried && res.lease.is_none()) {
        body["nextRetryTime"] = json!(next.to_rfc3339());
    }
    body
}

fn job_body(j: &slipway_domain::Job, link: &dyn Fn(&slipway_domain::Job) -> Option<String>) -> Value {
    let mut body = json!({
        "type": j.job_type.as_str(),
        "state": j.state.as_str(),
        "jobId": j.job_id_text(),
        "provider": j.provider,
        "template": j.template,
        "idempotencyKey": j.idempotency_key,
        "startTime": j.timestamp.to_rfc3339(),
    });
    let optional = [
        ("action", (!j.action.is_empty()).then(|| json!(j.action))),
        ("rerun", j.rerun.map(|r| json!(r.as_str()))),
        ("operationId", j.operation_id.as_ref().map(|o| json!(o.as_str()))),
        ("configVersion", (!j.config_version.as_str().is_empty()).then(|| json!(j.config_version.as_str()))),
        ("message", (!j.message.is_empty()).then(|| json!(j.message))),
        ("errorDetails", (!j.error_details.is_empty()).then(|| json!(j.error_details))),
        ("endTime", j.ended_at.map(|t| json!(t.to_rfc3339()))),
        ("launchAttempts", (j.launch_attempts > 0).then(|| json!(j.launch_attempts))),
        ("tasksStarted", (j.tasks_started > 0).then(|| json!(j.tasks_started))),
        ("currentTask", (!j.current_task.is_empty()).then(|| json!(j.current_task))),
        ("link", link(j).map(|l| json!(l))),
    ];
    insert_present(&mut body, optional);
    body
}

/// Sets each field that has a value.
fn insert_present<const N: usize>(body: &mut Value, fields: [(&str, Option<Value>); N]) {
    for (name, value) in fields {
        if let Some(v) = value {
            body[name] = v;
        }
    }
}

/// The path of an operation's status resource (its `id`).
pub fn status_path(op: &Operation, location: &str) -> String {
    operation_status_path(&op.subscription, &op.resource_id, &op.id, location)
}

/// The status path of operation `id` of the resource `resource_id` (as stored).
fn operation_status_path(subscription: &SubscriptionId, resource_id: &str, id: &OperationId, location: &str) -> String {
    let namespace = ArmId::read_stored(resource_id).map(|id| id.namespace).unwrap_or_default();
    OperationPath::text(subscription.as_str(), &namespace, location, id)
}

/// `properties.drift`: what the resource's last drift check found.
fn drift_body(d: &slipway_domain::drift::Drift) -> Value {
    let mut body = json!({ "state": d.state.as_str(), "lastCheckedAt": d.last_checked_at.to_rfc3339() });
    if !d.changes.is_empty() {
        body["changedTasks"] = Value::Array(d.changes.iter().map(task_change).collect());
    }
    insert_present(
        &mut body,
        [
            ("message", Some(json!(d.message)).filter(|_| !d.message.is_empty())),
            ("remediationOperationId", d.remediation.as_ref().map(|o| json!(o.as_str()))),
        ],
    );
    body
}

/// One changed task: its name, host and Ansible's diff (when it reported one).
fn task_change(t: &slipway_domain::whatif::TaskChange) -> Value {
    let mut v = json!({ "task": t.task, "host": t.host });
    insert_present(&mut v, [("diff", Some(t.diff.clone()).filter(|d| !d.is_null()))]);
    v
}

/// ARM's `WhatIfOperationResult` of a what-if that succeeded: the status and the changes (a
/// failed one answers with its error, as every operation's result does).
pub fn what_if_result(resource_id: &str, w: &WhatIf) -> Value {
    json!({
        "status": ProvisioningState::Succeeded.as_str(),
        "properties": { "changes": what_if_changes(resource_id, w), "guardrails": guardrails(w) },
    })
}

/// What the guardrails would do (a Slipway extension): `{kind, effect, enforced, id, message}`.
fn guardrails(w: &WhatIf) -> Value {
    Value::Array(
        w.guardrails
            .iter()
            .map(|g| json!({"kind": g.kind.as_str(), "effect": g.effect, "enforced": g.enforced, "id": g.id, "message": g.message}))
            .collect(),
    )
}

/// The one resource's `WhatIfChange`: ARM's `changeType`, `before`, `after` and `delta`, with
/// secret properties left out (a changed secret shows as a path without values), and
/// Slipway's `automation`: the tasks the check-mode job would change.
fn what_if_changes(resource_id: &str, w: &WhatIf) -> Value {
    let shown = |spec: &Option<slipway_domain::Spec>| {
        spec.as_ref().map(|s| {
            let mut v = slipway_domain::whatif::spec_value(s);
            if let Some(Value::Object(p)) = v.get("properties") {
                v["properties"] = Value::Object(slipway_secrets::without_secrets(p));
            }
            v
        })
    };
    let secret = |v: &Option<Value>| v.as_ref().is_some_and(|v| slipway_secrets::sealed_text(v).is_some());
    let delta: Vec<Value> = w
        .delta()
        .into_iter()
        .map(|c| {
            let mut d = json!({ "path": c.path, "propertyChangeType": c.change_type.as_str() });
            if !secret(&c.before) && !secret(&c.after) {
                insert_present(&mut d, [("before", c.before), ("after", c.after)]);
            }
            d
        })
        .collect();
    let mut change = json!({
        "resourceId": resource_id,
        "changeType": w.change_type().as_str(),
        "delta": delta,
    });
    insert_present(&mut change, [("before", shown(&w.before)), ("after", shown(&w.after))]);
    change["automation"] = match &w.predicted {
        Some(tasks) => json!({
            "job": w.job_word(),
            "changedTasks": tasks.iter().map(task_change).collect::<Vec<_>>(),
        }),
        None if w.before.is_none() => json!({
            "job": w.job_word(),
            "unsupportedReason": "The resource does not exist yet: its create job runs in check mode only for an existing resource.",
        }),
        None => json!({ "job": w.job_word() }),
    };
    json!([change])
}

/// A request's approval (a Slipway extension): where it stands, what asked for it and who may
/// decide, until when, the decision, and what the request changes (`whatIf`, as a what-if's
/// result shows it, with the guardrails' verdicts and the quota it takes).
fn approval(op: &Operation, a: &slipway_domain::approval::Approval) -> Value {
    let rule = &a.requirement.rule;
    let mut body = json!({
        "state": a.state().as_str(),
        "resourceId": op.resource_id,
        "request": op.request.wire_name(),
        "policyAssignmentId": a.requirement.assignment_id,
        "policyDefinitionId": a.requirement.definition_id,
        "reason": a.requirement.reason,
        "approverRole": rule.approver_role.name(),
        "allowSelfApproval": rule.allow_self_approval,
        "onTimeout": rule.on_timeout.as_str(),
        "requestedBy": a.requested_by.name,
        "expiresAt": a.deadline.to_rfc3339(),
        "whatIf": { "changes": what_if_changes(&op.resource_id, &a.what_if), "guardrails": guardrails(&a.what_if) },
    });
    if let Some(d) = &a.decision {
        let mut decision = json!({
            "verdict": d.verdict.as_str(),
            "by": d.by.name,
            "byRule": d.how == slipway_domain::approval::DecidedBy::Rule,
            "at": d.at.to_rfc3339(),
        });
        insert_present(&mut decision, [("comment", d.comment.clone().map(Value::String))]);
        body["decision"] = decision;
    }
    body
}

/// The operation-status document (also the async-notification body).
/// An operation's status document as `GET …/operationStatuses/{id}` serves it and its
/// notification carries it.
pub fn operation_status_document(op: &Operation, location: &str) -> Value {
    let status_path = status_path(op, location);
    let mut body = json!({
        "id": status_path,
        "name": op.id.as_str(),
        "status": op.status.as_str(),
        "startTime": op.start_time.to_rfc3339(),
    });
    if let Some(end) = op.end_time() {
        body["endTime"] = json!(end.to_rfc3339());
    }
    if let Some(p) = op.percent_complete {
        body["percentComplete"] = json!(p);
    }
    // Slipway extensions, in ARM's place for extra status data.
    let mut properties = Map::new();
    if let Some(on) = &op.waiting_on {
        properties.insert("waitingOn".into(), json!(on));
    }
    if !op.child_operations.is_empty() {
        // The children's operations live beside this one (same location), each under its own
        // resource's namespace: a group's delete lists its resources'.
        let children: Vec<Value> = op
            .child_operations
            .iter()
            .map(|c| {
                let id = operation_status_path(&op.subscription, &c.resource_id, &c.operation_id, location);
                json!({"resourceId": c.resource_id, "id": id})
            })
            .collect();
        properties.insert("childOperations".into(), Value::Array(children));
    }
    if let Some(action) = &op.action {
        properties.insert("action".into(), json!(action.name));
    }
    if let Some(rerun) = op.rerun {
        properties.insert("rerun".into(), json!(rerun.as_str()));
    }
    if let Some(task) = &op.current_task {
        properties.insert("currentTask".into(), json!(task));
    }
    if let Some(note) = &op.note {
        properties.insert("message".into(), json!(note));
    }
    if let Some(w) = op.what_if.as_ref().filter(|_| op.status == ProvisioningState::Succeeded) {
        properties.insert("changes".into(), what_if_changes(&op.resource_id, w));
    }
    if let Some(a) = &op.approval {
        properties.insert("approval".into(), approval(op, a));
    }
    if !properties.is_empty() {
        body["properties"] = Value::Object(properties);
    }
    if let Some(err) = &op.error {
        body["error"] = json!(WireError::from(err));
    }
    body
}

/// One entry of the event feed: its cursor as `id`, what happened, when, to which resource,
/// the resource's state and generation after it (and before, for a state change), and for an
/// operation's event the operation with its status URL's path.
pub fn event_body(seq: u64, e: &slipway_domain::event::Event, location: &str) -> Value {
    let mut body = json!({
        "id": seq.to_string(),
        "type": e.kind.as_str(),
        "time": e.time.to_rfc3339(),
        "resourceId": e.resource_id,
    });
    insert_present(
        &mut body,
        [
            ("provisioningState", e.state.map(|s| json!(s.as_str()))),
            ("previousProvisioningState", e.previous_state.map(|s| json!(s.as_str()))),
            ("generation", e.generation.map(|g| json!(g))),
        ],
    );
    if let Some(op) = &e.operation {
        let mut operation = json!({
            "name": op.id.as_str(),
            "id": operation_status_path(&e.subscription, &e.resource_id, &op.id, location),
            "request": op.request.wire_name(),
            "status": op.status.as_str(),
        });
        insert_present(
            &mut operation,
            [
                ("action", op.action.as_ref().map(|a| json!(a))),
                ("previousStatus", op.previous_status.map(|s| json!(s.as_str()))),
                ("errorCode", op.error_code.as_ref().map(|c| json!(c))),
            ],
        );
        body["operation"] = operation;
    }
    body
}

/// The ARM error body as clients read it: `{"code", "message", "target"?, "details"?}`.
/// The wire's own type, so a change to the domain's `CloudError` cannot change what clients
/// see.
#[derive(Debug, Serialize)]
pub(crate) struct WireError<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    details: Vec<WireError<'a>>,
}

impl<'a> From<&'a CloudError> for WireError<'a> {
    fn from(e: &'a CloudError) -> Self {
        let CloudError { code, message, target, details } = e;
        WireError { code, message, target: target.as_deref(), details: details.iter().map(WireError::from).collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_have_the_arm_shape_whatever_the_domain_type_looks_like() {
        let mut e = CloudError::new("MultipleErrorsOccurred", "two problems").with_target("properties");
        e.details.push(CloudError::new("InvalidRequestContent", "a"));
        e.details.push(CloudError::new("InvalidRequestContent", "b").with_target("properties.x"));
        assert_eq!(
            json!(WireError::from(&e)),
            json!({"code": "MultipleErrorsOccurred", "message": "two problems", "target": "properties", "details": [
                {"code": "InvalidRequestContent", "message": "a"},
                {"code": "InvalidRequestContent", "message": "b", "target": "properties.x"},
            ]})
        );
        assert_eq!(json!(WireError::from(&CloudError::new("C", "m"))), json!({"code": "C", "message": "m"}));
    }
}
