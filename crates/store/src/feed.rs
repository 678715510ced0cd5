//! The event feed's reads, engine-independent: which keys a scope covers, and when a
//! position can no longer be continued from. Each engine only runs the SQL
//! (docs/store.md#the-event-feed).

use slipway_domain::event::Event;
use slipway_domain::ids::{ResourceKey, SubscriptionId};

/// Which of a subscription's events a read returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventQuery {
    pub subscription: SubscriptionId,
    pub scope: EventScope,
    /// Events after this position; 0 is before the first.
    pub after: u64,
    pub limit: usize,
}

/// The resources whose events a read returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventScope {
    Subscription,
    /// A resource group (any casing).
    ResourceGroup(String),
    /// A resource and everything nested under it.
    Resource(ResourceKey),
}

/// What a read of the feed found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventRead {
    /// The events after the position in order, each with its own, and the subscription's
    /// newest position (so a reader that saw none still moves on).
    Page { items: Vec<(u64, Event)>, last: u64 },
    /// The position cannot be continued from: events after it were pruned, or it is past
    /// the feed's newest (a store restored from a backup). The reader starts over, from a
    /// full read, at `last`.
    Gone { oldest: u64, last: u64 },
}

impl EventQuery {
    /// The keys the scope covers as `(exact, after, before)`: the key itself, or any key
    /// strictly between the bounds. A key is its id lowercased, and `0` follows `/`.
    pub(crate) fn key_bounds(&self) -> (String, String, String) {
        let prefix = match &self.scope {
            EventScope::Subscription => format!("/subscriptions/{}", self.subscription.as_str()),
            EventScope::ResourceGroup(group) => ResourceKey::group(&self.subscription, group).into_string(),
            EventScope::Resource(key) => key.as_str().to_string(),
        };
        (prefix.clone(), format!("{prefix}/"), format!("{prefix}0"))
    }

    /// Whether reading after `self.after` would skip events: `oldest` is the subscription's
    /// oldest kept position (none when none is kept), `last` its newest ever given (0 when
    /// none was). Positions are dense, so a gap before `oldest` means pruned events.
    pub(crate) fn gone(&self, oldest: Option<u64>, last: u64) -> Option<EventRead> {
        let pruned = match oldest {
            Some(oldest) => self.after.saturating_add(1) < oldest,
            None => self.after < last,
        };
        (pruned || self.after > last).then(|| EventRead::Gone { oldest: oldest.unwrap_or(last + 1), last })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(after: u64) -> EventQuery {
        EventQuery { subscription: "s".into(), scope: EventScope::Subscription, after, limit: 10 }
    }

    #[test]
    fn a_position_is_gone_when_events_after_it_were_pruned_or_it_is_past_the_newest() {
        let gone = |after, oldest, last| query(after).gone(oldest, last).is_some();
        assert!(!gone(0, None, 0), "an empty feed read from the start");
        assert!(!gone(0, Some(1), 5), "nothing pruned");
        assert!(!gone(3, Some(4), 5), "the next one is kept");
        assert!(!gone(5, Some(4), 5), "at the newest");
        assert!(gone(2, Some(4), 5), "3 was pruned");
        assert!(gone(0, None, 5), "everything was pruned");
        assert!(!gone(5, None, 5), "everything was pruned, after it was read");
        assert!(gone(6, Some(1), 5), "past the newest: a restored store");
        assert_eq!(query(0).gone(None, 5), Some(EventRead::Gone { oldest: 6, last: 5 }));
    }

    #[test]
    fn scopes_cover_their_keys_and_what_is_nested_under_them() {
        let q = |scope| EventQuery { scope, ..query(0) }.key_bounds();
        assert_eq!(q(EventScope::ResourceGroup("RG".into())).1, "/subscriptions/s/resourcegroups/rg/");
        let (exact, after, before) = q(EventScope::Resource(ResourceKey::new("/subscriptions/s/x/a")));
        assert_eq!(
            (exact.as_str(), after.as_str(), before.as_str()),
            ("/subscriptions/s/x/a", "/subscriptions/s/x/a/", "/subscriptions/s/x/a0")
        );
        let sibling = "/subscriptions/s/x/a-b";
        assert!(!(sibling == exact || (sibling > after.as_str() && sibling < before.as_str())), "a-b is not under a");
    }
}
