//! Resources that compose, black-box over HTTP with the example types and real playbooks:
//! outputs reported by the automation (`set_stats` `slipway_outputs`) shown as read-only
//! properties.

mod common;

use std::time::Duration;

use common::{TestServer, header, rid};
use serde_json::{Value, json};

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
