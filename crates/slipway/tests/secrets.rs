//! Secrets never leak. A run of the real binary with authentication (a JWT and an API
//! token), a type with a secret property and real playbooks, each secret carrying a unique
//! marker; then everything the run left — the debug log, every API response, the database
//! files, the job directories once the jobs ended — is searched for the markers.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{API, SUB};
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};

const AUD: &str = "api://slipway";

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

[auth]
api_tokens = true
admins = ["root", "bot"]

[[auth.issuers]]
issuer = "{issuer}"
audiences = ["{AUD}"]
"#,
            schema = schema_path.display(),
            key = key.display(),
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
    let deadline = Instant::now() + Duration::from_secs(20);
    while http.get(format!("{base}/readyz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "slipway did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every response, headers and body, goes into `seen`.
    async fn call(http: &reqwest::Client, seen: &mut String, req: reqwest::RequestBuilder) -> (u16, Value) {
        let r = http.execute(req.build().unwrap()).await.unwrap();
        let status = r.status().as_u16();
        seen.push_str(&format!("{:?}\n", r.headers()));
        let text = r.text().await.unwrap();
        seen.push_str(&text);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
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
    let short = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16", "adminPassword": "MARKER"}});
    let (status, refused) = call(&http, &mut seen, http.put(url(&id, API)).bearer_auth(&jwt).json(&short)).await;
    assert_eq!(status, 400, "{refused}");
    let wait = |http: reqwest::Client, u: String, t: String| async move {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let r: Value = http.get(&u).bearer_auth(&t).send().await.unwrap().json().await.unwrap_or(Value::Null);
            if let Some(s) = r["properties"]["provisioningState"].as_str()
                && matches!(s, "Succeeded" | "Failed")
            {
                return r;
            }
            assert!(Instant::now() < deadline, "not done: {r}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
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
    let deadline = Instant::now() + Duration::from_secs(120);
    while call(&http, &mut seen, http.get(url(&id, API)).bearer_auth(&jwt)).await.0 != 404 {
        assert!(Instant::now() < deadline, "delete did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();

    let markers = [
        ("secret property", marker.as_str()),
        ("API token", api_token_secret.as_str()),
        ("JWT", jwt_signature.as_str()),
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

fn uuid_like() -> String {
    format!("{:x}", SystemClock.now().as_millis() as u64 ^ 0x5eed_5eed_5eed)
}
