//! `slipway check-config` refuses what `serve` would, and what only a tenant's failed job
//! would otherwise reveal (a missing playbook), naming the entry; it exits 2.

mod common;

use std::path::Path;
use std::process::Command;

use common::{python_tools, repo};

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
