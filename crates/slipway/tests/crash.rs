//! Crash and restart: the real `slipway` binary is killed with SIGKILL (or stopped with
//! SIGTERM) while operations are in flight, restarted on the same database, and every
//! operation must still end — with no job launched twice for one idempotency key, and the
//! event feed telling exactly what was committed.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::common::{API, config_text, free_port, header, path_of, rid, spawn_slipway};
use serde_json::{Value, json};
use slipway_test_support::{eventually, ready_within};

const T: Duration = Duration::from_secs(120);

struct Node {
    child: Child,
    base: String,
}

fn write_config(dir: &Path, port: u16) -> PathBuf {
    let text = config_text(dir, "").replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""));
    let path = dir.join("slipway.toml");
    std::fs::write(&path, text).unwrap();
    path
}

async fn start_node(dir: &Path, config: &Path, port: u16, run: usize) -> Node {
    let child = spawn_slipway(config, &dir.join(format!("slipway-{run}.log")), "info");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let ready = ready_within(&http, &base, T).await;
    ready.unwrap_or_else(|e| panic!("slipway did not become ready ({e}); see {}", dir.display()));
    Node { child, base }
}

fn url(base: &str, path: &str) -> String {
    format!("{base}{path}?api-version={API}")
}

/// Idempotency keys of every job the example playbooks actually started.
fn launches(dir: &Path) -> HashMap<String, usize> {
    let text = std::fs::read_to_string(dir.join("state/launches.log")).unwrap_or_default();
    let mut counts = HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        *counts.entry(line.to_string()).or_insert(0) += 1;
    }
    counts
}

async fn status(http: &reqwest::Client, status_url: &str) -> Value {
    http.get(status_url).send().await.unwrap().json().await.unwrap()
}

async fn wait_all_terminal(http: &reqwest::Client, base: &str, paths: &[String]) -> Vec<Value> {
    eventually("every operation to end", T, async || {
        let mut done = Vec::new();
        for p in paths {
            let body = status(http, &format!("{base}{p}")).await;
            if !matches!(body["status"].as_str(), Some("Succeeded" | "Failed" | "Canceled")) {
                return Err(format!("not terminal: {body}"));
            }
            done.push(body);
        }
        Ok(done)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_flight_then_restart_finishes_everything_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port);
    let http = reqwest::Client::new();
    let mut node = start_node(dir.path(), &config, port, 1).await;

    let mut ops = Vec::new();
    for i in 0..8 {
        let props = json!({"size": "small", "image": "debian", "delaySeconds": 2});
        let r = http
            .put(url(&node.base, &rid("computeInstances", &format!("vm{i}"))))
            .json(&json!({"location": "local", "properties": props}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        ops.push(path_of(&header(&r, "azure-asyncoperation").unwrap()));
    }
    // Kill while jobs are launching and running (some Accepted, some Provisioning).
    eventually("two jobs running", T, async || {
        let mut running = 0;
        for p in &ops {
            if status(&http, &format!("{}{p}", node.base)).await["status"] == "Provisioning" {
                running += 1;
            }
        }
        running >= 2
    })
    .await;
    let progress = |base: String| {
        let (http, ops, dir) = (http.clone(), ops.clone(), dir.path().to_path_buf());
        async move {
            let mut statuses = Vec::new();
            for p in &ops {
                statuses.push(status(&http, &format!("{base}{p}")).await["status"].clone());
            }
            (statuses, launches(&dir).values().sum::<usize>())
        }
    };
    let at_first_kill = progress(node.base.clone()).await;
    node.child.kill().unwrap(); // SIGKILL
    node.child.wait().unwrap();

    // A second life, killed again as soon as it has recorded some progress (an operation
    // moved on, or a job launched), then a third that finishes the work.
    let mut node = start_node(dir.path(), &config, port, 2).await;
    eventually("progress in the second life", T, async || progress(node.base.clone()).await != at_first_kill).await;
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let mut node = start_node(dir.path(), &config, port, 3).await;

    let done = wait_all_terminal(&http, &node.base, &ops).await;
    for d in &done {
        assert_eq!(d["status"], "Succeeded", "{d}");
    }
    for i in 0..8 {
        let r: Value = http
            .get(url(&node.base, &rid("computeInstances", &format!("vm{i}"))))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["properties"]["provisioningState"], "Succeeded", "{r}");
    }
    let counts = launches(dir.path());
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "jobs launched more than once: {twice:?}");
    assert_eq!(counts.len(), 8, "one job per operation: {counts:?}");
    events_tell_what_was_committed(&http, &node.base, &done).await;
    node.child.kill().unwrap();
    node.child.wait().unwrap();
}

/// The event feed after two SIGKILLs (docs/store.md#the-event-feed): positions dense from 1,
/// each resource created once and its last state event its state now, each operation told
/// once without a previous status (created) and last with its status now — no committed
/// change without its event, no event twice.
async fn events_tell_what_was_committed(http: &reqwest::Client, base: &str, operations: &[Value]) {
    let mut events = Vec::new();
    let mut next =
        Some(format!("{base}/subscriptions/{}/providers/Slipway.Resources/events?api-version={API}", common::SUB));
    while let Some(page_url) = next {
        let page: Value = http.get(&page_url).send().await.unwrap().json().await.unwrap();
        events.extend(page["value"].as_array().unwrap_or_else(|| panic!("{page}")).iter().cloned());
        next = page["nextLink"].as_str().map(str::to_string);
    }
    let positions: Vec<u64> = events.iter().map(|e| e["id"].as_str().unwrap().parse().unwrap()).collect();
    assert_eq!(positions, (1..=events.len() as u64).collect::<Vec<_>>(), "dense, in order");
    for i in 0..8 {
        let id = rid("computeInstances", &format!("vm{i}"));
        let own: Vec<&Value> = events.iter().filter(|e| e["resourceId"] == id.as_str()).collect();
        let created = own.iter().filter(|e| e["type"] == "resourceCreated").count();
        let last_state = own.iter().rev().find_map(|e| e["provisioningState"].as_str());
        assert_eq!((created, last_state), (1, Some("Succeeded")), "{id}: {own:?}");
    }
    for op in operations {
        let name = op["name"].as_str().unwrap();
        let own: Vec<&Value> = events.iter().filter(|e| e["operation"]["name"] == name).collect();
        let created = own.iter().filter(|e| e["operation"].get("previousStatus").is_none()).count();
        let last = own.last().and_then(|e| e["operation"]["status"].as_str());
        assert_eq!((created, last), (1, op["status"].as_str()), "{name}: {own:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_and_a_restart_adopts_the_running_job() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port);
    let http = reqwest::Client::new();
    let mut node = start_node(dir.path(), &config, port, 1).await;
    let r = http
        .put(url(&node.base, &rid("virtualNetworks", "graceful")))
        .json(&json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "delaySeconds": 3}}))
        .send()
        .await
        .unwrap();
    let op = path_of(&header(&r, "azure-asyncoperation").unwrap());
    let start = Instant::now();
    eventually("the job running", T, async || {
        status(&http, &format!("{}{op}", node.base)).await["status"] == "Provisioning"
    })
    .await;
    // SIGTERM: stop claiming, record in-flight effects, exit 0.
    let pid = node.child.id() as i32;
    assert!(Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let exit = tokio::task::spawn_blocking(move || node.child.wait().unwrap()).await.unwrap();
    assert!(exit.success(), "graceful shutdown exits 0: {exit:?}");
    assert!(start.elapsed() < Duration::from_secs(30));

    let mut node = start_node(dir.path(), &config, port, 2).await;
    let done = wait_all_terminal(&http, &node.base, std::slice::from_ref(&op)).await;
    assert_eq!(done[0]["status"], "Succeeded", "{}", done[0]);
    let counts = launches(dir.path());
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert!(counts.values().all(|n| *n == 1), "the running job was adopted, not relaunched: {counts:?}");
    node.child.kill().unwrap();
    node.child.wait().unwrap();
}

/// Waits until `f` holds for the status document at `path`.
async fn until_status(http: &reqwest::Client, base: &str, path: &str, what: &str, f: impl Fn(&Value) -> bool) {
    eventually(what, T, async || {
        let body = status(http, &format!("{base}{path}")).await;
        if f(&body) { Ok(()) } else { Err(body.to_string()) }
    })
    .await;
}

/// SIGKILL while children wait for their parent, and again in the middle of the parent's
/// cascading delete: after each restart every operation ends, and each job ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_dependency_wait_and_a_cascade() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port);
    let http = reqwest::Client::new();
    let mut node = start_node(dir.path(), &config, port, 1).await;
    let vnet = rid("virtualNetworks", "v1");
    let r = http
        .put(url(&node.base, &vnet))
        .json(&json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "delaySeconds": 3}}))
        .send()
        .await
        .unwrap();
    let mut ops = vec![path_of(&header(&r, "azure-asyncoperation").unwrap())];
    for i in 0..3 {
        let props = json!({"deleteDelaySeconds": 2});
        let r = http
            .put(url(&node.base, &format!("{vnet}/subnets/s{i}")))
            .json(&json!({"location": "local", "properties": props}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        ops.push(path_of(&header(&r, "azure-asyncoperation").unwrap()));
    }
    // Killed while the children wait for their parent.
    until_status(&http, &node.base, &ops[3], "waiting for the parent", |s| {
        s["properties"]["waitingOn"] == vnet.as_str()
    })
    .await;
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let mut node = start_node(dir.path(), &config, port, 2).await;
    for d in wait_all_terminal(&http, &node.base, &ops).await {
        assert_eq!(d["status"], "Succeeded", "{d}");
    }

    // Killed once the cascade has started the children's deletes.
    let r = http.delete(url(&node.base, &vnet)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let delete = path_of(&header(&r, "azure-asyncoperation").unwrap());
    until_status(&http, &node.base, &delete, "cascading", |s| {
        s["properties"]["childOperations"].as_array().is_some_and(|c| c.len() == 3)
    })
    .await;
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let mut node = start_node(dir.path(), &config, port, 3).await;
    let done = wait_all_terminal(&http, &node.base, std::slice::from_ref(&delete)).await;
    assert_eq!(done[0]["status"], "Succeeded", "{}", done[0]);
    for path in std::iter::once(vnet.clone()).chain((0..3).map(|i| format!("{vnet}/subnets/s{i}"))) {
        assert_eq!(http.get(url(&node.base, &path)).send().await.unwrap().status().as_u16(), 404, "{path}");
    }
    let counts = launches(dir.path());
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "jobs launched more than once: {twice:?}");
    assert_eq!(counts.len(), 8, "four creates and four deletes, once each: {counts:?}");
    node.child.kill().unwrap();
    node.child.wait().unwrap();
}

/// The activity log across a SIGKILL in the middle of a burst of creates
/// (docs/governance.md#the-activity-log): after a restart, the creates the log records are
/// exactly the resources that exist — each once — whichever answers the client got before
/// the kill; every create answered `201` is among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_burst_leaves_an_activity_entry_exactly_per_committed_create() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port);
    let http = reqwest::Client::new();
    let mut node = start_node(dir.path(), &config, port, 1).await;
    let answered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut burst = tokio::task::JoinSet::new();
    for i in 0..80 {
        let (http, base, answered) = (http.clone(), node.base.clone(), answered.clone());
        burst.spawn(async move {
            let name = format!("net{i}");
            let body = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}});
            if let Ok(r) = http.put(url(&base, &rid("virtualNetworks", &name))).json(&body).send().await
                && r.status().as_u16() == 201
            {
                answered.lock().unwrap().push(name);
            }
        });
    }
    eventually("some creates answered", T, async || answered.lock().unwrap().len() >= 10).await;
    node.child.kill().unwrap(); // SIGKILL, with creates still in flight
    node.child.wait().unwrap();
    while burst.join_next().await.is_some() {}
    let answered: Vec<String> = answered.lock().unwrap().clone();

    let mut node = start_node(dir.path(), &config, port, 2).await;
    let mut resources = Vec::new();
    let mut next =
        Some(url(&node.base, &format!("/subscriptions/{}/providers/Slipway.Example/virtualNetworks", common::SUB)));
    while let Some(page_url) = next {
        let page: Value = http.get(&page_url).send().await.unwrap().json().await.unwrap();
        resources.extend(page["value"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()));
        next = page["nextLink"].as_str().map(str::to_string);
    }
    let mut logged = Vec::new();
    let filter = "status eq 'Accepted'";
    let mut next = Some(format!(
        "{}/subscriptions/{}/providers/Microsoft.Insights/eventtypes/management/values?api-version=2015-04-01&$filter={}",
        node.base,
        common::SUB,
        filter.replace(' ', "%20")
    ));
    while let Some(page_url) = next {
        let page: Value = http.get(&page_url).send().await.unwrap().json().await.unwrap();
        for e in page["value"].as_array().unwrap_or_else(|| panic!("{page}")) {
            if e["subStatus"]["value"] == "Created"
                && e["operationName"]["value"] == "Slipway.Example/virtualNetworks/write"
            {
                logged.push(e["resourceId"].as_str().unwrap().rsplit('/').next().unwrap().to_string());
            }
        }
        next = page["nextLink"].as_str().map(str::to_string);
    }
    resources.sort();
    logged.sort();
    assert_eq!(logged, resources, "one logged create per resource that exists, and none for one that does not");
    assert!(answered.iter().all(|n| resources.contains(n)), "every answered create committed: {answered:?}");
    println!("{} creates answered before the kill, {} committed and logged", answered.len(), resources.len());
    node.child.kill().unwrap();
    node.child.wait().unwrap();
}
