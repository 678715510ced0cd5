//! `jobs_since` against the AWX API simulator: what a restored store learns of the jobs that
//! ran after its backup. Every wait is a bounded poll of a condition.

use std::time::Duration;

use aap_sim::{Sim, SimConfig};
use serde_json::json;
use slipway_aap::{AapAuth, AapProvider, Envelope, Secret};
use slipway_domain::{JobState, Timestamp};
use slipway_provider::{JobAction, ListedJob, Provider, ProviderError};
use slipway_test_support::eventually;
use support::*;

#[allow(dead_code)]
mod support;

/// A provider for OSAC playbooks: `osac-…-hosted-cluster` templates, the OSAC envelope.
fn osac_provider(sim: &Sim) -> AapProvider {
    let mut o = options(sim);
    o.template_prefix = Some("osac".into());
    o.kind_overrides.insert("ClusterOrder".into(), "hosted-cluster".into());
    o.envelope = Envelope::OsacEda;
    provider(o)
}

/// Launches a job of job template `template` the way a person would: extra vars without a
/// Slipway key.
async fn launch_by_hand(sim: &Sim, template: u64) {
    let url = format!("{}/api/v2/job_templates/{template}/launch/", sim.base_url());
    let reply = reqwest::Client::new()
        .post(url)
        .json(&json!({"extra_vars": {"note": "launched by hand"}}))
        .send()
        .await
        .expect("the simulator answers");
    assert_eq!(reply.status().as_u16(), 201, "{:?}", reply.text().await);
}

async fn listed(p: &AapProvider, since: Option<Timestamp>) -> Vec<ListedJob> {
    p.jobs_since(since).await.expect("jobs listed")
}

fn keys(jobs: &[ListedJob]) -> Vec<&str> {
    jobs.iter().map(|j| j.key.as_str()).collect()
}

/// When the simulator created job `id`, to the millisecond.
fn created(sim: &Sim, id: u64) -> Timestamp {
    let t = sim.handle().job_times().into_iter().find(|t| t.id == id).expect("the job exists");
    Timestamp::from_millis(t.created_micros.div_euclid(1000))
}

/// Jobs launched in either envelope come back with their keys, resources, actions, states and
/// handles (those their launches gave), oldest first; a job without a Slipway key does not.
/// One row per page, so the walk follows `next`.
#[tokio::test(start_paused = true)]
async fn keyed_jobs_are_listed_with_their_purpose_oldest_first() {
    let mut slow = template(2, "osac-delete-hosted-cluster");
    slow.duration_seconds = 600.0;
    let sim = start(config(vec![template(1, "slipway-create-virtual-network"), slow], vec![])).await;
    let mut o = options(&sim);
    o.page_size = 1;
    let p = provider(o);
    let osac = osac_provider(&sim);

    let a = p.launch(&create("VirtualNetwork", "op-a:1")).await.unwrap();
    launch_by_hand(&sim, 1).await;
    let b = osac.launch(&request("ClusterOrder", JobAction::Delete, "op-b:1")).await.unwrap();
    assert_eq!(sim.handle().job_count(), 3);

    let jobs = eventually("the first job succeeds and the second runs", WAIT, async || {
        let jobs = listed(&p, None).await;
        let states: Vec<JobState> = jobs.iter().map(|j| j.job.state).collect();
        if states == [JobState::Succeeded, JobState::Running] { Ok(jobs) } else { Err(format!("{states:?}")) }
    })
    .await;
    assert_eq!(keys(&jobs), ["op-a:1", "op-b:1"]);
    let resource = |kind: &str| {
        format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-1/providers/Slipway.Test/things/{kind}-r")
    };
    assert_eq!(jobs[0].resource_id, resource("VirtualNetwork"));
    assert_eq!(jobs[0].action, "create");
    assert_eq!(jobs[0].job.handle, a.handle);
    assert_eq!(jobs[0].job.template, "slipway-create-virtual-network");
    assert_eq!(jobs[0].launched_at, Some(created(&sim, id(&a))));
    assert_eq!(jobs[1].resource_id, resource("ClusterOrder"));
    assert_eq!(jobs[1].action, "delete");
    assert_eq!(jobs[1].job.handle, b.handle);
    assert_eq!(jobs[1].job.template, "osac-delete-hosted-cluster");
    assert_eq!(jobs[1].launched_at, Some(created(&sim, id(&b))));

    // Which envelope the provider launches with does not change what it lists.
    assert_eq!(keys(&listed(&osac, None).await), ["op-a:1", "op-b:1"]);
    assert!(count(&sim, "GET /api/v2/jobs/") >= 3, "one page per row: {:?}", requests(&sim));
    assert!(count(&sim, "GET /api/v2/workflow_jobs/") >= 1, "{:?}", requests(&sim));
}

/// `since` is inclusive, by the controller's clock: a bound past the first job's creation
/// leaves it out; its creation time itself keeps it.
#[tokio::test(start_paused = true)]
async fn since_leaves_out_older_jobs() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    let first = p.launch(&create("Subnet", "op-old:1")).await.unwrap();
    let first_created = created(&sim, id(&first));
    let bound = Timestamp::from_millis(first_created.as_millis() + 1);
    // The simulator stamps jobs by tokio's clock (paused here): moved past the bound, the
    // next job is created after it.
    tokio::time::advance(Duration::from_millis(2)).await;
    let second = p.launch(&create("Subnet", "op-new:1")).await.unwrap();

    let jobs = listed(&p, Some(bound)).await;
    assert_eq!(keys(&jobs), ["op-new:1"]);
    assert_eq!(jobs[0].job.handle, second.handle);
    assert_eq!(keys(&listed(&p, Some(first_created)).await), ["op-old:1", "op-new:1"]);
    assert_eq!(keys(&listed(&p, None).await), ["op-old:1", "op-new:1"]);
}

/// A workflow template's job is listed once, as the workflow job its launch returned.
#[tokio::test(start_paused = true)]
async fn a_workflow_job_is_listed_once() {
    let sim = start(config(vec![], vec![template(20, "slipway-create-subnet")])).await;
    let p = provider(options(&sim));
    let l = p.launch(&create("Subnet", "op-wf:1")).await.unwrap();
    let jobs = listed(&p, None).await;
    assert_eq!(keys(&jobs), ["op-wf:1"]);
    assert_eq!(jobs[0].job.handle, l.handle);
    assert_eq!(jobs[0].job.handle.data["kind"], "workflow_job");
    assert_eq!(jobs[0].job.template, "slipway-create-subnet");
    assert_eq!(jobs[0].action, "create");
}

/// A list the controller refuses fails the listing, saying what was being done.
#[tokio::test(start_paused = true)]
async fn a_refused_list_is_an_error() {
    let sim = start(SimConfig { token: Some("right-token-123".into()), ..config(vec![], vec![]) }).await;
    let mut o = options(&sim);
    o.auth = AapAuth::Token(Secret::new("wrong-token-456"));
    let e = provider(o).jobs_since(None).await.unwrap_err();
    let ProviderError::Permanent(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("401") && m.ends_with(" while listing jobs"), "{m}");
}
