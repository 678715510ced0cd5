//! Slipway replicas as child processes of the real binary, sharing one PostgreSQL schema
//! and an AWX-API simulator.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use aap_sim::Sim;
use slipway_test_support::ready_within;

use super::{API, path_of};

pub fn pg_url() -> String {
    std::env::var("SLIPWAY_TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

pub use super::free_port;

pub struct Replica {
    pub name: String,
    pub port: u16,
    config: PathBuf,
    log_dir: PathBuf,
    lives: usize,
    child: Option<Child>,
}

/// What a replica is configured with beyond the fixed parts (listener, the AAP provider on
/// the simulator, the `computeInstances` type).
#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    /// The PostgreSQL URL (default: [`pg_url`]).
    pub pg_url: String,
    pub schema: String,
    pub lease_seconds: u64,
    pub statement_timeout_seconds: u64,
    pub request_timeout_seconds: u64,
    /// More keys of the AAP provider, e.g. `launch_ambiguity_seconds = 10`.
    pub provider_toml: String,
    /// Appended to the file, e.g. more `[[types]]` ([`aap_type`]).
    pub extra_toml: String,
}

impl ReplicaConfig {
    pub fn new(schema: &str, lease_seconds: u64) -> ReplicaConfig {
        ReplicaConfig {
            pg_url: pg_url(),
            schema: schema.to_string(),
            lease_seconds,
            statement_timeout_seconds: 5,
            request_timeout_seconds: 5,
            // The simulator processes a request at once unless told to delay launches: a
            // second above the request timeout bounds when a sent launch can still land.
            provider_toml: "launch_ambiguity_seconds = 6".into(),
            extra_toml: String::new(),
        }
    }
}

/// A `[[types]]` entry of the example namespace served by the simulator's templates.
pub fn aap_type(type_name: &str, kind: &str) -> String {
    format!(
        r#"
[[types]]
namespace = "Slipway.Example"
type = "{type_name}"
kind = "{kind}"
api_versions = ["{API}"]
provider = "aap"
poll_interval_seconds = 0.5
"#
    )
}

impl Replica {
    pub fn new(dir: &Path, i: usize, schema: &str, sim: &Sim, lease_seconds: u64) -> Replica {
        Self::with_config(dir, i, sim, &ReplicaConfig::new(schema, lease_seconds))
    }

    pub fn with_config(dir: &Path, i: usize, sim: &Sim, c: &ReplicaConfig) -> Replica {
        let port = free_port();
        let name = format!("replica-{i}");
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                r#"
[server]
listen = "127.0.0.1:{port}"
retry_after_seconds = 0
[store]
url = "{pg}"
schema = "{schema}"
pool_size = 8
statement_timeout_seconds = {statement_timeout}
[engine]
node_name = "{name}"
lease_seconds = {lease_seconds}
shutdown_grace_seconds = 5
[[providers]]
name = "aap"
type = "aap"
url = "{sim}"
template_prefix = "slipway"
request_timeout_seconds = {request_timeout}
{provider}
{compute}{extra}"#,
                pg = c.pg_url,
                schema = c.schema,
                statement_timeout = c.statement_timeout_seconds,
                lease_seconds = c.lease_seconds,
                request_timeout = c.request_timeout_seconds,
                provider = c.provider_toml,
                sim = sim.base_url(),
                compute = aap_type("computeInstances", "ComputeInstance"),
                extra = c.extra_toml,
            ),
        )
        .unwrap();
        Replica { name, port, config, log_dir: dir.to_path_buf(), lives: 0, child: None }
    }

    pub fn start(&mut self) {
        self.lives += 1;
        let log = self.log_dir.join(format!("{}-{}.log", self.name, self.lives));
        let filter = std::env::var("SLIPWAY_TEST_REPLICA_LOG").unwrap_or_else(|_| "info".into());
        let child = super::spawn_slipway(&self.config, &log, &filter);
        self.child = Some(child);
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The process id of the running life, if any.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the current life is still running (not exited).
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().is_ok_and(|status| status.is_none()))
    }

    /// Sends a signal (`STOP`, `CONT`, …) to the running life.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().unwrap_or_else(|| panic!("{} is not running", self.name));
        let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().unwrap();
        assert!(status.success(), "kill -{signal} {pid} ({}) failed", self.name);
    }

    /// The log of the current life (stdout and stderr), empty before the first start.
    pub fn log(&self) -> String {
        let path = self.log_dir.join(format!("{}-{}.log", self.name, self.lives));
        std::fs::read_to_string(path).unwrap_or_default()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A tiny deterministic generator: which replica to kill next.
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// A schema name no other test uses.
pub fn unique_schema(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}_{nanos:x}{:x}", std::process::id())
}

/// PUTs a compute instance at `id`, first to replica `first`, then to the next one whenever
/// a replica does not accept it; the status path of the accepted operation, if one did.
pub async fn create_on_any(http: &reqwest::Client, replicas: &[Replica], first: usize, id: &str) -> Option<String> {
    for attempt in 0..replicas.len() {
        let r = &replicas[(first + attempt) % replicas.len()];
        let resp = http
            .put(format!("{}{id}?api-version={API}", r.base()))
            .json(&serde_json::json!({"location": "local", "properties": {"size": "small", "image": "debian"}}))
            .send()
            .await;
        if let Ok(resp) = resp
            && resp.status().as_u16() == 201
        {
            return resp.headers().get("azure-asyncoperation").and_then(|v| v.to_str().ok()).map(path_of);
        }
    }
    None
}

/// A GET answered by the first replica that answers with JSON.
pub async fn get_any(http: &reqwest::Client, replicas: &[Replica], path: &str) -> Option<serde_json::Value> {
    for r in replicas {
        if let Ok(resp) = http.get(format!("{}{path}", r.base())).send().await
            && resp.status().is_success()
            && let Ok(body) = resp.json::<serde_json::Value>().await
        {
            return Some(body);
        }
    }
    None
}

/// A simulator whose job templates run 1 s jobs, ticking every 20 ms.
pub async fn quick_sim() -> Sim {
    let mut config = aap_sim::SimConfig { tick_ms: 20, ..aap_sim::SimConfig::default() };
    for t in &mut config.job_templates {
        t.duration_seconds = 1.0;
    }
    Sim::start("127.0.0.1:0", config).await.unwrap()
}

/// `n` replicas configured by `config`, started, each answering `/readyz`.
pub async fn start_replicas(dir: &Path, sim: &Sim, config: &ReplicaConfig, n: usize) -> Vec<Replica> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let mut replicas: Vec<Replica> = (0..n).map(|i| Replica::with_config(dir, i, sim, config)).collect();
    for r in &mut replicas {
        r.start();
    }
    for r in &replicas {
        let up = ready_within(&http, &r.base(), Duration::from_secs(60)).await;
        up.unwrap_or_else(|e| panic!("{} never became ready ({e}); logs in {}", r.name, dir.display()));
    }
    replicas
}

/// Where the replicas' logs go: removed after a passing run unless `SLIPWAY_TEST_KEEP` is
/// set, kept (and named in failure messages) otherwise.
pub struct Logs {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl Logs {
    pub fn new(prefix: &str) -> Logs {
        let dir = tempfile::Builder::new().prefix(&format!("slipway-{prefix}-")).tempdir().expect("tempdir");
        let path = dir.path().to_path_buf();
        if std::env::var_os("SLIPWAY_TEST_KEEP").is_some() {
            println!("{prefix}: logs in {}", path.display());
        }
        Logs { dir: Some(dir), path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn hint(&self) -> String {
        format!("replica logs in {}", self.path.display())
    }

    /// The run passed: the logs go unless asked to keep them.
    pub fn finish(mut self) {
        if std::env::var_os("SLIPWAY_TEST_KEEP").is_some()
            && let Some(dir) = self.dir.take()
        {
            let _ = dir.keep();
        }
    }
}

impl Drop for Logs {
    /// A failed run keeps its logs for the message that named them.
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(dir) = self.dir.take()
        {
            let _ = dir.keep();
        }
    }
}
