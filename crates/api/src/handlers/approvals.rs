//! Approvals at the API (docs/governance.md#approvals): a `PUT` or `PATCH` an admission
//! policy marks `requireApproval` is held inside its own change ([`hold_if_required`]), and
//! `POST …/operationStatuses/{id}/approve|deny` decides it ([`decide_operation`]).

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;
use slipway_domain::Operation;
use slipway_domain::access::{Permission, Role, Scope};
use slipway_domain::admission::{Admitted, Rejection, RequestContext};
use slipway_domain::approval::{self, Decider, Prior, RequestKind, Requester, Requirement, Verdict};
use slipway_domain::identity::{Principal, PrincipalKind};
use slipway_domain::ids::ArmId;
use slipway_domain::ids::{OperationId, SubscriptionId};
use slipway_domain::locks::Verb;
use slipway_domain::resource::{NewNotification, Snapshot, Spec};
use slipway_domain::time::Timestamp;
use slipway_domain::whatif::{Guardrail, GuardrailKind, WhatIf};
use slipway_store::{ChangeRequest, EntryKind};

use crate::error::ArmError;
use crate::handlers::Ctx;
use crate::handlers::actions::action_body;
use crate::handlers::guardrails::Guard;
use crate::handlers::operations::{add_async_headers, not_found_op, status_response};
use crate::{ApiState, access};

/// Who makes a write, as its approval needs to know: to name the requester — the identity
/// the request speaks for, as the initiator rule reads it, so that behind a trusted front end
/// each tenant's user is told apart — and to test the policy's auto-approve role only when a
/// policy holds the write.
#[derive(Clone)]
pub(crate) struct Requesting {
    requester: Requester,
    principal: Principal,
    grants: access::Grants,
}

impl Requesting {
    pub(crate) fn of(ctx: &Ctx, grants: &access::Grants) -> Requesting {
        Requesting { requester: requester(ctx), principal: ctx.caller.principal.clone(), grants: grants.clone() }
    }
}

/// The identity a request speaks for: its initiator's object id and tenant.
fn requester(ctx: &Ctx) -> Requester {
    let initiator = ctx.initiator();
    let tenant = Some(initiator.tenant_id).filter(|t| !t.is_empty());
    Requester { name: initiator.client_id, tenant }
}

fn decider(ctx: &Ctx) -> Decider {
    Decider { who: requester(ctx), trusted: ctx.caller.principal.kind == PrincipalKind::Local }
}

/// The resource before a write, for its approval: `None` for a create, and — so that a write
/// copies nothing when no policy could hold it — when no policy is assigned in its
/// subscription.
pub(crate) fn before(snap: &Snapshot) -> Option<(Spec, Prior)> {
    let assigned = EntryKind::PolicyAssignment.tag();
    if !snap.settings.iter().any(|s| s.kind == assigned) {
        return None;
    }
    snap.resource.as_ref().map(|r| (r.spec.clone(), Prior::of(r)))
}

/// After a write's admission and charge, in its change: holds the operation it started for
/// approval when an enforced `requireApproval` policy holds for it (and, with `quotaPercent`,
/// the write takes a meter past that share), attaching what it changes; approved at once when
/// the requester holds the policy's auto-approve role. Answers the operation as it now is.
pub(crate) fn hold_if_required(
    guard: &Guard,
    snap: &mut Snapshot,
    admitted: Admitted,
    was: Option<(Spec, Prior)>,
    who: &Requesting,
    rctx: &RequestContext,
) -> Result<Admitted, Rejection> {
    let Admitted::Accepted { operation, created } = &admitted else {
        approval::keep_held(snap);
        return Ok(admitted);
    };
    let Some(res) = snap.resource.as_ref() else { return Ok(admitted) };
    let kind = if *created { RequestKind::Create } else { RequestKind::Update };
    let spec = res.spec.clone();
    let held = guard.approvals(snap, &spec, kind, rctx)?;
    if !held.iter().any(|(_, enforced)| *enforced) {
        return Ok(admitted);
    }
    let was_usage = was.as_ref().map(|(_, p)| p.usage.clone()).unwrap_or_default();
    let shares = guard.shares(snap, &was_usage);
    let holding = held
        .into_iter()
        .filter(|(r, enforced)| *enforced && r.rule.quota_percent.is_none_or(|p| shares.iter().any(|s| s.passes(p))))
        .map(|(r, _)| r)
        .collect();
    let Some(requirement) = Requirement::strictest(holding) else {
        return Ok(admitted);
    };
    let mut guardrails = vec![Guardrail {
        kind: GuardrailKind::Policy,
        effect: "requireApproval".into(),
        enforced: true,
        id: requirement.assignment_id.clone(),
        message: format!("requireApproval ({}): {}", requirement.definition_id, requirement.reason),
    }];
    guardrails.extend(res.findings.iter().map(|f| Guardrail {
        kind: GuardrailKind::Policy,
        effect: f.effect.as_str().into(),
        enforced: f.enforced,
        id: f.assignment_id.clone(),
        message: format!("{} ({}): {}", f.effect.as_str(), f.definition_id, f.reason),
    }));
    guardrails.extend(shares.iter().map(|s| Guardrail {
        kind: GuardrailKind::Quota,
        effect: "consume".into(),
        enforced: true,
        id: s.meter.as_str().into(),
        message: s.to_string(),
    }));
    let scope = Scope::resource(&res.id);
    let auto =
        requirement.rule.auto_approve_role.is_some_and(|role| who.grants.holds_role(&who.principal, role, &scope));
    let notify = requirement.rule.notify.clone();
    let (before, prior) = was.map_or((None, None), |(s, p)| (Some(s), Some(p)));
    let what_if = WhatIf { before, after: Some(spec), predicted: None, guardrails };
    let requester = who.requester.clone();
    let op_id = operation.id.clone();
    let subscription = operation.subscription.clone();
    approval::hold(
        snap,
        &op_id,
        approval::approval_for(requirement, requester, what_if, prior, rctx.now),
        auto,
        rctx.now,
    );
    if let Some(uri) = notify.filter(|_| !auto) {
        snap.notifications.push(NewNotification { subscription, operation_id: op_id.clone(), uri });
    }
    let operation = snap.operation(&op_id).cloned().ok_or(Rejection::OperationNotFound)?;
    Ok(Admitted::Accepted { operation, created: *created })
}

/// The longest comment an approver may leave.
const MAX_COMMENT: usize = 2000;

/// `POST …/operationStatuses/{id}/approve|deny` with `{"comment": …}`: the caller must be able
/// to read the operation's resource and hold the policy's approver role at it; the requester
/// may not decide their own request unless the policy allows it; an approval is refused by a
/// lock set meanwhile. Answers `202` with the operation's status, as a cancel does:
/// `Accepted` (it runs now) or `Failed` (`ApprovalDenied`).
pub(crate) async fn decide_operation(
    state: &ApiState,
    ctx: &Ctx,
    subscription: &str,
    id: &str,
    verdict: Verdict,
    body: Body,
) -> Result<Response, ArmError> {
    let comment = decision_comment(action_body(state, ctx, body).await?)?;
    // Found as its readers find it, but without the initiator rule: the approver is never
    // the identity that started the operation.
    let op_id = OperationId::parse(id).ok_or_else(|| not_found_op(id))?;
    let subscription = SubscriptionId::new(subscription);
    let now = state.clock.now();
    let op = state.store.get_operation(&subscription, &op_id, now).await?.ok_or_else(|| not_found_op(id))?;
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    let scope = Scope::stored(&op.resource_id);
    if op.subscription != subscription || !grants.allows(&ctx.caller, Permission::Read, &scope) {
        return Err(not_found_op(id));
    }
    // The requester hears why first: holding the role would not let them decide either.
    let decider = decider(ctx);
    if let Some(a) = &op.approval
        && a.requested_by.same_as(&decider.who)
        && !a.requirement.rule.allow_self_approval
        && !decider.trusted
    {
        return Err(Rejection::OwnRequest { assignment_id: a.requirement.assignment_id.clone() }.into());
    }
    let role = op.approval.as_ref().map_or(Role::Owner, |a| a.requirement.rule.approver_role);
    if !grants.holds_role(&ctx.caller.principal, role, &scope) {
        let action = format!("operations/{}/action", crate::route::decision_segment(verdict));
        return Err(access::forbidden(&ctx.caller, &format!("{action} (needs the {} role)", role.name()), &scope));
    }
    // An approval is judged by the locks as they are now: one set while it waited holds.
    let guard = ArmId::read_stored(&op.resource_id).map(|id| Guard::new(state, &id));
    let base = ChangeRequest::new(op.resource_key.clone(), now).with_operation(&op.subscription, op.id.clone());
    let req = match (&guard, verdict) {
        (Some(g), Verdict::Approved) => g.request(base),
        _ => base,
    };
    let (decided, _) = ctx
        .change(state, req, move |snap| {
            if let (Some(g), Verdict::Approved) = (&guard, verdict) {
                g.check_locks(snap, Verb::Write)?;
            }
            approval::decide(snap, &op_id, &decider, verdict, comment, now)
        })
        .await?;
    (state.on_accept)();
    let mut resp = status_response(state, &decided);
    *resp.status_mut() = StatusCode::ACCEPTED;
    add_async_headers(state, ctx, &decided, resp.headers_mut());
    Ok(resp)
}

/// Whether the caller may decide `op`: it waits for approval, the caller holds the approver
/// role at its resource, and did not request it (unless its policy allows that).
pub(crate) fn may_decide(ctx: &Ctx, grants: &access::Grants, op: &Operation, now: Timestamp) -> bool {
    let Some(a) = op.approval.as_ref() else { return false };
    approval::decidable_by(op, &decider(ctx), now)
        && grants.holds_role(&ctx.caller.principal, a.requirement.rule.approver_role, &Scope::stored(&op.resource_id))
}

/// A decision's body: `{}` or `{"comment": "…"}`, at most [`MAX_COMMENT`] characters.
fn decision_comment(body: Value) -> Result<Option<String>, ArmError> {
    let invalid = |why: &str| ArmError::invalid_content(why, "comment");
    let mut comment = None;
    for (key, value) in body.as_object().into_iter().flatten() {
        match (key.as_str(), value) {
            ("comment", Value::String(text)) => comment = Some(text.trim().to_owned()).filter(|c| !c.is_empty()),
            ("comment", Value::Null) => {}
            ("comment", _) => return Err(invalid("The comment is a string.")),
            (other, _) => {
                return Err(ArmError::invalid_content(
                    format!("'{other}' is not known: a decision takes only a comment."),
                    other,
                ));
            }
        }
    }
    if comment.as_ref().is_some_and(|c| c.chars().count() > MAX_COMMENT) {
        return Err(invalid(&format!("The comment is longer than {MAX_COMMENT} characters.")));
    }
    Ok(comment)
}
