//! Secrets never leak. A run of the real binary with authentication (a JWT and an API
//! token), a type with a secret property and real playbooks, each secret carrying a unique
//! marker; then everything the run left — the debug log, every API response, the database
//! files, the job directories once the jobs ended — is searched for the markers. A second
//! run does the same for the secrets of the AAP and PostgreSQL edges.

use crate::common;

use std::path::Path;
use std::time::Duration;

use crate::common::{API, SUB};
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};
use slipway_test_support::{eventually, ready_within};

const AUD: &str = "api://slipway";

/// A secret the schema refuses (too short): neither its refusal nor the activity log that
/// records the refusal may echo it.
const SHORT_SECRET: &str = "Qz9#kP";

fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { files_under(&path, out) } else { out.push(path) }
    }
}

/// Sends `req`; every response, headers and body, goes into `seen`.
async fn call(http: &reqwest::Client, seen: &mut String, req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = http.execute(req.build().unwrap()).await.unwrap();
    let status = r.status().as_u16();
    seen.push_str(&format!("{:?}\n", r.headers()));
    let text = r.text().await.unwrap();
    seen.push_str(&text);
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_appear_nowhere() {
    let idp = TestIdp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("MARKER-{}", uuid_like());
    let key = dir.path().join("secret.key");
    write_private(&key, &"ab".repeat(32));
    let mut schema: Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo().join("examples/schemas/virtualNetworks.json")).unwrap(),
    )
    .unwrap();
    schema["properties"]["adminPassword"] = json!({"type": "string", "minLength": 8, "writeOnly": true});
    let schema_path = dir.path().join("secret-networks.json");
    std::fs::write(&schema_path, schema.to_string()).unwrap();
    let port = common::free_port();
    let config = dir.path().join("slipway.toml");
    let base_config = common::config_text(dir.path(), "").replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    std::fs::write(
        &config,
        format!(
            r#"{base_config}
[[types]]
namespace = "Slipway.Example"
type = "secretNetworks"
kind = "VirtualNetwork"
api_versions = ["{API}"]
schema = "{schema}"
provider = "ansible"
poll_interval_seconds = 0.2

[secrets]
key_files = ["{key}"]

[activity]
sink = "{sink}"

[auth]
api_tokens = true
admins = ["root", "bot"]

[[auth.issuers]]
issuer = "{issuer}"
audiences = ["{AUD}"]
"#,
            schema = schema_path.display(),
            key = key.display(),
            sink = dir.path().join("activity.jsonl").display(),
            issuer = idp.issuer,
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slipway"))
        .args(["api-token", "create", "--principal", "bot", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let api_token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let api_token_secret = api_token.splitn(3, '_').nth(2).unwrap().to_string();
    let jwt = idp.sign("key-1", &idp.claims(AUD, "root", "platform", SystemClock.now().as_millis() / 1000));
    let jwt_signature = jwt.rsplit('.').next().unwrap().to_string();

    let log = dir.path().join("slipway.log");
    let mut child = common::spawn_slipway(&config, &log, "debug");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut seen = String::new();
    let up = ready_within(&http, &base, Duration::from_secs(20)).await;
    up.unwrap_or_else(|e| panic!("slipway did not come up ({e})"));
    let id = format!("/subscriptions/{SUB}/resourceGroups/rg1/providers/Slipway.Example/secretNetworks/db1");
    let url = |path: &str, v: &str| format!("{base}{path}?api-version={v}");
    let (status, _) = call(
        &http,
        &mut seen,
        http.put(url(&format!("/subscriptions/{SUB}"), "2025-06-01"))
            .bearer_auth(&api_token)
            .json(&json!({"state": "Registered", "properties": {"tenantId": "t"}})),
    )
    .await;
    assert_eq!(status, 201);
    let body = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "adminPassword": marker}});
    let (status, created) = call(&http, &mut seen, http.put(url(&id, API)).bearer_auth(&jwt).json(&body)).await;
    assert_eq!(status, 201, "{created}");
    assert!(created["properties"].get("adminPassword").is_none(), "write-only: {created}");
    // A secret that breaks the schema is refused like any property, without echoing it.
    let short =
        json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "adminPassword": SHORT_SECRET}});
    let (status, refused) = call(&http, &mut seen, http.put(url(&id, API)).bearer_auth(&jwt).json(&short)).await;
    assert_eq!(status, 400, "{refused}");
    let wait = |http: reqwest::Client, u: String, t: String| async move {
        eventually("the resource done", Duration::from_secs(120), async || {
            let r: Value = http.get(&u).bearer_auth(&t).send().await.unwrap().json().await.unwrap_or(Value::Null);
            match r["properties"]["provisioningState"].as_str() {
                Some("Succeeded" | "Failed") => Ok(r),
                _ => Err(r.to_string()),
            }
        })
        .await
    };
    let done = wait(http.clone(), url(&id, API), jwt.clone()).await;
    assert_eq!(done["properties"]["provisioningState"], "Succeeded", "{done}");
    // The same secret again is no change (the stored sealed value is kept): 200, no job.
    let (status, _) = call(&http, &mut seen, http.put(url(&id, API)).bearer_auth(&jwt).json(&body)).await;
    assert_eq!(status, 200);
    // The job got the secret (the example playbook records which secrets it received).
    let state = std::fs::read_to_string(dir.path().join("state/slipway.example_secretnetworks/db1.json")).unwrap();
    let state: Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["secretsReceived"], json!(["adminPassword"]), "{state}");
    for path in [id.clone(), format!("/subscriptions/{SUB}/providers/Slipway.Example/secretNetworks")] {
        let (status, _) = call(&http, &mut seen, http.get(url(&path, API)).bearer_auth(&api_token)).await;
        assert_eq!(status, 200);
    }
    let (status, _) = call(&http, &mut seen, http.delete(url(&id, API)).bearer_auth(&jwt)).await;
    assert_eq!(status, 202);
    eventually("the delete finished", Duration::from_secs(120), async || {
        call(&http, &mut seen, http.get(url(&id, API)).bearer_auth(&jwt)).await.0 == 404
    })
    .await;
    // The activity log names the secret's path, never its value; so does the SIEM export.
    let activity =
        url(&format!("/subscriptions/{SUB}/providers/Microsoft.Insights/eventtypes/management/values"), "2015-04-01");
    let (status, entries) = call(&http, &mut seen, http.get(activity).bearer_auth(&api_token)).await;
    assert_eq!(status, 200, "{entries}");
    let create =
        entries["value"].as_array().unwrap().iter().find(|e| e["subStatus"]["value"] == "Created").expect("the create");
    let secret =
        create["propertyChanges"].as_array().unwrap().iter().find(|c| c["propertyName"] == "properties.adminPassword");
    assert_eq!(
        secret.map(|c| (c["secret"].clone(), c.get("afterValue").is_none())),
        Some((json!(true), true)),
        "{create}"
    );
    // The token minted on the host is in the platform's own log, the Admin's to read.
    let platform = url("/providers/Microsoft.Insights/eventtypes/management/values", "2015-04-01");
    let (status, minted) = call(&http, &mut seen, http.get(platform).bearer_auth(&api_token)).await;
    assert_eq!(status, 200, "{minted}");
    let first = &minted["value"][0];
    assert_eq!(
        (first["operationName"]["value"].as_str(), first["claims"]["principalType"].as_str()),
        (Some("Slipway.Authorization/apiTokens/write"), Some("Operator")),
        "{minted}"
    );
    let sink = dir.path().join("activity.jsonl");
    eventually("the SIEM export to have the create", Duration::from_secs(20), async || {
        std::fs::read_to_string(&sink).unwrap_or_default().contains("properties.adminPassword")
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();

    let markers = [
        ("secret property", marker.as_str()),
        ("API token", api_token_secret.as_str()),
        ("JWT", jwt_signature.as_str()),
        ("refused secret", SHORT_SECRET),
    ];
    let mut files = Vec::new();
    files_under(dir.path(), &mut files);
    let mut searched = 0;
    for path in &files {
        if path == &config || path == &key {
            continue; // what the operator wrote
        }
        let bytes = std::fs::read(path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for (what, m) in markers {
            assert!(!text.contains(m), "the {what} leaked into {}", path.display());
        }
        searched += 1;
    }
    for (what, m) in markers {
        assert!(!seen.contains(m), "the {what} leaked into an API response");
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("DEBUG"), "the debug log is there to search");
    println!("planted-secret scan: {searched} files and {} bytes of responses searched, 0 hits", seen.len());
}

/// The secrets of the AAP and PostgreSQL edges: the controller token, a basic-auth password,
/// a wrong token (whose refusal becomes a tenant's operation error), the webhook token and
/// the database password, plus a secret property sent to AAP. Everything the run leaves
/// (debug log, responses, the rows of its PostgreSQL schema, files) is searched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aap_and_postgres_secrets_appear_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let tag = uuid_like();
    let marker = |what: &str| format!("MARKER{what}{tag}");
    let (aap_token, aap_password, wrong_token, hook_token, pg_password, property) = (
        marker("aaptoken"),
        marker("aappassword"),
        marker("wrongtoken"),
        marker("hooktoken"),
        marker("pgpassword"),
        marker("property"),
    );
    let port = common::free_port();
    let mut sim_config = aap_sim::SimConfig {
        tick_ms: 20,
        token: Some(aap_token.clone()),
        users: vec![aap_sim::SimUser { username: "slipway".into(), password: aap_password.clone() }],
        ..aap_sim::SimConfig::default()
    };
    for t in &mut sim_config.job_templates {
        t.duration_seconds = 0.3;
    }
    sim_config.notifications.push(aap_sim::SimWebhook {
        url: format!("http://127.0.0.1:{port}/hooks/aap"),
        headers: std::collections::BTreeMap::from([("X-Slipway-Token".to_string(), hook_token.clone())]),
        ..aap_sim::SimWebhook::default()
    });
    let sim = aap_sim::Sim::start("127.0.0.1:0", sim_config).await.unwrap();
    for (file, secret) in [
        ("aap-token", &aap_token),
        ("aap-password", &aap_password),
        ("wrong-token", &wrong_token),
        ("hook-token", &hook_token),
    ] {
        write_private(&dir.path().join(file), secret);
    }
    let mut schema: Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo().join("examples/schemas/computeInstances.json")).unwrap(),
    )
    .unwrap();
    schema["properties"]["adminPassword"] = json!({"type": "string", "writeOnly": true});
    let schema_path = dir.path().join("secret-compute.json");
    std::fs::write(&schema_path, schema.to_string()).unwrap();
    let key = dir.path().join("secret.key");
    write_private(&key, &"cd".repeat(32));
    let pg_schema = common::replica::unique_schema("secrets");
    let pg_url = with_password(&common::replica::pg_url(), &pg_password);
    let aap_type = |ty: &str, kind: &str, provider: &str, extra: &str| {
        format!(
            "[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"{ty}\"\nkind = \"{kind}\"\napi_versions = [\"{API}\"]\nprovider = \"{provider}\"\npoll_interval_seconds = 0.3\n{extra}\n"
        )
    };
    let d = |f: &str| dir.path().join(f).display().to_string();
    let config = dir.path().join("slipway.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[server]
listen = "127.0.0.1:{port}"
retry_after_seconds = 0
[store]
url = "{pg_url}"
schema = "{pg_schema}"
[engine]
node_name = "secrets"
[secrets]
key_files = ["{key}"]
[[providers]]
name = "aap"
type = "aap"
url = "{sim}"
template_prefix = "slipway"
token_file = "{token}"
webhook_token_file = "{hook}"
[[providers]]
name = "aapbasic"
type = "aap"
url = "{sim}"
template_prefix = "slipway"
username = "slipway"
password_file = "{password}"
[[providers]]
name = "aapwrong"
type = "aap"
url = "{sim}"
template_prefix = "slipway"
token_file = "{wrong}"
{compute}{networks}{groups}{subnets}"#,
            key = key.display(),
            sim = sim.base_url(),
            token = d("aap-token"),
            hook = d("hook-token"),
            password = d("aap-password"),
            wrong = d("wrong-token"),
            compute = aap_type(
                "computeInstances",
                "ComputeInstance",
                "aap",
                &format!("schema = \"{}\"", schema_path.display())
            ),
            networks = aap_type("virtualNetworks", "VirtualNetwork", "aapbasic", ""),
            groups = aap_type("securityGroups", "SecurityGroup", "aapwrong", ""),
            // What the compute schema's `subnetId` references.
            subnets = aap_type("virtualNetworks/subnets", "Subnet", "aap", ""),
        ),
    )
    .unwrap();
    let log = dir.path().join("slipway.log");
    let mut child = common::spawn_slipway(&config, &log, "debug");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut seen = String::new();
    let up = ready_within(&http, &base, Duration::from_secs(30)).await;
    up.unwrap_or_else(|e| panic!("slipway did not come up ({e}): {}", std::fs::read_to_string(&log).unwrap()));
    let url = |id: &str| format!("{base}{id}?api-version={API}");
    let rid =
        |ty: &str, name: &str| format!("/subscriptions/{SUB}/resourceGroups/rg1/providers/Slipway.Example/{ty}/{name}");
    let (vm, net, group) =
        (rid("computeInstances", "vm1"), rid("virtualNetworks", "net1"), rid("securityGroups", "sg1"));
    let bodies = [
        (
            &vm,
            json!({"location": "local", "properties": {"size": "small", "image": "debian", "adminPassword": property}}),
        ),
        (&net, json!({"location": "local", "properties": {"addressSpace": "10.1.0.0/16"}})),
        (&group, json!({"location": "local", "properties": {}})),
    ];
    for (id, body) in &bodies {
        let (status, created) = call(&http, &mut seen, http.put(url(id)).json(body)).await;
        assert!(status == 201, "{id}: {status} {created}");
    }
    let mut ends = Vec::new();
    for (id, _) in &bodies {
        let end = eventually(&format!("{id} done"), Duration::from_secs(60), async || {
            let (_, r) = call(&http, &mut seen, http.get(url(id))).await;
            match r["properties"]["provisioningState"].as_str() {
                Some(s @ ("Succeeded" | "Failed")) => Ok(s.to_string()),
                _ => Err(r.to_string()),
            }
        })
        .await;
        ends.push(end);
    }
    assert_eq!(ends, ["Succeeded", "Succeeded", "Failed"], "the wrong token fails its resource");
    for (id, _) in &bodies {
        let (status, _) = call(&http, &mut seen, http.delete(url(id))).await;
        assert!(status == 202 || status == 200, "{id}: {status}");
    }
    eventually("the deletes finished", Duration::from_secs(60), async || {
        for (id, _) in &bodies[..2] {
            if call(&http, &mut seen, http.get(url(id))).await.0 != 404 {
                return Err(format!("{id} still there"));
            }
        }
        Ok(())
    })
    .await;
    assert!(sim.handle().jobs().len() >= 4, "the jobs ran on the simulator");
    let _ = child.kill();
    let _ = child.wait();
    sim.shutdown().await;

    let markers = [
        ("AAP token", aap_token.as_str()),
        ("AAP password", aap_password.as_str()),
        ("refused AAP token", wrong_token.as_str()),
        ("webhook token", hook_token.as_str()),
        ("PostgreSQL password", pg_password.as_str()),
        ("secret property", property.as_str()),
    ];
    let rows = schema_rows(&common::replica::pg_url(), &pg_schema).await;
    assert!(rows.contains("computeInstances"), "the schema's rows are there to search");
    for (what, m) in markers {
        assert!(!rows.contains(m), "the {what} leaked into the database");
        assert!(!seen.contains(m), "the {what} leaked into an API response");
    }
    let mut files = Vec::new();
    files_under(dir.path(), &mut files);
    let mut searched = 0;
    for path in &files {
        if path == &config || path == &key || path.parent() == Some(dir.path()) && path.extension().is_none() {
            continue; // what the operator wrote: the config, the key, the secret files
        }
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        for (what, m) in markers {
            assert!(!text.contains(m), "the {what} leaked into {}", path.display());
        }
        searched += 1;
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("DEBUG") && logged.contains("job notification"), "the webhook was called and logged");
    println!(
        "planted-secret scan (AAP, webhook, PostgreSQL): {searched} files, {} bytes of rows, {} bytes of responses, 0 hits",
        rows.len(),
        seen.len()
    );
}

/// `url` with `password` as the user's password (the test server trusts every connection,
/// so the password travels only as far as Slipway's own handling of its configuration).
fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    match rest.split_once('@') {
        Some((user, host)) => format!("{scheme}://{}:{password}@{host}", user.split(':').next().unwrap()),
        None => format!("{scheme}://postgres:{password}@{rest}"),
    }
}

/// Every row of every table in `schema`, as JSON text; the schema is dropped afterwards.
async fn schema_rows(url: &str, schema: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let tables = client
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = $1", &[&schema])
        .await
        .unwrap();
    let mut text = String::new();
    for t in tables {
        let table: String = t.get(0);
        let sql = format!("SELECT row_to_json(t)::text FROM \"{schema}\".\"{table}\" t");
        for row in client.query(&sql, &[]).await.unwrap() {
            text.push_str(&row.get::<_, String>(0));
            text.push('\n');
        }
    }
    client.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE")).await.unwrap();
    text
}

fn uuid_like() -> String {
    format!("{:x}", SystemClock.now().as_millis() as u64 ^ 0x5eed_5eed_5eed)
}
