//! Retry delays: the one place Slipway computes how long to wait before trying again.
//!
//! A [`RetryPolicy`] is a base delay doubling up to a maximum, with optional jitter. It is
//! asked in one of two ways:
//!
//! * **by failure count** ([`RetryPolicy::delay`]): `base · 2^(failures − 1)`, capped at
//!   `max` — launch retries ([`launch_retry`]), AAP GET retries, notification retries and a
//!   destination's back-off, the listener's accept-error backoff, a worker's store retries
//!   (and, by steps instead of failures, a long job's poll interval:
//!   `TypePolicy::poll_interval_at`);
//! * **by the gap between the last two failures** ([`RetryPolicy::after_gap`]): OSAC's
//!   history-derived rule, twice the gap clamped to `[base, max]`, so the history itself is
//!   the counter (`crate::backoff::BackoffPolicy` finds the gap). With failures seen at once
//!   the two give the same sequence.
//!
//! Jitter (up to a fraction of the delay, added) comes from a [`JitterSource`] the caller
//! passes in — a [`SplitMix64`] seeded by the caller, or a [`FixedJitter`] in tests — never
//! from a clock: the same source gives the same delays. Pure: no I/O, no clock.

use std::time::Duration;

use crate::config_version::fnv1a64;

/// Base delay doubling to a maximum, plus up to `jitter` of the delay at random.
///
/// The constructors keep `base ≤ max`; they differ only in how they settle a base above the
/// maximum (see each).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    base: Duration,
    max: Duration,
    /// Fraction of the delay added at most, in `[0, 1]`; 0: none.
    jitter: f64,
}

impl RetryPolicy {
    /// `base`, doubling per failure, capped at `max`. A `base` above `max` is lowered to it:
    /// the cap always holds.
    pub fn exponential(base: Duration, max: Duration) -> Self {
        RetryPolicy { base: base.min(max), max, jitter: 0.0 }
    }

    /// OSAC's history-derived backoff ([`RetryPolicy::after_gap`]): twice the gap clamped to
    /// `[base, max]`. A `max` below `base` is raised to it: the floor always holds, as OSAC's
    /// clamp has it.
    pub fn history(base: Duration, max: Duration) -> Self {
        RetryPolicy { base, max: max.max(base), jitter: 0.0 }
    }

    /// The same policy with up to `fraction` of each delay added as jitter (clamped to
    /// `[0, 1]`; not a number: none), still never above `max`.
    pub fn with_jitter(self, fraction: f64) -> Self {
        let jitter = if fraction.is_nan() { 0.0 } else { fraction.clamp(0.0, 1.0) };
        RetryPolicy { jitter, ..self }
    }

    pub fn base(&self) -> Duration {
        self.base
    }

    pub fn max(&self) -> Duration {
        self.max
    }

    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// The wait after `failures` failures in a row (1: the first): `base · 2^(failures − 1)`,
    /// capped at `max` (saturating, never overflowing); zero for no failure. No jitter.
    pub fn delay(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// [`RetryPolicy::delay`] plus jitter from one draw of `source`.
    pub fn delay_with_jitter(&self, failures: u32, source: &mut impl JitterSource) -> Duration {
        self.jittered(self.delay(failures), source.draw())
    }

    /// `delay` plus `jitter · delay · u`, where `u` in `[0, 1)` is read from `draw` (its top
    /// 53 bits; 0 adds nothing, `u64::MAX` nearly the whole fraction), at most `max` (or
    /// `delay`, if that is more).
    pub fn jittered(&self, delay: Duration, draw: u64) -> Duration {
        if self.jitter == 0.0 || delay.is_zero() {
            return delay;
        }
        let unit = (draw >> 11) as f64 / (1u64 << 53) as f64;
        let extra = Duration::try_from_secs_f64(delay.as_secs_f64() * self.jitter * unit).unwrap_or(Duration::ZERO);
        delay.saturating_add(extra).min(self.max.max(delay))
    }

    /// OSAC's rule: the wait when the last two failures were `gap` apart (trigger times):
    /// twice the gap, clamped to `[base, max]`; `base` when there is no such gap (fewer than
    /// two failures) or it is zero. No jitter.
    pub fn after_gap(&self, gap: Option<Duration>) -> Duration {
        match gap {
            Some(gap) if !gap.is_zero() => gap.saturating_mul(2).clamp(self.base, self.max),
            _ => self.base,
        }
    }
}

/// First retry of a launch whose request failed (the same idempotency key is retried).
pub const LAUNCH_RETRY_BASE: Duration = Duration::from_secs(2);
/// Launch retries wait at most this long, and at most [`LAUNCH_RETRY_POLLS`] poll intervals.
pub const LAUNCH_RETRY_MAX: Duration = Duration::from_secs(64);
pub const LAUNCH_RETRY_POLLS: u32 = 30;

/// The retry of a failed launch request (`Launch attempt n failed`), for a type polled every
/// `poll_interval`: 2 s doubling, at most 64 s and at most 30 poll intervals (of at least
/// 1 s). With the default 2 s: 2, 4, 8, 16, 32, 60, 60 s.
pub fn launch_retry(poll_interval: Duration) -> RetryPolicy {
    let polls = poll_interval.max(Duration::from_secs(1)).saturating_mul(LAUNCH_RETRY_POLLS);
    RetryPolicy::exponential(LAUNCH_RETRY_BASE, LAUNCH_RETRY_MAX.min(polls))
}

/// Where jitter comes from: uniformly distributed 64-bit draws.
pub trait JitterSource {
    fn draw(&mut self) -> u64;
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny deterministic generator, good enough to
/// spread retries. The same seed gives the same draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// Seeded by the FNV-1a 64 hash of `name` (a client or instance id): distinct names give
    /// distinct sequences, the same name the same one.
    pub fn from_name(name: &str) -> Self {
        SplitMix64::new(fnv1a64(name.as_bytes()))
    }
}

impl JitterSource for SplitMix64 {
    fn draw(&mut self) -> u64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The same draw every time: [`FixedJitter::NONE`] adds no jitter, [`FixedJitter::MOST`]
/// nearly the whole fraction. For tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedJitter(pub u64);

impl FixedJitter {
    pub const NONE: FixedJitter = FixedJitter(0);
    pub const MOST: FixedJitter = FixedJitter(u64::MAX);
}

impl JitterSource for FixedJitter {
    fn draw(&mut self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn splitmix64_reference_outputs() {
        // The reference implementation's first outputs for seed 0.
        let mut g = SplitMix64::new(0);
        assert_eq!(
            [g.draw(), g.draw(), g.draw()],
            [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f]
        );
        assert_ne!(SplitMix64::from_name("node-a/aap").draw(), SplitMix64::from_name("node-b/aap").draw());
        assert_eq!(SplitMix64::from_name("node-a/aap"), SplitMix64::from_name("node-a/aap"));
    }

    #[test]
    fn constructors_keep_base_at_most_max() {
        let p = RetryPolicy::exponential(10 * S, 3 * S);
        assert_eq!((p.base(), p.max(), p.delay(1), p.delay(5)), (3 * S, 3 * S, 3 * S, 3 * S), "the cap holds");
        let p = RetryPolicy::history(10 * S, 3 * S);
        assert_eq!((p.base(), p.max(), p.after_gap(None), p.after_gap(Some(S))), (10 * S, 10 * S, 10 * S, 10 * S));
    }

    #[test]
    fn jitter_fraction_is_clamped() {
        let p = RetryPolicy::exponential(S, 100 * S);
        assert_eq!(p.with_jitter(f64::NAN).jitter(), 0.0);
        assert_eq!(p.with_jitter(-1.0).jitter(), 0.0);
        assert_eq!(p.with_jitter(7.0).jitter(), 1.0);
        assert_eq!(p.with_jitter(0.25).jitter(), 0.25);
        assert_eq!(p.with_jitter(1.0).jittered(Duration::MAX, u64::MAX), Duration::MAX, "no overflow");
    }
}
