//! `slipway resource …`: PUT, PATCH, GET, list, DELETE and POST actions, waiting for the
//! operation each mutation starts unless `--no-wait`.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::Value;

use super::body::BodyArgs;
use crate::Context;
use crate::address::{self, Address, ResourceArgs};
use crate::client::{PLATFORM_API, Reply, segment};
use crate::error::CliError;
use crate::output::Column;
use crate::wait::{self, WaitArgs};

pub const RESOURCE_COLUMNS: &[Column] =
    &[("NAME", "name"), ("TYPE", "type"), ("LOCATION", "location"), ("STATE", "properties.provisioningState")];
pub const OPERATION_COLUMNS: &[Column] = &[
    ("OPERATION", "name"),
    ("STATUS", "status"),
    ("STARTED", "startTime"),
    ("ENDED", "endTime"),
    ("ERROR", "error.code"),
];

#[derive(Subcommand, Clone, Debug)]
pub enum ResourceCommand {
    /// Create or replace a resource (PUT) and wait for its operation.
    Put(MutateArgs),
    /// Change a resource's tags and properties (PATCH, a JSON merge patch) and wait.
    Patch(MutateArgs),
    /// Read a resource.
    Get {
        #[command(flatten)]
        resource: ResourceArgs,
    },
    /// List resources: one type's collection with --type, else every type's.
    List(ListArgs),
    /// Delete a resource and wait until it is gone.
    Delete {
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Run one of the type's declared actions (POST {id}/{action}) and wait.
    Action {
        /// The action's name (e.g. `restart`).
        #[arg(long, short = 'a')]
        action: String,
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        body: BodyArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Run a Failed or Canceled resource's spec again now (POST {id}/retry), starting its
    /// backoff over, and wait.
    Retry {
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Check a Succeeded resource for drift now (POST {id}/checkDrift): its create job in check
    /// mode under its own spec. Waits, then prints the resource with its `properties.drift`.
    CheckDrift {
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// What a PUT of the body (or with --delete, a DELETE) would change, without changing it
    /// (POST {id}/whatIf): the spec's changed properties and the tasks the type's job, run in
    /// check mode, would change. Waits for the answer.
    WhatIf {
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        body: BodyArgs,
        /// Ask about deleting the resource instead (no body).
        #[arg(long, conflicts_with_all = ["file", "set", "tags", "location"])]
        delete: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

/// A what-if's table: one row per changed property and per changed task.
pub(crate) const WHAT_IF_COLUMNS: &[Column] =
    &[("CHANGE", "change"), ("WHAT", "what"), ("BEFORE", "before"), ("AFTER", "after")];

#[derive(Args, Clone, Debug)]
pub struct MutateArgs {
    #[command(flatten)]
    pub resource: ResourceArgs,
    #[command(flatten)]
    pub body: BodyArgs,
    #[command(flatten)]
    pub wait: WaitArgs,
}

#[derive(Args, Clone, Debug)]
pub struct ListArgs {
    /// One type, `Namespace/type`: its collection in the resource group (or the whole
    /// subscription without one); a child type, `Namespace/parent/child`, with --parent.
    #[arg(long = "type", short = 't')]
    pub resource_type: Option<String>,
    /// For a child type: the parent's full id, or its name (`a/b` for a grandparent's child)
    /// in the resource group.
    #[arg(long, requires = "resource_type")]
    pub parent: Option<String>,
    /// ARM's `$filter` for the every-type list (`resourceType eq 'Ns/type'`, `tagName eq 'k'`,
    /// `provisioningState eq 'Failed'`, joined by `and`).
    #[arg(long, conflicts_with = "resource_type")]
    pub filter: Option<String>,
    /// The api-version for --type instead of the type's newest.
    #[arg(long, requires = "resource_type")]
    pub api_version: Option<String>,
}

pub async fn run(ctx: &Context, command: ResourceCommand) -> Result<(), CliError> {
    match command {
        ResourceCommand::Put(args) => mutate(ctx, Method::PUT, args).await,
        ResourceCommand::Patch(args) => mutate(ctx, Method::PATCH, args).await,
        ResourceCommand::Get { resource } => {
            let at = resource.resolve(&ctx.settings, &ctx.client).await?;
            let body = ctx.client.get(&at.resource.id, &at.api_version).await?;
            ctx.out.print(&body, RESOURCE_COLUMNS)
        }
        ResourceCommand::List(args) => list(ctx, args).await,
        ResourceCommand::Delete { resource, wait } => {
            let at = resource.resolve(&ctx.settings, &ctx.client).await?;
            let reply = ctx.client.call(Method::DELETE, &at.resource.id, &at.api_version, None).await?;
            if reply.status == 204 {
                eprintln!("{} does not exist", at.resource.id);
                return Ok(());
            }
            finish(ctx, &reply, &wait, None).await
        }
        ResourceCommand::Action { action, resource, body, wait } => {
            let at = resource.resolve(&ctx.settings, &ctx.client).await?;
            let body = body.build_action()?;
            let target = format!("{}/{}", at.resource.id, segment(&action));
            let reply = ctx.client.call(Method::POST, &target, &at.api_version, Some(&body)).await?;
            finish(ctx, &reply, &wait, None).await
        }
        ResourceCommand::WhatIf { resource, body, delete, wait } => what_if(ctx, resource, body, delete, wait).await,
        ResourceCommand::Retry { resource, wait } => post_on(ctx, resource, "retry", wait).await,
        ResourceCommand::CheckDrift { resource, wait } => post_on(ctx, resource, "checkDrift", wait).await,
    }
}

/// `POST {id}/{segment}` with no body, waiting as `put` does and printing the resource.
async fn post_on(ctx: &Context, resource: ResourceArgs, segment: &str, wait: WaitArgs) -> Result<(), CliError> {
    let at = resource.resolve(&ctx.settings, &ctx.client).await?;
    let target = format!("{}/{segment}", at.resource.id);
    let reply = ctx.client.call(Method::POST, &target, &at.api_version, None).await?;
    finish(ctx, &reply, &wait, Some(&at)).await
}

async fn what_if(
    ctx: &Context,
    resource: ResourceArgs,
    body: BodyArgs,
    delete: bool,
    wait: WaitArgs,
) -> Result<(), CliError> {
    let at = resource.resolve(&ctx.settings, &ctx.client).await?;
    let (target, body) = if delete {
        (format!("{}/whatIf?operation=delete", at.resource.id), None)
    } else {
        let mut body = body.build()?;
        if body.get("location").is_none()
            && let Some(location) = default_location(ctx, &at).await?
        {
            body["location"] = Value::String(location);
        }
        (format!("{}/whatIf", at.resource.id), Some(body))
    };
    let reply = ctx.client.call(Method::POST, &target, &at.api_version, body.as_ref()).await?;
    let result = match (reply.header("azure-asyncoperation"), reply.header("location")) {
        (Some(status_url), Some(location)) if !wait.no_wait => {
            wait::outcome(wait::follow(&ctx.client, &status_url, wait.timeout.duration()?).await?)?;
            ctx.client.get(&location, &at.api_version).await?
        }
        (Some(status_url), _) => {
            let doc = ctx.client.get(&status_url, PLATFORM_API).await?;
            return ctx.out.print(&with_status_url(doc, &status_url), OPERATION_COLUMNS);
        }
        _ => reply.body.clone(),
    };
    if ctx.out.shows_table() {
        ctx.out.print(&what_if_rows(&result), WHAT_IF_COLUMNS)
    } else {
        ctx.out.print(&result, &[])
    }
}

/// The changes of a `WhatIfOperationResult` as table rows: the resource's change type, each
/// changed property with its values, and each task the job would change on its host.
pub(crate) fn what_if_rows(result: &Value) -> Value {
    let mut rows = Vec::new();
    for change in result["properties"]["changes"].as_array().into_iter().flatten() {
        rows.push(serde_json::json!({"change": change["changeType"], "what": change["resourceId"]}));
        for d in change["delta"].as_array().into_iter().flatten() {
            rows.push(serde_json::json!({
                "change": d["propertyChangeType"], "what": d["path"], "before": d["before"], "after": d["after"],
            }));
        }
        for t in change["automation"]["changedTasks"].as_array().into_iter().flatten() {
            let what = format!("task '{}' on {}", t["task"].as_str().unwrap_or("?"), t["host"].as_str().unwrap_or("?"));
            rows.push(serde_json::json!({"change": "Changed", "what": what}));
        }
        if let Some(why) = change["automation"]["unsupportedReason"].as_str() {
            rows.push(serde_json::json!({"change": "NotChecked", "what": why}));
        }
    }
    Value::Array(rows)
}

async fn mutate(ctx: &Context, method: Method, args: MutateArgs) -> Result<(), CliError> {
    let at = args.resource.resolve(&ctx.settings, &ctx.client).await?;
    let mut body = args.body.build()?;
    if method == Method::PUT
        && body.get("location").is_none()
        && let Some(location) = default_location(ctx, &at).await?
    {
        body["location"] = Value::String(location);
    }
    let reply = ctx.client.call(method, &at.resource.id, &at.api_version, Some(&body)).await?;
    finish(ctx, &reply, &args.wait, Some(&at)).await
}

/// The first location discovery lists for the type (ARM requires one on a tracked
/// resource's PUT); `None` for a type that lists none (a proxy resource, such as a child,
/// takes no location).
async fn default_location(ctx: &Context, at: &Address) -> Result<Option<String>, CliError> {
    let doc = address::discovery(&ctx.client, at.resource.namespace()).await?;
    let entry = address::type_entry(&doc, at.resource.type_path()).ok_or_else(|| {
        CliError::Usage(format!("discovery does not list the type {}: pass --location", at.resource.type_path()))
    })?;
    Ok(entry["locations"].as_array().and_then(|l| l.first()).and_then(Value::as_str).map(str::to_string))
}

/// After a mutating request: no operation (nothing changed) prints what came back; with
/// `--no-wait` the operation as it is now; else the operation is followed to its end and,
/// for a resource that still exists, the resource is printed as it ended.
async fn finish(ctx: &Context, reply: &Reply, wait: &WaitArgs, resource: Option<&Address>) -> Result<(), CliError> {
    let Some(status_url) = reply.header("azure-asyncoperation") else {
        if reply.body.is_null() {
            return Ok(());
        }
        return ctx.out.print(&reply.body, RESOURCE_COLUMNS);
    };
    if wait.no_wait {
        let doc = ctx.client.get(&status_url, PLATFORM_API).await?;
        return ctx.out.print(&with_status_url(doc, &status_url), OPERATION_COLUMNS);
    }
    let doc = wait::outcome(wait::follow(&ctx.client, &status_url, wait.timeout.duration()?).await?)?;
    match resource {
        Some(at) => {
            let body = ctx.client.get(&at.resource.id, &at.api_version).await?;
            ctx.out.print(&body, RESOURCE_COLUMNS)
        }
        None => ctx.out.print(&with_status_url(doc, &status_url), OPERATION_COLUMNS),
    }
}

/// The status document with the URL it was read from, so a script can pass it to `op`.
pub fn with_status_url(mut doc: Value, status_url: &str) -> Value {
    if let Some(fields) = doc.as_object_mut() {
        fields.insert("statusUrl".into(), Value::String(status_url.to_string()));
    }
    doc
}

async fn list(ctx: &Context, args: ListArgs) -> Result<(), CliError> {
    let subscription = segment(ctx.settings.subscription()?);
    let scope = match &ctx.settings.resource_group {
        Some(group) => format!("/subscriptions/{subscription}/resourceGroups/{}", segment(group)),
        None => format!("/subscriptions/{subscription}"),
    };
    let items = match &args.resource_type {
        Some(resource_type) => {
            let (namespace, type_path) = resource_type
                .split_once('/')
                .filter(|(_, t)| !t.is_empty())
                .ok_or_else(|| CliError::Usage(format!("--type '{resource_type}' is not Namespace/type")))?;
            let api_version = match &args.api_version {
                Some(v) => v.clone(),
                None => address::api_version_of(&ctx.client, namespace, type_path).await?,
            };
            let target = match (type_path.rsplit_once('/'), &args.parent) {
                (None, None) => format!("{scope}/providers/{}/{}", segment(namespace), segment(type_path)),
                (Some((parent_type, leaf)), Some(parent)) => {
                    let parent = if parent.starts_with('/') {
                        address::ResourceId::parse(parent)?
                    } else {
                        let group = ctx.settings.resource_group()?;
                        let parent_type = format!("{namespace}/{parent_type}");
                        address::ResourceId::build(ctx.settings.subscription()?, group, &parent_type, parent)?
                    };
                    format!("{}/{}", parent.id, segment(leaf))
                }
                (Some(_), None) => {
                    return Err(CliError::Usage(format!(
                        "--type '{resource_type}' is a child type: name its --parent"
                    )));
                }
                (None, Some(_)) => {
                    return Err(CliError::Usage(format!("--type '{resource_type}' is top-level: it has no --parent")));
                }
            };
            ctx.client.list_all(&target, &api_version).await?
        }
        None => {
            let mut target = format!("{scope}/resources");
            if let Some(filter) = &args.filter {
                target.push_str(&format!("?$filter={}", segment(filter)));
            }
            ctx.client.list_all(&target, PLATFORM_API).await?
        }
    };
    ctx.out.print(&Value::Array(items), RESOURCE_COLUMNS)
}
