//! JWTs from a real issuer on loopback: discovery, JWKS, ES256 signatures made with keys
//! generated here. Each case names the one thing wrong with its token.
//!
//! On real time: the keys come over loopback HTTP, which a paused clock does not wait for.
//! Time the authenticator must see pass (expiry, the refresh interval) is a `jump` of
//! tokio's clock, which the injected clock reads.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_auth::{AuthError, AuthOptions, Authenticator, IssuerOptions, KeySource};
use slipway_domain::{Clock, SystemClock};
use slipway_store::Store;
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_test_support::{TestClock, jump};

const AUD: &str = "api://slipway";

struct Fixture {
    idp: TestIdp,
    clock: Arc<TestClock>,
    auth: Authenticator,
    _dir: tempfile::TempDir,
}

fn now_secs() -> i64 {
    SystemClock.now().as_millis() / 1000
}

async fn fixture_with(keys: impl FnOnce(&TestIdp) -> KeySource) -> Fixture {
    let idp = TestIdp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(SqliteOptions::new(dir.path().join("db"))).unwrap());
    let clock = Arc::new(TestClock::new());
    let mut issuer = IssuerOptions::new(idp.issuer.clone(), vec![AUD.into()], keys(&idp));
    issuer.leeway = Duration::from_secs(30);
    issuer.prefix = String::new(); // the home issuer
    let options = AuthOptions { issuers: vec![issuer], api_tokens: false, trusted_front_ends: vec!["arm".into()] };
    let auth = Authenticator::new(options, store, clock.clone()).unwrap();
    Fixture { idp, clock, auth, _dir: dir }
}

async fn fixture() -> Fixture {
    fixture_with(|_| KeySource::Discovery).await
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

impl Fixture {
    async fn check(&self, token: &str) -> Result<slipway_auth::Authenticated, AuthError> {
        self.auth.authenticate(Some(&bearer(token))).await
    }

    /// The injected clock's time, in seconds.
    fn now_secs(&self) -> i64 {
        self.clock.now().as_millis() / 1000
    }

    fn valid_claims(&self) -> Value {
        self.idp.claims(AUD, "alice", "tenant-a", self.now_secs())
    }
}

#[tokio::test]
async fn a_valid_token_names_its_principal() {
    let f = fixture().await;
    let mut claims = f.valid_claims();
    claims["groups"] = json!(["ops"]);
    let who = f.check(&f.idp.sign("key-1", &claims)).await.unwrap();
    assert_eq!(who.principal.name, "alice");
    assert_eq!(who.principal.tenant.as_deref(), Some("tenant-a"));
    assert_eq!(who.principal.groups, vec!["ops".to_string()]);
    assert!(!who.trusted_front_end);
    // The keys were fetched once and are reused.
    f.check(&f.idp.sign("key-1", &claims)).await.unwrap();
    assert_eq!(f.idp.jwks_fetches(), 1);
}

#[tokio::test]
async fn expired_and_not_yet_valid_tokens_are_refused_after_the_leeway() {
    let f = fixture().await;
    let now = f.now_secs();
    let mut expired = f.valid_claims();
    expired["exp"] = json!(now - 31);
    assert_eq!(f.check(&f.idp.sign("key-1", &expired)).await.unwrap_err(), AuthError::Expired);
    expired["exp"] = json!(now - 10);
    assert!(f.check(&f.idp.sign("key-1", &expired)).await.is_ok(), "inside the leeway");
    let mut early = f.valid_claims();
    early["nbf"] = json!(now + 120);
    assert_eq!(f.check(&f.idp.sign("key-1", &early)).await.unwrap_err(), AuthError::NotYetValid);
    // The injected clock decides, not the machine's: an hour and a bit later the valid token
    // has expired.
    let token = f.idp.sign("key-1", &f.valid_claims());
    jump(Duration::from_secs(3600 + 60)).await;
    assert_eq!(f.check(&token).await.unwrap_err(), AuthError::Expired);
}

#[tokio::test]
async fn wrong_issuer_and_wrong_audience_are_refused() {
    let f = fixture().await;
    let mut other_issuer = f.valid_claims();
    other_issuer["iss"] = json!("https://elsewhere.example");
    assert_eq!(f.check(&f.idp.sign("key-1", &other_issuer)).await.unwrap_err(), AuthError::UnknownIssuer);
    let mut other_aud = f.valid_claims();
    other_aud["aud"] = json!("api://something-else");
    assert_eq!(f.check(&f.idp.sign("key-1", &other_aud)).await.unwrap_err(), AuthError::WrongAudience);
    let mut no_aud = f.valid_claims();
    no_aud.as_object_mut().unwrap().remove("aud");
    assert_eq!(f.check(&f.idp.sign("key-1", &no_aud)).await.unwrap_err(), AuthError::MissingClaim("aud".into()));
}

#[tokio::test]
async fn an_unknown_kid_refreshes_the_keys_at_most_once_per_interval() {
    let f = fixture().await;
    f.check(&f.idp.sign("key-1", &f.valid_claims())).await.unwrap();
    assert_eq!(f.idp.jwks_fetches(), 1);
    // A forged kid inside the interval: refused without asking the issuer again.
    let forged = f.idp.sign_with_unpublished_key("forged", &f.valid_claims());
    assert_eq!(f.check(&forged).await.unwrap_err(), AuthError::UnknownKey);
    assert_eq!(f.idp.jwks_fetches(), 1);
    // The issuer rotates its key; once the interval has passed, the new kid triggers one fetch.
    f.idp.rotate("key-2");
    let rotated = f.idp.sign("key-2", &f.valid_claims());
    assert_eq!(f.check(&rotated).await.unwrap_err(), AuthError::UnknownKey, "still inside the interval");
    jump(IssuerOptions::DEFAULT_REFRESH_MIN_INTERVAL).await;
    assert_eq!(f.check(&rotated).await.unwrap().principal.name, "alice");
    assert_eq!(f.idp.jwks_fetches(), 2);
    for _ in 0..5 {
        let _ = f.check(&forged).await;
    }
    assert_eq!(f.idp.jwks_fetches(), 2, "a flood of unknown kids is not a flood of fetches");
}

fn forge(header: Value, claims: &Value, signature: &[u8]) -> String {
    let enc = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap());
    format!("{}.{}.{}", enc(&header), enc(claims), URL_SAFE_NO_PAD.encode(signature))
}

#[tokio::test]
async fn alg_none_is_refused() {
    let f = fixture().await;
    let token = forge(json!({"alg": "none", "typ": "JWT"}), &f.valid_claims(), b"");
    assert_eq!(f.check(&token).await.unwrap_err(), AuthError::Algorithm("none".into()));
    assert_eq!(f.idp.jwks_fetches(), 0, "refused before any key is looked at");
}

#[tokio::test]
async fn hs256_signed_with_the_public_key_is_refused() {
    let f = fixture().await;
    // The classic confusion: HMAC with the published public key as the secret.
    let public = serde_json::to_vec(&f.idp.jwks()["keys"][0]).unwrap();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("key-1".into());
    let key = jsonwebtoken::EncodingKey::from_secret(&public).unwrap();
    let token = jsonwebtoken::encode(&header, &f.valid_claims(), &key).unwrap();
    assert_eq!(f.check(&token).await.unwrap_err(), AuthError::Algorithm("HS256".into()));
}

#[tokio::test]
async fn a_tampered_payload_fails_the_signature() {
    let f = fixture().await;
    let token = f.idp.sign("key-1", &f.valid_claims());
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    claims["sub"] = json!("mallory");
    let tampered =
        format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap()), parts[2]);
    assert_eq!(f.check(&tampered).await.unwrap_err(), AuthError::BadSignature);
}

#[tokio::test]
async fn missing_and_malformed_credentials_say_so() {
    let f = fixture().await;
    assert_eq!(f.auth.authenticate(None).await.unwrap_err(), AuthError::Missing);
    assert_eq!(f.auth.authenticate(Some("  ")).await.unwrap_err(), AuthError::Missing);
    assert_eq!(f.auth.authenticate(Some("Basic dXNlcjpwdw==")).await.unwrap_err(), AuthError::NotBearer);
    assert_eq!(f.check("not-a-jwt").await.unwrap_err(), AuthError::Malformed);
    // An API token when API tokens are off.
    assert_eq!(f.check("slw_0123456789abcdef_x").await.unwrap_err(), AuthError::UnknownApiToken);
}

#[tokio::test]
async fn keys_from_a_jwks_file_are_read_again_on_an_unknown_kid() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_path_buf();
    let f = fixture_with(|idp| {
        std::fs::write(&path, serde_json::to_vec(&idp.jwks()).unwrap()).unwrap();
        KeySource::JwksFile(path.clone())
    })
    .await;
    assert!(f.check(&f.idp.sign("key-1", &f.valid_claims())).await.is_ok());
    f.idp.rotate("key-2");
    std::fs::write(&path, serde_json::to_vec(&f.idp.jwks()).unwrap()).unwrap();
    jump(IssuerOptions::DEFAULT_REFRESH_MIN_INTERVAL).await;
    assert!(f.check(&f.idp.sign("key-2", &f.valid_claims())).await.is_ok());
    assert_eq!(f.idp.jwks_fetches(), 0, "nothing fetched over HTTP");
}

#[tokio::test]
async fn an_unreachable_issuer_is_unavailable_not_unauthenticated() {
    let idp = TestIdp::start().await;
    let token = idp.sign("key-1", &idp.claims(AUD, "alice", "t", now_secs()));
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(SqliteOptions::new(dir.path().join("db"))).unwrap());
    // Keys from a port nobody listens on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let issuer =
        IssuerOptions::new(idp.issuer.clone(), vec![AUD.into()], KeySource::JwksUri(format!("http://{dead}/jwks")));
    let auth =
        Authenticator::new(AuthOptions { issuers: vec![issuer], ..Default::default() }, store, Arc::new(SystemClock))
            .unwrap();
    let err = auth.authenticate(Some(&bearer(&token))).await.unwrap_err();
    assert!(matches!(err, AuthError::Unavailable(_)), "{err:?}");
    assert!(!err.to_string().contains(&token), "the credential never appears in an error");
}
