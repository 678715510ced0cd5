//! Wall-clock instants as data. The domain never reads a clock: callers pass `now` in.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    pub fn from_system(t: std::time::SystemTime) -> Self {
        match t.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => Timestamp(d.as_millis() as i64),
            Err(e) => Timestamp(-(e.duration().as_millis() as i64)),
        }
    }

    // Saturating, unlike `std::ops::Add`, so a huge configured duration cannot overflow.
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(d.as_millis().min(i64::MAX as u128) as i64))
    }

    #[allow(clippy::should_implement_trait)]
    pub fn sub(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_sub(d.as_millis().min(i64::MAX as u128) as i64))
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }

    /// Signed difference in milliseconds (`self - other`).
    pub fn millis_after(self, other: Timestamp) -> i64 {
        self.0.saturating_sub(other.0)
    }

    /// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-29T20:53:45.123Z`.
    pub fn to_rfc3339(self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.rem_euclid(1000);
        let secs = self.0.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(f, "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z", sod / 3600, (sod / 60) % 60, sod % 60)
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(Timestamp(1_764_449_625_123).to_rfc3339(), "2025-11-29T20:53:45.123Z");
        assert_eq!(Timestamp(951_782_400_000).to_rfc3339(), "2000-02-29T00:00:00.000Z");
        assert_eq!(Timestamp(-1).to_rfc3339(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn arithmetic_saturates_and_clamps() {
        let t = Timestamp(10_000);
        assert_eq!(t.add(Duration::from_secs(2)), Timestamp(12_000));
        assert_eq!(t.sub(Duration::from_secs(2)), Timestamp(8_000));
        assert_eq!(t.since(Timestamp(12_000)), Duration::ZERO);
        assert_eq!(Timestamp(12_000).since(t), Duration::from_secs(2));
    }
}

/// Where the edges (API, engine) read the current time. Tests hand them one on tokio's time
/// (`slipway_test_support::TestClock`), which paused tests move with `tokio::time::advance`.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_system(std::time::SystemTime::now())
    }
}
