//! Resources that compose, black-box over HTTP with the example types and real playbooks:
//! outputs reported by the automation (`set_stats` `slipway_outputs`) shown as read-only
//! properties.

use crate::common;

use std::time::Duration;

use crate::common::{TestServer, header, rid};
use serde_json::{Value, json};
use slipway_test_support::eventually;

const T: Duration = Duration::from_secs(60);

fn succeeded(code: u16, body: &Value) -> bool {
    code == 200 && body["properties"]["provisioningState"] == "Succeeded"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_become_read_only_properties() {
    let server = TestServer::start().await;
    let vm = rid("computeInstances", "vm1");
    // A client's values for read-only properties are ignored, as ARM does.
    let body = json!({"location": "local", "properties": {"size": "small", "image": "debian", "ipAddress": "6.6.6.6"}});
    let r = server.put(&vm, body.clone()).await;
    assert_eq!(r.status(), 201);
    let created: Value = r.json().await.unwrap();
    assert!(created["properties"].get("ipAddress").is_none(), "no outputs before the job: {created}");
    let (_, done) = server.wait_resource(&vm, T, succeeded).await;
    let ip = done["properties"]["ipAddress"].as_str().expect("the job reported an address").to_string();
    assert!(ip.starts_with("10.0.0.") && ip != "6.6.6.6", "{done}");
    assert_eq!(done["properties"]["hostName"], "vm1");
    assert_eq!(done["properties"]["size"], "small");
    // Listing shows them too.
    let (_, list) =
        server.get_json(&format!("/subscriptions/{}/providers/Slipway.Example/computeInstances", common::SUB)).await;
    assert_eq!(list["value"][0]["properties"]["ipAddress"], ip.as_str(), "{list}");

    // Outputs are not spec: sending the body back, outputs included, changes nothing.
    let mut echoed = body.clone();
    echoed["properties"]["ipAddress"] = json!(ip);
    echoed["properties"]["hostName"] = json!("elsewhere");
    let r = server.put(&vm, echoed).await;
    assert_eq!(r.status(), 200, "no change, no operation");
    assert!(header(&r, "azure-asyncoperation").is_none());
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(server.dir.path().join("state/slipway.example_computeinstances/vm1.json")).unwrap(),
    )
    .unwrap();
    assert!(state["properties"].get("ipAddress").is_none(), "read-only values never reach the job: {state}");

    // A real update keeps the outputs until its own job reports new ones.
    let mut bigger = body.clone();
    bigger["properties"]["size"] = json!("large");
    assert_eq!(server.put(&vm, bigger).await.status(), 200);
    let (_, updated) = server.wait_resource(&vm, T, |c, b| succeeded(c, b) && b["properties"]["size"] == "large").await;
    assert_eq!(updated["properties"]["ipAddress"], ip.as_str(), "same name, same address");
}

async fn op_status(server: &TestServer, url: &str) -> Value {
    server.follow(url).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_waits_for_its_parent_and_lives_under_it() {
    let server = TestServer::start_full("", "", "", |_| {}).await;
    let vnet = rid("virtualNetworks", "v1");
    let subnet = format!("{vnet}/subnets/s1");
    let body = json!({"location": "local", "properties": {"prefix": "10.0.1.0/24"}});

    // No parent: 404 ParentResourceNotFound, nothing created.
    let r = server.put(&subnet, body.clone()).await;
    assert_eq!(r.status(), 404);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "ParentResourceNotFound", "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains(&vnet), "{e}");

    // A parent still provisioning (its job runs 3 s): the child is accepted and waits.
    let r = server
        .put(&vnet, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "delaySeconds": 3}}))
        .await;
    assert_eq!(r.status(), 201);
    let parent_op = header(&r, "azure-asyncoperation").unwrap();
    let r = server.put(&subnet, body.clone()).await;
    assert_eq!(r.status(), 201);
    let child_op = header(&r, "azure-asyncoperation").unwrap();
    let created: Value = r.json().await.unwrap();
    assert_eq!(created["id"], subnet.as_str());
    assert_eq!(created["type"], "Slipway.Example/virtualNetworks/subnets");
    let waiting = eventually("the child showing its wait", T, async || {
        let s = op_status(&server, &child_op).await;
        if s["properties"]["waitingOn"] == vnet.as_str() { Ok(s) } else { Err(s.to_string()) }
    })
    .await;
    assert_eq!(waiting["status"], "Accepted", "{waiting}");
    assert_eq!(op_status(&server, &parent_op).await["status"], "Provisioning", "the parent is still running");
    let child_op_id = waiting["name"].as_str().unwrap().to_string();
    let launches = std::fs::read_to_string(server.dir.path().join("state/launches.log")).unwrap_or_default();
    assert!(!launches.contains(&child_op_id), "the child's job did not start: {launches}");

    // The parent succeeds; the child, woken, runs with the parent's properties and outputs.
    let parent_done = server.wait_terminal(&parent_op, T).await;
    assert_eq!(parent_done["status"], "Succeeded");
    let child_done = server.wait_terminal(&child_op, T).await;
    assert_eq!(child_done["status"], "Succeeded", "{child_done}");
    let launches = std::fs::read_to_string(server.dir.path().join("state/launches.log")).unwrap();
    let order: Vec<bool> = launches.lines().map(|l| l.starts_with(&child_op_id)).collect();
    assert_eq!(order, [false, true], "the parent's job, then the child's: {launches}");
    assert!(child_done.get("properties").is_none(), "no longer waiting: {child_done}");
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(server.dir.path().join("state/slipway.example_virtualnetworks_subnets/s1.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(state["parent"]["id"], vnet.as_str(), "{state}");
    assert_eq!(state["parent"]["properties"]["addressSpace"], "10.0.0.0/16", "{state}");

    // The children's collection lives under the parent; another parent's is empty or absent.
    let (code, list) = server.get_json(&format!("{vnet}/subnets")).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["value"].as_array().unwrap().len(), 1);
    assert_eq!(list["value"][0]["id"], subnet.as_str());
    let (code, missing) = server.get_json(&format!("{}/subnets", rid("virtualNetworks", "v2"))).await;
    assert_eq!((code, missing["error"]["code"].as_str()), (404, Some("ParentResourceNotFound")), "{missing}");
    let (code, child) = server.get_json(&subnet).await;
    assert_eq!((code, child["properties"]["provisioningState"].as_str()), (200, Some("Succeeded")));
}

fn op_id_of(status_url: &str) -> String {
    status_url.split('?').next().unwrap().rsplit('/').next().unwrap().to_string()
}

/// Creates `path` with `properties` and waits for it to succeed; its create operation's id.
async fn create(server: &TestServer, path: &str, properties: Value) -> String {
    let r = server.put(path, json!({"location": "local", "properties": properties})).await;
    assert_eq!(r.status(), 201, "{path}");
    let op = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(server.wait_terminal(&op, T).await["status"], "Succeeded", "{path}");
    op_id_of(&op)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_parent_deletes_its_children_first() {
    let server = TestServer::start_full("", "", "", |_| {}).await;
    let vnet = rid("virtualNetworks", "v1");
    let (s1, s2) = (format!("{vnet}/subnets/s1"), format!("{vnet}/subnets/s2"));
    let parent_create = create(&server, &vnet, json!({"addressSpace": "10.0.0.0/16"})).await;
    let child_creates = [create(&server, &s1, json!({})).await, create(&server, &s2, json!({})).await];

    let r = server.http.delete(server.url(&vnet)).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let op = header(&r, "azure-asyncoperation").unwrap();
    let done = server.wait_terminal(&op, T).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    for path in [&vnet, &s1, &s2] {
        assert_eq!(server.get_json(path).await.0, 404, "{path} is gone");
    }
    // Each child had a delete operation of its own, readable by the client.
    let children = done["properties"]["childOperations"].as_array().expect("the children's operations").clone();
    let mut ids: Vec<&str> = children.iter().map(|c| c["resourceId"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [s1.as_str(), s2.as_str()]);
    for c in &children {
        let (code, child_op) =
            server.follow(&format!("{}{}?api-version={}", server.base, c["id"].as_str().unwrap(), common::API)).await;
        assert_eq!((code, child_op["status"].as_str()), (200, Some("Succeeded")), "{child_op}");
    }
    // The children's delete jobs ran before the parent's: the parent's comes last. Each job
    // is keyed by the operation it ran for, and ran once.
    let launches = std::fs::read_to_string(server.dir.path().join("state/launches.log")).unwrap();
    let last = launches.lines().last().unwrap();
    assert!(last.starts_with(&op_id_of(&op)), "the parent's delete job is the last: {launches}");
    let child_deletes = children.iter().map(|c| op_id_of(c["id"].as_str().unwrap()));
    for o in child_creates.into_iter().chain(child_deletes).chain([parent_create]) {
        assert_eq!(launches.lines().filter(|l| l.starts_with(o.as_str())).count(), 1, "{o}: {launches}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_cannot_be_deleted_holds_its_parent_and_says_why() {
    let server = TestServer::start_full("", "", "", |_| {}).await;
    let vnet = rid("virtualNetworks", "v2");
    let stuck = format!("{vnet}/subnets/stuck");
    create(&server, &vnet, json!({"addressSpace": "10.0.0.0/16"})).await;
    create(&server, &stuck, json!({"simulateDeleteFailure": true})).await;
    let r = server.http.delete(server.url(&vnet)).send().await.unwrap();
    let op = header(&r, "azure-asyncoperation").unwrap();
    let held = eventually("the child's failure showing", T, async || {
        let s = op_status(&server, &op).await;
        if s["error"]["details"].as_array().is_some_and(|d| !d.is_empty()) { Ok(s) } else { Err(s.to_string()) }
    })
    .await;
    assert_eq!(held["status"], "Deleting", "the parent waits: {held}");
    assert_eq!(held["error"]["details"][0]["target"], stuck.as_str(), "{held}");
    assert!(held["error"]["details"][0]["message"].as_str().unwrap().contains("simulated delete failure"), "{held}");
    assert!(held["error"]["message"].as_str().unwrap().starts_with(&format!("[{stuck}] ")), "{held}");
    let (_, parent) = server.get_json(&vnet).await;
    assert_eq!(parent["properties"]["provisioningState"], "Deleting");
    let (_, child) = server.get_json(&stuck).await;
    assert_eq!(child["properties"]["provisioningState"], "Deleting");
}

/// `servers` reference a subnet and security groups (a schema written here; the example
/// types stay as they are).
fn servers_type(dir: &std::path::Path) -> String {
    let schema = json!({
        "type": "object",
        "properties": {
            "subnetId": {"type": "string", "x-slipway-reference": "Slipway.Example/virtualNetworks/subnets"},
            "securityGroupIds": {"type": "array", "items": {"type": "string", "x-slipway-reference": "Slipway.Example/securityGroups"}},
            "ipAddress": {"type": "string", "readOnly": true},
            "hostName": {"type": "string", "readOnly": true}
        }
    });
    let path = dir.join("servers.json");
    std::fs::write(&path, schema.to_string()).unwrap();
    format!(
        "\n[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"servers\"\nkind = \"ComputeInstance\"\napi_versions = [\"2025-06-01\"]\nschema = \"{}\"\nprovider = \"ansible\"\npoll_interval_seconds = 0.2\n",
        path.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_order_jobs_and_hold_their_targets() {
    let schema_dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_full("", "", &servers_type(schema_dir.path()), |_| {}).await;
    let vnet = rid("virtualNetworks", "v1");
    let subnet = format!("{vnet}/subnets/s1");
    let sg = rid("securityGroups", "web");
    let vm = rid("servers", "vm1");
    let refs = json!({"subnetId": subnet, "securityGroupIds": [sg]});

    // A reference to nothing, or to a resource of the wrong type: 400 naming the property.
    let r = server.put(&vm, json!({"location": "local", "properties": refs})).await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "InvalidResourceReference", "{e}");
    assert_eq!(e["error"]["target"], "properties.securityGroupIds[0]", "the first missing one, by property: {e}");
    assert!(e["error"]["message"].as_str().unwrap().ends_with("does not exist."), "{e}");
    let r = server.put(&vm, json!({"location": "local", "properties": {"subnetId": vnet}})).await;
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]["message"].as_str().unwrap().contains("is not a Slipway.Example/virtualNetworks/subnets"),
        "{e}"
    );

    // The server is accepted once its targets exist, and its job waits until they succeeded.
    let r = server
        .put(&vnet, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "delaySeconds": 2}}))
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(server.put(&subnet, json!({"location": "local", "properties": {}})).await.status(), 201);
    create(&server, &sg, json!({})).await;
    let r = server.put(&vm, json!({"location": "local", "properties": refs})).await;
    assert_eq!(r.status(), 201);
    let vm_op = header(&r, "azure-asyncoperation").unwrap();
    let (_, vm_body) = server.wait_resource(&vm, T, succeeded).await;
    assert!(vm_body["properties"]["ipAddress"].is_string(), "{vm_body}");
    let launches = std::fs::read_to_string(server.dir.path().join("state/launches.log")).unwrap();
    assert_eq!(launches.lines().count(), 4, "vnet, subnet, group, server: {launches}");
    assert!(launches.lines().last().unwrap().starts_with(&op_id_of(&vm_op)), "the server's job ran last: {launches}");
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(server.dir.path().join("state/slipway.example_servers/vm1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["references"]["subnetId"]["id"], subnet.as_str(), "{state}");
    assert_eq!(state["references"]["securityGroupIds"][0]["id"], sg.as_str(), "{state}");
    assert_eq!(state["references"]["subnetId"]["type"], "Slipway.Example/virtualNetworks/subnets", "as configured");

    // Targets in use cannot be deleted, nor can what they live under.
    for target in [&subnet, &vnet, &sg] {
        let r = server.http.delete(server.url(target)).send().await.unwrap();
        assert_eq!(r.status(), 409, "{target}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "ResourceInUse", "{e}");
        assert!(e["error"]["message"].as_str().unwrap().contains(&vm), "names the referrer: {e}");
    }
    // Dropping the reference frees the subnet.
    let r = server.http.patch(server.url(&vm)).json(&json!({"properties": {"subnetId": null}})).send().await.unwrap();
    assert_eq!(r.status(), 202);
    server.wait_resource(&vm, T, |c, b| succeeded(c, b) && b["properties"].get("subnetId").is_none()).await;
    let r = server.http.delete(server.url(&subnet)).send().await.unwrap();
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    let r = server.http.delete(server.url(&sg)).send().await.unwrap();
    assert_eq!(r.status(), 409, "still referenced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_that_would_close_a_cycle_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let schema = json!({"type": "object", "properties": {
        "peerId": {"type": "string", "x-slipway-reference": "Slipway.Example/peers"}
    }});
    std::fs::write(dir.path().join("peers.json"), schema.to_string()).unwrap();
    let peers = format!(
        "\n[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"peers\"\nkind = \"SecurityGroup\"\napi_versions = [\"2025-06-01\"]\nschema = \"{}\"\nprovider = \"ansible\"\npoll_interval_seconds = 0.2\n",
        dir.path().join("peers.json").display()
    );
    let server = TestServer::start_full("", "", &peers, |_| {}).await;
    let (a, b, c) = (rid("peers", "a"), rid("peers", "b"), rid("peers", "c"));
    create(&server, &a, json!({})).await;
    create(&server, &b, json!({"peerId": a})).await;
    create(&server, &c, json!({"peerId": b})).await;
    // a → b would close a → b → a and a → c would close a → c → b → a.
    for target in [&b, &c] {
        let r = server.put(&a, json!({"location": "local", "properties": {"peerId": target}})).await;
        assert_eq!(r.status(), 400, "a → {target}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(
            (e["error"]["code"].as_str(), e["error"]["target"].as_str()),
            (Some("InvalidResourceReference"), Some("properties.peerId"))
        );
        assert!(e["error"]["message"].as_str().unwrap().contains("would create a cycle"), "{e}");
    }
    // Self-reference too.
    let r = server.put(&a, json!({"location": "local", "properties": {"peerId": a}})).await;
    assert_eq!(r.status(), 400);
}

/// ARM's two kinds of resource: a top-level type is tracked (a location on every PUT), a
/// child type a proxy (no location: one sent is ignored like `id` or `type`, none shown, and
/// the provider's registration lists no locations for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_type_is_a_proxy_resource_without_a_location() {
    let server = TestServer::start().await;
    let vnet = rid("virtualNetworks", "v1");
    let r = server.put(&vnet, json!({"properties": {"addressSpace": "10.0.0.0/16"}})).await;
    assert_eq!(r.status(), 400, "a tracked resource needs its location");
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "LocationRequired");
    let r = server.put(&vnet, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    assert_eq!(r.status(), 201);
    assert_eq!(r.json::<Value>().await.unwrap()["location"], "local");

    for (name, body) in [
        ("s1", json!({"tags": {"team": "net"}, "properties": {"prefix": "10.0.1.0/24"}})),
        ("s2", json!({"location": "elsewhere", "properties": {"prefix": "10.0.2.0/24"}})),
    ] {
        let subnet = format!("{vnet}/subnets/{name}");
        let r = server.put(&subnet, body.clone()).await;
        assert_eq!(r.status(), 201, "{body}");
        let created: Value = r.json().await.unwrap();
        assert!(created.get("location").is_none(), "a proxy resource shows no location: {created}");
        let (_, done) = server.wait_resource(&subnet, T, succeeded).await;
        assert!(done.get("location").is_none(), "{done}");
        assert_eq!(done["tags"], body.get("tags").cloned().unwrap_or(json!({})), "{done}");
    }

    let (code, provider) = server.get_json("/providers/Slipway.Example").await;
    assert_eq!(code, 200, "{provider}");
    let locations = |ty: &str| {
        provider["resourceTypes"].as_array().unwrap().iter().find(|t| t["resourceType"] == ty).unwrap()["locations"]
            .clone()
    };
    assert_eq!(locations("virtualNetworks"), json!(["local"]), "{provider}");
    assert_eq!(locations("virtualNetworks/subnets"), json!([]), "{provider}");
}
