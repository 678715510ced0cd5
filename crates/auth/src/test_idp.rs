//! A real OpenID Connect issuer for tests (feature `test-idp`, a dev-dependency only): keys
//! generated in the process, discovery and JWKS served over HTTP on loopback, tokens signed
//! with the private keys; the authorization-code flow with PKCE (`/authorize` approves
//! whoever the test names, `/token` checks the code verifier), the client-credentials grant
//! for registered clients, and the device flow (`/device`; the first poll of each device code
//! is `authorization_pending`). Not part of the binary.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine;
use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use serde_json::{Value, json};

struct SigningKey {
    kid: String,
    key: EncodingKey,
    jwk: Jwk,
}

/// A code `/authorize` handed out, and what `/token` must see to redeem it.
struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    claims: Value,
}

#[derive(Default)]
struct Shared {
    keys: Mutex<Vec<SigningKey>>,
    jwks_fetches: AtomicUsize,
    issuer: Mutex<String>,
    /// Who `/authorize` signs in, as `(subject, tenant, audience)`.
    approves: Mutex<Option<(String, String, String)>>,
    grants: Mutex<HashMap<String, Grant>>,
    /// Confidential clients: id → (secret, tenant, audience).
    clients: Mutex<HashMap<String, (String, String, String)>>,
    /// Device codes handed out → whether one poll has been told to wait.
    devices: Mutex<HashMap<String, bool>>,
}

pub struct TestIdp {
    pub issuer: String,
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for TestIdp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn generate(kid: &str) -> SigningKey {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
        .expect("generate a P-256 key");
    let key = EncodingKey::from_ec_der(pkcs8.as_ref());
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).expect("public JWK of the key");
    jwk.common.key_id = Some(kid.to_string());
    jwk.common.key_algorithm = Some(KeyAlgorithm::ES256);
    SigningKey { kid: kid.to_string(), key, jwk }
}

impl TestIdp {
    /// Serves `/.well-known/openid-configuration` and `/jwks` with one key, `key-1`.
    pub async fn start() -> TestIdp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the test issuer");
        let addr = listener.local_addr().expect("local addr");
        let issuer = format!("http://{addr}");
        let shared = Arc::new(Shared::default());
        *shared.issuer.lock().unwrap() = issuer.clone();
        shared.keys.lock().unwrap().push(generate("key-1"));
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/device", post(device))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestIdp { issuer, addr, shared, server }
    }

    /// From now on `/authorize` signs in `subject` of `tenant`, with an access token for
    /// `audience`.
    pub fn approve_as(&self, subject: &str, tenant: &str, audience: &str) {
        *self.shared.approves.lock().unwrap() = Some((subject.into(), tenant.into(), audience.into()));
    }

    /// A confidential client: the client-credentials grant gives it a token whose subject is
    /// `client_id`.
    pub fn register_client(&self, client_id: &str, secret: &str, tenant: &str, audience: &str) {
        let entry = (secret.to_string(), tenant.to_string(), audience.to_string());
        self.shared.clients.lock().unwrap().insert(client_id.into(), entry);
    }

    /// Replaces the published keys with one new key named `kid`.
    pub fn rotate(&self, kid: &str) {
        *self.shared.keys.lock().unwrap() = vec![generate(kid)];
    }

    /// Signs `claims` with the published key `kid` (ES256).
    pub fn sign(&self, kid: &str, claims: &Value) -> String {
        let keys = self.shared.keys.lock().unwrap();
        let k = keys.iter().find(|k| k.kid == kid).expect("a published key");
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(k.kid.clone());
        jsonwebtoken::encode(&header, claims, &k.key).expect("sign")
    }

    /// Signs with a key the issuer never published.
    pub fn sign_with_unpublished_key(&self, kid: &str, claims: &Value) -> String {
        let k = generate(kid);
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, claims, &k.key).expect("sign")
    }

    /// The published JWKS document.
    pub fn jwks(&self) -> Value {
        let keys: Vec<Jwk> = self.shared.keys.lock().unwrap().iter().map(|k| k.jwk.clone()).collect();
        serde_json::to_value(JwkSet { keys }).expect("JWKS as JSON")
    }

    pub fn jwks_fetches(&self) -> usize {
        self.shared.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Claims of a token valid for an hour from `now_secs`.
    pub fn claims(&self, audience: &str, subject: &str, tenant: &str, now_secs: i64) -> Value {
        json!({"iss": self.issuer, "aud": audience, "sub": subject, "tid": tenant,
            "iat": now_secs, "nbf": now_secs, "exp": now_secs + 3600})
    }
}

async fn discovery(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    let issuer = shared.issuer.lock().unwrap().clone();
    axum::Json(json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks"),
        "authorization_endpoint": format!("{issuer}/authorize"), "token_endpoint": format!("{issuer}/token"),
        "device_authorization_endpoint": format!("{issuer}/device"),
        "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
        "id_token_signing_alg_values_supported": ["ES256"]}))
}

fn bad(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error}))).into_response()
}

fn param<'a>(q: &'a HashMap<String, String>, name: &str) -> &'a str {
    q.get(name).map(String::as_str).unwrap_or_default()
}

/// Approves at once (no login page) whoever [`TestIdp::approve_as`] named, and sends the
/// browser back with a code; only S256 challenges are taken.
async fn authorize(State(shared): State<Arc<Shared>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let Some((subject, tenant, audience)) = shared.approves.lock().unwrap().clone() else {
        return bad("access_denied");
    };
    if param(&q, "response_type") != "code" || param(&q, "code_challenge_method") != "S256" {
        return bad("invalid_request");
    }
    let claims = claims_for(&shared, &subject, &tenant, &audience);
    let code = format!("code-{}", shared.grants.lock().unwrap().len() + 1);
    let grant = Grant {
        client_id: param(&q, "client_id").into(),
        redirect_uri: param(&q, "redirect_uri").into(),
        challenge: param(&q, "code_challenge").into(),
        claims,
    };
    let back = format!("{}?code={code}&state={}", grant.redirect_uri, param(&q, "state"));
    shared.grants.lock().unwrap().insert(code, grant);
    Redirect::to(&back).into_response()
}

/// Redeems a code once, for the client and redirect it was issued to, with the verifier whose
/// SHA-256 is the challenge.
fn claims_for(shared: &Shared, subject: &str, tenant: &str, audience: &str) -> Value {
    let now = jsonwebtoken::get_current_timestamp() as i64;
    let issuer = shared.issuer.lock().unwrap().clone();
    json!({"iss": issuer, "aud": audience, "sub": subject, "tid": tenant, "iat": now, "nbf": now, "exp": now + 3600})
}

fn access_token(shared: &Shared, claims: &Value) -> Response {
    let keys = shared.keys.lock().unwrap();
    let k = keys.first().expect("a published key");
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(k.kid.clone());
    let access = jsonwebtoken::encode(&header, claims, &k.key).expect("sign");
    axum::Json(json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600})).into_response()
}

/// RFC 8628's device authorization: a code for the device, one for the person.
async fn device(State(shared): State<Arc<Shared>>, Form(f): Form<HashMap<String, String>>) -> Response {
    if param(&f, "client_id").is_empty() {
        return bad("invalid_client");
    }
    let mut devices = shared.devices.lock().unwrap();
    let n = devices.len() + 1;
    devices.insert(format!("device-{n}"), false);
    let issuer = shared.issuer.lock().unwrap().clone();
    axum::Json(json!({"device_code": format!("device-{n}"), "user_code": format!("ABCD-{n:04}"),
        "verification_uri": format!("{issuer}/activate"), "expires_in": 600, "interval": 1}))
    .into_response()
}

async fn token(State(shared): State<Arc<Shared>>, Form(f): Form<HashMap<String, String>>) -> Response {
    match param(&f, "grant_type") {
        "authorization_code" => {}
        "client_credentials" => {
            let id = param(&f, "client_id");
            let Some((secret, tenant, audience)) = shared.clients.lock().unwrap().get(id).cloned() else {
                return bad("invalid_client");
            };
            if secret != param(&f, "client_secret") {
                return bad("invalid_client");
            }
            return access_token(&shared, &claims_for(&shared, id, &tenant, &audience));
        }
        "urn:ietf:params:oauth:grant-type:device_code" => {
            let waited = shared.devices.lock().unwrap().insert(param(&f, "device_code").into(), true);
            let Some((subject, tenant, audience)) = shared.approves.lock().unwrap().clone() else {
                return bad("access_denied");
            };
            return match waited {
                None => bad("expired_token"),
                Some(false) => bad("authorization_pending"),
                Some(true) => access_token(&shared, &claims_for(&shared, &subject, &tenant, &audience)),
            };
        }
        _ => return bad("unsupported_grant_type"),
    }
    let Some(grant) = shared.grants.lock().unwrap().remove(param(&f, "code")) else {
        return bad("invalid_grant");
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, param(&f, "code_verifier").as_bytes());
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
    if grant.client_id != param(&f, "client_id")
        || grant.redirect_uri != param(&f, "redirect_uri")
        || grant.challenge != challenge
    {
        return bad("invalid_grant");
    }
    access_token(&shared, &grant.claims)
}

async fn jwks(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    shared.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let keys: Vec<Jwk> = shared.keys.lock().unwrap().iter().map(|k| k.jwk.clone()).collect();
    axum::Json(serde_json::to_value(JwkSet { keys }).expect("JWKS as JSON"))
}
