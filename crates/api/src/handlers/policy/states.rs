//! What admission policies found not compliant, in `Microsoft.PolicyInsights`' shape:
//! `GET` (or, as Azure's clients send it, `POST`)
//! `{scope}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults` at a
//! subscription, a resource group or a resource lists, for each resource the caller may read, each finding of its last write: an `audit`
//! that held, or what an assignment in `DoNotEnforce` mode would have done.

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use slipway_domain::ResourceRecord;
use slipway_domain::access::{Permission, Scope};
use slipway_domain::ids::{ArmId, SubscriptionId};
use slipway_domain::policy_admission::Finding;
use slipway_store::ListQuery;

use crate::error::ArmError;
use crate::handlers::{Ctx, json_response, method_not_allowed, platform_version, resource_scope};
use crate::{ApiState, access};

/// Rows read from the store per page while listing.
const PAGE: usize = 500;

pub(crate) async fn policy_states(
    state: &ApiState,
    ctx: &Ctx,
    subscription: &str,
    group: Option<&str>,
    resource: Option<&ArmId>,
) -> Result<Response, ArmError> {
    if ctx.method != Method::GET && ctx.method != Method::POST {
        return Err(method_not_allowed(&ctx.method));
    }
    platform_version::check(ctx)?;
    let sub = SubscriptionId::new(subscription);
    let scope = match (resource, group) {
        (Some(id), _) => resource_scope(id),
        (None, Some(g)) => Scope::resource_group(subscription, g),
        (None, None) => Scope::subscription_scope(&sub),
    };
    let grants = access::grants(state, &ctx.caller, Some(&sub)).await?;
    let action = "Microsoft.PolicyInsights/policyStates/queryResults/read";
    if !grants.may_read_within(&ctx.caller, &scope) {
        return Err(access::forbidden(&ctx.caller, action, &scope));
    }
    if let Some(id) = resource {
        grants.require(&ctx.caller, Permission::Read, &scope, action)?;
        let record =
            state.store.get_resource(&id.key()).await?.ok_or_else(|| ArmError::resource_not_found(&id.to_string()))?;
        let value: Vec<Value> = record.findings.iter().map(|f| row(&record, f)).collect();
        return Ok(json_response(StatusCode::OK, json!({ "@odata.count": value.len(), "value": value })));
    }
    let mut value = Vec::new();
    let mut after = None;
    loop {
        let query = ListQuery {
            subscription: sub.clone(),
            resource_group: group.map(str::to_ascii_lowercase),
            type_key: None,
            under: None,
            after,
            limit: PAGE,
        };
        let page = state.store.list_resources(&query).await?;
        for r in page.items.iter().filter(|r| !r.findings.is_empty()) {
            if !grants.allows(&ctx.caller, Permission::Read, &resource_scope(&r.id)) {
                continue;
            }
            value.extend(r.findings.iter().map(|f| row(r, f)));
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let count = value.len();
    Ok(json_response(StatusCode::OK, json!({ "@odata.count": count, "value": Value::Array(value) })))
}

/// One finding as a `PolicyState` row.
fn row(r: &ResourceRecord, f: &Finding) -> Value {
    json!({
        "resourceId": r.id.to_string(),
        "resourceType": format!("{}/{}", r.id.namespace, r.id.type_name),
        "resourceGroup": r.id.resource_group,
        "resourceLocation": r.spec.location,
        "policyAssignmentId": f.assignment_id,
        "policyDefinitionId": f.definition_id,
        "policyDefinitionAction": f.effect.as_str(),
        "complianceState": "NonCompliant",
        "isCompliant": false,
        "enforced": f.enforced,
        "reason": f.reason,
        "timestamp": r.system_data.last_modified_at.to_rfc3339(),
    })
}
