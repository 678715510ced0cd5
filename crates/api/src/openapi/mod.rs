//! `GET /openapi.json`: an OpenAPI 3.1 document of the API as this process serves it,
//! generated per request from the running configuration — every configured type's paths,
//! api-versions, name rule and JSON Schema, every status each operation can answer with ARM's
//! error shape, and the security schemes when authentication is on. Served without
//! authentication, like `/healthz`, so tools can fetch it. Slipway's extensions of ARM (cancel)
//! are marked `x-slipway-extension`.

mod paths;
mod platform_paths;
mod schemas;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::ApiState;
use crate::types::{ResourceType, TypeRegistry};

pub(crate) async fn serve(State(state): State<Arc<ApiState>>) -> Response {
    (StatusCode::OK, axum::Json(document(&state))).into_response()
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
    build(&state.types, &paths::Setting { auth: state.auth.is_some(), limited: state.rate_limits.is_some(), callbacks })
}

fn build(types: &TypeRegistry, setting: &paths::Setting) -> Value {
    let mut namespaces: BTreeMap<String, Vec<&ResourceType>> = BTreeMap::new();
    for ty in types.all() {
        namespaces.entry(ty.namespace.to_ascii_lowercase()).or_default().push(ty);
    }
    let mut schemas = Map::new();
    schemas::common(&mut schemas);
    let mut paths = Map::new();
    platform_paths::platform_paths(setting, &mut paths);
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
        "responses": paths::error_responses(setting),
        "headers": paths::headers(),
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
