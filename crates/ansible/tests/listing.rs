//! Listing the local provider's jobs (`jobs_since`) against real ansible-runner runs.

mod common;

use std::time::{Duration, SystemTime};

use common::{Fixture, eventually, request, terminal};
use serde_json::json;
use slipway_domain::{JobState, Timestamp};
use slipway_provider::{JobAction, ListedJob, Provider};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn keys(listed: &[ListedJob]) -> Vec<&str> {
    listed.iter().map(|j| j.key.as_str()).collect()
}

#[tokio::test]
async fn jobs_are_listed_with_their_resource_and_action_oldest_first() {
    let fx = Fixture::new();
    let gate = fx.playbooks.path().join("gate");
    fx.playbook("create-subnet.yml", "    - debug: msg=first\n");
    fx.playbook("delete-virtual-network.yml", &format!("    - wait_for: path={} timeout=60\n", gate.display()));
    // What else a work dir may hold: none of it is a job, and none of it fails the listing.
    let work = fx.work.path();
    std::fs::create_dir(work.join("stray")).unwrap();
    std::fs::write(work.join("stray/notes"), "not a job").unwrap();
    std::fs::write(work.join("stray-file"), "").unwrap();
    std::fs::create_dir(work.join("corrupt_1")).unwrap();
    std::fs::write(work.join("corrupt_1/job.json"), "{").unwrap();
    let p = fx.provider();
    assert_eq!(p.jobs_since(None).await.unwrap(), Vec::new());

    let before = Timestamp::from_system(SystemTime::now());
    let first_req = request("list:1", "Subnet", json!({}));
    let first = p.launch(&first_req).await.unwrap();
    terminal(&p, &first.handle, RUN_TIMEOUT).await;
    let mut second_req = request("list:2", "VirtualNetwork", json!({}));
    second_req.action = JobAction::Delete;
    let second = p.launch(&second_req).await.unwrap();

    let listed = p.jobs_since(None).await.unwrap();
    assert_eq!(keys(&listed), ["list:1", "list:2"], "{listed:?}");
    let (a, b) = (&listed[0], &listed[1]);
    assert_eq!((a.resource_id.clone(), a.action.as_str()), (first_req.resource_id.to_string(), "create"));
    assert_eq!((b.resource_id.clone(), b.action.as_str()), (second_req.resource_id.to_string(), "delete"));
    assert_ne!(a.resource_id, b.resource_id);
    assert_eq!((&a.job.handle, a.job.template.as_str()), (&first.handle, "create-subnet.yml"));
    assert_eq!((&b.job.handle, b.job.template.as_str()), (&second.handle, "delete-virtual-network.yml"));
    assert_eq!((a.job.state, b.job.state), (JobState::Succeeded, JobState::Running));
    let (first_at, second_at) = (a.launched_at.expect("a launch time"), b.launched_at.expect("a launch time"));
    assert!(before <= first_at && first_at < second_at, "{before} {first_at} {second_at}");

    // Another process sharing the work dir holds a key's launch lock: listing needs none.
    let locks = work.join(".locks");
    let other =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(locks.join("list_2")).unwrap();
    other.lock().unwrap();
    assert_eq!(keys(&p.jobs_since(None).await.unwrap()), ["list:1", "list:2"]);
    drop(other);

    std::fs::write(&gate, "").unwrap();
    let ended = eventually("both listed jobs to end", RUN_TIMEOUT, async || {
        let listed = p.jobs_since(None).await.unwrap();
        listed.iter().all(|j| j.job.state.is_terminal()).then_some(listed)
    })
    .await;
    assert_eq!(keys(&ended), ["list:1", "list:2"]);
    assert!(ended.iter().all(|j| j.job.state == JobState::Succeeded), "{ended:?}");
    assert_eq!(ended[1].launched_at, Some(second_at), "the launch time stays the launch's");

    // `since` is inclusive, by the launch stamps.
    assert_eq!(keys(&p.jobs_since(Some(first_at)).await.unwrap()), ["list:1", "list:2"]);
    let after_first = Timestamp::from_millis(first_at.as_millis() + 1);
    assert_eq!(keys(&p.jobs_since(Some(after_first)).await.unwrap()), ["list:2"]);
    assert_eq!(keys(&p.jobs_since(Some(second_at)).await.unwrap()), ["list:2"]);
    let after_second = Timestamp::from_millis(second_at.as_millis() + 1);
    assert_eq!(p.jobs_since(Some(after_second)).await.unwrap(), Vec::new());

    // A restarted provider lists the same from the records alone.
    assert_eq!(fx.provider().jobs_since(None).await.unwrap(), ended);
}

#[tokio::test]
async fn records_of_earlier_versions_still_read_but_are_not_listed() {
    let fx = Fixture::new();
    // As an earlier version wrote it: no resource id, no action; its runner long gone.
    let dir = fx.work.path().join("old_1");
    std::fs::create_dir_all(dir.join("artifacts/run")).unwrap();
    let record = json!({"key": "old:1", "pid": i32::MAX, "start_time_ticks": 1, "playbook": "create-subnet.yml",
        "launched_at": "2026-01-02T03:04:05.678Z"});
    std::fs::write(dir.join("job.json"), record.to_string()).unwrap();
    std::fs::write(dir.join("artifacts/run/status"), "successful").unwrap();
    std::fs::write(dir.join("artifacts/run/rc"), "0").unwrap();
    let p = fx.provider();

    let found = p.find(&request("old:1", "Subnet", json!({}))).await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].handle.job_id, "old_1");
    assert_eq!((found[0].state, found[0].template.as_str()), (JobState::Succeeded, "create-subnet.yml"));
    // Which resource it ran for is not known, so it cannot be matched to one.
    assert_eq!(p.jobs_since(None).await.unwrap(), Vec::new());
}
