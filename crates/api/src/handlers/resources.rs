//! Resource GET, PUT, PATCH, DELETE and collection lists.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use slipway_domain::access::Permission;
use slipway_domain::admission::Admitted;
use slipway_domain::ids::{ArmId, ResourceKey, SubscriptionId};
use slipway_domain::locks::Verb;
use slipway_domain::reference::{self, Reference};
use slipway_domain::resource::{Snapshot, Spec};
use slipway_domain::{CloudError, OperationRequest, ResourceRecord, TenantContext, TypeKey, admission, group};
use slipway_store::{ChangeRequest, ListQuery, StoreError, reference_walk};
use slipway_types::ResourceType;

use crate::error::ArmError;
use crate::handlers::approvals::{self, Requesting};
use crate::handlers::body::json_body;
use crate::handlers::guardrails::Guard;
use crate::handlers::operations::add_async_headers;
use crate::handlers::{
    Ctx, force_flag, groups, insert, json_response, overview, request_context, require_admin, resource_scope,
};
use crate::preconditions::Preconditions;
use crate::request::{PatchBody, PutBody};
use crate::{ApiState, access, limits, request, wire};

/// `412` unless the request's `If-Match` / `If-None-Match` hold for the resource as
/// committed (checked inside the change, so no write slips in between).
fn check_preconditions(pre: &Preconditions, snap: &Snapshot, ty: &ResourceType) -> Result<(), admission::Rejection> {
    if pre.is_empty() {
        return Ok(());
    }
    pre.check(snap.resource.as_ref().map(|r| wire::resource_etag(r, ty)).as_deref())
}

/// A resource body as a response, with its `ETag` header.
fn with_etag(status: StatusCode, body: Value) -> Response {
    let etag = body["etag"].as_str().unwrap_or_default().to_string();
    let mut resp = json_response(status, body);
    insert(resp.headers_mut(), "etag", &etag);
    resp
}

/// A change of the resource at `id`, reading its parent and what it references (admission
/// checks them) under their locks.
pub(crate) fn change_request(id: &ArmId, references: &[Reference], now: slipway_domain::Timestamp) -> ChangeRequest {
    ChangeRequest::new(id.key(), now).with_related(reference::related_keys(id, references))
}

/// Referencing a resource hands its properties and outputs to the job and keeps it from
/// being deleted: the caller must be able to read it.
fn may_reference(ctx: &Ctx, grants: &access::Grants, references: &[Reference]) -> Result<(), ArmError> {
    for r in references {
        let action = access::resource_action(&r.id.namespace, &r.id.type_name, Permission::Read);
        grants.require(&ctx.caller, Permission::Read, &resource_scope(&r.id), &action)?;
    }
    Ok(())
}

pub(crate) async fn get_resource(state: &ApiState, id: &ArmId, ty: &ResourceType) -> Result<Response, ArmError> {
    let res =
        state.store.get_resource(&id.key()).await?.ok_or_else(|| ArmError::resource_not_found(&id.to_string()))?;
    Ok(with_etag(StatusCode::OK, wire::resource_body(&res, ty)))
}

/// A PUT body, read and checked before its change as every PUT is: the spec (secrets not
/// sealed yet), what it references — each readable by the caller — and the cycle check's
/// walk over the stored records, and who proposes it (for its approval). A what-if reads its
/// proposal the same way.
#[derive(Clone)]
pub(crate) struct Proposal {
    pub spec: Spec,
    pub references: Vec<Reference>,
    pub walked: Vec<ResourceKey>,
    pub by: Requesting,
}

pub(crate) async fn read_proposal(
    state: &ApiState,
    ctx: &Ctx,
    id: &ArmId,
    ty: &ResourceType,
    body: Body,
    grants: &access::Grants,
) -> Result<Proposal, ArmError> {
    ty.check_name(&id.name)?;
    let input: PutBody = json_body(state, ctx, body).await?;
    let location = match ty.resource_kind.has_location() {
        true => Some(request::required_location(input.location)?),
        false => None,
    };
    let tags = input.tags.unwrap_or_default();
    limits::check_tags(&tags)?;
    let properties = request::spec_properties(input.properties, ty)?;
    ty.validate(&properties)?;
    let references = ty.references_in(&properties, &id.subscription)?;
    may_reference(ctx, grants, &references)?;
    let walked = reference_walk(state.store.as_ref(), id, &references).await?;
    let by = Requesting::of(ctx, grants);
    Ok(Proposal { spec: Spec { location, tags, properties }, references, walked, by })
}

pub(crate) async fn put_resource(
    state: &ApiState,
    ctx: &Ctx,
    id: ArmId,
    ty: Arc<ResourceType>,
    body: Body,
    tenant: Option<TenantContext>,
    grants: &access::Grants,
) -> Result<Response, ArmError> {
    let proposal = read_proposal(state, ctx, &id, &ty, body, grants).await?;
    let rctx = request_context(state, ctx, ctx.api_version()?, tenant)?;
    // Tried once more when the group had no record and one was made (`groups`).
    let again = (proposal.clone(), rctx.clone());
    let sealer = Sealer::of(state, &ty)?;
    let (admitted, snap) = match admit_put_in_group(state, ctx, &id, &ty, proposal, sealer, rctx).await {
        Err(StoreError::Rejected(admission::Rejection::GroupNotFound { .. }))
            if groups::create_missing_group(state, ctx, &id, again.0.spec.location.as_deref()).await? =>
        {
            let (proposal, rctx) = again;
            let sealer = Sealer::of(state, &ty)?;
            admit_put_in_group(state, ctx, &id, &ty, proposal, sealer, rctx).await?
        }
        outcome => outcome?,
    };
    respond_to_write(state, ctx, &ty, admitted, snap.resource.as_ref())
}

/// A PUT's change: the resource created or replaced, in one transaction with its group's
/// check (a top-level resource's group must exist and not be deleting: `group::check_group`).
async fn admit_put_in_group(
    state: &ApiState,
    ctx: &Ctx,
    id: &ArmId,
    ty: &Arc<ResourceType>,
    proposal: Proposal,
    sealer: Option<Sealer>,
    rctx: admission::RequestContext,
) -> Result<(Admitted, Snapshot), StoreError> {
    let Proposal { mut spec, references, walked, by: who } = proposal;
    let kind = ty.kind.clone();
    let target = id.clone();
    let group = id.parent().is_none().then(|| id.group_id().key());
    let guard = Guard::new(state, id);
    let req = guard
        .metered_request(change_request(id, &references, rctx.now).with_related(walked.clone()).with_related(group));
    let pre = Preconditions::from_headers(&ctx.headers);
    let checked = ty.clone();
    ctx.change(state, req, move |snap| {
        check_preconditions(&pre, snap, &checked)?;
        guard.check_locks(snap, Verb::Write)?;
        group::check_group(snap, &target)?;
        let asked = spec.properties.clone();
        let findings = guard.admit_policies(snap, &mut spec, &rctx)?;
        if spec.properties != asked {
            checked.validate(&spec.properties).map_err(|e| admission::Rejection::Invalid(e.0))?;
        }
        if let Some(sealer) = &sealer {
            spec.properties = sealer.seal(&spec.properties, snap.resource.as_ref())?;
        }
        let was = approvals::before(snap);
        let admitted = reference::admit_put(snap, &target, &kind, spec, references, &walked, &rctx)?;
        record_findings(snap, findings);
        guard.charge(snap)?;
        approvals::hold_if_required(&guard, snap, admitted, was, &who, &rctx)
    })
    .await
}

pub(crate) async fn patch_resource(
    state: &ApiState,
    ctx: &Ctx,
    id: ArmId,
    ty: Arc<ResourceType>,
    body: Body,
    tenant: Option<TenantContext>,
    grants: &access::Grants,
) -> Result<Response, ArmError> {
    let input: PatchBody = json_body(state, ctx, body).await?;
    if let Some(tags) = &input.tags {
        limits::check_tags(tags)?;
    }
    let patch = request::patch_properties(input.properties, &ty)?;
    if let Some(p) = &patch {
        may_reference(ctx, grants, &ty.references_in(p, &id.subscription)?)?;
    }
    // What the merged properties can reference: what the patch sets, and what the resource
    // references now (checked again on the merged properties inside the change).
    let mut guess = patch.as_ref().map(|p| ty.references_in(p, &id.subscription)).transpose()?.unwrap_or_default();
    if ty.has_references()
        && let Some(current) = state.store.get_resource(&id.key()).await?
    {
        guess.extend(current.references);
    }
    let walked = reference_walk(state.store.as_ref(), &id, &guess).await?;
    let rctx = request_context(state, ctx, ctx.api_version()?, tenant)?;
    let who = Requesting::of(ctx, grants);
    let validator = ty.clone();
    let referrer = ty.clone();
    let sealer = Sealer::of(state, &ty)?;
    let guard = Guard::new(state, &id);
    let req = guard.metered_request(change_request(&id, &guess, rctx.now).with_related(walked.clone()));
    let loaded = req.related.clone();
    let target = id.clone();
    let pre = Preconditions::from_headers(&ctx.headers);
    let checked = ty.clone();
    let (admitted, snap) = ctx
        .change(state, req, move |snap| {
            check_preconditions(&pre, snap, &checked)?;
            if snap.resource.is_some() {
                guard.check_locks(snap, Verb::Write)?;
            }
            let patch = match (&sealer, patch) {
                (Some(sealer), Some(p)) => Some(sealer.seal(&p, snap.resource.as_ref())?),
                (_, p) => p,
            };
            let mut findings = Vec::new();
            let was = approvals::before(snap);
            admission::admit_shaped_patch(
                snap,
                input.tags,
                patch.as_ref(),
                |props| {
                    let opened = match &sealer {
                        Some(sealer) => sealer.open(props)?,
                        None => props.clone(),
                    };
                    validator.validate(&opened).map_err(|e| admission::Rejection::Invalid(e.0))
                },
                |snap, spec| {
                    let asked = spec.properties.clone();
                    findings = guard.admit_policies(snap, spec, &rctx)?;
                    if spec.properties != asked {
                        let opened = match &sealer {
                            Some(sealer) => sealer.open(&spec.properties)?,
                            None => spec.properties.clone(),
                        };
                        validator.validate(&opened).map_err(|e| admission::Rejection::Invalid(e.0))?;
                    }
                    Ok(())
                },
                &rctx,
            )
            .and_then(|admitted| {
                record_findings(snap, std::mem::take(&mut findings));
                let merged = snap.resource.as_ref().map(|r| r.spec.properties.clone()).unwrap_or_default();
                let references = referrer
                    .references_in(&merged, &target.subscription)
                    .map_err(|e| admission::Rejection::Invalid(e.0))?;
                if reference::related_keys(&target, &references).iter().any(|k| !loaded.contains(k)) {
                    return Err(admission::Rejection::Conflict {
                        message: "The resource changed while the request was processed; retry it".into(),
                        target: target.to_string(),
                    });
                }
                reference::record(snap, &target, references, &walked)?;
                guard.charge(snap)?;
                approvals::hold_if_required(&guard, snap, admitted, was, &who, &rctx)
            })
        })
        .await
        .map_err(|e| missing_as_not_found(e, &id))?;
    respond_to_write(state, ctx, &ty, admitted, snap.resource.as_ref())
}

/// What the admission policies found not compliant is kept on the resource, as its last
/// write left it.
fn record_findings(snap: &mut Snapshot, mut findings: Vec<slipway_domain::policy_admission::Finding>) {
    findings.retain(|f| f.is_non_compliance());
    if let Some(res) = snap.resource.as_mut()
        && res.findings != findings
    {
        res.findings = findings;
    }
}

/// A change refused because its resource does not exist, as ARM's `404 ResourceNotFound`.
pub(crate) fn missing_as_not_found(e: slipway_store::StoreError, id: &ArmId) -> ArmError {
    match e {
        slipway_store::StoreError::Rejected(admission::Rejection::NotFound) => {
            ArmError::resource_not_found(&id.to_string())
        }
        other => other.into(),
    }
}

pub(crate) fn respond_to_write(
    state: &ApiState,
    ctx: &Ctx,
    ty: &ResourceType,
    admitted: Admitted,
    res: Option<&slipway_domain::ResourceRecord>,
) -> Result<Response, ArmError> {
    let res = res.ok_or_else(ArmError::internal)?;
    let body = wire::resource_body(res, ty);
    let (status, op) = match admitted {
        Admitted::Unchanged => return Ok(with_etag(StatusCode::OK, body)),
        Admitted::Accepted { operation, created } => {
            (state.on_accept)();
            (write_status(&ctx.method, created), operation)
        }
        Admitted::InProgress { operation } => {
            let created = operation.request == OperationRequest::Create;
            (write_status(&ctx.method, created), operation)
        }
        Admitted::Absent => return Err(ArmError::internal()),
    };
    let mut resp = with_etag(status, body);
    add_async_headers(state, ctx, &op, resp.headers_mut());
    Ok(resp)
}

pub(crate) fn write_status(method: &Method, created: bool) -> StatusCode {
    match (method, created) {
        (&Method::PATCH, _) => StatusCode::ACCEPTED,
        (_, true) => StatusCode::CREATED,
        _ => StatusCode::OK,
    }
}

/// `?force=true`: a forced delete (docs/arm-contract.md#forced-delete); only the platform's
/// Admin may ask.
fn forced(ctx: &Ctx, grants: &access::Grants, ty: &ResourceType) -> Result<bool, ArmError> {
    if !force_flag(ctx)? {
        return Ok(false);
    }
    require_admin(ctx, grants, &format!("{}/{}/forceDelete/action", ty.namespace, ty.type_name))?;
    Ok(true)
}

pub(crate) async fn delete_resource(
    state: &ApiState,
    ctx: &Ctx,
    id: ArmId,
    ty: Arc<ResourceType>,
    tenant: Option<TenantContext>,
    grants: &access::Grants,
) -> Result<Response, ArmError> {
    let force = forced(ctx, grants, &ty)?;
    let rctx = request_context(state, ctx, ctx.api_version()?, tenant)?;
    let guard = Guard::new(state, &id);
    let req = guard.request(change_request(&id, &[], rctx.now).with_referrers(true).with_children(force));
    let pre = Preconditions::from_headers(&ctx.headers);
    let (admitted, snap) = ctx
        .change(state, req, move |snap| {
            check_preconditions(&pre, snap, &ty)?;
            // A request waiting for approval is undone first: the delete is judged, and acts,
            // on the resource as it was.
            slipway_domain::approval::supersede(snap, rctx.now);
            if snap.resource.is_some() {
                guard.check_delete(snap, &rctx)?;
            }
            reference::check_not_in_use(snap)?;
            if force { admission::admit_force_delete(snap, &rctx) } else { admission::admit_delete(snap, &rctx) }
        })
        .await?;
    if force && let Some(res) = &snap.resource {
        // What ran, for the audit trail: the record (and its job history) goes with the delete.
        let link = |job: &slipway_domain::Job| crate::JobRef::of(job).and_then(|r| state.jobs.link(&r));
        let jobs = serde_json::to_string(&wire::job_history_body(res, &link)).unwrap_or_default();
        tracing::warn!(target: "slipway::audit", resource_id = %res.id, principal = %ctx.caller.principal.name,
            jobs = %jobs, "forced delete: no delete job will run; the infrastructure may be orphaned");
    }
    match admitted {
        Admitted::Absent => Ok(StatusCode::NO_CONTENT.into_response()),
        Admitted::Accepted { operation, .. } | Admitted::InProgress { operation } => {
            (state.on_accept)();
            let mut resp = StatusCode::ACCEPTED.into_response();
            add_async_headers(state, ctx, &operation, resp.headers_mut());
            Ok(resp)
        }
        Admitted::Unchanged => Err(ArmError::internal()),
    }
}

/// Which items of a list the caller may see: all of them (`whole`), or each one its grants
/// cover. A filtered page may be short; `nextLink` still continues after its last row.
pub(crate) struct Visible<'a> {
    pub grants: &'a access::Grants,
    pub whole: bool,
}

/// Where a list looks: a subscription, one of its groups, or one parent's children.
pub(crate) struct ListScope<'a> {
    pub subscription: &'a str,
    pub resource_group: Option<&'a str>,
    pub parent: Option<&'a ArmId>,
}

pub(crate) async fn list(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    within: ListScope<'_>,
    ty: &ResourceType,
    visible: Visible<'_>,
) -> Result<Response, ArmError> {
    let ListScope { subscription, resource_group, parent } = within;
    let after = ctx
        .query
        .get("$skipToken")
        .map(|token| decode_token(token).ok_or_else(overview::invalid_skip_token))
        .transpose()?;
    let limit = overview::page_limit(state, ctx)?;
    let page = state
        .store
        .list_resources(&ListQuery {
            subscription: SubscriptionId::new(subscription),
            resource_group: resource_group.map(str::to_ascii_lowercase),
            type_key: Some(TypeKey::new(&ty.namespace, &ty.type_name)),
            under: parent.map(ArmId::key),
            after,
            limit,
        })
        .await?;
    let value: Vec<Value> = page
        .items
        .iter()
        .filter(|r| visible.whole || visible.grants.allows(&ctx.caller, Permission::Read, &resource_scope(&r.id)))
        .map(|r| wire::resource_body(r, ty))
        .collect();
    overview::page_response(ctx, path, limit, value, page.next.as_ref().map(encode_token))
}

/// Continuation tokens are hex so they survive any URL handling untouched.
pub(crate) fn encode_token(key: &ResourceKey) -> String {
    encode_text(key.as_str())
}

pub(crate) fn decode_token(token: &str) -> Option<ResourceKey> {
    decode_text(token).map(ResourceKey::new)
}

/// A `$skipToken`'s text: hex, so it survives any URL unchanged.
pub(crate) fn encode_text(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn decode_text(token: &str) -> Option<String> {
    if !token.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..token.len()).step_by(2).map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}

/// Seals a type's secret properties inside a change (so an unchanged secret keeps the sealed
/// value already stored); `None` for a type without secrets.
pub(crate) struct Sealer {
    keyring: Arc<slipway_secrets::Keyring>,
    names: Vec<String>,
}

impl Sealer {
    pub fn of(state: &ApiState, ty: &ResourceType) -> Result<Option<Sealer>, ArmError> {
        let names = ty.schema().map(slipway_secrets::secret_properties).unwrap_or_default();
        if names.is_empty() {
            return Ok(None);
        }
        // Startup refuses a type with secrets and no key; this is only a guard.
        let keyring = state.secrets.clone().ok_or_else(ArmError::internal)?;
        Ok(Some(Sealer { keyring, names }))
    }

    pub fn seal(&self, properties: &Value, stored: Option<&ResourceRecord>) -> Result<Value, admission::Rejection> {
        self.keyring
            .seal_properties(&self.names, properties, stored.map(|r| &r.spec.properties))
            .map_err(|e| admission::Rejection::Internal(e.to_string()))
    }

    fn open(&self, properties: &Value) -> Result<Value, admission::Rejection> {
        self.keyring
            .open_properties(properties)
            .map_err(|e| admission::Rejection::Invalid(CloudError::new("InvalidRequestContent", e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_tokens_round_trip() {
        let key = ResourceKey::new("/subscriptions/s/resourcegroups/rg/providers/ns/t/n-1");
        assert_eq!(decode_token(&encode_token(&key)), Some(key));
        assert_eq!(decode_token("zz"), None);
        assert_eq!(decode_token("abc"), None);
    }
}
