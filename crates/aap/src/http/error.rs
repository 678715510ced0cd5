//! What can go wrong with one request to AAP, and how it is classified: whether an idempotent
//! request may be repeated, and which provider error the engine sees.

use std::time::Duration;

use slipway_provider::ProviderError;

use super::DEFAULT_RATE_LIMIT_WAIT;

/// What went wrong with one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// AAP (or a proxy/gateway in front of it) answered with a non-success status.
    Status { status: u16, retry_after: Option<Duration>, message: String },
    /// The request was certainly not sent: connection refused, DNS or TLS handshake failure.
    NotSent(String),
    /// The request may have reached AAP but no complete answer came back (timeout, reset).
    Unknown(String),
    /// A success status with a body that is not what the API documents.
    BadBody(String),
    /// A request that cannot be made (bad URL, a `next` link to another host).
    Invalid(String),
    /// Certainly not sent: AAP asked this provider to wait (`Retry-After`) for `retry_after`
    /// more, longer than the request may wait.
    Throttled { retry_after: Duration, message: String },
}

impl HttpError {
    pub fn message(&self) -> &str {
        match self {
            HttpError::Status { message, .. }
            | HttpError::NotSent(message)
            | HttpError::Unknown(message)
            | HttpError::BadBody(message)
            | HttpError::Invalid(message)
            | HttpError::Throttled { message, .. } => message,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether an idempotent request may be repeated after this.
    pub(super) fn retryable(&self) -> bool {
        match self {
            HttpError::Status { status, .. } => is_retryable_status(*status),
            HttpError::NotSent(_) | HttpError::Unknown(_) => true,
            // Already longer than any in-process wait.
            HttpError::BadBody(_) | HttpError::Invalid(_) | HttpError::Throttled { .. } => false,
        }
    }

    pub(super) fn retry_after(&self) -> Option<Duration> {
        match self {
            HttpError::Status { retry_after, .. } => *retry_after,
            HttpError::Throttled { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The provider error for a failed idempotent request (lookups, lists, cancel): a
    /// request that can simply be made again, so nothing is ever `Indeterminate`.
    pub fn into_provider(self) -> ProviderError {
        match self {
            HttpError::Status { status: 429, retry_after, message } => {
                ProviderError::RateLimited { retry_after: retry_after.unwrap_or(DEFAULT_RATE_LIMIT_WAIT), message }
            }
            HttpError::Status { status, message, .. } if status >= 500 || status == 408 => {
                ProviderError::Transient(message)
            }
            HttpError::Status { message, .. } => ProviderError::Permanent(message),
            HttpError::NotSent(m) | HttpError::Unknown(m) | HttpError::BadBody(m) => ProviderError::Transient(m),
            HttpError::Invalid(m) => ProviderError::Permanent(m),
            HttpError::Throttled { retry_after, message } => ProviderError::RateLimited { retry_after, message },
        }
    }
}

/// Statuses worth retrying an idempotent request on: rate limiting and the gateway errors
/// a proxy in front of AAP produces while it (re)starts.
pub(super) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}
