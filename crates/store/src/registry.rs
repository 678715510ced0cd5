//! The subscription registry and role assignments, stored as registry entries
//! ([`crate::entries`]). The documents here are their on-disk format (version 1, spelled out
//! field by field like [`crate::documents`]); the functions are the typed reads and writes
//! the API uses.

use crate::entries::PutEntry;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use slipway_domain::access::{Assignee, Role, RoleAssignment, Scope};
use slipway_domain::activity::ActivityEntry;
use slipway_domain::subscription::{Subscription, SubscriptionState};
use slipway_domain::{SubscriptionId, Timestamp};

use crate::{EntryKind, Expect, Store, StoreError};

#[derive(Debug, Serialize, Deserialize)]
struct SubscriptionDocument {
    #[serde(rename = "tenantId")]
    tenant_id: String,
    #[serde(rename = "displayName", default)]
    display_name: String,
    #[serde(rename = "state")]
    state: String,
    #[serde(rename = "attributes", default)]
    attributes: Map<String, Value>,
    #[serde(rename = "registeredAt")]
    registered_at: i64,
    #[serde(rename = "updatedAt")]
    updated_at: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct RoleAssignmentDocument {
    #[serde(rename = "scope")]
    scope: String,
    #[serde(rename = "role")]
    role: String,
    /// `principal` or `group`.
    #[serde(rename = "assigneeType")]
    assignee_type: String,
    #[serde(rename = "assignee")]
    assignee: String,
    #[serde(rename = "tenant", default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
}

fn corrupt(what: &str, id: &str, why: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("stored {what} '{id}' is unreadable: {why}"))
}

fn encode(doc: &impl Serialize) -> Result<String, StoreError> {
    serde_json::to_string(doc).map_err(|e| StoreError::Internal(e.to_string()))
}

fn subscription_from(id: &str, body: &str) -> Result<Subscription, StoreError> {
    let d: SubscriptionDocument = serde_json::from_str(body).map_err(|e| corrupt("subscription", id, e))?;
    let state = SubscriptionState::parse(&d.state).ok_or_else(|| corrupt("subscription", id, "unknown state"))?;
    Ok(Subscription {
        id: SubscriptionId::new(id),
        tenant_id: d.tenant_id,
        display_name: d.display_name,
        state,
        attributes: d.attributes,
        registered_at: Timestamp::from_millis(d.registered_at),
        updated_at: Timestamp::from_millis(d.updated_at),
    })
}

pub async fn get_subscription(store: &dyn Store, id: &SubscriptionId) -> Result<Option<Subscription>, StoreError> {
    let entry = store.get_entry(EntryKind::Subscription, id.as_str()).await?;
    entry.map(|e| subscription_from(&e.id, &e.body)).transpose()
}

pub async fn list_subscriptions(store: &dyn Store) -> Result<Vec<Subscription>, StoreError> {
    let entries = store.list_entries(EntryKind::Subscription, None).await?;
    entries.iter().map(|e| subscription_from(&e.id, &e.body)).collect()
}

/// Registers or updates a subscription (its own partition).
/// `activity`: the request's activity-log entry, written in the same transaction.
pub async fn put_subscription(
    store: &dyn Store,
    s: &Subscription,
    activity: Option<ActivityEntry>,
) -> Result<(), StoreError> {
    let Subscription { id, tenant_id, display_name, state, attributes, registered_at, updated_at } = s;
    let body = encode(&SubscriptionDocument {
        tenant_id: tenant_id.clone(),
        display_name: display_name.clone(),
        state: state.as_str().to_string(),
        attributes: attributes.clone(),
        registered_at: registered_at.as_millis(),
        updated_at: updated_at.as_millis(),
    })?;
    store
        .put_entry(PutEntry {
            kind: EntryKind::Subscription,
            id: id.to_string(),
            partition: id.to_string(),
            body: body.to_string(),
            expect: Expect::Any,
            now: *updated_at,
            activity: activity.map(Box::new),
        })
        .await?;
    Ok(())
}

fn assignment_from(id: &str, body: &str) -> Result<RoleAssignment, StoreError> {
    let d: RoleAssignmentDocument = serde_json::from_str(body).map_err(|e| corrupt("role assignment", id, e))?;
    let role = Role::from_name(&d.role).ok_or_else(|| corrupt("role assignment", id, "unknown role"))?;
    let scope = Scope::stored(&d.scope);
    let assignee = match d.assignee_type.as_str() {
        "principal" => Assignee::Principal(d.assignee),
        "group" => Assignee::Group(d.assignee),
        _ => return Err(corrupt("role assignment", id, "unknown assignee type")),
    };
    Ok(RoleAssignment { id: id.to_string(), assignee, tenant: d.tenant, role, scope })
}

/// The partition of an assignment: its scope's subscription, `""` at the platform scope.
fn partition_of(scope: &Scope) -> &str {
    scope.subscription().unwrap_or_default()
}

/// Assignments whose scope lies in `subscription` (`None`: the platform-wide ones).
pub async fn list_role_assignments(
    store: &dyn Store,
    subscription: Option<&SubscriptionId>,
) -> Result<Vec<RoleAssignment>, StoreError> {
    let partition = subscription.map(SubscriptionId::as_str).unwrap_or_default();
    let entries = store.list_entries(EntryKind::RoleAssignment, Some(partition)).await?;
    entries.iter().map(|e| assignment_from(&e.id, &e.body)).collect()
}

/// Every assignment, at every scope.
pub async fn all_role_assignments(store: &dyn Store) -> Result<Vec<RoleAssignment>, StoreError> {
    let entries = store.list_entries(EntryKind::RoleAssignment, None).await?;
    entries.iter().map(|e| assignment_from(&e.id, &e.body)).collect()
}

pub async fn get_role_assignment(store: &dyn Store, id: &str) -> Result<Option<RoleAssignment>, StoreError> {
    let entry = store.get_entry(EntryKind::RoleAssignment, &id.to_ascii_lowercase()).await?;
    entry.map(|e| assignment_from(&e.id, &e.body)).transpose()
}

/// Creates or replaces an assignment (ids are lowercased: they are GUIDs).
pub async fn put_role_assignment(
    store: &dyn Store,
    a: &RoleAssignment,
    now: Timestamp,
    activity: Option<ActivityEntry>,
) -> Result<(), StoreError> {
    let RoleAssignment { id, assignee, tenant, role, scope } = a;
    let (assignee_type, assignee) = match assignee {
        Assignee::Principal(p) => ("principal", p),
        Assignee::Group(g) => ("group", g),
    };
    let body = encode(&RoleAssignmentDocument {
        scope: scope.as_str().to_string(),
        role: role.name().to_string(),
        assignee_type: assignee_type.to_string(),
        assignee: assignee.clone(),
        tenant: tenant.clone(),
    })?;
    let id = id.to_ascii_lowercase();
    store
        .put_entry(PutEntry {
            kind: EntryKind::RoleAssignment,
            id: id.to_string(),
            partition: partition_of(scope).to_string(),
            body: body.to_string(),
            expect: Expect::Any,
            now,
            activity: activity.map(Box::new),
        })
        .await?;
    Ok(())
}

pub async fn delete_role_assignment(
    store: &dyn Store,
    id: &str,
    activity: Option<ActivityEntry>,
) -> Result<bool, StoreError> {
    store.delete_entry(EntryKind::RoleAssignment, &id.to_ascii_lowercase(), Expect::Any, activity).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_keep_their_field_names() {
        let a = RoleAssignmentDocument {
            scope: "/subscriptions/s".into(),
            role: "Reader".into(),
            assignee_type: "group".into(),
            assignee: "ops".into(),
            tenant: None,
        };
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::json!({"scope": "/subscriptions/s", "role": "Reader", "assigneeType": "group", "assignee": "ops"})
        );
        let body = r#"{"tenantId":"t","displayName":"D","state":"Warned","attributes":{"tier":"gold"},"registeredAt":1,"updatedAt":2}"#;
        let s = subscription_from("S-1", body).unwrap();
        assert_eq!(
            (s.id.as_str(), s.state, s.attributes["tier"].as_str()),
            ("s-1", SubscriptionState::Warned, Some("gold"))
        );
        assert!(subscription_from("s", r#"{"tenantId":"t","state":"Bogus","registeredAt":1,"updatedAt":2}"#).is_err());
        let odd = assignment_from("a", r#"{"scope":"/x","role":"Reader","assigneeType":"group","assignee":"g"}"#);
        assert!(!odd.unwrap().scope.is_canonical(), "read as stored, then reported");
        assert!(assignment_from("a", r#"{"scope":"/","role":"Boss","assigneeType":"group","assignee":"g"}"#).is_err());
    }
}
