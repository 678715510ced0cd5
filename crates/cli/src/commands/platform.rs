//! The platform's own objects over the API: API tokens, the subscription registry and role
//! assignments — all on the platform api-version.

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use crate::Context;
use crate::client::{PLATFORM_API, segment};
use crate::error::CliError;
use crate::output::{Column, Format};

const TOKENS: &str = "/providers/Slipway.Authorization/apiTokens";
const ASSIGNMENTS: &str = "providers/Slipway.Authorization/roleAssignments";

const TOKEN_COLUMNS: &[Column] = &[
    ("ID", "name"),
    ("PRINCIPAL", "properties.principal"),
    ("TENANT", "properties.tenant"),
    ("SUBSCRIPTIONS", "properties.subscriptions"),
    ("CREATED", "properties.createdAt"),
    ("EXPIRES", "properties.expiresAt"),
    ("LAST USED", "properties.lastUsedAt"),
    ("DESCRIPTION", "properties.description"),
];
const SUBSCRIPTION_COLUMNS: &[Column] = &[
    ("SUBSCRIPTION", "subscriptionId"),
    ("STATE", "state"),
    ("TENANT", "properties.tenantId"),
    ("NAME", "properties.displayName"),
];
const ASSIGNMENT_COLUMNS: &[Column] = &[
    ("ID", "name"),
    ("ROLE", "properties.roleDefinitionName"),
    ("PRINCIPAL", "properties.principalId"),
    ("TYPE", "properties.principalType"),
    ("SCOPE", "properties.scope"),
];

/// API tokens: one definition for both ways of managing them — over the API (`slipway token`)
/// and on the server's own store (`slipway api-token`, for the first token).
#[derive(Subcommand, Clone, Debug)]
pub enum TokenCommand {
    /// Create a token; its text is printed once (stdout) and never stored.
    Create {
        /// The principal name the token authenticates as.
        #[arg(long)]
        principal: String,
        /// The principal's tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// A group of the principal (repeatable).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// What the token is for.
        #[arg(long)]
        description: Option<String>,
        /// Days until the token stops working; without it, it works until revoked.
        #[arg(long)]
        expires_in_days: Option<u64>,
        /// Confine the token to a subscription (repeatable): it then acts only inside them.
        #[arg(long = "confine-to", value_name = "SUBSCRIPTION")]
        subscriptions: Vec<String>,
    },
    /// List tokens (id, principal, tenant, groups, subscriptions, creation, expiry, last use;
    /// never their secrets).
    List,
    /// Revoke a token by its id.
    Revoke { id: String },
}

#[derive(Subcommand, Clone, Debug)]
pub enum SubscriptionCommand {
    /// Every registered subscription.
    List,
    /// One subscription (the default one without an id).
    Show { id: Option<String> },
    /// Register a subscription for a tenant (state `Registered`).
    Register {
        id: String,
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        display_name: Option<String>,
    },
    /// Move a subscription to another state (Registered, Warned, Suspended, Deleted,
    /// Unregistered); `Deleted` deletes everything in it.
    SetState { id: String, state: String },
}

#[derive(Subcommand, Clone, Debug)]
pub enum RoleAssignmentCommand {
    /// The assignments at a scope.
    List {
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
    },
    /// Grant a role at a scope.
    Create {
        /// Reader, Contributor, Owner or Admin.
        #[arg(long)]
        role: String,
        /// The principal (or group) name.
        #[arg(long)]
        principal: String,
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
        /// The assignment's GUID (a new one by default).
        #[arg(long)]
        id: Option<String>,
    },
    /// Remove an assignment by its GUID.
    Delete {
        id: String,
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
    },
}

pub async fn token(ctx: &Context, command: TokenCommand) -> Result<(), CliError> {
    match command {
        TokenCommand::Create { principal, tenant, groups, description, expires_in_days, subscriptions } => {
            let mut properties = json!({"principal": principal, "groups": groups, "subscriptions": subscriptions});
            if let Some(t) = tenant {
                properties["tenant"] = json!(t);
            }
            if let Some(d) = description {
                properties["description"] = json!(d);
            }
            if let Some(days) = expires_in_days {
                properties["expiresInDays"] = json!(days);
            }
            let body = json!({"properties": properties});
            let created = ctx.client.call(Method::POST, TOKENS, PLATFORM_API, Some(&body)).await?.body;
            if ctx.out.output == Format::Table && ctx.out.query.is_none() {
                eprintln!("created API token {} (shown once; keep it secret)", created["name"].as_str().unwrap_or("?"));
                println!("{}", created["properties"]["token"].as_str().unwrap_or_default());
                return Ok(());
            }
            ctx.out.print(&created, TOKEN_COLUMNS)
        }
        TokenCommand::List => {
            let items = ctx.client.list_all(TOKENS, PLATFORM_API).await?;
            ctx.out.print(&Value::Array(items), TOKEN_COLUMNS)
        }
        TokenCommand::Revoke { id } => {
            ctx.client.call(Method::DELETE, &format!("{TOKENS}/{}", segment(&id)), PLATFORM_API, None).await?;
            eprintln!("revoked API token {id}");
            Ok(())
        }
    }
}

pub async fn subscription(ctx: &Context, command: SubscriptionCommand) -> Result<(), CliError> {
    let path = |id: &str| format!("/subscriptions/{}", segment(id));
    let answer = match command {
        SubscriptionCommand::List => Value::Array(ctx.client.list_all("/subscriptions", PLATFORM_API).await?),
        SubscriptionCommand::Show { id } => {
            let id = match id {
                Some(id) => id,
                None => ctx.settings.subscription()?.to_string(),
            };
            ctx.client.get(&path(&id), PLATFORM_API).await?
        }
        SubscriptionCommand::Register { id, tenant, display_name } => {
            let mut body = json!({"state": "Registered", "properties": {"tenantId": tenant}});
            if let Some(name) = display_name {
                body["properties"]["displayName"] = json!(name);
            }
            ctx.client.call(Method::PUT, &path(&id), PLATFORM_API, Some(&body)).await?.body
        }
        SubscriptionCommand::SetState { id, state } => {
            // The registry's PUT replaces the whole record: carry over what is there.
            let current = ctx.client.get(&path(&id), PLATFORM_API).await?;
            let body = json!({"state": state, "properties": current["properties"]});
            ctx.client.call(Method::PUT, &path(&id), PLATFORM_API, Some(&body)).await?.body
        }
    };
    ctx.out.print(&answer, SUBSCRIPTION_COLUMNS)
}

/// `--scope`: `/` is the platform; default the default subscription.
fn scope_prefix(ctx: &Context, scope: Option<String>) -> Result<String, CliError> {
    let scope = match scope {
        Some(s) => s,
        None => format!("/subscriptions/{}", ctx.settings.subscription()?),
    };
    Ok(scope.trim_end_matches('/').to_string())
}

pub async fn role_assignment(ctx: &Context, command: RoleAssignmentCommand) -> Result<(), CliError> {
    match command {
        RoleAssignmentCommand::List { scope } => {
            let target = format!("{}/{ASSIGNMENTS}", scope_prefix(ctx, scope)?);
            let items = ctx.client.list_all(&target, PLATFORM_API).await?;
            ctx.out.print(&Value::Array(items), ASSIGNMENT_COLUMNS)
        }
        RoleAssignmentCommand::Create { role, principal, tenant, scope, id } => {
            let id = id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let target = format!("{}/{ASSIGNMENTS}/{}", scope_prefix(ctx, scope)?, segment(&id));
            let mut body = json!({"properties": {"roleDefinitionId": role, "principalId": principal}});
            if let Some(t) = tenant {
                body["properties"]["tenantId"] = json!(t);
            }
            let created = ctx.client.call(Method::PUT, &target, PLATFORM_API, Some(&body)).await?.body;
            ctx.out.print(&created, ASSIGNMENT_COLUMNS)
        }
        RoleAssignmentCommand::Delete { id, scope } => {
            let target = format!("{}/{ASSIGNMENTS}/{}", scope_prefix(ctx, scope)?, segment(&id));
            ctx.client.call(Method::DELETE, &target, PLATFORM_API, None).await?;
            eprintln!("deleted role assignment {id}");
            Ok(())
        }
    }
}
