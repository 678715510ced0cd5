//! Identities bound to their issuer, black-box: three real issuers on loopback mint tokens
//! for the same subjects. The home issuer's names are unprefixed, a partner's carry its
//! configured prefix, a third's the derived `{issuer}#`; two issuers minting one `sub` are two
//! principals, each with only its own grants, and no issuer can mint a name another owns.

use crate::common::{SUB, TestServer, rid};
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};

const AUD: &str = "api://slipway";

struct Issuers {
    home: TestIdp,
    partner: TestIdp,
    third: TestIdp,
}

fn token(idp: &TestIdp, subject: &str, tenant: &str) -> String {
    let now = SystemClock.now().as_millis() / 1000;
    idp.sign("key-1", &idp.claims(AUD, subject, tenant, now))
}

async fn start() -> (TestServer, Issuers) {
    let issuers =
        Issuers { home: TestIdp::start().await, partner: TestIdp::start().await, third: TestIdp::start().await };
    let tables = format!(
        r#"
[auth]
admins = ["root"]

[[auth.issuers]]
issuer = "{}"
audiences = ["{AUD}"]

[[auth.issuers]]
issuer = "{}"
audiences = ["{AUD}"]
prefix = "partner:"
tenants = ["contoso"]

[[auth.issuers]]
issuer = "{}"
audiences = ["{AUD}"]
"#,
        issuers.home.issuer, issuers.partner.issuer, issuers.third.issuer
    );
    let s = TestServer::start_full("", "", &tables, |_| {}).await;
    let root = token(&issuers.home, "root", "platform");
    let sub = json!({"state": "Registered", "properties": {"tenantId": "contoso"}});
    assert_eq!(put(&s, &root, &format!("/subscriptions/{SUB}"), sub).await.0, 201);
    for (i, (who, role)) in [("alice", "Contributor"), ("partner:bob", "Contributor")].iter().enumerate() {
        let path = format!(
            "/subscriptions/{SUB}/providers/Slipway.Authorization/roleAssignments/00000000-0000-0000-0000-00000000000{i}"
        );
        let body = json!({"properties": {"roleDefinitionId": role, "principalId": who}});
        assert_eq!(put(&s, &root, &path, body).await.0, 201, "{who}");
    }
    (s, issuers)
}

async fn put(s: &TestServer, bearer: &str, path: &str, body: Value) -> (u16, Value) {
    let r = s.http.put(s.url(path)).bearer_auth(bearer).json(&body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn get(s: &TestServer, bearer: &str, path: &str) -> (u16, Value) {
    let r = s.http.get(s.url(path)).bearer_auth(bearer).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

fn vnet() -> Value {
    json!({"location": "westeurope", "properties": {"addressSpace": "10.0.0.0/16"}})
}

#[tokio::test]
async fn two_issuers_minting_one_subject_are_two_principals() {
    let (s, i) = start().await;

    // The home issuer's alice holds her grant; the partner's and the third's alice do not.
    let (status, body) = put(&s, &token(&i.home, "alice", "contoso"), &rid("virtualNetworks", "home"), vnet()).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["systemData"]["createdBy"], "alice");
    for (idp, name) in [(&i.partner, "partner:alice".to_string()), (&i.third, format!("{}#alice", i.third.issuer))] {
        let (status, body) = get(&s, &token(idp, "alice", "contoso"), &rid("virtualNetworks", "home")).await;
        assert_eq!(status, 403, "{name}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("'{name}'")), "the refusal names the prefixed principal: {message}");
    }

    // The partner's bob holds the grant made to `partner:bob`; the home issuer's bob does not.
    let (status, body) =
        put(&s, &token(&i.partner, "bob", "contoso"), &rid("virtualNetworks", "partner"), vnet()).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["systemData"]["createdBy"], "partner:bob");
    assert_eq!(get(&s, &token(&i.home, "bob", "contoso"), &rid("virtualNetworks", "partner")).await.0, 403);
}

#[tokio::test]
async fn only_the_configured_issuer_can_be_admin() {
    let (s, i) = start().await;
    let fresh = "/subscriptions/22222222-2222-2222-2222-222222222222";
    let sub = json!({"state": "Registered", "properties": {"tenantId": "contoso"}});
    for idp in [&i.partner, &i.third] {
        let (status, body) = put(&s, &token(idp, "root", "contoso"), fresh, sub.clone()).await;
        assert_eq!(status, 403, "another issuer's root is not the admin: {body}");
    }
    assert_eq!(put(&s, &token(&i.home, "root", "contoso"), fresh, sub).await.0, 201);
}

#[tokio::test]
async fn no_issuer_mints_another_issuers_names_or_speaks_for_a_foreign_tenant() {
    let (s, i) = start().await;
    let path = rid("virtualNetworks", "v1");
    let refusals = [
        // The home issuer's names are unprefixed: one that carries the partner's prefix is forged.
        (token(&i.home, "partner:bob", "contoso"), "carries the prefix of the issuer"),
        // A group the home issuer lists may not carry it either.
        (
            {
                let now = SystemClock.now().as_millis() / 1000;
                let mut claims = i.home.claims(AUD, "carol", "contoso", now);
                claims["groups"] = json!(["partner:admins"]);
                i.home.sign("key-1", &claims)
            },
            "carries the prefix of the issuer",
        ),
        // The partner may speak only for contoso.
        (token(&i.partner, "bob", "fabrikam"), "may not speak for the tenant 'fabrikam'"),
    ];
    for (bearer, why) in refusals {
        let (status, body) = get(&s, &bearer, &path).await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some("InvalidAuthenticationToken")), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(why), "{why}: {body}");
    }
}
