//! A subscription's resource groups, read over the resources (a group exists while it holds
//! one): a skip scan of the primary key, written once for both engines over
//! [`Store::list_resources`] — each group costs one read of one row, however many resources
//! it holds.

use slipway_domain::ids::{ResourceKey, SubscriptionId};

use crate::{ListQuery, Store, StoreError};

/// A page of resource groups in key order (lowercased names compare as keys do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPage {
    /// Each group's name in the casing of its first resource.
    pub items: Vec<String>,
    /// The last item, lowercased, when more may follow.
    pub next: Option<String>,
}

/// The groups of `subscription` that hold resources, after the group `after` (lowercased),
/// at most `limit`.
pub async fn resource_groups(
    store: &dyn Store,
    subscription: &SubscriptionId,
    after: Option<&str>,
    limit: usize,
) -> Result<GroupPage, StoreError> {
    let limit = limit.max(1);
    // Keys of group `g` start `…/resourcegroups/g/`, and `0` follows `/`: every key after
    // `…/resourcegroups/g0` is in a later group.
    let past = |group: &str| ResourceKey::new(format!("{}0", ResourceKey::group(subscription, group)));
    let mut items: Vec<String> = Vec::new();
    let mut cursor = after.map(past);
    while items.len() <= limit {
        let query = ListQuery {
            subscription: subscription.clone(),
            resource_group: None,
            type_key: None,
            under: None,
            after: cursor,
            limit: 1,
        };
        let Some(first) = store.list_resources(&query).await?.items.into_iter().next() else { break };
        cursor = Some(past(&first.id.resource_group));
        items.push(first.id.resource_group);
    }
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items[limit - 1].to_ascii_lowercase()
    });
    Ok(GroupPage { items, next })
}
