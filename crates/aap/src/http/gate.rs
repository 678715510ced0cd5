//! The provider-wide throttle gate: an answer that advertises a `Retry-After` closes it, and
//! no request of the provider is sent before it opens again; a request waits at it (at most
//! `max_wait` in all) or is refused unsent. `Retry-After` is read as delay-seconds or an
//! HTTP-date.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderValue;
use tokio::time::Instant;

use super::{Http, HttpError};

/// Longest a `Retry-After` closes the throttle gate (a guard against absurd values).
const MAX_GATE: Duration = Duration::from_secs(24 * 3600);

/// Whether an answer advertises a time before which this client must send nothing more:
/// a `429`, or a `503` with `Retry-After` (a gateway in maintenance), with a `Retry-After`.
pub(super) fn closes_gate(status: u16, retry_after: Option<Duration>) -> Option<Duration> {
    retry_after.filter(|_| matches!(status, 429 | 503))
}

/// How a request treats a closed throttle gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AtGate {
    /// Waits for it to open, at most `max_wait` in all.
    Wait,
    /// Fails at once (`Throttled`).
    Refuse,
}

impl Http {
    /// How long the throttle gate stays closed from now; `None` when open.
    pub fn throttled_for(&self) -> Option<Duration> {
        let until = (*self.gate.lock().unwrap_or_else(|e| e.into_inner()))?;
        let left = until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// Closes the gate until `now + retry_after` (never shortens it; a day at most).
    pub(super) fn close_gate(&self, what: &str, status: u16, retry_after: Duration) {
        let now = Instant::now();
        let until = now.checked_add(retry_after.min(MAX_GATE)).unwrap_or(now);
        let mut gate = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        if gate.is_none_or(|g| g < until) {
            let was_open = gate.is_none_or(|g| g <= Instant::now());
            *gate = Some(until);
            if was_open {
                tracing::info!(request = %what, status, wait_ms = retry_after.as_millis() as u64, "AAP asked to wait: holding every request of this provider");
            }
        }
    }

    /// Passes the throttle gate and takes a concurrency permit. The gate is checked again
    /// with the permit in hand, right before the request goes out: it may have closed while
    /// this request queued for a permit.
    pub(super) async fn pass_gate(
        &self,
        what: &str,
        mode: AtGate,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, HttpError> {
        let mut waited = Duration::ZERO;
        loop {
            if let Some(left) = self.throttled_for() {
                if mode == AtGate::Refuse || waited + left > self.s.max_wait {
                    return Err(HttpError::Throttled {
                        retry_after: left,
                        message: format!(
                            "{what}: not sent, AAP asked to wait {} ms more (Retry-After)",
                            left.as_millis()
                        ),
                    });
                }
                tracing::debug!(request = %what, wait_ms = left.as_millis() as u64, "waiting for AAP's Retry-After");
                tokio::time::sleep(left).await;
                waited += left;
                let provider = slipway_metrics::ProviderLabels { provider: self.provider.clone() };
                self.metrics.retry_after_waits.get_or_create(&provider).inc_by(left.as_secs_f64());
                continue;
            }
            let permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| HttpError::Invalid(format!("{what}: provider is shut down")))?;
            if self.throttled_for().is_none() {
                return Ok(permit);
            }
        }
    }
}

/// `Retry-After` as delay-seconds or an HTTP-date (IMF-fixdate), relative to `now`.
pub(super) fn parse_retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = parse_http_date(text)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    // `now` is truncated to whole seconds, so the wait is never shorter than asked.
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` → seconds since the Unix epoch.
pub(super) fn parse_http_date(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u32 = day.parse().ok()?;
    let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        .iter()
        .position(|m| m == month)? as u32
        + 1;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<u64> = time.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else { return None };
    if !(1..=31).contains(&day) || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    let days = slipway_domain::time::days_from_civil(year, month, day);
    u64::try_from(days * 86_400 + (*h * 3600 + *m * 60 + *s) as i64).ok()
}
