//! Token buckets for per-principal rate limits: refilled continuously at `per_second` up to
//! `burst`, one token per request. Pure: time comes in.

use std::time::Duration;

use crate::time::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    at: Timestamp,
}

impl TokenBucket {
    pub fn full(rate: Rate, now: Timestamp) -> Self {
        TokenBucket { tokens: rate.burst, at: now }
    }

    fn refill(&mut self, rate: Rate, now: Timestamp) {
        let elapsed = now.millis_after(self.at).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * rate.per_second).min(rate.burst);
        self.at = self.at.max(now);
    }

    /// Takes a token at `now`; otherwise how long until one is there.
    pub fn take(&mut self, rate: Rate, now: Timestamp) -> Result<(), Duration> {
        self.refill(rate, now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        if rate.per_second <= 0.0 {
            return Err(Duration::from_secs(3600));
        }
        Err(Duration::from_secs_f64((1.0 - self.tokens) / rate.per_second))
    }

    /// Whole tokens left: how many more requests go through at once (ARM's
    /// `x-ms-ratelimit-remaining-*` headers).
    pub fn remaining(&self) -> u64 {
        self.tokens.max(0.0).floor() as u64
    }

    /// Back to full by `now`: nothing is lost by forgetting it.
    pub fn is_full(&self, rate: Rate, now: Timestamp) -> bool {
        let mut b = *self;
        b.refill(rate, now);
        b.tokens >= rate.burst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let rate = Rate { per_second: 2.0, burst: 3.0 };
        let t = |ms| Timestamp::from_millis(ms);
        let mut b = TokenBucket::full(rate, t(0));
        assert_eq!((b.take(rate, t(0)), b.take(rate, t(0)), b.take(rate, t(0))), (Ok(()), Ok(()), Ok(())));
        assert_eq!(b.take(rate, t(0)), Err(Duration::from_millis(500)));
        assert_eq!(b.take(rate, t(250)), Err(Duration::from_millis(250)));
        assert_eq!(b.take(rate, t(500)), Ok(()));
        assert!(!b.is_full(rate, t(1000)));
        assert!(b.is_full(rate, t(2000)));
        // A clock that steps back does not mint tokens.
        let mut b = TokenBucket::full(rate, t(10_000));
        for _ in 0..3 {
            b.take(rate, t(10_000)).unwrap();
        }
        assert!(b.take(rate, t(9_000)).is_err());
        assert!(
            TokenBucket::full(Rate { per_second: 0.0, burst: 0.0 }, t(0))
                .take(Rate { per_second: 0.0, burst: 0.0 }, t(0))
                .is_err()
        );
    }
}
