//! Starts a whole Slipway in-process (SQLite in a temp dir, the local Ansible provider, the
//! example types) on an ephemeral port, for black-box HTTP tests.

pub mod browser;
pub mod postgres;
pub mod progress;
pub mod replica;
pub mod sse;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use slipway::app::App;
use slipway::config::Config;
use slipway_test_support::{TestClock, eventually};

pub const API: &str = "2025-06-01";

/// A loopback port nobody listens on right now, for a server a test starts later.
///
/// Taken below the kernel's ephemeral range (32768–60999 on Linux): a port the kernel handed
/// out for `:0` could be handed to another test's `:0` bind (or an outgoing connection) before
/// this test's server binds it, which failed a run with `AddrInUse`. Below that range only this
/// function hands ports out, each once per process (a counter), starting at an offset of the
/// process id so that two test processes rarely overlap; one in use anyway is skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id() % SPAN;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < SPAN, "every test port below the ephemeral range is taken");
        let port = u16::try_from(FIRST + (start + n) % SPAN).expect("below 32000");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The real binary serving `config`, its output to `log`, logging at `filter`.
pub fn spawn_slipway(config: &Path, log: &Path, filter: &str) -> std::process::Child {
    let log = std::fs::File::create(log).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_slipway"))
        .args(["serve", "--config"])
        .arg(config)
        .env("SLIPWAY_LOG", filter)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn slipway")
}
pub const SUB: &str = "11111111-1111-1111-1111-111111111111";

/// Subnets as children of virtual networks (without a schema), which the example compute
/// schema's `subnetId` references: part of every test configuration.
const SUBNETS: &str = r#"
[[types]]
namespace = "Slipway.Example"
type = "virtualNetworks/subnets"
kind = "Subnet"
api_versions = ["2025-06-01"]
provider = "ansible"
poll_interval_seconds = 0.2
"#;

/// The example's clusters (preflight checks, an `upgrade` action, node pools and external
/// auths as children) and `machines`, compute instances with the example's `restart`, `stop`
/// and `start` actions: `tables` for [`TestServer::start_full`].
pub fn composite_types() -> String {
    let schema = |file: &str| repo().join("examples/schemas").join(file).display().to_string();
    let ty = |name: &str, kind: &str, file: &str, extra: &str| {
        format!(
            "\n[[types]]\nnamespace = \"Slipway.Example\"\ntype = \"{name}\"\nkind = \"{kind}\"\n\
             api_versions = [\"{API}\"]\nschema = \"{}\"\nprovider = \"ansible\"\npoll_interval_seconds = 0.2\n{extra}",
            schema(file)
        )
    };
    [
        ty(
            "clusters",
            "Cluster",
            "clusters.json",
            &format!("preflight = true\n[types.actions.upgrade]\nschema = \"{}\"\n", schema("clusters.upgrade.json")),
        ),
        ty("clusters/nodePools", "NodePool", "nodePools.json", ""),
        ty("clusters/externalAuths", "ExternalAuth", "externalAuths.json", ""),
        ty(
            "machines",
            "ComputeInstance",
            "computeInstances.json",
            &format!(
                "[types.actions.restart]\nschema = \"{}\"\n[types.actions.stop]\n[types.actions.start]\n",
                schema("computeInstances.restart.json")
            ),
        ),
    ]
    .concat()
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// Installs the Python tools once, the test tools with them (idempotent; fast when already
/// there).
pub fn python_tools() -> PathBuf {
    static READY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            let status = std::process::Command::new(repo().join("scripts/setup-python.sh"))
                .arg("--test")
                .status()
                .expect("run setup-python.sh");
            assert!(status.success(), "setup-python.sh failed");
            repo().join(".venv")
        })
        .clone()
}

/// A config for tests: everything under `dir`, fast polling, short Retry-After.
pub fn config_text(dir: &Path, extra_type_settings: &str) -> String {
    let repo = repo();
    let venv = python_tools();
    let mut types = String::new();
    for (ty, kind) in [
        ("virtualNetworks", "VirtualNetwork"),
        ("subnets", "Subnet"),
        ("securityGroups", "SecurityGroup"),
        ("computeInstances", "ComputeInstance"),
    ] {
        types.push_str(&format!(
            r#"
[[types]]
namespace = "Slipway.Example"
type = "{ty}"
kind = "{kind}"
api_versions = ["{API}"]
schema = "{schema}"
provider = "ansible"
poll_interval_seconds = 0.2
{extra_type_settings}
"#,
            schema = repo.join(format!("examples/schemas/{ty}.json")).display(),
        ));
    }
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
retry_after_seconds = 0

[store]
url = "sqlite:{db}"

[engine]
node_name = "test"
shutdown_grace_seconds = 10

[[providers]]
name = "ansible"
type = "ansible"
playbook_dir = "{playbooks}"
work_dir = "{jobs}"
runner = "{venv}/bin/ansible-runner"
python = "{venv}/bin/python"
playbook_prefix = "slipway"
cancel_grace_seconds = 3
extra_vars = {{ slipway_state_dir = "{state}" }}
{types}{SUBNETS}"#,
        state = dir.join("state").display(),
        db = dir.join("slipway.db").display(),
        playbooks = repo.join("examples/playbooks").display(),
        jobs = dir.join("jobs").display(),
        venv = venv.display(),
    )
}

/// `config` (from [`config_text`]) with extra keys in its `[server]` table.
pub fn with_server_settings(config: &str, server_settings: &str) -> String {
    config.replacen("[server]\n", &format!("[server]\n{server_settings}\n"), 1)
}

pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub base: String,
    pub app: Option<App>,
    pub http: reqwest::Client,
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with("").await
    }

    pub async fn start_with(extra_type_settings: &str) -> TestServer {
        Self::start_configured("", extra_type_settings).await
    }

    /// With extra `[server]` keys (`"idle_timeout_seconds = 2\nmax_connections = 64"`).
    pub async fn start_with_server(server_settings: &str) -> TestServer {
        Self::start_configured(server_settings, "").await
    }

    async fn start_configured(server_settings: &str, extra_type_settings: &str) -> TestServer {
        Self::start_full(server_settings, extra_type_settings, "", |_| {}).await
    }

    /// With extra `[server]` keys and `tables` appended to the config (e.g. `[auth]`);
    /// `before` runs on the temp dir first (e.g. to write a JWKS file or create tokens).
    pub async fn start_full(
        server_settings: &str,
        extra_type_settings: &str,
        tables: &str,
        before: impl FnOnce(&Path),
    ) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        before(dir.path());
        let mut text = with_server_settings(&config_text(dir.path(), extra_type_settings), server_settings);
        text.push_str(tables);
        Self::start_text(dir, &text).await
    }

    /// Serves the configuration `text`, written into `dir` (which the server then owns).
    pub async fn start_text(dir: tempfile::TempDir, text: &str) -> TestServer {
        init_logging();
        let path = dir.path().join("slipway.toml");
        std::fs::write(&path, text).expect("write config");
        let config = Config::load(Some(&path), []).expect("config");
        // The server reads tokio's time, which a test moves with `slipway_test_support::jump`.
        let app = App::start(config, Arc::new(TestClock::new())).await.expect("start slipway");
        let base = format!("http://{}", app.addr);
        TestServer { dir, base, app: Some(app), http: reqwest::Client::new() }
    }

    pub async fn stop(&mut self) {
        if let Some(app) = self.app.take() {
            app.shutdown().await.expect("clean shutdown");
        }
    }

    pub fn url(&self, path: &str) -> String {
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{}{path}{sep}api-version={API}", self.base)
    }

    pub async fn put(&self, path: &str, body: Value) -> reqwest::Response {
        self.http.put(self.url(path)).json(&body).send().await.expect("PUT")
    }

    /// Sends `request` as it is (no URL normalisation, any bytes) and reads the whole answer:
    /// its status and body.
    pub async fn raw(&self, request: &[u8]) -> (u16, String, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut sock = tokio::net::TcpStream::connect(self.base.trim_start_matches("http://")).await.unwrap();
        sock.write_all(request).await.unwrap();
        let mut answer = Vec::new();
        sock.read_to_end(&mut answer).await.unwrap();
        let text = String::from_utf8_lossy(&answer).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, head.to_string(), body.to_string())
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.expect("GET")
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let r = self.get(path).await;
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// GETs an absolute URL from a response header.
    pub async fn follow(&self, url: &str) -> (u16, Value) {
        let r = self.http.get(url).send().await.expect("GET");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Polls an operation-status URL until it is terminal.
    pub async fn wait_terminal(&self, status_url: &str, timeout: Duration) -> Value {
        eventually("the operation to end", timeout, async || {
            let (code, body) = self.follow(status_url).await;
            assert_eq!(code, 200, "status endpoint: {body}");
            match body["status"].as_str() {
                Some("Succeeded" | "Failed" | "Canceled") => Ok(body),
                _ => Err(body.to_string()),
            }
        })
        .await
    }

    /// Sends `method` to `path` with `version` (`api-version=…`) and reads the answer: its
    /// status and JSON body (`null` when there is none).
    pub async fn call_at(&self, method: &str, path: &str, version: &str, body: Option<Value>) -> (u16, Value) {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut req = self.http.request(method.parse().unwrap(), format!("{}{path}{sep}{version}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("request");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Sends a resource write (`PUT`, `PATCH`, `DELETE`, an action's `POST`) and, when it was
    /// accepted, waits for its operation to succeed: the answer's status and body.
    pub async fn write(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http.request(method.parse().unwrap(), self.url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("request");
        let code = r.status().as_u16();
        let op = header(&r, "azure-asyncoperation");
        let answer: Value = r.json().await.unwrap_or(Value::Null);
        if let Some(op) = op {
            assert_eq!(
                self.wait_terminal(&op, Duration::from_secs(90)).await["status"],
                "Succeeded",
                "{method} {path}"
            );
        }
        (code, answer)
    }

    /// Waits until `f` holds for the resource body (or its absence: status 404).
    pub async fn wait_resource(&self, path: &str, timeout: Duration, f: impl Fn(u16, &Value) -> bool) -> (u16, Value) {
        eventually(&format!("the condition on {path}"), timeout, async || {
            let (code, body) = self.get_json(path).await;
            if f(code, &body) { Ok((code, body)) } else { Err(format!("{code} {body}")) }
        })
        .await
    }
}

/// `SLIPWAY_LOG=debug cargo test …` shows what the server did.
pub fn init_logging() {
    if let Ok(filter) = std::env::var("SLIPWAY_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// The path (and query) of a URL: what to GET on another base, e.g. another replica.
pub fn path_of(url: &str) -> String {
    format!("/{}", url.splitn(4, '/').nth(3).unwrap_or_default())
}

pub fn rid(ty: &str, name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/rg1/providers/Slipway.Example/{ty}/{name}")
}

pub fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}
