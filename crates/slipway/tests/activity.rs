//! The activity log end to end (docs/governance.md#the-activity-log): a create, an update,
//! a refused write and a lock's refusal recorded with who asked, through what client, the
//! answer, the operation started and the spec's changed properties; served in the Activity
//! Log's shape with its `$filter` and paging; read by Azure's own `azure-mgmt-monitor`.

use std::time::Duration;

use serde_json::{Value, json};
use slipway_test_support::eventually;

use crate::common::{SUB, TestServer, header, python_tools, repo, rid};

const LOG_VERSION: &str = "api-version=2015-04-01";
const T: Duration = Duration::from_secs(90);

fn log_path() -> String {
    format!("/subscriptions/{SUB}/providers/Microsoft.Insights/eventtypes/management/values")
}

async fn read_log(s: &TestServer, filter: &str) -> (u16, Value) {
    let path = format!("{}?$filter={}", log_path(), urlencoding(filter));
    s.call_at("GET", &path, LOG_VERSION, None).await
}

fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn entries(log: &Value) -> Vec<Value> {
    log["value"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activity_log_records_who_changed_what_and_what_was_refused() {
    let mut s = TestServer::start().await;
    let net = rid("virtualNetworks", "net1");
    let body = json!({"location": "westeurope", "properties": {"addressSpace": "10.0.0.0/16"}});
    let r = s
        .http
        .put(s.url(&net))
        .header("x-ms-correlation-request-id", "corr-create")
        .header("user-agent", "activity-test/1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let status_url = header(&r, "azure-asyncoperation").expect("an operation");
    s.wait_terminal(&status_url, T).await;
    let operation_id = status_url.split('?').next().unwrap().rsplit('/').next().unwrap().to_string();
    let update =
        json!({"location": "westeurope", "tags": {"env": "prod"}, "properties": {"addressSpace": "10.1.0.0/16"}});
    assert_eq!(s.write("PUT", &net, Some(update)).await.0, 200);
    let bad = json!({"location": "westeurope", "properties": {"addressSpace": 5}});
    assert_eq!(s.write("PUT", &net, Some(bad)).await.0, 400);
    let lock = format!("/subscriptions/{SUB}/resourceGroups/rg1/providers/Microsoft.Authorization/locks/keep");
    let level = json!({"properties": {"level": "CanNotDelete"}});
    assert_eq!(s.call_at("PUT", &lock, "api-version=2020-05-01", Some(level)).await.0, 201);
    assert_eq!(s.write("DELETE", &net, None).await.0, 409);

    // Refusals are written after their answers: wait for the two.
    let log = eventually("the refusals to be recorded", Duration::from_secs(10), async || {
        let (code, log) = read_log(&s, "status eq 'Failed'").await;
        assert_eq!(code, 200, "{log}");
        if entries(&log).len() == 2 { Ok(log) } else { Err(log.to_string()) }
    })
    .await;
    let failed = entries(&log);
    assert_eq!(failed[0]["operationName"]["value"], "Slipway.Example/virtualNetworks/delete", "newest first");
    assert!(failed[0]["properties"]["statusMessage"].as_str().unwrap().contains("ScopeLocked"), "{}", failed[0]);
    assert_eq!(
        (failed[1]["subStatus"]["value"].as_str(), failed[1]["level"].as_str()),
        (Some("BadRequest"), Some("Error"))
    );

    let (code, log) = read_log(&s, "").await;
    assert_eq!(code, 200, "{log}");
    let all = entries(&log);
    let names: Vec<(&str, &str)> = all
        .iter()
        .map(|e| (e["operationName"]["value"].as_str().unwrap(), e["subStatus"]["value"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("Slipway.Example/virtualNetworks/delete", "Conflict"),
            ("Microsoft.Authorization/locks/write", "Created"),
            ("Slipway.Example/virtualNetworks/write", "BadRequest"),
            ("Slipway.Example/virtualNetworks/write", "OK"),
            ("Slipway.Example/virtualNetworks/write", "Created"),
        ]
    );
    let created = &all[4];
    assert_eq!(created["correlationId"], "corr-create");
    assert_eq!(created["properties"]["userAgent"], "activity-test/1.0");
    assert_eq!(
        (created["status"]["value"].as_str(), created["operationId"].as_str()),
        (Some("Accepted"), Some(operation_id.as_str()))
    );
    assert_eq!(
        (created["httpRequest"]["method"].as_str(), created["httpRequest"]["clientIpAddress"].as_str()),
        (Some("PUT"), Some("127.0.0.1"))
    );
    assert_eq!(created["resourceId"], net);
    assert_eq!(created["resourceGroupName"], "rg1");
    let changes = &all[3]["propertyChanges"];
    assert_eq!(
        changes,
        &json!([
            {"propertyName": "properties.addressSpace", "propertyChangeType": "Update", "beforeValue": "10.0.0.0/16", "afterValue": "10.1.0.0/16"},
            {"propertyName": "tags.env", "propertyChangeType": "Insert", "beforeValue": null, "afterValue": "prod"},
        ])
    );

    // Filters and paging.
    assert_eq!(entries(&read_log(&s, "correlationId eq 'corr-create'").await.1).len(), 1);
    assert_eq!(entries(&read_log(&s, &format!("resourceUri eq '{net}'")).await.1).len(), 4);
    assert_eq!(entries(&read_log(&s, "resourceGroupName eq 'other'").await.1).len(), 0);
    let (code, refused) = read_log(&s, "level eq 'Error'").await;
    assert_eq!((code, refused["error"]["code"].as_str()), (400, Some("InvalidFilter")), "{refused}");
    let (code, page) = s.call_at("GET", &log_path(), &format!("{LOG_VERSION}&$top=3"), None).await;
    assert_eq!((code, entries(&page).len()), (200, 3), "{page}");
    let (_, rest) = s.follow(page["nextLink"].as_str().expect("a next page")).await;
    assert_eq!(entries(&rest).len(), 2, "{rest}");
    assert!(rest.get("nextLink").is_none());

    // Azure's own Activity Log client reads it unchanged.
    let out = tokio::process::Command::new(python_tools().join("bin/python"))
        .arg(repo().join("tests/python/activity_sdk.py"))
        .args([&s.base, SUB, "corr-create"])
        .output()
        .await
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    s.stop().await;
}
