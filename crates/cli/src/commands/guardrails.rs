//! The platform's guardrails, over their ARM paths (docs/governance.md):
//! `slipway quota show|set` (`Microsoft.Quota` usages and limits of every served namespace),
//! `slipway lock list|create|delete` (`Microsoft.Authorization/locks`) and
//! `slipway policy definition|assignment|exemption …` and `policy state`
//! (`Microsoft.Authorization/policy*`, `Microsoft.PolicyInsights`).
//!
//! A SCOPE is a resource id, a resource group's name or id, or — left out — the profile's
//! subscription.

use clap::{Subcommand, ValueEnum};
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::Context;
use crate::client::{PLATFORM_API, segment};
use crate::error::CliError;
use crate::output::Column;

/// The api-versions Azure's own tools send to these paths (any ARM date is taken).
const QUOTA_API: &str = "2023-02-01";
const LOCK_API: &str = "2020-05-01";
const POLICY_API: &str = "2023-04-01";
const STATES_API: &str = "2019-10-01";

#[derive(Subcommand, Clone, Debug)]
pub enum QuotaCommand {
    /// Each meter's usage beside its limit, for the subscription (or `--group`).
    Show {
        #[command(flatten)]
        at: QuotaArgs,
    },
    /// Set a meter's limit: the Admin's (the ceiling), or an Owner's at or below it.
    Set {
        meter: String,
        #[arg(long)]
        limit: u64,
        #[command(flatten)]
        at: QuotaArgs,
    },
}

#[derive(clap::Args, Clone, Debug)]
pub struct QuotaArgs {
    /// A resource group's own usage and limits.
    #[arg(long)]
    group: Option<String>,
    /// Only this namespace's meters (default: every served namespace's).
    #[arg(long)]
    namespace: Option<String>,
    /// The location in the path (quotas count across locations; any names the same ones).
    #[arg(long, default_value = "local")]
    location: String,
}

const USAGE_COLUMNS: &[Column] = &[
    ("METER", "name"),
    ("TYPE", "properties.resourceType"),
    ("USED", "properties.currentValue"),
    ("LIMIT", "properties.limit"),
    ("UNIT", "properties.unit"),
];
const QUOTA_COLUMNS: &[Column] = &[
    ("METER", "name"),
    ("LIMIT", "properties.limit.value"),
    ("CEILING", "properties.ceiling"),
    ("OWNER LIMIT", "properties.ownerLimit"),
];

pub async fn quota(ctx: &Context, command: QuotaCommand) -> Result<(), CliError> {
    let (at, tail, body) = match command {
        QuotaCommand::Show { at } => (at, "usages".to_string(), None),
        QuotaCommand::Set { meter, limit, at } => {
            (at, format!("quotas/{}", segment(&meter)), Some(json!({"properties": {"limit": {"value": limit}}})))
        }
    };
    let namespaces = match &at.namespace {
        Some(ns) => vec![ns.clone()],
        None => served_namespaces(ctx).await?,
    };
    let mut group = String::new();
    if let Some(g) = &at.group {
        group = format!("/resourceGroups/{}", segment(g));
    }
    let sub = segment(ctx.settings.subscription()?);
    let path = |ns: &str| {
        format!(
            "/subscriptions/{sub}{group}/providers/{}/locations/{}/providers/Microsoft.Quota/{tail}",
            segment(ns),
            segment(&at.location)
        )
    };
    if let Some(body) = body {
        let ns = namespaces.first().ok_or_else(|| CliError::Usage("no namespace is served".into()))?;
        let reply = ctx.client.call(Method::PUT, &path(ns), QUOTA_API, Some(&body)).await?;
        return ctx.out.print(&reply.body, QUOTA_COLUMNS);
    }
    let mut value = Vec::new();
    for ns in &namespaces {
        value.extend(ctx.client.list_all(&path(ns), QUOTA_API).await?);
    }
    ctx.out.print(&Value::Array(value), USAGE_COLUMNS)
}

/// The namespaces the server serves (`GET /providers`).
async fn served_namespaces(ctx: &Context) -> Result<Vec<String>, CliError> {
    let providers = ctx.client.list_all("/providers", PLATFORM_API).await?;
    Ok(providers.iter().filter_map(|p| p["namespace"].as_str().map(str::to_string)).collect())
}

/// A SCOPE argument as a path: a resource id as it is, a group by name, else the subscription.
fn scope(ctx: &Context, scope: Option<&str>) -> Result<String, CliError> {
    let sub = format!("/subscriptions/{}", segment(ctx.settings.subscription()?));
    Ok(match scope {
        Some(s) if s.starts_with('/') => s.trim_end_matches('/').to_string(),
        Some(group) => format!("{sub}/resourceGroups/{}", segment(group)),
        None => sub,
    })
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LockLevel {
    #[value(name = "CanNotDelete")]
    CanNotDelete,
    #[value(name = "ReadOnly")]
    ReadOnly,
}

#[derive(Subcommand, Clone, Debug)]
pub enum LockCommand {
    /// The locks that apply at SCOPE: at it, above it and below it.
    List {
        scope: Option<String>,
    },
    /// Lock SCOPE and everything below it.
    Create {
        name: String,
        scope: Option<String>,
        #[arg(long, value_enum)]
        level: LockLevel,
        #[arg(long)]
        notes: Option<String>,
    },
    Delete {
        name: String,
        scope: Option<String>,
    },
}

const LOCK_COLUMNS: &[Column] =
    &[("NAME", "name"), ("LEVEL", "properties.level"), ("NOTES", "properties.notes"), ("ID", "id")];

pub async fn lock(ctx: &Context, command: LockCommand) -> Result<(), CliError> {
    let locks =
        |s: &Option<String>| scope(ctx, s.as_deref()).map(|s| format!("{s}/providers/Microsoft.Authorization/locks"));
    match command {
        LockCommand::List { scope } => {
            let value = ctx.client.list_all(&locks(&scope)?, LOCK_API).await?;
            ctx.out.print(&Value::Array(value), LOCK_COLUMNS)
        }
        LockCommand::Create { name, scope, level, notes } => {
            let level = match level {
                LockLevel::CanNotDelete => "CanNotDelete",
                LockLevel::ReadOnly => "ReadOnly",
            };
            let body = json!({"properties": {"level": level, "notes": notes}});
            let path = format!("{}/{}", locks(&scope)?, segment(&name));
            let reply = ctx.client.call(Method::PUT, &path, LOCK_API, Some(&body)).await?;
            ctx.out.print(&reply.body, LOCK_COLUMNS)
        }
        LockCommand::Delete { name, scope } => {
            let path = format!("{}/{}", locks(&scope)?, segment(&name));
            ctx.client.call(Method::DELETE, &path, LOCK_API, None).await?;
            Ok(())
        }
    }
}

#[derive(Subcommand, Clone, Debug)]
pub enum PolicyCommand {
    /// Policy definitions: the platform's and the subscription's own.
    #[command(subcommand)]
    Definition(DefinitionCommand),
    /// Policy assignments at a scope.
    #[command(subcommand)]
    Assignment(AssignmentCommand),
    /// Policy exemptions at a scope.
    #[command(subcommand)]
    Exemption(ExemptionCommand),
    /// What the policies found not compliant, in the subscription (or `--group`).
    State {
        #[arg(long)]
        group: Option<String>,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum DefinitionCommand {
    List,
    Show {
        name: String,
    },
    /// A subscription's definition from a file of Azure Policy's JSON (`{"properties": …}`).
    Create {
        name: String,
        #[arg(long)]
        file: std::path::PathBuf,
    },
    Delete {
        name: String,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum AssignmentCommand {
    List {
        scope: Option<String>,
    },
    Show {
        name: String,
        scope: Option<String>,
    },
    /// Assign a definition (its id, or a platform definition's name) at SCOPE.
    Create {
        name: String,
        scope: Option<String>,
        #[arg(long)]
        definition: String,
        /// A parameter `name=value`, the value as JSON (text otherwise). Repeatable.
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// A scope below SCOPE the assignment leaves out. Repeatable.
        #[arg(long = "not-scope")]
        not_scopes: Vec<String>,
        /// Record what it would do, and enforce nothing.
        #[arg(long)]
        do_not_enforce: bool,
    },
    Delete {
        name: String,
        scope: Option<String>,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum ExemptionCommand {
    List {
        scope: Option<String>,
    },
    /// Exempt SCOPE from an assignment (its id), until `--expires` if given.
    Create {
        name: String,
        scope: Option<String>,
        #[arg(long)]
        assignment: String,
        /// `Waiver` or `Mitigated`.
        #[arg(long, default_value = "Waiver")]
        category: String,
        /// When it ends (`2027-01-31T00:00:00Z`).
        #[arg(long)]
        expires: Option<String>,
    },
    Delete {
        name: String,
        scope: Option<String>,
    },
}

const POLICY_COLUMNS: &[Column] = &[("NAME", "name"), ("TYPE", "type"), ("ID", "id")];
const ASSIGNMENT_COLUMNS: &[Column] = &[
    ("NAME", "name"),
    ("DEFINITION", "properties.policyDefinitionId"),
    ("ENFORCEMENT", "properties.enforcementMode"),
    ("SCOPE", "properties.scope"),
];
const STATE_COLUMNS: &[Column] = &[
    ("RESOURCE", "resourceId"),
    ("EFFECT", "policyDefinitionAction"),
    ("ENFORCED", "enforced"),
    ("ASSIGNMENT", "policyAssignmentId"),
    ("REASON", "reason"),
];

pub async fn policy(ctx: &Context, command: PolicyCommand) -> Result<(), CliError> {
    let sub = scope(ctx, None)?;
    let under = |s: &Option<String>, collection: &str| {
        scope(ctx, s.as_deref()).map(|s| format!("{s}/providers/Microsoft.Authorization/{collection}"))
    };
    let (method, path, body, columns) = match command {
        PolicyCommand::Definition(c) => {
            let definitions = format!("{sub}/providers/Microsoft.Authorization/policyDefinitions");
            match c {
                DefinitionCommand::List => (Method::GET, definitions, None, POLICY_COLUMNS),
                DefinitionCommand::Show { name } => {
                    (Method::GET, format!("{definitions}/{}", segment(&name)), None, POLICY_COLUMNS)
                }
                DefinitionCommand::Create { name, file } => {
                    let text = std::fs::read_to_string(&file)
                        .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
                    let body: Value =
                        serde_json::from_str(&text).map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
                    let body = if body.get("properties").is_some() { body } else { json!({"properties": body}) };
                    (Method::PUT, format!("{definitions}/{}", segment(&name)), Some(body), POLICY_COLUMNS)
                }
                DefinitionCommand::Delete { name } => {
                    (Method::DELETE, format!("{definitions}/{}", segment(&name)), None, POLICY_COLUMNS)
                }
            }
        }
        PolicyCommand::Assignment(c) => match c {
            AssignmentCommand::List { scope } => {
                (Method::GET, under(&scope, "policyAssignments")?, None, ASSIGNMENT_COLUMNS)
            }
            AssignmentCommand::Show { name, scope } => (
                Method::GET,
                format!("{}/{}", under(&scope, "policyAssignments")?, segment(&name)),
                None,
                ASSIGNMENT_COLUMNS,
            ),
            AssignmentCommand::Create { name, scope, definition, params, not_scopes, do_not_enforce } => {
                let definition = if definition.starts_with('/') {
                    definition
                } else {
                    format!("/providers/Microsoft.Authorization/policyDefinitions/{definition}")
                };
                let mut properties = json!({
                    "policyDefinitionId": definition,
                    "parameters": parameters(&params)?,
                    "enforcementMode": if do_not_enforce { "DoNotEnforce" } else { "Default" },
                });
                if !not_scopes.is_empty() {
                    properties["notScopes"] = json!(not_scopes);
                }
                let path = format!("{}/{}", under(&scope, "policyAssignments")?, segment(&name));
                (Method::PUT, path, Some(json!({ "properties": properties })), ASSIGNMENT_COLUMNS)
            }
            AssignmentCommand::Delete { name, scope } => (
                Method::DELETE,
                format!("{}/{}", under(&scope, "policyAssignments")?, segment(&name)),
                None,
                ASSIGNMENT_COLUMNS,
            ),
        },
        PolicyCommand::Exemption(c) => match c {
            ExemptionCommand::List { scope } => (Method::GET, under(&scope, "policyExemptions")?, None, POLICY_COLUMNS),
            ExemptionCommand::Create { name, scope, assignment, category, expires } => {
                let body = json!({"properties": {"policyAssignmentId": assignment, "exemptionCategory": category, "expiresOn": expires}});
                (
                    Method::PUT,
                    format!("{}/{}", under(&scope, "policyExemptions")?, segment(&name)),
                    Some(body),
                    POLICY_COLUMNS,
                )
            }
            ExemptionCommand::Delete { name, scope } => (
                Method::DELETE,
                format!("{}/{}", under(&scope, "policyExemptions")?, segment(&name)),
                None,
                POLICY_COLUMNS,
            ),
        },
        PolicyCommand::State { group } => {
            let at = scope(ctx, group.as_deref())?;
            let path = format!("{at}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults");
            let reply = ctx.client.call(Method::POST, &path, STATES_API, None).await?;
            return ctx.out.print(&reply.body["value"], STATE_COLUMNS);
        }
    };
    if method == Method::GET && is_collection(&path) {
        let items = ctx.client.list_all(&path, POLICY_API).await?;
        return ctx.out.print(&Value::Array(items), columns);
    }
    let reply = ctx.client.call(method.clone(), &path, POLICY_API, body.as_ref()).await?;
    if method == Method::DELETE {
        return Ok(());
    }
    ctx.out.print(&reply.body, columns)
}

/// A path that ends in a policy collection (`…/policyAssignments`), not one of its items.
fn is_collection(path: &str) -> bool {
    let last = path.rsplit('/').next().unwrap_or_default();
    ["policyDefinitions", "policyAssignments", "policyExemptions"].contains(&last)
        && path.strip_suffix(last).is_some_and(|p| p.ends_with("/providers/Microsoft.Authorization/"))
}

/// `name=value` flags as ARM's `{name: {value}}`: the value read as JSON, else as text.
fn parameters(params: &[String]) -> Result<Map<String, Value>, CliError> {
    params
        .iter()
        .map(|p| {
            let (name, value) = p.split_once('=').filter(|(n, _)| !n.is_empty()).ok_or_else(|| {
                CliError::Usage(format!("--param {p}: expected NAME=VALUE (the value as JSON, or text)"))
            })?;
            let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
            Ok((name.to_string(), json!({ "value": value })))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_json_or_text() {
        let p = parameters(&["locations=[\"local\"]".into(), "tag=costCenter".into(), "n=3".into()]).unwrap();
        assert_eq!(
            Value::Object(p),
            json!({"locations": {"value": ["local"]}, "tag": {"value": "costCenter"}, "n": {"value": 3}})
        );
        assert!(parameters(&["=x".into()]).is_err());
    }
}
