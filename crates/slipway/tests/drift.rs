//! Drift detection over HTTP with the example playbooks and the real `ansible-runner`
//! (docs/osac-lifecycle.md#drift-detection): a state file changed behind Slipway's back shows
//! as `Drifted` with its diff within an interval or so, in the event feed and the metrics; a
//! check on request; and a type that puts drift right restores the file.

use std::time::Duration;

use crate::common::{SUB, TestServer, header, rid};
use serde_json::{Value, json};
use slipway_test_support::eventually;

const WAIT: Duration = Duration::from_secs(90);

fn state_path(s: &TestServer, name: &str) -> std::path::PathBuf {
    s.dir.path().join(format!("state/slipway.example_virtualnetworks/{name}.json"))
}

async fn created(s: &TestServer, id: &str) {
    let r = s.put(id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    let done = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
}

/// The resource once its `properties.drift` satisfies `f`.
async fn drift_when(s: &TestServer, id: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    eventually(what, WAIT, async || {
        let (_, body) = s.get_json(id).await;
        if f(&body["properties"]["drift"]) { Ok(body) } else { Err(body["properties"]["drift"].to_string()) }
    })
    .await
}

/// Writes what the playbook recorded with its address space changed, as someone outside
/// Slipway would.
fn tamper(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).expect("the recorded state");
    assert!(text.contains("10.0.0.0/16"), "{text}");
    std::fs::write(path, text.replace("10.0.0.0/16", "10.66.0.0/16")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_behind_slipways_back_is_found_and_reported() {
    let mut s = TestServer::start_with("drift_check_interval_seconds = 2").await;
    let id = rid("virtualNetworks", "vnet1");
    created(&s, &id).await;
    let synced = drift_when(&s, &id, "a first check in sync", |d| d["state"] == "InSync").await;
    assert_eq!(synced["properties"]["provisioningState"], "Succeeded");

    tamper(&state_path(&s, "vnet1"));
    let found = drift_when(&s, &id, "the drift found", |d| d["state"] == "Drifted").await;
    let task = &found["properties"]["drift"]["changedTasks"][0];
    assert_eq!(task["task"], "Record the resource", "{found}");
    let diff = &task["diff"][0];
    assert!(diff["before"].as_str().unwrap().contains("10.66.0.0/16"), "what is there now: {diff}");
    assert!(diff["after"].as_str().unwrap().contains("10.0.0.0/16"), "what the spec says: {diff}");
    assert_eq!(found["properties"]["provisioningState"], "Succeeded", "drift is not a state");
    let text = std::fs::read_to_string(state_path(&s, "vnet1")).unwrap();
    assert!(text.contains("10.66.0.0/16"), "report only: the file stays as it was changed");

    let (_, feed) = s.get_json(&format!("/subscriptions/{SUB}/providers/Slipway.Resources/events")).await;
    let kinds: Vec<&str> = feed["value"].as_array().unwrap().iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"driftDetected"), "{kinds:?}");
    let metrics = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    let drifted = "slipway_drift_checks_total{type=\"slipway.example/virtualnetworks\",result=\"Drifted\"}";
    assert!(metrics.contains(drifted), "{drifted} in the metrics");
    let (_, jobs) = s.get_json(&format!("{id}/jobs")).await;
    assert!(jobs["value"].as_array().unwrap().iter().any(|j| j["type"] == "check"), "{jobs}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_on_request_and_drift_put_right() {
    // No schedule: a check runs when asked.
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "vnet1");
    created(&s, &id).await;
    tamper(&state_path(&s, "vnet1"));
    let r = s.http.post(s.url(&format!("{id}/checkDrift"))).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let done = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    assert_eq!(done["properties"]["changes"][0]["automation"]["changedTasks"][0]["task"], "Record the resource");
    let (_, res) = s.get_json(&id).await;
    assert_eq!(res["properties"]["drift"]["state"], "Drifted", "{res}");
    let (_, res) = s.get_json(&rid("virtualNetworks", "none")).await;
    assert_eq!(res["error"]["code"], "ResourceNotFound");
    s.stop().await;

    // A type that puts drift right: the spec runs again and the file is as Slipway wrote it.
    let mut s = TestServer::start_with("drift_check_interval_seconds = 2\ndrift_remediation = \"auto\"").await;
    created(&s, &id).await;
    let written = std::fs::read_to_string(state_path(&s, "vnet1")).unwrap();
    drift_when(&s, &id, "a first check", |d| d["state"] == "InSync").await;
    tamper(&state_path(&s, "vnet1"));
    let path = state_path(&s, "vnet1");
    let text = eventually("the file put right", WAIT, async || {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.contains("10.66.0.0/16") || text.is_empty() { Err(text) } else { Ok(text) }
    })
    .await;
    assert_eq!(text.len(), written.len(), "as the create wrote it: {text}");
    let fixed = drift_when(&s, &id, "checked again, in sync", |d| d["state"] == "InSync").await;
    assert_eq!(fixed["properties"]["provisioningState"], "Succeeded");
    let (_, jobs) = s.get_json(&format!("{id}/jobs")).await;
    let remediation = jobs["value"].as_array().unwrap().iter().find(|j| j["rerun"] == "drift");
    assert!(remediation.is_some_and(|j| j["type"] == "provision"), "the history says why it ran: {jobs}");
    s.stop().await;
}

/// Resources provisioned before their type had a drift interval are checked once it has one:
/// the engine puts them in the drift lane when it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_from_before_the_interval_are_checked_after_a_restart() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "vnet1");
    created(&s, &id).await;
    tamper(&state_path(&s, "vnet1"));
    s.stop().await;
    let text = std::fs::read_to_string(s.dir.path().join("slipway.toml")).unwrap();
    let text =
        text.replace("poll_interval_seconds = 0.2", "poll_interval_seconds = 0.2\ndrift_check_interval_seconds = 3600");
    let mut s = TestServer::start_text(s.dir, &text).await;
    let found = drift_when(&s, &id, "the old resource checked", |d| d["state"] == "Drifted").await;
    assert_eq!(found["properties"]["drift"]["changedTasks"][0]["task"], "Record the resource");
    s.stop().await;
}
