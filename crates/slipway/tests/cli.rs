//! The client CLI end to end: the built `slipway` binary against a real server on loopback
//! (the example playbooks), with its profile file in a temp dir. Each test checks what a
//! script relies on: the exit code per outcome, `-o json` that parses, and no terminal
//! escapes unless stderr is a terminal.

use crate::common;

use std::path::PathBuf;

use crate::common::{SUB, TestServer, composite_types, free_port, rid};
use serde_json::Value;

/// How a run of the binary ended.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }

    fn expect(self, code: i32) -> Run {
        assert_eq!(self.code, code, "exit code\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        assert!(!self.stderr.contains("\x1b["), "escape codes without a terminal: {:?}", self.stderr);
        self
    }
}

/// The binary with a private profile file and, by default, the server and defaults from
/// the environment (as a CI job would set them).
struct Cli {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Cli {
    fn new(base: &str) -> Cli {
        let mut cli = Cli::bare();
        for (k, v) in [("SLIPWAY_URL", base), ("SLIPWAY_SUBSCRIPTION", SUB), ("SLIPWAY_RESOURCE_GROUP", "rg1")] {
            cli.env.push((k.into(), v.into()));
        }
        cli
    }

    /// Nothing but the profile file's path.
    fn bare() -> Cli {
        let dir = tempfile::tempdir().unwrap();
        let env = vec![("SLIPWAY_CONFIG".to_string(), dir.path().join("config.toml").display().to_string())];
        Cli { dir, env }
    }

    fn command(&self, program: &str, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(program);
        c.args(args).stdin(std::process::Stdio::null());
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("SLIPWAY_")) {
            c.env_remove(k);
        }
        c.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        c
    }

    async fn run(&self, args: &[&str]) -> Run {
        let out = self.command(env!("CARGO_BIN_EXE_slipway"), args).output().await.expect("run slipway");
        Run {
            code: out.status.code().expect("exit code"),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        }
    }

    async fn run_owned(&self, args: &[String]) -> Run {
        self.run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

const VNET: &str = "Slipway.Example/virtualNetworks";

#[tokio::test(flavor = "multi_thread")]
async fn a_resource_lives_and_dies_through_the_cli() {
    let s = TestServer::start().await;
    let cli = Cli::new(&s.base);
    let put = ["resource", "put", "-t", VNET, "-n", "net1", "--set", "addressSpace=10.0.0.0/16", "--tag", "env=dev"];
    let created = cli.run(&[&put[..], &["-o", "json"]].concat()).await.expect(0).json();
    assert_eq!(created["properties"]["provisioningState"], "Succeeded", "{created}");
    assert_eq!((created["tags"]["env"].as_str(), created["location"].as_str()), (Some("dev"), Some("local")));
    assert!(cli.run(&put).await.expect(0).stdout.contains("Succeeded"), "the default table shows the state");

    let id = rid("virtualNetworks", "net1");
    let yaml = cli.run(&["resource", "get", &id, "-o", "yaml"]).await.expect(0).stdout;
    assert!(yaml.lines().any(|l| l == "name: net1"), "{yaml}");
    let listed = cli.run(&["resource", "list", "-t", VNET, "-o", "json"]).await.expect(0).json();
    assert_eq!(listed[0]["id"], id.as_str());
    let names =
        cli.run(&["resource", "list", "--filter", "tagName eq 'env'", "--query", "[].name", "-o", "json"]).await;
    assert_eq!(names.expect(0).json(), serde_json::json!(["net1"]));
    // The group the resource is in.
    let groups = cli.run(&["group", "list", "--query", "[].name", "-o", "json"]).await.expect(0).json();
    assert_eq!(groups, serde_json::json!(["rg1"]));
    assert_eq!(cli.run(&["group", "show", "-o", "json"]).await.expect(0).json()["name"], "rg1");
    let missing = cli.run(&["group", "show", "rg-none"]).await.expect(7);
    assert!(missing.stderr.contains("ResourceGroupNotFound"), "{}", missing.stderr);

    let patched = cli.run(&["resource", "patch", &id, "--set", "dnsServers=[\"10.0.0.2\"]", "-o", "json"]).await;
    assert_eq!(patched.expect(0).json()["properties"]["dnsServers"][0], "10.0.0.2");

    let history = cli.run(&["jobs", &id, "-o", "json"]).await.expect(0).json();
    assert_eq!(history["value"].as_array().map(Vec::len), Some(2), "{history}");
    let described = cli.run(&["describe", &id, "-o", "json"]).await.expect(0).json();
    assert_eq!(described["provisioningState"], "Succeeded");
    assert_eq!(described["spec"]["addressSpace"], "10.0.0.0/16");
    assert_eq!(described["children"]["subnets"], serde_json::json!([]), "{described}");
    assert_eq!(described["referencedBy"], serde_json::json!([]), "{described}");
    assert_eq!(described["recentOperations"][0]["status"], "Succeeded", "{described}");
    assert!(cli.run(&["describe", &id]).await.expect(0).stdout.contains("children:"));
    // A child collection: by the parent's name in the group, or its id.
    let subnets = format!("{VNET}/subnets");
    cli.run(&["resource", "put", "-t", &subnets, "-n", "net1/web", "--set", "addressPrefix=10.0.1.0/24"])
        .await
        .expect(0);
    for parent in ["net1", id.as_str()] {
        let args = ["resource", "list", "-t", &subnets, "--parent", parent, "--query", "[].name", "-o", "json"];
        assert_eq!(cli.run(&args).await.expect(0).json(), serde_json::json!(["web"]), "--parent {parent}");
    }
    let orphan = cli.run(&["resource", "list", "-t", &subnets]).await.expect(2);
    assert!(orphan.stderr.contains("--parent"), "{}", orphan.stderr);

    let ops = cli.run(&["op", "list", "--status", "Succeeded", "-o", "json"]).await.expect(0).json();
    let newest = ops[0]["name"].as_str().expect("an operation").to_string();
    assert_eq!(ops.as_array().map(Vec::len), Some(3), "the network's two and the subnet's: {ops}");
    let shown = cli.run(&["op", "show", &newest, "-o", "json"]).await.expect(0).json();
    assert_eq!(shown["status"], "Succeeded");
    let by_url = cli.run(&["op", "wait", shown["statusUrl"].as_str().unwrap(), "-o", "json"]).await;
    assert_eq!(by_url.expect(0).json()["name"], newest.as_str());
    let logs = cli.run(&["op", "logs", &newest]).await.expect(0);
    assert!(logs.stdout.contains("PLAY"), "{}", logs.stdout);
    assert_eq!(cli.run(&["op", "logs", &newest, "--tail", "1"]).await.expect(0).stdout.trim().lines().count(), 1);
    let streamed = cli.run(&["op", "logs", "-f", &newest]).await.expect(0);
    assert!(streamed.stdout.contains("PLAY RECAP"), "{}", streamed.stdout);

    // What-if: the table lists the changed property and the task; nothing changes.
    let table = cli.run(&["resource", "what-if", &id, "--set", "addressSpace=10.9.0.0/16"]).await.expect(0).stdout;
    for shown in ["Modify", "properties.addressSpace", "10.9.0.0/16", "task 'Record the resource' on localhost"] {
        assert!(table.contains(shown), "{shown} in {table}");
    }
    let unchanged = cli.run(&["resource", "get", &id, "-o", "json"]).await.expect(0).json();
    assert_eq!(unchanged["properties"]["addressSpace"], "10.0.0.0/16");
    let delete = cli.run(&["resource", "what-if", &id, "--delete", "-o", "json"]).await.expect(0).json();
    assert_eq!(delete["properties"]["changes"][0]["changeType"], "Delete", "{delete}");
    let checked = cli.run(&["resource", "check-drift", &id, "-o", "json"]).await.expect(0).json();
    assert_eq!(checked["properties"]["drift"]["state"], "InSync", "{checked}");

    cli.run(&["resource", "delete", &id]).await.expect(0);
    let gone = cli.run(&["resource", "get", &id]).await.expect(7);
    assert!(gone.stderr.contains("404") && gone.stderr.contains("ResourceNotFound"), "{}", gone.stderr);
    let missing = cli.run(&["op", "show", "0190a0a0-0000-7000-8000-000000000000"]).await.expect(7);
    assert!(missing.stderr.contains("ResourceNotFound"), "{}", missing.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_is_made_tagged_and_deleted_with_what_it_holds() {
    let s = TestServer::start().await;
    let cli = Cli::new(&s.base);
    // A group of its own: made, tagged, listed by tag, and deleted with what it holds.
    let made = cli.run(&["group", "create", "team", "--location", "local", "--tag", "env=dev", "-o", "json"]).await;
    assert_eq!(made.expect(0).json()["tags"], serde_json::json!({"env": "dev"}));
    cli.run(&["group", "update", "team", "--tag", "env=prod", "--tag", "owner=ops"]).await.expect(0);
    let tagged = cli.run(&["group", "list", "--tag", "owner=ops", "--query", "[].name", "-o", "json"]).await;
    assert_eq!(tagged.expect(0).json(), serde_json::json!(["team"]));
    let inside = ["resource", "put", "-t", VNET, "-g", "team", "-n", "inner", "--set", "addressSpace=10.5.0.0/16"];
    cli.run(&inside).await.expect(0);
    // Tags at their own scope: the group's by name, the network's by id.
    let merged = cli.run(&["tag", "merge", "team", "--tag", "cost=1", "-o", "json"]).await.expect(0).json();
    assert_eq!(merged["properties"]["tags"], serde_json::json!({"env": "prod", "owner": "ops", "cost": "1"}));
    let inner = format!("/subscriptions/{SUB}/resourceGroups/team/providers/{VNET}/inner");
    cli.run(&["tag", "replace", &inner, "--tag", "a=1", "--tag", "b=2"]).await.expect(0);
    cli.run(&["tag", "delete", &inner, "--tag", "a"]).await.expect(0);
    let shown = cli.run(&["tag", "show", &inner, "-o", "json"]).await.expect(0).json();
    assert_eq!(shown["properties"]["tags"], serde_json::json!({"b": "2"}));
    let deleted = cli.run(&["group", "delete", "team", "-o", "json"]).await.expect(0);
    let deleted_json = deleted.json();
    assert_eq!(deleted_json["status"], "Succeeded", "{}", deleted.stdout);
    assert!(
        deleted.stderr.contains("/resourceGroups/team/providers/Slipway.Example/virtualNetworks/inner"),
        "{}",
        deleted.stderr
    );
    cli.run(&["group", "show", "team"]).await.expect(7);
    // The group's delete named the network's own delete, on its own namespace's path.
    let child = &deleted_json["properties"]["childOperations"][0];
    let (code, op) = s.follow(&format!("{}{}?api-version=2025-06-01", s.base, child["id"].as_str().unwrap())).await;
    assert_eq!((code, op["status"].as_str()), (200, Some("Succeeded")), "{op}");
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_tell_how_an_operation_ended() {
    let s = TestServer::start().await;
    let cli = Cli::new(&s.base);
    let vnet = |name: &str, extra: &str| {
        let mut args: Vec<String> =
            ["resource", "put", "-t", VNET, "-n", name, "--set", "addressSpace=10.0.0.0/16"].map(String::from).to_vec();
        if !extra.is_empty() {
            args.extend(["--set".to_string(), extra.to_string()]);
        }
        args
    };
    let failed = cli.run_owned(&vnet("bad", "simulateFailure=true")).await.expect(1);
    assert!(failed.stderr.contains("failed") && failed.stderr.contains("ProvisioningFailed"), "{}", failed.stderr);

    let mut slow = vnet("slow", "delaySeconds=60");
    slow.extend(["--no-wait", "-o", "json"].map(String::from));
    let started = cli.run_owned(&slow).await.expect(0).json();
    let op = started["name"].as_str().expect("the operation's id").to_string();
    assert!(["Accepted", "Provisioning"].contains(&started["status"].as_str().unwrap()), "{started}");
    let waited = cli.run(&["op", "wait", &op, "--timeout", "0.5"]).await.expect(4);
    assert!(waited.stderr.contains("still"), "{}", waited.stderr);
    let canceled = cli.run(&["op", "cancel", &op, "-o", "json"]).await.expect(3);
    assert_eq!(canceled.json()["status"], "Canceled");

    // Under a terminal the progress line shows the status as it changes; `script` gives one.
    let quoted: Vec<String> = vnet("shown", "delaySeconds=1").iter().map(|a| format!("'{a}'")).collect();
    let shell = format!("{} {}", env!("CARGO_BIN_EXE_slipway"), quoted.join(" "));
    let out = cli.command("script", &["-qec", &shell, "/dev/null"]).output().await.expect("run script");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    let live = regex::Regex::new(r"(Accepted|Provisioning)  \d+s").unwrap();
    assert!(live.is_match(&screen) && screen.contains("Succeeded after"), "{screen:?}");
    assert!(screen.contains("\x1b["), "a terminal gets the live line's escapes: {screen:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn actions_run_and_wait() {
    let s = TestServer::start_full("", "", &composite_types(), |_| {}).await;
    let cli = Cli::new(&s.base);
    let body = cli.path("machine.json");
    std::fs::write(&body, r#"{"properties": {"size": "small"}}"#).unwrap();
    let machine = ["-t", "Slipway.Example/machines", "-n", "m1"];
    let put = [&["resource", "put", "-f", body.to_str().unwrap(), "--set", "image=rhel"][..], &machine].concat();
    cli.run(&put).await.expect(0);
    let done = cli
        .run(&[&["resource", "action", "-a", "restart", "--set", "force=true", "-o", "json"][..], &machine].concat())
        .await;
    let done = done.expect(0).json();
    assert_eq!(
        (done["status"].as_str(), done["properties"]["action"].as_str()),
        (Some("Succeeded"), Some("restart")),
        "{done}"
    );
    let unknown = cli.run(&[&["resource", "action", "-a", "explode"][..], &machine].concat()).await.expect(7);
    assert!(unknown.stderr.contains("404"), "{}", unknown.stderr);
    // Retry now: refused while the resource is Succeeded; a failed one runs again and fails
    // again (its spec asks to), as a retry.
    let refused = cli.run(&[&["resource", "retry"][..], &machine].concat()).await.expect(7);
    assert!(refused.stderr.contains("only a Failed or Canceled resource can be retried"), "{}", refused.stderr);
    cli.run(&[&["resource", "patch", "--set", "simulateFailure=true"][..], &machine].concat()).await.expect(1);
    let retried = cli.run(&[&["resource", "retry", "--no-wait", "-o", "json"][..], &machine].concat()).await;
    let op = retried.expect(0).json();
    assert_eq!(op["properties"]["rerun"], "retry", "{op}");
    let url = op["statusUrl"].as_str().unwrap().to_string();
    let failed = cli.run(&["op", "wait", &url]).await.expect(1);
    assert!(failed.stderr.contains("simulated failure"), "{}", failed.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_platform_is_managed_with_a_token_and_refuses_a_bad_one() {
    let tables = "\n[auth]\napi_tokens = true\nadmins = [\"root\"]\n";
    // The offline command makes the first Admin token, before the server holds the store.
    let mut root = String::new();
    let s = TestServer::start_full("", "", tables, |dir| {
        let config = dir.join("offline.toml");
        std::fs::write(&config, common::config_text(dir, "") + tables).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slipway"))
            .args(["api-token", "create", "--principal", "root", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        root = String::from_utf8_lossy(&out.stdout).trim().to_string();
    })
    .await;

    let mut cli = Cli::new(&s.base);
    cli.env.push(("SLIPWAY_TOKEN".into(), "not-a-token".into()));
    let refused = cli.run(&["resource", "list"]).await.expect(6);
    assert!(refused.stderr.contains("401"), "{}", refused.stderr);
    cli.env.pop();
    cli.env.push(("SLIPWAY_TOKEN".into(), root.clone()));

    let sub = cli.run(&["subscription", "register", SUB, "--tenant", "t1", "-o", "json"]).await.expect(0).json();
    assert_eq!(sub["state"], "Registered");
    assert_eq!(cli.run(&["subscription", "show", "-o", "json"]).await.expect(0).json()["properties"]["tenantId"], "t1");
    let warned = cli.run(&["subscription", "set-state", SUB, "Warned", "-o", "json"]).await.expect(0).json();
    assert_eq!((warned["state"].as_str(), warned["properties"]["tenantId"].as_str()), (Some("Warned"), Some("t1")));
    assert_eq!(
        cli.run(&["subscription", "list", "--query", "[].subscriptionId", "-o", "json"]).await.expect(0).json()[0],
        SUB
    );

    let create = ["role-assignment", "create", "--role", "Reader", "--principal", "alice", "-o", "json"];
    let assignment = cli.run(&create).await.expect(0).json();
    let assignment_id = assignment["name"].as_str().unwrap().to_string();
    let listed = cli.run(&["role-assignment", "list", "--query", "[].properties.principalId", "-o", "json"]).await;
    assert_eq!(listed.expect(0).json(), serde_json::json!(["alice"]));
    cli.run(&["role-assignment", "delete", &assignment_id]).await.expect(0);

    let token = cli.run(&["token", "create", "--principal", "bot", "--description", "ci"]).await.expect(0);
    assert!(token.stdout.trim().len() > 20 && !token.stderr.contains(token.stdout.trim()), "printed once, on stdout");
    let tokens = cli.run(&["token", "list", "-o", "json"]).await.expect(0);
    assert!(!tokens.stdout.contains(token.stdout.trim()), "a list never shows a secret");
    let bot =
        tokens.json().as_array().unwrap().iter().find(|t| t["properties"]["principal"] == "bot").cloned().unwrap();
    cli.run(&["token", "revoke", bot["name"].as_str().unwrap()]).await.expect(0);
    cli.run(&["token", "revoke", bot["name"].as_str().unwrap()]).await.expect(7);
}

#[tokio::test(flavor = "multi_thread")]
async fn profiles_supply_defaults_and_flags_and_the_environment_override_them() {
    let s = TestServer::start().await;
    let closed = format!("http://127.0.0.1:{}", free_port());
    let mut cli = Cli::bare();
    cli.env.push(("SLIPWAY_TOKEN".into(), "secret-in-profile".into()));
    let set = ["config", "set-profile", "lab", "--server", &s.base, "--token-from-env", "--default-subscription", SUB];
    cli.run(&set).await.expect(0);
    cli.run(&["config", "set-profile", "lab", "--default-resource-group", "rg1"]).await.expect(0);
    cli.run(&["config", "set-profile", "elsewhere", "--server", &closed]).await.expect(0);
    cli.env.pop();
    let file = std::fs::read_to_string(cli.path("config.toml")).unwrap();
    assert!(file.contains("secret-in-profile") && file.contains("current = \"lab\""), "{file}");

    let shown = cli.run(&["config", "show", "-o", "json"]).await.expect(0);
    assert!(!shown.stdout.contains("secret-in-profile"), "a token is never shown: {}", shown.stdout);
    let shown = shown.json();
    assert_eq!((shown["url"].as_str(), shown["resourceGroup"].as_str()), (Some(s.base.as_str()), Some("rg1")));
    assert_eq!(shown["token"], "(set)");

    cli.run(&["resource", "list", "-o", "json"]).await.expect(0);
    let unreachable = cli.run(&["resource", "list", "--url", &closed]).await.expect(5);
    assert!(unreachable.stderr.contains("cannot connect"), "{}", unreachable.stderr);
    cli.run(&["config", "use", "elsewhere"]).await.expect(0);
    cli.run(&["resource", "list", "-s", SUB]).await.expect(5);
    cli.run(&["resource", "list", "--profile", "lab", "-o", "json"]).await.expect(0);
    cli.env.push(("SLIPWAY_PROFILE".into(), "lab".into()));
    cli.run(&["resource", "list", "-o", "json"]).await.expect(0);
    cli.env.push(("SLIPWAY_URL".into(), closed.clone()));
    cli.run(&["resource", "list"]).await.expect(5);
    cli.run(&["resource", "list", "--url", &s.base, "-o", "json"]).await.expect(0);
    cli.run(&["config", "use", "nobody"]).await.expect(2);
}

#[tokio::test]
async fn help_completions_and_man_pages_need_no_server() {
    let cli = Cli::bare();
    let bare = cli.run(&[]).await.expect(2);
    assert!(bare.stdout.contains("Exit codes: 0 succeeded"), "{}", bare.stdout);
    cli.run(&["resource", "put", "--no-such-flag"]).await.expect(2);
    let bash = cli.run(&["completions", "bash"]).await.expect(0);
    assert!(bash.stdout.contains("slipway__resource__put") || bash.stdout.contains("resource"), "{}", bash.stdout);
    let dir = cli.path("man");
    cli.run(&["man", "--dir", dir.to_str().unwrap()]).await.expect(0);
    for page in ["slipway.1", "slipway-resource-put.1", "slipway-op-logs.1"] {
        assert!(dir.join(page).is_file(), "{page}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_event_feed_is_read_and_followed() {
    use tokio::io::AsyncBufReadExt;
    let s = TestServer::start().await;
    let cli = Cli::new(&s.base);
    cli.run(&["resource", "put", "-t", VNET, "-n", "feed1", "--set", "addressSpace=10.0.0.0/16"]).await.expect(0);
    let read = cli.run(&["events", "-o", "json"]).await.expect(0);
    let events = read.json();
    let kinds: Vec<&str> = events.as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    // The group the first PUT made, then the resource's life.
    let expected = ["resourceCreated", "resourceCreated", "resourceStateChanged", "resourceStateChanged"];
    assert_eq!(kinds, expected, "{events}");
    assert_eq!(events[0]["resourceId"], format!("/subscriptions/{SUB}/resourceGroups/rg1"), "{events}");
    assert!(read.stderr.contains("cursor 4"), "{}", read.stderr);
    let id = rid("virtualNetworks", "feed1");
    let since = cli.run(&["events", &id, "--since", "2", "-o", "json"]).await.expect(0).json();
    assert_eq!(since.as_array().map(Vec::len), Some(2), "{since}");
    let table = cli.run(&["events"]).await.expect(0).stdout;
    assert!(table.contains("resourceCreated") && table.contains("Succeeded"), "{table}");

    // Following, from the cursor the read printed (not `latest`: the follower may connect
    // after the create below): each event a line as it commits.
    let mut follower = cli
        .command(env!("CARGO_BIN_EXE_slipway"), &["events", "-f", "--since", "4", "-o", "json"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("follow");
    let mut lines = tokio::io::BufReader::new(follower.stdout.take().unwrap()).lines();
    cli.run(&["resource", "put", "-t", VNET, "-n", "feed2", "--set", "addressSpace=10.1.0.0/16"]).await.expect(0);
    let mut seen = Vec::new();
    let ended = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            seen.push(event["type"].as_str().unwrap().to_string());
            if event["provisioningState"] == "Succeeded" {
                return event;
            }
        }
        panic!("the follower stopped: {seen:?}");
    })
    .await
    .expect("the create's end, followed");
    assert_eq!(ended["resourceId"], rid("virtualNetworks", "feed2"));
    assert_eq!(seen.first().map(String::as_str), Some("resourceCreated"));
    follower.kill().await.unwrap();
}

/// The activity log through the CLI: who changed what, filtered by status and resource,
/// and followed as requests are recorded — a refusal included.
#[tokio::test(flavor = "multi_thread")]
async fn the_activity_log_is_read_filtered_and_followed() {
    use tokio::io::AsyncBufReadExt;
    let s = TestServer::start().await;
    let cli = Cli::new(&s.base);
    cli.run(&["resource", "put", "-t", VNET, "-n", "act1", "--set", "addressSpace=10.0.0.0/16"]).await.expect(0);
    let read = cli.run(&["activity", "--since", "1h", "-o", "json"]).await.expect(0).json();
    let operations: Vec<&str> =
        read.as_array().unwrap().iter().map(|e| e["operationName"]["value"].as_str().unwrap()).collect();
    assert_eq!(operations, ["Slipway.Example/virtualNetworks/write"], "{read}");
    assert!(
        read[0]["properties"]["userAgent"].as_str().unwrap().starts_with("slipway"),
        "the CLI names itself: {read}"
    );
    let table = cli.run(&["activity"]).await.expect(0).stdout;
    assert!(table.contains("virtualNetworks/write") && table.contains("Created"), "{table}");
    let id = rid("virtualNetworks", "act1");
    assert_eq!(
        cli.run(&["activity", "--resource", &id, "-o", "json"]).await.expect(0).json().as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        cli.run(&["activity", "--status", "Failed", "-o", "json"]).await.expect(0).json(),
        serde_json::json!([])
    );
    assert_eq!(cli.run(&["activity", "--since", "yesterday"]).await.code, 2, "a bad --since is a usage error");

    let mut follower = cli
        .command(env!("CARGO_BIN_EXE_slipway"), &["activity", "-f", "--since", "1h", "-o", "json"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("follow");
    let mut lines = tokio::io::BufReader::new(follower.stdout.take().unwrap()).lines();
    // A refused write (a property the schema refuses) is recorded too.
    cli.run(&["resource", "put", "-t", VNET, "-n", "act2", "--set", "addressSpace=5"]).await;
    let mut seen = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let entry: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            seen.push(entry["resourceId"].as_str().unwrap().to_string());
            if entry["status"]["value"] == "Failed" {
                assert_eq!(entry["resourceId"], rid("virtualNetworks", "act2"));
                return;
            }
        }
        panic!("the follower stopped: {seen:?}");
    })
    .await
    .expect("the refusal, followed");
    assert_eq!(seen.first(), Some(&id), "the earlier entry first: {seen:?}");
    follower.kill().await.unwrap();
}

/// The guardrails through the CLI: usage beside limits, a limit set, a lock that refuses a
/// delete — the refusal naming the lock — and a policy from a file, assigned and found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guardrails_are_managed_and_a_refusal_names_its_guardrail() {
    let meters = "\n[[quota.meters]]\nname = \"networks\"\ntype = \"Slipway.Example/virtualNetworks\"\nlimit = 5\n";
    let s = TestServer::start_full("", "", meters, |_| {}).await;
    let cli = Cli::new(&s.base);
    let put = ["resource", "put", "-t", VNET, "-n", "net1", "--set", "addressSpace=10.0.0.0/16", "-o", "json"];
    cli.run(&put).await.expect(0);
    let usage = cli.run(&["quota", "show", "-o", "json"]).await.expect(0).json();
    let networks = &usage[0]["properties"];
    assert_eq!((networks["currentValue"].as_u64(), networks["limit"].as_u64()), (Some(1), Some(5)), "{usage}");
    let table = cli.run(&["quota", "show"]).await.expect(0).stdout;
    assert!(table.contains("USED") && table.contains("networks"), "{table}");
    let set =
        cli.run(&["quota", "set", "networks", "--limit", "1", "--namespace", "Slipway.Example", "-o", "json"]).await;
    assert_eq!(set.expect(0).json()["properties"]["limit"]["value"], 1);
    let over =
        cli.run(&["resource", "put", "-t", VNET, "-n", "net2", "--set", "addressSpace=10.1.0.0/16"]).await.expect(7);
    assert!(over.stderr.contains("refused by the quota 'networks'"), "{}", over.stderr);

    let id = rid("virtualNetworks", "net1");
    cli.run(&["lock", "create", "keep", &id, "--level", "CanNotDelete", "--notes", "prod"]).await.expect(0);
    let listed = cli.run(&["lock", "list", "rg1", "-o", "json"]).await.expect(0).json();
    assert_eq!(listed[0]["name"], "keep", "{listed}");
    let refused = cli.run(&["resource", "delete", &id]).await.expect(7);
    assert!(
        refused.stderr.contains("ScopeLocked") && refused.stderr.contains("refused by the lock"),
        "{}",
        refused.stderr
    );
    cli.run(&["lock", "delete", "keep", &id]).await.expect(0);

    let rule = serde_json::json!({"properties": {"policyRule": {
        "if": {"field": "tags['owner']", "exists": "false"}, "then": {"effect": "audit"}}}});
    std::fs::write(cli.path("owner.json"), rule.to_string()).unwrap();
    let file = cli.path("owner.json").display().to_string();
    let created =
        cli.run(&["policy", "definition", "create", "owner", "--file", &file, "-o", "json"]).await.expect(0).json();
    let definition = created["id"].as_str().unwrap().to_string();
    cli.run(&["policy", "assignment", "create", "owner", "--definition", &definition]).await.expect(0);
    cli.run(&["resource", "patch", &id, "--tag", "env=dev"]).await.expect(0);
    let states = cli.run(&["policy", "state", "-o", "json"]).await.expect(0).json();
    assert_eq!(states[0]["policyDefinitionAction"], "audit", "{states}");
}
