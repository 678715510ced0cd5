//! Management locks in ARM's shape (docs/governance.md#locks):
//! `{scope}/providers/Microsoft.Authorization/locks[/{name}]` at a subscription, a resource
//! group or a resource. `GET` lists what applies at the scope — the locks at it, above it and
//! below it — for whoever may read it; `PUT` and `DELETE` need Owner (or the Admin). A lock is a
//! registry entry of its subscription, which every write reads in its own transaction
//! (`guardrails`).

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use slipway_domain::access::Scope;
use slipway_domain::echo::echo;
use slipway_domain::ids::SubscriptionId;
use slipway_domain::locks::{Lock, LockLevel};
use slipway_domain::subscription::Intent;
use slipway_store::{EntryKind, Expect, PutEntry};

use crate::error::ArmError;
use crate::handlers::body::json_body;
use crate::handlers::guardrails::{check_name, decode_lock, encode_lock, managed_by_owner, scope_exists};
use crate::handlers::{Ctx, json_response, method_not_allowed, platform_version};
use crate::{ApiState, access};

const LOCKS: &str = "/providers/Microsoft.Authorization/locks/";
/// ARM's longest lock name and notes.
const MAX_NAME: usize = 90;
const MAX_NOTES: usize = 512;

#[derive(Debug, Deserialize)]
struct LockBody {
    properties: LockProperties,
}

#[derive(Debug, Deserialize)]
struct LockProperties {
    level: String,
    #[serde(default)]
    notes: Option<String>,
}

/// Every method of a locks path.
pub(crate) async fn locks(
    state: &ApiState,
    ctx: &Ctx,
    scope: Scope,
    path: String,
    name: Option<String>,
    body: Body,
) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    let subscription = SubscriptionId::new(scope.subscription().unwrap_or_default());
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    let (permission, verb) = managed_by_owner(&ctx.method)?;
    grants.require(&ctx.caller, permission, &scope, &format!("Microsoft.Authorization/locks/{verb}"))?;
    let stored = stored_locks(state, &subscription).await?;
    let Some(name) = name else {
        if ctx.method != Method::GET {
            return Err(method_not_allowed(&ctx.method));
        }
        let value: Vec<Value> =
            stored.iter().filter(|l| l.scope.contains(&scope) || scope.contains(&l.scope)).map(lock_body).collect();
        return Ok(json_response(StatusCode::OK, json!({ "value": value })));
    };
    let id = format!("{path}{LOCKS}{name}");
    let existing = stored.iter().find(|l| l.id.eq_ignore_ascii_case(&id));
    match ctx.method {
        Method::GET => existing.map(|l| json_response(StatusCode::OK, lock_body(l))).ok_or_else(|| not_found(&name)),
        Method::DELETE => {
            access::check_subscription(state, &subscription, Intent::Change).await?;
            let removed = ctx.delete_entry(state, EntryKind::Lock, &entry_id(&id), Expect::Any).await?;
            Ok(if removed { StatusCode::OK } else { StatusCode::NO_CONTENT }.into_response())
        }
        _ => {
            check_name(&name, MAX_NAME, "<>*%&:\\?/+", "InvalidLockName")?;
            let input: LockBody = json_body(state, ctx, body).await?;
            let level = LockLevel::parse(&input.properties.level).ok_or_else(|| {
                ArmError::bad_request(
                    "InvalidLockLevel",
                    format!("The lock level '{}' is not CanNotDelete or ReadOnly.", echo(&input.properties.level, 32)),
                )
                .with_target("properties.level")
            })?;
            let notes = input.properties.notes.filter(|n| !n.is_empty());
            if notes.as_ref().is_some_and(|n| n.chars().count() > MAX_NOTES) {
                return Err(ArmError::bad_request(
                    "InvalidLockNotes",
                    format!("A lock's notes take at most {MAX_NOTES} characters."),
                )
                .with_target("properties.notes"));
            }
            access::check_subscription(state, &subscription, Intent::Change).await?;
            scope_exists(state, &scope, &path).await?;
            // Kept in the casing it was first created with, as ARM does.
            let id = existing.map_or(id, |l| l.id.clone());
            let lock = Lock { scope: scope.clone(), id, level, notes };
            ctx.put_entry(
                state,
                PutEntry {
                    kind: EntryKind::Lock,
                    id: entry_id(&lock.id),
                    partition: subscription.as_str().to_string(),
                    body: encode_lock(&lock),
                    expect: Expect::Any,
                    now: state.clock.now(),
                    activity: None,
                },
            )
            .await?;
            let status = if existing.is_some() { StatusCode::OK } else { StatusCode::CREATED };
            Ok(json_response(status, lock_body(&lock)))
        }
    }
}

/// A lock's registry id: its id, lowercased (ARM matches ids without regard to case).
fn entry_id(id: &str) -> String {
    id.to_ascii_lowercase()
}

/// The subscription's locks.
async fn stored_locks(state: &ApiState, subscription: &SubscriptionId) -> Result<Vec<Lock>, ArmError> {
    let entries = state.store.list_entries(EntryKind::Lock, Some(subscription.as_str())).await?;
    Ok(entries.iter().filter_map(|e| decode_lock(&e.body)).collect())
}

fn not_found(name: &str) -> ArmError {
    ArmError::not_found("LockNotFound", format!("The lock '{}' could not be found.", echo(name, MAX_NAME)))
}

/// ARM's `ManagementLockObject`.
fn lock_body(lock: &Lock) -> Value {
    let name = lock.id.rsplit('/').next().unwrap_or_default();
    let mut properties = json!({"level": lock.level.as_str()});
    if let Some(notes) = &lock.notes {
        properties["notes"] = json!(notes);
    }
    json!({
        "id": lock.id,
        "name": name,
        "type": "Microsoft.Authorization/locks",
        "properties": properties,
    })
}
