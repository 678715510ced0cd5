//! A bearer token from the identity provider for a profile with `[profiles.NAME.oidc]`: the
//! client-credentials grant when `SLIPWAY_CLIENT_SECRET` holds the client's secret (automation),
//! else the device flow (RFC 8628: a person opens a URL and types a code). Tokens are cached
//! per profile, owner-only, under the platform's cache directory and reused until a minute
//! before they expire, so a person signs in once per token lifetime, not once per command.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::CliError;
use crate::profile::OidcProfile;

/// A token this close to its expiry is not reused.
const EXPIRY_MARGIN_SECS: u64 = 60;
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

#[derive(Deserialize)]
struct Discovery {
    token_endpoint: String,
    #[serde(default)]
    device_authorization_endpoint: Option<String>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct DeviceAnswer {
    device_code: String,
    user_code: String,
    verification_uri: String,
    #[serde(default)]
    verification_uri_complete: Option<String>,
    #[serde(default)]
    interval: Option<u64>,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize, Serialize)]
struct Cached {
    access_token: String,
    expires_at: u64,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn cache_path(profile: &str) -> Option<PathBuf> {
    let file: String = profile.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    dirs::cache_dir().map(|d| d.join("slipway").join("tokens").join(format!("{file}.json")))
}

fn cached(profile: &str) -> Option<String> {
    let text = std::fs::read_to_string(cache_path(profile)?).ok()?;
    let c: Cached = serde_json::from_str(&text).ok()?;
    (c.expires_at > now_secs() + EXPIRY_MARGIN_SECS).then_some(c.access_token)
}

fn remember(profile: &str, token: &str, expires_in: Option<u64>) {
    let Some(path) = cache_path(profile) else { return };
    let entry = Cached { access_token: token.into(), expires_at: now_secs() + expires_in.unwrap_or(300) };
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(path.parent().unwrap_or(&path))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        std::io::Write::write_all(&mut options.open(&path)?, serde_json::to_string(&entry)?.as_bytes())
    };
    if let Err(e) = write() {
        eprintln!("slipway: could not cache the token in {}: {e}", path.display());
    }
}

fn provider_error(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Connect(format!("identity provider, {what}: {e}"))
}

/// The profile's token: cached, or fetched now.
pub async fn bearer(profile: &str, oidc: &OidcProfile, secret: Option<String>) -> Result<String, CliError> {
    if let Some(token) = cached(profile) {
        return Ok(token);
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| CliError::Local(format!("building the HTTP client: {e}")))?;
    let url = format!("{}/.well-known/openid-configuration", oidc.issuer.trim_end_matches('/'));
    let discovery: Discovery = async { http.get(&url).send().await?.error_for_status()?.json().await }
        .await
        .map_err(|e: reqwest::Error| provider_error("discovery", e))?;
    let scope = oidc.scopes.join(" ");
    let answer = match secret {
        Some(secret) => {
            let form = [
                ("grant_type", "client_credentials"),
                ("client_id", oidc.client_id.as_str()),
                ("client_secret", secret.as_str()),
                ("scope", scope.as_str()),
            ];
            let reply = http.post(&discovery.token_endpoint).form(&form).send().await;
            let reply = reply.map_err(|e| provider_error("token", e))?;
            if !reply.status().is_success() {
                let body = reply.text().await.unwrap_or_default();
                return Err(CliError::Usage(format!("the identity provider refused the client credentials: {body}")));
            }
            reply.json::<TokenAnswer>().await.map_err(|e| provider_error("token", e))?
        }
        None => device_flow(&http, &discovery, oidc, &scope).await?,
    };
    remember(profile, &answer.access_token, answer.expires_in);
    Ok(answer.access_token)
}

async fn device_flow(
    http: &reqwest::Client,
    discovery: &Discovery,
    oidc: &OidcProfile,
    scope: &str,
) -> Result<TokenAnswer, CliError> {
    let endpoint = discovery.device_authorization_endpoint.as_deref().ok_or_else(|| {
        CliError::Usage(
            "the identity provider has no device flow: set SLIPWAY_CLIENT_SECRET for client credentials".into(),
        )
    })?;
    let form = [("client_id", oidc.client_id.as_str()), ("scope", scope)];
    let reply = http.post(endpoint).form(&form).send().await.map_err(|e| provider_error("device", e))?;
    let reply = reply.error_for_status().map_err(|e| provider_error("device", e))?;
    let device: DeviceAnswer = reply.json().await.map_err(|e| provider_error("device", e))?;
    match &device.verification_uri_complete {
        Some(uri) => eprintln!("To sign in, open {uri} (code {})", device.user_code),
        None => eprintln!("To sign in, open {} and enter the code {}", device.verification_uri, device.user_code),
    }
    let mut interval = Duration::from_secs(device.interval.unwrap_or(5).max(1));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(device.expires_in.unwrap_or(600));
    loop {
        // The provider sets the pace (RFC 8628 §3.5): wait the interval between polls.
        tokio::time::sleep(interval).await;
        if tokio::time::Instant::now() > deadline {
            return Err(CliError::TimedOut("the sign-in code expired before it was used".into()));
        }
        let form = [("grant_type", DEVICE_GRANT), ("device_code", &device.device_code), ("client_id", &oidc.client_id)];
        let reply = http.post(&discovery.token_endpoint).form(&form).send().await;
        let reply = reply.map_err(|e| provider_error("token", e))?;
        if reply.status().is_success() {
            return reply.json().await.map_err(|e| provider_error("token", e));
        }
        let error: serde_json::Value = reply.json().await.unwrap_or_default();
        match error["error"].as_str().unwrap_or_default() {
            "authorization_pending" => {}
            "slow_down" => interval += Duration::from_secs(5),
            other => return Err(CliError::Usage(format!("the identity provider ended the sign-in: {other}"))),
        }
    }
}
