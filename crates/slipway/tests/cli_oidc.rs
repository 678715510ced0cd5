//! The client CLI getting its token from an identity provider (the loopback test issuer):
//! a profile with `oidc` uses the client-credentials grant when `SLIPWAY_CLIENT_SECRET` is
//! set, else the device flow (the person is told where to go and which code to type); either
//! token is cached per profile, so the next command asks nobody.

use crate::common::TestServer;
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};

const AUD: &str = "api://slipway";
const SUB: &str = "cccccccc-0000-0000-0000-000000000003";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The binary with `home` as its profile file's and cache's directory, nothing else from
/// this process's `SLIPWAY_*` settings.
async fn slipway(home: &std::path::Path, args: &[&str], secret: Option<&str>) -> Run {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_slipway"));
    c.args(args).stdin(std::process::Stdio::null());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("SLIPWAY_")) {
        c.env_remove(k);
    }
    c.env("SLIPWAY_CONFIG", home.join("config.toml")).env("XDG_CACHE_HOME", home.join("cache"));
    if let Some(secret) = secret {
        c.env("SLIPWAY_CLIENT_SECRET", secret);
    }
    let out = c.output().await.expect("run slipway");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_gets_its_token_from_the_identity_provider_and_keeps_it() {
    let idp = TestIdp::start().await;
    let tables = format!(
        "\n[auth]\nadmins = [\"root\"]\n\n[[auth.issuers]]\nissuer = \"{}\"\naudiences = [\"{AUD}\"]\n",
        idp.issuer
    );
    let s = TestServer::start_full("", "", &tables, |_| {}).await;
    let root = idp.sign("key-1", &idp.claims(AUD, "root", "platform", SystemClock.now().as_millis() / 1000));
    let put = async |path: &str, body: Value| {
        let url = format!("{}{path}?api-version=2025-06-01", s.base);
        s.http.put(url).bearer_auth(&root).json(&body).send().await.unwrap().status().as_u16()
    };
    assert_eq!(
        put(&format!("/subscriptions/{SUB}"), json!({"state": "Registered", "properties": {"tenantId": "t"}})).await,
        201
    );
    for (i, who) in ["ci-bot", "alice"].into_iter().enumerate() {
        let path = format!(
            "/subscriptions/{SUB}/providers/Slipway.Authorization/roleAssignments/00000000-0000-0000-0000-00000000000{i}"
        );
        assert_eq!(put(&path, json!({"properties": {"roleDefinitionId": "Reader", "principalId": who}})).await, 201);
    }
    idp.register_client("ci-bot", "s3cret", "t", AUD);
    idp.approve_as("alice", "t", AUD);
    let home = tempfile::tempdir().unwrap();
    let profiles = format!(
        "current = \"ci\"\n\n[profiles.ci]\nurl = \"{base}\"\n[profiles.ci.oidc]\nissuer = \"{iss}\"\nclient_id = \"ci-bot\"\nscopes = [\"{AUD}/.default\"]\n\n\
         [profiles.me]\nurl = \"{base}\"\n[profiles.me.oidc]\nissuer = \"{iss}\"\nclient_id = \"slipway-cli\"\n",
        base = s.base,
        iss = idp.issuer
    );
    std::fs::write(home.path().join("config.toml"), profiles).unwrap();

    // Automation: client credentials from the environment.
    let run = slipway(home.path(), &["subscription", "list", "-o", "json"], Some("s3cret")).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(SUB), "{}", run.stdout);
    let wrong = slipway(home.path(), &["--profile", "me", "subscription", "list"], Some("nope")).await;
    assert_ne!(wrong.code, 0, "a wrong secret is refused by the provider: {}", wrong.stdout);

    // A person: the device flow says where to go; the token is then kept.
    let run = slipway(home.path(), &["--profile", "me", "subscription", "list", "-o", "json"], None).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("enter the code ABCD-"), "{}", run.stderr);
    assert!(run.stdout.contains(SUB), "{}", run.stdout);
    let again = slipway(home.path(), &["--profile", "me", "subscription", "list", "-o", "json"], None).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stderr.contains("To sign in"), "the cached token is reused: {}", again.stderr);
    let cached = home.path().join("cache/slipway/tokens/me.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&cached).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
