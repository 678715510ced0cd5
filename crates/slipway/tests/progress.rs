//! An operation's progress while its job runs, with the example playbooks and the real
//! `ansible-runner` (docs/arm-contract.md#progress): the runner's task-start events against
//! the playbook's own task count. The AAP provider's is in `aap_e2e.rs`.

use crate::common;

use std::time::Duration;

use crate::common::{TestServer, header, rid};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_shows_its_task_and_a_percentage_that_only_grows() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "vnet1");
    let r = s
        .put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "delaySeconds": 3}}))
        .await;
    let seen = common::progress::follow(&s.http, &header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    common::progress::assert_monotonic(&seen);
    // The create playbook has six tasks; the third sleeps, with two done: 33%.
    let sleeping = Some("Run for the requested time (properties.delaySeconds)".to_owned());
    assert!(seen.iter().any(|(st, p, t)| st == "Provisioning" && *p == Some(33) && *t == sleeping), "{seen:?}");

    // The history keeps how many tasks the job started, for the next job of its kind.
    let (_, jobs) = s.get_json(&format!("{id}/jobs")).await;
    assert_eq!(jobs["value"][0]["tasksStarted"], 6, "{jobs}");
    s.stop().await;
}
