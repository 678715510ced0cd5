//! Check mode in the simulator, against what AWX does: `job_type` and `diff_mode` are taken
//! from a launch only when the template prompts for them (else ignored and listed in
//! `ignored_fields`); the playbooks of create and delete templates keep resource state, which
//! a `check` job only reports (its record task's event, `changed`, the diff) and a `run` job
//! applies; the admin endpoints read and overwrite it; a job's events appear once AWX would
//! have processed them.

use std::time::Duration;

use aap_sim::{Faults, ResourceEffect, Sim, SimConfig, SimTemplate};
use serde_json::{Value, json};
use slipway_test_support::eventually;

const ID: &str = "/subscriptions/s1/resourceGroups/rg/providers/Slipway.Test/things/t1";
const PATH: &str = "/var/lib/aap-sim/state/slipway.test_things/t1.json";

fn template(id: u64, name: &str) -> SimTemplate {
    SimTemplate {
        id,
        name: name.into(),
        ask_variables_on_launch: true,
        ask_job_type_on_launch: true,
        ask_diff_mode_on_launch: true,
        allow_simultaneous: true,
        duration_seconds: 0.05,
        pending_seconds: 0.02,
        ..SimTemplate::default()
    }
}

fn config() -> SimConfig {
    SimConfig {
        job_templates: vec![
            template(1, "slipway-create-thing"),
            template(2, "slipway-delete-thing"),
            // Prompts for neither: a launch's job_type and diff_mode are ignored.
            SimTemplate { ask_job_type_on_launch: false, ask_diff_mode_on_launch: false, ..template(3, "fixed") },
            // A check template by default, and an explicit effect whatever its name says.
            SimTemplate {
                job_type: "check".into(),
                diff_mode: true,
                ask_job_type_on_launch: false,
                resource_state: ResourceEffect::Record,
                ..template(4, "always-check")
            },
        ],
        workflow_job_templates: vec![template(10, "flow")],
        tick_ms: 10,
        ..SimConfig::default()
    }
}

struct T {
    sim: Sim,
    http: reqwest::Client,
}

impl T {
    async fn start() -> T {
        let sim = Sim::start("127.0.0.1:0", config()).await.expect("start the simulator");
        T { sim, http: reqwest::Client::new() }
    }

    fn url(&self, rel: &str) -> String {
        if rel.starts_with('/') {
            format!("{}{rel}", self.sim.base_url())
        } else {
            format!("{}/api/v2/{rel}", self.sim.base_url())
        }
    }

    async fn get(&self, rel: &str) -> Value {
        let r = self.http.get(self.url(rel)).send().await.expect("answered");
        assert_eq!(r.status().as_u16(), 200, "GET {rel}");
        r.json().await.expect("JSON")
    }

    async fn post(&self, rel: &str, body: Value) -> (u16, Value) {
        let r = self.http.post(self.url(rel)).json(&body).send().await.expect("answered");
        (r.status().as_u16(), r.json().await.expect("JSON"))
    }

    /// Launches job template `template` with Slipway's envelope for the resource.
    async fn launch(&self, template: u64, properties: Value, prompts: Value) -> Value {
        let vars = json!({"slipway": {"resource": {"id": ID, "type": "Slipway.Test/things", "name": "t1",
            "location": "westeurope", "tags": {"env": "dev"}, "properties": properties}}});
        let mut body = json!({"extra_vars": vars});
        body.as_object_mut().unwrap().extend(prompts.as_object().unwrap().clone());
        let (status, job) = self.post(&format!("job_templates/{template}/launch/"), body).await;
        assert_eq!(status, 201, "{job}");
        job
    }

    async fn terminal(&self, job: &Value) -> Value {
        let id = job["id"].as_u64().unwrap();
        eventually(&format!("job {id} to end"), Duration::from_secs(15), async || {
            let j = self.get(&format!("jobs/{id}/")).await;
            let done = ["successful", "failed", "error", "canceled"].contains(&j["status"].as_str().unwrap());
            if done { Ok(j) } else { Err(j["status"].to_string()) }
        })
        .await
    }

    /// The job's record task event, if it has one.
    async fn record_event(&self, job: &Value) -> Option<Value> {
        let id = job["id"].as_u64().unwrap();
        let events = self.get(&format!("jobs/{id}/job_events/?order_by=counter")).await;
        let results = events["results"].as_array().unwrap();
        results
            .iter()
            .find(|e| e["task"].as_str().unwrap().contains("ecord") && e["event"] != "playbook_on_task_start")
            .cloned()
    }

    fn state(&self) -> Option<String> {
        self.sim.handle().resource_state(ID)
    }
}

fn state_of(properties: Value) -> String {
    aap_sim::state_text(&json!({"location": "westeurope", "tags": {"env": "dev"}, "properties": properties}))
}

#[tokio::test(start_paused = true)]
async fn job_type_and_diff_mode_are_taken_only_when_prompted() {
    let t = T::start().await;
    let prompting = t.get("job_templates/1/").await;
    assert_eq!(
        (&prompting["job_type"], &prompting["ask_job_type_on_launch"], &prompting["diff_mode"]),
        (&json!("run"), &json!(true), &json!(false))
    );
    assert_eq!(prompting["ask_diff_mode_on_launch"], true);
    let info = t.get("job_templates/4/launch/").await;
    assert_eq!((&info["ask_job_type_on_launch"], &info["ask_diff_mode_on_launch"]), (&json!(false), &json!(true)));
    assert_eq!((&info["defaults"]["job_type"], &info["defaults"]["diff_mode"]), (&json!("check"), &json!(true)));

    let job = t.launch(1, json!({}), json!({"job_type": "check", "diff_mode": true})).await;
    assert_eq!(
        (&job["job_type"], &job["diff_mode"], &job["ignored_fields"]),
        (&json!("check"), &json!(true), &json!({}))
    );
    let detail = t.get(&format!("jobs/{}/", job["id"])).await;
    assert_eq!((&detail["job_type"], &detail["diff_mode"]), (&json!("check"), &json!(true)));
    let sim_job = t.sim.handle().job(job["id"].as_u64().unwrap()).unwrap();
    assert_eq!((sim_job.job_type.as_str(), sim_job.diff_mode), ("check", true));

    // Not prompted: ignored, listed, and the job runs as its template says.
    let job = t.launch(3, json!({}), json!({"job_type": "check", "diff_mode": true})).await;
    assert_eq!(job["ignored_fields"], json!({"job_type": "check", "diff_mode": true}));
    assert_eq!((&job["job_type"], &job["diff_mode"]), (&json!("run"), &json!(false)));
    // A value equal to the template's is neither taken nor ignored.
    let job = t.launch(3, json!({}), json!({"job_type": "run", "diff_mode": false})).await;
    assert_eq!(job["ignored_fields"], json!({}));
    let job = t.launch(4, json!({}), json!({"job_type": "run", "diff_mode": "false"})).await;
    assert_eq!(job["ignored_fields"], json!({"job_type": "run"}));
    assert_eq!((&job["job_type"], &job["diff_mode"]), (&json!("check"), &json!(false)));

    // The launch serializer validates the fields first, prompted or not.
    for (body, field) in [(json!({"job_type": "scan"}), "job_type"), (json!({"diff_mode": "maybe"}), "diff_mode")] {
        let (status, answer) = t.post("job_templates/3/launch/", body).await;
        assert_eq!(status, 400, "{answer}");
        assert!(answer[field][0].is_string(), "{answer}");
    }
    // A workflow job template has no job type: the field is not one of its launch's.
    let (status, answer) = t.post("workflow_job_templates/10/launch/", json!({"job_type": "check"})).await;
    assert_eq!((status, &answer["ignored_fields"]), (201, &json!({})));
    assert!(answer.get("job_type").is_none(), "{answer}");

    let checks = t.get("jobs/?job_type=check").await;
    assert_eq!(checks["count"], 2, "{checks}");
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn check_jobs_report_the_diff_against_the_recorded_state_and_change_nothing() {
    let t = T::start().await;
    let check = json!({"job_type": "check", "diff_mode": true});
    let v1 = state_of(json!({"size": 1}));
    let v2 = state_of(json!({"size": 2}));

    // Nothing recorded yet: the check job would create the file.
    let job = t.terminal(&t.launch(1, json!({"size": 1}), check.clone()).await).await;
    assert_eq!(job["status"], "successful");
    let e = t.record_event(&job).await.expect("the record task ran");
    assert_eq!(
        (&e["event"], &e["task"], &e["host_name"]),
        (&json!("runner_on_ok"), &json!("Record the resource"), &json!("localhost"))
    );
    assert_eq!(e["changed"], true);
    assert_eq!(e["event_data"]["res"]["changed"], true);
    assert_eq!(
        e["event_data"]["res"]["diff"],
        json!({"before": "", "after": v1, "before_header": PATH, "after_header": PATH})
    );
    assert_eq!(t.state(), None, "a check job changes nothing");

    // A run job records it (no diff without diff mode), and reports the change.
    let job = t.terminal(&t.launch(1, json!({"size": 1}), json!({})).await).await;
    let e = t.record_event(&job).await.unwrap();
    assert_eq!((&e["changed"], e["event_data"]["res"].get("diff")), (&json!(true), None));
    assert_eq!(t.state().as_deref(), Some(v1.as_str()));

    // The same state: nothing would change.
    let job = t.terminal(&t.launch(1, json!({"size": 1}), check.clone()).await).await;
    let e = t.record_event(&job).await.unwrap();
    assert_eq!((&e["changed"], &e["event_data"]["res"]["changed"]), (&json!(false), &json!(false)));
    let id = job["id"].as_u64().unwrap();
    let changed = t.get(&format!("jobs/{id}/job_events/?event=runner_on_ok&changed=true&order_by=counter")).await;
    assert_eq!(changed["count"], 0, "{changed}");

    // Another state: the diff from what is recorded, which stays.
    let job = t.terminal(&t.launch(1, json!({"size": 2}), check.clone()).await).await;
    let id = job["id"].as_u64().unwrap();
    let changed = t.get(&format!("jobs/{id}/job_events/?event=runner_on_ok&changed=true&order_by=counter")).await;
    assert_eq!(changed["count"], 1, "{changed}");
    let diff = &changed["results"][0]["event_data"]["res"]["diff"];
    assert_eq!((&diff["before"], &diff["after"]), (&json!(v1), &json!(v2)));
    let stats = t.get(&format!("jobs/{id}/job_events/?event=playbook_on_stats")).await;
    assert_eq!(stats["results"][0]["event_data"]["changed"], json!({"localhost": 1}));
    assert_eq!(stats["results"][0]["changed"], true);
    let stdout =
        t.http.get(t.url(&format!("jobs/{id}/stdout/?format=txt"))).send().await.unwrap().text().await.unwrap();
    assert!(stdout.contains(&format!("--- before: {PATH}")) && stdout.contains("-        \"size\": 1"), "{stdout}");
    assert!(stdout.contains("+        \"size\": 2") && stdout.contains("changed: [localhost]"), "{stdout}");
    assert_eq!(t.state().as_deref(), Some(v1.as_str()));

    // A delete: the check job would remove the file; the run job does.
    let job = t.terminal(&t.launch(2, json!({"size": 1}), check.clone()).await).await;
    let e = t.record_event(&job).await.unwrap();
    assert_eq!(e["task"], "Remove the recorded resource");
    assert_eq!(
        (&e["event_data"]["res"]["diff"]["before"], &e["event_data"]["res"]["diff"]["after"]),
        (&json!(v1), &json!(""))
    );
    assert_eq!(t.state().as_deref(), Some(v1.as_str()));
    t.terminal(&t.launch(2, json!({}), json!({})).await).await;
    assert_eq!(t.state(), None);

    // A template whose effect is configured explicitly, running in check mode by default.
    let job = t.terminal(&t.launch(4, json!({"size": 3}), json!({})).await).await;
    assert_eq!(job["job_type"], "check");
    assert_eq!(
        t.record_event(&job).await.unwrap()["event_data"]["res"]["diff"]["after"],
        json!(state_of(json!({"size": 3})))
    );
    assert_eq!(t.state(), None);
    t.sim.shutdown().await;
}

/// A simulated failure fails a check job as it fails a run job: no record task, no change.
#[tokio::test(start_paused = true)]
async fn a_failed_check_job_fails_as_a_run_job_would() {
    let t = T::start().await;
    for prompts in [json!({"job_type": "check", "diff_mode": true}), json!({})] {
        let job = t.terminal(&t.launch(1, json!({"simulateFailure": true}), prompts).await).await;
        assert_eq!((&job["status"], &job["result_traceback"]), (&json!("failed"), &json!("simulated failure")));
        let id = job["id"].as_u64().unwrap();
        let events = t.get(&format!("jobs/{id}/job_events/?order_by=counter")).await;
        let names: Vec<&str> =
            events["results"].as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap()).collect();
        assert_eq!(names, ["playbook_on_start", "playbook_on_task_start", "runner_on_failed", "playbook_on_stats"]);
        assert_eq!(t.record_event(&job).await, None);
    }
    assert_eq!(t.state(), None);
    t.sim.shutdown().await;
}

/// The recorded state, read and overwritten behind the jobs' back, over HTTP and the handle.
#[tokio::test(start_paused = true)]
async fn the_admin_endpoints_read_and_overwrite_the_recorded_state() {
    let t = T::start().await;
    let http = &t.http;
    let one = t.url(&format!("/_sim/resources{ID}"));
    assert_eq!(http.get(&one).send().await.unwrap().status().as_u16(), 404);
    t.terminal(&t.launch(1, json!({"size": 1}), json!({})).await).await;
    let got: Value = http.get(&one).send().await.unwrap().json().await.unwrap();
    assert_eq!(got, json!({"id": ID, "content": state_of(json!({"size": 1}))}));
    // Ids are compared case-insensitively; one segment, percent-encoded, names it too.
    let encoded = t.url(&format!("/_sim/resources/{}", ID.replace('/', "%2F").to_uppercase()));
    assert_eq!(http.get(&encoded).send().await.unwrap().status().as_u16(), 200);
    let all: Value = http.get(t.url("/_sim/resources")).send().await.unwrap().json().await.unwrap();
    assert_eq!(all, json!([got]));

    // Drift: a state written as the playbooks write it, then exact text.
    let drifted = json!({"location": "westeurope", "tags": {"env": "dev"}, "properties": {"size": 9}});
    assert_eq!(http.put(&one).json(&json!({"state": drifted})).send().await.unwrap().status().as_u16(), 204);
    assert_eq!(t.state(), Some(state_of(json!({"size": 9}))));
    let job = t.terminal(&t.launch(1, json!({"size": 1}), json!({"job_type": "check", "diff_mode": true})).await).await;
    let diff = t.record_event(&job).await.unwrap()["event_data"]["res"]["diff"].clone();
    assert_eq!(
        (&diff["before"], &diff["after"]),
        (&json!(state_of(json!({"size": 9}))), &json!(state_of(json!({"size": 1}))))
    );
    assert_eq!(http.put(&one).json(&json!({"content": "hand-edited\n"})).send().await.unwrap().status().as_u16(), 204);
    assert_eq!(t.state().as_deref(), Some("hand-edited\n"));
    assert_eq!(http.put(&one).json(&json!({"contents": 1})).send().await.unwrap().status().as_u16(), 400);

    assert_eq!(http.delete(&one).send().await.unwrap().status().as_u16(), 204);
    assert_eq!(http.delete(&one).send().await.unwrap().status().as_u16(), 404);
    assert_eq!(t.state(), None);

    // The handle does the same.
    let h = t.sim.handle();
    h.set_resource_state(ID, Some("x\n".into()));
    assert_eq!(h.resource_states(), [(ID.to_owned(), "x\n".to_owned())].into_iter().collect());
    h.set_resource_state(&ID.to_lowercase(), None);
    assert_eq!(h.resource_state(ID), None);
    t.sim.shutdown().await;
}

/// AWX marks a job finished when its playbook ends; its events are saved behind it. Until
/// then the job says `event_processing_finished: false` and lists only what happened before
/// its end: its start and its task's start.
#[tokio::test(start_paused = true)]
async fn events_appear_once_processed() {
    let t = T::start().await;
    t.sim.handle().set_faults(Faults { event_processing_delay_ms: 3_600_000, ..Faults::default() });
    let job = t.terminal(&t.launch(1, json!({"size": 1}), json!({"job_type": "check"})).await).await;
    assert_eq!((&job["status"], &job["event_processing_finished"]), (&json!("successful"), &json!(false)));
    let id = job["id"].as_u64().unwrap();
    assert_eq!(t.get(&format!("jobs/{id}/job_events/")).await["count"], 2);
    t.sim.handle().set_faults(Faults::default());
    assert_eq!(t.get(&format!("jobs/{id}/")).await["event_processing_finished"], true);
    // Then the task's result, the record task's start and result, and the stats.
    assert_eq!(t.get(&format!("jobs/{id}/job_events/")).await["count"], 6);
    t.sim.shutdown().await;
}

/// Slipway's example templates prompt for job type and diff mode, so that its what-if runs
/// against the default simulator; the workflow cannot.
#[tokio::test(start_paused = true)]
async fn the_example_templates_prompt_for_job_type_and_diff_mode() {
    let (jts, wfs) = SimConfig::slipway_templates();
    assert!(jts.iter().all(|t| t.ask_job_type_on_launch && t.ask_diff_mode_on_launch && t.job_type == "run"));
    assert!(wfs.iter().all(|t| !t.ask_job_type_on_launch));
    let effect = |name: &str| jts.iter().find(|t| t.name == name).map(|t| t.resource_state.of(&t.name));
    assert_eq!(effect("slipway-create-virtual-network"), Some(ResourceEffect::Record));
    assert_eq!(effect("slipway-delete-subnet"), Some(ResourceEffect::Remove));
    assert_eq!(effect("slipway-validate-cluster"), Some(ResourceEffect::None));
    assert!(SimConfig::from_toml("[[job_templates]]\nid = 1\nname = \"x\"\njob_type = \"scan\"\n").is_err());
    let parsed = SimConfig::from_toml(
        "[[job_templates]]\nid = 1\nname = \"x\"\nask_job_type_on_launch = true\nresource_state = \"remove\"\n",
    )
    .unwrap();
    assert_eq!(parsed.job_templates[0].resource_state, ResourceEffect::Remove);
}
