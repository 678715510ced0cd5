//! A role assignment's scope has one spelling, black-box: an Owner of one subscription tries
//! every path trick that could name another subscription (dot segments, encoded dots and
//! separators, shapes that are no scope) and each is `400 InvalidRoleAssignmentScope`, nothing
//! stored; a stored assignment written before scopes were checked is reported.

use crate::common::TestServer;
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::access::{Assignee, Role, RoleAssignment, Scope};
use slipway_domain::{Clock, SystemClock};
use slipway_store::registry;

const AUD: &str = "api://slipway";
const API: &str = "2025-06-01";
const A: &str = "aaaaaaaa-0000-0000-0000-000000000001";
const B: &str = "bbbbbbbb-0000-0000-0000-000000000002";
const AUTHZ: &str = "providers/Slipway.Authorization/roleAssignments";

fn token(idp: &TestIdp, subject: &str) -> String {
    idp.sign("key-1", &idp.claims(AUD, subject, "tenant-b", SystemClock.now().as_millis() / 1000))
}

/// Subscriptions A and B registered; `b-owner` Owner of B.
async fn start(idp: &TestIdp) -> TestServer {
    let tables = format!(
        "\n[auth]\nadmins = [\"root\"]\n\n[[auth.issuers]]\nissuer = \"{}\"\naudiences = [\"{AUD}\"]\n",
        idp.issuer
    );
    let s = TestServer::start_full("", "", &tables, |_| {}).await;
    let root = token(idp, "root");
    for sub in [A, B] {
        let body = json!({"state": "Registered", "properties": {"tenantId": format!("tenant-{sub}")}});
        assert_eq!(put(&s, &root, &format!("/subscriptions/{sub}"), body).await.0, 201);
    }
    let owner = json!({"properties": {"roleDefinitionId": "Owner", "principalId": "b-owner"}});
    let path = format!("/subscriptions/{B}/{AUTHZ}/00000000-0000-0000-0000-0000000000b0");
    assert_eq!(put(&s, &root, &path, owner).await.0, 201);
    s
}

async fn put(s: &TestServer, bearer: &str, path: &str, body: Value) -> (u16, Value) {
    let r = s.http.put(format!("{}{path}?api-version={API}", s.base)).bearer_auth(bearer).json(&body).send().await;
    let r = r.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

fn grant(principal: &str) -> Value {
    json!({"properties": {"roleDefinitionId": "Owner", "principalId": principal}})
}

#[tokio::test]
async fn every_spelling_of_another_scope_is_refused() {
    let idp = TestIdp::start().await;
    let s = start(&idp).await;
    let owner = token(&idp, "b-owner");
    let body = grant("mallory").to_string();
    let spellings = [
        format!("/subscriptions/{B}/../{A}"),
        format!("/subscriptions/{B}/resourceGroups/../../subscriptions/{A}"),
        format!("/subscriptions/{B}/%2e%2e/{A}"),
        format!("/subscriptions/{B}/resourceGroups/%2E%2E/%2e%2e/subscriptions/{A}"),
        format!("/subscriptions/{B}/resourceGroups/rg%2f..%2f..%2fsubscriptions%2f{A}"),
        format!("/subscriptions/{B}/./resourceGroups/rg"),
        format!("/subscriptions/{B}/resourceGroups/rg/providers/Slipway.Example/virtualNetworks"),
    ];
    for (i, scope) in spellings.iter().enumerate() {
        let request = format!(
            "PUT {scope}/{AUTHZ}/00000000-0000-0000-0000-00000000010{i}?api-version={API} HTTP/1.1\r\nHost: x\r\n\
             Authorization: Bearer {owner}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        let (status, _, answer) = s.raw(request.as_bytes()).await;
        let answer: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (400, Some("InvalidRoleAssignmentScope")),
            "{scope}: {answer}"
        );
    }
    // The body's scope, when sent, must be the path's.
    let path = format!("/subscriptions/{B}/{AUTHZ}/00000000-0000-0000-0000-000000000200");
    let mut elsewhere = grant("mallory");
    elsewhere["properties"]["scope"] = json!(format!("/subscriptions/{A}"));
    let (status, answer) = put(&s, &owner, &path, elsewhere).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("InvalidRoleAssignmentScope")), "{answer}");
    let mut same = grant("mallory");
    same["properties"]["scope"] = json!(format!("/SUBSCRIPTIONS/{B}"));
    assert_eq!(put(&s, &owner, &path, same).await.0, 201, "the same scope in another case");

    // Nothing but the Owner's own and the one made above is stored.
    let store = s.app.as_ref().unwrap().store();
    let stored = registry::all_role_assignments(store.as_ref()).await.unwrap();
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(stored.iter().all(|a| a.scope.is_canonical()));
}

#[tokio::test]
async fn a_stored_non_canonical_scope_is_reported() {
    let idp = TestIdp::start().await;
    let s = start(&idp).await;
    let store = s.app.as_ref().unwrap().store();
    assert_eq!(slipway_api::report_noncanonical_assignments(store.as_ref()).await.unwrap(), 0);
    let old = RoleAssignment {
        id: "00000000-0000-0000-0000-000000000300".into(),
        assignee: Assignee::Principal("mallory".into()),
        tenant: None,
        role: Role::Owner,
        scope: Scope::stored(&format!("/subscriptions/{B}/../{A}")),
    };
    registry::put_role_assignment(store.as_ref(), &old, SystemClock.now(), None).await.unwrap();
    assert_eq!(slipway_api::report_noncanonical_assignments(store.as_ref()).await.unwrap(), 1);
}

/// What `GET {scope}/providers/Slipway.Authorization/permissions` lists for the caller.
async fn actions(s: &TestServer, bearer: &str, scope: &str) -> (u16, Vec<String>) {
    let url = format!("{}{scope}/providers/Slipway.Authorization/permissions?api-version={API}", s.base);
    let r = s.http.get(url).bearer_auth(bearer).send().await.unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    let actions = body["value"][0]["actions"].as_array().into_iter().flatten();
    (status, actions.filter_map(Value::as_str).map(str::to_string).collect())
}

#[tokio::test]
async fn the_permissions_list_says_what_the_caller_may_do_at_a_scope() {
    let idp = TestIdp::start().await;
    let s = start(&idp).await;
    let root = token(&idp, "root");
    let reader = json!({"properties": {"roleDefinitionId": "Reader", "principalId": "b-reader"}});
    let path = format!("/subscriptions/{B}/resourceGroups/rg/{AUTHZ}/00000000-0000-0000-0000-0000000000b1");
    assert_eq!(put(&s, &root, &path, reader).await.0, 201);

    let owner = token(&idp, "b-owner");
    let (status, own) = actions(&s, &owner, &format!("/subscriptions/{B}/resourceGroups/rg")).await;
    assert_eq!(status, 200);
    for granted in ["*/read", "*/write", "*/delete", "Slipway.Authorization/roleAssignments/write"] {
        assert!(own.iter().any(|a| a == granted), "the Owner may {granted}: {own:?}");
    }
    assert!(!own.iter().any(|a| a.starts_with("Slipway.Admin")), "{own:?}");
    // A Reader of one group reads there, and nowhere else; nobody is refused the question.
    let reader = token(&idp, "b-reader");
    let read = vec!["*/read".to_string(), "Slipway.Authorization/roleAssignments/read".into()];
    assert_eq!(actions(&s, &reader, &format!("/subscriptions/{B}/resourceGroups/rg")).await, (200, read));
    assert_eq!(actions(&s, &reader, &format!("/subscriptions/{B}/resourceGroups/other")).await, (200, vec![]));
    assert_eq!(actions(&s, &owner, &format!("/subscriptions/{A}")).await, (200, vec![]));
    assert!(actions(&s, &root, "").await.1.iter().any(|a| a == "Slipway.Admin/*"), "the platform Admin");
}
