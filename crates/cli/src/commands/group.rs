//! `slipway group …`: a subscription's resource groups, through ARM's own paths with the
//! platform api-version: `list`, `show`, `create` (a `PUT`, answered at once), `update` (a
//! `PATCH` of tags) and `delete` (a long-running operation that deletes everything in the
//! group, followed to its end unless `--no-wait`).

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::Context;
use crate::client::{PLATFORM_API, segment};
use crate::commands::resource::{OPERATION_COLUMNS, with_status_url};
use crate::error::CliError;
use crate::output::Column;
use crate::wait::{self, WaitArgs};

#[derive(Subcommand, Clone, Debug)]
pub enum GroupCommand {
    /// The subscription's resource groups the caller may read into.
    List {
        /// Only groups with this tag `name` or `name=value`.
        #[arg(long, value_name = "NAME[=VALUE]")]
        tag: Option<String>,
    },
    /// One resource group (the default one, `-g` or the profile's, without a name).
    Show { name: Option<String> },
    /// Create a resource group, or replace its tags (its location is fixed once it exists).
    Create {
        name: String,
        /// Where the group is (required by ARM; the server's own location fits).
        #[arg(long)]
        location: String,
        /// A tag `name=value`. Repeatable.
        #[arg(long = "tag", value_name = "NAME=VALUE")]
        tags: Vec<String>,
    },
    /// Replace a resource group's tags.
    Update {
        name: String,
        /// A tag `name=value`; the group's tags become exactly these. Repeatable.
        #[arg(long = "tag", value_name = "NAME=VALUE")]
        tags: Vec<String>,
    },
    /// Delete a resource group and everything in it (each resource through its own delete),
    /// and wait until it is gone. What it holds is listed first.
    Delete {
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

const GROUP_COLUMNS: &[Column] =
    &[("NAME", "name"), ("LOCATION", "location"), ("STATE", "properties.provisioningState"), ("TAGS", "tags")];

pub async fn run(ctx: &Context, command: GroupCommand) -> Result<(), CliError> {
    let groups = format!("/subscriptions/{}/resourceGroups", segment(ctx.settings.subscription()?));
    let one = |name: &str| format!("{groups}/{}", segment(name));
    let answer = match command {
        GroupCommand::List { tag } => {
            let target = match tag.as_deref().map(tag_filter) {
                Some(filter) => format!("{groups}?$filter={}", segment(&filter)),
                None => groups.clone(),
            };
            Value::Array(ctx.client.list_all(&target, PLATFORM_API).await?)
        }
        GroupCommand::Show { name } => {
            let name = match name {
                Some(name) => name,
                None => ctx.settings.resource_group()?.to_string(),
            };
            ctx.client.get(&one(&name), PLATFORM_API).await?
        }
        GroupCommand::Create { name, location, tags } => {
            let body = json!({"location": location, "tags": tag_map(&tags)?});
            ctx.client.call(Method::PUT, &one(&name), PLATFORM_API, Some(&body)).await?.body
        }
        GroupCommand::Update { name, tags } => {
            let body = json!({"tags": tag_map(&tags)?});
            ctx.client.call(Method::PATCH, &one(&name), PLATFORM_API, Some(&body)).await?.body
        }
        GroupCommand::Delete { name, wait } => return delete(ctx, &one(&name), &wait).await,
    };
    ctx.out.print(&answer, GROUP_COLUMNS)
}

/// Names what goes with the group (on standard error), deletes it, and follows the
/// operation as `resource delete` does.
async fn delete(ctx: &Context, group: &str, wait: &WaitArgs) -> Result<(), CliError> {
    let held = ctx.client.list_all(&format!("{group}/resources"), PLATFORM_API).await?;
    eprintln!("deleting {group} and the {} resource(s) in it:", held.len());
    for r in &held {
        eprintln!("  {}", r["id"].as_str().unwrap_or_default());
    }
    let reply = ctx.client.call(Method::DELETE, group, PLATFORM_API, None).await?;
    let Some(status_url) = reply.header("azure-asyncoperation") else {
        return Err(CliError::Usage(format!("the server answered {} with no operation", reply.status)));
    };
    let doc = if wait.no_wait {
        ctx.client.get(&status_url, PLATFORM_API).await?
    } else {
        wait::outcome(wait::follow(&ctx.client, &status_url, wait.timeout.duration()?).await?)?
    };
    ctx.out.print(&with_status_url(doc, &status_url), OPERATION_COLUMNS)
}

/// `--tag name=value` flags as a tags object.
fn tag_map(tags: &[String]) -> Result<Map<String, Value>, CliError> {
    tags.iter()
        .map(|t| match t.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_string(), Value::String(value.to_string()))),
            _ => Err(CliError::Usage(format!("--tag {t}: expected NAME=VALUE"))),
        })
        .collect()
}

/// `name` or `name=value` as ARM's `$filter`.
fn tag_filter(tag: &str) -> String {
    let quoted = |s: &str| s.replace('\'', "''");
    match tag.split_once('=') {
        Some((name, value)) => format!("tagName eq '{}' and tagValue eq '{}'", quoted(name), quoted(value)),
        None => format!("tagName eq '{}'", quoted(tag)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_become_arm_filters_and_objects() {
        assert_eq!(tag_filter("env"), "tagName eq 'env'");
        assert_eq!(tag_filter("env=it's"), "tagName eq 'env' and tagValue eq 'it''s'");
        assert_eq!(Value::Object(tag_map(&["a=1".into(), "b=".into()]).unwrap()), json!({"a": "1", "b": ""}));
        assert!(tag_map(&["=1".into()]).is_err());
    }
}
