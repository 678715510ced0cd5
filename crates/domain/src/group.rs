//! Resource groups as resources of their own (ARM's `Microsoft.Resources/resourceGroups`,
//! docs/arm-contract.md#resource-groups): what the API does to a group's snapshot.
//!
//! A group is a [`ResourceRecord`] whose id is [`ArmId::group`]: its key,
//! `/subscriptions/{s}/resourcegroups/{g}`, prefixes the key of every resource in it, so the
//! store's machinery for a parent and its children serves a group and its resources — a
//! resource's create reads its group under the group's lock (`check_group`), and a group's
//! delete reads what it holds and deletes it first (`reconcile::group`). A group runs no job:
//! its `PUT` and `PATCH` answer at once, `Succeeded`; only its delete is an operation.
//!
//! The record keeps the group's location and tags in its spec, and `managedBy` as the one
//! member of its properties (`{"managedBy": …}`), never shown as such.
//!
//! Groups made before groups were records exist only because resources were put in them.
//! They read as groups (the API lists and shows them), and become records on their first
//! write: a `PUT`, a `PATCH`, a `DELETE` ([`admit_group_delete`] adopts one from what it
//! holds), or a resource created in them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::admission::{Admitted, Rejection, RequestContext, start_delete};
use crate::ids::ArmId;
use crate::operation::OperationRequest;
use crate::resource::{ResourceRecord, Schedule, Snapshot, Spec};
use crate::state::ProvisioningState;

/// The `kind` of a group's record.
pub const GROUP_KIND: &str = "ResourceGroup";

/// What a client declares about a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSpec {
    pub location: String,
    pub tags: BTreeMap<String, String>,
    /// The id of whatever manages the group (ARM's `managedBy`), shown and kept as given.
    pub managed_by: Option<String>,
}

impl GroupSpec {
    /// The group's declaration as its record keeps it.
    pub fn of(res: &ResourceRecord) -> GroupSpec {
        GroupSpec {
            location: res.spec.location.clone().unwrap_or_default(),
            tags: res.spec.tags.clone(),
            managed_by: res.spec.properties.get("managedBy").and_then(Value::as_str).map(str::to_string),
        }
    }

    fn into_spec(self) -> Spec {
        let properties = match self.managed_by {
            Some(m) => json!({ "managedBy": m }),
            None => json!({}),
        };
        Spec { location: Some(self.location), tags: self.tags, properties }
    }
}

/// What a group `PUT` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupWrite {
    /// A `201`.
    Created,
    /// A `200`: replaced, or already as asked.
    Replaced,
}

/// A top-level resource's group must exist (in `snap.related`) and not be deleting: a
/// resource created in a group on its way out would be left behind. Children are checked
/// against their parent instead (`admission`); a parent in a group implies the group.
pub fn check_group(snap: &Snapshot, id: &ArmId) -> Result<(), Rejection> {
    if id.parent().is_some() || id.is_group() {
        return Ok(());
    }
    let group = id.group_id();
    match snap.related(&group) {
        None => Err(Rejection::GroupNotFound { group: id.resource_group.clone() }),
        Some(g) if g.is_deleting() => Err(Rejection::GroupBeingDeleted { group: g.id.resource_group.clone() }),
        Some(_) => Ok(()),
    }
}

/// `PUT /subscriptions/{s}/resourceGroups/{g}`: creates the group, or replaces its tags and
/// `managedBy`. Its location is fixed once it exists (compared as ARM does, ignoring case
/// and spaces), and a group being deleted takes no change.
pub fn admit_group_put(
    snap: &mut Snapshot,
    id: &ArmId,
    spec: GroupSpec,
    ctx: &RequestContext,
) -> Result<GroupWrite, Rejection> {
    let Some(res) = snap.resource.as_mut() else {
        snap.resource = Some(new_group(id, spec, ctx));
        return Ok(GroupWrite::Created);
    };
    if res.is_deleting() {
        return Err(Rejection::GroupBeingDeleted { group: res.id.resource_group.clone() });
    }
    let had = GroupSpec::of(res);
    if location_key(&had.location) != location_key(&spec.location) {
        return Err(Rejection::GroupLocationFixed { group: res.id.resource_group.clone(), location: had.location });
    }
    // The location keeps the casing it was created with, as ARM's does.
    let spec = GroupSpec { location: had.location.clone(), ..spec };
    if spec != had {
        modify(res, spec, ctx);
    }
    Ok(GroupWrite::Replaced)
}

/// `PATCH /subscriptions/{s}/resourceGroups/{g}`: tags (replaced whole, when given) and
/// `managedBy`.
pub fn admit_group_patch(
    snap: &mut Snapshot,
    tags: Option<BTreeMap<String, String>>,
    managed_by: Option<String>,
    ctx: &RequestContext,
) -> Result<(), Rejection> {
    let res = snap.resource.as_mut().ok_or(Rejection::NotFound)?;
    if res.is_deleting() {
        return Err(Rejection::GroupBeingDeleted { group: res.id.resource_group.clone() });
    }
    let had = GroupSpec::of(res);
    let spec = GroupSpec {
        tags: tags.unwrap_or_else(|| had.tags.clone()),
        managed_by: managed_by.or_else(|| had.managed_by.clone()),
        location: had.location.clone(),
    };
    if spec != had {
        modify(res, spec, ctx);
    }
    Ok(())
}

/// `DELETE /subscriptions/{s}/resourceGroups/{g}`: a delete operation whose engine deletes
/// what the group holds (read as `snap.children`), each resource through its own delete,
/// then the group. A group made before groups were records is adopted from what it holds
/// (its first resource's location). Refused while something outside the group references
/// something in it (`snap.referrers`): that resource could never go.
pub fn admit_group_delete(snap: &mut Snapshot, id: &ArmId, ctx: &RequestContext) -> Result<Admitted, Rejection> {
    if snap.resource.is_none() {
        let Some(first) = snap.children.first() else {
            return Err(Rejection::GroupNotFound { group: id.resource_group.clone() });
        };
        let location = first.spec.location.clone().unwrap_or_default();
        let named = ArmId {
            resource_group: first.id.resource_group.clone(),
            name: first.id.resource_group.clone(),
            ..id.clone()
        };
        snap.resource = Some(new_group(&named, GroupSpec { location, ..GroupSpec::default() }, ctx));
    }
    if let Some(op) = snap.active_operation().filter(|o| o.request == OperationRequest::Delete) {
        return Ok(Admitted::InProgress { operation: op.clone() });
    }
    let res = snap.resource.as_ref().expect("made above");
    if !snap.referrers.is_empty() {
        let referrers = snap.referrers.iter().map(|r| r.id.to_string()).collect();
        return Err(Rejection::InUse { target: res.id.to_string(), referrers });
    }
    let op = start_delete(snap, ctx);
    // The cascade names its children's deletes after it, also once it has ended.
    snap.resource.as_mut().expect("made above").last_operation_id = op.id.clone();
    Ok(Admitted::Accepted { operation: op, created: false })
}

/// A location as ARM compares them: `West Europe` is `westeurope`.
fn location_key(location: &str) -> String {
    location.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

fn new_group(id: &ArmId, spec: GroupSpec, ctx: &RequestContext) -> ResourceRecord {
    let spec = spec.into_spec();
    ResourceRecord {
        id: id.clone(),
        kind: GROUP_KIND.to_string(),
        desired_config_version: spec.config_version(),
        spec,
        system_data: ctx.created(),
        provisioning_state: ProvisioningState::Succeeded,
        jobs: Vec::new(),
        duplicate_jobs: Vec::new(),
        active_operation_id: None,
        last_operation_id: ctx.operation_id.clone(),
        job_seq: 0,
        deletion: None,
        convergence_stopped_for: None,
        job_context: None,
        references: Vec::new(),
        outputs: serde_json::Map::new(),
        drift: None,
        last_error: None,
        schedule: Schedule::default(),
        lease: None,
        generation: 1,
        usage: Default::default(),
        findings: Vec::new(),
    }
}

fn modify(res: &mut ResourceRecord, spec: GroupSpec, ctx: &RequestContext) {
    res.spec = spec.into_spec();
    res.desired_config_version = res.spec.config_version();
    ctx.modified(&mut res.system_data);
    res.generation += 1;
}
