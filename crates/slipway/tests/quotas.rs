//! Quotas end to end with the example playbooks (docs/governance.md#quotas): meters from the
//! configuration, usage in `Microsoft.Quota`'s shape, `409 QuotaExceeded` for a create or a
//! resize past a subscription's or a group's limit, limits set over the API (lowered below
//! usage: growth refused, nothing deleted), and usage released only by a delete that
//! succeeded.

use std::time::Duration;

use crate::common::{SUB, TestServer, header, rid};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(90);
const QUOTA_VERSION: &str = "api-version=2023-02-01";

const METERS: &str = r#"
[[quota.meters]]
name = "instances"
type = "Slipway.Example/computeInstances"
limit = 3
group_limit = 2

[[quota.meters]]
name = "cores"
type = "Slipway.Example/computeInstances"
property = "properties.size"
table = { small = 1, medium = 2, large = 4 }
unit = "Count"
limit = 5
"#;

fn quota_path(tail: &str) -> String {
    format!("/subscriptions/{SUB}/providers/Slipway.Example/locations/local/providers/Microsoft.Quota/{tail}")
}

async fn call(s: &TestServer, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    s.call_at(method.as_str(), path, QUOTA_VERSION, body).await
}

/// Each meter's (currentValue, limit) from the subscription's usages.
async fn usages(s: &TestServer) -> Vec<(String, u64, Option<u64>)> {
    let (code, body) = call(s, reqwest::Method::GET, &quota_path("usages"), None).await;
    assert_eq!(code, 200, "{body}");
    body["value"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|u| {
            let p = &u["properties"];
            (u["name"].as_str().unwrap().to_string(), p["currentValue"].as_u64().unwrap(), p["limit"].as_u64())
        })
        .collect()
}

fn instance(group: &str, name: &str) -> String {
    rid("computeInstances", name).replace("/resourceGroups/rg1/", &format!("/resourceGroups/{group}/"))
}

/// PUTs an instance of `size`; on acceptance waits for its operation to end as `expect`.
async fn put_instance(s: &TestServer, path: &str, properties: Value, expect: &str) -> (u16, Value) {
    let r = s.put(path, json!({"location": "westeurope", "properties": properties})).await;
    let code = r.status().as_u16();
    let op = header(&r, "azure-asyncoperation");
    let body: Value = r.json().await.unwrap_or(Value::Null);
    if let Some(op) = op {
        let done = s.wait_terminal(&op, T).await;
        assert_eq!(done["status"], expect, "{path}: {done}");
    }
    (code, body)
}

fn sized(size: &str) -> Value {
    json!({"size": size, "image": "debian-12"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_past_a_limit_are_refused_and_usage_follows_the_resources() {
    let s = TestServer::start_full("", "", METERS, |_| {}).await;
    let both = |instances: u64, cores: u64| {
        vec![("instances".to_string(), instances, Some(3)), ("cores".to_string(), cores, Some(5))]
    };
    assert_eq!(usages(&s).await, both(0, 0));

    put_instance(&s, &instance("rg1", "ci1"), sized("small"), "Succeeded").await;
    put_instance(&s, &instance("rg1", "ci2"), sized("large"), "Succeeded").await;
    assert_eq!(usages(&s).await, both(2, 5));

    // A create past the cores limit: 409 naming the meter, the limit, the usage and the ask.
    let (code, e) = put_instance(&s, &instance("rg2", "ci3"), sized("small"), "-").await;
    assert_eq!(code, 409, "{e}");
    assert_eq!(e["error"]["code"], "QuotaExceeded");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(message.contains("'cores'") && message.contains("limit is 5"), "{message}");
    let info = &e["error"]["additionalInfo"][0];
    assert_eq!(info["type"], "QuotaExceeded");
    assert_eq!(
        info["info"],
        json!({"meter": "cores", "scope": "subscription", "limit": 5, "currentValue": 5, "requested": 1, "unit": "Count"})
    );
    assert_eq!(s.get_json(&instance("rg2", "ci3")).await.0, 404, "nothing was recorded");
    let what_if = format!("{}/whatIf", instance("rg2", "ci3"));
    let body = json!({"location": "westeurope", "properties": sized("small")});
    let predicted: Value = s.http.post(s.url(&what_if)).json(&body).send().await.unwrap().json().await.unwrap();
    let verdict = &predicted["properties"]["guardrails"][0];
    assert_eq!(
        (verdict["kind"].as_str(), verdict["id"].as_str()),
        (Some("quota"), Some("cores")),
        "a what-if names it: {predicted}"
    );

    // A resize is checked by its difference: shrinking frees room.
    put_instance(&s, &instance("rg1", "ci2"), sized("medium"), "Succeeded").await;
    put_instance(&s, &instance("rg2", "ci3"), sized("small"), "Succeeded").await;
    assert_eq!(usages(&s).await, both(3, 4));

    // The Admin raises the instance limit; the group's own limit (2) still holds rg1.
    let (code, q) = call(
        &s,
        reqwest::Method::PUT,
        &quota_path("quotas/instances"),
        Some(json!({"properties": {"limit": {"value": 4}}})),
    )
    .await;
    assert_eq!(code, 200, "{q}");
    assert_eq!(q["properties"]["limit"]["value"], 4);
    let (code, e) = put_instance(&s, &instance("rg1", "ci4"), sized("small"), "-").await;
    assert_eq!((code, e["error"]["additionalInfo"][0]["info"]["scope"].as_str()), (409, Some("resourceGroup")), "{e}");
    let group_usage = format!(
        "/subscriptions/{SUB}/resourceGroups/rg1/providers/Slipway.Example/locations/local/providers/Microsoft.Quota/usages/instances"
    );
    let (code, u) = call(&s, reqwest::Method::GET, &group_usage, None).await;
    assert_eq!(
        (code, u["properties"]["currentValue"].as_u64(), u["properties"]["limit"].as_u64()),
        (200, Some(2), Some(2)),
        "{u}"
    );

    // A limit lowered below usage refuses growth and deletes nothing; shrinking still passes.
    let lower = json!({"properties": {"limit": {"value": 2}}});
    assert_eq!(call(&s, reqwest::Method::PUT, &quota_path("quotas/cores"), Some(lower)).await.0, 200);
    let (code, e) = put_instance(&s, &instance("rg1", "ci1"), sized("medium"), "-").await;
    assert_eq!((code, e["error"]["code"].as_str()), (409, Some("QuotaExceeded")), "{e}");
    put_instance(&s, &instance("rg1", "ci2"), sized("small"), "Succeeded").await;
    assert_eq!(s.get_json(&instance("rg1", "ci1")).await.0, 200);
    assert_eq!(usages(&s).await[1], ("cores".to_string(), 3, Some(2)));

    // A delete that fails keeps what the resource consumes; one that succeeds releases it.
    put_instance(
        &s,
        &instance("rg1", "ci2"),
        json!({"size": "small", "image": "debian-12", "simulateDeleteFailure": true}),
        "Succeeded",
    )
    .await;
    let failing = s.http.delete(s.url(&instance("rg1", "ci2"))).send().await.unwrap();
    let op = header(&failing, "azure-asyncoperation").expect("a delete operation");
    slipway_test_support::eventually("the delete job to fail", T, async || {
        let (_, status) = s.follow(&op).await;
        match status["error"]["code"].as_str() {
            Some("DeprovisioningFailed") => Ok(()),
            _ => Err(status.to_string()),
        }
    })
    .await;
    assert_eq!(usages(&s).await[0].1, 3, "a failed delete keeps its usage (and retries)");
    let deleting = s.http.delete(s.url(&instance("rg2", "ci3"))).send().await.unwrap();
    let op = header(&deleting, "azure-asyncoperation").expect("a delete operation");
    assert_eq!(s.wait_terminal(&op, T).await["status"], "Succeeded");
    assert_eq!(usages(&s).await, vec![("instances".to_string(), 2, Some(4)), ("cores".to_string(), 2, Some(2))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_requests_that_are_wrong_get_precise_errors() {
    let s = TestServer::start_full("", "", METERS, |_| {}).await;
    use reqwest::Method;
    let set = |v: Value| Some(json!({"properties": {"limit": {"value": v}}}));
    for bad in [json!(-1), json!(1.5), json!("ten")] {
        let (code, e) = call(&s, Method::PUT, &quota_path("quotas/cores"), set(bad.clone())).await;
        assert_eq!((code, e["error"]["code"].as_str()), (400, Some("InvalidQuotaLimit")), "{bad}: {e}");
    }
    let (code, e) = call(&s, Method::PUT, &quota_path("quotas/cores"), Some(json!({"limit": 3}))).await;
    assert_eq!(code, 400, "{e}");
    let (code, e) = call(&s, Method::GET, &quota_path("quotas/nope"), None).await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("ResourceNotFound")), "{e}");
    let other_ns = quota_path("usages").replace("Slipway.Example", "Nobody.Here");
    let (code, e) = call(&s, Method::GET, &other_ns, None).await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("InvalidResourceNamespace")), "{e}");
    let (code, _) = call(&s, Method::PUT, &quota_path("usages/cores"), set(json!(3))).await;
    assert_eq!(code, 405);
    let (code, _) = call(&s, Method::DELETE, &quota_path("quotas/cores"), None).await;
    assert_eq!(code, 405);
    // Quotas list with the configured defaults and where each limit comes from.
    let (code, list) = call(&s, Method::GET, &quota_path("quotas"), None).await;
    assert_eq!(code, 200, "{list}");
    let cores = &list["value"][1];
    assert_eq!(cores["id"], quota_path("quotas/cores"));
    assert_eq!(cores["type"], "Microsoft.Quota/Quotas");
    assert_eq!(cores["properties"]["limit"], json!({"limitObjectType": "LimitValue", "value": 5}));
    assert_eq!(cores["properties"]["resourceType"], "Slipway.Example/computeInstances");
}

/// With `owner_limits = "below-ceiling"`, a subscription's Owner sets its limits at or below
/// the Admin's (the ceiling); only the Admin raises the ceiling, and a ceiling lowered below
/// the Owner's limit wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_sets_limits_only_at_or_below_the_platforms() {
    use slipway_auth::test_idp::TestIdp;
    use slipway_domain::{Clock, SystemClock};
    const AUD: &str = "api://slipway";
    let idp = TestIdp::start().await;
    let tables = format!(
        "\n[auth]\nadmins = [\"root\"]\n\n[[auth.issuers]]\nissuer = \"{}\"\naudiences = [\"{AUD}\"]\n\n[quota]\nowner_limits = \"below-ceiling\"\n{METERS}",
        idp.issuer
    );
    let s = TestServer::start_full("", "", &tables, |_| {}).await;
    let token =
        |subject: &str| idp.sign("key-1", &idp.claims(AUD, subject, "tenant-a", SystemClock.now().as_millis() / 1000));
    let (root, owner, contributor) = (token("root"), token("owner-1"), token("contributor-1"));
    let send = |method: &str, path: String, tok: &str, body: Value| {
        let req = s.http.request(method.parse().unwrap(), format!("{}{path}?{QUOTA_VERSION}", s.base)).bearer_auth(tok);
        async move {
            let r = req.json(&body).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let registration = json!({"state": "Registered", "properties": {"tenantId": "tenant-a"}});
    assert_eq!(send("PUT", format!("/subscriptions/{SUB}"), &root, registration).await.0, 201);
    for (i, (who, role)) in [("owner-1", "Owner"), ("contributor-1", "Contributor")].iter().enumerate() {
        let path = format!(
            "/subscriptions/{SUB}/providers/Slipway.Authorization/roleAssignments/00000000-0000-0000-0000-00000000000{i}"
        );
        let body = json!({"properties": {"roleDefinitionId": role, "principalId": who, "tenantId": "tenant-a"}});
        assert_eq!(send("PUT", path, &root, body).await.0, 201);
    }
    let limit = |v: u64| json!({"properties": {"limit": {"value": v}}});
    let cores = quota_path("quotas/cores");

    let (code, e) = send("PUT", cores.clone(), &owner, limit(6)).await;
    assert_eq!((code, e["error"]["code"].as_str()), (400, Some("InvalidQuotaLimit")), "above the ceiling of 5: {e}");
    let (code, q) = send("PUT", cores.clone(), &owner, limit(3)).await;
    assert_eq!(
        (code, &q["properties"]["limit"]["value"], &q["properties"]["ceiling"]),
        (200, &json!(3), &json!(5)),
        "{q}"
    );
    let (code, e) = send("PUT", cores.clone(), &contributor, limit(1)).await;
    assert_eq!((code, e["error"]["code"].as_str()), (403, Some("AuthorizationFailed")), "{e}");

    // The Admin's ceiling: raised, the Owner's 3 still applies; lowered below it, it wins.
    let (_, q) = send("PUT", cores.clone(), &root, limit(10)).await;
    assert_eq!((&q["properties"]["limit"]["value"], &q["properties"]["ownerLimit"]), (&json!(3), &json!(3)), "{q}");
    let (_, q) = send("PUT", cores.clone(), &root, limit(2)).await;
    assert_eq!(q["properties"]["limit"]["value"], 2, "{q}");
    assert_eq!(send("PUT", cores, &owner, limit(3)).await.0, 400, "the Owner cannot lift it again");
}
