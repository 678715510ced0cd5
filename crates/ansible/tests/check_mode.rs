//! Check mode on the real `ansible-runner`, with the example playbooks: a check-mode job
//! reports each task that would change something, with its diff, and changes nothing.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use slipway_ansible::AnsibleProvider;
use slipway_domain::{ConfigVersion, JobState};
use slipway_provider::{JobAction, LaunchRequest, Provider, RunMode};

const WAIT: Duration = Duration::from_secs(60);

/// The example playbooks, recording into `state`.
fn examples(fx: &Fixture, state: &std::path::Path) -> AnsibleProvider {
    let mut options = fx.options();
    options.playbook_dir = repo_root().join("examples/playbooks");
    options.playbook_prefix = Some("slipway".into());
    options.extra_vars.insert("slipway_state_dir".into(), json!(state.display().to_string()));
    AnsibleProvider::new(options).unwrap()
}

fn network(key: &str, properties: Value, mode: RunMode) -> LaunchRequest {
    LaunchRequest {
        kind: "VirtualNetwork".into(),
        resource_type: "Slipway.Example/virtualNetworks".into(),
        mode,
        ..request(key, "vnet1", properties)
    }
}

fn recorded(state: &std::path::Path) -> Option<Value> {
    let file = state.join("slipway.example_virtualnetworks/vnet1.json");
    std::fs::read(file).ok().map(|b| serde_json::from_slice(&b).unwrap())
}

#[tokio::test]
async fn a_check_job_reports_the_diff_it_would_write_and_writes_nothing() {
    let fx = Fixture::new();
    let state = tempfile::tempdir().unwrap();
    let p = examples(&fx, state.path());

    let created = p.launch(&network("op1:1", json!({"addressPrefix": "10.0.0.0/16"}), RunMode::Run)).await.unwrap();
    assert_eq!(created.handle.data.get("check"), None, "a job in run mode is not a check");
    let done = terminal(&p, &created.handle, WAIT).await;
    assert_eq!(done.state, JobState::Succeeded, "{}", done.error_details);
    assert_eq!(done.changes, None, "only a check job reports its changes");
    let before = recorded(state.path()).expect("the create recorded the network");

    let check = p.launch(&network("op2:2", json!({"addressPrefix": "10.1.0.0/16"}), RunMode::Check)).await.unwrap();
    assert_eq!(check.handle.data["check"], json!(true));
    let done = terminal(&p, &check.handle, WAIT).await;
    assert_eq!(done.state, JobState::Succeeded, "{}", done.error_details);
    let changes = done.changes.expect("a check job reports its changes");
    let tasks: Vec<&str> = changes.iter().map(|c| c.task.as_str()).collect();
    assert_eq!(tasks, ["Record the resource"], "only the state file would change: {changes:?}");
    // Ansible reports the copy module's diff as a list of one before/after pair.
    let diff = &changes[0].diff[0];
    assert_eq!(changes[0].host, "localhost");
    assert!(diff["before"].as_str().unwrap().contains("10.0.0.0/16"), "{diff}");
    assert!(diff["after"].as_str().unwrap().contains("10.1.0.0/16"), "{diff}");
    assert!(diff["after_header"].as_str().unwrap().ends_with("vnet1.json"), "{diff}");
    assert_eq!(recorded(state.path()), Some(before.clone()), "a check changes nothing");
    let launches = std::fs::read_to_string(state.path().join("launches.log")).unwrap();
    assert_eq!(launches.lines().collect::<Vec<_>>(), ["op1:1"], "a check runs no command");

    // The same spec as recorded: nothing would change.
    let same = network("op3:3", json!({"addressPrefix": "10.0.0.0/16"}), RunMode::Check);
    let same = LaunchRequest { config_version: ConfigVersion::new("cv-1"), ..same };
    let check = p.launch(&same).await.unwrap();
    let done = terminal(&p, &check.handle, WAIT).await;
    assert_eq!(done.changes, Some(vec![]), "in sync: {:?}", done.changes);

    // A delete's check says the file would go, and it stays.
    let delete = LaunchRequest { action: JobAction::Delete, ..network("op4:4", json!({}), RunMode::Check) };
    let check = p.launch(&delete).await.unwrap();
    let done = terminal(&p, &check.handle, WAIT).await;
    assert_eq!(done.state, JobState::Succeeded, "{}", done.error_details);
    let changes = done.changes.unwrap();
    assert_eq!(changes.iter().map(|c| c.task.as_str()).collect::<Vec<_>>(), ["Remove the recorded resource"]);
    assert_eq!(recorded(state.path()), Some(before), "a delete's check removes nothing");
}

#[tokio::test]
async fn a_check_job_found_again_after_a_restart_is_still_a_check() {
    let fx = Fixture::new();
    let state = tempfile::tempdir().unwrap();
    let req = network("op1:1", json!({"addressPrefix": "10.0.0.0/16"}), RunMode::Check);
    let launched = examples(&fx, state.path()).launch(&req).await.unwrap();
    let found = examples(&fx, state.path()).find(&req).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].handle, launched.handle, "the handle still says check");
    let done = terminal(&examples(&fx, state.path()), &found[0].handle, WAIT).await;
    assert!(done.changes.is_some());
    assert_eq!(recorded(state.path()), None, "a create's check creates nothing");
}
