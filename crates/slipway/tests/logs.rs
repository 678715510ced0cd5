//! Logs people can use, read from the real binary's output with `log_format = "json"`: an
//! access line per request, one line per operation status change and per job end with its
//! failure, resource and operation as fields (a provider's own lines too, through the effect
//! span), times as timestamps.

use std::time::Duration;

use crate::common::{API, config_text, free_port, header, rid, spawn_slipway, with_server_settings};
use serde_json::{Value, json};
use slipway_test_support::{eventually, ready_within};

const T: Duration = Duration::from_secs(60);

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_say_who_asked_what_changed_and_why_a_job_failed() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let text = config_text(dir.path(), "retry_failures = false")
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""));
    let config = dir.path().join("slipway.toml");
    std::fs::write(&config, with_server_settings(&text, "log_format = \"json\"")).unwrap();
    let log = dir.path().join("slipway.log");
    let mut child = spawn_slipway(&config, &log, "info");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let ready = ready_within(&http, &base, T).await;
    ready.unwrap_or_else(|e| panic!("not ready ({e}): {}", std::fs::read_to_string(&log).unwrap_or_default()));
    let id = rid("virtualNetworks", "logged");
    let body = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "simulateFailure": true}});
    let r = http.put(format!("{base}{id}?api-version={API}")).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    let op_id = status_url.split('?').next().unwrap().rsplit('/').next().unwrap().to_string();
    eventually("the operation Failed", T, async || {
        let op: Value = http.get(&status_url).send().await.unwrap().json().await.unwrap();
        if op["status"] == "Failed" { Ok(()) } else { Err(op.to_string()) }
    })
    .await;
    // The failure's lines are written before the operation's status can be read.
    let logged = lines(&log);
    let _ = child.kill();
    let _ = child.wait();

    let access = logged
        .iter()
        .find(|l| l["target"] == "slipway::access" && l["method"] == "PUT")
        .unwrap_or_else(|| panic!("no access line for the PUT: {logged:?}"));
    assert_eq!(
        access["route"],
        "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Slipway.Example/virtualNetworks/{name}"
    );
    assert_eq!(access["status"], 201);
    assert!(access["duration_ms"].as_f64().is_some() && access["request_id"].as_str().is_some(), "{access}");
    assert_eq!(access["principal"], "local", "{access}");
    let ts = access["timestamp"].as_str().unwrap();
    assert!(ts.len() >= 20 && &ts[4..5] == "-" && ts.contains('T'), "a timestamp, not epoch numbers: {ts}");

    let changes: Vec<&Value> =
        logged.iter().filter(|l| l["message"] == "operation status changed" && l["operation"] == op_id).collect();
    let statuses: Vec<&str> = changes.iter().filter_map(|l| l["status"].as_str()).collect();
    assert_eq!(statuses, ["Provisioning", "Failed"], "{changes:?}");
    assert_eq!(changes[1]["level"], "INFO");
    assert!(changes[1]["resource"].as_str().unwrap().contains("/virtualnetworks/logged"), "{:?}", changes[1]);
    assert!(changes[1]["error"].as_str().unwrap().contains("simulated failure"), "{:?}", changes[1]);
    let ended = logged
        .iter()
        .find(|l| l["message"] == "job ended" && l["operation"] == op_id)
        .unwrap_or_else(|| panic!("no job line: {logged:?}"));
    assert_eq!(ended["state"], "Failed");
    assert!(ended["failure"].as_str().unwrap().contains("simulated failure"), "{ended}");
    assert!(ended["job"].as_str().is_some_and(|j| !j.is_empty()), "{ended}");
    // Every line a worker logs carries its resource (its span's field).
    let span = ended["span"]["resource"].as_str().unwrap_or_default();
    assert!(span.ends_with("/virtualNetworks/logged"), "{ended}");
    // And what a provider logs while performing an effect names the operation and job too.
    let launched = logged
        .iter()
        .find(|l| l["message"] == "launched ansible-runner")
        .unwrap_or_else(|| panic!("no launch line: {logged:?}"));
    assert_eq!(launched["span"]["name"], "effect", "{launched}");
    assert_eq!(launched["span"]["operation"], op_id.as_str(), "{launched}");
    assert!(launched["span"]["key"].as_str().is_some_and(|k| k.starts_with(&op_id)), "{launched}");
    assert!(launched["spans"][0]["resource"].as_str().unwrap_or_default().ends_with("/virtualNetworks/logged"));
}
