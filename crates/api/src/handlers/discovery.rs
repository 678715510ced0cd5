//! Discovery, as ARM clients expect it, built from the configured types: the namespaces
//! served (`GET [/subscriptions/{sub}]/providers`), a namespace's provider registration (`GET
//! [/subscriptions/{sub}]/providers/{ns}`) and its operations list (`GET
//! /providers/{ns}/operations`). Any authenticated principal may read them (no role is
//! needed). A namespace's paths take any version of one of its types, as the operation
//! endpoints do; the provider and the list, ARM's own resources, take a platform api-version
//! too.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use slipway_domain::access::{Permission, Scope};
use slipway_domain::echo::echo;
use slipway_domain::ids::SubscriptionId;
use slipway_types::ResourceType;

use crate::error::ArmError;
use crate::handlers::operations::operation_check;
use crate::handlers::{Ctx, json_response, method_not_allowed, platform_version};
use crate::{ApiState, access};

use crate::handlers::admin::{AUTHZ, SUBSCRIPTIONS};

/// The configured types of a namespace, by type name; `404 InvalidResourceType` (or a
/// version or method error) as on the operation endpoints.
fn namespace_types(state: &ApiState, ctx: &Ctx, namespace: &str) -> Result<Vec<Arc<ResourceType>>, ArmError> {
    operation_check(state, ctx, namespace, Method::GET)?;
    Ok(types_of(state, namespace))
}

fn types_of(state: &ApiState, namespace: &str) -> Vec<Arc<ResourceType>> {
    let mut types: Vec<Arc<ResourceType>> =
        state.types.all().filter(|t| t.namespace.eq_ignore_ascii_case(namespace)).cloned().collect();
    types.sort_by_key(|t| t.type_name.to_ascii_lowercase());
    types
}

/// Every namespace served, as configured, in name order.
fn namespaces(state: &ApiState) -> Vec<String> {
    let mut names: Vec<String> = state.types.all().map(|t| t.namespace.clone()).collect();
    names.sort_by_key(|n| n.to_ascii_lowercase());
    names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    names
}

/// Newest first, as ARM lists them.
fn newest_first(mut versions: Vec<String>) -> Vec<String> {
    versions.sort_by(|a, b| b.cmp(a));
    versions.dedup();
    versions
}

/// `GET [/subscriptions/{sub}]/providers/{namespace}`: ARM's provider shape. The provider is
/// ARM's own resource, so a platform api-version reads it as well as a version of one of
/// the namespace's types.
pub(crate) fn provider(
    state: &ApiState,
    ctx: &Ctx,
    subscription: Option<&str>,
    namespace: &str,
) -> Result<Response, ArmError> {
    let types = types_of(state, namespace);
    let platform_read = ctx.method == Method::GET && ctx.api_version().is_ok_and(platform_version::accepts);
    if types.is_empty() || !platform_read {
        // What the operation endpoints answer: a method, namespace or version error.
        operation_check(state, ctx, namespace, Method::GET)?;
    }
    Ok(json_response(StatusCode::OK, provider_body(state, subscription, namespace, &types)))
}

/// `POST /subscriptions/{sub}/providers/{ns}/register` and `…/unregister` (platform
/// api-version), ARM's provider registration. A namespace Slipway serves is served to every
/// subscription, so registering is a no-op that answers the provider (as ARM does for one
/// already registered) and needs write on the subscription, as ARM's `register/action`
/// does; unregistering is `409 ProviderUnregistrationNotSupported`: what is served is the
/// configuration's to change.
pub(crate) async fn registration(
    state: &ApiState,
    ctx: &Ctx,
    subscription: &str,
    namespace: &str,
    register: bool,
) -> Result<Response, ArmError> {
    if ctx.method != Method::POST {
        return Err(method_not_allowed(&ctx.method));
    }
    platform_version::check(ctx)?;
    let types = types_of(state, namespace);
    let Some(first) = types.first() else {
        return Err(ArmError::not_found(
            "InvalidResourceType",
            format!("The namespace '{}' is not served here.", echo(namespace, 100)),
        ));
    };
    let ns = first.namespace.clone();
    let sub = SubscriptionId::new(subscription);
    let grants = access::grants(state, &ctx.caller, Some(&sub)).await?;
    let verb = if register { "register" } else { "unregister" };
    grants.require(&ctx.caller, Permission::Write, &Scope::subscription_scope(&sub), &format!("{ns}/{verb}/action"))?;
    if !register {
        return Err(ArmError::new(
            StatusCode::CONFLICT,
            "ProviderUnregistrationNotSupported",
            format!("{ns} is served to every subscription by this Slipway's configuration; it cannot be unregistered."),
        ));
    }
    Ok(json_response(StatusCode::OK, provider_body(state, Some(subscription), &ns, &types)))
}

/// `GET /providers` and `GET /subscriptions/{sub}/providers`: every namespace served, each in
/// the provider shape, in one page; a platform api-version.
pub(crate) fn providers(state: &ApiState, ctx: &Ctx, subscription: Option<&str>) -> Result<Response, ArmError> {
    if ctx.method != Method::GET {
        return Err(method_not_allowed(&ctx.method));
    }
    platform_version::check(ctx)?;
    let value: Vec<Value> =
        namespaces(state).iter().map(|ns| provider_body(state, subscription, ns, &types_of(state, ns))).collect();
    Ok(json_response(StatusCode::OK, json!({ "value": value })))
}

fn provider_body(state: &ApiState, subscription: Option<&str>, namespace: &str, types: &[Arc<ResourceType>]) -> Value {
    let ns = types.first().map_or(namespace, |t| t.namespace.as_str());
    let location = &state.options.location;
    let all_versions = newest_first(state.types.namespace_versions(ns));
    let mut resource_types: Vec<Value> = types
        .iter()
        .map(|t| {
            json!({
                "resourceType": t.type_name,
                "locations": if t.resource_kind.has_location() { vec![location] } else { vec![] },
                "apiVersions": newest_first(t.api_versions.clone()),
            })
        })
        .collect();
    resource_types.push(json!({"resourceType": "operations", "locations": [], "apiVersions": all_versions}));
    for kind in ["locations/operationStatuses", "locations/operationResults"] {
        resource_types.push(json!({"resourceType": kind, "locations": [location], "apiVersions": all_versions}));
    }
    let id = match subscription {
        Some(sub) => format!("/subscriptions/{}/providers/{ns}", SubscriptionId::new(sub)),
        None => format!("/providers/{ns}"),
    };
    json!({"id": id, "namespace": ns, "registrationState": "Registered", "resourceTypes": resource_types})
}

/// One entry of ARM's operations list.
fn operation(name: String, provider: &str, resource: &str, operation: &str, description: String) -> Value {
    json!({
        "name": name,
        "display": {"provider": provider, "resource": resource, "operation": operation, "description": description},
        "isDataAction": false,
    })
}

/// Every action a role can grant in `namespace`, by the names 403 answers use: each type's
/// read, write and delete, the operation endpoints' read and cancel (a Slipway extension),
/// and the platform's own (role assignments, the subscription registry).
pub(crate) fn actions(namespace: &str, types: &[Arc<ResourceType>]) -> Vec<Value> {
    let mut value = Vec::new();
    for t in types {
        let (ty, kind) = (t.type_name.as_str(), t.kind.as_str());
        for (permission, verb, what) in [
            (Permission::Read, "Read", format!("Reads a {kind} resource or lists them.")),
            (Permission::Write, "Create or Update", format!("Creates or updates a {kind} resource (PUT or PATCH).")),
            (Permission::Delete, "Delete", format!("Deletes a {kind} resource.")),
        ] {
            let name = access::resource_action(namespace, ty, permission);
            value.push(operation(name, namespace, ty, &format!("{verb} {ty}"), what));
        }
    }
    let statuses = "locations/operationStatuses";
    value.push(operation(
        format!("{namespace}/{statuses}/read"),
        namespace,
        statuses,
        "Read operation status",
        "Reads the status and the result of an asynchronous operation.".into(),
    ));
    value.push(operation(
        format!("{namespace}/{statuses}/cancel/action"),
        namespace,
        statuses,
        "Cancel operation",
        "Cancels an asynchronous operation (a Slipway extension of ARM).".into(),
    ));
    let (authz_ns, authz_ty) = AUTHZ.split_once('/').expect("namespace/type");
    for (verb, what) in [
        ("read", "Reads role assignments."),
        ("write", "Creates or updates a role assignment."),
        ("delete", "Deletes a role assignment."),
    ] {
        let op = format!("{} role assignment", capitalised(verb));
        value.push(operation(format!("{AUTHZ}/{verb}"), authz_ns, authz_ty, &op, what.into()));
    }
    let (admin_ns, admin_ty) = SUBSCRIPTIONS.split_once('/').expect("namespace/type");
    for (verb, what) in
        [("read", "Reads subscription registrations."), ("write", "Registers a subscription or changes its state.")]
    {
        let op = format!("{} subscription", capitalised(verb));
        value.push(operation(format!("{SUBSCRIPTIONS}/{verb}"), admin_ns, admin_ty, &op, what.into()));
    }
    value
}

fn capitalised(word: &str) -> String {
    let mut c = word.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// `GET /providers/{namespace}/operations`: ARM's operations list.
pub(crate) fn operations(state: &ApiState, ctx: &Ctx, namespace: &str) -> Result<Response, ArmError> {
    let types = namespace_types(state, ctx, namespace)?;
    let ns = types.first().map_or(namespace, |t| t.namespace.as_str());
    Ok(json_response(StatusCode::OK, json!({ "value": actions(ns, &types) })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operations_list_names_every_grantable_action() {
        let t = |ty: &str, kind: &str| {
            Arc::new(ResourceType::new("Slipway.Example", ty, kind, vec!["2025-06-01".into()], None).unwrap())
        };
        let value = actions("Slipway.Example", &[t("subnets", "Subnet"), t("virtualNetworks", "VirtualNetwork")]);
        let names: Vec<&str> = value.iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "Slipway.Example/subnets/read",
                "Slipway.Example/subnets/write",
                "Slipway.Example/subnets/delete",
                "Slipway.Example/virtualNetworks/read",
                "Slipway.Example/virtualNetworks/write",
                "Slipway.Example/virtualNetworks/delete",
                "Slipway.Example/locations/operationStatuses/read",
                "Slipway.Example/locations/operationStatuses/cancel/action",
                "Slipway.Authorization/roleAssignments/read",
                "Slipway.Authorization/roleAssignments/write",
                "Slipway.Authorization/roleAssignments/delete",
                "Slipway.Admin/subscriptions/read",
                "Slipway.Admin/subscriptions/write",
            ]
        );
        for v in &value {
            assert_eq!(v["isDataAction"], false);
            for field in ["provider", "resource", "operation", "description"] {
                assert!(v["display"][field].as_str().is_some_and(|s| !s.is_empty()), "{v}");
            }
        }
        assert_eq!(value[3]["display"]["operation"], "Read virtualNetworks");
        assert_eq!(value[8]["display"]["provider"], "Slipway.Authorization");
    }
}
