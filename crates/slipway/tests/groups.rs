//! Resource groups as resources, black-box with the example playbooks
//! (docs/arm-contract.md#resource-groups): a group's own `PUT`, `GET`, `HEAD`, `PATCH`, its
//! list filtered by tag, ARM's rule that a resource's group must exist (as a setting), and a
//! group's delete — everything in it deleted, each through its own delete, or `Failed`
//! naming what could not go with the group left — on SQLite and on PostgreSQL with two
//! replicas. Azure's own SDK drives the same calls in `arm_poller.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{self, SUB, TestServer, header};
use serde_json::{Value, json};
use slipway::app::App;
use slipway::config::Config;
use slipway_test_support::TestClock;

const T: Duration = Duration::from_secs(90);
/// A `Microsoft.Resources` api-version, as ARM's clients send.
const RESOURCES: &str = "api-version=2025-04-01";

fn group_path(name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{name}")
}

fn in_group(group: &str, ty: &str, name: &str) -> String {
    format!("{}/providers/Slipway.Example/{ty}/{name}", group_path(group))
}

/// Sends `method` to `path` on the platform api-version.
async fn call(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut req = http.request(method, format!("{base}{path}{sep}{RESOURCES}"));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("request");
    let status = r.status().as_u16();
    let location = header(&r, "azure-asyncoperation");
    let mut body: Value = r.json().await.unwrap_or(Value::Null);
    if let Some(l) = location {
        body = json!({"asyncOperation": l});
    }
    (status, body)
}

/// Creates a resource and waits for it to succeed.
async fn create(s: &TestServer, path: &str, properties: Value) {
    let r = s.put(path, json!({"location": "westeurope", "properties": properties})).await;
    assert!(r.status().is_success(), "{path}: {}", r.text().await.unwrap_or_default());
    let op = header(&r, "azure-asyncoperation").expect("an operation");
    let done = s.wait_terminal(&op, T).await;
    assert_eq!(done["status"], "Succeeded", "{path}: {done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_a_resource_of_its_own_and_its_delete_deletes_what_it_holds() {
    let s = TestServer::start_with_server("resource_groups = \"explicit\"").await;
    let (http, base) = (&s.http, s.base.as_str());
    use reqwest::Method;
    let rg = group_path("Team-A");
    let vnet = in_group("Team-A", "virtualNetworks", "v1");

    // ARM's rule, as configured: a resource's group must exist.
    let r = s.put(&vnet, json!({"location": "westeurope", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    assert_eq!(r.status(), 404);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "ResourceGroupNotFound", "{e}");
    assert_eq!(call(http, base, Method::HEAD, &rg, None).await.0, 404);

    // Created (201), replaced (200), its location fixed.
    let body = json!({"location": "West Europe", "tags": {"env": "dev"}});
    let (code, created) = call(http, base, Method::PUT, &rg, Some(body.clone())).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["id"], rg);
    assert_eq!(created["type"], "Microsoft.Resources/resourceGroups");
    assert_eq!(created["properties"]["provisioningState"], "Succeeded");
    assert_eq!(created["tags"], json!({"env": "dev"}));
    let (code, again) =
        call(http, base, Method::PUT, &rg.to_lowercase(), Some(json!({"location": "westeurope", "managedBy": "me"})))
            .await;
    assert_eq!(
        (code, again["name"].as_str(), again["location"].as_str()),
        (200, Some("Team-A"), Some("West Europe")),
        "{again}"
    );
    assert_eq!((again["tags"].clone(), again["managedBy"].clone()), (json!({}), json!("me")), "a PUT replaces");
    let (code, moved) = call(http, base, Method::PUT, &rg, Some(json!({"location": "eastus"}))).await;
    assert_eq!((code, moved["error"]["code"].as_str()), (409, Some("InvalidResourceGroupLocation")), "{moved}");
    let (code, bad) = call(http, base, Method::PUT, &rg, Some(json!({"tags": {}}))).await;
    assert_eq!((code, bad["error"]["code"].as_str()), (400, Some("LocationRequired")), "{bad}");
    assert_eq!(call(http, base, Method::HEAD, &rg, None).await.0, 204);
    let segment_cased = format!("/subscriptions/{SUB}/resourcegroups/team-a");
    assert_eq!(
        call(http, base, Method::GET, &segment_cased, None).await.0,
        200,
        "path segments match whatever their case"
    );

    // PATCH replaces the tags it names; the list filters by tag.
    let (code, patched) =
        call(http, base, Method::PATCH, &rg, Some(json!({"tags": {"env": "prod", "team": "a"}}))).await;
    assert_eq!(
        (code, patched["tags"].clone(), patched["managedBy"].clone()),
        (200, json!({"env": "prod", "team": "a"}), json!("me"))
    );
    call(
        http,
        base,
        Method::PUT,
        &group_path("other"),
        Some(json!({"location": "westeurope", "tags": {"env": "dev"}})),
    )
    .await;
    let list = |filter: &str| format!("/subscriptions/{SUB}/resourceGroups?$filter={filter}");
    let names = |v: &Value| {
        v["value"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(names(&call(http, base, Method::GET, &list("tagName eq 'team'"), None).await.1), ["Team-A"]);
    assert_eq!(
        names(&call(http, base, Method::GET, &list("tagName eq 'env' and tagValue eq 'dev'"), None).await.1),
        ["other"]
    );
    let (_, paged) = call(http, base, Method::GET, &format!("/subscriptions/{SUB}/resourceGroups?$top=1"), None).await;
    assert_eq!((names(&paged), paged["nextLink"].is_string()), (vec!["other".to_string()], true), "{paged}");

    // What it holds: a network with a subnet, a security group; another group's network stays.
    create(&s, &vnet, json!({"addressSpace": "10.0.0.0/16"})).await;
    create(&s, &format!("{vnet}/subnets/s1"), json!({"addressPrefix": "10.0.1.0/24"})).await;
    let sg = in_group("Team-A", "securityGroups", "sg1");
    create(&s, &sg, json!({})).await;
    let elsewhere = in_group("other", "virtualNetworks", "keep");
    create(&s, &elsewhere, json!({"addressSpace": "10.9.0.0/16"})).await;

    let (code, accepted) = call(http, base, Method::DELETE, &rg, None).await;
    assert_eq!(code, 202, "{accepted}");
    let op = accepted["asyncOperation"].as_str().expect("Azure-AsyncOperation").to_string();
    let (code, repeated) = call(http, base, Method::DELETE, &rg, None).await;
    assert_eq!(
        (code, repeated["asyncOperation"].as_str()),
        (202, Some(op.as_str())),
        "a repeated DELETE follows the same operation"
    );
    let done = s.wait_terminal(&op, T).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    let mut children: Vec<&str> = done["properties"]["childOperations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["resourceId"].as_str().unwrap())
        .collect();
    children.sort_unstable();
    assert_eq!(children, [sg.as_str(), vnet.as_str()], "each top-level resource had a delete of its own");
    for gone in [&vnet, &sg] {
        assert_eq!(s.get_json(gone).await.0, 404, "{gone}");
    }
    assert_eq!(call(http, base, Method::GET, &rg, None).await.0, 404);
    assert_eq!(call(http, base, Method::HEAD, &rg, None).await.0, 404);
    assert_eq!(s.get_json(&elsewhere).await.0, 200, "another group's resources stay");
}

/// The groups a resource's create makes (the default), and a group's delete that meets a
/// resource whose delete fails: `Failed`, naming it; the group and that resource stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_delete_that_cannot_delete_everything_fails_and_keeps_the_group() {
    let s = TestServer::start().await;
    check_a_failing_group_delete(&s.http, &s.base, &s.base).await;
}

/// The same over PostgreSQL, with the resources created through one replica and the group
/// deleted through the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_delete_on_two_postgres_replicas_fails_as_one_would() {
    let dir = tempfile::tempdir().unwrap();
    let schema = common::replica::unique_schema("groups");
    let text = common::config_text(dir.path(), "").replacen(
        &format!("url = \"sqlite:{}\"", dir.path().join("slipway.db").display()),
        &format!("url = \"{}\"\nschema = \"{schema}\"", common::replica::pg_url()),
        1,
    );
    let mut apps = Vec::new();
    for node in ["groups-a", "groups-b"] {
        let config_path = dir.path().join(format!("{node}.toml"));
        std::fs::write(&config_path, text.replacen("node_name = \"test\"", &format!("node_name = \"{node}\""), 1))
            .unwrap();
        let config = Config::load(Some(&config_path), []).expect("config");
        apps.push(App::start(config, Arc::new(TestClock::new())).await.expect("a replica"));
    }
    let bases: Vec<String> = apps.iter().map(|a| format!("http://{}", a.addr)).collect();
    check_a_failing_group_delete(&reqwest::Client::new(), &bases[0], &bases[1]).await;
    for app in apps {
        app.shutdown().await.expect("clean shutdown");
    }
}

/// Resources created through `creating`, the group deleted through `deleting`.
async fn check_a_failing_group_delete(http: &reqwest::Client, creating: &str, deleting: &str) {
    use reqwest::Method;
    let rg = group_path("Doomed");
    let (a, b) = (in_group("Doomed", "virtualNetworks", "a"), in_group("Doomed", "virtualNetworks", "b"));
    let stuck = in_group("Doomed", "securityGroups", "stuck");
    let mut ops = Vec::new();
    for (path, properties) in [
        (&a, json!({"addressSpace": "10.0.0.0/16"})),
        (&b, json!({"addressSpace": "10.1.0.0/16"})),
        (&stuck, json!({"simulateDeleteFailure": true})),
    ] {
        let body = json!({"location": "westeurope", "properties": properties});
        let url = format!("{creating}{path}?api-version={}", common::API);
        let r = http.put(url).json(&body).send().await.expect("PUT");
        assert_eq!(r.status(), 201, "the group is made with the first: {}", r.text().await.unwrap_or_default());
        ops.push(header(&r, "azure-asyncoperation").unwrap());
    }
    for op in &ops {
        let done = wait_terminal(http, op).await;
        assert_eq!(done["status"], "Succeeded", "{done}");
    }
    let (code, made) = call(http, creating, Method::GET, &rg, None).await;
    assert_eq!(
        (code, made["location"].as_str()),
        (200, Some("westeurope")),
        "made in its first resource's location: {made}"
    );

    let (code, accepted) = call(http, deleting, Method::DELETE, &rg, None).await;
    assert_eq!(code, 202, "{accepted}");
    let op = accepted["asyncOperation"].as_str().unwrap().replace(deleting, creating);
    let done = wait_terminal(http, &op).await;
    assert_eq!(done["status"], "Failed", "{done}");
    let message = done["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&stuck) && !message.contains(&a), "names what could not go: {done}");
    assert_eq!(done["error"]["details"][0]["target"], stuck.as_str(), "{done}");
    let (code, group) = call(http, creating, Method::GET, &rg, None).await;
    assert_eq!(
        (code, group["properties"]["provisioningState"].as_str()),
        (200, Some("Succeeded")),
        "the group stays: {group}"
    );
    let status = |path: &str| {
        let url = format!("{creating}{path}?api-version={}", common::API);
        async move { http.get(url).send().await.expect("GET").status().as_u16() }
    };
    assert_eq!(status(&stuck).await, 200, "and so does what could not go");
    for gone in [&a, &b] {
        assert_eq!(status(gone).await, 404, "{gone} went");
    }
}

async fn wait_terminal(http: &reqwest::Client, url: &str) -> Value {
    slipway_test_support::eventually("the operation to end", T, async || {
        let body: Value =
            http.get(url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        match body["status"].as_str() {
            Some("Succeeded" | "Failed" | "Canceled") => Ok(body),
            _ => Err(body.to_string()),
        }
    })
    .await
}

/// Tags written at their own scope change the resource's tags and run nothing: the job
/// history and the launch log stay as they were (a resource `PATCH` of tags runs a job).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_at_a_scope_change_no_spec_and_run_no_job() {
    use reqwest::Method;
    let s = TestServer::start().await;
    let (http, base) = (&s.http, s.base.as_str());
    let vnet = in_group("tagged", "virtualNetworks", "v1");
    create(&s, &vnet, json!({"addressSpace": "10.0.0.0/16"})).await;
    let launches = || std::fs::read_to_string(s.dir.path().join("state/launches.log")).unwrap_or_default();
    let jobs = || async { s.get_json(&format!("{vnet}/jobs")).await.1["value"].as_array().map(Vec::len) };
    let (before, jobs_before) = (launches(), jobs().await);
    let at = format!("{vnet}/providers/Microsoft.Resources/tags/default");

    let (code, put) =
        call(http, base, Method::PUT, &at, Some(json!({"properties": {"tags": {"a": "1", "b": "2"}}}))).await;
    assert_eq!((code, put["properties"]["tags"].clone()), (200, json!({"a": "1", "b": "2"})), "{put}");
    assert_eq!(put["id"], at);
    let merge = json!({"operation": "Merge", "properties": {"tags": {"c": "3"}}});
    assert_eq!(
        call(http, base, Method::PATCH, &at, Some(merge)).await.1["properties"]["tags"],
        json!({"a": "1", "b": "2", "c": "3"})
    );
    let delete = json!({"operation": "Delete", "properties": {"tags": {"a": "", "b": "not-its-value"}}});
    assert_eq!(
        call(http, base, Method::PATCH, &at, Some(delete)).await.1["properties"]["tags"],
        json!({"b": "2", "c": "3"})
    );
    let (code, bad) = call(http, base, Method::PATCH, &at, Some(json!({"operation": "Upsert"}))).await;
    assert_eq!((code, bad["error"]["code"].as_str()), (400, Some("InvalidTagOperation")), "{bad}");
    let (_, resource) = s.get_json(&vnet).await;
    assert_eq!(resource["tags"], json!({"b": "2", "c": "3"}), "the resource shows them");
    assert_eq!(resource["properties"]["provisioningState"], "Succeeded");
    assert_eq!((launches(), jobs().await), (before, jobs_before), "and nothing ran");
    assert_eq!(call(http, base, Method::DELETE, &at, None).await.1["properties"]["tags"], json!({}));

    // A group's tags, the same way; a missing scope is its own 404.
    let group_tags = format!("{}/providers/Microsoft.Resources/tags/default", group_path("tagged"));
    let (code, g) = call(
        http,
        base,
        Method::PATCH,
        &group_tags,
        Some(json!({"operation": "Merge", "properties": {"tags": {"env": "x"}}})),
    )
    .await;
    assert_eq!((code, g["properties"]["tags"].clone()), (200, json!({"env": "x"})), "{g}");
    assert_eq!(call(http, base, Method::GET, &group_path("tagged"), None).await.1["tags"], json!({"env": "x"}));
    let nowhere = format!("{}/providers/Microsoft.Resources/tags/default", group_path("nowhere"));
    assert_eq!(call(http, base, Method::GET, &nowhere, None).await.1["error"]["code"], "ResourceGroupNotFound");
    let no_vnet =
        format!("{}/providers/Microsoft.Resources/tags/default", in_group("tagged", "virtualNetworks", "none"));
    assert_eq!(call(http, base, Method::GET, &no_vnet, None).await.1["error"]["code"], "ResourceNotFound");
}
