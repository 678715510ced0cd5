//! Black-box HTTP tests of the ARM contract against a real Slipway (SQLite, real
//! ansible-playbook runs of the example playbooks). The rules: docs/arm-contract.md.

mod common;

use std::time::Duration;

use common::{API, SUB, TestServer, header, rid};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

fn vnet(space: &str) -> Value {
    json!({"location": "local", "tags": {"env": "test"}, "properties": {"addressSpace": space}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_replace_replay_and_conflict() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "vnet1");

    let r = s.put(&id, vnet("10.0.0.0/16")).await;
    assert_eq!(r.status().as_u16(), 201);
    let status_url = header(&r, "azure-asyncoperation").expect("Azure-AsyncOperation");
    let result_url = header(&r, "location").expect("Location");
    assert_eq!(header(&r, "retry-after").as_deref(), Some("0"));
    assert!(header(&r, "x-ms-request-id").is_some());
    assert!(status_url.starts_with(&format!(
        "{}/subscriptions/{SUB}/providers/Slipway.Example/locations/local/operationStatuses/",
        s.base
    )));
    assert!(status_url.ends_with(&format!("?api-version={API}")));
    assert!(result_url.contains("/operationResults/"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["properties"]["provisioningState"], "Accepted");
    assert_eq!(body["properties"]["addressSpace"], "10.0.0.0/16");
    assert_eq!(body["type"], "Slipway.Example/virtualNetworks");
    assert_eq!(body["id"], id);
    assert!(body.get("status").is_none(), "no top-level status on resource bodies");

    // Same spec while in progress: the same operation's URLs.
    let again = s.put(&id, vnet("10.0.0.0/16")).await;
    assert_eq!(again.status().as_u16(), 201);
    assert_eq!(header(&again, "azure-asyncoperation").as_deref(), Some(status_url.as_str()));
    // Different spec while in progress: 409.
    let conflict = s.put(&id, vnet("10.1.0.0/16")).await;
    assert_eq!(conflict.status().as_u16(), 409);
    assert_eq!(header(&conflict, "x-ms-error-code").as_deref(), Some("Conflict"));
    let err: Value = conflict.json().await.unwrap();
    assert_eq!(err["error"]["code"], "Conflict");
    assert_eq!(err["error"]["target"], id);

    let done = s.wait_terminal(&status_url, T).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    assert!(done["endTime"].is_string());
    assert!(done.get("error").is_none());
    let (code, res) = s.get_json(&id).await;
    assert_eq!(code, 200);
    assert_eq!(res["properties"]["provisioningState"], "Succeeded");
    assert_eq!(res["tags"]["env"], "test");
    // The Location target gives the synchronous result.
    let (code, result) = s.follow(&result_url).await;
    assert_eq!(code, 200);
    assert_eq!(result["properties"]["provisioningState"], "Succeeded");

    // Same spec again once Succeeded: synchronous 200, no async headers.
    let same = s.put(&id, vnet("10.0.0.0/16")).await;
    assert_eq!(same.status().as_u16(), 200);
    assert!(header(&same, "azure-asyncoperation").is_none());

    // Replace with a new spec: 200 + a new Update operation.
    let replace = s.put(&id, vnet("10.2.0.0/16")).await;
    assert_eq!(replace.status().as_u16(), 200);
    let update_url = header(&replace, "azure-asyncoperation").unwrap();
    assert_ne!(update_url, status_url);
    let done = s.wait_terminal(&update_url, T).await;
    assert_eq!(done["status"], "Succeeded");
    let (_, res) = s.get_json(&id).await;
    assert_eq!(res["properties"]["addressSpace"], "10.2.0.0/16");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_carries_the_playbook_error() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "broken");
    let r = s.put(&id, json!({"properties": {"addressSpace": "10.0.0.0/16", "simulateFailure": true}})).await;
    assert_eq!(r.status().as_u16(), 201);
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    let result_url = header(&r, "location").unwrap();
    let done = s.wait_terminal(&status_url, T).await;
    assert_eq!(done["status"], "Failed", "{done}");
    assert_eq!(done["error"]["code"], "ProvisioningFailed");
    let message = done["error"]["message"].as_str().unwrap();
    assert!(message.contains("simulated failure"), "{message}");
    let (code, res) = s.get_json(&id).await;
    assert_eq!(code, 200);
    assert_eq!(res["properties"]["provisioningState"], "Failed");
    // The result endpoint answers with the operation's own error.
    let (code, err) = s.follow(&result_url).await;
    assert_eq!(code, 500);
    assert_eq!(err["error"]["code"], "ProvisioningFailed");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_supersedes_a_running_create() {
    let mut s = TestServer::start().await;
    let id = rid("computeInstances", "vm1");
    let r = s.put(&id, json!({"properties": {"size": "small", "image": "debian", "delaySeconds": 60}})).await;
    assert_eq!(r.status().as_u16(), 201);
    let create_url = header(&r, "azure-asyncoperation").unwrap();
    // Wait until the job really runs.
    let start = std::time::Instant::now();
    loop {
        let (_, op) = s.follow(&create_url).await;
        if op["status"] == "Provisioning" {
            break;
        }
        assert!(start.elapsed() < T, "never started: {op}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let del = s.http.delete(s.url(&id)).send().await.unwrap();
    assert_eq!(del.status().as_u16(), 202);
    let delete_url = header(&del, "azure-asyncoperation").unwrap();
    assert!(header(&del, "location").is_some());
    let (_, create_op) = s.follow(&create_url).await;
    assert_eq!(create_op["status"], "Canceled");
    assert_eq!(create_op["error"]["code"], "Canceled");
    assert_eq!(create_op["error"]["message"], "This operation was superseded by another");
    // Never 404 while deleting; a second DELETE conflicts.
    let (code, res) = s.get_json(&id).await;
    assert_eq!(code, 200);
    assert_eq!(res["properties"]["provisioningState"], "Deleting");
    let again = s.http.delete(s.url(&id)).send().await.unwrap();
    assert_eq!(again.status().as_u16(), 409);
    let done = s.wait_terminal(&delete_url, T).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    let (code, _) = s.get_json(&id).await;
    assert_eq!(code, 404);
    // DELETE of an absent resource: 204, no headers.
    let absent = s.http.delete(s.url(&id)).send().await.unwrap();
    assert_eq!(absent.status().as_u16(), 204);
    assert!(header(&absent, "azure-asyncoperation").is_none());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_job_and_convergence() {
    let mut s = TestServer::start().await;
    let id = rid("securityGroups", "sg1");
    let r = s.put(&id, json!({"properties": {"delaySeconds": 60}})).await;
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    let start = std::time::Instant::now();
    loop {
        let (_, op) = s.follow(&status_url).await;
        if op["status"] == "Provisioning" {
            break;
        }
        assert!(start.elapsed() < T, "never started: {op}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancel_url = status_url.replace("?api-version", "/cancel?api-version");
    let c = s.http.post(&cancel_url).send().await.unwrap();
    assert_eq!(c.status().as_u16(), 202);
    let done = s.wait_terminal(&status_url, T).await;
    assert_eq!(done["status"], "Canceled", "{done}");
    assert_eq!(done["error"]["code"], "Canceled");
    let (_, res) = s.get_json(&id).await;
    assert_eq!(res["properties"]["provisioningState"], "Canceled");
    // Canceling a finished operation conflicts.
    let c = s.http.post(&cancel_url).send().await.unwrap();
    assert_eq!(c.status().as_u16(), 409);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_precise_errors() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "v");
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (s.http.put(format!("{}{id}", s.base)).json(&vnet("10.0.0.0/16")), 400, "MissingApiVersionParameter"),
        (
            s.http.put(format!("{}{id}?api-version=1999-01-01", s.base)).json(&vnet("10.0.0.0/16")),
            400,
            "InvalidApiVersionParameter",
        ),
        (s.http.put(s.url(&id)).json(&json!({"properties": {"addressSpace": "nope"}})), 400, "InvalidRequestContent"),
        (
            s.http.put(s.url(&id)).json(&json!({"properties": {"addressSpace": 5, "bogus": 1}})),
            400,
            "MultipleErrorsOccurred",
        ),
        (s.http.put(s.url(&id)).json(&json!({"properties": []})), 400, "InvalidRequestContent"),
        (
            s.http.put(s.url(&id)).header("content-type", "application/json").body("{not json"),
            400,
            "InvalidRequestContent",
        ),
        (s.http.put(s.url(&id)).header("content-type", "text/plain").body("x"), 415, "UnsupportedMediaType"),
        (
            s.http.put(s.url(&id)).header("content-type", "application/json").body(vec![b' '; 2 * 1024 * 1024]),
            413,
            "RequestEntityTooLarge",
        ),
        (
            s.http.put(s.url(&rid("virtualNetworks", "bad name!"))).json(&vnet("10.0.0.0/16")),
            400,
            "InvalidResourceName",
        ),
        (s.http.put(s.url(&rid("nosuchTypes", "x"))).json(&vnet("10.0.0.0/16")), 404, "InvalidResourceType"),
        (s.http.patch(s.url(&rid("virtualNetworks", "absent"))).json(&json!({"tags": {}})), 404, "ResourceNotFound"),
        (s.http.get(s.url(&rid("virtualNetworks", "absent"))), 404, "ResourceNotFound"),
        (s.http.post(s.url(&id)), 405, "MethodNotAllowed"),
        (
            s.http.get(s.url(&format!(
                "/subscriptions/{SUB}/providers/Slipway.Example/locations/local/operationStatuses/not-a-uuid"
            ))),
            404,
            "ResourceNotFound",
        ),
    ];
    for (i, (req, status, code)) in cases.into_iter().enumerate() {
        let r = req.send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "case {i}");
        assert_eq!(header(&r, "x-ms-error-code").as_deref(), Some(code), "case {i}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "case {i}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "case {i}");
    }
    // The schema error names the field.
    let r = s.put(&id, json!({"properties": {"addressSpace": "nope"}})).await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["target"], "properties.addressSpace");
    // Nothing was accepted by any of them.
    let (code, _) = s.get_json(&id).await;
    assert_eq!(code, 404);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_are_scoped_expire_and_urls_follow_the_referer() {
    let mut s = TestServer::start().await;
    let id = rid("subnets", "sn1");
    let r = s
        .http
        .put(s.url(&id))
        .header("referer", format!("https://arm.example:8443{id}?api-version={API}"))
        .header("x-ms-correlation-request-id", "corr-1")
        .header("x-ms-client-request-id", "client-1")
        .json(&json!({"properties": {"virtualNetwork": "vnet1", "addressPrefix": "10.0.1.0/24"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(header(&r, "x-ms-correlation-request-id").as_deref(), Some("corr-1"));
    assert_eq!(header(&r, "x-ms-client-request-id").as_deref(), Some("client-1"));
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    assert!(status_url.starts_with("https://arm.example:8443/subscriptions/"), "{status_url}");
    let path = status_url.trim_start_matches("https://arm.example:8443");
    let local = format!("{}{path}", s.base);
    let done = s.wait_terminal(&local, T).await;
    assert_eq!(done["status"], "Succeeded");
    assert_eq!(done["id"], path.split('?').next().unwrap());
    // The same operation id under another subscription is not found.
    let other = local.replace(SUB, "22222222-2222-2222-2222-222222222222");
    assert_eq!(s.follow(&other).await.0, 404);
    // X-Forwarded-Proto drives the scheme when there is no Referer; an operation started
    // by an identity is visible only to that identity (tenant and client).
    let r = s
        .http
        .patch(s.url(&id))
        .header("x-forwarded-proto", "https")
        .header("x-ms-home-tenant-id", "T1")
        .header("x-ms-client-object-id", "O1")
        .json(&json!({"tags": {"a": "b"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let patch_url = header(&r, "azure-asyncoperation").unwrap();
    assert!(patch_url.starts_with("https://"), "{patch_url}");
    let patch_local = format!("{}/{}", s.base, patch_url.splitn(4, '/').nth(3).unwrap());
    let as_identity = |tenant: &str, client: &str| {
        s.http.get(&patch_local).header("x-ms-home-tenant-id", tenant).header("x-ms-client-object-id", client).send()
    };
    assert_eq!(as_identity("T1", "O1").await.unwrap().status().as_u16(), 200);
    assert_eq!(as_identity("T1", "O2").await.unwrap().status().as_u16(), 404);
    assert_eq!(as_identity("T2", "O1").await.unwrap().status().as_u16(), 404);
    // Operations expire 7 days after their last write.
    s.clock.advance(Duration::from_secs(7 * 24 * 3600 + 60));
    let (code, body) = s.follow(&local).await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(body["error"]["code"], "ResourceNotFound");
    // The resource keeps its last state.
    assert_eq!(s.get_json(&id).await.0, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_merges_and_lists_page() {
    let mut s = TestServer::start().await;
    let mut urls = Vec::new();
    for name in ["a", "b", "c"] {
        let r = s.put(&rid("securityGroups", name), json!({"tags": {"k": "v"}, "properties": {"rules": [{"name": "ssh", "direction": "Inbound", "port": 22, "access": "Allow"}]}})).await;
        assert_eq!(r.status().as_u16(), 201);
        urls.push(header(&r, "azure-asyncoperation").unwrap());
    }
    for u in &urls {
        assert_eq!(s.wait_terminal(u, T).await["status"], "Succeeded");
    }
    let patch = s
        .http
        .patch(s.url(&rid("securityGroups", "a")))
        .json(&json!({"tags": {"new": "1"}, "properties": {"simulateDeleteFailure": false}}))
        .send()
        .await
        .unwrap();
    assert_eq!(patch.status().as_u16(), 202);
    let u = header(&patch, "azure-asyncoperation").unwrap();
    assert_eq!(s.wait_terminal(&u, T).await["status"], "Succeeded");
    let (_, a) = s.get_json(&rid("securityGroups", "a")).await;
    assert_eq!(a["tags"], json!({"new": "1"}), "tags replace");
    assert_eq!(a["properties"]["rules"][0]["port"], 22, "properties merge");
    assert_eq!(a["properties"]["simulateDeleteFailure"], false);

    let coll = format!("/subscriptions/{SUB}/resourceGroups/rg1/providers/Slipway.Example/securityGroups?$top=2");
    let (code, page1) = s.get_json(&coll).await;
    assert_eq!(code, 200);
    assert_eq!(page1["value"].as_array().unwrap().len(), 2);
    let next = page1["nextLink"].as_str().expect("nextLink");
    let (_, page2) = s.follow(next).await;
    assert_eq!(page2["value"].as_array().unwrap().len(), 1);
    assert!(page2.get("nextLink").is_none());
    let names: Vec<&str> = page1["value"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page2["value"].as_array().unwrap())
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    let (_, by_sub) = s.get_json(&format!("/subscriptions/{SUB}/providers/Slipway.Example/securityGroups")).await;
    assert_eq!(by_sub["value"].as_array().unwrap().len(), 3);
    let (_, other_rg) =
        s.get_json(&format!("/subscriptions/{SUB}/resourceGroups/rg2/providers/Slipway.Example/securityGroups")).await;
    assert_eq!(other_rg["value"].as_array().unwrap().len(), 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_notification_is_delivered_and_retried() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A callback receiver that fails the first POST, then accepts.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cb = format!("http://{}/callback", listener.local_addr().unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u16, String)>();
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            n += 1;
            let mut buf = vec![0u8; 65536];
            let mut got = Vec::new();
            loop {
                let k = sock.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..k]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some(i) = text.find("\r\n\r\n") {
                    let len: usize = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if got.len() >= i + 4 + len {
                        break;
                    }
                }
                if k == 0 {
                    break;
                }
            }
            let text = String::from_utf8_lossy(&got).to_string();
            let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
            let status = if n == 1 { 500 } else { 200 };
            let _ = sock
                .write_all(format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes())
                .await;
            tx.send((status, body)).unwrap();
        }
    });
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "notified");
    let r = s
        .http
        .put(s.url(&id))
        .header("azure-asyncnotificationuri", &cb)
        .json(&vnet("10.9.0.0/16"))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "azure-asyncnotification").as_deref(), Some("Enabled"));
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(s.wait_terminal(&status_url, T).await["status"], "Succeeded");
    let first = tokio::time::timeout(T, rx.recv()).await.unwrap().unwrap();
    assert_eq!(first.0, 500);
    let second = tokio::time::timeout(T, rx.recv()).await.unwrap().unwrap();
    assert_eq!(second.0, 200);
    let delivered: Value = serde_json::from_str(&second.1).unwrap();
    assert_eq!(delivered["status"], "Succeeded");
    assert!(status_url.contains(delivered["name"].as_str().unwrap()));
    assert!(delivered["endTime"].is_string());
    s.stop().await;
}
