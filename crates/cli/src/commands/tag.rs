//! `slipway tag …`: a resource's or a group's tags at their own scope
//! (`{scope}/providers/Microsoft.Resources/tags/default`), changed at once and without a job
//! — unlike `resource patch --tag`, a spec change whose job is told the new tags.

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::Context;
use crate::client::{PLATFORM_API, segment};
use crate::error::CliError;
use crate::output::Column;

#[derive(Subcommand, Clone, Debug)]
pub enum TagCommand {
    /// The tags of a resource (by id) or a resource group (by name or id).
    Show { target: String },
    /// Set these tags, keeping the others.
    Merge {
        target: String,
        /// A tag `name=value`. Repeatable.
        #[arg(long = "tag", value_name = "NAME=VALUE", required = true)]
        tags: Vec<String>,
    },
    /// Make these the only tags (none: remove every tag).
    Replace {
        target: String,
        /// A tag `name=value`. Repeatable.
        #[arg(long = "tag", value_name = "NAME=VALUE")]
        tags: Vec<String>,
    },
    /// Remove these tags: `name`, or `name=value` to remove it only with that value.
    Delete {
        target: String,
        #[arg(long = "tag", value_name = "NAME[=VALUE]", required = true)]
        tags: Vec<String>,
    },
}

const TAG_COLUMNS: &[Column] = &[("TAGS", "properties.tags")];

pub async fn run(ctx: &Context, command: TagCommand) -> Result<(), CliError> {
    let (method, target, body) = match command {
        TagCommand::Show { target } => (Method::GET, target, None),
        TagCommand::Merge { target, tags } => (Method::PATCH, target, Some(("Merge", pairs(&tags, false)?))),
        TagCommand::Replace { target, tags } => (Method::PUT, target, Some(("Replace", pairs(&tags, false)?))),
        TagCommand::Delete { target, tags } => (Method::PATCH, target, Some(("Delete", pairs(&tags, true)?))),
    };
    let scope = if target.starts_with('/') {
        target
    } else {
        format!("/subscriptions/{}/resourceGroups/{}", segment(ctx.settings.subscription()?), segment(&target))
    };
    let path = format!("{}/providers/Microsoft.Resources/tags/default", scope.trim_end_matches('/'));
    let body = body.map(|(operation, tags)| json!({"operation": operation, "properties": {"tags": tags}}));
    let reply = ctx.client.call(method, &path, PLATFORM_API, body.as_ref()).await?;
    ctx.out.print(&reply.body, TAG_COLUMNS)
}

/// `name=value` flags as a tags object; with `bare`, a `name` alone stands for any value.
fn pairs(tags: &[String], bare: bool) -> Result<Map<String, Value>, CliError> {
    tags.iter()
        .map(|t| match t.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_string(), Value::String(value.to_string()))),
            None if bare && !t.is_empty() => Ok((t.clone(), Value::String(String::new()))),
            _ => Err(CliError::Usage(format!("--tag {t}: expected NAME=VALUE"))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_may_name_a_tag_alone() {
        assert_eq!(Value::Object(pairs(&["env".into()], true).unwrap()), json!({"env": ""}));
        assert!(pairs(&["env".into()], false).is_err());
        assert_eq!(Value::Object(pairs(&["a=1".into()], false).unwrap()), json!({"a": "1"}));
    }
}
