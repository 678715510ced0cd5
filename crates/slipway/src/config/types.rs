//! `[[types]]`: the resource types served, their schemas, providers and engine policy.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::Deserialize;
use slipway_domain::TypePolicy;
use slipway_domain::ids::ARM_NAME_MAX_LENGTH;
use slipway_types::{
    CHECK_DRIFT_SEGMENT, EVENTS_SEGMENT, JOBS_SEGMENT, NameRule, RETRY_SEGMENT, ResourceKind, WHAT_IF_SEGMENT,
};

use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeConfig {
    pub namespace: String,
    /// The type's name; a child type names its parent type first: `virtualNetworks/subnets`
    /// (ids nest: `…/virtualNetworks/{v}/subnets/{s}`).
    #[serde(rename = "type")]
    pub type_name: String,
    pub kind: String,
    /// ARM's kind of resource: `tracked` (has a location, required on PUT; the default for a
    /// top-level type) or `proxy` (no location; the default for a child type).
    #[serde(default)]
    pub resource_kind: Option<ResourceKind>,
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
    /// The longest delay between polls of a long-running job; default the larger of 30 s and
    /// `poll_interval_seconds`.
    #[serde(default)]
    pub max_poll_interval_seconds: Option<f64>,
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
    /// The most a job may report as outputs (`set_stats` `slipway_outputs`, as JSON bytes);
    /// a job that reports more fails.
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: usize,
    /// Run the type's validation job before every create and update job; a failed check
    /// fails the operation (`slipway_checks`).
    #[serde(default)]
    pub preflight: bool,
    /// Explicit validation playbook or template name; default `{prefix}-validate-{kind-kebab}`.
    #[serde(default)]
    pub validate: Option<String>,
    /// POST actions, `[types.actions.restart]`.
    #[serde(default)]
    pub actions: BTreeMap<String, ActionConfig>,
    /// Offer `POST {id}/whatIf`: the type's create and delete jobs can run in Ansible's check
    /// mode (tasks that would change something say so, with a diff, and change nothing).
    /// `false` for playbooks or templates that cannot.
    #[serde(default = "default_what_if")]
    pub what_if: bool,
    /// Check `Succeeded` resources for drift this often (give or take a tenth): the create
    /// job run in check mode under the resource's own spec. Off when absent.
    #[serde(default)]
    pub drift_check_interval_seconds: Option<u64>,
    /// What a drift check that finds drift does: `report` (the default: show it) or `auto`
    /// (also run the resource's spec again, as an update operation).
    #[serde(default)]
    pub drift_remediation: DriftRemediation,
}

/// One POST action of a type: `POST {resourceId}/{name}` runs `{prefix}-{name}-{kind-kebab}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionConfig {
    /// Explicit playbook or template name.
    #[serde(default)]
    pub run: Option<String>,
    /// JSON Schema file for the action's body (default: any object).
    #[serde(default)]
    pub schema: Option<PathBuf>,
    /// The action changes nothing a `ReadOnly` lock protects (a restart, reading keys): such
    /// a lock lets it run, where ARM would refuse every `POST`.
    #[serde(default)]
    pub read_only: bool,
}

/// Job words an action may not take: they name the type's own jobs.
pub const RESERVED_ACTIONS: [&str; 3] = ["create", "delete", "validate"];

impl TypeConfig {
    /// Explicit job names by word (`create`, `delete`, `validate`, each action's name).
    pub fn explicit_names(&self) -> HashMap<String, String> {
        let fixed = [("create", &self.create), ("delete", &self.delete), ("validate", &self.validate)];
        let fixed = fixed.into_iter().filter_map(|(word, name)| Some((word.to_string(), name.clone()?)));
        let actions = self.actions.iter().filter_map(|(name, a)| Some((name.clone(), a.run.clone()?)));
        fixed.chain(actions).collect()
    }

    /// `Err` naming the action when an action's name cannot be one.
    pub fn check_actions(&self, children: &[&TypeConfig]) -> Result<(), ConfigError> {
        for name in self.actions.keys() {
            let why = if !name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                || !name.chars().all(|c| c.is_ascii_alphanumeric())
            {
                Some("use letters and digits, starting with a letter")
            } else if RESERVED_ACTIONS.iter().any(|r| r.eq_ignore_ascii_case(name)) {
                Some("it names one of the type's own jobs")
            } else if name.eq_ignore_ascii_case(JOBS_SEGMENT) {
                Some("`{id}/jobs` is the resource's job history")
            } else if name.eq_ignore_ascii_case(EVENTS_SEGMENT) {
                Some("`{id}/events` is the resource's event feed")
            } else if name.eq_ignore_ascii_case(RETRY_SEGMENT) {
                Some("`POST {id}/retry` runs a failed resource's spec again")
            } else if name.eq_ignore_ascii_case(WHAT_IF_SEGMENT) {
                Some("`POST {id}/whatIf` tells what a change would do")
            } else if name.eq_ignore_ascii_case(CHECK_DRIFT_SEGMENT) {
                Some("`POST {id}/checkDrift` checks the resource for drift")
            } else if children
                .iter()
                .any(|c| c.type_name.rsplit('/').next().is_some_and(|t| t.eq_ignore_ascii_case(name)))
            {
                Some("a child type has that name")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(ConfigError::Invalid(format!(
                    "types.{}/{}: action '{name}' is not a valid action name: {why}",
                    self.namespace, self.type_name
                )));
            }
        }
        Ok(())
    }

    /// A child type's parent type (`virtualNetworks` for `virtualNetworks/subnets`).
    pub fn parent_type(&self) -> Option<&str> {
        self.type_name.rsplit_once('/').map(|(parent, _)| parent)
    }

    /// Whether `other` is a child type of this one.
    pub fn is_parent_of(&self, other: &TypeConfig) -> bool {
        self.namespace.eq_ignore_ascii_case(&other.namespace)
            && other.parent_type().is_some_and(|p| p.eq_ignore_ascii_case(&self.type_name))
    }

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
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftRemediation {
    #[default]
    Report,
    Auto,
}

fn default_what_if() -> bool {
    true
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
fn default_max_output_bytes() -> usize {
    policy().max_output_bytes
}
fn default_block_deletion() -> bool {
    policy().block_deletion_on_failure
}
