//! The real Python `azure-mgmt-core` ARMPolling client against Slipway
//! (docs/arm-contract.md#what-arm-clients-rely-on).

use crate::common::{API, SUB, TestServer, composite_types, python_tools, repo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_sdk_poller_drives_resources_actions_and_cascades() {
    let venv = python_tools();
    let mut s = TestServer::start_full("", "", &composite_types(), |_| {}).await;
    let script = repo().join("tests/python/arm_poller.py");
    let out = tokio::process::Command::new(venv.join("bin/python"))
        .arg(&script)
        .args([&s.base, SUB, API])
        .output()
        .await
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "poller script failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    for scenario in [
        "\"put\"",
        "\"patch\"",
        "\"failing-put\"",
        "\"delete\"",
        "\"delete-absent\"",
        "\"cluster-create\"",
        "\"cluster-action\"",
        "\"cluster-cascade\"",
        "\"cluster-preflight-failure\"",
    ] {
        assert!(stdout.contains(scenario), "missing scenario {scenario}:\n{stdout}");
    }
    s.stop().await;
}
