//! The `slipway` extra-vars envelope every provider hands a job: what the job acts on and why,
//! built from its [`LaunchRequest`] in one place so that playbooks and templates read the same
//! variables whichever provider runs them.

use serde_json::{Value, json};
use slipway_domain::OperationId;

use crate::{LaunchRequest, RelatedResource};

/// The extra var carrying the idempotency key in every launch (providers find lost
/// launches by it).
pub const KEY_VAR: &str = "slipway_idempotency_key";

/// The `slipway` extra-vars envelope every provider hands a job, plus the key variable:
/// `{"slipway": {"resource": {…}, "operationId", "action", "configVersion",
/// "idempotencyKey", "requestedBy", "secrets", "tenant", "parent", "references",
/// "parameters", "checkMode"}, "slipway_idempotency_key": key}`.
pub fn slipway_extra_vars(r: &LaunchRequest) -> serde_json::Map<String, Value> {
    let mut vars = serde_json::Map::new();
    vars.insert(
        "slipway".into(),
        json!({
            "resource": {
                "id": r.resource_id.to_string(),
                "name": r.resource_name(),
                "type": r.resource_type,
                "kind": r.kind,
                "location": r.location,
                "tags": r.tags,
                "properties": r.properties,
                "outputs": r.outputs,
            },
            "operationId": r.operation_id.as_ref().map(OperationId::as_str),
            "action": r.action.as_str(),
            "configVersion": r.config_version.as_str(),
            "idempotencyKey": r.idempotency_key.as_str(),
            "requestedBy": r.context.as_ref().map(|c| requested_by(&c.requested_by)),
            "secrets": r.secrets,
            "tenant": r.context.as_ref().and_then(|c| c.tenant.as_ref()).map(tenant),
            "parent": r.parent.as_ref().map(RelatedResource::extra_vars),
            "references": r.references,
            "parameters": r.parameters,
            "checkMode": r.is_check(),
        }),
    );
    vars.insert(KEY_VAR.into(), json!(r.idempotency_key.as_str()));
    vars
}

/// `{"name", "tenant", "groups"}`: the principal whose request led to the job.
pub fn requested_by(r: &slipway_domain::RequestedBy) -> Value {
    json!({ "name": r.name, "tenant": r.tenant, "groups": r.groups })
}

/// `{"tenantId", "displayName", "attributes"}`: the subscription's registration.
pub fn tenant(t: &slipway_domain::TenantContext) -> Value {
    json!({ "tenantId": t.tenant_id, "displayName": t.display_name, "attributes": t.attributes })
}
