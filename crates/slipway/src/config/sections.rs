//! `[server]`, `[store]`, `[engine]` and `[notifications]`.

use std::path::PathBuf;

use serde::Deserialize;
use slipway_api::ApiOptions;
use slipway_engine::EngineOptions;
use slipway_listener::{ListenerOptions, TlsOptions};
use slipway_notify::{CallbackNetworks, CallbackPolicy, CallbackSchemes, NotifierOptions};
use slipway_store::postgres::PostgresOptions;

use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    pub listen: String,
    /// Where Slipway keeps its own files: the SQLite database, the local provider's job
    /// directories, and (for the example playbooks) their state files. Relative: against the
    /// config file's directory. Unset: the platform's data directory + `slipway`
    /// (`$XDG_DATA_HOME/slipway`, else `~/.local/share/slipway`).
    pub data_dir: Option<PathBuf>,
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
    /// PEM certificate chain (the server's first); with `tls_key_file`, serve HTTPS.
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// PEM bundle: clients must present a certificate chaining to one of these.
    pub tls_client_ca_file: Option<PathBuf>,
    /// How often the TLS files are read to pick up a new certificate.
    pub tls_reload_interval_seconds: u64,
    /// `text` (for people) or `json` (one object per line, for a log pipeline).
    pub log_format: LogFormat,
    /// Who may scrape `GET /metrics`: `open` (anyone reaching the listener), `token` (a
    /// bearer token, read from `metrics_token_file`) or `off`.
    pub metrics: MetricsExposure,
    /// The file holding the scrape token when `metrics = "token"` (whitespace trimmed).
    pub metrics_token_file: Option<PathBuf>,
    /// What a resource's create does when its group does not exist: `implicit` makes it,
    /// `explicit` refuses with ARM's `404 ResourceGroupNotFound`.
    pub resource_groups: ResourceGroups,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceGroups {
    #[default]
    Implicit,
    Explicit,
}

impl ResourceGroups {
    pub fn creation(self) -> slipway_api::GroupCreation {
        match self {
            ResourceGroups::Implicit => slipway_api::GroupCreation::Implicit,
            ResourceGroups::Explicit => slipway_api::GroupCreation::Explicit,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsExposure {
    #[default]
    Open,
    Token,
    Off,
}

impl Server {
    /// `metrics` and `metrics_token_file` as the API takes them; the token never appears in
    /// an error.
    pub fn metrics_access(&self, config: &Config) -> Result<slipway_api::MetricsAccess, String> {
        use slipway_api::MetricsAccess;
        match (self.metrics, &self.metrics_token_file) {
            (MetricsExposure::Open, None) => Ok(MetricsAccess::Open),
            (MetricsExposure::Off, None) => Ok(MetricsAccess::Off),
            (MetricsExposure::Token, Some(file)) => {
                let path = config.resolve(file);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("server.metrics_token_file {}: {e}", path.display()))?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(format!("server.metrics_token_file {} is empty", path.display()));
                }
                Ok(MetricsAccess::Token(token.to_string()))
            }
            (MetricsExposure::Token, None) => Err("server.metrics = \"token\" needs server.metrics_token_file".into()),
            (_, Some(_)) => Err("server.metrics_token_file is only read with server.metrics = \"token\"".into()),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

// Defaults are those of the option types the keys configure: one number, one place.

impl Default for Server {
    fn default() -> Self {
        let api = ApiOptions::default();
        let listener = ListenerOptions::default();
        Server {
            listen: "127.0.0.1:8080".into(),
            data_dir: None,
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
            tls_cert_file: None,
            tls_key_file: None,
            tls_client_ca_file: None,
            tls_reload_interval_seconds: TlsOptions::DEFAULT_RELOAD_INTERVAL.as_secs(),
            log_format: LogFormat::Text,
            metrics: MetricsExposure::Open,
            metrics_token_file: None,
            resource_groups: ResourceGroups::Implicit,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite:PATH` (or a bare path; relative: in the data directory), or
    /// `postgres://user@host:port/database`.
    pub url: String,
    /// SQLite: `full` (default: an accepted operation survives power loss) or `normal`.
    pub synchronous: String,
    pub operation_ttl_seconds: u64,
    /// How long a change's events stay in the event feed; a reader further behind starts over.
    pub event_retention_seconds: u64,
    /// How long the activity log keeps an entry.
    pub activity_retention_days: u64,
    /// PostgreSQL: keep the tables in this schema (created if missing).
    pub schema: Option<String>,
    /// PostgreSQL: connections per replica.
    pub pool_size: usize,
    /// PostgreSQL: limit on every statement (and on waiting for a pooled connection).
    pub statement_timeout_seconds: u64,
    /// PostgreSQL: `disable`, `prefer`, `require` or `verify-full`; unset: the URL's
    /// `sslmode`, else `prefer`.
    pub sslmode: Option<String>,
    /// PostgreSQL with `verify-full`: PEM root certificates the server's must chain to;
    /// unset: the URL's `sslrootcert`, else the webpki (Mozilla) roots.
    pub ssl_root_cert: Option<PathBuf>,
    /// PostgreSQL: `none`, or `session` behind a connection pooler in session mode.
    pub pooler: String,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: "sqlite:slipway.db".into(),
            synchronous: "full".into(),
            operation_ttl_seconds: slipway_store::DEFAULT_OPERATION_TTL.as_secs(),
            event_retention_seconds: slipway_store::DEFAULT_EVENT_RETENTION.as_secs(),
            activity_retention_days: slipway_store::DEFAULT_ACTIVITY_RETENTION.as_secs() / 86_400,
            schema: None,
            pool_size: PostgresOptions::DEFAULT_POOL_SIZE,
            statement_timeout_seconds: PostgresOptions::DEFAULT_STATEMENT_TIMEOUT.as_secs(),
            sslmode: None,
            ssl_root_cert: None,
            pooler: "none".into(),
        }
    }
}

impl StoreConfig {
    /// The SQLite database's path as written (`sqlite:PATH`, `sqlite://PATH` or a bare
    /// path); `None` for PostgreSQL or another scheme.
    pub fn sqlite_path(&self) -> Option<&str> {
        let url = self.url.as_str();
        if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            return Some(path);
        }
        (!url.contains("://")).then_some(url)
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
    /// Most drift checks this node runs at once…
    pub max_drift_checks: usize,
    /// …and at most this share of `max_concurrent` (0 < share ≤ 1).
    pub drift_share: f64,
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
            max_drift_checks: engine.max_drift_checks,
            drift_share: engine.drift_share,
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
        CallbackPolicy::new(
            &self.callback_allowlist,
            if self.callback_allow_http { CallbackSchemes::HttpAndHttps } else { CallbackSchemes::HttpsOnly },
            if self.callback_allow_private_networks {
                CallbackNetworks::PrivateToo
            } else {
                CallbackNetworks::PublicOnly
            },
        )
        .map_err(|e| ConfigError::Invalid(format!("notifications: {e}")))
    }
}

/// `[secrets]`: the keys that seal secret properties (AES-256-GCM). The first seals; every
/// one opens what it sealed, so a key rotates by putting the new one first and keeping the
/// old ones until every resource has been written again.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsConfig {
    /// Files of 32 random bytes as 64 hex digits or base64 (`openssl rand -hex 32`), mode 0600.
    pub key_files: Vec<PathBuf>,
}

/// `[activity]`: the activity log's export for a SIEM.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ActivityConfig {
    /// `stdout`, or a file (relative: in the data directory) every entry recorded while
    /// Slipway runs is appended to, one JSON line each; unset: no export.
    pub sink: Option<String>,
}
