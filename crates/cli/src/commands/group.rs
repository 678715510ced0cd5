//! `slipway group …`: a subscription's resource groups, read through ARM's own paths with the
//! platform api-version. A group exists while it holds a resource, so there is nothing to
//! create or delete yet: `list` and `show` only.

use clap::Subcommand;
use serde_json::Value;

use crate::Context;
use crate::client::{PLATFORM_API, segment};
use crate::error::CliError;
use crate::output::Column;

#[derive(Subcommand, Clone, Debug)]
pub enum GroupCommand {
    /// The subscription's resource groups the caller may read into.
    List,
    /// One resource group (the default one, `-g` or the profile's, without a name).
    Show { name: Option<String> },
}

const GROUP_COLUMNS: &[Column] =
    &[("NAME", "name"), ("LOCATION", "location"), ("STATE", "properties.provisioningState")];

pub async fn run(ctx: &Context, command: GroupCommand) -> Result<(), CliError> {
    let groups = format!("/subscriptions/{}/resourceGroups", segment(ctx.settings.subscription()?));
    let answer = match command {
        GroupCommand::List => Value::Array(ctx.client.list_all(&groups, PLATFORM_API).await?),
        GroupCommand::Show { name } => {
            let name = match name {
                Some(name) => name,
                None => ctx.settings.resource_group()?.to_string(),
            };
            ctx.client.get(&format!("{groups}/{}", segment(&name)), PLATFORM_API).await?
        }
    };
    ctx.out.print(&answer, GROUP_COLUMNS)
}
