//! Why a credential is refused ([`AuthError`]), with what the API answers for it: ARM's error
//! code and RFC 6750's `error` attribute of `WWW-Authenticate`. Messages never contain the
//! credential.

use thiserror::Error;

/// Why a request is not authenticated. Messages name the reason for the caller and never
/// contain the credential.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AuthError {
    #[error("no credential: send 'Authorization: Bearer <token>'")]
    Missing,
    #[error("the Authorization header is not a bearer token")]
    NotBearer,
    #[error("the token is malformed")]
    Malformed,
    #[error("the token's algorithm '{0}' is not accepted (asymmetric signatures only)")]
    Algorithm(String),
    #[error("the token's issuer is not trusted")]
    UnknownIssuer,
    #[error("the token was signed with an unknown key")]
    UnknownKey,
    #[error("the token's signature is invalid")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token is not meant for this service (audience)")]
    WrongAudience,
    #[error("the token lacks the claim '{0}'")]
    MissingClaim(String),
    #[error("the name '{name}' carries the prefix of the issuer {issuer}, which did not mint it")]
    ForeignName { name: String, issuer: String },
    #[error("the token's issuer may not speak for the tenant '{0}'")]
    TenantNotAllowed(String),
    #[error("the API token is unknown or revoked")]
    UnknownApiToken,
    #[error("the API token has expired")]
    ApiTokenExpired,
    /// Not the caller's fault: the keys or the store could not be read.
    #[error("credentials cannot be checked right now: {0}")]
    Unavailable(String),
}

impl AuthError {
    /// ARM's code: no credential at all vs. a credential that does not verify.
    pub fn arm_code(&self) -> &'static str {
        match self {
            AuthError::Missing | AuthError::NotBearer => "AuthenticationFailed",
            AuthError::Unavailable(_) => "ServiceUnavailable",
            _ => "InvalidAuthenticationToken",
        }
    }

    /// RFC 6750's `error` attribute of `WWW-Authenticate`.
    pub fn bearer_error(&self) -> Option<&'static str> {
        match self {
            AuthError::Missing | AuthError::Unavailable(_) => None,
            AuthError::NotBearer => Some("invalid_request"),
            _ => Some("invalid_token"),
        }
    }
}
