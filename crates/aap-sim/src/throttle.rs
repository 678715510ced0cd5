//! Rate limiting as a gateway does it, and the accounting that checks clients honour it.
//!
//! Clients are told apart by their `User-Agent`. Every `429` (and every `503` carrying
//! `Retry-After`) the simulator sends records "blocked until sent + Retry-After" for that
//! client. A later request of the same client that *arrives* before that time is a
//! [`Violation`], unless it arrived within the grace (`SimConfig::retry_after_grace_ms`) after
//! the answer was sent: such a request was already on its way when the client learnt it had to
//! wait. Arrival is taken when the handler starts, which is never earlier than the client sent
//! the request, so a client that waits as told is never reported.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::RateLimitBurst;

/// Blocks older than this past their end are forgotten.
const KEEP_EXPIRED: Duration = Duration::from_secs(5);

/// A request that arrived before the time a `Retry-After` asked its client to wait for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The client's `User-Agent` (empty when it sent none).
    pub client: String,
    /// `"METHOD /normalised/path/"`, as in the request counter.
    pub endpoint: String,
    /// How much earlier than allowed it arrived, rounded up to whole milliseconds.
    pub early_by_ms: u64,
}

/// Faults injected since the counters were last reset, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    /// `429` answers (bursts and every-Nth).
    pub rate_limited: u64,
    /// `503` answers of `error_5xx_percent`.
    pub unavailable: u64,
    /// Requests whose connection was closed without an answer.
    pub dropped: u64,
    /// Launches that created a job whose response was then lost.
    pub lost_launch_responses: u64,
}

struct Block {
    sent: Instant,
    until: Instant,
}

#[derive(Default)]
struct Client {
    requests: u64,
    blocks: Vec<Block>,
}

/// Per-client request counts and Retry-After blocks.
#[derive(Default)]
pub(crate) struct Clients {
    map: BTreeMap<String, Client>,
}

impl Clients {
    /// Counts a request of `client` that arrived at `at`. Answers how early it is when it
    /// violates a block: it arrived before the block's end and later than `grace` after the
    /// answer that set it.
    pub fn arrive(&mut self, client: &str, at: Instant, grace: Duration) -> Option<Duration> {
        let c = self.client(client);
        c.requests += 1;
        c.blocks.retain(|b| b.until + KEEP_EXPIRED > at);
        c.blocks.iter().filter(|b| at > b.sent + grace && at < b.until).map(|b| b.until - at).max()
    }

    /// Records that `client` was told at `sent` to wait `retry_after`.
    pub fn block(&mut self, client: &str, sent: Instant, retry_after: Duration) {
        let until = sent.checked_add(retry_after).unwrap_or(sent + Duration::from_secs(365 * 86_400));
        self.client(client).blocks.push(Block { sent, until });
    }

    /// The end of the client's latest block, if it is still in the future.
    pub fn blocked_until(&self, client: &str, now: Instant) -> Option<Instant> {
        self.map.get(client)?.blocks.iter().map(|b| b.until).filter(|u| *u > now).max()
    }

    /// Until when a request of `client` still counts as in flight (the latest block's answer
    /// time plus `grace`), while that block lasts: a request arriving later, before
    /// [`Clients::blocked_until`], is a violation.
    pub fn in_flight_until(&self, client: &str, grace: Duration, now: Instant) -> Option<Instant> {
        self.map.get(client)?.blocks.iter().filter(|b| b.until > now).map(|b| b.sent + grace).max()
    }

    pub fn requests(&self) -> BTreeMap<String, u64> {
        self.map.iter().filter(|(_, c)| c.requests > 0).map(|(k, c)| (k.clone(), c.requests)).collect()
    }

    pub fn reset_requests(&mut self) {
        for c in self.map.values_mut() {
            c.requests = 0;
        }
    }

    fn client(&mut self, client: &str) -> &mut Client {
        self.map.entry(client.to_owned()).or_default()
    }
}

/// The `Retry-After` (whole seconds, at least 1) of a request at `now` if it falls into a burst
/// window of `burst` (windows start every `every_ms` from `since`): the rest of the window,
/// rounded up. `None` outside the windows. Windows at least as long as their period overlap:
/// every request is limited, with the window's length.
pub(crate) fn burst_retry_after(burst: &RateLimitBurst, since: Instant, now: Instant) -> Option<u64> {
    if burst.every_ms == 0 || burst.length_ms == 0 {
        return None;
    }
    let every = u128::from(burst.every_ms) * 1000;
    let length = u128::from(burst.length_ms) * 1000;
    let rest = if length >= every {
        // Windows overlap: always limited, for as long as a window lasts.
        length
    } else {
        let phase = now.saturating_duration_since(since).as_micros() % every;
        if phase >= length {
            return None;
        }
        length - phase
    };
    Some(u64::try_from(rest.div_ceil(1_000_000)).unwrap_or(u64::MAX).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn burst_windows_and_their_retry_after() {
        let t0 = Instant::now();
        let b = RateLimitBurst { every_ms: 10_000, length_ms: 2_500 };
        for (at, want) in [
            (0, Some(3)),
            (499, Some(3)),
            (500, Some(2)),
            (1_499, Some(2)),
            (1_500, Some(1)),
            (2_499, Some(1)),
            (2_500, None),
            (9_999, None),
            (10_000, Some(3)),
            (12_000, Some(1)),
            (12_600, None),
        ] {
            assert_eq!(burst_retry_after(&b, t0, t0 + ms(at)), want, "at {at} ms");
        }
        // Sub-second windows still ask for a whole second.
        let short = RateLimitBurst { every_ms: 1_000, length_ms: 200 };
        assert_eq!(burst_retry_after(&short, t0, t0 + ms(1_100)), Some(1));
        assert_eq!(burst_retry_after(&short, t0, t0 + ms(1_300)), None);
        // Off, and always.
        assert_eq!(burst_retry_after(&RateLimitBurst { every_ms: 0, length_ms: 5 }, t0, t0), None);
        assert_eq!(burst_retry_after(&RateLimitBurst { every_ms: 5, length_ms: 0 }, t0, t0), None);
        let always = RateLimitBurst { every_ms: 1_000, length_ms: 1_000 };
        assert_eq!(burst_retry_after(&always, t0, t0 + ms(5_000)), Some(1));
        let long = RateLimitBurst { every_ms: 1_000, length_ms: 4_000 };
        assert_eq!(burst_retry_after(&long, t0, t0 + ms(1_000)), Some(4));
    }

    #[test]
    fn early_requests_are_violations_after_the_grace() {
        let t0 = Instant::now();
        let grace = ms(100);
        let mut c = Clients::default();
        assert_eq!(c.arrive("a", t0, grace), None);
        c.block("a", t0, Duration::from_secs(2));
        // In flight when the 429 went out: tolerated.
        assert_eq!(c.arrive("a", t0 + ms(100), grace), None);
        // Sent after the client knew.
        assert_eq!(c.arrive("a", t0 + ms(101), grace), Some(ms(1_899)));
        assert_eq!(c.arrive("a", t0 + ms(1_999), grace), Some(ms(1)));
        // On time; other clients are not concerned.
        assert_eq!(c.arrive("a", t0 + ms(2_000), grace), None);
        assert_eq!(c.arrive("b", t0 + ms(500), grace), None);
        assert_eq!(c.blocked_until("a", t0 + ms(1_000)), Some(t0 + ms(2_000)));
        assert_eq!(c.blocked_until("a", t0 + ms(2_000)), None);
        assert_eq!(c.blocked_until("b", t0), None);
        assert_eq!(c.in_flight_until("a", grace, t0 + ms(1_000)), Some(t0 + grace));
        assert_eq!(c.in_flight_until("a", grace, t0 + ms(2_000)), None);
        assert_eq!(c.in_flight_until("b", grace, t0), None);
        // A second 429 sent to a request in flight extends the block; the first one's grace
        // still counts from when it was sent.
        c.block("a", t0 + ms(3_000), Duration::from_secs(1));
        c.block("a", t0 + ms(3_050), Duration::from_secs(1));
        assert_eq!(c.arrive("a", t0 + ms(3_120), grace), Some(ms(880)));
        assert_eq!(c.arrive("a", t0 + ms(4_040), grace), Some(ms(10)));
        assert_eq!(c.requests(), BTreeMap::from([("a".to_owned(), 7), ("b".to_owned(), 1)]));
        c.reset_requests();
        assert!(c.requests().is_empty());
        assert_eq!(c.blocked_until("a", t0 + ms(4_000)), Some(t0 + ms(4_050)));
    }
}
