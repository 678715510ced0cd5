//! The guardrails' paths (`handlers::quotas`, `handlers::locks`, `handlers::policy`) at a
//! subscription and at a resource group — quotas and usages, management locks, policy
//! definitions, assignments, exemptions and states — and their schemas. The lock, assignment
//! and exemption paths also take a resource's id as their scope
//! (`{resourceId}/providers/Microsoft.Authorization/locks`), as ARM's do.

use serde_json::{Map, Value, json};

use super::operation::{Op, Setting, group_name, path_param, subscription_id};
use super::responses::{json_answer, plain, request_id};
use super::schemas::schema_ref;

const QUOTA_TAG: &str = "Microsoft.Quota";
const LOCK_TAG: &str = "Microsoft.Authorization/locks";
const POLICY_TAG: &str = "Microsoft.Authorization/policy";

/// Any ARM api-version (`YYYY-MM-DD`, optionally `-preview`): Azure's tools send their own.
fn arm_version() -> Value {
    json!({
        "name": "api-version", "in": "query", "required": true,
        "description": "Any ARM api-version from 2014-04-01 on (`2023-02-01` for quotas, `2020-05-01` for locks, `2023-04-01` for policy).",
        "schema": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$"},
    })
}

fn name(param: &str, what: &str) -> Value {
    path_param(param, json!({"type": "string", "minLength": 1, "maxLength": 128}), what)
}

/// The scopes the guardrails live at: a subscription, and one of its groups.
fn scopes() -> [(&'static str, &'static str, Vec<Value>); 2] {
    [
        ("Subscription", "/subscriptions/{subscriptionId}", vec![subscription_id()]),
        (
            "ResourceGroup",
            "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}",
            vec![subscription_id(), group_name()],
        ),
    ]
}

pub(super) fn guardrail_paths(setting: &Setting, out: &mut Map<String, Value>) {
    let ok = |what: &str, schema: &str| json_answer(what, schema_ref(schema), request_id());
    for (label, scope, params) in scopes() {
        let with = |extra: &[Value]| {
            let mut p = params.clone();
            p.extend(extra.iter().cloned());
            p.push(arm_version());
            p
        };
        // Quotas and usages.
        let quota_scope =
            format!("{scope}/providers/{{resourceProviderNamespace}}/locations/{{location}}/providers/Microsoft.Quota");
        let ns = name("resourceProviderNamespace", "A served namespace: its types' meters.");
        let location = name("location", "Any location: quotas count across locations.");
        let meter = name("meterName", "A meter configured under `[[quota.meters]]`.");
        let op = |id: &str, summary: &str, p: Vec<Value>| Op::new(format!("{label}Quotas_{id}"), summary, QUOTA_TAG, p);
        let list_quotas = op("List", "Each meter's limit.", with(&[ns.clone(), location.clone()]))
            .answer(200, ok("The limits.", "QuotaList"))
            .errors(&[400, 403, 404, 500, 503]);
        let get_quota = op(
            "Get",
            "A meter's limit, its ceiling (the Admin's) and the Owner's.",
            with(&[ns.clone(), location.clone(), meter.clone()]),
        )
        .answer(200, ok("The limit.", "Quota"))
        .errors(&[400, 403, 404, 500, 503]);
        let set = |verb: &str| {
            op(verb, "Sets the meter's limit: the Admin's (the ceiling), or an Owner's at or below it (`owner_limits = \"below-ceiling\"`).", with(&[ns.clone(), location.clone(), meter.clone()]))
                .body(schema_ref("QuotaPut"))
                .answer(200, ok("The limit as set.", "Quota"))
                .errors(&[400, 403, 404, 408, 409, 413, 415, 500, 503])
                .build(setting)
        };
        out.insert(format!("{quota_scope}/quotas"), json!({"get": list_quotas.build(setting)}));
        out.insert(
            format!("{quota_scope}/quotas/{{meterName}}"),
            json!({"get": get_quota.build(setting), "put": set("CreateOrUpdate"), "patch": set("Update")}),
        );
        let usages = |id: &str, summary: &str, p: Vec<Value>, schema: &str| {
            Op::new(format!("{label}Usages_{id}"), summary, QUOTA_TAG, p)
                .answer(200, ok("The usage beside the limit.", schema))
                .errors(&[400, 403, 404, 500, 503])
                .build(setting)
        };
        out.insert(
            format!("{quota_scope}/usages"),
            json!({"get": usages("List", "What each meter's resources consume (`currentValue`) beside its `limit`.", with(&[ns.clone(), location.clone()]), "UsageList")}),
        );
        out.insert(
            format!("{quota_scope}/usages/{{meterName}}"),
            json!({"get": usages("Get", "One meter's usage beside its limit.", with(&[ns, location, meter]), "Usage")}),
        );

        // Locks.
        let lock_name = name("lockName", "The lock's name: 1 to 90 characters, none of `<>*%&:\\?/+`.");
        let op = |id: &str, summary: &str, p: Vec<Value>| Op::new(format!("{label}Locks_{id}"), summary, LOCK_TAG, p);
        let list_locks = op("List", "The locks at, above and below this scope.", with(&[]))
            .answer(200, ok("The locks.", "LockList"))
            .errors(&[400, 403, 404, 500, 503]);
        let get_lock = op("Get", "A lock at this scope.", with(std::slice::from_ref(&lock_name)))
            .answer(200, ok("The lock.", "Lock"))
            .errors(&[400, 403, 404, 500, 503]);
        let put_lock = op(
            "CreateOrUpdate",
            "Locks the scope and everything below it (Owner or Admin).",
            with(std::slice::from_ref(&lock_name)),
        )
        .body(schema_ref("LockPut"))
        .answer(200, ok("Replaced.", "Lock"))
        .answer(201, ok("Created.", "Lock"))
        .errors(&[400, 403, 404, 408, 409, 413, 415, 500, 503]);
        let delete_lock = op("Delete", "Removes the lock (Owner or Admin).", with(&[lock_name]))
            .answer(200, plain("Removed."))
            .answer(204, plain("There was none."))
            .errors(&[400, 403, 409, 500, 503]);
        out.insert(
            format!("{scope}/providers/Microsoft.Authorization/locks"),
            json!({"get": list_locks.build(setting)}),
        );
        out.insert(
            format!("{scope}/providers/Microsoft.Authorization/locks/{{lockName}}"),
            json!({"get": get_lock.build(setting), "put": put_lock.build(setting), "delete": delete_lock.build(setting)}),
        );

        // Policy assignments, exemptions, and at a subscription its own definitions.
        let mut collections = vec![("policyAssignments", "PolicyAssignment"), ("policyExemptions", "PolicyExemption")];
        if label == "Subscription" {
            collections.push(("policyDefinitions", "PolicyDefinition"));
        }
        for (segment, schema) in collections {
            let item = name("name", "The item's name: 1 to 128 characters, none of `<>*%&:\\?/+#`.");
            let op = |id: &str, summary: &str, p: Vec<Value>| {
                Op::new(format!("{label}{schema}s_{id}"), summary, POLICY_TAG, p)
            };
            let list = op("List", "What applies at this scope: at it, above it and below it.", with(&[]))
                .answer(200, ok("The list.", &format!("{schema}List")))
                .errors(&[400, 403, 404, 500, 503]);
            let get = op("Get", "One, by name.", with(std::slice::from_ref(&item)))
                .answer(200, ok("It.", schema))
                .errors(&[400, 403, 404, 500, 503]);
            let put = op("CreateOrUpdate", "Writes it, checked: a rule against the served types' aliases, an assignment's parameters against its definition, an exemption against its assignment (Owner or Admin).", with(std::slice::from_ref(&item)))
                .body(schema_ref(&format!("{schema}Put")))
                .answer(200, ok("Replaced.", schema))
                .answer(201, ok("Created.", schema))
                .errors(&[400, 403, 404, 408, 409, 413, 415, 500, 503]);
            let delete = op(
                "Delete",
                "Removes it (Owner or Admin); a definition still assigned is `409 PolicyDefinitionInUse`.",
                with(&[item]),
            )
            .answer(200, plain("Removed."))
            .answer(204, plain("There was none."))
            .errors(&[400, 403, 409, 500, 503]);
            out.insert(
                format!("{scope}/providers/Microsoft.Authorization/{segment}"),
                json!({"get": list.build(setting)}),
            );
            out.insert(
                format!("{scope}/providers/Microsoft.Authorization/{segment}/{{name}}"),
                json!({"get": get.build(setting), "put": put.build(setting), "delete": delete.build(setting)}),
            );
        }

        // What the policies found.
        let states = |verb: &str| {
            Op::new(format!("{label}PolicyStates_{verb}"), "What the policies found not compliant at each resource's last write: audits, and what assignments in DoNotEnforce mode would have done.", POLICY_TAG, with(&[]))
                .answer(200, ok("The findings.", "PolicyStateList"))
                .errors(&[400, 403, 500, 503])
                .build(setting)
        };
        out.insert(
            format!("{scope}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults"),
            json!({"get": states("List"), "post": states("Query")}),
        );
    }
    let platform = |id: &str, summary: &str, extra: &[Value], schema: &str| {
        let mut p = extra.to_vec();
        p.push(arm_version());
        Op::new(format!("PlatformPolicyDefinitions_{id}"), summary, POLICY_TAG, p)
            .answer(200, ok("The platform's definitions, from its configuration.", schema))
            .errors(&[400, 404, 500, 503])
            .build(setting)
    };
    out.insert(
        "/providers/Microsoft.Authorization/policyDefinitions".into(),
        json!({"get": platform("List", "The platform's policy definitions (`[[policy.definitions]]`).", &[], "PolicyDefinitionList")}),
    );
    out.insert(
        "/providers/Microsoft.Authorization/policyDefinitions/{name}".into(),
        json!({"get": platform("Get", "One of the platform's policy definitions.", &[name("name", "The definition's name.")], "PolicyDefinition")}),
    );
}

pub(super) fn guardrail_schemas(out: &mut Map<String, Value>) {
    let list = |item: &str| json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "array", "items": schema_ref(item)}}});
    let arm = |kind: Value, properties: Value| {
        json!({"type": "object", "required": ["id", "name", "type", "properties"], "properties": {
            "id": {"type": "string"}, "name": {"type": "string"}, "type": kind, "properties": properties}})
    };
    let meter_name =
        json!({"type": "object", "properties": {"value": {"type": "string"}, "localizedValue": {"type": "string"}}});
    let count = json!({"type": "integer", "minimum": 0});
    let entries = [
        (
            "Quota",
            arm(
                json!({"const": "Microsoft.Quota/Quotas"}),
                json!({"type": "object", "properties": {
            "name": meter_name, "resourceType": {"type": "string"}, "unit": {"type": "string"},
            "limit": {"type": "object", "properties": {"limitObjectType": {"const": "LimitValue"}, "value": count}},
            "ceiling": count, "ownerLimit": count, "isQuotaApplicable": {"type": "boolean"}}}),
            ),
        ),
        (
            "QuotaPut",
            json!({"type": "object", "required": ["properties"], "properties": {"properties": {"type": "object", "required": ["limit"], "properties": {
            "limit": {"type": "object", "required": ["value"], "properties": {"limitObjectType": {"const": "LimitValue"}, "value": count}}}}}}),
        ),
        (
            "Usage",
            arm(
                json!({"const": "Microsoft.Quota/Usages"}),
                json!({"type": "object", "properties": {
            "name": meter_name, "resourceType": {"type": "string"}, "unit": {"type": "string"},
            "currentValue": count, "limit": count,
            "usages": {"type": "object", "properties": {"value": count, "usagesType": {"const": "Individual"}}}}}),
            ),
        ),
        (
            "Lock",
            arm(
                json!({"const": "Microsoft.Authorization/locks"}),
                json!({"type": "object", "required": ["level"], "properties": {
            "level": {"enum": ["CanNotDelete", "ReadOnly"]}, "notes": {"type": "string"}}}),
            ),
        ),
        (
            "LockPut",
            json!({"type": "object", "required": ["properties"], "properties": {"properties": {"type": "object", "required": ["level"], "properties": {
            "level": {"enum": ["CanNotDelete", "ReadOnly"]}, "notes": {"type": "string", "maxLength": 512}}}}}),
        ),
        (
            "PolicyDefinition",
            arm(
                json!({"const": "Microsoft.Authorization/policyDefinitions"}),
                json!({"type": "object", "properties": {
            "policyType": {"enum": ["BuiltIn", "Custom"]}, "mode": {"type": "string"}, "displayName": {"type": "string"},
            "parameters": {"type": "object"}, "policyRule": {"type": "object"}}}),
            ),
        ),
        (
            "PolicyDefinitionPut",
            json!({"type": "object", "required": ["properties"], "properties": {"properties": {"type": "object", "required": ["policyRule"], "properties": {
            "mode": {"enum": ["All", "Indexed"]}, "displayName": {"type": "string"}, "parameters": {"type": "object"},
            "policyRule": {"type": "object", "required": ["if", "then"]}}}}}),
        ),
        (
            "PolicyAssignment",
            arm(
                json!({"const": "Microsoft.Authorization/policyAssignments"}),
                json!({"type": "object", "properties": {
            "policyDefinitionId": {"type": "string"}, "scope": {"type": "string"}, "parameters": {"type": "object"},
            "notScopes": {"type": "array", "items": {"type": "string"}}, "enforcementMode": {"enum": ["Default", "DoNotEnforce"]}}}),
            ),
        ),
        (
            "PolicyAssignmentPut",
            json!({"type": "object", "required": ["properties"], "properties": {"properties": {"type": "object", "required": ["policyDefinitionId"], "properties": {
            "policyDefinitionId": {"type": "string"}, "parameters": {"type": "object", "additionalProperties": {"type": "object", "required": ["value"]}},
            "notScopes": {"type": "array", "items": {"type": "string"}}, "enforcementMode": {"enum": ["Default", "DoNotEnforce"]}}}}}),
        ),
        (
            "PolicyExemption",
            arm(
                json!({"const": "Microsoft.Authorization/policyExemptions"}),
                json!({"type": "object", "properties": {
            "policyAssignmentId": {"type": "string"}, "scope": {"type": "string"}, "exemptionCategory": {"enum": ["Waiver", "Mitigated"]},
            "expiresOn": {"type": ["string", "null"]}}}),
            ),
        ),
        (
            "PolicyExemptionPut",
            json!({"type": "object", "required": ["properties"], "properties": {"properties": {"type": "object", "required": ["policyAssignmentId", "exemptionCategory"], "properties": {
            "policyAssignmentId": {"type": "string"}, "exemptionCategory": {"enum": ["Waiver", "Mitigated"]},
            "expiresOn": {"type": "string", "format": "date-time"}}}}}),
        ),
        (
            "PolicyStateList",
            json!({"type": "object", "required": ["value"], "properties": {"@odata.count": count, "value": {"type": "array", "items": {"type": "object", "properties": {
            "resourceId": {"type": "string"}, "policyAssignmentId": {"type": "string"}, "policyDefinitionId": {"type": "string"},
            "policyDefinitionAction": {"type": "string"}, "complianceState": {"const": "NonCompliant"}, "enforced": {"type": "boolean"}}}}}}),
        ),
    ];
    for (name, schema) in entries {
        out.insert(name.into(), schema);
    }
    for item in ["Quota", "Usage", "Lock", "PolicyDefinition", "PolicyAssignment", "PolicyExemption"] {
        out.insert(format!("{item}List"), list(item));
    }
}
