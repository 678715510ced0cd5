//! Push hints from automation backends: AAP/AWX webhook notification templates POST their
//! default job body here when a job starts, succeeds or fails. A hint only makes the
//! engine poll that job now — the job's status is always read from the provider, so a
//! forged or lost hint cannot change any state, only timing. A shared token protects it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

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
    let notification = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let job_id = match &notification["id"] {
        Value::Number(n) => n.as_u64().map(|n| n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let Some(job_id) = job_id else {
        return ArmError::bad_request("InvalidRequestContent", "Expected a job notification with an 'id'.")
            .into_response();
    };
    // A job that merely started changes nothing a client waits for: the regular poll will
    // see it. Only an ending is worth an immediate status read.
    let still_running = matches!(notification["status"].as_str(), Some("new" | "pending" | "waiting" | "running"));
    if still_running {
        return StatusCode::NO_CONTENT.into_response();
    }
    let followed = (state.on_job_changed)(&provider, &job_id);
    tracing::debug!(%provider, job = %job_id, followed, "job notification");
    StatusCode::NO_CONTENT.into_response()
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
