//! `GET {id}/jobs` with the example playbooks: every job of the resource, and for a Failed
//! resource how often its spec failed and when it is retried
//! (docs/arm-contract.md#job-history).

use std::time::Duration;

use crate::common::{TestServer, header, rid};
use serde_json::{Value, json};
use slipway_test_support::eventually;

const WAIT: Duration = Duration::from_secs(60);

async fn jobs(s: &TestServer, id: &str) -> Value {
    let (code, body) = s.get_json(&format!("{id}/jobs")).await;
    assert_eq!(code, 200, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_history_says_what_ran_and_why_a_resource_is_failed() {
    let mut s = TestServer::start_with("backoff_base_seconds = 600\nbackoff_max_seconds = 600").await;
    let id = rid("virtualNetworks", "hist1");
    let r = s.put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    let create = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    assert_eq!(create["status"], "Succeeded");
    let body = jobs(&s, &id).await;
    let first = &body["value"][0];
    assert_eq!((first["type"].as_str(), first["state"].as_str()), (Some("provision"), Some("Succeeded")), "{body}");
    assert_eq!(first["operationId"], create["name"]);
    assert_eq!(first["provider"], "ansible");
    assert_eq!(first["template"], "slipway-create-virtual-network.yml");
    assert!(first["jobId"].as_str().is_some_and(|j| !j.is_empty()), "{first}");
    assert!(first["endTime"].as_str().unwrap() >= first["startTime"].as_str().unwrap(), "{first}");
    assert!(body.get("failedAttempts").is_none(), "only a Failed resource says how it failed");

    // A failing update: the newest job first, its failure, the attempts and the next retry.
    let failing = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "simulateFailure": true}});
    let r = s.put(&id, failing).await;
    let update = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    assert_eq!(update["status"], "Failed");
    let body = jobs(&s, &id).await;
    assert_eq!(body["provisioningState"], "Failed");
    let newest = &body["value"][0];
    assert_eq!(newest["state"], "Failed", "{body}");
    assert_eq!(newest["operationId"], update["name"]);
    assert!(newest["errorDetails"].as_str().unwrap().contains("simulated failure"), "{newest}");
    assert_eq!(body["failedAttempts"], 1, "{body}");
    let next = body["nextRetryTime"].as_str().unwrap_or_else(|| panic!("a retry is scheduled: {body}"));
    assert!(next > newest["endTime"].as_str().unwrap(), "the retry comes after the failure: {body}");
    assert_eq!(body["value"].as_array().unwrap().len(), 2);

    // A delete whose job fails: the resource stays Deleting, and says so like a Failed one.
    let doomed = rid("virtualNetworks", "hist2");
    let body =
        json!({"location": "local", "properties": {"addressSpace": "10.1.0.0/16", "simulateDeleteFailure": true}});
    let r = s.put(&doomed, body).await;
    assert_eq!(s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await["status"], "Succeeded");
    let r = s.http.delete(s.url(&doomed)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let body = eventually("the delete job to fail", WAIT, async || {
        let body = jobs(&s, &doomed).await;
        if body["failedAttempts"] == 1 { Ok(body) } else { Err(body.to_string()) }
    })
    .await;
    assert_eq!(body["provisioningState"], "Deleting");
    assert_eq!(
        (body["value"][0]["type"].as_str(), body["value"][0]["state"].as_str()),
        (Some("deprovision"), Some("Failed"))
    );
    let next = body["nextRetryTime"].as_str().unwrap_or_else(|| panic!("a retry of the delete is scheduled: {body}"));
    assert!(next > body["value"][0]["endTime"].as_str().unwrap(), "{body}");

    // Not for a resource that does not exist; read permission like the resource's.
    let (code, e) = s.get_json(&format!("{}/jobs", rid("virtualNetworks", "nope"))).await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("ResourceNotFound")));
    let post = s.http.post(s.url(&format!("{id}/jobs"))).send().await.unwrap();
    assert_eq!(post.status(), 405);
    s.stop().await;
}
