//! The AAP provider against the AWX API simulator (`slipway-aap-sim`), started in-process.
//! Request counts come from the simulator's own counter; time-sensitive assertions measure
//! timestamps, and every wait is a bounded poll of a condition.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aap_sim::{Faults, RateLimitBurst, Sim, SimConfig, SimOrganization, SimTemplate, SimUser};
use serde_json::{Value, json};
use slipway_aap::{AapAuth, AapOptions, AapProvider, Envelope, JobKind, Secret};
use slipway_domain::JobState;
use slipway_provider::{
    CancelOutcome, JobAction, JobHandle, JobStatus, LaunchRequest, Launched, Provider, ProviderError,
};
use slipway_test_support::{TestClock, eventually, jump};

const WAIT: Duration = Duration::from_secs(30);

/// A quick template: prompts for variables, runs 0.2 s, succeeds.
fn template(id: u64, name: &str) -> SimTemplate {
    SimTemplate {
        id,
        name: name.into(),
        organization: 1,
        ask_variables_on_launch: true,
        allow_simultaneous: true,
        duration_seconds: 0.2,
        pending_seconds: 0.05,
        ..SimTemplate::default()
    }
}

fn config(job_templates: Vec<SimTemplate>, workflow_job_templates: Vec<SimTemplate>) -> SimConfig {
    SimConfig { job_templates, workflow_job_templates, tick_ms: 20, ..SimConfig::default() }
}

async fn start(config: SimConfig) -> Sim {
    Sim::start("127.0.0.1:0", config).await.expect("simulator starts")
}

fn options(sim: &Sim) -> AapOptions {
    AapOptions {
        name: "aap-test".into(),
        base_url: sim.base_url(),
        template_prefix: Some("slipway".into()),
        request_timeout: Duration::from_secs(10),
        retry_backoff: Duration::from_millis(20),
        max_retry_wait: Duration::from_secs(5),
        ..AapOptions::default()
    }
}

fn provider(options: AapOptions) -> AapProvider {
    AapProvider::new(options).expect("provider builds")
}

fn request(kind: &str, action: JobAction, key: &str) -> LaunchRequest {
    LaunchRequest {
        idempotency_key: key.into(),
        action,
        kind: kind.into(),
        resource_type: "slipway.test/things".into(),
        resource_id: format!("/subscriptions/s1/resourceGroups/rg-1/providers/Slipway.Test/things/{kind}-r"),
        resource_name: format!("{kind}-r"),
        location: Some("local".into()),
        tags: serde_json::Map::new(),
        properties: json!({"size": 1}),
        outputs: serde_json::Map::new(),
        operation_id: Some("op-1".into()),
        config_version: "cv-1".into(),
        intended_at: None,
        context: None,
        secrets: Default::default(),
        parent: None,
        references: Default::default(),
        parameters: Value::Null,
    }
}

fn create(kind: &str, key: &str) -> LaunchRequest {
    request(kind, JobAction::Create, key)
}

fn with_properties(mut r: LaunchRequest, properties: Value) -> LaunchRequest {
    r.properties = properties;
    r
}

/// Requests the simulator counted under `key` (`"GET /api/v2/jobs/"`).
fn count(sim: &Sim, key: &str) -> u64 {
    sim.handle().requests().get(key).copied().unwrap_or(0)
}

fn requests(sim: &Sim) -> BTreeMap<String, u64> {
    sim.handle().requests()
}

async fn status1(p: &AapProvider, h: &JobHandle) -> Result<JobStatus, ProviderError> {
    let mut v = p.status(std::slice::from_ref(h)).await;
    assert_eq!(v.len(), 1);
    v.pop().unwrap()
}

/// Polls until the job is terminal and answers its status.
async fn terminal(p: &AapProvider, h: &JobHandle) -> JobStatus {
    eventually("a terminal status", WAIT, async || match status1(p, h).await {
        Ok(s) if s.state.is_terminal() => Some(s),
        Ok(_) => None,
        Err(e) => panic!("status failed: {e}"),
    })
    .await
}

fn key_jobs(sim: &Sim, key: &str) -> Vec<aap_sim::SimJob> {
    sim.handle().jobs().into_iter().filter(|j| slipway_aap::key_of(&j.extra_vars).as_deref() == Some(key)).collect()
}

fn id(l: &Launched) -> u64 {
    l.handle.job_id.as_str().parse().unwrap()
}

// ---------------------------------------------------------------------------------------
// Launch and status

/// A job template launch with the extra vars, followed to its end (docs/providers.md#launch).
#[tokio::test]
async fn job_template_launch_runs_to_success() {
    let sim = start(config(vec![template(11, "slipway-create-virtual-network")], vec![])).await;
    let p = provider(options(&sim));
    let l = p.launch(&create("VirtualNetwork", "op-1:1")).await.unwrap();
    assert_eq!(l.template, "slipway-create-virtual-network");
    assert_eq!(l.state, JobState::Pending);
    assert_eq!(l.handle.data["kind"], "job");
    assert_eq!(l.handle.data["template_id"], 11);
    assert_eq!(l.handle.data["template"], "slipway-create-virtual-network");
    assert_eq!(count(&sim, "POST /api/v2/job_templates/{id}/launch/"), 1);

    let jobs = key_jobs(&sim, "op-1:1");
    assert_eq!(jobs.len(), 1);
    let vars = &jobs[0].extra_vars;
    assert_eq!(jobs[0].id, id(&l));
    assert_eq!(vars["slipway"]["resource"]["kind"], "VirtualNetwork");
    assert_eq!(vars["slipway"]["resource"]["properties"]["size"], 1);
    assert_eq!(vars["slipway"]["action"], "create");
    assert_eq!(vars["slipway"]["idempotencyKey"], "op-1:1");

    let s = terminal(&p, &l.handle).await;
    assert_eq!(s, JobStatus::new(JobState::Succeeded, "successful"));
    // Polling uses the batched list, never the detail view of a successful job.
    assert!(count(&sim, "GET /api/v2/jobs/") >= 1);
    assert_eq!(count(&sim, "GET /api/v2/jobs/{id}/"), 0);
}

/// A job's `artifacts` (its `set_stats` data) are reported with its status, read from the
/// batched list: no request beyond the poll. A failed job's too (a preflight job fails with
/// its checks). Workflow jobs have no artifacts.
#[tokio::test]
async fn job_artifacts_become_outputs() {
    let mut t = template(11, "slipway-create-compute-instance");
    t.artifacts = json!({"unrelated": 1, "slipway_outputs": {"ipAddress": "10.0.0.4", "hostName": "{{ slipway.resource.name }}"}});
    let mut failing = template(12, "slipway-create-subnet");
    failing.outcome = "failed".into();
    failing.artifacts = t.artifacts.clone();
    let sim = start(config(vec![t, failing], vec![])).await;
    let p = provider(options(&sim));
    let l = p.launch(&create("ComputeInstance", "op-1:1")).await.unwrap();
    let s = terminal(&p, &l.handle).await;
    assert_eq!(s.state, JobState::Succeeded);
    let outputs = json!({"ipAddress": "10.0.0.4", "hostName": "ComputeInstance-r"});
    assert_eq!(s.stats, Some(json!({"unrelated": 1, "slipway_outputs": outputs})));
    assert_eq!(count(&sim, "GET /api/v2/jobs/{id}/"), 0, "outputs come with the batched status");
    let l = p.launch(&create("Subnet", "op-2:1")).await.unwrap();
    let s = terminal(&p, &l.handle).await;
    assert_eq!(s.state, JobState::Failed);
    assert_eq!(s.stats.as_ref().map(|v| v["unrelated"].clone()), Some(json!(1)), "a failed job's report counts");
}

/// The same with the OSAC envelope (docs/providers.md#launch).
#[tokio::test]
async fn osac_envelope_reaches_the_job() {
    let sim = start(config(vec![template(3, "osac-create-hosted-cluster")], vec![])).await;
    let mut o = options(&sim);
    o.template_prefix = Some("osac".into());
    o.kind_overrides.insert("ClusterOrder".into(), "hosted-cluster".into());
    o.envelope = Envelope::OsacEda;
    let p = provider(o);
    let mut r = create("ClusterOrder", "op-osac:1");
    r.tags.insert("osac.openshift.io/implementation-strategy".into(), json!("hcp"));
    let l = p.launch(&r).await.unwrap();
    let job = key_jobs(&sim, "op-osac:1").pop().expect("one job");
    assert_eq!(job.id, id(&l));
    let payload = &job.extra_vars["ansible_eda"]["event"]["payload"];
    assert_eq!(payload["metadata"]["name"], "ClusterOrder-r");
    assert_eq!(payload["metadata"]["namespace"], "rg-1");
    assert_eq!(payload["kind"], "ClusterOrder");
    assert_eq!(payload["spec"]["size"], 1);
    assert_eq!(payload["metadata"]["annotations"]["osac.openshift.io/implementation-strategy"], "hcp");
    assert_eq!(job.extra_vars["slipway_idempotency_key"], "op-osac:1");
}

/// Every AAP status word (docs/providers.md#status), observed through the batched list.
#[tokio::test]
async fn status_words_map_to_states() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let p = provider(options(&sim));
    let l = p.launch(&create("Subnet", "op-s:1")).await.unwrap();
    for (word, state) in [
        ("new", JobState::Unknown),
        ("pending", JobState::Pending),
        ("waiting", JobState::Waiting),
        ("running", JobState::Running),
        ("canceled", JobState::Canceled),
        ("successful", JobState::Succeeded),
    ] {
        sim.handle().set_job_status(id(&l), word);
        let s = status1(&p, &l.handle).await.unwrap();
        assert_eq!((s.state, s.message.as_str()), (state, word), "{word}");
    }
}

/// A failed job's details (docs/providers.md#status): the detail view is read
/// once per failed job, however often it is polled.
#[tokio::test]
async fn failed_job_details_are_fetched_once() {
    let sim = start(config(vec![template(5, "slipway-create-security-group")], vec![])).await;
    let p = provider(options(&sim));
    let r = with_properties(create("SecurityGroup", "op-f:1"), json!({"simulateFailure": true}));
    let l = p.launch(&r).await.unwrap();
    let s = terminal(&p, &l.handle).await;
    assert_eq!(s.state, JobState::Failed);
    assert_eq!(s.message, "failed: Job failed: simulated failure");
    assert_eq!(s.error_details, "simulated failure");
    let again = status1(&p, &l.handle).await.unwrap();
    assert_eq!(again, s);
    assert_eq!(count(&sim, "GET /api/v2/jobs/{id}/"), 1, "{:?}", requests(&sim));
}

/// A workflow template starts a workflow job (docs/providers.md#launch); unlike OSAC's client, a
/// workflow job is polled and cancelled under `workflow_jobs/`, never `jobs/`.
#[tokio::test]
async fn workflow_jobs_use_workflow_endpoints() {
    let mut wf = template(20, "slipway-create-subnet");
    wf.duration_seconds = 600.0;
    let sim = start(config(vec![], vec![wf])).await;
    let p = provider(options(&sim));
    let l = p.launch(&create("Subnet", "op-wf:1")).await.unwrap();
    assert_eq!(l.handle.data["kind"], "workflow_job");
    assert_eq!(count(&sim, "POST /api/v2/workflow_job_templates/{id}/launch/"), 1);
    // Workflow hit = 2 lookups (job templates first).
    assert_eq!(count(&sim, "GET /api/v2/job_templates/"), 1);
    assert_eq!(count(&sim, "GET /api/v2/workflow_job_templates/"), 1);

    let s = eventually("running", WAIT, async || {
        let s = status1(&p, &l.handle).await.unwrap();
        (s.state == JobState::Running).then_some(s)
    })
    .await;
    assert_eq!(s.message, "running");
    assert!(count(&sim, "GET /api/v2/workflow_jobs/") >= 1);
    assert_eq!(p.cancel(&l.handle).await.unwrap(), CancelOutcome::Requested);
    assert_eq!(count(&sim, "POST /api/v2/workflow_jobs/{id}/cancel/"), 1);
    assert_eq!(terminal(&p, &l.handle).await.state, JobState::Canceled);
    let seen = requests(&sim);
    assert!(
        !seen.keys().any(|k| k.starts_with("GET /api/v2/jobs/") || k.starts_with("POST /api/v2/jobs/")),
        "{seen:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Template resolution

/// Job templates win over workflow templates of the same name (docs/providers.md#templates).
#[tokio::test]
async fn job_template_is_preferred_over_workflow() {
    let sim =
        start(config(vec![template(1, "slipway-create-subnet")], vec![template(2, "slipway-create-subnet")])).await;
    let p = provider(options(&sim));
    let l = p.launch(&create("Subnet", "op-p:1")).await.unwrap();
    assert_eq!(l.handle.data["kind"], "job");
    assert_eq!(l.handle.data["template_id"], 1);
    assert_eq!(count(&sim, "GET /api/v2/job_templates/"), 1);
    assert_eq!(count(&sim, "GET /api/v2/workflow_job_templates/"), 0);
    assert_eq!(p.cached_template("slipway-create-subnet"), Some((1, JobKind::Job)));
}

/// Neither kind has the template: a permanent error (docs/providers.md#templates).
#[tokio::test]
async fn missing_template_is_permanent() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    let e = p.launch(&create("VirtualNetwork", "op-m:1")).await.unwrap_err();
    match &e {
        ProviderError::Permanent(m) => {
            assert!(
                m.contains("\"slipway-create-virtual-network\" not found as a job template or workflow job template"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&sim, "GET /api/v2/job_templates/"), 1);
    assert_eq!(count(&sim, "GET /api/v2/workflow_job_templates/"), 1);
    assert!(!requests(&sim).keys().any(|k| k.starts_with("POST")));
    // find never claims absence when the template cannot be resolved.
    assert!(matches!(p.find(&create("VirtualNetwork", "op-m:1")).await, Err(ProviderError::Permanent(_))));
}

fn two_orgs() -> SimConfig {
    let mut a = template(1, "slipway-create-subnet");
    a.organization = 1;
    let mut b = template(2, "slipway-create-subnet");
    b.organization = 2;
    let mut c = config(vec![a, b], vec![]);
    c.organizations =
        vec![SimOrganization { id: 1, name: "Default".into() }, SimOrganization { id: 2, name: "Engineering".into() }];
    c
}

#[tokio::test]
async fn ambiguous_template_needs_an_organization() {
    let sim = start(two_orgs()).await;
    let p = provider(options(&sim));
    let e = p.launch(&create("Subnet", "op-a:1")).await.unwrap_err();
    let ProviderError::Permanent(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("ambiguous") && m.contains("Default") && m.contains("Engineering"), "{m}");
    assert!(m.contains("organization"), "{m}");
    assert!(!requests(&sim).keys().any(|k| k.starts_with("POST")));

    let mut o = options(&sim);
    o.organization = Some("Engineering".into());
    let p = provider(o);
    let l = p.launch(&create("Subnet", "op-a:2")).await.unwrap();
    assert_eq!(l.handle.data["template_id"], 2);
    assert_eq!(count(&sim, "POST /api/v2/job_templates/{id}/launch/"), 1);
}

/// A second launch does not look the template up again (docs/providers.md#templates).
#[tokio::test]
async fn template_resolution_is_cached() {
    let sim =
        start(config(vec![template(1, "slipway-create-subnet"), template(2, "slipway-delete-subnet")], vec![])).await;
    let p = provider(options(&sim));
    p.launch(&create("Subnet", "op-c:1")).await.unwrap();
    p.launch(&create("Subnet", "op-c:2")).await.unwrap();
    assert_eq!(count(&sim, "GET /api/v2/job_templates/"), 1);
    assert_eq!(count(&sim, "POST /api/v2/job_templates/{id}/launch/"), 2);

    // After clearing the cache, every name is looked up again.
    p.launch(&request("Subnet", JobAction::Delete, "op-c:3")).await.unwrap();
    assert_eq!(count(&sim, "GET /api/v2/job_templates/"), 2);
    p.clear_template_cache();
    p.launch(&create("Subnet", "op-c:4")).await.unwrap();
    p.launch(&request("Subnet", JobAction::Delete, "op-c:5")).await.unwrap();
    assert_eq!(count(&sim, "GET /api/v2/job_templates/"), 4);
}

/// docs/providers.md#templates: a launch answered 404 (the cached template no longer exists at
/// that id) drops the cache entry; the next launch looks the name up again. The stale
/// entry is seeded: the simulator cannot delete or recreate a template.
#[tokio::test]
async fn launch_404_drops_the_cached_template() {
    let sim =
        start(config(vec![template(1, "slipway-create-subnet")], vec![template(30, "slipway-delete-subnet")])).await;
    let p = provider(options(&sim));
    p.cache_template("slipway-create-subnet", 999, JobKind::Job);
    let e = p.launch(&create("Subnet", "op-404:1")).await.unwrap_err();
    assert!(matches!(&e, ProviderError::Transient(m) if m.contains("404")), "{e:?}");
    assert_eq!(count(&sim, "POST /api/v2/job_templates/{id}/launch/"), 1);
    assert_eq!(p.cached_template("slipway-create-subnet"), None);
    assert_eq!(count(&sim, "GET /api/v2/job_templates/"), 0);
    let l = p.launch(&create("Subnet", "op-404:2")).await.unwrap();
    assert_eq!(l.handle.data["template_id"], 1);
    assert_eq!(count(&sim, "GET /api/v2/job_templates/"), 1);

    // Workflow variant: stale workflow id → 404 → re-resolved (2 lookups) → launched.
    p.cache_template("slipway-delete-subnet", 998, JobKind::WorkflowJob);
    sim.handle().reset_requests();
    let e = p.launch(&request("Subnet", JobAction::Delete, "op-404:3")).await.unwrap_err();
    assert!(matches!(e, ProviderError::Transient(_)), "{e:?}");
    assert_eq!(count(&sim, "POST /api/v2/workflow_job_templates/{id}/launch/"), 1);
    let l = p.launch(&request("Subnet", JobAction::Delete, "op-404:4")).await.unwrap();
    assert_eq!(l.handle.data["kind"], "workflow_job");
    assert_eq!(count(&sim, "GET /api/v2/job_templates/") + count(&sim, "GET /api/v2/workflow_job_templates/"), 2);
}

/// A template that would silently drop the extra vars is refused before any launch.
#[tokio::test]
async fn template_must_prompt_for_variables() {
    let mut no_prompt = template(1, "slipway-create-subnet");
    no_prompt.ask_variables_on_launch = false;
    let mut survey = template(2, "slipway-delete-subnet");
    survey.ask_variables_on_launch = false;
    survey.survey_enabled = true;
    let mut wf = template(3, "slipway-create-security-group");
    wf.ask_variables_on_launch = false;
    let sim = start(config(vec![no_prompt, survey], vec![wf])).await;
    let p = provider(options(&sim));
    for r in [create("Subnet", "op-np:1"), create("SecurityGroup", "op-np:2")] {
        let e = p.launch(&r).await.unwrap_err();
        let ProviderError::Permanent(m) = &e else { panic!("{e:?}") };
        assert!(m.contains("does not prompt for variables on launch"), "{m}");
    }
    assert!(!requests(&sim).keys().any(|k| k.starts_with("POST")), "{:?}", requests(&sim));
    // Not cached as usable: fixing the template in AAP takes effect on the next attempt.
    assert_eq!(p.cached_template("slipway-create-subnet"), None);
    // A survey counts as prompting.
    let l = p.launch(&request("Subnet", JobAction::Delete, "op-np:3")).await.unwrap();
    assert_eq!(l.handle.data["template_id"], 2);
}

/// Lookup failures are not "not found" (a seed bug): 401 is permanent, 5xx transient, and
/// neither mentions a missing template.
#[tokio::test]
async fn lookup_errors_are_not_reported_as_not_found() {
    let mut c = config(vec![template(1, "slipway-create-subnet")], vec![]);
    c.token = Some("right-token-123".into());
    let sim = start(c).await;
    let mut o = options(&sim);
    o.auth = AapAuth::Token(Secret::new("wrong-token-456"));
    let e = provider(o).launch(&create("Subnet", "op-l:1")).await.unwrap_err();
    let ProviderError::Permanent(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("401") && !m.contains("not found as"), "{m}");
    assert_eq!(count(&sim, "GET /api/v2/workflow_job_templates/"), 0);

    let mut o = options(&sim);
    o.auth = AapAuth::Token(Secret::new("right-token-123"));
    o.get_retries = 1;
    let p = provider(o);
    sim.handle().set_faults(Faults { error_5xx_percent: 100, ..Faults::default() });
    let e = p.launch(&create("Subnet", "op-l:2")).await.unwrap_err();
    let ProviderError::Transient(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("503") && !m.contains("not found as"), "{m}");
}

/// The readiness check asks `v2/me/`: right credentials pass, wrong ones are refused by name,
/// an unreachable controller is transient.
#[tokio::test]
async fn the_readiness_check_tells_refused_credentials_from_an_unreachable_controller() {
    let mut c = config(vec![], vec![]);
    c.token = Some("right-token-123".into());
    let sim = start(c).await;
    let mut o = options(&sim);
    o.auth = AapAuth::Token(Secret::new("right-token-123"));
    provider(o).check().await.expect("ready");
    assert_eq!(count(&sim, "GET /api/v2/me/"), 1);
    let mut o = options(&sim);
    o.auth = AapAuth::Token(Secret::new("wrong-token-456"));
    let e = provider(o).check().await.unwrap_err();
    let ProviderError::Permanent(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("refused this provider's credentials") && !m.contains("wrong-token"), "{m}");
    let mut o = options(&sim);
    // A port nothing listens on: the listener is dropped before the check.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    o.base_url = format!("http://127.0.0.1:{closed}");
    o.get_retries = 0;
    let e = provider(o).check().await.unwrap_err();
    assert!(matches!(e, ProviderError::Transient(_)), "{e:?}");
}

// ---------------------------------------------------------------------------------------
// Batching, retries, rate limits

/// 450 jobs → exactly 3 list requests per status call (200 ids each), and with smaller
/// pages the `next` links are followed.
#[tokio::test]
async fn status_is_batched_and_paged() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let p = provider(options(&sim));
    let mut handles = Vec::new();
    for i in 0..450 {
        handles.push(p.launch(&create("Subnet", &format!("op-b:{i}"))).await.unwrap().handle);
    }
    sim.handle().reset_requests();
    let results = p.status(&handles).await;
    assert_eq!(results.len(), 450);
    for (h, r) in handles.iter().zip(&results) {
        let s = r.as_ref().unwrap_or_else(|e| panic!("{}: {e}", h.job_id));
        assert!(!s.state.is_terminal(), "{s:?}");
    }
    assert_eq!(requests(&sim), BTreeMap::from([("GET /api/v2/jobs/".to_owned(), 3)]));

    // Pages of 50: 200 ids → 4 pages, twice, then 50 ids → 1 page.
    let mut o = options(&sim);
    o.page_size = 50;
    let small = provider(o);
    sim.handle().reset_requests();
    let results = small.status(&handles).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(requests(&sim), BTreeMap::from([("GET /api/v2/jobs/".to_owned(), 9)]));

    // Results keep the order of the handles, duplicates and bad handles included.
    let mixed = vec![
        handles[7].clone(),
        JobHandle { job_id: "x".into(), data: json!({"kind": "job"}) },
        handles[7].clone(),
        JobHandle { job_id: handles[3].job_id.clone(), data: json!({"kind": "inventory_update"}) },
    ];
    let r = p.status(&mixed).await;
    assert_eq!(r.len(), 4);
    assert!(r[0].is_ok() && r[2].is_ok());
    assert!(matches!(r[1], Err(ProviderError::Permanent(_))));
    assert!(matches!(r[3], Err(ProviderError::Permanent(_))));

    // find walks the pages (newest first) until the key: the first job is on page 3.
    sim.handle().reset_requests();
    let found = small.find(&create("Subnet", "op-b:0")).await.unwrap().pop().expect("found");
    assert_eq!(found.handle, handles[0]);
    assert_eq!(count(&sim, "GET /api/v2/jobs/"), 9);
}

/// A 429 with `Retry-After` is retried no earlier than advertised.
#[tokio::test]
async fn rate_limit_retry_after_is_honoured() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let p = provider(options(&sim));
    let l = p.launch(&create("Subnet", "op-r:1")).await.unwrap();
    // Every 2nd request (counted from now) is a 429 asking for 1 s.
    sim.handle().set_faults(Faults { rate_limit_every: 2, retry_after_seconds: 1, ..Faults::default() });
    sim.handle().reset_requests();
    status1(&p, &l.handle).await.unwrap(); // request 1: fine
    let started = Instant::now();
    let s = status1(&p, &l.handle).await.unwrap(); // request 2: 429, then request 3
    let elapsed = started.elapsed();
    assert!(!s.state.is_terminal());
    assert!(elapsed >= Duration::from_secs(1), "retried after {elapsed:?}");
    assert_eq!(count(&sim, "GET /api/v2/jobs/"), 3);

    // A wait longer than max_retry_wait is handed to the engine instead.
    sim.handle().set_faults(Faults { rate_limit_every: 1, retry_after_seconds: 60, ..Faults::default() });
    let started = Instant::now();
    let e = status1(&p, &l.handle).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(e, ProviderError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(60)),
        "{e:?}"
    );
    // The advertised minute holds every request of the provider, the launch too: refused
    // without being sent, with the time left.
    sim.handle().set_faults(Faults::default());
    sim.handle().reset_requests();
    let e = p.launch(&create("Subnet", "op-r:2")).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::RateLimited { retry_after, .. }
            if retry_after <= Duration::from_secs(60) && retry_after > Duration::from_secs(50)),
        "{e:?}"
    );
    assert!(requests(&sim).is_empty(), "{:?}", requests(&sim));
    // A 429 on launch is a refusal, reported with its Retry-After.
    sim.handle().set_faults(Faults { rate_limit_every: 1, retry_after_seconds: 60, ..Faults::default() });
    let fresh = provider(options(&sim));
    fresh.cache_template("slipway-create-subnet", 1, JobKind::Job);
    let e = fresh.launch(&create("Subnet", "op-r:2")).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(60)),
        "{e:?}"
    );
    sim.handle().set_faults(Faults::default());
    assert!(key_jobs(&sim, "op-r:2").is_empty());
}

fn user_agent(client_id: &str) -> String {
    format!("slipway/{} ({client_id})", env!("CARGO_PKG_VERSION"))
}

/// The simulator with a strict Retry-After accounting: no grace for requests in flight.
fn strict(mut config: SimConfig) -> SimConfig {
    config.retry_after_grace_ms = 0;
    config
}

/// A 429 with Retry-After holds *every* request of the provider instance (lookups, status
/// lists, find, cancel) until the advertised time; the launch is refused meanwhile, unsent.
/// Measured: each held call ends after the simulator's "blocked until", and the simulator saw
/// no request of this client arrive before it.
#[tokio::test]
async fn a_retry_after_holds_every_request_of_the_provider() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(strict(config(vec![t], vec![]))).await;
    let h = sim.handle();
    let p = provider(AapOptions { client_id: "node-a/aap".into(), ..options(&sim) });
    let ua = user_agent("node-a/aap");
    let l = p.launch(&create("Subnet", "op-g:1")).await.unwrap();
    // For the next second every request is answered 429, Retry-After: 1.
    h.set_faults(Faults {
        rate_limit_burst: Some(RateLimitBurst { every_ms: 3_600_000, length_ms: 1_000 }),
        ..Faults::default()
    });
    h.reset_requests();

    let first = async {
        let s = status1(&p, &l.handle).await;
        (s, Instant::now())
    };
    let others = async {
        let until = eventually("the 429", WAIT, async || h.blocked_until(&ua)).await;
        // The simulator records the 429 as it answers; the provider closes its gate once
        // the answer arrives.
        eventually("the provider's gate", WAIT, async || p.throttled_for()).await;
        // Only the first status request reached the simulator so far.
        assert_eq!(h.requests_by_client().get(&ua), Some(&1));
        let launched = p.launch(&create("Subnet", "op-g:2")).await;
        let launch_ended = Instant::now();
        let (found, status, cancel) = tokio::join!(
            async { (p.find(&create("Subnet", "op-g:1")).await, Instant::now()) },
            async { (status1(&p, &l.handle).await, Instant::now()) },
            async { (p.cancel(&l.handle).await, Instant::now()) },
        );
        (until, launched, launch_ended, found, status, cancel)
    };
    let ((s1, s1_at), (until, launched, launch_ended, found, status, cancel)) = tokio::join!(first, others);

    assert!(launch_ended < until, "the launch did not wait");
    assert!(
        matches!(&launched, Err(ProviderError::RateLimited { retry_after, .. }) if *retry_after <= Duration::from_secs(1)),
        "{launched:?}"
    );
    assert!(s1.is_ok() && s1_at >= until, "{s1:?}");
    assert!(id(&found.0.unwrap().pop().expect("found")) == id(&l) && found.1 >= until);
    assert!(status.0.is_ok() && status.1 >= until, "{:?}", status.0);
    assert!(cancel.0.is_ok() && cancel.1 >= until, "{:?}", cancel.0);
    assert_eq!(h.retry_after_violations(), vec![], "nothing arrived before the advertised time");
    assert!(key_jobs(&sim, "op-g:2").is_empty());
    let r = requests(&sim);
    assert_eq!(r.get("POST /api/v2/job_templates/{id}/launch/"), None, "{r:?}");
    assert_eq!(h.injected().rate_limited, 1, "one 429, then nothing until it expired: {r:?}");
    assert_eq!(h.requests_by_client().keys().collect::<Vec<_>>(), vec![&ua]);
}

/// A Retry-After longer than `max_retry_wait` is handed to the engine by every request of
/// the provider, without sending anything, until it has passed; another provider instance
/// (another client) is not held.
#[tokio::test]
async fn a_long_retry_after_refuses_requests_unsent() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(strict(config(vec![t], vec![]))).await;
    let h = sim.handle();
    let p = provider(AapOptions { client_id: "node-b".into(), ..options(&sim) });
    let l = p.launch(&create("Subnet", "op-l:1")).await.unwrap();
    h.set_faults(Faults { rate_limit_every: 1, retry_after_seconds: 60, ..Faults::default() });
    let e = status1(&p, &l.handle).await.unwrap_err();
    assert!(matches!(e, ProviderError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(60)));
    h.set_faults(Faults::default());
    h.reset_requests();

    let started = Instant::now();
    let held = |e: &ProviderError| {
        matches!(e, ProviderError::RateLimited { retry_after, .. }
            if *retry_after <= Duration::from_secs(60) && *retry_after > Duration::from_secs(50))
    };
    let e = status1(&p, &l.handle).await.unwrap_err();
    assert!(held(&e), "{e:?}");
    let e = p.find(&create("Subnet", "op-l:1")).await.unwrap_err();
    assert!(held(&e), "{e:?}");
    let e = p.cancel(&l.handle).await.unwrap_err();
    assert!(held(&e), "{e:?}");
    let e = p.launch(&create("Subnet", "op-l:2")).await.unwrap_err();
    assert!(held(&e), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once: {:?}", started.elapsed());
    assert!(requests(&sim).is_empty(), "nothing sent: {:?}", requests(&sim));

    let other = provider(AapOptions { client_id: "node-c".into(), ..options(&sim) });
    assert!(status1(&other, &l.handle).await.is_ok());
    assert_eq!(h.requests_by_client().keys().collect::<Vec<_>>(), vec![&user_agent("node-c")]);
    assert_eq!(h.retry_after_violations(), vec![]);
}

/// A 503 with Retry-After (a gateway in maintenance) closes the gate as a 429 does; the
/// retries of idempotent requests honour it, and a launch meanwhile is refused, not
/// `Indeterminate` (it was never sent).
#[tokio::test]
async fn a_503_with_retry_after_closes_the_gate_too() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    // The default grace: the retry and the find leave the gate together when it opens, and
    // the one answered second was in flight when the first got its 503.
    let sim = start(config(vec![t], vec![])).await;
    let h = sim.handle();
    let p = provider(AapOptions { get_retries: 1, ..options(&sim) });
    let ua = user_agent("aap-test");
    let l = p.launch(&create("Subnet", "op-m:1")).await.unwrap();
    h.set_faults(Faults { error_5xx_percent: 100, error_5xx_retry_after_seconds: 1, ..Faults::default() });
    h.reset_requests();
    let started = Instant::now();
    let (a, (launched, b)) = tokio::join!(status1(&p, &l.handle), async {
        eventually("the 503", WAIT, async || h.blocked_until(&ua)).await;
        // The simulator records the 503 as it answers; the provider closes its gate once
        // the answer arrives (the launch would otherwise go out and meet the 503 itself).
        eventually("the provider's gate", WAIT, async || p.throttled_for()).await;
        // The template is cached: the launch goes straight to the (closed) gate.
        (p.launch(&create("Subnet", "op-m:2")).await, p.find(&create("Subnet", "op-m:1")).await)
    });
    // Two tries each, a second apart at least: the gate held the retry and the find.
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
    assert!(matches!(&a, Err(ProviderError::Transient(m)) if m.contains("503")), "{a:?}");
    assert!(matches!(&b, Err(ProviderError::Transient(_))), "{b:?}");
    assert!(matches!(&launched, Err(ProviderError::RateLimited { .. })), "{launched:?}");
    assert!(key_jobs(&sim, "op-m:2").is_empty());
    assert_eq!(h.retry_after_violations(), vec![]);
    // The provider name is the default client id.
    assert_eq!(h.requests_by_client().keys().collect::<Vec<_>>(), vec![&ua]);
}

/// GETs are retried through 5xx; after the last retry the error is transient.
#[tokio::test]
async fn gets_are_retried_on_5xx() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let mut o = options(&sim);
    o.get_retries = 12;
    let p = provider(o);
    let l = p.launch(&create("Subnet", "op-5:1")).await.unwrap();
    sim.handle().set_faults(Faults { error_5xx_percent: 30, drop_percent: 30, seed: 7, ..Faults::default() });
    sim.handle().reset_requests();
    for _ in 0..10 {
        status1(&p, &l.handle).await.unwrap();
    }
    assert!(count(&sim, "GET /api/v2/jobs/") > 10, "{:?}", requests(&sim));

    let mut o = options(&sim);
    o.get_retries = 2;
    let p2 = provider(o);
    sim.handle().set_faults(Faults { error_5xx_percent: 100, ..Faults::default() });
    sim.handle().reset_requests();
    let e = status1(&p2, &l.handle).await.unwrap_err();
    assert!(matches!(&e, ProviderError::Transient(m) if m.contains("503")), "{e:?}");
    assert_eq!(count(&sim, "GET /api/v2/jobs/"), 3);
}

/// The launch POST is never retried: a 503 is `Indeterminate` after exactly one POST.
#[tokio::test]
async fn launch_is_never_retried() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    p.launch(&create("Subnet", "op-n:1")).await.unwrap(); // resolves and caches
    sim.handle().set_faults(Faults { error_5xx_percent: 100, ..Faults::default() });
    sim.handle().reset_requests();
    let e = p.launch(&create("Subnet", "op-n:2")).await.unwrap_err();
    assert!(matches!(e, ProviderError::Indeterminate(_)), "{e:?}");
    assert_eq!(requests(&sim), BTreeMap::from([("POST /api/v2/job_templates/{id}/launch/".to_owned(), 1)]));
    // The simulator refused it before creating a job: find proves it absent.
    sim.handle().set_faults(Faults::default());
    assert_eq!(p.find(&create("Subnet", "op-n:2")).await.unwrap(), Vec::new());
}

/// A launch whose answer is lost is `Indeterminate`; `find` adopts the job it started.
#[tokio::test]
async fn lost_launch_response_is_resolved_by_find() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    p.launch(&create("Subnet", "op-lost:0")).await.unwrap();
    sim.handle().set_faults(Faults { lose_launch_response_percent: 100, ..Faults::default() });
    let e = p.launch(&create("Subnet", "op-lost:1")).await.unwrap_err();
    assert!(matches!(e, ProviderError::Indeterminate(_)), "{e:?}");
    sim.handle().set_faults(Faults::default());
    let jobs = key_jobs(&sim, "op-lost:1");
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].launch_lost);
    let found = p.find(&create("Subnet", "op-lost:1")).await.unwrap().pop().expect("adopted");
    assert_eq!(id(&found), jobs[0].id);
    assert_eq!(found.handle.data["kind"], "job");
    assert_eq!(found.template, "slipway-create-subnet");
    assert_eq!(terminal(&p, &found.handle).await.state, JobState::Succeeded);
    assert_eq!(key_jobs(&sim, "op-lost:1").len(), 1);
    // And a key never launched is positively absent.
    assert_eq!(p.find(&create("Subnet", "op-lost:2")).await.unwrap(), Vec::new());
}

/// A job purged from AAP while non-terminal: transient within the grace, then NotFound
/// (docs/providers.md#status; the OSAC operator polled it forever).
#[tokio::test]
async fn purged_job_is_not_polled_forever() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let mut o = options(&sim);
    o.purge_grace = Duration::from_millis(300);
    let p = provider(o);
    let l = p.launch(&create("Subnet", "op-g:1")).await.unwrap();
    assert!(status1(&p, &l.handle).await.is_ok());
    sim.handle().purge_job(id(&l));
    let first_missing = Instant::now();
    let e = status1(&p, &l.handle).await.unwrap_err();
    assert!(matches!(&e, ProviderError::Transient(m) if m.contains("not found")), "{e:?}");
    let gone = eventually("NotFound", WAIT, async || match status1(&p, &l.handle).await {
        Err(ProviderError::NotFound(m)) => Some(m),
        Err(ProviderError::Transient(_)) => None,
        other => panic!("{other:?}"),
    })
    .await;
    assert!(first_missing.elapsed() >= Duration::from_millis(300));
    assert!(gone.contains("no longer exists"), "{gone}");
    // Cancelling a purged job: NotFound too.
    assert!(matches!(p.cancel(&l.handle).await, Err(ProviderError::NotFound(_))));
}

// ---------------------------------------------------------------------------------------
// Cancel

/// Cancel (docs/providers.md#cancel-and-find): 202 → keep polling until canceled;
/// 405 once finished.
#[tokio::test]
async fn cancel_then_poll_until_canceled() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    let r = with_properties(create("Subnet", "op-x:1"), json!({"delaySeconds": 600}));
    let l = p.launch(&r).await.unwrap();
    assert_eq!(p.cancel(&l.handle).await.unwrap(), CancelOutcome::Requested);
    assert_eq!(count(&sim, "POST /api/v2/jobs/{id}/cancel/"), 1);
    assert_eq!(terminal(&p, &l.handle).await.state, JobState::Canceled);
    assert_eq!(p.cancel(&l.handle).await.unwrap(), CancelOutcome::AlreadyFinished);

    let done = p.launch(&create("Subnet", "op-x:2")).await.unwrap();
    assert_eq!(terminal(&p, &done.handle).await.state, JobState::Succeeded);
    assert_eq!(p.cancel(&done.handle).await.unwrap(), CancelOutcome::AlreadyFinished);
    let bad = JobHandle { job_id: "12".into(), data: json!({"kind": "system_job"}) };
    assert!(matches!(p.cancel(&bad).await, Err(ProviderError::Permanent(_))));
}

// ---------------------------------------------------------------------------------------
// Authentication, prefixes, secrets

#[tokio::test]
async fn token_auth_on_the_gateway_prefix() {
    let mut c = config(vec![template(1, "slipway-create-subnet")], vec![]);
    c.api_prefix = "/api/controller/".into();
    c.token = Some("gw-token-789".into());
    let sim = start(c).await;
    let mut o = options(&sim);
    o.api_prefix = "/api/controller/".into();
    o.auth = AapAuth::Token(Secret::new("gw-token-789"));
    let p = provider(o);
    let l = p.launch(&create("Subnet", "op-t:1")).await.unwrap();
    assert_eq!(count(&sim, "POST /api/controller/v2/job_templates/{id}/launch/"), 1);
    assert_eq!(terminal(&p, &l.handle).await.state, JobState::Succeeded);
    assert!(count(&sim, "GET /api/controller/v2/jobs/") >= 1);

    // The wrong prefix is a configuration error, not a missing template.
    let mut o = options(&sim);
    o.auth = AapAuth::Token(Secret::new("gw-token-789"));
    let e = provider(o).launch(&create("Subnet", "op-t:2")).await.unwrap_err();
    let ProviderError::Permanent(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("404") && m.contains("api_prefix"), "{m}");
}

#[tokio::test]
async fn basic_auth() {
    let mut c = config(vec![template(1, "slipway-create-subnet")], vec![]);
    c.users = vec![SimUser { username: "admin".into(), password: "basic-pass-321".into() }];
    let sim = start(c).await;
    let mut o = options(&sim);
    o.auth = AapAuth::Basic { username: "admin".into(), password: Secret::new("basic-pass-321") };
    let p = provider(o);
    let l = p.launch(&create("Subnet", "op-ba:1")).await.unwrap();
    assert_eq!(terminal(&p, &l.handle).await.state, JobState::Succeeded);

    let mut o = options(&sim);
    o.auth = AapAuth::Basic { username: "admin".into(), password: Secret::new("wrong-pass-654") };
    let p = provider(o);
    let e = p.launch(&create("Subnet", "op-ba:2")).await.unwrap_err();
    let text = format!("{e} {e:?}");
    assert!(text.contains("401"), "{text}");
    assert!(!text.contains("wrong-pass-654") && !text.contains(&secret_b64("admin:wrong-pass-654")), "{text}");
    let e = status1(&p, &l.handle).await.unwrap_err();
    assert!(!format!("{e:?}").contains("wrong-pass-654"));
}

/// Secrets never show in error texts, whatever fails: auth, transport, status.
#[tokio::test]
async fn secrets_never_appear_in_errors() {
    let mut c = config(vec![template(1, "slipway-create-subnet")], vec![]);
    c.token = Some("the-real-token".into());
    let sim = start(c).await;
    let secret = "tok-SECRET-abc123";
    let mut o = options(&sim);
    o.auth = AapAuth::Token(Secret::new(secret));
    let p = provider(o.clone());
    let mut texts = Vec::new();
    let e = p.launch(&create("Subnet", "op-sec:1")).await.unwrap_err();
    texts.push(format!("{e} {e:?}"));
    let h = JobHandle { job_id: "1".into(), data: json!({"kind": "job"}) };
    let e = status1(&p, &h).await.unwrap_err();
    texts.push(format!("{e} {e:?}"));
    let e = p.cancel(&h).await.unwrap_err();
    texts.push(format!("{e} {e:?}"));
    let e = p.find(&create("Subnet", "op-sec:1")).await.unwrap_err();
    texts.push(format!("{e} {e:?}"));
    // A port nothing listens on: a transport error, reported as certainly not sent.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    o.base_url = format!("http://{closed}");
    o.get_retries = 0;
    let p = provider(o.clone());
    p.cache_template("slipway-create-subnet", 1, JobKind::Job);
    let e = p.launch(&create("Subnet", "op-sec:2")).await.unwrap_err();
    assert!(matches!(&e, ProviderError::Transient(m) if m.contains("cannot connect")), "{e:?}");
    texts.push(format!("{e} {e:?}"));
    let e = status1(&p, &h).await.unwrap_err();
    assert!(matches!(e, ProviderError::Transient(_)), "{e:?}");
    texts.push(format!("{e} {e:?}"));
    texts.push(format!("{o:?}"));
    for t in &texts {
        assert!(!t.contains(secret), "secret leaked: {t}");
    }
    assert!(texts[0].contains("401"), "{}", texts[0]);
}

fn secret_b64(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in s.as_bytes().chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= c.len() { A[((n >> (18 - 6 * i)) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

/// A template that stopped prompting for variables after it was cached: AAP starts the job
/// without the extra vars and says so in `ignored_fields`. That job cannot do its work nor
/// be found by key: it is cancelled and the launch fails permanently.
#[tokio::test]
async fn ignored_extra_vars_cancel_the_job_and_fail_the_launch() {
    let mut t = template(4, "slipway-create-subnet");
    t.ask_variables_on_launch = false;
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let p = provider(options(&sim));
    // As cached while the template still prompted.
    p.cache_template("slipway-create-subnet", 4, JobKind::Job);
    let e = p.launch(&create("Subnet", "op-ig:1")).await.unwrap_err();
    let ProviderError::Permanent(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("ignored the launch fields [extra_vars]") && m.contains("was cancelled"), "{m}");
    assert_eq!(p.cached_template("slipway-create-subnet"), None);
    let jobs = sim.handle().jobs();
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].cancel_requested, "{:?}", jobs[0]);
    assert_eq!(count(&sim, "POST /api/v2/jobs/{id}/cancel/"), 1);
}

/// Jobs and workflow jobs polled together: one list request per kind.
#[tokio::test]
async fn mixed_kinds_are_polled_with_one_request_per_kind() {
    let mut jt = template(1, "slipway-create-subnet");
    jt.duration_seconds = 600.0;
    let mut wf = template(2, "slipway-delete-subnet");
    wf.duration_seconds = 600.0;
    let sim = start(config(vec![jt], vec![wf])).await;
    let p = provider(options(&sim));
    let mut handles = Vec::new();
    for i in 0..3 {
        handles.push(p.launch(&create("Subnet", &format!("op-mx:{i}"))).await.unwrap().handle);
        handles.push(p.launch(&request("Subnet", JobAction::Delete, &format!("op-mx:d{i}"))).await.unwrap().handle);
    }
    sim.handle().reset_requests();
    let r = p.status(&handles).await;
    assert!(r.iter().all(Result::is_ok), "{r:?}");
    assert_eq!(
        requests(&sim),
        BTreeMap::from([("GET /api/v2/jobs/".to_owned(), 1), ("GET /api/v2/workflow_jobs/".to_owned(), 1)])
    );
}

/// `find` bounded to a recent window (`created__gt`) still finds a recent job.
#[tokio::test]
async fn find_within_a_window() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let mut o = options(&sim);
    o.find_window = Some(Duration::from_secs(3600));
    let p = provider(o);
    let l = p.launch(&create("Subnet", "op-w:1")).await.unwrap();
    let found = p.find(&create("Subnet", "op-w:1")).await.unwrap().pop().expect("found");
    assert_eq!(found.handle, l.handle);
    assert_eq!(p.find(&create("Subnet", "op-w:2")).await.unwrap(), Vec::new());
}

/// The window is measured on the provider's clock ([`AapOptions::clock`]): two hours ahead,
/// a one-hour window no longer reaches back to a job created just now.
#[tokio::test]
async fn the_find_window_is_measured_on_the_provider_clock() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let clock = Arc::new(TestClock::new());
    let p =
        provider(AapOptions { find_window: Some(Duration::from_secs(3600)), clock: clock.clone(), ..options(&sim) });
    let l = p.launch(&create("Subnet", "op-wc:1")).await.unwrap();
    let found = p.find(&create("Subnet", "op-wc:1")).await.unwrap().pop().expect("found");
    assert_eq!(found.handle, l.handle);
    jump(Duration::from_secs(7200)).await;
    assert_eq!(p.find(&create("Subnet", "op-wc:1")).await.unwrap(), Vec::new());
}

/// Requests beyond `max_concurrent_requests` wait for a permit.
#[tokio::test]
async fn concurrency_is_limited() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let mut o = options(&sim);
    o.max_concurrent_requests = 1;
    let p = provider(o);
    let l = p.launch(&create("Subnet", "op-cc:1")).await.unwrap();
    sim.handle().set_faults(Faults { latency_ms: 150, ..Faults::default() });
    let started = Instant::now();
    let (a, b, c) = tokio::join!(status1(&p, &l.handle), status1(&p, &l.handle), status1(&p, &l.handle));
    let elapsed = started.elapsed();
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    // One at a time: three latencies in a row.
    assert!(elapsed >= Duration::from_millis(450), "{elapsed:?}");
}

#[test]
fn bad_options_are_refused() {
    let base = || AapOptions { base_url: "https://aap.example.com".into(), ..AapOptions::default() };
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("ca.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    for (o, want) in [
        (AapOptions { ca_bundle: Some(dir.path().join("missing.pem")), ..base() }, "CA bundle"),
        (AapOptions { ca_bundle: Some(garbage), ..base() }, "no PEM certificate"),
        (AapOptions { max_concurrent_requests: 0, ..base() }, "max_concurrent_requests"),
        (AapOptions { page_size: 500, ..base() }, "page_size"),
        (AapOptions { api_prefix: "api".into(), ..base() }, "api_prefix"),
        (AapOptions { base_url: "aap.example.com".into(), ..base() }, "base_url"),
        (AapOptions { request_timeout: Duration::ZERO, ..base() }, "request_timeout"),
    ] {
        let e = AapProvider::new(o).err().expect("refused").to_string();
        assert!(e.contains(want), "{e} (want {want})");
    }
    assert!(AapProvider::new(AapOptions { insecure: true, ..base() }).is_ok());
}
