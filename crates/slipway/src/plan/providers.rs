//! `[[providers]]`' part of the plan: each provider's options with its credentials read, and
//! the webhook tokens. A provider is built once here to find what its constructor refuses (a
//! missing runner, an unreadable CA bundle); `serve` builds it again with the metrics of the
//! opened store.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use slipway_aap::{AapAuth, AapOptions, AapProvider, Envelope, Secret};
use slipway_ansible::{AnsibleOptions, AnsibleProvider};
use slipway_metrics::ProviderMetrics;
use slipway_provider::Provider;

use super::{Found, executables};
use crate::config::{AapConfig, AnsibleConfig, Config, ProviderConfig};

/// The extra var that tells a local job the data directory (`server.data_dir`).
pub const DATA_DIR_VAR: &str = "slipway_data_dir";

/// One provider, ready to build.
#[derive(Clone)]
pub enum ProviderPlan {
    Ansible(Box<AnsibleOptions>),
    Aap(Box<AapOptions>),
}

impl ProviderPlan {
    pub fn name(&self) -> &str {
        match self {
            ProviderPlan::Ansible(o) => &o.name,
            ProviderPlan::Aap(o) => &o.name,
        }
    }

    /// The provider, counting its HTTP requests into `metrics`.
    pub fn build(&self, metrics: &ProviderMetrics) -> Result<Arc<dyn Provider>, String> {
        Ok(match self {
            ProviderPlan::Ansible(o) => Arc::new(AnsibleProvider::new(o.as_ref().clone()).map_err(|e| e.to_string())?),
            ProviderPlan::Aap(o) => {
                let options = AapOptions { metrics: metrics.clone(), ..o.as_ref().clone() };
                Arc::new(AapProvider::new(options).map_err(|e| e.to_string())?)
            }
        })
    }
}

/// Every provider, and the webhook tokens by provider name (providers without one get no
/// hook); `None` when one of them is wrong (recorded).
pub(super) fn providers(
    config: &Config,
    owner: &str,
    found: &mut Found,
) -> Option<(Vec<ProviderPlan>, HashMap<String, String>)> {
    let mut plans = Vec::new();
    let mut hooks = HashMap::new();
    let mut all_ok = true;
    for (i, p) in config.providers.iter().enumerate() {
        let entry = format!("providers[{i}] ({})", p.name());
        let planned = found.within(&entry, |here| {
            if config.providers[..i].iter().any(|o| o.name() == p.name()) {
                here.add("configured twice");
            }
            let plan = match p {
                ProviderConfig::Ansible(a) => ansible(config, a, here).map(|o| ProviderPlan::Ansible(Box::new(o))),
                ProviderConfig::Aap(a) => {
                    if let Some(token) = webhook_token(config, a, here) {
                        hooks.insert(a.name.clone(), token);
                    }
                    aap(config, a, owner, here).map(|o| ProviderPlan::Aap(Box::new(o)))
                }
            };
            // What the constructor refuses, once every key is right.
            let plan = plan.filter(|_| here.is_empty())?;
            here.ok(plan.build(&ProviderMetrics::default())).map(|_| plan)
        });
        match planned {
            Some(plan) => plans.push(plan),
            None => all_ok = false,
        }
    }
    all_ok.then_some((plans, hooks))
}

fn ansible(config: &Config, p: &AnsibleConfig, found: &mut Found) -> Option<AnsibleOptions> {
    let path_var = std::env::var_os("PATH");
    let runner = found.ok(executables::find("runner", &p.runner, &config.base_dir, path_var.as_deref()));
    let python = match &p.python {
        Some(python) => found.ok(executables::find("python", python, &config.base_dir, path_var.as_deref())),
        // The provider takes the `python` beside the runner.
        None => Some(PathBuf::new()),
    };
    let work_dir = found.ok(config.in_data_dir(&p.work_dir).map_err(|e| format!("work_dir: {e}")));
    let mut extra_vars: serde_json::Map<String, serde_json::Value> =
        serde_json::to_value(&p.extra_vars).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
    // Where a job on this machine may keep files of its own (the example playbooks' state
    // files go to its `state/`); a configured value wins.
    if let Ok(dir) = config.data_dir() {
        extra_vars.entry(DATA_DIR_VAR).or_insert_with(|| dir.display().to_string().into());
    }
    Some(AnsibleOptions {
        name: p.name.clone(),
        playbook_dir: absolute(config.resolve(&p.playbook_dir)),
        work_dir: work_dir?,
        runner: runner?,
        python_interpreter: python?,
        playbook_prefix: p.playbook_prefix.clone(),
        playbooks: explicit_names(config, &p.name),
        job_timeout: p.job_timeout_seconds.map(Duration::from_secs),
        cancel_grace: Duration::from_secs(p.cancel_grace_seconds),
        job_retention: Duration::from_secs(p.job_retention_seconds),
        max_concurrent: found.at_least("max_concurrent_jobs", p.max_concurrent_jobs, 1),
        extra_vars,
        ..AnsibleOptions::default()
    })
}

fn aap(config: &Config, p: &AapConfig, owner: &str, found: &mut Found) -> Option<AapOptions> {
    let token = secret("token", &p.token_file, &p.token_env, config, found);
    let password = secret("password", &p.password_file, &p.password_env, config, found);
    let auth = match (token, &p.username, password) {
        (Some(Some(t)), None, Some(None)) => Some(AapAuth::Token(t)),
        (Some(None), Some(u), Some(Some(pw))) => Some(AapAuth::Basic { username: u.clone(), password: pw }),
        (Some(None), None, Some(None)) => Some(AapAuth::None),
        (None, _, _) | (_, _, None) => None, // unreadable: recorded
        _ => {
            found.add("configure either a token (token_file/token_env) or username + password");
            None
        }
    };
    let envelope = match p.envelope.as_str() {
        "slipway" => Some(Envelope::Slipway),
        "osac" => Some(Envelope::OsacEda),
        other => {
            found.add(format!("envelope '{other}': use slipway or osac"));
            None
        }
    };
    let request_timeout = found.at_least("request_timeout_seconds", p.request_timeout_seconds, 1);
    let max_concurrent_requests = found.at_least("max_concurrent_requests", p.max_concurrent_requests, 1);
    Some(AapOptions {
        name: p.name.clone(),
        client_id: format!("{owner}/{}", p.name),
        base_url: p.url.clone(),
        api_prefix: p.api_prefix.clone(),
        auth: auth?,
        organization: p.organization.clone(),
        template_prefix: p.template_prefix.clone(),
        templates: explicit_names(config, &p.name),
        kind_overrides: p.kind_overrides.clone(),
        envelope: envelope?,
        ca_bundle: p.ca_bundle.as_ref().map(|c| config.resolve(c)),
        insecure: p.insecure,
        request_timeout: Duration::from_secs(request_timeout),
        max_concurrent_requests,
        purge_grace: Duration::from_secs(p.purge_grace_seconds),
        progress_every: Duration::from_secs(p.progress_interval_seconds),
        progress_reads_per_second: p.progress_reads_per_second,
        ..AapOptions::default()
    })
}

fn webhook_token(config: &Config, a: &AapConfig, found: &mut Found) -> Option<String> {
    let token = secret("webhook_token", &a.webhook_token_file, &a.webhook_token_env, config, found)??;
    Some(token.expose().to_string())
}

/// A secret from a file or an environment variable: `Some(None)` when neither is given,
/// `None` when it cannot be read (recorded; the message never contains the value).
fn secret(
    what: &str,
    file: &Option<PathBuf>,
    env: &Option<String>,
    config: &Config,
    found: &mut Found,
) -> Option<Option<Secret>> {
    let loaded = match (file, env) {
        (Some(_), Some(_)) => {
            found.add(format!("give {what}_file or {what}_env, not both"));
            return None;
        }
        (Some(f), None) => Some(Secret::from_file(config.resolve(f))),
        (None, Some(var)) => Some(Secret::from_env(var)),
        (None, None) => None,
    };
    found.ok(loaded.transpose().map_err(|e| format!("{what}: {e}")))
}

/// Explicit template or playbook names of the types served by `provider`.
pub fn explicit_names(config: &Config, provider: &str) -> slipway_provider::ExplicitNames {
    config
        .types
        .iter()
        .filter(|t| t.provider == provider)
        .map(|t| (t.kind.clone(), t.explicit_names()))
        .filter(|(_, names)| !names.is_empty())
        .collect()
}

/// The provider's launch-ambiguity window. The local provider has none: its launch runs in
/// this process and is exclusive by the job directory the key names, so a launch that was
/// not answered cannot create a job later.
pub(super) fn launch_ambiguity(config: &Config, provider: &str) -> Duration {
    match config.providers.iter().find(|p| p.name() == provider) {
        Some(ProviderConfig::Aap(a)) => Duration::from_secs(a.launch_ambiguity_seconds()),
        Some(ProviderConfig::Ansible(_)) | None => Duration::ZERO,
    }
}

fn absolute(p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        return p;
    }
    std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p)
}

/// This node's name: the lease owner, and in each AAP client's `User-Agent`.
pub(super) fn node_name(config: &Config) -> String {
    config.engine.node_name.clone().unwrap_or_else(host_name)
}

fn host_name() -> String {
    std::fs::read_to_string(Path::new("/proc/sys/kernel/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "local".into())
}
