//! Tables for every operator, the logical operators, counts, fields and template functions,
//! after the examples of Azure Policy's documentation (definition structure: policy rule,
//! conditions, fields, count, template functions).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

const TYPE: &str = "Slipway.Example/computeInstances";

fn aliases() -> Aliases {
    let schema = json!({"properties": {
        "size": {"enum": ["small", "large"]},
        "image": {"type": "string"},
        "cores": {"type": "integer"},
        "securityGroupIds": {"type": "array", "items": {"type": "string"}},
        "disks": {"type": "array", "items": {"properties": {"sizeGb": {"type": "integer"}, "kind": {"type": "string"}}}},
        "network": {"properties": {"public": {"type": "boolean"}}},
    }});
    let mut a = Aliases::default();
    a.add_type(TYPE, Some(&schema));
    a
}

struct World {
    tags: BTreeMap<String, String>,
    properties: Value,
    parameters: serde_json::Map<String, Value>,
    aliases: Aliases,
}

impl World {
    fn new() -> World {
        World {
            tags: [("costCenter".to_string(), "1234".to_string()), ("env".to_string(), "Prod".to_string())]
                .into_iter()
                .collect(),
            properties: json!({
                "size": "large",
                "image": "debian-12",
                "cores": 8,
                "securityGroupIds": ["sg-a", "sg-b"],
                "disks": [{"sizeGb": 10, "kind": "ssd"}, {"sizeGb": 100, "kind": "hdd"}],
                "network": {"public": false},
            }),
            parameters: json!({"allowed": ["westeurope", "northeurope"], "tagName": "costCenter", "effect": "Deny"})
                .as_object()
                .cloned()
                .unwrap(),
            aliases: aliases(),
        }
    }

    fn subject(&self) -> Subject<'_> {
        Subject {
            id: "/subscriptions/s/resourceGroups/rg1/providers/Slipway.Example/computeInstances/vm1",
            name: "vm1",
            full_name: "vm1",
            type_name: TYPE,
            kind: "",
            location: Some("westeurope"),
            tags: &self.tags,
            properties: &self.properties,
            parameters: &self.parameters,
            resource_group: json!({"name": "rg1", "location": "northeurope", "tags": {"costCenter": "4711"}}),
            subscription: json!({"subscriptionId": "s", "displayName": "Team A"}),
            request: json!({"apiVersion": "2025-06-01"}),
            aliases: &self.aliases,
        }
    }

    fn holds(&self, condition: Value) -> bool {
        let rule = json!({"if": condition, "then": {"effect": "deny"}});
        let rule = PolicyRule::parse(&rule, &self.aliases).unwrap_or_else(|e| panic!("{condition}: {e}"));
        rule.matches(&self.subject()).unwrap_or_else(|e| panic!("{condition}: {e}")).0
    }
}

fn alias(path: &str) -> String {
    format!("{TYPE}/{path}")
}

#[test]
fn every_operator_on_present_and_absent_fields() {
    let w = World::new();
    let size = alias("size");
    let cases: Vec<(Value, bool)> = vec![
        (json!({"field": "location", "equals": "WestEurope"}), true),
        (json!({"field": "location", "notEquals": "westeurope"}), false),
        (json!({"field": "name", "like": "vm*"}), true),
        (json!({"field": "name", "like": "*m1"}), true),
        (json!({"field": "name", "notLike": "web-*"}), true),
        (json!({"field": "tags['costCenter']", "match": "####"}), true),
        (json!({"field": "tags['env']", "match": "prod"}), false),
        (json!({"field": "tags['env']", "matchInsensitively": "prod"}), true),
        (json!({"field": "tags['env']", "notMatch": "????"}), false),
        (json!({"field": "tags['env']", "notMatchInsensitively": "test"}), true),
        (json!({"field": alias("image"), "contains": "DEBIAN"}), true),
        (json!({"field": alias("image"), "notContains": "ubuntu"}), true),
        (json!({"field": "location", "in": ["northeurope", "WESTEUROPE"]}), true),
        (json!({"field": "location", "notIn": "[parameters('allowed')]"}), false),
        (json!({"field": "tags", "containsKey": "COSTCENTER"}), true),
        (json!({"field": "tags", "notContainsKey": "owner"}), true),
        (json!({"field": alias("cores"), "less": 16}), true),
        (json!({"field": alias("cores"), "lessOrEquals": 8}), true),
        (json!({"field": alias("cores"), "greater": "8"}), false),
        (json!({"field": alias("cores"), "greaterOrEquals": 8}), true),
        (json!({"field": size.clone(), "exists": "true"}), true),
        (json!({"field": "tags['owner']", "exists": false}), true),
        // An absent field matches only the negative operators.
        (json!({"field": "tags['owner']", "equals": "ops"}), false),
        (json!({"field": "tags['owner']", "notEquals": "ops"}), true),
        (json!({"field": "tags['owner']", "in": ["ops"]}), false),
        (json!({"field": "tags['owner']", "notIn": ["ops"]}), true),
        (json!({"field": "tags['owner']", "like": "*"}), false),
        (json!({"field": "tags['owner']", "notLike": "o*"}), true),
        // Numbers and booleans equal their text.
        (json!({"field": alias("network.public"), "equals": "false"}), true),
        (json!({"field": alias("cores"), "equals": "8"}), true),
    ];
    for (condition, want) in cases {
        assert_eq!(w.holds(condition.clone()), want, "{condition}");
    }
}

#[test]
fn logical_operators_nest() {
    let w = World::new();
    let location = json!({"field": "location", "equals": "westeurope"});
    let tagged = json!({"field": "tags['owner']", "exists": "true"});
    assert!(!w.holds(json!({"allOf": [location.clone(), tagged.clone()]})));
    assert!(w.holds(json!({"anyOf": [location.clone(), tagged.clone()]})));
    assert!(w.holds(json!({"allOf": [location, {"not": tagged}]})));
}

#[test]
fn arrays_and_counts() {
    let w = World::new();
    // Outside a count, an array alias's test holds when it holds for every element.
    assert!(w.holds(json!({"field": alias("disks[*].sizeGb"), "greaterOrEquals": 10})));
    assert!(!w.holds(json!({"field": alias("disks[*].sizeGb"), "greater": 10})));
    assert!(w.holds(json!({"field": alias("securityGroupIds[*]"), "like": "sg-*"})));
    // Counts: all elements, and those a `where` keeps, read through the same alias.
    assert!(w.holds(json!({"count": {"field": alias("disks[*]")}, "equals": 2})));
    let big = json!({"count": {"field": alias("disks[*]"), "where": {"field": alias("disks[*].sizeGb"), "greater": 50}}, "equals": 1});
    assert!(w.holds(big));
    let hdd = json!({"count": {"field": alias("disks[*]"), "where": {"allOf": [
        {"field": alias("disks[*].kind"), "equals": "HDD"},
        {"field": "location", "equals": "westeurope"}
    ]}}, "greater": 0});
    assert!(w.holds(hdd));
}

#[test]
fn template_functions() {
    let w = World::new();
    let cases: Vec<(Value, bool)> = vec![
        (json!({"field": "[concat('tags[', parameters('tagName'), ']')]", "exists": "true"}), true),
        (json!({"value": "[resourceGroup().location]", "equals": "northeurope"}), true),
        (json!({"value": "[resourceGroup().tags['costCenter']]", "equals": "4711"}), true),
        (json!({"value": "[subscription().displayName]", "equals": "team a"}), true),
        (json!({"value": "[concat(resourceGroup().name, '-', field('name'))]", "equals": "rg1-vm1"}), true),
        (json!({"value": "[toUpper(field('location'))]", "equals": "WESTEUROPE"}), true),
        (json!({"value": "[field('tags')[parameters('tagName')]]", "equals": "1234"}), true),
        (
            json!({"value": "[if(equals(field(concat('Slipway.Example/computeInstances/', 'size')), 'large'), 'big', 'small')]", "equals": "big"}),
            true,
        ),
        (json!({"value": "[empty(field('tags[owner]'))]", "equals": true}), true),
        (json!({"value": "[length(field('Slipway.Example/computeInstances/securityGroupIds'))]", "equals": 2}), true),
        (json!({"value": "[requestContext().apiVersion]", "equals": "2025-06-01"}), true),
        (json!({"value": "[[not an expression]", "equals": "[[not an expression]"}), true),
    ];
    for (condition, want) in cases {
        assert_eq!(w.holds(condition.clone()), want, "{condition}");
    }
}

#[test]
fn the_effect_may_come_from_a_parameter_and_is_reported_with_what_was_evaluated() {
    let w = World::new();
    let rule = json!({"if": {"allOf": [
        {"field": "type", "equals": TYPE},
        {"field": "location", "notIn": ["northeurope"]}
    ]}, "then": {"effect": "[parameters('effect')]"}});
    let rule = PolicyRule::parse(&rule, &w.aliases).unwrap();
    assert_eq!(rule.effect(&w.subject()).unwrap(), "deny");
    let (hit, log) = rule.matches(&w.subject()).unwrap();
    assert!(hit);
    let evaluated = evaluated_expressions(&log);
    assert_eq!(evaluated[1]["expression"], "location");
    assert_eq!(evaluated[1]["operator"], "notIn");
    assert_eq!(evaluated[1]["expressionValue"], "westeurope");
    assert_eq!(evaluated[1]["result"], "True");
    assert!(describe(&log).contains("location notIn [\"northeurope\"]"), "{}", describe(&log));
}

#[test]
fn rules_that_cannot_be_used_are_refused_when_written() {
    let a = aliases();
    for bad in [
        json!({"if": {"field": "Slipway.Example/computeInstances/nope", "equals": 1}, "then": {"effect": "deny"}}),
        json!({"if": {"field": "location", "equals": "x", "in": ["y"]}, "then": {"effect": "deny"}}),
        json!({"if": {"field": "location"}, "then": {"effect": "deny"}}),
        json!({"if": {"value": "[utcNow()]", "equals": "x"}, "then": {"effect": "deny"}}),
        json!({"if": {"value": "[concat('a']", "equals": "x"}, "then": {"effect": "deny"}}),
        json!({"if": {"count": {"value": [1, 2]}, "equals": 2}, "then": {"effect": "deny"}}),
        json!({"if": {"count": {"field": "Slipway.Example/computeInstances/size"}, "equals": 2}, "then": {"effect": "deny"}}),
        json!({"if": {"field": "location", "equals": "x"}}),
        json!({"if": {"value": "[field('Slipway.Example/computeInstances/nope')]", "equals": 1}, "then": {"effect": "deny"}}),
    ] {
        assert!(PolicyRule::parse(&bad, &a).is_err(), "{bad}");
    }
}

#[test]
fn aliases_follow_the_schema() {
    let a = aliases();
    let names: Vec<&str> = a.names().collect();
    for want in [
        "slipway.example/computeinstances/size",
        "slipway.example/computeinstances/disks[*]",
        "slipway.example/computeinstances/disks[*].sizegb",
        "slipway.example/computeinstances/network.public",
        "slipway.example/computeinstances/securitygroupids[*]",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
}
