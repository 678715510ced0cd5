//! Fidelity check: the real `awx.awx` 24.6.1 collection (from the PyPI `ansible` 12.3.0 bundle,
//! installed into `.venv/collections` by `scripts/setup-python.sh`) drives the simulator with
//! `job_launch`, `job_wait`, `job_cancel` and `workflow_launch`, unmodified, with token and with
//! basic auth, under `/api/` and under `/api/controller/`: extra vars, waits, failures,
//! cancels, workflows, and a check-mode launch (`job_type: check`, `diff_mode`) of a template
//! that prompts for them — the collection refuses one that does not, from the template's
//! `ask_job_type_on_launch`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use aap_sim::{ResourceEffect, Sim, SimConfig, SimTemplate, SimUser};

const TOKEN: &str = "fidelity-token";
/// The resource the check-mode job previews.
const RESOURCE: &str = "/subscriptions/s1/resourceGroups/rg/providers/P.N/things/a";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

/// The project venv with the collection (a test tool: `--test`), set up once per test binary (idempotent and instant
/// when already done; serialized across processes by the script's lock).
fn venv() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY
        .get_or_init(|| {
            let status = std::process::Command::new(repo().join("scripts/setup-python.sh"))
                .arg("--test")
                .status()
                .expect("run setup-python.sh");
            assert!(status.success(), "setup-python.sh failed");
            let venv = std::env::var_os("SLIPWAY_VENV").map(PathBuf::from).unwrap_or_else(|| repo().join(".venv"));
            assert!(
                venv.join("collections/ansible_collections/awx/awx/plugins/modules/job_launch.py").is_file(),
                "awx.awx is not installed in {}",
                venv.display()
            );
            venv
        })
        .clone()
}

fn config(api_prefix: &str) -> SimConfig {
    let quick = |id, name: &str, ask| SimTemplate {
        id,
        name: name.into(),
        ask_variables_on_launch: ask,
        allow_simultaneous: true,
        duration_seconds: 0.3,
        pending_seconds: 0.05,
        ..SimTemplate::default()
    };
    SimConfig {
        api_prefix: api_prefix.into(),
        token: Some(TOKEN.into()),
        users: vec![SimUser { username: "admin".into(), password: "s3cret".into() }],
        job_templates: vec![
            quick(7, "Deploy", true),
            // Long enough that only the cancel can end it.
            SimTemplate { duration_seconds: 600.0, ..quick(8, "Long", false) },
            SimTemplate {
                ask_job_type_on_launch: true,
                ask_diff_mode_on_launch: true,
                resource_state: ResourceEffect::Record,
                ..quick(10, "Preview", true)
            },
        ],
        workflow_job_templates: vec![quick(9, "Pipeline", true)],
        tick_ms: 20,
        ..SimConfig::default()
    }
}

fn playbook(auth: &str) -> String {
    format!(
        r#"- hosts: localhost
  gather_facts: false
  module_defaults:
    group/awx.awx.controller:
      controller_host: "{{{{ sim_host }}}}"
      validate_certs: false
{auth}
  tasks:
    - name: Launch with extra vars and wait
      awx.awx.job_launch:
        name: Deploy
        extra_vars: {{app: web, version: "1.2.3"}}
        wait: true
        interval: 0.2
        timeout: 120
      register: launched

    - name: Launch by named URL, without waiting
      awx.awx.job_launch:
        name: Deploy++Default
        extra_vars: {{aap_sim_duration_seconds: 0.5}}
      register: second

    - name: Wait for it
      awx.awx.job_wait:
        job_id: "{{{{ second.id }}}}"
        interval: 0.2
        timeout: 120
      register: waited

    - name: A failing job fails the task
      awx.awx.job_launch:
        name: Deploy
        extra_vars: {{aap_sim_outcome: failed}}
        wait: true
        interval: 0.2
        timeout: 120
      register: failing
      ignore_errors: true

    - name: Launch a long job
      awx.awx.job_launch:
        name: Long
      register: long

    - name: Cancel it
      awx.awx.job_cancel:
        job_id: "{{{{ long.id }}}}"
      register: canceled

    - name: Wait until it is canceled (a canceled job is a failed wait)
      awx.awx.job_wait:
        job_id: "{{{{ long.id }}}}"
        interval: 0.2
        timeout: 120
      register: canceled_wait
      ignore_errors: true

    - name: Cancelling a finished job changes nothing
      awx.awx.job_cancel:
        job_id: "{{{{ long.id }}}}"
      register: recancel

    - name: Launch in check mode with diff, as a what-if does
      awx.awx.job_launch:
        name: Preview
        job_type: check
        diff_mode: true
        extra_vars:
          slipway: {{resource: {{id: "{RESOURCE}", type: P.N/things, name: a, properties: {{size: 1}}}}}}
        wait: true
        interval: 0.2
        timeout: 120
      register: checked

    - name: The collection refuses check mode for a template that does not prompt for it
      awx.awx.job_launch:
        name: Deploy
        job_type: check
      register: unprompted
      ignore_errors: true

    - name: Launch a workflow and wait
      awx.awx.workflow_launch:
        name: Pipeline
        extra_vars: {{x: 1}}
        wait: true
        interval: 0.2
        timeout: 120
      register: workflow

    - name: Check what the collection reported
      ansible.builtin.assert:
        that:
          - launched is changed
          - launched.status == "successful"
          - second.status in ["pending", "waiting", "running"]
          - waited.status == "successful"
          - waited.elapsed | float >= 0.5
          - failing is failed
          - failing.status == "failed"
          - canceled is changed
          - canceled_wait is failed
          - canceled_wait.status == "canceled"
          - recancel is not changed
          - workflow is changed
          - workflow.status == "successful"
          - checked is changed
          - checked.status == "successful"
          - unprompted is failed
          - unprompted.errors | select("search", "job_type was specified") | list | length == 1
"#
    )
}

async fn run_collection(api_prefix: &str, basic_auth: bool) {
    let venv = venv();
    let sim = Sim::start("127.0.0.1:0", config(api_prefix)).await.expect("start the simulator");
    let work = tempfile::tempdir().expect("temp dir");
    let auth = if basic_auth {
        "      controller_username: admin\n      controller_password: s3cret"
    } else {
        "      controller_oauthtoken: \"{{ sim_token }}\""
    };
    std::fs::write(work.path().join("pb.yml"), playbook(auth)).expect("write playbook");
    let vars = serde_json::json!({
        "sim_host": sim.base_url(),
        "sim_token": TOKEN,
        // Interpreter discovery on this machine can pick a broken pyenv shim.
        "ansible_python_interpreter": venv.join("bin/python"),
    });
    std::fs::write(work.path().join("vars.json"), vars.to_string()).expect("write vars");

    let mut cmd = tokio::process::Command::new(venv.join("bin/ansible-playbook"));
    cmd.args(["-i", "localhost,", "-c", "local", "-e", "@vars.json", "pb.yml"])
        .current_dir(work.path())
        .env("ANSIBLE_COLLECTIONS_PATH", venv.join("collections"))
        .env("PATH", format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default()))
        // Hermetic: no user config, no tower_cli.cfg, temp files inside the test dir.
        .env("HOME", work.path())
        .env("ANSIBLE_CONFIG", work.path().join("none.cfg"))
        .env("ANSIBLE_LOCAL_TEMP", work.path().join("tmp"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
        .env_remove("CONTROLLER_HOST")
        .env_remove("CONTROLLER_USERNAME")
        .env_remove("CONTROLLER_PASSWORD")
        .env_remove("CONTROLLER_OAUTH_TOKEN")
        .env_remove("CONTROLLER_VERIFY_SSL")
        .kill_on_drop(true);
    if api_prefix == "/api/" {
        cmd.env_remove("CONTROLLER_OPTIONAL_API_URLPATTERN_PREFIX");
    } else {
        cmd.env("CONTROLLER_OPTIONAL_API_URLPATTERN_PREFIX", api_prefix);
    }
    let out = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .expect("ansible-playbook finished in time")
        .expect("run ansible-playbook");
    let requests = sim.handle().requests();
    assert!(
        out.status.success(),
        "ansible-playbook failed ({}):\n{}\n{}\nrequests: {requests:#?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let count = |key: &str| requests.get(&key.replace("{p}", api_prefix)).copied().unwrap_or(0);
    assert_eq!(count("GET {p}v2/job_templates/"), 5, "template lookups by name: {requests:#?}");
    assert_eq!(count("GET {p}v2/job_templates/{id}/"), 1, "the named-URL lookup: {requests:#?}");
    assert_eq!(
        count("POST {p}v2/job_templates/{id}/launch/"),
        5,
        "the refused check launch is not sent: {requests:#?}"
    );
    assert!(count("GET {p}v2/jobs/") >= 2, "job_wait/job_cancel look jobs up by id: {requests:#?}");
    assert!(count("GET {p}v2/jobs/{id}/") >= 2, "waits poll the job url: {requests:#?}");
    assert_eq!(count("GET {p}v2/jobs/{id}/cancel/"), 2, "{requests:#?}");
    assert_eq!(count("POST {p}v2/jobs/{id}/cancel/"), 1, "the second cancel sees can_cancel false: {requests:#?}");
    assert_eq!(count("POST {p}v2/workflow_job_templates/{id}/launch/"), 1, "{requests:#?}");
    assert!(count("GET {p}v2/workflow_jobs/{id}/") >= 1, "{requests:#?}");
    if basic_auth {
        // awx.awx 24.6.1 trades basic auth for a token in every module run, then deletes it.
        assert!(count("POST {p}v2/tokens/") >= 9, "{requests:#?}");
        assert_eq!(count("POST {p}v2/tokens/"), count("DELETE {p}v2/tokens/{id}/"), "{requests:#?}");
    } else {
        assert_eq!(count("POST {p}v2/tokens/"), 0, "{requests:#?}");
    }
    let outside: Vec<&String> =
        requests.keys().filter(|k| !k.split_once(' ').is_some_and(|(_, p)| p.starts_with(api_prefix))).collect();
    assert!(outside.is_empty(), "requests outside {api_prefix}: {outside:?}");
    if api_prefix != "/api/" {
        assert!(!requests.keys().any(|k| k.contains(" /api/v2/")), "{requests:#?}");
    }

    let jobs = sim.handle().jobs();
    let by_status = |kind: &str, template: &str| -> Vec<String> {
        jobs.iter().filter(|j| j.kind == kind && j.template_name == template).map(|j| j.status.clone()).collect()
    };
    assert_eq!(by_status("job", "Deploy"), vec!["successful", "successful", "failed"]);
    assert_eq!(by_status("job", "Long"), vec!["canceled"]);
    assert_eq!(by_status("workflow_job", "Pipeline"), vec!["successful"]);
    assert_eq!(jobs[0].extra_vars, serde_json::json!({"app": "web", "version": "1.2.3"}));
    let wf = jobs.iter().find(|j| j.kind == "workflow_job").expect("workflow job");
    assert_eq!(wf.extra_vars, serde_json::json!({"x": 1}));

    // The check job ran as one, as the API reports it, and changed nothing it previewed.
    let preview = jobs.iter().find(|j| j.template_name == "Preview").expect("the check job");
    assert_eq!((preview.status.as_str(), preview.job_type.as_str(), preview.diff_mode), ("successful", "check", true));
    assert!(jobs.iter().filter(|j| j.template_name != "Preview").all(|j| j.job_type == "run"), "{jobs:#?}");
    let api = format!("{}{api_prefix}v2/jobs/{}/", sim.base_url(), preview.id);
    let http = reqwest::Client::new();
    let job: serde_json::Value =
        http.get(&api).bearer_auth(TOKEN).send().await.expect("job").json().await.expect("JSON");
    assert_eq!((&job["job_type"], &job["diff_mode"]), (&serde_json::json!("check"), &serde_json::json!(true)));
    let events: serde_json::Value = http
        .get(format!("{api}job_events/?event=runner_on_ok&changed=true"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("events")
        .json()
        .await
        .expect("JSON");
    assert_eq!(events["count"], 1, "{events}");
    assert_eq!(events["results"][0]["event_data"]["res"]["diff"]["before"], "", "{events}");
    assert_eq!(sim.handle().resource_state(RESOURCE), None);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_with_token_under_api() {
    run_collection("/api/", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_with_basic_auth_under_api() {
    run_collection("/api/", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_with_token_under_api_controller() {
    run_collection("/api/controller/", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_with_basic_auth_under_api_controller() {
    run_collection("/api/controller/", true).await;
}
