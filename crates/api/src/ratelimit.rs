//! Per-principal rate limits: a token bucket per principal (name and tenant), with the rate
//! of the first override that names the principal or one of its groups, else the default.
//! Over the limit: `429 TooManyRequests` with `Retry-After`. The buckets live in memory per
//! replica; idle ones are forgotten once they are full again.

use std::collections::HashMap;
use std::sync::Mutex;

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
}

pub struct RateLimiter {
    limits: RateLimits,
    /// Each bucket with the rate it fills at (a sweep must judge it by its own rate).
    buckets: Mutex<HashMap<(String, String), (TokenBucket, Rate)>>,
}

/// Past this many buckets, the full ones are dropped before adding another.
const SWEEP_AT: usize = 10_000;

impl RateLimiter {
    pub fn new(limits: RateLimits) -> Self {
        RateLimiter { limits, buckets: Mutex::new(HashMap::new()) }
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

    /// One request by `who` at `now`: `Ok`, or the `429` to answer.
    pub fn check(&self, who: &Principal, now: Timestamp) -> Result<(), ArmError> {
        if who.kind == PrincipalKind::Local {
            return Ok(());
        }
        let rate = self.rate_of(who);
        let key = (who.name.clone(), who.tenant.clone().unwrap_or_default());
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= SWEEP_AT && !buckets.contains_key(&key) {
            buckets.retain(|_, (b, r)| !b.is_full(*r, now));
        }
        let (bucket, _) = buckets.entry(key).or_insert_with(|| (TokenBucket::full(rate, now), rate));
        bucket.take(rate, now).map_err(|wait| {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            let mut e = ArmError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "TooManyRequests",
                format!(
                    "The client '{}' sent more than {} requests per second (burst {}); retry after {secs} s.",
                    who.name, rate.per_second, rate.burst
                ),
            );
            e.retry_after = Some(secs);
            e
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn who(name: &str, groups: &[&str]) -> Principal {
        Principal {
            name: name.into(),
            tenant: Some("t".into()),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            kind: PrincipalKind::User,
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
        assert!(limiter.check(&alice, now).is_ok());
        assert!(limiter.check(&alice, now).is_ok());
        let e = limiter.check(&alice, now).unwrap_err();
        assert_eq!((e.status.as_u16(), e.body.code.as_str(), e.retry_after), (429, "TooManyRequests", Some(1)));
        // Bob is not slowed by Alice; the CI group gets its own rate.
        assert!(limiter.check(&who("bob", &[]), now).is_ok());
        let bot = who("bot", &["ci"]);
        assert_eq!((0..6).filter(|_| limiter.check(&bot, now).is_ok()).count(), 5);
        // A second later Alice has one more token; the local user is never limited.
        assert!(limiter.check(&alice, now.add(Duration::from_secs(1))).is_ok());
        assert!((0..1000).all(|_| limiter.check(&Principal::local(), now).is_ok()));
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
        assert_eq!(limiter.buckets.lock().unwrap().len(), 1);
    }
}
