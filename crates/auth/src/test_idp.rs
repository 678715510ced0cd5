//! A real OpenID Connect issuer for tests (feature `test-idp`, a dev-dependency only): keys
//! generated in the process, discovery and JWKS served over HTTP on loopback, tokens signed
//! with the private keys. Not part of the binary.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
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

#[derive(Default)]
struct Shared {
    keys: Mutex<Vec<SigningKey>>,
    jwks_fetches: AtomicUsize,
    issuer: Mutex<String>,
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
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestIdp { issuer, addr, shared, server }
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
        "id_token_signing_alg_values_supported": ["ES256"]}))
}

async fn jwks(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    shared.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let keys: Vec<Jwk> = shared.keys.lock().unwrap().iter().map(|k| k.jwk.clone()).collect();
    axum::Json(serde_json::to_value(JwkSet { keys }).expect("JWKS as JSON"))
}
