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
    pub retry_after: Option<u64>,
}

impl ArmError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ArmError { status, body: CloudError::new(code, message), retry_after: None }
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
            Rejection::PreconditionFailed { message } => {
                ArmError::new(StatusCode::PRECONDITION_FAILED, "PreconditionFailed", message)
            }
            Rejection::Invalid(body) => ArmError { status: StatusCode::BAD_REQUEST, body, retry_after: None },
            Rejection::Internal(why) => {
                tracing::error!(error = %why, "a request failed for a fault of the server's");
                ArmError::internal()
            }
        }
    }
}

/// What the type registry refuses is the client's to fix: `400`.
impl From<InvalidRequest> for ArmError {
    fn from(InvalidRequest(body): InvalidRequest) -> Self {
        ArmError { status: StatusCode::BAD_REQUEST, body, retry_after: None }
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
        let body = serde_json::json!({ "error": WireError::from(&self.body) });
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
