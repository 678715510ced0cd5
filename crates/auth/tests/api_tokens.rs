//! API tokens against a real store: shown once, stored as a hash, revocable, expiring.
//!
//! On paused time: the authenticator runs no timer, and with none due the idle runtime has
//! nothing to move the clock to while a store write is on the writer thread; only the test's
//! `tokio::time::advance` moves it.

use std::sync::Arc;
use std::time::Duration;

use slipway_auth::api_tokens::{self, NewApiToken};
use slipway_auth::{AuthError, AuthOptions, Authenticator};
use slipway_domain::{Clock, PrincipalKind};
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_store::{EntryKind, Store};
use slipway_test_support::{TestClock, eventually};

async fn setup() -> (Arc<dyn Store>, Arc<TestClock>, Authenticator, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(SqliteOptions::new(dir.path().join("db"))).unwrap());
    let clock = Arc::new(TestClock::new());
    let options =
        AuthOptions { api_tokens: true, trusted_front_ends: vec!["arm-frontend".into()], ..Default::default() };
    let auth = Authenticator::new(options, store.clone(), clock.clone()).unwrap();
    (store, clock, auth, dir)
}

#[tokio::test(start_paused = true)]
async fn a_token_authenticates_its_principal_until_revoked() {
    let (store, clock, auth, _dir) = setup().await;
    let new = NewApiToken {
        principal: "ci-bot".into(),
        tenant: Some("t1".into()),
        groups: vec!["deployers".into()],
        ..Default::default()
    };
    let (text, stored) = api_tokens::create(store.as_ref(), new, clock.now(), None).await.unwrap();
    let who = auth.authenticate(Some(&format!("Bearer {text}"))).await.unwrap();
    assert_eq!(who.principal.name, "ci-bot");
    assert_eq!(who.principal.tenant.as_deref(), Some("t1"));
    assert_eq!(who.principal.kind, PrincipalKind::Application);
    assert_eq!(who.principal.groups, vec!["deployers".to_string()]);

    // Only a hash is stored: the secret appears nowhere in the row.
    let secret = text.splitn(3, '_').nth(2).unwrap();
    let row = store.get_entry(EntryKind::ApiToken, &stored.id).await.unwrap().unwrap();
    assert!(!row.body.contains(secret), "{}", row.body);
    // The use is recorded off the request's path, so it lands when it lands.
    let listed = async || api_tokens::list(store.as_ref()).await.unwrap();
    eventually("the token's use recorded", Duration::from_secs(10), async || {
        listed().await.first().is_some_and(|t| t.last_used_at.is_some())
    })
    .await;
    let mut used = listed().await;
    assert!(used[0].last_used_at >= Some(stored.created_at));
    used[0].last_used_at = None;
    assert_eq!(used, vec![stored.clone()], "the token as created, with its use");

    // Same id, another secret: refused.
    let forged = format!("slw_{}_{}", stored.id, "A".repeat(43));
    assert_eq!(auth.authenticate(Some(&format!("Bearer {forged}"))).await.unwrap_err(), AuthError::UnknownApiToken);

    assert!(api_tokens::revoke(store.as_ref(), &stored.id, None).await.unwrap());
    assert!(!api_tokens::revoke(store.as_ref(), &stored.id, None).await.unwrap());
    assert_eq!(auth.authenticate(Some(&format!("Bearer {text}"))).await.unwrap_err(), AuthError::UnknownApiToken);
}

#[tokio::test(start_paused = true)]
async fn a_token_expires_by_the_injected_clock() {
    let (store, clock, auth, _dir) = setup().await;
    let new = NewApiToken {
        principal: "nightly".into(),
        expires_at: Some(clock.now().add(Duration::from_secs(3600))),
        ..Default::default()
    };
    let (text, _) = api_tokens::create(store.as_ref(), new, clock.now(), None).await.unwrap();
    assert!(auth.authenticate(Some(&format!("Bearer {text}"))).await.is_ok());
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(auth.authenticate(Some(&format!("Bearer {text}"))).await.unwrap_err(), AuthError::ApiTokenExpired);
}

#[tokio::test(start_paused = true)]
async fn a_configured_front_end_is_marked_trusted() {
    let (store, clock, auth, _dir) = setup().await;
    let (front, _) = api_tokens::create(
        store.as_ref(),
        NewApiToken { principal: "arm-frontend".into(), ..Default::default() },
        clock.now(),
        None,
    )
    .await
    .unwrap();
    let (other, _) = api_tokens::create(
        store.as_ref(),
        NewApiToken { principal: "someone".into(), ..Default::default() },
        clock.now(),
        None,
    )
    .await
    .unwrap();
    assert!(auth.authenticate(Some(&format!("Bearer {front}"))).await.unwrap().trusted_front_end);
    assert!(!auth.authenticate(Some(&format!("Bearer {other}"))).await.unwrap().trusted_front_end);
}
