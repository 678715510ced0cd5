//! Version 1 of an `events` row's body: what the columns (subscription, position, resource
//! key, kind, time) do not already say.

use serde::{Deserialize, Serialize};
use slipway_domain::event::{Event, EventKind, OperationEvent};
use slipway_domain::ids::{ResourceKey, SubscriptionId};
use slipway_domain::time::Timestamp;

use super::operation::{OperationRequestDocument, ProvisioningStateDocument};
use super::{DocumentError, check_version, is_version_1, operation_id, version_1};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EventDocument {
    #[serde(rename = "v", default = "version_1", skip_serializing_if = "is_version_1")]
    version: u32,
    /// The resource id in its original casing.
    #[serde(rename = "resourceId")]
    resource_id: String,
    #[serde(rename = "state", default, skip_serializing_if = "Option::is_none")]
    state: Option<ProvisioningStateDocument>,
    #[serde(rename = "previousState", default, skip_serializing_if = "Option::is_none")]
    previous_state: Option<ProvisioningStateDocument>,
    #[serde(rename = "generation", default, skip_serializing_if = "Option::is_none")]
    generation: Option<u64>,
    #[serde(rename = "operation", default, skip_serializing_if = "Option::is_none")]
    operation: Option<OperationEventDocument>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct OperationEventDocument {
    /// Canonical operation id (lowercase UUID).
    #[serde(rename = "id")]
    id: String,
    #[serde(rename = "request")]
    request: OperationRequestDocument,
    #[serde(rename = "action", default, skip_serializing_if = "Option::is_none")]
    action: Option<String>,
    #[serde(rename = "status")]
    status: ProvisioningStateDocument,
    #[serde(rename = "previousStatus", default, skip_serializing_if = "Option::is_none")]
    previous_status: Option<ProvisioningStateDocument>,
    #[serde(rename = "errorCode", default, skip_serializing_if = "Option::is_none")]
    error_code: Option<String>,
}

impl From<&Event> for EventDocument {
    fn from(e: &Event) -> Self {
        let Event {
            kind: _,
            subscription: _,
            resource_key: _,
            resource_id,
            time: _,
            state,
            previous_state,
            generation,
            operation,
        } = e;
        EventDocument {
            version: super::CURRENT,
            resource_id: resource_id.clone(),
            state: state.map(Into::into),
            previous_state: previous_state.map(Into::into),
            generation: *generation,
            operation: operation.as_ref().map(|o| {
                let OperationEvent { id, request, action, status, previous_status, error_code } = o;
                OperationEventDocument {
                    id: id.as_str().to_string(),
                    request: (*request).into(),
                    action: action.clone(),
                    status: (*status).into(),
                    previous_status: previous_status.map(Into::into),
                    error_code: error_code.clone(),
                }
            }),
        }
    }
}

/// The columns an `events` row keeps beside its body.
pub(crate) struct EventColumns<'a> {
    pub(crate) subscription: &'a str,
    pub(crate) resource_key: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) at: i64,
}

impl EventDocument {
    pub(crate) fn into_event(self, columns: EventColumns<'_>) -> Result<Event, DocumentError> {
        let EventDocument { version, resource_id, state, previous_state, generation, operation } = self;
        check_version(version)?;
        let kind = EventKind::parse(columns.kind)
            .ok_or_else(|| DocumentError(format!("event kind {:?} is not one this Slipway knows", columns.kind)))?;
        let operation = match operation {
            None => None,
            Some(o) => Some(OperationEvent {
                id: operation_id(o.id, "operation.id")?,
                request: o.request.into(),
                action: o.action,
                status: o.status.into(),
                previous_status: o.previous_status.map(Into::into),
                error_code: o.error_code,
            }),
        };
        Ok(Event {
            kind,
            subscription: SubscriptionId::new(columns.subscription),
            resource_key: ResourceKey::new(columns.resource_key.to_string()),
            resource_id,
            time: Timestamp(columns.at),
            state: state.map(Into::into),
            previous_state: previous_state.map(Into::into),
            generation,
            operation,
        })
    }
}
