//! `POST {id}/whatIf` over HTTP with the example playbooks and the real `ansible-runner`
//! (docs/arm-contract.md#what-if): the proposal is checked as its PUT would be, the type's
//! job runs in check mode, and the answer lists what the spec and the automation would
//! change — while nothing changes.

use std::time::Duration;

use crate::common::{TestServer, header, rid};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

async fn what_if(s: &TestServer, id: &str, query: &str, body: Option<Value>) -> reqwest::Response {
    let req = s.http.post(s.url(&format!("{id}/whatIf")).replace("?api-version", &format!("?{query}api-version")));
    let req = match body {
        Some(b) => req.json(&b),
        None => req,
    };
    req.send().await.expect("POST whatIf")
}

fn state_file(s: &TestServer, name: &str) -> Option<String> {
    std::fs::read_to_string(s.dir.path().join(format!("state/slipway.example_virtualnetworks/{name}.json"))).ok()
}

async fn created(s: &TestServer, id: &str, properties: Value) {
    let r = s.put(id, json!({"location": "local", "properties": properties})).await;
    assert!(r.status().is_success(), "PUT {id}: {}", r.status());
    let done = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
}

fn tasks(change: &Value) -> Vec<&str> {
    change["automation"]["changedTasks"].as_array().unwrap().iter().map(|t| t["task"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_what_if_predicts_the_change_and_makes_none() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "vnet1");
    created(&s, &id, json!({"addressSpace": "10.0.0.0/16"})).await;
    let (_, before) = s.get_json(&id).await;
    let file_before = state_file(&s, "vnet1").expect("the create recorded the network");

    let proposal = json!({"location": "local", "tags": {"env": "prod"}, "properties": {"addressSpace": "10.1.0.0/16"}});
    let r = what_if(&s, &id, "", Some(proposal.clone())).await;
    assert_eq!(r.status(), 202);
    let status = header(&r, "azure-asyncoperation").expect("Azure-AsyncOperation");
    let location = header(&r, "location").expect("Location");
    // While it runs, it is the resource's operation: a PUT waits for it.
    let busy = s.put(&id, proposal.clone()).await;
    assert_eq!(busy.status(), 409);
    let e: Value = busy.json().await.unwrap();
    assert!(e["error"]["message"].as_str().unwrap().contains("a what-if is in progress"), "{e}");

    let done = s.wait_terminal(&status, WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    let (code, result) = s.follow(&location).await;
    assert_eq!(code, 200, "the Location answers with the what-if's result: {result}");
    assert_eq!(result["status"], "Succeeded");
    let change = &result["properties"]["changes"][0];
    assert_eq!(done["properties"]["changes"][0], *change, "the status carries the same changes");
    assert_eq!(change["resourceId"], id);
    assert_eq!(change["changeType"], "Modify");
    assert_eq!(change["before"]["properties"]["addressSpace"], "10.0.0.0/16");
    assert_eq!(change["after"]["properties"]["addressSpace"], "10.1.0.0/16");
    let delta: Vec<(&str, &str)> = change["delta"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["path"].as_str().unwrap(), d["propertyChangeType"].as_str().unwrap()))
        .collect();
    assert_eq!(delta, [("properties.addressSpace", "Modify"), ("tags.env", "Create")]);
    assert_eq!(change["automation"]["job"], "create");
    assert_eq!(tasks(change), ["Record the resource"], "{change}");
    let diff = &change["automation"]["changedTasks"][0]["diff"][0];
    assert!(diff["before"].as_str().unwrap().contains("10.0.0.0/16"), "{diff}");
    assert!(diff["after"].as_str().unwrap().contains("10.1.0.0/16"), "{diff}");

    // Nothing changed: not the resource, not the file the playbook writes.
    let (_, after) = s.get_json(&id).await;
    assert_eq!(after, before, "the resource is as it was");
    assert_eq!(state_file(&s, "vnet1").as_deref(), Some(file_before.as_str()), "the state file is as it was");
    let (_, jobs) = s.get_json(&format!("{id}/jobs")).await;
    assert_eq!(jobs["value"][0]["type"], "check", "the history says a check ran: {jobs}");

    // A delete's what-if: the file would go; it stays, and so does the resource.
    let r = what_if(&s, &id, "operation=delete&", None).await;
    assert_eq!(r.status(), 202);
    let done = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    let change = &done["properties"]["changes"][0];
    assert_eq!(change["changeType"], "Delete", "{done}");
    assert_eq!(change.get("after"), None);
    assert_eq!(tasks(change), ["Remove the recorded resource"]);
    assert_eq!(state_file(&s, "vnet1").as_deref(), Some(file_before.as_str()));
    assert_eq!(s.get(&id).await.status(), 200);

    // The resource's own spec, proposed again: the spec would not change, nor would the file.
    let same = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}});
    let r = what_if(&s, &id, "", Some(same)).await;
    let done = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    let change = &done["properties"]["changes"][0];
    assert_eq!((change["changeType"].as_str(), change["delta"].as_array().map(Vec::len)), (Some("NoChange"), Some(0)));
    assert!(tasks(change).is_empty(), "in sync: {change}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_what_if_is_admitted_as_its_put_would_be() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "new1");
    // Nothing there yet: the Slipway-level create, at once.
    let r =
        what_if(&s, &id, "", Some(json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}}))).await;
    assert_eq!(r.status(), 200);
    let result: Value = r.json().await.unwrap();
    let change = &result["properties"]["changes"][0];
    assert_eq!(change["changeType"], "Create", "{result}");
    assert!(change["automation"]["unsupportedReason"].is_string(), "{change}");
    assert_eq!(s.get(&id).await.status(), 404, "nothing was created");

    // The body is checked as a PUT's: schema, location, then the query.
    let bad = what_if(&s, &id, "", Some(json!({"location": "local", "properties": {"addressSpace": "nope"}}))).await;
    assert_eq!(bad.status(), 400);
    let put = s.put(&id, json!({"location": "local", "properties": {"addressSpace": "nope"}})).await;
    let (bad, put): (Value, Value) = (bad.json().await.unwrap(), put.json().await.unwrap());
    assert_eq!(bad["error"]["code"], put["error"]["code"], "{bad} vs {put}");
    let nowhere = what_if(&s, &id, "", Some(json!({"properties": {"addressSpace": "10.0.0.0/16"}}))).await;
    assert_eq!(nowhere.status(), 400);
    let odd = what_if(&s, &id, "operation=patch&", Some(json!({}))).await;
    assert_eq!(odd.status(), 400);
    let e: Value = odd.json().await.unwrap();
    assert_eq!(e["error"]["target"], "operation");
    assert_eq!(what_if(&s, &id, "operation=delete&", None).await.status(), 404, "nothing to delete");
    s.stop().await;

    let mut off = TestServer::start_with("what_if = false").await;
    let r =
        what_if(&off, &id, "", Some(json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}}))).await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "WhatIfNotSupported", "{e}");
    off.stop().await;
}
