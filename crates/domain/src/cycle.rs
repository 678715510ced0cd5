//! No reference may close a cycle: a job waits for what its resource references and for its
//! parent, so a reference whose target leads back — through references or parents — to the
//! resource being written, or to anything under it (which waits for it), would make a job
//! wait for itself.
//!
//! The walk runs twice. The API walks the stored records first, to learn which resources the
//! walk reaches; the change then reads all of them under their locks (as related context) and
//! walks again inside the transaction ([`check_within`]). A concurrent write that adds an edge
//! somewhere on the path must hold that resource's lock, so the second walk sees it: either
//! as the cycle it closes, or as a step off the resources read — the graph changed since the
//! first walk, and the request is refused with a `409` to send again.

use std::collections::BTreeSet;

use crate::admission::Rejection;
use crate::ids::{ArmId, ResourceKey};
use crate::operation::CloudError;
use crate::reference::{INVALID_REFERENCE, Reference};
use crate::resource::{ResourceRecord, Snapshot};

/// Most resources one walk reads.
pub const WALK_LIMIT: usize = 256;

/// A walk from a resource's references over parents and references.
pub struct CycleWalk {
    own: ResourceKey,
    seen: BTreeSet<ResourceKey>,
    /// Where to go next, with the index of the reference the path started at.
    next: Vec<(ArmId, usize)>,
    reading: Option<(ArmId, usize)>,
}

/// What the walk needs next.
#[derive(Debug, PartialEq, Eq)]
pub enum WalkStep {
    /// The record of this resource (or that it does not exist): [`CycleWalk::visit`].
    Read(ArmId),
    /// The reference at this index leads back to the resource.
    Closes(usize),
    /// The paths from the reference at this index reach more than [`WALK_LIMIT`] resources.
    TooLong(usize),
    Done,
}

impl CycleWalk {
    pub fn new(id: &ArmId, references: &[Reference]) -> Self {
        let next = references.iter().enumerate().map(|(i, r)| (r.id.clone(), i)).rev().collect();
        CycleWalk { own: id.key(), seen: BTreeSet::new(), next, reading: None }
    }

    pub fn step(&mut self) -> WalkStep {
        while let Some((at, from)) = self.next.pop() {
            let key = at.key();
            if key == self.own || key.is_under(&self.own) {
                return WalkStep::Closes(from);
            }
            if self.seen.contains(&key) {
                continue;
            }
            if self.seen.len() >= WALK_LIMIT {
                return WalkStep::TooLong(from);
            }
            self.seen.insert(key);
            self.reading = Some((at.clone(), from));
            return WalkStep::Read(at);
        }
        WalkStep::Done
    }

    /// The record of the resource the last [`WalkStep::Read`] named, `None` if it does not
    /// exist: the walk goes on to its parent and what it references.
    pub fn visit(&mut self, record: Option<&ResourceRecord>) {
        let Some((at, from)) = self.reading.take() else { return };
        if let Some(rec) = record {
            self.next.extend(rec.references.iter().rev().map(|r| (r.id.clone(), from)));
        }
        self.next.extend(at.parent().map(|p| (p, from)));
    }

    /// Every resource the walk read, in key order.
    pub fn into_keys(self) -> Vec<ResourceKey> {
        self.seen.into_iter().collect()
    }
}

/// The `400` for the reference at `r`: it closes a cycle.
pub fn closes(r: &Reference) -> Rejection {
    invalid(r, format!("Referencing '{}' would create a cycle: it leads back to this resource.", r.id))
}

/// The `400` for a reference whose paths are longer than anyone should build.
pub fn too_long(r: &Reference) -> Rejection {
    invalid(r, format!("Referencing '{}' leads through more than {WALK_LIMIT} resources.", r.id))
}

fn invalid(r: &Reference, message: String) -> Rejection {
    Rejection::Invalid(CloudError::new(INVALID_REFERENCE, message).with_target(format!("properties.{}", r.property)))
}

/// The walk again, inside the change, over the records it read under their locks
/// (`snap.related`, asked for as `read`, in key order). Stepping off them means a resource
/// on the path changed its references since the API's walk.
pub fn check_within(
    snap: &Snapshot,
    id: &ArmId,
    references: &[Reference],
    read: &[ResourceKey],
) -> Result<(), Rejection> {
    let records: std::collections::HashMap<ResourceKey, &ResourceRecord> =
        snap.related.iter().map(|r| (r.key(), r)).collect();
    let mut walk = CycleWalk::new(id, references);
    loop {
        match walk.step() {
            WalkStep::Read(at) => {
                if read.binary_search(&at.key()).is_err() {
                    return Err(Rejection::Conflict {
                        message: "The references of a resource on this request's path changed while it was checked; \
                                  send it again."
                            .into(),
                        target: id.to_string(),
                    });
                }
                walk.visit(records.get(&at.key()).copied());
            }
            WalkStep::Closes(i) => return Err(closes(&references[i])),
            WalkStep::TooLong(i) => return Err(too_long(&references[i])),
            WalkStep::Done => return Ok(()),
        }
    }
}
