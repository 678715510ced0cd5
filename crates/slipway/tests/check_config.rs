//! `slipway check-config` refuses what `serve` would, and what only a tenant's failed job
//! would otherwise reveal (a missing playbook), naming the entry; it exits 2.

use std::path::Path;
use std::process::Command;

use crate::common::{python_tools, repo};
use slipway_test_support::within_blocking;

/// A valid configuration with `types` for its `[[types]]` and `provider` for its ansible
/// provider's extra keys.
fn config(dir: &Path, listen: &str, provider: &str, types: &str) -> String {
    let venv = python_tools();
    format!(
        r#"
[server]
listen = "{listen}"
[store]
url = "sqlite:{db}"
[[providers]]
name = "ansible"
type = "ansible"
playbook_dir = "{playbooks}"
work_dir = "{jobs}"
python = "{venv}/bin/python"
playbook_prefix = "slipway"
{provider_runner}
{types}"#,
        db = dir.join("s.db").display(),
        playbooks = repo().join("examples/playbooks").display(),
        jobs = dir.join("jobs").display(),
        venv = venv.display(),
        provider_runner = if provider.is_empty() {
            format!("runner = \"{}/bin/ansible-runner\"", venv.display())
        } else {
            provider.into()
        },
    )
}

fn vnet_type(extra: &str) -> String {
    format!(
        "[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"virtualNetworks\"\nkind = \"VirtualNetwork\"\n\
         api_versions = [\"2025-06-01\"]\nprovider = \"ansible\"\n{extra}\n"
    )
}

fn run(dir: &Path, text: &str) -> (i32, String, String) {
    run_with(dir, text, &[])
}

fn run_with(dir: &Path, text: &str, args: &[&str]) -> (i32, String, String) {
    let path = dir.join("slipway.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slipway"))
        .arg("--config")
        .arg(&path)
        .arg("check-config")
        .args(args)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn broken_configurations_are_refused_naming_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("bad-schema.json"), r#"{"type": 5}"#).unwrap();
    let entry = "types[0] (Slipway.Example/virtualNetworks)";
    let cases: Vec<(&str, String, String)> = vec![
        (
            "a missing schema file",
            config(d, "127.0.0.1:0", "", &vnet_type("schema = \"nope.json\"")),
            format!("{entry}: schema {}: No such file", d.join("nope.json").display()),
        ),
        (
            "an invalid schema",
            config(d, "127.0.0.1:0", "", &vnet_type("schema = \"bad-schema.json\"")),
            "invalid JSON Schema".into(),
        ),
        (
            "no api-versions",
            config(d, "127.0.0.1:0", "", &vnet_type("").replace("[\"2025-06-01\"]", "[]")),
            "at least one api-version is required".into(),
        ),
        (
            "an api-version that is not a date",
            config(d, "127.0.0.1:0", "", &vnet_type("").replace("2025-06-01", "v1")),
            format!("{entry}: api-version 'v1' is not a date"),
        ),
        (
            "a runner that does not exist",
            config(d, "127.0.0.1:0", "runner = \"/nonexistent/ansible-runner\"", &vnet_type("")),
            "providers[0] (ansible):".into(),
        ),
        (
            "a listen address that is not one",
            config(d, "notanaddr", "", &vnet_type("")),
            "server.listen: 'notanaddr' is not an address".into(),
        ),
        (
            "a metrics token without its file",
            config(d, "127.0.0.1:0\"\nmetrics = \"token", "", &vnet_type("")),
            "server.metrics = \"token\" needs server.metrics_token_file".into(),
        ),
        (
            "a missing playbook",
            config(d, "127.0.0.1:0", "", &vnet_type("").replace("VirtualNetwork", "Widget")),
            format!("{entry}: the create playbook slipway-create-widget.yml is not in"),
        ),
        (
            "a missing action playbook",
            config(d, "127.0.0.1:0", "", &vnet_type("[types.actions.reboot]")),
            "the reboot playbook slipway-reboot-virtual-network.yml is not in".into(),
        ),
        (
            "an action named like the platform's retry",
            config(d, "127.0.0.1:0", "", &vnet_type("[types.actions.Retry]")),
            "action 'Retry' is not a valid action name: `POST {id}/retry` runs a failed resource's spec again".into(),
        ),
        (
            "a backoff base above its maximum",
            config(d, "127.0.0.1:0", "", &vnet_type("backoff_base_seconds = 600\nbackoff_max_seconds = 60")),
            format!("{entry}: backoff_base_seconds (600) is more than backoff_max_seconds (60)"),
        ),
        (
            "a namespace that is not one",
            config(d, "127.0.0.1:0", "", &vnet_type("").replace("Slipway.Example", "Slipway")),
            "types[0] (Slipway/virtualNetworks): namespace 'Slipway' is not".into(),
        ),
        (
            "a type configured twice",
            config(
                d,
                "127.0.0.1:0",
                "",
                &format!("{}{}", vnet_type(""), vnet_type("").replace("virtualNetworks", "VirtualNetworks")),
            ),
            "types[1] (Slipway.Example/VirtualNetworks): configured twice".into(),
        ),
    ];
    for (what, text, want) in cases {
        let (code, stdout, stderr) = run(d, &text);
        assert_eq!(code, 2, "{what}: exit code\nstdout: {stdout}\nstderr: {stderr}");
        assert!(stderr.contains(&want), "{what}: wanted {want:?} in\n{stderr}");
        assert!(!stdout.contains("configuration ok"), "{what}");
    }
    let (code, stdout, stderr) = run(d, &config(d, "127.0.0.1:0", "", &vnet_type("")));
    assert_eq!(code, 0, "a valid configuration: {stderr}");
    assert!(stdout.contains("configuration ok: 1 provider(s), 1 type(s)"), "{stdout}");
}

/// `--online` asks the controller: credentials, and every template the types' jobs need.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_checks_ask_the_controller_for_credentials_and_templates() {
    let sim = aap_sim::Sim::start(
        "127.0.0.1:0",
        aap_sim::SimConfig { token: Some("sim-token".into()), ..aap_sim::SimConfig::default() },
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    // The token is written when its case runs.
    let aap_config = |token: &'static str, types: &[(&str, &str, &str)]| {
        let mut text = format!(
            "[store]\nurl = \"sqlite:{db}\"\n[[providers]]\nname = \"aap\"\ntype = \"aap\"\nurl = \"{url}\"\n\
             template_prefix = \"slipway\"\ntoken_file = \"{token}\"\n",
            db = d.join("s.db").display(),
            url = sim.base_url(),
            token = d.join("aap-token").display(),
        );
        for (ty, kind, extra) in types {
            text.push_str(&format!(
                "[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"{ty}\"\nkind = \"{kind}\"\n\
                 api_versions = [\"2025-06-01\"]\nprovider = \"aap\"\n{extra}\n"
            ));
        }
        (token, text)
    };
    let vms = ("computeInstances", "ComputeInstance", "[types.actions.restart]");
    let cases = [
        (aap_config("sim-token", &[vms]), 0, "configuration ok"),
        (
            aap_config("sim-token", &[vms, ("widgets", "Widget", "")]),
            2,
            "types[1] (Slipway.Example/widgets): the create job: template \"slipway-create-widget\" not found",
        ),
        (
            aap_config("sim-token", &[("computeInstances", "ComputeInstance", "[types.actions.reboot]")]),
            2,
            "the reboot job: template \"slipway-reboot-compute-instance\" not found",
        ),
        (aap_config("wrong-token", &[vms]), 2, "providers[0] (aap): not ready: the controller refused"),
    ];
    for ((token, text), want_code, want) in cases {
        std::fs::write(d.join("aap-token"), token).unwrap();
        let dir = d.clone();
        let (code, stdout, stderr) =
            tokio::task::spawn_blocking(move || run_with(&dir, &text, &["--online"])).await.unwrap();
        assert_eq!(code, want_code, "{want}\nstdout: {stdout}\nstderr: {stderr}");
        assert!(format!("{stdout}{stderr}").contains(want), "wanted {want:?} in\n{stdout}{stderr}");
        assert!(!stderr.contains("wrong-token"), "no credential in any message: {stderr}");
    }
    sim.shutdown().await;
}

/// `text` with `settings` added to its `[table]` (`[server]` or `[store]`, which
/// [`config`] writes).
fn with_settings(text: &str, table: &str, settings: &str) -> String {
    text.replacen(&format!("[{table}]\n"), &format!("[{table}]\n{settings}\n"), 1)
}

/// Every way `serve` refuses a configuration: building the plan refuses it with the problem
/// (or, for what loading already checks, loading does), so `serve` refuses it in-process
/// before it opens anything, and `check-config` refuses it with the same text, exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_of_serve_is_a_problem_of_the_plan_and_of_check_config() {
    use slipway::config::Config;
    use slipway::plan::Plan;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secret_schema = r#"{"type": "object", "properties": {"password": {"type": "string", "writeOnly": true}}}"#;
    std::fs::write(d.join("secret-schema.json"), secret_schema).unwrap();
    let referring_schema = r#"{"type": "object", "properties": {"zone": {"type": "string",
        "x-slipway-reference": "Slipway.Example/dnsZones"}}}"#;
    std::fs::write(d.join("referring-schema.json"), referring_schema).unwrap();
    let valid = config(d, "127.0.0.1:0", "", &vnet_type(""));
    let server = |settings: &str| with_settings(&valid, "server", settings);
    let store = |settings: &str| with_settings(&valid, "store", settings);
    let appended = |tables: &str| format!("{valid}\n{tables}\n");
    let typed = |extra: &str| config(d, "127.0.0.1:0", "", &vnet_type(extra));
    let aap = |extra: &str| {
        appended(&format!("[[providers]]\nname = \"aap\"\ntype = \"aap\"\nurl = \"https://aap.example\"\n{extra}"))
    };
    let entry = "types[0] (Slipway.Example/virtualNetworks)";
    let cases: Vec<(&str, String, String)> = vec![
        // The store, the edge, the listener's TLS, the keys: checked only when serving, before.
        (
            "a bad synchronous",
            store("synchronous = \"extra\""),
            "store.synchronous = 'extra': use full or normal".into(),
        ),
        ("a store url of another database", store("").replace("sqlite:", "mysql://"), "store.url = 'mysql://".into()),
        (
            "a bad trusted proxy",
            server("trusted_proxies = [\"10.0.0.1\", \"10.0.0.0/33\"]"),
            "server.trusted_proxies[1] = '10.0.0.0/33': not an IP address or CIDR range".into(),
        ),
        (
            "a public base URL without a scheme",
            server("public_base_url = \"slipway.example.com\""),
            "server.public_base_url = 'slipway.example.com': use scheme and authority only".into(),
        ),
        (
            "a missing TLS file",
            server("tls_cert_file = \"missing-cert.pem\"\ntls_key_file = \"missing-key.pem\""),
            format!("server TLS: tls_cert_file {}: no such file", d.join("missing-cert.pem").display()),
        ),
        (
            "a missing secret key file",
            appended("[secrets]\nkey_files = [\"missing.key\"]"),
            format!("secrets.key_files: secret key file {}", d.join("missing.key").display()),
        ),
        (
            "secret properties without keys",
            typed("schema = \"secret-schema.json\""),
            format!("{entry}: its schema marks secret properties but [secrets] key_files is not configured"),
        ),
        (
            "a reference to a type that is not configured",
            typed("schema = \"referring-schema.json\""),
            format!("{entry}: its schema references the type slipway.example/dnszones, which is not configured"),
        ),
        (
            "a non-loopback listener without [auth]",
            server("").replace("127.0.0.1:0", "0.0.0.0:0"),
            "server.listen = 0.0.0.0:0 is not a loopback address and authentication is off".into(),
        ),
        // What was quietly raised or lowered into range.
        (
            "no leases shorter than 3 s",
            appended("[engine]\nlease_seconds = 1"),
            "engine.lease_seconds = 1: must be at least 3".into(),
        ),
        (
            "an engine that drives nothing",
            appended("[engine]\nmax_concurrent = 0"),
            "engine.max_concurrent = 0: must be at least 1".into(),
        ),
        (
            "status batches of nothing",
            appended("[engine]\nstatus_batch = 0"),
            "engine.status_batch = 0: must be at least 1".into(),
        ),
        (
            "a page size over the most",
            server("page_size = 5000"),
            "server.page_size = 5000: must be from 1 to 1000".into(),
        ),
        ("an empty page size", server("page_size = 0"), "server.page_size = 0: must be from 1 to 1000".into()),
        (
            "no time to read a request head",
            server("header_read_timeout_seconds = 0"),
            "server.header_read_timeout_seconds = 0: must be at least 1".into(),
        ),
        (
            "no time to read a body",
            server("body_read_timeout_seconds = 0"),
            "server.body_read_timeout_seconds = 0: must be at least 1".into(),
        ),
        (
            "no idle time",
            server("idle_timeout_seconds = 0"),
            "server.idle_timeout_seconds = 0: must be at least 1".into(),
        ),
        (
            "TLS files reread without pause",
            server("tls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"\ntls_reload_interval_seconds = 0"),
            "server.tls_reload_interval_seconds = 0: must be at least 1".into(),
        ),
        (
            "an empty PostgreSQL pool",
            store("pool_size = 0")
                .replace(&format!("sqlite:{}", d.join("s.db").display()), "postgres://nobody@127.0.0.1:1/x"),
            "store.pool_size = 0: must be at least 1".into(),
        ),
        (
            "callbacks that time out at once",
            appended("[notifications]\nrequest_timeout_seconds = 0"),
            "notifications.request_timeout_seconds = 0: must be at least 1".into(),
        ),
        (
            "callbacks that cannot connect",
            appended("[notifications]\nconnect_timeout_seconds = 0"),
            "notifications.connect_timeout_seconds = 0: must be at least 1".into(),
        ),
        (
            "no callbacks at once",
            appended("[notifications]\nmax_concurrent = 0"),
            "notifications.max_concurrent = 0: must be at least 1".into(),
        ),
        (
            "no callbacks to any destination",
            appended("[notifications]\nmax_per_destination = 0"),
            "notifications.max_per_destination = 0: must be at least 1".into(),
        ),
        (
            "callbacks never tried",
            appended("[notifications]\nmax_attempts = 0"),
            "notifications.max_attempts = 0: must be at least 1".into(),
        ),
        (
            "retries without backoff",
            appended("[notifications]\nmax_backoff_seconds = 0"),
            "notifications.max_backoff_seconds = 0: must be at least 1".into(),
        ),
        (
            "a local provider that runs no job",
            config(
                d,
                "127.0.0.1:0",
                &format!("runner = \"{}/bin/ansible-runner\"\nmax_concurrent_jobs = 0", python_tools().display()),
                &vnet_type(""),
            ),
            "providers[0] (ansible): max_concurrent_jobs = 0: must be at least 1".into(),
        ),
        (
            "an AAP request timeout of 0",
            aap("request_timeout_seconds = 0"),
            "providers[1] (aap): request_timeout_seconds = 0: must be at least 1".into(),
        ),
        (
            "no AAP request at once",
            aap("max_concurrent_requests = 0"),
            "providers[1] (aap): max_concurrent_requests = 0: must be at least 1".into(),
        ),
        ("no job history", typed("max_history = 0"), format!("{entry}: max_history = 0: must be at least 1")),
        // Providers and types.
        (
            "an unknown envelope",
            aap("envelope = \"eda\""),
            "providers[1] (aap): envelope 'eda': use slipway or osac".into(),
        ),
        (
            "a token from two places",
            aap("token_file = \"t\"\ntoken_env = \"T\""),
            "providers[1] (aap): give token_file or token_env, not both".into(),
        ),
        (
            "a provider configured twice",
            aap("").replace(
                "name = \"aap\"\ntype = \"aap\"\nurl = \"https://aap.example\"",
                "name = \"ansible\"\ntype = \"aap\"\nurl = \"https://aap.example\"",
            ),
            "providers[1] (ansible): configured twice".into(),
        ),
        ("a bad type", typed("").replace("2025-06-01", "v1"), format!("{entry}: api-version 'v1' is not a date")),
        (
            "a type configured twice",
            config(
                d,
                "127.0.0.1:0",
                "",
                &format!("{}{}", vnet_type(""), vnet_type("").replace("virtualNetworks", "VIRTUALNETWORKS")),
            ),
            "types[1] (Slipway.Example/VIRTUALNETWORKS): configured twice".into(),
        ),
        // Checked when loading (serve and check-config load alike).
        (
            "an issuer without an audience",
            appended("[auth]\n[[auth.issuers]]\nissuer = \"https://idp.example\"\naudiences = []"),
            "auth.issuers[0].audiences: at least one audience is required".into(),
        ),
        (
            "a rate limit without a burst",
            appended("[auth]\napi_tokens = true\n[auth.rate_limits]\nburst = 0"),
            "auth.rate_limits: requests_per_second must be > 0 and burst >= 1".into(),
        ),
    ];
    let path = d.join("slipway.toml");
    for (what, text, want) in cases {
        std::fs::write(&path, &text).unwrap();
        match Config::load(Some(&path), []) {
            Ok(config) => {
                let problems = Plan::from_config(&config).err().unwrap_or_else(|| panic!("{what}: planned"));
                assert!(
                    problems.iter().any(|p| p.as_str().contains(&want)),
                    "{what}: wanted {want:?} in {problems:#?}"
                );
                let started = slipway::app::App::start(config, std::sync::Arc::new(slipway_domain::SystemClock)).await;
                let Err(e) = started else { panic!("{what}: served") };
                assert!(e.to_string().contains(&want), "{what}: serve said {e}");
            }
            Err(e) => assert!(e.to_string().contains(&want), "{what}: loading said {e}"),
        }
        let (code, stdout, stderr) = run(d, &text);
        assert_eq!(code, 2, "{what}: exit code\nstdout: {stdout}\nstderr: {stderr}");
        assert!(stderr.contains(&format!("slipway: {want}")), "{what}: wanted {want:?} in\n{stderr}");
    }
}

/// Every problem is reported, not just the first, by `check-config` and by `serve` alike.
#[test]
fn every_problem_is_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = with_settings(
        &with_settings(&config(d, "127.0.0.1:0", "", &vnet_type("max_history = 0")), "server", "page_size = 0"),
        "store",
        "synchronous = \"off\"",
    ) + "\n[engine]\nlease_seconds = 2\nmax_concurrent = 0\n";
    let wants = [
        "slipway: server.page_size = 0: must be from 1 to 1000",
        "slipway: store.synchronous = 'off': use full or normal",
        "slipway: engine.lease_seconds = 2: must be at least 3",
        "slipway: engine.max_concurrent = 0: must be at least 1",
        "slipway: types[0] (Slipway.Example/virtualNetworks): max_history = 0: must be at least 1",
        "slipway: 5 problem(s) in the configuration",
    ];
    let (code, _, stderr) = run(d, &text);
    assert_eq!(code, 2, "{stderr}");
    for want in wants {
        assert!(stderr.contains(want), "check-config: wanted {want:?} in\n{stderr}");
    }
    let path = d.join("slipway.toml");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_slipway"))
        .arg("--config")
        .arg(&path)
        .arg("serve")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status =
        within_blocking(std::time::Duration::from_secs(30), || serve.try_wait().unwrap()).unwrap_or_else(|_| {
            serve.kill().unwrap();
            panic!("serve started with a refused configuration");
        });
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut serve.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    for want in wants {
        assert!(stderr.contains(want), "serve: wanted {want:?} in\n{stderr}");
    }
}

/// A file that does not load says everything wrong with it at once, each problem at its line
/// and column and named by its entry; and every cross-check of one that loads, not the first.
#[test]
fn a_file_that_does_not_load_names_every_problem_and_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = config(d, "127.0.0.1:0", "", &vnet_type("poll_interval_seconds = \"fast\""))
        .replace("[server]\n", "[server]\nlisten_backlog = 5\n");
    let lines: Vec<&str> = text.lines().collect();
    let line_of = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap() + 1;
    let path = d.join("slipway.toml").display().to_string();
    let (code, _, stderr) = run(d, &text);
    assert_eq!(code, 2, "{stderr}");
    for want in [
        format!("{path}:{}:1: [server]: unknown field `listen_backlog`", line_of("listen_backlog")),
        format!(
            "{path}:{}:25: types[0] (Slipway.Example/virtualNetworks): invalid type: string \"fast\", expected f64",
            line_of("poll_interval_seconds")
        ),
    ] {
        assert!(stderr.contains(&want), "wanted {want:?} in\n{stderr}");
    }

    // Two types on providers that do not exist: both named.
    let text = config(
        d,
        "127.0.0.1:0",
        "",
        &format!(
            "{}{}",
            vnet_type("").replace("provider = \"ansible\"", "provider = \"ansibel\""),
            vnet_type("")
                .replace("virtualNetworks", "securityGroups")
                .replace("provider = \"ansible\"", "provider = \"aap\"")
        ),
    );
    let (code, _, stderr) = run(d, &text);
    assert_eq!(code, 2, "{stderr}");
    for want in [
        "types[0] (Slipway.Example/virtualNetworks): type Slipway.Example/virtualNetworks uses provider 'ansibel', which is not configured (configured: ansible)",
        "types[1] (Slipway.Example/securityGroups): type Slipway.Example/securityGroups uses provider 'aap'",
    ] {
        assert!(stderr.contains(want), "wanted {want:?} in\n{stderr}");
    }
}
