//! What the API does to a snapshot when it accepts a request: the ARM conflict rules,
//! idempotent replays, supersession and cancellation (docs/arm-contract.md), as pure
//! functions. The API runs them inside one store transaction and answers from the result.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::ids::{ArmId, OperationId};
use crate::operation::{ActionCall, CloudError, Initiator, Operation, OperationRequest, Rerun, codes};
use crate::resource::{Deletion, ResourceRecord, Schedule, Snapshot, Spec, SystemData};
use crate::state::ProvisioningState;
use crate::time::Timestamp;
use crate::whatif::WhatIf;

mod cancel;

pub use self::cancel::{admit_cancel, admit_force_cancel, canceled_by_user};

/// Everything about the request that is not the resource itself.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// The id a new operation gets (chosen before the transaction).
    pub operation_id: OperationId,
    pub now: Timestamp,
    pub initiator: Initiator,
    pub notification_uri: Option<String>,
    pub api_version: String,
    /// For systemData: who and what kind of principal.
    pub actor: String,
    pub actor_type: String,
    /// Handed to the jobs this request leads to.
    pub job_context: Option<crate::identity::JobContext>,
}

impl RequestContext {
    /// The system data of what this request creates.
    pub fn created(&self) -> SystemData {
        SystemData {
            created_by: self.actor.clone(),
            created_by_type: self.actor_type.clone(),
            created_at: self.now,
            last_modified_by: self.actor.clone(),
            last_modified_by_type: self.actor_type.clone(),
            last_modified_at: self.now,
        }
    }

    /// Stamps `data` as last modified by this request.
    pub fn modified(&self, data: &mut SystemData) {
        data.last_modified_by = self.actor.clone();
        data.last_modified_by_type = self.actor_type.clone();
        data.last_modified_at = self.now;
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admitted {
    /// A new operation was recorded.
    Accepted { operation: Operation, created: bool },
    /// The same request is already in progress: answer with its operation.
    InProgress { operation: Operation },
    /// Nothing to do: the resource already is what was asked (synchronous 200).
    Unchanged,
    /// DELETE of a resource that does not exist (204).
    Absent,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("{message}")]
    Conflict { message: String, target: String },
    #[error("resource not found")]
    NotFound,
    #[error("operation not found")]
    OperationNotFound,
    /// A child resource's parent does not exist (ARM's `ParentResourceNotFound`).
    #[error("parent resource {parent} not found")]
    ParentNotFound { parent: String },
    /// A delete of a resource others reference.
    #[error("{target} is referenced by {referrers:?}")]
    InUse { target: String, referrers: Vec<String> },
    /// A resource's group does not exist (ARM's `ResourceGroupNotFound`).
    #[error("resource group {group} not found")]
    GroupNotFound { group: String },
    /// A resource's group is being deleted (ARM's `ResourceGroupBeingDeleted`).
    #[error("resource group {group} is being deleted")]
    GroupBeingDeleted { group: String },
    /// A group exists in another location (ARM's `InvalidResourceGroupLocation`).
    #[error("resource group {group} exists in {location}")]
    GroupLocationFixed { group: String, location: String },
    /// A write would take a quota meter past its limit (ARM's `QuotaExceeded`).
    #[error("{0}")]
    QuotaExceeded(crate::quota::QuotaExceeded),
    /// An admission policy refuses the request (ARM's `RequestDisallowedByPolicy`).
    #[error("{0}")]
    PolicyDenied(Box<crate::policy_admission::PolicyDenied>),
    /// A management lock forbids the request (ARM's `ScopeLocked`).
    #[error("{0}")]
    ScopeLocked(crate::locks::ScopeLocked),
    /// The requester of a request waiting for approval asked to decide it, and its policy
    /// wants someone else to (`403 ApproverIsRequester`).
    #[error("the requester cannot decide their own request (policy assignment '{assignment_id}')")]
    OwnRequest { assignment_id: String },
    /// An `If-Match` / `If-None-Match` precondition does not hold.
    #[error("{message}")]
    PreconditionFailed { message: String },
    #[error("{0:?}")]
    Invalid(CloudError),
    /// The server's fault, not the request's (a secret that cannot be sealed): a `500`, the
    /// reason for the server's log only.
    #[error("{0}")]
    Internal(String),
}

fn conflict(res: &ResourceRecord, message: String) -> Rejection {
    Rejection::Conflict { message, target: res.id.to_string() }
}

/// A child's parent must exist (in `snap.related`) and not be deleting: a child created or
/// changed under a parent on its way out would be left behind.
fn check_parent(snap: &Snapshot, id: &ArmId) -> Result<(), Rejection> {
    let Some(parent) = id.parent() else { return Ok(()) };
    match snap.related(&parent) {
        None => Err(Rejection::ParentNotFound { parent: parent.to_string() }),
        Some(p) if p.is_deleting() => Err(Rejection::Conflict {
            message: format!("The parent resource '{}' is being deleted", p.id),
            target: id.to_string(),
        }),
        // A denial would take away what a new child is put under.
        Some(p) if p.waits_to_be_created() && snap.resource.is_none() => Err(Rejection::Conflict {
            message: format!("The parent resource '{}' waits for approval: add children once it is decided", p.id),
            target: id.to_string(),
        }),
        Some(_) => Ok(()),
    }
}

fn busy(res: &ResourceRecord) -> Rejection {
    conflict(
        res,
        format!(
            "Cannot update resource while resource is \"{}\"",
            res.provisioning_state.as_str().to_ascii_lowercase()
        ),
    )
}

fn new_operation(id: &ArmId, request: OperationRequest, status: ProvisioningState, ctx: &RequestContext) -> Operation {
    Operation {
        id: ctx.operation_id.clone(),
        subscription: id.subscription_key(),
        resource_key: id.key(),
        resource_id: id.to_string(),
        request,
        status,
        error: None,
        start_time: ctx.now,
        last_transition_time: ctx.now,
        percent_complete: None,
        current_task: None,
        waiting_on: None,
        child_operations: Vec::new(),
        action: None,
        rerun: None,
        what_if: None,
        approval: None,
        note: None,
        notification_uri: ctx.notification_uri.clone(),
        initiator: ctx.initiator.clone(),
        api_version: ctx.api_version.clone(),
    }
}

/// PUT: create, replace, replay or conflict.
pub fn admit_put(
    snap: &mut Snapshot,
    id: &ArmId,
    kind: &str,
    spec: Spec,
    ctx: &RequestContext,
) -> Result<Admitted, Rejection> {
    check_parent(snap, id)?;
    if snap.resource.is_none() {
        let op = new_operation(id, OperationRequest::Create, ProvisioningState::Accepted, ctx);
        let desired = spec.config_version();
        snap.resource = Some(ResourceRecord {
            id: id.clone(),
            kind: kind.to_string(),
            spec,
            system_data: ctx.created(),
            provisioning_state: ProvisioningState::Accepted,
            desired_config_version: desired,
            jobs: Vec::new(),
            duplicate_jobs: Vec::new(),
            active_operation_id: Some(op.id.clone()),
            last_operation_id: op.id.clone(),
            job_seq: 0,
            deletion: None,
            convergence_stopped_for: None,
            job_context: ctx.job_context.clone(),
            references: Vec::new(),
            outputs: serde_json::Map::new(),
            drift: None,
            last_error: None,
            schedule: Schedule::now(ctx.now),
            lease: None,
            generation: 1,
            usage: Default::default(),
            findings: Vec::new(),
        });
        snap.operations.push(op.clone());
        return Ok(Admitted::Accepted { operation: op, created: true });
    }
    change_spec(snap, spec, ctx)
}

/// PATCH: tags replace, properties merge-patch; `validate` checks the merged properties.
pub fn admit_patch(
    snap: &mut Snapshot,
    tags: Option<BTreeMap<String, String>>,
    properties_patch: Option<&Value>,
    validate: impl FnOnce(&Value) -> Result<(), Rejection>,
    ctx: &RequestContext,
) -> Result<Admitted, Rejection> {
    admit_shaped_patch(snap, tags, properties_patch, validate, |_, _| Ok(()), ctx)
}

/// [`admit_patch`], with the merged spec handed to `shape` before it is judged as the new
/// spec: the admission policies' `modify` and `append` (`policy_admission`), which also see
/// the resource's snapshot (its group, its settings).
pub fn admit_shaped_patch(
    snap: &mut Snapshot,
    tags: Option<BTreeMap<String, String>>,
    properties_patch: Option<&Value>,
    validate: impl FnOnce(&Value) -> Result<(), Rejection>,
    shape: impl FnOnce(&Snapshot, &mut Spec) -> Result<(), Rejection>,
    ctx: &RequestContext,
) -> Result<Admitted, Rejection> {
    let res = snap.resource.as_ref().ok_or(Rejection::NotFound)?;
    check_parent(snap, &res.id)?;
    let mut spec = res.spec.clone();
    if let Some(tags) = tags {
        spec.tags = tags;
    }
    if let Some(patch) = properties_patch {
        merge_patch(&mut spec.properties, patch);
        validate(&spec.properties)?;
    }
    shape(snap, &mut spec)?;
    change_spec(snap, spec, ctx)
}

fn change_spec(snap: &mut Snapshot, spec: Spec, ctx: &RequestContext) -> Result<Admitted, Rejection> {
    let active = snap.active_operation().cloned();
    let res = snap.resource.as_mut().expect("caller checked the resource exists");
    if res.is_deleting() {
        return Err(conflict(res, "Cannot update resource while resource is \"deleting\"".into()));
    }
    let desired = spec.config_version();
    if let Some(op) = active {
        if desired == res.desired_config_version && op.provisions() {
            return Ok(Admitted::InProgress { operation: op });
        }
        if !op.request.moves_resource() {
            return Err(conflict(res, format!("Cannot update the resource while {} is in progress", doing(&op))));
        }
        return Err(busy(res));
    }
    if desired == res.desired_config_version && res.provisioning_state == ProvisioningState::Succeeded {
        return Ok(Admitted::Unchanged);
    }
    res.spec = spec;
    res.desired_config_version = desired;
    res.system_data.last_modified_by = ctx.actor.clone();
    res.system_data.last_modified_by_type = ctx.actor_type.clone();
    res.system_data.last_modified_at = ctx.now;
    Ok(start_update(snap, None, ctx))
}

/// A new update operation under the resource's spec as it now is (changed, or run again for
/// `rerun`): the resource goes `Accepted`, convergence resumes, the engine looks at once.
pub(crate) fn start_update(snap: &mut Snapshot, rerun: Option<Rerun>, ctx: &RequestContext) -> Admitted {
    let res = snap.resource.as_mut().expect("caller checked the resource exists");
    let mut op = new_operation(&res.id, OperationRequest::Update, ProvisioningState::Accepted, ctx);
    op.rerun = rerun;
    res.provisioning_state = ProvisioningState::Accepted;
    res.active_operation_id = Some(op.id.clone());
    res.last_operation_id = op.id.clone();
    res.convergence_stopped_for = None;
    res.job_context = ctx.job_context.clone();
    res.last_error = None;
    res.schedule = Schedule::now(ctx.now);
    res.generation += 1;
    snap.operations.push(op.clone());
    Admitted::Accepted { operation: op, created: false }
}

/// DELETE: supersedes the running operation (it ends `Canceled`), starts a delete.
pub fn admit_delete(snap: &mut Snapshot, ctx: &RequestContext) -> Result<Admitted, Rejection> {
    crate::approval::supersede(snap, ctx.now);
    let Some(res) = snap.resource.as_ref() else {
        return Ok(Admitted::Absent);
    };
    let active = snap.active_operation().cloned();
    if let Some(op) = &active {
        if op.request == OperationRequest::Delete {
            return Err(conflict(res, "Resource is already deleting".into()));
        }
        snap.set_operation_status(
            &op.id,
            ProvisioningState::Canceled,
            Some(CloudError::new(codes::CANCELED, "This operation was superseded by another")),
            ctx.now,
        );
    }
    Ok(Admitted::Accepted { operation: start_delete(snap, ctx), created: false })
}

/// The resource in `snap` starts deleting under a new delete operation, due at once: a
/// resource's `DELETE` and a group's.
pub(crate) fn start_delete(snap: &mut Snapshot, ctx: &RequestContext) -> Operation {
    let res = snap.resource.as_mut().expect("the caller checked the resource exists");
    let op = new_operation(&res.id, OperationRequest::Delete, ProvisioningState::Deleting, ctx);
    res.deletion.get_or_insert(Deletion { requested_at: ctx.now, force: false });
    res.provisioning_state = ProvisioningState::Deleting;
    res.active_operation_id = Some(op.id.clone());
    res.job_context = ctx.job_context.clone();
    res.last_error = None;
    res.schedule = Schedule::now(ctx.now);
    res.generation += 1;
    snap.operations.push(op.clone());
    op
}

/// `DELETE ?force=true` (the API lets only privileged callers ask): a DELETE whose engine
/// asks each running job to cancel, runs no delete job (or stops retrying one) and removes
/// the record at once, ending the operation `Succeeded` with a note that the
/// infrastructure may be orphaned. A delete already running is forced in place. A resource
/// with children is refused: they would outlive it.
pub fn admit_force_delete(snap: &mut Snapshot, ctx: &RequestContext) -> Result<Admitted, Rejection> {
    let Some(res) = snap.resource.as_ref() else { return Ok(Admitted::Absent) };
    if !snap.children.is_empty() {
        let n = snap.children.len();
        return Err(conflict(res, format!("The resource has {n} child resource(s): force-delete them first")));
    }
    let admitted = match snap.active_operation().cloned() {
        Some(op) if op.request == OperationRequest::Delete => Admitted::InProgress { operation: op },
        _ => match admit_delete(snap, ctx)? {
            // A create that waited for approval: superseded, nothing of it is left.
            Admitted::Absent => return Ok(Admitted::Absent),
            admitted => admitted,
        },
    };
    let res = snap.resource.as_mut().expect("checked above");
    let requested_at = res.deletion.map_or(ctx.now, |d| d.requested_at);
    res.deletion = Some(Deletion { requested_at, force: true });
    res.schedule = Schedule::now(ctx.now);
    res.generation += 1;
    Ok(admitted)
}

/// `POST {resourceId}/{action}`: an operation of its own that runs the action's job. It is
/// the resource's active operation (another request meanwhile is a `409`, a DELETE
/// supersedes it), but it leaves the resource's spec, config version and
/// `provisioningState` alone: an action acts on what exists (ARO's POST-action operations
/// never touch the cluster document either).
pub fn admit_action(snap: &mut Snapshot, call: ActionCall, ctx: &RequestContext) -> Result<Admitted, Rejection> {
    let res = snap.resource.as_ref().ok_or(Rejection::NotFound)?;
    check_parent(snap, &res.id)?;
    if res.is_deleting() {
        return Err(conflict(res, format!("Cannot {} the resource while it is being deleted", call.name)));
    }
    refuse_while_busy(snap, res, &call.name)?;
    let admitted = start_beside_spec(snap, OperationRequest::Action, ctx, |op, _| op.action = Some(call));
    snap.resource.as_mut().expect("checked above").job_context = ctx.job_context.clone();
    Ok(admitted)
}

/// An operation of its own that leaves the spec alone (an action, a what-if, a drift check),
/// made the resource's active one and looked at at once; `fill` adds what it is about.
fn start_beside_spec(
    snap: &mut Snapshot,
    request: OperationRequest,
    ctx: &RequestContext,
    fill: impl FnOnce(&mut Operation, &ResourceRecord),
) -> Admitted {
    let res = snap.resource.as_mut().expect("caller checked the resource exists");
    let mut op = new_operation(&res.id, request, ProvisioningState::Accepted, ctx);
    fill(&mut op, res);
    res.active_operation_id = Some(op.id.clone());
    res.schedule = Schedule::now(ctx.now);
    res.generation += 1;
    snap.operations.push(op.clone());
    Admitted::Accepted { operation: op, created: false }
}

/// `POST {resourceId}/whatIf`: what `proposed` (a PUT's spec, secrets sealed; `None`: a
/// DELETE) would do, as an operation of its own that runs the type's job in check mode
/// (docs/arm-contract.md#what-if). Like an action it is the resource's active operation (a
/// `409` for other requests while it runs, so its prediction is of the resource as it is),
/// and it leaves the spec, config version, `provisioningState` and the jobs' requester alone.
/// A resource that does not exist yet runs nothing: [`Admitted::Absent`], and the caller
/// answers with the Slipway-level `Create` alone.
pub fn admit_what_if(
    snap: &mut Snapshot,
    id: &ArmId,
    proposed: Option<Spec>,
    guardrails: Vec<crate::whatif::Guardrail>,
    ctx: &RequestContext,
) -> Result<Admitted, Rejection> {
    check_parent(snap, id)?;
    let Some(res) = snap.resource.as_ref() else {
        return if proposed.is_some() { Ok(Admitted::Absent) } else { Err(Rejection::NotFound) };
    };
    if res.is_deleting() {
        return Err(conflict(res, "Cannot run a what-if while the resource is being deleted".into()));
    }
    refuse_while_busy(snap, res, "run a what-if on")?;
    Ok(start_beside_spec(snap, OperationRequest::WhatIf, ctx, |op, res| {
        op.what_if = Some(WhatIf { before: Some(res.spec.clone()), after: proposed, predicted: None, guardrails });
    }))
}

/// `POST {resourceId}/checkDrift`: a drift check now, as an operation of its own that runs
/// the type's create job in check mode under the resource's own spec; when it ends, what it
/// found is the resource's `drift` too (docs/osac-lifecycle.md#drift-detection). Only a
/// `Succeeded` resource, and no other operation running: drift is measured from a spec that
/// was put in place.
pub fn admit_check_drift(snap: &mut Snapshot, ctx: &RequestContext) -> Result<Admitted, Rejection> {
    let res = snap.resource.as_ref().ok_or(Rejection::NotFound)?;
    check_parent(snap, &res.id)?;
    if res.is_deleting() {
        return Err(conflict(res, "Cannot check the resource for drift while it is being deleted".into()));
    }
    refuse_while_busy(snap, res, "check")?;
    if res.provisioning_state != ProvisioningState::Succeeded {
        let state = res.provisioning_state.as_str();
        return Err(conflict(
            res,
            format!("The resource is {state}: only a Succeeded resource can be checked for drift"),
        ));
    }
    Ok(start_beside_spec(snap, OperationRequest::CheckDrift, ctx, |op, res| {
        op.what_if = Some(WhatIf {
            before: Some(res.spec.clone()),
            after: Some(res.spec.clone()),
            predicted: None,
            guardrails: Vec::new(),
        });
    }))
}

/// `409` while another operation runs: `verb` (an action's name, `retry`) waits for it.
fn refuse_while_busy(snap: &Snapshot, res: &ResourceRecord, verb: &str) -> Result<(), Rejection> {
    let Some(op) = snap.active_operation() else { return Ok(()) };
    Err(conflict(res, format!("Cannot {verb} the resource while {} is in progress", doing(op))))
}

/// What an operation is doing, as a conflict's message names it.
fn doing(op: &Operation) -> String {
    match (&op.action, op.request) {
        (Some(a), _) => format!("the action '{}'", a.name),
        (None, OperationRequest::WhatIf) => "a what-if".to_owned(),
        (None, OperationRequest::CheckDrift) => "a drift check".to_owned(),
        (None, OperationRequest::Update) => "an update operation".to_owned(),
        (None, request) => format!("a {} operation", request.as_str()),
    }
}

/// `POST {resourceId}/retry`: a `Failed` or `Canceled` resource's spec run again now, as an
/// update operation of its own whose jobs say they are a retry. Convergence stopped for the
/// spec (a canceled update, failed preflight checks) is resumed, and the backoff starts over
/// (`BackoffPolicy` counts no failure before the retry). The spec, its config version and
/// `systemData` stay as they are: nothing about the resource changed but the attempt.
pub fn admit_retry(snap: &mut Snapshot, ctx: &RequestContext) -> Result<Admitted, Rejection> {
    let res = snap.resource.as_ref().ok_or(Rejection::NotFound)?;
    check_parent(snap, &res.id)?;
    if res.is_deleting() {
        return Err(conflict(
            res,
            "Cannot retry the resource while it is being deleted: its delete retries on its own".into(),
        ));
    }
    refuse_while_busy(snap, res, "retry")?;
    if !matches!(res.provisioning_state, ProvisioningState::Failed | ProvisioningState::Canceled) {
        let state = res.provisioning_state.as_str();
        return Err(conflict(
            res,
            format!("The resource is {state}: only a Failed or Canceled resource can be retried"),
        ));
    }
    Ok(start_update(snap, Some(Rerun::Retry), ctx))
}

/// RFC 7396 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let target_map = target.as_object_mut().expect("made an object above");
    for (k, v) in patch_map {
        if v.is_null() {
            target_map.remove(k);
        } else {
            merge_patch(target_map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}
