//! The guardrails a write is judged by inside its own transaction (docs/governance.md):
//! management locks and quota limits are registry entries of the resource's subscription,
//! which its change reads (`ChangeRequest::with_settings`) with no write of them in between,
//! and quota usage, which it counts there (`ChangeRequest::with_usage`). [`Guard`] asks for
//! both and judges the snapshot; the decisions are the domain's (`locks`, `quota`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use slipway_domain::TypeKey;
use slipway_domain::access::Scope;
use slipway_domain::admission::Rejection;
use slipway_domain::admission::{self, RequestContext};
use slipway_domain::approval::{RequestKind, Requirement};
use slipway_domain::ids::{ArmId, ResourceKey, SubscriptionId};
use slipway_domain::locks::{self, Lock, LockLevel, Verb};
use slipway_domain::policy_admission::{Finding, Target};
use slipway_domain::quota::{self, Charge, LimitSetting, Limits, MeterDefinition, MeterName, Share};
use slipway_domain::resource::{Setting, Snapshot, Spec};
use slipway_domain::whatif::{Guardrail, GuardrailKind};
use slipway_store::{ChangeRequest, EntryKind};

use crate::ApiState;
use crate::error::ArmError;
use crate::handlers::groups::first_resource;
use crate::handlers::policy::PolicyCatalog;

/// The kinds of registry entry a write reads as its guardrails.
pub(crate) const GUARDRAIL_KINDS: [EntryKind; 5] = [
    EntryKind::Lock,
    EntryKind::QuotaLimit,
    EntryKind::PolicyDefinition,
    EntryKind::PolicyAssignment,
    EntryKind::PolicyExemption,
];

/// The registry id of the limits set for `meter` in a subscription, or in one of its groups.
pub(crate) fn limit_id(subscription: &str, group: Option<&str>, meter: &str) -> String {
    match group {
        Some(g) => format!("{}|{}|{meter}", subscription.to_ascii_lowercase(), g.to_ascii_lowercase()),
        None => format!("{}|{meter}", subscription.to_ascii_lowercase()),
    }
}

pub(crate) fn decode_limit(body: &str) -> LimitSetting {
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    LimitSetting { admin: v["admin"].as_u64(), owner: v["owner"].as_u64() }
}

pub(crate) fn encode_limit(setting: &LimitSetting) -> String {
    json!({"admin": setting.admin, "owner": setting.owner}).to_string()
}

/// A lock as stored: `{"id", "level", "notes"}`, its scope read back from its id.
pub(crate) fn decode_lock(body: &str) -> Option<Lock> {
    let v: Value = serde_json::from_str(body).ok()?;
    let id = v["id"].as_str()?.to_string();
    let (scope, _) = id.rsplit_once("/providers/Microsoft.Authorization/locks/")?;
    Some(Lock {
        scope: Scope::stored(scope),
        level: LockLevel::parse(v["level"].as_str()?)?,
        notes: v["notes"].as_str().map(str::to_string),
        id,
    })
}

pub(crate) fn encode_lock(lock: &Lock) -> String {
    json!({"id": lock.id, "level": lock.level.as_str(), "notes": lock.notes}).to_string()
}

fn of_kind(settings: &[Setting], kind: EntryKind) -> impl Iterator<Item = &Setting> {
    settings.iter().filter(move |s| s.kind == kind.tag())
}

/// The locks among a change's settings.
pub(crate) fn locks_in(settings: &[Setting]) -> Vec<Lock> {
    of_kind(settings, EntryKind::Lock).filter_map(|s| decode_lock(&s.body)).collect()
}

/// The quota limits among a change's settings, by entry id.
pub(crate) fn limits_in(settings: &[Setting]) -> BTreeMap<String, LimitSetting> {
    of_kind(settings, EntryKind::QuotaLimit).map(|s| (s.id.clone(), decode_limit(&s.body))).collect()
}

/// What a write of one resource or group is judged by.
#[derive(Clone)]
pub(crate) struct Guard {
    target: ArmId,
    meters: Vec<MeterDefinition>,
    policies: Arc<PolicyCatalog>,
    /// The type's kind (`ComputeInstance`), for a policy's `kind` field.
    kind: String,
}

impl Guard {
    pub(crate) fn new(state: &ApiState, target: &ArmId) -> Guard {
        let (meters, kind) = if target.is_group() {
            (Vec::new(), String::new())
        } else {
            let type_key = TypeKey::new(&target.namespace, &target.type_name);
            let kind =
                state.types.get(&target.namespace, &target.type_name).map(|t| t.kind.clone()).unwrap_or_default();
            (state.quotas.of_type(&type_key).cloned().collect(), kind)
        };
        Guard { target: target.clone(), meters, policies: Arc::clone(&state.policies), kind }
    }

    /// `req` reading the guardrail settings and the target's group (what `resourceGroup()` is
    /// in a policy): every write.
    pub(crate) fn request(&self, req: ChangeRequest) -> ChangeRequest {
        let group = (!self.target.is_group()).then(|| self.target.group_id().key());
        req.with_settings(&self.target.subscription_key(), &GUARDRAIL_KINDS).with_related(group)
    }

    /// [`Guard::request`], also reading the usage of the target's meters (and, on PostgreSQL,
    /// holding their locks): a write that may grow what the resource consumes — a `PUT`, a
    /// `PATCH`, and a what-if judging one. A delete or an action never grows it, and so
    /// never waits for another write's meters.
    pub(crate) fn metered_request(&self, req: ChangeRequest) -> ChangeRequest {
        let meters = self.meters.iter().map(|d| d.meter.name.clone()).collect();
        self.request(req).with_usage(&self.target, meters)
    }

    /// The admission policies for a `PUT` or `PATCH` of the target with `spec`: `spec` as
    /// `append` and `modify` leave it, `403 RequestDisallowedByPolicy` when a `deny` holds,
    /// and what to record on the resource.
    pub(crate) fn admit_policies(
        &self,
        snap: &Snapshot,
        spec: &mut Spec,
        rctx: &RequestContext,
    ) -> Result<Vec<Finding>, Rejection> {
        let policies = self.policies.policies(&snap.settings);
        if policies.is_empty() {
            return Ok(Vec::new());
        }
        self.with_target(snap, rctx, |target| policies.admit_write(target, spec, rctx.now))
    }

    /// `403 RequestDisallowedByPolicy` when a `denyAction` forbids deleting the target.
    pub(crate) fn check_delete_policies(&self, snap: &Snapshot, rctx: &RequestContext) -> Result<(), Rejection> {
        let policies = self.policies.policies(&snap.settings);
        let Some(resource) = snap.resource.as_ref().filter(|_| !policies.is_empty()) else { return Ok(()) };
        self.with_target(snap, rctx, |target| policies.admit_delete(target, &resource.spec, rctx.now))
    }

    /// What the guardrails would do to a `PUT` of `spec` — which the policies shape as the
    /// `PUT` would — or, without one, to a `DELETE`: each verdict, refusing nothing.
    pub(crate) fn what_if(
        &self,
        snap: &Snapshot,
        spec: Option<&mut Spec>,
        kind: &str,
        rctx: &RequestContext,
    ) -> Vec<Guardrail> {
        let mut out = Vec::new();
        let shown = self.target.to_string();
        let locks = locks_in(&snap.settings);
        let locked = match spec {
            Some(_) => locks::check(&locks, &self.scope(), &shown, Verb::Write),
            None => locks::check_cascade(&locks, &self.scope(), &shown),
        };
        if let Err(l) = locked {
            out.push(verdict(GuardrailKind::Lock, "refuse", true, &l.lock.id, l.to_string()));
        }
        let policies = self.policies.policies(&snap.settings);
        let Some(spec) = spec else {
            if let Err(Rejection::PolicyDenied(d)) = self.check_delete_policies(snap, rctx) {
                out.push(verdict(GuardrailKind::Policy, d.effect.as_str(), true, &d.assignment_id, d.to_string()));
            }
            return out;
        };
        match self.with_target(snap, rctx, |target| policies.judge_write(target, spec, rctx.now)) {
            Ok((findings, denied)) => {
                out.extend(findings.iter().map(|f| {
                    let message = format!("{} ({}): {}", f.effect.as_str(), f.definition_id, f.reason);
                    verdict(GuardrailKind::Policy, f.effect.as_str(), f.enforced, &f.assignment_id, message)
                }));
                out.extend(
                    denied.map(|d| {
                        verdict(GuardrailKind::Policy, d.effect.as_str(), true, &d.assignment_id, d.to_string())
                    }),
                );
            }
            Err(other) => out.push(verdict(GuardrailKind::Policy, "error", true, "", other.to_string())),
        }
        let request = if snap.resource.is_some() { RequestKind::Update } else { RequestKind::Create };
        if let Ok(held) = self.approvals(snap, spec, request, rctx) {
            out.extend(held.into_iter().map(|(r, enforced)| {
                let message = format!("requireApproval ({}): {}", r.definition_id, r.reason);
                verdict(GuardrailKind::Policy, "requireApproval", enforced, &r.assignment_id, message)
            }));
        }
        if !self.meters.is_empty() {
            let mut trial = snap.clone();
            if admission::admit_put(&mut trial, &self.target, kind, spec.clone(), rctx).is_ok()
                && let Err(Rejection::QuotaExceeded(q)) = self.charge(&mut trial)
            {
                out.push(verdict(GuardrailKind::Quota, "refuse", true, q.meter.as_str(), q.to_string()));
            }
        }
        out
    }

    fn with_target<R>(&self, snap: &Snapshot, rctx: &RequestContext, judge: impl FnOnce(&Target<'_>) -> R) -> R {
        let t = &self.target;
        let id = t.to_string();
        let full_name = t.parent_names.iter().chain([&t.name]).cloned().collect::<Vec<_>>().join("/");
        let type_name = if t.is_group() {
            "Microsoft.Resources/resourceGroups".to_string()
        } else {
            format!("{}/{}", t.namespace, t.type_name)
        };
        let group = snap.related(&t.group_id());
        let resource_group = json!({
            "id": t.group_id().to_string(),
            "name": t.resource_group,
            "location": group.and_then(|g| g.spec.location.clone()),
            "tags": group.map(|g| g.spec.tags.clone()).unwrap_or_default(),
        });
        let tenant = rctx.job_context.as_ref().and_then(|j| j.tenant.as_ref());
        let subscription = json!({
            "id": format!("/subscriptions/{}", t.subscription),
            "subscriptionId": t.subscription,
            "displayName": tenant.map_or(t.subscription.as_str(), |tenant| tenant.display_name.as_str()),
        });
        let target = Target {
            scope: self.scope(),
            id: &id,
            name: &t.name,
            full_name: &full_name,
            type_name: &type_name,
            kind: &self.kind,
            is_group: t.is_group(),
            resource_group,
            subscription,
            request: json!({"apiVersion": rctx.api_version}),
            aliases: &self.policies.aliases,
        };
        judge(&target)
    }

    fn scope(&self) -> Scope {
        if self.target.is_group() {
            Scope::resource_group(&self.target.subscription, &self.target.resource_group)
        } else {
            Scope::resource(&self.target)
        }
    }

    /// `409 ScopeLocked` when a lock forbids `verb` on the target.
    pub(crate) fn check_locks(&self, snap: &Snapshot, verb: Verb) -> Result<(), Rejection> {
        let shown = self.target.to_string();
        locks::check(&locks_in(&snap.settings), &self.scope(), &shown, verb).map_err(Rejection::ScopeLocked)
    }

    /// `409 ScopeLocked` when a delete of the target and everything below it meets a lock;
    /// `403` when a policy's `denyAction` forbids it.
    pub(crate) fn check_delete(&self, snap: &Snapshot, rctx: &RequestContext) -> Result<(), Rejection> {
        let shown = self.target.to_string();
        locks::check_cascade(&locks_in(&snap.settings), &self.scope(), &shown).map_err(Rejection::ScopeLocked)?;
        self.check_delete_policies(snap, rctx)
    }

    /// After admission set the spec: what the resource now consumes, checked against the
    /// limits and the usage read in this transaction (`409 QuotaExceeded`).
    pub(crate) fn charge(&self, snap: &mut Snapshot) -> Result<(), Rejection> {
        if self.meters.is_empty() {
            return Ok(());
        }
        let charge = self.charge_of(snap);
        quota::charge(snap, &charge)
    }

    /// After [`Guard::charge`]: where the write leaves each limited meter of the subscription
    /// (`was`: what the resource consumed before it).
    pub(crate) fn shares(&self, snap: &Snapshot, was: &BTreeMap<MeterName, u64>) -> Vec<Share> {
        if self.meters.is_empty() {
            return Vec::new();
        }
        quota::shares(snap, was, &self.charge_of(snap))
    }

    fn charge_of(&self, snap: &Snapshot) -> Charge {
        let set = limits_in(&snap.settings);
        let sub = &self.target.subscription;
        let meters = self
            .meters
            .iter()
            .map(|d| {
                let name = d.meter.name.as_str();
                let at = |group: Option<&str>| set.get(&limit_id(sub, group, name));
                let limits = Limits {
                    subscription: LimitSetting::effective(at(None), d.defaults.subscription),
                    group: LimitSetting::effective(at(Some(&self.target.resource_group)), d.defaults.group),
                };
                (d.meter.clone(), limits)
            })
            .collect();
        Charge { meters }
    }

    /// The `requireApproval` policies that hold for a write of `kind` leaving `spec`, each
    /// with whether it is enforced.
    pub(crate) fn approvals(
        &self,
        snap: &Snapshot,
        spec: &Spec,
        kind: RequestKind,
        rctx: &RequestContext,
    ) -> Result<Vec<(Requirement, bool)>, Rejection> {
        let policies = self.policies.policies(&snap.settings);
        if policies.is_empty() {
            return Ok(Vec::new());
        }
        self.with_target(snap, rctx, |target| policies.approvals(target, spec, kind, rctx.now))
    }
}

fn verdict(kind: GuardrailKind, effect: &str, enforced: bool, id: &str, message: String) -> Guardrail {
    Guardrail { kind, effect: effect.to_string(), enforced, id: id.to_string(), message }
}

/// A lock, an assignment or an exemption is put on something that is there: `404` for a
/// resource or group that is not.
pub(crate) async fn scope_exists(state: &ApiState, scope: &Scope, path: &str) -> Result<(), ArmError> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        [_, _] => Ok(()),
        [_, sub, _, group] => {
            let subscription = SubscriptionId::new(sub);
            let key = ResourceKey::group(&subscription, &group.to_ascii_lowercase());
            let found = state.store.get_resource(&key).await?.is_some()
                || first_resource(state, &subscription, group).await?.is_some();
            if found { Ok(()) } else { Err(Rejection::GroupNotFound { group: group.to_string() }.into()) }
        }
        _ => {
            let id = ArmId::parse(path).map_err(|_| ArmError::resource_not_found(path))?;
            match state.store.get_resource(&id.key()).await? {
                Some(_) => Ok(()),
                None => Err(ArmError::resource_not_found(scope.as_str())),
            }
        }
    }
}

/// ARM's rule for the name of a lock (`max` 90, code `InvalidLockName`) or a policy object
/// (`max` 128, `#` forbidden too, `InvalidPolicyName`): 1 to `max` characters, none of
/// `forbidden` or a control character, not ending in a dot or a space.
pub(crate) fn check_name(name: &str, max: usize, forbidden: &str, code: &str) -> Result<(), ArmError> {
    let ok = !name.is_empty()
        && name.chars().count() <= max
        && !name.chars().any(|c| forbidden.contains(c) || c.is_control())
        && !name.ends_with(['.', ' ']);
    if ok {
        return Ok(());
    }
    Err(ArmError::bad_request(
        code,
        format!(
            "The name '{}' is invalid: 1 to {max} characters, none of {forbidden}, not ending in '.' or ' '.",
            slipway_domain::echo::echo(name, max)
        ),
    ))
}

/// What a lock's or a policy object's path needs for `method`: read at its scope to read it,
/// Owner (manage access) to write or delete it; `405` for anything else.
pub(crate) fn managed_by_owner(
    method: &axum::http::Method,
) -> Result<(slipway_domain::access::Permission, &'static str), ArmError> {
    use axum::http::Method;
    use slipway_domain::access::Permission;
    match *method {
        Method::GET => Ok((Permission::Read, "read")),
        Method::PUT => Ok((Permission::ManageAccess, "write")),
        Method::DELETE => Ok((Permission::ManageAccess, "delete")),
        _ => Err(crate::handlers::method_not_allowed(method)),
    }
}
