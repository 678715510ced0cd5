//! Management locks end to end with the example playbooks (docs/governance.md#locks): a
//! lock at a group covers what is in it; `CanNotDelete` refuses deletes, `ReadOnly` also
//! writes, creates below it and actions — but not an action the type declares read-only; a
//! group's delete is refused whole when anything in it is locked; lock requests that are
//! wrong get precise errors.

use std::time::Duration;

use crate::common::{SUB, TestServer, header, rid};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(90);
const LOCK_VERSION: &str = "api-version=2020-05-01";

fn lock_path(scope: &str, name: &str) -> String {
    format!("{scope}/providers/Microsoft.Authorization/locks/{name}")
}

fn group(name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{name}")
}

async fn lock(s: &TestServer, scope: &str, name: &str, level: &str) -> (u16, Value) {
    let body = json!({"properties": {"level": level, "notes": "production"}});
    s.call_at("PUT", &lock_path(scope, name), LOCK_VERSION, Some(body)).await
}

fn assert_locked(answer: &(u16, Value), lock_id: &str) {
    let (code, e) = answer;
    assert_eq!((*code, e["error"]["code"].as_str()), (409, Some("ScopeLocked")), "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains(lock_id), "names the lock: {e}");
    assert_eq!(e["error"]["additionalInfo"][0]["info"]["lockId"], lock_id, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_protect_what_is_below_them_and_read_only_actions_pass() {
    let s = TestServer::start_with("actions = { restart = { read_only = true }, stop = {} }").await;
    let vm = rid("computeInstances", "vm1");
    let vm_body = json!({"location": "westeurope", "properties": {"size": "small", "image": "debian-12"}});
    assert_eq!(s.write("PUT", &vm, Some(vm_body.clone())).await.0, 201);

    // CanNotDelete at the group: the resource cannot be deleted, but can be changed.
    let (code, created) = lock(&s, &group("rg1"), "keep", "CanNotDelete").await;
    assert_eq!(code, 201, "{created}");
    let lock_id = lock_path(&group("rg1"), "keep");
    assert_eq!(created["id"], lock_id);
    assert_eq!(created["properties"], json!({"level": "CanNotDelete", "notes": "production"}));
    let (code, listed) =
        s.call_at("GET", &format!("{vm}/providers/Microsoft.Authorization/locks"), LOCK_VERSION, None).await;
    assert_eq!((code, listed["value"][0]["id"].as_str()), (200, Some(lock_id.as_str())), "inherited: {listed}");
    assert_locked(&s.write("DELETE", &vm, None).await, &lock_id);
    let r = s.http.post(format!("{}&operation=delete", s.url(&format!("{vm}/whatIf")))).send().await.unwrap();
    let op = header(&r, "azure-asyncoperation").expect("an existing resource's what-if is an operation");
    s.wait_terminal(&op, T).await;
    let result = s.http.get(op.replace("operationStatuses", "operationResults")).send().await.unwrap();
    let predicted: Value = result.json().await.unwrap();
    let verdict = &predicted["properties"]["guardrails"][0];
    assert_eq!(
        (verdict["kind"].as_str(), verdict["id"].as_str()),
        (Some("lock"), Some(lock_id.as_str())),
        "{predicted}"
    );
    assert_locked(&s.call_at("DELETE", &group("rg1"), "api-version=2025-04-01", None).await, &lock_id);
    assert_eq!(s.write("PATCH", &vm, Some(json!({"tags": {"owner": "ops"}}))).await.0, 202);

    // ReadOnly: no write, no create below it, no action that changes something.
    assert_eq!(lock(&s, &group("rg1"), "keep", "ReadOnly").await.0, 200, "a lock is replaced in place");
    assert_locked(&s.write("PUT", &vm, Some(vm_body.clone())).await, &lock_id);
    assert_locked(&s.write("PUT", &rid("computeInstances", "vm2"), Some(vm_body.clone())).await, &lock_id);
    let tags = format!("{}/providers/Microsoft.Resources/tags/default", group("rg1"));
    let merge = json!({"operation": "Merge", "properties": {"tags": {"a": "b"}}});
    assert_locked(&s.call_at("PATCH", &tags, "api-version=2025-04-01", Some(merge)).await, &lock_id);
    assert_locked(&s.write("POST", &format!("{vm}/stop"), None).await, &lock_id);
    let (code, _) = s.write("POST", &format!("{vm}/restart"), None).await;
    assert_eq!(code, 202, "an action declared read-only runs under ReadOnly");
    assert_eq!(s.get_json(&vm).await.0, 200, "reads are never locked");

    // Removed, the writes go through again.
    assert_eq!(s.call_at("DELETE", &lock_path(&group("rg1"), "keep"), LOCK_VERSION, None).await.0, 200);
    assert_eq!(s.call_at("DELETE", &lock_path(&group("rg1"), "keep"), LOCK_VERSION, None).await.0, 204);
    assert_eq!(s.write("POST", &format!("{vm}/stop"), None).await.0, 202);

    // A group's delete meets a lock on one resource in it: refused whole, nothing deleting.
    let (v1, v2) = (rid("virtualNetworks", "v1"), rid("virtualNetworks", "v2"));
    for (v, space) in [(&v1, "10.1.0.0/16"), (&v2, "10.2.0.0/16")] {
        let body = json!({"location": "westeurope", "properties": {"addressSpace": space}});
        assert_eq!(s.write("PUT", v, Some(body)).await.0, 201);
    }
    assert_eq!(lock(&s, &v2, "pin", "CanNotDelete").await.0, 201);
    assert_locked(&s.call_at("DELETE", &group("rg1"), "api-version=2025-04-01", None).await, &lock_path(&v2, "pin"));
    for path in [&v1, &v2, &vm] {
        let (_, r) = s.get_json(path).await;
        assert_eq!(r["properties"]["provisioningState"], "Succeeded", "{path} untouched: {r}");
    }
    assert_eq!(s.write("DELETE", &v1, None).await.0, 202, "what is not locked can still go one by one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_requests_that_are_wrong_get_precise_errors() {
    let s = TestServer::start().await;
    let (code, e) = lock(&s, &group("rg1"), "keep", "CanNotDelete").await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("ResourceGroupNotFound")), "{e}");
    let missing = rid("virtualNetworks", "nope");
    let (code, e) = lock(&s, &missing, "keep", "CanNotDelete").await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("ResourceNotFound")), "{e}");
    let sub = format!("/subscriptions/{SUB}");
    let (code, e) = lock(&s, &sub, "keep", "NotSpecified").await;
    assert_eq!((code, e["error"]["code"].as_str()), (400, Some("InvalidLockLevel")), "{e}");
    let (code, e) = lock(&s, &sub, "bad*name", "ReadOnly").await;
    assert_eq!((code, e["error"]["code"].as_str()), (400, Some("InvalidLockName")), "{e}");
    let long = json!({"properties": {"level": "ReadOnly", "notes": "n".repeat(513)}});
    let (code, e) = s.call_at("PUT", &lock_path(&sub, "keep"), LOCK_VERSION, Some(long)).await;
    assert_eq!((code, e["error"]["code"].as_str()), (400, Some("InvalidLockNotes")), "{e}");
    let (code, e) = s.call_at("GET", &lock_path(&sub, "keep"), LOCK_VERSION, None).await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("LockNotFound")), "{e}");
    let (code, _) = s.call_at("POST", &lock_path(&sub, "keep"), LOCK_VERSION, None).await;
    assert_eq!(code, 405);
    // At the subscription: every create in it is refused, until the lock goes.
    assert_eq!(lock(&s, &sub, "freeze", "ReadOnly").await.0, 201);
    let body = json!({"location": "westeurope", "properties": {"addressSpace": "10.0.0.0/16"}});
    let (code, e) = s.write("PUT", &rid("virtualNetworks", "v"), Some(body.clone())).await;
    assert_eq!((code, e["error"]["code"].as_str()), (409, Some("ScopeLocked")), "{e}");
    let (code, e) =
        s.call_at("PUT", &group("fresh"), "api-version=2025-04-01", Some(json!({"location": "local"}))).await;
    assert_eq!((code, e["error"]["code"].as_str()), (409, Some("ScopeLocked")), "a group too: {e}");
    assert_eq!(s.call_at("DELETE", &lock_path(&sub, "freeze"), LOCK_VERSION, None).await.0, 200);
    assert_eq!(s.write("PUT", &rid("virtualNetworks", "v"), Some(body)).await.0, 201);
}
