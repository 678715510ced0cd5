//! The simulator against AWX's documented behaviour (the facts in docs/providers.md),
//! driven in process over HTTP with reqwest.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use aap_sim::{Faults, Sim, SimConfig, SimOrganization, SimTemplate, SimUser, SimWebhook};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use slipway_test_support::eventually;

// ---------------------------------------------------------------------------------------------
// Harness

fn template(id: u64, name: &str) -> SimTemplate {
    SimTemplate {
        id,
        name: name.into(),
        ask_variables_on_launch: true,
        allow_simultaneous: true,
        duration_seconds: 0.1,
        pending_seconds: 0.02,
        ..SimTemplate::default()
    }
}

fn config() -> SimConfig {
    SimConfig {
        job_templates: vec![
            template(1, "quick"),
            SimTemplate { ask_variables_on_launch: false, ..template(2, "strict") },
            SimTemplate { duration_seconds: 600.0, ..template(3, "long") },
            SimTemplate { allow_simultaneous: false, duration_seconds: 0.3, ..template(4, "serial") },
            SimTemplate { outcome: "failed".into(), ..template(5, "broken") },
        ],
        workflow_job_templates: vec![
            template(10, "flow"),
            SimTemplate { ask_variables_on_launch: false, ..template(11, "flow-strict") },
            SimTemplate { duration_seconds: 600.0, ..template(12, "flow-long") },
        ],
        tick_ms: 10,
        ..SimConfig::default()
    }
}

struct T {
    sim: Sim,
    http: reqwest::Client,
    /// `http://ADDR{prefix}v2/`
    api: String,
    auth: Option<String>,
}

struct Resp {
    status: u16,
    headers: HeaderMap,
    body: Value,
}

impl T {
    async fn start(config: SimConfig) -> T {
        let prefix = config.api_prefix.clone();
        let sim = Sim::start("127.0.0.1:0", config).await.expect("start the simulator");
        let api = format!("{}{prefix}v2/", sim.base_url());
        T { sim, http: reqwest::Client::new(), api, auth: None }
    }

    fn url(&self, rel: &str) -> String {
        if rel.starts_with('/') { format!("{}{rel}", self.sim.base_url()) } else { format!("{}{rel}", self.api) }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let req = match &self.auth {
            Some(a) => req.header("Authorization", a),
            None => req,
        };
        let resp = req.send().await.expect("request answered");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        let body = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("JSON body") };
        Resp { status, headers, body }
    }

    /// `rel` is relative to `{prefix}v2/`, or an absolute path when it starts with `/`.
    async fn get(&self, rel: &str) -> Resp {
        self.send(self.http.get(self.url(rel))).await
    }

    async fn post(&self, rel: &str, body: Value) -> Resp {
        self.send(self.http.post(self.url(rel)).json(&body)).await
    }

    async fn launch(&self, template_id: u64, body: Value) -> Value {
        let r = self.post(&format!("job_templates/{template_id}/launch/"), body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        r.body
    }

    async fn job(&self, id: u64) -> Value {
        let r = self.get(&format!("jobs/{id}/")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    /// Polls the job until `done` holds (bounded), returning the last representation.
    async fn job_until(&self, kind: &str, id: u64, what: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
        eventually(&format!("{kind} {id} to be {what}"), Duration::from_secs(15), async || {
            let r = self.get(&format!("{kind}/{id}/")).await;
            assert_eq!(r.status, 200, "{}", r.body);
            if done(&r.body) { Ok(r.body) } else { Err(r.body.to_string()) }
        })
        .await
    }

    async fn terminal(&self, kind: &str, id: u64) -> Value {
        self.job_until(kind, id, "terminal", |j| {
            ["successful", "failed", "error", "canceled"].contains(&j["status"].as_str().unwrap_or(""))
        })
        .await
    }
}

fn ids(page: &Value) -> Vec<u64> {
    page["results"].as_array().expect("results").iter().map(|r| r["id"].as_u64().expect("id")).collect()
}

fn secs(ts: &Value) -> f64 {
    // "2024-10-23T12:34:56.123456Z" → seconds within the day are enough for differences here.
    let s = ts.as_str().expect("timestamp");
    let (h, m, rest) = (&s[11..13], &s[14..16], &s[17..s.len() - 1]);
    h.parse::<f64>().unwrap() * 3600.0 + m.parse::<f64>().unwrap() * 60.0 + rest.parse::<f64>().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Lists: pagination, filters, ordering

#[tokio::test(start_paused = true)]
async fn pagination_follows_next_links_to_the_end_and_caps_page_size() {
    let mut cfg = config();
    cfg.job_templates = (1..=230).map(|i| template(i, &format!("t{i:03}"))).collect();
    cfg.workflow_job_templates.clear();
    let t = T::start(cfg).await;

    let mut page = t.get("job_templates/?page_size=100").await;
    assert_eq!(page.status, 200);
    assert_eq!(page.body["count"], 230);
    assert_eq!(page.body["previous"], Value::Null);
    let mut seen = ids(&page.body);
    let mut pages = 1;
    while let Some(next) = page.body["next"].as_str().map(String::from) {
        assert!(next.starts_with("/api/v2/job_templates/?"), "next is a full path: {next}");
        page = t.get(&next).await;
        assert_eq!(page.status, 200);
        assert!(page.body["previous"].is_string());
        seen.extend(ids(&page.body));
        pages += 1;
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, (1..=230).collect::<Vec<u64>>(), "ordered by name, no gaps or repeats");

    let capped = t.get("job_templates/?page_size=1000").await.body;
    assert_eq!(capped["results"].as_array().unwrap().len(), 200);
    assert_eq!(capped["next"], "/api/v2/job_templates/?page=2&page_size=200");
    let default = t.get("job_templates/").await.body;
    assert_eq!(default["results"].as_array().unwrap().len(), 25, "default page size");
    assert_eq!(default["next"], "/api/v2/job_templates/?page=2");

    let beyond = t.get("job_templates/?page=99").await;
    assert_eq!((beyond.status, beyond.body.clone()), (404, json!({"detail": "Invalid page."})));

    // Job lists keep the filter in their links; following them reaches every match.
    for _ in 0..5 {
        t.launch(1, json!({})).await;
    }
    let mut page = t.get("jobs/?id__in=1,2,3,5&page_size=2").await.body;
    assert_eq!(page["count"], 4);
    assert_eq!(page["next"], "/api/v2/jobs/?id__in=1%2C2%2C3%2C5&page=2&page_size=2");
    let mut seen = ids(&page);
    while let Some(next) = page["next"].as_str().map(String::from) {
        page = t.get(&next).await.body;
        seen.extend(ids(&page));
    }
    assert_eq!(seen, vec![1, 2, 3, 5]);
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn template_filters_match_awx() {
    let mut cfg = config();
    cfg.organizations.push(SimOrganization { id: 2, name: "Platform".into() });
    cfg.job_templates.push(SimTemplate { organization: 2, ..template(6, "quick") });
    cfg.job_templates.push(template(7, "7"));
    let t = T::start(cfg).await;
    let tr = &t;
    let q = |query: &'static str| async move { tr.get(&format!("job_templates/?{query}")).await };

    let same_name = q("name=quick").await.body;
    assert_eq!((same_name["count"].clone(), ids(&same_name)), (json!(2), vec![1, 6]), "names are unique per org only");
    assert_eq!(ids(&q("name=quick&organization__name=Platform").await.body), vec![6]);
    assert_eq!(ids(&q("name=quick&organization=1").await.body), vec![1]);
    assert_eq!(ids(&q("id__in=2,4,99").await.body), vec![4, 2], "by name: serial, strict");
    assert_eq!(ids(&q("name__iexact=QUICK&organization__name=Default").await.body), vec![1]);
    assert_eq!(ids(&q("name__startswith=flow").await.body), Vec::<u64>::new(), "workflow templates are separate");
    // The collection's get_one for a value that parses as an int.
    assert_eq!(ids(&q("or__id=7&or__name=7").await.body), vec![7]);
    assert_eq!(ids(&q("or__id=2&or__name=2").await.body), vec![2]);
    assert_eq!(ids(&q("order_by=-id&page_size=3").await.body), vec![7, 6, 5]);
    assert_eq!(ids(&q("not__organization=1").await.body), vec![6]);

    let bad = q("colour=blue").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body, json!({"detail": "JobTemplate has no field named 'colour'"}));
    let empty_in = q("id__in=").await;
    assert_eq!((empty_in.status, empty_in.body), (400, json!({"detail": "cannot provide empty value for __in"})));
    assert_eq!(q("id=seven").await.status, 400);
    assert_eq!(q("order_by=colour").await.status, 400);

    let wf = t.get("workflow_job_templates/?name=flow").await.body;
    assert_eq!(ids(&wf), vec![10]);
    assert_eq!(wf["results"][0]["type"], "workflow_job_template");
    t.sim.shutdown().await;
}

/// Real time: the filters tell jobs apart by creation stamps, which paused time would make
/// equal.
#[tokio::test]
async fn job_filters_status_created_and_order() {
    let t = T::start(config()).await;
    let a = t.launch(3, json!({})).await["id"].as_u64().unwrap();
    let b = t.launch(1, json!({})).await["id"].as_u64().unwrap();
    let c = t.launch(3, json!({})).await["id"].as_u64().unwrap();
    t.terminal("jobs", b).await;
    t.job_until("jobs", c, "running", |j| j["status"] == "running").await;
    t.job_until("jobs", a, "running", |j| j["status"] == "running").await;

    let tr = &t;
    let q = |query: String| async move { tr.get(&format!("jobs/?{query}")).await };
    assert_eq!(ids(&q("status__in=running,pending".into()).await.body), vec![a, c]);
    assert_eq!(ids(&q("status=successful".into()).await.body), vec![b]);
    let created_a = t.job(a).await["created"].as_str().unwrap().to_string();
    assert_eq!(ids(&q(format!("created__gt={created_a}")).await.body), vec![b, c]);
    assert_eq!(ids(&q(format!("created__gte={created_a}&order_by=-id")).await.body), vec![c, b, a]);
    assert_eq!(ids(&q(format!("id__in={a},{c}&order_by=-created")).await.body), vec![c, a]);
    assert_eq!(ids(&q("job_template=3".into()).await.body), vec![a, c]);
    assert_eq!(ids(&q("job_template__name=quick".into()).await.body), vec![b]);
    assert_eq!(ids(&q("failed=false&id__lt=3".into()).await.body), vec![a, b]);
    assert_eq!(ids(&t.get("job_templates/3/jobs/?order_by=-id").await.body), vec![c, a]);
    assert_eq!(q("created__gt=yesterday".into()).await.status, 400);
    assert_eq!(q("status__in=".into()).await.status, 400);
    assert_eq!(q("bogus__in=1".into()).await.status, 400);

    // List rows omit the traceback and event-processing flag; details have them.
    let list = q(format!("id__in={a},{b}")).await.body;
    for row in list["results"].as_array().unwrap() {
        assert!(row.get("result_traceback").is_none() && row.get("event_processing_finished").is_none(), "{row}");
        assert!(row["status"].is_string() && row.get("elapsed").is_some() && row.get("job_explanation").is_some());
    }
    let detail = t.job(b).await;
    assert_eq!(detail["result_traceback"], "");
    assert_eq!(detail["event_processing_finished"], true);

    // Unified jobs mix both kinds, told apart by `type`.
    let w = t.post("workflow_job_templates/10/launch/", json!({})).await.body["id"].as_u64().unwrap();
    let unified = t.get(&format!("unified_jobs/?id__in={a},{w}")).await.body;
    let types: Vec<&str> = unified["results"].as_array().unwrap().iter().map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!(types, vec!["job", "workflow_job"]);
    t.sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Launch

#[tokio::test(start_paused = true)]
async fn launching_a_job_template() {
    let t = T::start(config()).await;
    let info = t.get("job_templates/1/launch/").await.body;
    assert_eq!(info["can_start_without_user_input"], true);
    assert_eq!(info["ask_variables_on_launch"], true);
    assert_eq!(info["variables_needed_to_start"], json!([]));
    assert_eq!(info["job_template_data"], json!({"name": "quick", "id": 1, "description": ""}));
    assert!(info["defaults"].is_object());

    let r = t.post("job_templates/1/launch/", json!({"extra_vars": {"app": "web", "n": 2}})).await;
    assert_eq!(r.status, 201);
    let id = r.body["id"].as_u64().unwrap();
    assert_eq!(r.headers["location"], format!("/api/v2/jobs/{id}/"));
    assert_eq!(r.body["type"], "job");
    assert_eq!(r.body["job"], id);
    assert_eq!(r.body["url"], format!("/api/v2/jobs/{id}/"));
    assert_eq!(r.body["status"], "pending");
    assert_eq!(r.body["ignored_fields"], json!({}));
    assert_eq!(r.body["extra_vars"], "{\"app\": \"web\", \"n\": 2}", "a JSON string, as AWX stores it");
    assert_eq!(r.body["related"]["cancel"], format!("/api/v2/jobs/{id}/cancel/"));
    assert_eq!(r.body["related"]["job_events"], format!("/api/v2/jobs/{id}/job_events/"));
    assert_eq!((r.body["job_template"].clone(), r.body["unified_job_template"].clone()), (json!(1), json!(1)));
    assert_eq!(r.body["launch_type"], "manual");

    // Unprompted fields are dropped, listed in ignored_fields, and the job gets none of them.
    let r =
        t.post("job_templates/2/launch/", json!({"extra_vars": {"x": 1}, "limit": "web1", "job_type": "run"})).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["ignored_fields"], json!({"extra_vars": {"x": 1}, "limit": "web1"}));
    assert_eq!(r.body["extra_vars"], "{}");
    assert_eq!(r.body["limit"], "");

    // extra_vars as a JSON or YAML string.
    let r = t.launch(1, json!({"extra_vars": "{\"a\": 1}"})).await;
    assert_eq!(r["extra_vars"], "{\"a\": 1}");
    let r = t.launch(1, json!({"extra_vars": "---\nb: two\nc: 3\n"})).await;
    assert_eq!(r["extra_vars"], "{\"b\": \"two\", \"c\": 3}");
    let bad = t.post("job_templates/1/launch/", json!({"extra_vars": "[1, 2]"})).await;
    assert_eq!(bad.status, 400);
    assert!(bad.body["extra_vars"][0].as_str().unwrap().contains("not a dictionary"), "{}", bad.body);
    // An empty POST (what the collection sends for a plain launch).
    let r = t.send(t.http.post(t.url("job_templates/1/launch/")).header("content-type", "application/json")).await;
    assert_eq!(r.status, 201);

    let missing = t.post("job_templates/99/launch/", json!({})).await;
    assert_eq!((missing.status, missing.body), (404, json!({"detail": "Not found."})));
    let by_name = t.post("job_templates/quick++Default/launch/", json!({})).await;
    assert_eq!((by_name.status, by_name.body["job_template"].clone()), (201, json!(1)));
    assert_eq!(t.get("job_templates/1/launch/").await.status, 200);
    assert_eq!(t.send(t.http.put(t.url("job_templates/1/launch/"))).await.status, 405);
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn launching_a_workflow_job_template() {
    let t = T::start(config()).await;
    let info = t.get("workflow_job_templates/10/launch/").await.body;
    assert_eq!(info["workflow_job_template_data"]["id"], 10);
    assert_eq!(info["node_templates_missing"], json!([]));

    let r = t.post("workflow_job_templates/10/launch/", json!({"extra_vars": {"x": 1}})).await;
    assert_eq!(r.status, 201);
    let id = r.body["id"].as_u64().unwrap();
    assert_eq!(r.body["type"], "workflow_job");
    assert_eq!(r.body["workflow_job"], id);
    assert!(r.body.get("job").is_none());
    assert_eq!(r.headers["location"], format!("/api/v2/workflow_jobs/{id}/"));
    assert_eq!(r.body["ignored_fields"], json!({}));
    assert_eq!(r.body["workflow_job_template"], 10);
    assert!(r.body.get("event_processing_finished").is_none(), "workflow jobs have none; waits use `finished`");

    // Workflow templates reject what they do not prompt for.
    let r = t.post("workflow_job_templates/11/launch/", json!({"extra_vars": {"x": 1, "y": 2}})).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body,
        json!({"extra_vars": ["Variables x, y are not allowed on launch. Check the Prompt on Launch setting on the Workflow Job Template to include Extra Variables."]})
    );
    let r = t.post("workflow_job_templates/10/launch/", json!({"limit": "web1"})).await;
    assert_eq!((r.status, r.body), (400, json!({"limit": ["Field is not configured to prompt on launch."]})));
    assert_eq!(t.post("workflow_job_templates/11/launch/", json!({})).await.status, 201, "nothing to reject");
    assert_eq!(t.sim.handle().jobs().len(), 2, "rejected launches create nothing");

    let done = t.terminal("workflow_jobs", id).await;
    assert_eq!((done["status"].clone(), done["failed"].clone()), (json!("successful"), json!(false)));
    assert_eq!(t.get(&format!("workflow_jobs/{id}/job_events/")).await.status, 404);
    assert_eq!(t.get(&format!("jobs/{id}/")).await.status, 404, "a workflow job is not a job");
    t.sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Lifecycle

/// Polls until terminal, recording every distinct status seen.
async fn watch(t: &T, kind: &str, id: u64) -> (Vec<String>, Value) {
    let mut seen: Vec<String> = Vec::new();
    let last = t
        .job_until(kind, id, "terminal", |j| {
            let s = j["status"].as_str().unwrap().to_string();
            let done = ["successful", "failed", "error", "canceled"].contains(&s.as_str());
            if seen.last() != Some(&s) {
                seen.push(s);
            }
            done
        })
        .await;
    (seen, last)
}

#[tokio::test(start_paused = true)]
async fn lifecycle_goes_through_every_state_with_the_configured_timings() {
    let mut cfg = config();
    cfg.job_templates.push(SimTemplate {
        pending_seconds: 0.2,
        duration_seconds: 0.4,
        tasks: 2,
        ..template(20, "timed")
    });
    let t = T::start(cfg).await;
    let launched = Instant::now();
    let id = t.launch(20, json!({})).await["id"].as_u64().unwrap();
    let (seen, done) = watch(&t, "jobs", id).await;
    let total = launched.elapsed().as_secs_f64();
    assert_eq!(seen, vec!["pending", "waiting", "running", "successful"]);
    let elapsed = done["elapsed"].as_f64().unwrap();
    assert!((0.4..2.0).contains(&elapsed), "running time ≈ duration_seconds: {elapsed}");
    assert!(total >= 0.6, "pending + running took {total}");
    assert!(secs(&done["started"]) - secs(&done["created"]) >= 0.2 - 0.001, "{done}");
    assert_eq!(done["failed"], false);
    assert_eq!(done["event_processing_finished"], true);
    assert_eq!(done["job_explanation"], "");
    assert!((secs(&done["finished"]) - secs(&done["started"]) - elapsed).abs() < 0.002);

    let events = t.get(&format!("jobs/{id}/job_events/")).await;
    let names: Vec<(&str, u64)> = events.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), e["counter"].as_u64().unwrap()))
        .collect();
    let expected = [
        ("playbook_on_start", 1),
        ("playbook_on_task_start", 2),
        ("runner_on_ok", 3),
        ("playbook_on_task_start", 4),
        ("runner_on_ok", 5),
        ("playbook_on_stats", 6),
    ];
    assert_eq!(names, expected);
    let incremental = t.get(&format!("jobs/{id}/job_events/?counter__gt=1&order_by=counter")).await.body;
    assert_eq!(incremental["count"], 5);
    // Its standard output, built from the events' stdout: JSON by default, text on request.
    let stdout = t.get(&format!("jobs/{id}/stdout/")).await.body;
    let content = stdout["content"].as_str().unwrap();
    let tasks =
        "TASK [simulated task 1 of 2] ***\nok: [localhost]\nTASK [simulated task 2 of 2] ***\nok: [localhost]\n";
    assert!(content.starts_with(&format!("{tasks}PLAY RECAP")), "{stdout}");
    let text = t.http.get(t.url(&format!("jobs/{id}/stdout/?format=txt_download"))).send().await.unwrap();
    assert_eq!(text.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(text.text().await.unwrap(), content);
    assert_eq!(t.get(&format!("jobs/{id}/stdout/?format=html5")).await.status, 400);
    assert_eq!(t.get("jobs/999999/stdout/").await.status, 404);

    // The template reflects its last job.
    let tpl = t.get("job_templates/20/").await.body;
    assert_eq!((tpl["status"].clone(), tpl["last_job_failed"].clone()), (json!("successful"), json!(false)));
    t.sim.shutdown().await;
}

/// A running job's task starts are listed as they happen (AWX saves events while a job
/// runs): the count of `playbook_on_task_start` and the newest one's task are its progress.
#[tokio::test(start_paused = true)]
async fn task_starts_are_listed_while_the_job_runs() {
    let mut cfg = config();
    cfg.job_templates.push(SimTemplate {
        pending_seconds: 0.0,
        duration_seconds: 3.0,
        tasks: 3,
        ..template(21, "long")
    });
    let t = T::start(cfg).await;
    let id = t.launch(21, json!({})).await["id"].as_u64().unwrap();
    let query = format!("jobs/{id}/job_events/?event=playbook_on_task_start&order_by=-counter&page_size=1");
    let mut seen = Vec::new();
    let mut polls = 0;
    let second = loop {
        polls += 1;
        assert!(polls < 500, "no second task start within 10 s: {seen:?}");
        let page = t.get(&query).await.body;
        let count = page["count"].as_u64().unwrap();
        if seen.last() != Some(&count) {
            seen.push(count);
        }
        if count >= 2 {
            break page;
        }
        // Sampling the count as a client polls it, to see each value it passes through.
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(second["results"][0]["task"], "simulated task 2 of 3", "{second}");
    assert_eq!(t.get(&format!("jobs/{id}/")).await.body["status"], "running", "the third task is a second away");
    let done = t.terminal("jobs", id).await;
    assert_eq!(done["status"], "successful");
    assert_eq!(t.get(&query).await.body["count"], 3);
    assert!(seen.windows(2).all(|w| w[0] < w[1]) && seen.contains(&1), "{seen:?}");
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn outcomes_failed_error_and_canceled() {
    let t = T::start(config()).await;
    let failed = t.launch(5, json!({})).await["id"].as_u64().unwrap();
    let error = t.launch(1, json!({"extra_vars": {"aap_sim_outcome": "error"}})).await["id"].as_u64().unwrap();
    let canceled = t.launch(1, json!({"extra_vars": {"aap_sim_outcome": "canceled"}})).await["id"].as_u64().unwrap();

    let f = t.terminal("jobs", failed).await;
    assert_eq!((f["status"].clone(), f["failed"].clone()), (json!("failed"), json!(true)));
    assert!(!f["result_traceback"].as_str().unwrap().is_empty() && !f["job_explanation"].as_str().unwrap().is_empty());
    let events = t.get(&format!("jobs/{failed}/job_events/?event=runner_on_failed")).await.body;
    assert_eq!(events["count"], 1);

    let e = t.terminal("jobs", error).await;
    assert_eq!((e["status"].clone(), e["failed"].clone()), (json!("error"), json!(true)));
    assert_eq!(e["job_explanation"], "Job terminated due to error");
    assert!(!e["result_traceback"].as_str().unwrap().is_empty());

    let c = t.terminal("jobs", canceled).await;
    assert_eq!((c["status"].clone(), c["failed"].clone()), (json!("canceled"), json!(true)));
    assert!(c["canceled_on"].is_string());

    let tpl = t.get("job_templates/5/").await.body;
    assert_eq!((tpl["status"].clone(), tpl["last_job_failed"].clone()), (json!("failed"), json!(true)));
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn extra_var_overrides_and_the_slipway_envelope() {
    let t = T::start(config()).await;
    let envelope = |props: Value| json!({"extra_vars": {"slipway": {"resource": {"properties": props}}}});

    let failing = t.launch(1, envelope(json!({"simulateFailure": true}))).await["id"].as_u64().unwrap();
    let f = t.terminal("jobs", failing).await;
    assert_eq!(f["status"], "failed");
    assert_eq!(f["result_traceback"], "simulated failure");

    let slow = t.launch(1, envelope(json!({"delaySeconds": 0.6}))).await["id"].as_u64().unwrap();
    let s = t.terminal("jobs", slow).await;
    assert_eq!(s["status"], "successful");
    assert!(s["elapsed"].as_f64().unwrap() >= 0.6, "{s}");

    let fast_fail =
        t.launch(3, json!({"extra_vars": {"aap_sim_outcome": "failed", "aap_sim_duration_seconds": 0}})).await;
    let ff = t.terminal("jobs", fast_fail["id"].as_u64().unwrap()).await;
    assert_eq!(ff["status"], "failed", "the 600 s template ends at once");

    // Explicit aap_sim_* variables win over the envelope.
    let mixed = t
        .launch(
            1,
            json!({"extra_vars": {"aap_sim_outcome": "successful",
                   "slipway": {"resource": {"properties": {"simulateFailure": true}}}}}),
        )
        .await;
    assert_eq!(t.terminal("jobs", mixed["id"].as_u64().unwrap()).await["status"], "successful");

    // A per-launch outcome beats the template's; but only through accepted variables (the
    // strict template drops them).
    let rescued = t.launch(5, json!({"extra_vars": {"aap_sim_outcome": "successful"}})).await;
    assert_eq!(t.terminal("jobs", rescued["id"].as_u64().unwrap()).await["status"], "successful");
    let strict = t.launch(2, json!({"extra_vars": {"aap_sim_outcome": "failed"}})).await;
    assert_eq!(t.terminal("jobs", strict["id"].as_u64().unwrap()).await["status"], "successful");

    let bad = t.post("job_templates/1/launch/", json!({"extra_vars": {"aap_sim_outcome": "maybe"}})).await;
    assert_eq!(bad.status, 400);
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn without_allow_simultaneous_a_second_launch_waits_in_pending() {
    let t = T::start(config()).await;
    let first = t.launch(4, json!({})).await["id"].as_u64().unwrap();
    let second = t.launch(4, json!({})).await["id"].as_u64().unwrap();
    t.job_until("jobs", first, "running", |j| j["status"] == "running").await;
    assert_eq!(t.job(second).await["status"], "pending", "blocked while the first is active");
    let a = t.terminal("jobs", first).await;
    let b = t.terminal("jobs", second).await;
    assert!(secs(&b["started"]) >= secs(&a["finished"]), "second ran after the first: {a} {b}");

    // With allow_simultaneous they overlap.
    let x = t.launch(3, json!({})).await["id"].as_u64().unwrap();
    let y = t.launch(3, json!({})).await["id"].as_u64().unwrap();
    t.job_until("jobs", x, "running", |j| j["status"] == "running").await;
    t.job_until("jobs", y, "running", |j| j["status"] == "running").await;
    t.sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Cancel

#[tokio::test(start_paused = true)]
async fn cancel_is_accepted_then_asynchronous_and_405_once_finished() {
    let t = T::start(config()).await;
    for (kind, launch) in [("jobs", "job_templates/3/launch/"), ("workflow_jobs", "workflow_job_templates/12/launch/")]
    {
        let id = t.post(launch, json!({})).await.body["id"].as_u64().unwrap();
        t.job_until(kind, id, "running", |j| j["status"] == "running").await;
        let can = t.get(&format!("{kind}/{id}/cancel/")).await;
        assert_eq!((can.status, can.body), (200, json!({"can_cancel": true})));

        let r = t.send(t.http.post(t.url(&format!("{kind}/{id}/cancel/"))).json(&json!({}))).await;
        assert_eq!((r.status, r.body), (202, Value::Null), "202 with an empty body");
        let done = t.job_until(kind, id, "canceled", |j| j["status"] == "canceled").await;
        assert_eq!(done["failed"], true);
        assert!(done["canceled_on"].is_string() && done["finished"].is_string());
        let elapsed = done["elapsed"].as_f64().unwrap();
        assert!(elapsed < 600.0 && (secs(&done["finished"]) - secs(&done["started"]) - elapsed).abs() < 0.002);
        // Running time stopped: a later read shows the same elapsed.
        assert_eq!(t.get(&format!("{kind}/{id}/")).await.body["elapsed"], done["elapsed"]);

        let can = t.get(&format!("{kind}/{id}/cancel/")).await;
        assert_eq!(can.body, json!({"can_cancel": false}));
        let r = t.post(&format!("{kind}/{id}/cancel/"), json!({})).await;
        assert_eq!((r.status, r.body), (405, json!({"detail": "Method \"POST\" not allowed."})));
    }

    // A pending job can be canceled too; it never runs.
    let mut cfg = config();
    cfg.job_templates.push(SimTemplate { pending_seconds: 30.0, ..template(21, "slow-start") });
    let t2 = T::start(cfg).await;
    let id = t2.launch(21, json!({})).await["id"].as_u64().unwrap();
    assert_eq!(t2.post(&format!("jobs/{id}/cancel/"), json!({})).await.status, 202);
    let done = t2.job_until("jobs", id, "canceled", |j| j["status"] == "canceled").await;
    assert_eq!((done["started"].clone(), done["elapsed"].clone()), (Value::Null, json!(0.0)));

    // A finished job: 405.
    let quick = t2.launch(1, json!({})).await["id"].as_u64().unwrap();
    t2.terminal("jobs", quick).await;
    assert_eq!(t2.post(&format!("jobs/{quick}/cancel/"), json!({})).await.status, 405);
    assert_eq!(t2.post("jobs/999/cancel/", json!({})).await.status, 404);
    t.sim.shutdown().await;
    t2.sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Auth and prefix

#[tokio::test(start_paused = true)]
async fn authentication_token_basic_and_tokens_endpoint() {
    let mut cfg = config();
    cfg.token = Some("tok".into());
    cfg.users = vec![SimUser { username: "alice".into(), password: "pw".into() }];
    let mut t = T::start(cfg).await;

    let r = t.get("job_templates/").await;
    assert_eq!((r.status, r.body), (401, json!({"detail": "Authentication credentials were not provided."})));
    t.auth = Some("Bearer wrong".into());
    assert_eq!(t.get("jobs/").await.body, json!({"detail": "Authentication credentials were not provided."}));
    t.auth = Some("Basic YWxpY2U6bm9wZQ==".into()); // alice:nope
    let r = t.get("jobs/").await;
    assert_eq!((r.status, r.body), (401, json!({"detail": "Invalid username/password."})));

    // Discovery and ping are public, as in AWX.
    t.auth = None;
    assert_eq!(t.get("/api/").await.status, 200);
    assert_eq!(t.get("").await.status, 200);
    assert_eq!(t.get("ping/").await.body["version"], "24.6.1");
    assert_eq!(t.get("me/").await.status, 401);

    t.auth = Some("Bearer tok".into());
    assert_eq!(t.get("jobs/").await.status, 200);
    t.auth = Some("Basic YWxpY2U6cHc=".into()); // alice:pw
    let me = t.get("me/").await.body;
    assert_eq!((me["count"].clone(), me["results"][0]["username"].clone()), (json!(1), json!("alice")));

    // What awx.awx does with a username and password: trade them for a token, then delete it.
    let tok = t.post("tokens/", json!({"description": "x", "application": null, "scope": "write"})).await;
    assert_eq!(tok.status, 201);
    let (tid, secret) = (tok.body["id"].as_u64().unwrap(), tok.body["token"].as_str().unwrap().to_string());
    t.auth = Some(format!("Bearer {secret}"));
    let launched = t.launch(1, json!({})).await;
    assert_eq!(launched["launched_by"]["name"], "alice");
    t.auth = Some("Basic YWxpY2U6cHc=".into());
    assert_eq!(t.send(t.http.delete(t.url(&format!("tokens/{tid}/")))).await.status, 204);
    t.auth = Some(format!("Bearer {secret}"));
    assert_eq!(t.get("jobs/").await.status, 401, "a deleted token no longer works");
    t.sim.shutdown().await;

    // Neither token nor users: open.
    let open = T::start(config()).await;
    assert_eq!(open.get("jobs/").await.status, 200);
    assert_eq!(open.get("me/").await.body["results"][0]["username"], "admin");
    open.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn controller_prefix_moves_everything() {
    let mut cfg = config();
    cfg.api_prefix = "/api/controller/".into();
    let t = T::start(cfg).await;
    let root = t.get("/api/controller/").await.body;
    assert_eq!(root["current_version"], "/api/controller/v2/");
    assert_eq!(root["available_versions"], json!({"v2": "/api/controller/v2/"}));
    assert_eq!(t.get("ping/").await.status, 200);
    assert_eq!(t.get("/api/v2/ping/").await.status, 404);
    assert_eq!(t.get("/api/").await.status, 404);
    let tpl = t.get("job_templates/?name=quick").await.body;
    assert_eq!(tpl["results"][0]["related"]["launch"], "/api/controller/v2/job_templates/1/launch/");
    let r = t.post("job_templates/1/launch/", json!({})).await;
    let id = r.body["id"].as_u64().unwrap();
    assert_eq!(r.headers["location"], format!("/api/controller/v2/jobs/{id}/"));
    assert_eq!(r.body["url"], format!("/api/controller/v2/jobs/{id}/"));
    let page = t.get("jobs/?page_size=1&id__in=1,2").await.body;
    assert_eq!(page["count"], 1);
    // Django's APPEND_SLASH.
    let raw = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = raw.get(format!("{}/api/controller/v2/jobs", t.sim.base_url())).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["location"].to_str().unwrap()), (301, "/api/controller/v2/jobs/"));
    t.sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Faults

#[tokio::test(start_paused = true)]
async fn rate_limiting_answers_429_with_retry_after_and_is_counted() {
    let t = T::start(config()).await;
    let h = t.sim.handle();
    h.set_faults(Faults { rate_limit_every: 3, retry_after_seconds: 7, ..Faults::default() });
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let r = t.get("ping/").await;
        if r.status == 429 {
            assert_eq!(r.headers["retry-after"], "7");
            assert_eq!(r.body, json!({"detail": "Request was throttled."}));
        }
        statuses.push(r.status);
    }
    assert_eq!(statuses, vec![200, 200, 429, 200, 200, 429]);
    assert_eq!(h.requests()["GET /api/v2/ping/"], 6, "answered by a fault, still counted");
    // Admin endpoints are never faulted nor counted.
    for _ in 0..3 {
        assert_eq!(t.get("/_sim/requests").await.status, 200);
    }
    assert_eq!(h.requests().len(), 1);
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn server_errors_are_deterministic_per_seed() {
    async fn sequence(seed: u64) -> Vec<u16> {
        let t = T::start(config()).await;
        t.sim.handle().set_faults(Faults { error_5xx_percent: 50, seed, ..Faults::default() });
        let mut out = Vec::new();
        for _ in 0..30 {
            out.push(t.get("jobs/").await.status);
        }
        t.sim.shutdown().await;
        out
    }
    let a = sequence(42).await;
    assert_eq!(a, sequence(42).await, "same seed, same faults");
    assert!(a.contains(&503) && a.contains(&200), "{a:?}");
    assert_ne!(a, sequence(43).await);

    let t = T::start(config()).await;
    t.sim.handle().set_faults(Faults { error_5xx_percent: 100, ..Faults::default() });
    let r = t.get("jobs/").await;
    assert_eq!(r.status, 503);
    assert!(r.body["detail"].is_string());
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn dropped_connections_and_latency() {
    let t = T::start(config()).await;
    let h = t.sim.handle();
    h.set_faults(Faults { drop_percent: 100, ..Faults::default() });
    let err = reqwest::Client::new().get(t.url("jobs/")).send().await.expect_err("no response");
    assert!(!err.is_status() && !err.is_timeout(), "a transport error: {err:?}");
    let err = reqwest::Client::new().post(t.url("job_templates/1/launch/")).json(&json!({})).send().await;
    assert!(err.is_err(), "{err:?}");
    assert!(h.jobs().is_empty(), "a dropped request is not performed");
    assert_eq!(h.requests()["GET /api/v2/jobs/"], 1);

    h.set_faults(Faults { latency_ms: 150, ..Faults::default() });
    let before = Instant::now();
    assert_eq!(t.get("ping/").await.status, 200);
    assert!(before.elapsed() >= Duration::from_millis(150), "{:?}", before.elapsed());
    // Admin endpoints stay fast and working, so tests can switch faults off.
    let before = Instant::now();
    let r = reqwest::Client::new().put(t.url("/_sim/faults")).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert!(before.elapsed() < Duration::from_millis(150));
    assert_eq!(h.faults(), Faults::default());
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_lost_launch_response_still_creates_and_runs_the_job() {
    let t = T::start(config()).await;
    let h = t.sim.handle();
    h.set_faults(Faults { lose_launch_response_percent: 100, ..Faults::default() });
    let err = reqwest::Client::new()
        .post(t.url("job_templates/1/launch/"))
        .json(&json!({"extra_vars": {"key": "op-1:1"}}))
        .send()
        .await
        .expect_err("the response is lost");
    assert!(!err.is_status(), "{err:?}");
    assert!(t.get("ping/").await.status == 200, "other requests are answered");

    let jobs = h.jobs();
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].launch_lost);
    assert_eq!(jobs[0].extra_vars, json!({"key": "op-1:1"}));
    // A client reconciles by listing the template's recent jobs; the job runs to the end.
    let found = t.get("job_templates/1/jobs/?order_by=-id").await.body;
    assert_eq!(ids(&found), vec![jobs[0].id]);
    assert_eq!(t.terminal("jobs", jobs[0].id).await["status"], "successful");
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_launch_processed_after_its_client_gave_up_still_creates_the_job() {
    let t = T::start(config()).await;
    let h = t.sim.handle();
    h.set_faults(Faults { launch_delay_ms: 400, launch_delay_jitter_ms: 200, ..Faults::default() });
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(100)).build().unwrap();
    let sent = Instant::now();
    let err = impatient
        .post(t.url("job_templates/1/launch/"))
        .json(&json!({"extra_vars": {"key": "op-late:1"}}))
        .send()
        .await
        .expect_err("the client gives up first");
    assert!(err.is_timeout(), "{err:?}");
    assert!(h.jobs().is_empty(), "not processed yet when the client gave up");
    eventually("the received launch to create its job", Duration::from_secs(10), async || !h.jobs().is_empty()).await;
    let landed = sent.elapsed();
    assert!(landed >= Duration::from_millis(400), "processed after the configured delay, took {landed:?}");
    let jobs = h.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].extra_vars, json!({"key": "op-late:1"}));
    assert_eq!(t.terminal("jobs", jobs[0].id).await["status"], "successful");
    t.sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Webhooks

type Received = Arc<Mutex<Vec<(BTreeMap<String, String>, Value)>>>;

/// A tiny webhook receiver recording headers and JSON bodies.
async fn receiver() -> (String, Received, tokio::task::JoinHandle<()>) {
    let got: Received = Arc::default();
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let sink = sink.clone();
            async move {
                let h = headers.iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
                sink.lock().unwrap().push((h, serde_json::from_str(&body).unwrap_or(Value::String(body))));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, got, task)
}

async fn received_until(got: &Received, n: usize) -> Vec<(BTreeMap<String, String>, Value)> {
    eventually(&format!("{n} notifications"), Duration::from_secs(10), async || {
        let now = got.lock().unwrap().clone();
        if now.len() >= n { Ok(now) } else { Err(format!("only {}: {now:?}", now.len())) }
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn webhooks_send_awx_default_bodies() {
    let (url, got, server) = receiver().await;
    let (errors_url, errors_got, errors_server) = receiver().await;
    let mut cfg = config();
    cfg.notifications = vec![
        SimWebhook {
            url,
            headers: BTreeMap::from([("X-Hook-Secret".to_string(), "s3cret".to_string())]),
            ..SimWebhook::default()
        },
        SimWebhook { url: errors_url, events: vec!["error".into()], ..SimWebhook::default() },
    ];
    let t = T::start(cfg).await;
    let ok = t.launch(1, json!({"extra_vars": {"a": 1}})).await["id"].as_u64().unwrap();
    let all = received_until(&got, 2).await;
    let (headers, started) = &all[0];
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["user-agent"], "AWX 24.6.1 (open)");
    assert_eq!(headers["x-hook-secret"], "s3cret");
    let keys: Vec<&str> = started.as_object().unwrap().keys().map(String::as_str).collect();
    for k in [
        "id",
        "name",
        "url",
        "created_by",
        "started",
        "finished",
        "status",
        "traceback",
        "inventory",
        "project",
        "playbook",
        "credential",
        "limit",
        "extra_vars",
        "hosts",
    ] {
        assert!(keys.contains(&k), "missing {k} in {started}");
    }
    assert_eq!(started["id"], ok);
    assert_eq!(started["status"], "running");
    assert_eq!(started["finished"], Value::Null);
    assert!(started["started"].as_str().unwrap().ends_with("+00:00"), "Python isoformat: {started}");
    assert_eq!(started["extra_vars"], "{\"a\": 1}");
    assert_eq!(started["url"], format!("{}/#/jobs/playbook/{ok}", t.sim.base_url()));
    assert_eq!(started["created_by"], "admin");
    let success = &all[1].1;
    assert_eq!((success["status"].clone(), success["traceback"].clone()), (json!("successful"), json!("")));
    assert_eq!(success["hosts"]["localhost"]["ok"], 1);

    let bad = t.launch(5, json!({})).await["id"].as_u64().unwrap();
    let errs = received_until(&errors_got, 1).await;
    assert_eq!(errs.len(), 1, "only error events go to the second hook");
    assert_eq!((errs[0].1["id"].clone(), errs[0].1["status"].clone()), (json!(bad), json!("failed")));
    assert!(!errs[0].1["traceback"].as_str().unwrap().is_empty());

    // Workflow jobs carry the workflow summary body; cancellations notify `error`.
    let wf = t.post("workflow_job_templates/12/launch/", json!({})).await.body["id"].as_u64().unwrap();
    t.job_until("workflow_jobs", wf, "running", |j| j["status"] == "running").await;
    assert_eq!(t.post(&format!("workflow_jobs/{wf}/cancel/"), json!({})).await.status, 202);
    let errs = received_until(&errors_got, 2).await;
    let canceled = &errs[1].1;
    assert_eq!((canceled["id"].clone(), canceled["status"].clone()), (json!(wf), json!("canceled")));
    assert_eq!(canceled["body"], "Workflow job summary:\n");
    assert_eq!(canceled["url"], format!("{}/#/jobs/workflow/{wf}", t.sim.base_url()));
    assert!(canceled.get("hosts").is_none());
    t.sim.shutdown().await;
    server.abort();
    errors_server.abort();
}

// ---------------------------------------------------------------------------------------------
// Test hooks

#[tokio::test(start_paused = true)]
async fn request_counter_purge_and_forced_status() {
    let t = T::start(config()).await;
    let h = t.sim.handle();
    let id = t.launch(3, json!({})).await["id"].as_u64().unwrap();
    t.get(&format!("jobs/{id}/")).await;
    t.get(&format!("jobs/{id}/")).await;
    t.get(&format!("jobs/?id__in={id}")).await;
    t.get(&format!("jobs/{id}/cancel/")).await;
    t.get("nowhere/").await;
    let expected: BTreeMap<String, u64> = [
        ("POST /api/v2/job_templates/{id}/launch/", 1),
        ("GET /api/v2/jobs/{id}/", 2),
        ("GET /api/v2/jobs/", 1),
        ("GET /api/v2/jobs/{id}/cancel/", 1),
        ("GET /api/v2/nowhere/", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(h.requests(), expected);
    h.reset_requests();
    assert!(h.requests().is_empty());

    // Forced statuses stick: the lifecycle no longer drives the job.
    h.set_job_status(id, "failed");
    let forced = t.job(id).await;
    assert_eq!((forced["status"].clone(), forced["failed"].clone()), (json!("failed"), json!(true)));
    assert!(forced["finished"].is_string());
    let other = t.launch(1, json!({})).await["id"].as_u64().unwrap();
    h.set_job_status(other, "running");
    let jobs = h.jobs();
    assert_eq!(jobs.iter().map(|j| j.status.as_str()).collect::<Vec<_>>(), vec!["failed", "running"]);
    assert_eq!(t.job(other).await["status"], "running");

    h.purge_job(id);
    assert_eq!(t.get(&format!("jobs/{id}/")).await.status, 404);
    assert_eq!(t.get(&format!("jobs/?id__in={id},{other}")).await.body["count"], 1);
    assert_eq!(h.jobs().len(), 1);
    t.sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn admin_endpoints_mirror_the_handle() {
    let t = T::start(config()).await;
    let http = reqwest::Client::new();
    let id = t.launch(3, json!({"extra_vars": {"k": "v"}})).await["id"].as_u64().unwrap();

    let counts: Value = http.get(t.url("/_sim/requests")).send().await.unwrap().json().await.unwrap();
    assert_eq!(counts, json!({"POST /api/v2/job_templates/{id}/launch/": 1}));
    assert_eq!(http.post(t.url("/_sim/requests/reset")).send().await.unwrap().status().as_u16(), 204);
    assert_eq!(t.sim.handle().requests().len(), 0);

    let jobs: Value = http.get(t.url("/_sim/jobs")).send().await.unwrap().json().await.unwrap();
    assert_eq!(jobs[0]["id"], id);
    assert_eq!(jobs[0]["kind"], "job");
    assert_eq!(jobs[0]["template_name"], "long");
    assert_eq!(jobs[0]["extra_vars"], json!({"k": "v"}));
    assert_eq!(jobs[0]["launch_lost"], false);

    let r = http.put(t.url(&format!("/_sim/jobs/{id}/status"))).json(&json!({"status": "error"})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(t.job(id).await["status"], "error");

    let r = http.put(t.url("/_sim/faults")).json(&json!({"rate_limit_every": 1})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(t.get("ping/").await.status, 429);
    let r = http.put(t.url("/_sim/faults")).json(&json!({"bogus": 1})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    http.put(t.url("/_sim/faults")).json(&json!({})).send().await.unwrap();

    assert_eq!(http.delete(t.url(&format!("/_sim/jobs/{id}"))).send().await.unwrap().status().as_u16(), 204);
    assert_eq!(t.get(&format!("jobs/{id}/")).await.status, 404);
    assert_eq!(http.delete(t.url(&format!("/_sim/jobs/{id}"))).send().await.unwrap().status().as_u16(), 404);
    t.sim.shutdown().await;
}
