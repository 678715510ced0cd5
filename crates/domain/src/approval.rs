//! Approvals (docs/governance.md#approvals): a write an admission policy marks
//! `requireApproval` is accepted as usual — its resource, its operation and its quota recorded
//! in the request's transaction — but its operation waits in `WaitingForApproval`, with what
//! the write would change attached, until someone who holds the policy's approver role (never
//! the requester, unless the policy allows it) approves it, denies it, or its time runs out.
//!
//! Nothing runs before the approval: the engine sleeps on a waiting operation until its
//! deadline ([`wait`]). A request that ends unapproved — denied, timed out, canceled — leaves
//! nothing of itself: a create's resource goes, an update's resource gets back the spec, usage
//! and references it had ([`Prior`]), so what was refused can never be run later by a retry.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::access::Role;
use crate::admission::Rejection;
use crate::config_version::ConfigVersion;
use crate::identity::Principal;
use crate::ids::OperationId;
use crate::operation::{CloudError, Operation, OperationRequest, codes};
use crate::quota::MeterName;
use crate::resource::{ResourceRecord, Schedule, Snapshot, SystemData};
use crate::state::ProvisioningState;
use crate::time::Timestamp;
use crate::whatif::WhatIf;

mod requirement;

pub use self::requirement::{
    ApprovalRule, RequestKind, Requirement, TimeoutOutcome, describe_duration, parse_iso_duration,
};

/// Who asked, as approvals compare it: the principal's name within its issuer's tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requester {
    pub name: String,
    pub tenant: Option<String>,
}

impl From<&Principal> for Requester {
    fn from(p: &Principal) -> Self {
        Requester { name: p.name.clone(), tenant: p.tenant.clone() }
    }
}

impl Requester {
    /// The same identity: one name within one issuer's tenant (tenants in any case).
    pub fn same_as(&self, other: &Requester) -> bool {
        self.name == other.name
            && self.tenant.as_deref().map(str::to_ascii_lowercase)
                == other.tenant.as_deref().map(str::to_ascii_lowercase)
    }
}

/// Who decides: their identity, and whether they are trusted with everything (the local
/// user, authentication off), which lets them decide their own requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decider {
    pub who: Requester,
    pub trusted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    Denied,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approved => "Approved",
            Verdict::Denied => "Denied",
        }
    }

    pub fn parse(text: &str) -> Option<Verdict> {
        [Verdict::Approved, Verdict::Denied].into_iter().find(|v| v.as_str().eq_ignore_ascii_case(text))
    }
}

/// How a decision was made: by a person (or an application) who may approve, or at once by the
/// policy's auto-approve rule (the requester holds `autoApproveRole`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecidedBy {
    Approver,
    Rule,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub by: Requester,
    pub how: DecidedBy,
    pub at: Timestamp,
    pub comment: Option<String>,
}

/// The resource as it was before an update that waits for approval: put back when the update
/// ends unapproved. The spec itself is the attached what-if's `before`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prior {
    pub provisioning_state: ProvisioningState,
    pub system_data: SystemData,
    pub usage: BTreeMap<MeterName, u64>,
    pub references: Vec<crate::reference::Reference>,
    pub findings: Vec<crate::policy_admission::Finding>,
    pub last_error: Option<CloudError>,
    pub convergence_stopped_for: Option<ConfigVersion>,
    /// The version convergence kept: not the before spec's hash, which a tags-only write
    /// (`tags`) or a spec stored before versions were hashed would not match.
    pub desired_config_version: ConfigVersion,
    /// Who the resource's jobs are told asked for its intent.
    pub job_context: Option<crate::identity::JobContext>,
    /// The operation that last set the spec (it names convergence retries' keys).
    pub last_operation_id: OperationId,
}

impl Prior {
    pub fn of(res: &ResourceRecord) -> Prior {
        Prior {
            desired_config_version: res.desired_config_version.clone(),
            job_context: res.job_context.clone(),
            last_operation_id: res.last_operation_id.clone(),
            provisioning_state: res.provisioning_state,
            system_data: res.system_data.clone(),
            usage: res.usage.clone(),
            references: res.references.clone(),
            findings: res.findings.clone(),
            last_error: res.last_error.clone(),
            convergence_stopped_for: res.convergence_stopped_for.clone(),
        }
    }
}

/// What an update consumes and references once approved. While it waits, its resource is
/// charged the larger of its usage before and after, and references both sets: neither a
/// denial (back to before) nor an approval (on to after) may then find its quota taken or a
/// reference gone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Proposed {
    pub usage: BTreeMap<MeterName, u64>,
    pub references: Vec<crate::reference::Reference>,
}

/// An operation's approval: what asked for it, who requested it, until when it may be decided,
/// what the request would change, and — once made — the decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    pub requirement: Requirement,
    pub requested_by: Requester,
    pub deadline: Timestamp,
    /// The request's change: the spec before (`None`: a create) and after, and what the
    /// guardrails said of it — the policies' findings and the quota it takes.
    pub what_if: WhatIf,
    /// An update's resource as it was (`None` for a create).
    pub prior: Option<Prior>,
    /// An update's usage and references once approved (`None` for a create).
    pub proposed: Option<Proposed>,
    pub decision: Option<Decision>,
    /// How it ended without a decision: `TimedOut` or `Canceled` (by the requester or a
    /// superseding delete).
    pub ended: Option<Unapproved>,
}

/// Why a waiting request ended without being approved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unapproved {
    Denied,
    TimedOut,
    Canceled,
}

impl Unapproved {
    pub fn as_str(self) -> &'static str {
        match self {
            Unapproved::Denied => "Denied",
            Unapproved::TimedOut => "TimedOut",
            Unapproved::Canceled => "Canceled",
        }
    }

    pub fn parse(text: &str) -> Option<Unapproved> {
        [Unapproved::Denied, Unapproved::TimedOut, Unapproved::Canceled].into_iter().find(|u| u.as_str() == text)
    }
}

/// Where an approval stands, as clients are shown it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalState {
    Pending,
    Approved,
    Denied,
    TimedOut,
    Canceled,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "Pending",
            ApprovalState::Approved => "Approved",
            ApprovalState::Denied => "Denied",
            ApprovalState::TimedOut => "TimedOut",
            ApprovalState::Canceled => "Canceled",
        }
    }
}

impl Approval {
    pub fn state(&self) -> ApprovalState {
        match (&self.decision, self.ended) {
            (Some(d), _) if d.verdict == Verdict::Approved => ApprovalState::Approved,
            (Some(_), _) | (None, Some(Unapproved::Denied)) => ApprovalState::Denied,
            (None, Some(Unapproved::TimedOut)) => ApprovalState::TimedOut,
            (None, Some(Unapproved::Canceled)) => ApprovalState::Canceled,
            (None, None) => ApprovalState::Pending,
        }
    }

    /// When the request was approved: its operation's deadline counts from then.
    pub fn approved_at(&self) -> Option<Timestamp> {
        self.decision.as_ref().filter(|d| d.verdict == Verdict::Approved).map(|d| d.at)
    }
}

impl Operation {
    /// When the operation began to run: its request, or its approval.
    pub fn running_since(&self) -> Timestamp {
        self.approval.as_ref().and_then(|a| a.approved_at()).unwrap_or(self.start_time)
    }

    pub fn is_waiting_for_approval(&self) -> bool {
        self.status == ProvisioningState::WaitingForApproval
    }
}

/// Puts the write just admitted — `op_id`, a new create or update — on hold for approval, or,
/// when the requester holds the policy's auto-approve role, records it approved at once.
pub fn hold(snap: &mut Snapshot, op_id: &OperationId, approval: Approval, auto_approved: bool, now: Timestamp) {
    let Some(op) = snap.operation_mut(op_id) else { return };
    let mut approval = approval;
    if auto_approved {
        approval.decision = Some(Decision {
            verdict: Verdict::Approved,
            by: approval.requested_by.clone(),
            how: DecidedBy::Rule,
            at: now,
            comment: None,
        });
        op.approval = Some(Box::new(approval));
        return;
    }
    let prior = approval.prior.clone();
    op.approval = Some(Box::new(approval));
    op.status = ProvisioningState::WaitingForApproval;
    op.last_transition_time = now;
    let Some(res) = snap.resource.as_mut().filter(|r| r.active_operation_id.as_ref() == Some(op_id)) else { return };
    res.provisioning_state = ProvisioningState::WaitingForApproval;
    if let Some(prior) = prior {
        let proposed = Proposed { usage: res.usage.clone(), references: res.references.clone() };
        widen(res, &prior);
        if let Some(a) = snap.operation_mut(op_id).and_then(|o| o.approval.as_mut()) {
            a.proposed = Some(proposed);
        }
    }
}

/// `POST …/operationStatuses/{id}/approve|deny` by `who`, whose role the caller checked: an
/// approval lets the engine run the request now (its deadline counts from now); a denial ends
/// it `Failed` (`ApprovalDenied`) and leaves nothing of it.
pub fn decide(
    snap: &mut Snapshot,
    op_id: &OperationId,
    decider: &Decider,
    verdict: Verdict,
    comment: Option<String>,
    now: Timestamp,
) -> Result<Operation, Rejection> {
    let op = snap.operation(op_id).cloned().ok_or(Rejection::OperationNotFound)?;
    let Some(approval) = op.approval.as_ref().filter(|_| op.is_waiting_for_approval()) else {
        let message = match &op.approval {
            Some(a) => format!("The operation's approval is {}: it can no longer be decided", a.state().as_str()),
            None => format!("The operation is {} and was never waiting for approval", op.status),
        };
        return Err(Rejection::Conflict { message, target: op.resource_id.clone() });
    };
    if now >= approval.deadline {
        let message = format!(
            "The request's time to be decided ran out at {}: it ends as its policy says",
            approval.deadline.to_rfc3339()
        );
        return Err(Rejection::Conflict { message, target: op.resource_id.clone() });
    }
    if !may_decide_own(approval, decider) {
        return Err(Rejection::OwnRequest { assignment_id: approval.requirement.assignment_id.clone() });
    }
    let proposed = approval.proposed.clone();
    let decision = Decision { verdict, by: decider.who.clone(), how: DecidedBy::Approver, at: now, comment };
    match verdict {
        Verdict::Approved => {
            let o = snap.operation_mut(op_id).expect("read above");
            o.approval.as_mut().expect("checked").decision = Some(decision);
            o.status = ProvisioningState::Accepted;
            o.last_transition_time = now;
            let res = snap.resource.as_mut().ok_or(Rejection::NotFound)?;
            res.provisioning_state = ProvisioningState::Accepted;
            if let Some(p) = proposed {
                res.usage = p.usage;
                res.references = p.references;
            }
            res.schedule = Schedule::now(now);
            res.generation += 1;
        }
        Verdict::Denied => {
            let by = &decision.by.name;
            let said = decision.comment.as_deref().map(|c| format!(": {c}")).unwrap_or_default();
            let error = CloudError::new(codes::APPROVAL_DENIED, format!("The request was denied by '{by}'{said}"));
            snap.operation_mut(op_id).expect("read above").approval.as_mut().expect("checked").decision =
                Some(decision);
            end_unapproved(snap, op_id, Unapproved::Denied, ProvisioningState::Failed, error, now);
        }
    }
    Ok(snap.operation(op_id).cloned().expect("present"))
}

/// Whether `decider` may decide their own request, or is not its requester.
fn may_decide_own(approval: &Approval, decider: &Decider) -> bool {
    decider.trusted || approval.requirement.rule.allow_self_approval || !approval.requested_by.same_as(&decider.who)
}

/// Whether `decider` may decide `op` now, given that they hold its approver role: it waits,
/// its time has not run out, and they did not request it (unless its policy allows that).
pub fn decidable_by(op: &Operation, decider: &Decider, now: Timestamp) -> bool {
    op.is_waiting_for_approval() && op.approval.as_ref().is_some_and(|a| now < a.deadline && may_decide_own(a, decider))
}

/// A `DELETE` (a resource's, its parent's, its group's) supersedes a request waiting for
/// approval: it ends `Canceled` and leaves nothing of itself first, so the delete acts on the
/// resource as it was — or finds none, for a create.
pub fn supersede(snap: &mut Snapshot, now: Timestamp) {
    let Some(op) = snap.active_operation().filter(|o| o.is_waiting_for_approval()).map(|o| o.id.clone()) else {
        return;
    };
    let error = CloudError::new(codes::CANCELED, "This operation was superseded by a delete before it was decided");
    end_unapproved(snap, &op, Unapproved::Canceled, ProvisioningState::Canceled, error, now);
}

/// The engine's step for a resource whose active operation waits for approval: `None` when it
/// does not; else ends it when its time is up (`Canceled` or `Failed`, as the policy says) and
/// answers when to look again (`Some(None)`: never, it ended).
pub fn wait(snap: &mut Snapshot, now: Timestamp) -> Option<Option<Timestamp>> {
    let op = snap.active_operation().filter(|o| o.is_waiting_for_approval())?.clone();
    let approval = op.approval.as_ref()?;
    if now < approval.deadline {
        return Some(Some(approval.deadline));
    }
    let timeout = approval.requirement.rule.timeout;
    let (status, code) = match approval.requirement.rule.on_timeout {
        TimeoutOutcome::Canceled => (ProvisioningState::Canceled, codes::CANCELED),
        TimeoutOutcome::Failed => (ProvisioningState::Failed, codes::APPROVAL_TIMED_OUT),
    };
    let message = format!("Nobody approved the request within {}", describe_duration(timeout));
    end_unapproved(snap, &op.id, Unapproved::TimedOut, status, CloudError::new(code, message), now);
    Some(None)
}

/// Ends a waiting request unapproved and undoes what its admission wrote: a create's resource
/// goes (its group is woken, as after a delete), an update's resource gets its prior spec back.
pub fn end_unapproved(
    snap: &mut Snapshot,
    op_id: &OperationId,
    why: Unapproved,
    status: ProvisioningState,
    error: CloudError,
    now: Timestamp,
) {
    let Some(op) = snap.operation_mut(op_id) else { return };
    let Some(approval) = op.approval.as_mut() else { return };
    approval.ended = Some(why);
    let approval = (**approval).clone();
    let request = op.request;
    snap.set_operation_status(op_id, status, Some(error), now);
    let Some(res) = snap.resource.as_mut() else { return };
    match (request, approval.prior, approval.what_if.before) {
        (OperationRequest::Update, Some(prior), Some(before)) => {
            res.desired_config_version = prior.desired_config_version;
            res.job_context = prior.job_context;
            res.last_operation_id = prior.last_operation_id;
            res.spec = before;
            res.provisioning_state = prior.provisioning_state;
            res.system_data = prior.system_data;
            res.usage = prior.usage;
            res.references = prior.references;
            res.findings = prior.findings;
            res.last_error = prior.last_error;
            res.convergence_stopped_for = prior.convergence_stopped_for;
            res.generation += 1;
            // Back as it was outside the engine's steps: look at it (a retry, a drift check)
            // and wake what waits for it (a child's or a referrer's job).
            res.schedule = Schedule::now(now);
            snap.wake_children = true;
            snap.wake_referrers = true;
        }
        _ => {
            let mut waiting = crate::reference::related_keys(&res.id, &res.references);
            waiting.extend(res.id.container().filter(|_| res.id.parent().is_none()).map(|g| g.key()));
            snap.wake.extend(waiting);
            snap.resource = None;
        }
    }
}

/// A write that answered with the request already waiting (a replay of the same spec) set the
/// resource's usage and references to the proposed ones: the hold's widening is put back.
pub fn keep_held(snap: &mut Snapshot) {
    let Some(prior) = snap
        .active_operation()
        .filter(|o| o.is_waiting_for_approval())
        .and_then(|o| o.approval.as_ref())
        .and_then(|a| a.prior.clone())
    else {
        return;
    };
    let Some(res) = snap.resource.as_mut() else { return };
    widen(res, &prior);
}

/// A waiting update's resource holds the larger usage and both sets of references.
fn widen(res: &mut ResourceRecord, prior: &Prior) {
    for (meter, before) in &prior.usage {
        let held = res.usage.entry(meter.clone()).or_insert(0);
        *held = (*held).max(*before);
    }
    for r in &prior.references {
        if !res.references.contains(r) {
            res.references.push(r.clone());
        }
    }
}

/// What the approval of a request needs, once its requirement is known: the deadline from now.
pub fn approval_for(
    requirement: Requirement,
    requested_by: Requester,
    what_if: WhatIf,
    prior: Option<Prior>,
    now: Timestamp,
) -> Approval {
    let deadline = now.add(requirement.rule.timeout);
    Approval { requirement, requested_by, deadline, what_if, prior, proposed: None, decision: None, ended: None }
}

/// The longest a request may wait for approval unless its policy says otherwise: a day.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The role an approver needs unless the policy names another.
pub const DEFAULT_APPROVER_ROLE: Role = Role::Owner;
