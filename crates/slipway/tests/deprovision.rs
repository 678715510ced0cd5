//! A deleted subscription deprovisions in dependency order, black-box with real playbooks:
//! a network, its subnet and an instance that references the subnet are all deleted, and
//! each delete job starts only after the jobs of what depends on it ended — the instance
//! (a referrer) before the subnet it references, the subnet (a child) before its network.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::common::{SUB, TestServer, header, rid};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(120);

/// When each delete playbook's job was launched and when its runner wrote its exit code, by
/// playbook name.
fn delete_jobs(jobs: &Path) -> Vec<(String, SystemTime, SystemTime)> {
    let mut found = Vec::new();
    for dir in std::fs::read_dir(jobs).expect("the jobs directory").flatten() {
        let Ok(record) = std::fs::read_to_string(dir.path().join("job.json")) else { continue };
        let record: Value = serde_json::from_str(&record).expect("job.json");
        let playbook = record["playbook"].as_str().unwrap_or_default().to_string();
        if !playbook.contains("-delete-") {
            continue;
        }
        let launched = std::fs::metadata(dir.path().join("job.json")).and_then(|m| m.modified()).expect("launched");
        let ended = std::fs::metadata(dir.path().join("artifacts/run/rc")).and_then(|m| m.modified()).expect("ended");
        found.push((playbook, launched, ended));
    }
    found
}

async fn create(s: &TestServer, path: &str, body: Value) {
    let r = s.put(path, body).await;
    assert_eq!(r.status().as_u16(), 201, "{path}");
    let url = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(s.wait_terminal(&url, T).await["status"], "Succeeded", "{path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referrers_and_children_are_deprovisioned_before_what_they_depend_on() {
    let mut s = TestServer::start().await;
    let sub = format!("/subscriptions/{SUB}");
    let registered = json!({"state": "Registered", "properties": {"tenantId": "contoso"}});
    assert!(s.http.put(s.url(&sub)).json(&registered).send().await.unwrap().status().is_success());
    let vnet = rid("virtualNetworks", "v1");
    let subnet = format!("{vnet}/subnets/s1");
    let vm = rid("computeInstances", "vm1");
    create(&s, &vnet, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    create(&s, &subnet, json!({"location": "local", "properties": {}})).await;
    let instance = json!({"location": "local", "properties": {"size": "small", "image": "debian", "subnetId": subnet}});
    create(&s, &vm, instance).await;

    let deleted = json!({"state": "Deleted", "properties": {"tenantId": "contoso"}});
    assert_eq!(s.http.put(s.url(&sub)).json(&deleted).send().await.unwrap().status().as_u16(), 200);
    for path in [&vm, &subnet, &vnet] {
        s.wait_resource(path, T, |code, _| code == 404).await;
    }

    let jobs = delete_jobs(&s.dir.path().join("jobs"));
    let job = |kind: &str| {
        jobs.iter()
            .find(|(playbook, ..)| playbook.contains(kind))
            .unwrap_or_else(|| panic!("no delete job for {kind}: {jobs:?}"))
    };
    let (instance, subnet, network) = (job("compute-instance"), job("subnet"), job("virtual-network"));
    assert!(subnet.1 >= instance.2, "the subnet's delete started after the instance's ended: {jobs:?}");
    assert!(network.1 >= subnet.2, "the network's delete started after its subnet's ended: {jobs:?}");
    s.stop().await;
}
