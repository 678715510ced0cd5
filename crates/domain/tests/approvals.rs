//! Approvals as the API and the engine drive them: a held write runs nothing until it is
//! approved; denied, timed out or canceled, it leaves nothing of itself.

mod common;

use common::*;
use serde_json::json;
use slipway_domain::admission::{Admitted, Rejection};
use slipway_domain::approval::{
    self, ApprovalRule, ApprovalState, Prior, Requester, Requirement, TimeoutOutcome, Verdict,
};
use slipway_domain::identity::{Principal, PrincipalKind};
use slipway_domain::operation::codes;
use slipway_domain::reconcile::Effect;
use slipway_domain::whatif::WhatIf;
use slipway_domain::{ProvisioningState, Spec};

fn person(name: &str) -> Principal {
    Principal {
        name: name.into(),
        tenant: Some("T1".into()),
        groups: Vec::new(),
        kind: PrincipalKind::User,
        confined_to: Vec::new(),
    }
}

fn requirement(rule: ApprovalRule) -> Requirement {
    Requirement {
        assignment_id: "/subscriptions/s/providers/Microsoft.Authorization/policyAssignments/big".into(),
        definition_id: "/providers/Microsoft.Authorization/policyDefinitions/big".into(),
        reason: "type equals VirtualNetwork".into(),
        rule,
    }
}

/// Holds operation `op`, just admitted in `w`, for approval by a policy with `rule`; an
/// update passes the resource as it was before it.
fn hold_with(w: &mut World, op: u32, rule: ApprovalRule, was: Option<(Spec, Prior)>) {
    let (before, prior) = was.map_or((None, None), |(s, p)| (Some(s), Some(p)));
    let what_if = WhatIf { before, after: Some(w.res().spec.clone()), predicted: None, guardrails: Vec::new() };
    let held = approval::approval_for(requirement(rule), Requester::from(&person("alice")), what_if, prior, w.now);
    approval::hold(&mut w.snap, &op_id(op), held, false, w.now);
}

fn hold(w: &mut World, op: u32, rule: ApprovalRule) {
    hold_with(w, op, rule, None);
}

/// A provisioned resource with an update to `v2` (operation 2) held for approval.
fn held_update() -> World {
    let mut w = World::provisioned();
    let was = (w.res().spec.clone(), Prior::of(w.res()));
    w.advance(secs(10));
    assert!(matches!(w.put(2, v2()), Ok(Admitted::Accepted { .. })));
    hold_with(&mut w, 2, ApprovalRule::default(), Some(was));
    w
}

fn decide(w: &mut World, op: u32, who: &str, verdict: Verdict) -> Result<slipway_domain::Operation, Rejection> {
    let decider = approval::Decider { who: Requester::from(&person(who)), trusted: false };
    approval::decide(&mut w.snap, &op_id(op), &decider, verdict, Some("looks fine".into()), w.now)
}

#[test]
fn a_held_create_runs_nothing_until_approved_then_runs_with_its_deadline_from_the_approval() {
    let mut w = World::created();
    w.policy.create_deadline = secs(1000);
    hold(&mut w, 1, ApprovalRule { timeout: secs(3600), ..ApprovalRule::default() });
    assert_eq!(w.op(1).status, ProvisioningState::WaitingForApproval);
    assert_eq!(w.res().provisioning_state, ProvisioningState::WaitingForApproval);
    assert_eq!(w.decide(), Effect::Sleep { until: Some(at(3600)) }, "nothing launches; woken at the deadline");

    // The create's own deadline would have passed while it waited: it counts from the approval.
    w.advance(secs(3000));
    let approved = decide(&mut w, 1, "bob", Verdict::Approved).expect("bob may approve");
    assert_eq!(approved.status, ProvisioningState::Accepted);
    assert_eq!(w.res().schedule.next_due, Some(at(3000)), "the engine looks at once");
    assert_eq!(w.op(1).approval.as_ref().unwrap().state(), ApprovalState::Approved);
    w.launch(&key(1, 1), "1001");
    assert_eq!(w.op(1).running_since(), at(3000));
}

#[test]
fn the_requester_cannot_decide_their_own_request_unless_the_policy_allows_it() {
    let mut w = World::created();
    hold(&mut w, 1, ApprovalRule::default());
    assert!(matches!(decide(&mut w, 1, "alice", Verdict::Approved), Err(Rejection::OwnRequest { .. })));
    assert_eq!(w.op(1).status, ProvisioningState::WaitingForApproval, "a refusal changes nothing");

    let mut w = World::created();
    hold(&mut w, 1, ApprovalRule { allow_self_approval: true, ..ApprovalRule::default() });
    assert!(decide(&mut w, 1, "alice", Verdict::Approved).is_ok());
}

#[test]
fn a_decided_request_cannot_be_decided_again() {
    let mut w = World::created();
    hold(&mut w, 1, ApprovalRule::default());
    decide(&mut w, 1, "bob", Verdict::Approved).unwrap();
    let again = decide(&mut w, 1, "carol", Verdict::Denied);
    assert!(matches!(again, Err(Rejection::Conflict { message, .. }) if message.contains("Approved")));
}

#[test]
fn a_denied_create_leaves_no_resource_and_fails_its_operation() {
    let mut w = World::created();
    hold(&mut w, 1, ApprovalRule::default());
    let denied = decide(&mut w, 1, "bob", Verdict::Denied).unwrap();
    assert_eq!(denied.status, ProvisioningState::Failed);
    let error = denied.error.unwrap();
    assert_eq!(error.code, codes::APPROVAL_DENIED);
    assert!(error.message.contains("bob") && error.message.contains("looks fine"), "{}", error.message);
    assert!(w.snap.resource.is_none(), "nothing of the create is left");
    assert_eq!(w.op(1).approval.as_ref().unwrap().state(), ApprovalState::Denied);
}

#[test]
fn a_denied_update_gives_the_resource_its_spec_back() {
    let mut w = held_update();
    assert_eq!(w.res().spec.properties, v2());
    decide(&mut w, 2, "bob", Verdict::Denied).unwrap();
    assert_eq!(w.res().spec.properties, v1(), "the spec it had");
    assert_eq!(w.res().desired_config_version, spec(v1()).config_version());
    assert_eq!(w.res().provisioning_state, ProvisioningState::Succeeded);
    assert_eq!(w.res().schedule.next_due, Some(w.now), "looked at again, as it was");
    assert!(w.snap.wake_children && w.snap.wake_referrers, "what waited for it is woken");
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "nothing to converge: the old spec is in place");
}

#[test]
fn time_runs_out_as_the_policy_says() {
    for (outcome, status, code) in [
        (TimeoutOutcome::Canceled, ProvisioningState::Canceled, codes::CANCELED),
        (TimeoutOutcome::Failed, ProvisioningState::Failed, codes::APPROVAL_TIMED_OUT),
    ] {
        let mut w = World::created();
        hold(&mut w, 1, ApprovalRule { timeout: secs(600), on_timeout: outcome, ..ApprovalRule::default() });
        w.advance(secs(599));
        assert_eq!(w.decide(), Effect::Sleep { until: Some(at(600)) });
        w.advance(secs(1));
        assert_eq!(w.decide(), Effect::Sleep { until: None });
        assert_eq!(w.op(1).status, status);
        assert_eq!(w.op(1).error.as_ref().unwrap().code, code);
        assert!(w.op(1).error.as_ref().unwrap().message.contains("10m"));
        assert_eq!(w.op(1).approval.as_ref().unwrap().state(), ApprovalState::TimedOut);
        assert!(w.snap.resource.is_none());
        assert!(matches!(decide(&mut w, 1, "bob", Verdict::Approved), Err(Rejection::Conflict { .. })), "too late");
    }
}

#[test]
fn the_requester_may_withdraw_a_waiting_request() {
    let mut w = held_update();
    let canceled = w.cancel(2).expect("a waiting request can be canceled");
    assert_eq!(canceled.status, ProvisioningState::Canceled);
    assert_eq!(w.res().spec.properties, v1());
    assert_eq!(w.op(2).approval.as_ref().unwrap().state(), ApprovalState::Canceled);
}

#[test]
fn a_delete_supersedes_a_waiting_request() {
    let mut w = World::created();
    hold(&mut w, 1, ApprovalRule::default());
    w.delete(2).unwrap();
    assert_eq!(w.op(1).status, ProvisioningState::Canceled);
    assert_eq!(w.op(1).approval.as_ref().unwrap().state(), ApprovalState::Canceled);
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "never provisioned: the record goes at once");
    assert!(w.snap.resource.is_none());
}

#[test]
fn an_auto_approved_request_runs_at_once_and_says_who_approved_it() {
    let mut w = World::created();
    let what_if = WhatIf { before: None, after: Some(w.res().spec.clone()), predicted: None, guardrails: Vec::new() };
    let held = approval::approval_for(
        requirement(ApprovalRule::default()),
        Requester::from(&person("alice")),
        what_if,
        None,
        w.now,
    );
    approval::hold(&mut w.snap, &op_id(1), held, true, w.now);
    assert_eq!(w.op(1).status, ProvisioningState::Accepted);
    let decision = w.op(1).approval.as_ref().unwrap().decision.clone().unwrap();
    assert_eq!((decision.verdict, decision.how), (Verdict::Approved, approval::DecidedBy::Rule));
    w.launch(&key(1, 1), "1001");
}

#[test]
fn approval_rules_are_read_with_defaults_and_precise_refusals() {
    let rule = ApprovalRule::parse(None).unwrap();
    assert_eq!(rule, ApprovalRule::default());
    let rule = ApprovalRule::parse(Some(&json!({
        "requests": ["create"], "approverRole": "admin", "timeout": "PT4H30M", "onTimeout": "failed",
        "quotaPercent": 80, "allowSelfApproval": true, "autoApproveRole": "Owner", "notify": "https://chat.example/hook"
    })))
    .unwrap();
    assert_eq!(rule.timeout, secs(4 * 3600 + 1800));
    assert_eq!(rule.on_timeout, TimeoutOutcome::Failed);
    assert_eq!(rule.quota_percent, Some(80));
    assert!(rule.holds(approval::RequestKind::Create) && !rule.holds(approval::RequestKind::Update));
    for (details, says) in [
        (json!({"timeout": "P1M"}), "ISO 8601"),
        (json!({"timeout": "P31D"}), "P30D"),
        (json!({"onTimeout": "Succeeded"}), "Canceled or Failed"),
        (json!({"approverRole": "Boss"}), "not Reader"),
        (json!({"quotaPercent": 0}), "1 to 100"),
        (json!({"requests": ["delete"]}), "create or update"),
        (json!({"requests": []}), "at least one"),
        (json!({"notify": "ftp://x"}), "http(s)"),
        (json!({"approvers": "x"}), "not known"),
    ] {
        let e = ApprovalRule::parse(Some(&details)).unwrap_err();
        assert!(e.0.contains(says), "{details}: {}", e.0);
    }
}

#[test]
fn iso_durations_of_weeks_to_seconds() {
    use approval::parse_iso_duration as p;
    assert_eq!(p("P1W"), Some(secs(7 * 86400)));
    assert_eq!(p("P2DT3H"), Some(secs(2 * 86400 + 3 * 3600)));
    assert_eq!(p("PT45S"), Some(secs(45)));
    assert_eq!(p("pt1m"), Some(secs(60)));
    for bad in ["", "P", "PT", "P1", "PT1H1H", "PT1S1M", "P1Y", "1D", "P-1D", "PTH"] {
        assert_eq!(p(bad), None, "{bad}");
    }
    assert_eq!(approval::describe_duration(secs(86400 + 6 * 3600)), "1d 6h");
}

#[test]
fn a_delete_acts_on_the_resource_as_it_was_before_a_waiting_update() {
    let mut w = held_update();
    w.delete(3).unwrap();
    assert_eq!(w.op(2).status, ProvisioningState::Canceled);
    assert_eq!(w.res().spec.properties, v1(), "the delete job is handed the spec that ran");
    assert!(w.res().is_deleting());
}

#[test]
fn nobody_decides_a_request_whose_time_ran_out_even_before_the_engine_ends_it() {
    let mut w = World::created();
    hold(&mut w, 1, ApprovalRule { timeout: secs(60), ..ApprovalRule::default() });
    w.advance(secs(60));
    let late = decide(&mut w, 1, "bob", Verdict::Approved);
    assert!(matches!(late, Err(Rejection::Conflict { message, .. }) if message.contains("ran out")));
    assert_eq!(w.op(1).status, ProvisioningState::WaitingForApproval, "the engine ends it");
}

#[test]
fn a_waiting_update_holds_the_larger_usage_and_both_references_until_decided() {
    use slipway_domain::quota::MeterName;
    let cores = MeterName::parse("cores").unwrap();
    let mut w = World::provisioned();
    w.res_mut().usage.insert(cores.clone(), 4);
    let was = (w.res().spec.clone(), Prior::of(w.res()));
    w.put(2, v2()).unwrap();
    w.res_mut().usage.insert(cores.clone(), 2);
    hold_with(&mut w, 2, ApprovalRule::default(), Some(was.clone()));
    assert_eq!(w.res().usage[&cores], 4, "a denial must find its 4 cores free");
    // A replay of the same write sets the proposed usage again; the hold puts its widening back.
    w.res_mut().usage.insert(cores.clone(), 2);
    approval::keep_held(&mut w.snap);
    assert_eq!(w.res().usage[&cores], 4);
    decide(&mut w, 2, "bob", Verdict::Approved).unwrap();
    assert_eq!(w.res().usage[&cores], 2, "approved: what it consumes now");

    // A tags-only write left the version apart from the spec's hash: a denial keeps it.
    let mut w = World::provisioned();
    w.res_mut().spec.tags.insert("team".into(), "a".into());
    let was = (w.res().spec.clone(), Prior::of(w.res()));
    let version = w.res().desired_config_version.clone();
    w.put(2, v2()).unwrap();
    hold_with(&mut w, 2, ApprovalRule::default(), Some(was));
    decide(&mut w, 2, "bob", Verdict::Denied).unwrap();
    assert_eq!(w.res().desired_config_version, version);
    assert_eq!(w.decide(), Effect::Sleep { until: None }, "nothing runs after a denial");
}

#[test]
fn several_policies_holding_one_request_ask_for_all_they_want() {
    let strict = requirement(ApprovalRule {
        approver_role: slipway_domain::access::Role::Admin,
        timeout: secs(600),
        ..ApprovalRule::default()
    });
    let lax = requirement(ApprovalRule {
        approver_role: slipway_domain::access::Role::Contributor,
        allow_self_approval: true,
        on_timeout: TimeoutOutcome::Failed,
        timeout: secs(3600),
        ..ApprovalRule::default()
    });
    let both = Requirement::strictest(vec![lax, strict]).unwrap().rule;
    assert_eq!(both.approver_role, slipway_domain::access::Role::Admin);
    assert!(!both.allow_self_approval);
    assert_eq!((both.timeout, both.on_timeout), (secs(600), TimeoutOutcome::Failed));
    assert!(Requirement::strictest(Vec::new()).is_none());
}

#[test]
fn no_child_or_reference_is_added_to_a_resource_that_waits() {
    use slipway_domain::admission::admit_put;
    let mut w = World::created();
    hold(&mut w, 1, ApprovalRule::default());
    let parent = w.res().clone();
    let child = slipway_domain::ArmId::parse(&format!("{RESOURCE_ID}/subnets/s1")).unwrap();
    let mut snap = slipway_domain::Snapshot { related: vec![parent], ..Default::default() };
    let refused = admit_put(&mut snap, &child, "Subnet", spec(json!({})), &ctx(5, w.now));
    assert!(matches!(refused, Err(Rejection::Conflict { message, .. }) if message.contains("waits for approval")));
}

#[test]
fn a_held_update_is_predicted_in_check_mode_for_its_approver_and_runs_only_once_approved() {
    use slipway_domain::reconcile::{Observation, Outcome};
    use slipway_domain::whatif::TaskChange;
    let mut w = held_update();
    let check = key(2, 2);
    assert_eq!(w.decide(), Effect::Launch { key: check.clone() }, "the prediction: a check job");
    assert_eq!(w.job(&check).job_type, slipway_domain::JobType::Check);
    assert_eq!(w.op(2).status, ProvisioningState::WaitingForApproval, "a prediction does not start it");
    w.apply(&Effect::Launch { key: check.clone() }, launched("2001"));
    let change = TaskChange { task: "Resize".into(), host: "localhost".into(), diff: json!({"after": "10.1.0.0/16"}) };
    let seen = Observation {
        state: slipway_domain::JobState::Succeeded,
        message: "successful".into(),
        error_details: String::new(),
        stats: None,
        changes: Some(vec![change.clone()]),
        progress: None,
    };
    w.poll(&check, Outcome::Observed(seen));
    let approval = w.op(2).approval.clone().unwrap();
    assert_eq!(approval.what_if.predicted, Some(vec![change]));
    assert_eq!(w.decide(), Effect::Sleep { until: Some(approval.deadline) }, "predicted once, then it waits");
    assert_eq!(w.op(2).status, ProvisioningState::WaitingForApproval);

    decide(&mut w, 2, "bob", Verdict::Approved).unwrap();
    w.launch(&key(2, 3), "2002");
    assert_eq!(w.job(&key(2, 3)).job_type, slipway_domain::JobType::Provision, "the prediction is no step of it");
}

#[test]
fn a_waiting_resource_takes_no_tags_write() {
    use slipway_domain::tags::{TagsChange, admit_tags};
    let mut w = held_update();
    let change = TagsChange::Replace([("team".to_string(), "a".to_string())].into());
    let c = w.ctx(9);
    let refused = admit_tags(&mut w.snap, &change, |_| Ok(()), &c);
    assert!(matches!(refused, Err(Rejection::Conflict { message, .. }) if message.contains("waits for approval")));
}
