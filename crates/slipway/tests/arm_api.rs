//! Black-box HTTP tests of the ARM contract against a real Slipway (SQLite, real
//! ansible-playbook runs of the example playbooks). The rules: docs/arm-contract.md.

use std::time::Duration;

use crate::common::{API, SUB, TestServer, header, rid};
use serde_json::{Value, json};
use slipway_test_support::{eventually, jump};

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
    let r = s
        .put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "simulateFailure": true}}))
        .await;
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
    // The result endpoint answers with the operation's own error, as a 409 (no server fault).
    let (code, err) = s.follow(&result_url).await;
    assert_eq!(code, 409);
    assert_eq!(err["error"]["code"], "ProvisioningFailed");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_supersedes_a_running_create() {
    let mut s = TestServer::start().await;
    let id = rid("computeInstances", "vm1");
    let r = s
        .put(&id, json!({"location": "local", "properties": {"size": "small", "image": "debian", "delaySeconds": 60}}))
        .await;
    assert_eq!(r.status().as_u16(), 201);
    let create_url = header(&r, "azure-asyncoperation").unwrap();
    // Wait until the job really runs.
    eventually("the job started", T, async || {
        let (_, op) = s.follow(&create_url).await;
        if op["status"] == "Provisioning" { Ok(()) } else { Err(op.to_string()) }
    })
    .await;
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
    let r = s.put(&id, json!({"location": "local", "properties": {"delaySeconds": 60}})).await;
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    eventually("the job started", T, async || {
        let (_, op) = s.follow(&status_url).await;
        if op["status"] == "Provisioning" { Ok(()) } else { Err(op.to_string()) }
    })
    .await;
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
        (
            s.http.put(s.url(&id)).json(&json!({"location": "local", "properties": {"addressSpace": "nope"}})),
            400,
            "InvalidRequestContent",
        ),
        (
            s.http.put(s.url(&id)).json(&json!({"location": "local", "properties": {"addressSpace": 5, "bogus": 1}})),
            400,
            "MultipleErrorsOccurred",
        ),
        (s.http.put(s.url(&id)).json(&json!({"location": "local", "properties": []})), 400, "InvalidRequestContent"),
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
            s.http.put(s.url(&rid("virtualNetworks", "bad:name!"))).json(&vnet("10.0.0.0/16")),
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
    let r = s.put(&id, json!({"location": "local", "properties": {"addressSpace": "nope"}})).await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["target"], "properties.addressSpace");
    // Nothing was accepted by any of them.
    let (code, _) = s.get_json(&id).await;
    assert_eq!(code, 404);
    s.stop().await;
}

// The current-thread runtime: the test moves the clock with `jump`.
#[tokio::test]
async fn operations_are_scoped_expire_and_urls_follow_a_trusted_proxys_referer() {
    // The test client is the proxy: its Referer and X-Forwarded-Proto are believed.
    let mut s = TestServer::start_with_server(r#"trusted_proxies = ["127.0.0.1"]"#).await;
    let id = rid("subnets", "sn1");
    let r = s
        .http
        .put(s.url(&id))
        .header("referer", format!("https://arm.example:8443{id}?api-version={API}"))
        .header("x-ms-correlation-request-id", "corr-1")
        .header("x-ms-client-request-id", "client-1")
        .json(&json!({"location": "local", "properties": {"virtualNetwork": "vnet1", "addressPrefix": "10.0.1.0/24"}}))
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
    jump(Duration::from_secs(7 * 24 * 3600 + 60)).await;
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
        let r = s.put(&rid("securityGroups", name), json!({"location": "local", "tags": {"k": "v"}, "properties": {"rules": [{"name": "ssh", "direction": "Inbound", "port": 22, "access": "Allow"}]}})).await;
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
    // The callback listens on loopback, over http: the policy must allow both.
    let allow = "\n[notifications]\ncallback_allow_http = true\ncallback_allow_private_networks = true\n";
    let mut s = TestServer::start_full("", "", allow, |_| {}).await;
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

/// Asserts an ARM error: status, code, and a message of at most `max_message` bytes.
async fn expect_error(r: reqwest::Response, status: u16, code: &str, max_message: usize, case: &str) -> Value {
    assert_eq!(r.status().as_u16(), status, "{case}");
    assert_eq!(header(&r, "x-ms-error-code").as_deref(), Some(code), "{case}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], code, "{case}: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        !message.is_empty() && message.len() <= max_message,
        "{case}: message of {} bytes: {message}",
        message.len()
    );
    body["error"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_ids_and_bodies_get_precise_errors_and_write_nothing() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "hostile");

    // A request head past 64 KiB is refused before it is parsed, and the server goes on.
    let r = s.http.get(s.url(&id)).header("x-padding", "p".repeat(80 * 1024)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 431);
    assert_eq!(s.get_json(&id).await.0, 404);

    // Subscriptions are GUIDs, in every route; the answer quotes a short, sanitised prefix.
    let long = "s".repeat(20_000);
    for sub in [long.as_str(), "sub%0D%0AX-Injected:%201", "s1", "{11111111-1111-1111-1111-111111111111}"] {
        for path in [
            format!("/subscriptions/{sub}/resourceGroups/rg1/providers/Slipway.Example/virtualNetworks/v"),
            format!("/subscriptions/{sub}/providers/Slipway.Example/virtualNetworks"),
            format!("/subscriptions/{sub}/providers/Slipway.Example/locations/local/operationStatuses/x"),
        ] {
            let r = s.http.put(s.url(&path)).json(&vnet("10.0.0.0/16")).send().await.unwrap();
            assert!(r.headers().get("x-injected").is_none());
            let e = expect_error(r, 400, "InvalidSubscriptionId", 200, &path[..60.min(path.len())]).await;
            let message = e["message"].as_str().unwrap();
            assert!(!message.contains('%') && !message.contains(&"s".repeat(50)), "{message}");
        }
    }
    // `..` as it is sent by a client that does not normalise paths.
    let body = r#"{"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}}"#;
    let request = format!(
        "PUT /subscriptions/../resourceGroups/rg1/providers/Slipway.Example/virtualNetworks/v?api-version={API} \
         HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, head, answer) = s.raw(request.as_bytes()).await;
    assert_eq!(status, 400, "{head}");
    assert!(answer.contains("\"InvalidSubscriptionId\""), "{answer}");

    // `location` is required on PUT.
    for body in
        [json!({"properties": {"addressSpace": "10.0.0.0/16"}}), json!({"location": null}), json!({"location": ""})]
    {
        let r = s.put(&id, body.clone()).await;
        let e = expect_error(r, 400, "LocationRequired", 200, &body.to_string()).await;
        assert_eq!(e["target"], "location");
    }

    // Tags, on PUT and PATCH.
    let many: serde_json::Map<String, Value> = (0..51).map(|i| (format!("t{i}"), json!("v"))).collect();
    let tag_cases = [
        (json!(many), "tags"),
        (json!({"a/b": "v"}), "tags.a/b"),
        (json!({"k": "v".repeat(257)}), "tags.k"),
        (json!({"k".repeat(513): "v"}), ""),
    ];
    for (tags, target) in tag_cases {
        for patch in [false, true] {
            let body = json!({"location": "local", "tags": tags, "properties": {"addressSpace": "10.0.0.0/16"}});
            let req = if patch { s.http.patch(s.url(&id)) } else { s.http.put(s.url(&id)) };
            let e = expect_error(req.json(&body).send().await.unwrap(), 400, "InvalidTag", 300, target).await;
            let got = e["target"].as_str().unwrap();
            if target.is_empty() {
                assert!(got.starts_with("tags.kkk") && got.len() < 100, "{got}");
            } else {
                assert_eq!(got, target);
            }
        }
    }

    // Nesting deeper than 32 levels, refused before anything reads the body as a resource.
    let deep = format!(
        r#"{{"location": "local", "properties": {{"addressSpace": "10.0.0.0/16", "x": {}1{}}}}}"#,
        "[".repeat(40),
        "]".repeat(40)
    );
    let r = s.http.put(s.url(&id)).header("content-type", "application/json").body(deep).send().await.unwrap();
    let e = expect_error(r, 400, "InvalidRequestContent", 200, "deep").await;
    assert!(e["message"].as_str().unwrap().contains("nested too deeply"), "{e}");

    // Content types that cannot be read are 415, never a 500 or a body read as JSON.
    let vnet_body = vnet("10.0.0.0/16").to_string();
    let bad_types: Vec<reqwest::header::HeaderValue> = vec![
        reqwest::header::HeaderValue::from_bytes(b"application/json\xff").unwrap(),
        reqwest::header::HeaderValue::from_bytes("appl\u{e9}cation/json".as_bytes()).unwrap(),
        reqwest::header::HeaderValue::from_static(""),
        reqwest::header::HeaderValue::from_static(";charset=utf-8"),
        reqwest::header::HeaderValue::from_static("application/"),
        reqwest::header::HeaderValue::from_static("application/json; charset=latin1"),
        reqwest::header::HeaderValue::from_static("application/json; charset"),
    ];
    for ct in bad_types {
        let case = format!("{ct:?}");
        let r = s.http.put(s.url(&id)).header("content-type", ct).body(vnet_body.clone()).send().await.unwrap();
        expect_error(r, 415, "UnsupportedMediaType", 200, &case).await;
    }
    let two = format!(
        "PUT {id}?api-version={API} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Type: \
         text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{vnet_body}",
        vnet_body.len()
    );
    let (status, head, _) = s.raw(two.as_bytes()).await;
    assert_eq!(status, 415, "two content types: {head}");

    // Callbacks the policy refuses (the default: https to public hosts only).
    for (uri, reason) in [
        ("http://127.0.0.1:9/cb", "callbacks must use https"),
        ("https://127.0.0.1:9/cb", "the host is a loopback address"),
        ("https://localhost/cb", "the host is a loopback address"),
        ("https://[::ffff:10.0.0.1]/cb", "the host is a private network address"),
        ("https://169.254.169.254/latest/meta-data", "the host is a link-local address"),
        ("https://100.64.0.1/cb", "the host is a shared (carrier-grade NAT) address"),
        ("https://user:pw@hooks.example.com/cb", "the URI must not contain a user name or password"),
        ("not a uri", "the URI is not an absolute http or https URL"),
    ] {
        let r = s.http.put(s.url(&id)).header("azure-asyncnotificationuri", uri).json(&vnet("10.0.0.0/16")).send();
        let e = expect_error(r.await.unwrap(), 400, "InvalidAsyncNotificationUri", 200, uri).await;
        assert!(e["message"].as_str().unwrap().contains(reason), "{uri}: {e}");
        let del = s.http.delete(s.url(&id)).header("azure-asyncnotificationuri", uri).send().await.unwrap();
        expect_error(del, 400, "InvalidAsyncNotificationUri", 200, uri).await;
    }

    // Nothing was written by any of them.
    assert_eq!(s.get_json(&id).await.0, 404);
    // The well-formed request is accepted (a charset of utf-8 is fine).
    let r = s
        .http
        .put(s.url(&id))
        .header("content-type", "application/json; charset=UTF-8")
        .body(vnet_body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_follow_arms_rule_unless_the_type_has_its_own() {
    // ARM's rule by default: longer than the old 90 characters, and more than -_.().
    let mut s = TestServer::start().await;
    for name in ["n".repeat(120), "a+b=c!".to_string()] {
        let r = s.put(&rid("virtualNetworks", &name), vnet("10.0.0.0/16")).await;
        assert_eq!(r.status().as_u16(), 201, "{name}: {}", r.text().await.unwrap());
    }
    for name in ["n".repeat(261), "a:b".to_string(), "a&b".to_string()] {
        let r = s.http.put(s.url(&rid("virtualNetworks", &name))).json(&vnet("10.0.0.0/16")).send().await.unwrap();
        let e = expect_error(r, 400, "InvalidResourceName", 300, &name).await;
        assert!(e["message"].as_str().unwrap().contains("1-260 characters"), "{e}");
    }
    s.stop().await;

    // A type's own rule.
    let mut s = TestServer::start_with("name_pattern = \"[a-z][a-z0-9-]*\"\nname_max_length = 12").await;
    let r = s.put(&rid("virtualNetworks", "vnet-1"), vnet("10.0.0.0/16")).await;
    assert_eq!(r.status().as_u16(), 201);
    for name in ["Vnet-1", "vnet_1", "1vnet", "vnet-1234567890"] {
        let r = s.http.put(s.url(&rid("virtualNetworks", name))).json(&vnet("10.0.0.0/16")).send().await.unwrap();
        let e = expect_error(r, 400, "InvalidResourceName", 300, name).await;
        let message = e["message"].as_str().unwrap();
        assert!(message.contains("'Slipway.Example/virtualNetworks'"), "{message}");
        assert!(message.contains("1-12 characters matching the pattern [a-z][a-z0-9-]*"), "{message}");
        if !name.eq_ignore_ascii_case("vnet-1") {
            assert_eq!(s.get_json(&rid("virtualNetworks", name)).await.0, 404, "{name}");
        }
    }
    s.stop().await;
}
