//! `slipway check-config`: everything `serve` would refuse, and what it would only find out
//! when a tenant's job fails (a missing playbook), each problem naming its entry
//! (`types[2] (Contoso.Dns/dnsRecords): …`).

use std::net::ToSocketAddrs;

use slipway_domain::ids::namespace_ok;
use slipway_provider::JobAction;

use crate::app::{build_provider, build_type, explicit_names};
use crate::config::{Config, ProviderConfig, TypeConfig};

/// Every problem found; empty when `serve` would start with this configuration.
pub fn check(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    if config.server.listen.to_socket_addrs().is_err() {
        problems.push(format!("server.listen: '{}' is not an address to listen on (host:port)", config.server.listen));
    }
    if let Err(e) = config.server.metrics_access(config) {
        problems.push(e);
    }
    for (i, p) in config.providers.iter().enumerate() {
        if let Err(e) = build_provider(config, p, &Default::default()) {
            problems.push(format!("providers[{i}] ({}): {e}", p.name()));
        }
    }
    for (i, t) in config.types.iter().enumerate() {
        let entry = format!("types[{i}] ({}/{})", t.namespace, t.type_name);
        let same = |o: &&TypeConfig| {
            o.namespace.eq_ignore_ascii_case(&t.namespace) && o.type_name.eq_ignore_ascii_case(&t.type_name)
        };
        if config.types[..i].iter().any(|o| same(&o)) {
            problems.push(format!("{entry}: configured twice"));
        }
        problems.extend(type_problems(config, t).into_iter().map(|p| format!("{entry}: {p}")));
    }
    if problems.is_empty()
        // Across types: a schema referencing a type that is not configured.
        && let Err(e) = crate::app::build_types(config)
    {
        problems.push(e.to_string());
    }
    problems
}

fn type_problems(config: &Config, t: &TypeConfig) -> Vec<String> {
    let mut problems = Vec::new();
    if !namespace_ok(&t.namespace) {
        problems.push(format!(
            "namespace '{}' is not a resource provider namespace (letters and digits in dot-separated parts, e.g. \
             Contoso.Dns)",
            t.namespace
        ));
    }
    for v in &t.api_versions {
        if !api_version_ok(v) {
            problems.push(format!("api-version '{v}' is not a date (YYYY-MM-DD, optionally -preview)"));
        }
    }
    if t.backoff_base_seconds > t.backoff_max_seconds {
        problems.push(format!(
            "backoff_base_seconds ({}) is more than backoff_max_seconds ({})",
            t.backoff_base_seconds, t.backoff_max_seconds
        ));
    }
    if let Err(e) = build_type(config, t) {
        problems.push(e.to_string());
    }
    problems.extend(missing_playbooks(config, t));
    problems
}

/// The playbooks a type's jobs need that its ansible provider's directory lacks.
pub fn missing_playbooks(config: &Config, t: &TypeConfig) -> Vec<String> {
    let Some(ProviderConfig::Ansible(a)) = config.providers.iter().find(|p| p.name() == t.provider) else {
        return Vec::new();
    };
    let dir = config.resolve(&a.playbook_dir);
    let names = explicit_names(config, &a.name);
    job_words(t)
        .into_iter()
        .filter_map(|action| {
            let name = slipway_ansible::playbook_name(&names, a.playbook_prefix.as_deref(), &t.kind, &action);
            (!dir.join(&name).is_file())
                .then(|| format!("the {} playbook {name} is not in {}", action.as_str(), dir.display()))
        })
        .collect()
}

/// Every kind of job a type runs: create and delete, its preflight validation, its actions.
fn job_words(t: &TypeConfig) -> Vec<JobAction> {
    let mut words = vec![JobAction::Create, JobAction::Delete];
    if t.preflight {
        words.push(JobAction::Validate);
    }
    words.extend(t.actions.keys().map(|name| JobAction::Run(name.clone())));
    words
}

/// `check-config --online`: asks each provider whether it can take work (an AAP
/// controller: reachable, credentials accepted) and whether every job the types need could
/// start there (each template exists, in the organization, and prompts for variables).
pub async fn check_online(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, p) in config.providers.iter().enumerate() {
        let entry = format!("providers[{i}] ({})", p.name());
        let provider = match build_provider(config, p, &Default::default()) {
            Ok(provider) => provider,
            Err(e) => {
                problems.push(format!("{entry}: {e}"));
                continue;
            }
        };
        if let Err(e) = provider.check().await {
            problems.push(format!("{entry}: not ready: {e}"));
            continue;
        }
        for (j, t) in config.types.iter().enumerate().filter(|(_, t)| t.provider == p.name()) {
            for action in job_words(t) {
                if let Some(Err(e)) = provider.check_job(&t.kind, &action).await {
                    problems.push(format!(
                        "types[{j}] ({}/{}): the {} job: {e}",
                        t.namespace,
                        t.type_name,
                        action.as_str()
                    ));
                }
            }
        }
        provider.shutdown().await;
    }
    problems
}

/// `Contoso.Dns`: two or more dot-separated parts, each a letter then letters and digits.
/// `2025-06-01` or `2025-06-01-preview`.
fn api_version_ok(v: &str) -> bool {
    let date = v.strip_suffix("-preview").unwrap_or(v);
    let b = date.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_and_api_versions() {
        for (ns, ok) in [
            ("Contoso.Dns", true),
            ("A.B.C1", true),
            ("Contoso", false),
            ("Contoso.", false),
            ("1a.b", false),
            ("Con-toso.Dns", false),
        ] {
            assert_eq!(namespace_ok(ns), ok, "{ns}");
        }
        for (v, ok) in [
            ("2025-06-01", true),
            ("2025-06-01-preview", true),
            ("2025-6-01", false),
            ("v1", false),
            ("2025-06-01-beta", false),
        ] {
            assert_eq!(api_version_ok(v), ok, "{v}");
        }
    }
}
