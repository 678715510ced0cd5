//! The guardrails' paths in the cross-tenant matrix (`tenancy`): quotas and usages, locks,
//! policy definitions, assignments, exemptions and states; and the activity log. What each needs, how each is
//! sent, and the configuration they need (a meter an Owner may limit below the platform's).

use serde_json::{Value, json};

/// A meter whose limits an Owner may set below the platform's 100.
pub const CONFIG: &str = "\n[quota]\nowner_limits = \"below-ceiling\"\n\n[[quota.meters]]\nname = \"networks\"\ntype = \"Slipway.Example/virtualNetworks\"\nlimit = 100\n";

/// Each endpoint and what it needs: `r` read, `A` manage access (Owner).
pub const ENDPOINTS: [(&str, char); 22] = [
    ("GET usages", 'r'),
    ("GET usages of a resource group", 'r'),
    ("GET quotas", 'r'),
    ("PUT quota", 'A'),
    ("PUT quota of a resource group", 'A'),
    ("PATCH quota", 'A'),
    ("GET locks", 'r'),
    ("PUT lock", 'A'),
    ("DELETE lock", 'A'),
    ("GET policy definitions", 'r'),
    ("PUT policy definition", 'A'),
    ("DELETE policy definition", 'A'),
    ("GET policy assignments of a resource", 'r'),
    ("PUT policy assignment", 'A'),
    ("GET policy exemptions", 'r'),
    ("PUT policy exemption", 'A'),
    ("DELETE policy exemption", 'A'),
    ("DELETE policy assignment", 'A'),
    ("GET policy states", 'r'),
    ("POST policy states", 'r'),
    ("GET activity log", 'r'),
    ("GET activity log of a resource", 'r'),
];

fn quota_path(sub: &str, group: &str, tail: &str) -> String {
    format!("/subscriptions/{sub}{group}/providers/Slipway.Example/locations/local/providers/Microsoft.Quota/{tail}")
}

/// `name`'s request against subscription `sub` (whose shared resource is `shared`), as
/// principal `who`: method, path, body and api-version; `None` for an endpoint not here.
pub fn request(
    name: &str,
    sub: &str,
    shared: &str,
    who: &str,
) -> Option<(&'static str, String, Option<Value>, &'static str)> {
    let authz = |scope: &str, tail: &str| format!("{scope}/providers/Microsoft.Authorization/{tail}");
    let subscription = format!("/subscriptions/{sub}");
    let definition = authz(&subscription, &format!("policyDefinitions/def-{who}"));
    let assignment = authz(shared, &format!("policyAssignments/pa-{who}"));
    let rule = json!({"properties": {"policyRule": {"if": {"field": "tags['x']", "equals": "never"}, "then": {"effect": "deny"}}}});
    Some(match name {
        "GET usages" => ("GET", quota_path(sub, "", "usages"), None, "2023-02-01"),
        "GET usages of a resource group" => {
            ("GET", quota_path(sub, "/resourceGroups/rg1", "usages/networks"), None, "2023-02-01")
        }
        "GET quotas" => ("GET", quota_path(sub, "", "quotas"), None, "2023-02-01"),
        "PUT quota" | "PUT quota of a resource group" => {
            let group = if name == "PUT quota" { "" } else { "/resourceGroups/rg1" };
            let body = json!({"properties": {"limit": {"value": 50}}});
            ("PUT", quota_path(sub, group, "quotas/networks"), Some(body), "2023-02-01")
        }
        "PATCH quota" => {
            let body = json!({"properties": {"limit": {"value": 40}}});
            ("PATCH", quota_path(sub, "", "quotas/networks"), Some(body), "2023-02-01")
        }
        "GET policy exemptions" => ("GET", authz(shared, "policyExemptions"), None, "2023-04-01"),
        "GET locks" => ("GET", authz(shared, "locks"), None, "2020-05-01"),
        "PUT lock" => (
            "PUT",
            authz(shared, &format!("locks/by-{who}")),
            Some(json!({"properties": {"level": "CanNotDelete"}})),
            "2020-05-01",
        ),
        "DELETE lock" => ("DELETE", authz(shared, &format!("locks/by-{who}")), None, "2020-05-01"),
        "GET policy definitions" => ("GET", authz(&subscription, "policyDefinitions"), None, "2023-04-01"),
        "PUT policy definition" => ("PUT", definition, Some(rule), "2023-04-01"),
        // The definition stays while the assignment below uses it; deleting one nobody
        // assigns is what is tried here.
        "DELETE policy definition" => {
            ("DELETE", authz(&subscription, &format!("policyDefinitions/none-{who}")), None, "2023-04-01")
        }
        "GET policy assignments of a resource" => ("GET", authz(shared, "policyAssignments"), None, "2023-04-01"),
        "PUT policy assignment" => {
            let body = json!({"properties": {"policyDefinitionId": "/providers/Microsoft.Authorization/policyDefinitions/none"}});
            let body =
                if who.ends_with("owner") { json!({"properties": {"policyDefinitionId": definition}}) } else { body };
            ("PUT", assignment, Some(body), "2023-04-01")
        }
        "PUT policy exemption" => {
            let body = json!({"properties": {"policyAssignmentId": assignment, "exemptionCategory": "Waiver"}});
            ("PUT", authz(shared, &format!("policyExemptions/ex-{who}")), Some(body), "2023-04-01")
        }
        "DELETE policy exemption" => {
            ("DELETE", authz(shared, &format!("policyExemptions/ex-{who}")), None, "2023-04-01")
        }
        "DELETE policy assignment" => ("DELETE", assignment, None, "2023-04-01"),
        "GET policy states" | "POST policy states" => {
            let path = format!("{subscription}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults");
            (if name.starts_with("GET") { "GET" } else { "POST" }, path, None, "2019-10-01")
        }
        "GET activity log" | "GET activity log of a resource" => {
            let mut path = format!("{subscription}/providers/Microsoft.Insights/eventtypes/management/values");
            if name.ends_with("resource") {
                path.push_str(&format!("?$filter=resourceUri%20eq%20%27{shared}%27"));
            }
            ("GET", path, None, "2015-04-01")
        }
        _ => return None,
    })
}
