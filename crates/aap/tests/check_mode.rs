//! Check mode (a what-if) against the simulator: a check launch of a job template that
//! prompts for its job type, its changes read once it ended, and the refusals of what cannot
//! run in check mode, sending nothing.

use aap_sim::{Faults, SimTemplate};
use serde_json::{Value, json};
use slipway_aap::{JobKind, is_check};
use slipway_domain::JobState;
use slipway_provider::{JobAction, LaunchRequest, Provider, ProviderError, RunMode, TaskChange};
use slipway_test_support::eventually;
use support::*;

#[allow(dead_code)]
mod support;

const LAUNCH: &str = "POST /api/v2/job_templates/{id}/launch/";
const EVENTS: &str = "GET /api/v2/jobs/{id}/job_events/";
const DETAIL: &str = "GET /api/v2/jobs/{id}/";

/// A quick template that prompts for variables, job type and diff mode.
fn prompting(id: u64, name: &str) -> SimTemplate {
    SimTemplate { ask_job_type_on_launch: true, ask_diff_mode_on_launch: true, ..template(id, name) }
}

fn check(mut r: LaunchRequest) -> LaunchRequest {
    r.mode = RunMode::Check;
    r
}

fn create_subnet(key: &str, properties: Value) -> LaunchRequest {
    with_properties(create("Subnet", key), properties)
}

/// The text the simulated create playbook records for the test's Subnet with `properties`.
fn state_of(properties: Value) -> String {
    aap_sim::state_text(&json!({"location": "local", "tags": {}, "properties": properties}))
}

fn resource_id() -> String {
    create("Subnet", "k").resource_id.to_string()
}

fn state_path() -> String {
    format!("{}/slipway.test_things/Subnet-r.json", aap_sim::STATE_DIR)
}

#[tokio::test(start_paused = true)]
async fn a_check_launch_runs_in_check_mode_and_reports_its_changes() {
    let sim = start(config(vec![prompting(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    let l = p.launch(&check(create_subnet("op-c:1", json!({"size": 1})))).await.unwrap();
    assert_eq!(l.handle.data["check"], true);
    assert!(is_check(&l.handle));
    let job = sim.handle().job(id(&l)).unwrap();
    assert_eq!((job.job_type.as_str(), job.diff_mode), ("check", true));

    let s = terminal(&p, &l.handle).await;
    assert_eq!(s.state, JobState::Succeeded);
    let path = state_path();
    let want = TaskChange {
        task: "Record the resource".into(),
        host: "localhost".into(),
        diff: json!({"before": "", "after": state_of(json!({"size": 1})), "before_header": path, "after_header": path}),
    };
    assert_eq!(s.changes, Some(vec![want]));
    assert_eq!(sim.handle().resource_state(&resource_id()), None, "a check job changes nothing");
    assert_eq!(count(&sim, EVENTS), 1, "{:?}", requests(&sim));

    // Polled again: remembered, nothing read again.
    sim.handle().reset_requests();
    assert_eq!(status1(&p, &l.handle).await.unwrap(), s);
    assert_eq!(requests(&sim).keys().collect::<Vec<_>>(), ["GET /api/v2/jobs/"]);
}

#[tokio::test(start_paused = true)]
async fn a_check_after_a_run_reports_the_difference_or_nothing() {
    let sim = start(config(vec![prompting(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    let run = p.launch(&create_subnet("op-r:1", json!({"size": 1}))).await.unwrap();
    assert!(!is_check(&run.handle) && run.handle.data.get("check").is_none(), "{}", run.handle.data);
    let s = terminal(&p, &run.handle).await;
    assert_eq!((s.state, s.changes), (JobState::Succeeded, None));
    assert_eq!(count(&sim, EVENTS), 0, "a run job's status reads no events");
    assert_eq!(sim.handle().resource_state(&resource_id()), Some(state_of(json!({"size": 1}))));

    let changed = p.launch(&check(create_subnet("op-r:2", json!({"size": 2})))).await.unwrap();
    let s = terminal(&p, &changed.handle).await;
    let changes = s.changes.expect("a check job's changes");
    assert_eq!(changes.len(), 1, "{changes:?}");
    let diff = &changes[0].diff;
    assert_eq!(diff["before"], json!(state_of(json!({"size": 1}))));
    assert_eq!(diff["after"], json!(state_of(json!({"size": 2}))));
    assert_eq!(sim.handle().resource_state(&resource_id()), Some(state_of(json!({"size": 1}))));

    let same = p.launch(&check(create_subnet("op-r:3", json!({"size": 1})))).await.unwrap();
    assert_eq!(terminal(&p, &same.handle).await.changes, Some(vec![]));
}

/// A template that does not prompt for its job type would run the job for real: refused,
/// unsent, naming the template and the setting. Run-mode launches of it still work.
#[tokio::test(start_paused = true)]
async fn a_template_that_does_not_prompt_for_its_job_type_is_unsupported() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    let e = p.launch(&check(create("Subnet", "op-u:1"))).await.unwrap_err();
    let ProviderError::Unsupported(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("'slipway-create-subnet'") && m.contains("ask_job_type_on_launch"), "{m}");
    assert_eq!(count(&sim, LAUNCH), 0);
    assert!(sim.handle().jobs().is_empty());
    // Not kept: turning the prompt on in AAP takes effect on the next attempt.
    assert_eq!(p.cached_template("slipway-create-subnet"), None);
    p.launch(&create("Subnet", "op-u:2")).await.unwrap();
    assert_eq!(count(&sim, LAUNCH), 1);
}

#[tokio::test(start_paused = true)]
async fn a_workflow_template_cannot_run_in_check_mode() {
    let sim = start(config(vec![], vec![prompting(20, "slipway-create-subnet")])).await;
    let p = provider(options(&sim));
    let e = p.launch(&check(create("Subnet", "op-w:1"))).await.unwrap_err();
    let ProviderError::Unsupported(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("workflow job template 'slipway-create-subnet'") && m.contains("check mode"), "{m}");
    assert_eq!(count(&sim, "POST /api/v2/workflow_job_templates/{id}/launch/"), 0);
    assert!(sim.handle().jobs().is_empty());
}

/// A check job found by key (after a launch whose answer was lost) or listed after a restore
/// is known as one from its own `job_type`.
#[tokio::test(start_paused = true)]
async fn found_and_listed_check_jobs_keep_their_check_handle() {
    let sim = start(config(vec![prompting(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    let r = check(create_subnet("op-f:1", json!({"size": 1})));
    sim.handle().set_faults(Faults { lose_launch_response_percent: 100, ..Faults::default() });
    let e = p.launch(&r).await.unwrap_err();
    assert!(matches!(e, ProviderError::Indeterminate(_)), "{e:?}");
    sim.handle().set_faults(Faults::default());
    let found = p.find(&r).await.unwrap().pop().expect("the check job");
    assert_eq!(found.handle.data["check"], true, "{}", found.handle.data);
    let run = p.launch(&create_subnet("op-f:2", json!({"size": 1}))).await.unwrap();
    assert!(!is_check(&p.find(&create_subnet("op-f:2", json!({}))).await.unwrap()[0].handle));

    let listed = p.jobs_since(None).await.unwrap();
    let checks: Vec<bool> = listed.iter().map(|j| is_check(&j.job.handle)).collect();
    assert_eq!(checks, [true, false]);
    assert_eq!(listed[0].job.handle, found.handle);
    assert_eq!(listed[1].job.handle, run.handle);
    assert!(terminal(&p, &found.handle).await.changes.is_some());
}

/// The template stopped prompting for its job type after it was resolved: AAP started the
/// job in run mode. It is cancelled and the launch fails, saying so.
#[tokio::test(start_paused = true)]
async fn an_ignored_job_type_cancels_the_run_job_and_fails_the_launch() {
    let mut t = template(4, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let p = provider(options(&sim));
    // As cached while it still prompted.
    p.cache_template("slipway-create-subnet", 4, JobKind::Job);
    let e = p.launch(&check(create("Subnet", "op-i:1"))).await.unwrap_err();
    let ProviderError::Permanent(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("ignored job_type") && m.contains("run mode") && m.contains("was cancelled"), "{m}");
    let jobs = sim.handle().jobs();
    assert_eq!((jobs.len(), jobs[0].job_type.as_str(), jobs[0].cancel_requested), (1, "run", true));
    assert_eq!(p.cached_template("slipway-create-subnet"), None);
}

/// A template that prompts for its job type but not for diff mode: a check job without
/// diffs, its changed tasks still reported.
#[tokio::test(start_paused = true)]
async fn without_diff_mode_changes_come_without_diffs() {
    let t = SimTemplate { ask_diff_mode_on_launch: false, ..prompting(1, "slipway-create-subnet") };
    let sim = start(config(vec![t], vec![])).await;
    let p = provider(options(&sim));
    let l = p.launch(&check(create("Subnet", "op-d:1"))).await.unwrap();
    let job = sim.handle().job(id(&l)).unwrap();
    assert_eq!((job.job_type.as_str(), job.diff_mode), ("check", false));
    let changes = terminal(&p, &l.handle).await.changes.unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].task.as_str(), &changes[0].diff), ("Record the resource", &Value::Null));
}

/// The template stopped prompting for diff mode after it was resolved: AAP ignores
/// `diff_mode` only. The job still runs in check mode: it is kept, reporting no diffs, and the
/// template is looked up again next time (so no `diff_mode` is sent then).
#[tokio::test(start_paused = true)]
async fn an_ignored_diff_mode_keeps_the_check_job() {
    let t = SimTemplate { ask_diff_mode_on_launch: false, ..prompting(1, "slipway-create-subnet") };
    let sim = start(config(vec![t], vec![])).await;
    let p = provider(options(&sim));
    // As cached while it still prompted for both.
    p.cache_template("slipway-create-subnet", 1, JobKind::Job);
    let l = p.launch(&check(create("Subnet", "op-dm:1"))).await.unwrap();
    assert!(is_check(&l.handle));
    let job = sim.handle().job(id(&l)).unwrap();
    assert_eq!((job.job_type.as_str(), job.diff_mode, job.cancel_requested), ("check", false, false));
    assert_eq!(p.cached_template("slipway-create-subnet"), None);
    let changes = terminal(&p, &l.handle).await.changes.unwrap();
    assert_eq!((changes.len(), &changes[0].diff), (1, &Value::Null));
}

/// A failed check job fails as a run job does; it predicted no change before it failed.
#[tokio::test(start_paused = true)]
async fn a_failed_check_job_reports_its_failure() {
    let sim = start(config(vec![prompting(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    let r = check(create_subnet("op-x:1", json!({"simulateFailure": true})));
    let s = terminal(&p, &p.launch(&r).await.unwrap().handle).await;
    assert_eq!((s.state, s.error_details.as_str()), (JobState::Failed, "simulated failure"));
    assert_eq!(s.changes, Some(vec![]));
}

/// AWX marks a job finished before its events are all saved: until they are, the job is not
/// reported ended (its changes would be incomplete), and its events are not read.
#[tokio::test(start_paused = true)]
async fn a_check_job_is_not_ended_before_its_events_are_saved() {
    let sim = start(config(vec![prompting(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    sim.handle().set_faults(Faults { event_processing_delay_ms: 3_600_000, ..Faults::default() });
    let l = p.launch(&check(create_subnet("op-e:1", json!({"size": 1})))).await.unwrap();
    eventually("the job to end at AAP", WAIT, async || {
        (sim.handle().job(id(&l)).unwrap().status == "successful").then_some(())
    })
    .await;
    let s = status1(&p, &l.handle).await.unwrap();
    assert_eq!((s.state, s.changes.as_ref()), (JobState::Running, None), "{s:?}");
    assert!(s.message.starts_with("successful") && s.message.contains("still saving"), "{}", s.message);
    assert_eq!(count(&sim, EVENTS), 0);
    sim.handle().set_faults(Faults::default());
    let s = status1(&p, &l.handle).await.unwrap();
    assert_eq!((s.state, s.changes.map(|c| c.len())), (JobState::Succeeded, Some(1)));
    assert_eq!(count(&sim, EVENTS), 1);
}

/// Status stays batched: among many jobs, only the ended check job costs the reads of its
/// detail and its changed tasks.
#[tokio::test(start_paused = true)]
async fn only_ended_check_jobs_cost_extra_reads() {
    let mut long = prompting(2, "slipway-delete-subnet");
    long.duration_seconds = 600.0;
    let sim = start(config(vec![prompting(1, "slipway-create-subnet"), long], vec![])).await;
    let p = provider(options(&sim));
    let ended_check = p.launch(&check(create("Subnet", "op-b:1"))).await.unwrap();
    let ended_run = p.launch(&create("Subnet", "op-b:2")).await.unwrap();
    let running_check = p.launch(&check(request("Subnet", JobAction::Delete, "op-b:3"))).await.unwrap();
    for l in [&ended_check, &ended_run] {
        terminal(&p, &l.handle).await;
    }
    // A provider that remembers no changes yet.
    let p = provider(options(&sim));
    sim.handle().reset_requests();
    let handles = [ended_check.handle, ended_run.handle, running_check.handle];
    let r = p.status(&handles).await;
    let changes: Vec<Option<usize>> = r.iter().map(|s| s.as_ref().unwrap().changes.as_ref().map(Vec::len)).collect();
    assert_eq!(changes, [Some(1), None, None]);
    let want: std::collections::BTreeMap<String, u64> =
        [("GET /api/v2/jobs/", 1), (DETAIL, 1), (EVENTS, 1)].into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    assert_eq!(requests(&sim), want);
}
