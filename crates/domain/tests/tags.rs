//! Tags written at their own scope (`Microsoft.Resources/tags`): the resource's tags change
//! and nothing runs — the desired config version stays, so the engine launches no job.

mod common;

use common::*;
use slipway_domain::admission::Rejection;
use slipway_domain::reconcile::Effect;
use slipway_domain::tags::{TagsChange, admit_tags};

#[test]
fn a_tag_change_at_its_own_scope_runs_no_job() {
    let mut w = World::provisioned();
    let (version, generation) = (w.res().desired_config_version.clone(), w.res().generation);
    let change = TagsChange::Merge([("costCenter".to_string(), "42".to_string())].into());
    let tags = admit_tags(&mut w.snap, &change, |_| Ok(()), &ctx(5, T0)).expect("admitted");
    assert_eq!(tags.get("costCenter").map(String::as_str), Some("42"));
    assert_eq!(w.res().spec.tags, tags);
    assert_eq!(w.res().desired_config_version, version, "not a spec change");
    assert_eq!(w.res().generation, generation + 1);
    assert!(w.snap.active_operation().is_none(), "no operation");
    assert!(matches!(w.decide(), Effect::Sleep { .. }), "and no job");
    let refused = admit_tags(&mut w.snap, &change, |_| Err(Rejection::NotFound), &ctx(6, T0));
    assert_eq!(refused, Err(Rejection::NotFound), "the check judges the result");
    w.delete(7).unwrap();
    let deleting = admit_tags(&mut w.snap, &change, |_| Ok(()), &ctx(8, T0));
    assert!(matches!(deleting, Err(Rejection::Conflict { .. })), "{deleting:?}");
}
