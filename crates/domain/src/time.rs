//! Wall-clock instants as data, the [`Clock`] trait the edges read time through, and
//! [`SystemClock`], the one wall clock, which the binary hands to them. No decision in the
//! domain reads a clock: callers pass `now` in.

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

    /// An RFC 3339 date-time (`2024-10-23T12:34:56.123456Z`, `…+02:00`), digits past the
    /// millisecond dropped; `None` for anything else.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        fn num(s: &str) -> Option<i64> {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
        }
        let b = text.as_bytes();
        // ASCII only: every slice below then falls on a character boundary.
        if !text.is_ascii() || b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (y, mo, d) = (num(&text[0..4])?, num(&text[5..7])?, num(&text[8..10])?);
        let (h, mi, s) = (num(&text[11..13])?, num(&text[14..16])?, num(&text[17..19])?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
            return None;
        }
        let mut rest = &text[19..];
        let mut millis = 0;
        if let Some(frac) = rest.strip_prefix('.') {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            // Right-padded to three digits: `.5` is 500 ms.
            millis = num(&format!("{:0<3}", &frac[..digits.min(3)]))?;
            rest = &frac[digits..];
        }
        let offset = match rest {
            "Z" | "z" => 0,
            _ => {
                let sign = match rest.as_bytes().first()? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let (oh, om) = rest[1..].split_once(':')?;
                let (oh, om) = (num(oh).filter(|_| oh.len() == 2)?, num(om).filter(|_| om.len() == 2)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                sign * (oh * 3600 + om * 60)
            }
        };
        let days = days_from_civil(y, mo as u32, d as u32);
        let secs = days * 86_400 + h * 3600 + mi * 60 + s - offset;
        Some(Timestamp(secs * 1000 + millis))
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm), the
/// inverse of [`civil_from_days`].
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    fn parses_rfc3339_back() {
        for ms in [0, 1_764_449_625_123, 951_782_400_000, -1] {
            assert_eq!(Timestamp::parse_rfc3339(&Timestamp(ms).to_rfc3339()), Some(Timestamp(ms)));
        }
        assert_eq!(Timestamp::parse_rfc3339("2025-11-29T22:53:45.123456+02:00"), Some(Timestamp(1_764_449_625_123)));
        let at = Some(Timestamp(1_764_449_625_000));
        for same in
            ["2025-11-29T20:53:45Z", "2025-11-29t20:53:45z", "2025-11-29T22:23:45+01:30", "2025-11-29T19:53:45-01:00"]
        {
            assert_eq!(Timestamp::parse_rfc3339(same), at, "{same}");
        }
        assert_eq!(Timestamp::parse_rfc3339("2025-11-29T20:53:45.5Z"), Some(Timestamp(1_764_449_625_500)));
        for bad in [
            "",
            "2025-11-29",
            "2025-13-01T00:00:00Z",
            "2025-11-29T24:00:00Z",
            "2025-11-29T20:53:45",
            "2025-11-29T20:53:45.Z",
            "2025-11-29T20:53:45+0100",
            "2025-11-29T20:53:45Z ",
            "２025-11-29T20:53:45Z",
            "+025-11-29T20:53:45Z",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(bad), None, "{bad}");
        }
    }

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
