//! `[[types]]`' part of the plan: each type's schemas, name rule and engine policy, the
//! references between types, the keys sealing secret properties, and the playbooks the
//! types' jobs need.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use slipway_domain::backoff::BackoffPolicy;
use slipway_domain::drift::{DriftPolicy, Remediation};
use slipway_domain::ids::{self, namespace_ok};
use slipway_domain::policy::DEFAULT_MAX_POLL_INTERVAL;
use slipway_domain::{TypeKey, TypePolicy};
use slipway_provider::JobAction;
use slipway_secrets::Keyring;
use slipway_types::{ActionType, ResourceKind, ResourceType, TypeRegistry};

use super::{Found, Problem};
use crate::config::{Config, DriftRemediation, ProviderConfig, TypeConfig};
use crate::plan::providers::{explicit_names, launch_ambiguity};

/// The registry the API serves and each type's engine policy; `None` when a type is wrong
/// (recorded).
pub(super) fn types(config: &Config, found: &mut Found) -> Option<(TypeRegistry, HashMap<TypeKey, TypePolicy>)> {
    let configured: HashSet<TypeKey> = config.types.iter().map(|t| TypeKey::new(&t.namespace, &t.type_name)).collect();
    let mut types = Vec::new();
    let mut policies = HashMap::new();
    let mut all_ok = true;
    for (i, t) in config.types.iter().enumerate() {
        let built = found.within(&entry(i, t), |here| {
            let same = |o: &TypeConfig| {
                o.namespace.eq_ignore_ascii_case(&t.namespace) && o.type_name.eq_ignore_ascii_case(&t.type_name)
            };
            if config.types[..i].iter().any(same) {
                here.add("configured twice");
            }
            if t.namespace.eq_ignore_ascii_case(ids::GROUP_NAMESPACE) {
                here.add("the namespace Microsoft.Resources is ARM's own (resource groups, tags): choose another");
            }
            checks(t, here);
            let policy = policy(config, t, here);
            let ty = here.ok(build_type(config, t));
            for target in ty.iter().flat_map(|ty| ty.reference_targets()).filter(|k| !configured.contains(k)) {
                here.add(format!("its schema references the type {target}, which is not configured"));
            }
            if let Some(ty) = &ty
                && ty.schema().is_some_and(|s| !slipway_secrets::secret_properties(s).is_empty())
                && key_files(config).is_empty()
            {
                here.add("its schema marks secret properties but [secrets] key_files is not configured");
            }
            Some((ty?, policy?)).filter(|_| here.is_empty())
        });
        match built {
            Some((ty, policy)) => {
                policies.insert(ty.key(), policy);
                types.push(ty);
            }
            None => all_ok = false,
        }
    }
    for target in types.iter().flat_map(|t| t.reference_targets().collect::<Vec<_>>()) {
        if let Some(p) = policies.get_mut(&target) {
            p.is_referenced = true;
        }
    }
    // A group's delete deletes what it holds: it may take as long as the slowest type's.
    let slowest = policies.values().map(|p: &TypePolicy| p.delete_deadline).max();
    let group = TypePolicy::resource_group(slowest.unwrap_or(TypePolicy::default().delete_deadline));
    policies.insert(TypeKey::new(ids::GROUP_NAMESPACE, ids::GROUP_TYPE_NAME), group);
    all_ok.then(|| (TypeRegistry::new(types), policies))
}

/// `types[2] (Contoso.Dns/dnsRecords)`.
fn entry(i: usize, t: &TypeConfig) -> String {
    format!("types[{i}] ({}/{})", t.namespace, t.type_name)
}

/// What loading does not check of a type.
fn checks(t: &TypeConfig, found: &mut Found) {
    if !namespace_ok(&t.namespace) {
        found.add(format!(
            "namespace '{}' is not a resource provider namespace (letters and digits in dot-separated parts, e.g. \
             Contoso.Dns)",
            t.namespace
        ));
    }
    for v in &t.api_versions {
        if !api_version_ok(v) {
            found.add(format!("api-version '{v}' is not a date (YYYY-MM-DD, optionally -preview)"));
        }
    }
    if t.backoff_base_seconds > t.backoff_max_seconds {
        found.add(format!(
            "backoff_base_seconds ({}) is more than backoff_max_seconds ({})",
            t.backoff_base_seconds, t.backoff_max_seconds
        ));
    }
}

/// One configured type: its schema, its actions' schemas, its name rule.
fn build_type(config: &Config, t: &TypeConfig) -> Result<ResourceType, String> {
    let schema = t.schema.as_ref().map(|path| read_schema(config, path)).transpose()?;
    let mut actions = Vec::new();
    for (name, a) in &t.actions {
        let schema = a.schema.as_ref().map(|path| read_schema(config, path)).transpose()?;
        let display = format!("{}/{}", t.namespace, t.type_name);
        actions
            .push(ActionType::new(&display, name, schema.as_ref()).map_err(|e| e.to_string())?.read_only(a.read_only));
    }
    let names = t.name_rule().map_err(|e| e.to_string())?;
    Ok(ResourceType::new(&t.namespace, &t.type_name, &t.kind, t.api_versions.clone(), schema.as_ref())
        .map_err(|e| e.to_string())?
        .with_name_rule(names)
        .with_resource_kind(t.resource_kind.unwrap_or_else(|| ResourceKind::default_for(&t.type_name)))
        .with_actions(actions)
        .with_what_if(t.what_if))
}

/// A JSON Schema file, resolved against the configuration's directory.
fn read_schema(config: &Config, path: &std::path::Path) -> Result<serde_json::Value, String> {
    let path = config.resolve(path);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("schema {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("schema {}: {e}", path.display()))
}

/// The type's drift checks: an interval of at least a second, and only for a type whose jobs
/// can run in check mode.
fn drift(t: &TypeConfig, found: &mut Found) -> Option<Option<DriftPolicy>> {
    let Some(secs) = t.drift_check_interval_seconds else { return Some(None) };
    if !t.what_if {
        found.add(format!(
            "drift_check_interval_seconds = {secs}: drift checks run the create job in check mode, which what_if = false says it cannot"
        ));
        return None;
    }
    let secs = found.at_least("drift_check_interval_seconds", secs, 1);
    let remediation = match t.drift_remediation {
        DriftRemediation::Report => Remediation::Report,
        DriftRemediation::Auto => Remediation::Auto,
    };
    Some(Some(DriftPolicy { interval: Duration::from_secs(secs), remediation }))
}

fn policy(config: &Config, t: &TypeConfig, found: &mut Found) -> Option<TypePolicy> {
    let poll_interval = Duration::try_from_secs_f64(t.poll_interval_seconds).map_err(|_| {
        format!("poll_interval_seconds = {}: must be a positive number of seconds", t.poll_interval_seconds)
    });
    let poll_interval = found.ok(poll_interval)?;
    let max_poll_interval = match t.max_poll_interval_seconds {
        Some(max) => found.ok(Duration::try_from_secs_f64(max)
            .map_err(|_| format!("max_poll_interval_seconds = {max}: must be a positive number of seconds")))?,
        None => DEFAULT_MAX_POLL_INTERVAL,
    }
    .max(poll_interval);
    Some(TypePolicy {
        type_name: format!("{}/{}", t.namespace, t.type_name),
        provider: t.provider.as_str().into(),
        poll_interval,
        max_poll_interval,
        backoff: t.retry_failures.then_some(BackoffPolicy {
            base: Duration::from_secs(t.backoff_base_seconds),
            max: Duration::from_secs(t.backoff_max_seconds),
        }),
        create_deadline: Duration::from_secs(t.create_deadline_seconds),
        update_deadline: Duration::from_secs(t.update_deadline_seconds),
        delete_deadline: Duration::from_secs(t.delete_deadline_seconds),
        max_history: found.at_least("max_history", t.max_history, 1),
        block_deletion_on_failure: t.block_deletion_on_failure,
        launch_ambiguity: launch_ambiguity(config, &t.provider),
        max_output_bytes: t.max_output_bytes,
        preflight: t.preflight,
        drift: drift(t, found)?,
        api_version: t.api_versions.iter().max().cloned().unwrap_or_default(),
        has_child_types: config.types.iter().any(|c| t.is_parent_of(c)),
        ..TypePolicy::default()
    })
}

fn key_files(config: &Config) -> Vec<PathBuf> {
    config.secrets.iter().flat_map(|s| s.key_files.iter()).map(|f| config.resolve(f)).collect()
}

/// The secret-property keys, `Some(None)` when none are configured; a type that marks a
/// secret needs them (checked with the type).
pub(super) fn keyring(config: &Config, found: &mut Found) -> Option<Option<Arc<Keyring>>> {
    let files = key_files(config);
    if files.is_empty() {
        return Some(None);
    }
    found.ok(Keyring::from_files(&files).map_err(|e| format!("secrets.key_files: {e}"))).map(|k| Some(Arc::new(k)))
}

/// The playbooks the types' jobs need that their ansible provider's directory lacks: `serve`
/// logs them, `check-config` refuses them (only a tenant's failed job would show them).
pub fn missing_playbooks(config: &Config) -> Vec<Problem> {
    let mut found = Found::default();
    for (i, t) in config.types.iter().enumerate() {
        found.within(&entry(i, t), |here| missing_for(config, t, here));
    }
    found.into_problems()
}

fn missing_for(config: &Config, t: &TypeConfig, found: &mut Found) {
    let Some(ProviderConfig::Ansible(a)) = config.providers.iter().find(|p| p.name() == t.provider) else {
        return;
    };
    let dir = config.resolve(&a.playbook_dir);
    let names = explicit_names(config, &a.name);
    for action in job_words(t) {
        let name = slipway_ansible::playbook_name(&names, a.playbook_prefix.as_deref(), &t.kind, &action);
        if !dir.join(&name).is_file() {
            found.add(format!("the {} playbook {name} is not in {}", action.as_str(), dir.display()));
        }
    }
}

/// Every kind of job a type runs: create and delete, its preflight validation, its actions.
pub fn job_words(t: &TypeConfig) -> Vec<JobAction> {
    let mut words = vec![JobAction::Create, JobAction::Delete];
    if t.preflight {
        words.push(JobAction::Validate);
    }
    words.extend(t.actions.keys().map(|name| JobAction::Run(name.clone())));
    words
}

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
