//! A subscription's resource groups: those with a record of their own
//! (`slipway_domain::group`) and those that only hold resources (made before groups were
//! records), merged in key order. A skip scan of the primary key, written once for both
//! engines over [`Store::list_resources`]: each group costs one read of its record and one
//! of its first resource, however many resources it holds.

use slipway_domain::ids::{ResourceKey, SubscriptionId, TypeKey};
use slipway_domain::resource::ResourceRecord;

use crate::{ListQuery, Store, StoreError};

/// A page of resource groups in key order (lowercased names compare as keys do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPage {
    /// Each group's name, as its record or else its first resource names it.
    pub items: Vec<String>,
    /// What each item was found by, in the same order: the group's record, or for a group
    /// without one, its first resource — so a list shows each without reading it again.
    pub found: Vec<ResourceRecord>,
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
    let mut found: Vec<ResourceRecord> = Vec::new();
    let mut cursor = after.map(past);
    while found.len() <= limit {
        let first = |type_key: Option<TypeKey>| ListQuery {
            subscription: subscription.clone(),
            resource_group: None,
            type_key,
            under: None,
            after: cursor.clone(),
            limit: 1,
        };
        let record =
            store.list_resources(&first(Some(crate::listing::group_type_key()))).await?.items.into_iter().next();
        let holder = store.list_resources(&first(None)).await?.items.into_iter().next();
        let next = match (record, holder) {
            // The same group's record and resource: the record names it.
            (Some(a), Some(b)) if a.key() <= ResourceKey::group(subscription, &b.id.resource_group_key()) => a,
            (Some(_), Some(b)) => b,
            (a, b) => match a.or(b) {
                Some(r) => r,
                None => break,
            },
        };
        cursor = Some(past(&next.id.resource_group));
        found.push(next);
    }
    let next = (found.len() > limit).then(|| {
        found.truncate(limit);
        found[limit - 1].id.resource_group_key()
    });
    let items = found.iter().map(|r| r.id.resource_group.clone()).collect();
    Ok(GroupPage { items, found, next })
}
