//! What a list asks the store for and the page it answers: resources by subscription, group,
//! type or parent, and a subscription's operations newest first, with the key or id range
//! each engine reads for them.

use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId, TypeKey};
use slipway_domain::resource::ResourceRecord;
use slipway_domain::{Operation, ProvisioningState, Timestamp};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListQuery {
    pub subscription: SubscriptionId,
    /// Lowercased resource group; `None` lists the whole subscription.
    pub resource_group: Option<String>,
    /// Only resources of this type; `None` lists every type, in key order, but resource
    /// groups (their own records are listed by their type; see `groups`).
    pub type_key: Option<TypeKey>,
    /// Only resources nested under this one (a child type's collection under its parent).
    pub under: Option<ResourceKey>,
    /// Continue after this resource key (exclusive).
    pub after: Option<ResourceKey>,
    pub limit: usize,
}

impl ListQuery {
    /// The key range the list reads, `(exclusive lower bound, exclusive upper bound)`: the
    /// keys under the narrowest of the subscription, the group and `under`
    /// (`/subscriptions/{s}[/resourcegroups/{g}]/…` or `{under}/…`), after `after`. A key is
    /// its id lowercased, and `0` follows `/`: `{p}0` bounds every key starting `{p}/`.
    pub(crate) fn key_range(&self) -> (String, String) {
        let prefix = match (&self.under, &self.resource_group) {
            (Some(parent), _) => parent.as_str().to_string(),
            (None, Some(group)) => ResourceKey::group(&self.subscription, group).into_string(),
            (None, None) => format!("/subscriptions/{}", self.subscription.as_str()),
        };
        let after = self.after.as_ref().map(|k| k.as_str().to_string()).unwrap_or_default();
        (after.max(format!("{prefix}/")), format!("{prefix}0"))
    }
}

/// The type key of a resource group's record.
pub(crate) fn group_type_key() -> TypeKey {
    TypeKey::new(slipway_domain::ids::GROUP_NAMESPACE, slipway_domain::ids::GROUP_TYPE_NAME)
}

/// A page of a subscription's operations ([`Store::list_operations`](crate::Store::list_operations)), newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationQuery {
    pub subscription: SubscriptionId,
    /// Only operations in this state.
    pub status: Option<ProvisioningState>,
    /// Continue after this operation (exclusive), in the list's order.
    pub after: Option<OperationId>,
    pub limit: usize,
    /// Operations expired at `now` are left out, as [`Store::get_operation`](crate::Store::get_operation) leaves them out.
    pub now: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationPage {
    pub items: Vec<Operation>,
    /// The last item's id when more may follow.
    pub next: Option<OperationId>,
}

impl OperationQuery {
    /// The id range the list reads downwards from, exclusive: below `after`, or below every
    /// id (ids are lowercase hex and dashes; `~` sorts after them all).
    pub(crate) fn below(&self) -> String {
        self.after.as_ref().map_or_else(|| "~".to_string(), |id| id.as_str().to_string())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub items: Vec<ResourceRecord>,
    /// Key of the last item when more may follow.
    pub next: Option<ResourceKey>,
}
