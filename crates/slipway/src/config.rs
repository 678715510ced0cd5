//! `slipway.toml`: one file, every key overridable by `SLIPWAY_*` environment variables
//! (`SLIPWAY_SERVER__LISTEN=0.0.0.0:8080`, `SLIPWAY_TYPES__0__POLL_INTERVAL_SECONDS=5`).
//! Relative paths are resolved against the config file's directory (the working directory
//! for the built-in default).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use slipway_aap::AapOptions;
use slipway_ansible::AnsibleOptions;
use slipway_api::notify::{CallbackPolicy, NotifierOptions};
use slipway_api::types::{ARM_NAME_MAX_LENGTH, NameRule};
use slipway_api::{ApiOptions, ListenerOptions};
use slipway_domain::TypePolicy;
use slipway_engine::EngineOptions;
use slipway_store::postgres::PostgresOptions;

/// The configuration used when no file is given: SQLite in the working directory, the local
/// Ansible provider, and the example resource types under `examples/`.
pub const DEFAULT_CONFIG: &str = include_str!("../../../examples/slipway.toml");

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("parsing configuration: {0}")]
    Parse(String),
    #[error("environment override {0}: {1}")]
    Env(String, String),
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: Server,
    #[serde(default)]
    pub store: StoreConfig,
    #[serde(default)]
    pub engine: EngineConfig,
    #[serde(default)]
    pub notifications: NotificationsConfig,
    #[serde(default)]
    pub providers: Vec<ProviderConfig>,
    #[serde(default)]
    pub types: Vec<TypeConfig>,
    /// Absent: authentication is off and only loopback addresses are served.
    #[serde(default)]
    pub auth: Option<crate::auth_config::AuthConfig>,
    /// Directory of the config file; base for relative paths.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    pub listen: String,
    /// RP location in operation URLs.
    pub location: String,
    pub retry_after_seconds: u64,
    pub max_body_bytes: usize,
    pub page_size: usize,
    /// From the first byte of a request head to its end; then the connection is closed.
    pub header_read_timeout_seconds: u64,
    /// From the end of a request head to the end of its body; then 408 and close.
    pub body_read_timeout_seconds: u64,
    /// Waiting for the first request on a connection, or the next on a kept-alive one.
    pub idle_timeout_seconds: u64,
    /// Most client connections at once; 0 = the open-file limit minus a reserve.
    pub max_connections: usize,
    /// Scheme and authority of the absolute URLs Slipway hands out, e.g.
    /// `https://slipway.example.com`; unset: the request's `Host`.
    pub public_base_url: Option<String>,
    /// Proxies (IP addresses or CIDR ranges) whose `Referer` / `X-Forwarded-*` are believed.
    pub trusted_proxies: Vec<String>,
}

// Defaults are those of the option types the keys configure: one number, one place.

impl Default for Server {
    fn default() -> Self {
        let api = ApiOptions::default();
        let listener = ListenerOptions::default();
        Server {
            listen: "127.0.0.1:8080".into(),
            location: api.location,
            retry_after_seconds: api.retry_after_secs,
            max_body_bytes: api.max_body_bytes,
            page_size: api.page_size,
            header_read_timeout_seconds: listener.header_read_timeout.as_secs(),
            body_read_timeout_seconds: listener.body_read_timeout.as_secs(),
            idle_timeout_seconds: listener.idle_timeout.as_secs(),
            max_connections: listener.max_connections,
            public_base_url: None,
            trusted_proxies: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite:PATH` (or a bare path), or `postgres://user@host:port/database`.
    pub url: String,
    /// SQLite: `full` (default: an accepted operation survives power loss) or `normal`.
    pub synchronous: String,
    pub operation_ttl_seconds: u64,
    /// PostgreSQL: keep the tables in this schema (created if missing).
    pub schema: Option<String>,
    /// PostgreSQL: connections per replica.
    pub pool_size: usize,
    /// PostgreSQL: limit on every statement (and on waiting for a pooled connection).
    pub statement_timeout_seconds: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: "sqlite:slipway.db".into(),
            synchronous: "full".into(),
            operation_ttl_seconds: slipway_store::DEFAULT_OPERATION_TTL.as_secs(),
            schema: None,
            pool_size: PostgresOptions::DEFAULT_POOL_SIZE,
            statement_timeout_seconds: PostgresOptions::DEFAULT_STATEMENT_TIMEOUT.as_secs(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// Lease owner name; defaults to the host name.
    pub node_name: Option<String>,
    pub lease_seconds: u64,
    pub max_concurrent: usize,
    pub shutdown_grace_seconds: u64,
    /// Most jobs in one provider status call (1 turns batching off).
    pub status_batch: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let engine = EngineOptions::default();
        EngineConfig {
            node_name: None,
            lease_seconds: engine.lease_for.as_secs(),
            max_concurrent: engine.max_concurrent,
            shutdown_grace_seconds: engine.shutdown_grace.as_secs(),
            status_batch: engine.status_batch,
        }
    }
}

/// Async notification delivery (`Azure-AsyncNotificationUri` callbacks).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationsConfig {
    /// The whole callback request, connecting included.
    pub request_timeout_seconds: u64,
    pub connect_timeout_seconds: u64,
    /// Deliveries in flight at once.
    pub max_concurrent: usize,
    /// Deliveries in flight at once to one destination (`host:port` of the callback URI).
    pub max_per_destination: usize,
    /// Attempts per notification before it is given up (kept as dead and logged).
    pub max_attempts: u32,
    /// Retries wait 1 s, doubling up to this (per notification, and per failing destination).
    pub max_backoff_seconds: u64,
    /// Callback URIs a request may name: `scheme://host[:port]` patterns, a host may be
    /// `*.example.com`; empty: any public host.
    pub callback_allowlist: Vec<String>,
    /// Allow `http` callbacks (default: `https` only).
    pub callback_allow_http: bool,
    /// Allow callbacks to loopback, private, link-local and other non-public addresses.
    pub callback_allow_private_networks: bool,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        let n = NotifierOptions::default();
        NotificationsConfig {
            request_timeout_seconds: n.request_timeout.as_secs(),
            connect_timeout_seconds: n.connect_timeout.as_secs(),
            max_concurrent: n.max_concurrent,
            max_per_destination: n.max_per_destination,
            max_attempts: n.max_attempts,
            max_backoff_seconds: n.max_backoff.as_secs(),
            callback_allowlist: n.callbacks.allowlist(),
            callback_allow_http: n.callbacks.allow_http(),
            callback_allow_private_networks: n.callbacks.allow_private_networks(),
        }
    }
}

impl NotificationsConfig {
    /// The callback policy these keys describe (the API admits and the notifier sends by it).
    pub fn callback_policy(&self) -> Result<CallbackPolicy, ConfigError> {
        CallbackPolicy::new(&self.callback_allowlist, self.callback_allow_http, self.callback_allow_private_networks)
            .map_err(|e| ConfigError::Invalid(format!("notifications: {e}")))
    }
}

/// One automation backend instance, selected by `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ProviderConfig {
    /// Local `ansible-runner` processes.
    Ansible(AnsibleConfig),
    /// AWX / Ansible Automation Platform REST API v2.
    Aap(Box<AapConfig>),
}

impl ProviderConfig {
    pub fn name(&self) -> &str {
        match self {
            ProviderConfig::Ansible(a) => &a.name,
            ProviderConfig::Aap(a) => &a.name,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnsibleConfig {
    pub name: String,
    pub playbook_dir: PathBuf,
    #[serde(default = "default_work_dir")]
    pub work_dir: PathBuf,
    #[serde(default = "default_runner")]
    pub runner: PathBuf,
    #[serde(default = "default_python")]
    pub python: PathBuf,
    #[serde(default)]
    pub playbook_prefix: Option<String>,
    #[serde(default)]
    pub job_timeout_seconds: Option<u64>,
    #[serde(default = "default_cancel_grace")]
    pub cancel_grace_seconds: u64,
    /// Jobs run at once; further launches wait.
    #[serde(default = "default_max_jobs")]
    pub max_concurrent_jobs: usize,
    /// Static extra vars for every job of this provider.
    #[serde(default)]
    pub extra_vars: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AapConfig {
    pub name: String,
    /// e.g. `https://aap.example.com`.
    pub url: String,
    /// `/api/` (AWX, AAP <= 2.4) or `/api/controller/` (AAP 2.5+ gateway).
    #[serde(default = "default_api_prefix")]
    pub api_prefix: String,
    /// Bearer token, read from a file or an environment variable (never from this file).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    #[serde(default)]
    pub token_env: Option<String>,
    /// Basic credentials instead of a token.
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    #[serde(default)]
    pub password_env: Option<String>,
    /// Restricts template lookups to this organization.
    #[serde(default)]
    pub organization: Option<String>,
    /// `{prefix}-{create|delete}-{kind-kebab}` template names.
    #[serde(default)]
    pub template_prefix: Option<String>,
    /// Per-kind suffix replacing `kind-kebab` (e.g. `ClusterOrder = "hosted-cluster"`).
    #[serde(default)]
    pub kind_overrides: std::collections::HashMap<String, String>,
    /// `slipway` (default) or `osac` (`ansible_eda.event.payload`, for OSAC playbooks).
    #[serde(default = "default_envelope")]
    pub envelope: String,
    #[serde(default)]
    pub ca_bundle: Option<PathBuf>,
    /// Accept any certificate. Test installations only.
    #[serde(default)]
    pub insecure: bool,
    #[serde(default = "default_request_timeout")]
    pub request_timeout_seconds: u64,
    /// The longest AAP may still process a launch request after it was sent (a controller
    /// finishes a request it received even when Slipway stopped waiting): until then, "no job
    /// for the key" does not allow a relaunch. At least `request_timeout_seconds`; default
    /// `request_timeout_seconds + 60`.
    #[serde(default)]
    pub launch_ambiguity_seconds: Option<u64>,
    #[serde(default = "default_max_requests")]
    pub max_concurrent_requests: usize,
    /// How long a job may be missing from AAP before it counts as purged (Failed).
    #[serde(default = "default_purge_grace")]
    pub purge_grace_seconds: u64,
    /// Shared token for `POST /hooks/{name}` (AAP webhook notifications); no token, no hook.
    #[serde(default)]
    pub webhook_token_file: Option<PathBuf>,
    #[serde(default)]
    pub webhook_token_env: Option<String>,
}

impl AapConfig {
    pub fn launch_ambiguity_seconds(&self) -> u64 {
        self.launch_ambiguity_seconds.unwrap_or(self.request_timeout_seconds.saturating_add(LAUNCH_AMBIGUITY_MARGIN))
    }
}

/// Added to the request timeout for the default launch-ambiguity window: time for a
/// controller under load to finish a request after the client gave up, and for clock skew.
const LAUNCH_AMBIGUITY_MARGIN: u64 = 60;

fn default_api_prefix() -> String {
    "/api/".into()
}
fn default_envelope() -> String {
    "slipway".into()
}
fn default_request_timeout() -> u64 {
    AapOptions::default().request_timeout.as_secs()
}
fn default_max_requests() -> usize {
    AapOptions::default().max_concurrent_requests
}
fn default_purge_grace() -> u64 {
    AapOptions::default().purge_grace.as_secs()
}
fn default_work_dir() -> PathBuf {
    ".slipway/jobs".into()
}
fn default_runner() -> PathBuf {
    ".venv/bin/ansible-runner".into()
}
fn default_python() -> PathBuf {
    ".venv/bin/python".into()
}
fn default_cancel_grace() -> u64 {
    AnsibleOptions::default().cancel_grace.as_secs()
}
fn default_max_jobs() -> usize {
    AnsibleOptions::default().max_concurrent
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeConfig {
    pub namespace: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub kind: String,
    pub api_versions: Vec<String>,
    /// JSON Schema file for `properties`.
    #[serde(default)]
    pub schema: Option<PathBuf>,
    pub provider: String,
    /// Explicit playbook or template names; default `{prefix}-{create|delete}-{kind-kebab}`.
    #[serde(default)]
    pub create: Option<String>,
    #[serde(default)]
    pub delete: Option<String>,
    #[serde(default = "default_poll")]
    pub poll_interval_seconds: f64,
    /// Convergence retries after a failure; `false` stops after the operation fails.
    #[serde(default = "default_retry_failures")]
    pub retry_failures: bool,
    #[serde(default = "default_backoff_base")]
    pub backoff_base_seconds: u64,
    #[serde(default = "default_backoff_max")]
    pub backoff_max_seconds: u64,
    #[serde(default = "default_create_deadline")]
    pub create_deadline_seconds: u64,
    #[serde(default = "default_update_deadline")]
    pub update_deadline_seconds: u64,
    #[serde(default = "default_delete_deadline")]
    pub delete_deadline_seconds: u64,
    #[serde(default = "default_history")]
    pub max_history: usize,
    #[serde(default = "default_block_deletion")]
    pub block_deletion_on_failure: bool,
    /// A regular expression every resource name of this type must match as a whole, on top
    /// of ARM's common rule (no `<>%&:\?/` or control characters).
    #[serde(default)]
    pub name_pattern: Option<String>,
    /// Longest resource name of this type, at most ARM's 260 (the default).
    #[serde(default = "default_name_max_length")]
    pub name_max_length: usize,
}

impl TypeConfig {
    /// The type's rule for resource names; a bad pattern or length is an error naming the type.
    pub fn name_rule(&self) -> Result<NameRule, ConfigError> {
        let name = format!("{}/{}", self.namespace, self.type_name);
        NameRule::new(&name, self.name_max_length, self.name_pattern.as_deref())
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }
}

fn default_name_max_length() -> usize {
    ARM_NAME_MAX_LENGTH
}

fn policy() -> TypePolicy {
    TypePolicy::default()
}
fn default_poll() -> f64 {
    policy().poll_interval.as_secs_f64()
}
fn default_retry_failures() -> bool {
    policy().backoff.is_some()
}
fn default_backoff_base() -> u64 {
    policy().deprovision_backoff().base.as_secs()
}
fn default_backoff_max() -> u64 {
    policy().deprovision_backoff().max.as_secs()
}
fn default_create_deadline() -> u64 {
    policy().create_deadline.as_secs()
}
fn default_update_deadline() -> u64 {
    policy().update_deadline.as_secs()
}
fn default_delete_deadline() -> u64 {
    policy().delete_deadline.as_secs()
}
fn default_history() -> usize {
    policy().max_history
}
fn default_block_deletion() -> bool {
    policy().block_deletion_on_failure
}

impl Config {
    /// Reads `path` (or the built-in default), applies `SLIPWAY_*` overrides from `env`.
    pub fn load(path: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let (text, base_dir) = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| ConfigError::Read(p.to_path_buf(), e))?;
                let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
                (text, dir)
            }
            None => (DEFAULT_CONFIG.to_string(), PathBuf::new()),
        };
        let mut value: toml::Value = toml::from_str(&text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        for (k, v) in env {
            if let Some(rest) = k.strip_prefix("SLIPWAY_")
                && rest.contains("__")
            {
                apply_override(&mut value, rest, &v).map_err(|e| ConfigError::Env(k.clone(), e))?;
            }
        }
        let mut config: Config = value.try_into().map_err(|e: toml::de::Error| ConfigError::Parse(e.to_string()))?;
        config.base_dir = base_dir;
        config.validate()?;
        Ok(config)
    }

    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() { p.to_path_buf() } else { self.base_dir.join(p) }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        for p in &self.providers {
            if let ProviderConfig::Aap(a) = p
                && a.launch_ambiguity_seconds() < a.request_timeout_seconds
            {
                return Err(ConfigError::Invalid(format!(
                    "provider '{}': launch_ambiguity_seconds ({}) is shorter than request_timeout_seconds ({}): a \
                     launch request that timed out could still create its job after Slipway launched the key again",
                    a.name,
                    a.launch_ambiguity_seconds(),
                    a.request_timeout_seconds
                )));
            }
        }
        for t in &self.types {
            if !self.providers.iter().any(|p| p.name() == t.provider) {
                return Err(ConfigError::Invalid(format!(
                    "type {}/{} uses provider '{}', which is not configured",
                    t.namespace, t.type_name, t.provider
                )));
            }
            if !t.poll_interval_seconds.is_finite() || t.poll_interval_seconds <= 0.0 {
                return Err(ConfigError::Invalid(format!(
                    "type {}/{}: poll_interval_seconds must be positive",
                    t.namespace, t.type_name
                )));
            }
            t.name_rule()?;
        }
        self.notifications.callback_policy()?;
        Ok(())
    }
}

/// `SERVER__LISTEN` → `server.listen`; numeric segments index arrays. Values parse as TOML
/// scalars when they can (numbers, booleans), else as strings.
fn apply_override(root: &mut toml::Value, path: &str, raw: &str) -> Result<(), String> {
    let segs: Vec<String> = path.split("__").map(|s| s.to_ascii_lowercase()).collect();
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let mut cur = root;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        cur = match cur {
            toml::Value::Table(t) => {
                if last {
                    t.insert(seg.clone(), value);
                    return Ok(());
                }
                t.entry(seg.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()))
            }
            toml::Value::Array(a) => {
                let idx: usize = seg.parse().map_err(|_| format!("'{seg}' is not an array index"))?;
                let slot = a.get_mut(idx).ok_or_else(|| format!("index {idx} is out of range"))?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            _ => return Err(format!("'{seg}' is below a plain value")),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_loads() {
        let c = Config::load(None, []).unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:8080");
        let s = &c.server;
        let limits = (s.header_read_timeout_seconds, s.body_read_timeout_seconds, s.idle_timeout_seconds);
        assert_eq!((limits, s.max_connections), ((10, 30, 60), 0), "the example's server limits are the defaults");
        let d = Server::default();
        assert_eq!((d.header_read_timeout_seconds, d.body_read_timeout_seconds, d.idle_timeout_seconds), limits);
        assert_eq!(c.store.url, "sqlite:slipway.db");
        assert!(c.types.len() >= 4);
        assert!(matches!(c.providers[0], ProviderConfig::Ansible(_)));
    }

    #[test]
    fn notifications_default_as_the_example_says_and_can_be_overridden() {
        let n = Config::load(None, []).unwrap().notifications;
        let d = NotificationsConfig::default();
        let keys = |n: &NotificationsConfig| {
            (
                n.request_timeout_seconds,
                n.connect_timeout_seconds,
                n.max_concurrent,
                n.max_per_destination,
                n.max_attempts,
                n.max_backoff_seconds,
            )
        };
        assert_eq!(keys(&n), (5, 2, 32, 4, 20, 300));
        assert_eq!(keys(&d), keys(&n), "the example's notification settings are the defaults");
        let env = [("SLIPWAY_NOTIFICATIONS__MAX_PER_DESTINATION".to_string(), "2".to_string())];
        assert_eq!(Config::load(None, env).unwrap().notifications.max_per_destination, 2);
        let unknown = [("SLIPWAY_NOTIFICATIONS__TIMEOUT".to_string(), "1".to_string())];
        assert!(matches!(Config::load(None, unknown), Err(ConfigError::Parse(_))));
    }

    #[test]
    fn env_overrides_tables_arrays_and_scalars() {
        let env = [
            ("SLIPWAY_SERVER__LISTEN".to_string(), "0.0.0.0:9000".to_string()),
            ("SLIPWAY_SERVER__RETRY_AFTER_SECONDS".to_string(), "5".to_string()),
            ("SLIPWAY_TYPES__0__POLL_INTERVAL_SECONDS".to_string(), "0.5".to_string()),
            ("SLIPWAY_IGNORED".to_string(), "x".to_string()),
        ];
        let c = Config::load(None, env).unwrap();
        assert_eq!(c.server.listen, "0.0.0.0:9000");
        assert_eq!(c.server.retry_after_seconds, 5);
        assert_eq!(c.types[0].poll_interval_seconds, 0.5);
    }

    #[test]
    fn aap_providers_parse() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slipway.toml");
        std::fs::write(
            &path,
            r#"
[[providers]]
name = "aap"
type = "aap"
url = "https://aap.example.com"
api_prefix = "/api/controller/"
token_env = "AAP_TOKEN"
organization = "Platform"
template_prefix = "osac"
kind_overrides = { ClusterOrder = "hosted-cluster" }
[[types]]
namespace = "Ns"
type = "things"
kind = "Thing"
api_versions = ["2025-01-01"]
provider = "aap"
"#,
        )
        .unwrap();
        let c = Config::load(Some(&path), []).unwrap();
        let ProviderConfig::Aap(a) = &c.providers[0] else { panic!("not aap: {:?}", c.providers[0]) };
        assert_eq!(a.api_prefix, "/api/controller/");
        assert_eq!(a.token_env.as_deref(), Some("AAP_TOKEN"));
        assert_eq!(a.kind_overrides["ClusterOrder"], "hosted-cluster");
        assert_eq!(a.envelope, "slipway");
        assert_eq!(a.launch_ambiguity_seconds(), 90, "the request timeout plus a minute");
        std::fs::write(&path, "[[providers]]\nname = \"x\"\ntype = \"aap\"\nurl = \"u\"\ntoken = \"inline\"\n")
            .unwrap();
        assert!(matches!(Config::load(Some(&path), []), Err(ConfigError::Parse(_))), "no inline secrets");
    }

    #[test]
    fn a_launch_ambiguity_window_shorter_than_the_request_timeout_is_refused() {
        let base =
            "[[providers]]\nname = \"aap\"\ntype = \"aap\"\nurl = \"https://aap\"\nrequest_timeout_seconds = 30\n";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slipway.toml");
        std::fs::write(&path, format!("{base}launch_ambiguity_seconds = 29\n")).unwrap();
        match Config::load(Some(&path), []) {
            Err(ConfigError::Invalid(m)) => {
                assert!(m.contains("provider 'aap'") && m.contains("launch_ambiguity_seconds (29)"), "{m}");
                assert!(m.contains("request_timeout_seconds (30)"), "{m}");
            }
            other => panic!("accepted: {other:?}"),
        }
        std::fs::write(&path, format!("{base}launch_ambiguity_seconds = 30\n")).unwrap();
        Config::load(Some(&path), []).expect("equal to the request timeout is allowed");
    }

    #[test]
    fn callbacks_default_to_https_and_public_hosts_and_bad_allowlists_are_refused() {
        let n = Config::load(None, []).unwrap().notifications;
        assert!(n.callback_allowlist.is_empty());
        assert!(!n.callback_allow_http && !n.callback_allow_private_networks);
        let policy = n.callback_policy().unwrap();
        assert!(policy.check_uri("https://hooks.example.com/cb").is_ok());
        assert!(policy.check_uri("https://127.0.0.1/cb").is_err());
        assert!(policy.check_uri("http://hooks.example.com/cb").is_err());

        let env = [
            ("SLIPWAY_NOTIFICATIONS__CALLBACK_ALLOWLIST".to_string(), r#"["https://*.example.com"]"#.to_string()),
            ("SLIPWAY_NOTIFICATIONS__CALLBACK_ALLOW_PRIVATE_NETWORKS".to_string(), "true".to_string()),
        ];
        let policy = Config::load(None, env).unwrap().notifications.callback_policy().unwrap();
        assert!(policy.check_uri("https://a.example.com/").is_ok());
        assert!(policy.check_uri("https://a.example.org/").is_err());
        assert!(policy.allow_private_networks());

        let http_entry =
            [("SLIPWAY_NOTIFICATIONS__CALLBACK_ALLOWLIST".to_string(), r#"["http://hooks.example.com"]"#.to_string())];
        match Config::load(None, http_entry) {
            Err(ConfigError::Invalid(m)) => {
                assert!(m.contains("callback_allowlist entry 'http://hooks.example.com'"), "{m}");
                assert!(m.contains("callback_allow_http"), "{m}");
            }
            other => panic!("accepted: {other:?}"),
        }
    }

    #[test]
    fn type_name_rules_are_checked_at_load() {
        let c = Config::load(None, []).unwrap();
        assert!(c.types.iter().all(|t| t.name_pattern.is_none() && t.name_max_length == 260));
        let env = |pattern: &str, max: &str| {
            [
                ("SLIPWAY_TYPES__1__NAME_PATTERN".to_string(), format!("\"{pattern}\"")),
                ("SLIPWAY_TYPES__1__NAME_MAX_LENGTH".to_string(), max.to_string()),
            ]
        };
        let c = Config::load(None, env("[a-z][a-z0-9-]*", "24")).unwrap();
        let rule = c.types[1].name_rule().unwrap();
        assert!(rule.allows("subnet-1") && !rule.allows("Subnet_1") && !rule.allows(&"s".repeat(25)));
        let named = format!("type {}/{}", c.types[1].namespace, c.types[1].type_name);
        for (pattern, max, says) in
            [("[a-z", "24", "name_pattern"), ("a", "0", "name_max_length"), ("a", "261", "name_max_length")]
        {
            match Config::load(None, env(pattern, max)) {
                Err(ConfigError::Invalid(m)) => {
                    assert!(m.starts_with(&format!("resource {named}")) && m.contains(says), "{m}");
                }
                other => panic!("{pattern} / {max} accepted: {other:?}"),
            }
        }
    }

    #[test]
    fn bad_overrides_and_unknown_keys_are_errors() {
        let bad = [("SLIPWAY_TYPES__99__KIND".to_string(), "X".to_string())];
        assert!(matches!(Config::load(None, bad), Err(ConfigError::Env(..))));
        let unknown = [("SLIPWAY_SERVER__LISTN".to_string(), "x".to_string())];
        assert!(matches!(Config::load(None, unknown), Err(ConfigError::Parse(_))));
    }
}
