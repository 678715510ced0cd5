//! POST actions, retry now and preflight checks over HTTP with the example playbooks
//! (docs/arm-contract.md#actions, docs/arm-contract.md#retry-now,
//! docs/arm-contract.md#preflight-checks).

use std::time::Duration;

use crate::common::{TestServer, composite_types, header, rid};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

async fn server() -> TestServer {
    TestServer::start_full("", "", &composite_types(), |_| {}).await
}

/// `POST {id}/{action}` with `body` (none when `None`).
async fn post(s: &TestServer, id: &str, action: &str, body: Option<Value>) -> reqwest::Response {
    let req = s.http.post(s.url(&format!("{id}/{action}")));
    let req = match body {
        Some(b) => req.json(&b),
        None => req,
    };
    req.send().await.expect("POST")
}

async fn create(s: &TestServer, id: &str, properties: Value) -> Value {
    let r = s.put(id, json!({"location": "local", "properties": properties})).await;
    assert!(r.status().is_success(), "PUT {id}: {}", r.status());
    let status = header(&r, "azure-asyncoperation").expect("async header");
    s.wait_terminal(&status, WAIT).await
}

/// What the example action playbooks logged (one JSON line per action job).
fn actions_log(s: &TestServer) -> Vec<Value> {
    let text = std::fs::read_to_string(s.dir.path().join("state/actions.log")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_runs_as_its_own_operation_and_reports_outputs() {
    let mut s = server().await;
    let vm = rid("machines", "vm1");
    let op = create(&s, &vm, json!({"size": "small", "image": "debian"})).await;
    assert_eq!(op["status"], "Succeeded", "{op}");
    let (_, before) = s.get_json(&vm).await;
    assert_eq!(before["properties"]["powerState"], "Running");

    let r = post(&s, &vm, "restart", Some(json!({"force": true}))).await;
    assert_eq!(r.status(), 202);
    let status = header(&r, "azure-asyncoperation").expect("Azure-AsyncOperation");
    let location = header(&r, "location").expect("Location");
    assert_eq!(r.text().await.unwrap(), "", "no body");
    // One operation at a time: a second action, or a PUT, waits for this one.
    let busy = post(&s, &vm, "stop", None).await;
    assert_eq!(busy.status(), 409);
    let e: Value = busy.json().await.unwrap();
    assert_eq!(e["error"]["code"], "Conflict");
    assert!(e["error"]["message"].as_str().unwrap().contains("the action 'restart' is in progress"), "{e}");
    let (_, during) = s.get_json(&vm).await;
    assert_eq!(during["properties"]["provisioningState"], "Succeeded", "an action leaves the state alone");
    let done = s.wait_terminal(&status, WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    assert_eq!(done["properties"]["action"], "restart");
    let (code, result) = s.follow(&location).await;
    assert_eq!(code, 200, "the Location answers with the resource");
    assert_eq!(result["properties"]["size"], "small");

    // stop reports Stopped; the spec is untouched, outputs merge.
    let r = post(&s, &vm, "stop", None).await;
    assert_eq!(r.status(), 202);
    let done = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    let (_, after) = s.get_json(&vm).await;
    assert_eq!(after["properties"]["powerState"], "Stopped");
    assert_eq!(after["properties"]["ipAddress"], before["properties"]["ipAddress"], "outputs merge");
    assert_eq!(after["properties"]["size"], "small");

    let log = actions_log(&s);
    let calls: Vec<(&str, &Value)> = log.iter().map(|l| (l["action"].as_str().unwrap(), &l["parameters"])).collect();
    assert_eq!(calls, [("restart", &json!({"force": true})), ("stop", &json!({}))], "each action ran once");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_action_requests_get_precise_errors() {
    let mut s = server().await;
    let vm = rid("machines", "vm2");
    let absent = post(&s, &vm, "restart", None).await;
    assert_eq!(absent.status(), 404);
    assert_eq!(absent.json::<Value>().await.unwrap()["error"]["code"], "ResourceNotFound");
    create(&s, &vm, json!({"size": "small", "image": "debian"})).await;
    let unknown = post(&s, &vm, "explode", None).await;
    assert_eq!(unknown.status(), 404);
    let e: Value = unknown.json().await.unwrap();
    assert_eq!(e["error"]["code"], "ActionNotFound", "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("has no action 'explode'; its actions: restart, start, stop"),
        "{e}"
    );
    let invalid = post(&s, &vm, "restart", Some(json!({"force": "yes"}))).await;
    assert_eq!(invalid.status(), 400);
    let e: Value = invalid.json().await.unwrap();
    assert_eq!(
        (e["error"]["code"].as_str(), e["error"]["target"].as_str()),
        (Some("InvalidRequestContent"), Some("force"))
    );
    let not_object = post(&s, &vm, "restart", Some(json!([1]))).await;
    assert_eq!(not_object.status(), 400);
    let wrong_method = s.http.put(s.url(&format!("{vm}/restart"))).json(&json!({})).send().await.unwrap();
    assert_eq!(wrong_method.status(), 404, "PUT there names a resource type that does not exist");
    assert!(actions_log(&s).is_empty(), "nothing ran");
    s.stop().await;
}

/// A create that failed for a cause outside Slipway (a file where its state directory goes)
/// is retried at once when asked, though convergence would wait an hour, and succeeds now that
/// the cause is gone; the history says why the job ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resource_is_retried_now_and_the_history_says_why() {
    let mut s = TestServer::start_with("backoff_base_seconds = 3600\nbackoff_max_seconds = 3600").await;
    let id = rid("virtualNetworks", "again");
    let absent = post(&s, &id, "retry", None).await;
    assert_eq!(absent.status(), 404);
    let blocker = s.dir.path().join("state/slipway.example_virtualnetworks");
    std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
    std::fs::write(&blocker, "in the way").unwrap();
    let failed = create(&s, &id, json!({"addressSpace": "10.0.0.0/16"})).await;
    assert_eq!(failed["status"], "Failed", "{failed}");
    let with_parameters = post(&s, &id, "retry", Some(json!({"now": true}))).await;
    assert_eq!(with_parameters.status(), 400);
    assert_eq!(with_parameters.json::<Value>().await.unwrap()["error"]["code"], "InvalidRequestContent");

    std::fs::remove_file(&blocker).unwrap();
    let r = post(&s, &id, "RETRY", Some(json!({}))).await;
    assert_eq!(r.status(), 202);
    let busy = post(&s, &id, "retry", None).await;
    assert_eq!(busy.status(), 409, "one operation at a time");
    let op = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    assert_eq!((op["status"].as_str(), op["properties"]["rerun"].as_str()), (Some("Succeeded"), Some("retry")), "{op}");
    let (_, res) = s.get_json(&id).await;
    assert_eq!(res["properties"]["provisioningState"], "Succeeded");
    assert!(s.dir.path().join("state/slipway.example_virtualnetworks/again.json").exists(), "the retry's job ran");
    let (_, history) = s.get_json(&format!("{id}/jobs")).await;
    let jobs = history["value"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{history}");
    assert_eq!((jobs[0]["state"].as_str(), jobs[0]["rerun"].as_str()), (Some("Succeeded"), Some("retry")));
    assert_eq!(jobs[0]["operationId"], op["name"]);
    assert_eq!((jobs[1]["state"].as_str(), jobs[1].get("rerun")), (Some("Failed"), None));

    let again = post(&s, &id, "retry", None).await;
    assert_eq!(again.status(), 409);
    let e: Value = again.json().await.unwrap();
    assert_eq!(
        e["error"]["message"], "The resource is Succeeded: only a Failed or Canceled resource can be retried",
        "{e}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_preflight_checks_fail_the_create_each_in_its_details() {
    let mut s = server().await;
    let cluster = rid("clusters", "c-bad");
    let op = create(&s, &cluster, json!({"version": "4.99", "simulateCapacityShortage": true})).await;
    assert_eq!(op["status"], "Failed", "{op}");
    let error = &op["error"];
    assert_eq!(error["code"], "PreflightValidationFailed");
    let details = error["details"].as_array().unwrap();
    let targets: Vec<&str> = details.iter().map(|d| d["target"].as_str().unwrap()).collect();
    assert_eq!(targets, ["version", "capacity"], "{error}");
    assert!(details.iter().all(|d| d["code"] == "PreflightCheckFailed"), "{error}");
    assert!(error["message"].as_str().unwrap().contains("[version] version 4.99 is not supported"), "{error}");
    let (_, res) = s.get_json(&cluster).await;
    assert_eq!(res["properties"]["provisioningState"], "Failed");
    assert!(res["properties"].get("apiUrl").is_none(), "the create job never ran");

    // Fixed, the same cluster passes its checks and provisions.
    let op = create(&s, &cluster, json!({"version": "4.18"})).await;
    assert_eq!(op["status"], "Succeeded", "{op}");
    let (_, res) = s.get_json(&cluster).await;
    assert_eq!(res["properties"]["currentVersion"], "4.18");
    s.stop().await;
}
