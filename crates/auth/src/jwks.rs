//! One issuer's signing keys: fetched on first use (discovery or a JWKS URL or file), kept in
//! memory, fetched again when a token names a key we do not have — at most once per
//! `refresh_min_interval`, one fetch at a time.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use slipway_domain::{Clock, Timestamp};

use crate::error::AuthError;
use crate::options::{IssuerOptions, KeySource};

/// A verification key and the algorithms it may verify.
#[derive(Clone)]
pub(crate) struct VerifyKey {
    pub key: DecodingKey,
    pub algorithms: Vec<Algorithm>,
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, VerifyKey>,
    /// Keys published without a `kid` (then a token without one may use them).
    anonymous: Vec<VerifyKey>,
}

pub(crate) struct IssuerKeys {
    pub options: IssuerOptions,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    keys: RwLock<Arc<Keys>>,
    /// When the last fetch started; serialises fetches.
    last_fetch: tokio::sync::Mutex<Option<Timestamp>>,
}

impl IssuerKeys {
    pub fn new(options: IssuerOptions, http: reqwest::Client, clock: Arc<dyn Clock>) -> Self {
        IssuerKeys {
            options,
            http,
            clock,
            keys: RwLock::new(Arc::new(Keys::default())),
            last_fetch: tokio::sync::Mutex::new(None),
        }
    }

    fn current(&self) -> Arc<Keys> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn find(keys: &Keys, kid: Option<&str>) -> Option<Vec<VerifyKey>> {
        match kid {
            Some(kid) => keys.by_kid.get(kid).map(|k| vec![k.clone()]),
            None if keys.anonymous.is_empty() && keys.by_kid.len() == 1 => {
                Some(keys.by_kid.values().cloned().collect())
            }
            None => Some(keys.anonymous.clone()).filter(|v| !v.is_empty()),
        }
    }

    /// The keys a token with this `kid` may have been signed with.
    pub async fn keys_for(&self, kid: Option<&str>) -> Result<Vec<VerifyKey>, AuthError> {
        if let Some(found) = Self::find(&self.current(), kid) {
            return Ok(found);
        }
        let mut last = self.last_fetch.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(found) = Self::find(&self.current(), kid) {
            return Ok(found);
        }
        let now = self.clock.now();
        let never_fetched = last.is_none();
        if last.is_some_and(|at| now.since(at) < self.options.refresh_min_interval) {
            return Err(AuthError::UnknownKey);
        }
        *last = Some(now);
        match self.fetch().await {
            Ok(keys) => {
                tracing::info!(issuer = %self.options.issuer, keys = keys.by_kid.len() + keys.anonymous.len(), "signing keys loaded");
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
            }
            Err(e) => {
                tracing::warn!(issuer = %self.options.issuer, error = %e, "cannot load signing keys");
                if never_fetched {
                    // Let the next request try again rather than wait out the interval.
                    *last = None;
                }
                return Err(AuthError::Unavailable(format!("signing keys of the issuer: {e}")));
            }
        }
        Self::find(&self.current(), kid).ok_or(AuthError::UnknownKey)
    }

    async fn fetch(&self) -> Result<Keys, String> {
        let set: JwkSet = match &self.options.keys {
            KeySource::JwksFile(path) => {
                let text = tokio::fs::read(path).await.map_err(|e| format!("{}: {e}", path.display()))?;
                serde_json::from_slice(&text).map_err(|e| format!("{}: not a JWKS document: {e}", path.display()))?
            }
            KeySource::JwksUri(uri) => self.get_json(uri).await?,
            KeySource::Discovery => {
                let base = self.options.issuer.trim_end_matches('/');
                let doc: serde_json::Value = self.get_json(&format!("{base}/.well-known/openid-configuration")).await?;
                // OpenID Connect Discovery §4.3: the document must name the issuer it describes.
                if doc.get("issuer").and_then(|v| v.as_str()) != Some(self.options.issuer.as_str()) {
                    return Err("the discovery document names another issuer".into());
                }
                let uri =
                    doc.get("jwks_uri").and_then(|v| v.as_str()).ok_or("the discovery document has no jwks_uri")?;
                self.get_json(uri).await?
            }
        };
        Ok(usable_keys(&set))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let resp = self.http.get(url).send().await.map_err(|e| format!("GET {url}: {}", without_url(&e)))?;
        if !resp.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", resp.status().as_u16()));
        }
        resp.json().await.map_err(|e| format!("GET {url}: {}", without_url(&e)))
    }
}

fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), "");
    }
    s
}

/// Signature keys with an asymmetric algorithm; symmetric (`oct`) and encryption keys are
/// never used, so a token "signed" with HMAC over a public key cannot verify.
fn usable_keys(set: &JwkSet) -> Keys {
    let mut keys = Keys::default();
    for jwk in &set.keys {
        if jwk.common.public_key_use.as_ref().is_some_and(|u| *u != PublicKeyUse::Signature) {
            continue;
        }
        let algorithms = algorithms_of(jwk);
        if algorithms.is_empty() {
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(jwk) else { continue };
        let verify = VerifyKey { key, algorithms };
        match &jwk.common.key_id {
            Some(kid) => {
                keys.by_kid.insert(kid.clone(), verify);
            }
            None => keys.anonymous.push(verify),
        }
    }
    keys
}

/// The asymmetric algorithms Slipway accepts.
pub(crate) const ACCEPTED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

fn algorithms_of(jwk: &Jwk) -> Vec<Algorithm> {
    let by_type: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => ACCEPTED[..6].to_vec(),
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => vec![],
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => vec![Algorithm::EdDSA],
        _ => vec![],
    };
    match jwk.common.key_algorithm {
        None => by_type,
        Some(declared) => by_type.into_iter().filter(|a| key_algorithm(*a) == Some(declared)).collect(),
    }
}

fn key_algorithm(a: Algorithm) -> Option<KeyAlgorithm> {
    Some(match a {
        Algorithm::RS256 => KeyAlgorithm::RS256,
        Algorithm::RS384 => KeyAlgorithm::RS384,
        Algorithm::RS512 => KeyAlgorithm::RS512,
        Algorithm::PS256 => KeyAlgorithm::PS256,
        Algorithm::PS384 => KeyAlgorithm::PS384,
        Algorithm::PS512 => KeyAlgorithm::PS512,
        Algorithm::ES256 => KeyAlgorithm::ES256,
        Algorithm::ES384 => KeyAlgorithm::ES384,
        Algorithm::EdDSA => KeyAlgorithm::EdDSA,
        _ => return None,
    })
}
