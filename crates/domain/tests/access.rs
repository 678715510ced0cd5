//! The authorization decision over every role × permission × scope relation, and who an
//! assignment names. The expected grants are spelled out here, not derived from the code.

use slipway_domain::access::{Assignee, Permission, Role, RoleAssignment, Scope, is_allowed, may_read_within};
use slipway_domain::{Principal, PrincipalKind};

const SUB: &str = "/subscriptions/11111111-1111-1111-1111-111111111111";

fn scope(s: &str) -> Scope {
    Scope::parse(s).unwrap_or_else(|e| panic!("scope {s}: {e}"))
}

fn alice() -> Principal {
    Principal {
        name: "alice".into(),
        tenant: Some("t-a".into()),
        groups: vec!["ops".into()],
        kind: PrincipalKind::User,
        confined_to: Vec::new(),
    }
}

fn assignment(role: Role, at: &str) -> RoleAssignment {
    RoleAssignment {
        id: "a1".into(),
        assignee: Assignee::Principal("alice".into()),
        tenant: None,
        role,
        scope: scope(at),
    }
}

/// R = Read, W = Write, D = Delete, C = Cancel, a = ReadAccess, A = ManageAccess, P = ManagePlatform.
const GRANTS: [(Role, &str); 4] =
    [(Role::Reader, "Ra"), (Role::Contributor, "RWDCa"), (Role::Owner, "RWDCaA"), (Role::Admin, "RWDCaAP")];

fn letter(p: Permission) -> char {
    match p {
        Permission::Read => 'R',
        Permission::Write => 'W',
        Permission::Delete => 'D',
        Permission::Cancel => 'C',
        Permission::ReadAccess => 'a',
        Permission::ManageAccess => 'A',
        Permission::ManagePlatform => 'P',
    }
}

#[test]
fn every_role_permission_and_scope_relation() {
    let rg = format!("{SUB}/resourceGroups/rg1");
    let vnet = format!("{rg}/providers/Slipway.Example/virtualNetworks/v1");
    let subnet = format!("{vnet}/subnets/s1");
    let other_sub = "/subscriptions/22222222-2222-2222-2222-222222222222";
    // (assignment scope, target scope, does the assignment's scope cover the target)
    let relations = [
        ("platform over a resource", "/".to_string(), vnet.clone(), true),
        ("subscription over a resource", SUB.to_string(), vnet.clone(), true),
        ("resource group over a resource", rg.clone(), vnet.clone(), true),
        ("the resource itself", vnet.clone(), vnet.clone(), true),
        ("a parent over its child", vnet.clone(), subnet.clone(), true),
        ("a child over its parent", subnet.clone(), vnet.clone(), false),
        ("a resource over its group", vnet.clone(), rg.clone(), false),
        ("a group over the subscription", rg.clone(), SUB.to_string(), false),
        ("a sibling group", format!("{SUB}/resourceGroups/rg2"), vnet.clone(), false),
        ("a name prefix is not a parent", format!("{SUB}/resourceGroups/rg"), vnet.clone(), false),
        ("another subscription", other_sub.to_string(), vnet.clone(), false),
        ("a subscription over the platform", SUB.to_string(), "/".to_string(), false),
        ("the platform over itself", "/".to_string(), "/".to_string(), true),
    ];
    let mut cases = 0;
    for (role, letters) in GRANTS {
        for permission in Permission::ALL {
            for (relation, at, target, covers) in &relations {
                let expected = *covers && letters.contains(letter(permission));
                let got = is_allowed(&alice(), &[assignment(role, at)], permission, &scope(target));
                assert_eq!(got, expected, "{role:?} {permission:?} {relation}");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 4 * 7 * 13);
    // No assignment, no access; the local user (authentication off) has all of it.
    for permission in Permission::ALL {
        assert!(!is_allowed(&alice(), &[], permission, &scope(SUB)));
        assert!(is_allowed(&Principal::local(), &[], permission, &Scope::platform()));
    }
}

#[test]
fn an_assignment_names_a_principal_or_a_group_within_its_tenant() {
    let target = scope(SUB);
    let mut a = assignment(Role::Reader, SUB);
    let table: [(&str, Assignee, Option<&str>, bool); 6] = [
        ("by name", Assignee::Principal("alice".into()), None, true),
        ("another name", Assignee::Principal("bob".into()), None, false),
        ("by group", Assignee::Group("ops".into()), None, true),
        ("another group", Assignee::Group("dev".into()), None, false),
        ("same tenant", Assignee::Principal("alice".into()), Some("T-A"), true),
        ("same name, another tenant", Assignee::Principal("alice".into()), Some("t-b"), false),
    ];
    for (case, assignee, tenant, expected) in table {
        a.assignee = assignee;
        a.tenant = tenant.map(str::to_string);
        assert_eq!(is_allowed(&alice(), std::slice::from_ref(&a), Permission::Read, &target), expected, "{case}");
    }
    let tenantless = Principal { tenant: None, ..alice() };
    a.assignee = Assignee::Principal("alice".into());
    a.tenant = Some("t-a".into());
    assert!(!is_allowed(&tenantless, &[a], Permission::Read, &target), "a tenant-bound assignment needs a tenant");
}

#[test]
fn a_list_is_shown_to_whoever_may_read_part_of_it() {
    let rg = format!("{SUB}/resourceGroups/rg1");
    let in_group = [assignment(Role::Reader, &rg)];
    assert!(may_read_within(&alice(), &in_group, &scope(SUB)), "reads rg1 inside the subscription");
    assert!(!is_allowed(&alice(), &in_group, Permission::Read, &scope(SUB)), "but not the whole subscription");
    assert!(!may_read_within(&alice(), &in_group, &scope("/subscriptions/22222222-2222-2222-2222-222222222222")));
    assert!(!may_read_within(&alice(), &[assignment(Role::Reader, &format!("{SUB}/resourceGroups/rg2"))], &scope(&rg)));
}

#[test]
fn scopes_parse_case_insensitively_and_know_their_subscription() {
    let upper = "/SUBSCRIPTIONS/AAAAAAAA-1111-1111-1111-111111111111/resourceGroups/RG/";
    let lower = "/subscriptions/aaaaaaaa-1111-1111-1111-111111111111/resourcegroups/rg";
    assert_eq!(scope(upper), scope(lower));
    assert_eq!(scope(upper).subscription(), Some("aaaaaaaa-1111-1111-1111-111111111111"));
    assert_eq!(Scope::platform().subscription(), None);
    assert!(Scope::parse("/").unwrap().is_platform());
    let vnet = format!("{SUB}/resourceGroups/rg/providers/Slipway.Example/virtualNetworks/v 1/subnets/s(1)");
    assert_eq!(
        scope(&vnet).as_str(),
        vnet.to_ascii_lowercase(),
        "resource ids (names by ARM's common rule) are scopes"
    );
    for bad in [
        "/foo",
        "/subscriptions",
        "/subscriptions/",
        "/subscriptions//x",
        "subscriptions/a",
        "/subscriptions/abc",
        &format!("{SUB}/../22222222-2222-2222-2222-222222222222"),
        &format!("{SUB}/resourceGroups/../../subscriptions/22222222-2222-2222-2222-222222222222"),
        &format!("{SUB}/resourceGroups/rg/."),
        &format!("{SUB}/resourceGroups/r!g"),
        &format!("{SUB}/resourceGroups/rg/providers/Slipway.Example/virtualNetworks"),
        &format!("{SUB}/resourceGroups/rg/providers/Slipway.Example/virtualNetworks/a%2fb"),
        &format!("{SUB}/resourceGroups/rg/providers/NoDot/virtualNetworks/v"),
        &format!("{SUB}/resourceGroups/rg/providers/Slipway.Example/virtual-networks/v"),
        &format!("{SUB}/locations/x"),
    ] {
        assert!(Scope::parse(bad).is_err(), "{bad}");
    }
    assert!(Scope::stored("/subscriptions/abc").subscription() == Some("abc"), "stored data is read as it is");
    assert!(!Scope::stored("/subscriptions/abc/../x").is_canonical());
    assert!(Scope::stored(lower).is_canonical());
    assert_eq!(Role::from_name("contributor"), Some(Role::Contributor));
    assert_eq!(Role::from_name("Superuser"), None);
}

#[test]
fn what_each_subscription_state_admits() {
    use slipway_domain::subscription::{Intent, Refusal, Subscription, SubscriptionState, admits};
    let sub = |state| Subscription {
        id: slipway_domain::SubscriptionId::new("s"),
        tenant_id: "t".into(),
        display_name: "S".into(),
        state,
        attributes: Default::default(),
        registered_at: Default::default(),
        updated_at: Default::default(),
    };
    use Intent::*;
    use SubscriptionState::*;
    let table = [
        (Registered, Read, Ok(())),
        (Registered, Change, Ok(())),
        (Registered, Delete, Ok(())),
        (Warned, Read, Ok(())),
        (Warned, Change, Err(Refusal::Warned)),
        (Warned, Delete, Ok(())),
        (Suspended, Read, Ok(())),
        (Suspended, Change, Err(Refusal::Suspended)),
        (Suspended, Delete, Err(Refusal::Suspended)),
        (Deleted, Read, Ok(())),
        (Deleted, Change, Err(Refusal::Deleted)),
        (Deleted, Delete, Err(Refusal::Deleted)),
        (Unregistered, Read, Ok(())),
        (Unregistered, Change, Err(Refusal::NotRegistered)),
        (Unregistered, Delete, Err(Refusal::NotRegistered)),
    ];
    for (state, intent, expected) in table {
        assert_eq!(admits(Some(&sub(state)), intent, true), expected, "{state:?} {intent:?}");
        assert_eq!(
            admits(Some(&sub(state)), intent, false),
            expected,
            "registered entries count without the requirement too"
        );
    }
    assert_eq!(admits(None, Change, true), Err(Refusal::NotRegistered));
    assert_eq!(admits(None, Delete, true), Err(Refusal::NotRegistered));
    assert_eq!(admits(None, Read, true), Ok(()));
    assert_eq!(admits(None, Change, false), Ok(()), "the local mode needs no registration");
}

/// A credential confined to subscriptions (an API token an Owner made) acts only inside them,
/// even where its name holds a role at the platform or in another subscription.
#[test]
fn a_confined_credential_acts_only_inside_its_subscriptions() {
    let other = "/subscriptions/22222222-2222-2222-2222-222222222222";
    let confined = Principal { confined_to: vec![SUB.trim_start_matches("/subscriptions/").into()], ..alice() };
    let admin = [assignment(Role::Admin, "/")];
    let vnet = scope(&format!("{SUB}/resourceGroups/rg1/providers/Slipway.Example/virtualNetworks/v1"));
    assert!(is_allowed(&confined, &admin, Permission::Delete, &vnet), "inside: as its roles say");
    assert!(is_allowed(&confined, &admin, Permission::ManageAccess, &scope(SUB)));
    assert!(!is_allowed(&confined, &admin, Permission::ManagePlatform, &Scope::platform()), "never the platform's");
    assert!(!is_allowed(&confined, &admin, Permission::Read, &scope(other)));
    assert!(!is_allowed(&confined, &[assignment(Role::Owner, other)], Permission::Read, &scope(other)));
    assert!(is_allowed(&alice(), &[assignment(Role::Owner, other)], Permission::Read, &scope(other)), "unconfined");

    assert!(may_read_within(&confined, &admin, &scope(SUB)));
    assert!(!may_read_within(&confined, &admin, &scope(other)));
    let in_group = [assignment(Role::Reader, &format!("{SUB}/resourceGroups/rg1"))];
    assert!(may_read_within(&confined, &in_group, &scope(SUB)), "a group inside, seen from its subscription");
    assert!(may_read_within(&confined, &in_group, &Scope::platform()));
    assert!(!may_read_within(&confined, &[assignment(Role::Reader, other)], &Scope::platform()));
}
