//! A forced delete over HTTP with the example playbooks: the way out of a delete that keeps
//! failing (docs/arm-contract.md#forced-delete). Only the platform Admin may ask
//! (`tenancy.rs` checks every role is refused).

use std::time::Duration;

use crate::common::{TestServer, header, rid};
use serde_json::{Value, json};
use slipway_test_support::eventually;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_that_keeps_failing_shows_why_and_can_be_forced() {
    let mut s = TestServer::start_with("backoff_base_seconds = 600\nbackoff_max_seconds = 600").await;
    let id = rid("virtualNetworks", "stuck");
    let body =
        json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "simulateDeleteFailure": true}});
    let r = s.put(&id, body).await;
    assert_eq!(s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await["status"], "Succeeded");

    let r = s.http.delete(s.url(&id)).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let delete = header(&r, "azure-asyncoperation").unwrap();
    // Retried with backoff: the operation stays Deleting and says why.
    let retrying = eventually("an error shown while retrying", WAIT, async || {
        let (_, op) = s.follow(&delete).await;
        if op["error"].is_object() { Ok(op) } else { Err(op.to_string()) }
    })
    .await;
    assert_eq!(retrying["status"], "Deleting", "{retrying}");
    assert_eq!(retrying["error"]["code"], "DeprovisioningFailed");
    assert!(retrying["error"]["message"].as_str().unwrap().contains("simulated delete failure"), "{retrying}");

    let bad = s.http.delete(format!("{}&force=maybe", s.url(&id))).send().await.unwrap();
    assert_eq!(bad.status(), 400);
    let forced = s.http.delete(format!("{}&force=true", s.url(&id))).send().await.unwrap();
    assert_eq!(forced.status(), 202);
    assert_eq!(header(&forced, "azure-asyncoperation").as_deref(), Some(delete.as_str()), "the running delete, forced");
    let done = s.wait_terminal(&delete, WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    assert!(done["properties"]["message"].as_str().unwrap().contains("may remain (orphaned)"), "{done}");
    assert!(done.get("error").is_none(), "a Succeeded operation carries no error: {done}");
    let (code, _): (u16, Value) = s.get_json(&id).await;
    assert_eq!(code, 404);
    let jobs = std::fs::read_to_string(s.dir.path().join("state/launches.log")).unwrap();
    assert_eq!(jobs.lines().count(), 2, "the create and one failed delete job; no delete job after the force");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_cancel_ends_the_operation_at_once_and_kills_the_job() {
    let mut s = TestServer::start().await;
    let id = rid("computeInstances", "slow");
    let body = json!({"location": "local", "properties": {"size": "small", "image": "x", "delaySeconds": 300}});
    let r = s.put(&id, body).await;
    let op = header(&r, "azure-asyncoperation").unwrap();
    eventually("the job started", WAIT, async || s.follow(&op).await.1["status"] == "Provisioning").await;
    let cancel = op.replace("?api-version", "/cancel?api-version") + "&force=true";
    let r = s.http.post(&cancel).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["status"], "Canceled", "ended at once: {answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("forced"), "{answer}");
    // The job is killed, not left to its five minutes.
    let (_, history) = s.wait_resource(&format!("{id}/jobs"), WAIT, |_, b| b["value"][0]["state"] == "Canceled").await;
    assert_eq!(history["value"][0]["type"], "provision", "{history}");
    let (_, res) = s.get_json(&id).await;
    assert_eq!(res["properties"]["provisioningState"], "Canceled");
    s.stop().await;
}
