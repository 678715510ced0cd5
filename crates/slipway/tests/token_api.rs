//! API tokens over the API, black-box with a real issuer on loopback: the platform Admin
//! manages every token; a subscription's Owner manages tokens confined to subscriptions they
//! own, which act only there — even where another tenant granted the same name a role.

use std::time::Duration;

use crate::common::{TestServer, header};
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};
use slipway_test_support::eventually;

const AUD: &str = "api://slipway";
const API: &str = "2025-06-01";
const SUB_A: &str = "aaaaaaaa-0000-0000-0000-000000000001";
const SUB_B: &str = "bbbbbbbb-0000-0000-0000-000000000002";
const TOKENS: &str = "/providers/Slipway.Authorization/apiTokens";

struct World {
    s: TestServer,
    idp: TestIdp,
}

impl World {
    async fn start() -> World {
        let idp = TestIdp::start().await;
        let tables = format!(
            "\n[auth]\napi_tokens = true\nadmins = [\"root\"]\n\n[[auth.issuers]]\nissuer = \"{}\"\naudiences = [\"{AUD}\"]\n",
            idp.issuer
        );
        let s = TestServer::start_full("", "", &tables, |_| {}).await;
        let w = World { s, idp };
        let root = w.jwt("root", "platform");
        for (sub, tenant) in [(SUB_A, "tenant-a"), (SUB_B, "tenant-b")] {
            let body = json!({"state": "Registered", "properties": {"tenantId": tenant}});
            assert_eq!(w.send("PUT", &format!("/subscriptions/{sub}"), &root, Some(body)).await.0, 201);
        }
        // Owners and a Reader of A, an Owner of B; B also grants `deployer` — a name, with no
        // tenant — its Owner role, which a token A's Owner makes must never reach.
        for (i, (sub, role, who)) in [
            (SUB_A, "Owner", "a-owner"),
            (SUB_A, "Reader", "a-reader"),
            (SUB_B, "Owner", "b-owner"),
            (SUB_B, "Owner", "deployer"),
        ]
        .into_iter()
        .enumerate()
        {
            let path = format!(
                "/subscriptions/{sub}/providers/Slipway.Authorization/roleAssignments/00000000-0000-0000-0000-00000000000{i}"
            );
            let body = json!({"properties": {"roleDefinitionId": role, "principalId": who}});
            let (status, body) = w.send("PUT", &path, &root, Some(body)).await;
            assert_eq!(status, 201, "{body}");
        }
        w
    }

    fn jwt(&self, subject: &str, tenant: &str) -> String {
        self.idp.sign("key-1", &self.idp.claims(AUD, subject, tenant, SystemClock.now().as_millis() / 1000))
    }

    async fn send(&self, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        let (status, _, body) = self.send_full(method, path, token, body).await;
        (status, body)
    }

    async fn send_full(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Option<String>, Value) {
        let mut req = self
            .s
            .http
            .request(method.parse().unwrap(), format!("{}{path}?api-version={API}", self.s.base))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let cache = header(&r, "cache-control");
        (r.status().as_u16(), cache, r.json().await.unwrap_or(Value::Null))
    }

    /// Makes a token as `maker`; its text and id.
    async fn make(&self, maker: &str, properties: Value) -> (String, String) {
        let (status, cache, body) =
            self.send_full("POST", TOKENS, maker, Some(json!({"properties": properties}))).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(cache.as_deref(), Some("no-store"), "the answer holding the secret is never cached");
        let text = body["properties"]["token"].as_str().unwrap().to_string();
        assert!(text.starts_with("slw_"), "{body}");
        (text, body["name"].as_str().unwrap().to_string())
    }
}

fn vnet(sub: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/rg1/providers/Slipway.Example/virtualNetworks/{name}")
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["properties"]["principal"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_make_tokens_that_act_only_in_their_own_subscriptions() {
    let mut w = World::start().await;
    let root = w.jwt("root", "platform");
    let a_owner = w.jwt("a-owner", "tenant-a");
    let b_owner = w.jwt("b-owner", "tenant-b");

    // The Admin makes an unconfined token; nothing secret is ever listed.
    let (ci, ci_id) = w.make(&root, json!({"principal": "ci", "tenant": "tenant-a", "description": "nightly"})).await;
    let (status, listed) = w.send("GET", TOKENS, &root, None).await;
    assert_eq!((status, names(&listed)), (200, vec!["ci".to_string()]));
    let text = listed.to_string();
    assert!(!text.contains(&ci) && !text.contains("sha256") && !text.contains("\"token\""), "{text}");
    assert_eq!(listed["value"][0]["properties"]["tenant"], "tenant-a");
    assert!(listed["value"][0]["properties"]["lastUsedAt"].is_null(), "never used yet");
    // A use is recorded (once an hour at most), off the request's path.
    assert_eq!(w.send("GET", "/subscriptions", &ci, None).await.0, 200);
    eventually("the token's use recorded", Duration::from_secs(10), async || {
        let (_, one) = w.send("GET", &format!("{TOKENS}/{ci_id}"), &root, None).await;
        if one["properties"]["lastUsedAt"].is_string() { Ok(()) } else { Err(one.to_string()) }
    })
    .await;

    // An Owner makes tokens only confined to subscriptions they own.
    let denied =
        |(status, body): (u16, Value)| (status, body["error"]["code"].as_str().unwrap_or_default().to_string());
    let forbidden = (403, "AuthorizationFailed".to_string());
    assert_eq!(
        denied(w.send("POST", TOKENS, &a_owner, Some(json!({"properties": {"principal": "x"}}))).await),
        forbidden
    );
    let elsewhere = json!({"properties": {"principal": "x", "subscriptions": [SUB_A, SUB_B]}});
    assert_eq!(denied(w.send("POST", TOKENS, &a_owner, Some(elsewhere)).await), forbidden);
    let reader = w.jwt("a-reader", "tenant-a");
    let confined = json!({"properties": {"principal": "x", "subscriptions": [SUB_A]}});
    assert_eq!(denied(w.send("POST", TOKENS, &reader, Some(confined)).await), forbidden, "a Reader makes none");
    assert_eq!(denied(w.send("GET", TOKENS, &reader, None).await), forbidden);
    let (deployer, deployer_id) = w
        .make(&a_owner, json!({"principal": "deployer", "tenant": "tenant-a", "subscriptions": [SUB_A.to_uppercase()]}))
        .await;

    // The confined token acts as its roles say inside A, and nowhere else — not in B, where
    // the name `deployer` is an Owner, nor at the platform.
    let path = format!(
        "/subscriptions/{SUB_A}/providers/Slipway.Authorization/roleAssignments/00000000-0000-0000-0000-000000000009"
    );
    let assign = json!({"properties": {"roleDefinitionId": "Contributor", "principalId": "deployer"}});
    assert_eq!(w.send("PUT", &path, &a_owner, Some(assign)).await.0, 201);
    let network = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}});
    assert_eq!(w.send("PUT", &vnet(SUB_A, "in-a"), &deployer, Some(network.clone())).await.0, 201);
    assert_eq!(denied(w.send("PUT", &vnet(SUB_B, "in-b"), &deployer, Some(network)).await), forbidden);
    assert_eq!(denied(w.send("GET", &format!("/subscriptions/{SUB_B}/resources"), &deployer, None).await), forbidden);
    let (_, subscriptions) = w.send("GET", "/subscriptions", &deployer, None).await;
    let ids: Vec<&str> =
        subscriptions["value"].as_array().unwrap().iter().filter_map(|s| s["subscriptionId"].as_str()).collect();
    assert_eq!(ids, [SUB_A]);
    let token_again = json!({"properties": {"principal": "y", "subscriptions": [SUB_B]}});
    assert_eq!(denied(w.send("POST", TOKENS, &deployer, Some(token_again)).await), forbidden);

    // Each Owner sees and revokes only the tokens confined to what they own.
    assert_eq!(names(&w.send("GET", TOKENS, &a_owner, None).await.1), ["deployer"]);
    assert!(names(&w.send("GET", TOKENS, &b_owner, None).await.1).is_empty());
    assert_eq!(names(&w.send("GET", TOKENS, &root, None).await.1), ["ci", "deployer"]);
    let not_found = (404, "ApiTokenNotFound".to_string());
    assert_eq!(denied(w.send("GET", &format!("{TOKENS}/{deployer_id}"), &b_owner, None).await), not_found);
    assert_eq!(denied(w.send("DELETE", &format!("{TOKENS}/{deployer_id}"), &b_owner, None).await), not_found);
    assert_eq!(denied(w.send("DELETE", &format!("{TOKENS}/{ci_id}"), &a_owner, None).await), not_found);
    assert_eq!(w.send("DELETE", &format!("{TOKENS}/{deployer_id}"), &a_owner, None).await.0, 200);
    assert_eq!(w.send("GET", &vnet(SUB_A, "in-a"), &deployer, None).await.0, 401, "revoked at once");
    assert_eq!(denied(w.send("DELETE", &format!("{TOKENS}/{deployer_id}"), &a_owner, None).await), not_found);
    w.s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_request_that_is_not_valid_is_refused_and_makes_nothing() {
    let mut w = World::start().await;
    let root = w.jwt("root", "platform");
    for properties in [
        json!({}),
        json!({"principal": ""}),
        json!({"principal": "   "}),
        json!({"principal": "a\u{7}b"}),
        json!({"principal": "x".repeat(257)}),
        json!({"principal": "x", "groups": [""]}),
        json!({"principal": "x", "subscriptions": ["not-a-guid"]}),
        json!({"principal": "x", "expiresInDays": 36501}),
        json!({"principal": "x", "color": "red"}),
    ] {
        let (status, body) = w.send("POST", TOKENS, &root, Some(json!({"properties": properties}))).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("InvalidRequestContent")),
            "{properties}: {body}"
        );
    }
    assert_eq!(w.send("PUT", TOKENS, &root, Some(json!({}))).await.0, 405);
    let (_, listed) = w.send("GET", TOKENS, &root, None).await;
    assert!(names(&listed).is_empty(), "{listed}");
    w.s.stop().await;
}
