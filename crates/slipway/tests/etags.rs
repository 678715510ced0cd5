//! ARM optimistic concurrency over HTTP: every resource has an `etag` that changes with
//! every write, and `If-Match` / `If-None-Match` make PUT, PATCH and DELETE conditional
//! (docs/arm-contract.md#optimistic-concurrency).

use std::time::Duration;

use crate::common::{TestServer, header, rid};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn vnet(prefix: &str) -> Value {
    json!({"location": "local", "properties": {"addressSpace": prefix}})
}

async fn send(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
    conditions: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = s.http.request(method, s.url(path));
    for (name, value) in conditions {
        req = req.header(*name, *value);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.expect("request")
}

async fn etag_of(s: &TestServer, path: &str) -> String {
    let r = s.get(path).await;
    assert_eq!(r.status(), 200);
    let in_header = header(&r, "etag").expect("ETag header");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["etag"].as_str(), Some(in_header.as_str()), "header and body agree");
    in_header
}

async fn precondition_failed(r: reqwest::Response) -> String {
    assert_eq!(r.status(), 412);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "PreconditionFailed", "{e}");
    e["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etags_change_with_every_write_and_make_writes_conditional() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "etag1");
    let put = reqwest::Method::PUT;

    // Create-only PUT: If-None-Match: * creates, then refuses.
    let r = send(&s, put.clone(), &id, Some(vnet("10.0.0.0/16")), &[("if-none-match", "*")]).await;
    assert_eq!(r.status(), 201);
    let created_etag = header(&r, "etag").expect("ETag on the PUT's answer");
    let op = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(s.wait_terminal(&op, WAIT).await["status"], "Succeeded");
    let settled = etag_of(&s, &id).await;
    assert_ne!(settled, created_etag, "the engine's write (Succeeded) changes it");
    let again = send(&s, put.clone(), &id, Some(vnet("10.0.0.0/16")), &[("if-none-match", "*")]).await;
    assert!(precondition_failed(again).await.contains("existing resource"));

    // A stale If-Match is refused and changes nothing; the current one goes through.
    let stale = send(&s, put.clone(), &id, Some(vnet("10.1.0.0/16")), &[("if-match", &created_etag)]).await;
    assert!(precondition_failed(stale).await.contains(&settled), "names the current etag");
    assert_eq!(etag_of(&s, &id).await, settled, "a refused write writes nothing");
    let patch =
        send(&s, reqwest::Method::PATCH, &id, Some(json!({"tags": {"a": "b"}})), &[("if-match", &created_etag)]).await;
    precondition_failed(patch).await;
    let r = send(&s, put.clone(), &id, Some(vnet("10.1.0.0/16")), &[("if-match", &settled)]).await;
    assert_eq!(r.status(), 200);
    let changed = header(&r, "etag").unwrap();
    assert_ne!(changed, settled, "a client write changes it");
    s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;

    // Two writers holding the same etag: only the first wins.
    let current = etag_of(&s, &id).await;
    let first =
        send(&s, reqwest::Method::PATCH, &id, Some(json!({"tags": {"w": "1"}})), &[("if-match", &current)]).await;
    assert_eq!(first.status(), 202);
    let second =
        send(&s, reqwest::Method::PATCH, &id, Some(json!({"tags": {"w": "2"}})), &[("if-match", &current)]).await;
    precondition_failed(second).await;
    s.wait_terminal(&header(&first, "azure-asyncoperation").unwrap(), WAIT).await;

    // DELETE: a stale etag is refused, the current one deletes; If-Match on nothing is 412.
    let delete = reqwest::Method::DELETE;
    precondition_failed(send(&s, delete.clone(), &id, None, &[("if-match", &current)]).await).await;
    let now = etag_of(&s, &id).await;
    let r = send(&s, delete.clone(), &id, None, &[("if-match", &now)]).await;
    assert_eq!(r.status(), 202);
    s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    let gone = send(&s, delete.clone(), &id, None, &[("if-match", "*")]).await;
    assert!(precondition_failed(gone).await.contains("does not exist"));
    assert_eq!(send(&s, delete, &id, None, &[]).await.status(), 204, "without a condition: 204");
    s.stop().await;
}
