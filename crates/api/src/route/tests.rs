use super::*;
use slipway_types::TypeRegistry;

#[test]
fn metric_templates_name_only_configured_types_in_their_declared_casing() {
    let vms = slipway_types::ResourceType::new(
        "Slipway.Example",
        "computeInstances",
        "ComputeInstance",
        vec!["2025-01-01".into()],
        None,
    )
    .unwrap()
    .with_actions([slipway_types::ActionType::new("computeInstances", "restart", None).unwrap()]);
    let types = TypeRegistry::new([vms]);
    let sub = "/subscriptions/00000000-0000-0000-0000-000000000001";
    let vm = format!("{sub}/resourceGroups/rg/providers/slipway.example/COMPUTEINSTANCES/vm1");
    let typed =
        "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Slipway.Example/computeInstances";
    for (path, want) in [
        (vm.clone(), format!("{typed}/{{name}}")),
        (format!("{vm}/RESTART"), format!("{typed}/{{name}}/restart")),
        (format!("{vm}/jobs"), format!("{typed}/{{name}}/jobs")),
        (format!("{vm}/reboot"), "unmatched".into()),
        (format!("{sub}/resourceGroups/rg/providers/Made.Up/things/x"), "unmatched".into()),
        (
            format!("{sub}/providers/SLIPWAY.EXAMPLE/locations/here/operationStatuses/00000000-0000-4000-8000-000000000001/logs"),
            "/subscriptions/{subscriptionId}/providers/Slipway.Example/locations/{location}/operationStatuses/{operationId}/logs".into(),
        ),
        (format!("{sub}/providers/Made.Up/locations/here/operationStatuses/00000000-0000-4000-8000-000000000001"), "unmatched".into()),
        ("/metrics".into(), "/metrics".into()),
        ("/anything/else".into(), "unmatched".into()),
    ] {
        assert_eq!(metric_template(&path, &types), want, "{path}");
    }
    // The access log keeps what the client sent.
    assert!(template(&format!("{sub}/resourceGroups/rg/providers/Made.Up/things/x")).contains("Made.Up/things"));
}

const S: &str = "0b9D1f3e-52a4-4c38-9d7e-1f1b7a1c2d3e";

fn p(path: &str) -> Result<Route, RouteError> {
    parse(&path.replace("{S}", S))
}

#[test]
fn matches_arm_paths_case_insensitively() {
    let r = p("/SUBSCRIPTIONS/{S}/resourcegroups/RG/Providers/Slipway.Example/virtualNetworks/v1").unwrap();
    let Route::Resource(id) = r else { panic!("{r:?}") };
    assert_eq!(id.subscription, S, "the casing is kept");
    assert_eq!(id.resource_group, "RG");
    assert_eq!(id.name, "v1");
    assert!(matches!(
        p("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A/t").unwrap(),
        Route::Collection { resource_group: Some(_), .. }
    ));
    assert!(matches!(
        p("/subscriptions/{S}/providers/Ns.A/t/").unwrap(),
        Route::Collection { resource_group: None, .. }
    ));
    assert!(matches!(
        p("/subscriptions/{S}/providers/Ns.A/locations/local/OPERATIONSTATUSES/abc").unwrap(),
        Route::OperationStatus { .. }
    ));
    assert!(matches!(
        p("/subscriptions/{S}/providers/Ns.A/locations/local/operationStatuses/abc/cancel").unwrap(),
        Route::OperationCancel { .. }
    ));
    assert!(matches!(
        p("/subscriptions/{S}/providers/Ns.A/locations/local/operationResults/abc").unwrap(),
        Route::OperationResult { .. }
    ));
}

#[test]
fn nests_child_resources_and_their_collections() {
    let base = "/subscriptions/{S}/resourceGroups/RG/providers/Slipway.Example/virtualNetworks/v1";
    let Route::Resource(id) = p(&format!("{base}/subnets/s1")).unwrap() else { panic!() };
    assert_eq!(
        (id.type_name.as_str(), id.parent_names.clone(), id.name.as_str()),
        ("virtualNetworks/subnets", vec!["v1".to_string()], "s1")
    );
    let Route::Collection { type_name, parent, resource_group, .. } = p(&format!("{base}/subnets")).unwrap() else {
        panic!()
    };
    assert_eq!(type_name, "virtualNetworks/subnets");
    assert_eq!(parent.unwrap().to_string(), base.replace("{S}", S));
    assert_eq!(resource_group.as_deref(), Some("RG"));
    let Route::Resource(deep) = p(&format!("{base}/subnets/s1/ports/p1")).unwrap() else { panic!() };
    assert_eq!(deep.parent().unwrap(), id);
    // Every name on the way is held to ARM's rule.
    assert!(matches!(p(&format!("{base}/subnets/bad%3Cname/ports")), Err(RouteError::BadName(_))));
    assert_eq!(ArmId::read_stored(&id.to_string()), Some(id));
}

#[test]
fn matches_the_platform_paths() {
    assert_eq!(p("/subscriptions"), Ok(Route::Subscriptions));
    assert!(matches!(p("/SUBSCRIPTIONS/{S}"), Ok(Route::Subscription(_))));
    assert!(matches!(p("/subscriptions/nope"), Err(RouteError::BadSubscription(_))));
    let at = |path: &str| match p(path) {
        Ok(Route::RoleAssignments { scope, id }) => (scope.as_str().to_string(), id),
        other => panic!("{path}: {other:?}"),
    };
    assert_eq!(at("/providers/Slipway.Authorization/roleAssignments"), ("/".into(), None));
    let (scope, id) = at("/subscriptions/{S}/resourceGroups/RG/providers/slipway.authorization/ROLEASSIGNMENTS/x1");
    assert!(scope.ends_with("/resourcegroups/rg"), "{scope}");
    assert_eq!(id.as_deref(), Some("x1"));
    let (scope, _) = at(
        "/subscriptions/{S}/resourceGroups/rg/providers/Slipway.Example/virtualNetworks/v/providers/Slipway.Authorization/roleAssignments",
    );
    assert!(scope.ends_with("/virtualnetworks/v"), "{scope}");
    assert!(matches!(
        p("/subscriptions/bad/providers/Slipway.Authorization/roleAssignments"),
        Err(RouteError::BadSubscription(_))
    ));
    let permissions = |path: &str| match p(path) {
        Ok(Route::Permissions { scope }) => scope.as_str().to_string(),
        other => panic!("{path}: {other:?}"),
    };
    assert_eq!(permissions("/providers/Slipway.Authorization/permissions"), "/");
    assert!(
        permissions("/subscriptions/{S}/resourceGroups/RG/providers/Slipway.Authorization/Permissions")
            .ends_with("/resourcegroups/rg")
    );
}

#[test]
fn an_empty_parent_path_after_the_namespace_is_the_top_level_resource() {
    let by_parts = p("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A//things/n");
    assert_eq!(by_parts, p("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A/things/n"));
    assert!(matches!(by_parts, Ok(Route::Resource(_))));
    assert_eq!(p("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A/things//n"), Err(RouteError::NoMatch));
    assert_eq!(p("/subscriptions/{S}/resourceGroups/rg/providers//Ns.A/things/n"), Err(RouteError::NoMatch));
}

#[test]
fn rejects_other_paths() {
    for path in [
        "/",
        "/subscriptions/{S}/resourceGroups/rg/things",
        "/providers/Slipway.Authorization/roleAssignments/a/b",
        "/providers/Slipway.Authorization/permissions/a",
        "/providers/Slipway.Authorization/apiTokens/a/b",
        "/subscriptions//providers/Ns.A/t",
        "/foo/{S}/providers/Ns.A/t",
    ] {
        assert_eq!(p(path), Err(RouteError::NoMatch), "{path}");
    }
    assert!(matches!(
        p("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A/t/bad%3Aname"),
        Err(RouteError::BadName(_))
    ));
    assert!(matches!(p("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A/t/a:b"), Err(RouteError::BadName(_))));
    assert!(matches!(p("/subscriptions/{S}/resourceGroups/r!g/providers/Ns.A/t/n"), Err(RouteError::BadGroupName(_))));
}

#[test]
fn segments_are_percent_decoded_after_splitting() {
    assert_eq!(decode("x%281%29"), "x(1)");
    assert_eq!(decode("a%20b%2fc"), "a b/c");
    assert_eq!(decode("%e2%82%ac"), "€");
    for raw in ["100%", "%zz", "%4", "%ff"] {
        assert_eq!(decode(raw), raw, "not UTF-8 or no escape: kept");
    }
    let Ok(Route::Resource(id)) = p("/subscriptions/{S}/resourceGroups/rg%28a%29/providers/Ns.A/t/x%281%29%20y") else {
        panic!()
    };
    assert_eq!((id.resource_group.as_str(), id.name.as_str()), ("rg(a)", "x(1) y"));
    for bad in ["a%2Fb", "a%3Fb", "a%25b", "a%ffb", "tab%09"] {
        let path = format!("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A/t/{bad}");
        assert!(matches!(parse(&path), Err(RouteError::BadName(_))), "{bad}");
    }
    assert!(matches!(
        p("/subscriptions/{S}/resourceGroups/a%2Fb/providers/Ns.A/t/n"),
        Err(RouteError::BadGroupName(_))
    ));
    assert!(
        matches!(
            p("/subscriptions/{S}/resourceGroups/a%2Fb/providers/Slipway.Authorization/roleAssignments"),
            Err(RouteError::BadScope(_))
        ),
        "a decoded / never makes a deeper scope"
    );
    assert!(matches!(p("/%73ubscriptions/{S}"), Ok(Route::Subscription(_))));
}

#[test]
fn a_role_assignment_scope_has_one_spelling() {
    let authz = "providers/Slipway.Authorization/roleAssignments/00000000-0000-0000-0000-000000000001";
    let other = "22222222-2222-2222-2222-222222222222";
    for prefix in [
        format!("/subscriptions/{S}/../{other}"),
        format!("/subscriptions/{S}/resourceGroups/../../subscriptions/{other}"),
        format!("/subscriptions/{S}/%2e%2e/{other}"),
        format!("/subscriptions/{S}/resourceGroups/%2E%2E/%2e%2e/subscriptions/{other}"),
        format!("/subscriptions/{S}/./resourceGroups/rg"),
        format!("/subscriptions/{S}/resourceGroups/rg%2f..%2f.."),
        format!("/subscriptions/{S}/resourceGroups/rg%5c.."),
        format!("/subscriptions/{S}/resourceGroups/rg/providers/Slipway.Example"),
        format!("/subscriptions/{S}/resourceGroups/rg/providers/Slipway.Example/virtualNetworks"),
        format!("/subscriptions/{S}/resourceGroups/rg/providers/Slipway.Example/virtualNetworks/.."),
        format!("/subscriptions/{S}/other/x"),
        "/foo".into(),
    ] {
        let path = format!("{prefix}/{authz}");
        assert!(matches!(p(&path), Err(RouteError::BadScope(_))), "{path}: {:?}", p(&path));
    }
    let Ok(Route::RoleAssignments { scope, .. }) =
        p(&format!("/SUBSCRIPTIONS/{S}/resourcegroups/RG/providers/slipway.example/virtualNetworks/V/{authz}"))
    else {
        panic!()
    };
    let want = format!("/subscriptions/{S}/resourcegroups/rg/providers/slipway.example/virtualnetworks/v");
    assert_eq!(scope.as_str(), want.to_ascii_lowercase());
}

#[test]
fn matches_the_discovery_paths() {
    assert_eq!(
        p("/providers/Slipway.Example"),
        Ok(Route::Provider { subscription: None, namespace: "Slipway.Example".into() })
    );
    assert_eq!(
        p("/SUBSCRIPTIONS/{S}/Providers/Slipway.Example/"),
        Ok(Route::Provider { subscription: Some(S.into()), namespace: "Slipway.Example".into() })
    );
    assert_eq!(
        p("/providers/Slipway.Example/OPERATIONS"),
        Ok(Route::ProviderOperations { namespace: "Slipway.Example".into() })
    );
    assert_eq!(p("/Providers/"), Ok(Route::Providers { subscription: None }));
    assert_eq!(
        p("/subscriptions/{S}/providers/Slipway.Example/REGISTER"),
        Ok(Route::ProviderRegistration { subscription: S.into(), namespace: "Slipway.Example".into(), register: true })
    );
    assert_eq!(
        p("/subscriptions/{S}/providers/Slipway.Example/unregister"),
        Ok(Route::ProviderRegistration {
            subscription: S.into(),
            namespace: "Slipway.Example".into(),
            register: false
        })
    );
    assert_eq!(p("/subscriptions/{S}/PROVIDERS"), Ok(Route::Providers { subscription: Some(S.into()) }));
    assert!(matches!(p("/subscriptions/nope/providers/ns"), Err(RouteError::BadSubscription(_))));
    assert_eq!(p("/providers/Ns.A/other"), Err(RouteError::NoMatch));
    assert!(matches!(
        p("/providers/Slipway.Authorization/roleAssignments"),
        Ok(Route::RoleAssignments { id: None, .. })
    ));
}

#[test]
fn resource_names_follow_arms_common_rule() {
    for name in ["v1", "ends.", "a+b=c", "x(1)", &"n".repeat(260)] {
        let path = format!("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A/t/{name}");
        let Ok(Route::Resource(id)) = parse(&path) else { panic!("{name}") };
        assert_eq!(ArmId::read_stored(&id.to_string()), Some(id), "a stored id reads back");
    }
    let long = format!("/subscriptions/{S}/resourceGroups/rg/providers/Ns.A/t/{}", "n".repeat(261));
    assert!(matches!(parse(&long), Err(RouteError::BadName(_))));
    let old = ArmId::read_stored("/subscriptions/x/resourceGroups/rg/providers/Ns.A/t/n").expect("stored before GUIDs");
    assert_eq!((old.subscription.as_str(), old.name.as_str()), ("x", "n"));
    assert_eq!(ArmId::read_stored("/subscriptions/x/providers/Ns.A/t"), None);
}

#[test]
fn subscriptions_are_guids_in_every_route() {
    assert!(
        ids::is_guid(S)
            && ids::is_guid(&S.to_ascii_uppercase())
            && ids::is_guid("00000000-0000-0000-0000-000000000000")
    );
    let long = "s".repeat(20_000);
    for bad in [
        "s1",
        "..",
        "sub%0D%0AX-Injected:%201",
        &long,
        "{0b9d1f3e-52a4-4c38-9d7e-1f1b7a1c2d3e}",
        "0b9d1f3e-52a4-4c38-9d7e-1f1b7a1c2d3",
        "0b9d1f3e-52a4-4c38-9d7e-1f1b7a1c2d3e0",
        "0b9d1f3e+52a4-4c38-9d7e-1f1b7a1c2d3e",
        "0b9d1f3g-52a4-4c38-9d7e-1f1b7a1c2d3e",
    ] {
        for path in [
            "/subscriptions/{X}/resourceGroups/rg/providers/Ns.A/t/n",
            "/subscriptions/{X}/resourceGroups/rg/providers/Ns.A/t",
            "/subscriptions/{X}/providers/Ns.A/t",
            "/subscriptions/{X}/providers/Ns.A/locations/l/operationStatuses/i",
            "/subscriptions/{X}/providers/Ns.A/locations/l/operationResults/i",
            "/subscriptions/{X}/providers/Ns.A/locations/l/operationStatuses/i/cancel",
        ] {
            assert_eq!(
                parse(&path.replace("{X}", bad)),
                Err(RouteError::BadSubscription(decode(bad).into_owned())),
                "{path}"
            );
        }
    }
}

#[test]
fn the_overview_lists_and_api_tokens_have_routes_of_their_own() {
    let sub = || S.to_string();
    assert_eq!(p("/subscriptions/{S}/RESOURCEGROUPS"), Ok(Route::ResourceGroups { subscription: sub() }));
    assert_eq!(
        p("/subscriptions/{S}/resourceGroups/My-RG"),
        Ok(Route::ResourceGroup { subscription: sub(), name: "My-RG".into() })
    );
    assert_eq!(p("/subscriptions/{S}/resources"), Ok(Route::Resources { subscription: sub(), resource_group: None }));
    assert_eq!(
        p("/subscriptions/{S}/resourceGroups/rg/Resources"),
        Ok(Route::Resources { subscription: sub(), resource_group: Some("rg".into()) })
    );
    assert_eq!(p("/subscriptions/{S}/operationStatuses"), Ok(Route::Operations { subscription: sub() }));
    assert_eq!(p("/providers/slipway.authorization/APITOKENS"), Ok(Route::ApiTokens { id: None }));
    assert_eq!(p("/providers/Slipway.Authorization/apiTokens/0011"), Ok(Route::ApiTokens { id: Some("0011".into()) }));
    // Each keeps to the id grammar.
    assert_eq!(p("/subscriptions/not-a-guid/resources"), Err(RouteError::BadSubscription("not-a-guid".into())));
    assert!(matches!(p("/subscriptions/{S}/resourceGroups/a%2Fb/resources"), Err(RouteError::BadGroupName(_))));
    assert!(matches!(p("/subscriptions/{S}/resourceGroups/bad name."), Err(RouteError::BadGroupName(_))));
    for (path, want) in [
        ("/subscriptions/{S}/resourceGroups", "/subscriptions/{subscriptionId}/resourceGroups"),
        ("/subscriptions/{S}/resourceGroups/rg", "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}"),
        (
            "/subscriptions/{S}/resourceGroups/rg/resources",
            "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/resources",
        ),
        ("/subscriptions/{S}/operationStatuses", "/subscriptions/{subscriptionId}/operationStatuses"),
        ("/subscriptions/{S}/providers", "/subscriptions/{subscriptionId}/providers"),
        ("/providers", "/providers"),
        ("/providers/Slipway.Authorization/apiTokens/0011", "/providers/Slipway.Authorization/apiTokens/{tokenId}"),
    ] {
        assert_eq!(template(&path.replace("{S}", S)), want);
    }
}
