//! Signing in on the identity provider's own page: OpenID Connect's authorization-code flow
//! for a public client with PKCE (RFC 7636, S256), for each issuer configured with a
//! `console_client_id`. The state, the code verifier and the issuer ride in a short-lived
//! cookie (`SameSite=Lax`: the provider's redirect back is a cross-site navigation); the code is
//! redeemed at the token endpoint, and the access token then signs in like a pasted one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use cookie::{Cookie, SameSite};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::Console;
use crate::api::uri;
use crate::session::{self, Visit, random};

const FLOW_COOKIE: &str = "slipway_oidc";
/// How long a sign-in may take on the provider's page.
const FLOW_SECONDS: i64 = 600;

/// An issuer the console may send visitors to.
#[derive(Clone, Debug)]
pub struct OidcClient {
    /// The issuer (its discovery document is `{issuer}/.well-known/openid-configuration`).
    pub issuer: String,
    /// The console's client id there (a public client: no secret).
    pub client_id: String,
    /// The scopes asked for, space-separated (`openid` at least).
    pub scopes: String,
}

#[derive(Clone, Deserialize)]
struct Endpoints {
    authorization_endpoint: String,
    token_endpoint: String,
}

pub(crate) struct Oidc {
    clients: Vec<OidcClient>,
    http: reqwest::Client,
    discovered: Mutex<HashMap<usize, Endpoints>>,
}

impl Oidc {
    pub fn new(clients: Vec<OidcClient>) -> Oidc {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
        Oidc { clients, http, discovered: Mutex::default() }
    }

    /// The issuers to offer on the sign-in page, with where each starts.
    pub fn offers(&self) -> Vec<serde_json::Value> {
        let offer = |(i, c): (usize, &OidcClient)| serde_json::json!({"issuer": c.issuer, "href": uri("/ui/sign-in/oidc", &[("issuer", &i.to_string())])});
        self.clients.iter().enumerate().map(offer).collect()
    }

    async fn endpoints(&self, index: usize) -> Result<Endpoints, String> {
        if let Some(found) = self.discovered.lock().unwrap_or_else(|e| e.into_inner()).get(&index) {
            return Ok(found.clone());
        }
        let client = self.clients.get(index).ok_or("No such identity provider.")?;
        let url = format!("{}/.well-known/openid-configuration", client.issuer.trim_end_matches('/'));
        let found: Endpoints = async { self.http.get(&url).send().await?.error_for_status()?.json().await }
            .await
            .map_err(|e: reqwest::Error| format!("The identity provider's discovery document cannot be read: {e}."))?;
        self.discovered.lock().unwrap_or_else(|e| e.into_inner()).insert(index, found.clone());
        Ok(found)
    }
}

fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Where the provider sends the browser back: the configured public URL, or this request's
/// own host over the listener's scheme.
fn callback_url(console: &Console, headers: &HeaderMap) -> String {
    let base = match &console.public_base_url {
        Some(base) => base.trim_end_matches('/').to_string(),
        None => {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
            format!("{}://{host}", if console.secure_cookies { "https" } else { "http" })
        }
    };
    format!("{base}/ui/sign-in/callback")
}

fn flow_cookie(console: &Console, value: String, remove: bool) -> Option<HeaderValue> {
    let mut c = Cookie::build((FLOW_COOKIE, value))
        .path("/ui")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(console.secure_cookies)
        .max_age(cookie::time::Duration::seconds(if remove { 0 } else { FLOW_SECONDS }));
    if remove {
        c = c.expires(cookie::time::OffsetDateTime::UNIX_EPOCH);
    }
    HeaderValue::from_str(&c.build().to_string()).ok()
}

#[derive(Deserialize)]
pub(crate) struct StartQuery {
    #[serde(default)]
    issuer: usize,
}

/// Sends the browser to the provider's authorization endpoint.
pub(crate) async fn start(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Query(q): Query<StartQuery>,
) -> Response {
    let endpoints = match console.oidc.endpoints(q.issuer).await {
        Ok(e) => e,
        Err(why) => return session::sign_in_again(&console, &visit, &why),
    };
    let client = &console.oidc.clients[q.issuer];
    let (state, verifier) = (random(24), random(48));
    let redirect = callback_url(&console, &headers);
    let query = [
        ("response_type", "code"),
        ("client_id", client.client_id.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("scope", client.scopes.as_str()),
        ("state", state.as_str()),
        ("code_challenge", &challenge(&verifier)),
        ("code_challenge_method", "S256"),
    ];
    let params = uri("", &query);
    let separator = if endpoints.authorization_endpoint.contains('?') { "&" } else { "?" };
    let target = format!("{}{separator}{}", endpoints.authorization_endpoint, params.trim_start_matches('?'));
    let mut resp = Redirect::to(&target).into_response();
    if let Some(v) = flow_cookie(&console, format!("{}.{state}.{verifier}", q.issuer), false) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

#[derive(Deserialize)]
pub(crate) struct CallbackQuery {
    #[serde(default)]
    code: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_description: String,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
}

/// The provider's answer: the state must be this browser's, the code is redeemed with the
/// verifier, and the access token signs in (the API decides whether it is any good).
pub(crate) async fn callback(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let flow = session::cookie_value(&headers, FLOW_COOKIE).unwrap_or_default();
    let mut parts = flow.splitn(3, '.');
    let (index, state, verifier) = (parts.next(), parts.next(), parts.next());
    let mut resp = match (index.and_then(|i| i.parse::<usize>().ok()), state, verifier) {
        _ if !q.error.is_empty() => {
            let why = format!("The identity provider refused: {} {}", q.error, q.error_description);
            session::sign_in_again(&console, &visit, why.trim())
        }
        (Some(index), Some(state), Some(verifier)) if !q.state.is_empty() && q.state == state => {
            match redeem(&console, &headers, index, &q.code, verifier).await {
                Ok(token) => session::accept(&console, &visit, token).await,
                Err(why) => session::sign_in_again(&console, &visit, &why),
            }
        }
        _ => {
            session::sign_in_again(&console, &visit, "This sign-in was not started here, or took too long; try again.")
        }
    };
    if let Some(v) = flow_cookie(&console, String::new(), true) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

async fn redeem(
    console: &Console,
    headers: &HeaderMap,
    index: usize,
    code: &str,
    verifier: &str,
) -> Result<String, String> {
    let endpoints = console.oidc.endpoints(index).await?;
    let client = console.oidc.clients.get(index).ok_or("No such identity provider.")?;
    let redirect = callback_url(console, headers);
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect.as_str()),
        ("client_id", client.client_id.as_str()),
        ("code_verifier", verifier),
    ];
    let answer = console.oidc.http.post(&endpoints.token_endpoint).form(&form).send().await;
    let answer = answer.map_err(|e| format!("The identity provider cannot be reached: {e}."))?;
    if !answer.status().is_success() {
        return Err(format!("The identity provider did not take the sign-in code ({}).", answer.status()));
    }
    let token: TokenAnswer =
        answer.json().await.map_err(|e| format!("The identity provider's answer is not a token: {e}."))?;
    Ok(token.access_token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let v = random(48);
        assert_eq!(v.len(), 64);
        assert!(v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    }
}
