//! The guardrails a write is judged by inside its own transaction (docs/governance.md):
//! management locks and quota limits are registry entries of the resource's subscription,
//! which its change reads (`ChangeRequest::with_settings`) with no write of them in between,
//! and quota usage, which it counts there (`ChangeRequest::with_usage`). [`Guard`] asks for
//! both and judges the snapshot; the decisions are the domain's (`locks`, `quota`).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use slipway_domain::TypeKey;
use slipway_domain::access::Scope;
use slipway_domain::admission::Rejection;
use slipway_domain::ids::ArmId;
use slipway_domain::locks::{self, Lock, LockLevel, Verb};
use slipway_domain::quota::{self, Charge, LimitSetting, Limits, MeterDefinition};
use slipway_domain::resource::{Setting, Snapshot};
use slipway_store::{ChangeRequest, EntryKind};

use crate::ApiState;

/// The kinds of registry entry a write reads as its guardrails.
pub(crate) const GUARDRAIL_KINDS: [EntryKind; 2] = [EntryKind::Lock, EntryKind::QuotaLimit];

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
}

impl Guard {
    pub(crate) fn new(state: &ApiState, target: &ArmId) -> Guard {
        let meters = if target.is_group() {
            Vec::new()
        } else {
            let type_key = TypeKey::new(&target.namespace, &target.type_name);
            state.quotas.of_type(&type_key).cloned().collect()
        };
        Guard { target: target.clone(), meters }
    }

    /// `req` reading the guardrail settings, and the usage of the target's meters.
    pub(crate) fn request(&self, req: ChangeRequest) -> ChangeRequest {
        let meters = self.meters.iter().map(|d| d.meter.name.clone()).collect();
        req.with_settings(&self.target.subscription_key(), &GUARDRAIL_KINDS).with_usage(&self.target, meters)
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

    /// `409 ScopeLocked` when a delete of the target and everything below it meets a lock.
    pub(crate) fn check_delete(&self, snap: &Snapshot) -> Result<(), Rejection> {
        let shown = self.target.to_string();
        locks::check_cascade(&locks_in(&snap.settings), &self.scope(), &shown).map_err(Rejection::ScopeLocked)
    }

    /// After admission set the spec: what the resource now consumes, checked against the
    /// limits and the usage read in this transaction (`409 QuotaExceeded`).
    pub(crate) fn charge(&self, snap: &mut Snapshot) -> Result<(), Rejection> {
        if self.meters.is_empty() {
            return Ok(());
        }
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
        quota::charge(snap, &Charge { meters })
    }
}
