//! The api-versions of the paths ARM itself owns rather than a resource type: resource
//! groups, the cross-type lists, providers, subscriptions, role assignments, API tokens.
//!
//! ARM clients send these paths the `Microsoft.Resources` (or `Microsoft.Authorization`)
//! version they were generated for — `2025-04-01` for `azure-mgmt-resource` 26, older ones
//! for older tools — and Slipway's answers do not differ between versions. So besides
//! Slipway's own versions ([`PLATFORM_API_VERSIONS`]), any version in ARM's form is taken: a
//! calendar date from ARM's first, `2014-04-01`, on, optionally with `-preview`. Anything
//! else is still `400 InvalidApiVersionParameter`.

use crate::error::ArmError;
use crate::handlers::Ctx;

/// Slipway's own versions of the platform paths (`2.0` is what ARM sends with subscription
/// lifecycle notifications).
pub const PLATFORM_API_VERSIONS: &[&str] = &["2025-06-01", "2.0"];

/// ARM's first api-version: no client was ever generated for an earlier one.
const FIRST_ARM_DATE: (u32, u32, u32) = (2014, 4, 1);

/// The rule in words, for error messages and the OpenAPI document.
pub const PLATFORM_VERSION_RULE: &str =
    "2025-06-01, 2.0, or any ARM api-version from 2014-04-01 on (YYYY-MM-DD, optionally -preview)";

/// `Microsoft.Resources` versions recent Azure SDKs are generated for: what the OpenAPI
/// document lists beside [`PLATFORM_API_VERSIONS`] (its description states the whole rule).
pub const RECENT_ARM_VERSIONS: &[&str] = &["2025-04-01", "2025-03-01", "2024-11-01", "2024-03-01", "2022-09-01"];

/// Whether `v` is a platform path's api-version.
pub fn accepts(v: &str) -> bool {
    PLATFORM_API_VERSIONS.iter().any(|s| s.eq_ignore_ascii_case(v)) || arm_date(v).is_some_and(|d| d >= FIRST_ARM_DATE)
}

/// `YYYY-MM-DD[-preview]` naming a real day.
fn arm_date(v: &str) -> Option<(u32, u32, u32)> {
    let date = v.strip_suffix("-preview").unwrap_or(v);
    let [y, m, d] = <[&str; 3]>::try_from(date.split('-').collect::<Vec<_>>()).ok()?;
    let digits =
        |s: &str, n: usize| (s.len() == n && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse::<u32>().ok())?;
    let (y, m, d) = (digits(y, 4)?, digits(m, 2)?, digits(d, 2)?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days).contains(&d).then_some((y, m, d))
}

/// `400 MissingApiVersionParameter` or `InvalidApiVersionParameter` unless the request names
/// a platform api-version.
pub(crate) fn check(ctx: &Ctx) -> Result<(), ArmError> {
    let v = ctx.api_version()?;
    if accepts(v) {
        Ok(())
    } else {
        Err(ArmError::bad_request(
            "InvalidApiVersionParameter",
            format!("The api-version '{v}' is invalid. The supported versions are {PLATFORM_VERSION_RULE}."),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slipways_own_and_arms_dated_versions_are_taken() {
        let examples = ["2014-04-01", "2021-04-01", "2019-05-10-preview", "2024-02-29"];
        for v in PLATFORM_API_VERSIONS.iter().chain(RECENT_ARM_VERSIONS).chain(&examples) {
            assert!(accepts(v), "{v}");
        }
    }

    #[test]
    fn what_is_no_arm_version_is_refused() {
        for v in [
            "",
            "1.0",
            "2014-03-31",
            "2023-02-29",
            "2025-13-01",
            "2025-04-31",
            "2025-4-01",
            "2025-04-01-beta",
            "2025-04-01-",
            "latest",
            "2025-04-01 ",
            "２０２５-04-01",
        ] {
            assert!(!accepts(v), "{v}");
        }
    }
}
