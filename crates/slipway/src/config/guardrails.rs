//! The guardrails' configuration (docs/governance.md): `[quota]`, the meters a platform
//! counts, their default limits, and whether a subscription's Owner may set its own limits
//! below the Admin's; `[policy]`, the platform's own policy definitions.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// `admin-only` (the default): only the platform's Admin sets limits; `below-ceiling`: a
    /// subscription's Owner may also set its limits, at or below the Admin's.
    #[serde(default)]
    pub owner_limits: OwnerLimitsConfig,
    #[serde(default)]
    pub meters: Vec<MeterConfig>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OwnerLimitsConfig {
    #[default]
    AdminOnly,
    BelowCeiling,
}

/// `[[quota.meters]]`: what one type's resources consume. Without `property` a meter counts
/// resources; with it, it sums that property (`properties.cores`), or with `table` looks the
/// property's value up (`properties.size`: `small = 2`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeterConfig {
    /// The meter's name in the quota API (`…/quotas/{name}`).
    pub name: String,
    /// The type whose resources it counts: `Namespace/type`.
    #[serde(rename = "type")]
    pub type_name: String,
    #[serde(default)]
    pub property: Option<String>,
    #[serde(default)]
    pub table: Option<BTreeMap<String, u64>>,
    /// What the amounts are (`Count`, `GB`, …); default `Count`.
    #[serde(default = "default_unit")]
    pub unit: String,
    /// Each subscription's limit until an Admin sets another; absent: unlimited.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Each resource group's limit; absent: only the subscription's applies.
    #[serde(default)]
    pub group_limit: Option<u64>,
}

fn default_unit() -> String {
    "Count".into()
}

/// `[policy]`: the platform's own policy definitions, which every subscription may assign.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    #[serde(default)]
    pub definitions: Vec<PolicyDefinitionConfig>,
}

/// `[[policy.definitions]]`: a definition in Azure Policy's JSON, served as
/// `/providers/Microsoft.Authorization/policyDefinitions/{name}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyDefinitionConfig {
    pub name: String,
    /// The definition's JSON: ARM's body (`{"properties": {…}}`) or its properties alone.
    pub file: std::path::PathBuf,
}
