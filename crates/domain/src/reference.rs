//! References between resources (docs/arm-contract.md#references): a property a type's
//! schema declares a reference holds another resource's id. The referenced resource must
//! exist (and not be on its way out) when the reference is written; the referrer's job
//! waits until every referenced resource is `Succeeded`; a resource others reference cannot
//! be deleted; and no reference may close a cycle.
//!
//! The API reads the ids out of the properties (it knows the schema) and hands them here
//! with the change; the store reads the referenced resources, and their ancestors, as
//! related context under their locks, and keeps an index of who references whom.

use crate::admission::{self, Admitted, Rejection, RequestContext};
use crate::ids::{ArmId, ResourceKey};
use crate::operation::CloudError;
use crate::resource::{ResourceRecord, Snapshot, Spec};

/// One reference: the property (`subnetId`, or `securityGroupIds[1]` for a list) and the id
/// it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub property: String,
    pub id: ArmId,
}

/// The code of a `400` for a reference that cannot be written.
pub const INVALID_REFERENCE: &str = "InvalidResourceReference";

/// What a change of `id` with `references` must read as related context: the resource's
/// parent, each referenced resource and each one's ancestors (a reference into a subtree
/// being deleted is refused).
pub fn related_keys(id: &ArmId, references: &[Reference]) -> Vec<ResourceKey> {
    let mut keys: Vec<ResourceKey> = id.parent().map(|p| p.key()).into_iter().collect();
    for r in references {
        let mut at = Some(r.id.clone());
        while let Some(a) = at {
            keys.push(a.key());
            at = a.parent();
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

fn invalid(r: &Reference, message: String) -> Rejection {
    Rejection::Invalid(CloudError::new(INVALID_REFERENCE, message).with_target(format!("properties.{}", r.property)))
}

/// Each referenced resource exists, is not being deleted (nor is any of its ancestors), and
/// does not reference `id` back.
pub fn check(snap: &Snapshot, id: &ArmId, references: &[Reference]) -> Result<(), Rejection> {
    for r in references {
        // A resource's children wait for it: referencing one would make each wait for the other.
        if r.id.key() == id.key() || r.id.key().is_under(&id.key()) {
            return Err(invalid(r, format!("The resource cannot reference itself or what it contains ('{}').", r.id)));
        }
        let Some(target) = snap.related(&r.id) else {
            return Err(invalid(r, format!("The referenced resource '{}' does not exist.", r.id)));
        };
        // A denial would take away what a new reference names.
        let held = snap.resource.as_ref().is_some_and(|res| res.references.iter().any(|h| h.id.key() == r.id.key()));
        if target.waits_to_be_created() && !held {
            return Err(Rejection::Conflict {
                message: format!(
                    "The referenced resource '{}' waits for approval: reference it once it is decided",
                    r.id
                ),
                target: format!("properties.{}", r.property),
            });
        }
        let mut at = Some(target.id.clone());
        while let Some(a) = at {
            if let Some(rec) = snap.related(&a)
                && rec.is_deleting()
            {
                return Err(Rejection::Conflict {
                    message: format!("The referenced resource '{}' is being deleted", rec.id),
                    target: format!("properties.{}", r.property),
                });
            }
            at = a.parent();
        }
        if target.references.iter().any(|back| back.id.key() == id.key()) {
            return Err(invalid(
                r,
                format!("Referencing '{}' would create a cycle: it references this resource.", r.id),
            ));
        }
    }
    Ok(())
}

/// `admission::admit_put` for a type with references: checked in the same change, and
/// recorded on the resource (the store indexes them). `walked`: the resources the API's
/// cycle walk read, which the change read too (see [`crate::cycle`]).
pub fn admit_put(
    snap: &mut Snapshot,
    id: &ArmId,
    kind: &str,
    spec: Spec,
    references: Vec<Reference>,
    walked: &[ResourceKey],
    ctx: &RequestContext,
) -> Result<Admitted, Rejection> {
    let admitted = admission::admit_put(snap, id, kind, spec, ctx)?;
    record(snap, id, references, walked)?;
    Ok(admitted)
}

/// After `admission::admit_patch`: the merged properties' references, checked and recorded.
pub fn record(
    snap: &mut Snapshot,
    id: &ArmId,
    references: Vec<Reference>,
    walked: &[ResourceKey],
) -> Result<(), Rejection> {
    check_all(snap, id, &references, walked)?;
    if let Some(res) = snap.resource.as_mut() {
        res.references = references;
    }
    Ok(())
}

/// Every rule a spec's references must keep — they exist, none is being deleted, none closes
/// a cycle — checked inside the change: for a PUT (through [`record`]) and a what-if's
/// proposal alike.
pub fn check_all(
    snap: &Snapshot,
    id: &ArmId,
    references: &[Reference],
    walked: &[ResourceKey],
) -> Result<(), Rejection> {
    check(snap, id, references)?;
    crate::cycle::check_within(snap, id, references, walked)
}

/// A delete is refused while other resources reference the resource or anything under it
/// (`Snapshot::referrers`, loaded for deletes): ARM's "in use".
pub fn check_not_in_use(snap: &Snapshot) -> Result<(), Rejection> {
    let Some(res) = snap.resource.as_ref() else { return Ok(()) };
    if snap.referrers.is_empty() {
        return Ok(());
    }
    let mut names: Vec<String> = snap.referrers.iter().map(|r| r.id.to_string()).collect();
    names.sort();
    names.dedup();
    Err(Rejection::InUse { target: res.id.to_string(), referrers: names })
}

/// The first referenced resource that is not `Succeeded` (its job must wait for it).
pub(crate) fn unready(snap: &Snapshot, res: &ResourceRecord) -> Option<String> {
    res.references.iter().find_map(|r| match snap.related(&r.id) {
        Some(t) if t.provisioning_state == crate::ProvisioningState::Succeeded => None,
        _ => Some(r.id.to_string()),
    })
}
