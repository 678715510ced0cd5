//! `[auth]`: who may call Slipway. Absent, authentication is off and Slipway serves only on a
//! loopback address (see [`check_exposure`]).
//!
//! ```toml
//! [auth]
//! api_tokens = true                      # accept `slipway api-token create` tokens
//! trusted_front_ends = ["arm-frontend"]  # principals whose x-ms-* identity headers count
//! admins = ["alice", "group:platform-admins"]  # platform admins from the start
//! assignment_cache_seconds = 2           # another replica's role change is in force within it
//!
//! [auth.rate_limits]                     # a token bucket per principal (on by default)
//! requests_per_second = 50
//! burst = 100
//! # [[auth.rate_limits.overrides]] principal = "ci" (or group = "…"), requests_per_second, burst
//! unauthenticated_requests_per_second = 10  # per client address: failed sign-ins and
//! unauthenticated_burst = 50                # /openapi.json, /metrics (0: no such limit)
//!
//! [[auth.issuers]]                      # the first listed is the home issuer: its names
//! issuer = "https://keycloak.example/realms/platform"  # are unprefixed unless `prefix` is set
//! audiences = ["slipway"]
//! # jwks_uri = "…" or jwks_file = "…"; default: OpenID Connect discovery from the issuer
//! subject_claim = "sub"                  # Entra ID: "oid"
//! tenant_claim = "tid"                   # "" for none
//! groups_claim = "groups"                # Entra ID app roles: "roles"
//! leeway_seconds = 60
//!
//! [[auth.issuers]]                      # every other issuer's names carry its prefix
//! issuer = "https://login.partner.example"
//! audiences = ["slipway"]
//! prefix = "partner:"                    # default: "{issuer}#"; principals are "partner:{sub}"
//! tenants = ["contoso"]                  # the tenants it may speak for (default: any)
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use slipway_api::{AccessOptions, RateLimiter, RateLimits};
use slipway_auth::{AuthOptions, ClaimMapping, IssuerOptions, KeySource};
use slipway_domain::access::Assignee;
use slipway_domain::rate::Rate;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    pub api_tokens: bool,
    pub trusted_front_ends: Vec<String>,
    pub issuers: Vec<IssuerConfig>,
    /// Platform admins whatever the store's role assignments say: principal names, or
    /// `group:<name>` for everyone in a group. The first admin has to come from somewhere.
    pub admins: Vec<String>,
    /// Writes into a subscription need it registered (`PUT /subscriptions/{id}`).
    pub require_registered_subscriptions: bool,
    /// Operations are readable only by the identity that started them (ARO's rule), on top
    /// of the role check.
    pub operations_visible_to_initiator_only: bool,
    /// How long a replica decides on role assignments it read before (0: read per request);
    /// another replica's change is in force here within it.
    pub assignment_cache_seconds: f64,
    pub rate_limits: RateLimitsConfig,
}

/// `[auth.rate_limits]`: a token bucket per principal.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    pub enabled: bool,
    pub requests_per_second: f64,
    pub burst: f64,
    /// `[[auth.rate_limits.overrides]]`: `principal = "…"` or `group = "…"`, with its own
    /// rate; the first that matches wins.
    pub overrides: Vec<RateOverride>,
    /// Per client address, before authentication; `0`: no such limit.
    pub unauthenticated_requests_per_second: f64,
    pub unauthenticated_burst: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateOverride {
    pub principal: Option<String>,
    pub group: Option<String>,
    pub requests_per_second: f64,
    pub burst: f64,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        let (d, u) = (RateLimits::DEFAULT, RateLimits::UNAUTHENTICATED);
        RateLimitsConfig {
            enabled: true,
            requests_per_second: d.per_second,
            burst: d.burst,
            overrides: Vec::new(),
            unauthenticated_requests_per_second: u.per_second,
            unauthenticated_burst: u.burst,
        }
    }
}

fn rate(at: &str, per_second: f64, burst: f64) -> Result<Rate, String> {
    if !(per_second.is_finite() && per_second > 0.0 && burst.is_finite() && burst >= 1.0) {
        return Err(format!("{at}: requests_per_second must be > 0 and burst >= 1"));
    }
    Ok(Rate { per_second, burst })
}

/// The limiter, or `None` without `[auth]` (the local user is never limited) or when off.
pub fn rate_limiter(auth: Option<&AuthConfig>) -> Result<Option<RateLimiter>, String> {
    let Some(c) = auth.map(|a| &a.rate_limits).filter(|c| c.enabled) else { return Ok(None) };
    let default = rate("auth.rate_limits", c.requests_per_second, c.burst)?;
    let mut overrides = Vec::new();
    for (i, o) in c.overrides.iter().enumerate() {
        let at = format!("auth.rate_limits.overrides[{i}]");
        let who = match (&o.principal, &o.group) {
            (Some(p), None) => Assignee::Principal(p.clone()),
            (None, Some(g)) => Assignee::Group(g.clone()),
            _ => return Err(format!("{at}: set exactly one of principal or group")),
        };
        overrides.push((who, rate(&at, o.requests_per_second, o.burst)?));
    }
    let limiter = RateLimiter::new(RateLimits { default, overrides });
    if c.unauthenticated_requests_per_second == 0.0 {
        return Ok(Some(limiter));
    }
    let per_address =
        rate("auth.rate_limits.unauthenticated", c.unauthenticated_requests_per_second, c.unauthenticated_burst)?;
    Ok(Some(limiter.with_address_limit(per_address)))
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            api_tokens: false,
            trusted_front_ends: Vec::new(),
            issuers: Vec::new(),
            admins: Vec::new(),
            require_registered_subscriptions: true,
            operations_visible_to_initiator_only: false,
            assignment_cache_seconds: AccessOptions::DEFAULT_ASSIGNMENT_CACHE.as_secs_f64(),
            rate_limits: RateLimitsConfig::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IssuerConfig {
    pub issuer: String,
    pub audiences: Vec<String>,
    pub jwks_uri: Option<String>,
    pub jwks_file: Option<PathBuf>,
    pub subject_claim: String,
    pub tenant_claim: String,
    pub groups_claim: String,
    /// Before every name and group this issuer mints; `None`: none for the home (first)
    /// issuer, `{issuer}#` for every other.
    pub prefix: Option<String>,
    pub tenants: Vec<String>,
    pub leeway_seconds: u64,
    pub key_refresh_min_interval_seconds: u64,
    /// The web console's client id at this issuer (a public client with PKCE): the console's
    /// sign-in page then offers this issuer's own login. `None`: tokens are pasted.
    pub console_client_id: Option<String>,
    /// The scopes the console asks for; they must get an access token for one of
    /// `audiences` (e.g. `openid api://slipway/.default`).
    pub console_scopes: Vec<String>,
}

impl IssuerConfig {
    /// The console's sign-in at this issuer, if it has a client id.
    pub fn console_client(&self) -> Option<slipway_console::OidcClient> {
        let client_id = self.console_client_id.clone().filter(|id| !id.is_empty())?;
        let scopes = if self.console_scopes.is_empty() { "openid".to_string() } else { self.console_scopes.join(" ") };
        Some(slipway_console::OidcClient { issuer: self.issuer.clone(), client_id, scopes })
    }
}

impl Default for IssuerConfig {
    fn default() -> Self {
        let claims = ClaimMapping::default();
        IssuerConfig {
            issuer: String::new(),
            audiences: Vec::new(),
            jwks_uri: None,
            jwks_file: None,
            subject_claim: claims.subject,
            tenant_claim: claims.tenant.unwrap_or_default(),
            groups_claim: claims.groups,
            prefix: None,
            tenants: Vec::new(),
            leeway_seconds: IssuerOptions::DEFAULT_LEEWAY.as_secs(),
            key_refresh_min_interval_seconds: IssuerOptions::DEFAULT_REFRESH_MIN_INTERVAL.as_secs(),
            console_client_id: None,
            console_scopes: Vec::new(),
        }
    }
}

impl AuthConfig {
    /// The authenticator's options; relative `jwks_file`s are resolved against `base_dir`.
    pub fn options(&self, base_dir: &Path) -> Result<AuthOptions, String> {
        if self.issuers.is_empty() && !self.api_tokens {
            return Err("[auth] accepts no credential: add [[auth.issuers]] or set auth.api_tokens = true".into());
        }
        let mut issuers = Vec::new();
        for (i, c) in self.issuers.iter().enumerate() {
            let at = format!("auth.issuers[{i}]");
            if c.issuer.is_empty() {
                return Err(format!("{at}.issuer is required"));
            }
            if c.audiences.iter().all(String::is_empty) {
                return Err(format!("{at}.audiences: at least one audience is required ({})", c.issuer));
            }
            let keys = match (&c.jwks_uri, &c.jwks_file) {
                (Some(_), Some(_)) => return Err(format!("{at}: set jwks_uri or jwks_file, not both")),
                (Some(uri), None) => KeySource::JwksUri(uri.clone()),
                (None, Some(file)) => KeySource::JwksFile(base_dir.join(file)),
                (None, None) => KeySource::Discovery,
            };
            let mut options = IssuerOptions::new(c.issuer.clone(), c.audiences.clone(), keys);
            options.claims = ClaimMapping {
                subject: c.subject_claim.clone(),
                tenant: Some(c.tenant_claim.clone()).filter(|t| !t.is_empty()),
                groups: c.groups_claim.clone(),
            };
            let home = i == 0;
            options.prefix = match &c.prefix {
                Some(prefix) => prefix.clone(),
                None if home => String::new(),
                None => IssuerOptions::derived_prefix(&c.issuer),
            };
            options.tenants = c.tenants.clone();
            options.leeway = Duration::from_secs(c.leeway_seconds);
            options.refresh_min_interval = Duration::from_secs(c.key_refresh_min_interval_seconds);
            issuers.push(options);
        }
        slipway_auth::check_prefixes(&issuers).map_err(|e| format!("auth.issuers: {e}"))?;
        Ok(AuthOptions { issuers, api_tokens: self.api_tokens, trusted_front_ends: self.trusted_front_ends.clone() })
    }
}

/// How access is decided; without `[auth]`, the local mode (no registration needed).
pub fn access_options(auth: Option<&AuthConfig>) -> Result<AccessOptions, String> {
    let Some(auth) = auth else { return Ok(AccessOptions::default()) };
    let mut admins = Vec::new();
    for (i, a) in auth.admins.iter().enumerate() {
        let assignee = match a.strip_prefix("group:") {
            Some(group) => Assignee::Group(group.to_string()),
            None => Assignee::Principal(a.clone()),
        };
        if matches!(&assignee, Assignee::Principal(n) | Assignee::Group(n) if n.trim().is_empty()) {
            return Err(format!("auth.admins[{i}] is empty"));
        }
        admins.push(assignee);
    }
    Ok(AccessOptions {
        admins,
        registration_required: auth.require_registered_subscriptions,
        initiator_only: auth.operations_visible_to_initiator_only,
        assignment_cache: Duration::try_from_secs_f64(auth.assignment_cache_seconds)
            .map_err(|_| "auth.assignment_cache_seconds must be a number of seconds, 0 or more".to_string())?,
    })
}

/// Secure by default: without `[auth]` only a loopback address may be served.
pub fn check_exposure(auth: Option<&AuthConfig>, bound: SocketAddr) -> Result<(), String> {
    exposure(auth.is_some(), bound)
}

/// [`check_exposure`], by whether authentication is on.
pub fn exposure(authenticated: bool, bound: SocketAddr) -> Result<(), String> {
    if !authenticated && !bound.ip().is_loopback() {
        return Err(format!(
            "server.listen = {bound} is not a loopback address and authentication is off: configure [auth] \
             (docs/configuration.md, \"Identity\") or listen on 127.0.0.1"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_auth_means_loopback_only() {
        let auth = AuthConfig { api_tokens: true, ..Default::default() };
        for (listen, with_auth, ok) in [
            ("127.0.0.1:8080", false, true),
            ("[::1]:8080", false, true),
            ("0.0.0.0:8080", false, false),
            ("192.0.2.10:8080", false, false),
            ("0.0.0.0:8080", true, true),
        ] {
            let r = check_exposure(with_auth.then_some(&auth), listen.parse().unwrap());
            assert_eq!(r.is_ok(), ok, "{listen} with auth {with_auth}: {r:?}");
            if let Err(e) = r {
                assert!(e.contains("server.listen") && e.contains("[auth]"), "{e}");
            }
        }
    }

    #[test]
    fn rate_limits_are_checked() {
        assert!(rate_limiter(None).unwrap().is_none(), "the local mode is never limited");
        let mut auth = AuthConfig::default();
        assert!(rate_limiter(Some(&auth)).unwrap().is_some(), "on by default with [auth]");
        auth.rate_limits.overrides.push(RateOverride {
            principal: Some("ci".into()),
            group: Some("g".into()),
            requests_per_second: 1.0,
            burst: 1.0,
        });
        assert!(rate_limiter(Some(&auth)).err().unwrap().contains("overrides[0]: set exactly one"));
        auth.rate_limits.overrides.clear();
        auth.rate_limits.burst = 0.5;
        assert!(rate_limiter(Some(&auth)).err().unwrap().contains("burst >= 1"));
        auth.rate_limits.enabled = false;
        assert!(rate_limiter(Some(&auth)).unwrap().is_none());
    }

    #[test]
    fn issuer_settings_are_checked() {
        let base = Path::new("/etc/slipway");
        let issuer = |f: fn(&mut IssuerConfig)| {
            let mut c =
                IssuerConfig { issuer: "https://idp".into(), audiences: vec!["slipway".into()], ..Default::default() };
            f(&mut c);
            AuthConfig { issuers: vec![c], ..Default::default() }.options(base)
        };
        assert!(AuthConfig::default().options(base).unwrap_err().contains("accepts no credential"));
        assert!(issuer(|c| c.issuer.clear()).unwrap_err().contains("auth.issuers[0].issuer"));
        assert!(issuer(|c| c.audiences.clear()).unwrap_err().contains("audience"));
        assert!(
            issuer(|c| {
                c.jwks_uri = Some("https://idp/keys".into());
                c.jwks_file = Some("k.json".into());
            })
            .unwrap_err()
            .contains("not both")
        );
        let o = issuer(|c| {
            c.jwks_file = Some("keys.json".into());
            c.tenant_claim.clear();
            c.subject_claim = "oid".into();
        })
        .unwrap();
        assert_eq!(o.issuers[0].keys, KeySource::JwksFile("/etc/slipway/keys.json".into()));
        assert_eq!(o.issuers[0].claims, ClaimMapping { subject: "oid".into(), tenant: None, groups: "groups".into() });
        assert_eq!(issuer(|_| {}).unwrap().issuers[0].keys, KeySource::Discovery);
    }

    #[test]
    fn the_home_issuer_is_unprefixed_and_every_other_prefixed() {
        let base = Path::new("/etc/slipway");
        let issuer = |iss: &str, prefix: Option<&str>| IssuerConfig {
            issuer: iss.into(),
            audiences: vec!["slipway".into()],
            prefix: prefix.map(str::to_string),
            ..Default::default()
        };
        let prefixes = |issuers: Vec<IssuerConfig>| {
            AuthConfig { issuers, ..Default::default() }
                .options(base)
                .map(|o| o.issuers.into_iter().map(|i| i.prefix).collect::<Vec<_>>())
        };
        let table = [
            (vec![issuer("https://home", None)], Ok(vec![""])),
            (
                vec![issuer("https://home", None), issuer("https://b", None), issuer("https://c", Some("c:"))],
                Ok(vec!["", "https://b#", "c:"]),
            ),
            (vec![issuer("https://home", Some("h:")), issuer("https://b", Some(""))], Ok(vec!["h:", ""])),
        ];
        for (issuers, want) in table {
            let want: Result<Vec<String>, String> = want.map(|v| v.iter().map(|p| p.to_string()).collect());
            assert_eq!(prefixes(issuers), want);
        }
        let clash = prefixes(vec![issuer("https://home", None), issuer("https://b", Some(""))]).unwrap_err();
        assert!(clash.starts_with("auth.issuers: ") && clash.contains("at most one"), "{clash}");
    }
}
