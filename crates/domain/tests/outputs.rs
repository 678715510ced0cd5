//! Outputs: what a successful provisioning job reports (`set_stats` `slipway_outputs`)
//! replaces the resource's outputs; nothing reported keeps them; outputs that are not a
//! mapping or exceed the type's limit fail the job instead (docs/osac-lifecycle.md#outputs).

mod common;

use common::*;
use serde_json::{Value, json};
use slipway_domain::reconcile::{Observation, Outcome};
use slipway_domain::{JobState, ProvisioningState as PS};

fn succeeded_with(outputs: Option<Value>) -> Outcome {
    Outcome::Observed(Observation {
        state: JobState::Succeeded,
        message: "successful".into(),
        error_details: String::new(),
        stats: reported(outputs),
        changes: None,
        progress: None,
    })
}

/// What a job reporting `outputs` with `set_stats` hands back.
fn reported(outputs: Option<Value>) -> Option<Value> {
    outputs.map(|o| json!({ "slipway_outputs": o }))
}

fn map(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().expect("an object").clone()
}

/// Creates the resource; its job reports `outputs` as it ends with `state`.
fn create_reporting(state: JobState, outputs: Option<Value>, limit: usize) -> World {
    let mut w = World::created();
    w.policy.max_output_bytes = limit;
    w.launch(&key(1, 1), "1001");
    let outcome = Outcome::Observed(Observation {
        state,
        message: state.as_str().to_lowercase(),
        error_details: String::new(),
        stats: reported(outputs),
        changes: None,
        progress: None,
    });
    assert_eq!(w.poll(&key(1, 1), outcome), None);
    w.decide();
    w
}

#[test]
fn what_a_job_reports_and_what_the_resource_keeps() {
    let ip = json!({"ipAddress": "10.0.0.4", "hostName": "vm1"});
    struct Case {
        name: &'static str,
        state: JobState,
        outputs: Option<Value>,
        limit: usize,
        want_op: PS,
        want_outputs: Value,
        want_details: &'static str,
    }
    let cases = [
        Case {
            name: "a success reports outputs",
            state: JobState::Succeeded,
            outputs: Some(ip.clone()),
            limit: 1024,
            want_op: PS::Succeeded,
            want_outputs: ip.clone(),
            want_details: "",
        },
        Case {
            name: "outputs exactly at the limit are kept",
            state: JobState::Succeeded,
            outputs: Some(ip.clone()),
            limit: ip.to_string().len(),
            want_op: PS::Succeeded,
            want_outputs: ip.clone(),
            want_details: "",
        },
        Case {
            name: "a byte over the limit fails the job",
            state: JobState::Succeeded,
            outputs: Some(ip.clone()),
            limit: ip.to_string().len() - 1,
            want_op: PS::Failed,
            want_outputs: json!({}),
            want_details: "bytes of outputs, more than this type's limit",
        },
        Case {
            name: "outputs that are not a mapping fail the job",
            state: JobState::Succeeded,
            outputs: Some(json!(["10.0.0.4"])),
            limit: 1024,
            want_op: PS::Failed,
            want_outputs: json!({}),
            want_details: "slipway_outputs must be a mapping of output names to values, not a list",
        },
        Case {
            name: "a failed job's outputs are not kept",
            state: JobState::Failed,
            outputs: Some(ip.clone()),
            limit: 1024,
            want_op: PS::Failed,
            want_outputs: json!({}),
            want_details: "",
        },
        Case {
            name: "a success without outputs has none",
            state: JobState::Succeeded,
            outputs: None,
            limit: 1024,
            want_op: PS::Succeeded,
            want_outputs: json!({}),
            want_details: "",
        },
    ];
    for c in cases {
        let w = create_reporting(c.state, c.outputs, c.limit);
        assert_eq!(w.op(1).status, c.want_op, "{}", c.name);
        assert_eq!(w.res().outputs, map(c.want_outputs), "{}", c.name);
        let job = w.job(&key(1, 1));
        assert!(job.error_details.contains(c.want_details), "{}: {:?}", c.name, job.error_details);
        if c.want_op == PS::Failed && c.state == JobState::Succeeded {
            assert_eq!(job.state, JobState::Failed, "{}", c.name);
            assert_eq!(job.message, "The job succeeded, but its outputs were refused", "{}", c.name);
        }
    }
}

#[test]
fn later_jobs_replace_outputs_or_keep_them_when_they_report_none() {
    let mut w = create_reporting(JobState::Succeeded, Some(json!({"ipAddress": "10.0.0.4"})), 1024);
    let cv1 = w.res().desired_config_version.clone();
    // An update whose job reports nothing keeps the outputs.
    w.put(2, v2()).unwrap();
    w.launch(&key(2, 2), "1002");
    assert_eq!(w.poll(&key(2, 2), succeeded_with(None)), None);
    w.decide();
    assert_eq!(w.op(2).status, PS::Succeeded);
    assert_eq!(w.res().outputs, map(json!({"ipAddress": "10.0.0.4"})));
    assert_ne!(w.res().desired_config_version, cv1, "the spec changed");
    // The next one that reports replaces them whole, and the config version ignores them.
    let cv2 = w.res().desired_config_version.clone();
    w.put(3, v1()).unwrap();
    w.launch(&key(3, 3), "1003");
    assert_eq!(w.poll(&key(3, 3), succeeded_with(Some(json!({"hostName": "vm1"})))), None);
    w.decide();
    assert_eq!(w.res().outputs, map(json!({"hostName": "vm1"})));
    assert_eq!(w.res().desired_config_version, spec(v1()).config_version(), "outputs are not spec");
    assert_ne!(cv2, w.res().desired_config_version);
}

#[test]
fn a_running_job_or_a_delete_job_sets_no_outputs() {
    let mut w = World::created();
    w.launch(&key(1, 1), "1001");
    let running = Outcome::Observed(Observation {
        state: JobState::Running,
        message: "running".into(),
        error_details: String::new(),
        stats: reported(Some(json!({"early": true}))),
        changes: None,
        progress: None,
    });
    w.poll(&key(1, 1), running);
    assert!(w.res().outputs.is_empty(), "only a finished success reports");
    assert_eq!(w.poll(&key(1, 1), succeeded_with(Some(json!({"ipAddress": "10.0.0.4"})))), None);
    w.decide();
    w.delete(2).unwrap();
    let effect = w.decide();
    let slipway_domain::reconcile::Effect::Launch { key: delete_key } = effect.clone() else {
        panic!("expected the delete launch, got {effect:?}")
    };
    w.apply(&effect, launched("2001"));
    let ended = w.poll(&delete_key, succeeded_with(Some(json!({"ipAddress": "gone"}))));
    assert_eq!(ended, None);
    if let Some(res) = w.snap.resource.as_ref() {
        assert_eq!(res.outputs, map(json!({"ipAddress": "10.0.0.4"})), "a deprovision job's outputs are ignored");
    }
}

#[test]
fn a_job_found_already_finished_after_a_crash_is_polled_so_its_outputs_are_read() {
    let mut w = World::created();
    let effect = w.decide();
    assert_eq!(effect, slipway_domain::reconcile::Effect::Launch { key: key(1, 1) });
    // The process died before the launch's answer was recorded; the job ran to the end.
    let find = slipway_domain::reconcile::Effect::Find { key: key(1, 1) };
    assert_eq!(w.decide(), find, "the Launching entry is looked up");
    let hold = w.apply(&find, Outcome::Found(vec![started("1001", JobState::Succeeded)]));
    assert_eq!(hold, None, "polled at once");
    assert_eq!(w.job(&key(1, 1)).state, JobState::Unknown, "not yet taken as finished");
    let outputs = Some(json!({"ipAddress": "10.0.0.4"}));
    assert_eq!(w.poll(&key(1, 1), succeeded_with(outputs)), None);
    w.decide();
    assert_eq!(w.op(1).status, PS::Succeeded);
    assert_eq!(w.res().outputs, map(json!({"ipAddress": "10.0.0.4"})));
}
