//! The AAP provider against the AWX API simulator (`slipway-aap-sim`), started in-process.
//! Request counts come from the simulator's own counter; time-sensitive assertions measure
//! timestamps, and every wait is a bounded poll of a condition.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use aap_sim::{Faults, SimConfig, SimOrganization, SimUser};
use serde_json::json;
use slipway_aap::{AapAuth, AapOptions, AapProvider, Envelope, JobKind, Secret};
use slipway_domain::JobState;
use slipway_provider::{CancelOutcome, JobAction, JobHandle, JobStatus, Provider, ProviderError};
use slipway_test_support::{TestClock, eventually, jump};
use support::*;

#[allow(dead_code)]
mod support;

// ---------------------------------------------------------------------------------------
// Launch and status

/// A job template launch with the extra vars, followed to its end (docs/providers.md#launch).
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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

#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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

/// A launch whose answer is lost is `Indeterminate`; `find` adopts the job it started.
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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

#[tokio::test(start_paused = true)]
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

#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
#[tokio::test(start_paused = true)]
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
/// a one-hour window no longer reaches back to a job created just now. Real time, jumped:
/// `jump` pauses and resumes the clock itself.
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
#[tokio::test(start_paused = true)]
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
