//! Admission policy in ARM's shape (docs/governance.md#admission-policy):
//! `Microsoft.Authorization/policyDefinitions` (the platform's, from the configuration, at
//! `/providers/…`; a subscription's own at `/subscriptions/{s}/providers/…`),
//! `policyAssignments` and `policyExemptions` at a subscription, a resource group or a
//! resource. Whoever may read a scope reads what applies there; a subscription's Owner (or
//! the Admin) writes its definitions, assignments and exemptions. Each is a registry entry a
//! write reads in its own transaction (`guardrails`), checked when written: a rule against
//! the served types' aliases, an assignment's parameters against its definition, an
//! exemption against its assignment.

pub mod catalog;
mod states;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use slipway_domain::access::Scope;
use slipway_domain::echo::echo;
use slipway_domain::ids::SubscriptionId;
use slipway_domain::policy_admission::{Assignment, Exemption, parameter_values};
use slipway_domain::subscription::Intent;
use slipway_store::{EntryKind, Expect, PutEntry};

pub use catalog::{PlatformDefinition, PolicyCatalog};
pub(crate) use states::policy_states;

use self::catalog::Stored;
use crate::error::ArmError;
use crate::handlers::body::json_body;
use crate::handlers::guardrails::{check_name, managed_by_owner, scope_exists};
use crate::handlers::{Ctx, json_response, method_not_allowed, platform_version};
use crate::route::PolicyCollection;
use crate::{ApiState, access};

const NAMESPACE: &str = "Microsoft.Authorization";

/// Every method of a policy path.
pub(crate) async fn policy(
    state: &ApiState,
    ctx: &Ctx,
    collection: PolicyCollection,
    scope: Scope,
    path: String,
    name: Option<String>,
    body: Body,
) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    if scope.is_platform() {
        return platform_definitions(state, ctx, collection, name.as_deref());
    }
    let subscription = SubscriptionId::new(scope.subscription().unwrap_or_default());
    let path = if path == "/" { String::new() } else { path };
    let kind = entry_kind(collection);
    if collection == PolicyCollection::Definitions && path.split('/').count() != 3 {
        return Err(ArmError::not_found(
            "InvalidPolicyDefinitionScope",
            "Policy definitions live at the platform (/providers/…) or at a subscription.",
        ));
    }
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    let (permission, verb) = managed_by_owner(&ctx.method)?;
    grants.require(&ctx.caller, permission, &scope, &format!("{NAMESPACE}/{}/{verb}", collection.segment()))?;
    let stored = stored(state, &subscription, kind).await?;
    let Some(name) = name else {
        if ctx.method != Method::GET {
            return Err(method_not_allowed(&ctx.method));
        }
        let related = |s: &Stored| {
            let at = Scope::stored(s.scope.as_deref().unwrap_or(&path));
            at.contains(&scope) || scope.contains(&at)
        };
        let mut value: Vec<Value> = stored.iter().filter(|s| related(s)).map(|s| body_of(collection, s)).collect();
        if collection == PolicyCollection::Definitions {
            value.extend(state.policies.platform.iter().map(platform_body));
        }
        return Ok(json_response(StatusCode::OK, json!({ "value": value })));
    };
    let id = format!("{path}/providers/{NAMESPACE}/{}/{name}", collection.segment());
    let existing = stored.iter().find(|s| s.id.eq_ignore_ascii_case(&id));
    match ctx.method {
        Method::GET => existing
            .map(|s| json_response(StatusCode::OK, body_of(collection, s)))
            .ok_or_else(|| not_found(collection, &name)),
        Method::DELETE => {
            access::check_subscription(state, &subscription, Intent::Change).await?;
            if collection == PolicyCollection::Definitions {
                in_use(state, &subscription, &id).await?;
            }
            let removed = ctx.delete_entry(state, kind, &id.to_ascii_lowercase(), Expect::Any).await?;
            Ok(if removed { StatusCode::OK } else { StatusCode::NO_CONTENT }.into_response())
        }
        _ => {
            check_name(&name, 128, "<>*%&:\\?/+#", "InvalidPolicyName")?;
            let input: Value = json_body(state, ctx, body).await?;
            let properties = input.get("properties").cloned().unwrap_or(Value::Null);
            if !properties.is_object() {
                return Err(ArmError::invalid_content("The body's properties are an object.", "properties"));
            }
            access::check_subscription(state, &subscription, Intent::Change).await?;
            // Kept in the casing it was first created with, as ARM does.
            let id = existing.map_or(id, |s| s.id.clone());
            let properties = checked(state, collection, &subscription, &scope, &path, &id, properties).await?;
            let scope_path = (collection != PolicyCollection::Definitions).then_some(path.as_str());
            let entry = Stored { id: id.clone(), scope: scope_path.map(str::to_string), properties };
            ctx.put_entry(
                state,
                PutEntry {
                    kind,
                    id: id.to_ascii_lowercase(),
                    partition: subscription.as_str().to_string(),
                    body: Stored::encode(&entry.id, entry.scope.as_deref(), &entry.properties),
                    expect: Expect::Any,
                    now: state.clock.now(),
                    activity: None,
                },
            )
            .await?;
            let status = if existing.is_some() { StatusCode::OK } else { StatusCode::CREATED };
            Ok(json_response(status, body_of(collection, &entry)))
        }
    }
}

fn entry_kind(collection: PolicyCollection) -> EntryKind {
    match collection {
        PolicyCollection::Definitions => EntryKind::PolicyDefinition,
        PolicyCollection::Assignments => EntryKind::PolicyAssignment,
        PolicyCollection::Exemptions => EntryKind::PolicyExemption,
    }
}

/// The platform's definitions: anyone may read them; the configuration writes them.
fn platform_definitions(
    state: &ApiState,
    ctx: &Ctx,
    collection: PolicyCollection,
    name: Option<&str>,
) -> Result<Response, ArmError> {
    if collection != PolicyCollection::Definitions {
        return Err(ArmError::not_found(
            "InvalidPolicyScope",
            "Policy assignments and exemptions live at a subscription, a resource group or a resource.",
        ));
    }
    if ctx.method != Method::GET {
        return Err(ArmError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "The platform's policy definitions come from its configuration ([[policy.definitions]]).",
        ));
    }
    let platform = &state.policies.platform;
    match name {
        None => Ok(json_response(
            StatusCode::OK,
            json!({ "value": platform.iter().map(platform_body).collect::<Vec<_>>() }),
        )),
        Some(name) => platform
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .map(|p| json_response(StatusCode::OK, platform_body(p)))
            .ok_or_else(|| not_found(collection, name)),
    }
}

/// A `PUT`'s properties, checked: a definition's rule against the served types, an
/// assignment's definition and parameters, an exemption's assignment. The scope must exist.
async fn checked(
    state: &ApiState,
    collection: PolicyCollection,
    subscription: &SubscriptionId,
    scope: &Scope,
    path: &str,
    id: &str,
    properties: Value,
) -> Result<Value, ArmError> {
    let invalid =
        |code: &str, e: &dyn std::fmt::Display| ArmError::bad_request(code, e.to_string()).with_target("properties");
    match collection {
        PolicyCollection::Definitions => {
            state.policies.parse_definition(id, &properties).map_err(|e| invalid("InvalidPolicyRule", &e))?;
            let mut properties = properties;
            properties["policyType"] = json!("Custom");
            Ok(properties)
        }
        PolicyCollection::Assignments => {
            scope_exists(state, scope, path).await?;
            let assignment = Assignment::parse(id, scope.clone(), &properties)
                .map_err(|e| invalid("InvalidPolicyAssignment", &e))?;
            let definitions = stored(state, subscription, EntryKind::PolicyDefinition).await?;
            let mine = definitions.iter().find(|d| d.id.eq_ignore_ascii_case(&assignment.definition_id)).map(|d| {
                state.policies.parse_definition(&d.id, &d.properties).map_err(|e| invalid("InvalidPolicyRule", &e))
            });
            let definition = match mine {
                Some(parsed) => parsed?,
                None => state
                    .policies
                    .platform
                    .iter()
                    .find(|p| p.definition.id.eq_ignore_ascii_case(&assignment.definition_id))
                    .map(|p| (*p.definition).clone())
                    .ok_or_else(|| {
                        ArmError::not_found(
                            "PolicyDefinitionNotFound",
                            format!(
                                "The policy definition '{}' could not be found.",
                                echo(&assignment.definition_id, 300)
                            ),
                        )
                    })?,
            };
            parameter_values(&definition, &assignment).map_err(|e| invalid("InvalidPolicyParameters", &e))?;
            Ok(properties)
        }
        PolicyCollection::Exemptions => {
            scope_exists(state, scope, path).await?;
            let exemption =
                Exemption::parse(id, scope.clone(), &properties).map_err(|e| invalid("InvalidPolicyExemption", &e))?;
            let assignments = stored(state, subscription, EntryKind::PolicyAssignment).await?;
            let assignment =
                assignments.iter().find(|a| a.id.eq_ignore_ascii_case(&exemption.assignment_id)).ok_or_else(|| {
                    ArmError::not_found(
                        "PolicyAssignmentNotFound",
                        format!("The policy assignment '{}' could not be found.", echo(&exemption.assignment_id, 300)),
                    )
                })?;
            let assigned = Scope::stored(assignment.scope.as_deref().unwrap_or_default());
            if !assigned.contains(scope) {
                return Err(invalid("InvalidPolicyExemption", &"An exemption lies within its assignment's scope."));
            }
            Ok(properties)
        }
    }
}

/// A subscription's entries of one policy kind.
async fn stored(state: &ApiState, subscription: &SubscriptionId, kind: EntryKind) -> Result<Vec<Stored>, ArmError> {
    let entries = state.store.list_entries(kind, Some(subscription.as_str())).await?;
    Ok(entries.iter().filter_map(|e| Stored::decode(&e.body)).collect())
}

/// `409` when an assignment still names the definition.
async fn in_use(state: &ApiState, subscription: &SubscriptionId, definition_id: &str) -> Result<(), ArmError> {
    let assignments = stored(state, subscription, EntryKind::PolicyAssignment).await?;
    let naming = assignments
        .iter()
        .find(|a| a.properties["policyDefinitionId"].as_str().is_some_and(|d| d.eq_ignore_ascii_case(definition_id)));
    match naming {
        Some(a) => Err(ArmError::new(
            StatusCode::CONFLICT,
            "PolicyDefinitionInUse",
            format!("The policy definition is assigned by '{}'; delete the assignment first.", a.id),
        )),
        None => Ok(()),
    }
}

fn not_found(collection: PolicyCollection, name: &str) -> ArmError {
    let (code, what) = match collection {
        PolicyCollection::Definitions => ("PolicyDefinitionNotFound", "policy definition"),
        PolicyCollection::Assignments => ("PolicyAssignmentNotFound", "policy assignment"),
        PolicyCollection::Exemptions => ("PolicyExemptionNotFound", "policy exemption"),
    };
    ArmError::not_found(code, format!("The {what} '{}' could not be found.", echo(name, 128)))
}

fn body_of(collection: PolicyCollection, s: &Stored) -> Value {
    let mut properties = s.properties.clone();
    if let Some(scope) = &s.scope {
        properties["scope"] = json!(scope);
    }
    json!({
        "id": s.id,
        "name": s.id.rsplit('/').next().unwrap_or_default(),
        "type": format!("{NAMESPACE}/{}", collection.segment()),
        "properties": properties,
    })
}

fn platform_body(p: &PlatformDefinition) -> Value {
    let mut properties = p.properties.clone();
    properties["policyType"] = json!("BuiltIn");
    json!({
        "id": p.definition.id,
        "name": p.name,
        "type": format!("{NAMESPACE}/policyDefinitions"),
        "properties": properties,
    })
}
