//! `GET /openapi.json`: an OpenAPI 3.1 document of the API as this process serves it,
//! generated from the running configuration once per process (the configuration cannot change
//! while it runs; building it costs far more than any request should let an anonymous caller
//! spend), served with a strong `ETag` and `304` to a matching `If-None-Match` — every configured type's paths,
//! api-versions, name rule and JSON Schema, every status each operation can answer with ARM's
//! error shape, and the security schemes when authentication is on. Served without
//! authentication, like `/healthz`, so tools can fetch it. Slipway's extensions of ARM (cancel)
//! are marked `x-slipway-extension`.

mod activity_paths;
mod common_schemas;
mod event_paths;
mod guardrail_paths;
mod operation;
mod overview_paths;
mod paths;
mod platform_paths;
mod responses;
mod schemas;
mod tags_paths;
mod whatif;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::ApiState;
use slipway_types::{ResourceType, TypeRegistry};

/// The document as served: built and serialised on the first request, then shared.
#[derive(Default)]
pub struct OpenApiCache(tokio::sync::OnceCell<Served>);

struct Served {
    body: Bytes,
    etag: HeaderValue,
}

impl Served {
    fn of(document: &Value) -> Served {
        let body = Bytes::from(serde_json::to_vec(document).unwrap_or_default());
        let digest = Sha256::digest(&body);
        let tag: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let etag = HeaderValue::from_str(&format!("\"{tag}\"")).unwrap_or(HeaderValue::from_static("\"0\""));
        Served { body, etag }
    }

    fn matches(&self, headers: &HeaderMap) -> bool {
        let Some(wanted) = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) else { return false };
        let ours = self.etag.to_str().unwrap_or_default();
        wanted.split(',').map(|t| t.trim().trim_start_matches("W/")).any(|t| t == "*" || t == ours)
    }
}

pub(crate) async fn serve(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    let build = state.clone();
    // Off the async workers: building takes long enough to stall them.
    let built = state.openapi.0.get_or_try_init(|| tokio::task::spawn_blocking(move || Served::of(&document(&build))));
    let served = match built.await {
        Ok(served) => served,
        Err(e) => {
            tracing::error!(error = %e, "building the OpenAPI document failed");
            return crate::error::ArmError::internal().into_response();
        }
    };
    let mut resp = if served.matches(&headers) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = (StatusCode::OK, served.body.clone()).into_response();
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    };
    resp.headers_mut().insert(header::ETAG, served.etag.clone());
    resp
}

/// The document for `state`'s configuration.
pub(crate) fn document(state: &ApiState) -> Value {
    let policy = &state.options.callbacks;
    let hosts = policy.allowlist();
    let callbacks = format!(
        "{} URIs {}{}",
        if policy.allow_http() { "`https` and `http`" } else { "`https`" },
        if hosts.is_empty() { "to any host".to_string() } else { format!("to {}", hosts.join(", ")) },
        if policy.allow_private_networks() { "" } else { " on public addresses only" },
    );
    build(
        &state.types,
        &operation::Setting { auth: state.auth.is_some(), limited: state.rate_limits.is_some(), callbacks },
    )
}

fn build(types: &TypeRegistry, setting: &operation::Setting) -> Value {
    let mut namespaces: BTreeMap<String, Vec<&ResourceType>> = BTreeMap::new();
    for ty in types.all() {
        namespaces.entry(ty.namespace.to_ascii_lowercase()).or_default().push(ty);
    }
    let mut schemas = Map::new();
    common_schemas::common(&mut schemas);
    let mut paths = Map::new();
    platform_paths::platform_paths(setting, &mut paths);
    overview_paths::overview_paths(setting, &mut paths);
    guardrail_paths::guardrail_paths(setting, &mut paths);
    guardrail_paths::guardrail_schemas(&mut schemas);
    event_paths::event_paths(setting, &mut paths);
    event_paths::event_schemas(&mut schemas);
    activity_paths::activity_paths(setting, &mut paths);
    activity_paths::activity_schemas(&mut schemas);
    whatif::schemas(&mut schemas);
    platform_paths::api_token_schemas(&mut schemas);
    overview_paths::overview_schemas(&types.all().map(|t| t.as_ref()).collect::<Vec<_>>(), &mut schemas);
    for members in namespaces.values_mut() {
        members.sort_by_key(|t| t.type_name.to_ascii_lowercase());
        for ty in members.iter() {
            schemas::type_schemas(ty, &mut schemas);
            paths::type_paths(ty, setting, &mut paths);
        }
        let namespace = &members[0].namespace;
        let versions = types.namespace_versions(namespace);
        platform_paths::namespace_paths(namespace, members, &versions, setting, &mut paths);
    }
    let mut components = json!({
        "schemas": schemas,
        "responses": responses::error_responses(setting),
        "headers": responses::headers(),
    });
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Slipway",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "An Azure-Resource-Manager-style resource provider over Ansible: ARM's paths, \
                            api-versions, long-running operations (`Azure-AsyncOperation`, `Location`, \
                            `Retry-After`) and error shape. Generated from the running configuration. \
                            Operations marked `x-slipway-extension` are not part of ARM's contract.",
        },
        "tags": tag_list(&paths),
        "paths": paths,
    });
    if setting.auth {
        components["securitySchemes"] = json!({
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": "A JWT from a configured OpenID Connect issuer. Missing: `401 AuthenticationFailed`; \
                                one that does not verify: `401 InvalidAuthenticationToken`; both with \
                                `WWW-Authenticate: Bearer`.",
            },
            "apiToken": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "slw_<id>_<secret>",
                "description": "A Slipway API token (`slipway api-token create`), when `[auth] api_tokens` is on.",
            },
        });
        doc["security"] = json!([{"bearer": []}, {"apiToken": []}]);
    }
    doc["components"] = components;
    doc
}

/// Every tag the operations use, once, in order of appearance.
fn tag_list(paths: &Map<String, Value>) -> Vec<Value> {
    let mut seen = Vec::new();
    for op in paths.values().filter_map(Value::as_object).flat_map(|item| item.values()) {
        for tag in op["tags"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !seen.contains(&tag) {
                seen.push(tag);
            }
        }
    }
    seen.into_iter().map(|name| json!({"name": name})).collect()
}

#[cfg(test)]
mod tests;
