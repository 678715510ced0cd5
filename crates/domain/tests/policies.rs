//! The classic admission policies, decided as a write's change decides them
//! (`slipway_domain::policy_admission`): allowed locations, a required tag named by a
//! parameter, a tag inherited from the resource group, a size denied, `denyAction` on delete,
//! `DoNotEnforce`, an exemption that expires, `append`, `notScopes`, and Azure's order of
//! effects (a deny judges the request as `modify` left it).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use slipway_domain::Timestamp;
use slipway_domain::access::Scope;
use slipway_domain::admission::Rejection;
use slipway_domain::policy_admission::{Assignment, Definition, Effect, Exemption, Policies, Target};
use slipway_domain::policy_rule::Aliases;
use slipway_domain::resource::Spec;

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000001";
const TYPE: &str = "Slipway.Example/computeInstances";
const NOW: Timestamp = Timestamp(1_800_000_000_000);

fn aliases() -> Aliases {
    let mut a = Aliases::default();
    a.add_type(
        TYPE,
        Some(&json!({"properties": {"size": {"enum": ["small", "large"]}, "image": {}, "disks": {"items": {}}}})),
    );
    a
}

fn definition(name: &str, properties: Value) -> Definition {
    let id = format!("/providers/Microsoft.Authorization/policyDefinitions/{name}");
    Definition::parse(&id, &properties, &aliases()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn assign(name: &str, scope: &str, definition: &str, properties: Value) -> Arc<Assignment> {
    let scope = Scope::parse(scope).unwrap();
    let mut p = properties;
    p["policyDefinitionId"] = json!(format!("/providers/Microsoft.Authorization/policyDefinitions/{definition}"));
    let id = format!("{}/providers/Microsoft.Authorization/policyAssignments/{name}", scope.as_str());
    Assignment::parse(&id, scope, &p).unwrap_or_else(|e| panic!("{name}: {e}")).into()
}

struct Request {
    aliases: Aliases,
    group: &'static str,
}

impl Request {
    fn new() -> Request {
        Request { aliases: aliases(), group: "rg1" }
    }

    fn target(&self) -> (Target<'_>, String) {
        let id = format!("{SUB}/resourceGroups/{}/providers/{TYPE}/vm1", self.group);
        let target = Target {
            scope: Scope::parse(&id).unwrap(),
            id: "vm1-id",
            name: "vm1",
            full_name: "vm1",
            type_name: TYPE,
            kind: "ComputeInstance",
            is_group: false,
            resource_group: json!({"name": self.group, "location": "local", "tags": {"costCenter": "4711"}}),
            subscription: json!({"subscriptionId": "00000000-0000-0000-0000-000000000001"}),
            request: json!({}),
            aliases: &self.aliases,
        };
        (target, id)
    }

    fn write(&self, policies: &Policies, spec: &mut Spec, now: Timestamp) -> Result<Vec<(Effect, bool)>, Rejection> {
        let (target, _) = self.target();
        let findings = policies.admit_write(&target, spec, now)?;
        Ok(findings.iter().map(|f| (f.effect, f.enforced)).collect())
    }
}

fn spec(location: &str, size: &str, tags: &[(&str, &str)]) -> Spec {
    Spec {
        location: Some(location.into()),
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        properties: json!({"size": size, "image": "debian-12"}),
    }
}

fn allowed_locations() -> Definition {
    definition(
        "allowed-locations",
        json!({"displayName": "Allowed locations", "mode": "Indexed",
            "parameters": {"listOfAllowedLocations": {"type": "Array"}},
            "policyRule": {"if": {"not": {"field": "location", "in": "[parameters('listOfAllowedLocations')]"}},
                           "then": {"effect": "deny"}}}),
    )
}

fn require_tag() -> Definition {
    definition(
        "require-tag",
        json!({"parameters": {"tagName": {"type": "String"}, "effect": {"defaultValue": "Deny", "allowedValues": ["Deny", "Audit", "Disabled"]}},
            "policyRule": {"if": {"field": "[concat('tags[', parameters('tagName'), ']')]", "exists": "false"},
                           "then": {"effect": "[parameters('effect')]"}}}),
    )
}

fn denied_by(result: Result<Vec<(Effect, bool)>, Rejection>) -> String {
    match result {
        Err(Rejection::PolicyDenied(d)) => d.assignment_id.rsplit('/').next().unwrap().to_string(),
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[test]
fn allowed_locations_deny_the_others() {
    let r = Request::new();
    let policies = Policies {
        definitions: vec![allowed_locations().into()],
        assignments: vec![assign(
            "locations",
            SUB,
            "allowed-locations",
            json!({"parameters": {"listOfAllowedLocations": {"value": ["local"]}}}),
        )],
        exemptions: vec![],
    };
    assert_eq!(r.write(&policies, &mut spec("local", "small", &[]), NOW), Ok(vec![]));
    let refused = r.write(&policies, &mut spec("westeurope", "small", &[]), NOW);
    let Err(Rejection::PolicyDenied(d)) = refused else { panic!("{refused:?}") };
    assert_eq!(d.definition_name.as_deref(), Some("Allowed locations"));
    assert!(d.to_string().contains("location"), "{d}");
    assert_eq!(d.evaluated[0].value, json!("westeurope"));
}

#[test]
fn a_required_tag_is_named_by_a_parameter_and_its_effect_too() {
    let def = require_tag();
    let r = Request::new();
    let with = |effect: Option<&str>| {
        let mut parameters = json!({"tagName": {"value": "costCenter"}});
        if let Some(e) = effect {
            parameters["effect"] = json!({"value": e});
        }
        Policies {
            definitions: vec![def.clone().into()],
            assignments: vec![assign("cc", SUB, "require-tag", json!({"parameters": parameters}))],
            exemptions: vec![],
        }
    };
    assert_eq!(denied_by(r.write(&with(None), &mut spec("local", "small", &[]), NOW)), "cc");
    assert_eq!(
        r.write(&with(None), &mut spec("local", "small", &[("CostCenter", "1")]), NOW),
        Ok(vec![]),
        "tag names match without regard to case"
    );
    assert_eq!(r.write(&with(Some("Audit")), &mut spec("local", "small", &[]), NOW), Ok(vec![(Effect::Audit, true)]));
    assert_eq!(r.write(&with(Some("Disabled")), &mut spec("local", "small", &[]), NOW), Ok(vec![]));
    let (target, _) = r.target();
    let not_allowed = with(Some("Modify")).admit_write(&target, &mut spec("local", "small", &[]), NOW);
    assert!(
        matches!(not_allowed, Err(Rejection::Invalid(ref e)) if e.code == "PolicyEvaluationFailed"),
        "{not_allowed:?}"
    );
}

#[test]
fn a_tag_is_inherited_from_the_group_before_deny_judges_the_request() {
    let inherit = definition(
        "inherit-cost-center",
        json!({"mode": "Indexed", "policyRule": {
        "if": {"allOf": [
            {"field": "tags['costCenter']", "exists": "false"},
            {"value": "[resourceGroup().tags['costCenter']]", "notEquals": ""}
        ]},
        "then": {"effect": "modify", "details": {
            "roleDefinitionIds": [],
            "operations": [{"operation": "add", "field": "tags['costCenter']", "value": "[resourceGroup().tags['costCenter']]"}]
        }}}}),
    );
    let r = Request::new();
    let policies = Policies {
        definitions: vec![inherit.into(), require_tag_deny().into()],
        assignments: vec![
            assign("require", SUB, "require-cost-center", json!({})),
            assign("inherit", SUB, "inherit-cost-center", json!({})),
        ],
        exemptions: vec![],
    };
    let mut s = spec("local", "small", &[]);
    assert_eq!(r.write(&policies, &mut s, NOW), Ok(vec![(Effect::Modify, true)]), "modified, so not denied");
    assert_eq!(s.tags.get("costCenter").map(String::as_str), Some("4711"));
    let mut own = spec("local", "small", &[("costCenter", "1")]);
    assert_eq!(r.write(&policies, &mut own, NOW), Ok(vec![]));
    assert_eq!(own.tags["costCenter"], "1", "add keeps a tag that is there");
}

fn require_tag_deny() -> Definition {
    definition(
        "require-cost-center",
        json!({"policyRule": {"if": {"field": "tags['costCenter']", "exists": "false"}, "then": {"effect": "deny"}}}),
    )
}

#[test]
fn a_size_is_denied_except_where_not_assigned_or_exempted_until_the_exemption_expires() {
    let deny_large = definition(
        "deny-large",
        json!({"policyRule": {"if": {"allOf": [
            {"field": "type", "equals": TYPE},
            {"field": "Slipway.Example/computeInstances/size", "equals": "large"}
        ]}, "then": {"effect": "deny"}}}),
    );
    let assignment =
        assign("no-large", SUB, "deny-large", json!({"notScopes": [format!("{SUB}/resourceGroups/sandbox")]}));
    let exemption = Exemption::parse(
        "ex",
        Scope::parse(&format!("{SUB}/resourceGroups/rg1")).unwrap(),
        &json!({"policyAssignmentId": assignment.id, "exemptionCategory": "Waiver", "expiresOn": "2027-01-15T00:00:00Z"}),
    )
    .unwrap();
    let mut r = Request::new();
    let mut policies =
        Policies { definitions: vec![deny_large.into()], assignments: vec![assignment], exemptions: vec![] };
    assert_eq!(denied_by(r.write(&policies, &mut spec("local", "large", &[]), NOW)), "no-large");
    assert_eq!(r.write(&policies, &mut spec("local", "small", &[]), NOW), Ok(vec![]));
    policies.exemptions.push(exemption.clone());
    let before = Timestamp::parse_rfc3339("2027-01-14T23:59:59Z").unwrap();
    assert_eq!(r.write(&policies, &mut spec("local", "large", &[]), before), Ok(vec![]), "exempted");
    let after = exemption.expires_on.unwrap().add(Duration::from_secs(1));
    assert_eq!(
        denied_by(r.write(&policies, &mut spec("local", "large", &[]), after)),
        "no-large",
        "the exemption expired"
    );
    r.group = "sandbox";
    assert_eq!(r.write(&policies, &mut spec("local", "large", &[]), after), Ok(vec![]), "a notScope");
}

#[test]
fn do_not_enforce_records_what_it_would_have_done() {
    let r = Request::new();
    let policies = Policies {
        definitions: vec![allowed_locations().into(), require_tag_deny().into()],
        assignments: vec![
            assign(
                "locations",
                SUB,
                "allowed-locations",
                json!({"enforcementMode": "DoNotEnforce", "parameters": {"listOfAllowedLocations": {"value": ["local"]}}}),
            ),
            assign("cc", SUB, "require-cost-center", json!({"enforcementMode": "DoNotEnforce"})),
        ],
        exemptions: vec![],
    };
    assert_eq!(
        r.write(&policies, &mut spec("westeurope", "small", &[]), NOW),
        Ok(vec![(Effect::Deny, false), (Effect::Deny, false)])
    );
}

#[test]
fn deny_action_refuses_the_delete_only() {
    let protect = definition(
        "protect-prod",
        json!({"policyRule": {"if": {"field": "tags['env']", "equals": "prod"},
            "then": {"effect": "denyAction", "details": {"actionNames": ["delete"]}}}}),
    );
    let r = Request::new();
    let policies = Policies {
        definitions: vec![protect.into()],
        assignments: vec![assign("protect", SUB, "protect-prod", json!({}))],
        exemptions: vec![],
    };
    let (target, _) = r.target();
    let prod = spec("local", "small", &[("env", "prod")]);
    assert_eq!(r.write(&policies, &mut prod.clone(), NOW), Ok(vec![]), "writes pass");
    assert!(
        matches!(policies.admit_delete(&target, &prod, NOW), Err(Rejection::PolicyDenied(ref d)) if d.effect == Effect::DenyAction)
    );
    assert_eq!(policies.admit_delete(&target, &spec("local", "small", &[("env", "dev")]), NOW), Ok(()));
}

#[test]
fn append_adds_what_is_missing() {
    let append = definition(
        "default-image",
        json!({"policyRule": {"if": {"field": "Slipway.Example/computeInstances/image", "exists": "false"},
            "then": {"effect": "append", "details": [{"field": "Slipway.Example/computeInstances/image", "value": "debian-12"},
                                                    {"field": "Slipway.Example/computeInstances/disks[*]", "value": [{"sizeGb": 10}]}]}}}),
    );
    let r = Request::new();
    let policies = Policies {
        definitions: vec![append.into()],
        assignments: vec![assign("image", SUB, "default-image", json!({}))],
        exemptions: vec![],
    };
    let mut s = spec("local", "small", &[]);
    s.properties = json!({"size": "small"});
    assert_eq!(r.write(&policies, &mut s, NOW), Ok(vec![(Effect::Append, true)]));
    assert_eq!(s.properties, json!({"size": "small", "image": "debian-12", "disks": [{"sizeGb": 10}]}));
}

#[test]
fn definitions_and_assignments_that_cannot_be_used_are_refused() {
    let a = aliases();
    let bad_definitions = [
        json!({}),
        json!({"mode": "Partial", "policyRule": {"if": {"field": "location", "equals": "x"}, "then": {"effect": "deny"}}}),
        json!({"policyRule": {"if": {"field": "location", "equals": "x"}, "then": {"effect": "deployIfNotExists"}}}),
        json!({"parameters": {"p": {"allowedValues": "x"}}, "policyRule": {"if": {"field": "location", "equals": "x"}, "then": {"effect": "deny"}}}),
    ];
    for d in bad_definitions {
        assert!(Definition::parse("d", &d, &a).is_err(), "{d}");
    }
    let scope = Scope::parse(SUB).unwrap();
    for p in [
        json!({}),
        json!({"policyDefinitionId": "x", "enforcementMode": "Sometimes"}),
        json!({"policyDefinitionId": "x", "notScopes": ["not a scope"]}),
        json!({"policyDefinitionId": "x", "parameters": {"p": "no value wrapper"}}),
    ] {
        assert!(Assignment::parse("a", scope.clone(), &p).is_err(), "{p}");
    }
    for p in [
        json!({"policyAssignmentId": "a"}),
        json!({"policyAssignmentId": "a", "exemptionCategory": "Waiver", "expiresOn": "soon"}),
    ] {
        assert!(Exemption::parse("e", scope.clone(), &p).is_err(), "{p}");
    }
}
