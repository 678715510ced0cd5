//! Backup and restore without a second launch, on both providers, with the real binary:
//! `slipway backup` while it serves, work done after the backup (a job launched for an
//! operation the backup has in flight, a delete, a create), Slipway stopped, `slipway
//! restore --from` the backup, Slipway started again.
//!
//! The job launched after the backup must be found and adopted — its key launched once in
//! all — and the report must name it, the resource deleted after the backup (still shown by
//! the restored store) and the one created after it (a possible orphan). On AAP a restore
//! whose provider cannot list its jobs fails, leaves the store marked, and `serve` refuses
//! it until `slipway restore --in-place` finishes.
//!
//! `SLIPWAY_TEST_KEEP=1` keeps the logs and prints where they are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use crate::common::replica::Logs;
use crate::common::{API, free_port, path_of, python_tools, rid, spawn_slipway};
use aap_sim::{Faults, Sim, SimConfig};
use serde_json::{Value, json};
use slipway_test_support::{eventually, ready_within};

const T: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_on_aap_adopts_what_ran_after_the_backup() {
    let dir = Logs::new("restore-aap");
    let mut config = SimConfig { tick_ms: 20, ..SimConfig::default() };
    for t in &mut config.job_templates {
        // Jobs end when the test says.
        t.duration_seconds = 3600.0;
    }
    let sim = Sim::start("127.0.0.1:0", config).await.unwrap();
    let provider = format!(
        r#"
[[providers]]
name = "aap"
type = "aap"
url = "{}"
template_prefix = "slipway"
"#,
        sim.base_url()
    );
    let backend = Backend::Aap(&sim);
    let world = World::new(&dir, &provider, "aap", "computeInstances", "ComputeInstance", json!({}));
    let restored = scenario(&world, &backend).await;

    // A restore that cannot ask the provider leaves the store marked, and serve refuses it.
    world.stop_server(restored);
    world.backup_file_for_second_restore();
    sim.handle().set_faults(Faults { error_5xx_percent: 100, ..Faults::default() });
    let failed = world.slipway(&["restore", "--from", world.second_backup().to_str().unwrap()]);
    assert!(!failed.status.success(), "restore succeeded without the provider: {}", text(&failed));
    assert!(text(&failed).contains("could not list its jobs"), "{}", text(&failed));
    let refused = world.slipway(&["serve"]);
    assert!(!refused.status.success(), "serve ran an unreconciled store");
    assert!(text(&refused).contains("slipway restore --in-place"), "{}", text(&refused));
    sim.handle().set_faults(Faults::default());
    let resumed = world.slipway(&["restore", "--in-place"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let report = String::from_utf8_lossy(&resumed.stdout).into_owned();
    assert!(report.contains("adopted") && report.contains(&world.id("b")), "{report}");
    let server = world.start_server().await;
    world.stop_server(server);
    sim.shutdown().await;
    dir.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_on_the_local_provider_adopts_what_ran_after_the_backup() {
    let dir = Logs::new("restore-local");
    let gate = dir.path().join("gate");
    let playbooks = dir.path().join("playbooks");
    std::fs::create_dir_all(&gate).unwrap();
    std::fs::create_dir_all(&playbooks).unwrap();
    for action in ["create", "delete"] {
        std::fs::write(playbooks.join(format!("slipway-{action}-gadget.yml")), GATED_PLAYBOOK).unwrap();
    }
    let venv = python_tools();
    let provider = format!(
        r#"
[[providers]]
name = "ansible"
type = "ansible"
playbook_dir = "{}"
work_dir = "{}"
runner = "{}/bin/ansible-runner"
python = "{}/bin/python"
playbook_prefix = "slipway"
"#,
        playbooks.display(),
        dir.path().join("jobs").display(),
        venv.display(),
        venv.display()
    );
    let backend = Backend::Local(gate.clone());
    let world = World::new(&dir, &provider, "ansible", "gadgets", "Gadget", json!({"gate": gate}));
    let server = scenario(&world, &backend).await;
    world.stop_server(server);
    dir.finish();
}

/// A job that logs its key, then waits for `<gate>/<key>.go` and fails if it says `fail`.
const GATED_PLAYBOOK: &str = r#"
- name: Gadget job gated by the test
  hosts: localhost
  gather_facts: false
  vars:
    gate: "{{ slipway.resource.properties.gate }}"
    key: "{{ slipway_idempotency_key }}"
  tasks:
    - name: Log the launch
      ansible.builtin.shell: "echo {{ key | quote }} >> {{ (gate ~ '/launches.log') | quote }}"
      changed_when: false
    - name: Wait for the test
      ansible.builtin.wait_for:
        path: "{{ gate }}/{{ key }}.go"
        timeout: 600
    - name: Fail when told to
      ansible.builtin.fail:
        msg: the test said fail
      when: lookup('ansible.builtin.file', gate ~ '/' ~ key ~ '.go') == 'fail'
"#;

/// The provider side, as the test drives and reads it.
enum Backend<'a> {
    Aap(&'a Sim),
    /// The gate directory of [`GATED_PLAYBOOK`].
    Local(PathBuf),
}

impl Backend<'_> {
    /// Every key launched, in launch order, repeats included.
    fn launches(&self) -> Vec<String> {
        match self {
            Backend::Aap(sim) => {
                let mut jobs = sim.handle().jobs();
                jobs.sort_by_key(|j| j.id);
                jobs.iter()
                    .map(|j| j.extra_vars["slipway_idempotency_key"].as_str().unwrap_or_default().into())
                    .collect()
            }
            Backend::Local(gate) => std::fs::read_to_string(gate.join("launches.log"))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect(),
        }
    }

    /// Ends the job of `key`.
    fn finish(&self, key: &str, ok: bool) {
        match self {
            Backend::Aap(sim) => {
                let job = sim.handle().jobs().into_iter().find(|j| j.extra_vars["slipway_idempotency_key"] == key);
                let job = job.unwrap_or_else(|| panic!("no AAP job for {key}"));
                sim.handle().set_job_status(job.id, if ok { "successful" } else { "failed" });
            }
            Backend::Local(gate) => {
                std::fs::write(gate.join(format!("{key}.go")), if ok { "ok" } else { "fail" }).unwrap()
            }
        }
    }

    /// The key of the latest launch for the operation at `op_path`, once there is one newer
    /// than `after` launches.
    async fn next_key_of(&self, op_path: &str, after: usize) -> String {
        let op =
            op_path.split('?').next().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_ascii_lowercase();
        eventually(&format!("a launch for operation {op}"), T, async || {
            let launches = self.launches();
            launches
                .iter()
                .skip(after)
                .find(|k| k.to_ascii_lowercase().starts_with(&op))
                .cloned()
                .ok_or_else(|| "none yet".to_string())
        })
        .await
    }
}

/// The whole run: work before the backup, the backup, work after it, the restore, and
/// Slipway serving the restored store. Returns the server still running.
async fn scenario(world: &World, backend: &Backend<'_>) -> Child {
    let mut server = world.start_server().await;
    // Settled before the backup: a, and the resource that will be deleted after it.
    for name in ["a", "gone"] {
        let op = world.put(name).await;
        let key = backend.next_key_of(&op, 0).await;
        backend.finish(&key, true);
        world.wait_op(&op, "Succeeded").await;
    }
    // In flight at the backup: b's first job runs.
    let op_b = world.put("b").await;
    let first = backend.next_key_of(&op_b, 0).await;
    world.backup();

    // After the backup: b's first job fails and its retry runs and succeeds; `gone` is
    // deleted; `new` is created.
    let before_retry = backend.launches().len();
    backend.finish(&first, false);
    let retry = backend.next_key_of(&op_b, before_retry).await;
    assert_ne!(retry, first);
    backend.finish(&retry, true);
    world.wait_resource("b", "Succeeded").await;
    let before = backend.launches().len();
    let delete = world.delete("gone").await;
    let key = backend.next_key_of(&delete, before).await;
    backend.finish(&key, true);
    world.wait_op(&delete, "Succeeded").await;
    let before = backend.launches().len();
    let op_new = world.put("new").await;
    let key = backend.next_key_of(&op_new, before).await;
    backend.finish(&key, true);
    world.wait_op(&op_new, "Succeeded").await;
    world.stop_server(server);
    let launched = backend.launches();

    let restore = world.slipway(&["restore", "--from", world.backup_path().to_str().unwrap()]);
    assert!(restore.status.success(), "restore failed: {}", text(&restore));
    let report = String::from_utf8_lossy(&restore.stdout).into_owned();
    let line = |what: &str, name: &str| {
        report.lines().any(|l| l.starts_with(what) && l.contains(&world.id(name)))
            || panic!("no '{what}' line for {name} in the report:\n{report}")
    };
    line("adopted", "b");
    assert!(report.contains(&format!("key {retry}")), "the adopted key is named:\n{report}");
    line("deleted after the backup", "gone");
    line("possible orphan", "new");
    println!("{}: restore report:\n{report}", world.provider);

    server = world.start_server().await;
    // b's operation, in flight in the backup, ends on the adopted job.
    world.wait_op(&op_b, "Succeeded").await;
    let jobs = world.get(&format!("{}/jobs?api-version={API}", world.id("b"))).await;
    let adopted = jobs["value"].as_array().into_iter().flatten().any(|j| j["idempotencyKey"] == retry.as_str());
    assert!(adopted, "b's job history holds the adopted job {retry}: {jobs}");
    let after = backend.launches();
    assert_eq!(after, launched, "nothing was launched after the restore");
    let mut by_key: BTreeMap<&String, usize> = BTreeMap::new();
    for k in &after {
        *by_key.entry(k).or_default() += 1;
    }
    let twice: Vec<_> = by_key.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "keys launched twice: {twice:?}");
    // Reported, not silently recreated or removed: the store shows what the backup had.
    let (code, _) = world.get_status(&world.id("gone")).await;
    assert_eq!(code, 200, "the restored store still shows the resource deleted after the backup");
    let (code, _) = world.get_status(&world.id("new")).await;
    assert_eq!(code, 404, "the resource created after the backup is not in the restored store");
    server
}

/// One Slipway's configuration, files and API.
struct World {
    dir: PathBuf,
    config: PathBuf,
    port: u16,
    provider: String,
    type_name: String,
    properties: Value,
    http: reqwest::Client,
}

impl World {
    fn new(logs: &Logs, provider_toml: &str, provider: &str, type_name: &str, kind: &str, properties: Value) -> World {
        let dir = logs.path().to_path_buf();
        let port = free_port();
        let config = dir.join("slipway.toml");
        std::fs::write(
            &config,
            format!(
                r#"
[server]
listen = "127.0.0.1:{port}"
retry_after_seconds = 0
[store]
url = "sqlite:{db}"
[engine]
node_name = "restore-test"
shutdown_grace_seconds = 5
{provider_toml}
[[types]]
namespace = "Slipway.Example"
type = "{type_name}"
kind = "{kind}"
api_versions = ["{API}"]
provider = "{provider}"
poll_interval_seconds = 0.3
backoff_base_seconds = 1
backoff_max_seconds = 1
"#,
                db = dir.join("slipway.db").display(),
            ),
        )
        .unwrap();
        World {
            dir,
            config,
            port,
            provider: provider.into(),
            type_name: type_name.into(),
            properties,
            http: reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap(),
        }
    }

    fn id(&self, name: &str) -> String {
        rid(&self.type_name, name)
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn backup_path(&self) -> PathBuf {
        self.dir.join("backup.db")
    }

    fn second_backup(&self) -> PathBuf {
        self.dir.join("backup-again.db")
    }

    /// A copy of the first backup, for a second restore from the same point.
    fn backup_file_for_second_restore(&self) {
        std::fs::copy(self.backup_path(), self.second_backup()).unwrap();
    }

    fn backup(&self) {
        let out = self.slipway(&["backup", self.backup_path().to_str().unwrap()]);
        assert!(out.status.success(), "backup failed: {}", text(&out));
        let again = self.slipway(&["backup", self.backup_path().to_str().unwrap()]);
        assert!(!again.status.success() && text(&again).contains("never overwrites"), "{}", text(&again));
    }

    /// Runs a server command of the binary on this configuration.
    fn slipway(&self, args: &[&str]) -> Output {
        // Bounded: a `serve` that wrongly starts must not hang the test.
        let out = Command::new("timeout")
            .arg("120")
            .arg(env!("CARGO_BIN_EXE_slipway"))
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("SLIPWAY_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run slipway");
        let name = args.first().copied().unwrap_or("slipway");
        let _ = std::fs::write(self.dir.join(format!("{name}-{}.log", std::process::id())), text(&out));
        out
    }

    async fn start_server(&self) -> Child {
        let lives = std::fs::read_dir(&self.dir)
            .unwrap()
            .filter(|e| e.as_ref().is_ok_and(|e| is_server_log(e.path().as_path())))
            .count();
        let log = self.dir.join(format!("server-{lives}.log"));
        let child = spawn_slipway(&self.config, &log, "info");
        let ready = ready_within(&self.http, &self.base(), T).await;
        ready.unwrap_or_else(|e| panic!("slipway not ready ({e}); logs in {}", self.dir.display()));
        child
    }

    /// Stops the server as an operator would (SIGTERM) and waits for it.
    fn stop_server(&self, mut child: Child) {
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        let status = child.wait().expect("wait for slipway");
        assert!(status.success(), "slipway did not stop cleanly: {status}; logs in {}", self.dir.display());
    }

    async fn put(&self, name: &str) -> String {
        let body = json!({"location": "local", "properties": self.properties});
        let resp =
            self.http.put(format!("{}{}?api-version={API}", self.base(), self.id(name))).json(&body).send().await;
        let resp = resp.expect("PUT");
        assert!(resp.status().is_success(), "PUT {name}: {}", resp.status());
        operation_of(&resp)
    }

    async fn delete(&self, name: &str) -> String {
        let resp = self.http.delete(format!("{}{}?api-version={API}", self.base(), self.id(name))).send().await;
        let resp = resp.expect("DELETE");
        assert_eq!(resp.status().as_u16(), 202, "DELETE {name}");
        operation_of(&resp)
    }

    async fn get_status(&self, path: &str) -> (u16, Value) {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = if path.contains("api-version") {
            format!("{}{path}", self.base())
        } else {
            format!("{}{path}{sep}api-version={API}", self.base())
        };
        let resp = self.http.get(url).send().await.expect("GET");
        let code = resp.status().as_u16();
        (code, resp.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Value {
        let (code, body) = self.get_status(path).await;
        assert_eq!(code, 200, "GET {path}: {body}");
        body
    }

    async fn wait_op(&self, op: &str, want: &str) {
        eventually(&format!("operation {op} {want}"), T, async || {
            let (_, body) = self.get_status(op).await;
            match body["status"].as_str() {
                Some(s) if s == want => Ok(()),
                Some(s @ ("Succeeded" | "Failed" | "Canceled")) => panic!("operation {op} ended {s}: {body}"),
                other => Err(format!("{other:?}")),
            }
        })
        .await
    }

    async fn wait_resource(&self, name: &str, want: &str) {
        let id = self.id(name);
        eventually(&format!("{name} {want}"), T, async || {
            let (_, body) = self.get_status(&id).await;
            let state = body["properties"]["provisioningState"].as_str().unwrap_or_default().to_string();
            if state == want { Ok(()) } else { Err(state) }
        })
        .await
    }
}

fn is_server_log(p: &Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("server-"))
}

fn operation_of(resp: &reqwest::Response) -> String {
    let url = resp.headers().get("azure-asyncoperation").and_then(|v| v.to_str().ok()).expect("Azure-AsyncOperation");
    path_of(url)
}

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
