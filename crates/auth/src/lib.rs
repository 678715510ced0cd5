//! Authentication at the API edge: a bearer credential in, a verified [`Principal`] out.
//! Two kinds of credential: JWTs from the platform's OpenID Connect issuers (checked locally
//! against their JWKS, asymmetric algorithms only) and Slipway API tokens (hashes in the
//! store). Whether the principal may do what it asks is not decided here.

pub mod api_tokens;
mod error;
mod jwks;
mod jwt;
mod namespace;
mod options;
#[cfg(feature = "test-idp")]
pub mod test_idp;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use slipway_domain::{Clock, Principal};
use slipway_store::Store;

pub use error::AuthError;
pub use namespace::{check_prefixes, prefix_owner};
pub use options::{AuthOptions, ClaimMapping, IssuerOptions, KeySource};

/// A request's verified identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authenticated {
    pub principal: Principal,
    /// The principal is a configured ARM front end: the identity headers it forwards are
    /// believed.
    pub trusted_front_end: bool,
}

pub struct Authenticator {
    issuers: Vec<jwks::IssuerKeys>,
    namespace: namespace::Namespace,
    store: Arc<dyn Store>,
    api_tokens: bool,
    trusted_front_ends: HashSet<String>,
    clock: Arc<dyn Clock>,
}

impl Authenticator {
    /// How long fetching an issuer's discovery document or JWKS may take.
    pub const KEY_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

    pub fn new(options: AuthOptions, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(Self::KEY_FETCH_TIMEOUT)
            .connect_timeout(Self::KEY_FETCH_TIMEOUT)
            .build()
            .map_err(|e| format!("HTTP client for key fetches: {e}"))?;
        check_prefixes(&options.issuers)?;
        Ok(Authenticator {
            namespace: namespace::Namespace::new(&options.issuers),
            issuers: options
                .issuers
                .into_iter()
                .map(|i| jwks::IssuerKeys::new(i, http.clone(), clock.clone()))
                .collect(),
            store,
            api_tokens: options.api_tokens,
            trusted_front_ends: options.trusted_front_ends.into_iter().collect(),
            clock,
        })
    }

    /// The issuer whose prefix `name` carries, if any: an API token may not be made for such
    /// a principal or group, since the name is that issuer's.
    pub fn prefix_owner(&self, name: &str) -> Option<&str> {
        self.namespace.owner(name)
    }

    /// Verifies the value of an `Authorization` header (absent: [`AuthError::Missing`]).
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Authenticated, AuthError> {
        let value = authorization.map(str::trim).filter(|v| !v.is_empty()).ok_or(AuthError::Missing)?;
        let (scheme, token) = value.split_once(' ').ok_or(AuthError::NotBearer)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::NotBearer);
        }
        let token = token.trim();
        let now = self.clock.now();
        let principal = if api_tokens::looks_like_api_token(token) {
            if !self.api_tokens {
                return Err(AuthError::UnknownApiToken);
            }
            let verified = api_tokens::verify(self.store.as_ref(), token, now).await?;
            self.namespace.refuse_foreign(&verified.principal, "")?;
            if let Some(entry) = verified.stale_use {
                // Off the request's path: a failed record only leaves the last use older.
                let store = Arc::clone(&self.store);
                tokio::spawn(async move {
                    if let Err(e) = api_tokens::record_use(store.as_ref(), entry, now).await {
                        tracing::debug!(error = %e, "recording an API token's use");
                    }
                });
            }
            verified.principal
        } else {
            let (principal, issuer) = jwt::verify(&self.issuers, token, now).await?;
            self.namespace.refuse_foreign(&principal, &issuer.prefix)?;
            principal
        };
        let trusted_front_end = self.trusted_front_ends.contains(&principal.name);
        Ok(Authenticated { principal, trusted_front_end })
    }
}
