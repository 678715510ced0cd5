//! An activity entry as Azure's Activity Log `EventData`: what the API serves, the SIEM
//! export writes and the CLI and console read. Beside Azure's fields, `propertyChanges` lists
//! the spec's changed paths as Resource Graph's change history names them
//! (`propertyName`, `propertyChangeType`, `beforeValue`, `afterValue`); a secret's change
//! has `"secret": true` and no values.

use axum::http::StatusCode;
use serde_json::{Value, json};
use slipway_domain::activity::{ActivityEntry, ActivityStatus};

/// `{"value": v, "localizedValue": v}`, Azure's localizable string.
fn localized(v: &str) -> Value {
    json!({ "value": v, "localizedValue": v })
}

/// An entry as Azure's `EventData`.
pub fn event_data(position: i64, e: &ActivityEntry) -> Value {
    let status = e.outcome();
    let code = StatusCode::from_u16(e.status).ok();
    let reason = code.and_then(|c| c.canonical_reason()).unwrap_or("").replace(' ', "");
    let (namespace, resource_type) = type_of(&e.operation_name);
    let time = e.time.to_rfc3339();
    let group = e.resource_group_as_written().unwrap_or_default();
    let mut properties = json!({
        "eventCategory": "Administrative",
        "entity": e.target,
        "message": e.operation_name,
        "hierarchy": "",
        "statusCode": reason,
        "serviceRequestId": e.request.request_id,
        "userAgent": e.request.user_agent,
        "principalType": e.caller.kind,
    });
    if let Some((code, message)) = &e.error {
        properties["statusMessage"] = json!(json!({ "error": { "code": code, "message": message } }).to_string());
    }
    let changes: Vec<Value> = e
        .changes
        .iter()
        .map(|c| {
            let mut change = json!({ "propertyName": c.path, "propertyChangeType": c.kind.as_str() });
            if c.secret {
                change["secret"] = json!(true);
            } else {
                change["beforeValue"] = c.previous.clone().unwrap_or(Value::Null);
                change["afterValue"] = c.new.clone().unwrap_or(Value::Null);
            }
            change
        })
        .collect();
    let mut event = json!({
        "authorization": { "action": e.operation_name, "scope": e.target },
        "caller": e.caller.name,
        "channels": "Operation",
        "claims": { "iss": e.caller.issuer, "principalType": e.caller.kind },
        "correlationId": e.request.correlation_id,
        "description": "",
        "eventDataId": position.to_string(),
        "eventName": localized("EndRequest"),
        "category": localized("Administrative"),
        "eventTimestamp": time,
        "id": format!("{}/events/{position}/ticks/{}", e.target, e.time.as_millis()),
        "level": if status == ActivityStatus::Failed { "Error" } else { "Informational" },
        "operationId": e.operation_id.as_ref().map(|id| id.as_str()).unwrap_or_default(),
        "operationName": localized(&e.operation_name),
        "resourceGroupName": group,
        "resourceProviderName": localized(namespace),
        "resourceType": localized(resource_type),
        "resourceId": e.target,
        "status": localized(status.as_str()),
        "subStatus": {
            "value": reason,
            "localizedValue": format!("{reason} (HTTP Status Code: {})", e.status),
        },
        "submissionTimestamp": time,
        "subscriptionId": e.subscription.as_ref().map(|s| s.as_str()).unwrap_or_default(),
        "tenantId": e.caller.issuer,
        "properties": properties,
        "httpRequest": {
            "clientRequestId": e.request.client_request_id,
            "clientIpAddress": e.request.client_address,
            "method": e.request.method,
            "uri": e.request.uri,
        },
    });
    if !changes.is_empty() {
        event["propertyChanges"] = Value::Array(changes);
        if e.changes_truncated {
            event["propertyChangesTruncated"] = json!(true);
        }
    }
    event
}

/// The namespace and type an operation name acts on: `Ns/type/write` → (`Ns`, `Ns/type`);
/// `Ns/type/restart/action` → (`Ns`, `Ns/type`).
fn type_of(operation: &str) -> (&str, &str) {
    let namespace = operation.split('/').next().unwrap_or_default();
    let mut end = operation.rfind('/').unwrap_or(operation.len());
    if operation.ends_with("/action") && !operation.ends_with("/cancel/action") {
        end = operation[..end].rfind('/').unwrap_or(end);
    }
    (namespace, &operation[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_names_its_type() {
        assert_eq!(
            type_of("Slipway.Example/virtualNetworks/write"),
            ("Slipway.Example", "Slipway.Example/virtualNetworks")
        );
        assert_eq!(
            type_of("Slipway.Example/computeInstances/restart/action"),
            ("Slipway.Example", "Slipway.Example/computeInstances")
        );
    }
}
