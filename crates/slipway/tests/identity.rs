//! Identity at the edge, black-box: a real issuer on loopback signs tokens; API tokens come
//! from the store. Every request is tied to a verified principal, and what a client merely
//! claims in a header (who it is, where to point URLs) is ignored.

use crate::common;

use std::time::Duration;

use crate::common::{SUB, TestServer, header, rid};
use serde_json::{Value, json};
use slipway_auth::api_tokens::{self, NewApiToken};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};
use slipway_test_support::{eventually, jump};

const AUD: &str = "api://slipway";

fn auth_tables(idp: &TestIdp) -> String {
    format!(
        r#"
[auth]
api_tokens = true
trusted_front_ends = ["arm-frontend"]
admins = ["root"]

[[auth.issuers]]
issuer = "{}"
audiences = ["{AUD}"]
"#,
        idp.issuer
    )
}

/// A server whose subscription `SUB` is registered to tenant-a, with `alice`, `ci` and the
/// front end holding Contributor there (as the platform admin `root` set up).
async fn start(idp: &TestIdp) -> TestServer {
    start_with(idp, "").await
}

async fn start_with(idp: &TestIdp, more_auth: &str) -> TestServer {
    let tables = auth_tables(idp).replace("admins = [\"root\"]\n", &format!("admins = [\"root\"]\n{more_auth}\n"));
    let s = TestServer::start_full("", "", &tables, |_| {}).await;
    let root = token(idp, "root", "platform");
    let put = |path: String, body: Value| {
        let req = s.http.put(format!("{}{path}?api-version=2025-06-01", s.base)).bearer_auth(&root).json(&body);
        async move {
            let r = req.send().await.unwrap();
            assert!(r.status().is_success(), "{path}: {} {}", r.status(), r.text().await.unwrap_or_default());
        }
    };
    put(format!("/subscriptions/{SUB}"), json!({"state": "Registered", "properties": {"tenantId": "tenant-a"}})).await;
    for (i, who) in ["alice", "ci", "arm-frontend"].iter().enumerate() {
        let id = format!("00000000-0000-0000-0000-00000000000{i}");
        let body = json!({"properties": {"roleDefinitionId": "Contributor", "principalId": who}});
        put(format!("/subscriptions/{SUB}/providers/Slipway.Authorization/roleAssignments/{id}"), body).await;
    }
    s
}

/// An API token for `principal`, created in the running server's store.
async fn api_token(s: &TestServer, principal: &str) -> (String, api_tokens::ApiToken) {
    let store = s.app.as_ref().unwrap().store();
    let new = NewApiToken { principal: principal.into(), ..Default::default() };
    api_tokens::create(store.as_ref(), new, SystemClock.now(), None).await.unwrap()
}

fn now_secs() -> i64 {
    SystemClock.now().as_millis() / 1000
}

fn token(idp: &TestIdp, subject: &str, tenant: &str) -> String {
    idp.sign("key-1", &idp.claims(AUD, subject, tenant, now_secs()))
}

fn vnet(location: &str) -> Value {
    json!({"location": location, "properties": {"addressSpace": "10.0.0.0/16"}})
}

async fn error_of(r: reqwest::Response) -> (u16, Option<String>, String, String) {
    let status = r.status().as_u16();
    let challenge = header(&r, "www-authenticate");
    let body: Value = r.json().await.unwrap_or(Value::Null);
    (
        status,
        challenge,
        body["error"]["code"].as_str().unwrap_or_default().to_string(),
        body["error"]["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn requests_without_a_valid_credential_get_401_with_a_reason() {
    let idp = TestIdp::start().await;
    let s = start(&idp).await;
    let path = rid("virtualNetworks", "v1");

    let (status, challenge, code, _) = error_of(s.get(&path).await).await;
    assert_eq!((status, code.as_str()), (401, "AuthenticationFailed"));
    assert_eq!(challenge.as_deref(), Some("Bearer realm=\"slipway\""));

    let mut expired = idp.claims(AUD, "alice", "t-a", now_secs() - 7200);
    expired["exp"] = json!(now_secs() - 3600);
    let expired = idp.sign("key-1", &expired);
    let r = s.http.get(s.url(&path)).bearer_auth(&expired).send().await.unwrap();
    let (status, challenge, code, message) = error_of(r).await;
    assert_eq!((status, code.as_str()), (401, "InvalidAuthenticationToken"));
    assert!(message.contains("expired"), "{message}");
    assert!(challenge.unwrap().contains("error=\"invalid_token\""));
    assert!(!message.contains(&expired));

    let mut wrong_aud = idp.claims("api://other", "alice", "t-a", now_secs());
    wrong_aud["aud"] = json!("api://other");
    let r = s.http.get(s.url(&path)).bearer_auth(idp.sign("key-1", &wrong_aud)).send().await.unwrap();
    let (_, _, code, message) = error_of(r).await;
    assert_eq!(code, "InvalidAuthenticationToken");
    assert!(message.contains("audience"), "{message}");

    // Health stays open.
    assert_eq!(s.http.get(format!("{}/healthz", s.base)).send().await.unwrap().status().as_u16(), 200);
    assert_eq!(s.http.get(format!("{}/readyz", s.base)).send().await.unwrap().status().as_u16(), 200);
}

#[tokio::test]
async fn the_verified_principal_is_the_author_whatever_the_headers_claim() {
    let idp = TestIdp::start().await;
    let s = start(&idp).await;
    let path = rid("virtualNetworks", "by-alice");
    let r = s
        .http
        .put(s.url(&path))
        .bearer_auth(token(&idp, "alice", "tenant-a"))
        .header("x-ms-client-principal-name", "mallory@evil")
        .header("x-ms-arm-resource-system-data", r#"{"createdBy":"mallory","createdByType":"User"}"#)
        .header("referer", "https://attacker.example/")
        .json(&vnet("local"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    assert!(status_url.starts_with(&s.base), "URLs point at Slipway, not at the Referer: {status_url}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["systemData"]["createdBy"], "alice");
    assert_eq!(body["systemData"]["createdByType"], "User");
}

#[tokio::test]
async fn another_tenant_cannot_read_or_cancel_an_operation_by_copying_headers() {
    let idp = TestIdp::start().await;
    let s = start(&idp).await;
    let alice = token(&idp, "alice", "tenant-a");
    let bob = token(&idp, "bob", "tenant-b");
    let r = s
        .http
        .put(s.url(&rid("virtualNetworks", "v-op")))
        .bearer_auth(&alice)
        .json(&vnet("local"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let status_url = header(&r, "azure-asyncoperation").unwrap();

    let own = s.http.get(&status_url).bearer_auth(&alice).send().await.unwrap();
    assert_eq!(own.status().as_u16(), 200);
    // Bob copies Alice's identity headers: they are not believed from him.
    let copied = |req: reqwest::RequestBuilder| {
        req.bearer_auth(&bob).header("x-ms-home-tenant-id", "tenant-a").header("x-ms-client-object-id", "alice")
    };
    assert_eq!(copied(s.http.get(&status_url)).send().await.unwrap().status().as_u16(), 404);
    let cancel = status_url.replace("?api-version", "/cancel?api-version");
    assert_eq!(copied(s.http.post(&cancel)).send().await.unwrap().status().as_u16(), 404);
    assert_eq!(s.http.get(&status_url).bearer_auth(&alice).send().await.unwrap().status().as_u16(), 200);
}

#[tokio::test]
async fn a_trusted_front_end_speaks_for_the_user_it_forwards() {
    let idp = TestIdp::start().await;
    let s = start(&idp).await;
    let (front, _) = api_token(&s, "arm-frontend").await;
    let r = s
        .http
        .put(s.url(&rid("virtualNetworks", "via-arm")))
        .bearer_auth(&front)
        .header("x-ms-home-tenant-id", "tenant-a")
        .header("x-ms-client-object-id", "alice")
        .header("x-ms-client-principal-name", "alice@tenant-a.example")
        .json(&vnet("local"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["systemData"]["createdBy"], "alice@tenant-a.example");
    // The operation belongs to the forwarded user: Alice reads it with her own token.
    assert_eq!(
        s.http.get(&status_url).bearer_auth(token(&idp, "alice", "tenant-a")).send().await.unwrap().status().as_u16(),
        200
    );
    assert_eq!(
        s.http.get(&status_url).bearer_auth(token(&idp, "bob", "tenant-b")).send().await.unwrap().status().as_u16(),
        404
    );
}

#[tokio::test]
async fn api_tokens_authenticate_until_revoked() {
    let idp = TestIdp::start().await;
    let s = start(&idp).await;
    let (text, stored) = api_token(&s, "ci").await;
    let store = s.app.as_ref().unwrap().store();
    let path = format!("/subscriptions/{SUB}/providers/Slipway.Example/virtualNetworks");
    assert_eq!(s.http.get(s.url(&path)).bearer_auth(&text).send().await.unwrap().status().as_u16(), 200);
    api_tokens::revoke(store.as_ref(), &stored.id, None).await.unwrap();
    let (status, _, code, _) = error_of(s.http.get(s.url(&path)).bearer_auth(&text).send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (401, "InvalidAuthenticationToken"));
}

#[tokio::test]
async fn without_auth_a_non_loopback_listener_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slipway.toml");
    let text = common::config_text(dir.path(), "").replace("listen = \"127.0.0.1:0\"", "listen = \"0.0.0.0:0\"");
    std::fs::write(&path, text).unwrap();
    let config = slipway::config::Config::load(Some(&path), []).unwrap();
    let err = slipway::app::App::start(config, std::sync::Arc::new(SystemClock)).await.err().expect("refused");
    let msg = err.to_string();
    assert!(msg.contains("server.listen") && msg.contains("[auth]"), "{msg}");
}

/// The binary's `api-token` subcommands against a stopped server's store, then `serve`.
#[tokio::test]
async fn the_api_token_cli_creates_lists_and_revokes() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let path = dir.path().join("slipway.toml");
    let text = common::config_text(dir.path(), "").replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    std::fs::write(&path, format!("{text}\n[auth]\napi_tokens = true\nadmins = [\"deployer\"]\n")).unwrap();
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slipway"))
            .args(args)
            .arg("--config")
            .arg(&path)
            .env("SLIPWAY_LOG", "warn")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, token, err) = cli(&["api-token", "create", "--principal", "deployer", "--expires-in-days", "1"]);
    assert!(ok, "{err}");
    let token = token.trim().to_string();
    assert!(token.starts_with("slw_"), "{token}");
    let (ok, listing, _) = cli(&["api-token", "list"]);
    assert!(ok && listing.contains("deployer"), "{listing}");
    assert!(!listing.contains(token.splitn(3, '_').nth(2).unwrap()), "the secret is never listed");

    let log = dir.path().join("serve.log");
    let mut child = common::spawn_slipway(&path, &log, "info");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let url =
        format!("{base}/subscriptions/{SUB}/providers/Slipway.Example/virtualNetworks?api-version={}", common::API);
    let status = eventually("slipway to come up", Duration::from_secs(20), async || {
        http.get(&url).bearer_auth(&token).send().await.map(|r| r.status().as_u16()).map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(status, 200);
    let body = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}});
    let sub_url = format!("{base}/subscriptions/{SUB}?api-version=2025-06-01");
    let r = http
        .put(&sub_url)
        .bearer_auth(&token)
        .json(&json!({"state": "Registered", "properties": {"tenantId": "t"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let put_url = format!("{base}{}?api-version={}", rid("virtualNetworks", "audited"), common::API);
    let r = http.put(&put_url).bearer_auth(&token).json(&body).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let operation = header(&r, "azure-asyncoperation").unwrap();
    let operation_id = operation.split('?').next().unwrap().rsplit('/').next().unwrap().to_string();
    let request_id = header(&r, "x-ms-request-id").unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains(&token), "the token never reaches the log");
    // One audit event per mutating request, with who, what, where and the outcome.
    let audit: Vec<&str> = logged.lines().filter(|l| l.contains("slipway::audit")).collect();
    assert_eq!(audit.len(), 2, "{logged}");
    let put = audit[1];
    for field in [
        "principal=deployer",
        "action=PUT",
        "status=201",
        &format!("operation_id={operation_id}"),
        &format!("request_id={request_id}"),
        "resource_id=/subscriptions/",
    ] {
        assert!(put.contains(field), "{field} missing in {put}");
    }

    let id = token.trim_start_matches("slw_").split('_').next().unwrap().to_string();
    let (ok, _, err) = cli(&["api-token", "revoke", &id]);
    assert!(ok, "{err}");
    let (ok, listing, _) = cli(&["api-token", "list"]);
    assert!(ok && !listing.contains("deployer"), "{listing}");
    let (ok, _, err) = cli(&["api-token", "revoke", &id]);
    assert!(!ok && err.contains("no API token"), "{err}");
}

#[tokio::test]
async fn each_principal_is_rate_limited_on_the_injected_clock() {
    let idp = TestIdp::start().await;
    // One token per 1,000 s: real time adds nothing during the test; the clock is moved.
    let s = start_with(&idp, "rate_limits = { requests_per_second = 0.001, burst = 2, overrides = [{ principal = \"root\", requests_per_second = 1000, burst = 1000 }] }").await;
    let path = format!("/subscriptions/{SUB}/providers/Slipway.Example/virtualNetworks");
    let alice = token(&idp, "alice", "tenant-a");
    let get = |t: &str| s.http.get(s.url(&path)).bearer_auth(t.to_string()).send();
    // Each answer says how many more may follow at once, in ARM's header for its kind.
    let reads = |r: &reqwest::Response| header(r, "x-ms-ratelimit-remaining-subscription-reads");
    let first = get(&alice).await.unwrap();
    assert_eq!((first.status().as_u16(), reads(&first).as_deref()), (200, Some("1")));
    let second = get(&alice).await.unwrap();
    assert_eq!((second.status().as_u16(), reads(&second).as_deref()), (200, Some("0")));
    let r = get(&alice).await.unwrap();
    assert_eq!(r.status().as_u16(), 429);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("1000"));
    let (_, _, code, _) = error_of(r).await;
    assert_eq!(code, "TooManyRequests");
    // Another principal has its own bucket.
    assert_eq!(get(&token(&idp, "ci", "tenant-a")).await.unwrap().status().as_u16(), 200);
    jump(Duration::from_secs(1000)).await;
    assert_eq!(get(&alice).await.unwrap().status().as_u16(), 200);
}

/// Work done before anyone is authenticated is bounded per client address: failed sign-ins
/// and `/openapi.json` take from one bucket, and an address out of tokens gets `429` before
/// its credential is even checked (a valid one too), while health probes are never slowed.
#[tokio::test]
async fn unauthenticated_floods_and_failed_sign_ins_are_slowed_per_address() {
    let idp = TestIdp::start().await;
    // Five tokens per address, one more per 1,000 s: real time adds nothing; the clock is moved.
    let s =
        start_with(&idp, "rate_limits = { unauthenticated_requests_per_second = 0.001, unauthenticated_burst = 5 }")
            .await;
    let path = format!("/subscriptions/{SUB}/providers/Slipway.Example/virtualNetworks");
    let alice = token(&idp, "alice", "tenant-a");
    let get = |bearer: &str| s.http.get(s.url(&path)).bearer_auth(bearer.to_string()).send();
    for _ in 0..5 {
        assert_eq!(get("not-a-token").await.unwrap().status().as_u16(), 401);
    }
    let r = get(&alice).await.unwrap();
    assert_eq!(r.status().as_u16(), 429, "the address is out of tokens: even a valid credential waits");
    assert_eq!(header(&r, "retry-after").as_deref(), Some("1000"));
    let (_, _, code, message) = error_of(r).await;
    assert_eq!(code, "TooManyRequests");
    assert!(message.contains("failed sign-ins"), "{message}");
    let openapi = s.http.get(format!("{}/openapi.json", s.base)).send().await.unwrap();
    assert_eq!(openapi.status().as_u16(), 429, "the same bucket");
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(s.http.get(format!("{}{probe}", s.base)).send().await.unwrap().status().as_u16(), 200, "{probe}");
    }
    jump(Duration::from_secs(1000)).await;
    assert_eq!(get(&alice).await.unwrap().status().as_u16(), 200);
    // Signed-in requests take nothing from the address's bucket.
    for _ in 0..10 {
        assert_eq!(get(&alice).await.unwrap().status().as_u16(), 200);
    }
}

/// `/openapi.json` is built once and served with a strong `ETag`; a client that has it gets
/// `304`, and every request takes a token from its address's bucket.
#[tokio::test]
async fn the_openapi_document_is_cached_with_an_etag_and_limited_per_address() {
    let idp = TestIdp::start().await;
    let s =
        start_with(&idp, "rate_limits = { unauthenticated_requests_per_second = 0.001, unauthenticated_burst = 3 }")
            .await;
    let url = format!("{}/openapi.json", s.base);
    let first = s.http.get(&url).send().await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    assert_eq!(header(&first, "content-type").as_deref(), Some("application/json"));
    let etag = header(&first, "etag").expect("an ETag");
    assert!(etag.starts_with('"') && etag.len() == 34, "a strong tag of the content: {etag}");
    let body = first.bytes().await.unwrap();
    let again = s.http.get(&url).send().await.unwrap();
    assert_eq!(header(&again, "etag").as_deref(), Some(etag.as_str()));
    assert_eq!(again.bytes().await.unwrap(), body);
    let cached = s.http.get(&url).header("if-none-match", &etag).send().await.unwrap();
    assert_eq!(cached.status().as_u16(), 304);
    assert!(cached.bytes().await.unwrap().is_empty());
    assert_eq!(s.http.get(&url).send().await.unwrap().status().as_u16(), 429, "three per address");
}

/// Authorization reads role assignments at most once per `assignment_cache_seconds` per
/// partition: a change made by another replica (here: straight in the store) is in force
/// once that much time passed on the injected clock, and a change through this replica's API
/// at once.
#[tokio::test]
async fn role_changes_end_cached_authorization_within_the_bound() {
    let idp = TestIdp::start().await;
    let s = start_with(&idp, "assignment_cache_seconds = 2").await;
    let path = format!("/subscriptions/{SUB}/providers/Slipway.Example/virtualNetworks");
    let alice = token(&idp, "alice", "tenant-a");
    let root = token(&idp, "root", "platform");
    let status = |bearer: &str| {
        let r = s.http.get(s.url(&path)).bearer_auth(bearer.to_string()).send();
        async move { r.await.unwrap().status().as_u16() }
    };
    assert_eq!(status(&alice).await, 200);

    // Another replica removes alice's grant: this one may decide on what it read for 2 s.
    let store = s.app.as_ref().unwrap().store();
    let alice_grant = "00000000-0000-0000-0000-000000000000";
    assert!(slipway_store::registry::delete_role_assignment(store.as_ref(), alice_grant, None).await.unwrap());
    assert_eq!(status(&alice).await, 200, "read less than 2 s ago: the bounded staleness");
    jump(Duration::from_millis(2001)).await;
    assert_eq!(status(&alice).await, 403, "the other replica's change is in force after the bound");

    // Changes through this replica are in force at once, either way.
    let grant = format!("/subscriptions/{SUB}/providers/Slipway.Authorization/roleAssignments/{alice_grant}");
    let body = json!({"properties": {"roleDefinitionId": "Reader", "principalId": "alice"}});
    let r = s.http.put(s.url(&grant)).bearer_auth(&root).json(&body).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(status(&alice).await, 200);
    let r = s.http.delete(s.url(&grant)).bearer_auth(&root).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(status(&alice).await, 403);
}
