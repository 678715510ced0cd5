//! What the operator configures: which identity providers are trusted, how their claims name
//! a principal, and whether API tokens are accepted.

use std::path::PathBuf;
use std::time::Duration;

/// One trusted OpenID Connect issuer.
#[derive(Clone, Debug)]
pub struct IssuerOptions {
    /// The `iss` value tokens must carry, e.g. `https://keycloak.example/realms/platform`.
    pub issuer: String,
    /// Accepted `aud` values; a token must name at least one.
    pub audiences: Vec<String>,
    /// Where the signing keys come from.
    pub keys: KeySource,
    pub claims: ClaimMapping,
    /// Put before every principal and group name this issuer mints, so two issuers minting
    /// the same subject name two principals (see [`crate::namespace`]).
    pub prefix: String,
    /// The identity-provider tenants this issuer may speak for (case-insensitive); empty: any.
    pub tenants: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// An unknown `kid` triggers a key refresh at most this often (a flood of forged `kid`s
    /// must not become a flood of requests to the identity provider).
    pub refresh_min_interval: Duration,
}

impl IssuerOptions {
    pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
    pub const DEFAULT_REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(30);

    /// An issuer whose names carry [`IssuerOptions::derived_prefix`].
    pub fn new(issuer: impl Into<String>, audiences: Vec<String>, keys: KeySource) -> Self {
        let issuer = issuer.into();
        IssuerOptions {
            prefix: Self::derived_prefix(&issuer),
            issuer,
            audiences,
            keys,
            claims: ClaimMapping::default(),
            tenants: Vec::new(),
            leeway: Self::DEFAULT_LEEWAY,
            refresh_min_interval: Self::DEFAULT_REFRESH_MIN_INTERVAL,
        }
    }
}

impl IssuerOptions {
    /// The prefix an issuer gets when none is configured: its `iss` and `#`, as Kubernetes
    /// prefixes OIDC user names.
    pub fn derived_prefix(issuer: &str) -> String {
        format!("{issuer}#")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// `{issuer}/.well-known/openid-configuration`, then its `jwks_uri`.
    Discovery,
    /// A JWKS document at this URL.
    JwksUri(String),
    /// A JWKS document in a file (air-gapped sites); read again on an unknown `kid`.
    JwksFile(PathBuf),
}

/// Which claims name the principal. Entra ID: `oid` / `tid` / `groups` (or `roles`);
/// Keycloak and Dex: `sub` / a custom tenant claim / `groups`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimMapping {
    pub subject: String,
    /// `None`: principals of this issuer have no tenant.
    pub tenant: Option<String>,
    pub groups: String,
}

impl Default for ClaimMapping {
    fn default() -> Self {
        ClaimMapping { subject: "sub".into(), tenant: Some("tid".into()), groups: "groups".into() }
    }
}

#[derive(Clone, Debug, Default)]
pub struct AuthOptions {
    pub issuers: Vec<IssuerOptions>,
    /// Accept Slipway API tokens (`slw_…`), looked up in the store.
    pub api_tokens: bool,
    /// Principal names allowed to speak for others: an ARM front end whose
    /// `x-ms-client-*` / `x-ms-home-tenant-id` / `x-ms-arm-resource-system-data` headers are
    /// believed. Everyone else's identity is their credential alone.
    pub trusted_front_ends: Vec<String>,
}
