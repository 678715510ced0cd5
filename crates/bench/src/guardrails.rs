//! Guardrails for a benchmark run, and what evaluating them costs.
//!
//! With `--guardrails on`, a burn-down runs beside 10 quota meters of the benchmark's type,
//! locks at every scope (the subscription, the group, one resource; `CanNotDelete`, so the
//! creates pass) and 20 policy assignments at the subscription and the group, a mix of
//! effects: denies that never hold, audits and a `DoNotEnforce` deny that hold (a finding on
//! every resource), modifies that add a tag, and `denyAction`s that only a delete meets.
//! Every create then reads them all and is charged against every meter in its transaction.
//!
//! `policy-cost` times the domain's policy evaluation alone, per request, by the number of
//! assignments: what one write's admission policies cost and how it grows.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use slipway_domain::Timestamp;
use slipway_domain::access::Scope;
use slipway_domain::policy_admission::{Assignment, Definition, Policies, Target};
use slipway_domain::policy_rule::Aliases;
use slipway_domain::resource::Spec;

use crate::harness::{Client, SUB};

/// `[quota]` with 10 meters of the benchmark's type: counts and sums, limits far away.
pub fn quota_config() -> String {
    let mut out = String::from("\n[quota]\n");
    for i in 0..10 {
        let measure = if i % 2 == 0 { String::new() } else { format!("property = \"properties.size{i}\"\n") };
        out.push_str(&format!(
            "[[quota.meters]]\nname = \"meter{i}\"\ntype = \"Slipway.Example/computeInstances\"\n{measure}limit = 100000000\ngroup_limit = 100000000\n"
        ));
    }
    out
}

/// The 20 definitions (name, rule) the assignments use, by effect.
fn definitions() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let rule = |condition: Value, then: Value| json!({"properties": {"mode": "All", "policyRule": {"if": condition, "then": then}}});
    for i in 0..6 {
        let never = json!({"allOf": [{"field": "type", "equals": "Slipway.Example/computeInstances"}, {"field": "location", "notIn": ["local", format!("elsewhere-{i}")]}]});
        out.push((format!("deny-{i}"), rule(never, json!({"effect": "deny"}))));
    }
    for i in 0..6 {
        let holds = json!({"field": format!("tags['costCenter{i}']"), "exists": "false"});
        out.push((format!("audit-{i}"), rule(holds, json!({"effect": "audit"}))));
    }
    for i in 0..4 {
        let missing = json!({"field": format!("tags['owner{i}']"), "exists": "false"});
        let add = json!({"effect": "modify", "details": {"roleDefinitionIds": [], "operations": [
            {"operation": "add", "field": format!("tags['owner{i}']"), "value": "[concat('team-', resourceGroup().name)]"}]}});
        out.push((format!("modify-{i}"), rule(missing, add)));
    }
    for i in 0..2 {
        let prod = json!({"field": "tags['env']", "equals": format!("prod-{i}")});
        out.push((
            format!("deny-delete-{i}"),
            rule(prod, json!({"effect": "denyAction", "details": {"actionNames": ["delete"]}})),
        ));
    }
    for i in 0..2 {
        let holds = json!({"field": "name", "like": "*"});
        out.push((format!("dry-run-{i}"), rule(holds, json!({"effect": "deny"}))));
    }
    out
}

/// Locks at every scope, the 20 definitions and their assignments (half at the subscription,
/// half at the group), written through the API as a platform team would.
pub async fn seed(client: &Client) -> Result<(), String> {
    let sub = format!("/subscriptions/{SUB}");
    let group = format!("{sub}/resourceGroups/bench");
    let put = |path: String, body: Value, version: &'static str| {
        let (http, url) = (client.http.clone(), format!("{}{path}?api-version={version}", client.base));
        async move {
            let r = http.put(&url).json(&body).send().await.map_err(|e| format!("PUT {path}: {e}"))?;
            match r.status().as_u16() {
                200 | 201 => Ok(r.json::<Value>().await.unwrap_or_default()),
                s => Err(format!("PUT {path}: {s} {}", r.text().await.unwrap_or_default())),
            }
        }
    };
    put(group.clone(), json!({"location": "local"}), "2025-04-01").await?;
    let locked = client.put("locked", None).await?;
    client.wait_succeeded(&[locked.status_url], Duration::from_millis(20), Duration::from_secs(60)).await?;
    let resource = format!("{group}/providers/Slipway.Example/computeInstances/locked");
    for scope in [&sub, &group, &resource] {
        let lock = json!({"properties": {"level": "CanNotDelete", "notes": "bench"}});
        put(format!("{scope}/providers/Microsoft.Authorization/locks/keep"), lock, "2020-05-01").await?;
    }
    for (i, (name, definition)) in definitions().into_iter().enumerate() {
        let created =
            put(format!("{sub}/providers/Microsoft.Authorization/policyDefinitions/{name}"), definition, "2023-04-01")
                .await?;
        let mut properties = json!({"policyDefinitionId": created["id"]});
        if name.starts_with("dry-run") {
            properties["enforcementMode"] = json!("DoNotEnforce");
        }
        let at = if i % 2 == 0 { &sub } else { &group };
        put(
            format!("{at}/providers/Microsoft.Authorization/policyAssignments/{name}"),
            json!({"properties": properties}),
            "2023-04-01",
        )
        .await?;
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct CostArgs {
    /// Numbers of assignments to time, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,5,10,20,40,80")]
    pub assignments: Vec<usize>,
    /// Evaluations per count.
    #[arg(long, default_value_t = 20_000)]
    pub iterations: usize,
}

/// Microseconds one request's policy evaluation takes, by the number of assignments (the
/// benchmark's mix repeated), with one decoded from scratch beside the one kept parsed.
pub async fn run_cost(args: CostArgs) -> Result<(), String> {
    let aliases = Aliases::default();
    let parsed: Vec<Definition> = definitions()
        .into_iter()
        .map(|(name, d)| {
            let id = format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/policyDefinitions/{name}");
            Definition::parse(&id, &d["properties"], &aliases).map_err(|e| format!("{name}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let scope = Scope::parse(&format!("/subscriptions/{SUB}")).map_err(|e| e.to_string())?;
    let id = format!("/subscriptions/{SUB}/resourceGroups/bench/providers/Slipway.Example/computeInstances/vm1");
    let target = Target {
        scope: Scope::parse(&id).map_err(|e| e.to_string())?,
        id: &id,
        name: "vm1",
        full_name: "vm1",
        type_name: "Slipway.Example/computeInstances",
        kind: "ComputeInstance",
        is_group: false,
        resource_group: json!({"name": "bench", "location": "local", "tags": {}}),
        subscription: json!({"subscriptionId": SUB, "displayName": "bench"}),
        request: json!({"apiVersion": "2025-06-01"}),
        aliases: &aliases,
    };
    let spec = Spec {
        location: Some("local".into()),
        tags: Default::default(),
        properties: json!({"size": "small", "image": "debian"}),
    };
    println!("admission policy evaluation per request (µs), by assignments:");
    println!("{:>12} {:>12} {:>14}", "assignments", "evaluate", "parse+evaluate");
    for &n in &args.assignments {
        let assignments: Vec<_> = (0..n)
            .map(|i| {
                let d = &parsed[i % parsed.len()];
                let mut properties = json!({"policyDefinitionId": d.id});
                if d.id.contains("dry-run") {
                    properties["enforcementMode"] = json!("DoNotEnforce");
                }
                Assignment::parse(&format!("a{i}"), scope.clone(), &properties).map(std::sync::Arc::new)
            })
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let policies =
            Policies { definitions: parsed.iter().cloned().map(Into::into).collect(), assignments, exemptions: vec![] };
        let per = |f: &mut dyn FnMut()| {
            let start = Instant::now();
            for _ in 0..args.iterations {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / args.iterations as f64
        };
        let evaluate = per(&mut || {
            let mut s = spec.clone();
            let _ = std::hint::black_box(policies.admit_write(&target, &mut s, Timestamp(0)));
        });
        let defs = definitions();
        let reparse = per(&mut || {
            for (name, d) in defs.iter().take(n.min(defs.len())) {
                let _ = std::hint::black_box(Definition::parse(name, &d["properties"], &aliases));
            }
            let mut s = spec.clone();
            let _ = std::hint::black_box(policies.admit_write(&target, &mut s, Timestamp(0)));
        });
        println!("{n:>12} {evaluate:>12.2} {reparse:>14.2}");
    }
    Ok(())
}
