//! ARM error responses: `{"error": {code, message, target?, details?}}` with the matching
//! status and `x-ms-error-code`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use slipway_domain::CloudError;
use slipway_domain::admission::Rejection;
use slipway_store::StoreError;
use slipway_types::InvalidRequest;

use crate::wire::WireError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArmError {
    pub status: StatusCode,
    pub body: CloudError,
    /// Seconds, for 429/503.
    pub retry_after: Option<u32>,
    /// ARM's `additionalInfo`: typed facts beside the message, for programs (a quota's
    /// numbers, the policy that denied).
    /// Boxed: most errors carry none, and every `Result` carrying an `ArmError` stays small.
    pub additional_info: Option<Box<Vec<AdditionalInfo>>>,
}

/// One `additionalInfo` entry: `{"type": …, "info": {…}}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdditionalInfo {
    pub kind: String,
    pub info: serde_json::Value,
}

impl ArmError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self::with_body(status, CloudError::new(code, message))
    }

    pub fn with_body(status: StatusCode, body: CloudError) -> Self {
        ArmError { status, body, retry_after: None, additional_info: None }
    }

    pub fn with_info(mut self, kind: &str, info: serde_json::Value) -> Self {
        self.additional_info.get_or_insert_default().push(AdditionalInfo { kind: kind.into(), info });
        self
    }

    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.body.target = Some(target.into());
        self
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn invalid_content(message: impl Into<String>, target: impl Into<String>) -> Self {
        Self::bad_request("InvalidRequestContent", message).with_target(target)
    }

    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn resource_not_found(id: &str) -> Self {
        Self::not_found("ResourceNotFound", format!("The resource '{id}' was not found."))
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message);
        e.retry_after = Some(5);
        e
    }

    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError", "Internal server error.")
    }
}

impl From<Rejection> for ArmError {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::Conflict { message, target } => {
                ArmError::new(StatusCode::CONFLICT, "Conflict", message).with_target(target)
            }
            Rejection::NotFound => ArmError::not_found("ResourceNotFound", "The resource was not found."),
            Rejection::OperationNotFound => ArmError::not_found("ResourceNotFound", "The operation was not found."),
            Rejection::InUse { target, referrers } => ArmError::new(
                StatusCode::CONFLICT,
                "ResourceInUse",
                format!(
                    "The resource is referenced by {}; change or delete those first.",
                    referrers.iter().map(|r| format!("'{r}'")).collect::<Vec<_>>().join(", ")
                ),
            )
            .with_target(target),
            Rejection::ParentNotFound { parent } => ArmError::not_found(
                "ParentResourceNotFound",
                format!(
                    "Can not perform requested operation on nested resource. Parent resource '{parent}' not found."
                ),
            ),
            Rejection::GroupNotFound { group } => ArmError::not_found(
                "ResourceGroupNotFound",
                format!("Resource group '{}' could not be found.", slipway_domain::echo::echo(&group, 90)),
            ),
            Rejection::GroupBeingDeleted { group } => ArmError::new(
                StatusCode::CONFLICT,
                "ResourceGroupBeingDeleted",
                format!("The resource group '{group}' is in deprovisioning state and cannot perform this operation."),
            ),
            Rejection::GroupLocationFixed { group, location } => ArmError::new(
                StatusCode::CONFLICT,
                "InvalidResourceGroupLocation",
                format!(
                    "Invalid resource group location. The Resource group '{group}' already exists in location '{location}'."
                ),
            ),
            Rejection::QuotaExceeded(q) => quota_exceeded(&q),
            Rejection::ScopeLocked(locked) => scope_locked(&locked),
            Rejection::PolicyDenied(denied) => policy_denied(&denied),
            Rejection::OwnRequest { assignment_id } => ArmError::new(
                StatusCode::FORBIDDEN,
                "ApproverIsRequester",
                format!(
                    "The requester of an operation cannot approve or deny it: the policy assignment \
                     '{assignment_id}' asks someone else to decide."
                ),
            ),
            Rejection::PreconditionFailed { message } => {
                ArmError::new(StatusCode::PRECONDITION_FAILED, "PreconditionFailed", message)
            }
            Rejection::Invalid(body) => ArmError::with_body(StatusCode::BAD_REQUEST, body),
            Rejection::Internal(why) => {
                tracing::error!(error = %why, "a request failed for a fault of the server's");
                ArmError::internal()
            }
        }
    }
}

/// ARM's `409 QuotaExceeded`, the numbers in the message and again in `additionalInfo`.
fn quota_exceeded(q: &slipway_domain::quota::QuotaExceeded) -> ArmError {
    let scope = match q.scope {
        slipway_domain::quota::LimitScope::Subscription => "subscription",
        slipway_domain::quota::LimitScope::Group => "resourceGroup",
    };
    ArmError::new(StatusCode::CONFLICT, "QuotaExceeded", q.to_string()).with_info(
        "QuotaExceeded",
        serde_json::json!({
            "meter": q.meter.as_str(),
            "scope": scope,
            "limit": q.limit,
            "currentValue": q.current,
            "requested": q.requested,
            "unit": q.unit,
        }),
    )
}

/// ARM's `403 RequestDisallowedByPolicy`, with a `PolicyViolation` naming the definition,
/// the assignment and what was evaluated.
fn policy_denied(d: &slipway_domain::policy_admission::PolicyDenied) -> ArmError {
    let name = |id: &str| id.rsplit('/').next().unwrap_or_default().to_string();
    ArmError::new(StatusCode::FORBIDDEN, "RequestDisallowedByPolicy", d.to_string())
        .with_target(d.target.clone())
        .with_info(
            "PolicyViolation",
            serde_json::json!({
                "policyDefinitionId": d.definition_id,
                "policyDefinitionName": name(&d.definition_id),
                "policyDefinitionDisplayName": d.definition_name,
                "policyDefinitionEffect": d.effect.as_str(),
                "policyAssignmentId": d.assignment_id,
                "policyAssignmentName": name(&d.assignment_id),
                "evaluationDetails": {
                    "evaluatedExpressions": slipway_domain::policy_rule::evaluated_expressions(&d.evaluated),
                },
            }),
        )
}

/// ARM's `409 ScopeLocked`, naming the lock (also in `additionalInfo`).
fn scope_locked(locked: &slipway_domain::locks::ScopeLocked) -> ArmError {
    ArmError::new(StatusCode::CONFLICT, "ScopeLocked", locked.to_string()).with_target(locked.target.clone()).with_info(
        "ScopeLocked",
        serde_json::json!({
            "lockId": locked.lock.id,
            "level": locked.lock.level.as_str(),
            "notes": locked.lock.notes,
        }),
    )
}

/// What the type registry refuses is the client's to fix: `400`.
impl From<InvalidRequest> for ArmError {
    fn from(InvalidRequest(body): InvalidRequest) -> Self {
        ArmError::with_body(StatusCode::BAD_REQUEST, body)
    }
}

impl From<StoreError> for ArmError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Rejected(r) => r.into(),
            StoreError::Precondition(message) => {
                ArmError::new(StatusCode::PRECONDITION_FAILED, "PreconditionFailed", message)
            }
            StoreError::Unavailable(m) => {
                tracing::warn!(error = %m, "store unavailable");
                ArmError::unavailable("The service is temporarily unavailable; retry later.")
            }
            StoreError::LeaseLost | StoreError::Internal(_) => {
                tracing::error!(error = %e, "store failure");
                ArmError::internal()
            }
        }
    }
}

impl IntoResponse for ArmError {
    fn into_response(self) -> Response {
        let mut error = serde_json::to_value(WireError::from(&self.body)).unwrap_or_default();
        if let Some(all) = &self.additional_info {
            let info = all.iter().map(|a| serde_json::json!({"type": a.kind, "info": a.info}));
            error["additionalInfo"] = serde_json::Value::Array(info.collect());
        }
        let body = serde_json::json!({ "error": error });
        let mut resp = (self.status, axum::Json(body)).into_response();
        let headers = resp.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&self.body.code) {
            headers.insert("x-ms-error-code", v);
        }
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_of_the_servers_is_a_500_that_tells_the_client_nothing() {
        let e = ArmError::from(Rejection::Internal("cannot seal: the key is 3 bytes".into()));
        assert_eq!((e.status, e.body.code.as_str()), (StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError"));
        assert!(!e.body.message.contains("seal"), "{}", e.body.message);
    }
}
