use serde_json::json;

use super::*;

fn registry() -> TypeRegistry {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["cidr"],
        "additionalProperties": false,
        "properties": {"cidr": {"$ref": "#/$defs/cidr"}},
        "$defs": {"cidr": {"type": "string"}},
    });
    let rule = slipway_types::NameRule::new("Ns.A/things", 24, Some("[a-z][a-z0-9-]*")).unwrap();
    TypeRegistry::new([
        ResourceType::new("Ns.A", "things", "Thing", vec!["2025-01-01".into(), "2025-06-01".into()], Some(&schema))
            .unwrap()
            .with_name_rule(rule),
        ResourceType::new("Ns.A", "others", "Other", vec!["2024-01-01".into()], None).unwrap(),
        ResourceType::new("Ns.B", "things", "Thing", vec!["2025-01-01".into()], None).unwrap(),
    ])
}

fn doc(auth: bool) -> Value {
    build(&registry(), &operation::Setting { auth, limited: auth, callbacks: "`https` URIs to any host".into() })
}

/// Every `$ref` in `v`, with where it is.
fn refs<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.push((at.clone(), r));
            }
            for (k, v) in m {
                refs(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| refs(v, format!("{at}/{i}"), out)),
        _ => {}
    }
}

fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            out.push((path.clone(), method.clone(), op));
        }
    }
    out
}

#[test]
fn every_reference_resolves_and_every_operation_is_named_once() {
    for auth in [true, false] {
        let doc = doc(auth);
        let mut found = Vec::new();
        refs(&doc, String::new(), &mut found);
        assert!(found.len() > 100);
        for (at, r) in found {
            let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("{at}: {r} is not local"));
            assert!(doc.pointer(pointer).is_some(), "{at}: {r} does not resolve");
        }
        let mut ids: Vec<&str> =
            operations(&doc).iter().map(|(_, _, op)| op["operationId"].as_str().unwrap()).collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "operation ids are unique");
    }
}

#[test]
fn every_path_parameter_is_declared() {
    let doc = doc(true);
    for (path, method, op) in operations(&doc) {
        let declared: Vec<&str> = op["parameters"]
            .as_array()
            .map(|a| a.iter().filter(|p| p["in"] == "path").map(|p| p["name"].as_str().unwrap()).collect())
            .unwrap_or_default();
        let template: Vec<&str> = path.split('{').skip(1).map(|s| s.split('}').next().unwrap()).collect();
        assert_eq!(declared, template, "{method} {path}");
        if !path.starts_with("/healthz") && !path.starts_with("/readyz") && path != "/openapi.json" {
            assert!(
                op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "api-version" && p["required"] == true),
                "{method} {path}"
            );
        }
    }
}

#[test]
fn the_configuration_shows_in_paths_versions_names_and_schemas() {
    let doc = doc(true);
    let resource =
        "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Ns.A/things/{resourceName}";
    let item = &doc["paths"][resource];
    let version = |op: &Value| {
        op["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "api-version").unwrap()["schema"]["enum"]
            .clone()
    };
    assert_eq!(version(&item["get"]), json!(["2025-01-01", "2025-06-01"]));
    let name = |op: &Value| {
        op["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "resourceName").unwrap()["schema"].clone()
    };
    assert_eq!(name(&item["put"])["pattern"], "^(?:[a-z][a-z0-9-]*)$", "PUT checks the type's own rule");
    assert_eq!(name(&item["put"])["maxLength"], 24);
    assert_eq!(name(&item["get"])["maxLength"], 260, "other methods only ARM's rule");
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["Ns.A.things.Properties"]["properties"]["cidr"]["$ref"],
        "#/components/schemas/Ns.A.things.Properties/$defs/cidr"
    );
    assert_eq!(schemas["Ns.A.things.Put"]["required"], json!(["location", "properties"]));
    assert_eq!(schemas["Ns.A.others.Put"]["required"], json!(["location"]));
    let codes = |op: &Value| op["responses"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        codes(&item["put"]),
        ["200", "201", "400", "401", "403", "408", "409", "412", "413", "415", "429", "431", "500", "503"]
    );
    assert_eq!(codes(&item["delete"]), ["202", "204", "400", "401", "403", "409", "412", "429", "431", "500", "503"]);
    assert_eq!(
        item["put"]["responses"]["201"]["headers"]["Azure-AsyncOperation"]["$ref"],
        "#/components/headers/AzureAsyncOperation"
    );
    let ops = "/subscriptions/{subscriptionId}/providers/Ns.A/locations/{location}/operationStatuses/{operationId}";
    assert_eq!(
        version(&doc["paths"][ops]["get"]),
        json!(["2024-01-01", "2025-01-01", "2025-06-01"]),
        "any type's version"
    );
    assert!(doc["paths"][format!("{ops}/cancel")]["post"]["x-slipway-extension"].is_string());
    for path in ["/providers/Ns.A", "/providers/Ns.B/operations", "/subscriptions/{subscriptionId}/providers/Ns.B"] {
        assert!(doc["paths"][path]["get"].is_object(), "{path}");
    }
    assert!(doc["paths"]["/providers/Slipway.Authorization/roleAssignments/{roleAssignmentName}"]["put"].is_object());
    assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]));
}

#[test]
fn security_follows_authentication() {
    let on = doc(true);
    assert_eq!(on["components"]["securitySchemes"]["bearer"]["bearerFormat"], "JWT");
    assert_eq!(on["security"], json!([{"bearer": []}, {"apiToken": []}]));
    let unauthorized = &on["components"]["responses"]["Unauthorized"];
    assert!(unauthorized["headers"]["WWW-Authenticate"].is_object());
    let off = doc(false);
    assert!(off.get("security").is_none() && off["components"].get("securitySchemes").is_none());
    let text = off.to_string();
    for absent in ["\"401\"", "\"403\"", "\"429\"", "Unauthorized\""] {
        assert!(!text.contains(absent), "{absent} without authentication");
    }
}
