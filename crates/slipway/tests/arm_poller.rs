//! Azure's own Python clients against Slipway (docs/arm-contract.md#what-arm-clients-rely-on):
//! `azure-mgmt-core`'s ARMPolling on every long-running shape, and `azure-mgmt-resource`'s
//! generic ResourceManagementClient on ARM's platform calls.

use crate::common::{API, SUB, TestServer, composite_types, python_tools, repo};

/// Runs `tests/python/{script}` against `s` and returns what it printed, one JSON line per
/// step; fails the test with its output if it exits non-zero.
async fn run_driver(s: &TestServer, script: &str) -> String {
    let out = tokio::process::Command::new(python_tools().join("bin/python"))
        .arg(repo().join("tests/python").join(script))
        .args([&s.base, SUB, API])
        .output()
        .await
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_sdk_poller_drives_resources_actions_and_cascades() {
    let mut s = TestServer::start_full("", "", &composite_types(), |_| {}).await;
    let stdout = run_driver(&s, "arm_poller.py").await;
    for scenario in [
        "put",
        "patch",
        "failing-put",
        "delete",
        "delete-absent",
        "cluster-create",
        "cluster-action",
        "cluster-cascade",
        "cluster-preflight-failure",
    ] {
        assert!(stdout.contains(&format!("\"scenario\": \"{scenario}\"")), "missing scenario {scenario}:\n{stdout}");
    }
    s.stop().await;
}

/// Every `ResourceManagementClient` call Slipway serves, with the `Microsoft.Resources`
/// api-version the SDK was generated for on ARM's own paths (tests/python/resource_sdk.py).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_resource_management_client_works_unchanged() {
    let mut s = TestServer::start().await;
    // A registered subscription, for `subscriptions.get`.
    let registered = serde_json::json!({"state": "Registered", "properties": {"tenantId": "contoso"}});
    let r = s.put(&format!("/subscriptions/{SUB}"), registered).await;
    assert!(r.status().is_success(), "{}", r.text().await.unwrap_or_default());
    let stdout = run_driver(&s, "resource_sdk.py").await;
    // One line per call and its outcome: `--nocapture` shows what was tried.
    println!("{stdout}");
    for call in [
        "resource_groups.create_or_update",
        "resource_groups.update",
        "resource_groups.list (tag filter)",
        "resource_groups.get (missing)",
        "resources.begin_create_or_update_by_id",
        "resources.check_existence_by_id",
        "resources.get_by_id (missing)",
        "resources.get_by_id (bad api-version)",
        "resources.list_by_resource_group",
        "resources.list",
        "resource_groups.get",
        "resource_groups.list",
        "resource_groups.check_existence",
        "providers.get",
        "providers.list",
        "providers.register",
        "providers.unregister",
        "tags.begin_create_or_update_at_scope, begin_update_at_scope, get_at_scope, begin_delete_at_scope",
        "resources.begin_update_by_id",
        "resources.begin_delete_by_id",
        "resources.begin_create_or_update, check_existence, get, begin_update, begin_delete",
        "providers.get_at_tenant_scope, list_at_tenant_scope",
        "resource_groups.begin_export_template",
        "resources.begin_move_resources",
        "tags.list",
        "provider_resource_types.list",
        "subscriptions.list",
        "subscriptions.get",
        "resource_groups.begin_delete",
        "done",
    ] {
        assert!(stdout.contains(&format!("\"call\": \"{call}\"")), "missing call {call}:\n{stdout}");
    }
    s.stop().await;
}
