//! Admission policy end to end with the example playbooks (docs/governance.md#admission-policy):
//! a platform definition from the configuration and a subscription's own, assigned at a
//! subscription and a group; the classic policies — allowed locations, a tag inherited from
//! the group, a size denied with an exemption, `denyAction` on delete, an audit listed as a
//! policy state, `DoNotEnforce` — and the precise errors of definitions, assignments and
//! exemptions that cannot be used.

use crate::common::{SUB, TestServer, rid};
use serde_json::{Value, json};

const POLICY_VERSION: &str = "api-version=2023-04-01";

const ALLOWED_LOCATIONS: &str = r#"{"properties": {
  "displayName": "Allowed locations",
  "mode": "Indexed",
  "parameters": {"listOfAllowedLocations": {"type": "Array"}},
  "policyRule": {"if": {"not": {"field": "location", "in": "[parameters('listOfAllowedLocations')]"}},
                 "then": {"effect": "deny"}}
}}"#;

fn sub_path(tail: &str) -> String {
    format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/{tail}")
}

fn group_path(group: &str, tail: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{group}/providers/Microsoft.Authorization/{tail}")
}

async fn call(s: &TestServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    s.call_at(method, path, POLICY_VERSION, body).await
}

async fn put_ok(s: &TestServer, path: &str, body: Value) -> Value {
    let (code, answer) = call(s, "PUT", path, Some(body)).await;
    assert!(code == 200 || code == 201, "{path}: {code} {answer}");
    answer
}

fn vnet(location: &str, tags: Value) -> Value {
    json!({"location": location, "tags": tags, "properties": {"addressSpace": "10.0.0.0/16"}})
}

fn assert_denied(answer: &(u16, Value), assignment: &str) -> Value {
    let (code, e) = answer;
    assert_eq!((*code, e["error"]["code"].as_str()), (403, Some("RequestDisallowedByPolicy")), "{e}");
    let violation = &e["error"]["additionalInfo"][0];
    assert_eq!(violation["type"], "PolicyViolation", "{e}");
    assert_eq!(violation["info"]["policyAssignmentName"], assignment, "{e}");
    violation["info"].clone()
}

async fn start() -> TestServer {
    TestServer::start_full("", "", "", |dir| {
        std::fs::write(dir.join("allowed-locations.json"), ALLOWED_LOCATIONS).unwrap();
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_classic_policies_decide_in_the_write() {
    let s = {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("allowed-locations.json"), ALLOWED_LOCATIONS).unwrap();
        let config = crate::common::config_text(dir.path(), "");
        let text = format!(
            "{config}\n[[policy.definitions]]\nname = \"allowed-locations\"\nfile = \"{}\"\n",
            dir.path().join("allowed-locations.json").display()
        );
        TestServer::start_text(dir, &text).await
    };

    // The platform's definition, from the configuration, assigned to the subscription.
    let (code, platform) = call(&s, "GET", "/providers/Microsoft.Authorization/policyDefinitions", None).await;
    assert_eq!((code, platform["value"][0]["properties"]["policyType"].as_str()), (200, Some("BuiltIn")), "{platform}");
    let allowed = json!({"properties": {
        "policyDefinitionId": "/providers/Microsoft.Authorization/policyDefinitions/allowed-locations",
        "parameters": {"listOfAllowedLocations": {"value": ["local"]}}}});
    put_ok(&s, &sub_path("policyAssignments/locations"), allowed).await;
    let denied = s.write("PUT", &rid("virtualNetworks", "far"), Some(vnet("westeurope", json!({})))).await;
    let info = assert_denied(&denied, "locations");
    assert_eq!(info["policyDefinitionDisplayName"], "Allowed locations");
    assert_eq!(info["evaluationDetails"]["evaluatedExpressions"][0]["expressionValue"], "westeurope", "{info}");
    assert_eq!(s.get_json(&rid("virtualNetworks", "far")).await.0, 404, "nothing recorded");
    assert_eq!(s.write("PUT", &rid("virtualNetworks", "near"), Some(vnet("local", json!({})))).await.0, 201);

    // A subscription's own definition: its groups' resources inherit the group's cost center.
    let inherit = json!({"properties": {"mode": "Indexed", "policyRule": {
        "if": {"allOf": [{"field": "tags['costCenter']", "exists": "false"},
                         {"value": "[resourceGroup().tags['costCenter']]", "notEquals": ""}]},
        "then": {"effect": "modify", "details": {"roleDefinitionIds": [], "operations": [
            {"operation": "add", "field": "tags['costCenter']", "value": "[resourceGroup().tags['costCenter']]"}]}}}}});
    let created = put_ok(&s, &sub_path("policyDefinitions/inherit-cost-center"), inherit).await;
    assert_eq!(created["properties"]["policyType"], "Custom");
    let assignment = json!({"properties": {"policyDefinitionId": created["id"]}});
    put_ok(&s, &group_path("rg1", "policyAssignments/inherit"), assignment).await;
    let tags = json!({"tags": {"costCenter": "4711"}});
    let (code, _) = s
        .call_at("PATCH", &format!("/subscriptions/{SUB}/resourceGroups/rg1"), "api-version=2025-04-01", Some(tags))
        .await;
    assert_eq!(code, 200);
    s.write("PUT", &rid("virtualNetworks", "tagged"), Some(vnet("local", json!({"owner": "ops"})))).await;
    let (_, tagged) = s.get_json(&rid("virtualNetworks", "tagged")).await;
    assert_eq!(tagged["tags"], json!({"costCenter": "4711", "owner": "ops"}), "inherited: {tagged}");
    s.write("PATCH", &rid("virtualNetworks", "near"), Some(json!({"tags": {"team": "a"}}))).await;
    let (_, near) = s.get_json(&rid("virtualNetworks", "near")).await;
    assert_eq!(near["tags"]["costCenter"], "4711", "a PATCH is judged too: {near}");

    // A size denied, but in a group exempted until next year; not in one whose exemption expired.
    let deny_large = json!({"properties": {"policyRule": {
        "if": {"field": "Slipway.Example/computeInstances/size", "equals": "large"}, "then": {"effect": "deny"}}}});
    put_ok(&s, &sub_path("policyDefinitions/deny-large"), deny_large).await;
    let id = format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/policyDefinitions/deny-large");
    let no_large =
        put_ok(&s, &sub_path("policyAssignments/no-large"), json!({"properties": {"policyDefinitionId": id}})).await;
    let large = json!({"location": "local", "properties": {"size": "large", "image": "debian-12"}});
    let in_group =
        |g: &str| rid("computeInstances", "big").replace("/resourceGroups/rg1/", &format!("/resourceGroups/{g}/"));
    assert_denied(&s.write("PUT", &in_group("rg1"), Some(large.clone())).await, "no-large");
    for (g, until) in [("rg2", "2099-01-01T00:00:00Z"), ("rg3", "2020-01-01T00:00:00Z")] {
        let network = rid("virtualNetworks", g).replace("/resourceGroups/rg1/", &format!("/resourceGroups/{g}/"));
        s.write("PUT", &network, Some(vnet("local", json!({})))).await;
        let waiver = json!({"properties": {"policyAssignmentId": no_large["id"], "exemptionCategory": "Waiver", "expiresOn": until}});
        put_ok(&s, &group_path(g, "policyExemptions/big-ok"), waiver).await;
    }
    assert_eq!(s.write("PUT", &in_group("rg2"), Some(large.clone())).await.0, 201, "exempted");
    assert_denied(&s.write("PUT", &in_group("rg3"), Some(large)).await, "no-large");

    // denyAction: a production network cannot be deleted; others can.
    let protect = json!({"properties": {"policyRule": {"if": {"field": "tags['env']", "equals": "prod"},
        "then": {"effect": "denyAction", "details": {"actionNames": ["delete"]}}}}});
    put_ok(&s, &sub_path("policyDefinitions/protect-prod"), protect).await;
    let id = format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/policyDefinitions/protect-prod");
    put_ok(&s, &sub_path("policyAssignments/protect"), json!({"properties": {"policyDefinitionId": id}})).await;
    s.write("PUT", &rid("virtualNetworks", "prod"), Some(vnet("local", json!({"env": "prod"})))).await;
    assert_denied(&s.write("DELETE", &rid("virtualNetworks", "prod"), None).await, "protect");
    assert_eq!(s.write("DELETE", &rid("virtualNetworks", "tagged"), None).await.0, 202);

    // A what-if lists what the guardrails would do, and refuses nothing.
    let far = format!("{}/whatIf", rid("virtualNetworks", "far2"));
    let r = s.http.post(s.url(&far)).json(&vnet("westeurope", json!({}))).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let predicted: Value = r.json().await.unwrap();
    let verdicts: Vec<(&str, &str)> = predicted["properties"]["guardrails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["id"].as_str().unwrap().rsplit('/').next().unwrap(), g["effect"].as_str().unwrap()))
        .collect();
    assert_eq!(verdicts, vec![("inherit", "modify"), ("locations", "deny")], "{predicted}");
    assert_eq!(
        predicted["properties"]["changes"][0]["after"]["tags"]["costCenter"], "4711",
        "the what-if shows the modified spec"
    );

    // An audit, and a deny not enforced: the writes go through, the findings are listed.
    let require_owner = json!({"properties": {"parameters": {"effect": {"defaultValue": "Audit"}}, "policyRule": {
        "if": {"field": "tags['owner']", "exists": "false"}, "then": {"effect": "[parameters('effect')]"}}}});
    put_ok(&s, &sub_path("policyDefinitions/require-owner"), require_owner).await;
    let id = format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/policyDefinitions/require-owner");
    put_ok(&s, &sub_path("policyAssignments/owner-audit"), json!({"properties": {"policyDefinitionId": id}})).await;
    let dry = json!({"properties": {"policyDefinitionId": id, "enforcementMode": "DoNotEnforce", "parameters": {"effect": {"value": "Deny"}}}});
    put_ok(&s, &sub_path("policyAssignments/owner-dry-run"), dry).await;
    assert_eq!(s.write("PUT", &rid("virtualNetworks", "orphan"), Some(vnet("local", json!({})))).await.0, 201);
    let states = format!("/subscriptions/{SUB}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults");
    let (code, found) = s.call_at("POST", &states, "api-version=2019-10-01", None).await;
    assert_eq!(code, 200, "{found}");
    let orphan: Vec<(&str, &str, bool)> = found["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resourceId"].as_str().unwrap().ends_with("/orphan"))
        .map(|r| {
            let assignment = r["policyAssignmentId"].as_str().unwrap().rsplit('/').next().unwrap();
            (assignment, r["policyDefinitionAction"].as_str().unwrap(), r["enforced"].as_bool().unwrap())
        })
        .collect();
    assert_eq!(orphan, vec![("owner-dry-run", "deny", false), ("owner-audit", "audit", true)], "{found}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_that_cannot_be_used_get_precise_errors() {
    let s = start().await;
    let bad_rule = json!({"properties": {"policyRule": {"if": {"field": "Slipway.Example/virtualNetworks/nope", "equals": 1}, "then": {"effect": "deny"}}}});
    let (code, e) = call(&s, "PUT", &sub_path("policyDefinitions/bad"), Some(bad_rule)).await;
    assert_eq!((code, e["error"]["code"].as_str()), (400, Some("InvalidPolicyRule")), "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("nope"), "{e}");
    let needs = json!({"properties": {"parameters": {"p": {"type": "String"}}, "policyRule": {
        "if": {"field": "location", "equals": "[parameters('p')]"}, "then": {"effect": "deny"}}}});
    let created = put_ok(&s, &sub_path("policyDefinitions/needs-p"), needs).await;
    let (code, e) = call(
        &s,
        "PUT",
        &sub_path("policyAssignments/a"),
        Some(json!({"properties": {"policyDefinitionId": created["id"]}})),
    )
    .await;
    assert_eq!((code, e["error"]["code"].as_str()), (400, Some("InvalidPolicyParameters")), "{e}");
    let missing = json!({"properties": {"policyDefinitionId": sub_path("policyDefinitions/nothing")}});
    let (code, e) = call(&s, "PUT", &sub_path("policyAssignments/a"), Some(missing)).await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("PolicyDefinitionNotFound")), "{e}");
    let with_p = json!({"properties": {"policyDefinitionId": created["id"], "parameters": {"p": {"value": "local"}}}});
    let assigned = put_ok(&s, &sub_path("policyAssignments/a"), with_p).await;
    let (code, e) = call(&s, "DELETE", &sub_path("policyDefinitions/needs-p"), None).await;
    assert_eq!((code, e["error"]["code"].as_str()), (409, Some("PolicyDefinitionInUse")), "{e}");
    let (code, e) = call(
        &s,
        "PUT",
        &group_path("nowhere", "policyExemptions/x"),
        Some(json!({"properties": {
        "policyAssignmentId": assigned["id"], "exemptionCategory": "Waiver"}})),
    )
    .await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("ResourceGroupNotFound")), "{e}");
    let (code, e) = call(
        &s,
        "PUT",
        &sub_path("policyExemptions/x"),
        Some(json!({"properties": {
        "policyAssignmentId": assigned["id"], "exemptionCategory": "Sometimes"}})),
    )
    .await;
    assert_eq!((code, e["error"]["code"].as_str()), (400, Some("InvalidPolicyExemption")), "{e}");
    let (code, _) =
        call(&s, "PUT", "/providers/Microsoft.Authorization/policyDefinitions/mine", Some(json!({"properties": {}})))
            .await;
    assert_eq!(code, 405, "the platform's definitions come from its configuration");
    let (code, e) = call(&s, "GET", &sub_path("policyAssignments/none"), None).await;
    assert_eq!((code, e["error"]["code"].as_str()), (404, Some("PolicyAssignmentNotFound")), "{e}");
    assert_eq!(call(&s, "DELETE", &sub_path("policyAssignments/a"), None).await.0, 200);
    assert_eq!(call(&s, "DELETE", &sub_path("policyDefinitions/needs-p"), None).await.0, 200);
}
