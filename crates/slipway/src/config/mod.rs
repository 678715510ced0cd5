//! `slipway.toml`: one file, every key overridable by `SLIPWAY_*` environment variables
//! (`SLIPWAY_SERVER__LISTEN=0.0.0.0:8080`, `SLIPWAY_TYPES__0__POLL_INTERVAL_SECONDS=5`).
//! Relative paths are resolved against the config file's directory (for the built-in
//! default, the `examples/` directory of the source tree the binary was built from), except
//! Slipway's own files — the SQLite database, job directories — which go under the data
//! directory (`server.data_dir`). Every default is read from the option type the key
//! configures (`ApiOptions`, `ListenerOptions`, `EngineOptions`, `AapOptions`, …), so each
//! number is written once.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use slipway_listener::TlsOptions;
use slipway_store::postgres::SslMode;

mod auth;
mod diagnose;
mod guardrails;
mod providers;
mod sections;
#[cfg(test)]
mod tests;
mod types;

pub use auth::*;
pub use guardrails::*;
pub use providers::*;
pub use sections::*;
pub use types::*;

/// The configuration used when no file is given: SQLite in the data directory, the local
/// Ansible provider, and the example resource types under `examples/`.
pub const DEFAULT_CONFIG: &str = include_str!("../../../../examples/slipway.toml");

/// Where the built-in default's relative paths point: the `examples/` directory it was
/// embedded from. A binary used where that checkout is gone needs `--config`.
pub fn built_in_dir() -> PathBuf {
    let mut dir = PathBuf::new();
    for part in Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples")).components() {
        match part {
            std::path::Component::ParentDir => {
                dir.pop();
            }
            other => dir.push(other),
        }
    }
    dir
}

/// The data directory's name under the platform's data directory.
const DATA_DIR_NAME: &str = "slipway";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {0}: {1}")]
    Read(PathBuf, std::io::Error),
    /// The file does not load: one problem per line, each saying where it is.
    #[error("{0}")]
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
    pub auth: Option<crate::config::AuthConfig>,
    /// Keys for secret properties; required when a type's schema marks one.
    #[serde(default)]
    pub secrets: Option<SecretsConfig>,
    /// Quota meters and their default limits.
    #[serde(default)]
    pub quota: QuotaConfig,
    /// The activity log's export.
    #[serde(default)]
    pub activity: ActivityConfig,
    /// The platform's policy definitions.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Directory of the config file; base for relative paths.
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// Loaded from the built-in default rather than a file.
    #[serde(skip)]
    pub built_in: bool,
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
            None => (DEFAULT_CONFIG.to_string(), built_in_dir()),
        };
        let origin = path.map_or_else(|| "the built-in configuration".to_string(), |p| p.display().to_string());
        // Every problem of the file at once, each where it is, rather than the first alone.
        let located = || ConfigError::Parse(diagnose::problems(&text, &origin).join("\n"));
        let mut value: toml::Value = toml::from_str(&text).map_err(|_| located())?;
        for (k, v) in env {
            if let Some(rest) = k.strip_prefix("SLIPWAY_")
                && rest.contains("__")
            {
                apply_override(&mut value, rest, &v).map_err(|e| ConfigError::Env(k.clone(), e))?;
            }
        }
        let mut config: Config = value.try_into().map_err(|e: toml::de::Error| {
            let in_file = diagnose::problems(&text, &origin);
            // Nothing wrong with the file as written: an environment override broke it.
            if in_file.is_empty() {
                ConfigError::Parse(format!("the configuration after the SLIPWAY_* overrides: {e}"))
            } else {
                located()
            }
        })?;
        config.base_dir = base_dir;
        config.built_in = path.is_none();
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(ConfigError::Invalid(problems.join("\n")));
        }
        Ok(config)
    }

    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() { p.to_path_buf() } else { self.base_dir.join(p) }
    }

    /// The data directory, absolute: `server.data_dir` (relative: against the config's
    /// directory), else the platform's data directory + `slipway`.
    pub fn data_dir(&self) -> Result<PathBuf, String> {
        let dir = match &self.server.data_dir {
            Some(d) if d.as_os_str().is_empty() => return Err("server.data_dir is empty".into()),
            Some(d) => self.resolve(d),
            None => dirs::data_dir().map(|d| d.join(DATA_DIR_NAME)).ok_or(
                "server.data_dir is not set and there is no platform data directory (neither $XDG_DATA_HOME nor \
                 a home directory): set server.data_dir",
            )?,
        };
        std::path::absolute(&dir).map_err(|e| format!("server.data_dir {}: {e}", dir.display()))
    }

    /// One of Slipway's own files or directories: a relative path goes under the data
    /// directory.
    pub fn in_data_dir(&self, p: &Path) -> Result<PathBuf, String> {
        if p.is_absolute() { Ok(p.to_path_buf()) } else { Ok(self.data_dir()?.join(p)) }
    }

    /// Creates the data directory (owner-only) when something configured lives in it; it
    /// then holds the database, the job directories and the examples' state files.
    pub fn create_data_dir(&self) -> Result<(), String> {
        if !self.uses_data_dir() {
            return Ok(());
        }
        let dir = self.data_dir()?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("creating the data directory {}: {e}", dir.display()))
    }

    /// Whether a relative path puts something in the data directory: the SQLite database or
    /// a local provider's job directories.
    pub fn uses_data_dir(&self) -> bool {
        let database = self.store.sqlite_path().is_some_and(|p| Path::new(p).is_relative());
        let jobs = self.providers.iter().any(|p| matches!(p, ProviderConfig::Ansible(a) if a.work_dir.is_relative()));
        database || jobs
    }

    /// Why the built-in default cannot work here: its schemas and playbooks are read from the
    /// checkout it was built from, which is gone. One problem instead of one per file.
    pub fn origin_problem(&self) -> Option<String> {
        (self.built_in && !self.base_dir.is_dir()).then(|| {
            format!(
                "the built-in configuration reads its schemas and playbooks from {}, where this binary was built, \
                 and that directory is gone: give --config a copy of examples/slipway.toml (docs/install.md)",
                self.base_dir.display()
            )
        })
    }

    /// `[server]`'s TLS files, resolved; `None`: plain HTTP.
    pub fn tls_options(&self) -> Result<Option<TlsOptions>, ConfigError> {
        let s = &self.server;
        let (cert, key) = match (&s.tls_cert_file, &s.tls_key_file) {
            (Some(cert), Some(key)) => (self.resolve(cert), self.resolve(key)),
            (None, None) if s.tls_client_ca_file.is_none() => return Ok(None),
            (None, None) => {
                return Err(ConfigError::Invalid(
                    "server.tls_client_ca_file needs server.tls_cert_file and server.tls_key_file".into(),
                ));
            }
            _ => {
                return Err(ConfigError::Invalid(
                    "server.tls_cert_file and server.tls_key_file go together: give both or neither".into(),
                ));
            }
        };
        Ok(Some(TlsOptions {
            client_ca_file: s.tls_client_ca_file.as_ref().map(|p| self.resolve(p)),
            reload_interval: std::time::Duration::from_secs(s.tls_reload_interval_seconds),
            ..TlsOptions::new(cert, key)
        }))
    }

    /// `[store]`'s TLS settings for PostgreSQL: the mode (if set) and the resolved root
    /// certificates; refused for SQLite.
    pub fn store_tls(&self) -> Result<(Option<SslMode>, Option<PathBuf>), ConfigError> {
        let s = &self.store;
        let postgres = s.url.starts_with("postgres://") || s.url.starts_with("postgresql://");
        if !postgres && (s.sslmode.is_some() || s.ssl_root_cert.is_some()) {
            return Err(ConfigError::Invalid("store.sslmode and store.ssl_root_cert apply to PostgreSQL only".into()));
        }
        let mode =
            s.sslmode.as_deref().map(str::parse).transpose().map_err(|e| ConfigError::Invalid(format!("store.{e}")))?;
        Ok((mode, s.ssl_root_cert.as_ref().map(|p| self.resolve(p))))
    }

    /// Every problem the sections have together, all at once (a misspelled provider must not
    /// hide the next type's problem).
    fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |result: Result<(), ConfigError>| {
            if let Err(e) = result {
                out.push(e.to_string());
            }
        };
        for p in &self.providers {
            if let ProviderConfig::Aap(a) = p
                && a.launch_ambiguity_seconds() < a.request_timeout_seconds
            {
                check(Err(ConfigError::Invalid(format!(
                    "provider '{}': launch_ambiguity_seconds ({}) is shorter than request_timeout_seconds ({}): a \
                     launch request that timed out could still create its job after Slipway launched the key again",
                    a.name,
                    a.launch_ambiguity_seconds(),
                    a.request_timeout_seconds
                ))));
            }
        }
        for (i, t) in self.types.iter().enumerate() {
            let entry = format!("types[{i}] ({}/{})", t.namespace, t.type_name);
            check(self.type_problem(t).map_err(|e| ConfigError::Invalid(format!("{entry}: {e}"))));
        }
        if let Some(auth) = &self.auth {
            check(auth.options(&self.base_dir).map(drop).map_err(ConfigError::Invalid));
            check(access_options(Some(auth)).map(drop).map_err(ConfigError::Invalid));
            check(rate_limiter(Some(auth)).map(drop).map_err(ConfigError::Invalid));
        }
        check(self.notifications.callback_policy().map(drop));
        check(self.tls_options().map(drop));
        check(self.store_tls().map(drop));
        out
    }

    /// The first problem of one type's entry (its checks build on each other).
    fn type_problem(&self, t: &TypeConfig) -> Result<(), ConfigError> {
        if !self.providers.iter().any(|p| p.name() == t.provider) {
            let known: Vec<&str> = self.providers.iter().map(|p| p.name()).collect();
            return Err(ConfigError::Invalid(format!(
                "type {}/{} uses provider '{}', which is not configured (configured: {})",
                t.namespace,
                t.type_name,
                t.provider,
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )));
        }
        if !t.poll_interval_seconds.is_finite() || t.poll_interval_seconds <= 0.0 {
            return Err(ConfigError::Invalid(format!(
                "type {}/{}: poll_interval_seconds must be positive",
                t.namespace, t.type_name
            )));
        }
        if let Some(max) = t.max_poll_interval_seconds
            && !(max.is_finite() && max >= t.poll_interval_seconds)
        {
            return Err(ConfigError::Invalid(format!(
                "type {}/{}: max_poll_interval_seconds = {max} must be at least poll_interval_seconds ({})",
                t.namespace, t.type_name, t.poll_interval_seconds
            )));
        }
        t.name_rule()?;
        if let Some(parent) = t.parent_type() {
            let declared = self
                .types
                .iter()
                .any(|p| p.namespace.eq_ignore_ascii_case(&t.namespace) && p.type_name.eq_ignore_ascii_case(parent));
            if !declared {
                return Err(ConfigError::Invalid(format!(
                    "type {}/{}: its parent type {}/{parent} is not configured",
                    t.namespace, t.type_name, t.namespace
                )));
            }
        }
        let leaf = t.type_name.rsplit('/').next().unwrap_or_default();
        let reserved = [(slipway_types::JOBS_SEGMENT, "job history"), (slipway_types::EVENTS_SEGMENT, "event feed")];
        if let Some((name, what)) = reserved.iter().find(|(name, _)| leaf.eq_ignore_ascii_case(name))
            && t.parent_type().is_some()
        {
            return Err(ConfigError::Invalid(format!(
                "type {}/{}: `{{id}}/{name}` is a resource's {what}; a child type cannot be named {name}",
                t.namespace, t.type_name
            )));
        }
        let children: Vec<&TypeConfig> = self.types.iter().filter(|c| t.is_parent_of(c)).collect();
        t.check_actions(&children)?;
        if !t.type_name.split('/').all(slipway_domain::ids::type_segment_ok) {
            return Err(ConfigError::Invalid(format!(
                "type {}/{}: a type name is letters and digits, a child type's segments joined by '/' \
                 (virtualNetworks/subnets)",
                t.namespace, t.type_name
            )));
        }
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
