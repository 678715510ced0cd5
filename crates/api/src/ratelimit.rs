//! Rate limits: a token bucket per principal (name and tenant), with the rate of the first
//! override that names the principal or one of its groups, else the default; and, before
//! anyone is authenticated, a bucket per client address that every failed sign-in and every
//! request to an unauthenticated endpoint that does work (`/openapi.json`, `/metrics`, the
//! webhooks) takes from — an address out of tokens is answered before its credential is even
//! checked. Over a limit: `429 TooManyRequests` with `Retry-After`. The buckets live in memory
//! per replica; idle ones are forgotten once they are full again.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::StatusCode;
use slipway_domain::access::Assignee;
use slipway_domain::rate::{Rate, TokenBucket};
use slipway_domain::{Principal, PrincipalKind, Timestamp};

use crate::error::ArmError;

#[derive(Clone, Debug)]
pub struct RateLimits {
    pub default: Rate,
    /// The first that names the principal (or a group it is in) sets its rate.
    pub overrides: Vec<(Assignee, Rate)>,
}

impl RateLimits {
    pub const DEFAULT: Rate = Rate { per_second: 50.0, burst: 100.0 };
    /// Per client address: failed sign-ins and requests to `/openapi.json`, `/metrics` and
    /// the webhooks (a failed webhook token only).
    pub const UNAUTHENTICATED: Rate = Rate { per_second: 10.0, burst: 50.0 };
}

/// Token buckets by key, each with the rate it fills at (a sweep must judge it by its own).
struct Buckets<K> {
    map: Mutex<HashMap<K, (TokenBucket, Rate)>>,
}

/// Past this many buckets, the full ones are dropped before adding another.
const SWEEP_AT: usize = 10_000;

impl<K: Hash + Eq> Buckets<K> {
    fn new() -> Self {
        Buckets { map: Mutex::new(HashMap::new()) }
    }

    /// Takes a token from `key`'s bucket (`take`), or only looks whether one is there: `Ok`
    /// with the whole tokens left after it, `Err` with how long until one is.
    fn draw(&self, key: K, rate: Rate, now: Timestamp, take: bool) -> Result<u64, Duration> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if !take && !map.contains_key(&key) {
            return Ok(rate.burst as u64);
        }
        if map.len() >= SWEEP_AT && !map.contains_key(&key) {
            map.retain(|_, (b, r)| !b.is_full(*r, now));
        }
        let (bucket, _) = map.entry(key).or_insert_with(|| (TokenBucket::full(rate, now), rate));
        if take {
            return bucket.take(rate, now).map(|()| bucket.remaining());
        }
        let mut probe = *bucket;
        probe.take(rate, now).map(|()| probe.remaining())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

fn too_many(wait: Duration, message: impl FnOnce(u64) -> String) -> ArmError {
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    let mut e = ArmError::new(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message(secs));
    e.retry_after = Some(u32::try_from(secs).unwrap_or(u32::MAX));
    e
}

pub struct RateLimiter {
    limits: RateLimits,
    buckets: Buckets<(String, String)>,
    /// `None`: nothing is limited before authentication.
    per_address: Option<Rate>,
    addresses: Buckets<IpAddr>,
}

impl RateLimiter {
    pub fn new(limits: RateLimits) -> Self {
        RateLimiter { limits, buckets: Buckets::new(), per_address: None, addresses: Buckets::new() }
    }

    /// Also limits, per client address, failed sign-ins and unauthenticated requests.
    pub fn with_address_limit(mut self, rate: Rate) -> Self {
        self.per_address = Some(rate);
        self
    }

    /// One failed sign-in or unauthenticated request from `addr` (`take`), or a look whether
    /// `addr` may still try (before its credential is checked): `Ok`, or the `429`.
    pub fn check_address(&self, addr: Option<IpAddr>, now: Timestamp, take: bool) -> Result<(), ArmError> {
        let (Some(rate), Some(addr)) = (self.per_address, addr) else { return Ok(()) };
        self.addresses.draw(addr, rate, now, take).map(drop).map_err(|wait| {
            too_many(wait, |secs| {
                format!(
                    "Too many unauthenticated requests or failed sign-ins from this address (more than {} per \
                     second, burst {}); retry after {secs} s.",
                    rate.per_second, rate.burst
                )
            })
        })
    }

    fn rate_of(&self, who: &Principal) -> Rate {
        self.limits
            .overrides
            .iter()
            .find(|(a, _)| match a {
                Assignee::Principal(name) => *name == who.name,
                Assignee::Group(g) => who.groups.contains(g),
            })
            .map_or(self.limits.default, |(_, r)| *r)
    }

    /// One request by `who` at `now`: `Ok` with how many more `who` may send at once (none
    /// for the local principal, which is not limited), or the `429` to answer.
    pub fn check(&self, who: &Principal, now: Timestamp) -> Result<Option<u64>, ArmError> {
        if who.kind == PrincipalKind::Local {
            return Ok(None);
        }
        let rate = self.rate_of(who);
        let key = (who.name.clone(), who.tenant.clone().unwrap_or_default());
        self.buckets.draw(key, rate, now, true).map(Some).map_err(|wait| {
            too_many(wait, |secs| {
                format!(
                    "The client '{}' sent more than {} requests per second (burst {}); retry after {secs} s.",
                    who.name, rate.per_second, rate.burst
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(name: &str, groups: &[&str]) -> Principal {
        Principal {
            name: name.into(),
            tenant: Some("t".into()),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            kind: PrincipalKind::User,
            confined_to: Vec::new(),
        }
    }

    #[test]
    fn each_principal_has_its_own_bucket_at_its_own_rate() {
        let limiter = RateLimiter::new(RateLimits {
            default: Rate { per_second: 1.0, burst: 2.0 },
            overrides: vec![(Assignee::Group("ci".into()), Rate { per_second: 10.0, burst: 5.0 })],
        });
        let now = Timestamp::from_millis(1_000_000);
        let alice = who("alice", &[]);
        // Each answer says how many more may follow at once.
        assert_eq!(limiter.check(&alice, now), Ok(Some(1)));
        assert_eq!(limiter.check(&alice, now), Ok(Some(0)));
        let e = limiter.check(&alice, now).unwrap_err();
        assert_eq!((e.status.as_u16(), e.body.code.as_str(), e.retry_after), (429, "TooManyRequests", Some(1)));
        // Bob is not slowed by Alice; the CI group gets its own rate.
        assert!(limiter.check(&who("bob", &[]), now).is_ok());
        let bot = who("bot", &["ci"]);
        assert_eq!((0..6).filter(|_| limiter.check(&bot, now).is_ok()).count(), 5);
        // A second later Alice has one more token; the local user is never limited.
        assert!(limiter.check(&alice, now.add(Duration::from_secs(1))).is_ok());
        assert!((0..1000).all(|_| limiter.check(&Principal::local(), now) == Ok(None)));
    }

    #[test]
    fn full_buckets_are_forgotten_when_there_are_many() {
        let rate = Rate { per_second: 1000.0, burst: 1.0 };
        let limiter = RateLimiter::new(RateLimits { default: rate, overrides: vec![] });
        let now = Timestamp::from_millis(0);
        for i in 0..SWEEP_AT {
            limiter.check(&who(&format!("p{i}"), &[]), now).unwrap();
        }
        limiter.check(&who("late", &[]), now.add(Duration::from_secs(1))).unwrap();
        assert_eq!(limiter.buckets.len(), 1);
    }

    #[test]
    fn an_address_out_of_tokens_is_refused_before_its_credential_is_checked() {
        let limiter = RateLimiter::new(RateLimits { default: RateLimits::DEFAULT, overrides: vec![] })
            .with_address_limit(Rate { per_second: 1.0, burst: 2.0 });
        let now = Timestamp::from_millis(1_000_000);
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        assert!(limiter.check_address(Some(a), now, false).is_ok(), "looking takes nothing");
        assert_eq!(limiter.addresses.len(), 0, "and makes no bucket");
        assert!(limiter.check_address(Some(a), now, true).is_ok());
        assert!(limiter.check_address(Some(a), now, true).is_ok());
        assert!(limiter.check_address(Some(a), now, false).is_err(), "two failures spent the burst");
        let e = limiter.check_address(Some(a), now, true).unwrap_err();
        assert_eq!((e.status.as_u16(), e.retry_after), (429, Some(1)));
        assert!(limiter.check_address(Some(b), now, false).is_ok(), "another address is not slowed");
        assert!(limiter.check_address(Some(a), now.add(Duration::from_secs(1)), false).is_ok());
        assert!(limiter.check_address(None, now, true).is_ok(), "no address (a test client): nothing to key");
        let unlimited = RateLimiter::new(RateLimits { default: RateLimits::DEFAULT, overrides: vec![] });
        assert!((0..100).all(|_| unlimited.check_address(Some(a), now, true).is_ok()));
    }
}
