//! Push hints from automation backends (e.g. AAP webhook notification templates POST their
//! job body here when a job starts, succeeds or fails). The api checks the provider's shared
//! token and hands the body on: only the provider knows what its notifications look like. A
//! hint only makes the engine poll that job now — the job's status is always read from the
//! provider, so a forged or lost hint cannot change any state, only timing.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::ApiState;
use crate::error::ArmError;

pub(crate) async fn job_notification(
    State(state): State<Arc<ApiState>>,
    Path(provider): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(expected) = state.hooks.get(&provider) else {
        return ArmError::not_found("NotFound", format!("No webhook is configured for provider '{provider}'."))
            .into_response();
    };
    let presented = headers
        .get("x-slipway-token")
        .or_else(|| headers.get("authorization"))
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v))
        .unwrap_or_default();
    if !same_secret(presented.as_bytes(), expected.as_bytes()) {
        return ArmError::new(StatusCode::UNAUTHORIZED, "Unauthorized", "A valid webhook token is required.")
            .into_response();
    }
    match (state.on_job_notification)(&provider, &body) {
        Ok(followed) => {
            tracing::debug!(%provider, followed, "job notification");
            StatusCode::NO_CONTENT.into_response()
        }
        Err(why) => ArmError::bad_request("InvalidRequestContent", why).into_response(),
    }
}

/// Compares without returning early, so timing does not reveal a matching prefix.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_exactly() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"", b"x"));
    }
}
