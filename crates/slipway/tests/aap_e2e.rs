//! Slipway with the `aap` provider against the AWX-API simulator, driven through the ARM
//! API: the whole lifecycle, failures with AAP's traceback, cancel, delete-while-running,
//! push hints, and a SIGKILL between launch and record that must not duplicate the job.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{API, free_port, header, rid};
use aap_sim::{Faults, Sim, SimConfig, SimWebhook};
use serde_json::{Value, json};
use slipway::app::App;
use slipway::config::Config;
use slipway_domain::SystemClock;
use slipway_test_support::{eventually, wait_ready};

const T: Duration = Duration::from_secs(60);
const HOOK_TOKEN: &str = "e2e-hook-token";

async fn sim(webhook_to: Option<u16>) -> Sim {
    let mut config = SimConfig { tick_ms: 20, token: Some("sim-token".into()), ..SimConfig::default() };
    for t in &mut config.job_templates {
        t.duration_seconds = 0.5;
        // One template a what-if cannot use: it does not let a launch choose check mode.
        if t.name == "slipway-create-compute-instance" {
            t.ask_job_type_on_launch = false;
        }
        // A playbook of several tasks, whose progress shows while it runs.
        if t.name == "slipway-create-virtual-network" {
            t.tasks = 3;
        }
    }
    if let Some(port) = webhook_to {
        config.notifications.push(SimWebhook {
            url: format!("http://127.0.0.1:{port}/hooks/aap"),
            headers: BTreeMap::from([("X-Slipway-Token".to_string(), HOOK_TOKEN.to_string())]),
            ..SimWebhook::default()
        });
    }
    Sim::start("127.0.0.1:0", config).await.expect("start aap-sim")
}

fn config_text(dir: &Path, port: u16, sim: &Sim, poll_seconds: f64, token: &str) -> String {
    std::fs::write(dir.join("aap-token"), token).unwrap();
    std::fs::write(dir.join("hook-token"), HOOK_TOKEN).unwrap();
    let mut types = String::new();
    for (ty, kind, extra) in [
        ("virtualNetworks", "VirtualNetwork", ""),
        ("computeInstances", "ComputeInstance", "[types.actions.restart]\n[types.actions.stop]\n"),
        ("clusters", "Cluster", "preflight = true\n[types.actions.upgrade]\n"),
        ("clusters/nodePools", "NodePool", ""),
    ] {
        types.push_str(&format!(
            "[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"{ty}\"\nkind = \"{kind}\"\napi_versions = [\"{API}\"]\nprovider = \"aap\"\npoll_interval_seconds = {poll_seconds}\n{extra}"
        ));
    }
    format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
retry_after_seconds = 0
[store]
url = "sqlite:{db}"
[engine]
node_name = "e2e"
shutdown_grace_seconds = 5
[[providers]]
name = "aap"
type = "aap"
url = "{url}"
template_prefix = "slipway"
token_file = "{token}"
webhook_token_file = "{hook}"
request_timeout_seconds = 5
progress_interval_seconds = 0
progress_reads_per_second = 1000
{types}"#,
        db = dir.join("slipway.db").display(),
        url = sim.base_url(),
        token = dir.join("aap-token").display(),
        hook = dir.join("hook-token").display(),
    )
}

struct Harness {
    _dir: tempfile::TempDir,
    base: String,
    app: Option<App>,
    sim: Sim,
    http: reqwest::Client,
}

impl Harness {
    async fn start(webhooks: bool, poll_seconds: f64) -> Harness {
        Harness::start_with_token(webhooks, poll_seconds, "sim-token").await
    }

    /// With `token` as the provider's AAP token (the simulator accepts `sim-token`).
    async fn start_with_token(webhooks: bool, poll_seconds: f64, token: &str) -> Harness {
        common::init_logging();
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let sim = sim(webhooks.then_some(port)).await;
        let path = dir.path().join("slipway.toml");
        std::fs::write(&path, config_text(dir.path(), port, &sim, poll_seconds, token)).unwrap();
        let config = Config::load(Some(&path), []).unwrap();
        let app = App::start(config, Arc::new(SystemClock)).await.expect("start slipway");
        Harness {
            _dir: dir,
            base: format!("http://127.0.0.1:{port}"),
            app: Some(app),
            sim,
            http: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}?api-version={API}", self.base)
    }

    async fn put(&self, path: &str, body: Value) -> reqwest::Response {
        self.http.put(self.url(path)).json(&body).send().await.unwrap()
    }

    async fn op(&self, status_url: &str) -> Value {
        self.http.get(status_url).send().await.unwrap().json().await.unwrap()
    }

    async fn wait_op(&self, status_url: &str, want: &str) -> Value {
        eventually(&format!("the operation {want}"), T, async || {
            let body = self.op(status_url).await;
            if body["status"] == want { Ok(body) } else { Err(body.to_string()) }
        })
        .await
    }

    async fn stop(mut self) {
        if let Some(app) = self.app.take() {
            app.shutdown().await.unwrap();
        }
        self.sim.shutdown().await;
    }
}

fn jobs_by_key(sim: &Sim) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for job in sim.handle().jobs() {
        let key = job.extra_vars["slipway_idempotency_key"].as_str().unwrap_or_default().to_string();
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// A running job's progress from its task-start events: the current task from the first
/// run, and — AWX having no task list to count — a percentage once an earlier run of the
/// same kind told how many tasks to expect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_shows_the_current_task_and_then_a_percentage() {
    let h = Harness::start(false, 0.1).await;
    let id = rid("virtualNetworks", "vnet-progress");
    let mut runs = Vec::new();
    for space in ["10.0.0.0/16", "10.1.0.0/16"] {
        let r =
            h.put(&id, json!({"location": "local", "properties": {"addressSpace": space, "delaySeconds": 3}})).await;
        let seen = common::progress::follow(&h.http, &header(&r, "azure-asyncoperation").unwrap(), T).await;
        common::progress::assert_monotonic(&seen);
        assert!(seen.iter().any(|(_, _, t)| t.as_deref() == Some("simulated task 2 of 3")), "{seen:?}");
        runs.push(seen);
    }
    assert!(runs[0].iter().all(|(_, p, _)| p.is_none()), "nothing to expect a total from: {:?}", runs[0]);
    // The create started four tasks (three, then the record task): the second of them is 25%.
    assert!(runs[1].iter().any(|(s, p, _)| s == "Updating" && *p == Some(25)), "{:?}", runs[1]);
    h.stop().await;
}

/// The provider is checked at startup: `/readyz` and `slipway_provider_ready` say whether it
/// can take work, and a wrong token shows there (and in the log) before any tenant's job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_shows_each_provider_and_a_refused_token() {
    for (token, word, gauge) in [("sim-token", "ready", 1), ("wrong-token", "not ready (see the server log)", 0)] {
        let h = Harness::start_with_token(false, 0.2, token).await;
        let want = format!("provider aap: {word}\n");
        eventually(&format!("{token}: /readyz saying {want:?}"), T, async || {
            let body = h.http.get(format!("{}/readyz", h.base)).send().await.unwrap().text().await.unwrap();
            if body.contains(&want) { Ok(()) } else { Err(body) }
        })
        .await;
        let metrics = h.http.get(format!("{}/metrics", h.base)).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains(&format!("slipway_provider_ready{{provider=\"aap\"}} {gauge}\n")), "{metrics}");
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_through_aap() {
    let h = Harness::start(false, 0.2).await;
    let id = rid("virtualNetworks", "vnet-aap");
    let r = h.put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    assert_eq!(r.status().as_u16(), 201);
    let create = header(&r, "azure-asyncoperation").unwrap();
    h.wait_op(&create, "Succeeded").await;
    let jobs = h.sim.handle().jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].template_name, "slipway-create-virtual-network");
    assert_eq!(jobs[0].extra_vars["slipway"]["resource"]["properties"]["addressSpace"], "10.0.0.0/16");

    // A failing update carries AAP's traceback into the operation's error.
    let r = h
        .put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "simulateFailure": true}}))
        .await;
    assert_eq!(r.status().as_u16(), 200);
    let failed = h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Failed").await;
    assert_eq!(failed["error"]["code"], "ProvisioningFailed");
    assert!(failed["error"]["message"].as_str().unwrap().contains("simulated failure"), "{failed}");
    // The job's output is the controller's stdout of that job.
    let failed_url = header(&r, "azure-asyncoperation").unwrap();
    let logs = h.http.get(failed_url.replace("?api-version", "/logs?api-version")).send().await.unwrap();
    assert_eq!(logs.status().as_u16(), 200);
    let aap_job = header(&logs, "x-slipway-job-id").unwrap();
    assert_eq!(Some(aap_job.as_str()), h.sim.handle().jobs().last().map(|j| j.id.to_string()).as_deref());
    let text = logs.text().await.unwrap();
    assert!(text.contains("fatal: [localhost]: FAILED!") && text.contains("simulated failure"), "{text}");
    assert!(text.contains("PLAY RECAP"), "{text}");
    // The job history links each job to its page in the controller.
    let history: Value = h.http.get(h.url(&format!("{id}/jobs"))).send().await.unwrap().json().await.unwrap();
    assert_eq!(history["value"][0]["jobId"], aap_job.as_str(), "{history}");
    assert_eq!(history["value"][0]["link"], format!("{}/#/jobs/playbook/{aap_job}/output", h.sim.base_url()));

    // Delete runs the delete template; the resource is gone afterwards.
    let r = h.http.delete(h.url(&id)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 202);
    h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    assert_eq!(h.http.get(h.url(&id)).send().await.unwrap().status().as_u16(), 404);
    let names: Vec<String> = h.sim.handle().jobs().into_iter().map(|j| j.template_name).collect();
    assert_eq!(names.last().map(String::as_str), Some("slipway-delete-virtual-network"), "{names:?}");
    assert!(jobs_by_key(&h.sim).values().all(|n| *n == 1), "one AAP job per idempotency key");
    h.stop().await;
}

/// A what-if runs the create template in check mode (`job_type: check`, diff on) and
/// reports the record task's diff; nothing changes on the controller's side. A template that
/// does not prompt for its job type ends the what-if `WhatIfNotSupported`, launching nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_runs_the_template_in_check_mode() {
    let h = Harness::start(false, 0.2).await;
    let id = rid("virtualNetworks", "vnet-whatif");
    let r = h.put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    let recorded = h.sim.handle().resource_state(&id).expect("the create job recorded the network");

    let proposal = json!({"location": "local", "properties": {"addressSpace": "10.1.0.0/16"}});
    let r = h.http.post(h.url(&format!("{id}/whatIf"))).json(&proposal).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let done = h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    let change = &done["properties"]["changes"][0];
    assert_eq!(change["changeType"], "Modify", "{done}");
    let task = &change["automation"]["changedTasks"][0];
    assert_eq!(
        (task["task"].as_str(), task["host"].as_str()),
        (Some("Record the resource"), Some("localhost")),
        "{change}"
    );
    assert!(task["diff"]["before"].as_str().unwrap().contains("10.0.0.0/16"), "{task}");
    assert!(task["diff"]["after"].as_str().unwrap().contains("10.1.0.0/16"), "{task}");
    let check = h.sim.handle().jobs().into_iter().last().unwrap();
    assert_eq!((check.job_type.as_str(), check.diff_mode), ("check", true));
    assert_eq!(h.sim.handle().resource_state(&id), Some(recorded), "a check changes nothing");

    let vm = rid("computeInstances", "vm-whatif");
    let r = h.put(&vm, json!({"location": "local", "properties": {"size": "small", "image": "debian"}})).await;
    h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    let launched = h.sim.handle().job_count();
    let proposal = json!({"location": "local", "properties": {"size": "large", "image": "debian"}});
    let r = h.http.post(h.url(&format!("{vm}/whatIf"))).json(&proposal).send().await.unwrap();
    let refused = h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Failed").await;
    assert_eq!(refused["error"]["code"], "WhatIfNotSupported", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("ask_job_type_on_launch"), "{refused}");
    assert_eq!(h.sim.handle().job_count(), launched, "nothing was launched");
    h.stop().await;
}

/// The job's `artifacts` (`set_stats` `slipway_outputs`) become the resource's outputs,
/// and the delete job receives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_come_from_aap_job_artifacts() {
    let h = Harness::start(false, 0.2).await;
    let id = rid("computeInstances", "vm-out");
    let r = h.put(&id, json!({"location": "local", "properties": {"size": "small", "image": "x"}})).await;
    h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    let res: Value = h.http.get(h.url(&id)).send().await.unwrap().json().await.unwrap();
    assert_eq!(res["properties"]["ipAddress"], "10.0.0.4", "{res}");
    assert_eq!(res["properties"]["hostName"], "vm-out", "{res}");
    let r = h.http.delete(h.url(&id)).send().await.unwrap();
    let delete_op = h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    let delete =
        h.sim.handle().jobs().into_iter().find(|j| j.template_name == "slipway-delete-compute-instance").unwrap();
    // The delete job is the delete operation's, and says which version it removes.
    let envelope = &delete.extra_vars["slipway"];
    assert_eq!(envelope["operationId"], delete_op["name"], "{envelope}");
    assert!(envelope["idempotencyKey"].as_str().unwrap().starts_with(delete_op["name"].as_str().unwrap()));
    assert!(!envelope["configVersion"].as_str().unwrap_or_default().is_empty(), "{envelope}");
    assert_eq!(
        delete.extra_vars["slipway"]["resource"]["outputs"],
        json!({"ipAddress": "10.0.0.4", "hostName": "vm-out", "powerState": "Running"})
    );
    h.stop().await;
}

/// An action runs its own template with the request body, and its artifacts merge into the
/// outputs; a cluster's preflight template runs before its create; deleting the cluster
/// deletes its node pools first, each job launched once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_preflight_and_cascades_through_aap() {
    let h = Harness::start(false, 0.2).await;
    let post = |path: String, body: Value| h.http.post(h.url(&path)).json(&body).send();
    let vm = rid("computeInstances", "vm-act").replace("computeInstances", "computeinstances");
    let r = h.put(&vm, json!({"location": "local", "properties": {"size": "small", "image": "x"}})).await;
    h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    let r = post(format!("{vm}/stop"), json!({"graceful": true})).await.unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let done = h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    assert_eq!(done["properties"]["action"], "stop");
    let res: Value = h.http.get(h.url(&vm)).send().await.unwrap().json().await.unwrap();
    assert_eq!(res["properties"]["powerState"], "Stopped", "{res}");
    assert_eq!(res["properties"]["ipAddress"], "10.0.0.4", "outputs merge: {res}");
    let stop = h.sim.handle().jobs().into_iter().find(|j| j.template_name == "slipway-stop-compute-instance").unwrap();
    assert_eq!(stop.extra_vars["slipway"]["action"], "stop");
    // The type as configured, though the request spelled it in lowercase.
    assert_eq!(stop.extra_vars["slipway"]["resource"]["type"], "Slipway.Example/computeInstances");
    assert_eq!(stop.extra_vars["slipway"]["parameters"], json!({"graceful": true}));

    let cluster = rid("clusters", "c1");
    let r = h.put(&cluster, json!({"location": "local", "properties": {"version": "4.18"}})).await;
    let create = header(&r, "azure-asyncoperation").unwrap();
    let pools: Vec<String> = (1..=2).map(|i| format!("{cluster}/nodePools/p{i}")).collect();
    for (i, pool) in pools.iter().enumerate() {
        let r = h.put(pool, json!({"location": "local", "properties": {"replicas": i + 1}})).await;
        h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    }
    h.wait_op(&create, "Succeeded").await;
    let res: Value = h.http.get(h.url(&cluster)).send().await.unwrap().json().await.unwrap();
    assert_eq!(res["properties"]["currentVersion"], "4.18", "{res}");
    let pool: Value = h.http.get(h.url(&pools[1])).send().await.unwrap().json().await.unwrap();
    assert_eq!(pool["properties"]["readyReplicas"], 2, "{pool}");
    let r = post(format!("{cluster}/upgrade"), json!({"version": "4.19"})).await.unwrap();
    h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    let r = h.http.delete(h.url(&cluster)).send().await.unwrap();
    let deleted = h.wait_op(&header(&r, "azure-asyncoperation").unwrap(), "Succeeded").await;
    assert_eq!(deleted["properties"]["childOperations"].as_array().map(Vec::len), Some(2), "{deleted}");

    let jobs = h.sim.handle().jobs();
    let names = |prefix: &str| jobs.iter().filter(|j| j.template_name.starts_with(prefix)).count();
    let pool_job = jobs.iter().find(|j| j.template_name == "slipway-create-node-pool").unwrap();
    assert_eq!(pool_job.extra_vars["slipway"]["resource"]["type"], "Slipway.Example/clusters/nodePools");
    assert_eq!(pool_job.extra_vars["slipway"]["parent"]["type"], "Slipway.Example/clusters");
    assert_eq!(names("slipway-validate-cluster"), 1, "the preflight ran before the create");
    assert_eq!((names("slipway-create-cluster"), names("slipway-upgrade-cluster")), (1, 1));
    assert_eq!((names("slipway-create-node-pool"), names("slipway-delete-node-pool")), (2, 2));
    assert_eq!(names("slipway-delete-cluster"), 1);
    let validate = jobs.iter().position(|j| j.template_name == "slipway-validate-cluster").unwrap();
    let create = jobs.iter().position(|j| j.template_name == "slipway-create-cluster").unwrap();
    assert!(validate < create, "validate first");
    let last_pool = jobs.iter().rposition(|j| j.template_name == "slipway-delete-node-pool").unwrap();
    let cluster_delete = jobs.iter().position(|j| j.template_name == "slipway-delete-cluster").unwrap();
    assert!(last_pool < cluster_delete, "children first");
    assert!(jobs_by_key(&h.sim).values().all(|n| *n == 1), "each key launched once");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_delete_while_running_cancel_the_aap_job() {
    let h = Harness::start(false, 0.2).await;
    // Cancel.
    let id = rid("computeInstances", "vm-cancel");
    let r = h
        .put(&id, json!({"location": "local", "properties": {"size": "small", "image": "x", "delaySeconds": 60}}))
        .await;
    let op = header(&r, "azure-asyncoperation").unwrap();
    h.wait_op(&op, "Provisioning").await;
    let cancel = h.http.post(op.replace("?api-version", "/cancel?api-version")).send().await.unwrap();
    assert_eq!(cancel.status().as_u16(), 202);
    let done = h.wait_op(&op, "Canceled").await;
    assert_eq!(done["error"]["code"], "Canceled");
    let job = h.sim.handle().jobs().into_iter().next().unwrap();
    assert_eq!(job.status, "canceled");

    // Delete while provisioning: the provision job is canceled before the delete job runs.
    let id = rid("computeInstances", "vm-delete");
    let r = h
        .put(&id, json!({"location": "local", "properties": {"size": "small", "image": "x", "delaySeconds": 60}}))
        .await;
    let create = header(&r, "azure-asyncoperation").unwrap();
    h.wait_op(&create, "Provisioning").await;
    let r = h.http.delete(h.url(&id)).send().await.unwrap();
    let delete = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(h.op(&create).await["status"], "Canceled");
    h.wait_op(&delete, "Succeeded").await;
    let jobs = h.sim.handle().jobs();
    let provision = jobs
        .iter()
        .find(|j| {
            j.template_name == "slipway-create-compute-instance"
                && j.extra_vars["slipway"]["resource"]["name"] == "vm-delete"
        })
        .unwrap();
    assert_eq!(provision.status, "canceled");
    assert!(jobs.iter().any(|j| j.template_name == "slipway-delete-compute-instance" && j.status == "successful"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_hints_beat_a_slow_poll() {
    // Polling every 30 s: without the webhook the operation could not finish in time.
    let h = Harness::start(true, 30.0).await;
    let id = rid("virtualNetworks", "hinted");
    let r = h.put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    let op = header(&r, "azure-asyncoperation").unwrap();
    let start = Instant::now();
    h.wait_op(&op, "Succeeded").await;
    assert!(start.elapsed() < Duration::from_secs(10), "finished via the hint in {:?}", start.elapsed());
    // A forged hint without the token is refused.
    let forged = h
        .http
        .post(format!("{}/hooks/aap", h.base))
        .json(&json!({"id": 1, "status": "successful"}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 401);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_launch_and_record_leaves_exactly_one_job() {
    common::init_logging();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let sim = sim(None).await;
    // AAP starts every job but its launch answers are lost: Slipway cannot know whether the
    // jobs exist, and is killed in that state.
    sim.handle().set_faults(Faults { lose_launch_response_percent: 100, ..Faults::default() });
    let config = dir.path().join("slipway.toml");
    std::fs::write(&config, config_text(dir.path(), port, &sim, 0.2, "sim-token")).unwrap();
    let spawn = |run: usize| common::spawn_slipway(&config, &dir.path().join(format!("slipway-{run}.log")), "info");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut child = spawn(1);
    wait_ready(&http, &base).await;
    let mut ops = Vec::new();
    for i in 0..3 {
        let r = http
            .put(format!("{base}{}?api-version={API}", rid("virtualNetworks", &format!("crash{i}"))))
            .json(&json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        ops.push(header(&r, "azure-asyncoperation").unwrap());
    }
    // Wait until AAP has started all three jobs (whose answers were lost), then kill.
    eventually("the launches reached AAP", T, async || {
        if sim.handle().jobs().len() >= 3 { Ok(()) } else { Err(format!("{:?}", sim.handle().requests())) }
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    sim.handle().set_faults(Faults::default());

    let mut child = spawn(2);
    wait_ready(&http, &base).await;
    eventually("every operation Succeeded", T, async || {
        for op in &ops {
            let body: Value = http.get(op).send().await.unwrap().json().await.unwrap();
            if body["status"] != "Succeeded" {
                assert!(!matches!(body["status"].as_str(), Some("Failed" | "Canceled")), "{body}");
                return Err(format!("not done: {body}"));
            }
        }
        Ok(())
    })
    .await;
    let counts = jobs_by_key(&sim);
    assert_eq!(counts.len(), 3, "one key per operation: {counts:?}");
    assert!(counts.values().all(|n| *n == 1), "exactly one AAP job per operation: {counts:?}");
    assert_eq!(sim.handle().jobs().len(), 3);
    assert!(sim.handle().jobs().iter().all(|j| j.launch_lost), "the jobs Slipway adopted are the lost launches");
    child.kill().unwrap();
    child.wait().unwrap();
    sim.shutdown().await;
}
