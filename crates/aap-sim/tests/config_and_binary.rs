//! The simulator's configuration file and its binary: the shipped example parses and serves
//! Slipway's templates, the binary serves until SIGTERM and says its version.

use std::time::Duration;

use aap_sim::{SimConfig, SimOrganization};
use serde_json::Value;

#[test]
fn example_configuration_documents_a_valid_file() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/aap-sim.toml");
    let text = std::fs::read_to_string(&path).expect("the example");
    let cfg = SimConfig::from_toml(&text).expect("the example parses");
    assert_eq!(cfg.job_templates, SimConfig::default().job_templates, "it serves Slipway's example templates");
    assert_eq!(cfg.users[0].username, "admin");
    assert!(cfg.notifications.is_empty(), "no webhooks unless asked for");
    // Its commented-out lists are valid too, uncommented.
    let uncommented: String = text
        .lines()
        // Commented-out keys have `#` right before them; prose has `# `.
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if !rest.is_empty() && !rest.starts_with([' ', '#']) => rest,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let full = SimConfig::from_toml(&uncommented).expect("the commented examples parse");
    assert_eq!(full.job_templates.len(), 3);
    assert_eq!(full.notifications[0].headers["X-Slipway-Token"], "change-me", "the header Slipway checks");
    assert!(full.notifications[0].url.ends_with("/hooks/aap"));
    assert!(SimConfig::from_toml("tick_ms = 5\nbogus = 1").is_err(), "unknown keys are rejected");
    assert!(SimConfig::from_toml("[[job_templates]]\nid = 1\nname = \"x\"\noutcome = \"meh\"").is_err());
    let dup = "[[job_templates]]\nid = 1\nname = \"a\"\n[[workflow_job_templates]]\nid = 1\nname = \"b\"";
    assert!(SimConfig::from_toml(dup).is_err(), "template ids are shared");
    // Defaults (also the binary's without --config): Slipway's example templates.
    let d = SimConfig::from_toml("").unwrap();
    assert_eq!(d, SimConfig::default());
    assert_eq!(d.organizations, vec![SimOrganization { id: 1, name: "Default".into() }]);
    let names: Vec<&str> = d.job_templates.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"slipway-create-virtual-network") && names.contains(&"slipway-delete-compute-instance"));
    assert!(names.contains(&"slipway-validate-cluster") && names.contains(&"slipway-restart-compute-instance"));
    assert_eq!(d.job_templates.len(), 19, "8 of the first example types, 11 of those that compose");
    assert_eq!(d.workflow_job_templates[0].name, "slipway-workflow-demo");
    assert!(d.job_templates.iter().all(|t| t.ask_variables_on_launch && t.allow_simultaneous));
    assert!(d.validated().is_ok());
}

/// Runs the binary, returns its address (from its stdout line) and the child.
async fn spawn_binary(args: &[&std::ffi::OsStr]) -> (String, tokio::process::Child) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_aap-sim"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn aap-sim");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.unwrap().unwrap().unwrap();
    let addr = line.strip_prefix("aap-sim listening on ").and_then(|l| l.split(' ').next()).expect(&line).to_string();
    (addr, child)
}

async fn sigterm(mut child: tokio::process::Child) {
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "graceful exit: {status}");
}

#[tokio::test]
async fn the_binary_serves_until_sigterm() {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/aap-sim.toml");
    let (addr, child) = spawn_binary(&["--config".as_ref(), config.as_os_str()]).await;
    let http = reqwest::Client::new();
    let ping = http.get(format!("http://{addr}/api/v2/ping/")).send().await.unwrap();
    assert_eq!(ping.status().as_u16(), 200);
    let unauthenticated = http.get(format!("http://{addr}/api/v2/job_templates/")).send().await.unwrap();
    assert_eq!(unauthenticated.status().as_u16(), 401);
    let tpl: Value = http
        .get(format!("http://{addr}/api/v2/job_templates/?name=slipway-validate-cluster"))
        .bearer_auth("slipway-dev-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tpl["results"][0]["summary_fields"]["organization"]["name"], "Default");
    sigterm(child).await;

    // Without --config: open, with Slipway's example templates.
    let (addr, child) = spawn_binary(&[]).await;
    let tpl: Value = http
        .get(format!("http://{addr}/api/v2/job_templates/?name=slipway-create-compute-instance"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tpl["count"], 1);
    assert_eq!(tpl["results"][0]["ask_variables_on_launch"], true);
    sigterm(child).await;
}

#[test]
fn the_binary_says_its_version_and_usage() {
    let run = |arg: &str| std::process::Command::new(env!("CARGO_BIN_EXE_aap-sim")).arg(arg).output().unwrap();
    let version = run("--version");
    assert!(version.status.success());
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), format!("aap-sim {}", env!("CARGO_PKG_VERSION")));
    let help = run("--help");
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--listen"));
    assert_eq!(run("--bogus").status.code(), Some(2), "a usage error");
}

#[test]
fn the_handle_can_be_shared_across_threads() {
    fn assert_send_sync_clone<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync_clone::<aap_sim::SimHandle>();
}
