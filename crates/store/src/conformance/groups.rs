//! Resource groups as records (`slipway_domain::group`): a group's key prefixes its
//! resources', so a resource's create reads its group as context and a group's delete reads
//! what it holds as children — under the same locks as a parent and its children.

use super::*;
use slipway_domain::group::{self, GroupSpec};

fn group_of(subscription: &str, name: &str) -> ArmId {
    ArmId::group(subscription, name).expect("a group id")
}

/// Creates the group as its `PUT` does.
async fn seed_group(store: &dyn Store, id: &ArmId, op: u64) {
    let (target, c) = (id.clone(), ctx(op, T0));
    let spec = GroupSpec { location: "westeurope".into(), ..GroupSpec::default() };
    apply(store, ChangeRequest::new(id.key(), T0), move |s| group::admit_group_put(s, &target, spec, &c).map(|_| ()))
        .await
        .expect("group");
}

/// Resources created while their group's delete is admitted: each create either commits
/// first — and the delete, reading the group's resources after it, sees it and deletes it —
/// or sees the group deleting and is refused. None is left out of the delete.
pub async fn case_a_resource_is_never_created_in_a_group_being_deleted(h: &Harness) {
    check_no_resource_escapes_a_group_delete(&h.shared(), &h.shared()).await;
}

/// The case above with the resources created through `creators` and the group deleted
/// through `deleter` (two replicas, on PostgreSQL).
pub async fn check_no_resource_escapes_a_group_delete(creators: &Arc<dyn Store>, deleter: &Arc<dyn Store>) {
    const ROUNDS: u64 = 30;
    const RESOURCES: u64 = 6;
    let mut escaped = Vec::new();
    let (mut created, mut refused) = (0, 0);
    for round in 0..ROUNDS {
        let group_id = group_of("Sub-Group", &format!("g{round}"));
        let op_base = 5000 + round * (RESOURCES + 2);
        seed_group(&**creators, &group_id, op_base).await;
        let mut tasks = tokio::task::JoinSet::new();
        for n in 0..RESOURCES {
            let (store, id) = (Arc::clone(creators), vnet("Sub-Group", &group_id.name, &format!("v{n}")));
            tasks.spawn(async move {
                let c = ctx(op_base + 1 + n, at(SECOND));
                let req = ChangeRequest::new(id.key(), at(SECOND)).with_related([id.group_id().key()]);
                let target = id.clone();
                let made = apply(&*store, req, move |s| {
                    group::check_group(s, &target)?;
                    admission::admit_put(s, &target, KIND, spec(1), &c).map(|_| ())
                })
                .await;
                match made {
                    Ok(_) => Some(id),
                    Err(StoreError::Rejected(Rejection::GroupBeingDeleted { .. })) => None,
                    Err(e) => panic!("a create failed otherwise: {e}"),
                }
            });
        }
        let (c, target) = (ctx(op_base + RESOURCES + 1, at(SECOND)), group_id.clone());
        let req = ChangeRequest::new(group_id.key(), at(SECOND)).with_children(true).with_referrers(true);
        let deleted = change_with(&**deleter, req, move |s| group::admit_group_delete(s, &target, &c))
            .await
            .expect("the group's delete is admitted");
        let seen: Vec<ResourceKey> = deleted.1.children.iter().map(|r| r.key()).collect();
        let made: Vec<Option<ArmId>> = tasks.join_all().await;
        created += made.iter().flatten().count();
        refused += made.iter().filter(|m| m.is_none()).count();
        escaped.extend(made.into_iter().flatten().filter(|id| !seen.contains(&id.key())).map(|id| id.to_string()));
    }
    assert!(
        escaped.is_empty(),
        "{} resources escaped their group's delete, e.g. {:?}",
        escaped.len(),
        &escaped[..escaped.len().min(3)]
    );
    assert_eq!(created + refused, (ROUNDS * RESOURCES) as usize);
}

/// A group's record lists as a group whether or not it holds anything, beside a group that
/// only holds resources (made before groups were records); its resources list without it.
pub async fn case_group_records_list_as_groups(store: &dyn Store) {
    let sub = SubscriptionId::new("Sub-Groups");
    seed_group(store, &group_of("Sub-Groups", "Empty"), 1).await;
    seed_group(store, &group_of("Sub-Groups", "Full"), 2).await;
    for (n, group) in [(3, "Full"), (4, "Legacy")] {
        let id = vnet("Sub-Groups", group, "v");
        let c = ctx(n, T0);
        apply(store, ChangeRequest::new(id.key(), T0), move |s| {
            admission::admit_put(s, &id, KIND, spec(1), &c).map(|_| ())
        })
        .await
        .expect("resource");
    }
    let page = crate::resource_groups(store, &sub, None, 10).await.expect("groups");
    assert_eq!(page.items, vec!["Empty", "Full", "Legacy"]);
    let query = ListQuery {
        subscription: sub,
        resource_group: Some("full".into()),
        type_key: None,
        under: None,
        after: None,
        limit: 10,
    };
    let listed = |query: ListQuery| async move {
        let page = store.list_resources(&query).await.expect("list");
        page.items.iter().map(|r| r.id.to_string()).collect::<Vec<_>>()
    };
    let full = vnet("Sub-Groups", "Full", "v").to_string();
    assert_eq!(listed(query.clone()).await, vec![full.clone()], "a group is not among its resources");
    let everything = ListQuery { resource_group: None, ..query };
    let legacy = vnet("Sub-Groups", "Legacy", "v").to_string();
    assert_eq!(listed(everything).await, vec![full, legacy], "nor among the subscription's");
}
