//! Tenant isolation, black-box: two tenants, each with its own registered subscription and
//! a Reader, a Contributor and an Owner; every endpoint tried by every principal against its
//! own and the other tenant's subscription. Every foreign access is denied; every own access
//! is allowed exactly when the role grants it.

use std::time::Duration;

use crate::common::{API, TestServer, header};
use crate::tenancy_guardrails;
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};
use slipway_test_support::eventually;

const AUD: &str = "api://slipway";
const PLATFORM_API: &str = "2025-06-01";
const T: Duration = Duration::from_secs(120);
const SUBS: [(&str, &str); 2] =
    [("a", "aaaaaaaa-0000-0000-0000-000000000001"), ("b", "bbbbbbbb-0000-0000-0000-000000000002")];
const ROLES: [&str; 3] = ["Reader", "Contributor", "Owner"];

struct World {
    s: TestServer,
    idp: TestIdp,
    /// Per subscription: the admin-created resource and its create operation's status URL.
    shared: Vec<(String, String)>,
}

fn token(idp: &TestIdp, subject: &str, tenant: &str) -> String {
    idp.sign("key-1", &idp.claims(AUD, subject, tenant, SystemClock.now().as_millis() / 1000))
}

fn rid(sub: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/rg1/providers/Slipway.Example/virtualNetworks/{name}")
}

impl World {
    async fn start() -> World {
        let idp = TestIdp::start().await;
        let tables = format!(
            // A bucket that never empties: the matrix is about who may, not how often.
            "\n[auth]\nadmins = [\"root\"]\n\n[[auth.issuers]]\nissuer = \"{}\"\naudiences = [\"{AUD}\"]\n\n[auth.rate_limits]\nburst = 1000\n{}",
            idp.issuer,
            tenancy_guardrails::CONFIG
        );
        let s = TestServer::start_full("", "", &tables, |_| {}).await;
        let mut w = World { s, idp, shared: Vec::new() };
        let root = token(&w.idp, "root", "platform");
        for (tenant, sub) in SUBS {
            let body = json!({"state": "Registered", "properties": {"tenantId": format!("tenant-{tenant}"), "displayName": tenant, "attributes": {"storageClass": format!("gold-{tenant}")}}});
            let (status, _) = w.send("PUT", &format!("/subscriptions/{sub}"), &root, Some(body), PLATFORM_API).await;
            assert_eq!(status, 201);
            for (i, role) in ROLES.iter().enumerate() {
                let path =
                    format!("/subscriptions/{sub}/providers/Slipway.Authorization/roleAssignments/{}", guid(tenant, i));
                let body = json!({"properties": {"roleDefinitionId": role, "principalId": principal(tenant, role), "tenantId": format!("tenant-{tenant}")}});
                let (status, body) = w.send("PUT", &path, &root, Some(body), PLATFORM_API).await;
                assert_eq!(status, 201, "{body}");
            }
            let r = w
                .s
                .http
                .put(w.s.url(&rid(sub, "shared")))
                .bearer_auth(&root)
                .json(&json!({"location": "local", "tags": {"k": "v"}, "properties": {"addressSpace": "10.0.0.0/16"}}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 201);
            let status_url = header(&r, "azure-asyncoperation").unwrap();
            w.shared.push((rid(sub, "shared"), status_url));
        }
        for (_, url) in &w.shared {
            let r = w.s.http.get(url).bearer_auth(&root).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            wait_done(&w.s, url, &root).await;
        }
        w
    }

    async fn send(&self, method: &str, path: &str, token: &str, body: Option<Value>, api: &str) -> (u16, Value) {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            let sep = if path.contains('?') { '&' } else { '?' };
            format!("{}{path}{sep}api-version={api}", self.s.base)
        };
        let mut req = self.s.http.request(method.parse().unwrap(), url).bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }
}

async fn wait_done(s: &TestServer, url: &str, token: &str) {
    eventually("the operation to end", T, async || {
        let body: Value = s.http.get(url).bearer_auth(token).send().await.unwrap().json().await.unwrap();
        match body["status"].as_str() {
            Some("Succeeded" | "Failed" | "Canceled") => Ok(()),
            _ => Err(format!("not terminal: {body}")),
        }
    })
    .await;
}

fn principal(tenant: &str, role: &str) -> String {
    format!("{tenant}-{}", role.to_ascii_lowercase())
}

fn guid(tenant: &str, i: usize) -> String {
    let c = if tenant == "a" { 'a' } else { 'b' };
    format!("{c}{c}{c}{c}{c}{c}{c}{c}-1111-1111-1111-00000000000{i}")
}

/// What an endpoint needs: `r` read, `w` write, `d` delete, `c` cancel, `A` manage access,
/// `P` the platform.
#[derive(Clone, Copy)]
struct Endpoint {
    name: &'static str,
    needs: char,
}

fn role_grants(role: &str, needs: char) -> bool {
    match role {
        "Reader" => needs == 'r',
        "Contributor" => "rwdc".contains(needs),
        "Owner" => "rwdcA".contains(needs),
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_foreign_access_is_denied_and_every_granted_one_allowed() {
    let mut w = World::start().await;
    let endpoints = [
        Endpoint { name: "GET resource", needs: 'r' },
        Endpoint { name: "HEAD resource", needs: 'r' },
        Endpoint { name: "HEAD resource group", needs: 'r' },
        Endpoint { name: "GET resource group", needs: 'r' },
        Endpoint { name: "PUT resource group", needs: 'w' },
        Endpoint { name: "PATCH resource group", needs: 'w' },
        Endpoint { name: "DELETE resource group", needs: 'd' },
        Endpoint { name: "GET tags of a resource", needs: 'r' },
        Endpoint { name: "PATCH tags of a resource", needs: 'w' },
        Endpoint { name: "PUT tags of a resource", needs: 'w' },
        Endpoint { name: "DELETE tags of a resource", needs: 'w' },
        Endpoint { name: "GET tags of a resource group", needs: 'r' },
        Endpoint { name: "PUT tags of a resource group", needs: 'w' },
        Endpoint { name: "PATCH tags of a resource group", needs: 'w' },
        Endpoint { name: "DELETE tags of a resource group", needs: 'w' },
        Endpoint { name: "GET list by subscription", needs: 'r' },
        Endpoint { name: "GET list by resource group", needs: 'r' },
        Endpoint { name: "GET list of resource groups", needs: 'r' },
        Endpoint { name: "GET list of every type by subscription", needs: 'r' },
        Endpoint { name: "GET list of every type by resource group", needs: 'r' },
        Endpoint { name: "GET list of operations", needs: 'r' },
        Endpoint { name: "GET events by subscription", needs: 'r' },
        Endpoint { name: "GET events by resource group", needs: 'r' },
        Endpoint { name: "GET events of a resource", needs: 'r' },
        Endpoint { name: "PUT resource", needs: 'w' },
        Endpoint { name: "PATCH resource", needs: 'w' },
        Endpoint { name: "DELETE resource", needs: 'd' },
        Endpoint { name: "DELETE resource forced", needs: 'P' },
        Endpoint { name: "GET job history", needs: 'r' },
        Endpoint { name: "GET operation status", needs: 'r' },
        Endpoint { name: "GET operation result", needs: 'r' },
        Endpoint { name: "POST operation cancel", needs: 'c' },
        // The default approver role; the shared operation waits for nothing, so an allowed
        // decision is a `409`.
        Endpoint { name: "POST approval approve", needs: 'A' },
        Endpoint { name: "POST approval deny", needs: 'A' },
        Endpoint { name: "GET role assignments", needs: 'r' },
        Endpoint { name: "PUT role assignment", needs: 'A' },
        Endpoint { name: "DELETE role assignment", needs: 'A' },
        Endpoint { name: "GET subscription", needs: 'r' },
        Endpoint { name: "POST provider register", needs: 'w' },
        Endpoint { name: "PUT subscription", needs: 'P' },
    ];
    let endpoints: Vec<Endpoint> = endpoints
        .into_iter()
        .chain(tenancy_guardrails::ENDPOINTS.iter().map(|(name, needs)| Endpoint { name, needs: *needs }))
        .collect();
    let (mut allowed, mut denied, mut foreign_denied) = (0, 0, 0);
    let mut created = Vec::new();
    for (tenant, own_sub) in SUBS {
        for role in ROLES {
            let who = principal(tenant, role);
            let tok = token(&w.idp, &who, &format!("tenant-{tenant}"));
            for (k, (target_tenant, sub)) in SUBS.iter().enumerate() {
                let own = *sub == own_sub;
                let (shared, op_url) = w.shared[k].clone();
                for e in endpoints.iter().copied() {
                    let fresh = format!("{who}-{}", e.name.len());
                    let (status, body) = match e.name {
                        "GET resource" => w.send("GET", &shared, &tok, None, API).await,
                        "HEAD resource" => w.send("HEAD", &shared, &tok, None, API).await,
                        "HEAD resource group" => {
                            // With the Microsoft.Resources version ARM clients send.
                            w.send(
                                "HEAD",
                                &format!("/subscriptions/{sub}/resourceGroups/rg1"),
                                &tok,
                                None,
                                "2025-04-01",
                            )
                            .await
                        }
                        "GET resource group" => {
                            w.send("GET", &format!("/subscriptions/{sub}/resourceGroups/rg1"), &tok, None, "2025-04-01")
                                .await
                        }
                        // A group of the caller's own, made here and deleted below.
                        "PUT resource group" => {
                            let path = format!("/subscriptions/{sub}/resourceGroups/g-{who}");
                            w.send("PUT", &path, &tok, Some(json!({"location": "local"})), "2025-04-01").await
                        }
                        "PATCH resource group" => {
                            let path = format!("/subscriptions/{sub}/resourceGroups/rg1");
                            w.send("PATCH", &path, &tok, Some(json!({"tags": {"k": "v"}})), "2025-04-01").await
                        }
                        "DELETE resource group" => {
                            let path = format!("/subscriptions/{sub}/resourceGroups/g-{who}");
                            w.send("DELETE", &path, &tok, None, "2025-04-01").await
                        }
                        "GET tags of a resource" => {
                            let path = format!("{shared}/providers/Microsoft.Resources/tags/default");
                            w.send("GET", &path, &tok, None, "2025-04-01").await
                        }
                        "PATCH tags of a resource" => {
                            let path = format!("{shared}/providers/Microsoft.Resources/tags/default");
                            let body = json!({"operation": "Merge", "properties": {"tags": {"by": who.clone()}}});
                            w.send("PATCH", &path, &tok, Some(body), "2025-04-01").await
                        }
                        "PUT tags of a resource" => {
                            let path = format!("{shared}/providers/Microsoft.Resources/tags/default");
                            let body = json!({"properties": {"tags": {"by": who.clone()}}});
                            w.send("PUT", &path, &tok, Some(body), "2025-04-01").await
                        }
                        "DELETE tags of a resource" => {
                            let path = format!("{shared}/providers/Microsoft.Resources/tags/default");
                            w.send("DELETE", &path, &tok, None, "2025-04-01").await
                        }
                        "GET tags of a resource group" => {
                            let path = format!(
                                "/subscriptions/{sub}/resourceGroups/rg1/providers/Microsoft.Resources/tags/default"
                            );
                            w.send("GET", &path, &tok, None, "2025-04-01").await
                        }
                        "PATCH tags of a resource group" => {
                            let path = format!(
                                "/subscriptions/{sub}/resourceGroups/rg1/providers/Microsoft.Resources/tags/default"
                            );
                            let body = json!({"operation": "Merge", "properties": {"tags": {"by": who.clone()}}});
                            w.send("PATCH", &path, &tok, Some(body), "2025-04-01").await
                        }
                        "DELETE tags of a resource group" => {
                            let path = format!(
                                "/subscriptions/{sub}/resourceGroups/rg1/providers/Microsoft.Resources/tags/default"
                            );
                            w.send("DELETE", &path, &tok, None, "2025-04-01").await
                        }
                        "PUT tags of a resource group" => {
                            let path = format!(
                                "/subscriptions/{sub}/resourceGroups/rg1/providers/Microsoft.Resources/tags/default"
                            );
                            let body = json!({"properties": {"tags": {"by": who.clone()}}});
                            w.send("PUT", &path, &tok, Some(body), "2025-04-01").await
                        }
                        "GET list by subscription" => {
                            w.send(
                                "GET",
                                &format!("/subscriptions/{sub}/providers/Slipway.Example/virtualNetworks"),
                                &tok,
                                None,
                                API,
                            )
                            .await
                        }
                        "GET list by resource group" => {
                            let path = format!(
                                "/subscriptions/{sub}/resourceGroups/rg1/providers/Slipway.Example/virtualNetworks"
                            );
                            w.send("GET", &path, &tok, None, API).await
                        }
                        "GET list of resource groups" => {
                            w.send("GET", &format!("/subscriptions/{sub}/resourceGroups"), &tok, None, PLATFORM_API)
                                .await
                        }
                        "GET list of every type by subscription" => {
                            w.send("GET", &format!("/subscriptions/{sub}/resources"), &tok, None, PLATFORM_API).await
                        }
                        "GET list of every type by resource group" => {
                            let path = format!("/subscriptions/{sub}/resourceGroups/rg1/resources");
                            w.send("GET", &path, &tok, None, PLATFORM_API).await
                        }
                        "GET list of operations" => {
                            let path = format!("/subscriptions/{sub}/operationStatuses");
                            w.send("GET", &path, &tok, None, PLATFORM_API).await
                        }
                        "GET events by subscription" => {
                            let path = format!("/subscriptions/{sub}/providers/Slipway.Resources/events");
                            w.send("GET", &path, &tok, None, PLATFORM_API).await
                        }
                        "GET events by resource group" => {
                            let path =
                                format!("/subscriptions/{sub}/resourceGroups/rg1/providers/Slipway.Resources/events");
                            w.send("GET", &path, &tok, None, PLATFORM_API).await
                        }
                        "GET events of a resource" => w.send("GET", &format!("{shared}/events"), &tok, None, API).await,
                        "PUT resource" => {
                            let body = json!({"location": "local", "properties": {"addressSpace": "10.1.0.0/16"}});
                            w.send("PUT", &rid(sub, &fresh), &tok, Some(body), API).await
                        }
                        "PATCH resource" => {
                            w.send("PATCH", &shared, &tok, Some(json!({"tags": {"k": "v"}})), API).await
                        }
                        "DELETE resource" => w.send("DELETE", &rid(sub, "never-created"), &tok, None, API).await,
                        "DELETE resource forced" => {
                            let url = format!("{}{}?api-version={API}&force=true", w.s.base, rid(sub, "never-created"));
                            w.send("DELETE", &url, &tok, None, API).await
                        }
                        "GET job history" => w.send("GET", &format!("{shared}/jobs"), &tok, None, API).await,
                        "GET operation status" => w.send("GET", &op_url, &tok, None, API).await,
                        "GET operation result" => {
                            w.send("GET", &op_url.replace("/operationStatuses/", "/operationResults/"), &tok, None, API)
                                .await
                        }
                        "POST operation cancel" => {
                            w.send("POST", &op_url.replace("?api-version", "/cancel?api-version"), &tok, None, API)
                                .await
                        }
                        "POST approval approve" | "POST approval deny" => {
                            let verb = if e.name.ends_with("approve") { "approve" } else { "deny" };
                            let url = op_url.replace("?api-version", &format!("/{verb}?api-version"));
                            w.send("POST", &url, &tok, Some(json!({"comment": "matrix"})), API).await
                        }
                        "GET role assignments" => {
                            let path = format!("/subscriptions/{sub}/providers/Slipway.Authorization/roleAssignments");
                            w.send("GET", &path, &tok, None, PLATFORM_API).await
                        }
                        "PUT role assignment" => {
                            let path = format!(
                                "/subscriptions/{sub}/providers/Slipway.Authorization/roleAssignments/{}",
                                guid(target_tenant, 7)
                            );
                            let body = json!({"properties": {"roleDefinitionId": "Reader", "principalId": format!("{who}-friend")}});
                            w.send("PUT", &path, &tok, Some(body), PLATFORM_API).await
                        }
                        "DELETE role assignment" => {
                            let path = format!(
                                "/subscriptions/{sub}/providers/Slipway.Authorization/roleAssignments/{}",
                                guid(target_tenant, 8)
                            );
                            w.send("DELETE", &path, &tok, None, PLATFORM_API).await
                        }
                        "GET subscription" => {
                            w.send("GET", &format!("/subscriptions/{sub}"), &tok, None, PLATFORM_API).await
                        }
                        "POST provider register" => {
                            let path = format!("/subscriptions/{sub}/providers/Slipway.Example/register");
                            w.send("POST", &path, &tok, None, PLATFORM_API).await
                        }
                        "PUT subscription" => {
                            let body = json!({"state": "Suspended", "properties": {"tenantId": "x"}});
                            w.send("PUT", &format!("/subscriptions/{sub}"), &tok, Some(body), PLATFORM_API).await
                        }
                        guardrail
                            if let Some((method, path, body, version)) =
                                tenancy_guardrails::request(guardrail, sub, &shared, &who) =>
                        {
                            w.send(method, &path, &tok, body, version).await
                        }
                        other => unreachable!("{other}"),
                    };
                    let expect_allowed = own && role_grants(role, e.needs);
                    let is_denial = status == 403 || status == 404;
                    let case =
                        format!("{who} -> {} ({}): {status} {body}", e.name, if own { "own" } else { "foreign" });
                    if e.name.starts_with("HEAD") {
                        assert_eq!(body, Value::Null, "never a body: {case}");
                    }
                    if expect_allowed {
                        assert!(!is_denial && status < 500, "should be allowed: {case}");
                        if e.name.starts_with("HEAD") {
                            assert_eq!(status, 204, "{case}");
                        }
                        allowed += 1;
                        if e.name == "PUT resource" {
                            created.push(body["id"].as_str().unwrap().to_string());
                        }
                        if e.name.starts_with("GET list") {
                            let ids: Vec<&str> =
                                body["value"].as_array().unwrap().iter().filter_map(|v| v["id"].as_str()).collect();
                            assert!(!ids.is_empty(), "the shared resource and its operation are listed: {case}");
                            assert!(ids.iter().all(|id| id.to_ascii_lowercase().contains(sub)), "{case}");
                        }
                        if e.name.starts_with("GET events") {
                            let events = body["value"].as_array().unwrap();
                            assert!(!events.is_empty(), "the shared resource's events are listed: {case}");
                            let ids = events.iter().map(|v| v["resourceId"].as_str().unwrap().to_ascii_lowercase());
                            assert!(ids.clone().all(|id| id.contains(sub)), "only the subscription's own: {case}");
                        }
                    } else {
                        assert!(is_denial, "should be denied: {case}");
                        // Operations answer 404 (ids are not guessable; a 403 would confirm one), and
                        // so does an existence check (`HEAD`), which never has a body.
                        // A decision's operation is hidden only from who cannot read it.
                        let hidden = e.name.contains("operation ") || (e.name.contains("approval") && !own);
                        let expected = if hidden || e.name.starts_with("HEAD") { 404 } else { 403 };
                        assert_eq!(status, expected, "{case}");
                        if expected == 403 {
                            assert_eq!(body["error"]["code"], "AuthorizationFailed", "{case}");
                        }
                        denied += 1;
                        if !own {
                            foreign_denied += 1;
                        }
                    }
                }
            }
            // The subscription list shows only the caller's own subscription.
            let (status, body) = w.send("GET", "/subscriptions", &tok, None, PLATFORM_API).await;
            assert_eq!(status, 200);
            let ids: Vec<&str> =
                body["value"].as_array().unwrap().iter().filter_map(|v| v["subscriptionId"].as_str()).collect();
            assert_eq!(ids, vec![own_sub], "{who}");
        }
    }
    println!("cross-tenant matrix: {allowed} allowed, {denied} denied ({foreign_denied} foreign, all denied)");
    assert_eq!(allowed + denied, 6 * 2 * endpoints.len());
    assert_eq!(foreign_denied, 6 * endpoints.len());
    let root = token(&w.idp, "root", "platform");
    for id in created {
        let (_, body) = w.send("GET", &id, &root, None, API).await;
        assert!(body["properties"]["provisioningState"].is_string(), "{body}");
    }
    w.s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_states_gate_writes() {
    let mut w = World::start().await;
    let root = token(&w.idp, "root", "platform");
    let contributor = token(&w.idp, "a-contributor", "tenant-a");
    let (_, sub) = SUBS[0];
    let put = |name: &str| {
        let body = json!({"location": "local", "properties": {"addressSpace": "10.2.0.0/16"}});
        (rid(sub, name), body)
    };
    for (state, put_status, put_code, delete_status) in [
        ("Warned", 409, "SubscriptionWarned", 204),
        ("Suspended", 409, "SubscriptionSuspended", 409),
        ("Unregistered", 409, "SubscriptionNotRegistered", 409),
        ("Registered", 201, "", 204),
    ] {
        let body = json!({"state": state, "properties": {"tenantId": "tenant-a"}});
        assert_eq!(w.send("PUT", &format!("/subscriptions/{sub}"), &root, Some(body), PLATFORM_API).await.0, 200);
        let (path, body) = put(&format!("in-{}", state.to_ascii_lowercase()));
        let (status, resp) = w.send("PUT", &path, &contributor, Some(body), API).await;
        assert_eq!(status, put_status, "{state}: {resp}");
        if !put_code.is_empty() {
            assert_eq!(resp["error"]["code"], put_code, "{state}");
        }
        assert_eq!(w.send("DELETE", &rid(sub, "absent"), &contributor, None, API).await.0, delete_status, "{state}");
        assert_eq!(w.send("GET", &w.shared[0].0, &contributor, None, API).await.0, 200, "reads always work ({state})");
    }
    // An unregistered subscription id: writes refused, nothing written.
    let unknown = "cccccccc-0000-0000-0000-000000000003";
    let (status, resp) = w.send("PUT", &rid(unknown, "x"), &root, Some(put("x").1), API).await;
    assert_eq!((status, resp["error"]["code"].as_str()), (409, Some("SubscriptionNotRegistered")));
    // Deleted: every resource of the subscription gets a delete operation.
    let body = json!({"state": "Deleted", "properties": {"tenantId": "tenant-a"}});
    assert_eq!(w.send("PUT", &format!("/subscriptions/{sub}"), &root, Some(body), PLATFORM_API).await.0, 200);
    eventually("the deleted subscription's resource deprovisioned", T, async || {
        w.send("GET", &w.shared[0].0, &root, None, API).await.0 == 404
    })
    .await;
    w.s.stop().await;
}

/// The requester and the subscription's registration reach the job (the example playbook
/// records what it was given in its state file), and the job's extra vars file is gone once
/// the job has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_told_who_asked_and_the_tenants_attributes() {
    let mut w = World::start().await;
    let dir = w.s.dir.path().join("state/slipway.example_virtualnetworks");
    // Both subscriptions' resources are named `shared`: the later job's record is there.
    let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("shared.json")).unwrap()).unwrap();
    assert_eq!(v["requestedBy"]["name"], "root", "{v}");
    let tenant = v["tenant"]["tenantId"].as_str().unwrap().trim_start_matches("tenant-").to_string();
    assert_eq!(v["tenant"]["attributes"]["storageClass"], format!("gold-{tenant}"), "{v}");
    let mut stack = vec![w.s.dir.path().join("jobs")];
    let mut job_dirs = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            assert!(!path.ends_with("env/extravars"), "left behind: {}", path.display());
            if path.is_dir() {
                stack.push(path);
            } else if path.ends_with("job.json") {
                job_dirs += 1;
            }
        }
    }
    assert_eq!(job_dirs, 2, "one create job per subscription");
    w.s.stop().await;
}

/// Forcing is the platform Admin's alone: an Owner of the subscription can cancel an
/// operation and delete a resource, but not force either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forcing_needs_the_platform_admin() {
    let mut w = World::start().await;
    let (tenant, _) = SUBS[0];
    let owner = token(&w.idp, &principal(tenant, "Owner"), &format!("tenant-{tenant}"));
    let (shared, op_url) = w.shared[0].clone();
    let cancel = op_url.replace("?api-version", "/cancel?api-version") + "&force=true";
    let (status, body) = w.send("POST", &cancel, &owner, None, API).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("AuthorizationFailed")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("forceCancel/action"), "{body}");
    let delete = format!("{}{shared}?api-version={API}&force=true", w.s.base);
    let (status, body) = w.send("DELETE", &delete, &owner, None, API).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("forceDelete/action"), "{body}");
    let root = token(&w.idp, "root", "platform");
    let (status, _) = w.send("DELETE", &delete, &root, None, API).await;
    assert_eq!(status, 202, "the Admin may");
    w.s.stop().await;
}

/// Referencing a resource hands its properties to the job and holds it against deletes: a
/// caller who may write only in one resource group cannot reference another group's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referencing_needs_read_on_the_referenced_resource() {
    let idp = TestIdp::start().await;
    let schemas = tempfile::tempdir().unwrap();
    let schema = json!({"type": "object", "properties": {
        "networkId": {"type": "string", "x-slipway-reference": "Slipway.Example/virtualNetworks"}
    }});
    std::fs::write(schemas.path().join("links.json"), schema.to_string()).unwrap();
    let tables = format!(
        "\n[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"links\"\nkind = \"SecurityGroup\"\napi_versions = [\"{API}\"]\n\
         schema = \"{}\"\nprovider = \"ansible\"\npoll_interval_seconds = 0.2\n\
         \n[auth]\nadmins = [\"root\"]\n\n[[auth.issuers]]\nissuer = \"{}\"\naudiences = [\"{AUD}\"]\n",
        schemas.path().join("links.json").display(),
        idp.issuer
    );
    let s = TestServer::start_full("", "", &tables, |_| {}).await;
    let w = World { s, idp, shared: Vec::new() };
    let root = token(&w.idp, "root", "platform");
    let (_, sub) = SUBS[0];
    let body = json!({"state": "Registered", "properties": {"tenantId": "tenant-a"}});
    assert_eq!(w.send("PUT", &format!("/subscriptions/{sub}"), &root, Some(body), PLATFORM_API).await.0, 201);
    let scope = format!("/subscriptions/{sub}/resourceGroups/rg2");
    let assignment =
        json!({"properties": {"roleDefinitionId": "Contributor", "principalId": "rg2-writer", "tenantId": "tenant-a"}});
    let path = format!("{scope}/providers/Slipway.Authorization/roleAssignments/{}", guid("a", 7));
    assert_eq!(w.send("PUT", &path, &root, Some(assignment), PLATFORM_API).await.0, 201);
    let network = rid(sub, "elsewhere");
    let body = json!({"location": "local", "properties": {"addressSpace": "10.9.0.0/16"}});
    assert_eq!(w.send("PUT", &network, &root, Some(body), API).await.0, 201);
    let writer = token(&w.idp, "rg2-writer", "tenant-a");
    let link = format!("{scope}/providers/Slipway.Example/links/l1");
    let (status, e) = w
        .send("PUT", &link, &writer, Some(json!({"location": "local", "properties": {"networkId": network}})), API)
        .await;
    assert_eq!((status, e["error"]["code"].as_str()), (403, Some("AuthorizationFailed")), "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("Slipway.Example/virtualNetworks/read"), "{e}");
    // Without the reference the same caller may write there.
    assert_eq!(w.send("PUT", &link, &writer, Some(json!({"location": "local", "properties": {}})), API).await.0, 201);
}
