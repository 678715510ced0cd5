//! ARM's tags at a scope (`{scope}/providers/Microsoft.Resources/tags/default`,
//! docs/arm-contract.md#tags-at-a-scope): a resource's or a group's tags replaced, merged or
//! taken away without touching the rest of it. **A tag change made this way is not a spec
//! change**, as in ARM: the desired config version stays, so no job runs; the next job (a
//! spec change, a retry, a drift check) is handed the tags as they are then.

use std::collections::BTreeMap;

use crate::admission::{Rejection, RequestContext};
use crate::resource::Snapshot;

pub type Tags = BTreeMap<String, String>;

/// What a tags write does (ARM's `PUT`, and `PATCH` with its `operation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagsChange {
    /// `PUT`, `PATCH` `Replace`: the tags become exactly these.
    Replace(Tags),
    /// `PATCH` `Merge`: these are set, the others kept.
    Merge(Tags),
    /// `PATCH` `Delete`: these names go — each only while its value is the one given, when a
    /// value is given.
    Delete(Tags),
}

impl TagsChange {
    pub fn apply(&self, tags: &Tags) -> Tags {
        match self {
            TagsChange::Replace(new) => new.clone(),
            TagsChange::Merge(new) => tags.iter().chain(new).map(|(k, v)| (k.clone(), v.clone())).collect(),
            TagsChange::Delete(gone) => tags
                .iter()
                .filter(|(k, v)| !gone.get(*k).is_some_and(|want| want.is_empty() || want == *v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// Changes the tags of the resource (or group) in `snap`; `check` judges the result (ARM's
/// limits). Refused while it is being deleted; nothing is written when nothing changes.
pub fn admit_tags(
    snap: &mut Snapshot,
    change: &TagsChange,
    check: impl FnOnce(&Tags) -> Result<(), Rejection>,
    ctx: &RequestContext,
) -> Result<Tags, Rejection> {
    let res = snap.resource.as_mut().ok_or(Rejection::NotFound)?;
    if res.is_deleting() {
        return Err(Rejection::Conflict {
            message: "The tags of a resource being deleted cannot change".into(),
            target: res.id.to_string(),
        });
    }
    if res.provisioning_state == crate::state::ProvisioningState::WaitingForApproval {
        // The approver decides on the spec as requested; a denial would drop these tags.
        return Err(Rejection::Conflict {
            message: "The tags of a resource whose request waits for approval cannot change until it is decided".into(),
            target: res.id.to_string(),
        });
    }
    let tags = change.apply(&res.spec.tags);
    check(&tags)?;
    if tags != res.spec.tags {
        res.spec.tags = tags.clone();
        ctx.modified(&mut res.system_data);
        res.generation += 1;
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn replace_merge_and_delete_as_arm_does() {
        let now = tags(&[("env", "dev"), ("team", "a")]);
        assert_eq!(TagsChange::Replace(tags(&[("x", "1")])).apply(&now), tags(&[("x", "1")]));
        let merged = TagsChange::Merge(tags(&[("env", "prod"), ("x", "1")])).apply(&now);
        assert_eq!(merged, tags(&[("env", "prod"), ("team", "a"), ("x", "1")]));
        assert_eq!(TagsChange::Delete(tags(&[("env", "")])).apply(&now), tags(&[("team", "a")]), "by name");
        assert_eq!(TagsChange::Delete(tags(&[("env", "prod")])).apply(&now), now, "a value that does not match stays");
        assert_eq!(TagsChange::Delete(tags(&[("env", "dev")])).apply(&now), tags(&[("team", "a")]));
    }
}
