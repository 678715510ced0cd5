//! The published contract, checked with real tools against a running Slipway: the
//! `/openapi.json` it serves is validated by `openapi-spec-validator`, then `schemathesis`
//! fuzzes the server from that document — authenticated as a platform admin (a JWT from the
//! test issuer), as a principal with no role, and unauthenticated — and every answer must be no 5xx, a documented status,
//! a documented content type, headers and a body that keep to the document.
//!
//! The jobs run on the AWX-API simulator (in-process, virtual time per job), so thousands of
//! requests cost no playbooks. Callbacks are allowed only to a loopback address the fuzzer
//! never names, so no notification leaves the machine.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aap_sim::{Sim, SimConfig};
use serde_json::{Value, json};
use slipway::app::App;
use slipway::config::Config;
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};
use slipway_test_support::eventually;

const AUD: &str = "api://slipway";
const API: &str = common::API;
/// Registered; the fuzzer's resources land here about half the time.
const SUB: &str = common::SUB;
/// Registered; the fuzzer changes this one's registration (so `SUB` stays writable).
const REGISTRY_SUB: &str = "22222222-2222-2222-2222-222222222222";
/// The fuzzer's seed and examples per operation: fixed for CI; `SLIPWAY_FUZZ_SEED` and
/// `SLIPWAY_FUZZ_EXAMPLES` (a factor) dig deeper by hand.
const SEED: &str = "20260601";
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_schema_conformance,response_headers_conformance";

/// A child type of `virtualNetworks` (no schema), which the compute schema references.
const CHILD_TYPE: &str = "virtualNetworks/subnets";

/// The example types with a valid `properties` each, for the seeded resources.
fn seeds() -> [(&'static str, &'static str, Value); 4] {
    [
        ("virtualNetworks", "VirtualNetwork", json!({"addressSpace": "10.0.0.0/16"})),
        ("subnets", "Subnet", json!({"virtualNetwork": "seed-1", "addressPrefix": "10.0.1.0/24"})),
        ("securityGroups", "SecurityGroup", json!({"rules": []})),
        ("computeInstances", "ComputeInstance", json!({"size": "small", "image": "debian"})),
    ]
}

fn config_text(dir: &Path, sim: &Sim, idp: &TestIdp) -> String {
    std::fs::write(dir.join("aap-token"), "sim-token").unwrap();
    let repo = common::repo();
    let mut types = String::new();
    for (ty, kind, _) in seeds() {
        // One type with its own name rule and two api-versions, so the document shows both.
        let extra = if ty == "subnets" {
            "api_versions = [\"2024-01-01\", \"2025-06-01\"]\nname_pattern = \"[a-z][a-z0-9-]{0,30}\"\nname_max_length = 32\n"
                .to_string()
        } else {
            format!("api_versions = [\"{API}\"]\n")
        };
        types.push_str(&format!(
            "\n[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"{ty}\"\nkind = \"{kind}\"\n{extra}schema = \"{}\"\n\
             provider = \"aap\"\npoll_interval_seconds = 0.2\n",
            repo.join(format!("examples/schemas/{ty}.json")).display()
        ));
        if ty == "computeInstances" {
            // Actions, so their paths are published and fuzzed too.
            types.push_str(&format!(
                "[types.actions.restart]\nschema = \"{}\"\n[types.actions.stop]\n",
                repo.join("examples/schemas/computeInstances.restart.json").display()
            ));
        }
    }
    // A child type, so nested paths are published and fuzzed too.
    types.push_str(&format!(
        "\n[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"{CHILD_TYPE}\"\nkind = \"Subnet\"\n\
         api_versions = [\"{API}\"]\nprovider = \"aap\"\npoll_interval_seconds = 0.2\n"
    ));
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
retry_after_seconds = 0

[store]
url = "sqlite:{db}"

[engine]
node_name = "openapi"
shutdown_grace_seconds = 5

[notifications]
callback_allowlist = ["http://127.0.0.1:9"]
callback_allow_http = true
callback_allow_private_networks = true

[[providers]]
name = "aap"
type = "aap"
url = "{sim}"
template_prefix = "slipway"
token_file = "{token}"
request_timeout_seconds = 5
{types}
[auth]
admins = ["root"]

[auth.rate_limits]
requests_per_second = 100000
burst = 100000

[[auth.issuers]]
issuer = "{issuer}"
audiences = ["{AUD}"]
"#,
        db = dir.join("slipway.db").display(),
        sim = sim.base_url(),
        token = dir.join("aap-token").display(),
        issuer = idp.issuer,
    )
}

/// Schemathesis' configuration: the registered subscription, a resource group, the seeded
/// names and operation ids as dictionaries, so about half the generated requests reach real
/// data instead of `404`.
fn schemathesis_toml(names: &[String], operations: &[String]) -> String {
    let list = |v: &[String]| v.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
    format!(
        r#"
[dictionaries.subscriptions]
values = ["{SUB}"]
[dictionaries.registry]
values = ["{REGISTRY_SUB}"]
[dictionaries.groups]
values = ["rg1"]
[dictionaries.names]
values = [{names}]
[dictionaries.operations]
values = [{operations}]

[parameters]
"path.subscriptionId" = {{ dictionary = "subscriptions", probability = 0.6 }}
"path.resourceGroupName" = {{ dictionary = "groups", probability = 0.6 }}
"path.resourceName" = {{ dictionary = "names", probability = 0.5 }}
"path.virtualNetworksName" = {{ dictionary = "names", probability = 0.6 }}
"path.operationId" = {{ dictionary = "operations", probability = 0.7 }}

[[operations]]
include-path = "/subscriptions/{{subscriptionId}}"
include-method = "PUT"
parameters = {{ "path.subscriptionId" = {{ dictionary = "registry", probability = 0.6 }} }}

# A followed event feed streams until the server stops: every such case would hang until the
# request timeout. The stream is tested in events.rs; here the feed is read as pages.
[[operations]]
include-operation-id-regex = "(Events_List|_ListEvents)"
parameters = {{ "query.follow" = false }}
"#,
        names = list(names),
        operations = list(operations),
    )
}

struct Run {
    generated: u64,
    requests: u64,
    server_errors: u64,
    statuses: Value,
}

/// How much of schemathesis a run takes part in.
#[derive(Clone, Copy)]
enum Depth {
    /// Every phase: the coverage phase's boundary and negative cases for every parameter
    /// (thousands of requests whatever the example count), then fuzzing and stateful links.
    Full(u32),
    /// Fuzzing only, this many examples per operation: enough for a caller every request
    /// refuses (401, 403), where the coverage phase's thousands of cases would all be refused
    /// the same way.
    Fuzzing(u32),
}

/// One `st run`; panics with its output unless every check passed.
async fn schemathesis(venv: &Path, dir: &Path, base: &str, label: &str, token: Option<&str>, depth: Depth) -> Run {
    let reports = dir.join(format!("report-{}", label.replace(' ', "-")));
    let seed = std::env::var("SLIPWAY_FUZZ_SEED").unwrap_or_else(|_| SEED.to_string());
    let (examples, phases) = match depth {
        Depth::Full(n) => (n, "examples,coverage,fuzzing,stateful"),
        Depth::Fuzzing(n) => (n, "fuzzing"),
    };
    let examples = examples * std::env::var("SLIPWAY_FUZZ_EXAMPLES").ok().and_then(|f| f.parse().ok()).unwrap_or(1);
    let mut cmd = tokio::process::Command::new(venv.join("bin/st"));
    cmd.current_dir(dir)
        .arg("--config-file")
        .arg(dir.join("schemathesis.toml"))
        .args(["run", &format!("{base}/openapi.json"), "--checks", CHECKS])
        // One worker: with threads, hypothesis' strategy descriptions hit a CPython 3.11 race in
        // `ast.parse` ("AST constructor recursion depth mismatch") now and then; the fuzzer is
        // bound by Python's CPU anyway. (Schemathesis 4 runs Hypothesis with no deadline.)
        .args(["--max-examples", &examples.to_string(), "--seed", &seed, "--workers", "1"])
        .args(["--phases", phases, "--generation-database", "none"])
        .args(["--request-timeout", "20", "--no-color", "--report", "ndjson,json"])
        .arg("--report-dir")
        .arg(&reports)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    if let Some(token) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let out = cmd.output().await.expect("run schemathesis (st)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report_of = |prefix: &str| {
        std::fs::read_dir(&reports)
            .unwrap_or_else(|e| panic!("{label}: no reports ({e}):\n{stdout}"))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
            .unwrap_or_else(|| panic!("{label}: no {prefix} report:\n{stdout}"))
    };
    let report: Value = serde_json::from_slice(&std::fs::read(report_of("json-")).unwrap()).unwrap();
    let summary = tokio::process::Command::new(venv.join("bin/python"))
        .arg(common::repo().join("tests/python/schemathesis_summary.py"))
        .arg(report_of("ndjson-"))
        .output()
        .await
        .unwrap();
    assert!(summary.status.success(), "{}", String::from_utf8_lossy(&summary.stderr));
    let summary: Value = serde_json::from_slice(&summary.stdout).unwrap();
    let run = Run {
        generated: report["test_cases"]["generated"].as_u64().unwrap_or_default(),
        requests: summary["requests"].as_u64().unwrap_or_default(),
        server_errors: summary["server_errors"].as_u64().unwrap_or_default(),
        statuses: summary["statuses"].clone(),
    };
    if let Some(at) = stdout.find(" SUMMARY ") {
        println!("{}", &stdout[at..]);
    }
    println!(
        "schemathesis ({label}): {} test cases generated, {} requests over {} operations, {} 5xx; statuses {}",
        run.generated, run.requests, summary["operations"], run.server_errors, run.statuses
    );
    let clean = out.status.success()
        && report["failures"].as_array().is_some_and(Vec::is_empty)
        && report["errors"].as_array().is_some_and(Vec::is_empty)
        && report["operations"]["errored"] == 0;
    assert!(
        clean,
        "{label}: schemathesis found problems (exit {:?}; failed checks {}):\n{stdout}\n{}",
        out.status.code(),
        summary["failed_checks"],
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(run.server_errors, 0, "{label}: 5xx answers: {}", run.statuses);
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_published_document_is_valid_and_the_server_keeps_to_it() {
    let started = Instant::now();
    common::init_logging();
    let venv = common::python_tools();
    let mut sim_config = SimConfig { tick_ms: 20, token: Some("sim-token".into()), ..SimConfig::default() };
    for t in &mut sim_config.job_templates {
        t.duration_seconds = 1.0;
        // Security groups never get created: their seed is Failed, so a retry can be accepted.
        if t.name == "slipway-create-security-group" {
            t.outcome = "failed".into();
        }
    }
    let sim = Sim::start("127.0.0.1:0", sim_config).await.expect("start aap-sim");
    let idp = TestIdp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slipway.toml");
    std::fs::write(&path, config_text(dir.path(), &sim, &idp)).unwrap();
    let app = App::start(Config::load(Some(&path), []).unwrap(), Arc::new(SystemClock)).await.expect("start slipway");
    let base = format!("http://{}", app.addr);
    let http = reqwest::Client::new();
    let root = idp.sign("key-1", &idp.claims(AUD, "root", "platform", SystemClock.now().as_millis() / 1000));

    // Two registered subscriptions and one resource of each type.
    for (sub, tenant) in [(SUB, "tenant-a"), (REGISTRY_SUB, "tenant-r")] {
        let r = http
            .put(format!("{base}/subscriptions/{sub}?api-version={API}"))
            .bearer_auth(&root)
            .json(&json!({"state": "Registered", "properties": {"tenantId": tenant}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
    }
    let (mut names, mut operations) = (Vec::new(), Vec::new());
    for (ty, _, properties) in seeds() {
        let r = http
            .put(format!("{base}{}?api-version={API}", common::rid(ty, "seed-1")))
            .bearer_auth(&root)
            .json(&json!({"location": "local", "tags": {"seeded": "yes"}, "properties": properties}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "{ty}: {}", r.text().await.unwrap_or_default());
        let status_url = common::header(&r, "azure-asyncoperation").unwrap();
        let id = status_url.split('?').next().unwrap().rsplit('/').next().unwrap().to_string();
        operations.push(id);
    }
    names.push("seed-1".to_string());
    // The security group's create fails; a retry of it is accepted (the fuzzer seldom meets a
    // Failed resource that is still there, so this `202` is checked here, not left to chance).
    let group = common::rid("securityGroups", "seed-1");
    let failed = eventually("the security group's create to fail", Duration::from_secs(60), async || {
        let r = http.get(format!("{base}{group}?api-version={API}")).bearer_auth(&root).send().await.unwrap();
        let body: Value = r.json().await.unwrap();
        if body["properties"]["provisioningState"] == "Failed" { Ok(()) } else { Err(body.to_string()) }
    });
    failed.await;
    let retry = http.post(format!("{base}{group}/retry?api-version={API}")).bearer_auth(&root).send().await.unwrap();
    assert_eq!(retry.status().as_u16(), 202, "{}", retry.text().await.unwrap_or_default());
    let child = format!("{}/subnets/seed-1", common::rid("virtualNetworks", "seed-1"));
    let r = http
        .put(format!("{base}{child}?api-version={API}"))
        .bearer_auth(&root)
        .json(&json!({"location": "local", "properties": {"anything": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{child}: {}", r.text().await.unwrap_or_default());

    // Discovery: any authenticated caller, any api-version of the namespace.
    let stranger = idp.sign("key-1", &idp.claims(AUD, "stranger", "elsewhere", SystemClock.now().as_millis() / 1000));
    let get = |path: &str, token: Option<&str>| {
        let mut r = http.get(format!("{base}{path}"));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, provider) = get("/providers/slipway.example?api-version=2024-01-01", Some(&stranger)).await;
    assert_eq!(status, 200, "{provider}");
    assert_eq!(provider["id"], "/providers/Slipway.Example");
    assert_eq!(
        (&provider["namespace"], &provider["registrationState"]),
        (&json!("Slipway.Example"), &json!("Registered"))
    );
    let subnets =
        provider["resourceTypes"].as_array().unwrap().iter().find(|t| t["resourceType"] == "subnets").unwrap();
    assert_eq!(subnets["apiVersions"], json!(["2025-06-01", "2024-01-01"]));
    assert_eq!(subnets["locations"], json!(["local"]));
    let (status, provider) =
        get(&format!("/subscriptions/{SUB}/providers/Slipway.Example?api-version={API}"), Some(&root)).await;
    assert_eq!(
        (status, provider["id"].as_str()),
        (200, Some(format!("/subscriptions/{SUB}/providers/Slipway.Example").as_str()))
    );
    let (status, ops) = get(&format!("/providers/Slipway.Example/operations?api-version={API}"), Some(&stranger)).await;
    assert_eq!(status, 200, "{ops}");
    let actions: Vec<&str> = ops["value"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    for name in [
        "Slipway.Example/virtualNetworks/read",
        "Slipway.Example/computeInstances/write",
        "Slipway.Example/subnets/delete",
        "Slipway.Example/locations/operationStatuses/read",
        "Slipway.Example/locations/operationStatuses/cancel/action",
        "Slipway.Authorization/roleAssignments/write",
        "Slipway.Admin/subscriptions/write",
    ] {
        assert!(actions.contains(&name), "{name} in {actions:?}");
    }
    assert_eq!(get("/providers/Slipway.Example/operations", Some(&stranger)).await.0, 400, "api-version is required");
    assert_eq!(get(&format!("/providers/Nope.Ns?api-version={API}"), Some(&root)).await.0, 404);
    assert_eq!(get(&format!("/providers/Slipway.Example?api-version={API}"), None).await.0, 401);
    // The 403 a reader-less caller gets names an action the list has.
    let (status, denied) =
        get(&format!("{}?api-version={API}", common::rid("subnets", "seed-1")), Some(&stranger)).await;
    assert_eq!(status, 403);
    assert!(denied["error"]["message"].as_str().unwrap().contains("'Slipway.Example/subnets/read'"), "{denied}");

    // The document: unauthenticated, valid OpenAPI 3.1 by a real validator.
    let r = http.get(format!("{base}/openapi.json")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(common::header(&r, "content-type").as_deref(), Some("application/json"));
    let doc: Value = r.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object(), "authentication is on");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let validated = tokio::process::Command::new(venv.join("bin/openapi-spec-validator"))
        .arg(&file)
        .output()
        .await
        .expect("run openapi-spec-validator");
    let said = String::from_utf8_lossy(&validated.stdout);
    assert!(validated.status.success() && said.contains("OK"), "{said}{}", String::from_utf8_lossy(&validated.stderr));
    println!("openapi-spec-validator: {}", said.trim());

    // Fuzzing, from that document.
    std::fs::write(dir.path().join("schemathesis.toml"), schemathesis_toml(&names, &operations)).unwrap();
    let authenticated = schemathesis(&venv, dir.path(), &base, "authenticated", Some(&root), Depth::Full(8)).await;
    // A principal with no role anywhere: 403s (and discovery, which needs none).
    let roleless = schemathesis(&venv, dir.path(), &base, "no role", Some(&stranger), Depth::Fuzzing(5)).await;
    let anonymous = schemathesis(&venv, dir.path(), &base, "unauthenticated", None, Depth::Fuzzing(5)).await;
    let runs = [&authenticated, &roleless, &anonymous];
    let total: u64 = runs.iter().map(|r| r.requests).sum();
    println!(
        "schemathesis: {total} requests in all ({} test cases), {} 5xx, in {:.0?}",
        runs.iter().map(|r| r.generated).sum::<u64>(),
        runs.iter().map(|r| r.server_errors).sum::<u64>(),
        started.elapsed()
    );
    assert!(total >= 5000, "only {total} requests");
    for status in ["200", "201", "204", "400", "404"] {
        assert!(authenticated.statuses[status].as_u64() > Some(0), "no {status} while authenticated");
    }
    assert!(roleless.statuses["403"].as_u64() > Some(0), "a principal without a role is refused");
    assert!(anonymous.statuses["401"].as_u64() > Some(0), "unauthenticated requests are refused");
    app.shutdown().await.expect("clean shutdown");
    sim.shutdown().await;
}
