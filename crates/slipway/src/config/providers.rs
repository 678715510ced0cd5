//! `[[providers]]`: the local Ansible runner and AWX / AAP instances.

use std::path::PathBuf;

use serde::Deserialize;
use slipway_aap::AapOptions;
use slipway_ansible::AnsibleOptions;

/// One automation backend instance, selected by `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ProviderConfig {
    /// Local `ansible-runner` processes.
    Ansible(Box<AnsibleConfig>),
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
    /// The job directories; relative: in the data directory (`server.data_dir`).
    #[serde(default = "default_work_dir")]
    pub work_dir: PathBuf,
    /// A path (with a `/`; relative: against the config's directory), or a bare name looked
    /// for in a `.venv/bin` beside the config (or above it), then on `PATH`.
    #[serde(default = "default_runner")]
    pub runner: PathBuf,
    /// The jobs' `ansible_python_interpreter`, found as `runner` is; unset: the `python`
    /// beside the runner (its venv's).
    #[serde(default)]
    pub python: Option<PathBuf>,
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
    /// How long a finished job's directory (its output and artifacts) is kept.
    #[serde(default = "default_job_retention")]
    pub job_retention_seconds: u64,
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
    /// A running job's progress is read once it has run this long, then at most this often
    /// (one request per job and interval; 0: at every status poll).
    #[serde(default = "default_progress_interval")]
    pub progress_interval_seconds: u64,
    /// Progress reads per second at most, in all this provider's jobs (they cannot be
    /// batched like status reads).
    #[serde(default = "default_progress_reads")]
    pub progress_reads_per_second: f64,
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
fn default_progress_interval() -> u64 {
    AapOptions::default().progress_every.as_secs()
}
fn default_progress_reads() -> f64 {
    AapOptions::default().progress_reads_per_second
}
fn default_work_dir() -> PathBuf {
    "jobs".into()
}
fn default_runner() -> PathBuf {
    "ansible-runner".into()
}
fn default_job_retention() -> u64 {
    AnsibleOptions::default().job_retention.as_secs()
}

fn default_cancel_grace() -> u64 {
    AnsibleOptions::default().cancel_grace.as_secs()
}
fn default_max_jobs() -> usize {
    AnsibleOptions::default().max_concurrent
}
