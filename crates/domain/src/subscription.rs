//! The subscription registry's rules: a subscription is registered by the platform with its
//! tenant and moves through ARM's lifecycle states; what a request may do depends on the
//! state.

use serde_json::{Map, Value};

use crate::ids::SubscriptionId;
use crate::time::Timestamp;

/// ARM's subscription lifecycle states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubscriptionState {
    Registered,
    /// Past due or flagged: existing resources stay, nothing new is built; deletes allowed.
    Warned,
    /// Read-only: nothing changes until it is registered again.
    Suspended,
    /// Its resources are deprovisioned; read-only while that happens.
    Deleted,
    /// The subscription no longer uses this provider: read-only.
    Unregistered,
}

impl SubscriptionState {
    pub const ALL: [SubscriptionState; 5] = [
        SubscriptionState::Registered,
        SubscriptionState::Warned,
        SubscriptionState::Suspended,
        SubscriptionState::Deleted,
        SubscriptionState::Unregistered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionState::Registered => "Registered",
            SubscriptionState::Warned => "Warned",
            SubscriptionState::Suspended => "Suspended",
            SubscriptionState::Deleted => "Deleted",
            SubscriptionState::Unregistered => "Unregistered",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str().eq_ignore_ascii_case(s))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Subscription {
    pub id: SubscriptionId,
    /// The identity provider tenant the subscription belongs to.
    pub tenant_id: String,
    pub display_name: String,
    pub state: SubscriptionState,
    /// Free-form tenant attributes (e.g. storage classes, quotas) handed to every job.
    pub attributes: Map<String, Value>,
    pub registered_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What a request wants to do to a subscription's resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    Read,
    /// PUT, PATCH, POST actions, cancel.
    Change,
    Delete,
}

/// Why a subscription refuses a request (each an ARM `409` code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    NotRegistered,
    Warned,
    Suspended,
    Deleted,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Refusal::NotRegistered => "SubscriptionNotRegistered",
            Refusal::Warned => "SubscriptionWarned",
            Refusal::Suspended => "SubscriptionSuspended",
            Refusal::Deleted => "SubscriptionDeleted",
        }
    }

    pub fn message(self, id: &str) -> String {
        match self {
            Refusal::NotRegistered => format!("The subscription '{id}' is not registered with this provider."),
            Refusal::Warned => format!(
                "The subscription '{id}' is in the Warned state: existing resources can be read and deleted, nothing can be created or changed."
            ),
            Refusal::Suspended => format!("The subscription '{id}' is suspended: its resources are read-only."),
            Refusal::Deleted => format!("The subscription '{id}' is deleted: its resources are being deprovisioned."),
        }
    }
}

/// Whether `intent` may go ahead in `subscription` (`None`: not in the registry). With
/// `registration_required` off (the local mode), an unregistered subscription is open.
pub fn admits(subscription: Option<&Subscription>, intent: Intent, registration_required: bool) -> Result<(), Refusal> {
    let state = match subscription {
        Some(s) => s.state,
        None if registration_required && intent != Intent::Read => return Err(Refusal::NotRegistered),
        None => return Ok(()),
    };
    match (state, intent) {
        (_, Intent::Read) | (SubscriptionState::Registered, _) => Ok(()),
        (SubscriptionState::Warned, Intent::Delete) => Ok(()),
        (SubscriptionState::Warned, _) => Err(Refusal::Warned),
        (SubscriptionState::Suspended, _) => Err(Refusal::Suspended),
        (SubscriptionState::Deleted, _) => Err(Refusal::Deleted),
        (SubscriptionState::Unregistered, _) => Err(Refusal::NotRegistered),
    }
}
