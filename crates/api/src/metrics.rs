//! `GET /metrics`: the Prometheus exposition (`slipway_metrics`), its gauges read from the
//! store at scrape time, and who may read it (`MetricsAccess`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::{ApiState, ArmError};

/// Who may scrape `/metrics`.
#[derive(Clone, Default)]
pub enum MetricsAccess {
    /// Anyone who reaches the listener (metrics carry no tenant data: route templates,
    /// type names and counts only).
    #[default]
    Open,
    /// Only a scraper presenting `Authorization: Bearer <token>` (Prometheus'
    /// `authorization.credentials_file`).
    Token(String),
    /// No `/metrics` at all (404).
    Off,
}

impl std::fmt::Debug for MetricsAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MetricsAccess::Open => "Open",
            MetricsAccess::Token(_) => "Token(***)",
            MetricsAccess::Off => "Off",
        })
    }
}

pub(crate) async fn serve(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    match &state.options.metrics_access {
        MetricsAccess::Off => return ArmError::not_found("NotFound", "Metrics are turned off.").into_response(),
        MetricsAccess::Token(expected) => {
            let presented = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or_default();
            if !bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
                let mut resp = ArmError::new(
                    StatusCode::UNAUTHORIZED,
                    "InvalidAuthenticationToken",
                    "The metrics token is missing or wrong.",
                )
                .into_response();
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"metrics\""));
                return resp;
            }
        }
        MetricsAccess::Open => {}
    }
    let now = state.clock.now();
    let stored = match state.store.reading(now).await {
        Ok(r) => r,
        Err(e) => return ArmError::unavailable(format!("store: {e}")).into_response(),
    };
    let reading = slipway_metrics::Reading {
        active: stored
            .active
            .iter()
            .map(|a| {
                let age = (now.as_millis() - a.oldest_start.as_millis()).max(0) as f64 / 1000.0;
                (a.type_key.clone(), a.status.to_string(), a.count as i64, age)
            })
            .collect(),
        due_intent: stored.due_intent as i64,
        due_followup: stored.due_followup as i64,
        outbox_pending: stored.outbox_pending as i64,
        outbox_dead: stored.outbox_dead as i64,
    };
    let body = state.metrics.render(&reading);
    ([(header::CONTENT_TYPE, slipway_metrics::CONTENT_TYPE)], body).into_response()
}
