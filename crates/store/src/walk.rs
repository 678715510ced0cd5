//! The first of a reference cycle check's two walks (`slipway_domain::cycle`), over the
//! stored records: which resources a change writing references must read under their locks
//! for the second walk, inside its transaction, to be sure.

use slipway_domain::admission::Rejection;
use slipway_domain::cycle::{self, CycleWalk, WalkStep};
use slipway_domain::ids::{ArmId, ResourceKey};
use slipway_domain::reference::Reference;

use crate::{Store, StoreError};

/// The keys the walk from `references` of `id` read, in key order; `Rejected` when a
/// reference closes a cycle (or leads too far).
pub async fn reference_walk(
    store: &dyn Store,
    id: &ArmId,
    references: &[Reference],
) -> Result<Vec<ResourceKey>, StoreError> {
    let mut walk = CycleWalk::new(id, references);
    loop {
        match walk.step() {
            WalkStep::Read(at) => {
                let record = store.get_resource(&at.key()).await?;
                walk.visit(record.as_ref());
            }
            WalkStep::Closes(i) => return Err(refused(cycle::closes(&references[i]))),
            WalkStep::TooLong(i) => return Err(refused(cycle::too_long(&references[i]))),
            WalkStep::Done => return Ok(walk.into_keys()),
        }
    }
}

fn refused(r: Rejection) -> StoreError {
    StoreError::Rejected(r)
}
